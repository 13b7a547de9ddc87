//! Measurements behind docs/PERFORMANCE.md's control-plane table (issue 8), not tests: every one is
//! `#[ignore]` and prints its figures. Run in release mode:
//!
//! ```text
//! cargo test --release -p tern-control --test linux_measure -- --ignored --nocapture --test-threads 1
//! ```
//!
//! * `fpm_ingest_full_table`: the real table (901,899 IPv4 + 160,147 IPv6
//!   prefixes from ../shared/data/full-table-2025.txt.gz), encoded as zebra
//!   encodes it (one FPM frame per route naming a next-hop group), streamed
//!   over TCP into the FPM server and the RIB/FIB: routes/s from the first
//!   byte to the last route in the FIB, and the control thread's CPU time.
//! * `fpm_decode_only`: the same stream through the decoder and route
//!   translation without the FIB, to see where the time goes.
//! * `netlink_dump_full_table`: the IPv4 table in a kernel (a throwaway
//!   namespace) dumped into the kernel mirror: routes/s.
//! * `fpm_ingest_worker_stalls`: a forwarding worker (SCHED_FIFO, pinned to
//!   CPU 1, forwarding 64-byte frames to 1024 destinations of the table
//!   from a memory generator flat out) while the control thread (pinned to
//!   CPU 0) ingests the full table over FPM into the FIB the worker reads:
//!   the worker's loop-gap histogram, its time on CPU and the CPUs' steal
//!   time over the ingest, against the same worker for 2 s afterwards (the
//!   table installed, the control thread asleep).
//!
//! The machine is shared and noisy: each figure is the median of several
//! runs (`TERN_RUNS`, default 3).

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use tern_control::linux::fpm::{FpmConfig, FpmServer, frame};
use tern_control::linux::nl::{NexthopSpec, NlBuilder, NlMessages, RTM_NEWNEXTHOP, RTM_NEWROUTE, RouteSpec};
use tern_control::linux::sync::{IfMap, RouteSync};
use tern_control::neighbor::NeighborTable;
use tern_control::source::{ControlSource, SourceCx};
use tern_fib::{FibConfig, FibWriter, Prefix, RouteAttrs, RouteTarget, Source};
use tern_nodes::state::IfTable;
use tern_rcu::Published;

fn table() -> Option<Vec<Prefix>> {
    let path = std::env::var("TERN_FULL_TABLE").unwrap_or_else(|_| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/full-table-2025.txt.gz").display().to_string()
    });
    match tern_fib::routefile::load(&path) {
        Ok(v) => Some(v.into_iter().map(|(p, _)| p).collect()),
        Err(e) => {
            eprintln!("skipped: {path}: {e}");
            None
        }
    }
}

fn runs() -> usize {
    std::env::var("TERN_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(3)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// CPU time of the calling thread (user + system), from /proc.
fn thread_cpu() -> Duration {
    // After the command's closing parenthesis: state, ppid, pgrp, session,
    // tty_nr, tpgid, flags, minflt, cminflt, majflt, cmajflt, utime, stime
    // (clock ticks of 10 ms). tpgid is -1 without a terminal: keep every
    // field, numeric or not, so the positions hold.
    let s = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let after = s.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis((field(11) + field(12)) * 10)
}

/// The stream zebra would send: four next-hop objects (two per family)
/// and one route frame per prefix, alternating between them.
fn fpm_stream(prefixes: &[Prefix]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefixes.len() * 56);
    let nhs = [(1, "10.0.0.2", 7), (2, "10.0.1.2", 8), (3, "fe80::2", 7), (4, "fe80::3", 8)];
    for (id, gw, oif) in nhs {
        let mut b = NlBuilder::new();
        b.nexthop(
            RTM_NEWNEXTHOP,
            0,
            &NexthopSpec { id, gateway: Some(gw.parse().expect("gw")), oif: Some(oif), ..Default::default() },
        );
        out.extend(frame(&b.buf));
    }
    let mut b = NlBuilder::new();
    for (i, p) in prefixes.iter().enumerate() {
        b.buf.clear();
        let mut r = RouteSpec::unicast(p.addr(), p.len(), vec![]);
        r.nh_id = Some(if p.is_v4() { 1 } else { 3 } + (i as u32 & 1));
        b.route(RTM_NEWROUTE, 0, &r);
        out.extend(frame(&b.buf));
    }
    out
}

/// The FPM server of the ingest measurements: no resync or staleness
/// timers firing during a run, 5 ms of work per poll, batches of 8192.
fn fpm_config() -> FpmConfig {
    FpmConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        table: 254,
        resync_quiet_ns: 60_000_000_000,
        resync_hold_ns: 0,
        stale_ns: 600_000_000_000,
        budget_ns: 5_000_000,
        batch: 8192,
    }
}

fn if_map() -> IfMap {
    let mut m = IfMap::default();
    m.insert(7, 0);
    m.insert(8, 1);
    m
}

fn new_fib() -> FibWriter {
    let (mut fib, _reader) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
    for (p, i) in [("10.0.0.0/24", 0), ("10.0.1.0/24", 1)] {
        fib.add_route(
            Source::Connected,
            p.parse().expect("p"),
            RouteTarget::Connected { ifindex: i },
            RouteAttrs::default(),
        )
        .expect("connected");
    }
    fib
}

#[test]
#[ignore]
fn fpm_ingest_full_table() {
    let Some(prefixes) = table() else { return };
    let stream = std::sync::Arc::new(fpm_stream(&prefixes));
    let n = prefixes.len();
    eprintln!("{n} prefixes, {} MB of FPM frames", stream.len() >> 20);
    let mut rates = Vec::new();
    let mut cpus = Vec::new();
    let mut polls_max = Vec::new();
    for run in 0..runs() {
        let mut server = FpmServer::bind(fpm_config(), if_map()).expect("bind");
        let mut fib = new_fib();
        let mut neigh = NeighborTable::default();
        let ifaces = Published::new(IfTable::default());
        let addr = server.local_addr().expect("addr");
        let s = std::sync::Arc::clone(&stream);
        let writer = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).expect("connect");
            c.write_all(&s).expect("write");
            c
        });
        let mut t0 = None;
        let cpu0 = thread_cpu();
        let mut longest = Duration::ZERO;
        loop {
            let ifs = ifaces.load();
            let mut cx = SourceCx {
                fib: &mut fib,
                neigh: &mut neigh,
                ifs: &ifs,
                ifaces: &ifaces,
                now_ns: tern_engine::clock::now_ns(),
            };
            let p0 = Instant::now();
            let did = server.poll(&mut cx);
            longest = longest.max(p0.elapsed());
            if did && t0.is_none() {
                t0 = Some(p0);
            }
            if server.status().routes.adds >= n as u64 {
                break;
            }
            if !did {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let took = t0.map(|t| t.elapsed()).unwrap_or_default();
        let cpu = thread_cpu().saturating_sub(cpu0);
        let st = fib.stats();
        assert_eq!(st.v4_routes + st.v6_routes, n + 2, "every prefix in the FIB");
        let rate = n as f64 / took.as_secs_f64();
        eprintln!(
            "run {run}: {n} routes in {took:.3?} wall = {:.2} M routes/s; control thread CPU {cpu:.2?} = {:.2} M routes per CPU-second; longest poll (wall, includes preemption) {longest:.2?}",
            rate / 1e6,
            n as f64 / cpu.as_secs_f64().max(0.01) / 1e6
        );
        rates.push(rate);
        cpus.push(cpu.as_secs_f64());
        polls_max.push(longest.as_secs_f64() * 1e3);
        drop(writer.join());
    }
    let cpu = median(cpus);
    eprintln!(
        "FPM ingest, full table ({n} routes): wall median {:.2} M routes/s ({:.2} s); control thread CPU median {cpu:.2} s = {:.2} M routes per CPU-second; longest poll median {:.1} ms",
        median(rates.clone()) / 1e6,
        n as f64 / median(rates),
        n as f64 / cpu.max(0.01) / 1e6,
        median(polls_max)
    );
}

#[test]
#[ignore]
fn fpm_decode_only() {
    let Some(prefixes) = table() else { return };
    let stream = fpm_stream(&prefixes);
    let mut rates = Vec::new();
    for _ in 0..runs() {
        let mut sync = RouteSync::new(Source::Fpm, 254, false);
        let ifs = if_map();
        let mut ops = Vec::with_capacity(8192);
        let t0 = Instant::now();
        let cpu0 = thread_cpu();
        let mut at = 0;
        let mut n = 0u64;
        while let Some(h) = stream.get(at..at + 4) {
            let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            for m in NlMessages::new(&stream[at + 4..at + len]).flatten() {
                if m.ty == RTM_NEWROUTE {
                    sync.route(true, m.payload, &ifs, &mut ops);
                } else {
                    sync.nexthop(true, m.payload, &ifs, &mut ops);
                }
            }
            at += len;
            if ops.len() >= 8192 {
                n += ops.len() as u64;
                ops.clear();
            }
        }
        n += ops.len() as u64;
        let took = t0.elapsed();
        let cpu = thread_cpu().saturating_sub(cpu0).max(Duration::from_millis(10));
        rates.push(n as f64 / cpu.as_secs_f64());
        eprintln!("decode+translate: {n} routes in {took:.3?} wall, {cpu:.2?} CPU");
    }
    eprintln!("FPM decode + translate only: median {:.2} M routes per CPU-second", median(rates) / 1e6);
}

fn sh(args: &[&str]) -> bool {
    std::process::Command::new(args[0]).args(&args[1..]).status().is_ok_and(|s| s.success())
}

#[test]
#[ignore]
fn netlink_dump_full_table() {
    use tern_control::linux::kernel::{Driven, KernelConfig, KernelMirror};
    let Some(prefixes) = table() else { return };
    let v4: Vec<Prefix> = prefixes.into_iter().filter(Prefix::is_v4).collect();
    let ns = format!("tlinux-{}-m", std::process::id());
    let _ = sh(&["ip", "netns", "del", &ns]);
    assert!(sh(&["ip", "netns", "add", &ns]), "needs root");
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = sh(&["ip", "netns", "del", &self.0]);
        }
    }
    let _del = Del(ns.clone());
    assert!(sh(&["ip", "-n", &ns, "link", "add", "kd0", "type", "veth", "peer", "name", "kp0"]));
    assert!(sh(&["ip", "-n", &ns, "link", "set", "kd0", "up"]));
    assert!(sh(&["ip", "-n", &ns, "link", "set", "kp0", "up"]));
    assert!(sh(&["ip", "-n", &ns, "addr", "add", "10.0.0.1/24", "dev", "kd0"]));
    let mut batch = String::with_capacity(v4.len() * 40);
    for p in &v4 {
        batch.push_str(&format!("route add {p} via 10.0.0.2 dev kd0 proto bgp\n"));
    }
    let file = std::env::temp_dir().join(format!("{ns}.batch"));
    std::fs::write(&file, batch).expect("batch");
    let t0 = Instant::now();
    assert!(sh(&["ip", "-n", &ns, "-batch", &file.display().to_string()]), "ip -batch");
    let _ = std::fs::remove_file(&file);
    let kernel_load = t0.elapsed();
    eprintln!("kernel: {} routes added by ip -batch in {kernel_load:.2?}", v4.len());

    tern_io::netdev::enter_netns(&ns).expect("netns");
    let mut rates = Vec::new();
    let mut cpus = Vec::new();
    for run in 0..runs() {
        let cfg = KernelConfig {
            linux_mode: false,
            table: 254,
            skip_protocols: vec![],
            rcvbuf: 64 << 20,
            budget_ns: 5_000_000,
            batch: 8192,
        };
        let mut m = KernelMirror::open(cfg, vec![Driven { tern: 0, device: "kd0".into(), v4: vec![], v6: vec![] }])
            .expect("mirror");
        let (mut fib, _r) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
        let mut neigh = NeighborTable::default();
        let ifaces = Published::new(IfTable::default());
        let t0 = Instant::now();
        let cpu0 = thread_cpu();
        while !m.synced() {
            let ifs = ifaces.load();
            let mut cx = SourceCx {
                fib: &mut fib,
                neigh: &mut neigh,
                ifs: &ifs,
                ifaces: &ifaces,
                now_ns: tern_engine::clock::now_ns(),
            };
            if !m.poll(&mut cx) {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        let took = t0.elapsed();
        let cpu = thread_cpu().saturating_sub(cpu0);
        let n = m.status().routes.adds;
        assert!(n >= v4.len() as u64, "{n} of {}", v4.len());
        let rate = n as f64 / took.as_secs_f64();
        eprintln!(
            "run {run}: kernel dump of {n} routes into the FIB in {took:.3?} wall = {:.2} M routes/s; control thread CPU {cpu:.2?} = {:.2} M routes per CPU-second",
            rate / 1e6,
            n as f64 / cpu.as_secs_f64().max(0.01) / 1e6
        );
        rates.push(rate);
        cpus.push(cpu.as_secs_f64());
    }
    let cpu = median(cpus);
    eprintln!(
        "netlink (kernel mirror) dump, {} IPv4 routes: wall median {:.2} M routes/s; CPU median {cpu:.2} s = {:.2} M routes per CPU-second",
        v4.len(),
        median(rates) / 1e6,
        v4.len() as f64 / cpu.max(0.01) / 1e6
    );
}

/// Steal time of each CPU so far, in clock ticks (10 ms), from /proc/stat.
fn steal_ticks() -> Vec<u64> {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    s.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| l.split_whitespace().nth(8).and_then(|v| v.parse().ok()).unwrap_or(0))
        .collect()
}

/// The kernel thread id of the calling thread.
fn own_tid() -> String {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// The kernel thread id of this process's thread named `name`.
fn tid_of(name: &str) -> Option<String> {
    std::fs::read_dir("/proc/self/task").ok()?.flatten().find_map(|e| {
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        (comm.trim() == name).then(|| e.file_name().to_string_lossy().into_owned())
    })
}

fn run_cmd(args: &[&str]) -> bool {
    std::process::Command::new(args[0]).args(&args[1..]).status().is_ok_and(|s| s.success())
}

/// One phase's figures.
struct Phase {
    secs: f64,
    gaps: [u64; tern_engine::GAP_BUCKETS],
    max_gap_us: f64,
    steal_ms: Vec<u64>,
    rx: u64,
    /// The worker thread's time on its CPU (schedstat).
    on_cpu_ms: u64,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = &self.gaps;
        write!(
            f,
            "{:.2} s, {:.2} Mpps received, worker on CPU {} ms; gaps <10us {} <100us {} <1ms {} <10ms {} >=10ms {}; longest {:.0} us; steal ms per CPU {:?}",
            self.secs,
            self.rx as f64 / self.secs / 1e6,
            self.on_cpu_ms,
            g[0],
            g[1],
            g[2],
            g[3],
            g[4],
            self.max_gap_us,
            self.steal_ms
        )
    }
}

#[test]
#[ignore]
fn fpm_ingest_worker_stalls() {
    use common::pkt::{eth, ipv4, udp4};
    use crossbeam_queue::ArrayQueue;
    use std::net::Ipv4Addr;
    use std::sync::Arc;
    use tern_engine::{IdlePolicy, PortBinding, TraceShared, Worker, WorkerConfig};
    use tern_io::MemPort;
    use tern_nodes::state::{IfKind, Iface, Shared, V4Net, link_local_from_mac};
    use tern_packet::{PacketPool, PoolConfig};

    let Some(prefixes) = table() else { return };
    let stream = Arc::new(fpm_stream(&prefixes));
    let n = prefixes.len();
    if std::thread::available_parallelism().map_or(0, |p| p.get()) < 2 {
        eprintln!("skipped: needs two CPUs");
        return;
    }
    // This thread (the control thread) and what it spawns on CPU 0.
    if !run_cmd(&["taskset", "-p", "-c", "0", &own_tid()]) {
        eprintln!("skipped: taskset failed");
        return;
    }
    let domain = tern_rcu::Domain::new();
    let (mut fib, reader) = tern_fib::new(FibConfig::default(), domain.clone());
    let mac = |i: u8| [2, 0, 0, 0, i, 1];
    let iface = |i: u16, addr: Ipv4Addr| Iface {
        index: i,
        name: format!("p{i}"),
        kind: IfKind::Port,
        port: i,
        mac: mac(i as u8),
        mtu: 1500,
        up: true,
        v4: vec![V4Net { addr, len: 24 }],
        v6: vec![],
        v6_ll: link_local_from_mac(mac(i as u8)),
        acl_in: None,
        acl_out: None,
    };
    let shared = Shared::new(
        IfTable::new(vec![iface(0, Ipv4Addr::new(10, 0, 0, 1)), iface(1, Ipv4Addr::new(10, 0, 1, 1))]),
        reader,
    );
    for (p, i) in [("10.0.0.0/24", 0), ("10.0.1.0/24", 1)] {
        fib.add_route(
            Source::Connected,
            p.parse().expect("p"),
            RouteTarget::Connected { ifindex: i },
            RouteAttrs::default(),
        )
        .expect("connected");
    }
    for (i, gw) in [(0, "10.0.0.2"), (1, "10.0.1.2"), (0, "fe80::2"), (1, "fe80::3")] {
        fib.set_neighbor(i, gw.parse().expect("gw"), Some([2, 0, 0, 0, 9, i as u8]));
    }
    // 64-byte frames to 1024 destinations spread over the table's IPv4
    // prefixes (no route until the ingest brings it: dropped as no-route).
    let v4: Vec<&Prefix> = prefixes.iter().filter(|p| p.is_v4()).collect();
    let templates: Vec<Vec<u8>> = (0..1024)
        .map(|k| {
            let p = v4[k * v4.len() / 1024];
            let std::net::IpAddr::V4(a) = p.addr() else { unreachable!("v4") };
            let dst = Ipv4Addr::from(u32::from(a) | 1);
            let src = Ipv4Addr::new(10, 0, 0, 2);
            eth(mac(0), [2, 0, 0, 0, 9, 0], 0x0800, &ipv4(src, dst, 17, 64, &udp4(src, dst, 1024, 9, &[0; 18])))
        })
        .collect();

    // A worker over `shared` until `stop`, then its figures.
    let run_worker = |what: &str, body: &mut dyn FnMut() -> f64| -> Phase {
        let built = tern_nodes::build_graph(&shared, Arc::new(ArrayQueue::new(16))).expect("graph");
        let pool = PacketPool::new(PoolConfig { frames: 8192, ..PoolConfig::default() }).expect("pool");
        let generator = MemPort::generator("gen", &templates, None).expect("generator");
        let mut sink = MemPort::new("sink");
        sink.count_tx_only();
        let w = Worker::new(
            WorkerConfig { id: 0, cpu: Some(1), idle: IdlePolicy::Spin, input_node: built.input },
            built.graph,
            pool,
            vec![PortBinding::new(Box::new(generator), 0), PortBinding::new(Box::new(sink), 1)],
            TraceShared::new(),
            Some(domain.register()),
        )
        .expect("worker");
        let h = w.spawn().expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(5);
        let tid = loop {
            if let Some(t) = tid_of("tern-w0") {
                break t;
            }
            assert!(Instant::now() < deadline, "no worker thread");
            std::thread::sleep(Duration::from_millis(1));
        };
        let fifo = run_cmd(&["chrt", "-f", "-p", "50", &tid]);
        // Let it settle (pinning, caches), then measure from here.
        std::thread::sleep(Duration::from_millis(200));
        let (g0, _) = h.shared.gaps.snapshot();
        let rx0 = h.shared.stats.ports[0].rx_packets.get();
        let steal0 = steal_ticks();
        let oncpu = || -> u64 {
            std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
                .unwrap_or(0)
        };
        let loops0 = h.shared.stats.looping.loops.get();
        let cpu0 = oncpu();
        let secs = body();
        let loops = h.shared.stats.looping.loops.get() - loops0;
        let on_cpu_ms = (oncpu() - cpu0) / 1_000_000;
        if loops == 0 {
            eprintln!("  the worker made no loop in this phase");
        }
        let (g1, max) = h.shared.gaps.snapshot();
        let rx = h.shared.stats.ports[0].rx_packets.get() - rx0;
        let steal_ms = steal_ticks().iter().zip(&steal0).map(|(a, b)| (a - b) * 10).collect();
        h.stop();
        let phase = Phase {
            secs,
            gaps: std::array::from_fn(|i| g1[i] - g0[i]),
            max_gap_us: max as f64 / 1e3,
            steal_ms,
            rx,
            on_cpu_ms,
        };
        eprintln!("{what} (worker SCHED_FIFO: {fifo}): {phase}");
        phase
    };

    for run in 0..runs() {
        let mut server = FpmServer::bind(fpm_config(), if_map()).expect("bind");
        let mut neigh = NeighborTable::default();
        let ifaces = shared.ifaces.clone();
        let s = Arc::clone(&stream);
        let fib_ref = &mut fib;
        run_worker(&format!("run {run}: full-table FPM ingest ({n} routes)"), &mut || {
            let addr = server.local_addr().expect("addr");
            let s = Arc::clone(&s);
            let t0 = Instant::now();
            let writer = std::thread::spawn(move || {
                let mut c = TcpStream::connect(addr).expect("connect");
                c.write_all(&s).expect("write");
                c
            });
            loop {
                let ifs = ifaces.load();
                let mut cx = SourceCx {
                    fib: &mut *fib_ref,
                    neigh: &mut neigh,
                    ifs: &ifs,
                    ifaces: &ifaces,
                    now_ns: tern_engine::clock::now_ns(),
                };
                let did = server.poll(&mut cx);
                if server.status().routes.adds >= n as u64 {
                    break;
                }
                if !did {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            let secs = t0.elapsed().as_secs_f64();
            drop(writer.join());
            secs
        });
        // The same worker, the table installed, the control thread idle.
        run_worker(&format!("run {run}: table installed, no ingest"), &mut || {
            std::thread::sleep(Duration::from_secs(2));
            2.0
        });
        // Withdraw everything for the next run (the FIB starts empty).
        fib.begin_resync(Source::Fpm);
        fib.end_resync(Source::Fpm);
    }
}
