//! CPU cost of the lane program itself, per packet, with BPF_PROG_TEST_RUN
//! (the kernel times `repeat` runs of the program on one frame; no device,
//! no NAPI, no copy): the 100GE scenarios' packets on tern's tables (50
//! rules, the drop test's rule set, GRE encapsulation, the full Internet
//! table), beside plain forwarding without rules.
//!
//! ```text
//! sudo lane_bench [--routes /work/shared/data/full-table-2025.txt.gz] [--calls 2000]
//! ```
//! Runs in a throwaway namespace (`tlanebench<pid>`, two veths for the
//! ports). Prints one line per case: ns per packet (median over calls of
//! the kernel's average of 250 runs on one frame, so lookups are cache-hot;
//! GRE: one run per call, which adds the kernel's timer overhead) and the
//! verdict.

use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, ExitCode};
use tern_acl::{Action, RuleSet};
use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteTarget, Source};
use tern_nodes::state::{GreTunnel, IfKind, IfTable, Iface, NO_IF, V4Net, link_local_from_mac};
use tern_xdp::lane::{FibCapacity, LaneConfig, LaneProgram};

const R0: [u8; 6] = [2, 0, 0, 0, 0, 0x10];
const R1: [u8; 6] = [2, 0, 0, 0, 0, 0x20];
const G0: [u8; 6] = [2, 0, 0, 0, 0, 0x11];

fn sh(args: &[&str]) -> Result<(), String> {
    let o = Command::new(args[0]).args(&args[1..]).output().map_err(|e| format!("{args:?}: {e}"))?;
    if o.status.success() { Ok(()) } else { Err(format!("{args:?}: {}", String::from_utf8_lossy(&o.stderr))) }
}

fn csum(h: &[u8]) -> u16 {
    let mut s: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// A 64-byte frame (without FCS: 60) of UDP from `src` to `dst`.
fn frame(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&R0);
    f.extend_from_slice(&G0);
    f.extend_from_slice(&[8, 0]);
    let mut ip = vec![0x45, 0, 0, 46, 0, 1, 0, 0, 255, 17, 0, 0];
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&26u16.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(60, 0x5a);
    f
}

fn iface(index: u16, name: &str, kind: IfKind, port: u16, mac: [u8; 6], net: V4Net, acl_in: Option<u16>) -> Iface {
    Iface {
        index,
        name: name.into(),
        kind,
        port,
        mac,
        mtu: 1500,
        up: true,
        v4: vec![net],
        v6: Vec::new(),
        v6_ll: link_local_from_mac(mac),
        acl_in,
        acl_out: None,
    }
}

struct Case {
    name: &'static str,
    acl: Option<RuleSet>,
    gre: bool,
    frames: Vec<Vec<u8>>,
}

fn run(routes: Option<&str>, calls: usize) -> Result<(), String> {
    let ns = format!("tlanebench{}", std::process::id());
    sh(&["ip", "netns", "add", &ns])?;
    let r = (|| {
        sh(&["ip", "-n", &ns, "link", "add", "l0", "type", "veth", "peer", "name", "p0"])?;
        sh(&["ip", "-n", &ns, "link", "add", "l1", "type", "veth", "peer", "name", "p1"])?;
        let f = std::fs::File::open(format!("/var/run/netns/{ns}")).map_err(|e| e.to_string())?;
        tern_xdp::enter_netns(&f).map_err(|e| e.to_string())?;
        bench(routes, calls)
    })();
    let _ = sh(&["ip", "netns", "del", &ns]);
    r
}

fn bench(routes: Option<&str>, calls: usize) -> Result<(), String> {
    let gen_src = Ipv4Addr::new(10, 10, 1, 2);
    let single = vec![frame(gen_src, Ipv4Addr::new(198, 18, 0, 1), 1024, 1024)];
    let multi: Vec<Vec<u8>> = (0..254u32)
        .map(|i| frame(gen_src, Ipv4Addr::from(0xc612_0000 + i + 1), 1024 + i as u16 * 97, 4000 + i as u16))
        .collect();
    let mut drop_test = tern_acl::scenario_50_drop_rules();
    drop_test.name = "DROP".into();
    drop_test.default = Action::Drop;
    let mut accept = tern_acl::Rule::new(tern_acl::RuleAction::Accept);
    accept.src = Some(tern_acl::value::List::one(
        tern_acl::value::Prefix::new("10.10.1.0".parse().map_err(|_| "addr")?, 24).map_err(|e| e.to_string())?,
    ));
    drop_test.rules.push(accept);
    let blocked: Vec<Vec<u8>> = (1..=50u8)
        .map(|n| frame(Ipv4Addr::new(1, 1, n, 1), Ipv4Addr::new(198, 18, 0, 1), 1024 + u16::from(n), 2000))
        .collect();
    let mut cases = vec![
        Case { name: "plain forwarding, no rules", acl: None, gre: false, frames: single.clone() },
        Case {
            name: "single-flow-50fw",
            acl: Some(tern_acl::scenario_50_drop_rules()),
            gre: false,
            frames: single.clone(),
        },
        Case { name: "drop-test, legitimate half", acl: Some(drop_test.clone()), gre: false, frames: multi.clone() },
        Case { name: "drop-test, blocked half", acl: Some(drop_test), gre: false, frames: blocked },
        Case {
            name: "gre-multi-flow",
            acl: Some(tern_acl::scenario_50_drop_rules()),
            gre: true,
            frames: multi.clone(),
        },
    ];
    if routes.is_some() {
        cases.push(Case {
            name: "900k-routes-50fw",
            acl: Some(tern_acl::scenario_50_drop_rules()),
            gre: false,
            frames: multi.clone(),
        });
    }
    let kif0 = tern_xdp::lane::device_ifindex("l0").map_err(|e| e.to_string())?;
    let kif1 = tern_xdp::lane::device_ifindex("l1").map_err(|e| e.to_string())?;
    println!("# case ns_per_packet verdict (median of {calls} calls x 250 runs; BPF_PROG_TEST_RUN)");
    for c in cases {
        let full = c.name.starts_with("900k");
        let (mut w, reader) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
        let add = |w: &mut tern_fib::FibWriter, p: &str, t: RouteTarget| {
            w.add_route(Source::Static, p.parse::<Prefix>().map_err(|e| e.to_string())?, t, RouteAttrs::default())
                .map_err(|e| e.to_string())
        };
        add(&mut w, "10.10.1.0/24", RouteTarget::Connected { ifindex: 0 })?;
        add(&mut w, "10.10.2.0/24", RouteTarget::Connected { ifindex: 1 })?;
        add(&mut w, "192.168.255.0/30", RouteTarget::Connected { ifindex: 2 })?;
        let sink: IpAddr = "10.10.2.2".parse().map_err(|_| "addr")?;
        if full {
            let path = routes.unwrap_or_default();
            let entries = tern_fib::routefile::load(std::path::Path::new(path)).map_err(|e| format!("{path}: {e}"))?;
            let ops: Vec<_> = entries
                .into_iter()
                .filter(|(p, _)| p.is_v4())
                .map(|(p, _)| {
                    tern_fib::RouteOp::Add(
                        Source::Config,
                        p,
                        RouteTarget::Via { gw: sink, ifindex: None },
                        RouteAttrs::default(),
                    )
                })
                .collect();
            w.apply(ops);
        }
        let via = if c.gre { "192.168.255.2" } else { "10.10.2.2" };
        add(&mut w, "198.18.0.0/15", RouteTarget::Via { gw: via.parse().map_err(|_| "addr")?, ifindex: None })?;
        // The next hop's MAC is in0's own: a run leaves its output as the
        // next run's input, and the rewritten frame must still be for the
        // router (otherwise every run after the first times the
        // not-for-us drop). TTL 255 lasts the 250 runs.
        let next_hop_mac = if c.gre { [2, 0, 0, 0, 0, 0x21] } else { R0 };
        w.set_neighbor(1, sink, Some(next_hop_mac));
        let acl_in = c.acl.as_ref().map(|_| 0u16);
        let t = GreTunnel { local: "10.10.2.1".parse().map_err(|_| "a")?, remote: sink, key: None, ttl: 64 };
        let ifs = IfTable::new(vec![
            iface(0, "in0", IfKind::Port, 0, R0, V4Net { addr: Ipv4Addr::new(10, 10, 1, 1), len: 24 }, acl_in),
            iface(1, "out0", IfKind::Port, 1, R1, V4Net { addr: Ipv4Addr::new(10, 10, 2, 1), len: 24 }, None),
            iface(
                2,
                "gre0",
                IfKind::Gre(t),
                NO_IF,
                [2, 0, 0, 0, 0, 0x30],
                V4Net { addr: Ipv4Addr::new(192, 168, 255, 1), len: 30 },
                None,
            ),
        ]);
        let acls: Vec<RuleSet> = c.acl.into_iter().collect();
        let cfg = LaneConfig { fib: FibCapacity::default(), neigh_to_tern: true, linux_mode: false };
        let mut lane = LaneProgram::load(&cfg).map_err(|e| e.to_string())?;
        lane.attach_fib(&reader.raw(), None).map_err(|e| e.to_string())?;
        lane.publish(&tern_control::xdplane::lane_tables(&ifs, &acls, &|_| true)).map_err(|e| e.to_string())?;
        lane.add_port(0, 0, kif0).map_err(|e| e.to_string())?;
        lane.add_port(1, 1, kif1).map_err(|e| e.to_string())?;
        let mut ns: Vec<u128> = Vec::with_capacity(calls);
        let mut verdict = 0;
        for i in 0..calls {
            let f = &c.frames[i % c.frames.len()];
            // A run leaves its output as the next run's input: encapsulating
            // twice would time something else, so GRE runs once per call.
            let repeat = if c.gre { 1 } else { 250 };
            let (act, per) = lane.test_run_timed(f, kif0, repeat).map_err(|e| e.to_string())?;
            verdict = act;
            ns.push(per.as_nanos());
        }
        ns.sort_unstable();
        let med = ns.get(ns.len() / 2).copied().unwrap_or(0);
        let v = match verdict {
            1 => "drop",
            2 => "pass/punt",
            4 => "redirect",
            _ => "?",
        };
        println!("{:<28} {med:>5} ns  {v}", c.name);
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |k: &str| args.iter().position(|a| a == k).and_then(|i| args.get(i + 1)).cloned();
    let routes = get("--routes");
    let calls = get("--calls").and_then(|s| s.parse().ok()).unwrap_or(2000);
    match run(routes.as_deref(), calls) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lane_bench: {e}");
            ExitCode::FAILURE
        }
    }
}
