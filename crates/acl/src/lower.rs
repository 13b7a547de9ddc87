//! Lowering: a rule becomes, per packet field, a set of disjoint intervals
//! over that field's integer domain (or "any"). The classifier is built from
//! this form only, so every field is handled the same way.
//!
//! Transport fields get one extra value meaning "not present" (ports of an
//! ICMP packet, anything of a non-first fragment); a rule that names the
//! field never covers that value, a rule that does not covers it.

use crate::key::PacketKey;
use crate::rule::{AclError, PORT_PROTOCOLS, Rule, RuleAction, RuleSet};
use crate::value::{Item, List, NumRange, RangeKind};

/// The packet fields, in the order the classifier numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum Field {
    Src = 0,
    Dst,
    Proto,
    Sport,
    Dport,
    /// ICMP type and code as `type << 8 | code`.
    Icmp,
    TcpFlags,
    InIf,
    OutIf,
    Vlan,
    Dscp,
}

pub const NF: usize = 11;
pub(crate) const FIELDS: [Field; NF] = [
    Field::Src,
    Field::Dst,
    Field::Proto,
    Field::Sport,
    Field::Dport,
    Field::Icmp,
    Field::TcpFlags,
    Field::InIf,
    Field::OutIf,
    Field::Vlan,
    Field::Dscp,
];

/// "Not present" value of the port and ICMP fields.
pub(crate) const ABSENT16: u32 = 1 << 16;
/// "Not present" value of the TCP flags field.
pub(crate) const ABSENT8: u32 = 1 << 8;

impl Field {
    /// Width of the field's domain in bits (the domain is `0..2^bits`).
    pub(crate) fn bits(self, v6: bool) -> u32 {
        match self {
            Field::Src | Field::Dst => {
                if v6 {
                    128
                } else {
                    32
                }
            }
            Field::Proto | Field::Dscp => 8,
            Field::Sport | Field::Dport | Field::Icmp => 17,
            Field::TcpFlags => 9,
            Field::InIf | Field::OutIf | Field::Vlan => 16,
        }
    }

    pub(crate) fn max(self, v6: bool) -> u128 {
        let b = self.bits(v6);
        if b >= 128 { u128::MAX } else { (1u128 << b) - 1 }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Field::Src => "src",
            Field::Dst => "dst",
            Field::Proto => "proto",
            Field::Sport => "sport",
            Field::Dport => "dport",
            Field::Icmp => "icmp",
            Field::TcpFlags => "tcp_flags",
            Field::InIf => "iif",
            Field::OutIf => "oif",
            Field::Vlan => "vlan",
            Field::Dscp => "dscp",
        }
    }

    /// The key's value for this field when it fits 32 bits (every field but
    /// IPv6 addresses).
    #[inline(always)]
    pub(crate) fn value32(self, k: &PacketKey) -> u32 {
        match self {
            Field::Src => k.src as u32,
            Field::Dst => k.dst as u32,
            Field::Proto => k.proto as u32,
            Field::Sport => {
                if k.has_ports() {
                    k.sport as u32
                } else {
                    ABSENT16
                }
            }
            Field::Dport => {
                if k.has_ports() {
                    k.dport as u32
                } else {
                    ABSENT16
                }
            }
            Field::Icmp => {
                if k.has_icmp() {
                    (k.icmp_type as u32) << 8 | k.icmp_code as u32
                } else {
                    ABSENT16
                }
            }
            Field::TcpFlags => {
                if k.has_tcp_flags() {
                    k.tcp_flags as u32
                } else {
                    ABSENT8
                }
            }
            Field::InIf => k.in_if as u32,
            Field::OutIf => k.out_if as u32,
            Field::Vlan => k.vlan as u32,
            Field::Dscp => k.dscp as u32,
        }
    }

    /// The key's value for this field in the family's domain.
    #[inline(always)]
    pub(crate) fn value(self, k: &PacketKey) -> u128 {
        match self {
            Field::Src => k.src_bits(),
            Field::Dst => k.dst_bits(),
            f => f.value32(k) as u128,
        }
    }
}

/// A rule lowered for one address family.
#[derive(Clone, Debug)]
pub struct LRule {
    /// Index of the rule in its rule set.
    pub idx: u32,
    pub action: RuleAction,
    /// Per field: sorted disjoint intervals, `None` for "any".
    pub conds: [Option<Vec<(u128, u128)>>; NF],
}

impl LRule {
    /// Bit `f` set when the rule constrains field `f`.
    pub(crate) fn mask(&self) -> u16 {
        let mut m = 0;
        for (i, c) in self.conds.iter().enumerate() {
            if c.is_some() {
                m |= 1 << i;
            }
        }
        m
    }

    pub(crate) fn matches(&self, key: &PacketKey) -> bool {
        self.conds.iter().zip(FIELDS).all(|(c, f)| match c {
            None => true,
            Some(iv) => {
                let v = f.value(key);
                iv.iter().any(|&(lo, hi)| lo <= v && v <= hi)
            }
        })
    }
}

/// Sorts and merges overlapping or adjacent intervals.
/// Largest value of field `f`'s domain (fields in [`LRule::conds`] order).
pub fn field_max(f: usize, v6: bool) -> u128 {
    FIELDS.get(f).map_or(0, |x| x.max(v6))
}

/// The value of field `f` of a packet key, as [`LRule::conds`] intervals
/// are matched against (absent ports, ICMP or TCP flags above the domain).
pub fn field_value(k: &PacketKey, f: usize) -> u128 {
    FIELDS.get(f).map_or(0, |x| x.value(k))
}

pub(crate) fn normalize(mut v: Vec<(u128, u128)>) -> Vec<(u128, u128)> {
    v.sort_unstable();
    let mut out: Vec<(u128, u128)> = Vec::with_capacity(v.len());
    for (lo, hi) in v {
        if let Some(last) = out.last_mut()
            && lo <= last.1.saturating_add(1)
        {
            last.1 = last.1.max(hi);
            continue;
        }
        out.push((lo, hi));
    }
    out
}

fn ranges<K: RangeKind>(l: &Option<List<NumRange<K>>>) -> Option<Vec<(u128, u128)>>
where
    NumRange<K>: Item,
{
    l.as_ref().map(|l| normalize(l.iter().map(|r| (r.lo as u128, r.hi as u128)).collect()))
}

/// `Some(v)` unless `v` covers the whole domain `0..=max`.
fn unless_full(v: Vec<(u128, u128)>, max: u128) -> Option<Vec<(u128, u128)>> {
    if v.len() == 1 && v[0] == (0, max) { None } else { Some(v) }
}

/// Lowers every rule of `set` that can match packets of the given family
/// (to per-field intervals: the input of the classifier here and of the
/// XDP lane's classifier).
pub fn lower(set: &RuleSet, ifindex: &dyn Fn(&str) -> Option<u16>, v6: bool) -> Result<Vec<LRule>, AclError> {
    let mut out = Vec::new();
    for (i, r) in set.rules.iter().enumerate() {
        if let Some(l) = lower_rule(set, i, r, ifindex, v6)? {
            out.push(l);
        }
    }
    Ok(out)
}

fn lower_rule(
    set: &RuleSet,
    i: usize,
    r: &Rule,
    ifindex: &dyn Fn(&str) -> Option<u16>,
    v6: bool,
) -> Result<Option<LRule>, AclError> {
    let mut conds: [Option<Vec<(u128, u128)>>; NF] = Default::default();
    // Interfaces are resolved for both families so an unknown name is an
    // error whatever the rule's family.
    for (key, list, field) in [("iif", &r.iif, Field::InIf), ("oif", &r.oif, Field::OutIf)] {
        if let Some(l) = list {
            let mut v = Vec::new();
            for n in l.iter() {
                let idx = ifindex(&n.0).ok_or_else(|| {
                    AclError::new(&set.name, Some(i), Some(key), format!("unknown interface {:?}", n.0))
                })?;
                v.push((idx as u128, idx as u128));
            }
            conds[field as usize] = Some(normalize(v));
        }
    }
    if !r.allows_family(v6) {
        return Ok(None);
    }
    let addr = |l: &Option<List<crate::value::Prefix>>| {
        l.as_ref().map(|l| normalize(l.iter().filter(|p| p.is_v6() == v6).map(|p| p.range()).collect()))
    };
    conds[Field::Src as usize] = addr(&r.src).and_then(|v| unless_full(v, Field::Src.max(v6)));
    conds[Field::Dst as usize] = addr(&r.dst).and_then(|v| unless_full(v, Field::Dst.max(v6)));

    // Protocols: the listed ones, narrowed by what the transport keys imply.
    let icmp4 = r.icmp_type.is_some() || r.icmp_code.is_some();
    let icmp6 = r.icmpv6_type.is_some() || r.icmpv6_code.is_some();
    let ports = r.sport.is_some() || r.dport.is_some();
    let mut protos: Vec<(u128, u128)> = Vec::new();
    for p in 0..=255u8 {
        let listed = r.proto.as_ref().is_none_or(|l| l.iter().any(|x| x.contains(p as u32)));
        let ok = listed
            && (!ports || PORT_PROTOCOLS.contains(&p))
            && (r.tcp_flags.is_none() || p == 6)
            && (!icmp4 || p == 1)
            && (!icmp6 || p == 58);
        if ok {
            protos.push((p as u128, p as u128));
        }
    }
    let protos = normalize(protos);
    if protos.is_empty() {
        return Ok(None);
    }
    conds[Field::Proto as usize] = unless_full(protos, 255);
    conds[Field::Sport as usize] = ranges(&r.sport);
    conds[Field::Dport as usize] = ranges(&r.dport);

    let icmp = if icmp4 {
        Some((ranges(&r.icmp_type), ranges(&r.icmp_code)))
    } else if icmp6 {
        Some((ranges(&r.icmpv6_type), ranges(&r.icmpv6_code)))
    } else {
        None
    };
    if let Some((types, codes)) = icmp {
        let types = types.unwrap_or_else(|| vec![(0, 255)]);
        let mut v = Vec::new();
        for &(a, b) in &types {
            match &codes {
                None => v.push((a << 8, b << 8 | 0xff)),
                Some(cs) => {
                    for t in a..=b {
                        for &(c, d) in cs {
                            v.push((t << 8 | c, t << 8 | d));
                        }
                    }
                }
            }
        }
        conds[Field::Icmp as usize] = Some(normalize(v));
    }
    if let Some(l) = &r.tcp_flags {
        let v = (0..=255u8).filter(|&f| l.iter().any(|p| p.matches(f))).map(|f| (f as u128, f as u128)).collect();
        conds[Field::TcpFlags as usize] = Some(normalize(v));
    }
    conds[Field::Vlan as usize] = ranges(&r.vlan);
    conds[Field::Dscp as usize] = ranges(&r.dscp);
    Ok(Some(LRule { idx: i as u32, action: r.action, conds }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_merges_adjacent_and_overlapping() {
        assert_eq!(normalize(vec![(5, 9), (0, 3), (4, 4), (20, 30), (25, 26)]), vec![(0, 9), (20, 30)]);
        assert_eq!(normalize(vec![(0, u128::MAX), (3, 4)]), vec![(0, u128::MAX)]);
    }

    #[test]
    fn icmp_type_and_code_become_one_field() {
        let sets = crate::rule::parse_toml(
            "[[acl]]\nname='x'\ndefault='drop'\n[[acl.rule]]\naction='accept'\nicmp_type=['echo-request','destination-unreachable']\nicmp_code=3\n",
        )
        .unwrap();
        let l = lower(&sets[0], &|_| None, false).unwrap();
        assert_eq!(l[0].conds[Field::Icmp as usize], Some(vec![(0x303, 0x303), (0x803, 0x803)]));
        assert_eq!(l[0].conds[Field::Proto as usize], Some(vec![(1, 1)]));
    }
}
