//! Every unsafe block of the crate: system calls with pointer arguments, the
//! memory shared with the kernel through mmap'd packet rings, and ioctls.
//! Each function here offers a safe interface: arguments are plain Rust
//! values or slices, results are checked, and memory shared with the kernel
//! is only touched through bounds-checked copies and atomic status words.
#![allow(unsafe_code)]

pub(crate) mod ethtool;
pub(crate) mod ifaddrs;
pub(crate) mod ifreq;
pub(crate) mod netns;
pub(crate) mod poll;
pub(crate) mod ring;
pub(crate) mod socket;
pub(crate) mod tun;

use std::io;

/// Turns a `-1` return into the thread's errno.
fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}
