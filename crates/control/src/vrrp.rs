//! tern's own VRRPv3 (RFC 5798, standalone mode): the `[[vrrp]]` groups'
//! state machines ([`tern_vrrp::Machine`]) driven on the control thread.
//!
//! - **Receiving.** `ip4-input`/`ip6-input` send IP protocol 112 to
//!   224.0.0.18 / ff02::12 to `ip4-local`/`ip6-local`, which hand the
//!   packet to the control thread's queue (`Shared::control_rx`); each
//!   [`VrrpService::poll`] drains it, reads the IP header (source,
//!   destination, TTL/hop limit) and gives the message to the group of its
//!   interface, family and VRID, which validates it (RFC 5798 7.1: every
//!   drop counted by reason).
//! - **Timers.** The machines' deadlines bound the control loop's pause
//!   ([`VrrpService::next_deadline`]), so a 10 ms interval is kept to
//!   about a millisecond.
//! - **Sending.** Advertisements, gratuitous ARP and unsolicited NAs are
//!   whole frames from the virtual MAC handed to `control-inject`.
//! - **Master.** While master a group's virtual MAC is accepted on its
//!   interface (`Interfaces::set_vmacs`), its virtual addresses are
//!   answered (ARP, NS) with that MAC (`Params::virtual_addrs`) and, for
//!   the owner or in accept mode, are the router's own (local routes);
//!   a backup gives all of it back. Each transition is logged and runs
//!   the group's `notify` command.
//! - **Tracking.** Each tracked interface down and each tracked prefix
//!   without a route lowers the priority by `track_decrement`.

use crate::config::VrrpGroup;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use tern_fib::{FibWriter, Prefix, RouteAttrs, RouteTarget, Source};
use tern_nodes::state::{IfTable, Iface, Inject, Punted, VirtualAddr, VmacOwner};
use tern_vrrp::{Action, Config, DropReason, Family, Machine, State};
use tern_wire::{IpProtocol, checksum};

/// One group and its machine.
struct Group {
    g: VrrpGroup,
    vmac: [u8; 6],
    /// Built once the interface has a source address (IPv4: its first
    /// address; IPv6: its link-local one).
    m: Option<Machine>,
    /// The state last logged and notified (transitions happen in
    /// `handle_advert` and `poll`; they are reported in one place).
    reported: State,
}

/// A group's state for `tern vrrp show`, the API and /metrics.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VrrpInfo {
    /// "IFACE/VRID/ipv4".
    pub group: String,
    pub interface: String,
    pub vrid: u8,
    pub family: String,
    pub state: String,
    /// 0 initialize, 1 backup, 2 master.
    pub state_code: u8,
    /// In effect (tracking lowers it).
    pub priority: u8,
    pub configured_priority: u8,
    pub interval_ms: u64,
    /// The master's interval as learnt from its advertisements.
    pub master_interval_ms: u64,
    pub master: Option<String>,
    pub primary: Option<String>,
    pub virtual_mac: String,
    pub addresses: Vec<String>,
    pub preempt: bool,
    pub accept_mode: bool,
    pub adverts_rx: u64,
    pub adverts_tx: u64,
    pub transitions: u64,
    pub became_master: u64,
    pub priority_zero_rx: u64,
    /// Drops by reason (every reason, zero or not).
    pub drops: Vec<(String, u64)>,
}

/// The `[[vrrp]]` groups on the control thread.
#[derive(Default)]
pub struct VrrpService {
    groups: Vec<Group>,
    /// Virtual addresses published to the nodes.
    published: Vec<VirtualAddr>,
    /// Local routes installed for virtual addresses.
    routes: BTreeSet<(u16, IpAddr)>,
    /// Virtual MACs accepted, by interface.
    vmacs: Vec<(u16, [u8; 6])>,
    /// Advertisements that reached no group (no group of that interface,
    /// family and VRID) or whose IP header could not be read.
    pub unmatched: u64,
    pub malformed: u64,
    notify: Vec<Child>,
    /// Shutting down: groups are not started again.
    stopping: bool,
    /// The `[[vrrp]]` section running (a reload that changes it
    /// reconciles the groups).
    config: Vec<crate::config::VrrpCfg>,
}

/// What the service asks of the router after a poll.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    /// The virtual addresses the nodes answer for (Some: changed).
    pub virtual_addrs: Option<Vec<VirtualAddr>>,
    /// The virtual MACs accepted per interface (Some: changed).
    pub vmacs: Option<Vec<(u16, [u8; 6])>>,
}

/// What a group's machine reads from the router.
pub struct Env<'a> {
    pub ifs: &'a IfTable,
    pub fib: &'a mut FibWriter,
    pub inject: &'a mut dyn FnMut(Inject),
}

impl VrrpService {
    pub fn new(config: Vec<crate::config::VrrpCfg>, groups: Vec<VrrpGroup>) -> VrrpService {
        let groups = groups
            .into_iter()
            .map(|g| Group { vmac: tern_vrrp::virtual_mac(g.family, g.vrid), g, m: None, reported: State::Initialize })
            .collect();
        VrrpService { groups, config, ..VrrpService::default() }
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The `[[vrrp]]` section the groups came from.
    pub fn config(&self) -> &[crate::config::VrrpCfg] {
        &self.config
    }

    /// A reload changed `[[vrrp]]` to `config` (whose groups are
    /// `groups`): groups that stay as they were keep running, removed or
    /// changed ones shut down (a master sends priority 0), new ones start
    /// at the next poll.
    pub fn reconcile(
        &mut self,
        config: Vec<crate::config::VrrpCfg>,
        groups: Vec<VrrpGroup>,
        now: Instant,
        env: &mut Env<'_>,
    ) -> Changes {
        let (keep, gone): (Vec<Group>, Vec<Group>) =
            std::mem::take(&mut self.groups).into_iter().partition(|g| groups.contains(&g.g));
        self.groups = gone;
        for g in &mut self.groups {
            if let Some(m) = g.m.as_mut() {
                m.shutdown(now);
            }
        }
        self.stopping = true;
        for i in 0..self.groups.len() {
            self.run_group(i, now, env);
        }
        self.stopping = false;
        for g in &self.groups {
            log::info!("vrrp {}: removed by a reload", g.g.name());
        }
        self.groups = keep;
        for g in groups {
            if !self.groups.iter().any(|k| k.g == g) {
                log::info!("vrrp {}: added by a reload", g.name());
                self.groups.push(Group {
                    vmac: tern_vrrp::virtual_mac(g.family, g.vrid),
                    g,
                    m: None,
                    reported: State::Initialize,
                });
            }
        }
        self.config = config;
        self.publish(env)
    }

    /// The interfaces groups run on.
    pub fn interfaces(&self) -> Vec<u16> {
        let mut v: Vec<u16> = self.groups.iter().map(|g| g.g.ifindex).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The virtual MACs interface `ifindex` accepts now (its master
    /// groups').
    pub fn vmacs_of(&self, ifindex: u16) -> Vec<[u8; 6]> {
        self.vmacs.iter().filter(|(i, _)| *i == ifindex).map(|(_, m)| *m).collect()
    }

    /// When the next timer is due (None: no group is running).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.groups.iter().filter_map(|g| g.m.as_ref()?.next_deadline()).min()
    }

    /// Receives what the workers punted, starts and stops groups with
    /// their interfaces, applies tracking, fires due timers and carries
    /// out their actions. Returns whether it received or changed state, and what the
    /// router must publish.
    pub fn poll(&mut self, now: Instant, rx: &mut dyn FnMut() -> Option<Punted>, env: &mut Env<'_>) -> (bool, Changes) {
        let mut did = false;
        // Machines for groups whose interface has its source address now.
        for g in &mut self.groups {
            if g.m.is_none()
                && let Some(primary) = env.ifs.get(g.g.ifindex).and_then(|i| primary_of(i, g.g.family))
            {
                match Machine::new(machine_config(&g.g, primary)) {
                    Ok(m) => g.m = Some(m),
                    Err(e) => log::error!("vrrp {}: {e}", g.g.name()),
                }
            }
        }
        while let Some(p) = rx() {
            did = true;
            self.receive(now, &p);
        }
        for i in 0..self.groups.len() {
            did |= self.run_group(i, now, env);
        }
        self.notify.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_)) | Err(_)));
        (did, self.publish(env))
    }

    fn receive(&mut self, now: Instant, p: &Punted) {
        let Some((src, dst, ttl, msg)) = ip_parts(&p.packet) else {
            self.malformed += 1;
            return;
        };
        let fam = Family::of(&src);
        let vrid = msg.get(1).copied();
        let Some(g) = self
            .groups
            .iter_mut()
            .find(|g| g.g.ifindex == p.ifindex && g.g.family == fam && Some(g.g.vrid) == vrid && g.m.is_some())
        else {
            self.unmatched += 1;
            return;
        };
        let name = g.g.name();
        if let Some(m) = g.m.as_mut()
            && let Err(r) = m.handle_advert(now, src, dst, ttl, msg)
        {
            log::debug!("vrrp {name}: advertisement from {src} dropped: {r}");
        }
    }

    /// One group: start/stop with its interface, tracking, timers.
    /// Returns whether its state changed (its timers' routine
    /// advertisements do not count: the control loop's pause already
    /// ends at [`VrrpService::next_deadline`], and counting them would
    /// keep an idle router's control loop in its short pauses).
    fn run_group(&mut self, i: usize, now: Instant, env: &mut Env<'_>) -> bool {
        let Some(g) = self.groups.get_mut(i) else { return false };
        let Some(m) = g.m.as_mut() else { return false };
        let up = env.ifs.get(g.g.ifindex).is_some_and(|f| f.up);
        let down_ifaces = g.g.track_ifaces.iter().filter(|&&t| !env.ifs.get(t).is_some_and(|f| f.up)).count();
        let gone_routes =
            g.g.track_routes.iter().filter(|&&p| !Source::ALL.iter().any(|&s| env.fib.has_route(s, p))).count();
        let penalty = (down_ifaces + gone_routes) as u16 * u16::from(g.g.track_decrement);
        m.set_penalty(penalty);
        let before = g.reported;
        if up && m.state() == State::Initialize && !self.stopping {
            m.startup(now);
        } else if !up && m.state() != State::Initialize {
            m.shutdown(now);
        }
        if m.next_deadline().is_none_or(|d| d > now) && m.state() == before {
            return false;
        }
        let actions = m.poll(now);
        let after = m.state();
        g.reported = after;
        let Some(iface) = env.ifs.get(g.g.ifindex) else { return after != before };
        for a in &actions {
            match a {
                Action::SendAdvert(msg) => {
                    if let Some(frame) = advert_frame(iface, g.vmac, m.config().primary, msg) {
                        (env.inject)(Inject { ifindex: g.g.ifindex, frame });
                    }
                }
                Action::BecameMaster => {
                    for a in &g.g.addrs {
                        if let Some(frame) = announce_frame(iface, g.vmac, *a) {
                            (env.inject)(Inject { ifindex: g.g.ifindex, frame });
                        }
                    }
                }
                Action::BecameBackup | Action::Stopped => {}
            }
        }
        if after != before {
            let name = g.g.name();
            log::info!(
                "vrrp {name}: {before} -> {after} (priority {}, master {})",
                m.priority(),
                m.master().map_or_else(|| "none".to_string(), |a| a.to_string())
            );
            if let Some(cmd) = &g.g.notify {
                let fam = if g.g.family == Family::V4 { "ipv4" } else { "ipv6" };
                match Command::new("sh")
                    .arg("-c")
                    .arg(cmd)
                    .arg("tern-vrrp-notify")
                    .args([g.g.iface.as_str(), &g.g.vrid.to_string(), fam, before.name(), after.name()])
                    .spawn()
                {
                    Ok(c) => self.notify.push(c),
                    Err(e) => log::warn!("vrrp {name}: notify command: {e}"),
                }
            }
        }
        after != before
    }

    /// Brings the virtual addresses, local routes and virtual MACs in line
    /// with the groups' states.
    fn publish(&mut self, env: &mut Env<'_>) -> Changes {
        let mut addrs = Vec::new();
        let mut routes = BTreeSet::new();
        let mut vmacs = Vec::new();
        for g in &self.groups {
            let Some(m) = &g.m else { continue };
            if m.state() != State::Master {
                continue;
            }
            vmacs.push((g.g.ifindex, g.vmac));
            let own = env.ifs.get(g.g.ifindex);
            for &a in &g.g.addrs {
                addrs.push(VirtualAddr { ifindex: g.g.ifindex, addr: a, mac: g.vmac });
                let owned = own.is_some_and(|f| match a {
                    IpAddr::V4(a) => f.v4.iter().any(|n| n.addr == a),
                    IpAddr::V6(a) => f.v6.iter().any(|n| n.addr == a) || f.v6_ll == a,
                });
                let ll = matches!(a, IpAddr::V6(v) if v.is_unicast_link_local());
                if m.accepts_addresses() && !owned && !ll {
                    routes.insert((g.g.ifindex, a));
                }
            }
        }
        for &(ifindex, a) in self.routes.difference(&routes) {
            if let Err(e) = env.fib.del_route(Source::Local, host_prefix(a)) {
                log::warn!("vrrp: removing the local route of {a} (interface {ifindex}): {e}");
            }
        }
        for &(ifindex, a) in routes.difference(&self.routes) {
            let t = RouteTarget::Local { ifindex };
            if let Err(e) = env.fib.add_route(Source::Local, host_prefix(a), t, RouteAttrs::default()) {
                log::warn!("vrrp: adding a local route for {a}: {e}");
            }
        }
        self.routes = routes;
        let mut out = Changes::default();
        if addrs != self.published {
            self.published = addrs.clone();
            out.virtual_addrs = Some(addrs);
        }
        if vmacs != self.vmacs {
            self.vmacs = vmacs.clone();
            out.vmacs = Some(vmacs);
        }
        out
    }

    /// Shuts every group down (a master sends its priority-0
    /// advertisement so a backup takes over at once) and gives back what
    /// masters held.
    pub fn shutdown(&mut self, now: Instant, env: &mut Env<'_>) -> Changes {
        self.stopping = true;
        for g in &mut self.groups {
            if let Some(m) = g.m.as_mut() {
                m.shutdown(now);
            }
        }
        for i in 0..self.groups.len() {
            self.run_group(i, now, env);
        }
        self.publish(env)
    }

    pub fn show(&self) -> Vec<VrrpInfo> {
        self.groups
            .iter()
            .map(|g| {
                let m = g.m.as_ref();
                let st = m.map(|m| m.stats().clone()).unwrap_or_default();
                let state = m.map_or(State::Initialize, Machine::state);
                VrrpInfo {
                    group: g.g.name(),
                    interface: g.g.iface.clone(),
                    vrid: g.g.vrid,
                    family: if g.g.family == Family::V4 { "ipv4".into() } else { "ipv6".into() },
                    state: state.name().into(),
                    state_code: state.code(),
                    priority: m.map_or(g.g.priority, Machine::priority),
                    configured_priority: g.g.priority,
                    interval_ms: u64::from(g.g.interval_cs) * 10,
                    master_interval_ms: m
                        .map_or(u64::from(g.g.interval_cs) * 10, |m| m.master_adver_interval().as_millis() as u64),
                    master: m.and_then(Machine::master).map(|a| a.to_string()),
                    primary: m.map(|m| m.config().primary.to_string()),
                    virtual_mac: crate::neighbor::fmt_mac(g.vmac),
                    addresses: g.g.addrs.iter().map(ToString::to_string).collect(),
                    preempt: g.g.preempt,
                    accept_mode: g.g.accept_mode,
                    adverts_rx: st.adverts_rx,
                    adverts_tx: st.adverts_tx,
                    transitions: st.transitions,
                    became_master: st.became_master,
                    priority_zero_rx: st.priority_zero_rx,
                    drops: DropReason::ALL.iter().map(|r| (r.name().to_string(), st.drops[r.index()])).collect(),
                }
            })
            .collect()
    }
}

fn machine_config(g: &VrrpGroup, primary: IpAddr) -> Config {
    Config {
        vrid: g.vrid,
        priority: g.priority,
        interval_cs: g.interval_cs,
        addrs: g.addrs.clone(),
        primary,
        preempt: g.preempt,
        preempt_delay: Duration::from_millis(u64::from(g.preempt_delay_ms)),
        accept_mode: g.accept_mode,
    }
}

/// The address a group's advertisements come from: the interface's first
/// IPv4 address, or its link-local IPv6 address.
fn primary_of(iface: &Iface, family: Family) -> Option<IpAddr> {
    match family {
        Family::V4 => iface.v4.first().map(|n| IpAddr::V4(n.addr)),
        Family::V6 => Some(IpAddr::V6(iface.v6_ll)),
    }
}

fn host_prefix(a: IpAddr) -> Prefix {
    match a {
        IpAddr::V4(addr) => Prefix::V4 { addr, len: 32 },
        IpAddr::V6(addr) => Prefix::V6 { addr, len: 128 },
    }
}

/// Source, destination, TTL/hop limit and the VRRP message of an IP
/// packet carrying protocol 112 (no IPv6 extension headers: RFC 5798
/// sends none).
fn ip_parts(p: &[u8]) -> Option<(IpAddr, IpAddr, u8, &[u8])> {
    match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p.first()? & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*p.get(2)?, *p.get(3)?]));
            if ihl < 20 || *p.get(9)? != tern_vrrp::PROTO || total < ihl {
                return None;
            }
            let a = |o: usize| -> Option<IpAddr> {
                let b: [u8; 4] = p.get(o..o + 4)?.try_into().ok()?;
                Some(IpAddr::V4(Ipv4Addr::from(b)))
            };
            Some((a(12)?, a(16)?, *p.get(8)?, p.get(ihl..total.min(p.len()))?))
        }
        6 => {
            if *p.get(6)? != tern_vrrp::PROTO {
                return None;
            }
            let len = usize::from(u16::from_be_bytes([*p.get(4)?, *p.get(5)?]));
            let a = |o: usize| -> Option<IpAddr> {
                let b: [u8; 16] = p.get(o..o + 16)?.try_into().ok()?;
                Some(IpAddr::V6(Ipv6Addr::from(b)))
            };
            Some((a(8)?, a(24)?, *p.get(7)?, p.get(40..(40 + len).min(p.len()))?))
        }
        _ => None,
    }
}

/// The Ethernet (and 802.1Q) header from `src_mac` to `dst_mac`.
fn l2(iface: &Iface, dst_mac: [u8; 6], src_mac: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(128);
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    if let Some(vid) = iface.vlan() {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An advertisement's frame: from the virtual MAC to the group, TTL/hop
/// limit 255.
pub fn advert_frame(iface: &Iface, vmac: [u8; 6], src: IpAddr, msg: &[u8]) -> Option<Vec<u8>> {
    let fam = Family::of(&src);
    match (src, fam.group()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut f = l2(iface, fam.group_mac(), vmac, 0x0800);
            let total = u16::try_from(20 + msg.len()).ok()?;
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[1] = 0xc0; // Internetwork control, as keepalived sends
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[8] = tern_vrrp::packet::TTL;
            h[9] = tern_vrrp::PROTO;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let c = !checksum::data(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&h);
            f.extend_from_slice(msg);
            pad(&mut f);
            Some(f)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut f = l2(iface, fam.group_mac(), vmac, 0x86dd);
            let len = u16::try_from(msg.len()).ok()?;
            f.extend_from_slice(&[0x6c, 0, 0, 0]); // traffic class 0xc0
            f.extend_from_slice(&len.to_be_bytes());
            f.push(tern_vrrp::PROTO);
            f.push(tern_vrrp::packet::TTL);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
            f.extend_from_slice(msg);
            pad(&mut f);
            Some(f)
        }
        _ => None,
    }
}

/// Pads a frame to Ethernet's 60-byte minimum.
fn pad(f: &mut Vec<u8>) {
    if f.len() < 60 {
        f.resize(60, 0);
    }
}

/// The announcement of a virtual address on becoming master (RFC 5798
/// 6.4.1): a gratuitous ARP request (IPv4), or an unsolicited neighbour
/// advertisement to all nodes with the router and override flags (IPv6),
/// carrying the virtual MAC.
pub fn announce_frame(iface: &Iface, vmac: [u8; 6], addr: IpAddr) -> Option<Vec<u8>> {
    match addr {
        IpAddr::V4(a) => {
            let mut f = l2(iface, [0xff; 6], vmac, 0x0806);
            f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
            f.extend_from_slice(&vmac);
            f.extend_from_slice(&a.octets());
            f.extend_from_slice(&[0xff; 6]);
            f.extend_from_slice(&a.octets());
            pad(&mut f);
            Some(f)
        }
        IpAddr::V6(a) => {
            let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
            // From the interface's link-local address (RFC 4861 7.2.6).
            let src = iface.v6_ll;
            let mut f = l2(iface, [0x33, 0x33, 0, 0, 0, 1], vmac, 0x86dd);
            f.extend_from_slice(&[0x60, 0, 0, 0, 0, 32, 58, 255]);
            f.extend_from_slice(&src.octets());
            f.extend_from_slice(&all.octets());
            let mut icmp = [0u8; 32];
            icmp[0] = 136;
            icmp[4] = 0x80 | 0x20; // router, override
            icmp[8..24].copy_from_slice(&a.octets());
            icmp[24] = 2; // target link-layer address
            icmp[25] = 1;
            icmp[26..32].copy_from_slice(&vmac);
            let c = !checksum::add(checksum::pseudo_header_v6(src, all, IpProtocol::ICMPV6, 32), checksum::data(&icmp));
            icmp[2..4].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&icmp);
            Some(f)
        }
    }
}

impl super::Router {
    /// The VRRP groups' round of the control loop.
    pub(super) fn poll_vrrp(&mut self) -> bool {
        if self.vrrp.config() != self.plan.config.vrrp.as_slice() {
            self.reconcile_vrrp();
        }
        if self.vrrp.is_empty() {
            // Other routers' advertisements on a LAN where tern runs no
            // group: read and forgotten, so the queue never fills up.
            while self.shared.control_rx.pop().is_some() {
                self.vrrp.unmatched += 1;
            }
            return false;
        }
        let now = Instant::now();
        let ifs = self.shared.ifaces.load();
        let rxq = std::sync::Arc::clone(&self.shared.control_rx);
        let lanes = &self.lanes;
        let mut inject = |inj: Inject| {
            if !lanes.inject(inj) {
                log::debug!("vrrp: the inject queue is full");
            }
        };
        let mut env = Env { ifs: &ifs, fib: self.routes.fib_mut(), inject: &mut inject };
        let (did, changes) = self.vrrp.poll(now, &mut || rxq.pop(), &mut env);
        self.apply_vrrp(changes);
        did
    }

    /// A reload changed `[[vrrp]]`: the groups follow.
    fn reconcile_vrrp(&mut self) {
        let ifs = self.shared.ifaces.load();
        let lanes = &self.lanes;
        let mut inject = |inj: Inject| {
            lanes.inject(inj);
        };
        let groups = self.plan.vrrp_groups();
        let config = self.plan.config.vrrp.clone();
        let mut env = Env { ifs: &ifs, fib: self.routes.fib_mut(), inject: &mut inject };
        let changes = self.vrrp.reconcile(config, groups, Instant::now(), &mut env);
        self.apply_vrrp(changes);
    }

    /// Shuts the groups down (masters send priority 0) before the workers
    /// stop, and waits (briefly) for worker 0 to send what was queued.
    pub(super) fn stop_vrrp(&mut self) {
        if self.vrrp.is_empty() {
            return;
        }
        let ifs = self.shared.ifaces.load();
        let lanes = &self.lanes;
        let mut inject = |inj: Inject| {
            lanes.inject(inj);
        };
        let mut env = Env { ifs: &ifs, fib: self.routes.fib_mut(), inject: &mut inject };
        let changes = self.vrrp.shutdown(Instant::now(), &mut env);
        self.apply_vrrp(changes);
        let t0 = Instant::now();
        while !self.lanes.inject_idle() && t0.elapsed() < Duration::from_millis(200) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn apply_vrrp(&mut self, c: Changes) {
        if let Some(addrs) = c.virtual_addrs {
            let mut p = (*self.shared.params.load()).clone();
            p.virtual_addrs = addrs;
            self.shared.params.publish(p);
            self.lanes.wake_all();
        }
        if let Some(vmacs) = c.vmacs {
            log::debug!("vrrp: virtual MACs now {vmacs:?}");
        }
        self.set_vrrp_vmacs();
    }

    /// Makes the groups' interfaces accept exactly the virtual MACs of
    /// their master groups (checked every poll: a reload or a link event
    /// that rebuilds the interface table gets them back at once).
    fn set_vrrp_vmacs(&mut self) {
        let ifs = self.shared.ifaces.load();
        for ifindex in self.vrrp.interfaces() {
            let want = self.vrrp.vmacs_of(ifindex);
            let have: Vec<[u8; 6]> = ifs
                .get(ifindex)
                .map(|f| f.vmacs.iter().filter(|v| v.owner == VmacOwner::Vrrp).map(|v| v.mac).collect())
                .unwrap_or_default();
            let same = have.len() == want.len() && want.iter().all(|m| have.contains(m));
            if !same {
                self.interfaces.set_vmacs(&self.shared.ifaces, ifindex, VmacOwner::Vrrp, &want);
                self.lanes.wake_all();
            }
        }
    }

    /// The VRRP groups' state (`tern vrrp show`, the API, /metrics).
    pub fn vrrp_show(&self) -> Vec<VrrpInfo> {
        self.vrrp.show()
    }

    /// When the control loop must run next for VRRP's timers.
    pub fn vrrp_deadline(&self) -> Option<Instant> {
        self.vrrp.next_deadline()
    }
}

impl super::Router {
    /// The control loop's pause, cut short for the next VRRP timer (a
    /// 10 ms advertisement interval needs the loop within about a
    /// millisecond of it, not after its 20 ms idle pause).
    pub fn bound_pause(&self, pause: Duration) -> Duration {
        // (IKE needs no short pause while exchanges are in flight: a
        // shard rings the loop's bell when it hands over child SAs.)
        match self.vrrp.next_deadline() {
            Some(d) => pause.min(d.saturating_duration_since(Instant::now())),
            None => pause,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_nodes::state::{IfKind, V4Net};

    fn iface() -> Iface {
        let mut i = Iface::new(0, "lan", IfKind::Port, 0, [2, 0, 0, 0, 0, 1]);
        i.v4.push(V4Net { addr: Ipv4Addr::new(10, 1, 0, 2), len: 24 });
        i
    }

    #[test]
    fn advert_frames_carry_the_virtual_mac_and_ttl_255() {
        let vmac = tern_vrrp::virtual_mac(Family::V4, 10);
        let msg =
            tern_vrrp::Advert { vrid: 10, priority: 100, interval_cs: 100, addrs: vec!["10.1.0.254".parse().unwrap()] }
                .encode("10.1.0.2".parse().unwrap(), "224.0.0.18".parse().unwrap())
                .unwrap();
        let f = advert_frame(&iface(), vmac, "10.1.0.2".parse().unwrap(), &msg).unwrap();
        assert_eq!(f[..6], [0x01, 0, 0x5e, 0, 0, 0x12]);
        assert_eq!(f[6..12], vmac);
        assert_eq!(checksum::data(&f[14..34]), 0xffff, "IPv4 header checksum");
        let (src, dst, ttl, m) = ip_parts(&f[14..]).unwrap();
        assert_eq!((src.to_string(), dst.to_string(), ttl), ("10.1.0.2".into(), "224.0.0.18".into(), 255));
        assert_eq!(m, msg, "the message, without the Ethernet padding");
        assert!(tern_vrrp::Advert::decode(m, src, dst, ttl).is_ok());
    }

    #[test]
    fn announcements_name_the_virtual_mac() {
        let vmac = tern_vrrp::virtual_mac(Family::V4, 10);
        let f = announce_frame(&iface(), vmac, "10.1.0.254".parse().unwrap()).unwrap();
        assert_eq!(f[..6], [0xff; 6]);
        assert_eq!(f[6..12], vmac);
        assert_eq!(f[22..28], vmac, "sender hardware address");
        assert_eq!(f[28..32], [10, 1, 0, 254]);
        assert_eq!(f[38..42], [10, 1, 0, 254]);
        let vmac6 = tern_vrrp::virtual_mac(Family::V6, 10);
        let i = iface();
        let f = announce_frame(&i, vmac6, "2001:db8::254".parse().unwrap()).unwrap();
        let ip = &f[14..];
        let icmp = &ip[40..];
        let pseudo = checksum::pseudo_header_v6(i.v6_ll, "ff02::1".parse().unwrap(), IpProtocol::ICMPV6, 32);
        assert_eq!(checksum::add(pseudo, checksum::data(icmp)), 0xffff, "ICMPv6 checksum");
        assert_eq!(icmp[26..32], vmac6);
        assert_eq!(ip[7], 255);
    }

    #[test]
    fn ip_parts_refuses_what_is_not_vrrp() {
        assert!(ip_parts(&[]).is_none());
        assert!(ip_parts(&[0x45; 19]).is_none());
        let mut h = [0u8; 28];
        h[0] = 0x45;
        h[3] = 28;
        h[9] = 17;
        assert!(ip_parts(&h).is_none(), "UDP");
        h[9] = 112;
        assert!(ip_parts(&h).is_some());
        h[0] = 0x4f; // IHL 60 beyond the packet
        assert!(ip_parts(&h).is_none());
    }

    fn group(accept_mode: bool) -> VrrpGroup {
        VrrpGroup {
            ifindex: 0,
            iface: "lan".into(),
            vrid: 10,
            family: Family::V4,
            priority: 200,
            interval_cs: 10,
            addrs: vec!["10.1.0.254".parse().unwrap()],
            preempt: true,
            preempt_delay_ms: 0,
            accept_mode,
            track_ifaces: vec![1],
            track_routes: vec!["192.0.2.0/24".parse().unwrap()],
            track_decrement: 60,
            notify: None,
        }
    }

    /// A peer's advertisement as ip4-local hands it over.
    fn punted(priority: u8) -> Punted {
        let msg = tern_vrrp::Advert { vrid: 10, priority, interval_cs: 10, addrs: vec!["10.1.0.254".parse().unwrap()] }
            .encode("10.1.0.3".parse().unwrap(), "224.0.0.18".parse().unwrap())
            .unwrap();
        let frame = advert_frame(&iface(), [2, 0, 0, 0, 0, 3], "10.1.0.3".parse().unwrap(), &msg).unwrap();
        Punted { ifindex: 0, packet: frame[14..34 + msg.len()].to_vec() }
    }

    #[test]
    fn the_service_runs_a_group_end_to_end() {
        let (mut fib, _reader) = tern_fib::new(tern_fib::FibConfig::default(), tern_rcu::Domain::new());
        fib.add_route(Source::Static, "192.0.2.0/24".parse().unwrap(), RouteTarget::Blackhole, RouteAttrs::default())
            .unwrap();
        let mut ifs = IfTable::new(vec![iface(), Iface::new(1, "wan", IfKind::Port, 1, [2, 0, 0, 0, 0, 2])]);
        let mut svc = VrrpService::new(Vec::new(), vec![group(true)]);
        let sent: std::cell::RefCell<Vec<Inject>> = std::cell::RefCell::new(Vec::new());
        let t0 = Instant::now();
        let poll = |svc: &mut VrrpService, ifs: &IfTable, fib: &mut FibWriter, now, rx: Vec<Punted>| {
            let mut rx = rx.into_iter();
            let mut inject = |i: Inject| sent.borrow_mut().push(i);
            let mut env = Env { ifs, fib, inject: &mut inject };
            svc.poll(now, &mut || rx.next(), &mut env).1
        };
        // Backup at start; a higher-priority peer keeps it there.
        poll(&mut svc, &ifs, &mut fib, t0, vec![]);
        poll(&mut svc, &ifs, &mut fib, t0, vec![punted(250)]);
        assert_eq!(svc.show()[0].state, "backup");
        assert_eq!(svc.show()[0].master.as_deref(), Some("10.1.0.3"));
        // The peer says it stops (priority 0): master after Skew_Time.
        poll(&mut svc, &ifs, &mut fib, t0 + Duration::from_millis(50), vec![punted(0)]);
        let c = poll(&mut svc, &ifs, &mut fib, t0 + Duration::from_millis(100), vec![]);
        let info = &svc.show()[0];
        assert_eq!((info.state.as_str(), info.transitions), ("master", 2));
        let addrs = c.virtual_addrs.expect("published");
        assert_eq!(
            addrs,
            [VirtualAddr { ifindex: 0, addr: "10.1.0.254".parse().unwrap(), mac: [0, 0, 0x5e, 0, 1, 10] }]
        );
        assert_eq!(c.vmacs, Some(vec![(0, [0, 0, 0x5e, 0, 1, 10])]));
        assert_eq!(svc.vmacs_of(0), [[0, 0, 0x5e, 0, 1, 10]]);
        let local = fib.route(Source::Local, "10.1.0.254/32".parse().unwrap());
        assert!(local.is_some(), "accept mode: the address is the router's own");
        // An advertisement from the virtual MAC, then the gratuitous ARP.
        let sent = sent.borrow().clone();
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(sent[0].frame[6..12], [0, 0, 0x5e, 0, 1, 10]);
        assert_eq!(sent[1].frame[12..14], [8, 6]);
        // Tracking: wan down and the tracked route gone: 200 - 2 * 60.
        ifs.ifs[1].up = false;
        fib.del_route(Source::Static, "192.0.2.0/24".parse().unwrap()).unwrap();
        poll(&mut svc, &ifs, &mut fib, t0 + Duration::from_millis(110), vec![]);
        assert_eq!(svc.show()[0].priority, 80);
        // A peer at 100 now wins: backup, and everything given back.
        let c = poll(&mut svc, &ifs, &mut fib, t0 + Duration::from_millis(120), vec![punted(100)]);
        assert_eq!(svc.show()[0].state, "backup");
        assert_eq!(c.virtual_addrs, Some(vec![]));
        assert_eq!(c.vmacs, Some(vec![]));
        assert!(fib.route(Source::Local, "10.1.0.254/32".parse().unwrap()).is_none());
        // Unknown VRIDs and broken packets are counted, not fatal.
        let mut other = punted(100);
        other.packet[21] = 11;
        poll(
            &mut svc,
            &ifs,
            &mut fib,
            t0 + Duration::from_millis(130),
            vec![other, Punted { ifindex: 0, packet: vec![0x45] }],
        );
        assert_eq!((svc.unmatched, svc.malformed), (1, 1));
    }

    #[test]
    fn a_reload_keeps_unchanged_groups_and_stops_removed_ones() {
        let (mut fib, _reader) = tern_fib::new(tern_fib::FibConfig::default(), tern_rcu::Domain::new());
        let ifs = IfTable::new(vec![iface(), Iface::new(1, "wan", IfKind::Port, 1, [2, 0, 0, 0, 0, 2])]);
        let plain = VrrpGroup { track_ifaces: vec![], track_routes: vec![], ..group(false) };
        let other = VrrpGroup { vrid: 11, ..plain.clone() };
        let mut svc = VrrpService::new(Vec::new(), vec![plain.clone(), other.clone()]);
        let sent: std::cell::RefCell<Vec<Inject>> = std::cell::RefCell::new(Vec::new());
        let mut inject = |i: Inject| sent.borrow_mut().push(i);
        let t0 = Instant::now();
        let mut env = Env { ifs: &ifs, fib: &mut fib, inject: &mut inject };
        svc.poll(t0, &mut || None, &mut env);
        svc.poll(t0 + Duration::from_millis(500), &mut || None, &mut env);
        assert!(svc.show().iter().all(|g| g.state == "master"));
        let before = svc.show()[0].adverts_tx;
        let changed = VrrpGroup { priority: 150, ..other };
        let c = svc.reconcile(Vec::new(), vec![plain, changed], t0 + Duration::from_millis(510), &mut env);
        let names: Vec<(String, String)> = svc.show().into_iter().map(|g| (g.group, g.state)).collect();
        assert_eq!(
            names,
            [("lan/10/ipv4".to_string(), "master".to_string()), ("lan/11/ipv4".to_string(), "initialize".to_string())],
            "vrid 10 kept running, vrid 11 replaced"
        );
        assert_eq!(svc.show()[0].adverts_tx, before, "the kept group was not restarted");
        assert_eq!(c.vmacs, Some(vec![(0, [0, 0, 0x5e, 0, 1, 10])]), "vrid 11's virtual MAC given back");
        let last = sent.borrow().last().cloned().expect("sent");
        let ip = &last.frame[14..];
        assert_eq!((ip[9], ip[20 + 1], ip[20 + 2]), (112, 11, 0), "the removed master's priority-0 advertisement");
        svc.poll(t0 + Duration::from_millis(520), &mut || None, &mut env);
        assert_eq!(svc.show()[1].state, "backup", "the new vrid 11 starts");
    }
}
