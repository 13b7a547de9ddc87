//! Offload settings through the legacy ethtool ioctl (SIOCETHTOOL with a
//! `struct ethtool_value`), which every Linux driver still answers.

use super::cvt;
use super::ifreq::ifreq_named;
use super::socket::ioctl_socket;
use std::io;
use std::os::fd::AsRawFd;

// linux/ethtool.h
pub(crate) const ETHTOOL_GTXCSUM: u32 = 0x16;
pub(crate) const ETHTOOL_STXCSUM: u32 = 0x17;
pub(crate) const ETHTOOL_GTSO: u32 = 0x1e;
pub(crate) const ETHTOOL_STSO: u32 = 0x1f;
pub(crate) const ETHTOOL_GGSO: u32 = 0x23;
pub(crate) const ETHTOOL_SGSO: u32 = 0x24;
pub(crate) const ETHTOOL_GFLAGS: u32 = 0x25;
pub(crate) const ETHTOOL_SFLAGS: u32 = 0x26;
pub(crate) const ETHTOOL_GGRO: u32 = 0x2b;
pub(crate) const ETHTOOL_SGRO: u32 = 0x2c;
pub(crate) const ETH_FLAG_LRO: u32 = 1 << 15;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// Runs one get/set command; returns the value's `data`.
pub(crate) fn value(name: &str, cmd: u32, data: u32) -> io::Result<u32> {
    let s = ioctl_socket()?;
    let mut v = EthtoolValue { cmd, data };
    let mut r = ifreq_named(name)?;
    r.ifr_ifru.ifru_data = (&mut v as *mut EthtoolValue).cast();
    // SAFETY: SIOCETHTOOL reads the ifreq and the command structure its
    // ifru_data points to; both live on this stack frame for the call, and
    // the legacy get/set commands used here read/write only an
    // ethtool_value (8 bytes).
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCETHTOOL, &mut r as *mut libc::ifreq) })?;
    Ok(v.data)
}

const ETHTOOL_GDRVINFO: u32 = 0x03;

/// `struct ethtool_drvinfo` (linux/ethtool.h), 196 bytes.
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// The name of the device's driver (`ethtool -i`): "veth", "virtio_net", ...
pub(crate) fn driver(name: &str) -> io::Result<String> {
    let s = ioctl_socket()?;
    let mut v = EthtoolDrvinfo {
        cmd: ETHTOOL_GDRVINFO,
        driver: [0; 32],
        version: [0; 32],
        fw_version: [0; 32],
        bus_info: [0; 32],
        erom_version: [0; 32],
        reserved2: [0; 12],
        n_priv_flags: 0,
        n_stats: 0,
        testinfo_len: 0,
        eedump_len: 0,
        regdump_len: 0,
    };
    let mut r = ifreq_named(name)?;
    r.ifr_ifru.ifru_data = (&mut v as *mut EthtoolDrvinfo).cast();
    // SAFETY: SIOCETHTOOL with ETHTOOL_GDRVINFO reads the ifreq and writes
    // one struct ethtool_drvinfo (196 bytes, the layout above) where
    // ifru_data points; both live on this stack frame for the call.
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCETHTOOL, &mut r as *mut libc::ifreq) })?;
    let end = v.driver.iter().position(|&b| b == 0).unwrap_or(v.driver.len());
    Ok(String::from_utf8_lossy(&v.driver[..end]).into_owned())
}
