//! The XDP lane in the router: one control plane for both lanes.
//!
//! tern's tables are compiled into the lane program's maps (crates/xdp
//! `lane`) at start and on every change: the FIB by mirroring tern-fib's
//! own arrays (every change [`FibWriter::take_changes`] reports, entry by
//! entry, atomically as the workers see them), and the interface table
//! (MACs, MTUs, VLANs, GRE tunnels, rule-set bindings) and the rule sets
//! as one double-buffered generation, flipped with one store. The router
//! calls [`XdpLane::sync`] from its control loop, so whatever changed the
//! tables (configuration, API, kernel mirror, FPM, neighbours) reaches the
//! lane within one loop.
//!
//! Devices on the lane run `bpf/lane.c` instead of the steering program;
//! tern's workers still open their AF_XDP sockets there, and the lane hands
//! them what it does not finish itself (ICMP errors, unresolved neighbours,
//! packets for the router, ...). Counters of both lanes add up under the
//! same names ([`XdpLane::counter`]).

use crate::config::{Driver, IfacePlanKind, Plan};
use std::collections::HashMap;
use std::net::IpAddr;
use tern_acl::RuleSet;
use tern_fib::FibWriter;
use tern_nodes::state::{IfKind, IfTable, NO_IF, Shared};
use tern_xdp::lane::LaneTrace;
use tern_xdp::lane::{
    CounterValue, FibCapacity, LaneConfig, LaneGre, LaneIf, LaneIfKind, LanePortStats, LaneProgram, LaneTables,
    MirrorStats, compile_acl,
};
use tern_xdp::{AttachMode, XdpError, XskPort};

/// Lane trace records kept (`tern trace start` takes at most 10,000).
const TRACES_KEPT: usize = 10_000;

/// The lane's view of tern's interface table and rule sets. `on_lane(port)`
/// says whether frames may leave by `port` from the lane (its device is
/// attached); packets routed elsewhere go to userspace.
pub fn lane_tables(ifs: &IfTable, acls: &[RuleSet], on_lane: &dyn Fn(u16) -> bool) -> LaneTables {
    let mut t = LaneTables::default();
    for f in &ifs.ifs {
        let kind = match &f.kind {
            // A removed interface's index: down, no port, nothing reaches it.
            IfKind::Port | IfKind::Removed => LaneIfKind::Port,
            IfKind::Vlan { vid, .. } => LaneIfKind::Vlan(*vid),
            IfKind::Gre(g) => LaneIfKind::Gre(LaneGre { local: g.local, remote: g.remote, key: g.key, ttl: g.ttl }),
            // The lane does not encrypt: a packet routed into an ipsec
            // tunnel (no port) is punted to the engine (punt-egress).
            IfKind::Ipsec(_) => LaneIfKind::Port,
        };
        t.ifs.push(LaneIf {
            index: f.index,
            kind,
            up: f.up,
            port: f.port,
            tx: f.port != NO_IF && on_lane(f.port),
            mac: f.mac,
            mtu: f.mtu,
            acl_in: f.acl_in,
            acl_out: f.acl_out,
            v6_ll: f.v6_ll.octets(),
            capture: false,
        });
        for v in &f.vmacs {
            if !t.vmacs.contains(&(f.index, v.mac)) {
                t.vmacs.push((f.index, v.mac));
            }
        }
    }
    for (port, vids) in ifs.vlans.iter().enumerate() {
        for (vid, &sub) in vids.iter().enumerate() {
            if sub != NO_IF {
                t.vlans.push((port as u16, vid as u16, sub));
            }
        }
    }
    let index = |name: &str| ifs.by_name(name).map(|i| i.index);
    t.acls = acls.iter().map(|s| compile_acl(s, &index)).collect();
    t
}

/// Adds the lane's rule hits to the workers' (both: per rule, then the
/// default policy). A lane still counting an older rule set (before its
/// next sync) adds only the slots both have.
pub fn add_hits(hits: &mut [(u64, u64)], lane: &[(u64, u64)]) {
    if hits.len() != lane.len() {
        log::debug!("XDP lane: rule hits of {} slots against {}", lane.len(), hits.len());
    }
    for (h, l) in hits.iter_mut().zip(lane) {
        h.0 = h.0.wrapping_add(l.0);
        h.1 = h.1.wrapping_add(l.1);
    }
}

/// The lane program attached to the router's devices.
pub struct XdpLane {
    prog: LaneProgram,
    acls: Vec<RuleSet>,
    ifs_gen: u64,
    acls_gen: u64,
    /// Ports whose device runs the lane (frames may leave by them).
    on_lane: Vec<bool>,
    /// Device name -> port.
    devices: HashMap<String, u16>,
    /// Port -> the kernel ifindex its device had when attached (the
    /// lane's receive table is keyed by it).
    kifs: HashMap<u16, u32>,
    dirty: bool,
    last_check: std::time::Instant,
    /// Packets the lane traced since the trace was armed (at most
    /// `tern trace start`'s 10,000).
    traces: Vec<LaneTrace>,
    /// The port `tern capture` watches: the lane punts its frames
    /// (`LaneIf::capture`) and sends nothing out of it.
    capture: Option<u16>,
}

impl XdpLane {
    /// Loads the lane and fills it from the router's tables: the FIB is
    /// mirrored from now on (its RCU domain gains a reader for the
    /// mirror), interfaces and rule sets are published.
    pub fn start(
        shared: &Shared,
        fib: &mut FibWriter,
        acls: &[RuleSet],
        linux_mode: bool,
        capacity: FibCapacity,
    ) -> Result<XdpLane, XdpError> {
        let cfg = LaneConfig { fib: capacity, neigh_to_tern: !linux_mode, linux_mode, ..LaneConfig::default() };
        let mut prog = LaneProgram::load(&cfg)?;
        // Everything up to now is copied whole; later changes one by one.
        let _ = fib.take_changes();
        prog.attach_fib(&shared.fib.raw(), Some(shared.fib.domain().register()))?;
        let mut lane = XdpLane {
            prog,
            acls: acls.to_vec(),
            ifs_gen: shared.ifaces.generation(),
            acls_gen: shared.acls.generation(),
            on_lane: Vec::new(),
            devices: HashMap::new(),
            kifs: HashMap::new(),
            dirty: true,
            last_check: std::time::Instant::now(),
            traces: Vec::new(),
            capture: None,
        };
        lane.publish(shared)?;
        Ok(lane)
    }

    /// Puts device `dev` (tern port `port`, whose interface index is the
    /// port number) on the lane: natively, or in generic mode only if
    /// `allow_generic`. Frames leave by it from the lane while it can take
    /// redirected frames (see [`XdpLane::sync`]); until then packets routed
    /// there go through userspace.
    pub fn attach(&mut self, dev: &str, port: u16, allow_generic: bool) -> Result<AttachMode, XdpError> {
        let kif = tern_xdp::lane::device_ifindex(dev)?;
        self.prog.add_port(port, port, kif)?;
        let mode = match self.prog.attach(dev, port, allow_generic) {
            Ok(m) => m,
            Err(e) => {
                self.prog.remove_port(port, kif);
                return Err(e);
            }
        };
        let i = usize::from(port);
        if self.on_lane.len() <= i {
            self.on_lane.resize(i + 1, false);
        }
        self.on_lane[i] = can_send(dev);
        if !self.on_lane[i] {
            log::info!(
                "device {dev}: the XDP lane receives here; its driver cannot take redirected frames now (a veth \
                 needs XDP or GRO on its peer), so packets routed out of it go through userspace"
            );
        }
        self.devices.insert(dev.to_string(), port);
        self.kifs.insert(port, kif);
        self.dirty = true;
        Ok(mode)
    }

    /// Puts lane device `dev` (tern port `port`) on the lane again after it
    /// was removed and created again under the same name (a new ifindex):
    /// the old device's entries go (its receive-table slot, its link), then
    /// as [`XdpLane::attach`]. On error the port is off the lane (nothing
    /// received there, nothing sent out of it by the lane) but stays a lane
    /// device, so that a later return tries again.
    pub fn reattach(&mut self, dev: &str, port: u16, allow_generic: bool) -> Result<AttachMode, XdpError> {
        self.detach_port(port);
        self.attach(dev, port, allow_generic)
    }

    /// Takes port `port` off the lane (its device went, or re-attaching
    /// it failed): its entries are forgotten, frames no longer leave by
    /// it from the lane. It stays a lane device.
    pub fn detach_port(&mut self, port: u16) {
        if let Some(old) = self.kifs.remove(&port) {
            // The old link's descriptor goes (the kernel detached the
            // program with the device; on a device still there, this
            // detaches it).
            if let Err(e) = self.prog.detach(port) {
                log::debug!("XDP lane: port {port}: {e}");
            }
            self.prog.remove_port(port, old);
        }
        if let Some(slot) = self.on_lane.get_mut(usize::from(port)) {
            *slot = false;
        }
        self.dirty = true;
    }

    /// Re-reads which lane devices can take redirected frames (a veth's
    /// peer may have gained or lost its XDP program); true if it changed.
    fn recheck_senders(&mut self) -> bool {
        let mut changed = false;
        for (dev, &port) in &self.devices {
            let ok = self.kifs.contains_key(&port) && can_send(dev);
            if let Some(slot) = self.on_lane.get_mut(usize::from(port))
                && *slot != ok
            {
                log::info!(
                    "device {dev}: the XDP lane {} send out of it",
                    if ok { "can now" } else { "can no longer" }
                );
                *slot = ok;
                changed = true;
            }
        }
        changed
    }

    /// Whether `dev` runs the lane.
    pub fn has_device(&self, dev: &str) -> bool {
        self.devices.contains_key(dev)
    }

    /// The port of a lane device.
    pub fn device_port(&self, dev: &str) -> Option<u16> {
        self.devices.get(dev).copied()
    }

    /// Punts of `port`'s queue `xsk.queue()` go to this worker socket.
    pub fn register_xsk(&mut self, port: u16, xsk: &XskPort) -> Result<(), XdpError> {
        self.prog.register_xsk(port, xsk.queue(), xsk.socket_fd())
    }

    /// An address Linux keeps (Linux mode).
    pub fn add_local(&mut self, addr: IpAddr) -> Result<(), XdpError> {
        self.prog.add_local(addr)
    }

    /// ESP and ESP in UDP 4500 for the router to tern's engine (Linux
    /// mode; IKE stays the kernel's).
    pub fn set_ipsec(&mut self, on: bool) -> Result<(), XdpError> {
        self.prog.set_ipsec(on)
    }

    /// The SAs' local ESP-in-UDP ports besides 4500 (see
    /// `LaneProgram::set_encap_ports`).
    pub fn set_encap_ports(&mut self, ports: &[u16]) -> Result<(), XdpError> {
        self.prog.set_encap_ports(ports)
    }

    /// Writes the interface table and rule sets as a new generation.
    pub fn publish(&mut self, shared: &Shared) -> Result<(), XdpError> {
        let ifs = shared.ifaces.load();
        let on = &self.on_lane;
        let cap = self.capture;
        let mut t =
            lane_tables(&ifs, &self.acls, &|p| on.get(usize::from(p)).copied().unwrap_or(false) && Some(p) != cap);
        if let Some(c) = cap {
            // The port's own interface: its frames (VLANs' included) go
            // to the engine before the lane looks further.
            for f in t.ifs.iter_mut().filter(|f| f.port == c && f.kind == LaneIfKind::Port) {
                f.capture = true;
            }
        }
        if t.acls != self.prog.tables().acls {
            for (i, a) in t.acls.iter().enumerate() {
                for (fam, f) in [("IPv4", &a.v4), ("IPv6", &a.v6)] {
                    if let Some(why) = &f.not_compiled {
                        log::warn!("XDP lane: rule set {} ({i}) {fam}: {why}; its packets go to userspace", a.name);
                    }
                    for (r, why) in &f.punted {
                        log::warn!(
                            "XDP lane: rule set {} ({i}) {fam}: rule {r}: {why}; packets it would decide go to userspace",
                            a.name
                        );
                    }
                }
            }
        }
        if &t != self.prog.tables() {
            self.prog.publish(&t)?;
        }
        self.dirty = false;
        Ok(())
    }

    /// Brings the lane up to date: FIB changes always, interfaces and rule
    /// sets when they changed. Called from the router's control loop.
    pub fn sync(&mut self, fib: &mut FibWriter, shared: &Shared, acls: &[RuleSet]) {
        let ch = fib.take_changes();
        self.prog.sync_fib(&shared.fib.raw(), &ch);
        if self.last_check.elapsed() >= std::time::Duration::from_secs(1) {
            self.last_check = std::time::Instant::now();
            self.dirty |= self.recheck_senders();
        }
        let (ig, ag) = (shared.ifaces.generation(), shared.acls.generation());
        // Every change of the rule sets publishes them (a new generation):
        // no need to compare them, every 2 ms, rule by rule.
        if ig != self.ifs_gen || ag != self.acls_gen {
            self.ifs_gen = ig;
            self.acls_gen = ag;
            self.acls = acls.to_vec();
            self.dirty = true;
        }
        if self.dirty
            && let Err(e) = self.publish(shared)
        {
            log::warn!("XDP lane: publishing tables: {e}");
        }
    }

    /// `[dataplane.fast_paths]` on the lane, at once (the next packet
    /// sees it; nothing is re-attached): `acl_shortcut` switches its ACL
    /// verdict cache (off, the forwarding memo holds no flow a rule set
    /// decides either: every verdict comes from the classifier), `direct`
    /// its forwarding memo. `gre_direct` has no counterpart on the lane.
    pub fn set_fast_paths(&mut self, f: &crate::config::FastPathsCfg) -> Result<(), XdpError> {
        self.prog.set_fast_paths(f.acl_shortcut, f.direct)
    }

    /// `[dataplane.punt]` on the lane, at once: the policers of what it
    /// hands to Linux or to the engine for the router, per class.
    pub fn set_punt_rates(&mut self, punt: &[(u32, u32); 7]) -> Result<(), XdpError> {
        self.prog.set_punt_rates(punt)
    }

    /// Traces the next `n` packets the lane decides (0: stops); forgets
    /// the records of the previous trace.
    pub fn trace_arm(&mut self, n: u32) -> Result<(), XdpError> {
        self.traces.clear();
        self.prog.trace_arm(n)
    }

    /// Stops the trace, keeping what it recorded for `trace show`.
    pub fn trace_stop(&mut self) -> Result<(), XdpError> {
        self.traces.extend(self.prog.trace_take());
        self.prog.trace_arm(0)
    }

    /// Forgets the records taken so far (the trace goes on).
    pub fn trace_clear(&mut self) {
        self.traces.clear();
    }

    /// Packets the armed trace still wants.
    pub fn trace_remaining(&self) -> u32 {
        self.prog.trace_remaining()
    }

    /// Every packet traced since the trace was armed, oldest first.
    pub fn traces(&mut self) -> &[LaneTrace] {
        self.traces.extend(self.prog.trace_take());
        let extra = self.traces.len().saturating_sub(TRACES_KEPT);
        self.traces.drain(..extra);
        &self.traces
    }

    pub fn program(&self) -> &LaneProgram {
        &self.prog
    }

    pub fn program_mut(&mut self) -> &mut LaneProgram {
        &mut self.prog
    }

    /// A counter of the lane by the userspace name (0 if unknown).
    pub fn counter(&self, node: &str, error: &str) -> u64 {
        self.prog.counter(node, error)
    }

    /// All counters of the lane.
    pub fn counters(&self) -> Vec<CounterValue> {
        self.prog.counters().unwrap_or_default()
    }

    /// What the lane received and sent on `port`.
    pub fn port_stats(&self, port: u16) -> LanePortStats {
        self.prog.port_stats(port).unwrap_or_default()
    }

    /// Rule hits of rule set `set` counted by the lane (per rule, then the
    /// default), to add to the workers' `RuleCounters`.
    pub fn acl_hits(&self, set: usize) -> Vec<(u64, u64)> {
        self.prog.acl_hits(set).unwrap_or_default()
    }

    /// [`XdpLane::acl_hits`] of the rule set named `name`.
    pub fn acl_hits_by_name(&self, name: &str) -> Option<Vec<(u64, u64)>> {
        self.acls.iter().position(|s| s.name == name).map(|i| self.acl_hits(i))
    }

    /// Makes `port` the captured one (None: none); true if it is a lane
    /// device's. Takes effect at the next [`XdpLane::publish`].
    pub fn set_capture(&mut self, port: Option<u16>) -> bool {
        let port = port.filter(|p| self.devices.values().any(|d| d == p));
        if port != self.capture {
            self.capture = port;
            self.dirty = true;
        }
        port.is_some()
    }

    /// The port `tern capture` watches, if it is a lane device's.
    pub fn capture(&self) -> Option<u16> {
        self.capture
    }

    /// Whether frames leave by `port` from the lane (its device can take
    /// redirected frames); packets routed elsewhere go through userspace.
    pub fn sends(&self, port: u16) -> bool {
        self.on_lane.get(usize::from(port)).copied().unwrap_or(false)
    }

    /// Why the lane does not classify rule set `name` itself, per family
    /// ("IPv4", "IPv6"): packets needing it go to the engine. Empty when
    /// the lane holds the whole set (or does not know it yet).
    pub fn acl_not_compiled(&self, name: &str) -> Vec<(&'static str, String)> {
        let Some(a) = self.prog.tables().acls.iter().find(|a| a.name == name) else { return Vec::new() };
        [("IPv4", &a.v4), ("IPv6", &a.v6)]
            .into_iter()
            .filter_map(|(fam, f)| f.not_compiled.clone().map(|why| (fam, why)))
            .collect()
    }

    /// Rules of rule set `name` the lane holds only as punt rules, per
    /// family: ("IPv4", rule index, why). Packets they would decide go to
    /// the engine; the rest of the set stays in the lane.
    pub fn acl_punted_rules(&self, name: &str) -> Vec<(&'static str, u32, String)> {
        let Some(a) = self.prog.tables().acls.iter().find(|a| a.name == name) else { return Vec::new() };
        [("IPv4", &a.v4), ("IPv6", &a.v6)]
            .into_iter()
            .flat_map(|(fam, f)| f.punted.iter().map(move |(r, why)| (fam, *r, why.clone())))
            .collect()
    }

    pub fn mirror_stats(&mut self) -> MirrorStats {
        self.prog.fib_mirror().map(|m| m.stats()).unwrap_or_default()
    }

    /// (device, port, attach mode) of every device on the lane.
    pub fn devices(&self) -> Vec<(String, u16, Option<AttachMode>)> {
        let mut v: Vec<_> = self.devices.iter().map(|(d, &p)| (d.clone(), p, self.prog.attach_mode(p))).collect();
        v.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        v
    }
}

/// Starts the lane for the router's devices on `driver = "xdp"` (or `lane
/// = "xdp"`): an error if it cannot run there; and on `auto` where the
/// driver has a native XDP hook. Frames leave from the lane by devices
/// that can take redirected frames (`ndo-xmit`; a veth only while its peer
/// takes XDP frames); packets routed to others go through userspace.
/// Devices left out use AF_XDP (or AF_PACKET) as before. `None` when no
/// device runs it.
pub(crate) fn start_for_router(
    plan: &Plan,
    shared: &Shared,
    fib: &mut FibWriter,
    linux_mode: bool,
    not_on_lane: &mut HashMap<String, String>,
) -> Result<Option<XdpLane>, String> {
    let cands: Vec<(u16, String, Driver)> = plan
        .ifaces
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match &p.kind {
            IfacePlanKind::Port { device: Some(d), driver: dr @ (Driver::Auto | Driver::Xdp) } => {
                Some((i as u16, d.clone(), *dr))
            }
            _ => None,
        })
        .collect();
    if cands.is_empty() {
        return Ok(None);
    }
    let must = cands.iter().any(|c| c.2 == Driver::Xdp);
    let mut lane = match XdpLane::start(shared, fib, &plan.acls, linux_mode, FibCapacity::for_fib(&shared.fib.raw())) {
        Ok(l) => l,
        Err(e) if !must => {
            log::info!("XDP lane unavailable ({e}); devices use AF_XDP");
            for (_, dev, _) in &cands {
                not_on_lane.insert(dev.clone(), format!("the XDP lane is unavailable: {e}"));
            }
            return Ok(None);
        }
        Err(e) => return Err(format!("XDP lane: {e}")),
    };
    use tern_xdp::lane::features::{XDP_ACT_BASIC, XDP_ACT_REDIRECT, xdp_features};
    for (port, dev, driver) in &cands {
        let explicit = *driver == Driver::Xdp;
        let feats = tern_xdp::lane::device_ifindex(dev).ok().and_then(|k| xdp_features(k).ok());
        let need = XDP_ACT_BASIC | XDP_ACT_REDIRECT;
        if let Some(f) = feats
            && f & need != need
            && !explicit
        {
            log::info!("device {dev}: not on the XDP lane: no native XDP hook (features {f:#x}); using AF_XDP");
            not_on_lane.insert(dev.clone(), format!("driver = auto: no native XDP hook (XDP features {f:#x})"));
            continue;
        }
        match lane.attach(dev, *port, explicit) {
            Ok(mode) => log::info!("device {dev}: on the XDP lane ({mode:?} mode)"),
            Err(e) if explicit => return Err(format!("device {dev}: XDP lane: {e}")),
            Err(e) => {
                log::info!("device {dev}: XDP lane unavailable ({e}); using AF_XDP");
                not_on_lane.insert(dev.clone(), format!("the XDP lane could not attach: {e}"));
            }
        }
    }
    if lane.devices.is_empty() {
        return Ok(None);
    }
    lane.set_fast_paths(&plan.config.dataplane.fast_paths).map_err(|e| format!("XDP lane: fast paths: {e}"))?;
    lane.set_punt_rates(&plan.config.dataplane.punt.rates()).map_err(|e| format!("XDP lane: punt policers: {e}"))?;
    lane.publish(shared).map_err(|e| format!("XDP lane: {e}"))?;
    Ok(Some(lane))
}

/// Whether frames redirected by XDP can leave by `dev` (its driver
/// advertises `ndo-xmit`). Kernels without the query (before 6.3) are
/// trusted.
fn can_send(dev: &str) -> bool {
    use tern_xdp::lane::features::{XDP_ACT_NDO_XMIT, xdp_features};
    match tern_xdp::lane::device_ifindex(dev).map(xdp_features) {
        Ok(Ok(f)) => f & XDP_ACT_NDO_XMIT != 0,
        _ => true,
    }
}
