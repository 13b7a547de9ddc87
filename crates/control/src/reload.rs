//! `tern config reload` and SIGHUP: read the configuration file again,
//! validate it whole, diff it against the running plan and apply only the
//! differences (Snabb's reconfiguration by diff).
//!
//! Nothing changes unless the whole new file is valid and every
//! difference can be applied live. A difference that cannot (the worker
//! count, a device, a MAC, the API socket...) refuses the reload with the
//! file, line and key that caused it, and the running configuration stays.
//!
//! VLAN sub-interfaces and GRE tunnels come and go live. Interface indexes
//! are what the FIB, next hops, ports and counters refer to, so they stay
//! put while tern runs: [`align`] gives each interface of the new file the
//! index it has now, a new one the index of one removed earlier or the
//! next free one, and leaves a placeholder (`IfacePlanKind::Removed`) at
//! the index of one removed. Physical interfaces still need a restart.

use crate::api::types::ReloadReport;
use crate::api::{ApiError, ErrorCode};
use crate::config::{self, IfacePlan, IfacePlanKind, Plan, Seg, path_string};
use crate::router::Router;
use std::collections::HashMap;
use std::path::Path;
use tern_fib::{Prefix, RouteAttrs, RouteTarget, Source};

/// One live change, decided before anything is applied.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Params,
    InterfaceUp {
        index: u16,
        up: bool,
    },
    InterfaceMtu {
        index: u16,
        mtu: u16,
    },
    Addresses {
        index: u16,
    },
    RouteDel {
        prefix: Prefix,
    },
    RouteAdd {
        prefix: Prefix,
        target: RouteTarget,
        attrs: RouteAttrs,
    },
    RouteFiles,
    /// Rule sets changed (replaced in place or appended).
    Acls,
    AclBinding {
        index: u16,
    },
    /// A sub-interface or tunnel the new file adds, at this index.
    IfaceAdd {
        index: u16,
    },
    /// A sub-interface or tunnel the new file no longer has.
    IfaceRemove {
        index: u16,
    },
    /// The `[[ipsec_sa]]` entries changed (applied as one publication).
    IpsecSas,
    /// An ipsec tunnel's `sa_out` / `sa_in` changed (a rekey).
    IpsecBinding {
        index: u16,
    },
}

/// A refused difference: what and where.
#[derive(Debug)]
struct Refusal {
    path: Vec<Seg>,
    message: String,
}

fn key(s: &str) -> Seg {
    Seg::Key(s.into())
}

fn refuse(path: Vec<Seg>, message: impl Into<String>) -> Refusal {
    Refusal { path, message: message.into() }
}

fn logical(k: &IfacePlanKind) -> bool {
    matches!(k, IfacePlanKind::Vlan { .. } | IfacePlanKind::Gre { .. } | IfacePlanKind::Ipsec { .. })
}

/// Renumbers the interfaces of `new` (as [`config::parse`] numbered them:
/// ports, then VLANs, then tunnels) so that every interface `old` has
/// keeps its index; a new one takes the index of one removed by an
/// earlier reload, or the next after the end; one removed now leaves a
/// placeholder. Every index in `new` (routes, route files, static
/// neighbours, VLAN parents) follows. When the physical interfaces
/// differ, `new` is returned as it is and [`diff`] refuses it.
fn align(old: &Plan, mut new: Plan) -> Plan {
    let ports = |p: &Plan| -> Vec<String> {
        p.ifaces.iter().filter(|i| matches!(i.kind, IfacePlanKind::Port { .. })).map(|i| i.name.clone()).collect()
    };
    let nports = ports(old).len();
    if ports(old) != ports(&new) || old.ifaces[..nports].iter().any(|i| !matches!(i.kind, IfacePlanKind::Port { .. })) {
        return new;
    }
    let mut slots: Vec<Option<IfacePlan>> = vec![None; old.ifaces.len()];
    // new position -> final index
    let mut map: Vec<u16> = vec![0; new.ifaces.len()];
    let mut added = Vec::new();
    for (j, n) in std::mem::take(&mut new.ifaces).into_iter().enumerate() {
        let at = if j < nports {
            Some(j)
        } else {
            old.ifaces.iter().position(|o| o.name == n.name && o.kind != IfacePlanKind::Removed)
        };
        match at {
            Some(i) => {
                map[j] = i as u16;
                slots[i] = Some(n);
            }
            None => added.push((j, n)),
        }
    }
    for (j, n) in added {
        let free =
            (nports..old.ifaces.len()).find(|&i| slots[i].is_none() && old.ifaces[i].kind == IfacePlanKind::Removed);
        let i = free.unwrap_or_else(|| {
            slots.push(None);
            slots.len() - 1
        });
        map[j] = i as u16;
        slots[i] = Some(n);
    }
    let remap = |i: u16| map.get(usize::from(i)).copied().unwrap_or(i);
    new.ifaces = slots.into_iter().map(|s| s.unwrap_or_else(crate::ifset::removed_plan)).collect();
    for f in &mut new.ifaces {
        if let IfacePlanKind::Vlan { parent, .. } = &mut f.kind {
            *parent = usize::from(remap(*parent as u16));
        }
    }
    for r in &mut new.routes {
        remap_target(&mut r.target, &remap);
    }
    for rf in &mut new.route_files {
        rf.ifindex = rf.ifindex.map(remap);
    }
    for n in &mut new.static_neighbors {
        n.0 = remap(n.0);
    }
    new
}

fn remap_target(t: &mut RouteTarget, remap: &dyn Fn(u16) -> u16) {
    match t {
        RouteTarget::Via { ifindex: Some(i), .. }
        | RouteTarget::Connected { ifindex: i }
        | RouteTarget::Local { ifindex: i } => *i = remap(*i),
        RouteTarget::Ecmp(m) => {
            for (_, i) in m.iter_mut() {
                if let Some(i) = i {
                    *i = remap(*i);
                }
            }
        }
        _ => {}
    }
}

/// The differences between the running plan and a new one.
fn diff(old: &Plan, new: &Plan) -> Result<Vec<Change>, Refusal> {
    let (od, nd) = (&old.config.dataplane, &new.config.dataplane);
    let restart = |what: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
        format!("{what} cannot change while tern runs ({a:?} -> {b:?}); restart tern to apply it")
    };
    let dp = |f: &str| vec![key("dataplane"), key(f)];
    if od.workers != nd.workers {
        return Err(refuse(dp("workers"), restart("the worker count", &od.workers, &nd.workers)));
    }
    if od.cpus != nd.cpus {
        return Err(refuse(dp("cpus"), restart("worker CPUs", &od.cpus, &nd.cpus)));
    }
    if od.control_cpus != nd.control_cpus {
        return Err(refuse(dp("control_cpus"), restart("control CPUs", &od.control_cpus, &nd.control_cpus)));
    }
    if od.pool_frames != nd.pool_frames {
        return Err(refuse(dp("pool_frames"), restart("the pool size", &od.pool_frames, &nd.pool_frames)));
    }
    if od.idle != nd.idle {
        return Err(refuse(dp("idle"), restart("the idle mode", &od.idle, &nd.idle)));
    }
    if old.config.api != new.config.api {
        return Err(refuse(vec![key("api")], restart("the API socket", &old.config.api, &new.config.api)));
    }
    if old.config.metrics != new.config.metrics {
        return Err(refuse(
            vec![key("metrics"), key("listen")],
            restart("the metrics address", &old.config.metrics.listen, &new.config.metrics.listen),
        ));
    }
    if old.config.linux.with_live_of(&new.config.linux) != new.config.linux {
        return Err(refuse(vec![key("linux")], "the [linux] section cannot change while tern runs; restart tern"));
    }
    let mut changes = Vec::new();
    if old.acls != new.acls {
        // Interfaces name sets by position: a set may change its rules, new
        // ones may follow the old, and the last ones may go (their
        // bindings go first, below); a set that moves needs a restart.
        let kept = old.acls.iter().zip(&new.acls).all(|(a, b)| a.name == b.name);
        if !kept {
            let i = old.acls.iter().zip(&new.acls).position(|(a, b)| a.name != b.name).unwrap_or(new.acls.len());
            return Err(refuse(
                vec![key("acl"), Seg::Index(i)],
                "reordering rule sets, or removing one that others follow, needs a restart (changing rules, appending sets and removing the last ones are live)",
            ));
        }
        changes.push(Change::Acls);
    }

    if od.icmp_rate != nd.icmp_rate
        || od.icmp_burst != nd.icmp_burst
        || od.fast_paths != nd.fast_paths
        || od.punt != nd.punt
        || old.config.neighbor != new.config.neighbor
        || old.config.reassembly != new.config.reassembly
        || old.config.linux != new.config.linux
    {
        changes.push(Change::Params);
    }

    // Interfaces: same names in the same order (indexes are what the FIB
    // and the workers' ports refer to), same kinds and devices.
    let file_pos = |name: &str| new.config.interfaces.iter().position(|c| c.name == name);
    let ipath = |name: &str, k: &str| match file_pos(name) {
        Some(i) => vec![key("interface"), Seg::Index(i), key(k)],
        None => vec![key("interface")],
    };
    for (i, (o, n)) in old.ifaces.iter().zip(&new.ifaces).enumerate() {
        let index = i as u16;
        match (&o.kind, &n.kind) {
            (IfacePlanKind::Removed, IfacePlanKind::Removed) => continue,
            (IfacePlanKind::Removed, k) if logical(k) => {
                changes.push(Change::IfaceAdd { index });
                continue;
            }
            (k, IfacePlanKind::Removed) if logical(k) => {
                changes.push(Change::IfaceRemove { index });
                continue;
            }
            _ => {}
        }
        if o.name != n.name {
            return Err(refuse(
                ipath(&n.name, "name"),
                format!(
                    "interface {} replaces {} (adding, removing or reordering physical interfaces needs a restart; VLAN sub-interfaces and tunnels are live)",
                    n.name, o.name
                ),
            ));
        }
        if let (
            IfacePlanKind::Ipsec { local: l1, remote: r1, ttl: t1, .. },
            IfacePlanKind::Ipsec { local: l2, remote: r2, ttl: t2, .. },
        ) = (&o.kind, &n.kind)
            && (l1, r1, t1) == (l2, r2, t2)
            && o.kind != n.kind
        {
            changes.push(Change::IpsecBinding { index });
        } else if o.kind != n.kind {
            return Err(refuse(
                ipath(&n.name, "device"),
                format!(
                    "interface {}: its device, driver, parent, VLAN or tunnel endpoints changed; restart tern, or remove it in one reload and add it back in another",
                    n.name
                ),
            ));
        }
        if o.mac != n.mac {
            return Err(refuse(
                ipath(&n.name, "mac"),
                format!("interface {}: the MAC cannot change while tern runs", n.name),
            ));
        }
        if o.acl_in != n.acl_in || o.acl_out != n.acl_out {
            changes.push(Change::AclBinding { index });
        }
        match (o.mtu, n.mtu) {
            (a, b) if a == b => {}
            (_, Some(mtu)) => changes.push(Change::InterfaceMtu { index, mtu }),
            (Some(_), None) | (None, None) => {
                return Err(refuse(
                    ipath(&n.name, "mtu"),
                    format!("interface {}: going back to the device's MTU needs a restart; give the MTU", n.name),
                ));
            }
        }
        if o.v4 != n.v4 || o.v6 != n.v6 {
            changes.push(Change::Addresses { index });
        }
        if o.up != n.up {
            changes.push(Change::InterfaceUp { index, up: n.up });
        }
    }
    for (i, n) in new.ifaces.iter().enumerate().skip(old.ifaces.len()) {
        if !logical(&n.kind) {
            return Err(refuse(
                ipath(&n.name, "name"),
                format!(
                    "interface {} added or removed: adding or removing physical interfaces needs a restart (VLAN sub-interfaces and tunnels are live)",
                    n.name
                ),
            ));
        }
        changes.push(Change::IfaceAdd { index: i as u16 });
    }
    if old.ifaces.len() > new.ifaces.len() {
        let name = old.ifaces.get(new.ifaces.len()).map(|e| e.name.clone()).unwrap_or_default();
        return Err(refuse(
            vec![key("interface")],
            format!(
                "interface {name} removed: adding or removing physical interfaces needs a restart (VLAN sub-interfaces and tunnels are live)"
            ),
        ));
    }

    // Static routes, keyed like the RIB: (static, prefix); the last of
    // duplicates wins, as at start.
    let om: HashMap<Prefix, (&RouteTarget, RouteAttrs)> =
        old.routes.iter().map(|r| (r.prefix, (&r.target, r.attrs))).collect();
    let nm: HashMap<Prefix, (&RouteTarget, RouteAttrs)> =
        new.routes.iter().map(|r| (r.prefix, (&r.target, r.attrs))).collect();
    let mut dels: Vec<Prefix> = om.keys().filter(|p| !nm.contains_key(p)).copied().collect();
    dels.sort();
    changes.extend(dels.into_iter().map(|prefix| Change::RouteDel { prefix }));
    let mut adds: Vec<Change> = nm
        .iter()
        .filter(|(p, v)| om.get(p) != Some(v))
        .map(|(p, (t, a))| Change::RouteAdd { prefix: *p, target: (*t).clone(), attrs: *a })
        .collect();
    adds.sort_by_key(|c| match c {
        Change::RouteAdd { prefix, .. } => Some(*prefix),
        _ => None,
    });
    changes.extend(adds);
    if old.route_files != new.route_files {
        changes.push(Change::RouteFiles);
    }
    if old.sas != new.sas {
        changes.push(Change::IpsecSas);
    }
    Ok(changes)
}

/// Reloads `path` into the running router.
pub fn reload(router: &mut Router, path: &Path) -> Result<ReloadReport, ApiError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ApiError::invalid(format!("{file}: cannot read: {e}")))?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let new = config::parse(&text, &file, &base).map_err(|e| ApiError::invalid(e.to_string()))?;
    let mut new = align(router.plan(), new);
    crate::ike::keep_bindings(router.plan(), &mut new);
    let changes = diff(router.plan(), &new).map_err(|r| {
        let at = config::locate(&text, &r.path).map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default();
        let k = path_string(&r.path);
        ApiError::new(ErrorCode::Refused, format!("{file}{at}: {k}: {}", r.message))
    })?;
    apply(router, new, changes, ReadAhead::Yes)
}

/// The plan start-up builds the data plane from: `plan`'s interfaces
/// (kinds, devices, MACs, MTUs, admin state, rule set bindings) and its
/// settings, but no addresses, routes or route files. [`converge`] then
/// takes a router started from it to `plan` by the same diff and
/// [`apply`] a reload uses, so an address's connected and local routes,
/// the static routes, the route files and the node parameters have one
/// implementation (Snabb's `engine.configure` from an empty graph).
pub(crate) fn bare(plan: &Plan) -> Plan {
    let mut p = plan.clone();
    for i in &mut p.ifaces {
        i.v4.clear();
        i.v6.clear();
    }
    p.routes.clear();
    p.route_files.clear();
    p.sas.clear();
    p
}

/// Start-up's second half: a router running [`bare`]`(&plan)` reloaded
/// to `plan` (the node parameters published whether or not they differ
/// from the defaults the workers started with).
pub(crate) fn converge(router: &mut Router, plan: Plan) -> Result<ReloadReport, ApiError> {
    let mut changes = vec![Change::Params];
    let rest = diff(router.plan(), &plan)
        .map_err(|r| ApiError::internal(format!("{}: {}", path_string(&r.path), r.message)))?;
    changes.extend(rest.into_iter().filter(|c| *c != Change::Params));
    apply(router, plan, changes, ReadAhead::No)
}

/// Whether [`apply`] reads the route files before changing anything (a
/// reload: a missing or bad file refuses it whole) or only when it loads
/// them (start-up, which a failure stops anyway: a full table is read
/// once, not twice).
#[derive(Clone, Copy, PartialEq)]
enum ReadAhead {
    Yes,
    No,
}

/// Applies decided changes; the new plan becomes the running one.
fn apply(router: &mut Router, new: Plan, changes: Vec<Change>, read: ReadAhead) -> Result<ReloadReport, ApiError> {
    let mut report = ReloadReport::default();
    // Route files are read before anything changes: a missing file refuses
    // the whole reload.
    if read == ReadAhead::Yes && changes.contains(&Change::RouteFiles) {
        for rf in &new.route_files {
            crate::live::route_file_ops(rf, &new).map_err(ApiError::invalid)?;
        }
    }
    // Interfaces added and removed: checked (and new TAPs opened) before
    // anything changes; removed first (an address may move from a removed
    // interface to another), added last (a new one may take an address
    // another gives up).
    let added: Vec<u16> =
        changes.iter().filter_map(|c| if let Change::IfaceAdd { index } = c { Some(*index) } else { None }).collect();
    let removed: Vec<u16> = changes
        .iter()
        .filter_map(|c| if let Change::IfaceRemove { index } = c { Some(*index) } else { None })
        .collect();
    let prepared = router.prepare_interfaces(&new, &added, &removed)?;
    // The SAs, all at once, before the tunnels that name them come (and
    // after every check: checked whole, they go back as they were if
    // installing fails).
    if changes.contains(&Change::IpsecSas) {
        let done = router.apply_ipsec_config(&new).map_err(ApiError::invalid)?;
        report.changes.extend(done);
    }
    for &i in &removed {
        let what = router.remove_interface(i);
        report.changes.push(what);
    }
    if !removed.is_empty() {
        router.wait_port_changes();
    }
    router.tunnels_to_fib();
    // Addresses are checked as a whole too, since one interface's new
    // address may be another's old one.
    let name = |i: u16| new.ifaces.get(usize::from(i)).map(|f| f.name.clone()).unwrap_or_default();
    // Remove vanished addresses everywhere first, then add new ones.
    let addr_changes: Vec<u16> =
        changes.iter().filter_map(|c| if let Change::Addresses { index } = c { Some(*index) } else { None }).collect();
    for &i in &addr_changes {
        let (Some(o), Some(n)) = (router.plan().ifaces.get(usize::from(i)), new.ifaces.get(usize::from(i))) else {
            continue;
        };
        let v4: Vec<_> = o.v4.iter().filter(|a| n.v4.contains(a)).copied().collect();
        let v6: Vec<_> = o.v6.iter().filter(|a| n.v6.contains(a)).copied().collect();
        router.set_interface_addresses(i, v4, v6)?;
    }
    // MTUs before new addresses: an IPv6 address needs an MTU of 1280.
    for c in &changes {
        if let Change::InterfaceMtu { index, mtu } = c {
            router.set_interface_mtu(*index, *mtu)?;
            report.changes.push(format!("interface {}: mtu {mtu}", name(*index)));
        }
    }
    for &i in &addr_changes {
        let Some(n) = new.ifaces.get(usize::from(i)) else { continue };
        router.set_interface_addresses(i, n.v4.clone(), n.v6.clone())?;
        report.changes.push(format!("interface {}: addresses {}", name(i), addr_list(n)));
    }
    // Rule sets that go (the last ones): the interfaces bound to them
    // let go first, so no interface names a set that is not there.
    let acls_shrink = new.acls.len() < router.plan().acls.len();
    if acls_shrink {
        for c in &changes {
            if let Change::AclBinding { index } = c {
                let Some(n) = new.ifaces.get(usize::from(*index)) else { continue };
                router.set_interface_acls(*index, n.acl_in.clone(), n.acl_out.clone())?;
                report.changes.push(format!(
                    "interface {}: acl in {}, out {}",
                    name(*index),
                    n.acl_in.as_deref().unwrap_or("-"),
                    n.acl_out.as_deref().unwrap_or("-")
                ));
            }
        }
    }
    for c in &changes {
        match c {
            Change::Params => {
                router.take_params(&new.config);
                report.changes.push(
                    "dataplane ICMP rate, fast paths, punt rate, neighbour and reassembly settings updated".into(),
                );
            }
            Change::Acls => {
                router.publish_rule_sets(new.acls.clone())?;
                report.changes.push(format!("rule sets recompiled ({} sets, counters restart)", new.acls.len()));
            }
            Change::AclBinding { .. } if acls_shrink => {}
            Change::AclBinding { index } => {
                let Some(n) = new.ifaces.get(usize::from(*index)) else { continue };
                router.set_interface_acls(*index, n.acl_in.clone(), n.acl_out.clone())?;
                report.changes.push(format!(
                    "interface {}: acl in {}, out {}",
                    name(*index),
                    n.acl_in.as_deref().unwrap_or("-"),
                    n.acl_out.as_deref().unwrap_or("-")
                ));
            }
            Change::InterfaceMtu { .. }
            | Change::Addresses { .. }
            | Change::IfaceAdd { .. }
            | Change::IfaceRemove { .. }
            | Change::IpsecSas => {}
            Change::IpsecBinding { index } => {
                let Some(n) = new.ifaces.get(usize::from(*index)) else { continue };
                if let IfacePlanKind::Ipsec { sa_out, sa_in, .. } = &n.kind {
                    router.set_ipsec_binding(*index, *sa_out, sa_in.clone());
                    report.changes.push(format!("tunnel {}: sa_out {sa_out}, sa_in {sa_in:?}", name(*index)));
                }
            }
            Change::InterfaceUp { index, up } => {
                router.set_interface_up(*index, *up)?;
                report.changes.push(format!("interface {}: {}", name(*index), if *up { "up" } else { "down" }));
            }
            Change::RouteDel { prefix } => {
                match router.del_route(Source::Static, *prefix) {
                    Ok(()) => {}
                    // Withdrawn already with the interface it named.
                    Err(e) if e.code == ErrorCode::NotFound && !removed.is_empty() => {}
                    Err(e) => return Err(e),
                }
                report.changes.push(format!("route {prefix} removed"));
            }
            // After the interfaces are added, below: a route may name one.
            Change::RouteAdd { .. } | Change::RouteFiles => {}
        }
    }
    for add in prepared {
        let what = router.add_interface(&new, add)?;
        report.changes.push(what);
    }
    if !added.is_empty() {
        router.tunnels_to_fib();
    }
    // Routes last: a route into an interface this reload adds (a tunnel,
    // a VLAN) needs the interface first.
    for c in &changes {
        match c {
            Change::RouteAdd { prefix, target, attrs } => {
                router.add_route(Source::Static, *prefix, target.clone(), *attrs)?;
                report.changes.push(format!("route {prefix} added or changed"));
            }
            Change::RouteFiles => {
                let n = router.reload_route_files(&new)?;
                report.changes.push(format!("route files reloaded ({n} routes)"));
            }
            _ => {}
        }
    }
    let interfaces_changed = !added.is_empty() || !removed.is_empty();
    if router.plan().config.vrrp != new.config.vrrp {
        // The control loop's next round reconciles the groups
        // (`router/vrrp.rs`).
        report.changes.push("vrrp groups changed".into());
    }
    if router.plan().ike != new.ike {
        // The control loop's next round gives the IKE engines the peers
        // (`crate::ike`).
        report.changes.push("ike peers changed".into());
    }
    router.set_plan(new);
    if interfaces_changed {
        router.sources_follow_interfaces();
    }
    Ok(report)
}

fn addr_list(p: &crate::config::IfacePlan) -> String {
    let v: Vec<String> =
        p.v4.iter()
            .map(|n| format!("{}/{}", n.addr, n.len))
            .chain(p.v6.iter().map(|n| format!("{}/{}", n.addr, n.len)))
            .collect();
    if v.is_empty() { "none".into() } else { v.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24"]

[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24"]

[[route]]
prefix = "198.18.0.0/15"
via = "10.0.2.2"
"#;

    fn plan(t: &str) -> Plan {
        config::parse(t, "t.toml", Path::new(".")).expect("valid")
    }

    #[test]
    fn same_file_no_changes() {
        assert_eq!(diff(&plan(BASE), &plan(BASE)).ok(), Some(vec![]));
    }

    #[test]
    fn live_differences_are_listed() {
        let new =
            BASE.replace("10.0.2.2\"", "10.0.2.3\"").replace("\"10.0.1.1/24\"", "\"10.0.1.1/24\", \"10.0.9.1/24\"")
                + "\n[[route]]\nprefix = \"192.0.2.0/24\"\ntype = \"blackhole\"\n";
        let new =
            new.replacen("addresses = [\"10.0.2.1/24\"]", "addresses = [\"10.0.2.1/24\"]\nup = false\nmtu = 1400", 1);
        let c = diff(&plan(BASE), &plan(&new)).expect("live");
        assert!(c.contains(&Change::Addresses { index: 0 }), "{c:?}");
        assert!(c.contains(&Change::InterfaceUp { index: 1, up: false }), "{c:?}");
        assert!(c.contains(&Change::InterfaceMtu { index: 1, mtu: 1400 }), "{c:?}");
        assert_eq!(c.iter().filter(|c| matches!(c, Change::RouteAdd { .. })).count(), 2, "{c:?}");
        assert!(!c.iter().any(|c| matches!(c, Change::RouteDel { .. })), "a changed route is replaced: {c:?}");
    }

    #[test]
    fn restart_only_differences_are_refused_with_their_key() {
        for (edit, want) in [
            (BASE.to_string() + "\n[dataplane]\nworkers = 2\n", "dataplane.workers"),
            (BASE.to_string() + "\n[dataplane]\ncontrol_cpus = [0]\n", "dataplane.control_cpus"),
            (BASE.replace("02:00:00:00:02:01", "02:00:00:00:02:02"), "interface[1].mac"),
            (BASE.replace("name = \"wan\"", "name = \"wan2\""), "interface[1].name"),
            (BASE.to_string() + "\n[metrics]\nlisten = \"127.0.0.1:1\"\n", "metrics.listen"),
            (
                BASE.to_string() + "\n[[interface]]\nname = \"x\"\ndriver = \"memory\"\nmac = \"02:00:00:00:03:01\"\n",
                "interface[2].name",
            ),
            (BASE.to_string() + &VLAN.replace("vlan = 7", "vlan = 8"), "interface[2].device"),
        ] {
            let old = if edit.contains("vlan = 8") { plan(&(BASE.to_string() + VLAN)) } else { plan(BASE) };
            let r = diff(&old, &align(&old, plan(&edit))).expect_err("refused");
            assert_eq!(path_string(&r.path), want, "{}", r.message);
        }
    }

    const VLAN: &str = "\n[[interface]]\nname = \"lan.7\"\nparent = \"lan\"\nvlan = 7\n";
    const VLAN9: &str =
        "\n[[interface]]\nname = \"lan.9\"\nparent = \"lan\"\nvlan = 9\naddresses = [\"10.0.9.1/24\"]\n";
    const ROUTE9: &str = "\n[[route]]\nprefix = \"10.99.0.0/16\"\nvia = \"10.0.9.2\"\ninterface = \"lan.9\"\n";

    fn names(p: &Plan) -> Vec<&str> {
        p.ifaces.iter().map(|i| i.name.as_str()).collect()
    }

    #[test]
    fn removed_interfaces_leave_their_index_and_the_rest_is_renumbered() {
        let old = plan(&(BASE.to_string() + VLAN + VLAN9));
        assert_eq!(names(&old), ["lan", "wan", "lan.7", "lan.9"]);
        // lan.7 goes: the file now numbers lan.9 as 2; aligned it stays 3,
        // and the route naming it follows.
        let new = align(&old, plan(&(BASE.to_string() + VLAN9 + ROUTE9)));
        assert_eq!(names(&new), ["lan", "wan", "", "lan.9"]);
        assert_eq!(new.ifaces[2].kind, IfacePlanKind::Removed);
        let r = new.routes.iter().find(|r| r.prefix.to_string() == "10.99.0.0/16").expect("route");
        assert_eq!(r.target, RouteTarget::Via { gw: "10.0.9.2".parse().expect("a"), ifindex: Some(3) });
        let c = diff(&old, &new).expect("live");
        assert!(c.contains(&Change::IfaceRemove { index: 2 }), "{c:?}");
        assert!(!c.iter().any(|c| matches!(c, Change::IfaceAdd { .. } | Change::Addresses { .. })), "{c:?}");
        // A new one takes the freed index next time; another goes at the end.
        let newer = align(&new, plan(&(BASE.to_string() + VLAN9 + &VLAN.replace('7', "5") + &VLAN.replace('7', "6"))));
        assert_eq!(names(&newer), ["lan", "wan", "lan.5", "lan.9", "lan.6"]);
        assert_eq!(newer.ifaces[2].kind, IfacePlanKind::Vlan { parent: 0, vid: 5 });
        let c = diff(&new, &newer).expect("live");
        assert_eq!(
            c.iter().filter(|c| matches!(c, Change::IfaceAdd { .. })).cloned().collect::<Vec<_>>(),
            [Change::IfaceAdd { index: 2 }, Change::IfaceAdd { index: 4 }]
        );
        // The same file again: no change.
        assert_eq!(diff(&newer, &align(&newer, newer.clone())).ok(), Some(vec![]));
    }

    #[test]
    fn the_punt_policer_is_live_the_rest_of_linux_is_not() {
        let linux = |extra: &str| format!("{BASE}\n[linux]\nmode = \"linux\"\nexception = \"tap\"\n{extra}");
        let old = plan(&linux(""));
        assert_eq!(old.config.linux.punt_rate, 10_000);
        assert_eq!(old.config.linux.punt_burst, 1_000);
        let c = diff(&old, &plan(&linux("punt_rate = 50\npunt_burst = 5\n"))).expect("live");
        assert_eq!(c, vec![Change::Params]);
        let r = diff(&old, &plan(&linux("punt_rate = 50\ntable = 7\n"))).expect_err("refused");
        assert_eq!(path_string(&r.path), "linux");
    }
}
