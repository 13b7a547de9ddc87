//! The whole run: the ceiling chain, then every DUT, each at every frame
//! size, with the same traffic; the report at the end.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::ValueEnum;

use crate::bpf::{Generator, HoleWatch, PassProgram, Sink};
use crate::dut::{self, DutKind, Placement, Setup};
use crate::error::{BenchError, Result};
use crate::netns::{Isolation, Netns, NoIdle, cpu_count, have_program};
use crate::opts::{FlowMode, Rfc2544Opts};
use crate::pktgen::{GeneratorKind, PacketGen, TrafficGen};
use crate::progress::Progress;
use crate::report::{Conditions, DutReport, DutStatus, LoadPoint, RateReport, Report, SizeReport};
use crate::scenario::Scenario;
use crate::search::{SearchParams, frame_loss, ndr_pdr};
use crate::topology::{Chain, DUT_IN, SINK_DEV};
use crate::traffic::{FrameSize, StreamSpec, TrafficProfile};
use crate::trial::{Tester, TrialOutcome, TrialTiming};

/// Fractions of the ceiling used as frame-loss loads by default (the
/// 6WIND validation steps the load in quarters; 10 % shows the low end).
const DEFAULT_LOAD_FRACTIONS: [f64; 5] = [0.1, 0.25, 0.5, 0.75, 1.0];
/// Rate asked of the generator to find its ceiling: more than it can do.
const FLAT_OUT_PPS: f64 = 50e6;
/// Shortest lateness of the hole watch's timer logged as a hole.
const HOLE_MIN: Duration = Duration::from_micros(100);
/// Trials a search takes, roughly, for the progress estimate.
const SEARCH_TRIALS_ESTIMATE: usize = 12;

/// The scenario with the options' overrides applied.
pub fn scenario_for(opts: &Rfc2544Opts) -> Result<Scenario> {
    let mut s = opts.scenario.expand(opts.route_file.clone());
    if !opts.sizes.is_empty() {
        s.sizes = opts.sizes.iter().map(|x| FrameSize::parse(x)).collect::<Result<_>>()?;
    }
    s.needs.vlan = opts.vlan;
    // tern reads the file relative to its config, which is written to the
    // work directory: a path relative to where the tester runs must be
    // made absolute here.
    if let Some(f) = &mut s.needs.route_file
        && f.is_relative()
    {
        *f = std::path::absolute(&*f).map_err(|e| BenchError::io(format!("route file {}", f.display()), e))?;
    }
    for st in &mut s.streams {
        let f = &mut st.flows;
        if let Some(n) = opts.dst_count {
            f.dst_count = n;
            f.dst_stride = 1;
        }
        if let (Some(n), true) = (opts.src_count, st.counted) {
            f.src_count = n;
            f.src_stride = 1;
        }
        if let Some(n) = opts.ports {
            (f.sport_base, f.sport_count, f.dport_base, f.dport_count) = (1024, n, 1024, n);
        }
        if let Some(m) = opts.flow_mode {
            f.random = m == FlowMode::Random;
        }
    }
    Ok(s)
}

fn validate(opts: &Rfc2544Opts, scenario: &Scenario) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Err(BenchError::Config("needs root: it creates network namespaces and loads XDP programs".into()));
    }
    let n = cpu_count();
    for (what, c) in [("--gen-cpu", opts.gen_cpu), ("--dut-cpu", opts.dut_cpu), ("--sink-cpu", opts.sink_cpu)] {
        if c >= n {
            return Err(BenchError::Config(format!("{what} {c}: this machine has CPUs 0..{}", n - 1)));
        }
    }
    if !(opts.trial_secs > 0.0 && opts.trial_secs <= 3600.0) {
        return Err(BenchError::Config(format!("--trial-secs {}: need 0 < s <= 3600", opts.trial_secs)));
    }
    if !(opts.drain_secs >= 0.0 && opts.drain_secs <= 60.0) {
        return Err(BenchError::Config(format!("--drain-secs {}: need 0..60", opts.drain_secs)));
    }
    if !(opts.goal_width > 0.0 && opts.goal_width < 1.0) {
        return Err(BenchError::Config(format!("--goal-width {}: need 0 < w < 1", opts.goal_width)));
    }
    if opts.trials_per_load.is_multiple_of(2) {
        return Err(BenchError::Config(format!(
            "--trials-per-load {}: need an odd count (a majority decides)",
            opts.trials_per_load
        )));
    }
    if !(opts.bucket_us >= 1.0 && opts.bucket_us <= 100_000.0) {
        return Err(BenchError::Config(format!("--bucket-us {}: need 1..100000", opts.bucket_us)));
    }
    if let Some(l) = opts.loads.iter().find(|l| !(l.is_finite() && **l > 0.0)) {
        return Err(BenchError::Config(format!("--loads: {l} Mpps is not a rate")));
    }
    if let Some(m) = opts.max_mpps
        && !(m.is_finite() && m > 0.0)
    {
        return Err(BenchError::Config(format!("--max-mpps {m}: not a rate")));
    }
    if opts.excuse_host_holes && opts.hole_watch_us == 0 {
        return Err(BenchError::Config("--excuse-host-holes needs the hole watch (--hole-watch-us > 0)".into()));
    }
    if opts.dut.is_empty() {
        return Err(BenchError::Config("--dut: name at least one".into()));
    }
    for tool in ["ip", "ethtool", "sysctl"] {
        if !have_program(tool) {
            return Err(BenchError::Config(format!("`{tool}` not found: apt-get install -y iproute2 ethtool procps")));
        }
    }
    if opts.dut.contains(&DutKind::LinuxNft) && !have_program("nft") {
        return Err(BenchError::Config("linux-nft needs `nft`: apt-get install -y nftables".into()));
    }
    if let Some(f) = &scenario.needs.route_file
        && !f.is_file()
    {
        return Err(BenchError::Config(format!("route file {} not found (--route-file PATH)", f.display())));
    }
    // Every size must build (e.g. 64 B IPv6 is refused here, not mid-run).
    for size in &scenario.sizes {
        profile(scenario, *size, [0; 6], [0; 6]).slots()?;
    }
    Ok(())
}

fn profile(s: &Scenario, size: FrameSize, src_mac: [u8; 6], dst_mac: [u8; 6]) -> TrafficProfile {
    TrafficProfile { streams: s.streams.clone(), size, vlan: s.needs.vlan, src_mac, dst_mac }
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

fn cpu_model() -> String {
    read_trim("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into())
}

fn describe_stream(s: &StreamSpec) -> String {
    let f = &s.flows;
    format!(
        "{} ({}): {} src x{} (stride {}) -> {} x{} (stride {}), udp ports {}+{} -> {}+{}, {} flows, {}",
        s.label,
        if s.counted { "counted" } else { "must be dropped" },
        s.src4,
        f.src_count,
        f.src_stride,
        s.dst4,
        f.dst_count,
        f.dst_stride,
        f.sport_base,
        f.sport_count,
        f.dport_base,
        f.dport_count,
        f.flows(),
        if f.random { "random" } else { "sequential" }
    )
}

fn describe_needs(s: &Scenario) -> String {
    let mut v = vec![format!("firewall {:?}", s.needs.firewall)];
    if let Some(f) = &s.needs.route_file {
        v.push(format!("routes from {}", f.display()));
    }
    if s.needs.gre {
        v.push("GRE encapsulation to 10.10.2.2".into());
    }
    v.join(", ")
}

/// What the report says of the generator.
fn describe_generator(kind: GeneratorKind, bucket_us: f64) -> String {
    match kind {
        GeneratorKind::Afpacket => format!(
            "afpacket: the XDP generator's frames built in user space and sent through an AF_PACKET \
             socket (one send(2) each, no qdisc); paced by CLOCK_MONOTONIC (a frame is sent when \
             due), token bucket {bucket_us} us deep (64..2048 frames); slower than the XDP generator"
        ),
        GeneratorKind::Afxdp => format!(
            "afxdp: the XDP generator's frames built in user space and sent through an AF_XDP \
             socket's transmit ring (copy mode, batches of up to 64 per kick); paced by \
             CLOCK_MONOTONIC (a frame is sent when due), token bucket {bucket_us} us deep (64..2048 \
             frames); slower than the XDP generator"
        ),
        _ => format!(
            "bpf: XDP program run by BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, 65536 runs a \
             call; it paces each frame by the kernel's clock (a frame is sent when due, the page \
             dropped otherwise), token bucket {bucket_us} us deep (64..2048 frames), flushed every 64 runs"
        ),
    }
}

/// The generator `--generator` asks for, and a note when `auto` fell
/// back. The XDP generator is loaded, anchored and asked for one run with
/// live frames: a kernel that refuses it refuses it here, not mid-run.
fn pick_generator(opts: &Rfc2544Opts, prefix: &str) -> Result<(TrafficGen, Option<String>)> {
    let bpf = || -> Result<TrafficGen> {
        let mut g = Generator::load()?;
        g.anchor(&format!("{prefix}-anchor"))?;
        g.probe_live_frames()?;
        Ok(TrafficGen::Bpf(g))
    };
    match opts.generator {
        GeneratorKind::Afpacket => Ok((TrafficGen::Packet(PacketGen::af_packet()), None)),
        GeneratorKind::Afxdp => Ok((TrafficGen::Packet(PacketGen::af_xdp()), None)),
        GeneratorKind::Bpf => bpf()
            .map(|g| (g, None))
            .map_err(|e| BenchError::Bpf(format!("--generator bpf: {e} (try --generator afxdp or afpacket)"))),
        GeneratorKind::Auto => {
            let refused = match bpf() {
                Ok(g) => return Ok((g, None)),
                Err(e) => e,
            };
            match crate::pktgen::probe_af_xdp(&format!("{prefix}-xskprobe")) {
                Ok(()) => Ok((
                    TrafficGen::Packet(PacketGen::af_xdp()),
                    Some(format!(
                        "the XDP generator cannot run here ({refused}); sending from user space through \
                         an AF_XDP socket instead (--generator afxdp; slower, rates achieved are reported)"
                    )),
                )),
                Err(e) => Ok((
                    TrafficGen::Packet(PacketGen::af_packet()),
                    Some(format!(
                        "the XDP generator cannot run here ({refused}), nor an AF_XDP socket ({e}); sending \
                         from user space through AF_PACKET instead (--generator afpacket; slower, rates \
                         achieved are reported)"
                    )),
                )),
            }
        }
    }
}

struct Ctx<'a> {
    opts: &'a Rfc2544Opts,
    scenario: &'a Scenario,
    generator: TrafficGen,
    sink: Sink,
    /// The timer watching the DUT's CPU for holes.
    holes: Option<HoleWatch>,
    work_dir: PathBuf,
    tern_bin: Option<PathBuf>,
    /// Start of the names of this run's namespaces: unique per process and run.
    prefix: String,
    /// Highest rate the generator achieved per frame size on the direct chain.
    ceiling_pps: Vec<f64>,
    done: usize,
    estimate: usize,
}

fn attach_sink(sink: &mut Sink, ns: &Netns) -> Result<()> {
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter_current_thread()?;
            sink.attach(SINK_DEV)
        })
        .join()
        .map_err(|_| BenchError::Bpf("sink attach thread panicked".into()))?
    })
}

impl Ctx<'_> {
    fn timing(&self) -> TrialTiming {
        TrialTiming {
            duration: Duration::from_secs_f64(self.opts.trial_secs),
            drain: Duration::from_secs_f64(self.opts.drain_secs),
            gen_cpu: self.opts.gen_cpu,
            rt_priority: self.opts.rt_priority,
            bucket_secs: self.opts.bucket_us * 1e-6,
            dut_cpu: self.opts.dut_cpu,
            excuse_host_holes: self.opts.excuse_host_holes,
        }
    }

    /// Measures one chain; `kind` None is the direct (ceiling) chain.
    fn measure(
        &mut self,
        index: usize,
        kind: Option<DutKind>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<DutReport> {
        let name = kind.map_or("direct", DutKind::name).to_string();
        let prefix = format!("{}-{index}", self.prefix);
        let chain = Chain::build(&prefix, kind.is_some())?;
        attach_sink(&mut self.sink, &chain.sink)?;
        chain.sink.thread_napi(SINK_DEV, self.opts.sink_cpu, self.opts.rt_priority)?;
        let mut description = format!("sink NAPI thread on cpu {}", self.opts.sink_cpu);
        let mut handle = None;
        if let Some(k) = kind {
            let place = Placement { dut_cpu: self.opts.dut_cpu, rt_priority: self.opts.rt_priority };
            match dut::setup(k, &chain, &self.scenario.needs, place, self.tern_bin.as_deref(), &self.work_dir)? {
                Setup::NotSupported(reason) => {
                    return Ok(DutReport::without_results(&name, DutStatus::NotSupported, reason));
                }
                Setup::Running(h) => {
                    description = format!("{}; {description}", h.description);
                    handle = Some(h);
                }
            }
        } else {
            description = format!("generator veth straight into the sink's veth, no router; {description}");
        }
        let mut sizes = Vec::new();
        let timing = self.timing();
        let mut pass: Option<PassProgram> = None;
        let mut pass_note = false;
        // tern attaches its XDP program to the ingress veth after the
        // chain set up the veth's NAPI thread, and the attach gives the
        // veth a new NAPI context whose thread is neither pinned nor
        // SCHED_FIFO: the XDP lane then ran at normal priority beside the
        // DUT's SCHED_FIFO threads (tern's control thread loading a full
        // table) and lost frames at any rate. Once tern runs, the ingress
        // NAPI is set up again.
        // Not for a busy-polling tern: it turned the ingress NAPI's thread
        // off to drive that NAPI from its worker.
        let mut napi_again = kind.is_some_and(|k| k.tern_driver().is_some() && !k.busy_polls());
        for (size_idx, size) in self.scenario.sizes.clone().into_iter().enumerate() {
            let prof = profile(self.scenario, size, chain.gen_link.mac, chain.first_hop.mac);
            let slots = prof.slots()?;
            let flows: Vec<_> = prof.streams.iter().map(|s| s.flows).collect();
            self.generator.configure(&slots, &flows)?;
            let label = size.label();
            let mut tester = Tester {
                generator: &mut self.generator,
                sink: &mut self.sink,
                gen_ns: &chain.gen_ns,
                gen_ifindex: chain.gen_link.ifindex,
                profile: &prof,
                timing,
                holes: self.holes.as_ref(),
                dut_ns: chain.dut.as_ref(),
            };
            if size_idx == 0 {
                let wait = if kind.is_some_and(|k| k.tern_driver().is_some() || k.is_testpmd()) { 30 } else { 5 };
                let (dut_cpu, rt) = (self.opts.dut_cpu, self.opts.rt_priority);
                let r = tester.warm_up(Duration::from_secs(wait), || {
                    if let Some(h) = &mut handle {
                        h.check_alive()?;
                    }
                    // A DUT that turned GRO off and attached no XDP program
                    // (tern on AF_PACKET) left its ingress veth without the
                    // NAPI context XDP-redirected frames need.
                    if let (Some(d), None) = (&chain.dut, &pass)
                        && !d.has_rx_napi(DUT_IN)?
                    {
                        pass = Some(PassProgram::attach(d, DUT_IN)?);
                        d.thread_napi(DUT_IN, dut_cpu, rt)?;
                        pass_note = true;
                        napi_again = false;
                    }
                    if let (Some(d), true) = (&chain.dut, napi_again)
                        && d.has_rx_napi(DUT_IN)?
                    {
                        d.thread_napi(DUT_IN, dut_cpu, rt)?;
                        napi_again = false;
                    }
                    Ok(())
                });
                if let Err(e) = r {
                    if let Some(secs) = std::env::var("TERN_BENCH_KEEP_FAILED").ok().and_then(|s| s.parse().ok()) {
                        // Debugging aid: leave the chain up for inspection.
                        eprintln!("\n{name} failed ({e}); namespaces {prefix}-* kept for {secs} s");
                        std::thread::sleep(Duration::from_secs(secs));
                    }
                    let log = handle.as_ref().map(|h| h.log_tail()).unwrap_or_default();
                    let msg = if log.is_empty() { e.to_string() } else { format!("{e}; log: {log}") };
                    return Ok(DutReport { description, ..DutReport::without_results(&name, DutStatus::Failed, msg) });
                }
                if pass_note {
                    description.push_str(&format!(
                        "; XDP_PASS program on {DUT_IN} (the DUT turned GRO off, and a veth takes \
                         XDP-redirected frames only with GRO or XDP on)"
                    ));
                }
            }
            let estimate = self.estimate;
            let done = &mut self.done;
            let mut emit = |phase: &'static str, o: &TrialOutcome| {
                *done += 1;
                progress(Progress::Trial {
                    dut: name.clone(),
                    size: label.clone(),
                    phase,
                    target_mpps: o.target_pps / 1e6,
                    offered_mpps: o.offered_pps / 1e6,
                    loss_pct: o.loss_ratio() * 100.0,
                    dut_steal_ms: o.dut_steal_ms,
                    dut_hole_max_us: o.dut_holes.map(|h| h.max_ns as f64 / 1e3),
                    lost_in_holes: o.lost_in_holes,
                    into_sink: o.ring_drops.map_or(0, |r| r.into_sink),
                    done: *done,
                    estimate,
                });
            };
            let mut search_result = None;
            let mut loss_points = Vec::new();
            if kind.is_none() {
                // Ceiling first: its first trial, flat out, is the top rate.
                let top = self.opts.max_mpps.map_or(FLAT_OUT_PPS, |m| m * 1e6);
                if self.opts.no_search {
                    let o = tester.trial_for(top, timing.duration)?;
                    emit("max", &o);
                    self.ceiling_pps.push(o.offered_pps);
                } else {
                    let p = SearchParams::new(top, self.opts.goal_width)
                        .with_trials_per_load(usize::from(self.opts.trials_per_load));
                    let r = ndr_pdr(&mut tester, &p, &mut |o, _, _| emit("search", o))?;
                    self.ceiling_pps.push(r.trials.first().map_or(top, |t| t.offered_pps));
                    search_result = Some(r);
                }
            }
            let loads: Vec<f64> = if !self.opts.loads.is_empty() {
                self.opts.loads.iter().map(|m| m * 1e6).collect()
            } else {
                let top = self.ceiling_pps.get(size_idx).copied().unwrap_or(FLAT_OUT_PPS);
                let top = self.opts.max_mpps.map_or(top, |m| (m * 1e6).min(top));
                DEFAULT_LOAD_FRACTIONS.iter().map(|f| (top * f).round()).collect()
            };
            let mut tester = Tester {
                generator: &mut self.generator,
                sink: &mut self.sink,
                gen_ns: &chain.gen_ns,
                gen_ifindex: chain.gen_link.ifindex,
                profile: &prof,
                timing,
                holes: self.holes.as_ref(),
                dut_ns: chain.dut.as_ref(),
            };
            for o in frame_loss(&mut tester, &loads, &mut |o| emit("loss", o))? {
                loss_points.push(LoadPoint::from_trial(&o));
            }
            if kind.is_some() && !self.opts.no_search {
                let top = self.ceiling_pps.get(size_idx).copied().unwrap_or(FLAT_OUT_PPS);
                let top = self.opts.max_mpps.map_or(top, |m| (m * 1e6).min(top));
                let p = SearchParams::new(top, self.opts.goal_width)
                    .with_trials_per_load(usize::from(self.opts.trials_per_load));
                search_result = Some(ndr_pdr(&mut tester, &p, &mut |o, _, _| emit("search", o))?);
            }
            if let Some(h) = &mut handle {
                h.check_alive()?;
            }
            if kind.is_some() && self.scenario.needs.gre {
                // The tunnel scenario counts only if the DUT encapsulated.
                let received: u64 = loss_points.iter().flat_map(|p| &p.streams).map(|s| s.received).sum();
                let in_gre: u64 = loss_points.iter().map(|p| p.in_gre).sum();
                description.push_str(&format!(
                    "; {label}: {in_gre} of {received} frames received arrived GRE-encapsulated{}",
                    if in_gre < received { " (the DUT did NOT encapsulate them all)" } else { "" }
                ));
            }
            sizes.push(SizeReport {
                size: label.clone(),
                frame_loss: loss_points,
                ndr: search_result.as_ref().map(|r| RateReport::from(&r.ndr)),
                pdr: search_result.as_ref().map(|r| RateReport::from(&r.pdr)),
                search_trials: search_result.as_ref().map_or(0, |r| r.trials.len()),
            });
        }
        let _ = self.sink.detach();
        if let Some(c) = handle.as_ref().and_then(|h| h.counters()) {
            description.push_str(&format!("; {c}"));
        }
        drop(handle);
        drop(pass);
        Ok(DutReport { name, description, status: DutStatus::Ok, message: None, sizes })
    }
}

/// Runs started in this process, to name their namespaces apart.
static RUNS: AtomicUsize = AtomicUsize::new(0);

/// Runs the RFC 2544 tests of `opts` and returns the report. `progress`
/// hears about every DUT and trial (see [`crate::progress::StderrBar`]).
pub fn run(opts: &Rfc2544Opts, progress: &mut dyn FnMut(Progress)) -> Result<Report> {
    let scenario = scenario_for(opts)?;
    validate(opts, &scenario)?;
    // Before anything is made: a generator the kernel refuses leaves no
    // work directory behind.
    let prefix = format!("tb{}r{}", std::process::id(), RUNS.fetch_add(1, Ordering::Relaxed));
    let (generator, generator_note) = pick_generator(opts, &prefix)?;
    if let Some(n) = &generator_note {
        eprintln!("tern-bench: {n}");
    }
    let work_dir = match &opts.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("tern-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work_dir).map_err(|e| BenchError::io(format!("create {}", work_dir.display()), e))?;
    // Without --tern-bin: the `tern` beside this program (cargo builds
    // both into the same directory), or this program if it is tern.
    let tern_bin = opts.tern_bin.clone().or_else(|| {
        let exe = std::env::current_exe().ok()?;
        if exe.file_name()? == "tern" {
            return Some(exe);
        }
        let beside = exe.with_file_name("tern");
        beside.is_file().then_some(beside)
    });
    // The DUT's CPU and the sink's (when it has its own) only poll when
    // idle, for the run (see NoIdle); the generator's CPU never idles.
    let mut no_idle = Vec::new();
    let mut own_cpus = vec![opts.dut_cpu, opts.sink_cpu];
    own_cpus.retain(|&c| c != opts.gen_cpu);
    own_cpus.dedup();
    // Nothing else runs there either (see Isolation).
    let isolation = if opts.no_isolate { None } else { Some(Isolation::hold(&own_cpus)?) };
    if !opts.allow_idle {
        for c in own_cpus.iter().copied() {
            if let Some(g) = NoIdle::hold(c)? {
                no_idle.push((c, g));
            }
        }
    }
    // Holes in the DUT CPU's time: a timer pinned to it that logs late ticks.
    let mut notes = Vec::new();
    let holes = if opts.hole_watch_us == 0 {
        None
    } else {
        let period = Duration::from_micros(u64::from(opts.hole_watch_us));
        match HoleWatch::start(opts.dut_cpu, period, HOLE_MIN.min(period)) {
            Ok(w) => Some(w),
            Err(e) if !opts.excuse_host_holes => {
                let note = format!("no hole watch on cpu {} (losses are not matched to host holes): {e}", opts.dut_cpu);
                eprintln!("tern-bench: {note}");
                notes.push(note);
                None
            }
            Err(e) => return Err(BenchError::Config(format!("--excuse-host-holes needs the hole watch: {e}"))),
        }
    };
    notes.extend(generator_note);
    let started_unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let conditions = Conditions {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        started_unix,
        kernel: read_trim("/proc/sys/kernel/osrelease"),
        cpu_model: cpu_model(),
        cpus: cpu_count(),
        gen_cpu: opts.gen_cpu,
        dut_cpu: opts.dut_cpu,
        sink_cpu: opts.sink_cpu,
        rt_priority: opts.rt_priority,
        trial_secs: opts.trial_secs,
        drain_secs: opts.drain_secs,
        goal_width: opts.goal_width,
        pdr_loss: 0.005,
        trials_per_load: usize::from(opts.trials_per_load),
        generator: describe_generator(generator.kind(), opts.bucket_us),
        generator_kind: generator.kind(),
        notes,
        no_idle_cpus: no_idle.iter().map(|(c, _)| *c).collect(),
        isolated_cpus: if isolation.is_some() { own_cpus.clone() } else { Vec::new() },
        tasks_moved: isolation.as_ref().map_or(0, Isolation::moved),
        hole_watch_us: holes.as_ref().map(|w| w.period().as_secs_f64() * 1e6),
        excuse_host_holes: opts.excuse_host_holes,
        receiver: "XDP program on the sink's veth: per-stream counters, 1024-frame sequence \
                   window, latency histogram; frames dropped after counting"
            .into(),
        traffic: scenario.streams.iter().map(describe_stream).collect(),
        vlan: opts.vlan,
        dut_config: describe_needs(&scenario),
        loadavg: read_trim("/proc/loadavg"),
    };
    let per_chain = scenario.sizes.len()
        * (if opts.loads.is_empty() { DEFAULT_LOAD_FRACTIONS.len() } else { opts.loads.len() }
            + if opts.no_search { 1 } else { SEARCH_TRIALS_ESTIMATE * (1 + usize::from(opts.trials_per_load)) / 2 });
    let mut ctx = Ctx {
        opts,
        scenario: &scenario,
        generator,
        sink: Sink::load()?,
        holes,
        work_dir,
        tern_bin,
        prefix,
        ceiling_pps: Vec::new(),
        done: 0,
        estimate: per_chain * (opts.dut.len() + 1),
    };
    progress(Progress::Dut { name: "direct".into() });
    let ceiling = ctx.measure(0, None, progress)?;
    let mut duts = Vec::new();
    let mut seen = Vec::new();
    for (i, &k) in opts.dut.iter().enumerate() {
        if seen.contains(&k) {
            continue;
        }
        seen.push(k);
        progress(Progress::Dut { name: k.name().into() });
        let r = match ctx.measure(i + 1, Some(k), progress) {
            Ok(r) => r,
            Err(e) => DutReport::without_results(k.name(), DutStatus::Failed, e.to_string()),
        };
        if r.status != DutStatus::Ok {
            progress(Progress::Skipped { name: r.name.clone(), reason: r.message.clone().unwrap_or_default() });
        }
        duts.push(r);
    }
    // A work directory we made ourselves goes away unless a DUT failed
    // (its config and log are the first thing to look at then) or a report
    // names a config file in it (tern's).
    let keep =
        duts.iter().any(|d| d.status == DutStatus::Failed || d.description.contains(&*ctx.work_dir.to_string_lossy()));
    if opts.work_dir.is_none() && !keep {
        let _ = std::fs::remove_dir_all(&ctx.work_dir);
    }
    Ok(Report {
        scenario: opts
            .scenario
            .to_possible_value()
            .map_or_else(|| format!("{:?}", opts.scenario), |v| v.get_name().to_string()),
        description: scenario.description.clone(),
        conditions,
        ceiling,
        duts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        opts: Rfc2544Opts,
    }

    /// A relative --route-file reaches the DUTs as an absolute path: tern
    /// reads it relative to its config in the work directory, not to where
    /// the tester was started.
    #[test]
    fn a_relative_route_file_is_made_absolute() {
        let cli = Cli::try_parse_from(["t", "--scenario", "900k-routes-50fw", "--route-file", "../data/table.txt.gz"])
            .expect("options");
        let s = scenario_for(&cli.opts).expect("scenario");
        let f = s.needs.route_file.expect("a route file");
        assert!(f.is_absolute(), "{}", f.display());
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(f, cwd.join("../data/table.txt.gz"));
    }
}
