//! The info lines of routine events (an IKE SA up, an IKE SA down, a
//! child SA up or rekeyed, a child SA deleted), at most [`PER_WINDOW`] one by one per
//! [`WINDOW`], the rest summed in one line when the window ends.
//!
//! A log line is a write(2) to stderr: one per IKE SA set up was a few
//! per cent of a responder's CPU at ten thousand setups a second, and so
//! was the child SA's line beside it (4.6 % of a `tern run` IKE thread's
//! CPU, by perf, when only the IKE SA's went through here). Failures
//! are not routine: they are logged at warn, each naming the peer and the
//! reason, and never pass through here.

use std::time::{Duration, Instant};

/// How long a window of individual lines lasts.
pub(crate) const WINDOW: Duration = Duration::from_secs(1);
/// Lines logged one by one per window; more are counted.
pub(crate) const PER_WINDOW: u32 = 10;

/// See the module.
#[derive(Debug, Default)]
pub(crate) struct EventLog {
    /// When the current window began (none before the first event).
    since: Option<Instant>,
    /// Lines logged one by one in the window.
    logged: u32,
    /// Events counted, not logged, in the window: IKE SAs up, down;
    /// child SAs up or rekeyed, deleted.
    up: u64,
    down: u64,
    children: u64,
    children_down: u64,
}

/// What an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Routine {
    Up,
    Down,
    /// A child SA up or rekeyed.
    Child,
    /// A child SA deleted (by us, the peer, or after its rekey).
    ChildDown,
}

impl EventLog {
    /// Whether the caller logs this event's own line; if not, it is
    /// counted for the window's summary.
    pub(crate) fn allow(&mut self, now: Instant, what: Routine) -> bool {
        self.flush(now);
        self.since.get_or_insert(now);
        if self.logged < PER_WINDOW {
            self.logged += 1;
            return true;
        }
        match what {
            Routine::Up => self.up += 1,
            Routine::Down => self.down += 1,
            Routine::Child => self.children += 1,
            Routine::ChildDown => self.children_down += 1,
        }
        false
    }

    /// Ends the window when it is over: its summary line, if it counted
    /// events, and a new window at the next event.
    pub(crate) fn flush(&mut self, now: Instant) {
        let Some(since) = self.since else { return };
        if now.saturating_duration_since(since) < WINDOW {
            return;
        }
        if let Some(line) = self.summary() {
            log::info!("{line}");
        }
        *self = EventLog::default();
    }

    /// When [`EventLog::flush`] has a summary to log.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.since.filter(|_| self.counted() > 0).map(|s| s + WINDOW)
    }

    fn counted(&self) -> u64 {
        self.up + self.down + self.children + self.children_down
    }

    fn summary(&self) -> Option<String> {
        if self.counted() == 0 {
            return None;
        }
        Some(format!(
            "ike: {} more IKE SA(s) up and {} down, {} child SA(s) up or rekeyed and {} deleted, in the last {} s (not logged one by one; {} lines a second are)",
            self.up,
            self.down,
            self.children,
            self.children_down,
            WINDOW.as_secs(),
            PER_WINDOW
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_lines_of_a_window_pass_the_rest_are_summed() {
        let t0 = Instant::now();
        let mut l = EventLog::default();
        assert_eq!(l.deadline(), None);
        for i in 0..PER_WINDOW {
            assert!(l.allow(t0 + Duration::from_millis(u64::from(i)), Routine::Up), "line {i}");
        }
        assert_eq!(l.deadline(), None, "nothing counted yet");
        assert!(!l.allow(t0 + Duration::from_millis(500), Routine::Up));
        assert!(!l.allow(t0 + Duration::from_millis(600), Routine::Down));
        assert!(!l.allow(t0 + Duration::from_millis(700), Routine::Up));
        assert_eq!(l.deadline(), Some(t0 + WINDOW));
        let line = l.summary().expect("a summary");
        assert!(line.contains("2 more IKE SA(s) up and 1 down, 0 child SA(s)"), "{line}");
        assert!(!l.allow(t0 + Duration::from_millis(800), Routine::Child));
        let line = l.summary().expect("a summary");
        assert!(line.contains("1 down, 1 child SA(s) up or rekeyed and 0 deleted"), "{line}");
        assert!(!l.allow(t0 + Duration::from_millis(850), Routine::ChildDown));
        let line = l.summary().expect("a summary");
        assert!(line.contains("1 child SA(s) up or rekeyed and 1 deleted"), "{line}");
        // Not before the window ends.
        l.flush(t0 + WINDOW - Duration::from_millis(1));
        assert_eq!(l.counted(), 5);
        // After it, a new window: its first lines pass again.
        l.flush(t0 + WINDOW);
        assert_eq!((l.counted(), l.logged, l.deadline()), (0, 0, None));
        assert!(l.allow(t0 + WINDOW + Duration::from_millis(1), Routine::Down));
    }

    #[test]
    fn an_event_after_a_quiet_spell_opens_a_new_window() {
        let t0 = Instant::now();
        let mut l = EventLog::default();
        for _ in 0..PER_WINDOW + 5 {
            l.allow(t0, Routine::Up);
        }
        // Seconds later, with no flush in between: the old window's sum
        // goes first, and this line passes.
        assert!(l.allow(t0 + Duration::from_secs(5), Routine::Up));
        assert_eq!((l.up, l.logged), (0, 1));
        assert_eq!(l.since, Some(t0 + Duration::from_secs(5)));
    }

    #[test]
    fn child_lines_share_the_window() {
        let t0 = Instant::now();
        let mut l = EventLog::default();
        let passed =
            (0..2 * PER_WINDOW).filter(|&i| l.allow(t0, if i % 2 == 0 { Routine::Up } else { Routine::Child })).count();
        assert_eq!(passed, PER_WINDOW as usize);
        assert_eq!((l.up, l.children), (u64::from(PER_WINDOW) / 2, u64::from(PER_WINDOW) / 2));
        assert_eq!(l.deadline(), Some(t0 + WINDOW));
    }
}
