//! `[[vrrp]]`: tern's own VRRPv3 groups, checked against the interfaces.

use crate::config::{IfacePlan, IfacePlanKind, Problem, Seg, VrrpCfg, bad, k, quote};
use std::net::IpAddr;
use tern_fib::Prefix;
use tern_vrrp::Family;

/// A `[[vrrp]]` group as the control thread runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct VrrpGroup {
    pub ifindex: u16,
    pub iface: String,
    pub vrid: u8,
    pub family: Family,
    pub priority: u8,
    pub interval_cs: u16,
    /// For IPv6, the link-local one first.
    pub addrs: Vec<IpAddr>,
    pub preempt: bool,
    pub preempt_delay_ms: u32,
    pub accept_mode: bool,
    pub track_ifaces: Vec<u16>,
    pub track_routes: Vec<Prefix>,
    pub track_decrement: u8,
    pub notify: Option<String>,
}

impl VrrpGroup {
    /// "IFACE/VRID/ipv4" (how logs, `tern vrrp show` and /metrics name it).
    pub fn name(&self) -> String {
        let f = match self.family {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        };
        format!("{}/{}/{f}", self.iface, self.vrid)
    }
}

/// The groups of `config` (`linux_mode`: refused, keepalived or FRR's
/// vrrpd do VRRP there).
pub(crate) fn groups(
    config: &[VrrpCfg],
    ifaces: &[IfacePlan],
    index_of: &dyn Fn(&str) -> Option<u16>,
    linux_mode: bool,
) -> Result<Vec<VrrpGroup>, Problem> {
    let mut out: Vec<VrrpGroup> = Vec::new();
    for (i, g) in config.iter().enumerate() {
        let p = |key: &str| vec![k("vrrp"), Seg::Index(i), k(key)];
        if linux_mode {
            return Err(bad(
                p("interface"),
                "tern's own VRRP runs in standalone mode; in Linux mode run keepalived or FRR's vrrpd (docs/LINUX.md)",
            ));
        }
        let ifindex = index_of(&g.interface)
            .ok_or_else(|| bad(p("interface"), format!("no interface named {}", quote(&g.interface))))?;
        let plan = &ifaces[usize::from(ifindex)];
        if !matches!(plan.kind, IfacePlanKind::Port { .. } | IfacePlanKind::Vlan { .. }) {
            return Err(bad(
                p("interface"),
                format!("{} is a tunnel: VRRP needs an Ethernet link", quote(&g.interface)),
            ));
        }
        if g.vrid == 0 {
            return Err(bad(p("vrid"), "0: need 1..=255"));
        }
        if g.priority == 0 {
            return Err(bad(p("priority"), "0: need 1..=255 (0 is what a master sends when it stops)"));
        }
        if g.interval_ms < 10 || g.interval_ms % 10 != 0 || g.interval_ms > 40950 {
            return Err(bad(
                p("interval_ms"),
                format!("{}: need 10..=40950 in steps of 10 (VRRPv3 counts centiseconds)", g.interval_ms),
            ));
        }
        if g.addresses.is_empty() {
            return Err(bad(p("addresses"), "give at least one virtual address"));
        }
        let mut addrs = Vec::new();
        for (j, a) in g.addresses.iter().enumerate() {
            let ap = || vec![k("vrrp"), Seg::Index(i), k("addresses"), Seg::Index(j)];
            let ip: IpAddr =
                a.parse().map_err(|_| bad(ap(), format!("invalid address {} (no prefix length)", quote(a))))?;
            if ip.is_multicast() || ip.is_unspecified() || ip.is_loopback() {
                return Err(bad(ap(), format!("{ip} cannot be a virtual address")));
            }
            if let Some(first) = addrs.first()
                && Family::of(first) != Family::of(&ip)
            {
                return Err(bad(ap(), "one address family per group: give IPv6 addresses a group of their own"));
            }
            if addrs.contains(&ip) {
                return Err(bad(ap(), format!("{ip} given twice")));
            }
            addrs.push(ip);
        }
        let family = Family::of(&addrs[0]);
        if family == Family::V6 && !matches!(addrs[0], IpAddr::V6(a) if a.is_unicast_link_local()) {
            addrs.insert(0, IpAddr::V6(tern_vrrp::virtual_link_local(g.vrid)));
        }
        if addrs.len() > 255 {
            return Err(bad(p("addresses"), "at most 255 addresses"));
        }
        let own = |a: &IpAddr| match a {
            IpAddr::V4(a) => plan.v4.iter().any(|n| n.addr == *a),
            IpAddr::V6(a) => plan.v6.iter().any(|n| n.addr == *a),
        };
        let owned = addrs.iter().filter(|a| own(a)).count();
        if g.priority == 255
            && addrs.iter().any(|a| !own(a) && !matches!(a, IpAddr::V6(v) if v.is_unicast_link_local()))
        {
            return Err(bad(
                p("priority"),
                "255 is the address owner's: every virtual address must be the interface's own",
            ));
        }
        if g.priority != 255 && owned > 0 {
            return Err(bad(
                p("priority"),
                "the virtual addresses are the interface's own: the owner's priority is 255",
            ));
        }
        if family == Family::V4 && plan.v4.is_empty() {
            return Err(bad(
                p("interface"),
                format!("{} has no IPv4 address to send advertisements from", quote(&g.interface)),
            ));
        }
        if out.iter().any(|o| o.ifindex == ifindex && o.vrid == g.vrid && o.family == family) {
            return Err(bad(
                p("vrid"),
                format!("vrid {} is already used on {} for this family", g.vrid, quote(&g.interface)),
            ));
        }
        let mut track_ifaces = Vec::new();
        for (j, n) in g.track_interfaces.iter().enumerate() {
            let t = index_of(n).ok_or_else(|| {
                bad(
                    vec![k("vrrp"), Seg::Index(i), k("track_interfaces"), Seg::Index(j)],
                    format!("no interface named {}", quote(n)),
                )
            })?;
            track_ifaces.push(t);
        }
        let mut track_routes = Vec::new();
        for (j, r) in g.track_routes.iter().enumerate() {
            let pr: Prefix = r
                .parse()
                .map_err(|e| bad(vec![k("vrrp"), Seg::Index(i), k("track_routes"), Seg::Index(j)], format!("{e}")))?;
            track_routes.push(pr);
        }
        if g.preempt_delay_ms > 3_600_000 {
            return Err(bad(p("preempt_delay_ms"), format!("{}: at most an hour", g.preempt_delay_ms)));
        }
        if let Some(n) = &g.notify
            && n.trim().is_empty()
        {
            return Err(bad(p("notify"), "empty command"));
        }
        out.push(VrrpGroup {
            ifindex,
            iface: g.interface.clone(),
            vrid: g.vrid,
            family,
            priority: g.priority,
            interval_cs: (g.interval_ms / 10) as u16,
            addrs,
            preempt: g.preempt,
            preempt_delay_ms: g.preempt_delay_ms,
            accept_mode: g.accept_mode,
            track_ifaces,
            track_routes,
            track_decrement: g.track_decrement,
            notify: g.notify.clone(),
        });
    }
    Ok(out)
}

impl crate::config::Plan {
    /// The `[[vrrp]]` groups of a validated plan.
    pub fn vrrp_groups(&self) -> Vec<VrrpGroup> {
        let index_of = |n: &str| self.iface_index(n);
        groups(&self.config.vrrp, &self.ifaces, &index_of, self.config.linux.linux_mode()).unwrap_or_else(|e| {
            log::error!("vrrp: {} (the plan was validated: a bug)", e.message);
            Vec::new()
        })
    }
}
