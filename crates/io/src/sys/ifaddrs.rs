//! Addresses the kernel holds on an interface, via getifaddrs(3).

use std::ffi::CStr;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// (address, prefix length) of every IPv4 and IPv6 address on `ifname`.
pub(crate) fn addresses(ifname: &str) -> io::Result<Vec<(IpAddr, u8)>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into `head`; checked below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, valid
        // until freeifaddrs below.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() || ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) };
        if name.to_bytes() != ifname.as_bytes() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr whose family says which
        // larger struct it is; each cast below matches the family, and
        // ifa_netmask (when not null) has the same family.
        unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                    let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                    let plen = if ifa.ifa_netmask.is_null() {
                        32
                    } else {
                        u32::from_be((*ifa.ifa_netmask.cast::<libc::sockaddr_in>()).sin_addr.s_addr).count_ones() as u8
                    };
                    out.push((IpAddr::V4(ip), plen));
                }
                libc::AF_INET6 => {
                    let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in6>();
                    let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                    let plen = if ifa.ifa_netmask.is_null() {
                        128
                    } else {
                        let m = (*ifa.ifa_netmask.cast::<libc::sockaddr_in6>()).sin6_addr.s6_addr;
                        m.iter().map(|b| b.count_ones()).sum::<u32>() as u8
                    };
                    out.push((IpAddr::V6(ip), plen));
                }
                _ => {}
            }
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed exactly once; no
    // reference into the list survives (names/addresses were copied).
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}
