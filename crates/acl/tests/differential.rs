//! Differential tests: the compiled classifier against the reference linear
//! evaluator, on random rule sets (overlapping ranges, IPv4/IPv6 mixes,
//! count-only rules, wildcard-heavy and specific-heavy sets, up to thousands
//! of rules) and random packets biased to rule boundaries. Both compiler
//! modes are covered: bitmap (small sets), the full cross-product
//! ("table") and, with a tiny table budget, the candidate-list tail.

use proptest::prelude::*;
use tern_acl::synth::{self, Profile};
use tern_acl::{CompileOptions, PacketKey, RuleSet, Verdict, compile_with, linear};

fn check(set: &RuleSet, keys: &[PacketKey], opts: &CompileOptions) -> Result<(), TestCaseError> {
    let c = compile_with(set, &synth::ifindex, opts).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut batch = vec![Verdict::default(); keys.len()];
    c.classify_batch(keys, &mut batch);
    for (k, b) in keys.iter().zip(&batch) {
        let want = linear::evaluate(set, &synth::ifindex, k);
        let got = c.classify(k);
        prop_assert_eq!((got.action, got.rule), (want.action, want.rule), "key {:?}\nstats {:?}", k, c.stats());
        prop_assert_eq!(*b, got, "batch differs for {:?}", k);
        let mut counted = Vec::new();
        c.count_hits(k, &got, |r| counted.push(r));
        prop_assert_eq!(&counted, &want.counted, "count-only hits for {:?}", k);
        prop_assert_eq!(got.counted(), !want.counted.is_empty());
    }
    Ok(())
}

/// Table budgets are kept below the production default (4M entries) so
/// the debug-build tests stay quick; the code paths are the same.
fn both_modes(set: &RuleSet, keys: &[PacketKey]) -> Result<(), TestCaseError> {
    check(set, keys, &CompileOptions { table_budget: 1 << 16, ..Default::default() })?;
    check(set, keys, &CompileOptions { bitmap_rules: 0, table_budget: 1 << 16, ..Default::default() })?;
    check(set, keys, &CompileOptions { bitmap_rules: 0, table_budget: 64, ..Default::default() })?;
    check(set, keys, &CompileOptions { linear: true, ..Default::default() })
}

fn profile() -> impl Strategy<Value = Profile> {
    prop_oneof![
        Just(Profile::Dense),
        Just(Profile::WildcardHeavy),
        Just(Profile::SpecificHeavy),
        Just(Profile::ClassBench)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn small_sets(seed in any::<u64>(), n in 0usize..40, p in profile(), v6 in prop_oneof![Just(0u64), Just(50), Just(100)]) {
        let set = synth::rules(n, seed, p, v6);
        let keys = synth::packets(&set, 300, seed);
        both_modes(&set, &keys)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn medium_sets(seed in any::<u64>(), n in 40usize..400, p in profile(), v6 in prop_oneof![Just(0u64), Just(30), Just(100)]) {
        let set = synth::rules(n, seed, p, v6);
        let keys = synth::packets(&set, 400, seed ^ 1);
        both_modes(&set, &keys)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3))]

    #[test]
    fn thousands_of_rules(seed in any::<u64>(), p in profile()) {
        let set = synth::rules(2500, seed, p, 20);
        let keys = synth::packets(&set, 600, seed ^ 2);
        // A smaller budget than the default keeps this debug-build test quick.
        check(&set, &keys, &CompileOptions { table_budget: 1 << 18, ..Default::default() })?;
        check(&set, &keys, &CompileOptions { table_budget: 4096, ..Default::default() })?;
        let small = tern_acl::RuleSet { rules: set.rules[..200].to_vec(), ..set.clone() };
        check(&small, &keys, &CompileOptions::default())?;
    }
}

#[test]
fn the_100ge_scenarios() {
    use std::net::Ipv4Addr;
    let s = tern_acl::scenario_50_drop_rules();
    let keys: Vec<PacketKey> = (0..=60u8)
        .flat_map(|n| {
            [1u8, 2].map(|h| PacketKey::v4(Ipv4Addr::new(1, 1, n, h), Ipv4Addr::new(10, 0, 0, 1), 17).with_ports(1, 2))
        })
        .collect();
    both_modes(&s, &keys).unwrap();
    let d = tern_acl::scenario_drop_test();
    let keys: Vec<PacketKey> = (0..=u16::MAX)
        .step_by(7)
        .map(|p| PacketKey::v4(Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(10, 0, 0, 1), 17).with_ports(p, p))
        .collect();
    both_modes(&d, &keys).unwrap();
}
