//! Progress of long work (a full table loading, a benchmark's trials), the
//! same way for `tern` and `tern-bench`.
//!
//! On a terminal (stderr is a TTY) a [`Meter`] redraws one line at most
//! [`REDRAW`] apart and clears it at the end:
//!
//! ```text
//! routes: 412,345 / 901,899 (45.7 %) 182,311/s ETA 2.7 s
//! ```
//!
//! Anywhere else (a pipe, a file, a journal) it writes nothing while the
//! work runs: the caller logs the one line [`Meter::finish`] returns,
//! `loaded 901,899 routes in 4.9 s (184,000/s)`.

use std::io::{IsTerminal as _, Write};
use std::time::{Duration, Instant};

/// The shortest time between two redraws (at most ten a second).
pub const REDRAW: Duration = Duration::from_millis(100);

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate rounded to three significant digits (`183,000`, `4.27`): what a
/// summary can honestly claim of one timed run.
pub fn rate_3sig(rate: f64) -> String {
    if !rate.is_finite() || rate <= 0.0 {
        return "0".into();
    }
    if rate >= 1000.0 {
        let scale = 10f64.powi(rate.log10().floor() as i32 - 2);
        return thousands(((rate / scale).round() * scale) as u64);
    }
    let decimals = (2 - rate.log10().floor() as i32).clamp(0, 3) as usize;
    format!("{rate:.decimals$}")
}

/// A duration for people: `0.42 s`, `2.7 s`, `27 s`, `4:05`, `1:04:05`.
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "?".into();
    }
    if secs < 1.0 {
        return format!("{secs:.2} s");
    }
    if secs < 10.0 {
        return format!("{secs:.1} s");
    }
    if secs < 59.5 {
        return format!("{secs:.0} s");
    }
    let s = secs.round() as u64;
    if s < 3600 {
        format!("{}:{:02}", s / 60, s % 60)
    } else {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    }
}

/// The line a terminal shows: `WHAT: DONE[ / TOTAL (P %)][ RATE/s[ ETA T]][ DETAIL]`.
/// The rate and ETA appear once some time has passed and something is done.
pub fn line(what: &str, done: u64, total: Option<u64>, elapsed: Duration, detail: &str) -> String {
    let mut s = format!("{what}: {}", thousands(done));
    if let Some(t) = total {
        let pct = if t == 0 { 100.0 } else { done.min(t) as f64 * 100.0 / t as f64 };
        s += &format!(" / {} ({pct:.1} %)", thousands(t));
    }
    let secs = elapsed.as_secs_f64();
    if done > 0 && secs > 0.0 {
        let rate = done as f64 / secs;
        s += &format!(" {}/s", if rate >= 100.0 { thousands(rate.round() as u64) } else { format!("{rate:.2}") });
        if let Some(t) = total.filter(|&t| t > done) {
            s += &format!(" ETA {}", duration((t - done) as f64 / rate));
        }
    }
    if !detail.is_empty() {
        s.push(' ');
        s += detail;
    }
    s
}

/// The summary: `VERB DONE WHAT in T (RATE/s)`.
pub fn summary(verb: &str, what: &str, done: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 { format!(" ({}/s)", rate_3sig(done as f64 / secs)) } else { String::new() };
    format!("{verb} {} {what} in {}{rate}", thousands(done), duration(secs))
}

/// One piece of long work being counted. See the module documentation.
pub struct Meter {
    what: String,
    total: Option<u64>,
    done: u64,
    detail: String,
    start: Instant,
    last_draw: Option<Instant>,
    /// Where the line is drawn: stderr on a terminal, else nowhere.
    out: Option<Box<dyn Write + Send>>,
}

impl Meter {
    /// Counts `what` ("routes") towards `total` (if known), drawing on
    /// stderr only if stderr is a terminal.
    pub fn new(what: &str, total: Option<u64>) -> Meter {
        let tty = std::io::stderr().is_terminal();
        Meter::with_output(what, total, tty.then(|| Box::new(std::io::stderr()) as Box<dyn Write + Send>))
    }

    /// A meter drawing into `out` (`None`: drawing nothing).
    pub fn with_output(what: &str, total: Option<u64>, out: Option<Box<dyn Write + Send>>) -> Meter {
        Meter {
            what: what.to_string(),
            total,
            done: 0,
            detail: String::new(),
            start: Instant::now(),
            last_draw: None,
            out,
        }
    }

    /// Whether the meter draws (stderr is a terminal).
    pub fn draws(&self) -> bool {
        self.out.is_some()
    }

    /// What is done so far; redraws if the last redraw is [`REDRAW`] old.
    pub fn set(&mut self, done: u64) {
        self.done = done;
        self.tick();
    }

    /// `n` more done.
    pub fn add(&mut self, n: u64) {
        self.set(self.done.saturating_add(n));
    }

    pub fn set_total(&mut self, total: Option<u64>) {
        self.total = total;
    }

    /// Free text after the figures (the trial a benchmark runs).
    pub fn set_detail(&mut self, detail: String) {
        self.detail = detail;
    }

    pub fn done(&self) -> u64 {
        self.done
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    fn tick(&mut self) {
        if self.out.is_none() {
            return;
        }
        let now = Instant::now();
        if self.last_draw.is_some_and(|t| now.duration_since(t) < REDRAW) {
            return;
        }
        self.last_draw = Some(now);
        let l = line(&self.what, self.done, self.total, now.duration_since(self.start), &self.detail);
        if let Some(o) = self.out.as_mut() {
            let _ = write!(o, "\r\x1b[K{l}");
            let _ = o.flush();
        }
    }

    /// A line of its own above the meter's (a terminal only: elsewhere
    /// the caller logs what matters).
    pub fn note(&mut self, text: &str) {
        if let Some(o) = self.out.as_mut() {
            let _ = writeln!(o, "\r\x1b[K{text}");
            let _ = o.flush();
        }
        // Drawn again at the next count.
        self.last_draw = None;
    }

    /// Clears the line and returns the summary (`VERB N WHAT in T (R/s)`)
    /// for the caller to log or print.
    pub fn finish(mut self, verb: &str) -> String {
        self.clear();
        summary(verb, &self.what, self.done, self.start.elapsed())
    }

    fn clear(&mut self) {
        if self.last_draw.is_some()
            && let Some(o) = self.out.as_mut()
        {
            let _ = write!(o, "\r\x1b[K");
            let _ = o.flush();
        }
        self.last_draw = None;
    }
}

impl Drop for Meter {
    /// Work that ends early (an error) leaves no half line behind.
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(901_899), "901,899");
        assert_eq!(thousands(12_345_678), "12,345,678");
        assert_eq!(rate_3sig(184_061.2), "184,000");
        assert_eq!(rate_3sig(1_234.0), "1,230");
        assert_eq!(rate_3sig(4.2712), "4.27");
        assert_eq!(rate_3sig(0.5), "0.500");
        assert_eq!(rate_3sig(f64::INFINITY), "0");
        assert_eq!(duration(0.421), "0.42 s");
        assert_eq!(duration(2.71), "2.7 s");
        assert_eq!(duration(27.2), "27 s");
        assert_eq!(duration(245.0), "4:05");
        assert_eq!(duration(3845.0), "1:04:05");
        assert_eq!(duration(f64::NAN), "?");
    }

    #[test]
    fn the_line_has_percent_rate_and_eta() {
        // 412,345 of 901,899 in 2.262 s: 182,292/s, 489,554 left: 2.7 s.
        let l = line("routes", 412_345, Some(901_899), Duration::from_millis(2262), "");
        assert_eq!(l, "routes: 412,345 / 901,899 (45.7 %) 182,292/s ETA 2.7 s");
        // No total: no percent, no ETA.
        assert_eq!(line("routes", 5000, None, Duration::from_secs(2), ""), "routes: 5,000 2,500/s");
        // Nothing done or no time yet: no rate to divide by.
        assert_eq!(line("routes", 0, Some(10), Duration::ZERO, ""), "routes: 0 / 10 (0.0 %)");
        assert_eq!(line("routes", 3, Some(10), Duration::ZERO, ""), "routes: 3 / 10 (30.0 %)");
        // Done: no ETA; more than the total never reads above 100 %.
        assert_eq!(line("trials", 12, Some(10), Duration::from_secs(60), "x"), "trials: 12 / 10 (100.0 %) 0.20/s x");
        assert_eq!(line("routes", 0, Some(0), Duration::from_secs(1), ""), "routes: 0 / 0 (100.0 %)");
    }

    #[test]
    fn the_summary_names_count_time_and_rate() {
        assert_eq!(
            summary("loaded", "routes", 901_899, Duration::from_millis(4900)),
            "loaded 901,899 routes in 4.9 s (184,000/s)"
        );
        assert_eq!(summary("ran", "trials", 0, Duration::ZERO), "ran 0 trials in 0.00 s");
    }

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("sink").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl Sink {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().expect("sink")).into_owned()
        }
    }

    #[test]
    fn a_terminal_sees_the_line_redrawn_at_most_ten_times_a_second_then_cleared() {
        let sink = Sink::default();
        let mut m = Meter::with_output("routes", Some(1000), Some(Box::new(sink.clone())));
        assert!(m.draws());
        // The first count draws at once; counts within REDRAW of it do not.
        for i in 1..=1000 {
            m.set(i);
        }
        let drawn = sink.text();
        // However long the loop took, no two draws were closer than REDRAW.
        let draws = drawn.matches("\r\x1b[Kroutes: ").count();
        let most = 1 + (m.elapsed().as_millis() / REDRAW.as_millis()) as usize;
        assert!((1..=most).contains(&draws), "{draws} draws in {:?}: {drawn:?}", m.elapsed());
        assert!(drawn.starts_with("\r\x1b[Kroutes: 1 / 1,000 (0.1 %)"), "{drawn:?}");
        m.note("== next");
        let s = m.finish("loaded");
        assert!(s.starts_with("loaded 1,000 routes in "), "{s}");
        let all = sink.text();
        assert!(all.ends_with("\r\x1b[K== next\n"), "a note, and nothing drawn since, nothing to clear: {all:?}");
    }

    #[test]
    fn the_line_is_cleared_at_the_end_and_on_an_early_drop() {
        let sink = Sink::default();
        let mut m = Meter::with_output("routes", None, Some(Box::new(sink.clone())));
        m.add(5);
        assert_eq!(m.done(), 5);
        drop(m);
        let t = sink.text();
        assert!(t.starts_with("\r\x1b[Kroutes: 5 ") && t.ends_with("/s\r\x1b[K"), "{t:?}");
        assert_eq!(t.matches('\r').count(), 2, "{t:?}");
    }

    #[test]
    fn without_a_terminal_nothing_is_drawn() {
        let mut m = Meter::with_output("routes", Some(10), None);
        assert!(!m.draws());
        m.set(3);
        m.note("ignored");
        m.set(10);
        assert_eq!(m.finish("loaded").split(" in ").next(), Some("loaded 10 routes"));
    }
}
