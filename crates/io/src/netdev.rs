//! Linux network device helpers: what tern needs to know about and set on
//! an interface it takes over.
//!
//! Everything goes through interface ioctls on a socket of the calling
//! thread's network namespace, `/proc/sys/net` and getifaddrs(3): no
//! netlink. (`/sys/class/net` is read only for the operational state: it
//! shows the namespace sysfs was mounted in, which `ip netns exec` keeps
//! right but a bare setns(2) does not.)
//!
//! Taking an interface over: AF_PACKET sees every frame before the kernel's
//! own protocol handlers, but the kernel still handles those frames too. So
//! on an interface tern forwards for, the kernel must neither forward nor
//! answer: [`quiet_kernel`] turns off IPv4 forwarding on it, stops ARP
//! replies from it, and disables IPv6 on it (no forwarding, no neighbour
//! discovery answers, no autoconfiguration), and restores the previous
//! settings when the returned guard is dropped. [`addresses`] lists the
//! addresses the kernel still holds there, so tern can warn about them.

use std::fs;
use std::io;
use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};

use crate::error::{Context, Error, Result};
use crate::sys;

/// ARPHRD_ETHER: the interface carries Ethernet frames.
pub const ARPHRD_ETHER: u16 = 1;
/// ARPHRD_LOOPBACK: loopback (Ethernet framing with zero addresses).
pub const ARPHRD_LOOPBACK: u16 = 772;

/// Interface index of `name`.
pub fn ifindex(name: &str) -> Result<u32> {
    sys::ifreq::index(name).context(|| format!("interface {name}: get index"))
}

/// MAC address of `name`.
pub fn mac(name: &str) -> Result<[u8; 6]> {
    sys::ifreq::hwaddr(name).map(|(m, _)| m).context(|| format!("interface {name}: get MAC address"))
}

/// Sets the MAC address of `name` (an Ethernet device; most drivers want
/// it down, a TAP device takes it up or down).
pub fn set_mac(name: &str, mac: [u8; 6]) -> Result<()> {
    sys::ifreq::set_hwaddr(name, mac).context(|| format!("interface {name}: set MAC address"))
}

/// Link type of `name` (ARPHRD_*: [`ARPHRD_ETHER`], [`ARPHRD_LOOPBACK`], ...).
pub fn link_type(name: &str) -> Result<u16> {
    sys::ifreq::hwaddr(name).map(|(_, t)| t).context(|| format!("interface {name}: get link type"))
}

/// MTU of `name` (L3 payload bytes, the Ethernet header not included).
pub fn mtu(name: &str) -> Result<u32> {
    sys::ifreq::mtu(name).context(|| format!("interface {name}: get MTU"))
}

pub fn set_mtu(name: &str, mtu: u32) -> Result<()> {
    sys::ifreq::set_mtu(name, mtu).context(|| format!("interface {name}: set MTU {mtu}"))
}

/// Administrative and operational flags of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkFlags {
    /// Administratively up (`ip link set up`).
    pub up: bool,
    /// Operationally up: running and carrier present (IFF_RUNNING).
    pub running: bool,
    /// Promiscuous as set by the administrator ([`set_promisc`]); packet
    /// socket memberships raise a separate count that this does not show.
    pub promisc: bool,
    /// All-multicast as set by the administrator (same remark).
    pub allmulti: bool,
    pub loopback: bool,
}

pub fn flags(name: &str) -> Result<LinkFlags> {
    let f = sys::ifreq::flags(name).context(|| format!("interface {name}: get flags"))?;
    let has = |b: libc::c_int| f & (b as u16) != 0;
    Ok(LinkFlags {
        up: has(libc::IFF_UP),
        running: has(libc::IFF_RUNNING),
        promisc: has(libc::IFF_PROMISC),
        allmulti: has(libc::IFF_ALLMULTI),
        loopback: has(libc::IFF_LOOPBACK),
    })
}

/// Sets the interface administratively up or down.
pub fn set_up(name: &str, up: bool) -> Result<()> {
    let b = libc::IFF_UP as u16;
    let (set, clear) = if up { (b, 0) } else { (0, b) };
    sys::ifreq::change_flags(name, set, clear)
        .context(|| format!("interface {name}: set {}", if up { "up" } else { "down" }))
}

/// Sets the interface's promiscuous flag. (An [`AfPacketPort`] with
/// `promisc` set instead takes a reference-counted membership that ends with
/// the socket; prefer that.)
///
/// [`AfPacketPort`]: crate::AfPacketPort
pub fn set_promisc(name: &str, on: bool) -> Result<()> {
    let b = libc::IFF_PROMISC as u16;
    let (set, clear) = if on { (b, 0) } else { (0, b) };
    sys::ifreq::change_flags(name, set, clear).context(|| format!("interface {name}: set promiscuous {on}"))
}

/// Offloads that change the frames a packet socket sees or sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offload {
    /// Generic receive offload: the kernel merges TCP segments into
    /// frames far larger than the MTU before packet sockets see them.
    Gro,
    /// Large receive offload (the NIC merges; same effect as GRO).
    Lro,
    /// TCP segmentation offload: the local stack hands the device (and a
    /// veth hands its peer) frames larger than the MTU.
    Tso,
    /// Generic segmentation offload (the software fallback of TSO).
    Gso,
    /// Transmit checksum offload: locally sent frames leave with their
    /// transport checksum unfinished across a veth.
    TxChecksum,
}

impl Offload {
    fn cmds(self) -> (u32, u32) {
        use crate::sys::ethtool::*;
        match self {
            Offload::Gro => (ETHTOOL_GGRO, ETHTOOL_SGRO),
            Offload::Lro => (ETHTOOL_GFLAGS, ETHTOOL_SFLAGS),
            Offload::Tso => (ETHTOOL_GTSO, ETHTOOL_STSO),
            Offload::Gso => (ETHTOOL_GGSO, ETHTOOL_SGSO),
            Offload::TxChecksum => (ETHTOOL_GTXCSUM, ETHTOOL_STXCSUM),
        }
    }
}

/// Whether `offload` is on for `name`.
/// The name of the device's driver, as `ethtool -i` prints it ("veth", ...).
pub fn driver(name: &str) -> Result<String> {
    crate::sys::ethtool::driver(name).context(|| format!("interface {name}: driver info"))
}

pub fn offload(name: &str, offload: Offload) -> Result<bool> {
    let (get, _) = offload.cmds();
    let v = crate::sys::ethtool::value(name, get, 0).context(|| format!("interface {name}: get {offload:?}"))?;
    Ok(match offload {
        Offload::Lro => v & crate::sys::ethtool::ETH_FLAG_LRO != 0,
        _ => v != 0,
    })
}

/// Turns `offload` on or off for `name`. Turning off something the
/// device does not support succeeds when it is already off.
pub fn set_offload(name: &str, offload: Offload, on: bool) -> Result<()> {
    use crate::sys::ethtool::{ETH_FLAG_LRO, value};
    let (get, set) = offload.cmds();
    let what = || format!("interface {name}: set {offload:?} {}", if on { "on" } else { "off" });
    let data = match offload {
        Offload::Lro => {
            let flags = value(name, get, 0).context(what)?;
            if on { flags | ETH_FLAG_LRO } else { flags & !ETH_FLAG_LRO }
        }
        _ => u32::from(on),
    };
    match value(name, set, data) {
        Ok(_) => Ok(()),
        // Devices without an offload may refuse to set it, even to off.
        Err(_) if !on && matches!(self::offload(name, offload), Ok(false)) => Ok(()),
        Err(e) => Err(Error::new(what(), e)),
    }
}

/// Turns off every offload that makes frames larger than the MTU (GRO,
/// LRO, TSO, GSO) on an interface tern takes over, so AF_PACKET sees and
/// sends wire-sized frames. Returns the first failure after trying all.
pub fn disable_large_frame_offloads(name: &str) -> Result<()> {
    let mut first = Ok(());
    for o in [Offload::Gro, Offload::Lro, Offload::Tso, Offload::Gso] {
        if let Err(e) = set_offload(name, o, false)
            && first.is_ok()
        {
            first = Err(e);
        }
    }
    first
}

/// RFC 2863 operational state as the kernel reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperState {
    Up,
    Down,
    LowerLayerDown,
    Dormant,
    Testing,
    NotPresent,
    Unknown,
}

/// Operational state from `/sys/class/net/NAME/operstate`.
pub fn operstate(name: &str) -> Result<OperState> {
    check_name(name)?;
    let path = format!("/sys/class/net/{name}/operstate");
    let s = fs::read_to_string(&path).context(|| format!("interface {name}: read {path}"))?;
    Ok(match s.trim() {
        "up" => OperState::Up,
        "down" => OperState::Down,
        "lowerlayerdown" => OperState::LowerLayerDown,
        "dormant" => OperState::Dormant,
        "testing" => OperState::Testing,
        "notpresent" => OperState::NotPresent,
        _ => OperState::Unknown,
    })
}

/// An address the kernel holds on an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfAddr {
    pub addr: IpAddr,
    pub prefix_len: u8,
}

/// IPv4 and IPv6 addresses the kernel holds on `name` (IPv6 link-local
/// included).
pub fn addresses(name: &str) -> Result<Vec<IfAddr>> {
    check_name(name)?;
    let v = sys::ifaddrs::addresses(name).context(|| format!("interface {name}: list addresses"))?;
    Ok(v.into_iter().map(|(addr, prefix_len)| IfAddr { addr, prefix_len }).collect())
}

fn check_name(name: &str) -> Result<()> {
    sys::ifreq::ifreq_named(name).map(drop).context(|| "interface name")
}

/// The file of a setting under `/proc/sys/net`, from a path relative to it
/// (`ipv4/conf/eth0/forwarding`). Absolute paths and `..` are refused so a
/// configured name cannot reach other files. (Slashes, not dots, separate
/// the parts: interface names such as `eth0.100` contain dots.)
fn sysctl_path(rel: &str) -> Result<PathBuf> {
    let p = Path::new(rel);
    if rel.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(Error::invalid(format!("sysctl net/{rel}"), "expected a relative path below /proc/sys/net"));
    }
    Ok(Path::new("/proc/sys/net").join(p))
}

/// Reads `/proc/sys/net/<rel>`, trimmed.
pub fn sysctl_read(rel: &str) -> Result<String> {
    let p = sysctl_path(rel)?;
    fs::read_to_string(&p).map(|s| s.trim().to_string()).context(|| format!("read {}", p.display()))
}

/// Writes `value` to `/proc/sys/net/<rel>`.
pub fn sysctl_write(rel: &str, value: &str) -> Result<()> {
    let p = sysctl_path(rel)?;
    fs::write(&p, value).context(|| format!("write {value:?} to {}", p.display()))
}

/// Settings changed by [`quiet_kernel`], restored when dropped (unless
/// [`KernelQuiet::keep`] is called).
#[derive(Debug)]
#[must_use = "dropping the guard restores the kernel's settings at once"]
pub struct KernelQuiet {
    ifname: String,
    /// (relative sysctl path, previous value), in the order they were set.
    saved: Vec<(String, String)>,
}

impl KernelQuiet {
    /// The interface the guard is for.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Leaves the settings in place after the guard is dropped.
    pub fn keep(mut self) {
        self.saved.clear();
    }

    /// Restores the previous settings now, reporting the first failure.
    pub fn restore(mut self) -> Result<()> {
        self.restore_inner()
    }

    fn restore_inner(&mut self) -> Result<()> {
        let mut first = Ok(());
        // Undo in reverse order of application.
        while let Some((rel, old)) = self.saved.pop() {
            if let Err(e) = sysctl_write(&rel, &old)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }
}

impl Drop for KernelQuiet {
    fn drop(&mut self) {
        let _ = self.restore_inner();
    }
}

/// Stops the kernel from forwarding or answering on `ifname`, which tern
/// has taken over:
///
/// * `ipv4/conf/IF/forwarding = 0`: the kernel does not route IPv4 arriving
///   there (and sends no ICMP errors for it: `ip_error` stays silent when
///   the input device does not forward).
/// * `ipv4/conf/IF/arp_ignore = 8`: it answers no ARP request there.
/// * `ipv6/conf/IF/disable_ipv6 = 1`: it ignores IPv6 there entirely (no
///   forwarding, neighbour discovery, router advertisements or SLAAC).
///
/// AF_PACKET still receives every frame. Settings that do not exist on
/// this kernel (IPv6 compiled out) are skipped; any other failure restores
/// what was already changed and is returned.
pub fn quiet_kernel(ifname: &str) -> Result<KernelQuiet> {
    check_name(ifname)?;
    let mut g = KernelQuiet { ifname: ifname.to_string(), saved: Vec::new() };
    let settings = [
        (format!("ipv4/conf/{ifname}/forwarding"), "0"),
        (format!("ipv4/conf/{ifname}/arp_ignore"), "8"),
        (format!("ipv6/conf/{ifname}/disable_ipv6"), "1"),
    ];
    for (rel, val) in settings {
        let old = match sysctl_read(&rel) {
            Ok(v) => v,
            Err(e) if e.kind() == io::ErrorKind::NotFound && rel.starts_with("ipv6/") => continue,
            Err(e) => return Err(e), // `g` restores on drop
        };
        if old != val {
            sysctl_write(&rel, val)?;
            g.saved.push((rel, old));
        }
    }
    Ok(g)
}

/// Moves the calling thread into the network namespace `name` (a name
/// under `/run/netns`, as `ip netns add` creates, or a path such as
/// `/proc/PID/ns/net`). Sockets this thread creates afterwards belong to
/// that namespace for their whole life, whichever thread uses them.
pub fn enter_netns(name: &str) -> Result<()> {
    let path = if name.contains('/') { PathBuf::from(name) } else { Path::new("/run/netns").join(name) };
    let f = fs::File::open(&path).context(|| format!("open network namespace {}", path.display()))?;
    sys::netns::enter(&f).context(|| format!("enter network namespace {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_known() {
        assert_eq!(ifindex("lo").expect("lo"), 1);
        assert_eq!(link_type("lo").expect("lo"), ARPHRD_LOOPBACK);
        assert_eq!(mac("lo").expect("lo"), [0; 6]);
        assert!(mtu("lo").expect("lo") >= 1500);
        let f = flags("lo").expect("lo");
        assert!(f.loopback);
        // Loopback has no carrier notion: the kernel reports "unknown".
        if std::path::Path::new("/sys/class/net/lo").exists() {
            assert_eq!(operstate("lo").expect("lo"), OperState::Unknown);
        }
    }

    #[test]
    fn missing_interface_is_a_clear_error() {
        let e = ifindex("tio-nosuch0").expect_err("no such device");
        assert!(e.to_string().contains("tio-nosuch0"), "{e}");
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV));
    }

    #[test]
    fn bad_names_are_refused_before_any_syscall() {
        for bad in ["", "a/b", "waytoolonginterfacename", "sp ace", "nul\0"] {
            let e = ifindex(bad).expect_err(bad);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        assert!(operstate("../../etc").is_err());
    }

    #[test]
    fn sysctl_paths_stay_below_proc_sys_net() {
        assert_eq!(
            sysctl_path("ipv4/conf/eth0.100/forwarding").expect("ok"),
            Path::new("/proc/sys/net/ipv4/conf/eth0.100/forwarding")
        );
        for bad in ["", "/etc/passwd", "../kernel/hostname", "ipv4/../../kernel", "./ipv4"] {
            assert!(sysctl_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sysctl_reads_a_known_setting() {
        let v = sysctl_read("ipv4/conf/lo/forwarding").expect("readable");
        assert!(v == "0" || v == "1", "{v}");
    }

    #[test]
    fn loopback_has_its_addresses() {
        let a = addresses("lo").expect("lo");
        assert!(a.iter().any(|x| x.addr == IpAddr::from([127, 0, 0, 1]) && x.prefix_len == 8), "{a:?}");
    }
}
