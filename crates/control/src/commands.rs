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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tern_engine::stats::StatsSnapshot;
use tern_engine::worker::{CAPTURE_RX, CAPTURE_TX, CaptureDir};
use tern_fib::{NhKind, Prefix, RouteAttrs, RouteDetail, RouteTarget, Source};
use tern_nodes::state::{IfKind, IfTable};

mod acl;
mod capture;
mod ike;
mod interface;
mod ipsec;
mod stats;
mod trace;

pub use crate::stats::*;
pub use acl::*;
pub use capture::*;
pub use ike::*;
pub use interface::*;
pub use ipsec::*;
pub use stats::*;
pub use trace::*;

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
        for w in router.lanes().iter() {
            frames.extend(w.capture.take());
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
    for w in router.lanes().iter() {
        w.capture.stop();
        w.capture.take();
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
        Command::FastPathsSet(a) => Reply::done(router.set_fast_paths(a.name.as_deref(), a.on)?),
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
        Command::VrrpShow {} => Reply::Vrrp(router.vrrp_show()),
        Command::StatsShow(a) => Reply::Stats(stats_show(router, st, a.since_clear)),
        Command::StatsClear {} => {
            st.baseline =
                Some((tern_engine::clock::now_ns(), router.lanes().iter().map(|w| w.stats.snapshot()).collect()));
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
            router.trace().clear();
            if let Some(lane) = router.xdp_lane_mut() {
                lane.trace_clear();
            }
            Reply::done("trace results cleared")
        }
        Command::TraceStop {} => {
            router.trace().arm(0);
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
        Command::TopSample {} => Reply::TopSample(top_sample(router, st)),
        Command::IpsecSaAdd(a) => Reply::done(ipsec_sa_add(router, a)?),
        Command::IpsecSaDel(a) => Reply::done(ipsec_sa_del(router, &a.ids)?),
        Command::IpsecSaShow(a) => Reply::IpsecSas(ipsec_sa_show(router, &a)?),
        Command::IpsecTunnelShow {} => Reply::IpsecTunnels(ipsec_tunnel_show(router)),
        Command::IkeSaShow(a) => Reply::IkeSas(ike_sa_show(router, &a)?),
        Command::IkeSaSummary(a) => Reply::IkeSaSummary(ike_sa_summary(router, a.quick)),
        Command::IkePeerShow {} => Reply::IkePeers(ike_peer_show(router)),
        Command::IkeInitiate(a) => Reply::done(ike_initiate(router, &a.peer)?),
        Command::IkeTerminate(a) => Reply::done(ike_terminate(router, &a.peer, a.id)?),
    })
}

pub fn status(router: &Router, st: &OpsState) -> StatusInfo {
    StatusInfo {
        version: env!("CARGO_PKG_VERSION").into(),
        protocol: VERSION,
        uptime_ms: router.uptime_ns() / 1_000_000,
        workers: router.lanes().len(),
        interfaces: router.plan().live_ifaces().count(),
        neighbors: router.neighbors().len(),
        config: st.config_path.as_ref().map(|p| p.display().to_string()),
        fib: route_summary(router),
        sources: router.route_sources(),
        warnings: lane_warnings(router),
        fast_paths: router.plan().config.dataplane.fast_paths,
        reassembly: router.plan().config.reassembly,
    }
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
    for d in router.fib().routes() {
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
        let reached = router.fib().connected_interface(gw).is_some();
        crate::config::check_gateway(&router.plan().ifaces, gw, ifindex, reached).map_err(ApiError::invalid)?;
        if let Some(d) = router.fib().route_get(gw)
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
    let best = router.fib().route_get(prefix.addr()).filter(|d| d.prefix == prefix);
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
        if !router.fib().has_route(Source::Api, prefix) || !deleted.insert(prefix) {
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
    let applied = router.fib_mut().apply_all_or_nothing(ops);
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
        if source == Source::Api && router.plan().routes.iter().any(|r| r.prefix == prefix) {
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
    let s = router.fib().stats();
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
        .neighbors()
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
    toml::to_string(&router.plan().config.redacted())
        .map_err(|e| ApiError::internal(format!("cannot print the configuration: {e}")))
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
