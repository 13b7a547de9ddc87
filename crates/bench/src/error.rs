//! The one error type of the crate: every failure names what was being
//! done, so a user reading `tern-bench` output knows what to fix.

use std::fmt;

/// Why a benchmark (or one of its steps) failed.
#[derive(Debug)]
pub enum BenchError {
    /// The options do not describe a runnable benchmark.
    Config(String),
    /// An external command (`ip`, `nft`, `ethtool`, the DUT) failed.
    Command {
        /// The command line, for the user to rerun by hand.
        cmd: String,
        /// What it printed on stderr, or why it could not start.
        detail: String,
    },
    /// Loading, attaching or running an XDP program failed.
    Bpf(String),
    /// A file could not be read or written.
    Io {
        /// What was being done, with the path.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A device under test could not be started or stopped forwarding.
    Dut(String),
}

impl BenchError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        BenchError::Io { what: what.into(), source }
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Config(m) => write!(f, "invalid benchmark options: {m}"),
            BenchError::Command { cmd, detail } => write!(f, "command `{cmd}` failed: {detail}"),
            BenchError::Bpf(m) => write!(f, "XDP program: {m}"),
            BenchError::Io { what, source } => write!(f, "{what}: {source}"),
            BenchError::Dut(m) => write!(f, "device under test: {m}"),
        }
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BenchError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result alias for the crate.
pub type Result<T> = std::result::Result<T, BenchError>;
