//! The live terminal view of `tern top` (ratatui over crossterm): the
//! alternate screen in raw mode, restored on every way out (quit keys, an
//! error, a panic: a panic hook restores it before the message).

use super::rates::{NoRates, Rates, View};
use super::{MAX_INTERVAL_MS, MIN_INTERVAL_MS, Pane, header, panes, sample};
use crate::ops::Ctx;
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tern_control::api::types::TopSample;

/// The intervals `+` and `-` step through.
const STEPS_MS: [u64; 9] = [100, 250, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000];

/// Everything the screen shows and the keys change.
pub struct App {
    pub view: View,
    pub interval: Duration,
    pub paused: bool,
    /// The focused pane, 0..5.
    pub focus: usize,
    /// The filter being typed after `/`.
    pub editing: Option<String>,
    pub rates: Option<Rates>,
    /// "measuring...", a restart, an error.
    pub note: String,
    prev: Option<TopSample>,
    quit: bool,
}

impl App {
    pub fn new(view: View, interval: Duration) -> App {
        App {
            view,
            interval,
            paused: false,
            focus: 0,
            editing: None,
            rates: None,
            note: "measuring...".into(),
            prev: None,
            quit: false,
        }
    }

    /// Takes in a new sample (or the error of asking for one).
    pub fn take(&mut self, s: Result<TopSample, String>) {
        let s = match s {
            Ok(s) => s,
            Err(e) => {
                self.note = format!("error: {e}");
                return;
            }
        };
        match self.prev.as_ref().map(|p| Rates::between(p, &s)) {
            None => self.note = "measuring...".into(),
            Some(Ok(r)) => {
                self.rates = Some(r);
                self.note.clear();
            }
            Some(Err(NoRates::Restarted)) => {
                self.rates = None;
                self.note = "tern restarted: measuring...".into();
            }
            // Keep the earlier sample as the baseline.
            Some(Err(NoRates::ZeroInterval)) => return,
        }
        self.prev = Some(s);
    }

    /// One key.
    pub fn key(&mut self, k: KeyEvent) {
        if k.kind == KeyEventKind::Release {
            return;
        }
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if let Some(text) = &mut self.editing {
            match k.code {
                KeyCode::Enter => {
                    self.view.filter = std::mem::take(text);
                    self.editing = None;
                }
                KeyCode::Esc => {
                    self.view.filter.clear();
                    self.editing = None;
                }
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Char(c) if !c.is_control() && text.len() < 64 => text.push(c),
                _ => {}
            }
            return;
        }
        match k.code {
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Tab => self.focus = (self.focus + 1) % 5,
            KeyCode::BackTab => self.focus = (self.focus + 4) % 5,
            KeyCode::Char(c @ '1'..='5') => self.focus = usize::from(c as u8 - b'1'),
            KeyCode::Char('s') => self.view.sort = self.view.sort.next(),
            KeyCode::Char('r') => self.view.reverse = !self.view.reverse,
            KeyCode::Char('z') => self.view.hide_zero = !self.view.hide_zero,
            KeyCode::Char('p') => self.paused = !self.paused,
            KeyCode::Char('/') => self.editing = Some(self.view.filter.clone()),
            KeyCode::Char('+' | '=') => self.step(true),
            KeyCode::Char('-' | '_') => self.step(false),
            _ => {}
        }
    }

    fn step(&mut self, up: bool) {
        let ms = self.interval.as_millis() as u64;
        let next = if up {
            STEPS_MS.iter().copied().find(|&s| s > ms).unwrap_or(MAX_INTERVAL_MS)
        } else {
            STEPS_MS.iter().rev().copied().find(|&s| s < ms).unwrap_or(MIN_INTERVAL_MS)
        };
        self.interval = Duration::from_millis(next);
    }

    /// The second line of the header: how rows are shown, and the keys.
    fn status_line(&self) -> String {
        let filter = match &self.editing {
            Some(t) => format!("/{t}_ (Enter applies, Esc clears)"),
            None if self.view.filter.is_empty() => "filter: -".into(),
            None => format!("filter: {}", self.view.filter),
        };
        format!(
            "refresh {:.2} s{}  sort: {} {}  {}  zero rows {}  {}",
            self.interval.as_secs_f64(),
            if self.paused { " PAUSED" } else { "" },
            self.view.sort.label(),
            if self.view.reverse { "(reversed)" } else { "" },
            filter,
            if self.view.hide_zero { "hidden" } else { "shown" },
            self.note,
        )
    }
}

/// Widths of a pane's columns: the widest cell of each.
fn widths(head: &[&str], rows: &[Vec<String>]) -> Vec<usize> {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(x) = w.get_mut(i) {
                *x = (*x).max(c.chars().count());
            }
        }
    }
    w
}

fn draw_pane(f: &mut Frame, area: Rect, n: usize, pane: &Pane, focused: bool, measuring: bool) {
    let (title, head, rows, right) = pane;
    let style = if focused { Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD) } else { Style::new() };
    let block = Block::bordered().title(format!(" {} {title} ", n + 1)).border_style(style);
    if measuring {
        f.render_widget(Paragraph::new("measuring...").block(block), area);
        return;
    }
    if rows.is_empty() {
        f.render_widget(Paragraph::new("(none with a non-zero rate: z shows all)").block(block), area);
        return;
    }
    let cell = |i: usize, c: &str, w: usize| if right.contains(&i) { format!("{c:>w$}") } else { c.to_string() };
    let ws = widths(head, rows);
    let width = |i: usize| ws.get(i).copied().unwrap_or(0);
    let header = Row::new(head.iter().enumerate().map(|(i, h)| cell(i, h, width(i))))
        .style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    let body = rows.iter().map(|r| Row::new(r.iter().enumerate().map(|(i, c)| cell(i, c, width(i)))));
    let constraints = ws.iter().map(|&n| Constraint::Length(n as u16));
    f.render_widget(Table::new(body, constraints).header(header).column_spacing(2).block(block), area);
}

fn draw(f: &mut Frame, app: &App) {
    let empty = Rates::default();
    let r = app.rates.as_ref().unwrap_or(&empty);
    let measuring = app.rates.is_none();
    let ps = panes(r, &app.view);
    let rows = |i: usize| ps.get(i).map_or(0, |p| p.2.len()) as u16;
    let [head, ifs, mid, bottom, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length((rows(0) + 3).clamp(4, 14)),
        Constraint::Fill(if app.focus == 1 || app.focus == 2 { 2 } else { 1 }),
        Constraint::Fill(if app.focus >= 3 { 2 } else { 1 }),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let title = if measuring { format!("tern top  {}", app.note) } else { header(r) };
    let lines = vec![Line::styled(title, Style::new().add_modifier(Modifier::BOLD)), Line::raw(app.status_line())];
    f.render_widget(Paragraph::new(lines), head);
    f.render_widget(
        Paragraph::new("q quit  Tab/1-5 pane  s sort  r reverse  / filter  z zero rows  +/- refresh  p pause")
            .style(Style::new().add_modifier(Modifier::REVERSED)),
        foot,
    );
    let [nodes, drops] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(mid);
    let [workers, xdp] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(bottom);
    for (i, area) in [ifs, nodes, drops, workers, xdp].into_iter().enumerate() {
        if let Some(p) = ps.get(i) {
            draw_pane(f, area, i, p, app.focus == i, measuring);
        }
    }
}

/// Puts the terminal back: raw mode off, the alternate screen left, the
/// cursor shown. Harmless on a terminal that is already so.
fn restore_terminal() {
    use ratatui::crossterm::{cursor::Show, execute, terminal};
    let _ = terminal::disable_raw_mode();
    let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen, Show);
}

/// Restores the terminal however the view ends (an error, a quit key).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Raw mode and the alternate screen, after a panic hook that restores
/// the terminal before the panic's message (the release build aborts on
/// a panic: no `Drop` runs then).
fn enter() -> std::io::Result<ratatui::DefaultTerminal> {
    use ratatui::crossterm::{execute, terminal};
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        hook(info);
    }));
    terminal::enable_raw_mode()?;
    execute!(std::io::stdout(), terminal::EnterAlternateScreen)?;
    ratatui::Terminal::new(ratatui::prelude::CrosstermBackend::new(std::io::stdout()))
}

/// The live view until a quit key.
pub fn run(ctx: &mut Ctx, view: View, interval: Duration) -> crate::Res {
    // The first sample before the screen changes: no tern, no screen.
    let first = sample(ctx)?;
    // Restored also when entering fails half-way (raw mode on, no
    // alternate screen).
    let _restore = Restore;
    let mut term = enter().map_err(|e| format!("terminal: {e}"))?;
    let mut app = App::new(view, interval);
    app.take(Ok(first));
    let mut last = Instant::now();
    loop {
        term.draw(|f| draw(f, &app)).map_err(|e| format!("terminal: {e}"))?;
        let due = last + app.interval;
        let wait = due.saturating_duration_since(Instant::now());
        if event::poll(if app.paused { Duration::from_secs(3600) } else { wait })
            .map_err(|e| format!("terminal: {e}"))?
        {
            match event::read().map_err(|e| format!("terminal: {e}"))? {
                Event::Key(k) => app.key(k),
                Event::Resize(..) => {}
                _ => continue,
            }
            if app.quit {
                return Ok(ExitCode::SUCCESS);
            }
            continue;
        }
        if !app.paused && Instant::now() >= due {
            last = Instant::now();
            app.take(sample(ctx));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(app: &mut App, c: KeyCode) {
        app.key(KeyEvent::new(c, KeyModifiers::NONE));
    }

    #[test]
    fn keys_change_the_view() {
        let mut app = App::new(View::default(), Duration::from_secs(1));
        press(&mut app, KeyCode::Char('s'));
        assert_eq!(app.view.sort, super::super::rates::SortKey::Bits);
        press(&mut app, KeyCode::Char('r'));
        assert!(app.view.reverse);
        press(&mut app, KeyCode::Char('/'));
        for c in "ip4".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        assert_eq!(app.view.filter, "", "applied only by Enter");
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.view.filter, "ip4");
        press(&mut app, KeyCode::Char('/'));
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.view.filter, "", "Esc clears");
        assert!(!app.quit, "Esc in the filter does not quit");
        press(&mut app, KeyCode::Char('+'));
        assert_eq!(app.interval, Duration::from_secs(2));
        for _ in 0..20 {
            press(&mut app, KeyCode::Char('-'));
        }
        assert_eq!(app.interval, Duration::from_millis(MIN_INTERVAL_MS));
        press(&mut app, KeyCode::Char('3'));
        assert_eq!(app.focus, 2);
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.focus, 3);
        press(&mut app, KeyCode::Char('p'));
        assert!(app.paused);
        app.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(app.quit);
    }

    /// The screen as text, drawn on ratatui's test backend.
    fn screen(app: &App) -> String {
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 48)).expect("terminal");
        t.draw(|f| draw(f, app)).expect("draw");
        let buf = t.backend().buffer();
        let mut s = String::new();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                s.push_str(buf[(x, y)].symbol());
            }
            s.push('\n');
        }
        s
    }

    #[test]
    fn the_screen_says_measuring_then_shows_rows() {
        use tern_control::api::types::{PortCounters, TopInterface, TopNode};
        let at = |ms: u64, n: u64| TopSample {
            version: "9.9.9".into(),
            uptime_ns: ms * 1_000_000,
            tsc_per_ns: 1.0,
            interfaces: vec![TopInterface {
                name: "lan0".into(),
                lane: Some("xdp native".into()),
                up: true,
                counters: PortCounters { rx_packets: n, ..PortCounters::default() },
            }],
            nodes: vec![
                TopNode { node: "ip4-lookup".into(), calls: n, packets: n, cycles: 30 * n },
                TopNode { node: "ip6-lookup".into(), calls: 0, packets: 0, cycles: 0 },
            ],
            ..TopSample::default()
        };
        let mut app = App::new(View { hide_zero: true, ..View::default() }, Duration::from_secs(1));
        app.take(Ok(at(1000, 0)));
        let s = screen(&app);
        assert!(s.contains("measuring...") && !s.contains("lan0"), "{s}");
        app.take(Ok(at(2000, 500)));
        let s = screen(&app);
        assert!(s.contains("tern 9.9.9") && s.contains("lanes: xdp native"), "{s}");
        let row = s.lines().find(|l| l.contains("ip4-lookup")).expect("the busy node");
        assert!(row.contains("500") && row.contains("30.0"), "packets/s and ns/packet: {row}");
        assert!(!s.contains("ip6-lookup"), "an idle node is hidden: {s}");
        app.key(KeyEvent::new(KeyCode::Char('z'), KeyModifiers::NONE));
        assert!(screen(&app).contains("ip6-lookup"), "z shows it");
        assert!(!s.contains('\x1b'));
    }

    #[test]
    fn a_restart_shows_measuring_again() {
        let mut app = App::new(View::default(), Duration::from_secs(1));
        let at = |ms: u64| TopSample { uptime_ns: ms * 1_000_000, ..TopSample::default() };
        app.take(Ok(at(1000)));
        assert!(app.rates.is_none() && app.note == "measuring...");
        app.take(Ok(at(2000)));
        assert!(app.rates.is_some() && app.note.is_empty());
        app.take(Ok(at(500)));
        assert!(app.rates.is_none() && app.note.contains("restarted"));
        app.take(Err("tern closed the connection".into()));
        assert!(app.note.starts_with("error:"));
        app.take(Ok(at(1500)));
        assert!(app.rates.is_some());
    }
}
