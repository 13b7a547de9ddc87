//! The HTML report: one self-contained page (no scripts, no external
//! files) with the conditions, and per frame size an SVG chart of loss
//! against offered load per DUT, an SVG bar chart of NDR and PDR, and the
//! frame-loss table.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::{BenchError, Result};
use crate::report::{DutReport, DutStatus, Report};

const COLORS: [&str; 6] = ["#444444", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"];

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Lines of a DUT's error the page shows (its first, and the last ones).
const EXCERPT_LINES: usize = 8;
/// Characters of one line the page shows.
const EXCERPT_LINE_CHARS: usize = 200;

/// A bounded excerpt of an error message for the page: its first line and
/// its last `lines - 1` (a DUT's log tail ends there), each cut at 200
/// characters, with what was left out said. The whole message is in the
/// JSON report, and a failed DUT's log in the work directory.
pub fn excerpt(msg: &str, lines: usize) -> String {
    let cut = |l: &str| -> String {
        let n = l.chars().count();
        if n <= EXCERPT_LINE_CHARS {
            l.to_string()
        } else {
            let head: String = l.chars().take(EXCERPT_LINE_CHARS).collect();
            format!("{head}... ({} more characters)", n - EXCERPT_LINE_CHARS)
        }
    };
    let all: Vec<&str> = msg.lines().collect();
    let lines = lines.max(2);
    if all.len() <= lines {
        return all.iter().map(|l| cut(l)).collect::<Vec<_>>().join("\n");
    }
    let mut out =
        vec![cut(all[0]), format!("... ({} lines left out; the JSON report has them all)", all.len() - lines)];
    out.extend(all[all.len() - (lines - 1)..].iter().map(|l| cut(l)));
    out.join("\n")
}

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if v <= m * p {
            return m * p;
        }
    }
    10.0 * p
}

fn loss_chart(out: &mut String, r: &Report, size: &str) {
    let (w, h, l, b, t, rt) = (640.0, 320.0, 56.0, 40.0, 16.0, 150.0);
    let pw = w - l - rt;
    let ph = h - t - b;
    let xmax = nice_max(
        r.all()
            .flat_map(|d| d.sizes.iter().filter(|s| s.size == size))
            .flat_map(|s| s.frame_loss.iter().map(|p| p.offered_mpps))
            .fold(0.0, f64::max),
    );
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"loss versus offered load, frame size {}\">",
        esc(size)
    );
    let _ = writeln!(out, "<rect x=\"{l}\" y=\"{t}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#999\"/>");
    for i in 0..=4 {
        let y = t + ph - ph * f64::from(i) / 4.0;
        let x = l + pw * f64::from(i) / 4.0;
        let _ = writeln!(out, "<line x1=\"{l}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>", l + pw);
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}%</text>",
            l - 4.0,
            y + 4.0,
            i * 25
        );
        let _ = writeln!(
            out,
            "<text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{:.2}</text>",
            t + ph + 14.0,
            xmax * f64::from(i) / 4.0
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">offered load (Mpps)</text>",
        l + pw / 2.0,
        h - 6.0
    );
    let _ = writeln!(
        out,
        "<text x=\"12\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 12 {:.1})\">loss (%)</text>",
        t + ph / 2.0,
        t + ph / 2.0
    );
    let mut legend = 0;
    for (i, d) in r.all().enumerate() {
        let Some(s) = d.sizes.iter().find(|s| s.size == size) else { continue };
        if s.frame_loss.is_empty() {
            continue;
        }
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = s
            .frame_loss
            .iter()
            .map(|p| (l + pw * (p.offered_mpps / xmax).min(1.0), t + ph - ph * (p.loss_pct / 100.0).clamp(0.0, 1.0)))
            .collect();
        let poly: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
            poly.join(" ")
        );
        for (x, y) in &pts {
            let _ = writeln!(out, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{color}\"/>");
        }
        let ly = t + 14.0 + 18.0 * f64::from(legend);
        let _ = writeln!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{color}\"/>",
            l + pw + 12.0,
            ly - 10.0
        );
        let _ =
            writeln!(out, "<text x=\"{:.1}\" y=\"{ly:.1}\" font-size=\"12\">{}</text>", l + pw + 30.0, esc(&d.name));
        legend += 1;
    }
    out.push_str("</svg>\n");
}

fn rate_chart(out: &mut String, r: &Report, size: &str) {
    let rows: Vec<(usize, &DutReport, f64, f64)> = r
        .all()
        .enumerate()
        .filter_map(|(i, d)| {
            let s = d.sizes.iter().find(|s| s.size == size)?;
            Some((i, d, s.ndr.map_or(0.0, |x| x.mpps), s.pdr.map_or(0.0, |x| x.mpps)))
        })
        .collect();
    let (w, l, rt, bar) = (640.0, 130.0, 90.0, 12.0);
    let h = 30.0 + rows.len() as f64 * (2.0 * bar + 12.0);
    let xmax = nice_max(rows.iter().map(|r| r.2.max(r.3)).fold(0.0, f64::max));
    let pw = w - l - rt;
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h:.0}\" viewBox=\"0 0 {w} {h:.0}\" role=\"img\" aria-label=\"NDR and PDR, frame size {}\">",
        esc(size)
    );
    for (k, (i, d, ndr, pdr)) in rows.iter().enumerate() {
        let y = 10.0 + k as f64 * (2.0 * bar + 12.0);
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\">{}</text>",
            l - 6.0,
            y + bar + 4.0,
            esc(&d.name)
        );
        for (j, (v, label, op)) in [(ndr, "NDR", "1"), (pdr, "PDR", "0.5")].iter().enumerate() {
            let yy = y + j as f64 * bar;
            let bw = pw * (**v / xmax).clamp(0.0, 1.0);
            let _ = writeln!(
                out,
                "<rect x=\"{l}\" y=\"{yy:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{color}\" fill-opacity=\"{op}\"/>",
                bar - 1.0
            );
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{label} {v:.3}</text>",
                l + bw + 4.0,
                yy + bar - 2.0
            );
        }
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">Mpps (scale 0..{xmax})</text>",
        l + pw / 2.0,
        h - 4.0
    );
    out.push_str("</svg>\n");
}

/// Renders the report as a self-contained HTML page.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let c = &r.conditions;
    let _ = writeln!(o, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">");
    let _ = writeln!(o, "<title>tern-bench rfc2544: {}</title>", esc(&r.scenario));
    o.push_str("<style>body{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}pre.err{white-space:pre-wrap;max-width:40em;font-size:85%;margin:0.3em 0}.note{color:#666;font-size:90%}</style>\n</head>\n<body>\n");
    let _ = writeln!(o, "<h1>RFC 2544: {}</h1>\n<p>{}</p>", esc(&r.scenario), esc(&r.description));
    o.push_str("<h2>Conditions</h2>\n<table>\n");
    let rows: Vec<(&str, String)> = vec![
        ("command", c.command.clone()),
        ("kernel", c.kernel.clone()),
        ("CPU", format!("{} ({} CPUs)", c.cpu_model, c.cpus)),
        (
            "pinning",
            format!(
                "generator cpu {}, DUT cpu {}, sink NAPI cpu {}; SCHED_FIFO {} (NAPI threads +1, 0 = off)",
                c.gen_cpu, c.dut_cpu, c.sink_cpu, c.rt_priority
            ),
        ),
        ("CPUs kept out of idle states (PM QoS)", crate::report::idle_list(&c.no_idle_cpus)),
        (
            "CPUs other tasks were moved off",
            format!("{} ({} tasks)", crate::report::idle_list(&c.isolated_cpus), c.tasks_moved),
        ),
        ("Host holes", crate::report::hole_rule(c.hole_watch_us, c.excuse_host_holes)),
        ("load average at start", c.loadavg.clone()),
        ("trial", format!("{} s, drain up to {} s", c.trial_secs, c.drain_secs)),
        (
            "search",
            format!(
                "NDR (0 loss) and PDR (<= {} %) to {} % of the top rate; {}",
                c.pdr_loss * 100.0,
                c.goal_width * 100.0,
                crate::report::search_rule(c.trials_per_load)
            ),
        ),
        ("generator", c.generator.clone()),
        ("notes", if c.notes.is_empty() { "none".into() } else { c.notes.join("; ") }),
        ("receiver", c.receiver.clone()),
        ("traffic", c.traffic.join("; ")),
        ("VLAN", c.vlan.map_or("none".into(), |v| v.to_string())),
        ("DUT configuration", c.dut_config.clone()),
    ];
    for (k, v) in rows {
        let _ = writeln!(o, "<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>", esc(k), esc(&v));
    }
    o.push_str("</table>\n<h2>Devices under test</h2>\n<table>\n<tr><th class=\"l\">DUT</th><th class=\"l\">status</th><th class=\"l\">setup</th></tr>\n");
    for d in r.all() {
        let status = match d.status {
            DutStatus::Ok => "measured".to_string(),
            DutStatus::NotSupported => {
                format!("not supported: {}", esc(&excerpt(d.message.as_deref().unwrap_or(""), EXCERPT_LINES)))
            }
            DutStatus::Failed => format!(
                "failed:<pre class=\"err\">{}</pre>",
                esc(&excerpt(d.message.as_deref().unwrap_or(""), EXCERPT_LINES))
            ),
        };
        let _ = writeln!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{status}</td><td class=\"l\">{}</td></tr>",
            esc(&d.name),
            esc(&d.description)
        );
    }
    o.push_str("</table>\n");
    for size in r.size_labels() {
        let _ = writeln!(o, "<h2>Frame size {}</h2>", esc(&size));
        o.push_str("<h3>Loss against offered load</h3>\n");
        loss_chart(&mut o, r, &size);
        o.push_str("<h3>NDR and PDR</h3>\n");
        rate_chart(&mut o, r, &size);
        o.push_str("<h3>Frame loss (%)</h3>\n<table>\n<tr><th class=\"l\">DUT</th>");
        let loads: Vec<f64> = r
            .all()
            .flat_map(|d| d.sizes.iter().filter(|s| s.size == size))
            .next()
            .map(|s| s.frame_loss.iter().map(|p| p.target_mpps).collect())
            .unwrap_or_default();
        for l in &loads {
            let _ = write!(o, "<th>{l:.3} Mpps</th>");
        }
        o.push_str("<th>NDR Mpps</th><th>PDR Mpps</th><th>latency p50/p99 at lowest load (us)</th></tr>\n");
        for d in r.all() {
            let Some(s) = d.sizes.iter().find(|s| s.size == size) else { continue };
            let _ = write!(o, "<tr><td class=\"l\">{}</td>", esc(&d.name));
            for p in &s.frame_loss {
                let star = if p.short() { "*" } else { "" };
                let _ = write!(
                    o,
                    "<td title=\"offered {:.3} Mpps, {} sent, {} lost\">{:.3}{star}</td>",
                    p.offered_mpps, p.sent, p.lost, p.loss_pct
                );
            }
            let f = |x: &Option<crate::report::RateReport>| x.map_or("-".into(), |x| format!("{:.3}", x.mpps));
            let lat = s
                .frame_loss
                .first()
                .and_then(|p| p.latency)
                .map_or("-".into(), |l| format!("{:.1} / {:.1}", l.p50 as f64 / 1e3, l.p99 as f64 / 1e3));
            let _ = writeln!(o, "<td>{}</td><td>{}</td><td>{}</td></tr>", f(&s.ndr), f(&s.pdr), esc(&lat));
        }
        o.push_str("</table>\n");
    }
    o.push_str("<p class=\"note\">* the generator reached less than 98 % of the load asked; the cell's tooltip gives the load achieved. Loss counts only streams meant to be forwarded.</p>\n</body>\n</html>\n");
    o
}

impl Report {
    /// Writes the HTML report to `path`.
    pub fn write_html(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, render(self)).map_err(|e| BenchError::io(format!("write {}", path.display()), e))
    }
}

/// Checks that a page is well formed: every element closed in order
/// (void and self-closed elements aside), attributes quoted, entities
/// known. A small checker for the pages [`render`] writes, so tests can
/// fail on a broken report without a browser.
pub fn check_well_formed(page: &str) -> std::result::Result<(), String> {
    const VOID: [&str; 4] = ["meta", "br", "hr", "img"];
    let mut stack: Vec<String> = Vec::new();
    let mut rest = page;
    while let Some(i) = rest.find(['<', '&']) {
        let (before, at) = rest.split_at(i);
        let _ = before;
        if at.starts_with('&') {
            let end = at.find(';').ok_or("unterminated entity")?;
            let ent = &at[1..end];
            if !["amp", "lt", "gt", "quot", "#39"].contains(&ent) {
                return Err(format!("unknown entity &{ent};"));
            }
            rest = &at[end + 1..];
            continue;
        }
        let end = at.find('>').ok_or("unterminated tag")?;
        let tag = &at[1..end];
        rest = &at[end + 1..];
        if tag.starts_with('!') {
            continue; // doctype
        }
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().ok_or_else(|| format!("</{name}> closes nothing"))?;
            if open != name.trim() {
                return Err(format!("</{name}> closes <{open}>"));
            }
            continue;
        }
        if tag.matches('"').count() % 2 != 0 {
            return Err(format!("unbalanced quotes in <{tag}>"));
        }
        let name = tag.split_whitespace().next().unwrap_or("").trim_end_matches('/').to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!("bad tag <{tag}>"));
        }
        if tag.ends_with('/') || VOID.contains(&name.as_str()) {
            continue;
        }
        if name == "style" {
            let close = rest.find("</style>").ok_or("unterminated <style>")?;
            rest = &rest[close + "</style>".len()..];
            continue;
        }
        stack.push(name);
    }
    match stack.pop() {
        None => Ok(()),
        Some(open) => Err(format!("<{open}> never closed")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Conditions, DutReport, DutStatus, LoadPoint, RateReport, SizeReport};

    fn sample() -> Report {
        let point = |t: f64, loss: f64| LoadPoint {
            target_mpps: t,
            offered_mpps: t * 0.99,
            loss_pct: loss,
            sent: 1000,
            lost: (loss * 10.0) as u64,
            reordered: 0,
            duplicated: 0,
            leaked: 0,
            latency: None,
            streams: Vec::new(),
            in_gre: 0,
            dut_steal_ms: Some(10.0),
            dut_cpu_ns_per_frame: Some(400.0),
            dut_holes: Some(2),
            dut_hole_max_us: Some(1500.0),
            dut_busy_late_max_us: Some(300.0),
            lost_in_holes: Some(3),
            ring_drops: Some(crate::trial::RingDrops { into_dut: 2, into_sink: 1 }),
        };
        let size = |loss: f64| SizeReport {
            size: "64".into(),
            frame_loss: vec![point(0.5, 0.0), point(1.0, loss), point(2.0, 2.0 * loss)],
            ndr: Some(RateReport { mpps: 0.9, upper_mpps: Some(0.95), loss_pct: 0.0 }),
            pdr: Some(RateReport { mpps: 1.0, upper_mpps: None, loss_pct: 0.3 }),
            search_trials: 7,
        };
        Report {
            scenario: "drop-test".into(),
            description: "a <test> & \"quotes\"".into(),
            conditions: Conditions {
                command: "tern-bench rfc2544 --dut <x>".into(),
                started_unix: 0,
                kernel: "6.18".into(),
                cpu_model: "cpu".into(),
                cpus: 2,
                gen_cpu: 0,
                dut_cpu: 1,
                sink_cpu: 0,
                rt_priority: 50,
                trial_secs: 1.0,
                drain_secs: 0.5,
                goal_width: 0.01,
                pdr_loss: 0.005,
                generator: "xdp".into(),
                generator_kind: crate::pktgen::GeneratorKind::Afpacket,
                notes: vec!["the XDP generator <refused>".into()],
                no_idle_cpus: vec![1],
                isolated_cpus: vec![1],
                tasks_moved: 40,
                hole_watch_us: Some(200.0),
                excuse_host_holes: true,
                trials_per_load: 3,
                receiver: "xdp".into(),
                traffic: vec!["legit".into()],
                vlan: None,
                dut_config: "fw".into(),
                loadavg: "0.1".into(),
            },
            ceiling: DutReport {
                name: "direct".into(),
                description: "d".into(),
                status: DutStatus::Ok,
                message: None,
                sizes: vec![size(0.0)],
            },
            duts: vec![
                DutReport {
                    name: "linux-nft".into(),
                    description: "nft's 50 rules".into(),
                    status: DutStatus::Ok,
                    message: None,
                    sizes: vec![size(12.5)],
                },
                DutReport::without_results("tern", DutStatus::Failed, "no <binary>".into()),
            ],
        }
    }

    #[test]
    fn page_is_well_formed_and_escaped() {
        let page = render(&sample());
        check_well_formed(&page).expect("well formed");
        assert!(page.contains("a &lt;test&gt; &amp; &quot;quotes&quot;"));
        assert!(!page.contains("<binary>"));
        // One loss chart and one rate chart per frame size.
        assert_eq!(page.matches("<svg").count(), 2);
        // A polyline per measured DUT (ceiling, linux-nft), none for the failed one.
        assert_eq!(page.matches("<polyline").count(), 2);
        assert!(page.contains("failed:<pre class=\"err\">no &lt;binary&gt;</pre>"));
        assert!(page.contains("the XDP generator &lt;refused&gt;"), "notes are shown");
    }

    /// A DUT that failed with its whole log in the message: the page
    /// shows a bounded, escaped excerpt, not the log in one cell.
    #[test]
    fn a_long_error_is_shown_as_a_bounded_excerpt() {
        let mut r = sample();
        let mut log = String::from("nothing forwarded after 30 s of learning traffic; log:");
        for i in 0..500 {
            log.push_str(&format!("\nline {i} <tag> {}", "x".repeat(if i == 499 { 5000 } else { 10 })));
        }
        r.duts.push(DutReport::without_results("tern-afxdp", DutStatus::Failed, log.clone()));
        let page = render(&r);
        check_well_formed(&page).expect("well formed");
        let from = page.find("nothing forwarded").expect("first line shown");
        let cell = &page[from..from + page[from..].find("</pre>").expect("closed")];
        assert!(cell.len() < 3000, "{} bytes in the cell", cell.len());
        assert!(cell.contains("line 498 &lt;tag&gt;"), "the log's tail is shown");
        assert!(!cell.contains("line 10 "), "the middle is left out");
        assert!(cell.contains("lines left out") && cell.contains("more characters"));
        assert!(!page.contains("<tag>"));
        // The JSON report keeps it all.
        assert!(r.to_json().contains("line 10 <tag>"));
        assert_eq!(excerpt("a\nb", 8), "a\nb");
    }

    #[test]
    fn checker_catches_breakage() {
        assert!(check_well_formed("<p><b>x</p></b>").is_err());
        assert!(check_well_formed("<p>x").is_err());
        assert!(check_well_formed("<p a=\"x>y</p>").is_err());
        assert!(check_well_formed("<p>&nbsp;</p>").is_err());
        assert!(check_well_formed("<p><meta charset=\"utf-8\"><rect/></p>").is_ok());
    }

    #[test]
    fn table_shows_every_dut() {
        let text = sample().to_string();
        assert!(text.contains("| direct (ceiling)"));
        assert!(text.contains("| linux-nft"));
        assert!(text.contains("| tern             | failed: no <binary>"));
        assert!(text.contains("12.5"));
        assert!(text.contains(">=1.000"), "PDR met at the top rate: {text}");
        let json: serde_json::Value = serde_json::from_str(&sample().to_json()).expect("json");
        assert_eq!(json["duts"][0]["sizes"][0]["frame_loss"][1]["loss_pct"], 12.5);
        assert_eq!(json["duts"][1]["status"], "failed");
    }
}
