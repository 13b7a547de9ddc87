//! Progress of a long run, and the line that draws it on stderr.

use tern_control::progress::Meter;

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

/// Draws [`Progress`] as tern's progress line (`tern_control::progress`):
/// on a terminal, `trials: 12 / ~40 (30.0 %) 0.21/s ETA 2:13 tern 64 search
/// 1.000->0.998 Mpps loss 0.000%`, redrawn at most ten times a second, a
/// line `== DUT` above it as each DUT starts; not on a terminal, nothing
/// while the run goes (the report says what was skipped and why) and one
/// summary line from [`StderrBar::finish`].
pub struct StderrBar {
    meter: Meter,
}

impl Default for StderrBar {
    fn default() -> Self {
        StderrBar { meter: Meter::new("trials", None) }
    }
}

impl StderrBar {
    /// A bar drawing into `out` (`None`: as off a terminal).
    pub fn with_output(out: Option<Box<dyn std::io::Write + Send>>) -> Self {
        StderrBar { meter: Meter::with_output("trials", None, out) }
    }

    /// Draws one event.
    pub fn draw(&mut self, p: &Progress) {
        match p {
            Progress::Dut { name } => self.meter.note(&format!("== {name}")),
            Progress::Skipped { name, reason } => self.meter.note(&format!("== {name}: {reason}")),
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
                if !self.meter.draws() {
                    self.meter.set(*done as u64);
                    return;
                }
                self.meter.set_total(Some((*estimate).max(*done).max(1) as u64));
                self.meter.set_detail(format!(
                    "{dut} {size} {phase} {target_mpps:.3}->{offered_mpps:.3} Mpps loss {loss_pct:.3}%{}{}{}{}",
                    dut_steal_ms.filter(|&ms| ms > 0.0).map_or(String::new(), |ms| format!(" steal {ms:.0} ms")),
                    dut_hole_max_us.filter(|&us| us > 0.0).map_or(String::new(), |us| format!(" hole {us:.0} us")),
                    lost_in_holes.filter(|&n| n > 0).map_or(String::new(), |n| format!(" ({n} frames lost in holes)")),
                    if *into_sink > 0 { format!(" ({into_sink} refused by the sink's ring)") } else { String::new() },
                ));
                self.meter.set(*done as u64);
            }
        }
    }

    /// Clears the line; the run's summary line (`ran 42 trials in 3:05
    /// (0.227/s)`) for the log.
    pub fn finish(self) -> String {
        self.meter.finish("ran")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn trial(done: usize) -> Progress {
        Progress::Trial {
            dut: "tern".into(),
            size: "64".into(),
            phase: "search",
            target_mpps: 1.0,
            offered_mpps: 0.998,
            loss_pct: 0.0,
            dut_steal_ms: None,
            dut_hole_max_us: None,
            lost_in_holes: None,
            into_sink: 0,
            done,
            estimate: 40,
        }
    }

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("sink").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_terminal_sees_tern_s_progress_line() {
        let sink = Sink::default();
        let mut bar = StderrBar::with_output(Some(Box::new(sink.clone())));
        bar.draw(&Progress::Dut { name: "tern".into() });
        bar.draw(&trial(1));
        let s = bar.finish();
        let text = String::from_utf8_lossy(&sink.0.lock().expect("sink")).into_owned();
        assert!(text.starts_with("\r\x1b[K== tern\n\r\x1b[Ktrials: 1 / 40 (2.5 %) "), "{text:?}");
        assert!(text.contains(" tern 64 search 1.000->0.998 Mpps loss 0.000%"), "{text:?}");
        assert!(text.ends_with("\r\x1b[K"), "cleared at the end: {text:?}");
        assert!(s.starts_with("ran 1 trials in "), "{s}");
    }

    #[test]
    fn off_a_terminal_only_the_summary_remains() {
        let mut bar = StderrBar::with_output(None);
        bar.draw(&Progress::Dut { name: "tern".into() });
        bar.draw(&Progress::Skipped { name: "vpp".into(), reason: "not installed".into() });
        for done in 1..=3 {
            bar.draw(&trial(done));
        }
        assert!(bar.finish().starts_with("ran 3 trials in "));
    }
}
