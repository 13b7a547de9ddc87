//! nftables import: committed fixtures (JSON dumped by the real `nft` from
//! the `.nft` files beside them, see `fixtures/nft/regen.sh`) and, when the
//! `nft` tool is installed and we are root, the same rulesets loaded into a
//! throwaway network namespace and dumped live.

use std::path::{Path, PathBuf};
use std::process::Command;
use tern_testkit::netns::Netns;

use tern_acl::nft::{self, CtMode, Import, ImportOptions};
use tern_acl::{Action, Family, PacketKey, RuleAction, RuleSet, linear, parse_toml, synth};

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
    let guard = Netns::unique("tacl-");
    let ns = guard.name.clone();
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

fn stateless() -> ImportOptions {
    ImportOptions { ct: CtMode::Stateless }
}

#[test]
fn vyos_ruleset_is_refused_naming_the_ct_rule_unless_asked_to_approximate() {
    let e = nft::import(&fixture("vyos")).expect_err("ct state refused by default");
    assert_eq!(e.chain.as_deref(), Some("VYOS_STATE_POLICY"), "{e}");
    assert!(e.handle.is_some(), "{e}");
    assert!(e.to_string().contains("ct state") && e.to_string().contains("--ct stateless"), "{e}");

    let imp = nft::import_with(&fixture("vyos"), &stateless()).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = imp.sets.iter().map(|c| c.set.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ip_vyos_filter_VYOS_FORWARD_filter",
            "ip_vyos_filter_VYOS_INPUT_filter",
            "ip6_vyos_filter_VYOS_IPV6_FORWARD_filter"
        ]
    );
    // Every approximated ct rule is named in the notes.
    let ct_notes = imp.notes.iter().filter(|n| n.contains("ct state")).count();
    assert_eq!(ct_notes, 5, "{:#?}", imp.notes);
    assert!(imp.notes.iter().any(|n| n.contains("VYOS_STATE_POLICY ") && n.contains("invalid") && n.contains("never")));
    let fwd = &imp.sets[0];
    // The state policy comes first: established = TCP with ACK or RST.
    let first = toml::to_string(&fwd.set.rules[1]).unwrap();
    assert!(first.contains("tcp_flags = [\"ack\", \"rst\"]"), "{first}");
    assert!(fwd.origins[1].contains("chain VYOS_STATE_POLICY handle") && fwd.origins[1].contains("via jump"));
    // The named chain's default action becomes a drop for eth0's traffic only.
    let last_drop = fwd.set.rules.iter().rposition(|r| r.action == RuleAction::Drop && r.iif.is_some()).unwrap();
    assert_eq!(fwd.set.rules[last_drop].comment.as_deref(), Some("NAME_WAN-IN default-action drop"));
    let ifs = |n: &str| ["eth0", "eth1", "eth2"].iter().position(|x| *x == n).map(|i| i as u16 + 1);
    for s in imp.rule_sets() {
        tern_acl::compile(&s, &ifs).unwrap();
    }
    round_trips(&imp);
    let text = imp.to_string();
    assert!(text.contains("#   ip_vyos_filter_VYOS_INPUT_filter (hook input"), "{text}");
}

#[test]
fn zone_ruleset_with_gotos_and_returns_imports() {
    let imp = import("zones");
    assert_eq!(imp.sets.len(), 1);
    assert!(imp.notes.iter().any(|n| n.contains("chain unused") && n.contains("not imported")), "{:#?}", imp.notes);
    round_trips(&imp);
}

/// Renames eth0/eth1/eth2/lo to synth's if1..if4 so its packet generator
/// aims at the rules' interfaces.
fn ifx(n: &str) -> Option<u16> {
    ["eth0", "eth1", "eth2", "lo"].iter().position(|x| *x == n).map(|i| i as u16 + 1)
}

fn synth_names(set: &RuleSet) -> RuleSet {
    let mut s = set.clone();
    let ren = |l: &mut Option<tern_acl::value::List<tern_acl::value::IfName>>| {
        if let Some(l) = l {
            for n in &mut l.0 {
                if let Some(i) = ifx(&n.0) {
                    n.0 = format!("if{i}");
                }
            }
        }
    };
    for r in &mut s.rules {
        ren(&mut r.iif);
        ren(&mut r.oif);
    }
    s
}

/// The flattened rule sets against nftables' control flow interpreted
/// directly (jump, goto, return with a stack; `nft::evaluate`), and the
/// compiled classifier against the linear reference, for many packets aimed
/// at the rules' boundaries.
#[test]
fn flattened_chains_decide_like_nftables_control_flow() {
    for (name, opts) in [
        ("vyos", stateless()),
        ("zones", ImportOptions::default()),
        ("jump_simple", ImportOptions::default()),
        ("mixed", ImportOptions::default()),
        ("drop_test", ImportOptions::default()),
    ] {
        let rs = nft::parse(&fixture(name), &opts).unwrap();
        let imp = nft::flatten(&rs).unwrap();
        let bases: Vec<usize> = (0..rs.chains.len()).filter(|&i| rs.chains[i].base.is_some()).collect();
        assert_eq!(bases.len(), imp.sets.len());
        for (&b, c) in bases.iter().zip(&imp.sets) {
            let set = &c.set;
            let compiled = tern_acl::compile(set, &ifx).unwrap();
            let mut keys = synth::packets(&synth_names(set), 4000, 7);
            // Aim at the conditions of every chain's rules too (the
            // flattened set may have dropped shadowed ones).
            for ch in &rs.chains {
                let steps = ch.steps.as_ref().map(|s| s.as_slice()).unwrap_or(&[]);
                let whens: Vec<_> = steps.iter().flat_map(|s| s.when.iter().cloned()).collect();
                let probe = RuleSet { name: "p".into(), default: Action::Accept, rules: whens };
                keys.extend(synth::packets(&synth_names(&probe), 1000, 11));
            }
            let mut seen = [0usize; 2];
            for k in &keys {
                let want = nft::evaluate(&rs, b, &ifx, k).unwrap();
                let lin = linear::evaluate(set, &ifx, k);
                let got = compiled.classify(k);
                assert_eq!(lin.action, want, "{name} {}: linear vs nft for {k:?}", c.chain);
                assert_eq!((got.action, got.rule), (lin.action, lin.rule), "{name} {}: compiled for {k:?}", c.chain);
                seen[(want == Action::Drop) as usize] += 1;
            }
            // The packets exercise both verdicts (or the chain has only one).
            let one_verdict = set.rules.iter().all(|r| r.action.terminal().is_none_or(|a| a == set.default));
            assert!(one_verdict || (seen[0] > 0 && seen[1] > 0), "{name} {}: {seen:?}", c.chain);
        }
    }
}

fn chains_json(chains: &[(&str, Option<&str>, &[&str])]) -> String {
    // (name, hook, rules as JSON expression lists)
    let mut items = vec![r#"{"table": {"family": "inet", "name": "t", "handle": 1}}"#.to_string()];
    let mut h = 10;
    for (name, hook, _) in chains {
        let base = hook.map_or(String::new(), |hk| {
            format!(r#", "type": "filter", "hook": "{hk}", "prio": 0, "policy": "accept""#)
        });
        items.push(format!(r#"{{"chain": {{"family": "inet", "table": "t", "name": "{name}", "handle": 2{base}}}}}"#));
    }
    for (name, _, rules) in chains {
        for r in *rules {
            h += 1;
            items.push(format!(
                r#"{{"rule": {{"family": "inet", "table": "t", "chain": "{name}", "handle": {h}, "expr": {r}}}}}"#
            ));
        }
    }
    format!(r#"{{"nftables": [{}]}}"#, items.join(", "))
}

const TCP22: &str =
    r#"{"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": 22}}"#;

#[test]
fn jump_returns_and_goto_does_not() {
    let key = PacketKey::v4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 6).with_ports(1000, 22);
    let other = PacketKey::v4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 6).with_ports(1000, 80);
    for (verb, want) in [("jump", Action::Drop), ("goto", Action::Accept)] {
        // base: tcp dport 22 VERB sub; drop.   sub: (empty). Policy accept.
        let j = chains_json(&[
            (
                "base",
                Some("forward"),
                &[&format!(r#"[{TCP22}, {{"{verb}": {{"target": "sub"}}}}]"#), r#"[{"drop": null}]"#],
            ),
            ("sub", None, &[r#"[{"counter": {"packets": 0, "bytes": 0}}]"#]),
        ]);
        let imp = nft::import(&j).unwrap_or_else(|e| panic!("{verb}: {e}"));
        let set = &imp.sets[0].set;
        let v = |k: &PacketKey| linear::evaluate(set, &|_| None, k).action;
        assert_eq!(v(&key), want, "{verb}: {set:#?}");
        assert_eq!(v(&other), Action::Drop, "{verb}");
    }
    // A return before the chain's end skips the rest of the chain only.
    let j = chains_json(&[
        ("base", Some("forward"), &[r#"[{"jump": {"target": "sub"}}]"#, r#"[{"drop": null}]"#]),
        ("sub", None, &[&format!(r#"[{TCP22}, {{"return": null}}]"#), r#"[{"accept": null}]"#]),
    ]);
    let set = nft::import(&j).unwrap().sets[0].set.clone();
    assert_eq!(linear::evaluate(&set, &|_| None, &key).action, Action::Drop);
    assert_eq!(linear::evaluate(&set, &|_| None, &other).action, Action::Accept);
}

#[test]
fn jump_loops_depth_and_missing_chains_are_refused_naming_the_rule() {
    let jump = |t: &str| format!(r#"[{{"jump": {{"target": "{t}"}}}}]"#);
    let (ja, jb) = (jump("a"), jump("b"));
    let j = chains_json(&[("base", Some("input"), &[&ja]), ("a", None, &[&jb]), ("b", None, &[&ja])]);
    let e = nft::import(&j).expect_err("loop");
    assert!(e.to_string().contains("jump loop: a -> b -> a"), "{e}");
    assert_eq!(e.chain.as_deref(), Some("b"));
    assert!(e.handle.is_some());

    let j = chains_json(&[("base", Some("input"), &[&jump("nowhere")])]);
    let e = nft::import(&j).expect_err("missing");
    assert!(e.to_string().contains("\"nowhere\", which does not exist"), "{e}");

    let names: Vec<String> = (0..20).map(|i| format!("c{i}")).collect();
    let rules: Vec<String> = (0..20).map(|i| jump(&format!("c{}", i + 1))).collect();
    let mut chains: Vec<(&str, Option<&str>, Vec<&str>)> = vec![("base", Some("input"), vec![rules[0].as_str()])];
    let base_rule = jump("c0");
    chains[0].2 = vec![base_rule.as_str()];
    for i in 0..20 {
        let r: Vec<&str> = if i < 19 { vec![rules[i].as_str()] } else { vec![] };
        chains.push((names[i].as_str(), None, r));
    }
    let refs: Vec<(&str, Option<&str>, &[&str])> = chains.iter().map(|(a, b, c)| (*a, *b, c.as_slice())).collect();
    let e = nft::import(&chains_json(&refs)).expect_err("depth");
    assert!(e.to_string().contains("nested jumps"), "{e}");
}

/// Sends each packet as a frame into a namespace whose nftables holds the
/// zone ruleset on the input hook, and compares what real nftables accepted
/// with tern's flattened rule set. Observation chains before (priority
/// -300) and after (+300) the ruleset record each packet's IPv4 id / IPv6
/// flow label: seen by the first, accepted if the second saw it too.
#[test]
fn flattened_zone_ruleset_decides_like_the_kernel() {
    let have = |p: &str, a: &[&str]| Command::new(p).args(a).output().is_ok_and(|o| o.status.success());
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !root || !have("nft", &["--version"]) || !have("/usr/bin/python3", &["-c", "import scapy.all"]) {
        eprintln!("skipped: needs root, nft and scapy (/usr/bin/python3)");
        return;
    }
    let (guard, peer_guard) = (Netns::unique("tacl-k-"), Netns::unique("tacl-kp-"));
    let (ns, peer) = (guard.name.clone(), peer_guard.name.clone());
    let run = |args: &[&str]| {
        let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    // eth1 enters the LAN zone; eth9 is no zone's (tern's key: interface 0).
    for (p, d) in [("p1", "eth1"), ("p9", "eth9")] {
        run(&["ip", "-n", &peer, "link", "add", p, "type", "veth", "peer", "name", d, "netns", &ns]);
        run(&["ip", "-n", &ns, "link", "set", d, "up"]);
        run(&["ip", "-n", &peer, "link", "set", p, "up"]);
    }
    // Every address is the namespace's own (so every packet meets the
    // input hook), sources too.
    for s in [
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.eth1.rp_filter=0",
        "net.ipv4.conf.eth9.rp_filter=0",
        "net.ipv4.conf.all.accept_local=1",
        "net.ipv4.conf.eth1.accept_local=1",
        "net.ipv4.conf.eth9.accept_local=1",
    ] {
        run(&["ip", "netns", "exec", &ns, "sysctl", "-q", "-w", s]);
    }
    run(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
    run(&["ip", "-n", &ns, "route", "add", "local", "0.0.0.0/0", "dev", "lo"]);
    run(&["ip", "-n", &ns, "-6", "route", "add", "local", "::/0", "dev", "lo"]);
    let text = std::fs::read_to_string(dir().join("zones.nft")).unwrap().replace("hook forward", "hook input");
    let obs = r#"
table inet obs {
	set seen4 { typeof ip id; flags dynamic; size 65536; }
	set acc4 { typeof ip id; flags dynamic; size 65536; }
	set seen6 { typeof ip6 flowlabel; flags dynamic; size 65536; }
	set acc6 { typeof ip6 flowlabel; flags dynamic; size 65536; }
	chain early {
		type filter hook input priority -300; policy accept;
		iifname { "eth1", "eth9" } meta nfproto ipv4 add @seen4 { ip id }
		iifname { "eth1", "eth9" } meta nfproto ipv6 add @seen6 { ip6 flowlabel }
	}
	chain late {
		type filter hook input priority 300; policy accept;
		iifname { "eth1", "eth9" } meta nfproto ipv4 add @acc4 { ip id }
		iifname { "eth1", "eth9" } meta nfproto ipv6 add @acc6 { ip6 flowlabel }
	}
}
"#;
    let file = std::env::temp_dir().join(format!("{ns}.nft"));
    std::fs::write(&file, format!("{text}\n{obs}")).unwrap();
    run(&["ip", "netns", "exec", &ns, "nft", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    // tern's view of the live ruleset (the obs table imports too, as a
    // second input chain; only the zone chain is compared).
    let live = run(&["ip", "netns", "exec", &ns, "nft", "-j", "list", "table", "inet", "zones"]);
    let rs = nft::parse(&live, &ImportOptions::default()).unwrap();
    let imp = nft::flatten(&rs).unwrap();
    let base = rs.chains.iter().position(|c| c.base.is_some()).unwrap();
    let set = &imp.sets[0].set;
    let mac =
        |d: &str| run(&["ip", "netns", "exec", &ns, "cat", &format!("/sys/class/net/{d}/address")]).trim().to_string();
    let (mac1, mac9) = (mac("eth1"), mac("eth9"));

    // Packets aimed at every chain's rules, arriving on eth1 and eth9 in turn.
    let mut keys = synth::packets(&synth_names(set), 1500, 3);
    for ch in &rs.chains {
        let Ok(steps) = &ch.steps else { continue };
        let whens: Vec<_> = steps.iter().flat_map(|s| s.when.iter().cloned()).collect();
        keys.extend(synth::packets(
            &synth_names(&RuleSet { name: "p".into(), default: Action::Accept, rules: whens }),
            300,
            5,
        ));
    }
    let keys: Vec<PacketKey> = keys
        .into_iter()
        .filter(|k| matches!(k.proto, 6 | 17 | 47) || k.proto == if k.is_v6 { 58 } else { 1 })
        .enumerate()
        .map(|(i, mut k)| {
            k.in_if = if i % 2 == 0 { ifx("eth1").unwrap() } else { 0 };
            (k.out_if, k.vlan, k.dscp, k.l4_valid) = (0, 0, 0, true);
            k
        })
        .take(4000)
        .collect();
    let mut lines = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let (s, d) = if k.is_v6 {
            (std::net::Ipv6Addr::from(k.src).to_string(), std::net::Ipv6Addr::from(k.dst).to_string())
        } else {
            (std::net::Ipv4Addr::from(k.src as u32).to_string(), std::net::Ipv4Addr::from(k.dst as u32).to_string())
        };
        lines.push(format!(
            "{} {} {s} {d} {} {} {} {} {} {}",
            i + 1,
            k.is_v6 as u8,
            k.proto,
            k.sport,
            k.dport,
            k.icmp_type,
            k.icmp_code,
            k.tcp_flags
        ));
    }
    let script = format!(
        r#"
import sys
from scapy.all import Ether, IP, IPv6, TCP, UDP, ICMP, Raw, sendp, conf
from scapy.layers.inet6 import ICMPv6Unknown
conf.verb = 0
frames = []
for line in sys.stdin:
    n, v6, s, d, proto, sp, dp, ty, code, fl = line.split()
    n, proto, sp, dp, ty, code, fl = map(int, (n, proto, sp, dp, ty, code, fl))
    ip = IPv6(src=s, dst=d, fl=n, nh=proto) if v6 == "1" else IP(src=s, dst=d, id=n, proto=proto)
    if proto == 6: l4 = TCP(sport=sp, dport=dp, flags=fl)
    elif proto == 17: l4 = UDP(sport=sp, dport=dp)
    elif proto == 1: l4 = ICMP(type=ty, code=code)
    elif proto == 58: l4 = ICMPv6Unknown(type=ty, code=code)
    else: l4 = Raw(b"\x00" * 8)
    frames.append((n, Ether(dst="{mac1}" if n % 2 == 1 else "{mac9}") / ip / l4 / Raw(b"tern")))
sendp([f for n, f in frames if n % 2 == 1], iface="p1")
sendp([f for n, f in frames if n % 2 == 0], iface="p9")
"#
    );
    let mut child = Command::new("ip")
        .args(["netns", "exec", &peer, "/usr/bin/python3", "-c", &script])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), lines.join("\n").as_bytes()).unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success(), "scapy");

    let elems = |set: &str| -> std::collections::HashSet<u64> {
        let j = run(&["ip", "netns", "exec", &ns, "nft", "-j", "list", "set", "inet", "obs", set]);
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        v["nftables"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|x| x.get("set"))
            .flat_map(|s| s.get("elem").and_then(|e| e.as_array()).cloned().unwrap_or_default())
            .filter_map(|e| e.as_u64().or_else(|| e.get("elem").and_then(|x| x.get("val")).and_then(|x| x.as_u64())))
            .collect()
    };
    let (n4, n6) = (keys.iter().filter(|k| !k.is_v6).count(), keys.iter().filter(|k| k.is_v6).count());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (s4, s6) = (elems("seen4").len(), elems("seen6").len());
        if s4 >= n4 && s6 >= n6 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the kernel saw {s4}/{n4} IPv4 and {s6}/{n6} IPv6 packets");
    }
    let (a4, a6) = (elems("acc4"), elems("acc6"));
    let mut wrong = Vec::new();
    let mut accepted = 0;
    for (i, k) in keys.iter().enumerate() {
        let id = i as u64 + 1;
        let kernel = if k.is_v6 { a6.contains(&id) } else { a4.contains(&id) };
        let kernel = if kernel { Action::Accept } else { Action::Drop };
        accepted += (kernel == Action::Accept) as usize;
        let tern = linear::evaluate(set, &ifx, k).action;
        let reference = nft::evaluate(&rs, base, &ifx, k);
        if tern != kernel || reference != Some(kernel) {
            wrong.push(format!("{k:?}: kernel {kernel:?}, tern {tern:?}, nft::evaluate {reference:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} packets differ:\n{}",
        wrong.len(),
        keys.len(),
        wrong[..wrong.len().min(10)].join("\n")
    );
    assert!(accepted > 0 && accepted < keys.len(), "both verdicts exercised: {accepted} of {}", keys.len());
}

#[test]
fn a_rule_that_can_never_match_is_left_out_with_a_note() {
    let never = r#"[{"match": {"op": "==", "left": {"payload": {"protocol": "icmp", "field": "type"}}, "right": "echo-request"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": 22}}, {"drop": null}]"#;
    let imp = nft::import(&chains_json(&[("base", Some("input"), &[never, r#"[{"accept": null}]"#])])).unwrap();
    assert_eq!(imp.sets[0].set.rules.len(), 1);
    assert!(
        imp.notes.iter().any(|n| n.contains("chain base handle 11") && n.contains("never match")),
        "{:#?}",
        imp.notes
    );
}

#[test]
fn an_exponential_inlining_is_refused_not_run() {
    // 15 chains, each jumping four times to the next, each with a return
    // before its end: 4^15 paths.
    let names: Vec<String> = (0..15).map(|i| format!("c{i}")).collect();
    let rules: Vec<Vec<String>> = (0..15)
        .map(|i| {
            let mut r: Vec<String> = Vec::new();
            if i + 1 < 15 {
                for _ in 0..4 {
                    r.push(format!(r#"[{{"jump": {{"target": "c{}"}}}}]"#, i + 1));
                }
            }
            r.push(format!(r#"[{TCP22}, {{"return": null}}]"#));
            r.push(r#"[{"counter": {"packets": 0, "bytes": 0}}]"#.to_string());
            r
        })
        .collect();
    let base = vec![r#"[{"jump": {"target": "c0"}}]"#];
    let mut chains: Vec<(&str, Option<&str>, Vec<&str>)> = vec![("base", Some("forward"), base)];
    for i in 0..15 {
        chains.push((names[i].as_str(), None, rules[i].iter().map(String::as_str).collect()));
    }
    let refs: Vec<(&str, Option<&str>, &[&str])> = chains.iter().map(|(a, b, c)| (*a, *b, c.as_slice())).collect();
    let e = nft::import(&chains_json(&refs)).expect_err("too big");
    assert_eq!(e.chain.as_deref(), Some("base"), "{e}");
    assert!(e.to_string().contains("inlining its jumps"), "{e}");
}
