//! The Grafana dashboard (deploy/grafana/tern.json) queries only what tern
//! exports: every metric name in every panel's PromQL, with the label
//! names the query uses on it and the label values it matches exactly,
//! is in the scrape of a real tern forwarding traffic in a namespace lab
//! (the XDP lane, a firewall and the FPM server on, so that their
//! families have samples).
//!
//! The lab needs root, iproute2, ping and ethtool; without them the lab
//! test says why and passes (the extractor's tests still run).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

mod common;
use common::{Lab, lab_missing, must, run_tern, scrape_in, sh};
use std::time::{Duration, Instant};

/// What one PromQL expression reads of one metric.
#[derive(Debug, Default, Clone, PartialEq)]
struct Use {
    metric: String,
    /// Label names of its selector and of the by/without lists around it.
    labels: BTreeSet<String>,
    /// `label="value"` matchers with a literal value.
    equals: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `{...}`: (label, operator, value) matchers.
    Selector(Vec<(String, String, String)>),
    Open,
    Close,
    /// Strings, numbers, durations, ranges, `$variables`, operators.
    Other,
}

/// Aggregation operators, which may be followed by `by`/`without` before
/// their parenthesis.
const AGGREGATORS: &[&str] = &[
    "sum",
    "avg",
    "min",
    "max",
    "count",
    "group",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "limitk",
    "limit_ratio",
];
/// Words that are neither metrics nor functions.
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"];
/// Labels Prometheus adds to what it scrapes (the target's), not tern.
const TARGET_LABELS: &[&str] = &["instance", "job"];

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// A quoted string starting at `cs[i]` (any PromQL quote); its value and
/// the index after it.
fn string_at(cs: &[char], i: usize) -> Result<(String, usize), String> {
    let q = cs[i];
    let mut v = String::new();
    let mut j = i + 1;
    while j < cs.len() {
        match cs[j] {
            '\\' if q != '`' => {
                v.push(*cs.get(j + 1).ok_or("string ends in a backslash")?);
                j += 2;
            }
            c if c == q => return Ok((v, j + 1)),
            c => {
                v.push(c);
                j += 1;
            }
        }
    }
    Err(format!("unterminated string at {i}"))
}

fn tokens(expr: &str) -> Result<Vec<Tok>, String> {
    let cs: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' || c == '`' {
            i = string_at(&cs, i)?.1;
            out.push(Tok::Other);
        } else if c == '[' {
            // A range or subquery: durations and Grafana's $__rate_interval.
            i = cs[i..].iter().position(|&c| c == ']').map(|p| i + p + 1).ok_or("unclosed [")?;
            out.push(Tok::Other);
        } else if c == '{' {
            let mut m = Vec::new();
            i += 1;
            loop {
                while i < cs.len() && (cs[i].is_whitespace() || cs[i] == ',') {
                    i += 1;
                }
                match cs.get(i) {
                    None => return Err("unclosed {".into()),
                    Some('}') => {
                        i += 1;
                        break;
                    }
                    Some(_) => {}
                }
                let start = i;
                while i < cs.len() && is_ident(cs[i]) {
                    i += 1;
                }
                let label: String = cs[start..i].iter().collect();
                if label.is_empty() {
                    return Err(format!("no label name at {i} in {expr:?}"));
                }
                while i < cs.len() && cs[i].is_whitespace() {
                    i += 1;
                }
                let op_start = i;
                while i < cs.len() && matches!(cs[i], '=' | '!' | '~') {
                    i += 1;
                }
                let op: String = cs[op_start..i].iter().collect();
                if !["=", "!=", "=~", "!~"].contains(&op.as_str()) {
                    return Err(format!("bad matcher {label}{op} in {expr:?}"));
                }
                while i < cs.len() && cs[i].is_whitespace() {
                    i += 1;
                }
                if !matches!(cs.get(i), Some('"' | '\'' | '`')) {
                    return Err(format!("matcher {label}{op} without a string in {expr:?}"));
                }
                let (value, next) = string_at(&cs, i)?;
                i = next;
                m.push((label, op, value));
            }
            out.push(Tok::Selector(m));
        } else if c == '(' {
            out.push(Tok::Open);
            i += 1;
        } else if c == ')' {
            out.push(Tok::Close);
            i += 1;
        } else if c.is_ascii_digit() || (c == '.' && cs.get(i + 1).is_some_and(char::is_ascii_digit)) {
            // 0.99, 1e9, 1e-9, 5m, 0x1f.
            i += 1;
            while i < cs.len()
                && (cs[i].is_ascii_alphanumeric()
                    || cs[i] == '.'
                    || (matches!(cs[i], '+' | '-') && matches!(cs[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            out.push(Tok::Other);
        } else if c == '$' {
            // A Grafana variable: $name or ${name}.
            i += 1;
            if cs.get(i) == Some(&'{') {
                i = cs[i..].iter().position(|&c| c == '}').map(|p| i + p + 1).ok_or("unclosed ${")?;
            } else {
                while i < cs.len() && is_ident(cs[i]) {
                    i += 1;
                }
            }
            out.push(Tok::Other);
        } else if is_ident_start(c) {
            let start = i;
            while i < cs.len() && is_ident(cs[i]) {
                i += 1;
            }
            out.push(Tok::Ident(cs[start..i].iter().collect()));
        } else {
            out.push(Tok::Other);
            i += 1;
        }
    }
    Ok(out)
}

/// The index of the `)` closing the `(` at `open`.
fn closing(toks: &[Tok], open: usize) -> Result<usize, String> {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth -= 1;
                if depth == 0 {
                    return Ok(j);
                }
            }
            _ => {}
        }
    }
    Err("unbalanced parentheses".into())
}

/// The `(` opening the `)` at `close`.
fn opening(toks: &[Tok], close: usize) -> Result<usize, String> {
    let mut depth = 0usize;
    for j in (0..=close).rev() {
        match toks[j] {
            Tok::Close => depth += 1,
            Tok::Open => {
                depth -= 1;
                if depth == 0 {
                    return Ok(j);
                }
            }
            _ => {}
        }
    }
    Err("unbalanced parentheses".into())
}

/// The identifiers of a `(a, b)` list at `open`, and its `)`.
fn label_list(toks: &[Tok], open: usize) -> Result<(Vec<String>, usize), String> {
    if toks.get(open) != Some(&Tok::Open) {
        return Err("a label list must follow by/without/on/ignoring".into());
    }
    let close = closing(toks, open)?;
    let names = toks[open + 1..close]
        .iter()
        .filter_map(|t| if let Tok::Ident(n) = t { Some(n.clone()) } else { None })
        .collect();
    Ok((names, close))
}

/// Every metric `expr` reads: identifiers that are not functions,
/// aggregations, keywords or label names, each with the labels its
/// selector and the by/without lists around it name.
fn metrics_of(expr: &str) -> Result<Vec<Use>, String> {
    let toks = tokens(expr)?;
    let mut depth = 0i32;
    for t in &toks {
        depth += match t {
            Tok::Open => 1,
            Tok::Close => -1,
            _ => 0,
        };
        if depth < 0 {
            return Err("unbalanced parentheses".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    // (token index, use); (token range, labels) of by/without lists.
    let mut uses: Vec<(usize, Use)> = Vec::new();
    let mut scopes: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let Tok::Ident(word) = &toks[i] else {
            if let Tok::Selector(m) = &toks[i]
                && !matches!(i.checked_sub(1).map(|p| &toks[p]), Some(Tok::Ident(_)))
            {
                // {__name__="x"}: a metric named by a matcher.
                if let Some((_, _, name)) = m.iter().find(|(l, op, _)| l == "__name__" && op == "=") {
                    uses.push((i, selector_use(name, m)));
                }
            }
            i += 1;
            continue;
        };
        let next = toks.get(i + 1);
        match word.as_str() {
            "by" | "without" => {
                let (names, close) = label_list(&toks, i + 1)?;
                let scope = if i > 0 && toks[i - 1] == Tok::Close {
                    // sum(x) by (a): the group just closed.
                    (opening(&toks, i - 1)?, i - 1)
                } else {
                    // sum by (a) (x): the group after the list.
                    (close + 1, closing(&toks, close + 1)?)
                };
                scopes.push((scope.0, scope.1, names));
                i = close + 1;
            }
            "on" | "ignoring" => i = label_list(&toks, i + 1)?.1 + 1,
            "group_left" | "group_right" => {
                i = if next == Some(&Tok::Open) { label_list(&toks, i + 1)?.1 + 1 } else { i + 1 };
            }
            w if KEYWORDS.contains(&w) => i += 1,
            w if next == Some(&Tok::Open) || AGGREGATORS.contains(&w) => i += 1,
            _ => {
                let m = match next {
                    Some(Tok::Selector(m)) => m.clone(),
                    _ => Vec::new(),
                };
                uses.push((i, selector_use(word, &m)));
                i += 1;
            }
        }
    }
    for (at, u) in &mut uses {
        for (from, to, names) in &scopes {
            if (*from..=*to).contains(at) {
                u.labels.extend(names.iter().cloned());
            }
        }
    }
    Ok(uses.into_iter().map(|(_, u)| u).collect())
}

fn selector_use(metric: &str, m: &[(String, String, String)]) -> Use {
    Use {
        metric: metric.to_string(),
        labels: m.iter().map(|(l, _, _)| l.clone()).filter(|l| l != "__name__").collect(),
        equals: m
            .iter()
            .filter(|(l, op, v)| op == "=" && l != "__name__" && !v.contains('$'))
            .map(|(l, _, v)| (l.clone(), v.clone()))
            .collect(),
    }
}

fn names(uses: &[Use]) -> Vec<(&str, Vec<&str>)> {
    uses.iter().map(|u| (u.metric.as_str(), u.labels.iter().map(String::as_str).collect())).collect()
}

#[test]
fn the_extractor_finds_metrics_not_functions_labels_or_keywords() {
    let m = |e: &str| metrics_of(e).unwrap_or_else(|err| panic!("{e}: {err}"));
    assert_eq!(names(&m("rate(x[1m])")), [("x", vec![])]);
    assert_eq!(names(&m("sum by (a) (y)")), [("y", vec!["a"])]);
    assert_eq!(names(&m("histogram_quantile(0.99, sum by (le) (rate(z_bucket[5m])))")), [("z_bucket", vec!["le"])]);
    // The list after the aggregation's argument; labels of the selector.
    assert_eq!(
        names(&m(r#"sum(rate(a_total{kind="drop", node=~"ip4-.*"}[$__rate_interval])) by (node, error)"#)),
        [("a_total", vec!["error", "kind", "node"])]
    );
    // A by list reaches only the metrics of its own aggregation.
    assert_eq!(
        names(&m("1e9 * sum by (node) (rate(s[5m])) / (sum(rate(p[5m])) > 0)")),
        [("s", vec!["node"]), ("p", vec![])]
    );
    // on/ignoring/group_left lists are matching labels, not metrics;
    // keywords, numbers with exponents, strings and variables neither.
    assert_eq!(
        names(&m(r#"a / on(b) group_left(c) d and e offset 5m or vector(1) unless f > bool 1e-9"#)),
        [("a", vec![]), ("d", vec![]), ("e", vec![]), ("f", vec![])]
    );
    assert_eq!(
        names(&m(r#"label_replace(x{instance=~"$instance"}, "dst", "not_a_metric", "src", "(.*)")"#)),
        [("x", vec!["instance"])]
    );
    assert_eq!(names(&m(r#"{__name__="n", job="j"}"#)), [("n", vec!["job"])]);
    assert_eq!(names(&m("topk(10, max without (w) (g:rule:ratio))")), [("g:rule:ratio", vec!["w"])]);
    // Literal values are kept for the check; regexes and variables not.
    let u = &m(r#"x{kind="drop", node=~"a|b", instance="$i", op='add'}"#)[0];
    assert_eq!(u.equals, [("kind".to_string(), "drop".to_string()), ("op".to_string(), "add".to_string())]);
    for bad in ["x{a=1}", "sum(x", "x{a=\"b}", "sum by x (y)"] {
        assert!(metrics_of(bad).is_err(), "{bad} accepted");
    }
}

/// The scrape: family types, and samples by name with their labels.
struct Scrape {
    types: BTreeMap<String, String>,
    samples: BTreeMap<String, Vec<BTreeMap<String, String>>>,
}

fn parse_scrape(text: &str) -> Scrape {
    let body = text.split_once("\r\n\r\n").map_or(text, |(_, b)| b);
    tern_control::metrics::check_exposition(body).unwrap_or_else(|e| panic!("the scrape: {e}"));
    let mut s = Scrape { types: BTreeMap::new(), samples: BTreeMap::new() };
    for l in body.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let (n, t) = rest.split_once(' ').expect("TYPE name kind");
            s.types.insert(n.to_string(), t.to_string());
            continue;
        }
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let end = l.find(['{', ' ']).expect("sample");
        let mut labels = BTreeMap::new();
        if l[end..].starts_with('{') {
            let inner = &l[end + 1..l.rfind('}').expect("}")];
            // Values with quotes or commas in them do not occur in the
            // names this test reads (the exposition check above parses
            // them properly).
            for kv in inner.split("\",") {
                let (k, v) = kv.split_once("=\"").expect("label");
                labels.insert(k.to_string(), v.trim_end_matches('"').to_string());
            }
        }
        s.samples.entry(l[..end].to_string()).or_default().push(labels);
    }
    s
}

/// Why `u` is not satisfied by the scrape, if it is not.
fn missing(u: &Use, s: &Scrape) -> Option<String> {
    let q = u.metric.as_str();
    // x_bucket, x_sum and x_count belong to x where x is a histogram.
    let family = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suf| q.strip_suffix(suf).filter(|b| s.types.get(*b).is_some_and(|t| t == "histogram")))
        .unwrap_or(q);
    if !s.types.contains_key(family) {
        return Some(format!("{q}: no family {family} exported"));
    }
    let Some(samples) = s.samples.get(q) else {
        return Some(format!("{q}: family {family} declared but no {q} samples"));
    };
    for l in u.labels.iter().filter(|l| !TARGET_LABELS.contains(&l.as_str())) {
        if !samples.iter().any(|ls| ls.contains_key(l)) {
            return Some(format!("{q}: no sample has the label {l}"));
        }
    }
    for (l, v) in u.equals.iter().filter(|(l, _)| !TARGET_LABELS.contains(&l.as_str())) {
        if !samples.iter().any(|ls| ls.get(l) == Some(v)) {
            return Some(format!("{q}: no sample has {l}=\"{v}\""));
        }
    }
    None
}

fn dashboard() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/tern.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every PromQL expression of the dashboard: panels' targets (rows'
/// collapsed panels too) and query variables. (title, expression).
fn expressions(d: &serde_json::Value) -> Vec<(String, String)> {
    fn panels(list: &serde_json::Value, out: &mut Vec<(String, String)>) {
        for p in list.as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("").to_string();
            for t in p["targets"].as_array().into_iter().flatten() {
                let e = t["expr"].as_str().unwrap_or_else(|| panic!("panel {title}: a target without expr"));
                out.push((title.clone(), e.to_string()));
            }
            panels(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    panels(&d["panels"], &mut out);
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        if let Some(q) = v["query"]["query"].as_str().or_else(|| v["query"].as_str()) {
            // label_values(METRIC{...}, LABEL): the metric has the label.
            let inner = q.strip_prefix("label_values(").and_then(|r| r.strip_suffix(')')).expect("label_values query");
            let (sel, label) = inner.rsplit_once(',').expect("label_values(metric, label)");
            out.push((format!("variable {}", v["name"]), format!("sum by ({}) ({})", label.trim(), sel.trim())));
        }
    }
    out
}

#[test]
fn the_dashboard_is_importable_and_complete() {
    let d = dashboard();
    assert_eq!(d["__inputs"][0]["name"], "DS_PROMETHEUS", "a datasource input to choose at import");
    assert_eq!(d["__inputs"][0]["pluginId"], "prometheus");
    let vars: Vec<&str> =
        d["templating"]["list"].as_array().expect("variables").iter().filter_map(|v| v["name"].as_str()).collect();
    assert!(vars.contains(&"instance"), "{vars:?}");
    let mut ids = BTreeSet::new();
    let mut rows = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        assert!(ids.insert(p["id"].as_u64().expect("panel id")), "panel id twice: {p}");
        if p["type"] == "row" {
            rows.push(p["title"].as_str().expect("row title").to_string());
            continue;
        }
        if p["type"] != "text" {
            assert_eq!(p["datasource"]["uid"], "${DS_PROMETHEUS}", "{}", p["title"]);
            for t in p["targets"].as_array().expect("targets") {
                assert_eq!(t["datasource"]["uid"], "${DS_PROMETHEUS}", "{}", p["title"]);
                let e = t["expr"].as_str().expect("expr");
                assert!(e.contains("$instance") || !e.contains("tern_"), "{}: not per instance: {e}", p["title"]);
            }
        }
    }
    for want in [
        "Traffic per interface",
        "Drops",
        "Nodes",
        "Workers",
        "FIB and control plane",
        "XDP lane",
        "IPsec / IKE",
        "VRRP",
    ] {
        assert!(rows.iter().any(|r| r == want), "no row {want}: {rows:?}");
    }
    let exprs = expressions(&d);
    assert!(exprs.len() > 40, "{} expressions", exprs.len());
    for (title, e) in &exprs {
        let uses = metrics_of(e).unwrap_or_else(|err| panic!("{title}: {e}: {err}"));
        assert!(!uses.is_empty(), "{title}: no metric in {e}");
        assert!(uses.iter().all(|u| u.metric.starts_with("tern_")), "{title}: {e}");
    }
}

#[test]
fn every_metric_the_dashboard_queries_is_exported_by_a_running_tern() {
    if let Some(why) = lab_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("dash{}", std::process::id() % 100_000));
    let r = lab.ns[1].clone();
    for dev in ["lan0", "wan0"] {
        must("ip", &["-n", &r, "link", "set", dev, "up"]);
    }
    must("ip", &["netns", "exec", &r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=0"]);
    let config = lab.dir.join("tern.toml");
    // The XDP lane (its counters), a rule set (its hits), an IPsec SA and a
    // VRRP group (their families), the FPM server (a route source), the
    // metrics endpoint where scrape_in looks.
    std::fs::write(
        &config,
        format!(
            r#"[[interface]]
name = "lan0"
device = "lan0"
driver = "xdp"
addresses = ["10.0.1.1/24", "2001:db8:1::1/64"]

[[interface]]
name = "wan0"
device = "wan0"
driver = "xdp"
addresses = ["10.0.2.1/24", "2001:db8:2::1/64"]
acl_in = "WAN_IN"

[[acl]]
name = "WAN_IN"
default = "accept"
[[acl.rule]]
action = "drop"
proto = "udp"
dport = 9

[[ipsec_sa]]
id = 10
spi = 0x1001
crypto = "aes-128-gcm"
integ = "none"
key = "0x00112233445566778899aabbccddeeff01020304"

[[vrrp]]
interface = "lan0"
vrid = 10
priority = 100
interval_ms = 100
addresses = ["10.0.1.254"]

[linux]
fpm_listen = "127.0.0.1:2620"

[api]
socket = "{}"

[metrics]
listen = "127.0.0.1:9456"
"#,
            lab.socket()
        ),
    )
    .expect("config");
    run_tern(&mut lab, &config);
    // Traffic through both lanes' paths: pings both ways (ARP, ND and
    // forwarding), so that the counters exist and move.
    for (h, dst) in [(0, "10.0.2.2"), (2, "10.0.1.2"), (0, "2001:db8:2::2")] {
        let ns = lab.ns[h].clone();
        // The first echo may wait for ARP/ND: until one comes back.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !sh("ip", &["netns", "exec", &ns, "ping", "-n", "-c", "1", "-W", "1", dst]).status.success() {
            assert!(Instant::now() < deadline, "ping {dst} from {ns} never answered:\n{}", common::log_of(&lab));
        }
    }
    let text = scrape_in(&r);
    let s = parse_scrape(&text);
    assert!(
        text.lines()
            .any(|l| l.starts_with("tern_interface_rx_packets_total{interface=\"lan0\"}") && !l.ends_with(" 0")),
        "traffic was counted on lan0:\n{text}"
    );

    let d = dashboard();
    let mut problems = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (title, e) in expressions(&d) {
        for u in metrics_of(&e).unwrap_or_else(|err| panic!("{title}: {e}: {err}")) {
            seen.insert(u.metric.clone());
            if let Some(why) = missing(&u, &s) {
                problems.insert(format!("{title}: {why}\n    {e}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the dashboard queries what tern does not export:\n{}",
        problems.into_iter().collect::<Vec<_>>().join("\n")
    );
    // The test saw the families it is about.
    for want in
        ["tern_node_seconds_total", "tern_lane_packets_total", "tern_route_messages_total", "tern_acl_rule_hits_total"]
    {
        assert!(seen.contains(want), "the dashboard does not query {want}");
    }
    eprintln!("{} metric names checked against the scrape", seen.len());
}

#[test]
fn the_checker_catches_a_metric_or_label_tern_does_not_export() {
    let scrape = "# HELP h H.\n# TYPE h histogram\nh_bucket{worker=\"0\",le=\"1\"} 1\nh_bucket{worker=\"0\",le=\"+Inf\"} 1\nh_count{worker=\"0\"} 1\n\
                  # HELP c_total C.\n# TYPE c_total counter\nc_total{kind=\"drop\"} 3\n";
    let s = parse_scrape(scrape);
    let check = |e: &str| metrics_of(e).expect(e).iter().find_map(|u| missing(u, &s));
    assert_eq!(check("histogram_quantile(0.9, sum by (le, worker) (rate(h_bucket[5m])))"), None);
    assert_eq!(check(r#"rate(h_count{instance=~"$instance"}[5m]) + sum(c_total{kind="drop"})"#), None);
    assert!(check("rate(h_sum[5m])").is_some_and(|w| w.contains("no h_sum samples")));
    assert!(check("rate(c_total_count[5m])").is_some_and(|w| w.contains("no family")));
    assert!(check("sum by (node) (c_total)").is_some_and(|w| w.contains("label node")));
    assert!(check(r#"c_total{kind="dorp"}"#).is_some_and(|w| w.contains("kind=\"dorp\"")));
    assert!(check("tern_no_such_total").is_some());
}
