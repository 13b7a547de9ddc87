//! The rule sets of the 100GE comparison (SCENARIOS.md section 1), for
//! benchmarks and tests. The same sets exist as nftables fixtures in
//! `tests/fixtures/` (made and dumped by the real `nft`).

use crate::rule::{Action, Rule, RuleAction, RuleSet};
use crate::value::{Item, List, PortRange, Prefix, ProtoRange};

/// "50 FW policies": 50 rules `drop src 1.1.N.1/32` (N = 1..=50), default
/// accept (the 100GE test's `ip saddr 1.1.N.1 drop`).
///
/// Passes: every packet whose source is not one of 1.1.1.1 ... 1.1.50.1
/// (the test traffic comes from other sources, so all of it passes and
/// every packet is checked against all 50 rules).
pub fn scenario_50_drop_rules() -> RuleSet {
    let mut s = RuleSet::new("TEST_IN", Action::Accept);
    for n in 1..=50u8 {
        let mut r = Rule::new(RuleAction::Drop);
        r.src = Some(List::one(Prefix::new([1, 1, n, 1].into(), 32).unwrap_or_else(|_| unreachable!())));
        s.rules.push(r);
    }
    s
}

/// [`scenario_50_drop_rules`] for IPv6: 50 rules `drop src
/// 2001:db8:ffff:N::1/128` (N = 1..=50), default accept. The engine
/// benchmark's `single-flow6-50fw` puts it on an IPv6 flow whose source
/// is none of them, so every packet passes after all 50 rules.
pub fn scenario_50_drop_rules_v6() -> RuleSet {
    let mut s = RuleSet::new("TEST_IN6", Action::Accept);
    for n in 1..=50u16 {
        let mut r = Rule::new(RuleAction::Drop);
        let a = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0xffff, n, 0, 0, 0, 1);
        r.src = Some(List::one(Prefix::new(a.into(), 128).unwrap_or_else(|_| unreachable!())));
        s.rules.push(r);
    }
    s
}

/// Number of rules of [`scenario_drop_test`].
pub const DROP_TEST_RULES: usize = 50;

/// The accepted UDP destination-port ranges of [`scenario_drop_test`]: the
/// port space is cut into 50 segments of 1310 or 1312 ports; each rule
/// accepts the first half of one segment. Together they accept exactly
/// 32768 of the 65536 ports, spread evenly over the space.
pub fn drop_test_ranges() -> Vec<(u16, u16)> {
    let mut out = Vec::with_capacity(DROP_TEST_RULES);
    let mut start = 0u32;
    for k in 0..DROP_TEST_RULES as u32 {
        let half = if k < 18 { 656 } else { 655 };
        out.push((start as u16, (start + half - 1) as u16));
        start += 2 * half;
    }
    out
}

/// Whether [`scenario_drop_test`] accepts a UDP packet to `dport`.
pub fn drop_test_accepts(dport: u16) -> bool {
    drop_test_ranges().iter().any(|&(lo, hi)| lo <= dport && dport <= hi)
}

/// The DDoS drop test: default drop, 50 rules `accept udp dport LO-HI`
/// (see [`drop_test_ranges`]). With traffic of UDP packets to one
/// destination and uniformly random destination ports, exactly half of the
/// port space, so half of the packets, is accepted; everything else
/// (the other half, and any non-UDP packet) is dropped.
pub fn scenario_drop_test() -> RuleSet {
    let mut s = RuleSet::new("DROP_TEST", Action::Drop);
    for (lo, hi) in drop_test_ranges() {
        let mut r = Rule::new(RuleAction::Accept);
        r.proto = Some(List::one(ProtoRange::from_int(17).unwrap_or_else(|_| unreachable!())));
        r.dport = Some(List::one(PortRange::new(lo as u32, hi as u32).unwrap_or_else(|| unreachable!())));
        s.rules.push(r);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_test_accepts_exactly_half() {
        let s = scenario_drop_test();
        assert_eq!(s.rules.len(), 50);
        s.validate().unwrap();
        let accepted = (0..=u16::MAX).filter(|&p| drop_test_accepts(p)).count();
        assert_eq!(accepted, 32768);
        let r = drop_test_ranges();
        assert_eq!(r.last().map(|x| x.1 as u32 + 656), Some(65536));
        // Evenly spread: every 4096-port window is close to half accepted.
        for w in 0..16u32 {
            let n = (w * 4096..(w + 1) * 4096).filter(|&p| drop_test_accepts(p as u16)).count();
            assert!((1900..=2200).contains(&n), "window {w}: {n}");
        }
    }

    #[test]
    fn fifty_drop_rules() {
        let s = scenario_50_drop_rules();
        s.validate().unwrap();
        assert_eq!(s.rules.len(), 50);
        assert_eq!(s.rules[49].src.as_ref().unwrap().0[0].to_string(), "1.1.50.1/32");
        assert_eq!(s.default, Action::Accept);
    }
}
