//! `[[interface]]` (ports, then VLAN sub-interfaces) and `[[tunnel]]`:
//! names, devices, kinds, addresses, MTUs and rule set bindings.

use crate::config::{
    Config, Driver, IfacePlan, IfacePlanKind, Problem, SaPlan, Seg, TunnelType, bad, check_mtu, check_subnet,
    check_tunnel_mtu, esp_overhead, if_addr, ipsec_mtu_limit, k, linux_dev_name, parse_mac, quote,
};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

/// The interfaces checked so far, in plan order.
pub(super) struct Interfaces<'a> {
    pub(super) ifaces: Vec<IfacePlan>,
    /// Interface and tunnel names (one namespace).
    names: HashSet<&'a str>,
    /// Every address configured so far.
    pub(super) all_addrs: HashSet<IpAddr>,
    /// Where each interface is in the file (section, index), for errors
    /// found across them.
    origin: Vec<(&'static str, usize)>,
}

/// The `[[interface]]` entries: physical first, then VLANs, keeping file
/// order (`tap`: the TAP exception path, which limits drivers and names).
pub(super) fn interfaces<'a>(
    config: &'a Config,
    tap: bool,
    acl_names: &HashSet<&str>,
) -> Result<Interfaces<'a>, Problem> {
    // Interface indexes are u16, and u16::MAX means "no interface".
    if config.interfaces.len() + config.tunnels.len() >= usize::from(tern_nodes::state::NO_IF) {
        let key = if config.tunnels.is_empty() { "interface" } else { "tunnel" };
        return Err(bad(vec![k(key)], format!("at most {} interfaces and tunnels", tern_nodes::state::NO_IF - 1)));
    }
    let mut names = HashSet::new();
    let mut devices = HashSet::new();
    let mut order: Vec<usize> = Vec::new();
    for (i, c) in config.interfaces.iter().enumerate() {
        let p = |key: &str| vec![k("interface"), Seg::Index(i), k(key)];
        if c.name.is_empty() || c.name.len() > 32 || c.name.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(bad(p("name"), format!("{}: names are 1-32 characters without spaces", quote(&c.name))));
        }
        if !names.insert(c.name.as_str()) {
            return Err(bad(p("name"), format!("interface {} defined twice", quote(&c.name))));
        }
        match (&c.device, &c.parent, c.vlan) {
            (_, None, None) => {
                if let Some(dev) = &c.device
                    && !devices.insert(dev.as_str())
                {
                    return Err(bad(p("device"), format!("device {} used by two interfaces", quote(dev))));
                }
                if let Some(dev) = &c.device
                    && !linux_dev_name(dev)
                {
                    return Err(bad(p("device"), format!("{} is not a Linux device name", quote(dev))));
                }
                if c.device.is_none() && c.driver != Driver::Memory {
                    return Err(bad(p("device"), "a physical interface needs a device (or driver = \"memory\")"));
                }
                order.push(i);
            }
            (None, Some(_), Some(v)) => {
                if !(1..=4094).contains(&v) {
                    return Err(bad(p("vlan"), format!("VLAN id {v}: need 1..=4094")));
                }
            }
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(bad(p("device"), "an interface has either a device or a parent and vlan, not both"));
            }
            _ => return Err(bad(p("vlan"), "a VLAN sub-interface needs both parent and vlan")),
        }
    }
    let phys = order.len();
    for (i, c) in config.interfaces.iter().enumerate() {
        if c.parent.is_some() {
            order.push(i);
        }
    }
    let mut ifaces: Vec<IfacePlan> = Vec::new();
    let mut all_addrs: HashSet<IpAddr> = HashSet::new();
    let mut vlan_seen = HashSet::new();
    for (pos, &i) in order.iter().enumerate() {
        let c = &config.interfaces[i];
        let p = |key: &str| vec![k("interface"), Seg::Index(i), k(key)];
        let kind = if pos < phys {
            let driver = match (c.lane, c.driver) {
                (None, d) => d,
                (Some(l), Driver::Auto) => l.driver(),
                (Some(l), d) if l.driver() == d => d,
                (Some(_), _) => return Err(bad(p("lane"), "give either lane or driver, not both")),
            };
            if tap && matches!(driver, Driver::Afxdp | Driver::Xdp) {
                return Err(bad(
                    p(if c.lane.is_some() { "lane" } else { "driver" }),
                    "with [linux] exception = \"tap\" the XDP program would still pass the router's traffic to the device's own stack: use driver \"afpacket\", \"memory\" or \"auto\" (which then means afpacket)",
                ));
            }
            IfacePlanKind::Port { device: c.device.clone(), driver }
        } else {
            let parent_name = c.parent.as_deref().unwrap_or_default();
            let parent = order[..phys]
                .iter()
                .position(|&j| config.interfaces[j].name == parent_name)
                .ok_or_else(|| bad(p("parent"), format!("no physical interface named {}", quote(parent_name))))?;
            let vid = c.vlan.unwrap_or_default();
            if !vlan_seen.insert((parent, vid)) {
                return Err(bad(p("vlan"), format!("VLAN {vid} defined twice on {parent_name}")));
            }
            if c.mac.is_some() {
                return Err(bad(p("mac"), "a VLAN sub-interface uses its parent's MAC"));
            }
            IfacePlanKind::Vlan { parent, vid }
        };
        // Ports and VLAN sub-interfaces each get a TAP `tern-<name>`.
        let tap_dev = crate::config::tap_name(&c.name);
        if tap && tap_dev.len() >= 16 {
            return Err(bad(
                p("name"),
                format!(
                    "the TAP device {tap_dev:?} would be longer than Linux's 15 characters: shorten the interface name to 10 characters"
                ),
            ));
        }
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (j, a) in c.addresses.iter().enumerate() {
            let ap = vec![k("interface"), Seg::Index(i), k("addresses"), Seg::Index(j)];
            let (addr, len) = if_addr(a).map_err(|m| bad(ap.clone(), m))?;
            if !all_addrs.insert(addr) {
                return Err(bad(ap, format!("address {addr} configured twice")));
            }
            match addr {
                IpAddr::V4(a) => v4.push(tern_nodes::state::V4Net { addr: a, len }),
                IpAddr::V6(a) => {
                    if tern_nodes::state::is_link_local(a) {
                        return Err(bad(ap, "link-local addresses are derived from the MAC; configure global ones"));
                    }
                    v6.push(tern_nodes::state::V6Net { addr: a, len })
                }
            }
        }
        if let Some(mtu) = c.mtu {
            check_mtu(mtu, !v6.is_empty(), c.parent.is_some()).map_err(|m| bad(p("mtu"), m))?;
        }
        let mac = match &c.mac {
            Some(m) => Some(parse_mac(m).map_err(|e| bad(p("mac"), e))?),
            None => None,
        };
        if c.driver == Driver::Memory && mac.is_none() && c.parent.is_none() {
            return Err(bad(p("mac"), "a memory interface needs a mac"));
        }
        for (key, acl) in [("acl_in", &c.acl_in), ("acl_out", &c.acl_out)] {
            if let Some(a) = acl
                && !acl_names.contains(a.as_str())
            {
                return Err(bad(p(key), format!("no [[acl]] named {}", quote(a))));
            }
        }
        ifaces.push(IfacePlan {
            name: c.name.clone(),
            kind,
            v4,
            v6,
            mtu: c.mtu,
            mac,
            up: c.up,
            acl_in: c.acl_in.clone(),
            acl_out: c.acl_out.clone(),
        });
    }
    let origin: Vec<(&'static str, usize)> = order.iter().map(|&i| ("interface", i)).collect();
    Ok(Interfaces { ifaces, names, all_addrs, origin })
}

/// The `[[tunnel]]` entries, after the interfaces (whose addresses their
/// outer sources must be).
pub(super) fn tunnels<'a>(
    config: &'a Config,
    acl_names: &HashSet<&str>,
    sas: &[SaPlan],
    ike_keyed: &HashSet<&str>,
    ifs: &mut Interfaces<'a>,
) -> Result<(), Problem> {
    let Interfaces { ifaces, names, all_addrs, origin } = ifs;
    let if_addrs = all_addrs.clone();
    let mut endpoints = HashSet::new();
    // SA id -> (tunnel, direction) of the tunnel that uses it.
    let mut sa_users: HashMap<u32, (usize, &'static str)> = HashMap::new();
    for (i, t) in config.tunnels.iter().enumerate() {
        let p = |key: &str| vec![k("tunnel"), Seg::Index(i), k(key)];
        if t.name.is_empty() || t.name.len() > 32 || t.name.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(bad(p("name"), format!("{}: names are 1-32 characters without spaces", quote(&t.name))));
        }
        if !names.insert(t.name.as_str()) {
            return Err(bad(p("name"), format!("{} is already an interface name", quote(&t.name))));
        }
        let local =
            t.local.parse::<IpAddr>().map_err(|_| bad(p("local"), format!("invalid address {}", quote(&t.local))))?;
        // A multipoint tunnel (remote access): its clients come from an
        // [[ike]] responder template (remote = "any"; checked there).
        let multipoint = t.remote == "any";
        if multipoint && (t.kind != TunnelType::Ipsec || !ike_keyed.contains(t.name.as_str())) {
            return Err(bad(
                p("remote"),
                "remote = \"any\" is for a type = \"ipsec\" tunnel keyed by an [[ike]] with remote = \"any\"",
            ));
        }
        let remote = if multipoint {
            match local {
                IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            }
        } else {
            t.remote
                .parse::<IpAddr>()
                .map_err(|_| bad(p("remote"), format!("invalid address {} (or \"any\")", quote(&t.remote))))?
        };
        if local.is_ipv4() != remote.is_ipv4() {
            return Err(bad(p("remote"), "local and remote must be of one address family"));
        }
        for (key, a) in [("local", local), ("remote", remote)] {
            if key == "remote" && multipoint {
                continue;
            }
            if a.is_unspecified() || a.is_multicast() || a.is_loopback() {
                return Err(bad(p(key), format!("{a} cannot be a tunnel endpoint")));
            }
        }
        if !if_addrs.contains(&local) {
            return Err(bad(
                p("local"),
                format!("{local} is not one of tern's addresses: the outer source must be an interface's address"),
            ));
        }
        if t.ttl == 0 {
            return Err(bad(p("ttl"), "TTL 0 would never leave the router"));
        }
        let ipsec = t.kind == TunnelType::Ipsec;
        if ipsec {
            if t.key.is_some() {
                return Err(bad(p("key"), "a key is GRE's; an ipsec tunnel's SAs tell its packets apart"));
            }
        } else {
            if t.sa_out.is_some() {
                return Err(bad(p("sa_out"), "sa_out is for type = \"ipsec\" tunnels"));
            }
            if !t.sa_in.is_empty() {
                return Err(bad(p("sa_in"), "sa_in is for type = \"ipsec\" tunnels"));
            }
            if !endpoints.insert((local, remote, t.key)) {
                return Err(bad(p("remote"), "two tunnels with the same local, remote and key"));
            }
        }
        let sa_of = |id: u32| sas.iter().find(|s| s.id == id);
        let mut out_sa = None;
        // Keyed by an [[ike]] peer: its SAs come from IKE (none until the
        // first child SA; what is routed in meanwhile is dropped as
        // `esp-encrypt/no-sa`).
        let by_ike = ipsec && ike_keyed.contains(t.name.as_str());
        if by_ike {
            if t.sa_out.is_some() {
                return Err(bad(p("sa_out"), "this tunnel is keyed by an [[ike]] peer: its SAs come from IKE"));
            }
            if !t.sa_in.is_empty() {
                return Err(bad(p("sa_in"), "this tunnel is keyed by an [[ike]] peer: its SAs come from IKE"));
            }
        } else if ipsec {
            let id = t.sa_out.ok_or_else(|| {
                bad(p("type"), "an ipsec tunnel needs sa_out (an [[ipsec_sa]] id), or an [[ike]] peer keying it")
            })?;
            out_sa = Some(sa_of(id).ok_or_else(|| bad(p("sa_out"), format!("no [[ipsec_sa]] with id {id}")))?);
            if t.sa_in.is_empty() {
                return Err(bad(p("type"), "an ipsec tunnel needs sa_in (a list of [[ipsec_sa]] ids)"));
            }
            let uses = std::iter::once((id, "sa_out", None))
                .chain(t.sa_in.iter().enumerate().map(|(j, &s)| (s, "sa_in", Some(j))));
            for (sa, dir, j) in uses {
                let at = || match j {
                    Some(j) => vec![k("tunnel"), Seg::Index(i), k("sa_in"), Seg::Index(j)],
                    None => p("sa_out"),
                };
                if sa_of(sa).is_none() {
                    return Err(bad(at(), format!("no [[ipsec_sa]] with id {sa}")));
                }
                if let Some((other, how)) = sa_users.insert(sa, (i, dir)) {
                    let whose = if other == i { "this tunnel's".to_string() } else { format!("tunnel[{other}]'s") };
                    return Err(bad(
                        at(),
                        format!("SA {sa} is already {whose} {how}: an SA carries one direction of one tunnel"),
                    ));
                }
            }
        }
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (j, a) in t.addresses.iter().enumerate() {
            let ap = vec![k("tunnel"), Seg::Index(i), k("addresses"), Seg::Index(j)];
            let (addr, len) = if_addr(a).map_err(|m| bad(ap.clone(), m))?;
            if !all_addrs.insert(addr) {
                return Err(bad(ap, format!("address {addr} configured twice")));
            }
            match addr {
                IpAddr::V4(a) => v4.push(tern_nodes::state::V4Net { addr: a, len }),
                IpAddr::V6(a) => v6.push(tern_nodes::state::V6Net { addr: a, len }),
            }
        }
        if let Some(mtu) = t.mtu {
            match out_sa {
                None if by_ike => {
                    // Any algorithm IKE may choose: the worst case.
                    let overhead = crate::config::ike_esp_overhead(remote.is_ipv6());
                    let most = ipsec_mtu_limit(overhead);
                    if !(68..=most).contains(&mtu) {
                        return Err(bad(
                            p("mtu"),
                            format!(
                                "MTU {mtu}: need 68..={most} (ESP adds up to {overhead} bytes with the algorithms IKE may choose)"
                            ),
                        ));
                    }
                }
                Some(sa) => {
                    let overhead = esp_overhead(remote.is_ipv6(), sa);
                    let most = ipsec_mtu_limit(overhead);
                    if !(68..=most).contains(&mtu) {
                        return Err(bad(
                            p("mtu"),
                            format!("MTU {mtu}: need 68..={most} (ESP with SA {} adds up to {overhead} bytes)", sa.id),
                        ));
                    }
                }
                None => check_tunnel_mtu(mtu, remote.is_ipv6(), t.key.is_some()).map_err(|m| bad(p("mtu"), m))?,
            }
        }
        for (key, acl) in [("acl_in", &t.acl_in), ("acl_out", &t.acl_out)] {
            if let Some(a) = acl
                && !acl_names.contains(a.as_str())
            {
                return Err(bad(p(key), format!("no [[acl]] named {}", quote(a))));
            }
        }
        ifaces.push(IfacePlan {
            name: t.name.clone(),
            kind: match out_sa {
                Some(sa) => IfacePlanKind::Ipsec { local, remote, sa_out: sa.id, sa_in: t.sa_in.clone(), ttl: t.ttl },
                None if by_ike => IfacePlanKind::Ipsec { local, remote, sa_out: 0, sa_in: Vec::new(), ttl: t.ttl },
                None => IfacePlanKind::Gre { local, remote, key: t.key, ttl: t.ttl },
            },
            v4,
            v6,
            mtu: t.mtu,
            mac: None,
            up: t.up,
            acl_in: t.acl_in.clone(),
            acl_out: t.acl_out.clone(),
        });
        origin.push(("tunnel", i));
    }
    Ok(())
}

/// No subnet on two interfaces (the second of two names the problem).
pub(super) fn no_shared_subnet(config: &Config, ifs: &Interfaces<'_>) -> Result<(), Problem> {
    let Interfaces { ifaces, origin, .. } = ifs;
    for (x, f) in ifaces.iter().enumerate() {
        let (section, i) = origin[x];
        let addrs =
            f.v4.iter().map(|n| (IpAddr::V4(n.addr), n.len)).chain(f.v6.iter().map(|n| (IpAddr::V6(n.addr), n.len)));
        for (addr, len) in addrs {
            check_subnet(&ifaces[..x], usize::MAX, addr, len).map_err(|m| {
                let list =
                    if section == "tunnel" { &config.tunnels[i].addresses } else { &config.interfaces[i].addresses };
                let j = list.iter().position(|a| if_addr(a).is_ok_and(|(b, _)| b == addr)).unwrap_or(0);
                bad(vec![k(section), Seg::Index(i), k("addresses"), Seg::Index(j)], m)
            })?;
        }
    }
    Ok(())
}
