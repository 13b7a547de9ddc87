//! Interface ioctls (SIOCGIF*/SIOCSIF*) through a `struct ifreq`.

use super::cvt;
use super::socket::ioctl_socket;
use std::io;
use std::mem::zeroed;
use std::os::fd::AsRawFd;

/// A zeroed ifreq naming `name`. Refuses names the kernel could not hold
/// (empty, too long, or with a NUL or '/').
pub(crate) fn ifreq_named(name: &str) -> io::Result<libc::ifreq> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.iter().any(|&c| c == 0 || c == b'/' || c.is_ascii_whitespace()) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("invalid interface name {name:?}")));
    }
    // SAFETY: ifreq is a C struct of integers and a union of plain data; all
    // zero bytes is a valid value.
    let mut r: libc::ifreq = unsafe { zeroed() };
    for (d, &s) in r.ifr_name.iter_mut().zip(b) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

/// Runs one interface ioctl on a throwaway socket.
fn ioctl(req: libc::Ioctl, ifr: &mut libc::ifreq) -> io::Result<()> {
    let s = ioctl_socket()?;
    // SAFETY: `ifr` is a valid, writable ifreq for the duration of the call;
    // every request used here reads/writes only within struct ifreq.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), req, ifr as *mut libc::ifreq) }).map(drop)
}

pub(crate) fn index(name: &str) -> io::Result<u32> {
    let mut r = ifreq_named(name)?;
    ioctl(libc::SIOCGIFINDEX, &mut r)?;
    // SAFETY: SIOCGIFINDEX filled the ifindex member of the union.
    Ok(unsafe { r.ifr_ifru.ifru_ifindex } as u32)
}

/// Hardware address and its ARPHRD_* type.
pub(crate) fn hwaddr(name: &str) -> io::Result<([u8; 6], u16)> {
    let mut r = ifreq_named(name)?;
    ioctl(libc::SIOCGIFHWADDR, &mut r)?;
    // SAFETY: SIOCGIFHWADDR filled the hwaddr (sockaddr) member.
    let sa = unsafe { r.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, &s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = s as u8;
    }
    Ok((mac, sa.sa_family))
}

pub(crate) fn mtu(name: &str) -> io::Result<u32> {
    let mut r = ifreq_named(name)?;
    ioctl(libc::SIOCGIFMTU, &mut r)?;
    // SAFETY: SIOCGIFMTU filled the mtu member.
    Ok(unsafe { r.ifr_ifru.ifru_mtu } as u32)
}

pub(crate) fn set_mtu(name: &str, mtu: u32) -> io::Result<()> {
    let mut r = ifreq_named(name)?;
    r.ifr_ifru.ifru_mtu = i32::try_from(mtu).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    ioctl(libc::SIOCSIFMTU, &mut r)
}

/// Sets the Ethernet hardware address.
pub(crate) fn set_hwaddr(name: &str, mac: [u8; 6]) -> io::Result<()> {
    let mut r = ifreq_named(name)?;
    let mut sa = libc::sockaddr { sa_family: libc::ARPHRD_ETHER, sa_data: [0; 14] };
    for (d, &s) in sa.sa_data.iter_mut().zip(mac.iter()) {
        *d = s as libc::c_char;
    }
    r.ifr_ifru.ifru_hwaddr = sa;
    ioctl(libc::SIOCSIFHWADDR, &mut r)
}

/// The 16 interface flags SIOCGIFFLAGS reports (IFF_UP, IFF_RUNNING, ...).
pub(crate) fn flags(name: &str) -> io::Result<u16> {
    let mut r = ifreq_named(name)?;
    ioctl(libc::SIOCGIFFLAGS, &mut r)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member.
    Ok(unsafe { r.ifr_ifru.ifru_flags } as u16)
}

/// Sets `set` and clears `clear` among the interface flags.
pub(crate) fn change_flags(name: &str, set: u16, clear: u16) -> io::Result<()> {
    let mut r = ifreq_named(name)?;
    ioctl(libc::SIOCGIFFLAGS, &mut r)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member.
    let old = unsafe { r.ifr_ifru.ifru_flags } as u16;
    let new = (old | set) & !clear;
    if new == old {
        return Ok(());
    }
    r.ifr_ifru.ifru_flags = new as libc::c_short;
    ioctl(libc::SIOCSIFFLAGS, &mut r)
}
