//! `tern-bench fib --table FILE [--json]`: load time, memory, lookup rate,
//! update rate and forwarding gaps of this FIB on a real table, next to
//! references measured in the same run: a well-known crate trie
//! (`prefix-trie`, a tree bitmap), a plain DIR-24-8 (the other IPv4
//! candidate), and the Linux kernel FIB in a throwaway network namespace.
//!
//! Method (all on one core unless said):
//! * Next hops: the table has none, so each prefix gets one of
//!   `gateways` gateways (hash of the prefix) on one connected subnet,
//!   as a BGP table learned from a few peers would.
//! * Load: every route as `RouteOp::Add(Source::Fpm, ..)` through
//!   `FibWriter::apply` in batches of 10,000 (zebra's FPM batching order of
//!   magnitude) into a fresh FIB, no reader running; the time includes the
//!   RIB, next-hop resolution, the trie and publication, and is given as
//!   the writer thread's CPU time and as wall time.
//! * Lookups: 2^20 pre-generated addresses, looped over; "covered" draws a
//!   prefix uniformly then random host bits; "zipf" draws prefixes with a
//!   Zipf(1.0) popularity over a random order (a skewed, realistic mix);
//!   "random" is uniform over the whole address space (IPv4 only).
//!   "single" calls `lookup_v4` in a loop (the CPU still overlaps
//!   independent lookups); "batch64" / "batch256" call `lookup_v4_batch`
//!   (`lookup_v6_batch`) 64 / 256 at a time (256: the engine's largest
//!   batch).
//! * Updates: `churn` random routes deleted one call each, then re-added
//!   one call each (every call publishes), then the same as batches of
//!   1,000 mixed deletes and adds through `apply`; per CPU-second.
//! * Forwarding gap: another thread runs batches of 64 lookups and
//!   announces a quiescent state after each; a gap is the time between two
//!   completed batches, recorded in a histogram (p99, p99.9, max, and
//!   counts under 10 us / 100 us / 1 ms / 10 ms / above), first with the
//!   writer idle (what the scheduler, the hypervisor and other processes
//!   cause alone), then during a second full load and during the churn.
//!   The reader is pinned to one CPU and runs at SCHED_FIFO (`chrt`; a
//!   note says when that was refused), the writer is pinned to another;
//!   over each interval the reader's involuntary context switches and
//!   minor faults (/proc/thread-self) and the steal time of its CPU
//!   (/proc/stat) are recorded beside the gaps, so that a long gap can be
//!   told apart as the VM's (stolen time, preemption) or tern's. Readers
//!   never wait for the writer.
//! * Rates are per CPU-second of the measuring thread
//!   (CLOCK_THREAD_CPUTIME_ID), so a busy machine slows them through
//!   shared caches but not through time slicing; the load average at the
//!   start is printed.
//! * Kernel: `ip -batch` of `route add P via GW dev v0` (a veth) in a new netns (load
//!   time, and the trie size from /proc/net/fib_triestat); per-lookup cost
//!   is `ip -batch` of `route get A`, so it includes a netlink round trip
//!   per lookup and is an upper bound of the kernel's FIB lookup alone.

use std::fmt;
use std::hint::black_box;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::poptrie::mask128;
use tern_fib::multibit::{Cell, Entry, Entry16, Entry32};
use tern_fib::{FibConfig, FibReader, NH_NONE, NhId, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchOpts {
    /// Route file (`prefix [via]` per line, gzip allowed).
    pub table: PathBuf,
    /// Lookups per lookup figure.
    pub lookups: usize,
    /// Routes deleted and re-added for the update figures.
    pub churn: usize,
    /// Distinct gateways the prefixes are spread over.
    pub gateways: u32,
    /// Measure the Linux kernel in a netns (needs root and `ip`).
    pub kernel: bool,
    /// Measure the crate trie and DIR-24-8 references.
    pub references: bool,
    pub seed: u64,
    /// CPUs for the forwarding-gap reader and the writer (None: the last
    /// two CPUs the process may use, if there are two).
    pub gap_cpus: Option<(usize, usize)>,
    /// SCHED_FIFO priority of the gap reader (0: normal scheduling).
    pub gap_fifo: u8,
}

impl Default for BenchOpts {
    fn default() -> Self {
        BenchOpts {
            table: PathBuf::from("../shared/data/full-table-2025.txt.gz"),
            lookups: 30_000_000,
            churn: 100_000,
            gateways: 16,
            kernel: true,
            references: true,
            seed: 0x7e57_f1b0,
            gap_cpus: None,
            gap_fifo: 50,
        }
    }
}

/// One lookup-rate figure.
#[derive(Clone, Debug, Serialize)]
pub struct LookupFigure {
    /// "tern", "prefix-trie", "poptrie", "mbit-T/S", "static-dir24".
    pub structure: String,
    /// "covered", "zipf", "random".
    pub pattern: String,
    /// "single", "batch64" or "batch256".
    pub mode: String,
    pub mlookups_per_s: f64,
    pub ns_per_lookup: f64,
}

/// The kernel reference.
#[derive(Clone, Debug, Serialize)]
pub struct KernelFigures {
    pub load_s: f64,
    pub routes_per_s: f64,
    /// `route get` through `ip -batch`, syscall and netlink included.
    pub route_get_us: f64,
    /// From /proc/net/fib_triestat (IPv4 only).
    pub trie_bytes: Option<usize>,
}

/// Figures of one address family.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FamilyReport {
    pub family: String,
    pub prefixes: usize,
    /// Wall time of the load, and the writer thread's CPU time (the
    /// difference is other processes; the goal is about the latter).
    pub load_s: f64,
    pub load_cpu_s: f64,
    /// Per CPU-second of the writer.
    pub load_routes_per_s: f64,
    /// Lookup structures readers use (trie arrays in use).
    pub fib_bytes: usize,
    /// Next-hop table in use.
    pub nexthop_bytes: usize,
    /// Growth of the process's resident memory over the load (RIB, writer
    /// shadow and FIB together).
    pub rss_growth_bytes: usize,
    /// The writer's bookkeeping (RIB, trie metadata).
    pub writer_bytes: usize,
    pub lookups: Vec<LookupFigure>,
    /// Updates per CPU-second of the writer (no reader running).
    pub inserts_per_s: f64,
    pub deletes_per_s: f64,
    pub batch_updates_per_s: f64,
    /// Longest gap of the same reader while the writer sleeps.
    pub max_gap_idle_us: f64,
    pub max_gap_load_us: f64,
    pub max_gap_churn_us: f64,
    pub reader_batches: u64,
    /// The gaps in full: writer idle, loading the table, churning.
    pub gap_idle: GapFigures,
    pub gap_load: GapFigures,
    pub gap_churn: GapFigures,
    pub reference_load_s: Option<f64>,
    /// Sizes of the alternative structures measured.
    pub alternatives: Vec<String>,
    pub kernel: Option<KernelFigures>,
    pub kernel_error: Option<String>,
}

/// What the forwarding-gap reader saw over one interval.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GapFigures {
    pub batches: u64,
    pub max_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// Gaps under 10 us, 100 us, 1 ms, 10 ms, and the rest.
    pub buckets: [u64; 5],
    /// Gaps of 100 us or more, and how many of them the reader was
    /// switched out for (its involuntary context switches went up: the
    /// scheduler's doing, such as the RT throttle handing the CPU to
    /// other processes); the others are stolen time, interrupts, or tern.
    pub long_gaps: u64,
    pub long_gaps_preempted: u64,
    /// Whether the longest gap was one the reader was switched out for.
    pub max_preempted: bool,
    /// Gaps of 1 ms or more the reader was not switched out for: their
    /// number and total time, to hold against `steal_ms` (time the
    /// hypervisor did not run this vCPU: the guest sees no switch).
    pub unpreempted_ms_gaps: u64,
    pub unpreempted_ms_total: f64,
    /// The reader's involuntary context switches over the interval (it was
    /// preempted: by a higher priority, or time-sliced if not SCHED_FIFO).
    pub nonvoluntary_switches: u64,
    /// The reader's minor page faults over the interval.
    pub minor_faults: u64,
    /// Interrupts on the reader's CPU over the interval (/proc/interrupts),
    /// all of them and the TLB shootdowns among them (another CPU of this
    /// process unmapped or changed memory: freeing, page migration).
    pub interrupts: u64,
    pub tlb_shootdowns: u64,
    /// Time the hypervisor ran something else on the reader's CPU (all
    /// CPUs if the reader was not pinned), /proc/stat's `steal`.
    pub steal_ms: f64,
    pub seconds: f64,
    /// The reader's CPU, and whether it ran at SCHED_FIFO.
    pub cpu: Option<usize>,
    pub fifo: bool,
    /// Why the reader was not pinned or not SCHED_FIFO.
    pub note: Option<String>,
}

/// Gaps in a log-linear histogram: 8 sub-buckets per power of two of
/// nanoseconds (12 % resolution, which the percentiles inherit).
struct GapHist {
    counts: Vec<u64>,
    max: u64,
    n: u64,
}

impl GapHist {
    const SUB: u32 = 3;

    fn new() -> GapHist {
        GapHist { counts: vec![0; 64 << Self::SUB], max: 0, n: 0 }
    }

    fn index(ns: u64) -> usize {
        let ns = ns.max(1);
        let e = 63 - ns.leading_zeros();
        let sub = if e >= Self::SUB { (ns >> (e - Self::SUB)) & ((1 << Self::SUB) - 1) } else { 0 };
        ((e as usize) << Self::SUB) | sub as usize
    }

    /// The upper bound of bucket `i`.
    fn upper(i: usize) -> u64 {
        let (e, sub) = ((i >> Self::SUB) as u32, (i & ((1 << Self::SUB) - 1)) as u64);
        if e < Self::SUB {
            return 1u64 << (e + 1);
        }
        let step = 1u64 << (e - Self::SUB);
        (1u64 << e) + (sub + 1) * step
    }

    fn record(&mut self, ns: u64) {
        if let Some(c) = self.counts.get_mut(Self::index(ns)) {
            *c += 1;
        }
        self.max = self.max.max(ns);
        self.n += 1;
    }

    /// The gap below which a fraction `q` of the gaps fall (bucket upper
    /// bound, capped at the largest gap seen).
    fn quantile(&self, q: f64) -> u64 {
        let want = (q * self.n as f64).ceil() as u64;
        let mut acc = 0;
        for (i, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= want && *c > 0 {
                return Self::upper(i).min(self.max);
            }
        }
        self.max
    }
}

/// One field of /proc/thread-self/status (`nonvoluntary_ctxt_switches`).
fn thread_status(key: &str) -> u64 {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':').and_then(|v| v.trim().parse().ok()))
        })
        .unwrap_or(0)
}

/// The calling thread's minor faults (/proc/thread-self/stat, field 10).
fn thread_minflt() -> u64 {
    std::fs::read_to_string("/proc/thread-self/stat")
        .ok()
        .and_then(|s| {
            // The command name may hold spaces: count fields after its ')'.
            let rest = s.rsplit_once(')')?.1;
            rest.split_whitespace().nth(7).and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Steal time of `cpu` (or of all CPUs), in ms (/proc/stat, USER_HZ ticks
/// of 10 ms on Linux).
fn steal_ms(cpu: Option<usize>) -> f64 {
    let name = cpu.map_or_else(|| "cpu".to_string(), |c| format!("cpu{c}"));
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next()? == name).then(|| w.nth(7).and_then(|v| v.parse::<f64>().ok()))?
            })
        })
        .map_or(0.0, |ticks| ticks * 10.0)
}

/// Interrupts so far on `cpu`: (all, TLB shootdowns).
fn cpu_interrupts(cpu: Option<usize>) -> (u64, u64) {
    let Some(cpu) = cpu else { return (0, 0) };
    let Ok(s) = std::fs::read_to_string("/proc/interrupts") else { return (0, 0) };
    let mut lines = s.lines();
    let Some(col) = lines.next().and_then(|h| h.split_whitespace().position(|c| c == format!("CPU{cpu}"))) else {
        return (0, 0);
    };
    let (mut all, mut tlb) = (0, 0);
    for l in lines {
        let mut w = l.split_whitespace();
        let name = w.next().unwrap_or("");
        let n: u64 = w.nth(col).and_then(|v| v.parse().ok()).unwrap_or(0);
        all += n;
        if name == "TLB:" {
            tlb = n;
        }
    }
    (all, tlb)
}

/// Pins the calling thread to `cpu`.
fn pin_thread(cpu: usize) -> Result<(), String> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| format!("cannot pin to cpu {cpu}: {e}"))
}

/// Puts the calling thread at SCHED_FIFO `prio` (through `chrt`, as the
/// RFC 2544 tester does: no unsafe code here).
fn fifo_thread(prio: u8) -> Result<(), String> {
    let tid = rustix::thread::gettid().as_raw_nonzero().get().to_string();
    let out =
        Command::new("chrt").args(["-f", "-p", &prio.to_string(), &tid]).output().map_err(|e| format!("chrt: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("chrt -f {prio}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// The CPUs for the gap reader and the writer: the last two the process
/// may run on.
fn gap_cpus(opts: &BenchOpts) -> Option<(usize, usize)> {
    if opts.gap_cpus.is_some() {
        return opts.gap_cpus;
    }
    let set = rustix::thread::sched_getaffinity(None).ok()?;
    let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect();
    match cpus.as_slice() {
        [.., w, r] => Some((*r, *w)),
        _ => None,
    }
}

/// Everything `tern-bench fib` prints.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub table: String,
    pub cpu: String,
    /// /proc/loadavg when the run started: other processes share the cores
    /// and the caches.
    pub loadavg: String,
    pub parse_s: f64,
    pub v4: FamilyReport,
    pub v6: FamilyReport,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    fn u128(&mut self) -> u128 {
        (u128::from(self.next()) << 64) | u128::from(self.next())
    }
}

fn hash_prefix(p: &Prefix) -> u64 {
    let b = p.bits128();
    let x = (b >> 64) as u64 ^ (b as u64) ^ u64::from(p.len()).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x.wrapping_mul(0xff51_afd7_ed55_8ccd) >> 17
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// On-CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), so lookup
/// and update rates are per CPU-second even when other processes share the
/// core. Not /proc/thread-self/schedstat, which this module read before:
/// its sum only advances when the scheduler accounts the running thread
/// (ticks, switches), a step of up to 4 ms, a sixth of a 100,000-update
/// measurement; the clock adds the time since.
pub fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}

/// Runs `f` and returns the CPU time it took (wall time if the clock reads
/// zero).
fn timed(f: impl FnOnce()) -> Duration {
    let (c0, w0) = (thread_cpu(), Instant::now());
    f();
    let (c, w) = (thread_cpu().saturating_sub(c0), w0.elapsed());
    if c.is_zero() { w } else { c }
}

fn time_single<K: Copy>(keys: &[K], rounds: usize, f: impl Fn(K) -> NhId) -> Duration {
    timed(|| {
        let mut acc = 0u32;
        for _ in 0..rounds {
            for &k in keys {
                acc = acc.wrapping_add(f(k));
            }
        }
        black_box(acc);
    })
}

fn time_batch<K: Copy>(keys: &[K], rounds: usize, f: impl Fn(&[K], &mut [NhId])) -> Duration {
    time_batch_of::<K, 64>(keys, rounds, f)
}

/// Batches of `B` keys (64: the figures' "batch64"; 256: the engine's
/// largest batch, `tern_packet::MAX_BATCH`).
fn time_batch_of<K: Copy, const B: usize>(keys: &[K], rounds: usize, f: impl Fn(&[K], &mut [NhId])) -> Duration {
    timed(|| {
        let mut acc = 0u32;
        let mut out = [0u32; B];
        for _ in 0..rounds {
            for c in keys.chunks(B) {
                f(c, &mut out);
                acc = acc.wrapping_add(out[0]).wrapping_add(out[B - 1]);
            }
        }
        black_box(acc);
    })
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|x| x.parse::<usize>().ok()))
        .map_or(0, |pages| pages * 4096)
}

/// Runs the whole benchmark.
pub fn run(opts: &BenchOpts) -> Result<BenchReport, String> {
    let t = Instant::now();
    let routes = tern_fib::routefile::load(&opts.table).map_err(|e| format!("{}: {e}", opts.table.display()))?;
    let parse_s = t.elapsed().as_secs_f64();
    let (v4, v6): (Vec<Prefix>, Vec<Prefix>) = routes.iter().map(|(p, _)| *p).partition(Prefix::is_v4);
    if v4.is_empty() && v6.is_empty() {
        return Err(format!("{}: no routes", opts.table.display()));
    }
    // The gap reader's and the writer's CPUs, chosen before the writer
    // (this thread) is pinned to its own.
    let opts = &BenchOpts { gap_cpus: gap_cpus(opts), ..opts.clone() };
    Ok(BenchReport {
        table: opts.table.display().to_string(),
        cpu: cpu_model(),
        loadavg: std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string(),
        parse_s,
        v4: run_family(opts, &v4, false),
        v6: run_family(opts, &v6, true),
    })
}

/// Addresses for one pattern, left-aligned u128.
fn addresses(prefixes: &[Prefix], pattern: &str, n: usize, rng: &mut Rng, v6: bool) -> Vec<u128> {
    let width = if v6 { 128 } else { 32 };
    let inside = |p: &Prefix, rng: &mut Rng| {
        let host = !mask128(p.len()) & mask128(width);
        p.bits128() | (rng.u128() & host)
    };
    match pattern {
        "covered" => (0..n).map(|_| inside(&prefixes[rng.below(prefixes.len())], rng)).collect(),
        "zipf" => {
            let mut order: Vec<usize> = (0..prefixes.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            let mut cdf = Vec::with_capacity(prefixes.len());
            let mut acc = 0.0f64;
            for r in 0..prefixes.len() {
                acc += 1.0 / (r as f64 + 1.0);
                cdf.push(acc);
            }
            (0..n)
                .map(|_| {
                    let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * acc;
                    let r = cdf.partition_point(|&c| c < u).min(prefixes.len() - 1);
                    inside(&prefixes[order[r]], rng)
                })
                .collect()
        }
        _ => (0..n).map(|_| rng.u128() & mask128(width)).collect(),
    }
}

fn figure(structure: &str, pattern: &str, mode: &str, n: usize, d: Duration) -> LookupFigure {
    let s = d.as_secs_f64().max(1e-9);
    LookupFigure {
        structure: structure.to_string(),
        pattern: pattern.to_string(),
        mode: mode.to_string(),
        mlookups_per_s: n as f64 / s / 1e6,
        ns_per_lookup: s * 1e9 / n as f64,
    }
}

/// A reader thread doing batched lookups until `stop`; returns what it
/// saw. It pins itself to `cpu` and asks for SCHED_FIFO `fifo` first.
fn gap_reader(
    r: FibReader,
    keys: Arc<Vec<u128>>,
    v6: bool,
    stop: Arc<AtomicBool>,
    ready: Arc<std::sync::Barrier>,
    cpu: Option<usize>,
    fifo: u8,
) -> std::thread::JoinHandle<GapFigures> {
    std::thread::spawn(move || {
        let mut notes = Vec::new();
        let pinned = match cpu.map(pin_thread) {
            Some(Ok(())) => cpu,
            Some(Err(e)) => {
                notes.push(e);
                None
            }
            None => {
                notes.push("one CPU only: reader not pinned".to_string());
                None
            }
        };
        let is_fifo = fifo > 0
            && match fifo_thread(fifo) {
                Ok(()) => true,
                Err(e) => {
                    notes.push(e);
                    false
                }
            };
        let qs = r.domain().register();
        let mut out = [0u32; 64];
        let mut hist = GapHist::new();
        let k4: Vec<u32> = keys.iter().map(|k| (k >> 96) as u32).collect();
        ready.wait();
        let (nv0, mf0, st0) = (thread_status("nonvoluntary_ctxt_switches"), thread_minflt(), steal_ms(pinned));
        let irq0 = cpu_interrupts(pinned);
        let t0 = Instant::now();
        let mut last = t0;
        let mut i = 0usize;
        let (mut long, mut preempted, mut max_preempted, mut nv) = (0u64, 0u64, false, nv0);
        let (mut unpre, mut unpre_ns) = (0u64, 0u64);
        while !stop.load(Ordering::Relaxed) {
            let start = (i * 64) % keys.len().saturating_sub(64).max(1);
            if v6 {
                r.lookup_v6_batch(&keys[start..(start + 64).min(keys.len())], &mut out);
            } else {
                r.lookup_v4_batch(&k4[start..(start + 64).min(k4.len())], &mut out);
            }
            black_box(&out);
            qs.quiescent();
            let mut now = Instant::now();
            let gap = (now - last).as_nanos() as u64;
            hist.record(gap);
            if gap >= 100_000 {
                // Was the reader switched out meanwhile? (Reading /proc
                // takes microseconds: the next gap starts after it.)
                long += 1;
                let x = thread_status("nonvoluntary_ctxt_switches");
                let switched = x > nv;
                nv = x;
                preempted += u64::from(switched);
                if !switched && gap >= 1_000_000 {
                    unpre += 1;
                    unpre_ns += gap;
                }
                if gap >= hist.max {
                    max_preempted = switched;
                }
                now = Instant::now();
            }
            last = now;
            i += 1;
        }
        let seconds = t0.elapsed().as_secs_f64();
        let irq = cpu_interrupts(pinned);
        let us = |ns: u64| ns as f64 / 1e3;
        let mut buckets = [0u64; 5];
        for (b, c) in hist.counts.iter().enumerate() {
            let upper = GapHist::upper(b);
            let k = [10_000u64, 100_000, 1_000_000, 10_000_000].iter().position(|&lim| upper <= lim).unwrap_or(4);
            buckets[k] += c;
        }
        GapFigures {
            batches: hist.n,
            max_us: us(hist.max),
            p99_us: us(hist.quantile(0.99)),
            p999_us: us(hist.quantile(0.999)),
            buckets,
            long_gaps: long,
            long_gaps_preempted: preempted,
            max_preempted,
            unpreempted_ms_gaps: unpre,
            unpreempted_ms_total: unpre_ns as f64 / 1e6,
            nonvoluntary_switches: thread_status("nonvoluntary_ctxt_switches").saturating_sub(nv0),
            minor_faults: thread_minflt().saturating_sub(mf0),
            interrupts: irq.0.saturating_sub(irq0.0),
            tlb_shootdowns: irq.1.saturating_sub(irq0.1),
            steal_ms: steal_ms(pinned) - st0,
            seconds,
            cpu: pinned,
            fifo: is_fifo,
            note: (!notes.is_empty()).then(|| notes.join("; ")),
        }
    })
}

/// Runs `work` on the calling thread (pinned to the writer's CPU) while a
/// reader on its own CPU measures the gaps between its batches.
fn measure_gap(opts: &BenchOpts, r: &FibReader, keys: &Arc<Vec<u128>>, v6: bool, work: impl FnOnce()) -> GapFigures {
    let cpus = opts.gap_cpus;
    // Pinned for the interval only: the other figures keep the scheduler's
    // placement, as before.
    let affinity = rustix::thread::sched_getaffinity(None).ok();
    let mut note = None;
    if let Some((_, w)) = cpus
        && let Err(e) = pin_thread(w)
    {
        note = Some(format!("writer: {e}"));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(std::sync::Barrier::new(2));
    let reader = gap_reader(
        r.clone(),
        Arc::clone(keys),
        v6,
        Arc::clone(&stop),
        Arc::clone(&ready),
        cpus.map(|c| c.0),
        opts.gap_fifo,
    );
    ready.wait();
    work();
    stop.store(true, Ordering::Relaxed);
    let mut g = reader.join().unwrap_or_default();
    if let Some(set) = affinity {
        let _ = rustix::thread::sched_setaffinity(None, &set);
    }
    if let Some(n) = note {
        g.note = Some(g.note.map_or(n.clone(), |x| format!("{x}; {n}")));
    }
    g
}

fn run_family(opts: &BenchOpts, prefixes: &[Prefix], v6: bool) -> FamilyReport {
    let mut rep = FamilyReport {
        family: if v6 { "ipv6" } else { "ipv4" }.to_string(),
        prefixes: prefixes.len(),
        ..Default::default()
    };
    if prefixes.is_empty() {
        return rep;
    }
    let mut rng = Rng(opts.seed | 1);
    let (subnet, gw_of): (Prefix, Box<dyn Fn(u32) -> IpAddr>) = if v6 {
        (
            Prefix::V6 { addr: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0), len: 64 },
            Box::new(|k| IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, k as u16 + 1))),
        )
    } else {
        (
            Prefix::V4 { addr: Ipv4Addr::new(100, 64, 0, 0), len: 24 },
            Box::new(|k| IpAddr::V4(Ipv4Addr::new(100, 64, 0, k as u8 + 1))),
        )
    };
    let gateways = opts.gateways.clamp(1, 250);
    let target =
        |p: &Prefix| RouteTarget::Via { gw: gw_of((hash_prefix(p) % u64::from(gateways)) as u32), ifindex: Some(1) };
    let covered = Arc::new(addresses(prefixes, "covered", 1 << 20, &mut rng, v6));
    let batches = || -> Vec<Vec<RouteOp>> {
        prefixes
            .chunks(10_000)
            .map(|c| c.iter().map(|p| RouteOp::Add(Source::Fpm, *p, target(p), RouteAttrs::default())).collect())
            .collect()
    };
    let fresh = || {
        let (mut w, r) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
        let _ = w.add_route(Source::Connected, subnet, RouteTarget::Connected { ifindex: 1 }, RouteAttrs::default());
        (w, r)
    };

    // Load alone: the writer's own cost.
    {
        let (mut w, _r) = fresh();
        let ops = batches();
        let rss0 = rss_bytes();
        let (c0, t) = (thread_cpu(), Instant::now());
        for b in ops {
            w.apply(b);
        }
        rep.load_s = t.elapsed().as_secs_f64();
        rep.load_cpu_s = thread_cpu().saturating_sub(c0).as_secs_f64();
        rep.rss_growth_bytes = rss_bytes().saturating_sub(rss0);
        let st = w.stats();
        rep.fib_bytes = if v6 { st.v6_bytes } else { st.v4_bytes };
        rep.nexthop_bytes = st.nexthop_bytes;
        rep.writer_bytes = st.writer_bytes;
    }
    rep.load_routes_per_s = prefixes.len() as f64 / rep.load_cpu_s.max(1e-9);

    // Load again with a reader thread measuring the forwarding gap; first
    // the same reader with the writer idle, for the gaps the scheduler and
    // the other processes cause on their own.
    let (mut w, r) = fresh();
    let idle_s = rep.load_s.clamp(1.0, 3.0);
    rep.gap_idle = measure_gap(opts, &r, &covered, v6, || std::thread::sleep(Duration::from_secs_f64(idle_s)));
    let ops = batches();
    rep.gap_load = measure_gap(opts, &r, &covered, v6, || {
        for b in ops {
            w.apply(b);
        }
    });
    rep.max_gap_idle_us = rep.gap_idle.max_us;
    rep.max_gap_load_us = rep.gap_load.max_us;
    rep.reader_batches = rep.gap_idle.batches + rep.gap_load.batches;

    // Lookups.
    let mut patterns = vec![("covered", Arc::clone(&covered))];
    patterns.push(("zipf", Arc::new(addresses(prefixes, "zipf", 1 << 20, &mut rng, v6))));
    if !v6 {
        patterns.push(("random", Arc::new(addresses(prefixes, "random", 1 << 20, &mut rng, v6))));
    }
    for (name, keys) in &patterns {
        let rounds = opts.lookups.div_ceil(keys.len()).max(1);
        let n = rounds * keys.len();
        if v6 {
            time_single(keys, 1, |k| r.lookup_v6(k));
            let d = time_single(keys, rounds, |k| r.lookup_v6(k));
            rep.lookups.push(figure("tern", name, "single", n, d));
            let d = time_batch(keys, rounds, |k, o| r.lookup_v6_batch(k, o));
            rep.lookups.push(figure("tern", name, "batch64", n, d));
            let d = time_batch_of::<_, 256>(keys, rounds, |k, o| r.lookup_v6_batch(k, o));
            rep.lookups.push(figure("tern", name, "batch256", n, d));
        } else {
            let k4: Vec<u32> = keys.iter().map(|k| (k >> 96) as u32).collect();
            time_single(&k4, 1, |k| r.lookup_v4(k));
            let d = time_single(&k4, rounds, |k| r.lookup_v4(k));
            rep.lookups.push(figure("tern", name, "single", n, d));
            let d = time_batch(&k4, rounds, |k, o| r.lookup_v4_batch(k, o));
            rep.lookups.push(figure("tern", name, "batch64", n, d));
            let d = time_batch_of::<_, 256>(&k4, rounds, |k, o| r.lookup_v4_batch(k, o));
            rep.lookups.push(figure("tern", name, "batch256", n, d));
        }
    }

    if opts.references {
        references(opts, prefixes, v6, &patterns, &mut rep);
    }

    // Updates, the writer alone: one call per delete, one per add (each
    // call publishes), then batches of 500 deletes + 500 adds.
    let mut picks: Vec<Prefix> =
        (0..opts.churn.min(prefixes.len())).map(|_| prefixes[rng.below(prefixes.len())]).collect();
    picks.sort_unstable();
    picks.dedup();
    for i in (1..picks.len()).rev() {
        picks.swap(i, rng.below(i + 1));
    }
    let per_s = |n: usize, d: Duration| n as f64 / d.as_secs_f64().max(1e-9);
    let d = timed(|| {
        for p in &picks {
            let _ = w.del_route(Source::Fpm, *p);
        }
    });
    rep.deletes_per_s = per_s(picks.len(), d);
    let d = timed(|| {
        for p in &picks {
            let _ = w.add_route(Source::Fpm, *p, target(p), RouteAttrs::default());
        }
    });
    rep.inserts_per_s = per_s(picks.len(), d);
    let churn_ops = || -> Vec<Vec<RouteOp>> {
        picks
            .chunks(500)
            .map(|c| {
                let mut v: Vec<RouteOp> = c.iter().map(|p| RouteOp::Del(Source::Fpm, *p)).collect();
                v.extend(c.iter().map(|p| RouteOp::Add(Source::Fpm, *p, target(p), RouteAttrs::default())));
                v
            })
            .collect()
    };
    let ops = churn_ops();
    let d = timed(|| {
        for b in ops {
            w.apply(b);
        }
    });
    rep.batch_updates_per_s = per_s(2 * picks.len(), d);

    // The same churn with a reader measuring the gap, repeated for at
    // least a second (single calls, then batches).
    rep.gap_churn = measure_gap(opts, &r, &covered, v6, || {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(1) {
            for p in &picks {
                let _ = w.del_route(Source::Fpm, *p);
                let _ = w.add_route(Source::Fpm, *p, target(p), RouteAttrs::default());
            }
            for b in churn_ops() {
                w.apply(b);
            }
        }
    });
    rep.max_gap_churn_us = rep.gap_churn.max_us;
    rep.reader_batches += rep.gap_churn.batches;

    if opts.kernel {
        match kernel(prefixes, v6, &mut rng) {
            Ok(k) => rep.kernel = Some(k),
            Err(e) => rep.kernel_error = Some(e),
        }
    }
    rep
}

/// Builds a multibit trie of another shape from the same prefixes and
/// measures it on the same keys.
fn alt_multibit<const T: u32, const S: u32>(
    prefixes: &[Prefix],
    v6: bool,
    nh: &dyn Fn(&Prefix) -> NhId,
    patterns: &[(&str, Arc<Vec<u128>>)],
    rounds: &dyn Fn(usize) -> usize,
    rep: &mut FamilyReport,
) {
    use tern_fib::multibit::{MultibitArrays, MultibitWriter};
    let name = format!("mbit-{T}/{S}");
    let a = MultibitArrays::<Entry32, T, S>::new(1 << 20);
    let mut w = MultibitWriter::<Entry32, T, S>::new(v6, &a);
    for p in prefixes {
        let _ = w.set(&a, p.bits128(), p.len(), nh(p));
    }
    rep.alternatives.push(format!("{name}: {:.1} MiB", mib(w.used_bytes())));
    for (pat, keys) in patterns {
        let r = rounds(keys.len());
        let n = r * keys.len();
        if v6 {
            rep.lookups.push(figure(&name, pat, "single", n, time_single(keys, r, |k| a.lookup(k))));
            rep.lookups.push(figure(&name, pat, "batch64", n, time_batch(keys, r, |k, o| a.lookup_batch(k, o))));
        } else {
            let k64: Vec<u64> = keys.iter().map(|k| (k >> 64) as u64).collect();
            rep.lookups.push(figure(&name, pat, "single", n, time_single(&k64, r, |k| a.lookup(k))));
            rep.lookups.push(figure(&name, pat, "batch64", n, time_batch(&k64, r, |k, o| a.lookup_batch(k, o))));
        }
    }
}

fn references(
    opts: &BenchOpts,
    prefixes: &[Prefix],
    v6: bool,
    patterns: &[(&str, Arc<Vec<u128>>)],
    rep: &mut FamilyReport,
) {
    use crate::poptrie::{TrieArrays, TrieWriter};
    use prefix_trie::PrefixMap;
    let nh = |p: &Prefix| (hash_prefix(p) % u64::from(opts.gateways.max(1))) as NhId + 1;
    let rounds = |len: usize| opts.lookups.div_ceil(len).max(1) / 2 + 1;
    // The crate trie.
    let t = Instant::now();
    let mut pm4: PrefixMap<ipnet::Ipv4Net, NhId> = PrefixMap::new();
    let mut pm6: PrefixMap<ipnet::Ipv6Net, NhId> = PrefixMap::new();
    for p in prefixes {
        match *p {
            Prefix::V4 { addr, len } => {
                if let Ok(n) = ipnet::Ipv4Net::new(addr, len) {
                    pm4.insert(n, nh(p));
                }
            }
            Prefix::V6 { addr, len } => {
                if let Ok(n) = ipnet::Ipv6Net::new(addr, len) {
                    pm6.insert(n, nh(p));
                }
            }
        }
    }
    rep.reference_load_s = Some(t.elapsed().as_secs_f64());
    for (name, keys) in patterns {
        let r = rounds(keys.len());
        let n = r * keys.len();
        let d = if v6 {
            let nets: Vec<ipnet::Ipv6Net> = keys.iter().map(|&k| ipnet::Ipv6Net::from(Ipv6Addr::from(k))).collect();
            time_single(&nets, r, |n| pm6.get_lpm(&n).map_or(NH_NONE, |(_, v)| *v))
        } else {
            let nets: Vec<ipnet::Ipv4Net> =
                keys.iter().map(|&k| ipnet::Ipv4Net::from(Ipv4Addr::from((k >> 96) as u32))).collect();
            time_single(&nets, r, |n| pm4.get_lpm(&n).map_or(NH_NONE, |(_, v)| *v))
        };
        rep.lookups.push(figure("prefix-trie", name, "single", n, d));
    }
    // The candidates that lost, on the same keys.
    let pop = TrieArrays::new(1 << 20, 1 << 23);
    let mut popw = TrieWriter::new(v6, &pop);
    for p in prefixes {
        popw.set(p.bits128(), p.len(), nh(p));
    }
    let _ = popw.commit(&pop, &mut Vec::new());
    rep.alternatives.push(format!("poptrie 18+6: {:.1} MiB", mib(popw.used_bytes())));
    for (name, keys) in patterns {
        let r = rounds(keys.len());
        let n = r * keys.len();
        if v6 {
            rep.lookups.push(figure("poptrie", name, "single", n, time_single(keys, r, |k| pop.lookup(k))));
            rep.lookups.push(figure("poptrie", name, "batch64", n, time_batch(keys, r, |k, o| pop.lookup_batch(k, o))));
        } else {
            let k64: Vec<u64> = keys.iter().map(|k| (k >> 64) as u64).collect();
            rep.lookups.push(figure("poptrie", name, "single", n, time_single(&k64, r, |k| pop.lookup(k))));
            rep.lookups.push(figure("poptrie", name, "batch64", n, time_batch(&k64, r, |k, o| pop.lookup_batch(k, o))));
        }
    }
    drop(popw);
    drop(pop);
    alt_multibit::<18, 6>(prefixes, v6, &nh, patterns, &rounds, rep);
    if v6 {
        alt_multibit::<20, 6>(prefixes, v6, &nh, patterns, &rounds, rep);
        // tern's IPv6 shape before fib6 (16-bit top, `u32` entries), and
        // today's shape with `u32` entries (101 MiB): what the 24-bit top
        // and the 16-bit entries each bring.
        alt_multibit::<16, 8>(prefixes, v6, &nh, patterns, &rounds, rep);
        alt_multibit::<24, 8>(prefixes, v6, &nh, patterns, &rounds, rep);
    } else {
        alt_multibit::<16, 8>(prefixes, v6, &nh, patterns, &rounds, rep);
        let dir = Dir24::build(prefixes, opts.gateways);
        rep.alternatives.push(format!("static dir-24-8: {:.1} MiB", mib((dir.tbl24.len() + dir.tbl8.len()) * 4)));
        for (name, keys) in patterns {
            let r = rounds(keys.len());
            let n = r * keys.len();
            let k4: Vec<u32> = keys.iter().map(|k| (k >> 96) as u32).collect();
            rep.lookups.push(figure("static-dir24", name, "single", n, time_single(&k4, r, |k| dir.lookup1(k))));
            rep.lookups.push(figure("static-dir24", name, "batch64", n, time_batch(&k4, r, |k, o| dir.lookup(k, o))));
        }
    }
}

/// The classic DIR-24-8 (u32 entries: 64 MiB + 1 KiB groups), built
/// statically: the bound on what tern's in-place DIR-24-8 can do.
struct Dir24 {
    tbl24: Vec<u32>,
    tbl8: Vec<u32>,
}

impl Dir24 {
    const GROUP: u32 = 1 << 31;

    fn build(prefixes: &[Prefix], gateways: u32) -> Dir24 {
        let mut sorted: Vec<Prefix> = prefixes.to_vec();
        sorted.sort_by_key(Prefix::len);
        let mut d = Dir24 { tbl24: vec![0; 1 << 24], tbl8: Vec::new() };
        for p in sorted {
            let nh = (hash_prefix(&p) % u64::from(gateways.max(1))) as u32 + 1;
            let a = (p.bits128() >> 96) as u32;
            let len = u32::from(p.len());
            if len <= 24 {
                let start = (a >> 8) as usize;
                for e in &mut d.tbl24[start..start + (1 << (24 - len))] {
                    *e = nh;
                }
                continue;
            }
            let i = (a >> 8) as usize;
            if d.tbl24[i] & Self::GROUP == 0 {
                let g = (d.tbl8.len() / 256) as u32;
                let fill = d.tbl24[i];
                d.tbl8.extend(std::iter::repeat_n(fill, 256));
                d.tbl24[i] = Self::GROUP | g;
            }
            let g = (d.tbl24[i] & !Self::GROUP) as usize * 256;
            let start = g + (a & 0xff) as usize;
            for e in &mut d.tbl8[start..start + (1 << (32 - len))] {
                *e = nh;
            }
        }
        d
    }

    #[inline(always)]
    fn lookup1(&self, a: u32) -> u32 {
        let e = self.tbl24[(a >> 8) as usize];
        if e & Self::GROUP == 0 { e } else { self.tbl8[(e & !Self::GROUP) as usize * 256 + (a & 0xff) as usize] }
    }

    /// A batch with the tbl24 entries prefetched 16 ahead.
    fn lookup(&self, keys: &[u32], out: &mut [u32]) {
        for &k in keys.iter().take(16) {
            tern_intrin::prefetch_index(&self.tbl24, (k >> 8) as usize);
        }
        for (i, (o, &k)) in out.iter_mut().zip(keys).enumerate() {
            if let Some(a) = keys.get(i + 16) {
                tern_intrin::prefetch_index(&self.tbl24, (a >> 8) as usize);
            }
            *o = self.lookup1(k);
        }
    }
}

/// Loads the table into the kernel in a throwaway netns and times it.
fn kernel(prefixes: &[Prefix], v6: bool, rng: &mut Rng) -> Result<KernelFigures, String> {
    let ns = format!("tfib-{}-{}", std::process::id(), if v6 { 6 } else { 4 });
    let run = |args: &[&str]| -> Result<(), String> {
        let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
        }
    };
    run(&["netns", "add", &ns])?;
    let result = (|| {
        // Routes via a gateway on a veth (blackhole routes cannot be
        // queried with `route get`).
        let (gw, addr) = if v6 { ("fd00::1", "fd00::2/64") } else { ("100.64.0.1", "100.64.0.2/24") };
        run(&["-n", &ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"])?;
        run(&["-n", &ns, "link", "set", "v0", "up"])?;
        run(&["-n", &ns, "link", "set", "v1", "up"])?;
        if v6 {
            run(&["-n", &ns, "addr", "add", addr, "dev", "v0", "nodad"])?;
        } else {
            run(&["-n", &ns, "addr", "add", addr, "dev", "v0"])?;
        }
        let dir = std::env::temp_dir().join(&ns);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let batch = dir.join("routes.batch");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&batch).map_err(|e| e.to_string())?);
        for p in prefixes {
            writeln!(f, "route add {p} via {gw} dev v0").map_err(|e| e.to_string())?;
        }
        f.flush().map_err(|e| e.to_string())?;
        drop(f);
        let fam = if v6 { "-6" } else { "-4" };
        let path = batch.display().to_string();
        let t = Instant::now();
        run(&["-n", &ns, fam, "-batch", &path])?;
        let load_s = t.elapsed().as_secs_f64();
        let gets = dir.join("gets.batch");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&gets).map_err(|e| e.to_string())?);
        let keys = addresses(prefixes, "covered", 20_000, rng, v6);
        for k in &keys {
            let a: IpAddr =
                if v6 { IpAddr::V6(Ipv6Addr::from(*k)) } else { IpAddr::V4(Ipv4Addr::from((k >> 96) as u32)) };
            writeln!(f, "route get {a}").map_err(|e| e.to_string())?;
        }
        f.flush().map_err(|e| e.to_string())?;
        drop(f);
        let path = gets.display().to_string();
        let t = Instant::now();
        let out = Command::new("ip").args(["-n", &ns, fam, "-batch", &path]).output().map_err(|e| e.to_string())?;
        let get_s = t.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(format!("ip route get: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        let trie_bytes = if v6 {
            None
        } else {
            Command::new("ip").args(["netns", "exec", &ns, "cat", "/proc/net/fib_triestat"]).output().ok().and_then(
                |o| {
                    let s = String::from_utf8_lossy(&o.stdout).to_string();
                    s.lines()
                        .find_map(|l| {
                            l.trim()
                                .strip_prefix("Total size:")
                                .map(|x| x.trim().trim_end_matches("kB").trim().to_string())
                        })
                        .and_then(|kb| kb.parse::<usize>().ok())
                        .map(|kb| kb * 1024)
                },
            )
        };
        let _ = std::fs::remove_dir_all(&dir);
        Ok(KernelFigures {
            load_s,
            routes_per_s: prefixes.len() as f64 / load_s.max(1e-9),
            route_get_us: get_s * 1e6 / keys.len() as f64,
            trie_bytes,
        })
    })();
    let _ = run(&["netns", "del", &ns]);
    result
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

impl fmt::Display for FamilyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let goal_l = if self.family == "ipv4" { 150.0 } else { 50.0 };
        writeln!(f, "{}: {} prefixes", self.family, self.prefixes)?;
        writeln!(
            f,
            "  load        {:.3} s CPU, {:.3} s wall ({:.2} M routes/s per CPU-second; goal <= 0.5 s for the whole table)",
            self.load_cpu_s,
            self.load_s,
            self.load_routes_per_s / 1e6
        )?;
        writeln!(
            f,
            "  memory      FIB {:.1} MiB + next hops {:.2} MiB (goal FIB <= 128 MiB); writer {:.1} MiB; RSS grew {:.1} MiB",
            mib(self.fib_bytes),
            mib(self.nexthop_bytes),
            mib(self.writer_bytes),
            mib(self.rss_growth_bytes)
        )?;
        writeln!(f, "  lookups     (M lookups/s on one core, ns/lookup; goal >= {goal_l} M/s)")?;
        writeln!(f, "    {:<12} {:<8} {:<8} {:>9} {:>8}", "structure", "pattern", "mode", "M/s", "ns")?;
        for l in &self.lookups {
            writeln!(
                f,
                "    {:<12} {:<8} {:<8} {:>9.1} {:>8.2}",
                l.structure, l.pattern, l.mode, l.mlookups_per_s, l.ns_per_lookup
            )?;
        }
        writeln!(
            f,
            "  updates     {:.2} M inserts/s, {:.2} M deletes/s (one call each); {:.2} M ops/s in batches of 1000 (per CPU-second; goal >= 2 M/s)",
            self.inserts_per_s / 1e6,
            self.deletes_per_s / 1e6,
            self.batch_updates_per_s / 1e6
        )?;
        writeln!(f, "  fwd gap     (goal < 1000 us; gaps between the reader's 64-lookup batches)")?;
        for (what, g) in [("writer idle", &self.gap_idle), ("full load", &self.gap_load), ("churn", &self.gap_churn)] {
            writeln!(f, "    {what:<12} {g}")?;
        }
        if let Some(s) = self.reference_load_s {
            writeln!(f, "  prefix-trie load {s:.3} s")?;
        }
        if !self.alternatives.is_empty() {
            writeln!(f, "  sizes       {}", self.alternatives.join("; "))?;
        }
        match (&self.kernel, &self.kernel_error) {
            (Some(k), _) => writeln!(
                f,
                "  linux       load {:.2} s ({:.2} M routes/s, ip -batch, routes via a veth){}; route get {:.1} us/lookup (ip -batch, includes the netlink round trip)",
                k.load_s,
                k.routes_per_s / 1e6,
                k.trie_bytes.map(|b| format!(", trie {:.1} MiB", mib(b))).unwrap_or_default(),
                k.route_get_us
            )?,
            (None, Some(e)) => writeln!(f, "  linux       not measured: {e}")?,
            (None, None) => {}
        }
        Ok(())
    }
}

impl fmt::Display for GapFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e] = self.buckets;
        write!(
            f,
            "max {:.0} us{}, p99.9 {:.1} us, p99 {:.1} us; <10us {a}, <100us {b}, <1ms {c}, <10ms {d}, >=10ms {e} \
             ({} batches, {:.1} s; {} gaps >= 100 us, {} of them preempted; {} not preempted >= 1 ms, \
             {:.1} ms in all); reader cpu {}{}: {} involuntary \
             switches, {} minor faults, {} interrupts ({} TLB shootdowns), cpu steal {:.0} ms",
            self.max_us,
            if self.max_preempted { " (preempted)" } else { "" },
            self.p999_us,
            self.p99_us,
            self.batches,
            self.seconds,
            self.long_gaps,
            self.long_gaps_preempted,
            self.unpreempted_ms_gaps,
            self.unpreempted_ms_total,
            self.cpu.map_or("any".to_string(), |c| c.to_string()),
            if self.fifo { " SCHED_FIFO" } else { "" },
            self.nonvoluntary_switches,
            self.minor_faults,
            self.interrupts,
            self.tlb_shootdowns,
            self.steal_ms
        )?;
        if let Some(n) = &self.note {
            write!(f, " (note: {n})")?;
        }
        Ok(())
    }
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "tern-bench fib: {} (parsed in {:.2} s)", self.table, self.parse_s)?;
        writeln!(f, "cpu: {}; load average at start: {}", self.cpu, self.loadavg)?;
        writeln!(f, "(lookup and update rates are per CPU-second of the measuring thread)")?;
        write!(f, "{}{}", self.v4, self.v6)
    }
}

/// Entry width experiment (`cargo bench -p tern-bench --bench fib_bench -- TABLE --width [ROUNDS]`): the IPv4
/// table as tern's FIB builds it, copied into a flat DIR-24-8 of `u32`
/// entries (bit 31 = child block: tern's layout until 2026-11-23) and one
/// of `u16` entries (bit 15), each looked up beside tern itself on the same
/// covered, Zipf and random keys, singly and in batches of 256 (a plain
/// loop, or with the top entries prefetched 16 / 32 keys ahead), in
/// alternating order (A B .. B A) so that drift in the machine's load
/// falls on all; every measurement is printed, then the median of each.
pub fn width_experiment(opts: &BenchOpts, alternations: usize) -> Result<String, String> {
    use std::fmt::Write as _;
    let routes = tern_fib::routefile::load(&opts.table).map_err(|e| format!("{}: {e}", opts.table.display()))?;
    let prefixes: Vec<Prefix> = routes.iter().map(|(p, _)| *p).filter(Prefix::is_v4).collect();
    let (mut w, r) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
    let subnet = Prefix::V4 { addr: Ipv4Addr::new(100, 64, 0, 0), len: 24 };
    let _ = w.add_route(Source::Connected, subnet, RouteTarget::Connected { ifindex: 1 }, RouteAttrs::default());
    let gateways = opts.gateways.clamp(1, 250);
    for c in prefixes.chunks(10_000) {
        w.apply(
            c.iter()
                .map(|p| {
                    let k = (hash_prefix(p) % u64::from(gateways)) as u8 + 1;
                    let gw = IpAddr::V4(Ipv4Addr::new(100, 64, 0, k));
                    RouteOp::Add(Source::Fpm, *p, RouteTarget::Via { gw, ifindex: Some(1) }, RouteAttrs::default())
                })
                .collect::<Vec<_>>(),
        );
    }
    let raw = r.raw();
    let used = raw
        .v4
        .top
        .iter()
        .map(|e| e.get(Ordering::Relaxed))
        .fold(0u32, |m, e| if e >= raw.v4.child_base { m.max(e - raw.v4.child_base + 1) } else { m });
    let blocks = raw.v4.nodes.get(..(used as usize) << 8).unwrap_or_default();
    let f32 = Flat::<Entry32>::copy(raw.v4.top, blocks, raw.v4.child_base)?;
    let f16 = Flat::<Entry16<{ 1 << 15 }>>::copy(raw.v4.top, blocks, raw.v4.child_base)?;
    let mut rng = Rng(opts.seed | 1);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} prefixes, {used} blocks; load {}",
        prefixes.len(),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    for pat in ["covered", "zipf", "random"] {
        let keys: Vec<u32> =
            addresses(&prefixes, pat, 1 << 20, &mut rng, false).iter().map(|k| (k >> 96) as u32).collect();
        let wrong = keys.iter().filter(|&&k| f16.lookup(k) != r.lookup_v4(k) || f32.lookup(k) != r.lookup_v4(k));
        let wrong = wrong.count();
        if wrong > 0 {
            return Err(format!("{pat}: {wrong} lookups of the copies differ from tern's"));
        }
        let rounds = opts.lookups.div_ceil(keys.len()).max(1);
        let n = rounds * keys.len();
        let rate = |d: Duration| n as f64 / d.as_secs_f64().max(1e-9) / 1e6;
        let a: [(&str, &dyn Fn() -> Duration); 9] = [
            ("tern single", &|| time_single(&keys, rounds, |k| r.lookup_v4(k))),
            ("tern batch256", &|| time_batch_of::<_, 256>(&keys, rounds, |k, o| r.lookup_v4_batch(k, o))),
            ("flat u32 single", &|| time_single(&keys, rounds, |k| f32.lookup(k))),
            ("flat u32 batch256", &|| time_batch_of::<_, 256>(&keys, rounds, |k, o| f32.batch(k, o))),
            ("flat u32 batch256 pf32", &|| time_batch_of::<_, 256>(&keys, rounds, |k, o| f32.batch_pf::<32>(k, o))),
            ("flat u16 single", &|| time_single(&keys, rounds, |k| f16.lookup(k))),
            ("flat u16 batch256", &|| time_batch_of::<_, 256>(&keys, rounds, |k, o| f16.batch(k, o))),
            ("flat u16 batch256 pf16", &|| time_batch_of::<_, 256>(&keys, rounds, |k, o| f16.batch_pf::<16>(k, o))),
            ("flat u16 batch256 pf32", &|| time_batch_of::<_, 256>(&keys, rounds, |k, o| f16.batch_pf::<32>(k, o))),
        ];
        let mut got: Vec<Vec<f64>> = vec![Vec::new(); a.len()];
        // Warm both arrays' pages and TLB once.
        for (_, f) in &a {
            black_box(f());
        }
        for round in 0..alternations {
            let order: Vec<usize> = if round % 2 == 0 { (0..a.len()).collect() } else { (0..a.len()).rev().collect() };
            for i in order {
                if let (Some((_, f)), Some(g)) = (a.get(i), got.get_mut(i)) {
                    g.push(rate(f()));
                }
            }
        }
        for ((name, _), g) in a.iter().zip(&mut got) {
            let each: Vec<String> = g.iter().map(|x| format!("{x:.0}")).collect();
            g.sort_by(f64::total_cmp);
            let med = g.get(g.len() / 2).copied().unwrap_or(0.0);
            let _ = writeln!(out, "{pat:8} {name:24} median {med:6.1} M/s  [{}]", each.join(" "));
        }
    }
    let _ = writeln!(out, "load {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    Ok(out)
}

/// A copy of tern's IPv4 DIR-24-8 with entries of another width.
struct Flat<E: Entry> {
    top: Box<[E::Cell]>,
    nodes: Box<[E::Cell]>,
}

impl<E: Entry> Flat<E> {
    /// Copies tern's arrays (huge pages asked for before the copy touches
    /// them, as tern does).
    fn copy<S: Cell>(top: &[S], nodes: &[S], child: u32) -> Result<Self, String> {
        let fill = |src: &[S]| -> Result<Box<[E::Cell]>, String> {
            let dst: Box<[E::Cell]> = bytemuck::allocation::zeroed_slice_box(src.len());
            tern_intrin::advise_hugepages(&dst);
            for (d, a) in dst.iter().zip(src) {
                let e = a.get(Ordering::Relaxed);
                let (c, v) = if e >= child { (E::CHILD, e - child) } else { (0, e) };
                if v >= E::CHILD {
                    return Err(format!("entry {e:#x} does not fit"));
                }
                d.put(c + v, Ordering::Relaxed);
            }
            Ok(dst)
        };
        Ok(Flat { top: fill(top)?, nodes: fill(nodes)? })
    }

    #[inline(always)]
    fn lookup(&self, a: u32) -> u32 {
        let e = self.top.get((a >> 8) as usize).map_or(0, |x| x.get(Ordering::Acquire));
        if e < E::CHILD {
            return e;
        }
        let i = (((e - E::CHILD) as usize) << 8) | (a & 0xff) as usize;
        self.nodes.get(i).map_or(0, |x| x.get(Ordering::Acquire))
    }

    fn batch(&self, keys: &[u32], out: &mut [u32]) {
        for (o, &k) in out.iter_mut().zip(keys) {
            *o = self.lookup(k);
        }
    }

    fn batch_pf<const D: usize>(&self, keys: &[u32], out: &mut [u32]) {
        for &k in keys.iter().take(D) {
            tern_intrin::prefetch_index(&self.top, (k >> 8) as usize);
        }
        for (i, (o, &k)) in out.iter_mut().zip(keys).enumerate() {
            if let Some(a) = keys.get(i + D) {
                tern_intrin::prefetch_index(&self.top, (a >> 8) as usize);
            }
            *o = self.lookup(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::GapHist;

    #[test]
    fn gap_histogram_buckets_bound_their_values() {
        for ns in [1u64, 2, 7, 8, 9, 15, 16, 17, 1000, 1023, 1024, 99_999, 1 << 40] {
            let i = GapHist::index(ns);
            assert!(GapHist::upper(i) >= ns, "{ns} above its bucket's bound");
            assert!(i == 0 || GapHist::upper(i - 1) <= ns, "{ns} belongs to an earlier bucket");
            // Below 8 ns the buckets are powers of two (no gap is that short).
            assert!(ns < 8 || GapHist::upper(i) <= ns + ns / 8 + 1, "{ns}: bucket wider than 12.5 %");
        }
    }

    #[test]
    fn gap_quantiles_follow_the_samples() {
        let mut h = GapHist::new();
        for _ in 0..990 {
            h.record(1_000);
        }
        for _ in 0..9 {
            h.record(50_000);
        }
        h.record(5_000_000);
        assert!((1_000..=1_125).contains(&h.quantile(0.99)));
        assert!((50_000..=56_250).contains(&h.quantile(0.999)));
        assert_eq!(h.quantile(1.0), 5_000_000);
        assert_eq!(h.max, 5_000_000);
        assert_eq!(h.n, 1000);
    }
}
