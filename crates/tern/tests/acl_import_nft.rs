//! `tern acl import-nft`: real nft dumps in, tern configuration out.

use std::path::PathBuf;
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../acl/tests/fixtures/nft").join(name)
}

fn import(name: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tern")).args(["acl", "import-nft"]).arg(fixture(name)).output().expect("run tern")
}

#[test]
fn fifty_rules_become_a_loadable_rule_set() {
    let out = import("fifty_drop.json");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let toml = String::from_utf8(out.stdout).expect("utf-8");
    let sets = tern_acl::parse_toml(&toml).expect("the output is valid tern TOML");
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].rules.len(), 50);
    // It must equal the 100GE scenario's rules, in order.
    let want = tern_acl::scenario_50_drop_rules();
    assert_eq!(sets[0].rules, want.rules);
    assert_eq!(sets[0].default, want.default);
}

#[test]
fn stateful_rules_are_refused_by_name() {
    let out = import("refuse_ct.json");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ct"), "names the unsupported expression: {err}");
    assert!(err.contains("handle"), "names the rule: {err}");
}

#[test]
fn vyos_ruleset_needs_the_ct_choice_and_then_imports_with_its_jumps_inlined() {
    let out = import("vyos.json");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("chain VYOS_STATE_POLICY") && err.contains("--ct stateless"), "{err}");

    let out = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["acl", "import-nft", "--ct", "stateless"])
        .arg(fixture("vyos.json"))
        .output()
        .expect("run tern");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let toml = String::from_utf8(out.stdout).expect("utf-8");
    assert!(toml.contains("# NOTE: ip vyos_filter chain VYOS_STATE_POLICY handle"), "{toml}");
    let sets = tern_acl::parse_toml(&toml).expect("the output is valid tern TOML");
    let names: Vec<&str> = sets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ip_vyos_filter_VYOS_FORWARD_filter",
            "ip_vyos_filter_VYOS_INPUT_filter",
            "ip6_vyos_filter_VYOS_IPV6_FORWARD_filter"
        ]
    );

    let bad = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["acl", "import-nft", "--ct", "maybe"])
        .arg(fixture("vyos.json"))
        .output()
        .expect("run tern");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("refuse or stateless"));
}
