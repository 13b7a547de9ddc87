//! Progress of a long run, and a bar that draws it on stderr.

use std::io::Write as _;
use std::time::Instant;

/// What the runner reports while it works.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Starting work on a DUT ("direct" is the ceiling).
    Dut {
        /// DUT name.
        name: String,
    },
    /// A DUT could not be measured.
    Skipped {
        /// DUT name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A trial finished.
    Trial {
        /// DUT name.
        dut: String,
        /// Frame size label.
        size: String,
        /// "loss" (frame-loss test) or "search".
        phase: &'static str,
        /// Rate asked for, Mpps.
        target_mpps: f64,
        /// Rate achieved, Mpps.
        offered_mpps: f64,
        /// Loss, %.
        loss_pct: f64,
        /// Steal time of the DUT's CPU during the trial, ms.
        dut_steal_ms: Option<f64>,
        /// The longest hole in the DUT CPU's time during the trial, us.
        dut_hole_max_us: Option<f64>,
        /// Of the frames lost, those lost in host holes.
        lost_in_holes: Option<u64>,
        /// Frames the sink's ring refused (the rig fell behind, not the DUT).
        into_sink: u64,
        /// Trials done so far in the run.
        done: usize,
        /// Estimated trials in the whole run.
        estimate: usize,
    },
}

/// Draws [`Progress`] as a one-line bar on stderr.
pub struct StderrBar {
    start: Instant,
}

impl Default for StderrBar {
    fn default() -> Self {
        StderrBar { start: Instant::now() }
    }
}

impl StderrBar {
    /// Draws one event.
    pub fn draw(&mut self, p: &Progress) {
        let mut err = std::io::stderr().lock();
        let _ = match p {
            Progress::Dut { name } => writeln!(err, "\r\x1b[K== {name}"),
            Progress::Skipped { name, reason } => writeln!(err, "\r\x1b[K== {name}: {reason}"),
            Progress::Trial {
                dut,
                size,
                phase,
                target_mpps,
                offered_mpps,
                loss_pct,
                dut_steal_ms,
                dut_hole_max_us,
                lost_in_holes,
                into_sink,
                done,
                estimate,
            } => {
                let est = (*estimate).max(*done).max(1);
                let width = 30;
                let filled = width * done / est;
                let secs = self.start.elapsed().as_secs();
                write!(
                    err,
                    "\r\x1b[K[{}{}] {done}/~{est} {:>3}:{:02} {dut} {size} {phase} {target_mpps:.3}->{offered_mpps:.3} Mpps loss {loss_pct:.3}%{}{}{}{}",
                    "#".repeat(filled),
                    ".".repeat(width - filled),
                    secs / 60,
                    secs % 60,
                    dut_steal_ms.filter(|&ms| ms > 0.0).map_or(String::new(), |ms| format!(" steal {ms:.0} ms")),
                    dut_hole_max_us.filter(|&us| us > 0.0).map_or(String::new(), |us| format!(" hole {us:.0} us")),
                    lost_in_holes.filter(|&n| n > 0).map_or(String::new(), |n| format!(" ({n} frames lost in holes)")),
                    if *into_sink > 0 { format!(" ({into_sink} refused by the sink's ring)") } else { String::new() },
                )
            }
        };
        let _ = err.flush();
    }
}
