//! `interface` and `address` commands.

use super::*;

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

pub fn interface_list(router: &Router) -> Vec<InterfaceInfo> {
    let ifs = router.iftable();
    let counters = port_counters_with_lane(router);
    let acl_name = |i: Option<&String>| i.cloned();
    router
        .plan()
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
                    ("vlan", router.plan().ifaces.get(*parent).map(|pp| pp.name.clone()), Some(*vid), None, None)
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
                link: router.interfaces().link(idx).map(|l| l.describe().to_string()),
                link_changes: router.interfaces().link(idx).map(|l| l.changes),
                addresses: p
                    .v4
                    .iter()
                    .map(|n| format!("{}/{}", n.addr, n.len))
                    .chain(p.v6.iter().map(|n| format!("{}/{}", n.addr, n.len)))
                    .collect(),
                link_local: live.map(|l| l.v6_ll.to_string()).unwrap_or_default(),
                virtual_macs: live
                    .map(|l| {
                        l.vmacs
                            .iter()
                            .map(|v| {
                                let owner = match v.owner {
                                    tern_nodes::state::VmacOwner::Kernel => "kernel",
                                    tern_nodes::state::VmacOwner::Vrrp => "vrrp",
                                };
                                format!("{} ({owner})", crate::neighbor::fmt_mac(v.mac))
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                acl_in: acl_name(p.acl_in.as_ref()),
                acl_out: acl_name(p.acl_out.as_ref()),
                counters: if kind == "port" { Some(counters.get(&idx).cloned().unwrap_or_default()) } else { None },
                warnings: match &p.kind {
                    crate::config::IfacePlanKind::Port { device: Some(dev), driver } => {
                        let tap = router.plan().config.linux.tap_exception();
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
            return match router.plan().ifaces.get(*parent) {
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
pub(super) fn acl_lane(router: &Router, p: &crate::config::IfacePlan, set: &str, direction: &str) -> AclLaneView {
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

pub(super) fn parse_on_off(name: &str, r: &mut Router, up: bool) -> Result<String, ApiError> {
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
    let p = &router.plan().ifaces[usize::from(i)];
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
    let p = &router.plan().ifaces[usize::from(i)];
    let v4: Vec<_> = p.v4.iter().filter(|n| IpAddr::V4(n.addr) != addr).copied().collect();
    let v6: Vec<_> = p.v6.iter().filter(|n| IpAddr::V6(n.addr) != addr).copied().collect();
    if v4.len() == p.v4.len() && v6.len() == p.v6.len() {
        return Err(ApiError::not_found(format!("{iface} has no address {addr}")));
    }
    router.set_interface_addresses(i, v4, v6)?;
    router.sync_config_iface(i);
    Ok(format!("{addr} removed from {iface}"))
}
