//! `tern top`: a live view of a running tern over its API socket
//! (interfaces, nodes of both lanes, drop reasons, workers, FIB, the XDP
//! lane), refreshed at an interval; one interval as plain text or JSON
//! when standard output is not a terminal, with `--once` or `--json`.
//!
//! Each refresh is one `top_sample` request; rates are differences of two
//! samples over tern's own clock ([`rates`]).

pub mod rates;
mod ui;

use super::Ctx;
use rates::{NoRates, Rates, SortKey, View};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;
use tern_control::api::types::TopSample;
use tern_control::api::{Command, Reply};

/// Shortest refresh interval (`--interval`, `-`).
pub const MIN_INTERVAL_MS: u64 = 100;
/// Longest refresh interval.
pub const MAX_INTERVAL_MS: u64 = 60_000;

#[derive(clap::Args, Debug, Clone)]
pub struct TopArgs {
    /// Milliseconds between refreshes (and between the two samples of
    /// `--once`), 100 to 60000.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub interval: u64,
    /// Print one interval's rates as plain text (or JSON with --json) and
    /// exit; what `tern top` does when standard output is not a terminal.
    #[arg(long)]
    pub once: bool,
    /// Only rows whose name contains TEXT (any case).
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub filter: String,
    /// Order rows by packets/s, bits/s, drops/s, cost (ns/packet) or name.
    #[arg(long, value_enum, default_value = "packets")]
    pub sort: SortKey,
}

/// One `top_sample` from tern.
pub fn sample(ctx: &mut Ctx) -> Result<TopSample, String> {
    match ctx.call(&Command::TopSample {})? {
        Reply::TopSample(s) => Ok(s),
        other => Err(format!("tern answered top_sample with {other:?}: is it an older tern?")),
    }
}

/// `tern top`.
pub fn run(ctx: &mut Ctx, a: &TopArgs, json: bool) -> crate::Res {
    let view = View { filter: a.filter.clone(), sort: a.sort, reverse: false, hide_zero: true };
    let interval = Duration::from_millis(a.interval);
    if a.once || json || !std::io::stdout().is_terminal() {
        let r = one_interval(ctx, interval)?;
        if json {
            let mut s = serde_json::to_string_pretty(&json_rates(&r, &view)).map_err(|e| e.to_string())?;
            s.push('\n');
            print!("{s}");
        } else {
            print!("{}", plain(&r, &view));
        }
        return Ok(ExitCode::SUCCESS);
    }
    ui::run(ctx, view, interval)
}

/// Two samples `interval` apart and their rates (once more if tern
/// restarted in between).
fn one_interval(ctx: &mut Ctx, interval: Duration) -> Result<Rates, String> {
    let mut a = sample(ctx)?;
    for _ in 0..3 {
        std::thread::sleep(interval);
        let b = sample(ctx)?;
        match Rates::between(&a, &b) {
            Ok(r) => return Ok(r),
            Err(NoRates::Restarted | NoRates::ZeroInterval) => a = b,
        }
    }
    Err("tern restarted during every interval measured".into())
}

/// The rates `--json` prints: every row (no zero rows hidden), filtered
/// and sorted as asked.
fn json_rates(r: &Rates, view: &View) -> Rates {
    let v = View { hide_zero: false, ..view.clone() };
    Rates {
        interfaces: v.rows(&r.interfaces, true).into_iter().cloned().collect(),
        nodes: v.rows(&r.nodes, false).into_iter().cloned().collect(),
        drops: v.rows(&r.drops, false).into_iter().cloned().collect(),
        xdp: v.rows(&r.xdp, false).into_iter().cloned().collect(),
        ..r.clone()
    }
}

/// A rate as people read it: 1.23M, 456k, 7.
pub fn si(x: f64) -> String {
    let a = x.abs();
    if a >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", x / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// An optional figure, or `-`.
pub fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// Seconds as `1d 2h`, `3h 4m`, `5m 6s`, `7s`.
pub fn uptime(s: f64) -> String {
    let s = s as u64;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m {sec}s")
    } else {
        format!("{sec}s")
    }
}

/// The panes' rows as cells: (title, header, rows, right-aligned columns).
pub type Pane = (&'static str, Vec<&'static str>, Vec<Vec<String>>, Vec<usize>);

/// Every pane's rows, in pane order (1 interfaces, 2 nodes, 3 drops, 4
/// workers and FIB, 5 XDP lane).
pub fn panes(r: &Rates, view: &View) -> Vec<Pane> {
    let ifs = view
        .rows(&r.interfaces, true)
        .into_iter()
        .map(|i| {
            vec![
                i.name.clone(),
                i.lane.clone().unwrap_or_else(|| "-".into()),
                if i.up { "up" } else { "down" }.into(),
                si(i.rx_pps),
                si(i.tx_pps),
                si(i.rx_bps),
                si(i.tx_bps),
                si(i.drops_ps),
            ]
        })
        .collect();
    let nodes = view
        .rows(&r.nodes, false)
        .into_iter()
        .map(|n| {
            vec![
                n.node.clone(),
                n.lane.clone(),
                si(n.pps),
                opt(n.ns_per_packet, 1),
                n.calls_ps.map_or_else(|| "-".into(), si),
                opt(n.packets_per_call, 1),
            ]
        })
        .collect();
    let drops = view
        .rows(&r.drops, false)
        .into_iter()
        .map(|d| vec![d.node.clone(), d.reason.clone(), si(d.per_s), d.total.to_string()])
        .collect();
    let mut workers: Vec<Vec<String>> = r
        .workers
        .iter()
        .map(|w| {
            vec![
                format!("worker {}", w.id),
                format!("{:.0}%", w.load_pct),
                format!("{:.0}%", w.busy_loops_pct),
                si(w.loops_ps),
                si(w.rx_pps),
            ]
        })
        .collect();
    let f = &r.fib;
    workers.push(vec![
        "fib".into(),
        format!("v4 {}", f.v4_routes),
        format!("v6 {}", f.v6_routes),
        format!("{} upd/s", si(f.updates_ps)),
        format!("+{} -{}", si(f.adds_ps), si(f.dels_ps)),
    ]);
    let xdp = view
        .rows(&r.xdp, false)
        .into_iter()
        .map(|x| vec![format!("{}/{}", x.node, x.name), x.kind.clone(), si(x.per_s), x.total.to_string()])
        .collect();
    vec![
        (
            "interfaces",
            vec!["interface", "lane", "state", "rx pkt/s", "tx pkt/s", "rx bit/s", "tx bit/s", "drops/s"],
            ifs,
            vec![3, 4, 5, 6, 7],
        ),
        ("nodes", vec!["node", "lane", "pkt/s", "ns/pkt", "calls/s", "pkt/call"], nodes, vec![2, 3, 4, 5]),
        ("drops", vec!["node", "reason", "drops/s", "total"], drops, vec![2, 3]),
        ("workers", vec!["worker", "load", "busy loops", "loops/s", "rx pkt/s"], workers, vec![1, 2, 3, 4]),
        ("xdp lane", vec!["counter", "kind", "pkt/s", "total"], xdp, vec![2, 3]),
    ]
}

/// The header line: version, uptime, lanes, interval.
pub fn header(r: &Rates) -> String {
    format!(
        "tern {}  up {}  lanes: {}  rates over {:.2} s",
        r.version,
        uptime(r.uptime_s),
        if r.lanes.is_empty() { "-".into() } else { r.lanes.join(", ") },
        r.interval_s
    )
}

/// `--once` without `--json`: the panes as plain tables.
fn plain(r: &Rates, view: &View) -> String {
    let mut s = header(r);
    s.push('\n');
    for (title, head, rows, right) in panes(r, view) {
        let _ = write!(s, "\n{title}\n");
        if rows.is_empty() {
            s.push_str("  (none with a non-zero rate)\n");
            continue;
        }
        s.push_str(&super::render::table(&head, &rows, &right));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_well() {
        assert_eq!(si(0.0), "0");
        assert_eq!(si(2.5), "2.5");
        assert_eq!(si(950.0), "950");
        assert_eq!(si(12_345.0), "12.3k");
        assert_eq!(si(3_456_789.0), "3.46M");
        assert_eq!(si(10e9), "10.00G");
        assert_eq!(opt(None, 1), "-");
        assert_eq!(uptime(3725.0), "1h 2m");
        assert_eq!(uptime(59.0), "59s");
    }

    #[test]
    fn plain_text_has_no_escapes_and_every_pane() {
        let r = Rates {
            version: "0.1.0".into(),
            interval_s: 1.0,
            interfaces: vec![rates::IfaceRate { name: "lan".into(), rx_pps: 5.0, ..Default::default() }],
            ..Rates::default()
        };
        let t = plain(&r, &View { hide_zero: true, ..View::default() });
        assert!(!t.contains('\x1b'), "{t}");
        for title in ["interfaces", "nodes", "drops", "workers", "xdp lane"] {
            assert!(t.contains(&format!("\n{title}\n")), "{title}: {t}");
        }
        assert!(t.contains("lan"), "{t}");
    }
}
