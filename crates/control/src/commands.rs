//! The command core: one function per operation, shared by the API
//! server, the CLI (through the API) and the configuration reload (VPP's
//! rule: the CLI and the API call the same function).
//!
//! Each function validates its arguments before changing anything and
//! answers with the plain data types of [`crate::api::types`].

use crate::api::types::*;
use crate::api::*;
use crate::router::Router;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tern_engine::stats::{BATCH_BUCKETS, StatsSnapshot};
use tern_engine::worker::{CAPTURE_RX, CAPTURE_TX, CaptureDir};
use tern_engine::{PortSlot, WorkerShared};
use tern_fib::{NhKind, Prefix, RouteAttrs, RouteDetail, RouteTarget, Source};
use tern_nodes::state::{IfKind, IfTable};

/// Frames a capture buffers for a client that does not read them.
const CAPTURE_BUFFER: usize = 100_000;
/// A capture nobody read for this long is stopped (its client is gone).
const CAPTURE_IDLE: Duration = Duration::from_secs(10);

/// What the command core keeps between commands (beside the router).
#[derive(Default)]
pub struct OpsState {
    /// The file `config_reload` reads.
    pub config_path: Option<PathBuf>,
    /// Counters saved by `stats_clear`, per worker, and when.
    baseline: Option<(u64, Vec<StatsSnapshot>)>,
    /// The XDP lane's counters and port counters at `stats_clear`.
    lane_baseline: LaneCounts,
    trace_started_ns: u64,
    /// CLOCK_MONOTONIC at `trace start` (the XDP lane's clock).
    trace_started_mono_ns: u64,
    /// The XDP lane's `trace-lost` counter at `trace start`.
    trace_lane_lost_at_start: u64,
    capture: Option<CaptureSession>,
    next_capture_id: u64,
    /// Requests executed, and failed.
    pub requests: u64,
    pub request_errors: u64,
    pub reloads_ok: u64,
    pub reloads_failed: u64,
    /// Route changes over the API, logged as a summary.
    route_log: RouteLog,
}

/// How often route changes over the API are summarised in the log.
const ROUTE_LOG_EVERY: Duration = Duration::from_secs(10);

/// Route changes over the API in the log: the first of a burst at INFO
/// (with its details), the rest of the burst as one INFO summary line
/// per [`ROUTE_LOG_EVERY`], each one's details at DEBUG. 100,000 route
/// adds make a few lines, not 100,000.
#[derive(Default)]
struct RouteLog {
    /// When the first line of the current window was logged.
    window: Option<Instant>,
    applied: u64,
    refused: u64,
    requests: u64,
}

impl RouteLog {
    fn note(&mut self, op: &str, ops: usize, outcome: Result<&str, &ApiError>) {
        self.flush();
        if self.window.is_none() {
            self.window = Some(Instant::now());
            match outcome {
                Ok(m) => log::info!("api {op}: {m}"),
                Err(e) => log::warn!("api {op}: refused: {e}"),
            }
            return;
        }
        self.requests += 1;
        match outcome {
            Ok(m) => {
                self.applied += ops as u64;
                log::debug!("api {op}: {m}");
            }
            Err(e) => {
                self.refused += ops as u64;
                log::debug!("api {op}: refused: {e}");
            }
        }
    }

    /// Logs the summary of a window that is over.
    fn flush(&mut self) {
        if self.window.is_some_and(|t| t.elapsed() >= ROUTE_LOG_EVERY) {
            self.summarise();
        }
    }

    /// Logs the summary of the window so far, and ends it.
    fn summarise(&mut self) {
        let Some(t) = self.window else { return };
        let elapsed = t.elapsed();
        if self.requests > 0 {
            log::info!(
                "api: {} more route change(s) applied and {} refused in {} request(s) over {:.0?} (each at debug level)",
                self.applied,
                self.refused,
                self.requests,
                elapsed
            );
        }
        self.window = None;
        self.applied = 0;
        self.refused = 0;
        self.requests = 0;
    }
}

impl Drop for RouteLog {
    /// At shutdown the last window is summarised too.
    fn drop(&mut self) {
        self.summarise();
    }
}

struct CaptureSession {
    id: u64,
    iface: String,
    /// The worker port number of the interface.
    port: u16,
    limit: Option<u64>,
    /// Frames handed to the client or buffered for it.
    taken: u64,
    delivered: u64,
    buffer: VecDeque<CapturedFrameView>,
    running: bool,
    dropped: u64,
    last_read: Instant,
    /// Clock offsets: monotonic ns at start and wall-clock ns at start.
    mono0: u64,
    wall0: u64,
}

impl OpsState {
    pub fn new(config_path: Option<PathBuf>) -> OpsState {
        OpsState { config_path, next_capture_id: 1, ..OpsState::default() }
    }

    /// Background work between commands: moves captured frames from the
    /// workers to the capture's buffer and stops abandoned captures.
    pub fn poll(&mut self, router: &Router) -> bool {
        self.route_log.flush();
        let Some(c) = &mut self.capture else { return false };
        if c.last_read.elapsed() > CAPTURE_IDLE {
            log::info!("capture {} on {}: nobody reads it any more; stopped", c.id, c.iface);
            stop_taps(router);
            self.capture = None;
            return true;
        }
        if !c.running {
            return false;
        }
        let mut frames = Vec::new();
        for w in &router.workers {
            frames.extend(w.shared.capture.take());
        }
        if frames.is_empty() {
            return false;
        }
        frames.sort_by_key(|f| f.t_ns);
        for f in frames {
            if c.limit.is_some_and(|l| c.taken >= l) {
                break;
            }
            if c.buffer.len() >= CAPTURE_BUFFER {
                c.dropped += 1;
                continue;
            }
            c.taken += 1;
            c.buffer.push_back(CapturedFrameView {
                unix_ns: c.wall0.saturating_add(f.t_ns.saturating_sub(c.mono0)),
                dir: if f.dir == CaptureDir::Rx { "rx" } else { "tx" }.into(),
                interface: c.iface.clone(),
                orig_len: f.orig_len,
                data: to_hex(&f.data),
            });
        }
        if c.limit.is_some_and(|l| c.taken >= l) {
            stop_taps(router);
            c.running = false;
        }
        true
    }
}

fn stop_taps(router: &Router) {
    for w in &router.workers {
        w.shared.capture.stop();
        w.shared.capture.take();
    }
}

/// Runs one command.
pub fn execute(router: &mut Router, st: &mut OpsState, cmd: Command) -> Result<Reply, ApiError> {
    st.requests += 1;
    let changes = cmd.changes_state();
    let op = if changes { cmd.op() } else { String::new() };
    let route_ops = cmd.route_ops();
    let r = dispatch(router, st, cmd);
    if r.is_err() {
        st.request_errors += 1;
    }
    match (&r, route_ops) {
        (Ok(Reply::Done { message }), Some(n)) => st.route_log.note(&op, n, Ok(message)),
        (Err(e), Some(n)) => st.route_log.note(&op, n, Err(e)),
        (Err(e), None) if changes => log::warn!("api {op}: refused: {e}"),
        (Ok(Reply::Done { message }), None) if changes => log::info!("api {op}: {message}"),
        _ => {}
    }
    r
}

fn dispatch(router: &mut Router, st: &mut OpsState, cmd: Command) -> Result<Reply, ApiError> {
    Ok(match cmd {
        Command::Ping {} => Reply::done(format!("tern {} (protocol {VERSION})", env!("CARGO_PKG_VERSION"))),
        Command::Status {} => Reply::Status(status(router, st)),
        Command::InterfaceList {} => Reply::Interfaces(interface_list(router)),
        Command::InterfaceSet(a) => Reply::done(interface_set(router, &a)?),
        Command::AddressList(a) => Reply::Addresses(address_list(router, a.interface.as_deref())?),
        Command::AddressAdd(a) => Reply::done(address_add(router, &a.interface, &a.address)?),
        Command::AddressDel(a) => Reply::done(address_del(router, &a.interface, &a.address)?),
        Command::RouteList(a) => Reply::Routes(route_list(router, &a)?),
        Command::RouteGet(a) => Reply::Route(route_get(router, &a.address)?),
        Command::RouteAdd(a) => Reply::done(route_add(router, &a)?),
        Command::RouteDel(a) => Reply::done(route_del(router, &a.prefix, a.source.as_deref())?),
        Command::RouteBatch(a) => Reply::done(route_batch(router, &a)?),
        Command::RouteSummary {} => Reply::FibSummary(route_summary(router)),
        Command::NeighborList {} => Reply::Neighbors(neighbor_list(router)),
        Command::StatsShow(a) => Reply::Stats(stats_show(router, st, a.since_clear)),
        Command::StatsClear {} => {
            st.baseline = Some((
                tern_engine::clock::now_ns(),
                router.workers.iter().map(|w| w.shared.stats.snapshot()).collect(),
            ));
            st.lane_baseline = lane_counts(router);
            Reply::done("counters cleared for `stats show` (metrics keep counting)")
        }
        Command::WorkerList {} => Reply::Workers(worker_infos(&router.workers())),
        Command::GraphShow {} => Reply::Graph(graph_show(router)),
        Command::GraphDot {} => Reply::Text { text: graph_dot(router) },
        Command::AclList(a) => Reply::Acls(acl_list(router, a.name.as_deref())?),
        Command::AclSet(a) => Reply::done(acl_set(router, a)?),
        Command::TraceStart(a) => Reply::done(trace_start(router, st, a.count)?),
        Command::TraceShow {} => Reply::Trace(trace_show(router, st)),
        Command::TraceClear {} => {
            router.trace.clear();
            if let Some(lane) = router.xdp_lane_mut() {
                lane.trace_clear();
            }
            Reply::done("trace results cleared")
        }
        Command::TraceStop {} => {
            router.trace.arm(0);
            if let Some(lane) = router.xdp_lane_mut() {
                lane.trace_stop().map_err(|e| ApiError::internal(format!("cannot stop the XDP lane's trace: {e}")))?;
            }
            Reply::done("trace stopped")
        }
        Command::CaptureStart(a) => Reply::Capture(capture_start(router, st, &a)?),
        Command::CaptureRead(a) => Reply::Capture(capture_read(st, a.id)?),
        Command::CaptureStop(a) => Reply::Capture(capture_stop(router, st, a.id)?),
        Command::ConfigReload {} => Reply::Reload(config_reload(router, st)?),
        Command::ConfigShow {} => Reply::Text { text: config_show(router)? },
    })
}

fn ifname(ifs: &IfTable, index: u16) -> String {
    ifs.get(index).map_or_else(|| format!("if{index}"), |i| i.name.clone())
}

pub fn status(router: &Router, st: &OpsState) -> StatusInfo {
    StatusInfo {
        version: env!("CARGO_PKG_VERSION").into(),
        protocol: VERSION,
        uptime_ms: router.uptime_ns() / 1_000_000,
        workers: router.workers.len(),
        interfaces: router.plan.live_ifaces().count(),
        neighbors: router.neigh.len(),
        config: st.config_path.as_ref().map(|p| p.display().to_string()),
        fib: route_summary(router),
        sources: router.route_sources(),
        warnings: lane_warnings(router),
    }
}

/// `tern status`'s warnings: a bound rule set the XDP lane could not
/// compile, per interface, direction and family (as `interface show`).
pub fn lane_warnings(router: &Router) -> Vec<String> {
    interface_list(router)
        .into_iter()
        .flat_map(|i| {
            let name = i.name;
            i.lane_notes.into_iter().filter_map(move |n| n.strip_prefix("warning: ").map(|w| format!("{name}: {w}")))
        })
        .collect()
}

/// Whether port `k` of a worker is not its interface's own (a TAP of the
/// exception path, whose frames are the kernel's).
fn side_port(slot: &PortSlot) -> bool {
    slot.input.is_some()
}

/// The name `tern stats` lists port `k` of a worker under: its
/// interface's, or for a TAP the TAP device's. None for a port number not
/// open (a TAP removed by a reload: its counters are gone with it).
fn port_key(slots: &[Option<PortSlot>], k: usize, ifs: &IfTable) -> Option<String> {
    let slot = slots.get(k)?.as_ref()?;
    if side_port(slot) {
        return Some(slot.name.clone());
    }
    Some(ifname(ifs, slot.ifindex))
}

/// Adds one worker's port counters to a sum.
fn add_port(c: &mut PortCounters, p: &tern_engine::stats::PortCounters) {
    c.rx_packets += p.rx_packets.get();
    c.rx_bytes += p.rx_bytes.get();
    c.tx_packets += p.tx_packets.get();
    c.tx_bytes += p.tx_bytes.get();
    c.tx_dropped += p.tx_dropped.get();
    c.driver_rx_dropped += p.drv_rx_dropped.get();
    c.driver_errors += p.drv_errors.get();
}

/// Per-port counters summed over workers, by interface index (an
/// interface's own ports; TAPs are in [`tap_counters`]).
pub fn port_counters(workers: &[Arc<WorkerShared>]) -> HashMap<u16, PortCounters> {
    let mut m: HashMap<u16, PortCounters> = HashMap::new();
    for w in workers {
        let slots = w.ports();
        for (k, p) in w.stats.ports.iter().enumerate() {
            let Some(Some(slot)) = slots.get(k) else { continue };
            if side_port(slot) {
                continue;
            }
            add_port(m.entry(slot.ifindex).or_default(), p);
        }
    }
    m
}

/// The TAP exception path's ports summed over workers, by TAP device:
/// rx is what Linux sent, tx what tern punted to it.
pub fn tap_counters(workers: &[Arc<WorkerShared>]) -> HashMap<String, PortCounters> {
    let mut m: HashMap<String, PortCounters> = HashMap::new();
    for w in workers {
        let slots = w.ports();
        for (k, p) in w.stats.ports.iter().enumerate() {
            let Some(Some(slot)) = slots.get(k) else { continue };
            if side_port(slot) {
                add_port(m.entry(slot.name.clone()).or_default(), p);
            }
        }
    }
    m
}

/// What the XDP lane counted itself (it forwards and drops without the
/// workers seeing the packets): counters by (node, counter) and packets by
/// tern interface index. Empty when no device runs the lane.
#[derive(Clone, Debug, Default)]
pub struct LaneCounts {
    pub errors: HashMap<(&'static str, &'static str), u64>,
    pub ports: HashMap<u16, PortCounters>,
    /// The kernel programs' own outcomes, which no worker node counts: the
    /// XDP lane's forwards, punts and passes to Linux (node `xdp-lane`)
    /// and the AF_XDP steering programs' passes (node `xdp-steer`).
    pub own: Vec<LaneOwn>,
}

/// One of [`LaneCounts::own`].
#[derive(Clone, Debug)]
pub struct LaneOwn {
    pub node: &'static str,
    pub error: &'static str,
    /// "forward", "punt", "pass" or "info".
    pub kind: &'static str,
    pub help: &'static str,
    pub count: u64,
}

impl LaneOwn {
    pub fn stat(&self, base: Option<&LaneCounts>) -> ErrorStat {
        let old = base
            .and_then(|b| b.own.iter().find(|o| o.node == self.node && o.error == self.error))
            .map_or(0, |o| o.count);
        ErrorStat {
            node: self.node.into(),
            name: self.error.into(),
            kind: self.kind.into(),
            help: self.help.into(),
            count: self.count.saturating_sub(old),
        }
    }
}

pub fn lane_counts(router: &Router) -> LaneCounts {
    let mut out = LaneCounts::default();
    for (error, help, count) in router.xdp_steer_passes() {
        out.own.push(LaneOwn { node: "xdp-steer", error, kind: "pass", help, count });
    }
    let Some(lane) = router.xdp_lane() else { return out };
    for c in lane.counters() {
        *out.errors.entry((c.desc.node, c.desc.error)).or_default() += c.value;
        if c.desc.node == "xdp-lane" {
            out.own.push(LaneOwn {
                node: c.desc.node,
                error: c.desc.error,
                kind: c.desc.kind.label(),
                help: c.desc.help(),
                count: c.value,
            });
        }
    }
    for w in router.workers() {
        for ifindex in w.ports().into_iter().flatten().map(|s| s.ifindex) {
            if out.ports.contains_key(&ifindex) {
                continue;
            }
            let l = lane.port_stats(ifindex);
            out.ports.insert(
                ifindex,
                PortCounters {
                    rx_packets: l.rx_packets,
                    rx_bytes: l.rx_bytes,
                    tx_packets: l.tx_packets,
                    tx_bytes: l.tx_bytes,
                    ..PortCounters::default()
                },
            );
        }
    }
    out
}

/// The XDP lane's counters (minus `base`) for `tern stats`: its own
/// (forwarded, punts, passes) and its share of the drops and events, in
/// the program's order. Empty without the lane.
pub fn lane_stats(lane: &LaneCounts, base: Option<&LaneCounts>) -> Vec<LaneStat> {
    tern_xdp::lane::counters()
        .iter()
        .filter_map(|d| {
            let now = *lane.errors.get(&(d.node, d.error))?;
            let old = base.and_then(|b| b.errors.get(&(d.node, d.error))).copied().unwrap_or(0);
            Some(LaneStat {
                lane: "xdp".into(),
                node: d.node.into(),
                name: d.error.into(),
                kind: lane_kind(d.kind).into(),
                count: now.saturating_sub(old),
            })
        })
        .collect()
}

/// A lane counter's kind as `tern stats` and /metrics name it.
pub fn lane_kind(k: tern_xdp::lane::CounterKind) -> &'static str {
    use tern_xdp::lane::CounterKind;
    match k {
        CounterKind::Drop => "drop",
        CounterKind::Info => "info",
        CounterKind::Punt => "punt",
        CounterKind::Pass => "pass",
        CounterKind::Forward => "forward",
    }
}

/// Adds the lane's port counters (minus `base`) to the workers'.
pub fn add_lane_ports(m: &mut HashMap<u16, PortCounters>, lane: &LaneCounts, base: Option<&LaneCounts>) {
    for (i, l) in &lane.ports {
        let b = base.and_then(|b| b.ports.get(i)).cloned().unwrap_or_default();
        let c = m.entry(*i).or_default();
        c.rx_packets += l.rx_packets.saturating_sub(b.rx_packets);
        c.rx_bytes += l.rx_bytes.saturating_sub(b.rx_bytes);
        c.tx_packets += l.tx_packets.saturating_sub(b.tx_packets);
        c.tx_bytes += l.tx_bytes.saturating_sub(b.tx_bytes);
    }
}

/// The workers' port counters plus what the XDP lane forwarded itself.
pub fn port_counters_with_lane(router: &Router) -> HashMap<u16, PortCounters> {
    let mut m = port_counters(&router.workers());
    add_lane_ports(&mut m, &lane_counts(router), None);
    m
}

pub fn interface_list(router: &Router) -> Vec<InterfaceInfo> {
    let ifs = router.iftable();
    let counters = port_counters_with_lane(router);
    let acl_name = |i: Option<&String>| i.cloned();
    router
        .plan
        .live_ifaces()
        .map(|(idx, p)| {
            let live = ifs.get(idx);
            let lane = iface_lane(router, p);
            let mut notes = lane.notes.clone();
            if let Some(l) = router.xdp_lane()
                && lane.xdp_port.is_some()
            {
                for (dir, set) in [("in", &p.acl_in), ("out", &p.acl_out)] {
                    let Some(name) = set.as_deref() else { continue };
                    for (fam, why) in l.acl_not_compiled(name) {
                        notes.push(format!(
                            "warning: rule set {name} ({dir}, {fam}) is not compiled for the XDP lane ({why}): those \
                             packets go to the engine"
                        ));
                    }
                    for (fam, r, why) in l.acl_punted_rules(name) {
                        notes.push(format!(
                            "warning: rule set {name} ({dir}, {fam}) rule {r} is left to the engine ({why}): packets \
                             it would decide go there; the rest of the set stays in the XDP lane"
                        ));
                    }
                }
            }
            let (kind, parent, vlan, device, driver) = match &p.kind {
                crate::config::IfacePlanKind::Port { device, driver } => {
                    ("port", None, None, device.clone(), Some(format!("{driver:?}").to_lowercase()))
                }
                crate::config::IfacePlanKind::Vlan { parent, vid } => {
                    ("vlan", router.plan.ifaces.get(*parent).map(|pp| pp.name.clone()), Some(*vid), None, None)
                }
                #[allow(unreachable_patterns)]
                _ => ("gre", None, None, None, None),
            };
            InterfaceInfo {
                index: idx,
                name: p.name.clone(),
                kind: kind.into(),
                parent,
                vlan,
                device,
                driver,
                mac: live.map(|l| crate::neighbor::fmt_mac(l.mac)).unwrap_or_default(),
                mtu: live.map_or(0, |l| l.mtu),
                admin_up: p.up,
                up: live.is_some_and(|l| l.up),
                link: router.links.get(idx).map(|l| l.describe().to_string()),
                link_changes: router.links.get(idx).map(|l| l.changes),
                addresses: p
                    .v4
                    .iter()
                    .map(|n| format!("{}/{}", n.addr, n.len))
                    .chain(p.v6.iter().map(|n| format!("{}/{}", n.addr, n.len)))
                    .collect(),
                link_local: live.map(|l| l.v6_ll.to_string()).unwrap_or_default(),
                acl_in: acl_name(p.acl_in.as_ref()),
                acl_out: acl_name(p.acl_out.as_ref()),
                counters: if kind == "port" { Some(counters.get(&idx).cloned().unwrap_or_default()) } else { None },
                warnings: match &p.kind {
                    crate::config::IfacePlanKind::Port { device: Some(dev), driver } => {
                        let tap = router.plan.config.linux.tap_exception();
                        let lane = if tap && *driver == crate::config::Driver::Auto {
                            &crate::config::Driver::Afpacket
                        } else {
                            driver
                        };
                        crate::router::veth_warning(dev, lane).into_iter().collect()
                    }
                    _ => Vec::new(),
                },
                lane: lane.lane,
                lane_notes: notes,
            }
        })
        .collect()
}

/// The lane that receives an interface's packets (a VLAN's: its
/// parent's), the XDP lane's port when it is that one, and why.
pub struct IfaceLane {
    pub lane: Option<String>,
    pub xdp_port: Option<u16>,
    pub notes: Vec<String>,
}

pub fn iface_lane(router: &Router, p: &crate::config::IfacePlan) -> IfaceLane {
    use crate::config::{Driver, IfacePlanKind};
    let (device, driver) = match &p.kind {
        IfacePlanKind::Port { device, driver } => (device.as_deref(), *driver),
        IfacePlanKind::Vlan { parent, .. } => {
            return match router.plan.ifaces.get(*parent) {
                Some(pp) if !matches!(pp.kind, IfacePlanKind::Vlan { .. }) => iface_lane(router, pp),
                _ => IfaceLane { lane: None, xdp_port: None, notes: Vec::new() },
            };
        }
        #[allow(unreachable_patterns)]
        _ => return IfaceLane { lane: None, xdp_port: None, notes: Vec::new() },
    };
    let Some(dev) = device else {
        let lane = (driver == Driver::Memory).then(|| "memory".to_string());
        return IfaceLane { lane, xdp_port: None, notes: Vec::new() };
    };
    let devs = router.xdp_devices();
    let engine = devs.opened.get(dev).copied();
    let mut notes = Vec::new();
    if let Some(lane) = router.xdp_lane()
        && let Some(port) = lane.device_port(dev)
    {
        let mode = lane.devices().into_iter().find(|d| d.1 == port).and_then(|d| d.2);
        let lane_name = match mode {
            Some(tern_xdp::AttachMode::Skb) => "xdp generic",
            _ => "xdp native",
        };
        notes.push(format!(
            "the XDP lane forwards and drops here; what it cannot finish goes to the engine ({})",
            engine.unwrap_or("no socket")
        ));
        if !lane.sends(port) {
            notes.push(format!(
                "the XDP lane cannot send out of {dev} (its driver takes no redirected frames now; a veth needs XDP \
                 or GRO on its peer): packets routed out of it go through the engine"
            ));
        }
        return IfaceLane { lane: Some(lane_name.into()), xdp_port: Some(port), notes };
    }
    if let Some(why) = devs.not_on_lane.get(dev) {
        notes.push(format!("not on the XDP lane: {why}"));
    }
    if let Some(why) = devs.fallback.get(dev) {
        notes.push(format!("AF_XDP unavailable: {why}"));
    }
    let lane = engine.map(String::from).or_else(|| Some(format!("{driver:?}").to_lowercase()));
    IfaceLane { lane, xdp_port: None, notes }
}

/// Which lane evaluates rule set `set` bound on `p` in `direction`
/// ("in"/"out"), and why.
fn acl_lane(router: &Router, p: &crate::config::IfacePlan, set: &str, direction: &str) -> AclLaneView {
    let il = iface_lane(router, p);
    let view =
        |lane: String, why: String| AclLaneView { interface: p.name.clone(), direction: direction.into(), lane, why };
    let (Some(lane), Some(port)) = (router.xdp_lane(), il.xdp_port) else {
        let on = il.lane.unwrap_or_else(|| "the engine".into());
        return view("engine".into(), format!("{} is on {on}", p.name));
    };
    let nc = lane.acl_not_compiled(set);
    let sent = if direction == "out" {
        if lane.sends(port) {
            "for packets the XDP lane forwards out of it (the engine for the packets it sends)"
        } else {
            "(the XDP lane cannot send out of it: the engine sends and checks)"
        }
    } else {
        "(the engine for what the lane hands it)"
    };
    let why_nc = nc.iter().map(|(f, w)| format!("{f}: {w}")).collect::<Vec<_>>().join("; ");
    let punted = lane.acl_punted_rules(set);
    match nc.len() {
        0 if direction == "out" && !lane.sends(port) => view("engine".into(), sent.into()),
        0 if !punted.is_empty() => {
            let rules = punted.iter().map(|(f, r, w)| format!("rule {r} ({f}): {w}")).collect::<Vec<_>>().join("; ");
            view(
                "xdp".into(),
                format!("the XDP lane holds the set except {rules}: packets those rules would decide go to the engine"),
            )
        }
        0 => view("xdp".into(), format!("the XDP lane holds the whole set {sent}")),
        1 => {
            let other = if nc[0].0 == "IPv4" { "IPv6" } else { "IPv4" };
            view(
                format!("xdp ({other}), engine ({})", nc[0].0),
                format!("not compiled for the XDP lane: {why_nc}; those packets go to the engine"),
            )
        }
        _ => view(
            "engine".into(),
            format!("not compiled for the XDP lane: {why_nc}; packets that need it go to the engine"),
        ),
    }
}

fn parse_on_off(name: &str, r: &mut Router, up: bool) -> Result<String, ApiError> {
    let i = r.iface_by_name(name)?;
    Ok(if r.set_interface_up(i, up)? {
        format!("{name} is {}", if up { "up" } else { "down" })
    } else {
        format!("{name} was already {}", if up { "up" } else { "down" })
    })
}

pub fn interface_set(router: &mut Router, a: &InterfaceSetArgs) -> Result<String, ApiError> {
    let i = router.iface_by_name(&a.name)?;
    if a.up.is_none() && a.mtu.is_none() {
        return Err(ApiError::invalid("nothing to set: give up/down or an MTU"));
    }
    let mut said = Vec::new();
    if let Some(mtu) = a.mtu {
        // Checked before the state changes, so an invalid MTU changes nothing.
        router.set_interface_mtu(i, mtu)?;
        said.push(format!("{} mtu {mtu}", a.name));
    }
    if let Some(up) = a.up {
        said.push(parse_on_off(&a.name, router, up)?);
    }
    router.sync_config_iface(i);
    Ok(said.join("; "))
}

pub fn address_list(router: &Router, iface: Option<&str>) -> Result<Vec<AddressInfo>, ApiError> {
    if let Some(n) = iface {
        router.iface_by_name(n)?;
    }
    let ifs = router.iftable();
    let mut out = Vec::new();
    for f in ifs.ifs.iter().filter(|f| !f.is_removed() && iface.is_none_or(|n| n == f.name)) {
        for n in &f.v4 {
            out.push(AddressInfo {
                interface: f.name.clone(),
                address: format!("{}/{}", n.addr, n.len),
                family: "inet".into(),
                scope: "global".into(),
            });
        }
        for n in &f.v6 {
            out.push(AddressInfo {
                interface: f.name.clone(),
                address: format!("{}/{}", n.addr, n.len),
                family: "inet6".into(),
                scope: "global".into(),
            });
        }
        if !matches!(f.kind, IfKind::Port | IfKind::Vlan { .. }) {
            continue;
        }
        out.push(AddressInfo {
            interface: f.name.clone(),
            address: format!("{}/64", f.v6_ll),
            family: "inet6".into(),
            scope: "link".into(),
        });
    }
    Ok(out)
}

pub fn address_add(router: &mut Router, iface: &str, address: &str) -> Result<String, ApiError> {
    let i = router.iface_by_name(iface)?;
    let a = crate::live::parse_if_addr(address)?;
    let p = &router.plan.ifaces[usize::from(i)];
    let (mut v4, mut v6) = (p.v4.clone(), p.v6.clone());
    if p.v4.iter().any(|n| std::net::IpAddr::V4(n.addr) == a.addr())
        || p.v6.iter().any(|n| std::net::IpAddr::V6(n.addr) == a.addr())
    {
        return Err(ApiError::invalid(format!("{iface} already has {}", a.addr())));
    }
    match a {
        crate::live::IfAddr::V4(n) => v4.push(n),
        crate::live::IfAddr::V6(n) => v6.push(n),
    }
    router.set_interface_addresses(i, v4, v6)?;
    router.sync_config_iface(i);
    Ok(format!("{a} added to {iface}"))
}

pub fn address_del(router: &mut Router, iface: &str, address: &str) -> Result<String, ApiError> {
    let i = router.iface_by_name(iface)?;
    // "10.0.0.1/24" or just "10.0.0.1".
    let addr: IpAddr = address
        .split('/')
        .next()
        .unwrap_or_default()
        .parse()
        .map_err(|_| ApiError::invalid(format!("invalid address {}", crate::config::quote(address))))?;
    let p = &router.plan.ifaces[usize::from(i)];
    let v4: Vec<_> = p.v4.iter().filter(|n| IpAddr::V4(n.addr) != addr).copied().collect();
    let v6: Vec<_> = p.v6.iter().filter(|n| IpAddr::V6(n.addr) != addr).copied().collect();
    if v4.len() == p.v4.len() && v6.len() == p.v6.len() {
        return Err(ApiError::not_found(format!("{iface} has no address {addr}")));
    }
    router.set_interface_addresses(i, v4, v6)?;
    router.sync_config_iface(i);
    Ok(format!("{addr} removed from {iface}"))
}

fn nh_kind(k: NhKind) -> &'static str {
    match k {
        NhKind::None => "none",
        NhKind::Unicast => "unicast",
        NhKind::Glean => "glean",
        NhKind::Local => "local",
        NhKind::Blackhole => "blackhole",
        NhKind::Unreachable => "unreachable",
        NhKind::Prohibit => "prohibit",
        NhKind::Ecmp => "ecmp",
    }
}

pub fn route_view(d: &RouteDetail, ifs: &IfTable) -> RouteInfo {
    let (kind, via, interface) = match &d.target {
        RouteTarget::Via { gw, ifindex } => ("via", vec![gw.to_string()], ifindex.map(|i| ifname(ifs, i))),
        RouteTarget::Connected { ifindex } => ("connected", Vec::new(), Some(ifname(ifs, *ifindex))),
        RouteTarget::Local { ifindex } => ("local", Vec::new(), Some(ifname(ifs, *ifindex))),
        RouteTarget::Blackhole => ("blackhole", Vec::new(), None),
        RouteTarget::Unreachable => ("unreachable", Vec::new(), None),
        RouteTarget::Prohibit => ("prohibit", Vec::new(), None),
        RouteTarget::Ecmp(m) => ("ecmp", m.iter().map(|(g, _)| g.to_string()).collect(), None),
    };
    RouteInfo {
        prefix: d.prefix.to_string(),
        source: d.source.to_string(),
        distance: d.distance,
        metric: d.metric,
        kind: kind.into(),
        via,
        interface,
        best: d.best,
        active: d.active,
        nexthops: d
            .nexthops
            .iter()
            .map(|n| NextHopInfo {
                kind: nh_kind(n.kind).into(),
                interface: matches!(n.kind, NhKind::Unicast | NhKind::Glean | NhKind::Local)
                    .then(|| ifname(ifs, n.ifindex)),
                gateway: (n.kind == NhKind::Unicast).then(|| n.gw.to_string()),
                mac: n.mac.map(crate::neighbor::fmt_mac),
            })
            .collect(),
    }
}

pub fn parse_source(s: &str) -> Result<Source, ApiError> {
    Source::ALL.into_iter().find(|x| x.to_string() == s).ok_or_else(|| {
        let all: Vec<String> = Source::ALL.iter().map(ToString::to_string).collect();
        ApiError::invalid(format!("unknown route source {} (one of {})", crate::config::quote(s), all.join(", ")))
    })
}

fn parse_prefix(s: &str) -> Result<Prefix, ApiError> {
    s.parse::<Prefix>()
        .map_err(|e| ApiError::invalid(crate::config::bounded(format!("{}: {e}", crate::config::quote(s)))))
}

pub fn route_list(router: &Router, a: &RouteListArgs) -> Result<RouteList, ApiError> {
    let within = a.prefix.as_deref().map(parse_prefix).transpose()?;
    let source = a.source.as_deref().map(parse_source).transpose()?;
    let limit = a.limit.unwrap_or(usize::MAX);
    let ifs = router.iftable();
    let mut out = RouteList::default();
    for d in router.fib.routes() {
        if within.is_some_and(|w| !w.covers(&d.prefix)) || source.is_some_and(|s| s != d.source) {
            continue;
        }
        if out.routes.len() >= limit {
            out.truncated += 1;
            continue;
        }
        out.routes.push(route_view(&d, &ifs));
    }
    Ok(out)
}

pub fn route_get(router: &Router, address: &str) -> Result<Option<RouteInfo>, ApiError> {
    let addr: IpAddr =
        address.parse().map_err(|_| ApiError::invalid(format!("invalid address {}", crate::config::quote(address))))?;
    let ifs = router.iftable();
    Ok(router.route_get(addr).map(|d| route_view(&d, &ifs)))
}

/// Resolves route arguments into a FIB route (the config's rules).
pub fn route_spec(router: &Router, a: &RouteAddArgs) -> Result<(Prefix, RouteTarget, RouteAttrs), ApiError> {
    route_spec_in(router, a, &mut GatewaysChecked::default())
}

/// Next hops (with their interface) that passed the next-hop rules in
/// this request: a batch checks each distinct gateway once, not once per
/// route (the rules depend on nothing else, and nothing changes the
/// router while a request is checked). The last one is compared first:
/// a table's routes mostly share a few gateways, in runs.
#[derive(Default)]
struct GatewaysChecked {
    last: Option<(IpAddr, Option<u16>)>,
    seen: rustc_hash::FxHashSet<(IpAddr, Option<u16>)>,
}

impl GatewaysChecked {
    fn known(&mut self, k: (IpAddr, Option<u16>)) -> bool {
        if self.last == Some(k) {
            return true;
        }
        let seen = self.seen.contains(&k);
        if seen {
            self.last = Some(k);
        }
        seen
    }

    fn insert(&mut self, k: (IpAddr, Option<u16>)) {
        self.last = Some(k);
        self.seen.insert(k);
    }
}

fn route_spec_in(
    router: &Router,
    a: &RouteAddArgs,
    checked: &mut GatewaysChecked,
) -> Result<(Prefix, RouteTarget, RouteAttrs), ApiError> {
    let prefix = parse_prefix(&a.prefix)?;
    let via = match &a.via {
        Some(v) => Some(
            v.parse::<IpAddr>()
                .map_err(|_| ApiError::invalid(format!("invalid address {}", crate::config::quote(v))))?,
        ),
        None => None,
    };
    if let Some(v) = via
        && v.is_ipv4() != prefix.is_v4()
    {
        return Err(ApiError::invalid(format!("next hop {v} is not of the prefix's address family")));
    }
    let ifindex = a.interface.as_deref().map(|n| router.iface_by_name(n)).transpose()?;
    // The configuration's rules for next hops (one validator for the file,
    // a reload and the API).
    if let Some(gw) = via
        && !checked.known((gw, ifindex))
    {
        // The FIB's connected subnets and local addresses include what
        // the kernel mirror learned from Linux's addresses.
        let reached = router.fib.connected_interface(gw).is_some();
        crate::config::check_gateway(&router.plan.ifaces, gw, ifindex, reached).map_err(ApiError::invalid)?;
        if let Some(d) = router.fib.route_get(gw)
            && d.prefix == Prefix::host(gw)
            && let RouteTarget::Local { ifindex } = d.target
        {
            return Err(ApiError::invalid(format!(
                "{gw} is tern's own address (on {}): a route via it would be a black hole",
                ifname(&router.iftable(), ifindex)
            )));
        }
        checked.insert((gw, ifindex));
    }
    let kind = a.kind.as_deref().unwrap_or("unicast");
    let target = match (kind, via, ifindex) {
        ("unicast", Some(gw), ifindex) => RouteTarget::Via { gw, ifindex },
        ("unicast", None, Some(ifindex)) => RouteTarget::Connected { ifindex },
        ("unicast", None, None) => return Err(ApiError::invalid("a unicast route needs via or interface")),
        ("blackhole" | "unreachable" | "prohibit", None, None) => match kind {
            "blackhole" => RouteTarget::Blackhole,
            "unreachable" => RouteTarget::Unreachable,
            _ => RouteTarget::Prohibit,
        },
        ("blackhole" | "unreachable" | "prohibit", _, _) => {
            return Err(ApiError::invalid(format!("a {kind} route takes no via or interface")));
        }
        (k, _, _) => {
            return Err(ApiError::invalid(format!(
                "unknown route type {} (unicast, blackhole, unreachable, prohibit)",
                crate::config::quote(k)
            )));
        }
    };
    Ok((prefix, target, RouteAttrs { distance: a.distance, metric: a.metric.unwrap_or(0) }))
}

/// Adds a route of source `api` (replacing the api route of that prefix).
pub fn route_add(router: &mut Router, a: &RouteAddArgs) -> Result<String, ApiError> {
    let (prefix, target, attrs) = route_spec(router, a)?;
    router.add_route(Source::Api, prefix, target, attrs)?;
    let best = router.fib.route_get(prefix.addr()).filter(|d| d.prefix == prefix);
    Ok(match best {
        None => format!("added {prefix} (inactive: its gateway is not reachable yet)"),
        Some(d) if d.source != Source::Api => {
            format!("added {prefix} (not used: the {} route of distance {} wins)", d.source, d.distance)
        }
        Some(_) => format!("added {prefix}"),
    })
}

/// Removes and adds api routes, all or nothing: every operation is
/// checked first (the rules of `route_add` and `route_del`); they are
/// then applied as one FIB batch (published once), which the FIB undoes
/// if it refuses one (`FibWriter::apply_all_or_nothing`). Deletes go
/// first, then adds.
pub fn route_batch(router: &mut Router, a: &RouteBatchArgs) -> Result<String, ApiError> {
    if a.add.is_empty() && a.del.is_empty() {
        return Err(ApiError::invalid("an empty batch: give routes to add or delete"));
    }
    let t0 = std::time::Instant::now();
    let at = |what: &str, i: usize, e: ApiError| ApiError::new(e.code, format!("{what}[{i}]: {}", e.message));
    let mut ops = Vec::with_capacity(a.add.len() + a.del.len());
    let mut deleted = rustc_hash::FxHashSet::default();
    for (i, d) in a.del.iter().enumerate() {
        let prefix = parse_prefix(&d.prefix).map_err(|e| at("del", i, e))?;
        if let Some(s) = d.source.as_deref()
            && parse_source(s).map_err(|e| at("del", i, e))? != Source::Api
        {
            return Err(at("del", i, ApiError::refused("a batch removes api routes only")));
        }
        if !router.fib.has_route(Source::Api, prefix) || !deleted.insert(prefix) {
            return Err(at("del", i, ApiError::not_found(format!("no api route for {prefix}"))));
        }
        ops.push(tern_fib::RouteOp::Del(Source::Api, prefix));
    }
    let mut checked = GatewaysChecked::default();
    for (i, r) in a.add.iter().enumerate() {
        let (prefix, target, attrs) = route_spec_in(router, r, &mut checked).map_err(|e| at("add", i, e))?;
        ops.push(tern_fib::RouteOp::Add(Source::Api, prefix, target, attrs));
    }
    let t1 = std::time::Instant::now();
    // One FIB batch, published once; the FIB puts every route back as it
    // was if it refuses one (a full table).
    let applied = router.fib.apply_all_or_nothing(ops);
    log::debug!(
        "route batch of {}: checks {} us, apply {} us",
        a.add.len() + a.del.len(),
        (t1 - t0).as_micros(),
        t1.elapsed().as_micros()
    );
    if let Err((i, e)) = applied {
        let at = match i {
            i if i < a.del.len() => format!("del[{i}]: "),
            i if i < a.del.len() + a.add.len() => format!("add[{}]: ", i - a.del.len()),
            _ => String::new(),
        };
        let code = if matches!(e, tern_fib::FibError::Full(_)) { ErrorCode::Internal } else { ErrorCode::Invalid };
        return Err(ApiError::new(code, format!("{at}{e}; nothing of the batch was applied")));
    }
    Ok(format!("batch applied: {} api route(s) added, {} removed", a.add.len(), a.del.len()))
}

/// Removes a route; `source` is "api" (default) or "static".
pub fn route_del(router: &mut Router, prefix: &str, source: Option<&str>) -> Result<String, ApiError> {
    let prefix = parse_prefix(prefix)?;
    let source = source.map(parse_source).transpose()?.unwrap_or(Source::Api);
    if !matches!(source, Source::Api | Source::Static) {
        return Err(ApiError::refused(format!(
            "{source} routes belong to their source (interfaces, route files, the kernel); only api and static routes are removed here"
        )));
    }
    if let Err(e) = router.del_route(source, prefix) {
        if source == Source::Api && router.plan.routes.iter().any(|r| r.prefix == prefix) {
            return Err(ApiError::not_found(format!(
                "no api route for {prefix}; the configuration's static route stays unless you say `source static`"
            )));
        }
        return Err(e);
    }
    if source == Source::Static {
        router.forget_static_route(prefix);
    }
    Ok(format!("removed {source} route {prefix}"))
}

pub fn route_summary(router: &Router) -> FibSummary {
    let s = router.fib.stats();
    FibSummary {
        v4_routes: s.v4_routes,
        v6_routes: s.v6_routes,
        rib_entries: s.rib_entries,
        nexthops: s.nexthops,
        ecmp_groups: s.ecmp_groups,
        fib_bytes: s.fib_bytes,
        adds: s.adds,
        dels: s.dels,
        errors: s.errors,
        fib_updates: s.fib_updates,
    }
}

pub fn neighbor_list(router: &Router) -> Vec<NeighborEntry> {
    let ifs = router.iftable();
    router
        .neigh
        .list(tern_engine::clock::now_ns())
        .into_iter()
        .map(|n| NeighborEntry {
            interface: ifname(&ifs, n.ifindex),
            ip: n.ip.to_string(),
            mac: n.mac,
            state: format!("{:?}", n.state).to_lowercase(),
            age_ms: n.age_ms,
        })
        .collect()
}

/// Per-node figures over all workers, minus `base` when given.
pub fn node_stats(workers: &[Arc<WorkerShared>], base: Option<&[StatsSnapshot]>) -> Vec<NodeStats> {
    let Some(w0) = workers.first() else { return Vec::new() };
    let tsc = tern_intrin::tsc_per_ns();
    let mut sums: Vec<[u64; 3]> = vec![[0; 3]; w0.graph.nodes.len()];
    for (wi, w) in workers.iter().enumerate() {
        let b = base.and_then(|b| b.get(wi));
        for (i, n) in w.stats.nodes.iter().enumerate() {
            let Some(s) = sums.get_mut(i) else { continue };
            let old = b.and_then(|b| b.nodes.get(i)).copied().unwrap_or([0; 3]);
            s[0] += n.calls.get().saturating_sub(old[0]);
            s[1] += n.packets.get().saturating_sub(old[1]);
            s[2] += n.clocks.get().saturating_sub(old[2]);
        }
    }
    w0.graph
        .nodes
        .iter()
        .zip(sums)
        .map(|(d, [calls, packets, cycles])| {
            let per = |x: f64| if packets > 0 { x / packets as f64 } else { 0.0 };
            NodeStats {
                node: d.name.into(),
                calls,
                packets,
                packets_per_call: if calls > 0 { packets as f64 / calls as f64 } else { 0.0 },
                cycles,
                cycles_per_packet: per(cycles as f64),
                ns_per_packet: per(cycles as f64 / tsc),
            }
        })
        .collect()
}

/// Every drop reason and event counter over all workers.
pub fn error_stats(workers: &[Arc<WorkerShared>], base: Option<&[StatsSnapshot]>) -> Vec<ErrorStat> {
    let Some(w0) = workers.first() else { return Vec::new() };
    let mut sums = vec![0u64; w0.graph.errors.len()];
    for (wi, w) in workers.iter().enumerate() {
        let b = base.and_then(|b| b.get(wi));
        for (i, c) in w.stats.errors.iter().enumerate() {
            if let Some(s) = sums.get_mut(i) {
                *s += c.get().saturating_sub(b.and_then(|b| b.errors.get(i)).copied().unwrap_or(0));
            }
        }
    }
    w0.graph
        .errors
        .iter()
        .zip(sums)
        .map(|(e, count)| ErrorStat {
            node: e.node.into(),
            name: e.name.into(),
            kind: format!("{:?}", e.kind).to_lowercase(),
            help: e.help.into(),
            count,
        })
        .collect()
}

pub fn stats_show(router: &Router, st: &OpsState, since_clear: bool) -> StatsReport {
    let workers = router.workers();
    let base = if since_clear { st.baseline.as_ref() } else { None };
    let base_snap = base.map(|(_, b)| b.as_slice());
    let now = tern_engine::clock::now_ns();
    let ifs = router.iftable();
    let lane = lane_counts(router);
    let lane_base = if since_clear && base.is_some() { Some(&st.lane_baseline) } else { None };
    let mut ports = port_counters(&workers);
    if base.is_none() {
        add_lane_ports(&mut ports, &lane, None);
    }
    let mut interfaces: Vec<InterfaceCounters> =
        ports.into_iter().map(|(i, c)| InterfaceCounters { interface: ifname(&ifs, i), counters: c }).collect();
    interfaces.extend(tap_counters(&workers).into_iter().map(|(n, c)| InterfaceCounters { interface: n, counters: c }));
    interfaces.sort_by(|a, b| a.interface.cmp(&b.interface));
    if let Some(b) = base_snap {
        // Per-port baselines: subtract each worker's saved port counters.
        let mut old: HashMap<String, PortCounters> = HashMap::new();
        for (w, snap) in workers.iter().zip(b) {
            let slots = w.ports();
            for (k, p) in snap.ports.iter().enumerate() {
                let Some(key) = port_key(&slots, k, &ifs) else { continue };
                let c = old.entry(key).or_default();
                c.rx_packets += p.rx_packets;
                c.rx_bytes += p.rx_bytes;
                c.tx_packets += p.tx_packets;
                c.tx_bytes += p.tx_bytes;
                c.tx_dropped += p.tx_dropped;
                c.driver_rx_dropped += p.drv_rx_dropped;
                c.driver_errors += p.drv_errors;
            }
        }
        for l in &mut interfaces {
            if let Some(o) = old.get(&l.interface) {
                let c = &mut l.counters;
                c.rx_packets = c.rx_packets.saturating_sub(o.rx_packets);
                c.rx_bytes = c.rx_bytes.saturating_sub(o.rx_bytes);
                c.tx_packets = c.tx_packets.saturating_sub(o.tx_packets);
                c.tx_bytes = c.tx_bytes.saturating_sub(o.tx_bytes);
                c.tx_dropped = c.tx_dropped.saturating_sub(o.tx_dropped);
                c.driver_rx_dropped = c.driver_rx_dropped.saturating_sub(o.driver_rx_dropped);
                c.driver_errors = c.driver_errors.saturating_sub(o.driver_errors);
            }
        }
        // The lane's share since the clear.
        let mut extra = HashMap::new();
        add_lane_ports(&mut extra, &lane, lane_base);
        let extra: HashMap<String, PortCounters> = extra.into_iter().map(|(i, c)| (ifname(&ifs, i), c)).collect();
        for l in &mut interfaces {
            if let Some(e) = extra.get(&l.interface) {
                let c = &mut l.counters;
                c.rx_packets += e.rx_packets;
                c.rx_bytes += e.rx_bytes;
                c.tx_packets += e.tx_packets;
                c.tx_bytes += e.tx_bytes;
            }
        }
    }
    for (name, _, n) in router.link_states() {
        if let Some(l) = interfaces.iter_mut().find(|l| l.interface == name) {
            l.counters.link_changes = n;
        }
    }
    let mut errors = error_stats(&workers, base_snap);
    for e in &mut errors {
        let key = (e.node.as_str(), e.name.as_str());
        let now = lane.errors.iter().find(|(k, _)| **k == key).map_or(0, |(_, v)| *v);
        let old = lane_base.and_then(|b| b.errors.iter().find(|(k, _)| **k == key)).map_or(0, |(_, v)| *v);
        e.count += now.saturating_sub(old);
    }
    errors.extend(lane.own.iter().map(|o| o.stat(lane_base)));
    StatsReport {
        interval_ms: match base {
            Some((t, _)) => now.saturating_sub(*t) / 1_000_000,
            None => router.uptime_ns() / 1_000_000,
        },
        nodes: node_stats(&workers, base_snap),
        errors,
        interfaces,
        lanes: lane_stats(&lane, lane_base),
    }
}

pub fn worker_infos(workers: &[Arc<WorkerShared>]) -> Vec<WorkerInfo> {
    workers
        .iter()
        .map(|w| {
            let s = w.stats.snapshot();
            let rx: u64 = s.ports.iter().map(|p| p.rx_packets).sum();
            let pct = |a: u64, b: u64| if b > 0 { 100.0 * a as f64 / b as f64 } else { 0.0 };
            let idle_pct = pct(s.idle_ns.min(s.uptime_ns), s.uptime_ns);
            WorkerInfo {
                id: w.id,
                ports: w.ports().into_iter().flatten().map(|s| s.name).collect(),
                uptime_ms: s.uptime_ns / 1_000_000,
                loops: s.loops,
                busy_loops: s.busy_loops,
                idle_ms: s.idle_ns / 1_000_000,
                load_pct: if s.uptime_ns > 0 { 100.0 - idle_pct } else { 0.0 },
                idle_pct,
                busy_loops_pct: pct(s.busy_loops, s.loops),
                rx_packets: rx,
                avg_batch: if s.busy_loops > 0 { rx as f64 / s.busy_loops as f64 } else { 0.0 },
                batch_hist: (0..BATCH_BUCKETS)
                    .map(|b| BatchBucket {
                        min: 1 << b,
                        max: if b + 1 == BATCH_BUCKETS { u64::MAX } else { (1 << (b + 1)) - 1 },
                        loops: s.batch_hist[b],
                    })
                    .collect(),
                loop_gaps: {
                    let (hist, _) = w.gaps.snapshot();
                    hist.iter()
                        .enumerate()
                        .map(|(b, &loops)| GapBucket {
                            below_us: tern_engine::GAP_BOUNDS_NS.get(b).map(|ns| ns / 1000),
                            loops,
                        })
                        .collect()
                },
                max_loop_gap_us: w.gaps.max_ns.get() as f64 / 1e3,
            }
        })
        .collect()
}

pub fn graph_show(router: &Router) -> GraphView {
    let Some(w) = router.workers.first() else { return GraphView::default() };
    let g = &w.shared.graph;
    GraphView {
        nodes: g
            .nodes
            .iter()
            .map(|n| GraphNode {
                name: n.name.into(),
                nexts: n.nexts.iter().map(|s| (*s).into()).collect(),
                errors: g.errors.iter().filter(|e| e.node == n.name).map(|e| e.name.into()).collect(),
            })
            .collect(),
    }
}

pub fn graph_dot(router: &Router) -> String {
    router.workers.first().map(|w| w.shared.graph.to_dot()).unwrap_or_default()
}

pub fn acl_list(router: &Router, name: Option<&str>) -> Result<Vec<AclView>, ApiError> {
    if let Some(n) = name
        && !router.plan.acls.iter().any(|s| s.name == n)
    {
        return Err(ApiError::not_found(format!("no rule set named {}", crate::config::quote(n))));
    }
    let out = router
        .plan
        .acls
        .iter()
        .filter(|s| name.is_none_or(|n| n == s.name))
        .map(|s| {
            let bound = |f: &dyn Fn(&crate::config::IfacePlan) -> Option<&String>| {
                router.plan.ifaces.iter().filter(|i| f(i) == Some(&s.name)).map(|i| i.name.clone()).collect()
            };
            let hits = router.acl_hits(&s.name);
            let rules = s
                .rules
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let mut v = match toml::Value::try_from(r) {
                        Ok(toml::Value::Table(t)) => t,
                        _ => toml::map::Map::new(),
                    };
                    v.remove("action");
                    let comment = v.remove("comment").and_then(|c| c.as_str().map(String::from));
                    let matches = v.iter().map(|(k, val)| format!("{k} {val}")).collect::<Vec<_>>().join(" ");
                    let h = hits.as_ref().and_then(|h| h.get(i)).copied().unwrap_or_default();
                    AclRuleView {
                        index: i,
                        action: format!("{:?}", r.action).to_lowercase(),
                        matches: if matches.is_empty() { "any".into() } else { matches },
                        comment,
                        packets: h.0,
                        bytes: h.1,
                    }
                })
                .collect();
            let d = hits.as_ref().and_then(|h| h.get(s.rules.len())).copied().unwrap_or_default();
            AclView {
                name: s.name.clone(),
                default: format!("{:?}", s.default).to_lowercase(),
                interfaces_in: bound(&|i| i.acl_in.as_ref()),
                interfaces_out: bound(&|i| i.acl_out.as_ref()),
                rules,
                default_packets: d.0,
                default_bytes: d.1,
                counting: hits.is_some(),
                lanes: router
                    .plan
                    .live_ifaces()
                    .flat_map(|(_, i)| {
                        let mut v = Vec::new();
                        if i.acl_in.as_ref() == Some(&s.name) {
                            v.push(acl_lane(router, i, &s.name, "in"));
                        }
                        if i.acl_out.as_ref() == Some(&s.name) {
                            v.push(acl_lane(router, i, &s.name, "out"));
                        }
                        v
                    })
                    .collect(),
            }
        })
        .collect();
    Ok(out)
}

/// Replaces or adds a rule set, and binds it to the interfaces named, all
/// or nothing.
pub fn acl_set(router: &mut Router, a: AclSetArgs) -> Result<String, ApiError> {
    let idx = |l: &[String]| l.iter().map(|n| router.iface_by_name(n)).collect::<Result<Vec<u16>, _>>();
    let (ins, outs) = (idx(&a.bind_in)?, idx(&a.bind_out)?);
    let mut msg = router.replace_rule_set_bound(a.set, &ins, &outs)?;
    for (l, dir) in [(&a.bind_in, "in"), (&a.bind_out, "out")] {
        if !l.is_empty() {
            msg.push_str(&format!("; bound {dir} on {}", l.join(", ")));
        }
    }
    Ok(msg)
}

pub fn trace_start(router: &mut Router, st: &mut OpsState, count: u32) -> Result<String, ApiError> {
    if count == 0 || count > 10_000 {
        return Err(ApiError::invalid(format!("trace {count} packets: need 1..=10000")));
    }
    let started_ns = tern_engine::clock::now_ns();
    let started_mono_ns = monotonic_ns();
    // The lane first: if it refuses, nothing has changed.
    let lane = match router.xdp_lane_mut() {
        Some(lane) => {
            lane.trace_arm(count).map_err(|e| ApiError::internal(format!("cannot arm the XDP lane's trace: {e}")))?;
            st.trace_lane_lost_at_start = lane.counter("xdp-lane", "trace-lost");
            " of each lane (the XDP lane's and the engine's)"
        }
        None => "",
    };
    router.trace.clear();
    st.trace_started_ns = started_ns;
    st.trace_started_mono_ns = started_mono_ns;
    router.trace.arm(count);
    Ok(format!("tracing the next {count} packets{lane}; `tern trace show` prints them"))
}

fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// Packets traced by both lanes, in the order they arrived. A packet the
/// XDP lane punts appears twice: as the lane saw it, and as the engine
/// traced it (while the engine's budget lasts). Every packet a lane marked
/// is listed, or counted as still in flight or as lost.
pub fn trace_show(router: &mut Router, st: &OpsState) -> TraceView {
    let ifs = router.iftable();
    let (mut recs, in_flight, mut lost) = router.trace.peek_counted();
    recs.sort_by_key(|r| r.seq);
    let mut remaining = router.trace.remaining();
    let mut packets: Vec<TraceEntry> = recs
        .into_iter()
        .map(|r| TraceEntry {
            seq: r.seq,
            lane: "engine".into(),
            worker: r.worker,
            interface: ifname(&ifs, r.rx_if),
            len: r.len,
            at_ms: r.t_ns.saturating_sub(st.trace_started_ns) as f64 / 1e6,
            summary: summarize(&r.head),
            head: to_hex(&r.head),
            hops: r
                .hops
                .into_iter()
                .map(|h| TraceHopView { node: h.node.into(), next: h.next.into(), notes: h.notes })
                .collect(),
            fate: r.fate,
        })
        .collect();
    if let Some(lane) = router.xdp_lane_mut() {
        let traced = lane.traces();
        packets.extend(traced.iter().enumerate().map(|(i, t)| lane_trace_entry(&ifs, st, i as u64, t)));
        remaining += lane.trace_remaining();
        // Records the program could not write (its ring was full).
        lost += lane.counter("xdp-lane", "trace-lost").saturating_sub(st.trace_lane_lost_at_start);
    }
    packets.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    TraceView { remaining, packets, in_flight, lost }
}

/// One packet as the XDP lane traced it: one step, its verdict, and for a
/// forwarded packet the rewrite (MACs, VLAN, TTL, GRE).
fn lane_trace_entry(ifs: &IfTable, st: &OpsState, seq: u64, t: &tern_xdp::lane::LaneTrace) -> TraceEntry {
    use tern_xdp::lane::TraceVerdict;
    let port_name = |port: u16| {
        ifs.ifs
            .iter()
            .find(|f| f.port == port && matches!(f.kind, IfKind::Port))
            .map_or_else(|| format!("port {port}"), |f| f.name.clone())
    };
    let why = || t.reason_name().map_or_else(|| format!("counter {}", t.reason), |(n, e)| format!("{n}/{e}"));
    let (next, notes, fate) = match t.verdict {
        TraceVerdict::Forwarded => {
            let mut notes = Vec::new();
            let mut out = String::from("?");
            if let Some(rw) = &t.rewrite {
                out = port_name(rw.tx_port);
                notes.push(format!(
                    "rewrite {} > {}",
                    crate::neighbor::fmt_mac(rw.src_mac),
                    crate::neighbor::fmt_mac(rw.dst_mac)
                ));
                if rw.dec_ttl {
                    notes.push(format!("{} - 1", if rw.v6 { "hop limit" } else { "ttl" }));
                }
                if rw.tx_vid != 0 {
                    notes.push(format!("vlan {} pushed", rw.tx_vid));
                }
                if let Some((src, dst)) = rw.gre {
                    notes.push(format!("gre {src} > {dst}"));
                }
            }
            if t.decap {
                notes.insert(0, "gre decapsulated".into());
            }
            ("tx", notes, format!("tx {out}"))
        }
        TraceVerdict::Dropped => ("drop", Vec::new(), format!("drop: {}", why())),
        TraceVerdict::Punted => ("engine", vec![why()], format!("to the engine: {}", why())),
        TraceVerdict::Passed => ("linux", vec![why()], format!("to Linux: {}", why())),
        TraceVerdict::Unknown(v) => ("?", Vec::new(), format!("verdict {v}")),
    };
    TraceEntry {
        seq,
        lane: "xdp".into(),
        worker: u16::from(t.cpu),
        interface: ifname(ifs, t.rx_if),
        len: t.len as usize,
        at_ms: t.t_ns.saturating_sub(st.trace_started_mono_ns) as f64 / 1e6,
        summary: summarize(&t.head),
        head: to_hex(&t.head),
        hops: vec![TraceHopView { node: "xdp-lane".into(), next: next.into(), notes }],
        fate,
    }
}

/// A one-line decode of a frame's first bytes (Ethernet, 802.1Q, ARP,
/// IPv4, IPv6 and the transport ports), for trace listings.
pub fn summarize(f: &[u8]) -> String {
    tern_wire::pretty::summary(f).to_string()
}

pub fn capture_start(router: &mut Router, st: &mut OpsState, a: &CaptureStartArgs) -> Result<CaptureBatch, ApiError> {
    // An interface (its port's rx/tx frames) or a graph node (the packets
    // entering it).
    let node = match router.plan.iface_index(&a.target) {
        Some(_) => None,
        None => Some(router.workers.first().and_then(|w| w.shared.graph.node_id(&a.target)).ok_or_else(|| {
            ApiError::not_found(format!("no interface or node named {}", crate::config::quote(&a.target)))
        })?),
    };
    let port = match node {
        Some(_) => usize::from(u16::MAX),
        None => {
            let ifindex = router.plan.iface_index(&a.target).unwrap_or_default();
            router
                .workers
                .first()
                .and_then(|w| {
                    w.shared
                        .ports()
                        .iter()
                        .position(|s| s.as_ref().is_some_and(|s| s.ifindex == ifindex && !side_port(s)))
                })
                .ok_or_else(|| {
                    ApiError::refused(format!("{} has no port of its own (capture its parent interface)", a.target))
                })?
        }
    };
    let dirs = match a.direction.as_deref().unwrap_or("both") {
        "rx" | "in" => CAPTURE_RX,
        "tx" | "out" => CAPTURE_TX,
        "both" => CAPTURE_RX | CAPTURE_TX,
        d => return Err(ApiError::invalid(format!("direction {}: rx, tx or both", crate::config::quote(d)))),
    };
    if a.count == Some(0) {
        return Err(ApiError::invalid("count 0 captures nothing"));
    }
    if let Some(c) = &st.capture {
        return Err(ApiError::refused(format!(
            "capture {} on {} is running; one capture at a time (stop it, or wait {}s for it to expire)",
            c.id,
            c.iface,
            CAPTURE_IDLE.as_secs()
        )));
    }

    let snaplen = a.snaplen.unwrap_or(65535).clamp(14, 65535);
    let id = st.next_capture_id.max(1);
    st.next_capture_id = id + 1;
    for w in &router.workers {
        w.shared.capture.take();
        match node {
            Some(n) => w.shared.capture.start_node(n, snaplen),
            None => w.shared.capture.start(port as u16, dirs, snaplen),
        }
    }
    // The XDP lane forwards and drops without the engine seeing the
    // frames: while the capture runs, the port's frames go through the
    // engine (given back once no capture is on: Router::poll).
    let via_engine = match node {
        Some(_) => false,
        None => {
            let ifindex = router.plan.iface_index(&a.target).unwrap_or_default();
            match router.lane_capture(Some(ifindex)) {
                Ok(on) => on,
                Err(e) => {
                    stop_taps(router);
                    return Err(ApiError::internal(format!("cannot hand {} to the engine: {e}", a.target)));
                }
            }
        }
    };
    let wall0 = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    st.capture = Some(CaptureSession {
        id,
        iface: a.target.clone(),
        port: port as u16,
        limit: a.count,
        taken: 0,
        delivered: 0,
        buffer: VecDeque::new(),
        running: true,
        dropped: 0,
        last_read: Instant::now(),
        mono0: tern_engine::clock::now_ns(),
        wall0,
    });
    log::info!("capture {id} started on {} (port {port})", a.target);
    let note = via_engine.then(|| {
        format!(
            "{} is on the XDP lane: while this capture runs its frames go through the engine (slower; counted as \
             xdp-lane/punt-capture)",
            a.target
        )
    });
    Ok(CaptureBatch { id, note, ..CaptureBatch::default() })
}

fn session(st: &mut OpsState, id: u64) -> Result<&mut CaptureSession, ApiError> {
    match &mut st.capture {
        Some(c) if c.id == id => Ok(c),
        _ => Err(ApiError::not_found(format!("no capture {id} (finished, stopped or expired)"))),
    }
}

fn batch_of(c: &mut CaptureSession, router_dropped: u64) -> CaptureBatch {
    c.last_read = Instant::now();
    let frames: Vec<_> = c.buffer.drain(..c.buffer.len().min(4096)).collect();
    c.delivered += frames.len() as u64;
    CaptureBatch {
        id: c.id,
        done: !c.running && c.buffer.is_empty(),
        captured: c.delivered,
        dropped: c.dropped + router_dropped,
        frames,
        note: None,
    }
}

pub fn capture_read(st: &mut OpsState, id: u64) -> Result<CaptureBatch, ApiError> {
    let c = session(st, id)?;
    let b = batch_of(c, 0);
    if b.done {
        st.capture = None;
    }
    Ok(b)
}

/// Stops a capture; the answer carries the frames not yet read.
pub fn capture_stop(router: &Router, st: &mut OpsState, id: u64) -> Result<CaptureBatch, ApiError> {
    session(st, id)?;
    st.poll(router);
    let c = session(st, id)?;
    c.running = false;
    let port = c.port;
    let lost: u64 =
        router.workers.iter().map(|w| w.shared.capture.dropped.load(std::sync::atomic::Ordering::Relaxed)).sum();
    stop_taps(router);
    let mut b = batch_of(c, lost);
    b.done = true;
    log::info!("capture {id} stopped after {} frames (port {port})", b.captured);
    st.capture = None;
    Ok(b)
}

pub fn config_reload(router: &mut Router, st: &mut OpsState) -> Result<ReloadReport, ApiError> {
    let Some(path) = st.config_path.clone() else {
        return Err(ApiError::refused("this tern was started without a configuration file"));
    };
    let r = crate::reload::reload(router, &path);
    match &r {
        Ok(rep) => {
            st.reloads_ok += 1;
            log::info!("config reload: {} change(s) applied", rep.changes.len());
            for c in &rep.changes {
                log::info!("config reload: {c}");
            }
        }
        Err(e) => {
            st.reloads_failed += 1;
            log::warn!("config reload refused, the running configuration stays: {e}");
        }
    }
    r
}

pub fn config_show(router: &Router) -> Result<String, ApiError> {
    toml::to_string(&router.plan.config).map_err(|e| ApiError::internal(format!("cannot print the configuration: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_of_common_frames() {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[
            8, 6, 0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1,
        ]);
        assert_eq!(summarize(&f), "02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff arp who-has 10.0.0.1 tell 10.0.0.2");
        let mut g = f[..12].to_vec();
        g.extend_from_slice(&[
            0x81, 0, 0, 100, 8, 0, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1,
        ]);
        g.extend_from_slice(&[0x30, 0x39, 0, 53, 0, 8, 0, 0]);
        assert!(
            summarize(&g).ends_with("vlan 100 ipv4 10.0.0.2 > 10.0.0.1 ttl 64 udp 12345 > 53"),
            "{}",
            summarize(&g)
        );
        assert_eq!(summarize(&[1, 2, 3]), "3 bytes (runt)");
        assert!(summarize(&g[..20]).ends_with("ipv4 (truncated)"));
    }

    /// Counts this test's log lines (by its op name) per level.
    struct Counting;
    static LINES: std::sync::Mutex<Vec<(log::Level, String)>> = std::sync::Mutex::new(Vec::new());
    impl log::Log for Counting {
        fn enabled(&self, _: &log::Metadata) -> bool {
            true
        }
        fn log(&self, r: &log::Record) {
            let m = r.args().to_string();
            if m.contains("route-log-test") || m.starts_with("api: ") {
                LINES.lock().expect("lock").push((r.level(), m));
            }
        }
        fn flush(&self) {}
    }

    /// 100,000 route changes over the API made 100,000 INFO lines; now the
    /// first of a burst and then a summary per window.
    #[test]
    fn route_changes_are_summarised_in_the_log() {
        static LOGGER: Counting = Counting;
        if log::set_logger(&LOGGER).is_err() {
            eprintln!("skipped: another logger is installed");
            return;
        }
        log::set_max_level(log::LevelFilter::Debug);
        let mut l = RouteLog::default();
        let refused = ApiError::invalid("no");
        for i in 0..10_000 {
            l.note("route-log-test", 1, if i % 10 == 9 { Err(&refused) } else { Ok("added") });
        }
        // The window ends (as if 10 s passed): the next poll summarises.
        l.window = l.window.and_then(|t| t.checked_sub(ROUTE_LOG_EVERY));
        l.flush();
        let lines = LINES.lock().expect("lock").clone();
        let info: Vec<&String> = lines.iter().filter(|(lv, _)| *lv <= log::Level::Info).map(|(_, m)| m).collect();
        assert_eq!(info.len(), 2, "{info:?}");
        assert_eq!(info[0], "api route-log-test: added");
        assert!(info[1].contains("8999 more route change(s) applied and 1000 refused in 9999 request(s)"), "{info:?}");
        assert_eq!(lines.iter().filter(|(lv, _)| *lv == log::Level::Debug).count(), 9999, "details at debug");
        assert!(l.window.is_none(), "the next change starts a window");
        // A window cut short by the end (tern stops) is summarised too.
        l.note("route-log-test", 1, Ok("added"));
        l.note("route-log-test", 5000, Ok("added"));
        drop(l);
        let lines = LINES.lock().expect("lock").clone();
        let info: Vec<&String> = lines.iter().filter(|(lv, _)| *lv <= log::Level::Info).map(|(_, m)| m).collect();
        assert_eq!(info.len(), 4, "{info:?}");
        assert!(info[3].contains("5000 more route change(s) applied and 0 refused in 1 request(s)"), "{info:?}");
    }
}
