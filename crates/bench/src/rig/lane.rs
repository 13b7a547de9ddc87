//! CPU cost of the lane program itself, per packet, with BPF_PROG_TEST_RUN
//! (the kernel times `repeat` runs of the program on one frame; no device,
//! no NAPI, no copy): the 100GE scenarios' packets on tern's tables (50
//! rules, the drop test's rule set, GRE encapsulation, the full Internet
//! table), beside plain forwarding without rules.
//!
//! ```text
//! sudo tern-bench lane [--routes /work/shared/data/full-table-2025.txt.gz] [--calls 2000] [--rounds 5] [--acl-cache BUCKETS] [--fwd-memo 0|1] [--fwd-buckets N] [--only SUBSTRING] [--object LANE.O ...] [--xdp-fwd] [--flows N,...]
//! ```
//! Run it pinned (`taskset -c 1 tern-bench lane ...`): the lane's caches and
//! memos are per CPU, and calls made after the thread moved find the other
//! CPU's slice unlearnt (the 1024-flow cases then mix both states).
//! `--acl-cache 0` turns the lane's ACL verdict cache off (every packet
//! classified: the cost of a cache miss, minus the cache's own work);
//! `--fwd-memo 0` the forwarding memo (every packet takes the whole path).
//! Runs in a throwaway namespace (`tlanebench<pid>`, two veths for the
//! ports). Prints one line per case: ns per packet (median over calls of
//! the kernel's average of 250 runs on one frame, so lookups are cache-hot;
//! "1 run/call" cases and GRE: one run per call, which adds the kernel's
//! timer overhead, the same for each such case; the 1024-flow cases take
//! the frames in turn, so each flow comes back after 1023 others) and the
//! verdict. The cases on the plain FIB run interleaved (blocks of 64 calls),
//! each on its own program (every flow run untimed first: 32 times for
//! cases of up to 2048 flows, so the memos have learnt them), so the
//! machine's load changes hit them alike; a case with rules also gets the
//! median of its per-call differences to the same case without rules, and
//! every line the range of the medians of `--rounds` consecutive slices.
//! One-run calls are timed in steps of about 10 ns on the VMs we use, so
//! their lines also give the mean of the middle 80 % of the calls (and of
//! the per-call differences), which resolves finer.
//! The 65536-flow cases (65536 distinct ACL keys, more than the verdict
//! cache holds) use as many of their flows as there are calls.
//!
//! "single-flow-50fw, trace armed" is single-flow-50fw with a `tern trace`
//! armed for every packet (each run reserves and fills a 208-byte record in
//! the lane's ring buffer, drained between blocks, untimed): its cost is
//! given over the same case disarmed, with the records taken and lost.
//!
//! `--only` takes alternatives separated by `|`: a case runs when its name
//! contains one of them, or equals one written `=NAME`
//! (`--only "=single-flow-50fw|=plain forwarding, no rules"` leaves out
//! the trace-armed case, whose drained ring makes it slow).
//!
//! The "ipv6" cases: 66-byte UDP/IPv6 frames on the same topology
//! (2001:db8:1::/64 on in0, 2001:db8:2::/64 on out0, 2001:db8:ff00::/40
//! via the sink), with the 50 source rules in IPv6
//! (`drop src 2001:db8:dead:N::1/128`); one flow, or 65536 sources.
//!
//! `--flows N,M,...` adds one-run cases without rules over N flows in
//! turn (N sources to N destinations; also for xdp-fwd with `--xdp-fwd`).
//!
//! `--xdp-fwd` also times the lab's in-kernel XDP forwarder (`xdp-fwd`,
//! bpf/xdpfwd.bpf.c: bpf_fib_lookup, an empty firewall that accepts, a
//! device map) on the same frames, in the same blocks of calls: the
//! namespace gets the lane's routes, addresses and next hop in the kernel,
//! with forwarding on. Its lines ("xdp-fwd, ...") give its cost over the
//! lane's case without rules on the same flows (a negative figure: xdp-fwd
//! costs less).
//!
//! `--object PATH` (repeatable) times other builds of `bpf/lane.c` (same
//! maps and layouts; `clang -O2 -g -target bpf -c lane.c`) instead of the
//! built-in one: every interleaved case runs once per object, named
//! `case @file`, so variants of the program are compared in the same
//! blocks of calls; the full-table case uses the first object.

use crate::bpf::XdpFwd;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::{Command, ExitCode};
use tern_acl::{Action, RuleSet};
use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteTarget, Source};
use tern_nodes::state::{GreTunnel, IfKind, IfTable, Iface, NO_IF, V4Net, V6Net};
use tern_xdp::lane::{LaneConfig, LaneProgram};

const R0: [u8; 6] = [2, 0, 0, 0, 0, 0x10];

/// Untimed passes over a case's flows before its timed calls, for cases of
/// at most WARM_FLOWS_MAX flows: what the verdict cache holds by default
/// (1024 buckets of 2 per CPU; the forwarding memo holds 4096).
const WARM_PASSES: usize = 32;
const WARM_FLOWS_MAX: usize = 2048;

/// `--fwd-buckets N`: the forwarding memo's buckets per CPU (0: the default).
static FWD_BUCKETS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// `--flows N,M,...`: more one-run cases without rules, over N flows in turn.
static MORE_FLOWS: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();

/// Programs loaded so far (each attached to a veth of its own; see `setup`).
static ATTACHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A new veth (down) for the next program to attach to: its name and number.
fn own_veth() -> Result<(String, usize), String> {
    let n = ATTACHED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (dev, peer) = (format!("ld{n}"), format!("lp{n}"));
    sh(&["ip", "link", "add", &dev, "type", "veth", "peer", "name", &peer])?;
    Ok((dev, n))
}

/// Calls of one program in a row before the next program's: switching
/// every call would time cold caches (a program's first run after
/// another's).
const BLOCK_CALLS: usize = 64;

/// An XDP action's name.
fn action_name(act: u32) -> &'static str {
    match act {
        1 => "drop",
        2 => "pass/punt",
        4 => "redirect",
        _ => "?",
    }
}

fn median(v: &mut [i128]) -> i128 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The mean of the middle 80 %. One run per call is timed in steps of
/// about 10 ns here: this resolves finer (the machine's noise dithers
/// the steps) without the outliers.
fn trimmed_mean(v: &mut [i128]) -> f64 {
    v.sort_unstable();
    let cut = v.len() / 10;
    let mid = &v[cut..v.len() - cut];
    if mid.is_empty() { 0.0 } else { mid.iter().sum::<i128>() as f64 / mid.len() as f64 }
}

/// `--fwd-memo`: whether the lanes loaded run with the forwarding memo.
static FWD_MEMO: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
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

/// A frame (without FCS: 66 bytes) of UDP over IPv6 from `src` to `dst`,
/// hop limit 255, four bytes of payload, the UDP checksum set.
fn frame6(src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(66);
    f.extend_from_slice(&R0);
    f.extend_from_slice(&G0);
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 12, 17, 255]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    let mut udp = Vec::with_capacity(12);
    udp.extend_from_slice(&sport.to_be_bytes());
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&[0, 12, 0, 0, 0x5a, 0x5a, 0x5a, 0x5a]);
    // Pseudo-header: addresses, length, next header.
    let mut ph = Vec::with_capacity(52);
    ph.extend_from_slice(&src.octets());
    ph.extend_from_slice(&dst.octets());
    ph.extend_from_slice(&[0, 0, 0, 12, 0, 0, 0, 17]);
    ph.extend_from_slice(&udp);
    let c = match csum(&ph) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&udp);
    f
}

/// 50 rules `drop src 2001:db8:dead:N::1/128`, default accept: the
/// 100GE test's 50 source rules in IPv6.
fn fw50_v6() -> RuleSet {
    let mut s = RuleSet::new("TEST_IN6", Action::Accept);
    for n in 1..=50u16 {
        let mut r = tern_acl::Rule::new(tern_acl::RuleAction::Drop);
        let a = Ipv6Addr::new(0x2001, 0xdb8, 0xdead, n, 0, 0, 0, 1);
        r.src = Some(tern_acl::value::List::one(
            tern_acl::value::Prefix::new(a.into(), 128).unwrap_or_else(|_| unreachable!()),
        ));
        s.rules.push(r);
    }
    s
}

/// `inner` (a frame from [`frame`]) as gre0's remote sends it to its local
/// address: outer IPv4 10.10.2.2 -> 10.10.2.1, GRE without key.
fn gre_frame(inner: &[u8]) -> Vec<u8> {
    gre_frame_from(inner, 2)
}

/// `inner` through the tunnel whose remote is 10.10.2.`remote` (gre0: 2;
/// the extra tunnels: 3 and up).
fn gre_frame_from(inner: &[u8], remote: u8) -> Vec<u8> {
    let l3 = &inner[14..];
    let mut f = Vec::with_capacity(14 + 24 + l3.len());
    f.extend_from_slice(&inner[..14]);
    let tot = (20 + 4 + l3.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 47, 0, 0, 10, 10, 2, remote, 10, 10, 2, 1];
    ip[2..4].copy_from_slice(&tot.to_be_bytes());
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0, 0, 8, 0]);
    f.extend_from_slice(l3);
    f
}

/// Whether case `name` is among `--only`'s alternatives.
fn selected(name: &str, only: &str) -> bool {
    only.split('|').any(|o| match o.strip_prefix('=') {
        Some(exact) => name == exact,
        None => name.contains(o),
    })
}

fn iface(index: u16, name: &str, kind: IfKind, port: u16, mac: [u8; 6], net: V4Net, acl_in: Option<u16>) -> Iface {
    let v6 = match index {
        0 => vec![V6Net { addr: Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1), len: 64 }],
        1 => vec![V6Net { addr: Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1), len: 64 }],
        _ => Vec::new(),
    };
    Iface { v4: vec![net], v6, acl_in, ..Iface::new(index, name, kind, port, mac) }
}

struct Case {
    name: &'static str,
    acl: Option<RuleSet>,
    /// The destinations are routed into gre0. A run leaves its output as
    /// the next run's input, and encapsulating twice would time something
    /// else: such cases run once per call.
    gre: bool,
    frames: Vec<Vec<u8>>,
    /// Runs per call: 250 on one frame (cache-hot), or 1 per call over the
    /// frames in turn (each flow's tables as cold as 1024 flows make them;
    /// includes the kernel's timer overhead, the same for every such case).
    repeat: u32,
    /// A `tern trace` armed for every packet: each run writes a record into
    /// the lane's ring buffer, drained between blocks of calls (untimed).
    trace: bool,
    /// The case this one's cost is given over (default: the same runs
    /// without rules).
    vs: Option<&'static str>,
    /// Timed on xdp-fwd (in-kernel XDP forwarding with bpf_fib_lookup)
    /// instead of the lane.
    xdp_fwd: bool,
    /// A lane in Linux mode with the router's addresses (in0's and out0's)
    /// as local: (tern terminates IPsec, the SAs' ESP-in-UDP ports).
    linux: Option<(bool, &'static [u16])>,
}

impl Case {
    fn new(name: &'static str, acl: Option<RuleSet>, gre: bool, frames: Vec<Vec<u8>>, repeat: u32) -> Case {
        Case { name, acl, gre, frames, repeat, trace: false, vs: None, xdp_fwd: false, linux: None }
    }
}

/// A build of the lane program to time: a label and its ELF object (None:
/// the built-in one).
type Object = (String, Option<Vec<u8>>);

/// A program timed: a lane (with its FIB), or the xdp-fwd peer.
enum Prog {
    /// The FIB's writer and reader live as long as the lane mirroring it.
    Lane {
        lane: Box<LaneProgram>,
        _fib: Box<(tern_fib::FibWriter, tern_fib::FibReader)>,
    },
    XdpFwd(Box<XdpFwd>),
}

impl Prog {
    /// The last action and the average time of one of `repeat` runs on
    /// `frame` as received on kernel device `kif`.
    fn run(&self, frame: &[u8], kif: u32, repeat: u32) -> Result<(u32, std::time::Duration), String> {
        match self {
            Prog::Lane { lane, .. } => lane.test_run_timed(frame, kif, repeat).map_err(|e| e.to_string()),
            Prog::XdpFwd(f) => f.test_run_timed(kif, frame, repeat).map_err(|e| format!("xdp-fwd: {e}")),
        }
    }

    fn lane(&mut self) -> Option<&mut LaneProgram> {
        match self {
            Prog::Lane { lane, .. } => Some(lane),
            Prog::XdpFwd(_) => None,
        }
    }
}

/// Loads xdp-fwd, attaches it to a veth of its own (as `setup` does the
/// lanes), makes the ports redirect targets and gives the namespace what
/// its bpf_fib_lookup needs: the lane's routes, addresses and next hop in
/// the kernel, forwarding on.
fn setup_xdp_fwd(kif0: u32, kif1: u32) -> Result<Prog, String> {
    for cmd in [
        "ip link set lo up",
        "ip link set l0 up",
        "ip link set p0 up",
        "ip link set l1 up",
        "ip link set p1 up",
        "ip addr replace 10.10.1.1/24 dev l0",
        "ip addr replace 10.10.2.1/24 dev l1",
        // The lane's next hop MAC (R0): see `setup`.
        "ip neigh replace 10.10.2.2 lladdr 02:00:00:00:00:10 dev l1 nud permanent",
        "ip route replace 198.18.0.0/15 via 10.10.2.2",
        "sysctl -qw net.ipv4.ip_forward=1",
        "ip -6 addr replace 2001:db8:1::1/64 dev l0 nodad",
        "ip -6 addr replace 2001:db8:2::1/64 dev l1 nodad",
        "ip -6 neigh replace 2001:db8:2::2 lladdr 02:00:00:00:00:10 dev l1 nud permanent",
        "ip -6 route replace 2001:db8:ff00::/40 via 2001:db8:2::2",
        "sysctl -qw net.ipv6.conf.all.forwarding=1",
    ] {
        sh(&cmd.split(' ').collect::<Vec<_>>())?;
    }
    let mut f = XdpFwd::load().map_err(|e| format!("xdp-fwd: {e}"))?;
    f.add_ports_here(&[kif0, kif1]).map_err(|e| format!("xdp-fwd: {e}"))?;
    let (dev, _) = own_veth()?;
    // The link lives as long as the program (detached on drop).
    f.attach_here(&dev).map_err(|e| format!("xdp-fwd: {e}"))?;
    Ok(Prog::XdpFwd(Box::new(f)))
}

fn run(
    routes: Option<&str>,
    calls: usize,
    rounds: usize,
    acl_cache_buckets: u32,
    only: Option<&str>,
    objects: &[Object],
    xdp_fwd: bool,
) -> Result<(), String> {
    let ns = format!("tlanebench{}", std::process::id());
    sh(&["ip", "netns", "add", &ns])?;
    let r = (|| {
        sh(&["ip", "-n", &ns, "link", "add", "l0", "type", "veth", "peer", "name", "p0"])?;
        sh(&["ip", "-n", &ns, "link", "add", "l1", "type", "veth", "peer", "name", "p1"])?;
        let f = std::fs::File::open(format!("/var/run/netns/{ns}")).map_err(|e| e.to_string())?;
        tern_xdp::enter_netns(&f).map_err(|e| e.to_string())?;
        bench(routes, calls, rounds, acl_cache_buckets, only, objects, xdp_fwd)
    })();
    let _ = sh(&["ip", "netns", "del", &ns]);
    r
}

fn bench(
    routes: Option<&str>,
    calls: usize,
    rounds: usize,
    acl_cache_buckets: u32,
    only: Option<&str>,
    objects: &[Object],
    xdp_fwd: bool,
) -> Result<(), String> {
    let gen_src = Ipv4Addr::new(10, 10, 1, 2);
    let single = vec![frame(gen_src, Ipv4Addr::new(198, 18, 0, 1), 1024, 1024)];
    let multi: Vec<Vec<u8>> = (0..254u32)
        .map(|i| frame(gen_src, Ipv4Addr::from(0xc612_0000 + i + 1), 1024 + i as u16 * 97, 4000 + i as u16))
        .collect();
    // 1024 flows whose ACL keys all differ (1024 sources), to 1024
    // destinations: the classifier sees 1024 distinct keys.
    let flows1024: Vec<Vec<u8>> = (0..1024u32)
        .map(|i| frame(Ipv4Addr::from(0x0a0b_0000 + i + 1), Ipv4Addr::from(0xc612_0000 + i + 1), 1024 + i as u16, 4000))
        .collect();
    // 65536 distinct keys: far more than the verdict cache holds (2048
    // entries per CPU by default), each flow back after 65535 others (run
    // with --calls 65536 or more to see them all).
    let flows65536: Vec<Vec<u8>> = (0..65536u32)
        .map(|i| frame(Ipv4Addr::from(0x0a40_0000 + i + 1), Ipv4Addr::from(0xc612_0000 + i + 1), 1024, 4000))
        .collect();
    // IPv6: one flow, and 65536 flows from as many sources.
    let src6 = |i: u32| Ipv6Addr::from(0x2001_0db8_0001_0000_0000_0000_0000_0002u128 + u128::from(i));
    let dst6 = |i: u32| Ipv6Addr::from(0x2001_0db8_ff00_0000_0000_0000_0000_0001u128 + u128::from(i));
    let single6 = vec![frame6(src6(0), dst6(0), 1024, 1024)];
    let flows6: Vec<Vec<u8>> = (0..65536u32).map(|i| frame6(src6(i + 1), dst6(i + 1), 1024, 4000)).collect();
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
    let fw50 = || Some(tern_acl::scenario_50_drop_rules());
    let tunnels8: Vec<Vec<u8>> = (0..EXTRA_TUNNELS + 1).map(|t| gre_frame_from(&single[0], 2 + t)).collect();
    let (flows1024_xf, flows65536_xf) = (flows1024.clone(), flows65536.clone());
    let (single6_xf, flows6_xf) = (single6.clone(), flows6.clone());
    let mut cases = vec![
        Case::new("plain forwarding, no rules", None, false, single.clone(), 250),
        Case::new("single-flow-50fw", fw50(), false, single.clone(), 250),
        Case {
            trace: true,
            vs: Some("single-flow-50fw"),
            ..Case::new("single-flow-50fw, trace armed", fw50(), false, single.clone(), 250)
        },
        Case::new("drop-test, legitimate half", Some(drop_test.clone()), false, multi.clone(), 250),
        Case::new("drop-test, blocked half", Some(drop_test), false, blocked, 250),
        Case::new("gre-multi-flow", fw50(), true, multi.clone(), 1),
        Case {
            vs: Some("50fw, 1 flow, 1 run/call"),
            ..Case::new("gre encap, 50fw, 1 flow, 1 run/call", fw50(), true, single.clone(), 1)
        },
        Case::new("no rules, 1 flow, 1 run/call", None, false, single.clone(), 1),
        Case::new("50fw, 1 flow, 1 run/call", fw50(), false, single.clone(), 1),
        // A run strips the outer headers the next would need: one per call.
        Case::new("gre decap, no rules, 1 flow, 1 run/call", None, false, vec![gre_frame(&single[0])], 1),
        Case {
            vs: Some("50fw, 1 flow, 1 run/call"),
            ..Case::new("gre decap, 50fw, 1 flow, 1 run/call", fw50(), false, vec![gre_frame(&single[0])], 1)
        },
        // Eight tunnels' packets in turn: each tunnel is looked up again
        // unless gre-input remembers more than the last one.
        Case::new("gre decap, no rules, 8 tunnels in turn, 1 run/call", None, false, tunnels8, 1),
        Case::new("no rules, 1024 flows, 1 run/call", None, false, flows1024.clone(), 1),
        Case::new("50fw, 1024 flows, 1 run/call", fw50(), false, flows1024, 1),
        Case::new("no rules, 65536 flows, 1 run/call", None, false, flows65536.clone(), 1),
        Case::new("50fw, 65536 flows, 1 run/call", fw50(), false, flows65536, 1),
        Case::new("ipv6 plain forwarding, no rules", None, false, single6.clone(), 250),
        Case {
            vs: Some("ipv6 plain forwarding, no rules"),
            ..Case::new("ipv6 single-flow-50fw", Some(fw50_v6()), false, single6, 250)
        },
        Case::new("ipv6 no rules, 65536 flows, 1 run/call", None, false, flows6.clone(), 1),
        // Transit UDP (not to 500/4500) in Linux mode: while tern
        // terminates IPsec the lane looks its port up in
        // `lane_encap_ports` (empty, or holding an SA's port).
        Case { linux: Some((false, &[])), ..Case::new("linux mode, transit udp", None, false, single.clone(), 250) },
        Case {
            linux: Some((true, &[])),
            vs: Some("linux mode, transit udp"),
            ..Case::new("linux mode + ipsec, transit udp, no encap port", None, false, single.clone(), 250)
        },
        Case {
            linux: Some((true, &[4600])),
            vs: Some("linux mode, transit udp"),
            ..Case::new("linux mode + ipsec, transit udp, encap port 4600", None, false, single.clone(), 250)
        },
        Case {
            vs: Some("ipv6 no rules, 65536 flows, 1 run/call"),
            ..Case::new("ipv6 50fw, 65536 flows, 1 run/call", Some(fw50_v6()), false, flows6, 1)
        },
    ];
    for &n in MORE_FLOWS.get().map_or(&[][..], |v| v.as_slice()) {
        let flows: Vec<Vec<u8>> = (0..n)
            .map(|i| frame(Ipv4Addr::from(0x0a0b_0000 + i + 1), Ipv4Addr::from(0xc612_0000 + i + 1), 1024, 4000))
            .collect();
        let name: &'static str = Box::leak(format!("no rules, {n} flows, 1 run/call (--flows)").into_boxed_str());
        if xdp_fwd {
            let k: &'static str = Box::leak(format!("xdp-fwd, {n} flows, 1 run/call (--flows)").into_boxed_str());
            cases.push(Case { xdp_fwd: true, vs: Some(name), ..Case::new(k, None, false, flows.clone(), 1) });
        }
        cases.push(Case::new(name, None, false, flows, 1));
    }
    if xdp_fwd {
        // The peer on the same frames and routes, each given over the
        // lane's case without rules: "+N ns over" is xdp-fwd's cost above
        // the lane's.
        let peer = |name, frames: &Vec<Vec<u8>>, repeat, vs| Case {
            xdp_fwd: true,
            vs: Some(vs),
            ..Case::new(name, None, false, frames.clone(), repeat)
        };
        cases.push(peer("xdp-fwd, 1 flow", &single, 250, "plain forwarding, no rules"));
        cases.push(peer("xdp-fwd, 1 flow, 1 run/call", &single, 1, "no rules, 1 flow, 1 run/call"));
        cases.push(peer("xdp-fwd, 1024 flows, 1 run/call", &flows1024_xf, 1, "no rules, 1024 flows, 1 run/call"));
        cases.push(peer("xdp-fwd, 65536 flows, 1 run/call", &flows65536_xf, 1, "no rules, 65536 flows, 1 run/call"));
        cases.push(peer("xdp-fwd, ipv6 1 flow", &single6_xf, 250, "ipv6 plain forwarding, no rules"));
        cases.push(peer(
            "xdp-fwd, ipv6 65536 flows, 1 run/call",
            &flows6_xf,
            1,
            "ipv6 no rules, 65536 flows, 1 run/call",
        ));
    }
    if routes.is_some() {
        cases.push(Case::new("900k-routes-50fw", fw50(), false, multi.clone(), 250));
    }
    let kif0 = tern_xdp::lane::device_ifindex("l0").map_err(|e| e.to_string())?;
    let kif1 = tern_xdp::lane::device_ifindex("l1").map_err(|e| e.to_string())?;
    println!("# case ns_per_packet verdict (median of {calls} calls x 250 runs or 1 run; BPF_PROG_TEST_RUN)");
    cases.retain(|c| only.is_none_or(|o| selected(c.name, o)));
    // Every interleaved case once per object.
    let shared: Vec<(&Case, usize)> = cases
        .iter()
        .filter(|c| !c.name.starts_with("900k"))
        .flat_map(|c| (0..if c.xdp_fwd { 1 } else { objects.len() }).map(move |o| (c, o)))
        .collect();
    let label = |c: &Case, o: usize| {
        if !c.xdp_fwd && (objects.len() > 1 || objects[o].1.is_some()) {
            format!("{} @{}", c.name, objects[o].0)
        } else {
            c.name.to_string()
        }
    };
    // The cases on the plain FIB run interleaved, in blocks of calls, each
    // on its own program: a change of the machine's load hits them alike, and
    // a case's cost over its reference (no rules, same runs per call and
    // flows) is the median of the per-call differences.
    {
        let mut lanes = Vec::new();
        for &(c, o) in &shared {
            if c.xdp_fwd {
                let prog = setup_xdp_fwd(kif0, kif1)?;
                for f in &c.frames {
                    prog.run(f, kif0, 1)?;
                }
                lanes.push(prog);
                continue;
            }
            let (mut lane, w, r) =
                setup(routes, false, (c.gre, c.linux.is_some()), acl_cache_buckets, kif0, kif1, &objects[o])?;
            lane.publish(&tables(c.acl.as_ref())?).map_err(|e| e.to_string())?;
            if let Some((ipsec, ports)) = c.linux {
                for a in ["10.10.1.1", "10.10.2.1"] {
                    lane.add_local(a.parse().map_err(|_| "addr")?).map_err(|e| e.to_string())?;
                }
                lane.set_ipsec(ipsec).map_err(|e| e.to_string())?;
                lane.set_encap_ports(ports).map_err(|e| e.to_string())?;
            }
            // Untimed: every flow WARM_PASSES times when the memos can
            // hold them all, so that the timed calls see the steady state:
            // after a burst of new flows the memos fill one packet in 16
            // while they keep missing (their bypass), and one pass left
            // most of 1024 flows unlearnt (+70 ns over no rules at 4000
            // calls, +10 at 100,000). More flows than that: once (they
            // stay bypassed whatever the warm-up).
            let passes = if c.frames.len() <= WARM_FLOWS_MAX { WARM_PASSES } else { 1 };
            for _ in 0..passes {
                for f in &c.frames {
                    lane.test_run_timed(f, kif0, 1).map_err(|e| e.to_string())?;
                }
            }
            if c.trace {
                lane.trace_arm(u32::MAX).map_err(|e| format!("{}: {e}", c.name))?;
            }
            lanes.push(Prog::Lane { lane: Box::new(lane), _fib: Box::new((w, r)) });
        }
        let mut ns: Vec<Vec<u128>> = vec![Vec::with_capacity(calls); shared.len()];
        let mut verdicts = vec![0u32; shared.len()];
        let mut traced = vec![0u64; shared.len()];
        for block in (0..calls).step_by(BLOCK_CALLS) {
            for (i, &(c, _)) in shared.iter().enumerate() {
                for j in block..(block + BLOCK_CALLS).min(calls) {
                    let f = &c.frames[j % c.frames.len()];
                    let (act, per) = lanes[i].run(f, kif0, c.repeat)?;
                    verdicts[i] = act;
                    ns[i].push(per.as_nanos());
                }
                // Untimed: a block's records (64 calls x 250 runs x 208
                // bytes) fit in the 4 MiB ring.
                if c.trace {
                    traced[i] += lanes[i].lane().map_or(0, |l| l.trace_take().len()) as u64;
                }
            }
        }
        for (i, &(c, o)) in shared.iter().enumerate() {
            let mut all: Vec<i128> = ns[i].iter().map(|&x| x as i128).collect();
            let med = median(&mut all);
            // Spread: the medians of `rounds` consecutive slices of the calls.
            let slice = calls.div_ceil(rounds).max(1);
            let mut parts: Vec<i128> =
                ns[i].chunks(slice).map(|ch| median(&mut ch.iter().map(|&x| x as i128).collect::<Vec<_>>())).collect();
            parts.sort_unstable();
            let (lo, hi) = (parts.first().copied().unwrap_or(0), parts.last().copied().unwrap_or(0));
            let reference = shared.iter().position(|&(r, ro)| match c.vs {
                Some(name) => ro == o && r.name == name,
                None => ro == o && r.acl.is_none() && r.repeat == c.repeat && r.frames.len() == c.frames.len(),
            });
            let over = match reference {
                Some(r) if r != i => {
                    let mut d: Vec<i128> = ns[i].iter().zip(&ns[r]).map(|(&a, &b)| a as i128 - b as i128).collect();
                    let fine = if c.repeat == 1 {
                        format!(" (trimmed mean {:+.1})", trimmed_mean(&mut d))
                    } else {
                        String::new()
                    };
                    format!("  {:+} ns{fine} over \"{}\"", median(&mut d), label(shared[r].0, shared[r].1))
                }
                _ => String::new(),
            };
            let records = if c.trace {
                let lost = lanes[i]
                    .lane()
                    .ok_or("trace on xdp-fwd")?
                    .counters()
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .find(|k| k.desc.error == "trace-lost")
                    .map_or(0, |k| k.value);
                format!("  ({} records, {lost} lost)", traced[i])
            } else {
                String::new()
            };
            let fine =
                if c.repeat == 1 { format!("trimmed mean {:.1} ns, ", trimmed_mean(&mut all)) } else { String::new() };
            println!(
                "{:<34} {med:>5} ns  {}  ({fine}slices {lo}-{hi}){over}{records}",
                label(c, o),
                action_name(verdicts[i])
            );
        }
    }
    if let (Some(c), Some(path)) = (cases.iter().find(|c| c.name.starts_with("900k")), routes) {
        full_table(c, path, calls, xdp_fwd, acl_cache_buckets, kif0, kif1, &objects[0])?;
    }
    Ok(())
}

/// The full-table cases: the lane (with case `c`'s rules) on `c`'s frames,
/// hot, and on 65536 destinations drawn from the table, one run a call
/// (each lookup's lines as cold as so many destinations make them); with
/// `xdp_fwd`, the peer on the same frames with the same table in the kernel
/// (loaded with `ip -batch`), in the same blocks of calls.
#[allow(clippy::too_many_arguments)]
fn full_table(
    c: &Case,
    path: &str,
    calls: usize,
    xdp_fwd: bool,
    acl_cache_buckets: u32,
    kif0: u32,
    kif1: u32,
    object: &Object,
) -> Result<(), String> {
    let entries = tern_fib::routefile::load(std::path::Path::new(path)).map_err(|e| format!("{path}: {e}"))?;
    let v4: Vec<(Ipv4Addr, u8)> = entries
        .iter()
        .filter_map(|(p, _)| match p.addr() {
            IpAddr::V4(a) if p.len() >= 8 => Some((a, p.len())),
            _ => None,
        })
        .collect();
    // A covered destination per draw: the first address after a random
    // prefix's network address (all routes share the next hop).
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let covered: Vec<Vec<u8>> = (0..65536u32)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (a, _) = v4[(x % v4.len() as u64) as usize];
            frame(Ipv4Addr::from(0x0a40_0000 + i + 1), Ipv4Addr::from(u32::from(a) | 1), 1024, 4000)
        })
        .collect();
    let (mut lane, w, r) = setup(Some(path), true, (c.gre, false), acl_cache_buckets, kif0, kif1, object)?;
    lane.publish(&tables(c.acl.as_ref())?).map_err(|e| e.to_string())?;
    let mut progs = vec![Prog::Lane { lane: Box::new(lane), _fib: Box::new((w, r)) }];
    if xdp_fwd {
        progs.push(setup_xdp_fwd(kif0, kif1)?);
        let batch = std::env::temp_dir().join(format!("lane_bench_routes.{}", std::process::id()));
        let text: String = v4.iter().map(|(a, l)| format!("route replace {a}/{l} via 10.10.2.2\n")).collect();
        std::fs::write(&batch, text).map_err(|e| e.to_string())?;
        let loaded = sh(&["ip", "-batch", &batch.to_string_lossy()]);
        let _ = std::fs::remove_file(&batch);
        loaded?;
        // The lane's own route for the hot case's destinations.
        sh(&["ip", "route", "replace", "198.18.0.0/15", "via", "10.10.2.2"])?;
    }
    // (program, frames, runs a call, label)
    let mut runs: Vec<(usize, &[Vec<u8>], u32, String)> = vec![
        (0, &c.frames, c.repeat, c.name.to_string()),
        (0, &covered, 1, format!("{}, 65536 covered dsts, 1 run/call", c.name)),
    ];
    if xdp_fwd {
        runs.push((1, &c.frames, c.repeat, "xdp-fwd, 900k routes".into()));
        runs.push((1, &covered, 1, "xdp-fwd, 900k routes, 65536 covered dsts, 1 run/call".into()));
    }
    for (p, frames, _, _) in &runs {
        for f in frames.iter() {
            progs[*p].run(f, kif0, 1)?;
        }
    }
    let mut ns: Vec<Vec<u128>> = vec![Vec::with_capacity(calls); runs.len()];
    let mut verdicts = vec![0u32; runs.len()];
    for block in (0..calls).step_by(BLOCK_CALLS) {
        for (i, (p, frames, repeat, _)) in runs.iter().enumerate() {
            for j in block..(block + BLOCK_CALLS).min(calls) {
                let (act, per) = progs[*p].run(&frames[j % frames.len()], kif0, *repeat)?;
                verdicts[i] = act;
                ns[i].push(per.as_nanos());
            }
        }
    }
    for (i, (_, _, repeat, name)) in runs.iter().enumerate() {
        let mut v: Vec<i128> = ns[i].iter().map(|&x| x as i128).collect();
        let med = median(&mut v);
        let fine =
            if *repeat == 1 { format!("  (trimmed mean {:.1} ns)", trimmed_mean(&mut v)) } else { String::new() };
        println!("{name:<34} {med:>5} ns  {}{fine}", action_name(verdicts[i]));
    }
    Ok(())
}

/// Tunnels besides gre0 (gre1..gre7), for the interleaved decap case.
const EXTRA_TUNNELS: u8 = 7;

/// The interfaces (in0 with rule set `acl` on input, out0, gre0..gre7) and rule sets.
fn tables(acl: Option<&RuleSet>) -> Result<tern_xdp::lane::LaneTables, String> {
    let acl_in = acl.map(|_| 0u16);
    let sink: IpAddr = "10.10.2.2".parse().map_err(|_| "addr")?;
    let t = GreTunnel { local: "10.10.2.1".parse().map_err(|_| "a")?, remote: sink, key: None, ttl: 64 };
    let mut ifs = vec![
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
    ];
    // gre1.. : more tunnels to out0's address, from 10.10.2.3 and up.
    for t in 1..=EXTRA_TUNNELS {
        let g = GreTunnel {
            local: "10.10.2.1".parse().map_err(|_| "a")?,
            remote: IpAddr::V4(Ipv4Addr::new(10, 10, 2, 2 + t)),
            key: None,
            ttl: 64,
        };
        let net = V4Net { addr: Ipv4Addr::new(192, 168, 254, 4 * t + 1), len: 30 };
        ifs.push(iface(
            2 + u16::from(t),
            &format!("gre{t}"),
            IfKind::Gre(g),
            NO_IF,
            [2, 0, 0, 0, 0, 0x30 + t],
            net,
            None,
        ));
    }
    let ifs = IfTable::new(ifs);
    let acls: Vec<RuleSet> = acl.cloned().into_iter().collect();
    Ok(tern_control::xdplane::lane_tables(&ifs, &acls, &|_| true))
}

/// A lane program on the scenario's FIB (the full table if `full`; the
/// benchmark's destinations via the GRE tunnel if `gre`), ports declared.
fn setup(
    routes: Option<&str>,
    full: bool,
    // Routes into gre0; a lane in Linux mode.
    (gre, linux_mode): (bool, bool),
    acl_cache_buckets: u32,
    kif0: u32,
    kif1: u32,
    object: &Object,
) -> Result<(LaneProgram, tern_fib::FibWriter, tern_fib::FibReader), String> {
    let (mut w, reader) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
    let add = |w: &mut tern_fib::FibWriter, p: &str, t: RouteTarget| {
        w.add_route(Source::Static, p.parse::<Prefix>().map_err(|e| e.to_string())?, t, RouteAttrs::default())
            .map_err(|e| e.to_string())
    };
    add(&mut w, "10.10.1.0/24", RouteTarget::Connected { ifindex: 0 })?;
    add(&mut w, "10.10.2.0/24", RouteTarget::Connected { ifindex: 1 })?;
    add(&mut w, "192.168.255.0/30", RouteTarget::Connected { ifindex: 2 })?;
    // out0's own address: gre0's local end, where the decap case's frames go.
    add(&mut w, "10.10.2.1/32", RouteTarget::Local { ifindex: 1 })?;
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
    let via = if gre { "192.168.255.2" } else { "10.10.2.2" };
    add(&mut w, "198.18.0.0/15", RouteTarget::Via { gw: via.parse().map_err(|_| "addr")?, ifindex: None })?;
    // The next hop's MAC is in0's own: a run leaves its output as the
    // next run's input, and the rewritten frame must still be for the
    // router (otherwise every run after the first times the
    // not-for-us drop). TTL 255 lasts the 250 runs.
    let next_hop_mac = if gre { [2, 0, 0, 0, 0, 0x21] } else { R0 };
    w.set_neighbor(1, sink, Some(next_hop_mac));
    // IPv6: the same topology (in0 2001:db8:1::/64, out0 2001:db8:2::/64,
    // 2001:db8:ff00::/40 via the sink 2001:db8:2::2).
    add(&mut w, "2001:db8:1::/64", RouteTarget::Connected { ifindex: 0 })?;
    add(&mut w, "2001:db8:2::/64", RouteTarget::Connected { ifindex: 1 })?;
    let sink6: IpAddr = "2001:db8:2::2".parse().map_err(|_| "addr")?;
    add(&mut w, "2001:db8:ff00::/40", RouteTarget::Via { gw: sink6, ifindex: None })?;
    w.set_neighbor(1, sink6, Some(next_hop_mac));
    let fwd_memo = FWD_MEMO.load(std::sync::atomic::Ordering::Relaxed);
    let mut cfg = LaneConfig { acl_cache_buckets, fwd_memo, linux_mode, ..LaneConfig::default() };
    match FWD_BUCKETS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => {}
        n => cfg.fwd_buckets = n,
    }
    let mut lane = match &object.1 {
        Some(obj) => LaneProgram::load_object(&cfg, obj),
        None => LaneProgram::load(&cfg),
    }
    .map_err(|e| format!("{}: {e}", object.0))?;
    lane.attach_fib(&reader.raw(), None).map_err(|e| e.to_string())?;
    lane.add_port(0, 0, kif0).map_err(|e| e.to_string())?;
    lane.add_port(1, 1, kif1).map_err(|e| e.to_string())?;
    // Attached (native mode) to a veth of its own, down, that no frame
    // reaches: the kernel's XDP dispatcher then calls the program
    // directly, as on a real port, and a BPF_PROG_TEST_RUN of several runs
    // no longer adds it to the dispatcher and takes it out again (an RCU
    // grace period each way: 16-24 ms a call, the bench's whole wall time).
    let (dev, n) = own_veth()?;
    lane.attach(&dev, 100 + n as u16, false).map_err(|e| format!("{dev}: {e}"))?;
    Ok((lane, w, reader))
}

/// `tern-bench lane ARGS...` (the options above).
pub fn main(args: &[String]) -> ExitCode {
    let get = |k: &str| args.iter().position(|a| a == k).and_then(|i| args.get(i + 1)).cloned();
    let routes = get("--routes");
    let calls = get("--calls").and_then(|s| s.parse().ok()).unwrap_or(2000);
    let acl_cache = get("--acl-cache").and_then(|s| s.parse().ok()).unwrap_or(tern_xdp::lane::ACL_CACHE_BUCKETS);
    if get("--fwd-memo").as_deref() == Some("0") {
        FWD_MEMO.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    let rounds = get("--rounds").and_then(|s| s.parse().ok()).unwrap_or(5usize).max(1);
    let only = get("--only");
    if let Some(n) = get("--fwd-buckets") {
        match n.parse::<u32>() {
            Ok(n) => FWD_BUCKETS.store(n, std::sync::atomic::Ordering::Relaxed),
            Err(e) => {
                eprintln!("tern-bench lane: --fwd-buckets {n}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(list) = get("--flows") {
        match list.split(',').map(|n| n.parse::<u32>().ok().filter(|&n| (1..=1 << 20).contains(&n))).collect() {
            Some(v) => {
                let _ = MORE_FLOWS.set(v);
            }
            None => {
                eprintln!("tern-bench lane: --flows {list}: need counts of 1 to 1048576, separated by commas");
                return ExitCode::FAILURE;
            }
        }
    }
    if args.iter().any(|a| a == "--kfwd") {
        eprintln!("tern-bench lane: --kfwd PATH is gone: --xdp-fwd times the lab's in-kernel forwarder");
        return ExitCode::FAILURE;
    }
    let xdp_fwd = args.iter().any(|a| a == "--xdp-fwd");
    let mut objects: Vec<Object> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a != "--object" {
            continue;
        }
        let Some(path) = args.get(i + 1) else {
            eprintln!("tern-bench lane: --object needs a path");
            return ExitCode::FAILURE;
        };
        match std::fs::read(path) {
            Ok(obj) => {
                let name = std::path::Path::new(path).file_name().map_or(path.clone(), |n| n.to_string_lossy().into());
                objects.push((name, Some(obj)));
            }
            Err(e) => {
                eprintln!("tern-bench lane: {path}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if objects.is_empty() {
        objects.push(("built-in".into(), None));
    }
    match run(routes.as_deref(), calls, rounds, acl_cache, only.as_deref(), &objects, xdp_fwd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tern-bench lane: {e}");
            ExitCode::FAILURE
        }
    }
}
