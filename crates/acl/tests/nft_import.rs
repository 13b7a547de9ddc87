//! nftables import: committed fixtures (JSON dumped by the real `nft` from
//! the `.nft` files beside them, see `fixtures/nft/regen.sh`) and, when the
//! `nft` tool is installed and we are root, the same rulesets loaded into a
//! throwaway network namespace and dumped live.

use std::path::{Path, PathBuf};
use std::process::Command;

use tern_acl::nft::{self, Import};
use tern_acl::{Action, Family, RuleAction, parse_toml};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nft")
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap()
}

fn import(name: &str) -> Import {
    nft::import(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The TOML rendering parses back to the same rule sets.
fn round_trips(imp: &Import) {
    let text = imp.to_string();
    let back = parse_toml(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back, imp.rule_sets(), "{text}");
}

#[test]
fn fifty_drop_rules_fixture_is_the_scenario() {
    let imp = import("fifty_drop");
    assert_eq!(imp.sets.len(), 1);
    let c = &imp.sets[0];
    assert_eq!(
        (c.family.as_str(), c.table.as_str(), c.chain.as_str(), c.hook.as_str()),
        ("ip", "filter", "forward", "forward")
    );
    let want = tern_acl::scenario_50_drop_rules();
    assert_eq!(c.set.default, Action::Accept);
    assert_eq!(c.set.rules, want.rules);
    round_trips(&imp);
}

#[test]
fn drop_test_fixture_is_the_scenario() {
    let imp = import("drop_test");
    let c = &imp.sets[0];
    assert_eq!(c.set.default, Action::Drop);
    let mut rules = c.set.rules.clone();
    for r in &mut rules {
        // The ip table restricts every rule to IPv4; the scenario is family-agnostic.
        assert_eq!(r.family, Some(Family::Ipv4));
        r.family = None;
    }
    assert_eq!(rules, tern_acl::scenario_drop_test().rules);
    round_trips(&imp);
}

#[test]
fn mixed_fixture_translates_every_supported_construct() {
    let imp = import("mixed");
    let names: Vec<&str> = imp.sets.iter().map(|c| c.set.name.as_str()).collect();
    assert_eq!(names, ["inet_filter_input", "inet_filter_output", "ip6_filter6_forward"]);
    let input = &imp.sets[0].set;
    assert_eq!(input.default, Action::Drop);
    let show = |i: usize| toml::to_string(&input.rules[i]).unwrap();
    // ip saddr 1.1.1.1 udp dport 1000-2000 counter drop
    assert_eq!(show(0), "action = \"drop\"\nsrc = \"1.1.1.1/32\"\nproto = \"udp\"\ndport = \"1000-2000\"\n");
    // sets of prefixes and ports, comment kept
    assert!(show(1).contains("src = [\"10.0.0.0/8\", \"172.16.0.0/12\"]"), "{}", show(1));
    assert!(show(1).contains("dport = [22, 80, 443, \"8000-8080\"]"), "{}", show(1));
    assert_eq!(input.rules[1].comment.as_deref(), Some("admin"));
    // icmp type set and code
    assert!(
        show(5).contains("icmp_type = [\"echo-reply\", \"destination-unreachable\"]")
            && show(5).contains("icmp_code = \"port-unreachable\""),
        "{}",
        show(5)
    );
    // tcp flags & (syn|ack) == syn counter -> count rule
    assert_eq!(input.rules[7].action, RuleAction::Count);
    assert!(show(7).contains("tcp_flags = \"syn,!ack\""), "{}", show(7));
    // tcp flags syn,ack: any of them
    assert!(show(8).contains("tcp_flags = [\"syn\", \"ack\"]"), "{}", show(8));
    // named sets inlined
    assert!(
        show(10).contains("src = [\"10.0.0.0/8\", \"192.168.1.1/32\"]") && show(10).contains("dport = [22, 443]"),
        "{}",
        show(10)
    );
    // != prefix: complement in the IPv4 space
    assert_eq!(input.rules[11].src.as_ref().unwrap().len(), 8);
    // address range -> minimal prefixes
    assert!(
        show(14).contains("src = [\"10.0.0.1/32\", \"10.0.0.2/31\", \"10.0.0.4/30\", \"10.0.0.8/31\"]"),
        "{}",
        show(14)
    );
    // comparisons
    assert!(show(16).contains("sport = \"7-65535\"") && show(16).contains("dport = \"0-1023\""), "{}", show(16));
    // nfproto ipv6 + != port
    assert_eq!(input.rules[17].family, Some(Family::Ipv6));
    assert!(show(17).contains("dport = [\"0-21\", \"23-65535\"]"), "{}", show(17));
    // bare counter: count everything
    assert_eq!(input.rules.last().unwrap().action, RuleAction::Count);
    // every imported set compiles with the interfaces it names
    let ifs = |n: &str| ["lo", "eth0", "eth1", "eth2"].iter().position(|x| *x == n).map(|i| i as u16 + 1);
    for s in imp.rule_sets() {
        tern_acl::compile(&s, &ifs).unwrap();
    }
    round_trips(&imp);
}

#[test]
fn unsupported_rulesets_are_refused_with_the_rule_named() {
    for (name, chain, handle, needle) in [
        ("refuse_ct", Some("input"), true, "ct"),
        ("refuse_jump", Some("other"), true, "jump"),
        ("refuse_nat", Some("post"), false, "nat"),
        ("refuse_log", Some("input"), true, "log"),
        ("refuse_limit", Some("input"), true, "limit"),
        ("refuse_wildcard", Some("forward"), true, "wildcard"),
        ("refuse_reject", Some("input"), true, "reject"),
        ("refuse_prerouting", Some("pre"), false, "prerouting"),
    ] {
        let e = nft::import(&fixture(name)).expect_err(name);
        let msg = e.to_string();
        assert!(e.table.is_some(), "{name}: {msg}");
        assert_eq!(e.chain.as_deref(), chain, "{name}: {msg}");
        assert_eq!(e.handle.is_some(), handle, "{name}: {msg}");
        assert!(msg.contains(needle), "{name}: {msg}");
    }
    assert!(nft::import("not json").is_err());
    assert!(nft::import("{}").is_err());
    assert!(nft::import(r#"{"nftables": [{"table": {"family": "bridge", "name": "b"}}]}"#).is_err());
}

/// Loads every fixture with the real nft in a throwaway namespace, dumps it
/// and checks the live dump imports exactly like the committed JSON.
#[test]
fn live_nft_dumps_import_like_the_fixtures() {
    let have_nft = Command::new("nft").arg("--version").output().is_ok_and(|o| o.status.success());
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !have_nft || !root {
        eprintln!("skipped: needs root and the nft tool (apt-get install nftables)");
        return;
    }
    let ns = format!("tacl-{}", std::process::id());
    assert!(Command::new("ip").args(["netns", "add", &ns]).status().unwrap().success());
    struct Cleanup(String);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _c = Cleanup(ns.clone());
    let nft = |args: &[&str]| Command::new("ip").args(["netns", "exec", &ns, "nft"]).args(args).output().unwrap();
    let mut n = 0;
    for entry in std::fs::read_dir(dir()).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_none_or(|e| e != "nft") {
            continue;
        }
        let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
        assert!(nft(&["flush", "ruleset"]).status.success());
        let load = nft(&["-f", p.to_str().unwrap()]);
        assert!(load.status.success(), "{stem}: {}", String::from_utf8_lossy(&load.stderr));
        let dump = nft(&["-j", "list", "ruleset"]);
        assert!(dump.status.success());
        let live = nft::import(&String::from_utf8(dump.stdout).unwrap());
        let committed = nft::import(&fixture(&stem));
        match (live, committed) {
            (Ok(a), Ok(b)) => assert_eq!(a.rule_sets(), b.rule_sets(), "{stem}"),
            (Err(a), Err(b)) => assert_eq!((a.chain, a.reason), (b.chain, b.reason), "{stem}"),
            (a, b) => panic!("{stem}: live {a:?} vs committed {b:?}"),
        }
        n += 1;
    }
    assert!(n >= 10, "only {n} fixtures");
}
