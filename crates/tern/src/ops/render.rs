//! How answers look: aligned tables for people, JSON for programs.

use super::cli::*;
use std::fmt::Write as _;
use tern_control::api::Reply;
use tern_control::api::types::*;

/// The answer's data as pretty JSON.
pub fn json(reply: &Reply) -> Result<String, String> {
    let v = serde_json::to_value(reply).map_err(|e| e.to_string())?;
    let data = v.get("data").cloned().unwrap_or(serde_json::Value::Null);
    let mut s = serde_json::to_string_pretty(&data).map_err(|e| e.to_string())?;
    s.push('\n');
    Ok(s)
}

/// A plain text table: columns padded to their widest cell; the columns
/// listed in `right` are right-aligned (numbers).
pub fn table(head: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(x) = w.get_mut(i) {
                *x = (*x).max(c.chars().count());
            }
        }
    }
    let mut s = String::new();
    let line = |s: &mut String, cells: &mut dyn Iterator<Item = String>| {
        let mut l = String::new();
        for (i, c) in cells.enumerate() {
            let width = w.get(i).copied().unwrap_or(0);
            if i > 0 {
                l.push_str("  ");
            }
            if right.contains(&i) {
                let _ = write!(l, "{c:>width$}");
            } else {
                let _ = write!(l, "{c:<width$}");
            }
        }
        s.push_str(l.trim_end());
        s.push('\n');
    };
    line(&mut s, &mut head.iter().map(|h| h.to_string()));
    for r in rows {
        line(&mut s, &mut r.iter().cloned());
    }
    s
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

/// The human form of an answer to `cmd`.
pub fn human(cmd: &OpCmd, reply: &Reply) -> String {
    match reply {
        Reply::Done { message } => format!("{message}\n"),
        Reply::Text { text } => {
            let mut t = text.clone();
            if !t.ends_with('\n') {
                t.push('\n');
            }
            t
        }
        Reply::Status(s) => status(s),
        Reply::IpsecSas(l) => ipsec_sas(l),
        Reply::IpsecTunnels(v) => ipsec_tunnels(v),
        Reply::IkeSas(v) => ike_sas(v),
        Reply::IkeSaSummary(s) => ike_sa_summary(s),
        Reply::IkePeers(v) => ike_peers(v),
        Reply::Interfaces(v) => {
            let only = match cmd {
                OpCmd::Interface(NounArgs { verb: Some(InterfaceCmd::Show { name: Some(n) }) }) => Some(n.as_str()),
                _ => None,
            };
            let v: Vec<_> = v.iter().filter(|i| only.is_none_or(|n| n == i.name)).collect();
            if v.is_empty() {
                return format!("no interface named {:?}\n", only.unwrap_or_default());
            }
            interfaces(&v)
        }
        Reply::Addresses(v) => table(
            &["interface", "family", "address", "scope"],
            &v.iter()
                .map(|a| vec![a.interface.clone(), a.family.clone(), a.address.clone(), a.scope.clone()])
                .collect::<Vec<_>>(),
            &[],
        ),
        Reply::Routes(r) => routes(r),
        Reply::Route(r) => route_get(cmd, r.as_ref()),
        Reply::FibSummary(f) => fib(f),
        Reply::Vrrp(v) => table(
            &["group", "state", "prio", "master", "interval", "addresses", "rx", "tx", "trans", "drops"],
            &v.iter()
                .map(|g| {
                    let drops: u64 = g.drops.iter().map(|(_, n)| n).sum();
                    let prio = if g.priority == g.configured_priority {
                        g.priority.to_string()
                    } else {
                        format!("{}/{}", g.priority, g.configured_priority)
                    };
                    vec![
                        g.group.clone(),
                        g.state.clone(),
                        prio,
                        g.master.clone().unwrap_or_else(|| "-".into()),
                        format!("{}ms", g.interval_ms),
                        g.addresses.join(","),
                        g.adverts_rx.to_string(),
                        g.adverts_tx.to_string(),
                        g.transitions.to_string(),
                        drops.to_string(),
                    ]
                })
                .collect::<Vec<_>>(),
            &[6, 7, 8, 9],
        ),
        Reply::Neighbors(v) => table(
            &["interface", "address", "mac", "state", "age"],
            &v.iter()
                .map(|n| {
                    vec![
                        n.interface.clone(),
                        n.ip.clone(),
                        n.mac.clone(),
                        n.state.clone(),
                        format!("{:.1}s", n.age_ms as f64 / 1e3),
                    ]
                })
                .collect::<Vec<_>>(),
            &[4],
        ),
        Reply::Stats(s) => {
            let (part, all) = match cmd {
                OpCmd::Stats(NounArgs { verb: Some(StatsCmd::Show { part, all }) }) => (*part, *all),
                _ => (StatsPart::All, false),
            };
            stats(s, part, all)
        }
        Reply::Workers(v) => workers(v),
        Reply::Graph(g) => {
            let mut s = String::new();
            for n in &g.nodes {
                let _ = writeln!(s, "{:<18} -> {}", n.name, n.nexts.join(", "));
            }
            s
        }
        Reply::Acls(v) => acls(v),
        Reply::TopSample(_) => "a sample of counters: `tern top` shows their rates\n".into(),
        Reply::Trace(t) => trace(t),
        Reply::Capture(c) => format!("capture {}: {} frames\n", c.id, c.captured),
        Reply::Reload(r) => {
            if r.changes.is_empty() {
                "configuration reloaded: no changes\n".into()
            } else {
                let mut s = format!("configuration reloaded: {} change(s)\n", r.changes.len());
                for c in &r.changes {
                    let _ = writeln!(s, "  {c}");
                }
                s
            }
        }
    }
}

fn status(s: &StatusInfo) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "tern {} (API protocol {})", s.version, s.protocol);
    let _ = writeln!(o, "uptime      {:.1}s", s.uptime_ms as f64 / 1e3);
    let _ = writeln!(o, "config      {}", s.config.as_deref().unwrap_or("(none)"));
    let _ = writeln!(o, "workers     {}", s.workers);
    let _ = writeln!(o, "interfaces  {}", s.interfaces);
    let _ = writeln!(
        o,
        "routes      {} IPv4, {} IPv6 ({} RIB entries)",
        s.fib.v4_routes, s.fib.v6_routes, s.fib.rib_entries
    );
    let _ = writeln!(o, "neighbors   {}", s.neighbors);
    let on = |b: bool| if b { "on" } else { "off" };
    let f = &s.fast_paths;
    let _ = writeln!(
        o,
        "fast paths  direct {}, acl_shortcut {}, gre_direct {}",
        on(f.direct),
        on(f.acl_shortcut),
        on(f.gre_direct)
    );
    let r = &s.reassembly;
    let _ = writeln!(
        o,
        "reassembly  {} datagrams a worker, {} a source, {} bytes, {} fragments, {} ms",
        r.max_datagrams, r.max_per_source, r.max_size, r.max_fragments, r.timeout_ms
    );
    for src in &s.sources {
        let skipped: Vec<String> =
            src.skipped.iter().filter(|(_, n)| *n > 0).map(|(r, n)| format!("{} {n}", r.replace('_', "-"))).collect();
        let _ = writeln!(
            o,
            "source {:<6}{} route messages: {} adds, {} dels; skipped: {}",
            src.name,
            src.route_msgs,
            src.adds,
            src.dels,
            if skipped.is_empty() { "none".to_string() } else { skipped.join(", ") }
        );
    }
    for w in &s.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    o
}

fn interfaces(v: &[&InterfaceInfo]) -> String {
    let mut s = String::new();
    for i in v {
        let state = match (i.admin_up, i.up, i.link.as_deref()) {
            (true, true, _) => "up".to_string(),
            (false, _, _) => "down".to_string(),
            (true, false, Some(l @ ("absent" | "down" | "detached"))) => format!("down (device {l})"),
            (true, false, _) => "down (parent down)".to_string(),
        };
        let what = match i.kind.as_str() {
            "vlan" => format!("vlan {} on {}", i.vlan.unwrap_or_default(), i.parent.as_deref().unwrap_or("?")),
            "port" => format!(
                "port {}{}",
                i.driver.as_deref().unwrap_or(""),
                i.device.as_ref().map(|d| format!(" device {d}")).unwrap_or_default()
            ),
            k => k.to_string(),
        };
        let _ = writeln!(s, "{} (index {}): {what}, {state}, mtu {}, mac {}", i.name, i.index, i.mtu, i.mac);
        if let Some(l) = &i.lane {
            let _ = writeln!(s, "    lane {l}");
        }
        for n in &i.lane_notes {
            let _ = writeln!(s, "      {n}");
        }
        for m in &i.virtual_macs {
            let _ = writeln!(s, "    virtual mac {m}");
        }
        for a in &i.addresses {
            let _ = writeln!(s, "    {} {a}", if a.contains(':') { "inet6" } else { "inet" });
        }
        let _ = writeln!(s, "    inet6 {}/64 (link)", i.link_local);
        if let (Some(l), Some(n)) = (&i.link, i.link_changes)
            && n > 0
        {
            let _ = writeln!(s, "    link {l}, {n} change(s) since start");
        }
        if let Some(a) = &i.acl_in {
            let _ = writeln!(s, "    acl in {a}");
        }
        if let Some(a) = &i.acl_out {
            let _ = writeln!(s, "    acl out {a}");
        }
        if let Some(c) = &i.counters {
            let _ = writeln!(
                s,
                "    rx {} packets {} bytes, driver drops {}, errors {}",
                c.rx_packets, c.rx_bytes, c.driver_rx_dropped, c.driver_errors
            );
            let _ = writeln!(s, "    tx {} packets {} bytes, refused {}", c.tx_packets, c.tx_bytes, c.tx_dropped);
        }
        for w in &i.warnings {
            let _ = writeln!(s, "    warning: {w}");
        }
    }
    s
}

fn target(r: &RouteInfo) -> String {
    let dev = r.interface.as_ref().map(|d| format!(" dev {d}")).unwrap_or_default();
    match r.kind.as_str() {
        "via" => format!("via {}{dev}", r.via.join(",")),
        "connected" => format!("connected{dev}"),
        "local" => format!("local{dev}"),
        "ecmp" => format!("ecmp via {}", r.via.join(", ")),
        k => k.to_string(),
    }
}

fn routes(r: &RouteList) -> String {
    let rows: Vec<Vec<String>> = r
        .routes
        .iter()
        .map(|x| {
            vec![
                if x.best {
                    "*".into()
                } else if !x.active {
                    "!".into()
                } else {
                    " ".into()
                },
                x.prefix.clone(),
                target(x),
                x.source.clone(),
                format!("{}/{}", x.distance, x.metric),
            ]
        })
        .collect();
    let mut s = table(&["", "prefix", "target", "source", "dist/metric"], &rows, &[]);
    if r.truncated > 0 {
        let _ = writeln!(s, "... {} more (raise --limit)", r.truncated);
    }
    s.push_str("* in use, ! inactive (gateway not reachable)\n");
    s
}

fn route_get(cmd: &OpCmd, r: Option<&RouteInfo>) -> String {
    let addr = match cmd {
        OpCmd::Route(NounArgs { verb: Some(RouteCmd::Get { address }) }) => address.clone(),
        _ => String::new(),
    };
    let Some(r) = r else { return format!("{addr}: no route (packets to it are answered with ICMP unreachable)\n") };
    let mut s =
        format!("{addr} {} (route {} {} distance {} metric {})\n", target(r), r.prefix, r.source, r.distance, r.metric);
    for n in &r.nexthops {
        let mut l = format!("    next hop: {}", n.kind);
        if let Some(g) = &n.gateway {
            let _ = write!(l, " {g}");
        }
        if let Some(d) = &n.interface {
            let _ = write!(l, " dev {d}");
        }
        match (&n.mac, n.kind.as_str()) {
            (Some(m), _) => {
                let _ = write!(l, " lladdr {m}");
            }
            (None, "unicast") => l.push_str(" (not resolved yet)"),
            (None, "glean") => l.push_str(" (resolves the destination itself)"),
            _ => {}
        }
        s.push_str(&l);
        s.push('\n');
    }
    s
}

fn fib(f: &FibSummary) -> String {
    format!(
        "IPv4 prefixes     {}\nIPv6 prefixes     {}\nRIB entries       {}\nnext hops         {} ({} ECMP groups)\nlookup memory     {:.1} MiB\nadds/dels/errors  {}/{}/{}\nFIB updates       {}\n",
        f.v4_routes,
        f.v6_routes,
        f.rib_entries,
        f.nexthops,
        f.ecmp_groups,
        f.fib_bytes as f64 / (1 << 20) as f64,
        f.adds,
        f.dels,
        f.errors,
        f.fib_updates
    )
}

fn stats(s: &StatsReport, part: StatsPart, all: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "over the last {:.1}s", s.interval_ms as f64 / 1e3);
    if matches!(part, StatsPart::All | StatsPart::Nodes) {
        let rows: Vec<Vec<String>> = s
            .nodes
            .iter()
            .filter(|n| all || n.packets > 0)
            .map(|n| {
                vec![
                    n.node.clone(),
                    n.calls.to_string(),
                    n.packets.to_string(),
                    f1(n.packets_per_call),
                    f1(n.cycles_per_packet),
                    f1(n.ns_per_packet),
                ]
            })
            .collect();
        o.push('\n');
        o.push_str(&table(&["node", "calls", "packets", "pkts/call", "cycles/pkt", "ns/pkt"], &rows, &[1, 2, 3, 4, 5]));
    }
    if matches!(part, StatsPart::All | StatsPart::Interfaces) {
        let rows: Vec<Vec<String>> = s
            .interfaces
            .iter()
            .map(|i| {
                let c = &i.counters;
                vec![
                    i.interface.clone(),
                    c.rx_packets.to_string(),
                    c.rx_bytes.to_string(),
                    c.tx_packets.to_string(),
                    c.tx_bytes.to_string(),
                    c.tx_dropped.to_string(),
                    c.driver_rx_dropped.to_string(),
                    c.link_changes.to_string(),
                ]
            })
            .collect();
        o.push('\n');
        o.push_str(&table(
            &[
                "interface",
                "rx packets",
                "rx bytes",
                "tx packets",
                "tx bytes",
                "tx refused",
                "driver drops",
                "link changes",
            ],
            &rows,
            &[1, 2, 3, 4, 5, 6, 7],
        ));
    }
    if matches!(part, StatsPart::All | StatsPart::Errors) {
        let rows: Vec<Vec<String>> = s
            .errors
            .iter()
            .filter(|e| all || e.count > 0)
            .map(|e| vec![e.count.to_string(), format!("{}/{}", e.node, e.name), e.kind.clone(), e.help.clone()])
            .collect();
        o.push('\n');
        if rows.is_empty() {
            o.push_str("no drops or events counted\n");
        } else {
            o.push_str(&table(&["count", "counter", "kind", "meaning"], &rows, &[0]));
        }
    }
    if matches!(part, StatsPart::All | StatsPart::Errors) && !s.lanes.is_empty() {
        // The XDP lane's own: what it sent, punted and passed, and its
        // share of the counters above (which sum both lanes).
        let rows: Vec<Vec<String>> = s
            .lanes
            .iter()
            .filter(|l| all || l.count > 0)
            .map(|l| vec![l.count.to_string(), format!("{}/{}", l.node, l.name), l.kind.clone(), l.lane.clone()])
            .collect();
        o.push('\n');
        if rows.is_empty() {
            o.push_str("the XDP lane has counted nothing\n");
        } else {
            o.push_str(&table(&["count", "counter", "kind", "lane"], &rows, &[0]));
        }
    }
    o
}

fn workers(v: &[WorkerInfo]) -> String {
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|w| {
            vec![
                w.id.to_string(),
                f1(w.load_pct),
                f1(w.idle_pct),
                f1(w.busy_loops_pct),
                w.rx_packets.to_string(),
                f1(w.avg_batch),
                w.loops.to_string(),
                w.ports.join(","),
            ]
        })
        .collect();
    let mut s = table(
        &["worker", "load%", "idle%", "busy-loops%", "rx packets", "avg batch", "loops", "ports"],
        &rows,
        &[1, 2, 3, 4, 5, 6],
    );
    for w in v {
        let _ = writeln!(s, "\nworker {} packets per busy loop:", w.id);
        let max = w.batch_hist.iter().map(|b| b.loops).max().unwrap_or(0).max(1);
        for b in &w.batch_hist {
            let range = if b.max == u64::MAX { format!("{}+", b.min) } else { format!("{}-{}", b.min, b.max) };
            let bar = "#".repeat(((b.loops * 40).div_ceil(max)) as usize);
            let _ = writeln!(s, "  {range:>8} {:>12} {bar}", b.loops);
        }
        if !w.loop_gaps.is_empty() {
            let _ = writeln!(
                s,
                "worker {} time between polls (stalls; sleep excluded), longest {:.1} us:",
                w.id, w.max_loop_gap_us
            );
            let max = w.loop_gaps.iter().map(|b| b.loops).max().unwrap_or(0).max(1);
            let mut from = 0;
            for b in &w.loop_gaps {
                let range = match b.below_us {
                    Some(us) => format!("{}-{} us", from, us),
                    None => format!(">= {from} us"),
                };
                from = b.below_us.unwrap_or(from);
                let bar = "#".repeat(((b.loops * 40).div_ceil(max)) as usize);
                let _ = writeln!(s, "  {range:>14} {:>12} {bar}", b.loops);
            }
        }
    }
    s
}

fn acls(v: &[AclView]) -> String {
    if v.is_empty() {
        return "no rule sets configured\n".into();
    }
    let mut s = String::new();
    for a in v {
        let _ = writeln!(
            s,
            "rule set {} (default {}; in: {}; out: {}){}",
            a.name,
            a.default,
            if a.interfaces_in.is_empty() { "-".into() } else { a.interfaces_in.join(",") },
            if a.interfaces_out.is_empty() { "-".into() } else { a.interfaces_out.join(",") },
            if a.counting { "" } else { " [not counting: no firewall node]" }
        );
        for l in &a.lanes {
            let warn =
                if l.why.starts_with("not compiled") || l.why.contains(" except rule") { "warning: " } else { "" };
            let _ = writeln!(s, "  {warn}{} {} on lane {}: {}", l.direction, l.interface, l.lane, l.why);
        }
        let mut rows: Vec<Vec<String>> = a
            .rules
            .iter()
            .map(|r| {
                vec![
                    r.index.to_string(),
                    r.action.clone(),
                    r.packets.to_string(),
                    r.bytes.to_string(),
                    match &r.comment {
                        Some(c) => format!("{}  # {c}", r.matches),
                        None => r.matches.clone(),
                    },
                ]
            })
            .collect();
        rows.push(vec![
            "-".into(),
            a.default.clone(),
            a.default_packets.to_string(),
            a.default_bytes.to_string(),
            "default".into(),
        ]);
        for l in table(&["#", "action", "packets", "bytes", "match"], &rows, &[2, 3]).lines() {
            let _ = writeln!(s, "  {l}");
        }
    }
    s
}

fn trace(t: &TraceView) -> String {
    let mut s = String::new();
    if t.packets.is_empty() {
        let _ = writeln!(s, "no packets traced yet ({} to go)", t.remaining);
        trace_unlisted(&mut s, t);
        return s;
    }
    for p in &t.packets {
        let by = if p.lane == "xdp" { format!("xdp lane cpu {}", p.worker) } else { format!("worker {}", p.worker) };
        let _ = writeln!(s, "packet {} {by} rx {} {} bytes at +{:.3} ms", p.seq, p.interface, p.len, p.at_ms);
        let _ = writeln!(s, "  {}", p.summary);
        for h in &p.hops {
            let _ = writeln!(s, "  {:<18} -> {}", h.node, h.next);
            for n in &h.notes {
                let _ = writeln!(s, "  {:<18}    {n}", "");
            }
        }
        let _ = writeln!(s, "  {}\n", p.fate);
    }
    if t.remaining > 0 {
        let _ = writeln!(s, "({} more packets to trace)", t.remaining);
    }
    trace_unlisted(&mut s, t);
    s
}

/// Traced packets without a record in the list: never silently.
fn trace_unlisted(s: &mut String, t: &TraceView) {
    if t.in_flight > 0 {
        let _ = writeln!(s, "({} traced packets still in the router; `trace show` again lists them)", t.in_flight);
    }
    if t.lost > 0 {
        let _ = writeln!(s, "({} records lost)", t.lost);
    }
}

/// `ipsec sa show`: one line per SA (no keys), the total when limited.
fn ipsec_sas(l: &IpsecSaList) -> String {
    if l.sas.is_empty() {
        return "no SAs\n".into();
    }
    let rows: Vec<Vec<String>> = l
        .sas
        .iter()
        .map(|s| {
            let algo = if s.integ == "none" { s.crypto.clone() } else { format!("{}+{}", s.crypto, s.integ) };
            let mut flags = Vec::new();
            if s.esn {
                flags.push("esn".to_string());
            }
            if let Some([a, b]) = s.udp_encap {
                flags.push(format!("udp {a}->{b}"));
            }
            flags.push(format!("win {}", s.replay_window));
            vec![
                s.id.to_string(),
                format!("{:#x}", s.spi),
                algo,
                flags.join(","),
                s.state.clone(),
                s.tunnel.clone().unwrap_or_else(|| "-".into()),
                s.source.clone(),
                s.seq_out.to_string(),
                s.seq_in.to_string(),
                s.packets.to_string(),
                s.bytes.to_string(),
                s.replay_drops.to_string(),
                s.integrity_failures.to_string(),
                s.seq_exhausted.to_string(),
                (s.expired_drops + s.decrypt_errors).to_string(),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "id",
            "spi",
            "algorithms",
            "options",
            "state",
            "tunnel",
            "from",
            "seq-out",
            "seq-in",
            "packets",
            "bytes",
            "replay",
            "integrity",
            "seq-exhausted",
            "other-drops",
        ],
        &rows,
        &[7, 8, 9, 10, 11, 12, 13, 14],
    );
    if l.total > l.sas.len() {
        out.push_str(&format!("({} of {} SAs)\n", l.sas.len(), l.total));
    }
    out
}

/// `ike sa show`: one line per IKE SA, one indented line per child SA.
fn ike_sas(v: &[IkeSaView]) -> String {
    if v.is_empty() {
        return "no IKE SAs\n".into();
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for s in v {
        rows.push(vec![
            s.id.to_string(),
            s.peer.clone(),
            s.state.clone(),
            format!("{} {} {}", s.local, if s.initiator { "->" } else { "<-" }, s.remote),
            format!("{}/{}", s.spi_i, s.spi_r),
            s.proposal.clone(),
            s.remote_id.clone(),
            if s.nat { "nat" } else { "-" }.into(),
            s.established_secs.to_string(),
        ]);
        for c in &s.children {
            let ids = match (c.sa_in, c.sa_out) {
                (Some(i), Some(o)) => format!("sa {i} in, {o} out"),
                _ => "not installed".into(),
            };
            rows.push(vec![
                String::new(),
                format!("  child {}", c.id),
                ids,
                format!("spi in {:#010x} out {:#010x}", c.spi_in, c.spi_out),
                String::new(),
                c.proposal.clone(),
                c.virtual_ip.as_ref().map(|v| format!("vip {v}")).unwrap_or_default(),
                String::new(),
                String::new(),
            ]);
        }
    }
    table(&["id", "peer", "state", "endpoints", "spi-i/spi-r", "proposal", "remote-id", "nat", "age-s"], &rows, &[0, 8])
}

/// One line of counts by state: "1000000 IKE SAs: 999990 established,
/// 5 rekeying, 5 connecting, 0 deleting"; from the threads' counters
/// (`quick`): "1000000 IKE SAs: 999995 established, 5 half-open".
pub fn ike_sa_summary_line(s: &IkeSaSummaryView) -> String {
    let c = &s.all;
    if !s.exact {
        return format!(
            "{} IKE SAs: {} established, {} half-open (`tern ike sa summary`: by state and peer)\n",
            c.total, c.established, c.connecting
        );
    }
    format!(
        "{} IKE SAs: {} established, {} rekeying, {} connecting, {} deleting\n",
        c.total, c.established, c.rekeying, c.connecting, c.deleting
    )
}

/// `ike sa summary`: the counts, then per peer.
fn ike_sa_summary(s: &IkeSaSummaryView) -> String {
    let mut out = ike_sa_summary_line(s);
    if s.peers.is_empty() {
        return out;
    }
    let rows: Vec<Vec<String>> = s
        .peers
        .iter()
        .map(|p| {
            let c = &p.counts;
            [c.total, c.established, c.rekeying, c.connecting, c.deleting].iter().map(u64::to_string).fold(
                vec![p.peer.clone()],
                |mut v, x| {
                    v.push(x);
                    v
                },
            )
        })
        .collect();
    out.push_str(&table(
        &["peer", "total", "established", "rekeying", "connecting", "deleting"],
        &rows,
        &[1, 2, 3, 4, 5],
    ));
    out
}

/// `ike peer show`.
fn ike_peers(v: &[IkePeerView]) -> String {
    if v.is_empty() {
        return "no [[ike]] peers\n".into();
    }
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                format!("{} -> {}", p.local, p.remote),
                p.auth.clone(),
                format!("{} -> {}", p.local_id, p.remote_id.as_deref().unwrap_or("any")),
                p.tunnel.clone().unwrap_or_else(|| "-".into()),
                if p.start { "start" } else { "respond" }.into(),
                p.ike_sas.to_string(),
                p.connecting.to_string(),
                p.child_sas.to_string(),
                p.proposals.join(","),
                p.esp_proposals.join(","),
                match &p.chain_cache {
                    Some(c) => format!("{}/{} hits {} misses {}", c.entries, c.capacity, c.hits, c.misses),
                    None => "-".into(),
                },
            ]
        })
        .collect();
    table(
        &[
            "peer",
            "endpoints",
            "auth",
            "ids",
            "tunnel",
            "mode",
            "ike-sas",
            "connecting",
            "child-sas",
            "ike",
            "esp",
            "cert-cache",
        ],
        &rows,
        &[6, 7, 8],
    )
}

/// `ipsec tunnel show`.
fn ipsec_tunnels(v: &[IpsecTunnelView]) -> String {
    if v.is_empty() {
        return "no ipsec tunnels\n".into();
    }
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|t| {
            vec![
                t.name.clone(),
                if t.up { "up" } else { "down" }.into(),
                format!("{} -> {}", t.local, t.remote),
                format!("{}{}", t.sa_out, t.spi_out.map(|s| format!(" ({s:#x})")).unwrap_or_default()),
                t.state_out.clone().unwrap_or_else(|| "missing".into()),
                t.sa_in.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
                t.mtu.to_string(),
                t.tx_packets.to_string(),
                t.tx_bytes.to_string(),
                t.rx_packets.to_string(),
                t.rx_bytes.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "tunnel",
            "state",
            "endpoints",
            "sa-out",
            "sa-out-state",
            "sa-in",
            "mtu",
            "tx-pkts",
            "tx-bytes",
            "rx-pkts",
            "rx-bytes",
        ],
        &rows,
        &[6, 7, 8, 9, 10],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_name_the_lane() {
        let entry = |lane: &str| TraceEntry {
            lane: lane.into(),
            worker: 1,
            interface: "lan0".into(),
            len: 60,
            fate: "tx wan0".into(),
            hops: vec![TraceHopView { node: "xdp-lane".into(), next: "tx".into(), notes: vec!["ttl - 1".into()] }],
            ..TraceEntry::default()
        };
        let out =
            trace(&TraceView { remaining: 0, packets: vec![entry("xdp"), entry("engine")], ..TraceView::default() });
        assert!(!out.contains("lost") && !out.contains("still in"), "{out}");
        let gaps = trace(&TraceView { in_flight: 2, lost: 3, ..TraceView::default() });
        assert!(gaps.contains("2 traced packets still in the router") && gaps.contains("3 records lost"), "{gaps}");
        assert!(out.contains("packet 0 xdp lane cpu 1 rx lan0 60 bytes"), "{out}");
        assert!(out.contains("packet 0 worker 1 rx lan0"), "{out}");
        assert!(out.contains("  xdp-lane           -> tx\n") && out.contains("ttl - 1"), "{out}");
    }

    #[test]
    fn tables_align() {
        let t = table(&["a", "num"], &[vec!["xx".into(), "5".into()], vec!["y".into(), "123".into()]], &[1]);
        assert_eq!(t, "a   num\nxx    5\ny   123\n");
    }
}
