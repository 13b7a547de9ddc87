//! poll(2) on a set of descriptors.

use super::cvt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Waits until one of `fds` is readable or `timeout_ms` passes (negative:
/// forever). Returns the readable ones' positions in `fds`.
pub(crate) fn poll_readable(fds: &[BorrowedFd<'_>], timeout_ms: i32) -> io::Result<Vec<usize>> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|f| libc::pollfd { fd: f.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    loop {
        // SAFETY: `p` is a valid array of p.len() pollfd the kernel writes
        // revents into during the call.
        match cvt(unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) }) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(p.iter().enumerate().filter(|(_, q)| q.revents & (libc::POLLIN | libc::POLLERR) != 0).map(|(i, _)| i).collect())
}
