//! Synthetic rule sets and packets, deterministic from a seed: the
//! ClassBench-like rules of the benchmarks and the random sets of the
//! differential tests. Public so the engine benchmark can use the same sets.
//!
//! The ClassBench-like profile imitates the ACL seeds of ClassBench (Taylor
//! & Turner, 2005): source prefixes often wildcard or short, destination
//! prefixes mostly long, TCP/UDP dominated, destination ports exact
//! well-known ports or the classic ranges, source ports mostly wildcard;
//! addresses cluster in a few hundred networks so prefixes nest and overlap.

use std::net::IpAddr;

use crate::key::PacketKey;
use crate::rule::{Action, Family, Rule, RuleAction, RuleSet};
use crate::value::{
    DscpRange, IcmpCodeRange, IcmpTypeRange, Icmpv6TypeRange, IfName, List, NumRange, PortRange, Prefix, RangeKind,
    TcpFlags, VlanRange,
};

/// A small, fast, seedable generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n.max(1) as u128) >> 64) as u64
    }
    /// True with probability `p` percent.
    pub fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
    pub fn u128(&mut self) -> u128 {
        (self.next_u64() as u128) << 64 | self.next_u64() as u128
    }
}

/// What kind of rule set to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// ClassBench-like ACL rules over realistic address and port spaces.
    ClassBench,
    /// Tiny value domains (a /26, ports 0-15...) so rules overlap and
    /// packets hit boundaries constantly; every field kind is used.
    Dense,
    /// Most keys absent: rules decided by one or two fields.
    WildcardHeavy,
    /// Most keys present and narrow.
    SpecificHeavy,
}

/// Interface names used by synthetic rules: `if1` .. `if4`.
pub fn ifindex(name: &str) -> Option<u16> {
    name.strip_prefix("if").and_then(|n| n.parse().ok()).filter(|&n| (1..=4).contains(&n))
}

const WELL_KNOWN: [u16; 24] =
    [20, 21, 22, 23, 25, 53, 67, 69, 80, 110, 123, 137, 161, 179, 389, 443, 445, 514, 636, 993, 995, 1433, 3306, 8080];

struct Gen {
    rng: Rng,
    profile: Profile,
    /// Share of IPv6 rules, percent.
    v6_pct: u64,
    nets4: Vec<u32>,
    nets6: Vec<u128>,
}

fn nr<K: RangeKind>(lo: u32, hi: u32) -> NumRange<K> {
    NumRange::new(lo.min(K::MAX), hi.min(K::MAX))
        .unwrap_or_else(|| NumRange::new(0, K::MAX).unwrap_or_else(|| unreachable!()))
}

impl Gen {
    fn new(seed: u64, profile: Profile, v6_pct: u64) -> Self {
        let mut rng = Rng::new(seed);
        let (n4, n6) = if profile == Profile::Dense { (4, 4) } else { (300, 300) };
        let nets4 = (0..n4)
            .map(|_| if profile == Profile::Dense { 0x0a00_0000 } else { (rng.next_u64() as u32) & 0xffff_ff00 })
            .collect();
        let nets6 = (0..n6)
            .map(|_| {
                if profile == Profile::Dense {
                    0x2001_0db8u128 << 96
                } else {
                    0x2001_0db8u128 << 96 | (rng.u128() >> 32) & !((1u128 << 64) - 1)
                }
            })
            .collect();
        Gen { rng, profile, v6_pct, nets4, nets6 }
    }

    fn prefix(&mut self, v6: bool, wild_pct: u64, long: bool) -> Option<Prefix> {
        if self.rng.pct(wild_pct) {
            return None;
        }
        let dense = self.profile == Profile::Dense;
        if v6 {
            let base = *self.rng.pick(&self.nets6);
            let len = if dense {
                120 + self.rng.below(9) as u8
            } else if long {
                *self.rng.pick(&[48u8, 56, 64, 64, 96, 112, 128, 128])
            } else {
                *self.rng.pick(&[16u8, 24, 32, 32, 40, 48, 56, 64])
            };
            let host = if dense {
                self.rng.below(256) as u128
            } else {
                self.rng.u128() >> 64 | (self.rng.below(1 << 16) as u128) << 64
            };
            Some(Prefix::new_truncating(IpAddr::V6((base | host).into()), len))
        } else {
            let base = *self.rng.pick(&self.nets4);
            let len = if dense {
                24 + self.rng.below(9) as u8
            } else if long {
                *self.rng.pick(&[16u8, 20, 24, 24, 28, 30, 32, 32, 32, 32])
            } else {
                *self.rng.pick(&[8u8, 12, 16, 16, 20, 24, 24, 28, 32, 32])
            };
            let host = if dense { self.rng.below(64) as u32 } else { self.rng.below(256) as u32 };
            let base = if len < 24 {
                base ^ (self.rng.next_u64() as u32 & 0x00ff_ff00 & !(u32::MAX << (32 - len.max(8))))
            } else {
                base
            };
            Some(Prefix::new_truncating(IpAddr::V4((base | host).into()), len))
        }
    }

    fn ports(&mut self, wild_pct: u64, src: bool) -> Option<List<PortRange>> {
        if self.rng.pct(wild_pct) {
            return None;
        }
        if self.profile == Profile::Dense {
            let a = self.rng.below(16) as u32;
            let b = a + self.rng.below(4) as u32;
            let mut l = vec![nr(a, b)];
            if self.rng.pct(20) {
                l.push(nr(65530, 65535));
            }
            return Some(List(l));
        }
        let r = self.rng.below(100);
        let one = |p: u16| nr::<crate::value::PortKind>(p as u32, p as u32);
        Some(List(vec![if src {
            if r < 50 { nr(1024, 65535) } else { one(*self.rng.pick(&WELL_KNOWN)) }
        } else if r < 60 {
            one(*self.rng.pick(&WELL_KNOWN))
        } else if r < 75 {
            nr(1024, 65535)
        } else if r < 82 {
            nr(0, 1023)
        } else {
            let a = self.rng.below(60000) as u32;
            nr(a, a + self.rng.below(2000) as u32)
        }]))
    }

    fn rule(&mut self) -> Rule {
        let action = match self.rng.below(100) {
            0..=47 => RuleAction::Drop,
            48..=94 => RuleAction::Accept,
            _ => RuleAction::Count,
        };
        let mut r = Rule::new(action);
        let v6 = self.rng.pct(self.v6_pct);
        let (src_wild, dst_wild, port_wild, other) = match self.profile {
            Profile::ClassBench => (35, 0, 25, 0),
            Profile::Dense => (30, 30, 50, 15),
            Profile::WildcardHeavy => (80, 70, 80, 3),
            Profile::SpecificHeavy => (2, 2, 5, 10),
        };
        r.src = self.prefix(v6, src_wild, false).map(List::one);
        r.dst = self.prefix(v6, dst_wild, true).map(List::one);
        if self.rng.pct(5) {
            // A second prefix (OR), sometimes of the other family.
            let fam = if self.rng.pct(30) { !v6 } else { v6 };
            if let (Some(l), Some(p)) = (r.dst.as_mut(), self.prefix(fam, 0, true)) {
                l.0.push(p);
            }
        }
        if r.src.is_none() && r.dst.is_none() && self.rng.pct(20) {
            r.family = Some(if v6 { Family::Ipv6 } else { Family::Ipv4 });
        }
        let any_proto = if self.profile == Profile::ClassBench { 0 } else { 10 };
        let proto = match self.rng.below(100 - any_proto) {
            0..=54 => Some(6u8),
            55..=79 => Some(17),
            80..=84 => Some(if v6 { 58 } else { 1 }),
            85..=89 => Some(*self.rng.pick(&[47u8, 50, 132])),
            _ => None,
        };
        let wildcard_proto = self.profile == Profile::WildcardHeavy && self.rng.pct(60);
        match proto {
            _ if wildcard_proto => {}
            Some(p @ (6 | 17 | 132)) => {
                r.proto = Some(List::one(nr(p as u32, p as u32)));
                r.sport = self.ports(if self.profile == Profile::Dense { 60 } else { 85 }, true);
                r.dport = self.ports(port_wild, false);
                if p == 6 && self.rng.pct(if other > 0 { other } else { 3 }) {
                    let f = *self.rng.pick(&[
                        TcpFlags::new(0x12, 0x02),
                        TcpFlags::new(0x04, 0x04),
                        TcpFlags::new(0x11, 0x11),
                    ]);
                    r.tcp_flags = Some(List::one(f));
                }
            }
            Some(1) => {
                r.proto = Some(List::one(nr(1, 1)));
                if self.rng.pct(60) {
                    let t = *self.rng.pick(&[0u32, 3, 8, 11]);
                    let t: IcmpTypeRange = nr(t, t);
                    r.icmp_type = Some(List::one(t));
                    if self.rng.pct(30) {
                        let c: IcmpCodeRange = nr(0, self.rng.below(4) as u32);
                        r.icmp_code = Some(List::one(c));
                    }
                }
            }
            Some(58) => {
                r.proto = Some(List::one(nr(58, 58)));
                if self.rng.pct(60) {
                    let t = *self.rng.pick(&[1u32, 128, 129, 135, 136]);
                    let t: Icmpv6TypeRange = nr(t, t);
                    r.icmpv6_type = Some(List::one(t));
                }
            }
            Some(p) => r.proto = Some(List::one(nr(p as u32, p as u32))),
            None => {
                if self.profile == Profile::Dense && self.rng.pct(30) {
                    r.proto = Some(List(vec![nr(6, 6), nr(17, 17)]));
                    r.dport = self.ports(0, false);
                }
            }
        }
        if self.rng.pct(other) {
            let names: Vec<IfName> =
                (0..=self.rng.below(2)).map(|_| IfName(format!("if{}", 1 + self.rng.below(4)))).collect();
            r.iif = Some(List(names));
        }
        if self.rng.pct(other) {
            r.oif = Some(List::one(IfName(format!("if{}", 1 + self.rng.below(4)))));
        }
        if self.rng.pct(other) {
            let a = self.rng.below(5) as u32;
            let v: VlanRange = nr(a, a + self.rng.below(2) as u32);
            r.vlan = Some(List::one(v));
        }
        if self.rng.pct(other) {
            let a = *self.rng.pick(&[0u32, 10, 46]);
            let d: DscpRange = nr(a, a + self.rng.below(3) as u32);
            r.dscp = Some(List::one(d));
        }
        r
    }
}

/// A rule set of `n` rules of the given profile; `v6_pct` percent of the
/// rules are IPv6 (the rest IPv4). Default policy drop if `seed` is even.
pub fn rules(n: usize, seed: u64, profile: Profile, v6_pct: u64) -> RuleSet {
    let mut g = Gen::new(seed, profile, v6_pct);
    let mut s =
        RuleSet::new(format!("SYNTH_{seed}"), if seed.is_multiple_of(2) { Action::Drop } else { Action::Accept });
    for _ in 0..n {
        let r = g.rule();
        s.rules.push(r);
    }
    s
}

/// ClassBench-like rule set of `n` rules, all IPv4 (`v6 == false`) or all IPv6.
pub fn classbench(n: usize, seed: u64, v6: bool) -> RuleSet {
    rules(n, seed, Profile::ClassBench, if v6 { 100 } else { 0 })
}

fn pick_in<T: Copy>(rng: &mut Rng, lo: T, hi: T, to: impl Fn(T) -> u128, from: impl Fn(u128) -> T, max: u128) -> T {
    let (l, h) = (to(lo), to(hi));
    match rng.below(6) {
        0 => lo,
        1 => hi,
        2 => from(l.saturating_sub(1)),
        3 => from(if h < max { h + 1 } else { h }),
        _ => from(l + (rng.u128() % (h - l).saturating_add(1).max(1))),
    }
}

/// Packets aimed at the rules of `set`: each copies a random rule's values
/// (inside, on the edge of, or just outside each range), with some fields
/// random, so most rules and their boundaries are exercised.
pub fn packets(set: &RuleSet, n: usize, seed: u64) -> Vec<PacketKey> {
    let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(7));
    (0..n).map(|_| packet(set, &mut rng)).collect()
}

fn packet(set: &RuleSet, rng: &mut Rng) -> PacketKey {
    let rule = if set.rules.is_empty() { None } else { Some(rng.pick(&set.rules).clone()) };
    let r = rule.unwrap_or_else(|| Rule::new(RuleAction::Accept));
    let fams: Vec<bool> = [false, true].into_iter().filter(|&v6| r.allows_family(v6)).collect();
    let v6 = if fams.is_empty() { rng.pct(50) } else { *rng.pick(&fams) };
    let addr_of = |rng: &mut Rng, l: &Option<List<Prefix>>| -> u128 {
        let mine: Vec<Prefix> = l.iter().flat_map(|l| l.iter().copied()).filter(|p| p.is_v6() == v6).collect();
        if !mine.is_empty() && !rng.pct(10) {
            let (lo, hi) = rng.pick(&mine).range();
            let max = if v6 { u128::MAX } else { u32::MAX as u128 };
            return pick_in(rng, lo, hi, |x| x, |x| x, max);
        }
        if v6 { 0x2001_0db8u128 << 96 | rng.u128() >> 64 } else { 0x0a00_0000 | rng.below(1 << 12) as u128 }
    };
    let src = addr_of(rng, &r.src);
    let dst = addr_of(rng, &r.dst);
    let num = |rng: &mut Rng, l: &Option<List<PortRange>>, max: u32| -> u32 {
        match l {
            Some(l) if !rng.pct(10) => {
                let x = *rng.pick(&l.0);
                pick_in(rng, x.lo, x.hi, |v| v as u128, |v| v as u32, max as u128).min(max)
            }
            _ => {
                let any = rng.below(max as u64 + 1) as u32;
                *rng.pick(&[0u32, 53, 80, 443, 1024, 65535, any])
            }
        }
    };
    let proto = match &r.proto {
        Some(l) if !rng.pct(5) => {
            let x = *rng.pick(&l.0);
            x.lo + rng.below((x.hi - x.lo + 1) as u64) as u32
        }
        _ => *rng.pick(&[6u32, 17, 1, 58, 47, 0]),
    } as u8;
    let mut k = PacketKey { src, dst, is_v6: v6, proto, ..Default::default() };
    k.sport = num(rng, &r.sport, 65535) as u16;
    k.dport = num(rng, &r.dport, 65535) as u16;
    let icmp_t = |rng: &mut Rng, lo: Option<(u32, u32)>| match lo {
        Some((a, b)) if !rng.pct(10) => pick_in(rng, a, b, |v| v as u128, |v| v as u32, 255).min(255),
        _ => rng.below(256) as u32,
    };
    let t1 = r.icmp_type.as_ref().map(|l| (l.0[0].lo, l.0[0].hi));
    let t6 = r.icmpv6_type.as_ref().map(|l| (l.0[0].lo, l.0[0].hi));
    k.icmp_type = icmp_t(rng, t1.or(t6)) as u8;
    let c1 = r.icmp_code.as_ref().map(|l| (l.0[0].lo, l.0[0].hi));
    k.icmp_code = if c1.is_some() || rng.pct(50) { icmp_t(rng, c1) as u8 } else { 0 };
    k.tcp_flags = match &r.tcp_flags {
        Some(l) if !rng.pct(20) => {
            let f = l.0[0];
            (rng.below(256) as u8 & !f.mask) | f.value
        }
        _ => rng.below(256) as u8,
    };
    k.l4_valid = !rng.pct(5);
    let ifx = |rng: &mut Rng, l: &Option<List<IfName>>| match l {
        Some(l) if !rng.pct(20) => ifindex(&rng.pick(&l.0).0).unwrap_or(0),
        _ => rng.below(6) as u16,
    };
    k.in_if = ifx(rng, &r.iif);
    k.out_if = ifx(rng, &r.oif);
    k.vlan = match &r.vlan {
        Some(l) if !rng.pct(20) => l.0[0].lo as u16 + rng.below(3) as u16,
        _ => rng.below(6) as u16,
    };
    k.dscp = match &r.dscp {
        Some(l) if !rng.pct(20) => (l.0[0].lo + rng.below(4) as u32).min(63) as u8,
        _ => *rng.pick(&[0u8, 10, 46, 63]),
    };
    k
}

/// Uniformly random packets of one family in the address space of the
/// ClassBench-like sets (mostly matching no specific rule: the worst case for
/// first-match, every candidate is looked at).
pub fn random_packets(n: usize, seed: u64, v6: bool) -> Vec<PacketKey> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let proto = *rng.pick(&[6u8, 6, 6, 17, 17, 1]);
            let (src, dst) = if v6 {
                (rng.u128(), rng.u128())
            } else {
                (rng.next_u64() as u32 as u128, rng.next_u64() as u32 as u128)
            };
            PacketKey { src, dst, is_v6: v6, proto, ..Default::default() }
                .with_ports(rng.below(65536) as u16, *rng.pick(&WELL_KNOWN))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_sets_validate_and_are_deterministic() {
        for p in [Profile::ClassBench, Profile::Dense, Profile::WildcardHeavy, Profile::SpecificHeavy] {
            let a = rules(300, 7, p, 30);
            a.validate().unwrap_or_else(|e| panic!("{p:?}: {e}"));
            assert_eq!(a, rules(300, 7, p, 30));
            let k = packets(&a, 50, 1);
            assert_eq!(k, packets(&a, 50, 1));
        }
    }
}
