//! What Linux mode changes on a device tern takes over, and undoes.
//!
//! In standalone mode tern silences the kernel on its devices
//! (`tern_io::netdev::quiet_kernel`: no forwarding, no ARP answers, IPv6
//! off). In Linux mode the kernel keeps its addresses and answers for them
//! (ARP, ND, ping, BGP, OSPF, SSH): with AF_PACKET it sees every frame
//! anyway, so tern stays silent for local traffic (the nodes' `Params::
//! linux_owns_local`). What the kernel must not do is forward: transit
//! frames reach it too (they carry the device's MAC), and a second copy
//! would leave. So:
//!
//! * `ipv4/conf/DEV/forwarding = 0`: no IPv4 routing of what arrives there
//!   (and no ICMP errors for it).
//! * `ipv6/conf/DEV/disable_ipv6 = 0`: IPv6 stays on for ND, OSPFv3, BGP.
//! * `ipv6/conf/DEV/accept_ra = 0`: a router does not configure itself
//!   from router advertisements.
//! * `ipv4/conf/DEV/arp_accept = 2`, `ipv6/conf/DEV/accept_untracked_na =
//!   2`: answers to tern's own ARP/ND requests create kernel neighbour
//!   entries (same subnet only). With AF_XDP those answers reach only the
//!   kernel (ARP/ND pass to Linux in this mode); the kernel mirror then
//!   hands the neighbour to tern.
//! * `ipv6/conf/all/forwarding = 0` when it is 1: IPv6 forwarding is not a
//!   per-device switch in Linux (the `all` value decides for every input
//!   device; since Linux 6.17 `force_forwarding` can enable single devices
//!   again). This changes every device of the namespace; it is logged, and
//!   restored on exit. The driven devices then get `ipv6/conf/DEV/
//!   forwarding = 1` back, which no longer forwards but keeps them router
//!   interfaces for ND (RFC 9131: untracked NAs create entries only there).
//!
//! Every value is restored, in reverse order, when the guard is dropped.

use tern_io::netdev::{sysctl_read, sysctl_write};

/// Saved sysctl values, restored on drop.
#[derive(Debug, Default)]
pub struct SysctlGuard {
    pub what: String,
    /// The device, for a device's guard.
    pub dev: Option<String>,
    saved: Vec<(String, String)>,
}

impl SysctlGuard {
    fn set(&mut self, rel: &str, val: &str) -> Result<(), String> {
        let old = match sysctl_read(rel) {
            Ok(v) => v,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && rel.starts_with("ipv6/") => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        if old != val {
            sysctl_write(rel, val).map_err(|e| e.to_string())?;
            self.saved.push((rel.to_string(), old));
        }
        Ok(())
    }

    /// Leaves the settings in place.
    pub fn keep(mut self) {
        self.saved.clear();
    }

    /// How many settings this guard changed.
    pub fn changed(&self) -> usize {
        self.saved.len()
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        while let Some((rel, old)) = self.saved.pop() {
            if let Err(e) = sysctl_write(&rel, &old) {
                log::warn!("{}: restoring {rel} = {old}: {e}", self.what);
            }
        }
    }
}

/// Prepares `dev` for Linux mode (see the module documentation).
pub fn take_over(dev: &str) -> Result<SysctlGuard, String> {
    let mut g = SysctlGuard { what: format!("device {dev}"), dev: Some(dev.to_string()), saved: Vec::new() };
    g.set(&format!("ipv4/conf/{dev}/forwarding"), "0")?;
    g.set(&format!("ipv6/conf/{dev}/disable_ipv6"), "0")?;
    g.set(&format!("ipv6/conf/{dev}/accept_ra"), "0")?;
    // tern resolves next hops with its own ARP/ND requests; with AF_XDP
    // the answers go to the kernel, which must keep them (in the same
    // subnet only) so the kernel mirror can hand them to tern.
    g.set(&format!("ipv4/conf/{dev}/arp_accept"), "2")?;
    if g.set(&format!("ipv6/conf/{dev}/accept_untracked_na"), "2").is_err() {
        log::info!(
            "device {dev}: no accept_untracked_na (Linux < 5.18): tern learns IPv6 neighbours the kernel resolved itself only"
        );
    }
    Ok(g)
}

/// The TAP exception path: the kernel must not take the router's own
/// traffic from the driven device `dev` itself. Silenced as in standalone
/// mode it still would: its addresses are on the TAPs, and Linux accepts a
/// packet for any of its addresses on any device (the weak host model), so
/// a ping to the router arriving on `dev` would be answered twice (by
/// Linux from `dev`'s frame and from the copy tern punts into the TAP), a
/// BGP segment seen twice. Strict reverse-path filtering
/// (`ipv4/conf/DEV/rp_filter = 1`) drops every IPv4 packet there: `dev`
/// has no address and no route, so no source is reachable through it. The
/// effective value is the larger of `all` and the device's: with
/// `all/rp_filter = 2` (loose) the filter lets them through, which is
/// logged. (IPv6 is off on the device.)
pub fn no_local_delivery(dev: &str) -> Result<SysctlGuard, String> {
    let mut g = SysctlGuard { what: format!("device {dev}"), dev: None, saved: Vec::new() };
    g.set(&format!("ipv4/conf/{dev}/rp_filter"), "1")?;
    if sysctl_read("ipv4/conf/all/rp_filter").is_ok_and(|v| v == "2") {
        log::warn!(
            "device {dev}: net.ipv4.conf.all.rp_filter=2 (loose) overrides the strict filter tern sets: the kernel may answer the router's own IPv4 traffic arriving on {dev} besides the TAP (duplicate replies); set it to 0 or 1"
        );
    }
    Ok(g)
}

/// Stops kernel IPv6 forwarding in this namespace if it is on, then marks
/// the devices of `taken` as router interfaces again (per-device
/// `forwarding = 1` no longer forwards once `all` is 0, but keeps the
/// device a router for ND: RFC 9131 untracked NAs are accepted only there).
pub fn ipv6_forwarding_off(taken: &[SysctlGuard]) -> Result<SysctlGuard, String> {
    let mut g = SysctlGuard { what: "ipv6/conf/all".into(), dev: None, saved: Vec::new() };
    if sysctl_read("ipv6/conf/all/forwarding").is_ok_and(|v| v == "1") {
        log::warn!(
            "linux mode: turning kernel IPv6 forwarding off in this namespace (net.ipv6.conf.all.forwarding=0) so transit IPv6 is forwarded once, by tern; restored on exit"
        );
        g.set("ipv6/conf/all/forwarding", "0")?;
    }
    for t in taken {
        if let Some(dev) = &t.dev {
            g.set(&format!("ipv6/conf/{dev}/forwarding"), "1")?;
        }
    }
    Ok(g)
}

/// Linux mode with AF_XDP: the steering program passes packets for the
/// router's own addresses to the kernel (XDP_PASS), and those addresses
/// change at run time (`ip addr add`, seen by the kernel mirror). This
/// keeps the program's address set a superset of the interface table's:
/// new addresses are added as they appear. (Removed ones stay: traffic to
/// them then reaches the kernel, which drops what it no longer owns.)
#[derive(Debug, Default)]
pub struct LocalSteering {
    generation: Option<u64>,
    steered: std::collections::HashSet<std::net::IpAddr>,
}

impl LocalSteering {
    /// Calls `add` for every address of `ifaces` not steered yet; cheap
    /// when the table did not change.
    pub fn sync(
        &mut self,
        ifaces: &tern_rcu::Published<tern_nodes::state::IfTable>,
        mut add: impl FnMut(std::net::IpAddr),
    ) -> usize {
        let generation = ifaces.generation();
        if self.generation == Some(generation) {
            return 0;
        }
        self.generation = Some(generation);
        let t = ifaces.load();
        let mut n = 0;
        for i in &t.ifs {
            let addrs =
                i.v4.iter()
                    .map(|a| std::net::IpAddr::V4(a.addr))
                    .chain(i.v6.iter().map(|a| std::net::IpAddr::V6(a.addr)))
                    .chain(std::iter::once(std::net::IpAddr::V6(i.v6_ll)));
            for a in addrs {
                if self.steered.insert(a) {
                    add(a);
                    n += 1;
                }
            }
        }
        n
    }
}

/// `IFLA_CARRIER`.
const IFLA_CARRIER: u16 = 33;
/// `RTM_SETLINK`.
const RTM_SETLINK: u16 = 19;

/// Sets the carrier of TAP `tap` (the TAP exception path): off while the
/// device its interface stands for has no link, so that what runs on the
/// TAP sees the link go (a VRRP daemon enters its fault state as it
/// would on the device itself) and comes back with it.
pub fn set_tap_carrier(tap: &str, on: bool) -> std::io::Result<()> {
    let index = tern_io::netdev::ifindex(tap).map_err(|e| std::io::Error::other(e.to_string()))?;
    let sock = super::socket::NlSocket::open(0, 1 << 16)?;
    let mut b = super::nl::NlBuilder::new();
    b.begin(RTM_SETLINK, super::nl::NLM_F_REQUEST, 1);
    // struct ifinfomsg: family, pad, type, index, flags, change.
    b.bytes(&[0, 0, 0, 0]).bytes(&index.to_ne_bytes()).bytes(&0u32.to_ne_bytes()).bytes(&0u32.to_ne_bytes());
    b.attr(IFLA_CARRIER, &[u8::from(on)]);
    b.end();
    sock.send(&b.buf)
}
