//! TAP devices through /dev/net/tun.

use super::cvt;
use super::ifreq::ifreq_named;
use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// Opens (creating if needed) the TAP device `name` without packet
/// information headers, non-blocking; with `multi_queue`, one queue of a
/// multi-queue device (each open adds one). Returns the file and the name
/// the kernel gave the device (a pattern like `tap%d` is expanded).
pub(crate) fn open_tap(name: &str, multi_queue: bool) -> io::Result<(File, String)> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    let mut r = ifreq_named(name)?;
    let mq = if multi_queue { libc::IFF_MULTI_QUEUE } else { 0 };
    r.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI | mq) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes a struct ifreq, which `r` is, valid
    // and writable during the call.
    cvt(unsafe { libc::ioctl(f.as_raw_fd(), libc::TUNSETIFF, &mut r as *mut libc::ifreq) })?;
    // The kernel writes the final name, NUL-terminated within IFNAMSIZ.
    let bytes: Vec<u8> = r.ifr_name.iter().map(|&c| c as u8).collect();
    let actual = CStr::from_bytes_until_nul(&bytes)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| name.to_string());
    Ok((f, actual))
}
