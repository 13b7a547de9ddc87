//! The reference evaluator: the obvious first-match loop over the rules, read
//! straight from the rule model. Slow and simple on purpose; the compiled
//! classifier is tested against it.

use crate::key::PacketKey;
use crate::rule::{Action, Family, Rule, RuleAction, RuleSet};
use crate::value::{Item, List, NumRange, RangeKind};

/// What the reference evaluator decided, with every count-only rule that
/// matched before the deciding rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinearVerdict {
    pub action: Action,
    /// Index of the terminal rule that decided, `None` for the default.
    pub rule: Option<u32>,
    /// Count-only rules that matched, in rule order.
    pub counted: Vec<u32>,
}

/// Evaluates `set` on `key`; `ifindex` resolves interface names (a name it
/// does not know never matches).
pub fn evaluate(set: &RuleSet, ifindex: &dyn Fn(&str) -> Option<u16>, key: &PacketKey) -> LinearVerdict {
    let mut counted = Vec::new();
    for (i, r) in set.rules.iter().enumerate() {
        if !rule_matches(r, ifindex, key) {
            continue;
        }
        match r.action.terminal() {
            Some(action) => {
                return LinearVerdict { action, rule: Some(i as u32), counted };
            }
            None => counted.push(i as u32),
        }
    }
    LinearVerdict { action: set.default, rule: None, counted }
}

fn any<T>(l: &Option<List<T>>, f: impl Fn(&T) -> bool) -> bool {
    l.as_ref().is_none_or(|l| l.iter().any(f))
}

fn num<K: RangeKind>(l: &Option<List<NumRange<K>>>, v: u32) -> bool
where
    NumRange<K>: Item,
{
    any(l, |r| r.contains(v))
}

/// Whether one rule matches the key.
pub fn rule_matches(r: &Rule, ifindex: &dyn Fn(&str) -> Option<u16>, key: &PacketKey) -> bool {
    let family_ok = match r.family {
        Some(Family::Ipv4) => !key.is_v6,
        Some(Family::Ipv6) => key.is_v6,
        None => true,
    };
    if !family_ok {
        return false;
    }
    let addr_ok = |l: &Option<_>, a: u128| {
        any(l, |p: &crate::value::Prefix| {
            let (lo, hi) = p.range();
            p.is_v6() == key.is_v6 && lo <= a && a <= hi
        })
    };
    let (src, dst) = if key.is_v6 { (key.src, key.dst) } else { (key.src as u32 as u128, key.dst as u32 as u128) };
    if !addr_ok(&r.src, src) || !addr_ok(&r.dst, dst) {
        return false;
    }
    if !num(&r.proto, key.proto as u32) {
        return false;
    }
    // Implicit protocol of the transport keys.
    let ports_ok = key.l4_valid && matches!(key.proto, 6 | 17 | 33 | 132 | 136);
    let ports_rule = r.sport.is_some() || r.dport.is_some();
    if ports_rule && !(ports_ok && num(&r.sport, key.sport as u32) && num(&r.dport, key.dport as u32)) {
        return false;
    }
    let icmp4 = r.icmp_type.is_some() || r.icmp_code.is_some();
    let icmp4_ok = key.l4_valid
        && key.proto == 1
        && num(&r.icmp_type, key.icmp_type as u32)
        && num(&r.icmp_code, key.icmp_code as u32);
    if icmp4 && !icmp4_ok {
        return false;
    }
    let icmp6 = r.icmpv6_type.is_some() || r.icmpv6_code.is_some();
    let icmp6_ok = key.l4_valid
        && key.proto == 58
        && num(&r.icmpv6_type, key.icmp_type as u32)
        && num(&r.icmpv6_code, key.icmp_code as u32);
    if icmp6 && !icmp6_ok {
        return false;
    }
    if r.tcp_flags.is_some() && !(key.l4_valid && key.proto == 6 && any(&r.tcp_flags, |f| f.matches(key.tcp_flags))) {
        return false;
    }
    let if_ok = |l: &Option<List<crate::value::IfName>>, idx: u16| any(l, |n| ifindex(&n.0) == Some(idx));
    if !if_ok(&r.iif, key.in_if) || !if_ok(&r.oif, key.out_if) {
        return false;
    }
    num(&r.vlan, key.vlan as u32) && num(&r.dscp, key.dscp as u32)
}

/// True if the action of rule `i` is count-only.
pub fn is_count(set: &RuleSet, i: u32) -> bool {
    set.rules.get(i as usize).is_some_and(|r| r.action == RuleAction::Count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::parse_toml;
    use std::net::Ipv4Addr;

    fn no_ifs(_: &str) -> Option<u16> {
        None
    }

    #[test]
    fn first_terminal_match_wins_and_counts_accumulate() {
        let sets = parse_toml(
            r#"
[[acl]]
name = "A"
default = "drop"
[[acl.rule]]
action = "count"
proto = "udp"
[[acl.rule]]
action = "accept"
dport = [53, "1000-2000"]
[[acl.rule]]
action = "count"
[[acl.rule]]
action = "drop"
src = "10.0.0.0/8"
"#,
        )
        .unwrap();
        let s = &sets[0];
        let k = PacketKey::v4(Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(1, 1, 1, 1), 17).with_ports(9, 53);
        assert_eq!(evaluate(s, &no_ifs, &k), LinearVerdict { action: Action::Accept, rule: Some(1), counted: vec![0] });
        let k2 = PacketKey { dport: 54, ..k };
        assert_eq!(
            evaluate(s, &no_ifs, &k2),
            LinearVerdict { action: Action::Drop, rule: Some(3), counted: vec![0, 2] }
        );
        let k3 = PacketKey { src: u32::from(Ipv4Addr::new(11, 0, 0, 1)) as u128, proto: 6, ..k2 };
        assert_eq!(evaluate(s, &no_ifs, &k3), LinearVerdict { action: Action::Drop, rule: None, counted: vec![2] });
        // A fragment: the port rule cannot match.
        let frag = PacketKey { l4_valid: false, ..k };
        assert_eq!(evaluate(s, &no_ifs, &frag).rule, Some(3));
    }
}
