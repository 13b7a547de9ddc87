//! The kernel mirror: tern follows the Linux kernel's view of the devices
//! it drives, over rtnetlink, the way VPP's linux-cp does.
//!
//! * Links: kernel interface indexes of the driven devices are learned by
//!   name (a device recreated under a new index is followed); in Linux
//!   mode the administrative/carrier state and the MTU follow the kernel.
//! * Addresses: `ip addr add` on a driven device makes the address tern's
//!   (interface address, connected and local routes), `ip addr del`
//!   removes it. Addresses from tern's own configuration are never removed.
//! * Neighbours: entries the kernel has a link-layer address for
//!   (REACHABLE, STALE, DELAY, PROBE, PERMANENT, NOARP) are learned into
//!   tern's neighbour table. In Linux mode the kernel owns neighbour state:
//!   tern does not age its entries (the router skips its probing), a
//!   FAILED entry removes the MAC, a garbage-collected one is kept.
//! * VRRP macvlans (Linux mode): a macvlan on a driven device whose MAC is
//!   a VRRP virtual MAC (00:00:5e:00:01:xx, 00:00:5e:00:02:xx), as
//!   keepalived (`use_vmac`) and FRR's vrrpd create, makes that MAC one
//!   the device's interface accepts (`Iface::vmacs`, owner `Kernel`)
//!   while it is up and not protodown; its addresses (the virtual
//!   addresses) are the router's own, on that interface.
//! * Routes and next-hop objects of the main table, as source `kernel`
//!   (see [`super::sync`] for what is installed and what is counted).
//!
//! Start and overrun: everything is dumped (links, addresses, neighbours,
//! next-hop objects, routes), one dump at a time; the routes dump is
//! bracketed by `begin_resync`/`end_resync` so any `kernel` route the
//! kernel no longer has is swept. An ENOBUFS on the socket (the kernel
//! dropped notifications because tern fell behind) or an interrupted dump
//! (NLM_F_DUMP_INTR) restarts the whole sequence: no stale route survives.
//!
//! Work per `poll` is bounded by a time budget; a full table streams over
//! many polls without stalling the control loop.

use super::nl::{self, AddrMsg, LinkMsg, NeighMsg, NlBuilder, NlMessages};
use super::socket::{NlSocket, Recv};
use super::sync::{IfMap, RouteSync, SyncCounters};
use crate::source::{ControlSource, SourceCx};
use serde::Serialize;
use std::collections::HashSet;
use std::net::IpAddr;
use tern_fib::{FibError, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
use tern_nodes::state::{IfTable, V4Net, V6Net, VmacOwner, is_link_local, is_vrrp_mac};

/// Knobs of the mirror.
#[derive(Clone, Debug)]
pub struct KernelConfig {
    /// Linux owns local traffic: follow link state and MTU, push the
    /// configured addresses into the kernel.
    pub linux_mode: bool,
    pub table: u32,
    /// Route protocols (rtm_protocol) left to another source (FRR's, when
    /// FPM brings them).
    pub skip_protocols: Vec<u8>,
    pub rcvbuf: usize,
    pub budget_ns: u64,
    pub batch: usize,
}

pub use crate::source::Driven;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelCounters {
    pub messages: u64,
    pub dumps: u64,
    /// ENOBUFS: notifications lost, full resync.
    pub overruns: u64,
    pub dumps_interrupted: u64,
    pub resyncs: u64,
    /// Routes removed by resyncs.
    pub swept: u64,
    pub links: u64,
    pub addrs_added: u64,
    pub addrs_removed: u64,
    pub neigh_learned: u64,
    /// Linux mode: neighbours the kernel failed to resolve, removed.
    pub neigh_failed: u64,
    /// Linux mode: VRRP macvlans on driven devices now, and those whose
    /// virtual MAC is accepted (up, not protodown).
    pub vrrp_macvlans: u64,
    pub vrrp_macvlans_active: u64,
    pub neigh_ignored: u64,
    pub del_unknown: u64,
    pub fib_errors: u64,
    /// Kernel error replies to tern's own requests (address pushes).
    pub request_errors: u64,
    /// Nanoseconds of the last full dump (request to sweep).
    pub last_sync_ns: u64,
    pub synced: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelStatus {
    pub kernel: KernelCounters,
    pub routes: SyncCounters,
    pub devices: usize,
}

const DUMPS: [u16; 5] = [nl::RTM_GETLINK, nl::RTM_GETADDR, nl::RTM_GETNEIGH, nl::RTM_GETNEXTHOP, nl::RTM_GETROUTE];
/// The step where the route part (next-hop objects, then routes) begins.
const ROUTE_DUMPS: usize = 3;

/// A VRRP daemon's macvlan on a driven device (keepalived's `use_vmac`,
/// FRR vrrpd's): the tern interface of its lower device, its virtual
/// MAC, and whether that MAC is accepted now (up and not protodown).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Macvlan {
    tern: u16,
    mac: [u8; 6],
    active: bool,
}

pub struct KernelMirror {
    cfg: KernelConfig,
    sock: NlSocket,
    driven: Vec<Driven>,
    ifs: IfMap,
    sync: RouteSync,
    /// Next dump to request (index into DUMPS), the one in flight (seq),
    /// whether it was interrupted.
    next_dump: Option<usize>,
    in_flight: Option<(usize, u32)>,
    interrupted: bool,
    /// Dump again from this step once the dump in flight ends (an overrun:
    /// from the start; an address or link change the kernel follows with
    /// silent route flushes: the routes).
    want_resync: Option<usize>,
    /// When the dump in flight was requested or last answered.
    in_flight_ns: u64,
    sync_started_ns: u64,
    seq: u32,
    /// Addresses this mirror added: (tern interface, address, length).
    learned: HashSet<(u16, IpAddr, u8)>,
    /// Addresses seen during the current address dump (for the sweep).
    seen_addrs: Option<HashSet<(u16, IpAddr, u8)>>,
    /// Last known up state of each kernel device seen.
    link_up: std::collections::HashMap<u32, bool>,
    /// Linux mode: the VRRP macvlans on driven devices, by kernel index.
    macvlans: std::collections::HashMap<u32, Macvlan>,
    ops: Vec<RouteOp>,
    buf: Vec<u8>,
    counters: KernelCounters,
}

fn groups() -> u32 {
    nl::RTMGRP_LINK
        | nl::RTMGRP_NEIGH
        | nl::RTMGRP_IPV4_IFADDR
        | nl::RTMGRP_IPV6_IFADDR
        | nl::RTMGRP_IPV4_ROUTE
        | nl::RTMGRP_IPV6_ROUTE
        | nl::RTMGRP_NEXTHOP
}

/// Routes an interface address implies: the connected subnet, the
/// address itself, and (IPv4 below /31) the directed broadcast, dropped.
pub fn address_routes(tern: u16, addr: IpAddr, len: u8, add: bool) -> Vec<RouteOp> {
    let mut v = Vec::new();
    let mut push = |s: Source, p: Option<Prefix>, t: RouteTarget| {
        if let Some(p) = p {
            v.push(if add { RouteOp::Add(s, p, t, RouteAttrs::default()) } else { RouteOp::Del(s, p) });
        }
    };
    push(Source::Connected, Prefix::new_truncated(addr, len), RouteTarget::Connected { ifindex: tern });
    push(Source::Local, Some(Prefix::host(addr)), RouteTarget::Local { ifindex: tern });
    if let IpAddr::V4(a) = addr
        && let Some(b) = (V4Net { addr: a, len }).broadcast()
    {
        push(Source::Local, Some(Prefix::host(IpAddr::V4(b))), RouteTarget::Blackhole);
    }
    v
}

impl KernelMirror {
    pub fn open(cfg: KernelConfig, driven: Vec<Driven>) -> std::io::Result<KernelMirror> {
        let sock = NlSocket::open(groups(), cfg.rcvbuf)?;
        let mut sync = RouteSync::new(Source::Kernel, cfg.table, true);
        sync.set_skip_protocols(cfg.skip_protocols.clone());
        let mut m = KernelMirror {
            cfg,
            sock,
            driven,
            ifs: IfMap::default(),
            sync,
            next_dump: Some(0),
            in_flight: None,
            interrupted: false,
            want_resync: None,
            in_flight_ns: 0,
            sync_started_ns: 0,
            seq: 1,
            learned: HashSet::new(),
            seen_addrs: None,
            link_up: std::collections::HashMap::new(),
            macvlans: std::collections::HashMap::new(),
            ops: Vec::new(),
            buf: vec![0; 1 << 20],
            counters: KernelCounters::default(),
        };
        // Resolve the devices now, so the first routes already map.
        for d in &m.driven {
            if let Ok(k) = tern_io::netdev::ifindex(&d.device) {
                m.ifs.insert(k, d.tern);
            }
        }
        if m.cfg.linux_mode {
            m.push_config_addresses();
        }
        Ok(m)
    }

    pub fn status(&self) -> KernelStatus {
        KernelStatus { kernel: self.counters.clone(), routes: self.sync.counters.clone(), devices: self.ifs.len() }
    }

    pub fn if_map(&self) -> &IfMap {
        &self.ifs
    }

    /// True once the first full dump has been applied.
    pub fn synced(&self) -> bool {
        self.counters.synced
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1).max(1);
        self.seq
    }

    /// In Linux mode the kernel owns addresses: the ones tern's
    /// configuration names are added to the kernel (idempotent).
    fn push_config_addresses(&mut self) {
        let mut b = NlBuilder::new();
        let mut n = 0;
        for d in &self.driven {
            let Some(k) = self.ifs.kernel_of(d.tern) else { continue };
            for a in &d.v4 {
                n += 1;
                b.address(nl::RTM_NEWADDR, self.seq.wrapping_add(n), k, IpAddr::V4(a.addr), a.len);
            }
            for a in &d.v6 {
                n += 1;
                b.address(nl::RTM_NEWADDR, self.seq.wrapping_add(n), k, IpAddr::V6(a.addr), a.len);
            }
        }
        self.seq = self.seq.wrapping_add(n);
        if n > 0
            && let Err(e) = self.sock.send(&b.buf)
        {
            log::warn!("kernel: cannot add the configured addresses to the kernel: {e}");
        }
    }

    /// Asks for the dumps from step `from` on, after the one in flight.
    fn schedule_resync(&mut self, from: usize) {
        self.want_resync = Some(self.want_resync.map_or(from, |w| w.min(from)));
    }

    fn request_next_dump(&mut self, cx: &mut SourceCx<'_>) {
        if self.in_flight.is_some() {
            // A dump whose end never came (it should not happen; never
            // wait forever on it).
            if cx.now_ns.saturating_sub(self.in_flight_ns) < 5_000_000_000 {
                return;
            }
            log::warn!("kernel: dump {:?} unanswered for 5 s; asking again", self.in_flight);
            self.in_flight = None;
        }
        if let Some(from) = self.want_resync.take() {
            self.next_dump = Some(self.next_dump.map_or(from, |n| n.min(from)));
            self.interrupted = false;
            self.sync_started_ns = cx.now_ns;
        }
        let Some(i) = self.next_dump else { return };
        let Some(&ty) = DUMPS.get(i) else { return };
        if i == 0 {
            self.sync_started_ns = cx.now_ns;
        }
        if ty == nl::RTM_GETADDR {
            self.seen_addrs = Some(HashSet::new());
        }
        if ty == nl::RTM_GETNEXTHOP {
            // Everything the dumps bring is authoritative from here on.
            self.flush(cx);
            cx.fib.begin_resync(Source::Kernel);
            self.sync.clear();
        }
        let seq = self.next_seq();
        let mut b = NlBuilder::new();
        b.dump_request(ty, seq);
        match self.sock.send(&b.buf) {
            Ok(()) => {
                self.in_flight = Some((i, seq));
                self.in_flight_ns = cx.now_ns;
                self.counters.dumps += 1;
            }
            Err(e) => log::warn!("kernel: dump request failed: {e}"),
        }
    }

    /// A dump finished (NLMSG_DONE, or an error for a family the kernel
    /// lacks, e.g. next-hop objects before Linux 5.3).
    fn dump_done(&mut self, cx: &mut SourceCx<'_>, ifs: &mut Option<IfTable>) {
        let Some((i, _)) = self.in_flight.take() else { return };
        if self.want_resync.is_some() {
            // Superseded: request_next_dump starts over.
            self.interrupted = false;
            return;
        }
        if self.interrupted {
            self.interrupted = false;
            self.counters.dumps_interrupted += 1;
            log::info!("kernel: dump interrupted by a change; dumping again");
            self.next_dump = Some(i);
            return;
        }
        if DUMPS.get(i) == Some(&nl::RTM_GETADDR)
            && let Some(seen) = self.seen_addrs.take()
        {
            let gone: Vec<_> = self.learned.iter().filter(|k| !seen.contains(k)).copied().collect();
            for (t, a, l) in gone {
                self.del_address(t, a, l, cx, ifs);
            }
        }
        if i + 1 < DUMPS.len() {
            self.next_dump = Some(i + 1);
            return;
        }
        self.next_dump = None;
        self.flush(cx);
        let swept = cx.fib.end_resync(Source::Kernel);
        self.counters.swept += swept as u64;
        self.counters.resyncs += 1;
        self.counters.last_sync_ns = tern_engine::clock::now_ns().saturating_sub(self.sync_started_ns);
        self.counters.synced = true;
        log::info!(
            "kernel: synchronised in {:.1} ms ({} routes installed, {swept} stale removed)",
            self.counters.last_sync_ns as f64 / 1e6,
            self.sync.counters.adds
        );
    }

    fn driven_by_name(&self, name: &str) -> Option<&Driven> {
        self.driven.iter().find(|d| d.device == name)
    }

    fn link(&mut self, new: bool, payload: &[u8], cx: &mut SourceCx<'_>, ifs: &mut Option<IfTable>) -> bool {
        let Ok(l) = LinkMsg::parse(payload) else {
            self.sync.counters.malformed += 1;
            return false;
        };
        self.counters.links += 1;
        let by_name = l.name.and_then(|n| self.driven_by_name(n)).map(|d| d.tern);
        let tern = by_name.or_else(|| self.ifs.get(l.index));
        let Some(tern) = tern else { return self.macvlan(new, &l, cx, ifs) };
        if !new {
            self.ifs.remove_kernel(l.index);
            if self.cfg.linux_mode {
                self.set_link(tern, false, None, cx, ifs);
            }
            return true;
        }
        if by_name.is_some() && self.ifs.get(l.index) != Some(tern) {
            self.ifs.insert(l.index, tern);
            // A device (re)appeared: its routes and addresses may have
            // arrived before the mapping did.
            self.schedule_resync(1);
        }
        let up = l.is_up();
        if self.link_up.insert(l.index, up).is_some_and(|was| was != up) {
            // The kernel flushes (or marks) routes through a device that
            // goes down without telling anyone: dump them again.
            self.schedule_resync(ROUTE_DUMPS);
        }
        if self.cfg.linux_mode {
            self.set_link(tern, l.is_up(), l.mtu, cx, ifs);
        }
        true
    }

    /// A link that is no driven device: a VRRP macvlan on one is
    /// followed (Linux mode), anything else ignored. Returns whether
    /// anything changed.
    fn macvlan(&mut self, new: bool, l: &LinkMsg<'_>, cx: &mut SourceCx<'_>, ifs: &mut Option<IfTable>) -> bool {
        if !self.cfg.linux_mode {
            return false;
        }
        let lower = l.link.filter(|&k| k != l.index).and_then(|k| self.ifs.get(k));
        let mac = l.mac.filter(is_vrrp_mac);
        let want = match (new, lower, mac, l.kind) {
            (true, Some(tern), Some(mac), Some("macvlan")) => {
                Some(Macvlan { tern, mac, active: l.is_up() && !l.proto_down })
            }
            _ => None,
        };
        let old = self.macvlans.get(&l.index).cloned();
        if old == want {
            return false;
        }
        let name = l.name.unwrap_or("?");
        match &want {
            Some(m) => {
                if old.is_none() {
                    // The kernel must not forward what arrives on it
                    // (tern does); a fresh device takes `default`'s value.
                    if let Some(n) = l.name.filter(|n| !n.contains('/') && !n.starts_with('.')) {
                        let path = format!("/proc/sys/net/ipv4/conf/{n}/forwarding");
                        if let Err(e) = std::fs::write(&path, "0") {
                            log::warn!("kernel: VRRP macvlan {n}: cannot turn forwarding off: {e}");
                        }
                    }
                }
                self.macvlans.insert(l.index, m.clone());
                log::info!(
                    "kernel: VRRP macvlan {name} on interface {} with virtual MAC {}: {}",
                    m.tern,
                    crate::neighbor::fmt_mac(m.mac),
                    if m.active { "accepted" } else { "not accepted (down or protodown)" }
                );
            }
            None => {
                self.macvlans.remove(&l.index);
                log::info!("kernel: VRRP macvlan {name} gone (or no longer one)");
            }
        }
        for t in [old.map(|m| m.tern), want.map(|m| m.tern)].into_iter().flatten() {
            self.sync_vmacs(t, cx, ifs);
        }
        self.counters.vrrp_macvlans = self.macvlans.len() as u64;
        self.counters.vrrp_macvlans_active = self.macvlans.values().filter(|m| m.active).count() as u64;
        true
    }

    /// Interface `tern` accepts the virtual MACs of its active macvlans.
    fn sync_vmacs(&mut self, tern: u16, cx: &mut SourceCx<'_>, ifs: &mut Option<IfTable>) {
        let macs: Vec<[u8; 6]> = self.macvlans.values().filter(|m| m.tern == tern && m.active).map(|m| m.mac).collect();
        let pending = ifs.as_ref().and_then(|t| t.get(tern)).or_else(|| cx.ifs.get(tern));
        let Some(cur) = pending else { return };
        let mut have: Vec<[u8; 6]> = cur.vmacs.iter().filter(|v| v.owner == VmacOwner::Kernel).map(|v| v.mac).collect();
        let mut want = macs.clone();
        have.sort_unstable();
        want.sort_unstable();
        want.dedup();
        if have == want {
            return;
        }
        let t = ifs.get_or_insert_with(|| (*cx.ifs).clone());
        t.set_vmacs(tern, VmacOwner::Kernel, &macs);
    }

    /// The tern interface of kernel device `index`: a driven device's,
    /// or the lower device's of a VRRP macvlan on one.
    fn tern_of(&self, index: u32) -> Option<u16> {
        self.ifs.get(index).or_else(|| self.macvlans.get(&index).map(|m| m.tern))
    }

    fn set_link(&mut self, tern: u16, up: bool, mtu: Option<u32>, cx: &mut SourceCx<'_>, ifs: &mut Option<IfTable>) {
        let Some(cur) = cx.ifs.get(tern) else { return };
        let pending = ifs.as_ref().and_then(|t| t.get(tern));
        let (was_up, was_mtu) = pending.map_or((cur.up, cur.mtu), |i| (i.up, i.mtu));
        let mtu = mtu.map_or(was_mtu, |m| u16::try_from(m.clamp(68, 9216)).unwrap_or(was_mtu));
        if was_up == up && was_mtu == mtu {
            return;
        }
        let t = ifs.get_or_insert_with(|| (*cx.ifs).clone());
        if let Some(i) = t.ifs.get_mut(usize::from(tern)) {
            i.up = up;
            i.mtu = mtu;
        }
        if was_up && !up {
            cx.neigh.flush_interface(tern, cx.fib);
        }
    }

    fn address(&mut self, new: bool, payload: &[u8], cx: &mut SourceCx<'_>, ifs: &mut Option<IfTable>) -> bool {
        let Ok(a) = AddrMsg::parse(payload) else {
            self.sync.counters.malformed += 1;
            return false;
        };
        let Some(tern) = self.tern_of(a.index) else { return false };
        if let IpAddr::V6(v6) = a.addr
            && is_link_local(v6)
        {
            if self.ifs.get(a.index).is_none() {
                // A macvlan's own link-local is not the interface's.
                return false;
            }
            // The kernel's link-local (it may not be the EUI-64 one) is the
            // one neighbours know this router by.
            if new && self.cfg.linux_mode {
                let t = ifs.get_or_insert_with(|| (*cx.ifs).clone());
                if let Some(i) = t.ifs.get_mut(usize::from(tern))
                    && i.v6_ll != v6
                {
                    i.v6_ll = v6;
                }
            }
            return true;
        }
        let key = (tern, a.addr, a.prefix_len);
        if new {
            if a.flags & nl::IFA_F_DADFAILED != 0 {
                return false;
            }
            if let Some(seen) = &mut self.seen_addrs {
                seen.insert(key);
            }
            self.add_address(tern, a.addr, a.prefix_len, cx, ifs)
        } else {
            // Removing an address makes the kernel flush routes through it
            // silently (IPv4 sends no RTM_DELROUTE for them).
            self.schedule_resync(ROUTE_DUMPS);
            self.del_address(tern, a.addr, a.prefix_len, cx, ifs)
        }
    }

    fn configured(&self, tern: u16, addr: IpAddr) -> bool {
        self.driven.iter().filter(|d| d.tern == tern).any(|d| match addr {
            IpAddr::V4(a) => d.v4.iter().any(|n| n.addr == a),
            IpAddr::V6(a) => d.v6.iter().any(|n| n.addr == a),
        })
    }

    fn add_address(
        &mut self,
        tern: u16,
        addr: IpAddr,
        len: u8,
        cx: &mut SourceCx<'_>,
        ifs: &mut Option<IfTable>,
    ) -> bool {
        if self.learned.contains(&(tern, addr, len)) || self.configured(tern, addr) {
            return false;
        }
        let t = ifs.get_or_insert_with(|| (*cx.ifs).clone());
        let Some(i) = t.ifs.get_mut(usize::from(tern)) else { return false };
        match addr {
            IpAddr::V4(a) => {
                i.v4.retain(|n| n.addr != a);
                i.v4.push(V4Net { addr: a, len });
            }
            IpAddr::V6(a) => {
                i.v6.retain(|n| n.addr != a);
                i.v6.push(V6Net { addr: a, len });
            }
        }
        self.learned.retain(|k| !(k.0 == tern && k.1 == addr));
        self.learned.insert((tern, addr, len));
        self.ops.extend(address_routes(tern, addr, len, true));
        self.counters.addrs_added += 1;
        true
    }

    fn del_address(
        &mut self,
        tern: u16,
        addr: IpAddr,
        len: u8,
        cx: &mut SourceCx<'_>,
        ifs: &mut Option<IfTable>,
    ) -> bool {
        if !self.learned.remove(&(tern, addr, len)) {
            return false;
        }
        let t = ifs.get_or_insert_with(|| (*cx.ifs).clone());
        let Some(i) = t.ifs.get_mut(usize::from(tern)) else { return false };
        let net = Prefix::new_truncated(addr, len);
        // The subnet stays connected while another address covers it.
        let still = match addr {
            IpAddr::V4(a) => {
                i.v4.retain(|n| n.addr != a);
                i.v4.iter().any(|n| Prefix::new_truncated(IpAddr::V4(n.addr), n.len) == net)
            }
            IpAddr::V6(a) => {
                i.v6.retain(|n| n.addr != a);
                i.v6.iter().any(|n| Prefix::new_truncated(IpAddr::V6(n.addr), n.len) == net)
            }
        };
        for op in address_routes(tern, addr, len, false) {
            if still && matches!(op, RouteOp::Del(Source::Connected, _)) {
                continue;
            }
            self.ops.push(op);
        }
        self.counters.addrs_removed += 1;
        true
    }

    fn neighbour(&mut self, new: bool, payload: &[u8], cx: &mut SourceCx<'_>) -> bool {
        let Ok(n) = NeighMsg::parse(payload) else {
            self.sync.counters.malformed += 1;
            return false;
        };
        let (Some(tern), Some(ip)) = (self.ifs.get(n.index), n.dst) else { return false };
        // Any state with a link-layer address: REACHABLE, PERMANENT, NOARP,
        // and STALE/DELAY/PROBE (the kernel re-confirms those itself, and
        // answers to tern's own probes land there under AF_XDP).
        let confirmed = n.state & (nl::NUD_INCOMPLETE | nl::NUD_FAILED) == 0 && n.state != 0;
        match n.lladdr {
            Some(mac) if new && confirmed && mac[0] & 1 == 0 && mac != [0; 6] => {
                self.counters.neigh_learned += 1;
                // The routes must exist before the neighbour's host route.
                self.flush(cx);
                let changed = cx.neigh.learn(tern, ip, mac, true, cx.now_ns, cx.fib);
                if self.cfg.linux_mode && !changed {
                    // The kernel owns neighbours here: make sure the FIB
                    // has this one even if tern's table thought so (it is
                    // idempotent).
                    cx.fib.set_neighbor(tern, ip, Some(mac));
                }
                true
            }
            _ if self.cfg.linux_mode && new && n.state & nl::NUD_FAILED != 0 => {
                // The kernel could not resolve it: neither can tern.
                self.counters.neigh_failed += 1;
                cx.fib.set_neighbor(tern, ip, None);
                true
            }
            _ => {
                // Unresolved or deleted (garbage-collected while tern may
                // still forward to it) in the kernel: tern keeps what it has.
                self.counters.neigh_ignored += 1;
                false
            }
        }
    }

    fn flush(&mut self, cx: &mut SourceCx<'_>) {
        if self.ops.is_empty() {
            return;
        }
        let ops = std::mem::take(&mut self.ops);
        let dels: Vec<bool> = ops.iter().map(|o| matches!(o, RouteOp::Del(..))).collect();
        let n = ops.len();
        let rep = cx.fib.apply(ops);
        for (i, e) in &rep.errors {
            if matches!(e, FibError::NotFound { .. }) && dels.get(*i).copied().unwrap_or(false) {
                self.counters.del_unknown += 1;
                continue;
            }
            self.counters.fib_errors += 1;
            if self.counters.fib_errors <= 10 || self.counters.fib_errors.is_power_of_two() {
                log::warn!("kernel: route {} of a batch of {n} refused: {e}", i + 1);
            }
        }
        self.ops = Vec::with_capacity(n.min(self.cfg.batch));
    }

    /// Handles one datagram. Returns true if anything changed.
    fn datagram(&mut self, len: usize, cx: &mut SourceCx<'_>, ifs: &mut Option<IfTable>) -> bool {
        let buf = std::mem::take(&mut self.buf);
        let mut changed = false;
        for m in NlMessages::new(&buf[..len.min(buf.len())]) {
            let Ok(m) = m else {
                self.sync.counters.malformed += 1;
                break;
            };
            self.counters.messages += 1;
            let ours = self.in_flight.is_some_and(|(_, seq)| seq == m.seq) && m.seq != 0;
            if ours && m.flags & nl::NLM_F_DUMP_INTR != 0 {
                self.interrupted = true;
            }
            match m.ty {
                nl::NLMSG_DONE if ours => self.dump_done(cx, ifs),
                nl::NLMSG_ERROR => {
                    let code = m.error_code().unwrap_or(0);
                    if ours && code == -16 {
                        // EBUSY: an abandoned dump still runs; ask again.
                        self.in_flight = None;
                    } else if ours {
                        // A dump the kernel does not support (no next-hop
                        // objects on old kernels): skip it.
                        log::debug!("kernel: dump error {code}");
                        self.dump_done(cx, ifs);
                    } else if code != 0 {
                        self.counters.request_errors += 1;
                        log::warn!("kernel: request {} failed: {}", m.seq, std::io::Error::from_raw_os_error(-code));
                    }
                }
                nl::RTM_NEWLINK | nl::RTM_DELLINK => changed |= self.link(m.ty == nl::RTM_NEWLINK, m.payload, cx, ifs),
                nl::RTM_NEWADDR | nl::RTM_DELADDR => {
                    changed |= self.address(m.ty == nl::RTM_NEWADDR, m.payload, cx, ifs)
                }
                nl::RTM_NEWNEIGH | nl::RTM_DELNEIGH => {
                    changed |= self.neighbour(m.ty == nl::RTM_NEWNEIGH, m.payload, cx)
                }
                nl::RTM_NEWROUTE | nl::RTM_DELROUTE => {
                    let before = self.ops.len();
                    self.sync.route(m.ty == nl::RTM_NEWROUTE, m.payload, &self.ifs, &mut self.ops);
                    changed |= self.ops.len() != before;
                }
                nl::RTM_NEWNEXTHOP | nl::RTM_DELNEXTHOP => {
                    let before = self.ops.len();
                    self.sync.nexthop(m.ty == nl::RTM_NEWNEXTHOP, m.payload, &self.ifs, &mut self.ops);
                    changed |= self.ops.len() != before;
                }
                _ => {}
            }
            if self.ops.len() >= self.cfg.batch {
                self.flush(cx);
            }
        }
        self.buf = buf;
        changed
    }
}

impl ControlSource for KernelMirror {
    fn name(&self) -> &str {
        "kernel"
    }

    fn poll(&mut self, cx: &mut SourceCx<'_>) -> bool {
        let start = cx.now_ns;
        let mut ifs: Option<IfTable> = None;
        let mut did = false;
        self.request_next_dump(cx);
        loop {
            let mut buf = std::mem::take(&mut self.buf);
            let r = self.sock.recv(&mut buf);
            self.buf = buf;
            match r {
                Ok(Recv::Data(n)) => {
                    did = true;
                    self.datagram(n, cx, &mut ifs);
                    self.request_next_dump(cx);
                }
                Ok(Recv::Empty) => break,
                Ok(Recv::Overrun) => {
                    self.counters.overruns += 1;
                    log::warn!("kernel: netlink overrun (tern fell behind); resynchronising");
                    self.flush(cx);
                    self.schedule_resync(0);
                    self.request_next_dump(cx);
                    did = true;
                }
                Err(e) => {
                    log::warn!("kernel: netlink receive: {e}");
                    break;
                }
            }
            if tern_engine::clock::now_ns().saturating_sub(start) > self.cfg.budget_ns {
                break;
            }
        }
        self.flush(cx);
        if let Some(t) = ifs {
            cx.ifaces.publish(t);
            did = true;
        }
        did
    }

    fn status(&self) -> serde_json::Value {
        serde_json::to_value(self.status()).unwrap_or_default()
    }

    fn route_counters(&self) -> Option<SyncCounters> {
        Some(self.sync.counters.clone())
    }

    /// Maps the new devices and dumps everything again: the links,
    /// addresses, neighbours and routes of an added device become tern's,
    /// and those of a removed one are swept (mark and sweep).
    fn set_driven(&mut self, driven: Vec<Driven>) {
        let mut ifs = IfMap::default();
        for d in &driven {
            if let Ok(k) = tern_io::netdev::ifindex(&d.device) {
                ifs.insert(k, d.tern);
            }
        }
        self.driven = driven;
        self.ifs = ifs;
        if self.cfg.linux_mode {
            self.push_config_addresses();
        }
        self.schedule_resync(0);
    }
}
