//! Live changes to a running router: interface state, addresses, routes,
//! route files and node parameters, each validated before anything
//! changes and applied so that readers never see half of it (the FIB
//! publishes each route atomically; the interface table is replaced
//! whole).
//!
//! These are the primitives; [`crate::commands`] resolves names and
//! arguments for the CLI and API, and [`crate::reload`] diffs a new
//! configuration file into calls of these.

use crate::api::{ApiError, ErrorCode};
use crate::config::{IfacePlan, IfacePlanKind, RouteFilePlan};
use crate::router::Router;
use std::collections::HashMap;
use std::net::IpAddr;
use tern_fib::{FibError, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
use tern_nodes::state::{IfTable, Params, V4Net, V6Net, is_link_local};

/// An interface address with its prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfAddr {
    V4(V4Net),
    V6(V6Net),
}

impl IfAddr {
    pub fn addr(&self) -> IpAddr {
        match self {
            IfAddr::V4(n) => IpAddr::V4(n.addr),
            IfAddr::V6(n) => IpAddr::V6(n.addr),
        }
    }
    pub fn prefix_len(&self) -> u8 {
        match self {
            IfAddr::V4(n) => n.len,
            IfAddr::V6(n) => n.len,
        }
    }
    /// The connected subnet.
    pub fn subnet(&self) -> Prefix {
        match self {
            IfAddr::V4(n) => Prefix::V4 { addr: std::net::Ipv4Addr::from(u32::from(n.addr) & n.mask()), len: n.len },
            IfAddr::V6(n) => Prefix::V6 { addr: std::net::Ipv6Addr::from(u128::from(n.addr) & n.mask()), len: n.len },
        }
    }
}

impl std::fmt::Display for IfAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr(), self.prefix_len())
    }
}

/// Parses "address/len" with the rules of the configuration file.
pub fn parse_if_addr(s: &str) -> Result<IfAddr, ApiError> {
    let (addr, len) = crate::config::if_addr(s).map_err(ApiError::invalid)?;
    Ok(match addr {
        IpAddr::V4(a) => IfAddr::V4(V4Net { addr: a, len }),
        IpAddr::V6(a) => {
            if is_link_local(a) {
                return Err(ApiError::invalid("link-local addresses are derived from the MAC; add global ones"));
            }
            IfAddr::V6(V6Net { addr: a, len })
        }
    })
}

/// The routes an interface's addresses imply: the connected subnet, the
/// address itself (local) and, for IPv4, the directed broadcast (dropped).
/// The same set `Router::start` installs.
pub fn address_routes(index: u16, v4: &[V4Net], v6: &[V6Net]) -> Vec<(Source, Prefix, RouteTarget)> {
    let mut out = Vec::new();
    for n in v4 {
        out.push((Source::Connected, IfAddr::V4(*n).subnet(), RouteTarget::Connected { ifindex: index }));
        out.push((Source::Local, Prefix::V4 { addr: n.addr, len: 32 }, RouteTarget::Local { ifindex: index }));
        if let Some(b) = n.broadcast() {
            out.push((Source::Local, Prefix::V4 { addr: b, len: 32 }, RouteTarget::Blackhole));
        }
    }
    for n in v6 {
        out.push((Source::Connected, IfAddr::V6(*n).subnet(), RouteTarget::Connected { ifindex: index }));
        out.push((Source::Local, Prefix::V6 { addr: n.addr, len: 128 }, RouteTarget::Local { ifindex: index }));
    }
    out
}

fn fib_err(e: FibError) -> ApiError {
    match e {
        FibError::NotFound { .. } => ApiError::not_found(e.to_string()),
        FibError::Full(_) => ApiError::internal(e.to_string()),
        _ => ApiError::invalid(e.to_string()),
    }
}

/// The node parameters `current` becomes under configuration `cfg`: the
/// configuration's knobs replaced, anything else kept.
pub(crate) fn params_of(current: &Params, cfg: &crate::config::Config) -> Params {
    let d = &cfg.dataplane;
    let n = &cfg.neighbor;
    let mut p = current.clone();
    p.icmp_rate = d.icmp_rate;
    p.icmp_burst = d.icmp_burst;
    p.neigh_queue_per_dest = n.queue_per_dest;
    p.neigh_queue_total = n.queue_total;
    p.neigh_retry_ns = n.retry_ms * 1_000_000;
    p.neigh_max_tries = n.probes;
    p.punt_rate = cfg.linux.punt_rate;
    p.punt_burst = cfg.linux.punt_burst;
    p.punt_classes = d.punt.rates();
    let f = d.fast_paths;
    p.fast_paths =
        tern_nodes::state::FastPaths { direct: f.direct, acl_shortcut: f.acl_shortcut, gre_direct: f.gre_direct };
    p.reass = reass_limits(&cfg.reassembly);
    p
}

/// `[reassembly]` as the reassembly nodes take it.
pub(crate) fn reass_limits(r: &crate::config::ReassemblyCfg) -> tern_nodes::reass::table::Limits {
    tern_nodes::reass::table::Limits {
        datagrams: r.max_datagrams,
        per_source: r.max_per_source,
        max_size: r.max_size,
        max_frags: r.max_fragments,
        timeout_ns: r.timeout_ms.saturating_mul(1_000_000),
    }
}

/// `[dataplane.fast_paths]` as `tern status` and the API say it.
pub(crate) fn fast_paths_text(f: &crate::config::FastPathsCfg) -> String {
    let on = |b: bool| if b { "on" } else { "off" };
    format!("direct {}, acl_shortcut {}, gre_direct {}", on(f.direct), on(f.acl_shortcut), on(f.gre_direct))
}

/// Route-file operations applied (and published) at once: small enough
/// for a progress count several times a second, large enough that the
/// publications cost nothing next to the routes.
const ROUTE_FILE_CHUNK: usize = 1 << 16;

/// Loads a route file into FIB operations of source `config`, each
/// route checked as the configuration's are (against `plan`).
pub(crate) fn route_file_ops(rf: &RouteFilePlan, plan: &crate::config::Plan) -> Result<Vec<RouteOp>, String> {
    let routes = crate::config::route_file_routes(rf, plan)?;
    Ok(routes.into_iter().map(|(p, t)| RouteOp::Add(Source::Config, p, t, RouteAttrs::default())).collect())
}

impl Router {
    /// The plan's interface at `index`.
    fn iface_plan(&self, index: u16) -> Result<&IfacePlan, ApiError> {
        self.plan.ifaces.get(usize::from(index)).ok_or_else(|| ApiError::not_found(format!("no interface {index}")))
    }

    /// Index of an interface by name.
    pub fn iface_by_name(&self, name: &str) -> Result<u16, ApiError> {
        self.plan
            .iface_index(name)
            .ok_or_else(|| ApiError::not_found(format!("no interface named {}", crate::config::quote(name))))
    }

    /// Tells the FIB which interfaces are tunnels and to where: it stacks
    /// each on the route to its remote (the adjacency `gre-encap` reads)
    /// and forgets those removed. Reload calls it after removing and after
    /// adding interfaces (start-up too: it converges from a bare plan that
    /// has every tunnel already); a tunnel's endpoints never change in
    /// place (a reload refuses that).
    pub(crate) fn tunnels_to_fib(&mut self) {
        let fib = self.routes.fib_mut();
        for (i, p) in self.plan.ifaces.iter().enumerate() {
            match p.kind {
                // A multipoint tunnel's outer destination is per client:
                // no stacked adjacency.
                IfacePlanKind::Ipsec { remote, .. } if remote.is_unspecified() => {
                    fib.tunnel_remove(i as u16);
                }
                IfacePlanKind::Gre { remote, .. } | IfacePlanKind::Ipsec { remote, .. } => {
                    fib.tunnel_set(i as u16, remote)
                }
                _ => {
                    fib.tunnel_remove(i as u16);
                }
            }
        }
    }

    /// Publishes a new interface table where the interfaces in `changed`
    /// take their state from the plan (admin state, addresses, MTU); a
    /// VLAN's forwarding state also follows its parent's.
    pub(crate) fn publish_ifaces(&mut self) {
        let old = self.shared.ifaces.load();
        let mut ifs = old.ifs.clone();
        for (i, f) in ifs.iter_mut().enumerate() {
            let Some(p) = self.plan.ifaces.get(i) else { continue };
            if p.kind == IfacePlanKind::Removed || f.is_removed() {
                continue;
            }
            let parent_up = match p.kind {
                IfacePlanKind::Vlan { parent, .. } => {
                    self.plan.ifaces.get(parent).is_none_or(|pp| pp.up) && self.interfaces.usable(parent as u16)
                }
                _ => true,
            };
            // A port whose device is gone or down does not forward.
            f.up = p.up && parent_up && self.interfaces.usable(i as u16);
            f.v4 = p.v4.clone();
            f.v6 = p.v6.clone();
            if let (IfacePlanKind::Ipsec { sa_out, sa_in, remote, .. }, tern_nodes::state::IfKind::Ipsec(t)) =
                (&p.kind, &mut f.kind)
            {
                t.sa_out = *sa_out;
                t.sa_in = sa_in.clone();
                t.remote = *remote;
            }
            if let Some(m) = p.mtu {
                f.mtu = m;
            }
            let acl = |n: &Option<String>| {
                n.as_ref().and_then(|n| self.plan.acls.iter().position(|a| &a.name == n)).map(|i| i as u16)
            };
            f.acl_in = acl(&p.acl_in);
            f.acl_out = acl(&p.acl_out);
        }
        // Without a configured MTU: what the outer interface carries less
        // what the (new) outbound SA adds.
        crate::ipsec::derive_tunnel_mtus(&self.plan, &self.ipsec, &self.shared.fib, &mut ifs);
        self.shared.ifaces.publish(IfTable::new(ifs));
        self.lanes.wake_all();
    }

    /// Every `crate::ipsec::MTU_POLL`: republishes the interface table if
    /// an IPsec tunnel's derived MTU no longer matches its outer route
    /// (the route to its remote moved to another interface, an IKE child
    /// SA with other algorithms came). Whether it did.
    pub(crate) fn refresh_ipsec_mtus(&mut self, now: std::time::Instant) -> bool {
        let old = self.shared.ifaces.load();
        if !self.ipsec.mtu_check_due(now) || !old.ifs.iter().any(|f| f.ipsec().is_some()) {
            return false;
        }
        let mut ifs = old.ifs.clone();
        if !crate::ipsec::derive_tunnel_mtus(&self.plan, &self.ipsec, &self.shared.fib, &mut ifs) {
            return false;
        }
        for (f, was) in ifs.iter().zip(&old.ifs).filter(|(f, was)| f.mtu != was.mtu) {
            log::info!("interface {}: MTU {} (was {}), from its outer route and SA", f.name, f.mtu, was.mtu);
        }
        self.shared.ifaces.publish(IfTable::new(ifs));
        self.lanes.wake_all();
        true
    }

    /// Sets an interface administratively up or down. Packets received on
    /// a down interface, or routed out of one, are dropped and counted; its
    /// neighbours are forgotten. Returns whether anything changed.
    pub fn set_interface_up(&mut self, index: u16, up: bool) -> Result<bool, ApiError> {
        let p = self.iface_plan(index)?;
        if p.up == up {
            return Ok(false);
        }
        if let Some(p) = self.plan.ifaces.get_mut(usize::from(index)) {
            p.up = up;
        }
        self.publish_ifaces();
        self.sync_tap_links();
        if !up {
            self.forget_neighbors(index);
        }
        Ok(true)
    }

    /// An ipsec tunnel's SAs (a rekey by reload): the interface table is
    /// republished with them.
    pub(crate) fn set_ipsec_binding(&mut self, index: u16, sa_out: u32, sa_in: Vec<u32>) {
        if let Some(p) = self.plan.ifaces.get_mut(usize::from(index))
            && let IfacePlanKind::Ipsec { sa_out: o, sa_in: i, .. } = &mut p.kind
        {
            *o = sa_out;
            *i = sa_in;
        }
        self.publish_ifaces();
    }

    /// Several ipsec tunnels' SAs at once (IKE's batch of child SAs): one
    /// interface-table publication. (index, sa_out, sa_in); sa_out 0 is
    /// none (what is routed in is dropped as `esp-encrypt/no-sa`).
    pub(crate) fn set_ipsec_bindings(&mut self, bindings: Vec<(u16, u32, Vec<u32>)>) {
        for (index, sa_out, sa_in) in bindings {
            if let Some(p) = self.plan.ifaces.get_mut(usize::from(index))
                && let IfacePlanKind::Ipsec { sa_out: o, sa_in: i, .. } = &mut p.kind
            {
                *o = sa_out;
                *i = sa_in;
            }
        }
        self.publish_ifaces();
    }

    /// An IKE-keyed ipsec tunnel's peer moved (a NAT's new mapping): its
    /// outer destination follows (the FIB stacks the tunnel on the route
    /// there), published with the next [`Router::set_ipsec_bindings`].
    /// Whether it changed (never to another address family).
    pub(crate) fn set_ipsec_remote(&mut self, index: u16, to: IpAddr) -> bool {
        if let Some(p) = self.plan.ifaces.get_mut(usize::from(index))
            && let IfacePlanKind::Ipsec { remote, .. } = &mut p.kind
            && !remote.is_unspecified()
            && *remote != to
            && remote.is_ipv4() == to.is_ipv4()
        {
            *remote = to;
            self.routes.fib_mut().tunnel_set(index, to);
            return true;
        }
        false
    }

    /// The multipoint ipsec tunnels' clients (IKE's remote access), one
    /// publication.
    pub(crate) fn set_ipsec_clients(&mut self, clients: tern_nodes::state::IpsecClients) {
        self.shared.ipsec_clients.publish(clients);
    }

    /// An ipsec tunnel's inner MTU: within what ESP with its outbound SA
    /// leaves room for (the file's check).
    fn ipsec_mtu_check(&self, sa_out: u32, outer_v6: bool, mtu: u16) -> Result<(), String> {
        // An IKE-keyed tunnel's SAs are IKE's (none yet, or ids from
        // 2^31): room for any algorithm IKE may choose, as the file's check.
        let overhead = if sa_out == 0 || sa_out >= crate::config::IKE_SA_ID_BASE {
            crate::config::ike_esp_overhead(outer_v6)
        } else {
            let sa = self.plan.sas.iter().find(|s| s.id == sa_out).ok_or_else(|| format!("no SA {sa_out}"))?;
            crate::config::esp_overhead(outer_v6, sa)
        };
        let most = crate::config::ipsec_mtu_limit(overhead);
        if !(68..=most).contains(&mtu) {
            return Err(format!("MTU {mtu}: need 68..={most} (ESP with SA {sa_out} adds up to {overhead} bytes)"));
        }
        Ok(())
    }

    /// Sets an interface's IP MTU (the file's checks: `check_mtu`, or
    /// `check_tunnel_mtu` for a tunnel).
    pub fn set_interface_mtu(&mut self, index: u16, mtu: u16) -> Result<bool, ApiError> {
        let p = self.iface_plan(index)?;
        let vlan = matches!(p.kind, IfacePlanKind::Vlan { .. });
        match &p.kind {
            IfacePlanKind::Gre { remote, key, .. } => {
                crate::config::check_tunnel_mtu(mtu, remote.is_ipv6(), key.is_some())
            }
            IfacePlanKind::Ipsec { remote, sa_out, .. } => self.ipsec_mtu_check(*sa_out, remote.is_ipv6(), mtu),
            _ => crate::config::check_mtu(mtu, !p.v6.is_empty(), vlan),
        }
        .map_err(ApiError::invalid)?;
        if p.mtu == Some(mtu) {
            return Ok(false);
        }
        if let Some(p) = self.plan.ifaces.get_mut(usize::from(index)) {
            p.mtu = Some(mtu);
        }
        self.publish_ifaces();
        if let Some(tap) = self.tap_of(index) {
            // The kernel's side of the interface follows (and the kernel
            // mirror, which follows the TAP's MTU, agrees).
            if let Err(e) = tern_io::netdev::set_mtu(&tap, u32::from(mtu)) {
                log::warn!("TAP {tap}: MTU {mtu}: {e}");
            }
        }
        Ok(true)
    }

    /// The TAP of interface `index` with the TAP exception path (ports and
    /// VLAN sub-interfaces have one).
    fn tap_of(&self, index: u16) -> Option<String> {
        let p = self.plan.ifaces.get(usize::from(index))?;
        let has = matches!(p.kind, IfacePlanKind::Port { .. } | IfacePlanKind::Vlan { .. });
        (self.plan.config.linux.tap_exception() && has).then(|| crate::linux::tap_name(&p.name))
    }

    /// With the TAP exception path: each TAP's link is up as its
    /// interface is (a VLAN sub-interface's also needs its parent up), so
    /// Linux and its daemons see what tern does. The kernel mirror then
    /// reports the same state back.
    fn sync_tap_links(&self) {
        for (i, p) in self.plan.ifaces.iter().enumerate() {
            let Some(tap) = self.tap_of(i as u16) else { continue };
            let up = p.up
                && match p.kind {
                    IfacePlanKind::Vlan { parent, .. } => self.plan.ifaces.get(parent).is_some_and(|pp| pp.up),
                    _ => true,
                };
            if let Err(e) = tern_io::netdev::set_up(&tap, up) {
                log::warn!("TAP {tap}: set {}: {e}", if up { "up" } else { "down" });
            }
        }
    }

    /// Replaces an interface's addresses, adding and removing only the
    /// routes that differ. Validates first: on error nothing changed.
    pub fn set_interface_addresses(&mut self, index: u16, v4: Vec<V4Net>, v6: Vec<V6Net>) -> Result<bool, ApiError> {
        let p = self.iface_plan(index)?;
        if p.v4 == v4 && p.v6 == v6 {
            return Ok(false);
        }
        // Unique addresses across interfaces, and no subnet shared with
        // another interface (connected routes are keyed by prefix).
        let mine: Vec<IfAddr> = v4.iter().map(|n| IfAddr::V4(*n)).chain(v6.iter().map(|n| IfAddr::V6(*n))).collect();
        for (i, a) in mine.iter().enumerate() {
            if mine[..i].iter().any(|b| b.addr() == a.addr()) {
                return Err(ApiError::invalid(format!("address {} given twice", a.addr())));
            }
        }
        for (j, other) in self.plan.ifaces.iter().enumerate() {
            if j == usize::from(index) {
                continue;
            }
            let theirs = other.v4.iter().map(|n| IfAddr::V4(*n)).chain(other.v6.iter().map(|n| IfAddr::V6(*n)));
            for t in theirs {
                for a in &mine {
                    if a.addr() == t.addr() {
                        return Err(ApiError::invalid(format!("address {} is already on {}", a.addr(), other.name)));
                    }
                }
            }
        }
        // No subnet overlapping another interface's: the configuration's
        // rule, with its message.
        for a in &mine {
            crate::config::check_subnet(&self.plan.ifaces, usize::from(index), a.addr(), a.prefix_len())
                .map_err(ApiError::invalid)?;
        }
        if !v6.is_empty() && p.mtu.is_some_and(|m| m < 1280) {
            return Err(ApiError::invalid("the interface's MTU is below the IPv6 minimum of 1280"));
        }
        let old: HashMap<(Source, Prefix), RouteTarget> =
            address_routes(index, &p.v4, &p.v6).into_iter().map(|(s, pf, t)| ((s, pf), t)).collect();
        let new: HashMap<(Source, Prefix), RouteTarget> =
            address_routes(index, &v4, &v6).into_iter().map(|(s, pf, t)| ((s, pf), t)).collect();
        let adds: Vec<RouteOp> = new
            .iter()
            .filter(|(k, t)| old.get(k) != Some(t))
            .map(|(&(s, pf), t)| RouteOp::Add(s, pf, t.clone(), RouteAttrs::default()))
            .collect();
        let dels: Vec<(Source, Prefix)> = old.keys().filter(|k| !new.contains_key(k)).copied().collect();
        // Adds first (the new address answers as soon as it is published),
        // undone if one fails; then the interface table; then the deletes.
        let mut done = Vec::new();
        for op in adds {
            let RouteOp::Add(s, pf, t, a) = op else { continue };
            if let Err(e) = self.routes.fib_mut().add_route(s, pf, t, a) {
                for (s, pf) in done.into_iter().rev() {
                    self.restore_route(&old, s, pf);
                }
                return Err(fib_err(e));
            }
            done.push((s, pf));
        }
        if let Some(p) = self.plan.ifaces.get_mut(usize::from(index)) {
            p.v4 = v4;
            p.v6 = v6;
        }
        self.publish_ifaces();
        for (s, pf) in dels {
            if let Err(e) = self.routes.fib_mut().del_route(s, pf) {
                log::warn!("removing {s} route {pf}: {e}");
            }
        }
        Ok(true)
    }

    /// Undoes an add: the previous route for the key, or none.
    fn restore_route(&mut self, old: &HashMap<(Source, Prefix), RouteTarget>, s: Source, pf: Prefix) {
        let r = match old.get(&(s, pf)) {
            Some(t) => self.routes.fib_mut().add_route(s, pf, t.clone(), RouteAttrs::default()),
            None => self.routes.fib_mut().del_route(s, pf),
        };
        if let Err(e) = r {
            log::error!("undoing {s} route {pf}: {e}");
        }
    }

    /// Adds (or replaces) a route of `source`.
    pub fn add_route(
        &mut self,
        source: Source,
        prefix: Prefix,
        target: RouteTarget,
        attrs: RouteAttrs,
    ) -> Result<(), ApiError> {
        for ifindex in target_ifindexes(&target) {
            self.iface_plan(ifindex)?;
        }
        self.routes.fib_mut().add_route(source, prefix, target, attrs).map_err(fib_err)
    }

    /// Removes the route of `source` for `prefix`.
    pub fn del_route(&mut self, source: Source, prefix: Prefix) -> Result<(), ApiError> {
        self.routes.fib_mut().del_route(source, prefix).map_err(fib_err)
    }

    /// Reloads every route file (mark and sweep of the `config` source):
    /// all files are read first; if one fails nothing changes.
    pub fn reload_route_files(&mut self, plan: &crate::config::Plan) -> Result<usize, ApiError> {
        let mut all = Vec::new();
        for rf in &plan.route_files {
            all.extend(route_file_ops(rf, plan).map_err(ApiError::invalid)?);
        }
        let n = all.len();
        // Installed in chunks, each published, to count progress (on a
        // terminal) as the table goes in; the sweep of stale routes waits
        // for the last.
        let mut meter = crate::progress::Meter::new("routes", Some(n as u64));
        self.routes.fib_mut().begin_resync(Source::Config);
        let mut first_error = None;
        let mut ops = all.into_iter();
        let mut at = 0;
        while at < n {
            let k = ROUTE_FILE_CHUNK.min(n - at);
            let report = self.routes.fib_mut().apply(ops.by_ref().take(k));
            if first_error.is_none() {
                first_error = report.errors.into_iter().next().map(|(i, e)| (at + i, e));
            }
            at += k;
            meter.set(at as u64);
        }
        let removed = self.routes.fib_mut().end_resync(Source::Config);
        if let Some((i, e)) = first_error {
            return Err(ApiError::new(ErrorCode::Internal, format!("route file route {}: {e}", i + 1)));
        }
        log::info!("route files: {}, {removed} stale removed", meter.finish("loaded"));
        Ok(n)
    }

    /// Switches the fast paths, one by name (`direct`, `acl_shortcut`,
    /// `gre_direct`; `-` for `_` too) or all, in the running configuration
    /// and at once in the nodes (they read it at their next batch) and the
    /// XDP lane (its next packet). What they are now, as a sentence.
    pub fn set_fast_paths(&mut self, name: Option<&str>, on: bool) -> Result<String, ApiError> {
        let f = &mut self.plan.config.dataplane.fast_paths;
        match name.map(|n| n.replace('-', "_")).as_deref() {
            None | Some("all") => *f = crate::config::FastPathsCfg { direct: on, acl_shortcut: on, gre_direct: on },
            Some("direct") => f.direct = on,
            Some("acl_shortcut") => f.acl_shortcut = on,
            Some("gre_direct") => f.gre_direct = on,
            Some(n) => {
                return Err(ApiError::invalid(format!(
                    "no fast path {n:?} (direct, acl_shortcut, gre_direct, or all)"
                )));
            }
        }
        let text = fast_paths_text(f);
        self.publish_params();
        Ok(format!("fast paths: {text}"))
    }

    /// Takes the live knobs of configuration `cfg` (ICMP rate, fast
    /// paths, neighbour, reassembly and Linux settings) into the running one and
    /// publishes them to the nodes.
    pub(crate) fn take_params(&mut self, cfg: &crate::config::Config) {
        let run = &mut self.plan.config;
        run.dataplane.icmp_rate = cfg.dataplane.icmp_rate;
        run.dataplane.icmp_burst = cfg.dataplane.icmp_burst;
        run.dataplane.fast_paths = cfg.dataplane.fast_paths;
        run.dataplane.punt = cfg.dataplane.punt;
        run.neighbor = cfg.neighbor.clone();
        run.reassembly = cfg.reassembly;
        run.linux = cfg.linux.clone();
        self.publish_params();
    }

    /// Publishes node parameters (ICMP rate, neighbour queues) from the
    /// plan's configuration; the fast paths to the XDP lane too, at once.
    pub fn publish_params(&mut self) {
        let p = params_of(&self.shared.params.load(), &self.plan.config);
        self.shared.params.publish(p);
        let f = self.plan.config.dataplane.fast_paths;
        let punt = self.plan.config.dataplane.punt.rates();
        self.lanes.xdp_mut().set_punt_rates(&punt);
        if let Some(lane) = self.xdp_lane_mut() {
            if let Err(e) = lane.set_fast_paths(&f) {
                log::warn!("XDP lane: fast paths not switched: {e}");
            }
            if let Err(e) = lane.set_punt_rates(&punt) {
                log::warn!("XDP lane: punt policers not set: {e}");
            }
        }
    }
}

impl Router {
    /// Mirrors an interface's live state (admin state, MTU, addresses)
    /// into the running configuration `config show` prints.
    pub(crate) fn sync_config_iface(&mut self, index: u16) {
        let Some(p) = self.plan.ifaces.get(usize::from(index)) else { return };
        let addrs: Vec<String> =
            p.v4.iter()
                .map(|n| format!("{}/{}", n.addr, n.len))
                .chain(p.v6.iter().map(|n| format!("{}/{}", n.addr, n.len)))
                .collect();
        if let Some(c) = self.plan.config.interfaces.iter_mut().find(|c| c.name == p.name) {
            c.up = p.up;
            c.mtu = p.mtu;
            c.addresses = addrs;
        }
    }

    /// Forgets a static route removed live, so a reload diffs against
    /// what runs.
    pub(crate) fn forget_static_route(&mut self, prefix: Prefix) {
        self.plan.routes.retain(|r| r.prefix != prefix);
        self.plan.config.routes.retain(|r| r.prefix.parse::<Prefix>().ok() != Some(prefix));
    }

    /// Hit counters of a rule set summed over workers and the XDP lane,
    /// one (packets, bytes) per rule then the default policy.
    pub fn acl_hits(&self, name: &str) -> Option<Vec<(u64, u64)>> {
        let t = self.shared.acls.load();
        let set = t.sets.iter().find(|s| s.name == name)?;
        let mut hits: Vec<(u64, u64)> =
            tern_acl::RuleCounters::sum(&set.counters).into_iter().map(|h| (h.packets, h.bytes)).collect();
        // What the lane decided itself never reached the workers' counters.
        if let Some(lane) = self.xdp_lane().and_then(|l| l.acl_hits_by_name(name)) {
            crate::xdplane::add_hits(&mut hits, &lane);
        }
        Some(hits)
    }

    /// Compiles `sets` and publishes them as the running rule sets, then
    /// the interface bindings. Sets keep their positions (interfaces refer
    /// to sets by position), so replacing in place, appending and removing
    /// the last sets when no interface is bound to them are live;
    /// reordering, or removing a set others follow, needs a restart.
    /// Compiles everything before publishing: on error nothing changed.
    /// Hit counters restart.
    pub(crate) fn publish_rule_sets(&mut self, sets: Vec<tern_acl::RuleSet>) -> Result<(), ApiError> {
        let old: Vec<&str> = self.plan.acls.iter().map(|s| s.name.as_str()).collect();
        let new: Vec<&str> = sets.iter().map(|s| s.name.as_str()).collect();
        if old.iter().zip(&new).any(|(a, b)| a != b) {
            return Err(ApiError::refused(format!(
                "rule sets {old:?} would become {new:?}: reordering rule sets, or removing one that others follow, needs a restart (replacing, appending and removing the last ones are live)"
            )));
        }
        if let Some(gone) = old.get(new.len()..) {
            for f in &self.plan.ifaces {
                if let Some(n) = [&f.acl_in, &f.acl_out].into_iter().flatten().find(|n| gone.contains(&n.as_str())) {
                    return Err(ApiError::refused(format!(
                        "rule set {} is bound to interface {}: unbind it first",
                        crate::config::quote(n),
                        f.name
                    )));
                }
            }
        }
        tern_acl::validate_all(&sets).map_err(|e| ApiError::invalid(e.to_string()))?;
        let mut p = self.plan.clone();
        p.acls = sets;
        let table = crate::router::compile_acls(&p, self.lanes.len()).map_err(|e| ApiError::invalid(e.0))?;
        self.shared.acls.publish(table);
        self.plan.config.acl = p.acls.clone();
        self.plan.acls = p.acls;
        self.publish_ifaces();
        Ok(())
    }

    /// Replaces the rule set of the same name, or adds it.
    pub fn replace_rule_set(&mut self, set: tern_acl::RuleSet) -> Result<String, ApiError> {
        let mut sets = self.plan.acls.clone();
        let name = set.name.clone();
        let n = set.rules.len();
        let verb = match sets.iter_mut().find(|s| s.name == name) {
            Some(s) => {
                *s = set;
                "replaced"
            }
            None => {
                sets.push(set);
                "added"
            }
        };
        self.publish_rule_sets(sets)?;
        Ok(format!("rule set {name} {verb} ({n} rules, counters restart)"))
    }

    /// Replaces or adds `set` and binds it as `acl_in` of the interfaces
    /// `ins` and `acl_out` of `outs`, in one step: the interfaces are
    /// checked and the set compiled before anything changes (on error
    /// nothing has), and the bindings reach the workers in one
    /// interface-table publish.
    pub fn replace_rule_set_bound(
        &mut self,
        set: tern_acl::RuleSet,
        ins: &[u16],
        outs: &[u16],
    ) -> Result<String, ApiError> {
        for &i in ins.iter().chain(outs) {
            if self.iface_plan(i)?.kind == IfacePlanKind::Removed {
                return Err(ApiError::not_found(format!("no interface {i}")));
            }
        }
        let saved: Vec<(Option<String>, Option<String>)> =
            self.plan.ifaces.iter().map(|p| (p.acl_in.clone(), p.acl_out.clone())).collect();
        let name = set.name.clone();
        for (list, is_in) in [(ins, true), (outs, false)] {
            for &i in list {
                if let Some(p) = self.plan.ifaces.get_mut(usize::from(i)) {
                    *(if is_in { &mut p.acl_in } else { &mut p.acl_out }) = Some(name.clone());
                }
            }
        }
        match self.replace_rule_set(set) {
            Ok(msg) => Ok(msg),
            Err(e) => {
                for (p, (a, b)) in self.plan.ifaces.iter_mut().zip(saved) {
                    p.acl_in = a;
                    p.acl_out = b;
                }
                Err(e)
            }
        }
    }

    /// Binds rule sets to an interface (None: unbind).
    pub fn set_interface_acls(
        &mut self,
        index: u16,
        acl_in: Option<String>,
        acl_out: Option<String>,
    ) -> Result<bool, ApiError> {
        let p = self.iface_plan(index)?;
        for n in [&acl_in, &acl_out].into_iter().flatten() {
            if !self.plan.acls.iter().any(|s| &s.name == n) {
                return Err(ApiError::not_found(format!("no rule set named {}", crate::config::quote(n))));
            }
        }
        if p.acl_in == acl_in && p.acl_out == acl_out {
            return Ok(false);
        }
        if let Some(p) = self.plan.ifaces.get_mut(usize::from(index)) {
            p.acl_in = acl_in;
            p.acl_out = acl_out;
        }
        self.publish_ifaces();
        Ok(true)
    }
}

/// Interfaces a route target names.
pub(crate) fn target_ifindexes(t: &RouteTarget) -> Vec<u16> {
    match t {
        RouteTarget::Via { ifindex: Some(i), .. } | RouteTarget::Connected { ifindex: i } => vec![*i],
        RouteTarget::Local { ifindex } => vec![*ifindex],
        RouteTarget::Ecmp(m) => m.iter().filter_map(|(_, i)| *i).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_addresses_parse_like_the_config() {
        assert_eq!(parse_if_addr("10.0.0.1/24").expect("ok").to_string(), "10.0.0.1/24");
        assert_eq!(parse_if_addr("10.0.0.1/24").expect("ok").subnet().to_string(), "10.0.0.0/24");
        for bad in
            ["10.0.0.1", "10.0.0.1/33", "224.0.0.1/4", "fe80::1/64", "127.0.0.1/8", "x/1", "1.2.3.4/x", "10.0.0.1/+24"]
        {
            assert!(parse_if_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn implied_routes() {
        let v4 = [V4Net { addr: "10.0.0.1".parse().expect("a"), len: 24 }];
        let r = address_routes(3, &v4, &[]);
        let s: Vec<String> = r.iter().map(|(s, p, _)| format!("{s} {p}")).collect();
        assert_eq!(s, ["connected 10.0.0.0/24", "local 10.0.0.1/32", "local 10.0.0.255/32"]);
        let v4 = [V4Net { addr: "10.0.0.1".parse().expect("a"), len: 31 }];
        assert_eq!(address_routes(3, &v4, &[]).len(), 2, "no broadcast on a /31");
    }
}
