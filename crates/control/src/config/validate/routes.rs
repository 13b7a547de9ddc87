//! `[[route]]`, `[[route_file]]` and `[[neighbor_entry]]`: what refers to
//! interfaces, checked against the interfaces already built.

use crate::config::{
    IfacePlan, IfacePlanKind, Problem, RouteCfg, RouteFileCfg, RouteFilePlan, RoutePlan, RouteType, Seg,
    StaticNeighborCfg, bad, check_gateway, host_address, k, parse_mac, quote,
};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use tern_fib::Prefix;

/// The static routes (`kernel_addrs`: the kernel mirror's subnets may
/// reach a gateway too).
pub(super) fn routes(
    config: &[RouteCfg],
    ifaces: &[IfacePlan],
    index_of: &dyn Fn(&str) -> Option<u16>,
    kernel_addrs: bool,
) -> Result<Vec<RoutePlan>, Problem> {
    let mut routes = Vec::new();
    for (i, r) in config.iter().enumerate() {
        let p = |key: &str| vec![k("route"), Seg::Index(i), k(key)];
        let prefix: Prefix = r.prefix.parse().map_err(|e| bad(p("prefix"), format!("{e}")))?;
        let via = match &r.via {
            Some(v) => Some(v.parse::<IpAddr>().map_err(|_| bad(p("via"), format!("invalid address {}", quote(v))))?),
            None => None,
        };
        if let Some(v) = via
            && v.is_ipv4() != matches!(prefix, Prefix::V4 { .. })
        {
            return Err(bad(p("via"), format!("next hop {v} is not of the prefix's address family")));
        }
        let ifindex = match &r.interface {
            Some(n) => {
                Some(index_of(n).ok_or_else(|| bad(p("interface"), format!("no interface named {}", quote(n))))?)
            }
            None => None,
        };
        if let Some(v) = via {
            check_gateway(ifaces, v, ifindex, kernel_addrs).map_err(|m| bad(p("via"), m))?;
        }
        let target = match (r.kind, via, ifindex) {
            (RouteType::Unicast, Some(gw), ifindex) => tern_fib::RouteTarget::Via { gw, ifindex },
            (RouteType::Unicast, None, Some(ifindex)) => tern_fib::RouteTarget::Connected { ifindex },
            (RouteType::Unicast, None, None) => return Err(bad(p("via"), "a unicast route needs via or interface")),
            (t, None, None) => match t {
                RouteType::Blackhole => tern_fib::RouteTarget::Blackhole,
                RouteType::Unreachable => tern_fib::RouteTarget::Unreachable,
                _ => tern_fib::RouteTarget::Prohibit,
            },
            (_, _, _) => {
                return Err(bad(p("type"), "blackhole, unreachable and prohibit routes take no via or interface"));
            }
        };
        routes.push(RoutePlan {
            prefix,
            target,
            attrs: tern_fib::RouteAttrs { distance: r.distance, metric: r.metric },
        });
    }
    Ok(routes)
}

/// The route files (read when the router starts or reloads; `tern config
/// check` reads them too).
pub(super) fn route_files(
    config: &[RouteFileCfg],
    ifaces: &[IfacePlan],
    index_of: &dyn Fn(&str) -> Option<u16>,
    kernel_addrs: bool,
    base: &Path,
) -> Result<Vec<RouteFilePlan>, Problem> {
    let mut route_files = Vec::new();
    for (i, f) in config.iter().enumerate() {
        let p = |key: &str| vec![k("route_file"), Seg::Index(i), k(key)];
        let ifindex = match &f.interface {
            Some(n) => {
                Some(index_of(n).ok_or_else(|| bad(p("interface"), format!("no interface named {}", quote(n))))?)
            }
            None => None,
        };
        let parse_via = |v: &Option<String>, key: &str, want_v4: bool| -> Result<Option<IpAddr>, Problem> {
            match v {
                None => Ok(None),
                Some(s) => {
                    let a = s.parse::<IpAddr>().map_err(|_| bad(p(key), format!("invalid address {}", quote(s))))?;
                    if a.is_ipv4() != want_v4 {
                        return Err(bad(p(key), format!("{a} is not an IPv{} address", if want_v4 { 4 } else { 6 })));
                    }
                    check_gateway(ifaces, a, ifindex, kernel_addrs).map_err(|m| bad(p(key), m))?;
                    Ok(Some(a))
                }
            }
        };
        let via = parse_via(&f.via, "via", true)?;
        let via6 = parse_via(&f.via6, "via6", false)?;
        let path = PathBuf::from(&f.path);
        let path = if path.is_relative() { base.join(path) } else { path };
        route_files.push(RouteFilePlan { path, via, via6, ifindex });
    }
    Ok(route_files)
}

/// The static neighbours (not on tunnels).
pub(super) fn static_neighbors(
    config: &[StaticNeighborCfg],
    ifaces: &[IfacePlan],
    index_of: &dyn Fn(&str) -> Option<u16>,
) -> Result<Vec<(u16, IpAddr, [u8; 6])>, Problem> {
    let mut static_neighbors = Vec::new();
    for (i, n) in config.iter().enumerate() {
        let p = |key: &str| vec![k("neighbor_entry"), Seg::Index(i), k(key)];
        let ifindex = index_of(&n.interface)
            .ok_or_else(|| bad(p("interface"), format!("no interface named {}", quote(&n.interface))))?;
        if matches!(ifaces[usize::from(ifindex)].kind, IfacePlanKind::Gre { .. }) {
            return Err(bad(p("interface"), format!("{} is a GRE tunnel: it has no neighbours", quote(&n.interface))));
        }
        let ip = n
            .address
            .parse::<IpAddr>()
            .map_err(|_| bad(p("address"), format!("invalid address {}", quote(&n.address))))?;
        if !host_address(ip) {
            return Err(bad(p("address"), format!("{ip} cannot be a neighbour")));
        }
        let mac = parse_mac(&n.mac).map_err(|e| bad(p("mac"), e))?;
        static_neighbors.push((ifindex, ip, mac));
    }
    Ok(static_neighbors)
}
