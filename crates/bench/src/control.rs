//! `tern-bench control`: the control plane's figures behind
//! docs/PERFORMANCE.md's control-plane table (issue 8). Run a release build:
//!
//! ```text
//! tern-bench control [--fpm-ingest] [--decode] [--netlink-dump] [--worker-stalls] [--runs 3] [--json]
//! ```
//! (no selection: all four).
//!
//! * `--fpm-ingest`: the real table (901,899 IPv4 + 160,147 IPv6 prefixes
//!   from ../shared/data/full-table-2025.txt.gz), encoded as zebra encodes
//!   it (one FPM frame per route naming a next-hop group), streamed over
//!   TCP into the FPM server and the RIB/FIB: routes/s from the first byte
//!   to the last route in the FIB, and the control thread's CPU time.
//! * `--decode`: the same stream through the decoder and route translation
//!   without the FIB, to see where the time goes.
//! * `--netlink-dump`: the IPv4 table in a kernel (a throwaway namespace)
//!   dumped into the kernel mirror: routes/s (needs root).
//! * `--worker-stalls`: a forwarding worker (SCHED_FIFO, pinned to CPU 1,
//!   forwarding 64-byte frames to 1024 destinations of the table from a
//!   memory generator flat out) while the control thread (pinned to CPU 0)
//!   ingests the full table over FPM into the FIB the worker reads: the
//!   worker's loop-gap histogram, its time on CPU and the CPUs' steal time
//!   over the ingest, against the same worker for 2 s afterwards (the
//!   table installed, the control thread asleep).
//!
//! The machine is shared and noisy: each figure is the median of `--runs`
//! runs. Each run's line goes to stderr as it ends; the summary to stdout.

use serde::Serialize;
use std::fmt;
use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tern_control::linux::fpm::{FpmConfig, FpmServer, frame};
use tern_control::linux::nl::{NexthopSpec, NlBuilder, NlMessages, RTM_NEWNEXTHOP, RTM_NEWROUTE, RouteSpec};
use tern_control::linux::sync::{IfMap, RouteSync};
use tern_control::neighbor::NeighborTable;
use tern_control::source::{ControlSource, SourceCx};
use tern_fib::{FibConfig, FibWriter, Prefix, RouteAttrs, RouteTarget, Source};
use tern_nodes::state::IfTable;
use tern_rcu::Published;

type Res<T> = Result<T, String>;

/// What to measure, and how often.
#[derive(Clone, Debug)]
pub struct ControlOpts {
    /// Route table, one prefix per line (.gz accepted).
    pub table: PathBuf,
    /// Runs per figure (the median is reported).
    pub runs: usize,
    pub fpm_ingest: bool,
    pub decode: bool,
    pub netlink_dump: bool,
    pub worker_stalls: bool,
}

/// FPM ingest of the full table into the FIB (medians).
#[derive(Clone, Debug, Serialize)]
pub struct Ingest {
    pub routes: usize,
    pub wall_routes_per_s: f64,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub routes_per_cpu_s: f64,
    /// Longest single poll (wall clock, preemption included), ms.
    pub longest_poll_ms: f64,
}

/// Decode and translation only (median).
#[derive(Clone, Debug, Serialize)]
pub struct Decode {
    pub routes: u64,
    pub routes_per_cpu_s: f64,
}

/// A kernel table dumped into the kernel mirror (medians).
#[derive(Clone, Debug, Serialize)]
pub struct NetlinkDump {
    pub routes: usize,
    /// `ip -batch` loading the table into the namespace's kernel.
    pub kernel_load_s: f64,
    pub wall_routes_per_s: f64,
    pub cpu_s: f64,
    pub routes_per_cpu_s: f64,
}

/// One phase of the worker-stall measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    pub what: String,
    /// The worker ran SCHED_FIFO (chrt succeeded).
    pub fifo: bool,
    pub secs: f64,
    /// Loop gaps: <10 us, <100 us, <1 ms, <10 ms, >=10 ms.
    pub gaps: [u64; tern_engine::GAP_BUCKETS],
    pub max_gap_us: f64,
    /// Steal time per CPU over the phase, ms.
    pub steal_ms: Vec<u64>,
    pub rx: u64,
    /// The worker thread's time on its CPU (schedstat), ms.
    pub on_cpu_ms: u64,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = &self.gaps;
        write!(
            f,
            "{} (worker SCHED_FIFO: {}): {:.2} s, {:.2} Mpps received, worker on CPU {} ms; gaps <10us {} <100us {} <1ms {} <10ms {} >=10ms {}; longest {:.0} us; steal ms per CPU {:?}",
            self.what,
            self.fifo,
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

/// Everything measured; what was not asked for is `None`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ControlReport {
    pub command: String,
    pub table: String,
    pub runs: usize,
    pub fpm_ingest: Option<Ingest>,
    pub decode: Option<Decode>,
    pub netlink_dump: Option<NetlinkDump>,
    /// Per run: the ingest phase, then the idle phase.
    pub worker_stalls: Option<Vec<Phase>>,
}

impl fmt::Display for ControlReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(i) = &self.fpm_ingest {
            writeln!(
                f,
                "FPM ingest, full table ({} routes): wall median {:.2} M routes/s ({:.2} s); control thread CPU median {:.2} s = {:.2} M routes per CPU-second; longest poll median {:.1} ms",
                i.routes,
                i.wall_routes_per_s / 1e6,
                i.wall_s,
                i.cpu_s,
                i.routes_per_cpu_s / 1e6,
                i.longest_poll_ms
            )?;
        }
        if let Some(d) = &self.decode {
            writeln!(f, "FPM decode + translate only: median {:.2} M routes per CPU-second", d.routes_per_cpu_s / 1e6)?;
        }
        if let Some(n) = &self.netlink_dump {
            writeln!(
                f,
                "netlink (kernel mirror) dump, {} IPv4 routes: wall median {:.2} M routes/s; CPU median {:.2} s = {:.2} M routes per CPU-second (ip -batch load {:.2} s)",
                n.routes,
                n.wall_routes_per_s / 1e6,
                n.cpu_s,
                n.routes_per_cpu_s / 1e6,
                n.kernel_load_s
            )?;
        }
        for p in self.worker_stalls.iter().flatten() {
            writeln!(f, "{p}")?;
        }
        Ok(())
    }
}

/// Runs what `opts` asks for (everything when nothing is selected).
pub fn run(opts: &ControlOpts) -> Res<ControlReport> {
    if opts.runs == 0 {
        return Err("--runs: need at least 1".into());
    }
    let all = !(opts.fpm_ingest || opts.decode || opts.netlink_dump || opts.worker_stalls);
    let prefixes: Vec<Prefix> = tern_fib::routefile::load(&opts.table)
        .map_err(|e| format!("{}: {e}", opts.table.display()))?
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    if prefixes.is_empty() {
        return Err(format!("{}: no routes", opts.table.display()));
    }
    let mut r = ControlReport { table: opts.table.display().to_string(), runs: opts.runs, ..ControlReport::default() };
    if all || opts.fpm_ingest {
        r.fpm_ingest = Some(fpm_ingest(&prefixes, opts.runs)?);
    }
    if all || opts.decode {
        r.decode = Some(fpm_decode(&prefixes, opts.runs)?);
    }
    if all || opts.netlink_dump {
        r.netlink_dump = Some(netlink_dump(&prefixes, opts.runs)?);
    }
    if all || opts.worker_stalls {
        r.worker_stalls = Some(worker_stalls(&prefixes, opts.runs)?);
    }
    Ok(r)
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
pub fn fpm_stream(prefixes: &[Prefix]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefixes.len() * 56);
    let nhs: [(u32, std::net::IpAddr, u32); 4] = [
        (1, [10, 0, 0, 2].into(), 7),
        (2, [10, 0, 1, 2].into(), 8),
        (3, std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2).into(), 7),
        (4, std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 3).into(), 8),
    ];
    for (id, gw, oif) in nhs {
        let mut b = NlBuilder::new();
        b.nexthop(RTM_NEWNEXTHOP, 0, &NexthopSpec { id, gateway: Some(gw), oif: Some(oif), ..Default::default() });
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
        listen: ([127, 0, 0, 1], 0).into(),
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

/// The two connected /24s the next hops of [`fpm_stream`] sit on.
fn add_connected(fib: &mut FibWriter) -> Res<()> {
    for (p, i) in [("10.0.0.0/24", 0), ("10.0.1.0/24", 1)] {
        let p = p.parse().map_err(|e| format!("{p}: {e:?}"))?;
        fib.add_route(Source::Connected, p, RouteTarget::Connected { ifindex: i }, RouteAttrs::default())
            .map_err(|e| format!("connected route: {e}"))?;
    }
    Ok(())
}

/// Writes `stream` into a new connection to `addr` from a thread of its own.
fn feed(addr: std::net::SocketAddr, stream: std::sync::Arc<Vec<u8>>) -> std::thread::JoinHandle<Res<()>> {
    std::thread::spawn(move || {
        let mut c = TcpStream::connect(addr).map_err(|e| format!("connect to the FPM server: {e}"))?;
        c.write_all(&stream).map_err(|e| format!("write the FPM stream: {e}"))
    })
}

fn fpm_ingest(prefixes: &[Prefix], runs: usize) -> Res<Ingest> {
    let stream = std::sync::Arc::new(fpm_stream(prefixes));
    let n = prefixes.len();
    eprintln!("{n} prefixes, {} MB of FPM frames", stream.len() >> 20);
    let (mut rates, mut cpus, mut polls_max) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let mut server = FpmServer::bind(fpm_config(), if_map()).map_err(|e| format!("FPM bind: {e}"))?;
        let (mut fib, _reader) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
        add_connected(&mut fib)?;
        let mut neigh = NeighborTable::default();
        let ifaces = Published::new(IfTable::default());
        let addr = server.local_addr().map_err(|e| format!("FPM address: {e}"))?;
        let writer = feed(addr, std::sync::Arc::clone(&stream));
        let mut t0 = None;
        let cpu0 = thread_cpu();
        let mut longest = Duration::ZERO;
        while server.status().routes.adds < n as u64 {
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
            if !did {
                std::thread::sleep(Duration::from_micros(200));
            }
            if t0.is_some_and(|t| t.elapsed() > Duration::from_secs(600)) {
                return Err(format!("FPM ingest: {} of {n} routes after 10 minutes", server.status().routes.adds));
            }
        }
        let took = t0.map(|t| t.elapsed()).unwrap_or_default();
        let cpu = thread_cpu().saturating_sub(cpu0);
        let st = fib.stats();
        if st.v4_routes + st.v6_routes != n + 2 {
            return Err(format!("FPM ingest: {} routes in the FIB, not {}", st.v4_routes + st.v6_routes, n + 2));
        }
        let rate = n as f64 / took.as_secs_f64().max(1e-9);
        eprintln!(
            "run {run}: {n} routes in {took:.3?} wall = {:.2} M routes/s; control thread CPU {cpu:.2?} = {:.2} M routes per CPU-second; longest poll (wall, includes preemption) {longest:.2?}",
            rate / 1e6,
            n as f64 / cpu.as_secs_f64().max(0.01) / 1e6
        );
        rates.push(rate);
        cpus.push(cpu.as_secs_f64());
        polls_max.push(longest.as_secs_f64() * 1e3);
        writer.join().map_err(|_| "FPM writer thread panicked".to_string())??;
    }
    let cpu = median(cpus);
    let rate = median(rates);
    Ok(Ingest {
        routes: n,
        wall_routes_per_s: rate,
        wall_s: n as f64 / rate,
        cpu_s: cpu,
        routes_per_cpu_s: n as f64 / cpu.max(0.01),
        longest_poll_ms: median(polls_max),
    })
}

fn fpm_decode(prefixes: &[Prefix], runs: usize) -> Res<Decode> {
    let stream = fpm_stream(prefixes);
    let mut rates = Vec::new();
    let mut routes = 0;
    for _ in 0..runs {
        let mut sync = RouteSync::new(Source::Fpm, 254, false);
        let ifs = if_map();
        let mut ops = Vec::with_capacity(8192);
        let t0 = Instant::now();
        let cpu0 = thread_cpu();
        let mut at = 0;
        let mut n = 0u64;
        while let Some(h) = stream.get(at..at + 4) {
            let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let body = stream.get(at + 4..at + len).ok_or_else(|| format!("FPM frame at {at}: bad length {len}"))?;
            for m in NlMessages::new(body).flatten() {
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
        routes = n;
        eprintln!("decode+translate: {n} routes in {took:.3?} wall, {cpu:.2?} CPU");
    }
    Ok(Decode { routes, routes_per_cpu_s: median(rates) })
}

/// Runs a command, its output discarded: did it succeed?
fn sh(args: &[&str]) -> bool {
    use std::process::Stdio;
    std::process::Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn netlink_dump(prefixes: &[Prefix], runs: usize) -> Res<NetlinkDump> {
    use tern_control::linux::kernel::{Driven, KernelConfig, KernelMirror};
    let v4: Vec<Prefix> = prefixes.iter().copied().filter(Prefix::is_v4).collect();
    let ns = format!("tbench-ctl-{}", std::process::id());
    let _ = sh(&["ip", "netns", "del", &ns]);
    if !sh(&["ip", "netns", "add", &ns]) {
        return Err("netlink dump: ip netns add failed (needs root)".into());
    }
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = sh(&["ip", "netns", "del", &self.0]);
        }
    }
    let _del = Del(ns.clone());
    for args in [
        &["ip", "-n", &ns, "link", "add", "kd0", "type", "veth", "peer", "name", "kp0"][..],
        &["ip", "-n", &ns, "link", "set", "kd0", "up"],
        &["ip", "-n", &ns, "link", "set", "kp0", "up"],
        &["ip", "-n", &ns, "addr", "add", "10.0.0.1/24", "dev", "kd0"],
    ] {
        if !sh(args) {
            return Err(format!("netlink dump: {} failed", args.join(" ")));
        }
    }
    let mut batch = String::with_capacity(v4.len() * 40);
    for p in &v4 {
        batch.push_str(&format!("route add {p} via 10.0.0.2 dev kd0 proto bgp\n"));
    }
    let file = std::env::temp_dir().join(format!("{ns}.batch"));
    std::fs::write(&file, batch).map_err(|e| format!("{}: {e}", file.display()))?;
    let t0 = Instant::now();
    let loaded = sh(&["ip", "-n", &ns, "-batch", &file.display().to_string()]);
    let _ = std::fs::remove_file(&file);
    if !loaded {
        return Err("netlink dump: ip -batch failed".into());
    }
    let kernel_load = t0.elapsed();
    eprintln!("kernel: {} routes added by ip -batch in {kernel_load:.2?}", v4.len());

    // A thread of its own enters the namespace: the caller stays where it was.
    let (rates, cpus) = std::thread::scope(|s| {
        s.spawn(|| -> Res<(Vec<f64>, Vec<f64>)> {
            tern_io::netdev::enter_netns(&ns).map_err(|e| format!("enter {ns}: {e}"))?;
            let (mut rates, mut cpus) = (Vec::new(), Vec::new());
            for run in 0..runs {
                let cfg = KernelConfig {
                    linux_mode: false,
                    table: 254,
                    skip_protocols: vec![],
                    rcvbuf: 64 << 20,
                    budget_ns: 5_000_000,
                    batch: 8192,
                };
                let mut m =
                    KernelMirror::open(cfg, vec![Driven { tern: 0, device: "kd0".into(), v4: vec![], v6: vec![] }])
                        .map_err(|e| format!("kernel mirror: {e}"))?;
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
                    if t0.elapsed() > Duration::from_secs(600) {
                        return Err("netlink dump: not synced after 10 minutes".into());
                    }
                }
                let took = t0.elapsed();
                let cpu = thread_cpu().saturating_sub(cpu0);
                let n = m.status().routes.adds;
                if n < v4.len() as u64 {
                    return Err(format!("netlink dump: {n} of {} routes", v4.len()));
                }
                let rate = n as f64 / took.as_secs_f64().max(1e-9);
                eprintln!(
                    "run {run}: kernel dump of {n} routes into the FIB in {took:.3?} wall = {:.2} M routes/s; control thread CPU {cpu:.2?} = {:.2} M routes per CPU-second",
                    rate / 1e6,
                    n as f64 / cpu.as_secs_f64().max(0.01) / 1e6
                );
                rates.push(rate);
                cpus.push(cpu.as_secs_f64());
            }
            Ok((rates, cpus))
        })
        .join()
        .map_err(|_| "netlink dump thread panicked".to_string())?
    })?;
    let cpu = median(cpus);
    Ok(NetlinkDump {
        routes: v4.len(),
        kernel_load_s: kernel_load.as_secs_f64(),
        wall_routes_per_s: median(rates),
        cpu_s: cpu,
        routes_per_cpu_s: v4.len() as f64 / cpu.max(0.01),
    })
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

fn worker_stalls(prefixes: &[Prefix], runs: usize) -> Res<Vec<Phase>> {
    use crossbeam_queue::ArrayQueue;
    use std::net::Ipv4Addr;
    use std::sync::Arc;
    use tern_engine::{IdlePolicy, PortBinding, TraceShared, Worker, WorkerConfig};
    use tern_io::MemPort;
    use tern_nodes::state::{IfKind, Iface, Shared, V4Net, link_local_from_mac};
    use tern_packet::{PacketPool, PoolConfig};
    use tern_testkit::packet::{eth_padded, ipv4_df, udp4};

    let stream = Arc::new(fpm_stream(prefixes));
    let n = prefixes.len();
    if std::thread::available_parallelism().map_or(0, |p| p.get()) < 2 {
        return Err("worker stalls: needs two CPUs".into());
    }
    // This thread (the control thread) and what it spawns on CPU 0; the
    // thread of its own keeps the caller's affinity as it was.
    std::thread::scope(|s| {
        s.spawn(|| -> Res<Vec<Phase>> {
            if !sh(&["taskset", "-p", "-c", "0", &own_tid()]) {
                return Err("worker stalls: taskset failed".into());
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
                vmacs: Vec::new(),
            };
            let shared = Shared::new(
                IfTable::new(vec![iface(0, Ipv4Addr::new(10, 0, 0, 1)), iface(1, Ipv4Addr::new(10, 0, 1, 1))]),
                reader,
            );
            add_connected(&mut fib)?;
            for (i, gw) in [(0, "10.0.0.2"), (1, "10.0.1.2"), (0, "fe80::2"), (1, "fe80::3")] {
                fib.set_neighbor(i, gw.parse().map_err(|e| format!("{gw}: {e}"))?, Some([2, 0, 0, 0, 9, i as u8]));
            }
            // 64-byte frames to 1024 destinations spread over the table's
            // IPv4 prefixes (no route until the ingest brings it: dropped
            // as no-route).
            let v4: Vec<&Prefix> = prefixes.iter().filter(|p| p.is_v4()).collect();
            if v4.is_empty() {
                return Err("worker stalls: the table has no IPv4 prefix".into());
            }
            let templates: Vec<Vec<u8>> = (0..1024)
                .filter_map(|k| {
                    let std::net::IpAddr::V4(a) = v4[k * v4.len() / 1024].addr() else { return None };
                    let dst = Ipv4Addr::from(u32::from(a) | 1);
                    let src = Ipv4Addr::new(10, 0, 0, 2);
                    let l4 = udp4(src, dst, 1024, 9, &[0; 18]);
                    Some(eth_padded(mac(0), [2, 0, 0, 0, 9, 0], 0x0800, &ipv4_df(src, dst, 17, 64, &l4)))
                })
                .collect();

            // A worker over `shared` while `body` runs, then its figures.
            let run_worker = |what: String, body: &mut dyn FnMut() -> Res<f64>| -> Res<Phase> {
                let built = tern_nodes::build_graph(&shared, Arc::new(ArrayQueue::new(16)))
                    .map_err(|e| format!("graph: {e}"))?;
                let pool = PacketPool::new(PoolConfig { frames: 8192, ..PoolConfig::default() })
                    .map_err(|e| format!("pool: {e}"))?;
                let generator = MemPort::generator("gen", &templates, None).ok_or("generator: no frames")?;
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
                .map_err(|e| format!("worker: {e}"))?;
                let h = w.spawn().map_err(|e| format!("worker: {e}"))?;
                let deadline = Instant::now() + Duration::from_secs(5);
                let tid = loop {
                    if let Some(t) = tid_of("tern-w0") {
                        break t;
                    }
                    if Instant::now() > deadline {
                        h.stop();
                        return Err("worker stalls: no worker thread".into());
                    }
                    std::thread::sleep(Duration::from_millis(1));
                };
                let fifo = sh(&["chrt", "-f", "-p", "50", &tid]);
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
                let on_cpu_ms = oncpu().saturating_sub(cpu0) / 1_000_000;
                if loops == 0 {
                    eprintln!("  the worker made no loop in this phase");
                }
                let (g1, max) = h.shared.gaps.snapshot();
                let rx = h.shared.stats.ports[0].rx_packets.get() - rx0;
                let steal_ms = steal_ticks().iter().zip(&steal0).map(|(a, b)| a.saturating_sub(*b) * 10).collect();
                h.stop();
                let phase = Phase {
                    what,
                    fifo,
                    secs: secs?,
                    gaps: std::array::from_fn(|i| g1[i] - g0[i]),
                    max_gap_us: max as f64 / 1e3,
                    steal_ms,
                    rx,
                    on_cpu_ms,
                };
                eprintln!("{phase}");
                Ok(phase)
            };

            let mut phases = Vec::new();
            for run in 0..runs {
                let mut server = FpmServer::bind(fpm_config(), if_map()).map_err(|e| format!("FPM bind: {e}"))?;
                let mut neigh = NeighborTable::default();
                let ifaces = shared.ifaces.clone();
                let fib_ref = &mut fib;
                phases.push(run_worker(format!("run {run}: full-table FPM ingest ({n} routes)"), &mut || {
                    let addr = server.local_addr().map_err(|e| format!("FPM address: {e}"))?;
                    let t0 = Instant::now();
                    let writer = feed(addr, Arc::clone(&stream));
                    while server.status().routes.adds < n as u64 {
                        let ifs = ifaces.load();
                        let mut cx = SourceCx {
                            fib: &mut *fib_ref,
                            neigh: &mut neigh,
                            ifs: &ifs,
                            ifaces: &ifaces,
                            now_ns: tern_engine::clock::now_ns(),
                        };
                        if !server.poll(&mut cx) {
                            std::thread::sleep(Duration::from_micros(200));
                        }
                        if t0.elapsed() > Duration::from_secs(600) {
                            return Err("worker stalls: ingest not done after 10 minutes".into());
                        }
                    }
                    let secs = t0.elapsed().as_secs_f64();
                    writer.join().map_err(|_| "FPM writer thread panicked".to_string())??;
                    Ok(secs)
                })?);
                // The same worker, the table installed, the control thread idle.
                phases.push(run_worker(format!("run {run}: table installed, no ingest"), &mut || {
                    std::thread::sleep(Duration::from_secs(2));
                    Ok(2.0)
                })?);
                // Withdraw everything for the next run (the FIB starts empty).
                fib.begin_resync(Source::Fpm);
                fib.end_resync(Source::Fpm);
            }
            Ok(phases)
        })
        .join()
        .map_err(|_| "worker stalls thread panicked".to_string())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stream decodes back into what it encodes: every prefix once,
    /// behind its four next-hop objects.
    #[test]
    fn fpm_stream_carries_every_prefix() {
        let prefixes: Vec<Prefix> =
            ["192.0.2.0/24", "198.51.100.0/25", "2001:db8::/32"].iter().map(|p| p.parse().expect("prefix")).collect();
        let stream = fpm_stream(&prefixes);
        let d = fpm_decode(&prefixes, 1).expect("decode");
        assert_eq!(d.routes as usize, prefixes.len(), "{} bytes of frames", stream.len());
    }

    #[test]
    fn a_missing_table_is_an_error_not_a_panic() {
        let opts = ControlOpts {
            table: "/nonexistent/table.txt".into(),
            runs: 1,
            fpm_ingest: false,
            decode: true,
            netlink_dump: false,
            worker_stalls: false,
        };
        let e = run(&opts).expect_err("no table");
        assert!(e.contains("/nonexistent/table.txt"), "{e}");
    }
}
