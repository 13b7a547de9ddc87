//! Entering a network namespace.

use super::cvt;
use std::io;
use std::os::fd::AsRawFd;

/// Moves the calling thread into the network namespace `file` refers to
/// (e.g. `/run/netns/NAME`). Sockets created afterwards by this thread
/// belong to that namespace and keep it even when used from other threads.
pub(crate) fn enter(file: &std::fs::File) -> io::Result<()> {
    // SAFETY: setns(2) takes a descriptor and a flag; it changes only the
    // calling thread's namespace. The result is checked.
    cvt(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}
