//! Throughput searches: NDR (no drop rate: the highest rate with zero
//! loss, RFC 2544 section 26.1) and PDR (partial drop rate: the highest
//! with loss at most 0.5 %, FD.io CSIT), and the frame-loss test at a
//! list of offered loads (RFC 2544 section 26.3).
//!
//! Both searches run together over one history of fixed-length trials,
//! in the spirit of CSIT's MLRsearch: every trial narrows the bounds of
//! every target it informs, the first trial is at the maximum rate and the
//! second at the rate the DUT forwarded there, and the search then halves
//! the widest interval until each is narrower than the goal width. The
//! bounds are recomputed from the whole history, so a noisy trial that
//! passes above a failure does not leave a lower bound above an upper one.
//!
//! With `trials_per_load` N > 1 (odd) a load is tried up to N times and
//! classified by the majority of its trials, for each target on its own:
//! MLRsearch's goal exceed ratio of 0.5 (RFC 9971) over N trials. On a
//! machine where the DUT's CPU is sometimes taken away for a millisecond
//! (a VM's vCPU), one such event fails a strict RFC 2544 trial at any
//! rate; the majority tells a DUT that cannot carry a load from one that
//! was interrupted while carrying it. N = 1 is RFC 2544's search.

use serde::Serialize;

use crate::error::Result;
use crate::trial::{TrialOutcome, TrialRunner};

/// What the search is asked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SearchParams {
    /// Highest rate to try, frames/s (the generator's ceiling or a cap).
    pub max_pps: f64,
    /// Lowest rate to try, frames/s; below it a target is reported as 0.
    pub min_pps: f64,
    /// Stop when upper - lower <= this, frames/s.
    pub goal_width_pps: f64,
    /// PDR's loss ratio (0.005 = 0.5 %).
    pub pdr_loss: f64,
    /// Give up after this many trials (a safety net, never reached when
    /// the widths converge).
    pub max_trials: usize,
    /// Trials per load, odd: a load meets a target when most of them do.
    pub trials_per_load: usize,
}

impl SearchParams {
    /// Search up to `max_pps`, with a goal width of `rel_width` of it.
    pub fn new(max_pps: f64, rel_width: f64) -> Self {
        SearchParams {
            max_pps,
            min_pps: (max_pps * 0.001).max(1000.0),
            goal_width_pps: (max_pps * rel_width).max(100.0),
            pdr_loss: 0.005,
            max_trials: 40,
            trials_per_load: 1,
        }
    }

    /// The same search, each load tried up to `n` times (odd, >= 1) and
    /// judged by the majority of its trials.
    pub fn with_trials_per_load(mut self, n: usize) -> Self {
        self.trials_per_load = n.max(1) | 1;
        self.max_trials = 40 * self.trials_per_load;
        self
    }
}

/// One target's answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bound {
    /// Highest rate that met the loss target, frames/s (0: none did).
    pub lower_pps: f64,
    /// Lowest rate that missed it, frames/s (`None`: nothing missed it,
    /// the DUT met the target at the highest rate tried).
    pub upper_pps: Option<f64>,
    /// Loss ratio measured at `lower_pps`.
    pub loss_at_lower: f64,
}

/// Result of a search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResult {
    /// No drop rate.
    pub ndr: Bound,
    /// Partial drop rate.
    pub pdr: Bound,
    /// Every trial, in order.
    pub trials: Vec<TrialOutcome>,
}

/// Whether the trials `idx` of one load meet the target `max_loss`: yes
/// or no once most of `per_load` trials agree, `None` before.
fn verdict(trials: &[TrialOutcome], idx: &[usize], max_loss: f64, per_load: usize) -> Option<bool> {
    let need = per_load / 2 + 1;
    let pass = idx.iter().filter(|&&i| trials[i].judged_loss_ratio() <= max_loss).count();
    if pass >= need {
        Some(true)
    } else if idx.len() - pass >= need {
        Some(false)
    } else {
        None
    }
}

/// The bound of target `max_loss` given the trials so far, grouped in
/// `loads` (indices into `trials`, one group per load tried). A load's
/// rate is the lowest its trials achieved (the generator's, not the rate
/// asked for), its loss its median trial's; loads not yet judged do not
/// count.
fn bound_of(trials: &[TrialOutcome], loads: &[Vec<usize>], max_loss: f64, per_load: usize) -> Bound {
    let judged: Vec<(bool, f64, f64)> = loads
        .iter()
        .filter_map(|idx| {
            let v = verdict(trials, idx, max_loss, per_load)?;
            let rate = idx.iter().map(|&i| trials[i].offered_pps).fold(f64::INFINITY, f64::min);
            // The median trial's loss: the majority's side of the verdict.
            let mut losses: Vec<f64> = idx.iter().map(|&i| trials[i].judged_loss_ratio()).collect();
            losses.sort_by(f64::total_cmp);
            let loss = losses.get(losses.len() / 2).copied().unwrap_or(0.0);
            Some((v, rate, loss))
        })
        .collect();
    let upper = judged
        .iter()
        .filter(|(v, ..)| !v)
        .map(|&(_, r, _)| r)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
    let best = judged
        .iter()
        .filter(|(v, ..)| *v)
        .filter(|(_, r, _)| upper.is_none_or(|u| *r < u))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    Bound { lower_pps: best.map_or(0.0, |b| b.1), upper_pps: upper, loss_at_lower: best.map_or(0.0, |b| b.2) }
}

/// [`bound_of`] with one trial per load.
#[cfg(test)]
fn bound(trials: &[TrialOutcome], max_loss: f64) -> Bound {
    let loads: Vec<Vec<usize>> = (0..trials.len()).map(|i| vec![i]).collect();
    bound_of(trials, &loads, max_loss, 1)
}

/// Whether a target's interval is narrow enough, and if not, the next
/// rate to try for it.
fn next_rate(b: &Bound, p: &SearchParams) -> Option<f64> {
    match b.upper_pps {
        None => None, // met at the highest rate tried: nothing above to learn
        Some(u) if u <= p.min_pps => None,
        Some(u) => {
            let lo = b.lower_pps.max(0.0);
            if u - lo <= p.goal_width_pps {
                None
            } else if lo == 0.0 {
                // No passing rate yet: halve down to the floor.
                Some((u / 2.0).max(p.min_pps))
            } else {
                Some((lo + u) / 2.0)
            }
        }
    }
}

/// Runs the NDR and PDR searches.
pub fn ndr_pdr(
    runner: &mut dyn TrialRunner,
    p: &SearchParams,
    on_trial: &mut dyn FnMut(&TrialOutcome, &Bound, &Bound),
) -> Result<SearchResult> {
    let per_load = p.trials_per_load.max(1);
    let mut trials: Vec<TrialOutcome> = Vec::new();
    let mut loads: Vec<Vec<usize>> = Vec::new();
    // Tries one load until both targets are judged (at most per_load trials).
    let mut run = |rate: f64, trials: &mut Vec<TrialOutcome>, loads: &mut Vec<Vec<usize>>| -> Result<()> {
        loads.push(Vec::new());
        loop {
            let o = runner.trial(rate)?;
            trials.push(o);
            let i = trials.len() - 1;
            if let Some(cur) = loads.last_mut() {
                cur.push(i);
            }
            let (n, d) = (bound_of(trials, loads, 0.0, per_load), bound_of(trials, loads, p.pdr_loss, per_load));
            on_trial(&trials[i], &n, &d);
            let cur = loads.last().map_or(&[][..], |c| c.as_slice());
            let judged =
                verdict(trials, cur, 0.0, per_load).is_some() && verdict(trials, cur, p.pdr_loss, per_load).is_some();
            if judged || cur.len() >= per_load || trials.len() >= p.max_trials {
                return Ok(());
            }
        }
    };
    // Start at the top; then at what the DUT forwarded there (MLRsearch's
    // first two steps), which lands near PDR for a DUT with a hard limit.
    run(p.max_pps, &mut trials, &mut loads)?;
    if let Some(first) = trials.first()
        && first.judged_loss_ratio() > 0.0
    {
        let fwd = first.forwarded_pps().max(p.min_pps);
        if fwd < first.offered_pps * 0.99 {
            run(fwd, &mut trials, &mut loads)?;
        }
    }
    // Loads in a row that moved no bound: the rates the generator achieves
    // cannot split the interval any further.
    let mut still = 0;
    while trials.len() < p.max_trials && still < 2 {
        let n = bound_of(&trials, &loads, 0.0, per_load);
        let d = bound_of(&trials, &loads, p.pdr_loss, per_load);
        let next = match (next_rate(&n, p), next_rate(&d, p)) {
            (None, None) => break,
            (Some(a), None) | (None, Some(a)) => a,
            // Both open: work on the wider interval.
            (Some(a), Some(b)) => {
                let wn = n.upper_pps.unwrap_or(0.0) - n.lower_pps;
                let wd = d.upper_pps.unwrap_or(0.0) - d.lower_pps;
                if wn >= wd { a } else { b }
            }
        };
        // The bounds are rates achieved; a generator that falls a few per
        // cent short of every rate asked would land below the interval
        // each time. Ask for that much more (not for a generator at its
        // limit, which falls short by more).
        let short = trials.last().map_or(1.0, |t| t.target_pps / t.offered_pps.max(1.0));
        let ask = if (1.0..=1.1).contains(&short) { (next * short).min(p.max_pps) } else { next };
        run(ask, &mut trials, &mut loads)?;
        let moved =
            bound_of(&trials, &loads, 0.0, per_load) != n || bound_of(&trials, &loads, p.pdr_loss, per_load) != d;
        still = if moved { 0 } else { still + 1 };
    }
    Ok(SearchResult {
        ndr: bound_of(&trials, &loads, 0.0, per_load),
        pdr: bound_of(&trials, &loads, p.pdr_loss, per_load),
        trials,
    })
}

/// The frame-loss test: one trial at each offered load, in order.
pub fn frame_loss(
    runner: &mut dyn TrialRunner,
    loads_pps: &[f64],
    on_trial: &mut dyn FnMut(&TrialOutcome),
) -> Result<Vec<TrialOutcome>> {
    let mut out = Vec::with_capacity(loads_pps.len());
    for &l in loads_pps {
        let o = runner.trial(l)?;
        on_trial(&o);
        out.push(o);
    }
    Ok(out)
}

/// A simulated DUT with a known loss curve, for testing the searches: it
/// forwards at most `capacity_pps`, and above `knee_pps` it also loses a
/// small extra share that grows linearly (a soft knee before the hard
/// limit, like a DUT whose queues start to overflow).
#[derive(Debug, Clone)]
pub struct SimulatedDut {
    /// Hard forwarding limit, frames/s.
    pub capacity_pps: f64,
    /// Rate above which a little loss starts, frames/s.
    pub knee_pps: f64,
    /// Extra loss ratio per frame/s above the knee.
    pub knee_slope: f64,
    /// Highest rate the simulated generator achieves.
    pub generator_pps: f64,
    /// Share of the rate asked that the simulated generator achieves.
    pub efficiency: f64,
    /// Trial length, s.
    pub seconds: f64,
    /// Trials run.
    pub trials: usize,
}

impl SimulatedDut {
    /// The exact loss ratio at `rate`.
    pub fn loss_at(&self, rate: f64) -> f64 {
        let hard = if rate > self.capacity_pps { 1.0 - self.capacity_pps / rate } else { 0.0 };
        let soft = if rate > self.knee_pps { (rate - self.knee_pps) * self.knee_slope } else { 0.0 };
        (hard + soft).min(1.0)
    }
}

impl TrialRunner for SimulatedDut {
    fn trial(&mut self, rate_pps: f64) -> Result<TrialOutcome> {
        self.trials += 1;
        let offered = (rate_pps * self.efficiency).min(self.generator_pps);
        let sent = (offered * self.seconds).round() as u64;
        let lost = (sent as f64 * self.loss_at(offered)).ceil() as u64;
        Ok(TrialOutcome {
            target_pps: rate_pps,
            offered_pps: offered,
            seconds: self.seconds,
            sent,
            lost: lost.min(sent),
            streams: Vec::new(),
            in_gre: 0,
            dut_steal_ms: None,
            dut_busy_ms: None,
            dut_holes: None,
            lost_in_holes: None,
            judged_lost: lost.min(sent),
            ring_drops: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(capacity: f64, knee: f64, slope: f64) -> SimulatedDut {
        SimulatedDut {
            capacity_pps: capacity,
            knee_pps: knee,
            knee_slope: slope,
            generator_pps: 10e6,
            efficiency: 1.0,
            seconds: 1.0,
            trials: 0,
        }
    }

    /// Rate where the simulated loss crosses `target` (bisection on the
    /// known curve, independent of the search under test).
    fn crossing(d: &SimulatedDut, target: f64) -> f64 {
        let (mut lo, mut hi) = (0.0, 10e6);
        for _ in 0..200 {
            let mid = (lo + hi) / 2.0;
            if d.loss_at(mid) > target { hi = mid } else { lo = mid }
        }
        lo
    }

    #[test]
    fn finds_ndr_and_pdr_within_the_goal_width() {
        for (cap, knee, slope) in [(3e6, 2e6, 0.0), (3e6, 2e6, 4e-9), (5.5e6, 1e6, 1e-9), (0.7e6, 0.7e6, 0.0)] {
            let mut d = sim(cap, knee, slope);
            let p = SearchParams::new(8e6, 0.005);
            let r = ndr_pdr(&mut d, &p, &mut |_, _, _| {}).expect("sim");
            let ndr = crossing(&d, 0.0);
            let pdr = crossing(&d, 0.005);
            assert!(r.ndr.lower_pps <= ndr + 1.0, "ndr {} above true {ndr}", r.ndr.lower_pps);
            assert!(ndr - r.ndr.lower_pps <= p.goal_width_pps + 1.0, "ndr {} vs {ndr}", r.ndr.lower_pps);
            assert!(r.pdr.lower_pps <= pdr + 1.0, "pdr {} above true {pdr}", r.pdr.lower_pps);
            assert!(pdr - r.pdr.lower_pps <= p.goal_width_pps + 1.0, "pdr {} vs {pdr}", r.pdr.lower_pps);
            assert!(r.pdr.lower_pps >= r.ndr.lower_pps);
            let u = r.ndr.upper_pps.expect("ndr upper");
            assert!(u - r.ndr.lower_pps <= p.goal_width_pps);
            assert!(r.trials.len() < 30, "{} trials", r.trials.len());
        }
    }

    #[test]
    fn lossless_dut_is_reported_at_the_generator_limit() {
        let mut d = sim(20e6, 20e6, 0.0);
        d.generator_pps = 6e6;
        let r = ndr_pdr(&mut d, &SearchParams::new(8e6, 0.01), &mut |_, _, _| {}).expect("sim");
        assert_eq!(r.ndr.lower_pps, 6e6);
        assert_eq!(r.ndr.upper_pps, None);
        assert_eq!(r.trials.len(), 1);
    }

    #[test]
    fn dut_that_loses_everything_has_zero_ndr() {
        let mut d = sim(0.0, 0.0, 0.0);
        let p = SearchParams::new(8e6, 0.01);
        let r = ndr_pdr(&mut d, &p, &mut |_, _, _| {}).expect("sim");
        assert_eq!(r.ndr.lower_pps, 0.0);
        assert_eq!(r.pdr.lower_pps, 0.0);
        assert!(r.ndr.upper_pps.is_some_and(|u| u <= p.min_pps));
    }

    #[test]
    fn noisy_pass_above_a_failure_is_not_a_lower_bound() {
        let mk = |rate: f64, lost: u64| TrialOutcome {
            target_pps: rate,
            offered_pps: rate,
            seconds: 1.0,
            sent: 1000,
            lost,
            streams: vec![],
            in_gre: 0,
            dut_steal_ms: None,
            dut_busy_ms: None,
            dut_holes: None,
            lost_in_holes: None,
            judged_lost: lost,
            ring_drops: None,
        };
        let t = vec![mk(4e6, 10), mk(2e6, 0), mk(3e6, 1), mk(3.5e6, 0)];
        let b = bound(&t, 0.0);
        assert_eq!(b.upper_pps, Some(3e6));
        assert_eq!(b.lower_pps, 2e6);
        let b = bound(&t, 0.005);
        assert_eq!(b.upper_pps, Some(4e6));
        assert_eq!(b.lower_pps, 3.5e6);
    }

    /// A DUT that also loses one frame in every `every`-th trial whatever
    /// the rate (a VM whose vCPU is taken away now and then).
    struct Flaky {
        dut: SimulatedDut,
        every: usize,
    }

    impl TrialRunner for Flaky {
        fn trial(&mut self, rate_pps: f64) -> Result<TrialOutcome> {
            let mut o = self.dut.trial(rate_pps)?;
            if self.dut.trials.is_multiple_of(self.every) {
                o.lost = (o.lost + 1).min(o.sent);
                o.judged_lost = o.lost;
            }
            Ok(o)
        }
    }

    #[test]
    fn a_majority_of_trials_per_load_sees_through_rare_losses() {
        let (cap, knee) = (3e6, 2e6);
        let truth = crossing(&sim(cap, knee, 4e-9), 0.0);
        // One trial per load (RFC 2544): the first stray loss caps NDR.
        let mut strict = Flaky { dut: sim(cap, knee, 4e-9), every: 4 };
        let p = SearchParams::new(8e6, 0.005);
        let r = ndr_pdr(&mut strict, &p, &mut |_, _, _| {}).expect("sim");
        assert!(r.ndr.lower_pps < truth * 0.9, "strict NDR {} against {truth}", r.ndr.lower_pps);
        // Three per load: at most one of any three trials in a row is hit, so every
        // load is judged by what the DUT does.
        let mut major = Flaky { dut: sim(cap, knee, 4e-9), every: 4 };
        let p3 = SearchParams::new(8e6, 0.005).with_trials_per_load(3);
        assert_eq!(p3.trials_per_load, 3);
        let r = ndr_pdr(&mut major, &p3, &mut |_, _, _| {}).expect("sim");
        assert_eq!(r.ndr.loss_at_lower, 0.0, "the median trial of a passing load lost nothing");
        assert!(r.ndr.lower_pps <= truth + 1.0, "NDR {} above {truth}", r.ndr.lower_pps);
        assert!(truth - r.ndr.lower_pps <= p3.goal_width_pps + 1.0, "NDR {} against {truth}", r.ndr.lower_pps);
        let pdr = crossing(&major.dut, 0.005);
        assert!(pdr - r.pdr.lower_pps <= p3.goal_width_pps + 1.0, "PDR {} against {pdr}", r.pdr.lower_pps);
        assert!(r.trials.len() < 3 * 30, "{} trials", r.trials.len());
        // Every load was tried at most 3 times, and a load is never judged
        // on fewer than 2.
        let mut runs: Vec<(f64, usize)> = Vec::new();
        for t in &r.trials {
            match runs.last_mut() {
                Some((rate, n)) if *rate == t.target_pps => *n += 1,
                _ => runs.push((t.target_pps, 1)),
            }
        }
        assert!(runs.iter().all(|&(_, n)| (2..=3).contains(&n)), "{runs:?}");
    }

    #[test]
    fn a_generator_short_of_every_rate_still_narrows_the_bounds() {
        for per_load in [1, 3] {
            let mut d = sim(3e6, 2e6, 4e-9);
            d.efficiency = 0.95;
            let p = SearchParams::new(8e6, 0.005).with_trials_per_load(per_load);
            let r = ndr_pdr(&mut d, &p, &mut |_, _, _| {}).expect("sim");
            let ndr = crossing(&d, 0.0);
            assert!(r.ndr.lower_pps <= ndr + 1.0, "NDR {} above {ndr}", r.ndr.lower_pps);
            assert!(ndr - r.ndr.lower_pps <= 2.0 * p.goal_width_pps, "NDR {} against {ndr}", r.ndr.lower_pps);
            assert!(r.trials.len() < 30 * per_load, "{} trials", r.trials.len());
        }
        // A generator that cannot reach into the interval at all: the
        // search stops after two loads that move nothing.
        let mut d = sim(3e6, 2e6, 4e-9);
        d.efficiency = 0.5;
        let r = ndr_pdr(&mut d, &SearchParams::new(8e6, 0.005), &mut |_, _, _| {}).expect("sim");
        assert!(r.trials.len() < 40, "{} trials", r.trials.len());
    }

    #[test]
    fn one_trial_per_load_is_unchanged_by_grouping() {
        let even = SearchParams::new(8e6, 0.01).with_trials_per_load(2);
        assert_eq!(even.trials_per_load, 3, "an even count is made odd");
        let mut a = sim(3e6, 2e6, 4e-9);
        let mut b = sim(3e6, 2e6, 4e-9);
        let p = SearchParams::new(8e6, 0.005);
        let ra = ndr_pdr(&mut a, &p, &mut |_, _, _| {}).expect("sim");
        let rb = ndr_pdr(&mut b, &p.with_trials_per_load(1), &mut |_, _, _| {}).expect("sim");
        assert_eq!(ra, rb);
    }

    #[test]
    fn frame_loss_table_matches_the_curve() {
        let mut d = sim(3e6, 3e6, 0.0);
        let loads = [1e6, 3e6, 4e6, 6e6];
        let r = frame_loss(&mut d, &loads, &mut |_| {}).expect("sim");
        let pct: Vec<f64> = r.iter().map(|o| (o.loss_ratio() * 1000.0).round() / 10.0).collect();
        assert_eq!(pct, vec![0.0, 0.0, 25.0, 50.0]);
        assert_eq!(r[3].offered_pps, 6e6);
    }
}
