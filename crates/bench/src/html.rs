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
        let _ = writeln!(out, "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}%</text>", l - 4.0, y + 4.0, i * 25);
        let _ = writeln!(out, "<text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{:.2}</text>", t + ph + 14.0, xmax * f64::from(i) / 4.0);
    }
    let _ = writeln!(out, "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">offered load (Mpps)</text>", l + pw / 2.0, h - 6.0);
    let _ = writeln!(out, "<text x=\"12\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 12 {:.1})\">loss (%)</text>", t + ph / 2.0, t + ph / 2.0);
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
        let _ = writeln!(out, "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>", poly.join(" "));
        for (x, y) in &pts {
            let _ = writeln!(out, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{color}\"/>");
        }
        let ly = t + 14.0 + 18.0 * f64::from(legend);
        let _ = writeln!(out, "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{color}\"/>", l + pw + 12.0, ly - 10.0);
        let _ = writeln!(out, "<text x=\"{:.1}\" y=\"{ly:.1}\" font-size=\"12\">{}</text>", l + pw + 30.0, esc(&d.name));
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
        let _ = writeln!(out, "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\">{}</text>", l - 6.0, y + bar + 4.0, esc(&d.name));
        for (j, (v, label, op)) in [(ndr, "NDR", "1"), (pdr, "PDR", "0.5")].iter().enumerate() {
            let yy = y + j as f64 * bar;
            let bw = pw * (**v / xmax).clamp(0.0, 1.0);
            let _ = writeln!(out, "<rect x=\"{l}\" y=\"{yy:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{color}\" fill-opacity=\"{op}\"/>", bar - 1.0);
            let _ = writeln!(out, "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{label} {v:.3}</text>", l + bw + 4.0, yy + bar - 2.0);
        }
    }
    let _ = writeln!(out, "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">Mpps (scale 0..{xmax})</text>", l + pw / 2.0, h - 4.0);
    out.push_str("</svg>\n");
}

/// Renders the report as a self-contained HTML page.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let c = &r.conditions;
    let _ = writeln!(o, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">");
    let _ = writeln!(o, "<title>tern bench rfc2544: {}</title>", esc(&r.scenario));
    o.push_str("<style>body{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}.note{color:#666;font-size:90%}</style>\n</head>\n<body>\n");
    let _ = writeln!(o, "<h1>RFC 2544: {}</h1>\n<p>{}</p>", esc(&r.scenario), esc(&r.description));
    o.push_str("<h2>Conditions</h2>\n<table>\n");
    let rows: Vec<(&str, String)> = vec![
        ("command", c.command.clone()),
        ("kernel", c.kernel.clone()),
        ("CPU", format!("{} ({} CPUs)", c.cpu_model, c.cpus)),
        ("pinning", format!("generator cpu {}, DUT cpu {}, sink NAPI cpu {}", c.gen_cpu, c.dut_cpu, c.sink_cpu)),
        ("load average at start", c.loadavg.clone()),
        ("trial", format!("{} s, drain up to {} s", c.trial_secs, c.drain_secs)),
        ("search", format!("NDR (0 loss) and PDR (<= {} %) to {} % of the top rate", c.pdr_loss * 100.0, c.goal_width * 100.0)),
        ("generator", c.generator.clone()),
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
            DutStatus::NotSupported => format!("not supported: {}", d.message.as_deref().unwrap_or("")),
            DutStatus::Failed => format!("failed: {}", d.message.as_deref().unwrap_or("")),
        };
        let _ = writeln!(o, "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>", esc(&d.name), esc(&status), esc(&d.description));
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
                let _ = write!(o, "<td title=\"offered {:.3} Mpps, {} sent, {} lost\">{:.3}{star}</td>", p.offered_mpps, p.sent, p.lost, p.loss_pct);
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
