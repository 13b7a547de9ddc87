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
        match plan.kind {
            IfacePlanKind::Port { .. } | IfacePlanKind::Vlan { .. } => {}
            _ => {
                return Err(bad(
                    p("interface"),
                    format!("{} is a tunnel: VRRP needs an Ethernet link", quote(&g.interface)),
                ));
            }
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

#[cfg(test)]
mod tests {
    use crate::config::{ConfigError, Plan, parse};
    use std::path::Path;

    const BASE: &str = r#"
[[interface]]
name = "lan0"
driver = "memory"
mac = "02:00:00:00:00:01"
addresses = ["10.1.0.2/24", "2001:db8:1::2/64"]

[[interface]]
name = "wan0"
driver = "memory"
mac = "02:00:00:00:00:02"
addresses = ["10.2.0.2/24"]
"#;

    fn with(vrrp: &str) -> Result<Plan, ConfigError> {
        parse(&format!("{BASE}\n{vrrp}"), "t.toml", Path::new("."))
    }

    /// The error's key and line, and that its message says `what`.
    fn err(vrrp: &str, key: &str, what: &str) {
        let text = format!("{BASE}\n{vrrp}");
        let e = with(vrrp).expect_err("refused");
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
        assert!(e.message.contains(what), "{e}");
        let line = e.line.expect("a line");
        let key_name = key.rsplit('.').next().unwrap_or(key).split('[').next().unwrap_or(key);
        assert!(text.lines().nth(line - 1).is_some_and(|l| l.contains(key_name)), "line {line} of:\n{text}\n{e}");
    }

    const GOOD: &str = "[[vrrp]]\ninterface = \"lan0\"\nvrid = 10\npriority = 200\ninterval_ms = 100\naddresses = [\"10.1.0.254\"]\npreempt = true\n";

    #[test]
    fn a_group_is_read_with_its_defaults() {
        let p = with(GOOD).expect("valid");
        let g = p.vrrp_groups();
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].ifindex, g[0].vrid, g[0].priority, g[0].interval_cs), (0, 10, 200, 10));
        assert_eq!(g[0].name(), "lan0/10/ipv4");
        assert_eq!((g[0].preempt_delay_ms, g[0].accept_mode, g[0].track_decrement), (0, false, 50));
    }

    #[test]
    fn ipv6_groups_get_the_virtual_link_local_first() {
        let p = with("[[vrrp]]\ninterface = \"lan0\"\nvrid = 7\naddresses = [\"2001:db8:1::254\"]\n").expect("valid");
        let g = &p.vrrp_groups()[0];
        assert_eq!(g.addrs[0].to_string(), "fe80::200:5eff:fe00:207");
        assert_eq!(g.addrs[1].to_string(), "2001:db8:1::254");
        let p = with("[[vrrp]]\ninterface = \"lan0\"\nvrid = 7\naddresses = [\"fe80::1\", \"2001:db8:1::254\"]\n")
            .expect("valid");
        assert_eq!(p.vrrp_groups()[0].addrs.len(), 2, "a link-local first is kept");
    }

    #[test]
    fn bad_groups_name_file_line_and_key() {
        err(&GOOD.replace("interval_ms = 100", "interval_ms = 5"), "vrrp[0].interval_ms", "10..=40950");
        err(&GOOD.replace("interval_ms = 100", "interval_ms = 105"), "vrrp[0].interval_ms", "steps of 10");
        err(&GOOD.replace("vrid = 10", "vrid = 0"), "vrrp[0].vrid", "1..=255");
        err(&GOOD.replace("priority = 200", "priority = 0"), "vrrp[0].priority", "1..=255");
        err(&GOOD.replace("\"lan0\"", "\"nope\""), "vrrp[0].interface", "no interface");
        err(
            &GOOD.replace("10.1.0.254\"", "10.1.0.254\", \"2001:db8:1::9\""),
            "vrrp[0].addresses[1]",
            "one address family",
        );
        err(&GOOD.replace("10.1.0.254", "10.1.0.254/24"), "vrrp[0].addresses[0]", "invalid address");
        err(&GOOD.replace("priority = 200", "priority = 255"), "vrrp[0].priority", "owner");
        err(&GOOD.replace("10.1.0.254", "10.1.0.2"), "vrrp[0].priority", "owner's priority is 255");
        err(&format!("{GOOD}{GOOD}"), "vrrp[1].vrid", "already used");
        err(&format!("{GOOD}track_interfaces = [\"x\"]\n"), "vrrp[0].track_interfaces[0]", "no interface");
        err(&format!("{GOOD}track_routes = [\"10.0.0.0/33\"]\n"), "vrrp[0].track_routes[0]", "");
        err(&format!("{GOOD}notify = \" \"\n"), "vrrp[0].notify", "empty");
        let xdp = format!(
            "{}\n{GOOD}",
            BASE.replacen("driver = \"memory\"\nmac = \"02:00:00:00:00:01\"", "driver = \"xdp\"\ndevice = \"x0\"", 1)
        );
        // Every lane hands advertisements to tern (the XDP lane punts them,
        // the AF_XDP steering program redirects them).
        parse(&xdp, "t.toml", Path::new(".")).expect("[[vrrp]] on the XDP lane");
        let afxdp = xdp.replacen("driver = \"xdp\"", "driver = \"afxdp\"", 1);
        parse(&afxdp, "t.toml", Path::new(".")).expect("[[vrrp]] on the AF_XDP lane");
    }

    #[test]
    fn the_owner_and_two_families_on_one_vrid_are_accepted() {
        let owner = GOOD.replace("priority = 200", "priority = 255").replace("10.1.0.254", "10.1.0.2");
        assert!(with(&owner).is_ok());
        let six = "[[vrrp]]\ninterface = \"lan0\"\nvrid = 10\naddresses = [\"2001:db8:1::254\"]\n";
        assert_eq!(with(&format!("{GOOD}{six}")).expect("valid").vrrp_groups().len(), 2);
    }
}
