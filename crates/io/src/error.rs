//! The crate's error: an operating-system error with the operation and the
//! object it concerned, so a log line says "AF_PACKET on eth1: setsockopt
//! PACKET_RX_RING: Cannot allocate memory" instead of a bare errno.

use std::fmt;
use std::io;

/// An I/O error with context.
#[derive(Debug)]
pub struct Error {
    what: String,
    source: io::Error,
}

impl Error {
    pub(crate) fn new(what: impl Into<String>, source: io::Error) -> Error {
        Error { what: what.into(), source }
    }

    /// An error that is not an OS error (bad argument, bad file format).
    pub(crate) fn invalid(what: impl Into<String>, why: impl Into<String>) -> Error {
        Error::new(what, io::Error::new(io::ErrorKind::InvalidInput, why.into()))
    }

    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }

    /// The errno, when the error came from a system call.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.raw_os_error()
    }

    /// What was being done when it failed.
    pub fn context(&self) -> &str {
        &self.what
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(e.source.kind(), e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Adds context to `io::Result`s.
pub(crate) trait Context<T> {
    fn context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T>;
}

impl<T> Context<T> for io::Result<T> {
    fn context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| Error::new(what(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_operation_and_keeps_errno() {
        let r: io::Result<()> = Err(io::Error::from_raw_os_error(libc::ENODEV));
        let e = r.context(|| "AF_PACKET on nosuch0: bind").unwrap_err();
        assert!(e.to_string().starts_with("AF_PACKET on nosuch0: bind: "), "{e}");
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV));
        let back: io::Error = e.into();
        assert!(back.to_string().contains("nosuch0"));
    }
}
