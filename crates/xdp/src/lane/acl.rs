//! The firewall classifier compiled for the lane.
//!
//! Each rule set is lowered per address family by `tern-acl` itself
//! (`tern_acl::lower_rules`: per field, the values a rule
//! accepts as disjoint intervals, transport fields with an extra "absent"
//! value), then laid out as the lane's bitmap classifier: per field, the
//! field's domain cut into elementary intervals, each carrying the bitmap
//! of rules that accept it. The program ANDs one bitmap per constrained
//! field (a binary search per field) and takes the lowest terminal rule;
//! count-only rules below it are counted.
//!
//! What the lane cannot hold exactly is left to userspace rule by rule: a
//! rule whose field cuts into more than [`ACL_INTERVALS`] intervals (a TCP
//! flags match, many ports) loses that field's condition and becomes a
//! *punt* rule (terminal and count bits both set): a packet it would
//! decide goes to userspace, which decides exactly; packets an earlier
//! rule decides, or that even the wider match misses, stay in the lane.
//! Beyond [`ACL_RULES`] rules, the last slot is a punt rule matching
//! everything. So the lane never gives a verdict userspace would not give.

use super::layout::{ACL_INTERVALS, ACL_RULES, AclSetHdr, NF};
use tern_acl::{Action, PacketKey, RuleAction, RuleSet};

// The lane's field tables are tern-acl's fields, in its order.
const _: () = assert!(NF == tern_acl::FIELD_COUNT);

/// Largest value of field `f`'s domain.
fn field_max(f: usize, v6: bool) -> u128 {
    tern_acl::field_max(f, v6)
}

/// A field's value for a key, as the rule intervals are matched.
pub(crate) fn field_value(k: &PacketKey, f: usize) -> u128 {
    tern_acl::field_value(k, f)
}

/// One field's interval table: `starts[i]..starts[i+1]` carry `bits[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FieldTable {
    pub field: usize,
    pub starts: Vec<u128>,
    pub bits: Vec<u64>,
}

impl FieldTable {
    /// The program's lookup: the last interval starting at or below `v`.
    pub(crate) fn lookup(&self, v: u128) -> u64 {
        let i = self.starts.partition_point(|&s| s <= v).saturating_sub(1);
        self.bits.get(i).copied().unwrap_or(0)
    }
}

/// One rule set for one address family, as the lane holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaneAclFamily {
    pub(crate) hdr: AclSetHdr,
    pub(crate) fields: Vec<FieldTable>,
    /// Rule index of each bit.
    pub(crate) rules: Vec<u32>,
    /// Why the lane does not classify this family itself (packets that
    /// need it go to userspace).
    pub not_compiled: Option<String>,
    /// Rules the lane holds only as punt rules, with why: packets they
    /// would decide go to userspace.
    pub punted: Vec<(u32, String)>,
}

/// A rule set compiled for the lane: IPv4 and IPv6.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaneAcl {
    pub name: String,
    /// Rules in the rule set (the default policy's hit slot follows them).
    pub rule_count: usize,
    pub v4: LaneAclFamily,
    pub v6: LaneAclFamily,
}

/// What the lane decides for a key (the simulation of the program's
/// classifier, for tests and for `tern` to explain a verdict).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneVerdict {
    pub action: Action,
    /// Deciding rule (`None`: the default policy).
    pub rule: Option<u32>,
    /// Count-only rules matched before it, in rule order.
    pub counted: Vec<u32>,
}

/// The interval starts rules cut field `f` into.
fn field_starts(rules: &[tern_acl::LoweredRule], f: usize, max: u128) -> Vec<u128> {
    let mut starts = vec![0u128];
    for r in rules {
        for &(lo, hi) in r.conds[f].iter().flatten() {
            starts.push(lo);
            if hi < max {
                starts.push(hi + 1);
            }
        }
    }
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// Field names for the operator (tern-acl's field order).
const FIELD_NAMES: [&str; NF] =
    ["src", "dst", "proto", "sport", "dport", "icmp", "tcp_flags", "iif", "oif", "vlan", "dscp"];

fn build_family(set: &RuleSet, ifindex: &dyn Fn(&str) -> Option<u16>, v6: bool) -> LaneAclFamily {
    let mut rules = match tern_acl::lower_rules(set, ifindex, v6) {
        Ok(l) => l,
        Err(e) => return LaneAclFamily { not_compiled: Some(e.to_string()), ..Default::default() },
    };
    // Slots the lane holds as punt rules.
    let mut punt = vec![false; rules.len().min(ACL_RULES)];
    let mut punted = Vec::new();
    if rules.len() > ACL_RULES {
        let n = rules.len();
        rules.truncate(ACL_RULES);
        let last = &mut rules[ACL_RULES - 1];
        punted.push((last.idx, format!("it and the rules after it ({n} in this family; the lane holds {ACL_RULES})")));
        last.conds = Default::default();
        punt[ACL_RULES - 1] = true;
    }
    for (f, fname) in FIELD_NAMES.iter().enumerate() {
        let max = field_max(f, v6);
        let mut n = field_starts(&rules, f, max).len();
        while n > ACL_INTERVALS {
            // The rule with the most intervals in this field matches any
            // value of it from now on, as a punt rule.
            let Some(b) = (0..rules.len()).max_by_key(|&b| rules[b].conds[f].as_ref().map_or(0, Vec::len)) else {
                break;
            };
            let Some(c) = rules[b].conds[f].take() else { break };
            if !punt[b] {
                punt[b] = true;
                punted.push((
                    rules[b].idx,
                    format!("its {} match is {} ranges (the lane holds {ACL_INTERVALS} per field)", fname, c.len()),
                ));
            }
            n = field_starts(&rules, f, max).len();
        }
    }
    let mut hdr = AclSetHdr { ok: true, default_drop: set.default == Action::Drop, ..Default::default() };
    hdr.nrules = rules.len() as u32;
    for (b, r) in rules.iter().enumerate() {
        let bit = 1u64 << b;
        hdr.all |= bit;
        if punt[b] {
            hdr.terminal |= bit;
            hdr.count |= bit;
            continue;
        }
        match r.action {
            RuleAction::Accept => hdr.terminal |= bit,
            RuleAction::Drop => {
                hdr.terminal |= bit;
                hdr.drop |= bit;
            }
            RuleAction::Count => hdr.count |= bit,
        }
    }
    let mut fields = Vec::new();
    for f in 0..NF {
        if rules.iter().all(|r| r.conds[f].is_none()) {
            continue;
        }
        let starts = field_starts(&rules, f, field_max(f, v6));
        let bits = starts
            .iter()
            .map(|&s| {
                rules.iter().enumerate().fold(0u64, |m, (b, r)| {
                    let hit = r.conds[f].as_ref().is_none_or(|iv| iv.iter().any(|&(lo, hi)| lo <= s && s <= hi));
                    if hit { m | 1 << b } else { m }
                })
            })
            .collect();
        hdr.fields |= 1 << f;
        fields.push(FieldTable { field: f, starts, bits });
    }
    LaneAclFamily { hdr, fields, rules: rules.iter().map(|r| r.idx).collect(), not_compiled: None, punted }
}

/// Compiles a rule set for the lane. `ifindex` maps interface names to
/// tern interface indices, as for `tern_acl::compile`.
pub fn compile_acl(set: &RuleSet, ifindex: &dyn Fn(&str) -> Option<u16>) -> LaneAcl {
    LaneAcl {
        name: set.name.clone(),
        rule_count: set.rules.len(),
        v4: build_family(set, ifindex, false),
        v6: build_family(set, ifindex, true),
    }
}

impl LaneAclFamily {
    /// Whether the program classifies this family itself.
    pub fn compiled(&self) -> bool {
        self.not_compiled.is_none()
    }

    /// The rule index behind a hit slot (`None`: the default policy).
    pub(crate) fn slot_rule(&self, slot: usize) -> Option<u32> {
        self.rules.get(slot).copied()
    }
}

impl LaneAcl {
    /// What the program decides for `key`; `None` when the family is not
    /// compiled or a punt rule decides (the packet would go to userspace).
    pub fn classify(&self, key: &PacketKey) -> Option<LaneVerdict> {
        let fam = if key.is_v6 { &self.v6 } else { &self.v4 };
        if !fam.compiled() {
            return None;
        }
        let mut m = fam.hdr.all;
        for t in &fam.fields {
            m &= t.lookup(field_value(key, t.field));
        }
        let first = m & fam.hdr.terminal;
        let first = first & first.wrapping_neg();
        if first & fam.hdr.count != 0 {
            // A punt rule: userspace decides.
            return None;
        }
        let (action, rule, below) = if first != 0 {
            let b = first.trailing_zeros() as usize;
            let a = if fam.hdr.drop & first != 0 { Action::Drop } else { Action::Accept };
            (a, fam.slot_rule(b), first - 1)
        } else {
            (if fam.hdr.default_drop { Action::Drop } else { Action::Accept }, None, u64::MAX)
        };
        let mut counted = Vec::new();
        let mut c = m & fam.hdr.count & below;
        while c != 0 {
            counted.extend(fam.slot_rule(c.trailing_zeros() as usize));
            c &= c - 1;
        }
        Some(LaneVerdict { action, rule, counted })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{IpAddr, Ipv4Addr};
    use tern_acl::Rule;
    use tern_acl::value::{List, PortRange, Prefix, ProtoRange};

    fn no_ifs(_: &str) -> Option<u16> {
        None
    }

    /// The lane's verdict equals tern-acl's, with the count-only hits.
    fn same(set: &RuleSet, acl: &LaneAcl, key: &PacketKey) {
        let c = tern_acl::compile(set, &|_| None).expect("compiles");
        let want = c.classify(key);
        let got = acl.classify(key).expect("compiled for the lane");
        assert_eq!((got.action, got.rule), (want.action, want.rule), "key {key:?}");
        let mut counted = Vec::new();
        c.count_hits(key, &want, |r| counted.push(r));
        assert_eq!(got.counted, counted, "count-only hits for {key:?}");
    }

    #[test]
    fn scenario_rule_sets_compile_and_agree() {
        let fifty = tern_acl::scenario_50_drop_rules();
        let acl = compile_acl(&fifty, &no_ifs);
        assert!(acl.v4.compiled(), "{:?}", acl.v4.not_compiled);
        assert_eq!(acl.v4.fields.len(), 1, "only src is constrained");
        for n in [0u8, 1, 25, 50, 51] {
            let k = PacketKey::v4(Ipv4Addr::new(1, 1, n, 1), Ipv4Addr::new(198, 18, 0, 1), 17).with_ports(1, 2);
            same(&fifty, &acl, &k);
        }
        let drop = tern_acl::scenario_drop_test();
        let acl = compile_acl(&drop, &no_ifs);
        assert!(acl.v4.compiled());
        for port in [0u16, 655, 656, 1311, 1312, 40000, 65535] {
            let k = PacketKey::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(198, 18, 0, 1), 17).with_ports(9, port);
            same(&drop, &acl, &k);
        }
        // No ports (a non-first fragment): the port rules cannot match.
        same(&drop, &acl, &PacketKey::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(198, 18, 0, 1), 17));
        // TCP with ports: the rules are UDP only.
        let tcp = PacketKey::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(1, 1, 1, 1), 6).with_tcp_flags(2);
        same(&drop, &acl, &PacketKey { sport: 1, dport: 100, ..tcp });
    }

    #[test]
    fn too_many_rules_are_left_to_userspace() {
        let mut s = RuleSet::new("big", Action::Accept);
        for n in 0..=ACL_RULES as u32 {
            let mut r = Rule::new(RuleAction::Drop);
            r.dport = Some(List::one(PortRange::single(n).expect("port")));
            s.rules.push(r);
        }
        let acl = compile_acl(&s, &no_ifs);
        // The first 63 rules in the lane; the last slot punts the rest.
        assert!(acl.v4.compiled());
        assert_eq!(acl.v4.punted.len(), 1, "{:?}", acl.v4.punted);
        assert_eq!(acl.v4.punted[0].0, ACL_RULES as u32 - 1);
        let k = |p: u16| PacketKey::v4(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 6).with_ports(1, p);
        let v = acl.classify(&k(5)).expect("decided in the lane");
        assert_eq!((v.action, v.rule), (Action::Drop, Some(5)));
        assert!(acl.classify(&k(ACL_RULES as u16 - 1)).is_none(), "rule 63 is userspace's");
        assert!(acl.classify(&k(1000)).is_none(), "the default too, past the punt rule");
    }

    /// A rule whose field cuts into more intervals than the lane holds
    /// (TCP flags "syn": 64 ranges) is held as a punt rule; the others
    /// decide in the lane, and where the lane decides it decides as
    /// tern-acl does.
    #[test]
    fn a_rule_too_wide_for_the_lane_is_punted_alone() {
        let sets = tern_acl::parse_toml(
            "[[acl]]\nname='x'\ndefault='accept'\n[[acl.rule]]\naction='drop'\nproto='udp'\ndport=7001\n\
             [[acl.rule]]\naction='drop'\nproto='tcp'\ntcp_flags='syn'\n[[acl.rule]]\naction='drop'\nproto='tcp'\ndport=22\n",
        )
        .expect("parses");
        let acl = compile_acl(&sets[0], &no_ifs);
        assert!(acl.v4.compiled() && acl.v6.compiled());
        assert_eq!(acl.v4.punted.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1], "{:?}", acl.v4.punted);
        assert!(acl.v4.punted[0].1.contains("tcp_flags"), "{:?}", acl.v4.punted);
        let c = tern_acl::compile(&sets[0], &|_| None).expect("compiles");
        let udp = |p: u16| PacketKey::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 17).with_ports(9, p);
        for k in [udp(7000), udp(7001)] {
            let v = acl.classify(&k).expect("UDP is decided in the lane");
            assert_eq!((v.action, v.rule), (c.classify(&k).action, c.classify(&k).rule));
        }
        let tcp = PacketKey::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 6).with_ports(9, 22);
        assert!(acl.classify(&tcp.with_tcp_flags(0x10)).is_none(), "TCP meets the punt rule first");
        assert!(acl.classify(&tcp.with_tcp_flags(0x02)).is_none());
    }

    #[test]
    fn unknown_interface_leaves_the_set_to_userspace() {
        let sets =
            tern_acl::parse_toml("[[acl]]\nname='x'\ndefault='accept'\n[[acl.rule]]\naction='drop'\niif='nope'\n")
                .expect("parses");
        let acl = compile_acl(&sets[0], &no_ifs);
        assert!(!acl.v4.compiled() && !acl.v6.compiled());
    }

    fn arb_rule() -> impl Strategy<Value = Rule> {
        (
            0..3u8,
            proptest::option::of((0u32..4, 0u8..=32)),
            proptest::option::of(prop_oneof![Just(6u32), Just(17), Just(1), Just(47)]),
            proptest::option::of((0u32..2000, 0u32..2000)),
            proptest::option::of((0u32..2000, 0u32..2000)),
            proptest::option::of(0u32..64),
            any::<bool>(),
        )
            .prop_map(|(a, src, proto, sp, dp, dscp, v6only)| {
                let mut r = Rule::new(match a {
                    0 => RuleAction::Accept,
                    1 => RuleAction::Drop,
                    _ => RuleAction::Count,
                });
                if let Some((n, len)) = src {
                    let p = Prefix::new_truncating(IpAddr::V4(Ipv4Addr::new(10, n as u8, 7, 9)), len);
                    r.src = Some(List::one(p));
                }
                if let Some(p) = proto {
                    r.proto = Some(List::one(ProtoRange::single(p).expect("proto")));
                }
                let pr = |(a, b): (u32, u32)| PortRange::new(a.min(b), a.max(b)).expect("range");
                if proto.is_none_or(|p| p == 6 || p == 17) {
                    r.sport = sp.map(|x| List::one(pr(x)));
                    r.dport = dp.map(|x| List::one(pr(x)));
                }
                r.dscp = dscp.map(|d| List::one(tern_acl::value::DscpRange::single(d).expect("dscp")));
                if v6only && r.src.is_none() {
                    r.family = Some(tern_acl::Family::Ipv6);
                }
                r
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        /// Random rule sets and packets: the lane's tables decide as
        /// tern-acl's classifier does, count-only hits included.
        #[test]
        fn lane_tables_agree_with_tern_acl(
            rules in proptest::collection::vec(arb_rule(), 0..40),
            default_drop in any::<bool>(),
            keys in proptest::collection::vec((0u8..4, 0u8..=255, 0u8..4, 0u16..2100, 0u16..2100, 0u8..64, any::<bool>()), 1..40),
        ) {
            let mut set = RuleSet::new("p", if default_drop { Action::Drop } else { Action::Accept });
            set.rules = rules;
            let acl = compile_acl(&set, &no_ifs);
            prop_assert!(acl.v4.compiled() && acl.v6.compiled());
            for (n, host, proto, sp, dp, dscp, v6) in keys {
                let proto = [6u8, 17, 1, 47][usize::from(proto)];
                let mut k = if v6 {
                    PacketKey::v6("2001:db8::1".parse().expect("a"), "2001:db8::2".parse().expect("a"), proto)
                } else {
                    PacketKey::v4(Ipv4Addr::new(10, n, 7, host), Ipv4Addr::new(192, 0, 2, 1), proto)
                };
                if proto == 6 || proto == 17 {
                    k = k.with_ports(sp, dp);
                }
                k.dscp = dscp;
                same(&set, &acl, &k);
            }
        }
    }
}
