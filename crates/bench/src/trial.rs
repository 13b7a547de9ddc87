//! One trial: send at a rate for a fixed time, wait for the last frames,
//! read what the sink counted.
//!
//! The offered rate is held inside the generator's XDP program: it sends a
//! frame whenever one is due at the rate asked for, by the kernel's clock,
//! and drops the page otherwise, from a token bucket of bounded depth. When
//! the machine cannot keep up, the frames due beyond the bucket are skipped,
//! so the offered load never comes in catch-up bursts; the rate actually
//! achieved is measured and reported beside the rate asked for. The AF_XDP
//! and AF_PACKET generators (crate::pktgen), used where the kernel refuses
//! the XDP one, keep the same bucket in user space.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::account::StreamResult;
use crate::bpf::{Gap, Hole, HoleStats, HoleWatch, MAX_PACED_PPS, PaceProgress, Sink};
use crate::error::{BenchError, Result};
use crate::netns::{Netns, current_tid, pin_current_thread, set_fifo};
use crate::pktgen::TrafficGen;
use crate::topology::{DUT_OUT, GEN_DEV};
use crate::traffic::{StreamSpec, TrafficProfile};

/// Timing of trials.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrialTiming {
    /// Sending time of one trial (RFC 2544 section 24 says 60 s; shorter
    /// trials trade precision for time).
    pub duration: Duration,
    /// Longest wait for frames still in flight after the last one is sent
    /// (RFC 2544 section 23: about two seconds).
    pub drain: Duration,
    /// CPU the generator thread runs on.
    pub gen_cpu: usize,
    /// SCHED_FIFO priority of the generator thread (0: normal scheduling).
    pub rt_priority: u8,
    /// Depth of the token bucket, in seconds of tokens.
    pub bucket_secs: f64,
    /// CPU of the DUT, whose steal time each trial reports.
    pub dut_cpu: usize,
    /// Judge trials (the searches' verdicts) by the frames lost outside
    /// host holes ([`TrialOutcome::lost_in_holes`]); false: by every frame
    /// lost, as RFC 2544 says.
    pub excuse_host_holes: bool,
}

/// Frames the DUT's ingress ring holds: a veth's receive ring is fixed at
/// 256 frames (drivers/net/veth.c, VETH_RING_SIZE), and every DUT of the
/// rig reads its frames from one.
pub const RING_FRAMES: f64 = 256.0;

/// The measured outcome of one trial.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialOutcome {
    /// Rate asked for, frames/s.
    pub target_pps: f64,
    /// Rate achieved by the generator, frames/s.
    pub offered_pps: f64,
    /// Sending time actually taken, s.
    pub seconds: f64,
    /// Frames sent in the streams that count.
    pub sent: u64,
    /// Of those, frames lost.
    pub lost: u64,
    /// Per stream detail.
    pub streams: Vec<StreamResult>,
    /// Frames counted at the sink that arrived GRE-encapsulated.
    pub in_gre: u64,
    /// Time the hypervisor kept the DUT's CPU from running while the
    /// trial sent, ms (/proc/stat steal, 10 ms ticks; `None` where the
    /// kernel does not count it).
    pub dut_steal_ms: Option<f64>,
    /// Time the DUT's CPU was busy while the trial sent, ms (/proc/stat
    /// user + nice + system + irq + softirq, 10 ms ticks): on the isolated
    /// CPU, the DUT's own work (its threads, its NAPI threads, softirq).
    pub dut_busy_ms: Option<f64>,
    /// Holes in the DUT CPU's time while the trial sent (a timer on that
    /// CPU that came late: the CPU ran nothing, on a VM because the host
    /// did not run it); `None` without a hole watch.
    pub dut_holes: Option<HoleStats>,
    /// Of the frames lost, those lost right after a hole in the DUT CPU's
    /// time longer than the DUT's receive ring lasts at the offered rate
    /// ([`lost_in_holes`]); `None` without a hole watch.
    pub lost_in_holes: Option<u64>,
    /// The frames lost that judge the trial: `lost`, or with
    /// `--excuse-host-holes` those not lost in host holes.
    pub judged_lost: u64,
    /// Where frames were refused on the way (`None`: not read).
    pub ring_drops: Option<RingDrops>,
}

/// How long the DUT's ingress ring lasts at `rate_pps`, ns: a DUT that
/// does not run for longer loses frames, whatever it is.
pub fn ring_ns(rate_pps: f64) -> f64 {
    if rate_pps > 0.0 { RING_FRAMES / rate_pps * 1e9 } else { f64::INFINITY }
}

impl TrialOutcome {
    /// `judged_lost` / sent: what the searches judge the trial by.
    pub fn judged_loss_ratio(&self) -> f64 {
        if self.sent == 0 { 0.0 } else { self.judged_lost.min(self.sent) as f64 / self.sent as f64 }
    }

    /// Lost / sent over the counted streams (0 when nothing was sent).
    pub fn loss_ratio(&self) -> f64 {
        if self.sent == 0 { 0.0 } else { self.lost as f64 / self.sent as f64 }
    }

    /// Frames/s the DUT forwarded in the counted streams.
    pub fn forwarded_pps(&self) -> f64 {
        if self.seconds <= 0.0 || self.sent == 0 {
            return 0.0;
        }
        let fwd = self.sent.saturating_sub(self.lost) as f64;
        self.offered_pps * fwd / self.sent as f64
    }
}

/// Something that runs a trial at a rate: the real chain, or a simulated
/// DUT in tests.
pub trait TrialRunner {
    /// Runs one trial at `rate_pps` frames/s.
    fn trial(&mut self, rate_pps: f64) -> Result<TrialOutcome>;
}

/// The generator and sink bound to one chain.
pub struct Tester<'a> {
    /// The generator, configured with the profile's slots.
    pub generator: &'a mut TrafficGen,
    /// Sink program, attached to the chain's sink.
    pub sink: &'a mut Sink,
    /// Namespace the generator sends from.
    pub gen_ns: &'a Netns,
    /// Index of the generator's device in it.
    pub gen_ifindex: u32,
    /// The traffic.
    pub profile: &'a TrafficProfile,
    /// Timing.
    pub timing: TrialTiming,
    /// The watch on the DUT's CPU, if any.
    pub holes: Option<&'a HoleWatch>,
    /// The DUT's namespace (`None`: the direct chain), whose egress veth
    /// counts the frames the sink's ring refused.
    pub dut_ns: Option<&'a Netns>,
}

/// Frames the veth rings on the way refused during a trial (all streams,
/// and whatever else the devices sent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RingDrops {
    /// The DUT's receive ring was full: the generator's veth could not
    /// hand it the frame (TX dropped of the generator's veth).
    pub into_dut: u64,
    /// The sink's receive ring was full: the DUT's egress veth could not
    /// hand it the frame (TX dropped of the DUT's egress veth; the sink,
    /// not the DUT, fell behind).
    pub into_sink: u64,
}

/// Runs of the program per BPF_PROG_TEST_RUN call. The program sends only
/// the frames due and drops the other pages (struct gen_pace in
/// bpf/common.h), so a call lasts this many runs of a few tens of ns (a few
/// ms), longer at high rates; a trial ends on the program's frame count,
/// not on a call's. Few, long calls matter: each call registers a page pool
/// under a memory model id, one destroyed with frames still in flight (the
/// usual case with a DUT on another CPU) stays registered a second more,
/// and the kernel walks every registered one whenever one goes away. With a
/// call per burst of 64-2048 frames (thousands a second) that walk
/// (mem_allocator_disconnect) took half of the generator's CPU and its rate
/// fell to half of the rate asked for, more so from trial to trial.
const RUNS_PER_CALL: u32 = 1 << 16;

/// Depth of the token bucket at `rate_pps` for a depth of `secs`: a
/// generator delayed (by the scheduler, or the hypervisor) skips the frames
/// due beyond it instead of catching up with a burst that no real sender
/// would emit and that would overflow the DUT's receive ring. The rate
/// achieved is reported.
pub fn bucket_depth(rate_pps: f64, secs: f64) -> u64 {
    ((rate_pps * secs) as u64).clamp(MIN_DEPTH, MAX_DEPTH)
}
/// Smallest bucket depth (frames).
const MIN_DEPTH: u64 = 64;
/// Largest bucket depth (frames).
const MAX_DEPTH: u64 = 2048;

/// Ticks per second of /proc/stat's counters (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// Steal time of `cpu` so far, in USER_HZ ticks (the 8th counter of its
/// line in /proc/stat), or `None` when unreadable.
pub fn cpu_steal_ticks(cpu: usize) -> Option<u64> {
    cpu_ticks(cpu).map(|t| t.steal)
}

/// One CPU's /proc/stat counters that the trials read, in USER_HZ ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq: running anything.
    pub busy: u64,
    pub steal: u64,
}

/// `cpu`'s counters so far, or `None` when unreadable.
pub fn cpu_ticks(cpu: usize) -> Option<CpuTicks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_ticks(&stat, cpu)
}

fn parse_cpu_ticks(stat: &str, cpu: usize) -> Option<CpuTicks> {
    let name = format!("cpu{cpu}");
    let line = stat.lines().find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    let f: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal ...
    let at = |i: usize| f.get(i).copied();
    Some(CpuTicks { busy: at(0)? + at(1)? + at(2)? + at(5)? + at(6)?, steal: at(7)? })
}

fn ticks_ms(a: u64, b: u64) -> f64 {
    b.saturating_sub(a) as f64 * 1000.0 / USER_HZ
}

/// Frames per xdp_do_flush inside a call (the kernel caps it at 256): how
/// long a sent frame can wait in the generator, in runs of the program.
const FLUSH_BATCH: u32 = 64;

impl Tester<'_> {
    fn streams(&self) -> &[StreamSpec] {
        &self.profile.streams
    }

    /// Sends at `rate_pps` for `duration` from the generator namespace,
    /// returning where the paced run ended.
    fn generate(&mut self, rate_pps: f64, duration: Duration) -> Result<PaceProgress> {
        let rate_pps = rate_pps.min(MAX_PACED_PPS);
        let total = (rate_pps * duration.as_secs_f64()).round() as u64;
        let depth = bucket_depth(rate_pps, self.timing.bucket_secs);
        let deadline = duration.mul_f64(1.01) + Duration::from_millis(5);
        let ns = self.gen_ns;
        let cpu = self.timing.gen_cpu;
        let rt = self.timing.rt_priority;
        let generator = match &mut *self.generator {
            TrafficGen::Bpf(g) => g,
            TrafficGen::Packet(g) => {
                return g.run(ns, GEN_DEV, rate_pps, total, depth, deadline, cpu, rt).map(|(p, _)| p);
            }
        };
        generator.pace(rate_pps, total, depth)?;
        let buf = vec![0u8; self.profile.max_frame_len()];
        let generator = &*generator;
        let ifindex = self.gen_ifindex;
        std::thread::scope(|s| {
            s.spawn(move || -> Result<PaceProgress> {
                ns.enter_current_thread()?;
                pin_current_thread(cpu)?;
                set_fifo(current_tid(), rt, false)?;
                let start = Instant::now();
                loop {
                    generator.send(ifindex, &buf, RUNS_PER_CALL, FLUSH_BATCH)?;
                    let p = generator.pace_progress()?;
                    if p.consumed() >= total || start.elapsed() > deadline {
                        // Past the deadline: the generator could not keep up.
                        return Ok(p);
                    }
                    // Let a real-time NAPI thread sharing this CPU drain
                    // its ring (under normal scheduling this would hand
                    // the CPU to any other process instead).
                    if rt > 0 {
                        std::thread::yield_now();
                    }
                }
            })
            .join()
            .map_err(|_| BenchError::Bpf("generator thread panicked".into()))?
        })
    }

    /// Waits until every counted frame has arrived, nothing has arrived
    /// for 100 ms, or the drain time is over.
    fn drain(&mut self, sent_counted: u64) -> Result<()> {
        let n = self.streams().len();
        let start = Instant::now();
        let mut last = u64::MAX;
        let mut last_change = Instant::now();
        while start.elapsed() < self.timing.drain {
            let rx = self.sink.streams(n)?;
            let got: u64 = rx
                .iter()
                .zip(self.streams())
                .filter(|(_, s)| s.counted)
                .map(|(r, _)| r.received.saturating_sub(r.dup))
                .sum();
            if got >= sent_counted {
                return Ok(());
            }
            if got != last {
                last = got;
                last_change = Instant::now();
            } else if last_change.elapsed() > Duration::from_millis(100) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Runs one trial of `duration`.
    pub fn trial_for(&mut self, rate_pps: f64, duration: Duration) -> Result<TrialOutcome> {
        if !(rate_pps.is_finite() && rate_pps > 0.0) {
            return Err(BenchError::Config(format!("rate {rate_pps} frames/s")));
        }
        self.generator.reset()?;
        self.sink.reset()?;
        // Tasks started since the last trial leave the DUT's CPU too.
        crate::netns::Isolation::refresh();
        let rings0 = self.ring_drops();
        let cpu0 = cpu_ticks(self.timing.dut_cpu);
        let pace = self.generate(rate_pps, duration)?;
        let seconds = pace.seconds(rate_pps.min(MAX_PACED_PPS));
        let cpu1 = cpu_ticks(self.timing.dut_cpu);
        // Frames still in the ring after the last one was sent need the
        // DUT for up to a ring's time more.
        let tail_ns = ring_ns(rate_pps) as u64;
        let window = (pace.start_ns, pace.last_ns + tail_ns);
        let counters = self.generator.counters()?;
        let counted_sent: u64 =
            counters.per_stream.iter().zip(self.streams()).filter(|(_, s)| s.counted).map(|(n, _)| *n).sum();
        self.drain(counted_sent)?;
        // After the drain: the window's tail is over.
        let holes = match self.holes {
            Some(w) if pace.sent > 0 => Some(w.log()?),
            _ => None,
        };
        let ring_drops = rings0.zip(self.ring_drops()).map(|(a, b)| RingDrops {
            into_dut: b.into_dut.saturating_sub(a.into_dut),
            into_sink: b.into_sink.saturating_sub(a.into_sink),
        });
        let rx = self.sink.streams(self.streams().len())?;
        let in_gre = self.sink.misc()?.in_gre;
        let streams: Vec<StreamResult> = self
            .streams()
            .iter()
            .zip(&rx)
            .zip(&counters.per_stream)
            .map(|((spec, r), &sent)| StreamResult::new(&spec.label, spec.counted, sent, r))
            .collect();
        let (sent, lost) = streams.iter().filter(|s| s.counted).fold((0, 0), |(a, b), s| (a + s.sent, b + s.lost));
        let offered_pps = if seconds > 0.0 { counters.sent as f64 / seconds } else { 0.0 };
        let dut_holes = holes.as_ref().map(|h| h.stats_between(window.0, window.1));
        let lost_in_holes = match &holes {
            Some(h) if lost > 0 && offered_pps > 0.0 => {
                let counted: Vec<bool> = self.streams().iter().map(|s| s.counted).collect();
                let gaps = self.sink.gaps()?;
                Some(
                    lost_in_holes(&gaps.gaps, &counted, &h.between(window.0, window.1), ring_ns(offered_pps)).min(lost),
                )
            }
            Some(_) => Some(0),
            None => None,
        };
        let judged_lost = match (self.timing.excuse_host_holes, lost_in_holes) {
            (true, Some(n)) => lost - n,
            _ => lost,
        };
        Ok(TrialOutcome {
            target_pps: rate_pps,
            offered_pps,
            seconds,
            sent,
            lost,
            streams,
            in_gre,
            dut_steal_ms: cpu0.zip(cpu1).map(|(a, b)| ticks_ms(a.steal, b.steal)),
            dut_busy_ms: cpu0.zip(cpu1).map(|(a, b)| ticks_ms(a.busy, b.busy)),
            dut_holes,
            lost_in_holes,
            judged_lost,
            ring_drops,
        })
    }

    /// The rings' drop counters so far (`None` if unreadable).
    fn ring_drops(&self) -> Option<RingDrops> {
        let into_dut = self.gen_ns.tx_dropped(GEN_DEV).ok()?;
        let into_sink = match self.dut_ns {
            Some(ns) => ns.tx_dropped(DUT_OUT).ok()?,
            None => 0,
        };
        Some(RingDrops { into_dut, into_sink })
    }

    /// Sends a little traffic until the sink sees it (the DUT has
    /// resolved its neighbours and is forwarding), RFC 2544 section 23's
    /// learning frames. Fails after `timeout`.
    pub fn warm_up(&mut self, timeout: Duration, mut alive: impl FnMut() -> Result<()>) -> Result<()> {
        let start = Instant::now();
        loop {
            alive()?;
            let o = self.trial_for(20_000.0, Duration::from_millis(100))?;
            if o.sent > 0 && o.lost < o.sent {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(BenchError::Dut(format!(
                    "nothing forwarded after {:.0} s of learning traffic",
                    timeout.as_secs_f64()
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl TrialRunner for Tester<'_> {
    fn trial(&mut self, rate_pps: f64) -> Result<TrialOutcome> {
        self.trial_for(rate_pps, self.timing.duration)
    }
}

/// How long before a hole's measured end a gap may come and still be the
/// hole's: the tick that measures the hole can come a little after the
/// DUT's first frames do.
const GAP_BEFORE_HOLE_END_NS: u64 = 1_000_000;
/// How long after a hole's end the gap it caused reaches the sink: the DUT
/// first forwards the full ring it kept (256 frames), then the frame after
/// the ones it had to drop. 5 ms covers 256 frames at 20 us each.
const GAP_AFTER_HOLE_END_NS: u64 = 5_000_000;

/// Frames of counted streams that the sink saw missing right after a hole
/// in the DUT CPU's time at least `ring_ns` long: when the DUT does not run
/// for longer than its receive ring lasts, the ring overflows whatever the
/// DUT is, and the first frame the sink sees after the frames the ring
/// kept comes with a gap. `counted[s]`: stream s counts.
pub fn lost_in_holes(gaps: &[Gap], counted: &[bool], holes: &[Hole], ring_ns: f64) -> u64 {
    let long: Vec<&Hole> = holes.iter().filter(|h| h.len_ns as f64 >= ring_ns).collect();
    gaps.iter()
        .filter(|g| counted.get(g.stream as usize).copied().unwrap_or(false))
        .filter(|g| {
            long.iter()
                .any(|h| g.at_ns + GAP_BEFORE_HOLE_END_NS >= h.end_ns && g.at_ns <= h.end_ns + GAP_AFTER_HOLE_END_NS)
        })
        .map(|g| u64::from(g.missing))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap(at_ms: f64, stream: u32, missing: u32) -> Gap {
        Gap { at_ns: (at_ms * 1e6) as u64, stream, missing }
    }

    fn hole(end_ms: f64, len_ms: f64) -> Hole {
        Hole { end_ns: (end_ms * 1e6) as u64, len_ns: (len_ms * 1e6) as u64, busy: false }
    }

    #[test]
    fn hole_statistics_count_idle_holes_and_keep_busy_ones_apart() {
        use crate::bpf::HoleLog;
        let busy = |end_ms: f64, len_ms: f64| Hole { busy: true, ..hole(end_ms, len_ms) };
        let log =
            HoleLog { holes: vec![hole(10.0, 1.0), busy(20.0, 3.0), hole(30.0, 2.0), hole(90.0, 5.0)], wrapped: false };
        let s = log.stats_between(9_500_000, 50_000_000);
        assert_eq!((s.count, s.max_ns, s.sum_ns, s.busy_max_ns), (2, 2_000_000, 3_000_000, 3_000_000));
        assert!(!s.incomplete);
        // A hole that ends after the window but began inside it counts.
        assert_eq!(log.stats_between(86_000_000, 87_000_000).count, 1);
        // A wrapped log whose oldest entry is inside the window may miss some.
        let wrapped = HoleLog { wrapped: true, ..log.clone() };
        assert!(wrapped.stats_between(0, 100_000_000).incomplete);
        assert!(!wrapped.stats_between(15_000_000, 100_000_000).incomplete);
        // Only idle holes excuse a loss.
        assert_eq!(log.between(19_000_000, 21_000_000), vec![]);
    }

    #[test]
    fn only_gaps_right_after_a_hole_longer_than_the_ring_are_excused() {
        let counted = [true, false];
        let ring_ns = 1e6; // 256 frames at 256,000 frames/s
        let holes = [hole(100.0, 2.0), hole(200.0, 0.5), hole(300.0, 1.0)];
        // Right after a long hole (up to 5 ms later): excused.
        assert_eq!(lost_in_holes(&[gap(100.2, 0, 40)], &counted, &holes, ring_ns), 40);
        assert_eq!(lost_in_holes(&[gap(104.9, 0, 40)], &counted, &holes, ring_ns), 40);
        // A hole exactly as long as the ring lasts counts.
        assert_eq!(lost_in_holes(&[gap(300.5, 0, 9)], &counted, &holes, ring_ns), 9);
        // Too late after it, or before it: the DUT's own loss.
        assert_eq!(lost_in_holes(&[gap(106.0, 0, 40)], &counted, &holes, ring_ns), 0);
        assert_eq!(lost_in_holes(&[gap(98.0, 0, 40)], &counted, &holes, ring_ns), 0);
        // After a hole shorter than the ring lasts: the DUT's.
        assert_eq!(lost_in_holes(&[gap(200.1, 0, 40)], &counted, &holes, ring_ns), 0);
        // Streams that do not count are not counted.
        assert_eq!(lost_in_holes(&[gap(100.1, 1, 40), gap(100.2, 7, 3)], &counted, &holes, ring_ns), 0);
        // A mix: only the excused part adds up.
        let gaps = [gap(50.0, 0, 1), gap(100.1, 0, 30), gap(101.0, 0, 5), gap(150.0, 0, 2), gap(300.2, 0, 7)];
        assert_eq!(lost_in_holes(&gaps, &counted, &holes, ring_ns), 42);
        // At twice the rate the ring lasts half as long: the 0.5 ms hole counts.
        assert_eq!(lost_in_holes(&[gap(200.1, 0, 4)], &counted, &holes, ring_ns / 2.0), 4);
        assert_eq!(lost_in_holes(&[gap(100.1, 0, 4)], &counted, &[], ring_ns), 0);
    }

    #[test]
    fn cpu_lines_parse_into_busy_and_steal() {
        let stat = "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 10 1 20 500 7 3 4 6 0 0\ncpu1 1 2 3 4 5 6 7 8 0 0\nintr 1 2\n";
        assert_eq!(parse_cpu_ticks(stat, 0), Some(CpuTicks { busy: 10 + 1 + 20 + 3 + 4, steal: 6 }));
        assert_eq!(parse_cpu_ticks(stat, 1), Some(CpuTicks { busy: 1 + 2 + 3 + 6 + 7, steal: 8 }));
        assert_eq!(parse_cpu_ticks(stat, 2), None);
        assert_eq!(parse_cpu_ticks("cpu0 1 2 3\n", 0), None, "too few counters");
        assert_eq!(parse_cpu_ticks("cpu0 1 2 x 4 5 6 7 8\n", 0), None, "not a number");
        assert_eq!(ticks_ms(100, 150), 500.0);
        assert_eq!(ticks_ms(150, 100), 0.0, "never negative");
    }

    #[test]
    fn steal_is_read_per_cpu_and_only_for_cpus_that_exist() {
        let before = cpu_steal_ticks(0).expect("cpu0 has a line in /proc/stat with a steal counter");
        let after = cpu_steal_ticks(0).expect("still there");
        assert!(after >= before, "steal only grows");
        assert_eq!(cpu_steal_ticks(1 << 20), None, "no such CPU");
        // "cpu" (the sum line) is not "cpu0"'s prefix match.
        let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
        let total: u64 = stat
            .lines()
            .find(|l| l.starts_with("cpu "))
            .and_then(|l| l.split_whitespace().nth(8))
            .and_then(|v| v.parse().ok())
            .expect("sum line");
        assert!(total >= before);
    }
}
