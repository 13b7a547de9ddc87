//! Errors, sorted so that a caller can tell "AF_XDP cannot work here, fall
//! back to AF_PACKET" from "you asked for something wrong".

use std::fmt;
use std::io;

/// Why AF_XDP cannot be used on this machine or device. Every variant means
/// the caller should fall back to AF_PACKET and log the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// Missing privileges (CAP_NET_RAW/CAP_NET_ADMIN/CAP_BPF, or the
    /// locked-memory limit of kernels before 5.11).
    NoPermission,
    /// The kernel has no AF_XDP sockets or lacks a feature we need.
    KernelTooOld,
    /// The driver refuses what was asked (zero-copy, this queue, XDP at all).
    NoDriverSupport,
    /// The interface does not exist.
    NoSuchInterface,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unavailable::NoPermission => "no permission",
            Unavailable::KernelTooOld => "kernel too old",
            Unavailable::NoDriverSupport => "no driver support",
            Unavailable::NoSuchInterface => "no such interface",
        })
    }
}

#[derive(Debug)]
pub enum XdpError {
    /// AF_XDP cannot be used: fall back to AF_PACKET. `detail` says what
    /// failed and how to fix it.
    Unavailable { why: Unavailable, detail: String, source: Option<io::Error> },
    /// A bad configuration (ring size, frame size, queue count).
    Config(String),
    /// A system call failed for another reason.
    Io { what: String, source: io::Error },
    /// Loading, attaching or updating the XDP program failed.
    Program(String),
}

impl XdpError {
    /// True when the caller should fall back to another driver.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, XdpError::Unavailable { .. })
    }

    /// Classifies a failed system call: errnos that mean "not possible
    /// here" become [`XdpError::Unavailable`], the rest [`XdpError::Io`].
    pub(crate) fn from_errno(what: impl Into<String>, source: io::Error) -> XdpError {
        let what = what.into();
        let why = match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Some((
                Unavailable::NoPermission,
                "run as root or grant CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF (kernels before 5.11 also need a higher RLIMIT_MEMLOCK)",
            )),
            Some(libc::EAFNOSUPPORT) | Some(libc::ENOPROTOOPT) | Some(libc::ENOSYS) => Some((
                Unavailable::KernelTooOld,
                "the kernel lacks AF_XDP sockets (CONFIG_XDP_SOCKETS, Linux 5.4 or newer needed)",
            )),
            Some(libc::EOPNOTSUPP) => {
                Some((Unavailable::NoDriverSupport, "the driver does not support this AF_XDP mode"))
            }
            Some(libc::ENODEV) => Some((Unavailable::NoSuchInterface, "the interface is gone or down")),
            _ => None,
        };
        match why {
            Some((why, hint)) => XdpError::Unavailable { why, detail: format!("{what}: {hint}"), source: Some(source) },
            None => XdpError::Io { what, source },
        }
    }
}

impl fmt::Display for XdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XdpError::Unavailable { why, detail, source } => {
                write!(f, "AF_XDP unavailable ({why}): {detail}")?;
                if let Some(e) = source {
                    write!(f, " ({e})")?;
                }
                Ok(())
            }
            XdpError::Config(s) => write!(f, "bad AF_XDP configuration: {s}"),
            XdpError::Io { what, source } => write!(f, "{what}: {source}"),
            XdpError::Program(s) => write!(f, "XDP program: {s}"),
        }
    }
}

impl std::error::Error for XdpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            XdpError::Unavailable { source: Some(e), .. } | XdpError::Io { source: e, .. } => Some(e),
            _ => None,
        }
    }
}

/// The error of loading a BPF object: EPERM creating its maps means the
/// process lacks CAP_BPF (unavailable, so callers fall back); anything else
/// is a program error, prefixed with `who`.
pub(crate) fn object_load_error(who: &str, e: &aya::EbpfError) -> XdpError {
    let perm = matches!(e, aya::EbpfError::MapError(aya::maps::MapError::CreateError { io_error, .. })
        if matches!(io_error.raw_os_error(), Some(libc::EPERM)));
    if perm {
        XdpError::Unavailable {
            why: Unavailable::NoPermission,
            detail: "creating BPF maps needs CAP_BPF (or root)".into(),
            source: None,
        }
    } else {
        XdpError::Program(format!("{who}loading the BPF object: {e:?}"))
    }
}

/// The XDP program `name` of a loaded object.
pub(crate) fn xdp_program_mut<'a>(
    ebpf: &'a mut aya::Ebpf,
    who: &str,
    name: &str,
) -> Result<&'a mut aya::programs::Xdp, XdpError> {
    ebpf.program_mut(name)
        .ok_or_else(|| XdpError::Program(format!("{who}object: no program {name}")))?
        .try_into()
        .map_err(|e| XdpError::Program(format!("{who}program type: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_that_mean_fall_back_are_unavailable() {
        let e = XdpError::from_errno("socket(AF_XDP)", io::Error::from_raw_os_error(libc::EAFNOSUPPORT));
        assert!(e.is_unavailable());
        assert!(e.to_string().contains("kernel too old"), "{e}");
        let e = XdpError::from_errno("bind", io::Error::from_raw_os_error(libc::EPERM));
        assert!(matches!(e, XdpError::Unavailable { why: Unavailable::NoPermission, .. }));
        let e = XdpError::from_errno("bind", io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        assert!(matches!(e, XdpError::Unavailable { why: Unavailable::NoDriverSupport, .. }));
    }

    #[test]
    fn other_errnos_are_plain_io_errors() {
        let e = XdpError::from_errno("bind", io::Error::from_raw_os_error(libc::EBUSY));
        assert!(!e.is_unavailable());
        assert!(e.to_string().starts_with("bind:"), "{e}");
    }
}
