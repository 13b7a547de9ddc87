//! A short real run: generator, Linux DUTs and sink in namespaces, the
//! drop test (so linux-nft's rules are exercised and plain Linux must say
//! "not supported"), then IPv4 and IPv6 through plain Linux; the same two
//! through xdp-fwd (the hand-written XDP router), which must refuse GRE
//! and VLAN. Trials are a fraction of a second; nothing here asserts a
//! speed. Needs root, iproute2, ethtool and nftables.

mod common;

use clap::Parser;
use tern_bench::pktgen::GeneratorKind;
use tern_bench::report::DutStatus;
use tern_bench::{Rfc2544Opts, html};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    opts: Rfc2544Opts,
}

fn run(args: &[&str]) -> tern_bench::Report {
    let cli = Cli::parse_from(std::iter::once("rfc2544").chain(args.iter().copied()));
    let mut events = 0;
    let r = tern_bench::run(&cli.opts, &mut |_| events += 1).expect("run");
    assert!(events > 0, "no progress reported");
    r
}

#[test]
fn drop_test_against_linux_and_nftables() {
    if !common::privileged() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tern-bench-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let html_path = dir.join("report.html");
    let r = run(&[
        "--scenario",
        "drop-test",
        "--dut",
        "linux,linux-nft,tern",
        "--trial-secs",
        "0.4",
        "--drain-secs",
        "0.3",
        "--loads",
        "0.01,0.03",
        "--max-mpps",
        "0.05",
        "--goal-width",
        "0.3",
        "--work-dir",
        dir.to_str().unwrap_or("/tmp"),
    ]);
    assert_eq!(r.ceiling.status, DutStatus::Ok, "{:?}", r.ceiling.message);
    let by_name = |n: &str| r.duts.iter().find(|d| d.name == n).unwrap_or_else(|| panic!("no {n}"));
    assert_eq!(by_name("linux").status, DutStatus::NotSupported);
    // Without --tern-bin (and no `tern` beside the test program) tern is
    // reported, not run.
    assert_eq!(by_name("tern").status, DutStatus::NotSupported);
    let nft = by_name("linux-nft");
    assert_eq!(nft.status, DutStatus::Ok, "{:?}", nft.message);
    assert_eq!(nft.sizes.len(), 1);
    let s = &nft.sizes[0];
    assert_eq!(s.frame_loss.len(), 2);
    for p in &s.frame_loss {
        assert!(p.sent > 0 && p.offered_mpps > 0.0);
        // The blocked half never reaches the sink: the rules work and the
        // sink tells the streams apart.
        assert_eq!(p.leaked, 0, "blocked frames forwarded at {} Mpps", p.target_mpps);
        assert!(p.lost < p.sent, "nothing of the legitimate half arrived");
        // The rings' counters were read, and the hole watch ran.
        assert!(p.ring_drops.is_some() && p.dut_holes.is_some() && p.lost_in_holes.is_some());
    }
    assert!(s.ndr.is_some() && s.pdr.is_some() && s.search_trials >= 1);
    // The DUT's CPU was held for the run (this process and its children
    // stay; on a 1-CPU machine there is nothing to move).
    if tern_bench::netns::cpu_count() > 1 {
        assert_eq!(r.conditions.isolated_cpus, vec![1]);
    }
    // The ceiling sees both halves: nothing is blocked without a router.
    let direct = &r.ceiling.sizes[0].frame_loss;
    assert!(direct.iter().all(|p| p.leaked > 0));

    let text = r.to_string();
    assert!(text.contains("linux-nft") && text.contains("not supported"));
    r.write_html(&html_path).expect("html");
    let page = std::fs::read_to_string(&html_path).expect("read html");
    html::check_well_formed(&page).expect("well-formed HTML");
    assert!(page.contains("linux-nft"));
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).expect("json");
    assert_eq!(json["duts"].as_array().map(Vec::len), Some(3));
    let _ = std::fs::remove_dir_all(&dir);
}

/// 64-byte IPv4 and 78-byte IPv6 frames at 0.02 Mpps through `dut` in
/// `scenario`: both forwarded, with latency, without duplicates. Returns
/// the DUT's report and the frames the sink received.
fn dual_stack(scenario: &str, dut: &str) -> (tern_bench::report::DutReport, u64) {
    let (_, d, received) = dual_stack_with(scenario, dut, "auto");
    (d, received)
}

/// [`dual_stack`] with `--generator generator`, returning the report too.
fn dual_stack_with(
    scenario: &str,
    dut: &str,
    generator: &str,
) -> (tern_bench::Report, tern_bench::report::DutReport, u64) {
    let r = run(&[
        "--generator",
        generator,
        "--scenario",
        scenario,
        "--sizes",
        "64,78v6",
        "--dut",
        dut,
        "--trial-secs",
        "0.3",
        "--drain-secs",
        "0.3",
        "--loads",
        "0.02",
        "--no-search",
    ]);
    let d = r.duts[0].clone();
    assert_eq!(d.status, DutStatus::Ok, "{dut}: {:?}", d.message);
    let labels: Vec<&str> = d.sizes.iter().map(|s| s.size.as_str()).collect();
    assert_eq!(labels, ["64", "78v6"]);
    let mut received = 0;
    for s in &d.sizes {
        let p = &s.frame_loss[0];
        assert!(p.sent > 0 && p.lost < p.sent, "{dut} {}: nothing forwarded", s.size);
        assert!(p.latency.is_some(), "{dut} {}: no latency", s.size);
        assert_eq!(p.duplicated, 0, "{dut} {}: duplicates from a router", s.size);
        received += p.streams.iter().map(|s| s.received).sum::<u64>();
    }
    (r, d, received)
}

/// A user-space generator, forced (AF_PACKET is the fallback where the
/// kernel refuses the XDP one): the sink takes its frames as the XDP
/// generator's (signature, per-stream sequence numbers, checksums a router
/// checks), IPv4 and IPv6, straight and through Linux, and the report
/// names it.
fn socket_generator_drives_a_run(name: &str, kind: GeneratorKind) {
    let (r, _, received) = dual_stack_with("frame-sizes", "linux", name);
    assert!(received > 0);
    assert_eq!(r.conditions.generator_kind, kind);
    assert!(r.conditions.generator.starts_with(&format!("{name}:")), "{}", r.conditions.generator);
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).expect("json");
    assert_eq!(json["conditions"]["generator_kind"], name);
    assert!(r.to_string().contains(&format!("generator: {name}")));
    let page = html::render(&r);
    assert!(page.contains(&format!("{name}: ")), "the page names the generator");
    // Straight into the sink nothing is lost, duplicated or reordered:
    // the sequence numbers are the sink's.
    for s in &r.ceiling.sizes {
        let p = &s.frame_loss[0];
        assert!(p.sent > 0, "{}: nothing sent", s.size);
        assert_eq!((p.lost, p.duplicated, p.reordered), (0, 0, 0), "{}: {p:?}", s.size);
        assert!(p.latency.is_some(), "{}: no latency", s.size);
    }
}

#[test]
fn the_af_packet_generator_drives_a_run() {
    if !common::privileged() {
        return;
    }
    socket_generator_drives_a_run("afpacket", GeneratorKind::Afpacket);
}

#[test]
fn the_af_xdp_generator_drives_a_run() {
    if !common::privileged() {
        return;
    }
    socket_generator_drives_a_run("afxdp", GeneratorKind::Afxdp);
}

/// `--generator auto` runs the XDP generator where the kernel allows it
/// and otherwise falls back to AF_XDP (or AF_PACKET where that is refused
/// too) with a note saying why; forced,
/// `bpf` either runs or fails with an error that names the way out.
#[test]
fn auto_falls_back_and_bpf_fails_clearly_where_refused() {
    if !common::privileged() {
        return;
    }
    // Everything on CPU 0 and nothing moved: a test running beside this one
    // may hold CPU 1 for its DUT (and this thread's affinity with it).
    let args = |g: &'static str| {
        let mut a = vec!["--generator", g, "--dut", "linux", "--trial-secs", "0.2", "--drain-secs", "0.2"];
        a.extend(["--loads", "0.01", "--no-search", "--gen-cpu", "0", "--dut-cpu", "0", "--sink-cpu", "0"]);
        a.push("--no-isolate");
        a
    };
    let r = run(&args("auto"));
    assert_eq!(r.ceiling.status, DutStatus::Ok, "{:?}", r.ceiling.message);
    let cli = Cli::parse_from(std::iter::once("rfc2544").chain(args("bpf")));
    let forced = tern_bench::run(&cli.opts, &mut |_| {});
    match r.conditions.generator_kind {
        GeneratorKind::Bpf => {
            assert!(r.conditions.notes.iter().all(|n| !n.contains("XDP generator")), "{:?}", r.conditions.notes);
            let f = forced.expect("bpf runs where auto chose it");
            assert_eq!(f.conditions.generator_kind, GeneratorKind::Bpf);
        }
        k @ (GeneratorKind::Afxdp | GeneratorKind::Afpacket) => {
            // AF_XDP first, AF_PACKET where that is refused too.
            let via = if k == GeneratorKind::Afxdp { "AF_XDP socket instead" } else { "AF_PACKET instead" };
            assert!(
                r.conditions.notes.iter().any(|n| n.contains("XDP generator cannot run here") && n.contains(via)),
                "{:?}",
                r.conditions.notes
            );
            let e = forced.expect_err("bpf refused where auto fell back").to_string();
            assert!(e.contains("--generator bpf") && e.contains("--generator afxdp or afpacket"), "{e}");
        }
        GeneratorKind::Auto => panic!("the report names the generator used"),
    }
}

#[test]
fn ipv4_and_ipv6_through_linux() {
    if !common::privileged() {
        return;
    }
    dual_stack("frame-sizes", "linux");
}

/// A number from xdp-fwd's counters in a DUT description ("forwarded 12").
fn xdp_counter(description: &str, name: &str) -> u64 {
    let (_, rest) = description
        .split_once("xdp-fwd counters over the run: ")
        .unwrap_or_else(|| panic!("no xdp-fwd counters in {description}"));
    let (_, n) = rest.split_once(&format!("{name} ")).unwrap_or_else(|| panic!("no {name} in {rest}"));
    n.split(|c: char| !c.is_ascii_digit()).next().and_then(|d| d.parse().ok()).unwrap_or_else(|| panic!("{name}: {n}"))
}

#[test]
fn drop_test_against_xdp_fwd() {
    if !common::privileged() {
        return;
    }
    let r = run(&[
        "--scenario",
        "drop-test",
        "--dut",
        "xdp-fwd",
        "--trial-secs",
        "0.4",
        "--drain-secs",
        "0.3",
        "--loads",
        "0.01,0.03",
        "--max-mpps",
        "0.05",
        "--no-search",
    ]);
    let x = &r.duts[0];
    assert_eq!(x.name, "xdp-fwd");
    assert_eq!(x.status, DutStatus::Ok, "{:?}", x.message);
    let s = &x.sizes[0];
    assert_eq!(s.frame_loss.len(), 2);
    let mut blocked_sent = 0;
    for p in &s.frame_loss {
        assert!(p.sent > 0 && p.offered_mpps > 0.0);
        // The legitimate half arrives, the blocked half never does.
        assert!(p.lost < p.sent, "nothing of the legitimate half arrived at {} Mpps", p.target_mpps);
        assert_eq!(p.leaked, 0, "blocked frames forwarded at {} Mpps", p.target_mpps);
        blocked_sent += p.streams.iter().filter(|s| !s.counted).map(|s| s.sent).sum::<u64>();
    }
    assert!(blocked_sent > 0, "the blocked half was sent");
    // The program did the work: it forwarded the legitimate half and its
    // rules (not the default, not the kernel) dropped the blocked one.
    let d = &x.description;
    assert!(d.contains("native mode on tb-in and tb-out") && d.contains("default drop"), "{d}");
    let legit_received: u64 =
        s.frame_loss.iter().flat_map(|p| &p.streams).filter(|s| s.counted).map(|s| s.received).sum();
    assert!(xdp_counter(d, "forwarded") >= legit_received, "{d}");
    assert!(xdp_counter(d, "dropped by rule") >= blocked_sent, "{d}");
    assert_eq!(xdp_counter(d, "dropped by default"), 0, "{d}");
    assert_eq!(xdp_counter(d, "redirect errors"), 0, "{d}");
}

#[test]
fn ipv4_and_ipv6_through_xdp_fwd() {
    if !common::privileged() {
        return;
    }
    let (x, received) = dual_stack("single-flow-50fw", "xdp-fwd");
    let d = &x.description;
    assert!(d.contains("50 rules") && d.contains("default accept"), "{d}");
    // Forwarded by the program, not by the kernel behind it.
    assert!(xdp_counter(d, "forwarded") >= received, "{d}");
    assert_eq!(xdp_counter(d, "dropped by rule"), 0, "{d}");
}

/// GRE and VLAN are beyond a plain XDP router: said, not faked.
#[test]
fn xdp_fwd_refuses_gre_and_vlan() {
    use tern_bench::dut::{self, DutKind, DutNeeds, Firewall, Placement, Setup};
    if !common::privileged() {
        return;
    }
    let chain = tern_bench::topology::Chain::build(&format!("tbe{}-xg", std::process::id()), true).expect("chain");
    let place = Placement { dut_cpu: 0, rt_priority: 0 };
    let plain = DutNeeds { firewall: Firewall::Drop50, route_file: None, gre: false, vlan: None };
    let dir = std::env::temp_dir();
    for (needs, word) in
        [(DutNeeds { gre: true, ..plain.clone() }, "GRE"), (DutNeeds { vlan: Some(7), ..plain }, "VLAN")]
    {
        match dut::setup(DutKind::XdpFwd, &chain, &needs, place, None, &dir).expect("setup") {
            Setup::NotSupported(why) => assert!(why.contains(word), "{why}"),
            Setup::Running(_) => panic!("xdp-fwd claims to do {word}"),
        }
    }
}
