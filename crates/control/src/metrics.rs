//! `GET /metrics` in the Prometheus text format (version 0.0.4): every
//! counter the CLI shows, with HELP and TYPE lines and labels.
//!
//! The endpoint runs on its own thread and reads the workers' counters
//! directly (they are single-writer atomics any thread may read); what
//! only the control thread knows (FIB and neighbour sizes, API and reload
//! counts) it publishes as [`ControlFacts`] every round it has time. A
//! slow or hostile scraper therefore never delays the control loop, and
//! the control loop never delays a scrape.

use crate::api::types::FibSummary;
use crate::commands::{error_stats, node_stats, port_counters, worker_infos};
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use tern_engine::WorkerShared;
use tern_engine::stats::BATCH_BUCKETS;
use tern_nodes::state::IfTable;
use tern_rcu::Published;

/// What only the control thread knows, published for the endpoint.
#[derive(Clone, Debug, Default)]
pub struct ControlFacts {
    pub fib: FibSummary,
    pub neighbors: usize,
    pub api_requests: u64,
    pub api_errors: u64,
    pub reloads_ok: u64,
    pub reloads_failed: u64,
    pub uptime_ns: u64,
    pub trace_remaining: u32,
    /// Rule sets with per-rule (packets, bytes), rules then the default.
    pub acl_hits: Vec<(String, Vec<(u64, u64)>)>,
    /// What the XDP lane counted itself (empty without the lane).
    pub lane: crate::commands::LaneCounts,
}

/// Everything the endpoint reads.
#[derive(Clone)]
pub struct MetricsSource {
    pub workers: Vec<Arc<WorkerShared>>,
    pub ifaces: Published<IfTable>,
    pub facts: Published<ControlFacts>,
}

/// A metric family being written.
struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        let _ = write!(self.out, "{name}");
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

fn family<'a>(out: &'a mut String, name: &str, kind: &str, help: &str) -> Family<'a> {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    Family { out }
}

/// Label values escape backslash, double quote and newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn ifname(ifs: &IfTable, i: u16) -> String {
    ifs.get(i).map_or_else(|| format!("if{i}"), |f| f.name.clone())
}

/// The whole exposition.
pub fn render(src: &MetricsSource) -> String {
    let facts = src.facts.load();
    let ifs = src.ifaces.load();
    let mut s = String::with_capacity(16 << 10);
    let ws = &src.workers;

    family(&mut s, "tern_up", "gauge", "1 while tern runs.").sample("tern_up", &[], 1);
    family(&mut s, "tern_uptime_seconds", "gauge", "Seconds since the router started.").sample(
        "tern_uptime_seconds",
        &[],
        format!("{:.3}", facts.uptime_ns as f64 / 1e9),
    );

    // Per node, per worker.
    let per_worker: Vec<_> = ws.iter().map(|w| (w.id.to_string(), node_stats(std::slice::from_ref(w), None))).collect();
    for (name, help, pick) in [
        ("tern_node_calls_total", "Times the node ran (one call per batch).", 0usize),
        ("tern_node_packets_total", "Packets the node processed.", 1),
        ("tern_node_cycles_total", "TSC cycles spent in the node.", 2),
    ] {
        let mut f = family(&mut s, name, "counter", help);
        for (w, nodes) in &per_worker {
            for n in nodes {
                let v = match pick {
                    0 => n.calls,
                    1 => n.packets,
                    _ => n.cycles,
                };
                f.sample(name, &[("node", &n.node), ("worker", w)], v);
            }
        }
    }
    {
        let mut f = family(
            &mut s,
            "tern_node_errors_total",
            "counter",
            "Packets dropped for a reason (kind=drop) or events counted (kind=info), by node and counter.",
        );
        for w in ws {
            let wid = w.id.to_string();
            for e in error_stats(std::slice::from_ref(w), None) {
                f.sample(
                    "tern_node_errors_total",
                    &[("node", &e.node), ("error", &e.name), ("kind", &e.kind), ("worker", &wid)],
                    e.count,
                );
            }
        }
        // What the XDP lane dropped or counted itself, as worker "xdp-lane".
        let lane = &facts.lane;
        if !lane.errors.is_empty()
            && let Some(w) = ws.first()
        {
            for e in error_stats(std::slice::from_ref(w), None) {
                let v = lane.errors.iter().find(|(k, _)| k.0 == e.node && k.1 == e.name).map_or(0, |(_, v)| *v);
                f.sample(
                    "tern_node_errors_total",
                    &[("node", &e.node), ("error", &e.name), ("kind", &e.kind), ("worker", "xdp-lane")],
                    v,
                );
            }
        }
    }

    // The XDP lane's own counters, by kind: forward (sent by the lane),
    // punt (handed to the engine), pass (handed to Linux), and its share of
    // drops and events (also in tern_node_errors_total as worker "xdp-lane").
    if !facts.lane.errors.is_empty() {
        let mut f = family(
            &mut s,
            "tern_lane_packets_total",
            "counter",
            "Packets the XDP lane handled itself, by lane, node, counter and kind (forward, punt, pass, drop, info).",
        );
        for l in crate::commands::lane_stats(&facts.lane, None) {
            f.sample(
                "tern_lane_packets_total",
                &[("lane", &l.lane), ("node", &l.node), ("counter", &l.name), ("kind", &l.kind)],
                l.count,
            );
        }
    }

    // Per interface (ports), summed over workers.
    let mut pc = port_counters(ws);
    crate::commands::add_lane_ports(&mut pc, &facts.lane, None);
    let mut ports: Vec<_> = pc.iter().map(|(i, c)| (ifname(&ifs, *i), c.clone())).collect();
    // The TAP exception path's devices count apart from their interface
    // (rx: what Linux sent, tx: what tern punted to Linux), as in `tern stats`.
    ports.extend(crate::commands::tap_counters(ws));
    ports.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, help, get) in [
        (
            "tern_interface_rx_packets_total",
            "Packets received.",
            (|c: &crate::api::types::PortCounters| c.rx_packets) as fn(&_) -> u64,
        ),
        ("tern_interface_rx_bytes_total", "Bytes received.", |c| c.rx_bytes),
        ("tern_interface_tx_packets_total", "Packets transmitted.", |c| c.tx_packets),
        ("tern_interface_tx_bytes_total", "Bytes transmitted (exact while nothing was refused).", |c| c.tx_bytes),
        ("tern_interface_tx_dropped_total", "Packets the driver refused to transmit.", |c| c.tx_dropped),
        ("tern_interface_driver_rx_dropped_total", "Packets the driver could not deliver to tern.", |c| {
            c.driver_rx_dropped
        }),
        ("tern_interface_driver_errors_total", "Driver errors.", |c| c.driver_errors),
    ] {
        let mut f = family(&mut s, name, "counter", help);
        for (n, c) in &ports {
            f.sample(name, &[("interface", n)], get(c));
        }
    }
    {
        let mut f =
            family(&mut s, "tern_interface_up", "gauge", "1 when the interface forwards (admin up, parent up).");
        for i in ifs.ifs.iter().filter(|i| !i.is_removed()) {
            f.sample("tern_interface_up", &[("interface", &i.name)], u8::from(i.up));
        }
    }
    {
        let mut f = family(&mut s, "tern_interface_mtu_bytes", "gauge", "IP MTU of the interface.");
        for i in ifs.ifs.iter().filter(|i| !i.is_removed()) {
            f.sample("tern_interface_mtu_bytes", &[("interface", &i.name)], i.mtu);
        }
    }

    // Per worker.
    let infos = worker_infos(ws);
    for (name, kind, help, get) in [
        (
            "tern_worker_loops_total",
            "counter",
            "Worker loops.",
            (|w: &crate::api::types::WorkerInfo| w.loops as f64) as fn(&_) -> f64,
        ),
        ("tern_worker_busy_loops_total", "counter", "Loops that received packets.", |w| w.busy_loops as f64),
        ("tern_worker_idle_seconds_total", "counter", "Time asleep waiting for packets.", |w| w.idle_ms as f64 / 1e3),
        ("tern_worker_uptime_seconds", "gauge", "Seconds since the worker started.", |w| w.uptime_ms as f64 / 1e3),
        ("tern_worker_load_ratio", "gauge", "Share of time not asleep since start (0..1).", |w| w.load_pct / 100.0),
    ] {
        let mut f = family(&mut s, name, kind, help);
        for w in &infos {
            f.sample(name, &[("worker", &w.id.to_string())], get(w));
        }
    }
    {
        let name = "tern_worker_batch_packets";
        let mut f = family(&mut s, name, "histogram", "Packets received per busy loop.");
        for w in &infos {
            let wid = w.id.to_string();
            let mut cum = 0u64;
            for (b, bucket) in w.batch_hist.iter().enumerate() {
                cum += bucket.loops;
                if b + 1 < BATCH_BUCKETS {
                    f.sample(&format!("{name}_bucket"), &[("worker", &wid), ("le", &bucket.max.to_string())], cum);
                }
            }
            f.sample(&format!("{name}_bucket"), &[("worker", &wid), ("le", "+Inf")], cum);
            f.sample(&format!("{name}_sum"), &[("worker", &wid)], w.rx_packets);
            f.sample(&format!("{name}_count"), &[("worker", &wid)], cum);
        }
    }
    {
        let name = "tern_worker_loop_gap_seconds";
        let mut f = family(
            &mut s,
            name,
            "histogram",
            "Time between two polls of the worker's ports, sleep excluded (forwarding stalls).",
        );
        for w in &infos {
            let wid = w.id.to_string();
            let mut cum = 0u64;
            for b in &w.loop_gaps {
                cum += b.loops;
                if let Some(us) = b.below_us {
                    let le = format!("{}", us as f64 / 1e6);
                    f.sample(&format!("{name}_bucket"), &[("worker", &wid), ("le", &le)], cum);
                }
            }
            f.sample(&format!("{name}_bucket"), &[("worker", &wid), ("le", "+Inf")], cum);
            f.sample(&format!("{name}_count"), &[("worker", &wid)], cum);
        }
        let name = "tern_worker_loop_gap_max_seconds";
        let mut f = family(&mut s, name, "gauge", "The longest time between two polls of the worker's ports.");
        for w in &infos {
            f.sample(name, &[("worker", &w.id.to_string())], w.max_loop_gap_us / 1e6);
        }
    }
    {
        let mut f = family(&mut s, "tern_capture_dropped_total", "counter", "Capture copies lost to a full queue.");
        for w in ws {
            f.sample(
                "tern_capture_dropped_total",
                &[("worker", &w.id.to_string())],
                w.capture.dropped.load(Ordering::Relaxed),
            );
        }
    }

    // Control plane.
    let fib = &facts.fib;
    {
        let mut f = family(&mut s, "tern_fib_routes", "gauge", "Prefixes installed in the FIB.");
        f.sample("tern_fib_routes", &[("family", "ipv4")], fib.v4_routes);
        f.sample("tern_fib_routes", &[("family", "ipv6")], fib.v6_routes);
    }
    for (name, kind, help, v) in [
        ("tern_rib_entries", "gauge", "RIB entries of every source.", fib.rib_entries as u64),
        ("tern_fib_nexthops", "gauge", "Live next hops (ECMP groups included).", fib.nexthops as u64),
        ("tern_fib_ecmp_groups", "gauge", "ECMP groups.", fib.ecmp_groups as u64),
        ("tern_fib_bytes", "gauge", "Bytes of the lookup structures.", fib.fib_bytes as u64),
        ("tern_fib_route_adds_total", "counter", "Route adds since start.", fib.adds),
        ("tern_fib_route_dels_total", "counter", "Route deletes since start.", fib.dels),
        ("tern_fib_errors_total", "counter", "Refused route operations.", fib.errors),
        ("tern_fib_updates_total", "counter", "Changes of the FIB.", fib.fib_updates),
        ("tern_neighbors", "gauge", "Resolved neighbours (ARP and ND).", facts.neighbors as u64),
        ("tern_api_requests_total", "counter", "API requests run.", facts.api_requests),
        ("tern_api_request_errors_total", "counter", "API requests answered with an error.", facts.api_errors),
        (
            "tern_trace_remaining_packets",
            "gauge",
            "Packets a running trace still marks.",
            u64::from(facts.trace_remaining),
        ),
    ] {
        family(&mut s, name, kind, help).sample(name, &[], v);
    }
    {
        let mut f = family(&mut s, "tern_config_reloads_total", "counter", "Configuration reloads, by result.");
        f.sample("tern_config_reloads_total", &[("result", "ok")], facts.reloads_ok);
        f.sample("tern_config_reloads_total", &[("result", "refused")], facts.reloads_failed);
    }
    if !facts.acl_hits.is_empty() {
        for (name, help, pick) in [
            ("tern_acl_rule_hits_total", "Packets that matched a rule (rule=default: the default policy).", 0),
            ("tern_acl_rule_bytes_total", "Bytes that matched a rule.", 1),
        ] {
            let mut f = family(&mut s, name, "counter", help);
            for (set, hits) in &facts.acl_hits {
                for (i, h) in hits.iter().enumerate() {
                    let rule = if i + 1 == hits.len() { "default".to_string() } else { i.to_string() };
                    f.sample(name, &[("set", set), ("rule", &rule)], if pick == 0 { h.0 } else { h.1 });
                }
            }
        }
    }
    s
}

/// The HTTP endpoint.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `listen` ("127.0.0.1:9456"; port 0 picks one).
    pub fn start(listen: &str, src: MetricsSource) -> io::Result<MetricsServer> {
        let l = TcpListener::bind(listen).map_err(|e| io::Error::new(e.kind(), format!("metrics on {listen}: {e}")))?;
        let addr = l.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("tern-metrics".into()).spawn(move || {
            for conn in l.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    return;
                }
                if let Ok(c) = conn {
                    // One scrape at a time, each bounded by its timeouts.
                    let _ = serve(c, &src);
                }
            }
        })?;
        log::info!("metrics on http://{addr}/metrics");
        Ok(MetricsServer { addr, stop, thread: Some(thread) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers one HTTP/1.x request: `GET /metrics` (or `HEAD`), 404 for other
/// paths, 405 for other methods. The connection closes after the answer.
fn serve(c: TcpStream, src: &MetricsSource) -> io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut r = BufReader::new(c.try_clone()?.take(16 << 10));
    let mut line = String::new();
    r.read_line(&mut line)?;
    // Skip the headers (bounded by the 16 KiB take above).
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", render(src)),
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/html; charset=utf-8",
            "<html><body><a href=\"/metrics\">/metrics</a></body></html>\n".into(),
        ),
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "not found: try /metrics\n".into()),
        _ => ("405 Method Not Allowed", "text/plain", "only GET\n".into()),
    };
    let mut w = c;
    write!(
        w,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    if method != "HEAD" {
        w.write_all(body.as_bytes())?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn exposition_without_workers_is_well_formed() {
        let src = MetricsSource {
            workers: Vec::new(),
            ifaces: Published::new(IfTable::default()),
            facts: Published::new(ControlFacts { neighbors: 3, ..ControlFacts::default() }),
        };
        let text = render(&src);
        assert!(text.contains("\ntern_neighbors 3\n"), "{text}");
        check_format(&text);
    }

    /// Every sample belongs to the family its HELP/TYPE lines announce.
    pub(crate) fn check_format(text: &str) {
        let mut family = String::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                family = rest.split_whitespace().next().unwrap_or_default().to_string();
                continue;
            }
            if l.starts_with('#') {
                continue;
            }
            let name = l.split(['{', ' ']).next().unwrap_or_default();
            assert!(name.starts_with(&family), "{name} outside its family {family}");
            let value = l.rsplit(' ').next().unwrap_or_default();
            assert!(value.parse::<f64>().is_ok(), "bad value in {l:?}");
        }
    }
}
