//! The report: every figure with the conditions it was measured under,
//! printed as the 100GE comparison's table (loss % per DUT per offered
//! load, plus NDR and PDR), serialised to JSON, or written as HTML.

use std::fmt;

use serde::Serialize;

use crate::account::{Latency, StreamResult};
use crate::search::Bound;
use crate::trial::TrialOutcome;

/// Conditions of the run, written into every report (STYLE.md: state
/// packet size, flows, rules, routes, cores, and the peer measured in the
/// same run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conditions {
    /// The command or options that produced the report.
    pub command: String,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
    /// `uname -r`.
    pub kernel: String,
    /// CPU model name.
    pub cpu_model: String,
    /// CPUs available.
    pub cpus: usize,
    /// CPU of the generator thread.
    pub gen_cpu: usize,
    /// CPU of the DUT (its worker, or its ingress NAPI thread).
    pub dut_cpu: usize,
    /// CPU of the sink's NAPI thread.
    pub sink_cpu: usize,
    /// SCHED_FIFO priority of the data-path threads (0: normal).
    pub rt_priority: u8,
    /// Trial length, s.
    pub trial_secs: f64,
    /// Longest wait for in-flight frames after a trial, s.
    pub drain_secs: f64,
    /// Search goal width, relative to the highest rate.
    pub goal_width: f64,
    /// PDR loss ratio.
    pub pdr_loss: f64,
    /// Trials per load of the searches; a load meets a target when most
    /// of them do (1: RFC 2544).
    pub trials_per_load: usize,
    /// How frames are generated.
    pub generator: String,
    /// Which generator sent them (`bpf` or `afpacket`).
    pub generator_kind: crate::pktgen::GeneratorKind,
    /// What the run could not do as asked and did instead (a generator
    /// the kernel refused, a hole watch that could not start).
    pub notes: Vec<String>,
    /// CPUs kept out of idle states during the run (PM QoS).
    pub no_idle_cpus: Vec<usize>,
    /// CPUs every other movable task was moved off for the run.
    pub isolated_cpus: Vec<usize>,
    /// Tasks moved off them.
    pub tasks_moved: usize,
    /// Period of the timer that watches the DUT's CPU for holes, us
    /// (`None`: not watched).
    pub hole_watch_us: Option<f64>,
    /// The searches judged trials by the frames lost outside host holes
    /// (false: every frame lost counts, RFC 2544).
    pub excuse_host_holes: bool,
    /// How frames are counted.
    pub receiver: String,
    /// The traffic: streams and flows.
    pub traffic: Vec<String>,
    /// 802.1Q tag on every frame.
    pub vlan: Option<u16>,
    /// What every DUT was asked to do (rules, routes, tunnel).
    pub dut_config: String,
    /// Load average when the run started (other work on the machine skews figures).
    pub loadavg: String,
}

/// One point of the frame-loss test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadPoint {
    /// Rate asked for, Mpps.
    pub target_mpps: f64,
    /// Rate the generator achieved, Mpps.
    pub offered_mpps: f64,
    /// Loss of the counted streams, %.
    pub loss_pct: f64,
    /// Frames of counted streams sent.
    pub sent: u64,
    /// Of those, lost.
    pub lost: u64,
    /// Reordered frames (all streams).
    pub reordered: u64,
    /// Duplicated frames (all streams).
    pub duplicated: u64,
    /// Frames of streams meant to be dropped that came through.
    pub leaked: u64,
    /// Latency of the first counted stream.
    pub latency: Option<Latency>,
    /// Every stream's detail (received, lost, reordered, duplicated, latency).
    pub streams: Vec<StreamResult>,
    /// Frames received inside GRE (the tunnel scenario checks the DUT
    /// really encapsulated).
    pub in_gre: u64,
    /// Steal time of the DUT's CPU during the trial, ms (10 ms ticks).
    pub dut_steal_ms: Option<f64>,
    /// The DUT's CPU time per frame it took in, ns: everything the
    /// isolated DUT CPU ran during the trial (the DUT's threads, its NAPI
    /// threads and softirq; /proc/stat, 10 ms ticks) over the frames the
    /// generator sent less those the DUT's full receive ring refused (the
    /// DUT never saw them); frames it dropped itself count. A DUT that
    /// busy-polls keeps its CPU at 100 % whatever the load.
    pub dut_cpu_ns_per_frame: Option<f64>,
    /// Holes in the DUT CPU's time during the trial (see `--hole-watch-us`).
    pub dut_holes: Option<u64>,
    /// The longest of them, us.
    pub dut_hole_max_us: Option<f64>,
    /// The latest tick of the hole watch that found the DUT's CPU busy, us
    /// (not provably a hole: see `HoleStats::busy_max_ns`).
    pub dut_busy_late_max_us: Option<f64>,
    /// Of the frames lost, those lost right after a hole in the DUT CPU's
    /// time longer than its ring lasts.
    pub lost_in_holes: Option<u64>,
    /// Frames the veth rings refused on the way: into the DUT (its
    /// receive ring full) and into the sink (the sink's ring full: the
    /// rig, not the DUT, fell behind).
    pub ring_drops: Option<crate::trial::RingDrops>,
}

impl LoadPoint {
    /// Summarises a trial.
    pub fn from_trial(t: &TrialOutcome) -> Self {
        LoadPoint {
            target_mpps: t.target_pps / 1e6,
            offered_mpps: t.offered_pps / 1e6,
            loss_pct: t.loss_ratio() * 100.0,
            sent: t.sent,
            lost: t.lost,
            reordered: t.streams.iter().map(|s| s.reordered).sum(),
            duplicated: t.streams.iter().map(|s| s.duplicated).sum(),
            leaked: t.streams.iter().filter(|s| !s.counted).map(|s| s.received).sum(),
            latency: t.streams.iter().find(|s| s.counted).and_then(|s| s.latency),
            streams: t.streams.clone(),
            in_gre: t.in_gre,
            dut_steal_ms: t.dut_steal_ms,
            dut_cpu_ns_per_frame: t.dut_busy_ms.and_then(|ms| {
                let refused = t.ring_drops.map_or(0, |r| r.into_dut) as f64;
                let taken = t.offered_pps * t.seconds - refused;
                (taken >= 1.0).then(|| ms * 1e6 / taken)
            }),
            dut_holes: t.dut_holes.map(|h| h.count),
            dut_hole_max_us: t.dut_holes.map(|h| h.max_ns as f64 / 1e3),
            dut_busy_late_max_us: t.dut_holes.map(|h| h.busy_max_ns as f64 / 1e3),
            lost_in_holes: t.lost_in_holes,
            ring_drops: t.ring_drops,
        }
    }

    /// Whether the generator fell more than 2 % short of the target.
    pub fn short(&self) -> bool {
        self.offered_mpps < self.target_mpps * 0.98
    }
}

/// A search target's answer, in Mpps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RateReport {
    /// Highest rate meeting the target, Mpps.
    pub mpps: f64,
    /// Lowest rate missing it, Mpps (`None`: met at the highest rate tried).
    pub upper_mpps: Option<f64>,
    /// Loss at `mpps`, %.
    pub loss_pct: f64,
}

impl From<&Bound> for RateReport {
    fn from(b: &Bound) -> Self {
        RateReport {
            mpps: b.lower_pps / 1e6,
            upper_mpps: b.upper_pps.map(|u| u / 1e6),
            loss_pct: b.loss_at_lower * 100.0,
        }
    }
}

/// Results of one DUT at one frame size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeReport {
    /// Frame size label ("64", "imix1").
    pub size: String,
    /// Frame-loss test.
    pub frame_loss: Vec<LoadPoint>,
    /// No drop rate.
    pub ndr: Option<RateReport>,
    /// Partial drop rate.
    pub pdr: Option<RateReport>,
    /// Trials the search ran.
    pub search_trials: usize,
}

/// How a DUT's run went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DutStatus {
    /// Measured.
    Ok,
    /// The DUT cannot run the scenario (reason in `message`).
    NotSupported,
    /// Setup or measurement failed (error in `message`).
    Failed,
}

/// One DUT's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DutReport {
    /// DUT name ("linux", "direct" for the ceiling).
    pub name: String,
    /// How it was set up.
    pub description: String,
    /// Outcome.
    pub status: DutStatus,
    /// Why it is not supported or what failed.
    pub message: Option<String>,
    /// Per frame size.
    pub sizes: Vec<SizeReport>,
}

impl DutReport {
    /// A DUT that produced no figures.
    pub fn without_results(name: &str, status: DutStatus, message: String) -> Self {
        DutReport { name: name.into(), description: String::new(), status, message: Some(message), sizes: Vec::new() }
    }
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// What the scenario is.
    pub description: String,
    /// Measurement conditions.
    pub conditions: Conditions,
    /// Generator straight into the sink, no router: the ceiling every
    /// other figure is bounded by.
    pub ceiling: DutReport,
    /// The DUTs, in the order asked.
    pub duts: Vec<DutReport>,
}

fn cell(p: &LoadPoint) -> String {
    let mut s = if p.loss_pct == 0.0 {
        "0".to_string()
    } else if p.loss_pct < 0.1 {
        format!("{:.3}", p.loss_pct)
    } else {
        format!("{:.1}", p.loss_pct)
    };
    if p.short() {
        s.push('*');
    }
    s
}

fn rate(r: &Option<RateReport>) -> String {
    match r {
        None => "-".into(),
        Some(r) if r.upper_mpps.is_none() => format!(">={:.3}", r.mpps),
        Some(r) => format!("{:.3}", r.mpps),
    }
}

impl Report {
    /// Frame size labels in the order measured.
    pub fn size_labels(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for d in std::iter::once(&self.ceiling).chain(&self.duts) {
            for s in &d.sizes {
                if !v.contains(&s.size) {
                    v.push(s.size.clone());
                }
            }
        }
        v
    }

    /// All DUT reports, ceiling first.
    pub fn all(&self) -> impl Iterator<Item = &DutReport> {
        std::iter::once(&self.ceiling).chain(&self.duts)
    }

    /// The serialised report.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// How the searches judge a load.
pub(crate) fn search_rule(per_load: usize) -> String {
    if per_load <= 1 {
        "one trial per load (RFC 2544)".into()
    } else {
        format!("a load passes when most of up to {per_load} trials do (MLRsearch exceed ratio 0.5)")
    }
}

/// How the run treats holes in the DUT CPU's time.
pub(crate) fn hole_rule(watch_us: Option<f64>, excuse: bool) -> String {
    match (watch_us, excuse) {
        (None, _) => "DUT CPU not watched for holes, every frame lost counts".into(),
        (Some(us), false) => format!("DUT CPU watched for holes (timer every {us:.0} us), every frame lost counts"),
        (Some(us), true) => format!(
            "DUT CPU watched for holes (timer every {us:.0} us); searches judge trials by the frames \
             lost outside holes longer than the DUT's 256-frame ring lasts (not RFC 2544)"
        ),
    }
}

/// "1, 2", or "none".
pub(crate) fn idle_list(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        return "none".into();
    }
    cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.conditions;
        writeln!(f, "RFC 2544: {} - {}", self.scenario, self.description)?;
        writeln!(
            f,
            "trials {} s, generator cpu {}, DUT cpu {}, sink cpu {}, SCHED_FIFO {}, {} ({}), load {}",
            c.trial_secs, c.gen_cpu, c.dut_cpu, c.sink_cpu, c.rt_priority, c.cpu_model, c.kernel, c.loadavg
        )?;
        writeln!(
            f,
            "CPUs kept out of idle states: {}; CPUs other tasks were moved off: {} ({} tasks); searches: {}; {}",
            idle_list(&c.no_idle_cpus),
            idle_list(&c.isolated_cpus),
            c.tasks_moved,
            search_rule(c.trials_per_load),
            hole_rule(c.hole_watch_us, c.excuse_host_holes)
        )?;
        for size in self.size_labels() {
            writeln!(f)?;
            writeln!(f, "frame size {size}: loss % of counted frames at offered load (Mpps)")?;
            // Loads from the ceiling (every DUT ran the same list).
            let loads: Vec<f64> = self
                .all()
                .flat_map(|d| d.sizes.iter().filter(|s| s.size == size))
                .next()
                .map(|s| s.frame_loss.iter().map(|p| p.target_mpps).collect())
                .unwrap_or_default();
            let name_w = self.all().map(|d| d.name.len()).max().unwrap_or(4).max(16);
            write!(f, "| {:<name_w$} |", "DUT")?;
            for l in &loads {
                write!(f, " {:>7.3} |", l)?;
            }
            writeln!(f, " {:>9} | {:>9} |", "NDR Mpps", "PDR Mpps")?;
            write!(f, "|{}|", "-".repeat(name_w + 2))?;
            for _ in &loads {
                write!(f, "{}|", "-".repeat(9))?;
            }
            writeln!(f, "{}|{}|", "-".repeat(11), "-".repeat(11))?;
            for d in self.all() {
                let label = if d.name == "direct" { "direct (ceiling)".to_string() } else { d.name.clone() };
                match (&d.status, d.sizes.iter().find(|s| s.size == size)) {
                    (DutStatus::Ok, Some(s)) => {
                        write!(f, "| {label:<name_w$} |")?;
                        for i in 0..loads.len() {
                            let v = s.frame_loss.get(i).map(cell).unwrap_or_else(|| "-".into());
                            write!(f, " {v:>7} |")?;
                        }
                        writeln!(f, " {:>9} | {:>9} |", rate(&s.ndr), rate(&s.pdr))?;
                    }
                    (status, _) => {
                        let what = match status {
                            DutStatus::NotSupported => "not supported",
                            DutStatus::Failed => "failed",
                            DutStatus::Ok => "no result",
                        };
                        // First line only: logs are in the JSON and HTML reports.
                        let msg = d.message.as_deref().unwrap_or("").lines().next().unwrap_or("");
                        writeln!(f, "| {label:<name_w$} | {what}: {msg}")?;
                    }
                }
            }
        }
        writeln!(f)?;
        writeln!(
            f,
            "NDR: highest rate with zero loss; PDR: loss <= {:.1} %; >= : no loss up to the \
             generator's limit; * : the generator reached less than 98 % of the load asked.",
            c.pdr_loss * 100.0
        )?;
        writeln!(f, "generator: {}", c.generator_kind.name())?;
        for n in &c.notes {
            writeln!(f, "note: {n}")?;
        }
        for d in self.all() {
            if !d.description.is_empty() {
                writeln!(f, "{}: {}", d.name, d.description)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::{RingDrops, TrialOutcome};

    fn outcome(busy_ms: Option<f64>, into_dut: Option<u64>) -> TrialOutcome {
        TrialOutcome {
            target_pps: 1e6,
            offered_pps: 1e6,
            seconds: 2.0,
            sent: 2_000_000,
            lost: 0,
            streams: Vec::new(),
            in_gre: 0,
            dut_steal_ms: None,
            dut_busy_ms: busy_ms,
            dut_holes: None,
            lost_in_holes: None,
            judged_lost: 0,
            ring_drops: into_dut.map(|n| RingDrops { into_dut: n, into_sink: 7 }),
        }
    }

    #[test]
    fn cpu_per_frame_counts_the_frames_the_dut_took_in() {
        // 1 s of CPU over 2 M frames sent: 500 ns each.
        assert_eq!(LoadPoint::from_trial(&outcome(Some(1000.0), None)).dut_cpu_ns_per_frame, Some(500.0));
        // Half refused by its full ring: 1000 ns for each frame it saw.
        let p = LoadPoint::from_trial(&outcome(Some(1000.0), Some(1_000_000)));
        assert_eq!(p.dut_cpu_ns_per_frame, Some(1000.0));
        // Nothing taken in, or no CPU reading: no figure.
        assert_eq!(LoadPoint::from_trial(&outcome(Some(1000.0), Some(2_000_000))).dut_cpu_ns_per_frame, None);
        assert_eq!(LoadPoint::from_trial(&outcome(None, None)).dut_cpu_ns_per_frame, None);
    }
}
