//! `GET /metrics` in the Prometheus text format (version 0.0.4): every
//! counter the CLI shows, with HELP and TYPE lines and labels.
//!
//! The endpoint runs on its own thread and reads the workers' counters
//! directly (they are single-writer atomics any thread may read); what
//! only the control thread knows (FIB and neighbour sizes, API and reload
//! counts) it publishes as [`ControlFacts`] every round it has time. A
//! slow or hostile scraper therefore never delays the control loop, and
//! the control loop never delays a scrape; scrapes are served concurrently
//! within bounds ([`MetricsServer`]), so one slow client delays no other.

use crate::api::slots::{Place, Policy, Slots, write_by};
use crate::api::types::FibSummary;
use crate::stats::{error_stats, node_stats, port_counters, worker_infos};
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
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
    pub lane: crate::stats::LaneCounts,
    /// Per port on a device: (interface, link state, link changes).
    pub links: Vec<(String, &'static str, u64)>,
    /// The netlink route sources (kernel mirror, FPM).
    pub sources: Vec<crate::api::types::RouteSourceInfo>,
    /// tern's own VRRP groups (`[[vrrp]]`).
    pub vrrp: Vec<crate::router::vrrp::VrrpInfo>,
    /// IPsec SAs: per-SA counters of the first ones, totals of all.
    pub ipsec: crate::ipsec::IpsecMetrics,
    /// The IKE service's counters (every thread's summed).
    pub ike: crate::ike::IkeMetrics,
    /// Linux mode: ESP in UDP the kernel reassembled and gave tern's UDP
    /// 4500 sockets (`crate::esp_kernel`); None in standalone mode.
    pub kernel_esp: Option<crate::esp_kernel::KernelEspStats>,
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

/// tern's own VRRP groups: state, priority, transitions, advertisements
/// and drops by reason (nothing without `[[vrrp]]`).
fn vrrp(s: &mut String, groups: &[crate::router::vrrp::VrrpInfo]) {
    if groups.is_empty() {
        return;
    }
    let l = |g: &crate::router::vrrp::VrrpInfo| [("group", g.group.clone())];
    let mut f = family(s, "tern_vrrp_state", "gauge", "VRRP state: 0 initialize, 1 backup, 2 master.");
    for g in groups {
        let [(k, v)] = l(g);
        f.sample("tern_vrrp_state", &[(k, &v)], g.state_code);
    }
    let mut f = family(s, "tern_vrrp_priority", "gauge", "VRRP priority in effect (tracking lowers it).");
    for g in groups {
        let [(k, v)] = l(g);
        f.sample("tern_vrrp_priority", &[(k, &v)], g.priority);
    }
    for (name, help, pick) in [
        ("tern_vrrp_transitions_total", "VRRP state transitions.", 0usize),
        ("tern_vrrp_became_master_total", "Times the group became master.", 1),
        ("tern_vrrp_adverts_received_total", "VRRP advertisements accepted.", 2),
        ("tern_vrrp_adverts_sent_total", "VRRP advertisements sent.", 3),
    ] {
        let mut f = family(s, name, "counter", help);
        for g in groups {
            let v = [g.transitions, g.became_master, g.adverts_rx, g.adverts_tx][pick];
            let [(k, lv)] = l(g);
            f.sample(name, &[(k, &lv)], v);
        }
    }
    let mut f =
        family(s, "tern_vrrp_drops_total", "counter", "VRRP advertisements discarded, by reason (RFC 5798 7.1).");
    for g in groups {
        for (reason, n) in &g.drops {
            f.sample("tern_vrrp_drops_total", &[("group", &g.group), ("reason", reason)], n);
        }
    }
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
        // The clocks in seconds (TSC cycles over its calibrated rate), so
        // that a dashboard divides two rates for ns per packet without
        // knowing the CPU's clock.
        let name = "tern_node_seconds_total";
        let tsc = tern_intrin::tsc_per_ns();
        let mut f = family(&mut s, name, "counter", "Time spent in the node (its TSC cycles over the TSC's rate).");
        for (w, nodes) in &per_worker {
            for n in nodes {
                f.sample(name, &[("node", &n.node), ("worker", w)], format!("{:.9}", n.cycles as f64 / tsc / 1e9));
            }
        }
    }
    {
        let mut f = family(
            &mut s,
            "tern_node_errors_total",
            "counter",
            "Packets dropped for a reason (kind=drop), events counted (kind=info), and what the XDP programs forwarded (kind=forward), handed to tern's engine (kind=punt) or passed to Linux (kind=pass), by node and counter.",
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
        // The kernel programs' own outcomes: the lane's forwards, punts
        // and passes to Linux, the AF_XDP steering programs' passes.
        for o in &lane.own {
            f.sample(
                "tern_node_errors_total",
                &[("node", o.node), ("error", o.error), ("kind", o.kind), ("worker", "xdp-lane")],
                o.count,
            );
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
        for l in crate::stats::lane_stats(&facts.lane, None) {
            f.sample(
                "tern_lane_packets_total",
                &[("lane", &l.lane), ("node", &l.node), ("counter", &l.name), ("kind", &l.kind)],
                l.count,
            );
        }
    }

    // Per interface (ports), summed over workers.
    let mut pc = port_counters(ws);
    crate::stats::add_lane_ports(&mut pc, &facts.lane, None);
    let mut ports: Vec<_> = pc.iter().map(|(i, c)| (ifname(&ifs, *i), c.clone())).collect();
    // The TAP exception path's devices count apart from their interface
    // (rx: what Linux sent, tx: what tern punted to Linux), as in `tern stats`.
    ports.extend(crate::stats::tap_counters(ws));
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
        let facts = src.facts.load();
        let mut f = family(
            &mut s,
            "tern_interface_link_changes_total",
            "counter",
            "Changes of the device under the interface seen (down, up, removed, re-created).",
        );
        for (n, _, c) in &facts.links {
            f.sample("tern_interface_link_changes_total", &[("interface", n)], c);
        }
        let mut f = family(&mut s, "tern_interface_link_up", "gauge", "1 when the device exists and is up.");
        for (n, st, _) in &facts.links {
            f.sample("tern_interface_link_up", &[("interface", n)], u8::from(*st == "up" || *st == "no-carrier"));
        }
    }
    vrrp(&mut s, &src.facts.load().vrrp);
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
    if !facts.sources.is_empty() {
        let name = "tern_route_messages_total";
        let mut f = family(&mut s, name, "counter", "Route messages a control-plane source decoded.");
        for src in &facts.sources {
            f.sample(name, &[("source", &src.name)], src.route_msgs);
        }
        let name = "tern_nexthop_messages_total";
        let mut f = family(&mut s, name, "counter", "Next-hop object messages a control-plane source decoded.");
        for src in &facts.sources {
            f.sample(name, &[("source", &src.name)], src.nexthop_msgs);
        }
        let name = "tern_route_changes_total";
        let mut f =
            family(&mut s, name, "counter", "Route adds (op=add) and deletes (op=del) a source handed to the RIB.");
        for src in &facts.sources {
            f.sample(name, &[("source", &src.name), ("op", "add")], src.adds);
            f.sample(name, &[("source", &src.name), ("op", "del")], src.dels);
        }
        let name = "tern_routes_skipped_total";
        let mut f =
            family(&mut s, name, "counter", "Route messages a control-plane source did not install, by reason.");
        for src in &facts.sources {
            for (reason, n) in &src.skipped {
                f.sample(name, &[("source", &src.name), ("reason", reason)], n);
            }
        }
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
    // The SAs' figures are read here, at the scrape, not by the control
    // thread (`IpsecMetrics::current`).
    ipsec_metrics(&mut s, &facts.ipsec.current());
    ike_metrics(&mut s, &facts.ike);
    if let Some(k) = &facts.kernel_esp {
        let name = "tern_ipsec_kernel_esp_total";
        let mut f = family(
            &mut s,
            name,
            "counter",
            "Linux mode: datagrams on tern's kernel UDP 4500 sockets (ESP in UDP the kernel reassembled), by outcome: to-engine (queued for esp-decrypt), copy (the kernel's copy of frames tern took itself, dropped), queue-full, ike-unserved (IKE to an address without [[ike]]), keepalive, runt.",
        );
        for (outcome, v) in [
            ("to-engine", k.to_engine),
            ("copy", k.copies),
            ("queue-full", k.queue_full),
            ("ike-unserved", k.ike_unserved),
            ("keepalive", k.keepalives),
            ("runt", k.runts),
        ] {
            f.sample(name, &[("outcome", outcome)], v);
        }
    }
    s
}

/// The IKE families (`tern_ike_*`), while the IKE service runs.
fn ike_metrics(s: &mut String, m: &crate::ike::IkeMetrics) {
    if !m.running {
        return;
    }
    let st = &m.stats;
    for (name, kind, help, v) in [
        ("tern_ike_sas", "gauge", "IKE SAs established.", st.ike_sas),
        ("tern_ike_half_open", "gauge", "IKE SAs half open (IKE_SA_INIT answered, IKE_AUTH not yet).", st.half_open),
        ("tern_ike_child_sas", "gauge", "Child SAs the IKE SAs hold.", st.child_sas),
        ("tern_ike_setups_total", "counter", "IKE SAs established.", st.setups),
        ("tern_ike_child_setups_total", "counter", "Child SAs established.", st.child_setups),
        ("tern_ike_retransmits_total", "counter", "IKE requests retransmitted.", st.retransmits),
        ("tern_ike_cookies_sent_total", "counter", "COOKIE notifications sent (RFC 7296 2.6).", st.cookies_sent),
        ("tern_ike_dpd_sent_total", "counter", "Liveness checks sent.", st.dpd_sent),
        ("tern_ike_dropped_invalid_total", "counter", "IKE messages dropped as invalid.", st.dropped_invalid),
        (
            "tern_ike_nat_moves_total",
            "counter",
            "Peers behind a NAT seen at a new address or port; their child SAs rekeyed to follow.",
            st.nat_moves,
        ),
        (
            "tern_ike_esp_moves_total",
            "counter",
            "Of those, moves seen first in authenticated ESP in UDP from the new mapping (no IKE message from it yet).",
            st.esp_moves,
        ),
        (
            "tern_ike_esp_on_ike_socket_total",
            "counter",
            "ESP on IKE's kernel UDP 4500 socket not handed to the engine: the kernel's copy of frames tern took itself (AF_PACKET), or the engine's queue full.",
            m.esp_dropped,
        ),
        ("tern_ike_send_failures_total", "counter", "IKE datagrams that could not be sent.", m.send_failed),
        ("tern_ike_install_failures_total", "counter", "Child SAs the data plane refused.", m.install_failed),
        (
            "tern_ike_cert_cache_entries",
            "gauge",
            "Peers' certificate chains kept checked (every pubkey peer's cache; [ike_service] cert_cache_entries each).",
            m.chain_cache.entries,
        ),
        (
            "tern_ike_cert_cache_hits_total",
            "counter",
            "Peer certificate chains found checked and valid in the cache (no chain check).",
            m.chain_cache.hits,
        ),
        (
            "tern_ike_cert_cache_misses_total",
            "counter",
            "Peer certificate chains checked in full (not cached, outside their validity, or the cache off).",
            m.chain_cache.misses,
        ),
        (
            "tern_ike_cert_cache_evictions_total",
            "counter",
            "Cached chains dropped to make room (a full cache is emptied). Counters restart when a reload changes credentials.",
            m.chain_cache.evictions,
        ),
    ] {
        family(s, name, kind, help).sample(name, &[], v);
    }
    let mut f = family(s, "tern_ike_rekeys_total", "counter", "Rekeys completed, by kind.");
    f.sample("tern_ike_rekeys_total", &[("kind", "ike")], st.rekeys_ike);
    f.sample("tern_ike_rekeys_total", &[("kind", "child")], st.rekeys_child);
    let mut f = family(s, "tern_ike_failures_total", "counter", "IKE exchanges failed, by reason.");
    for (reason, n) in &st.failures {
        f.sample("tern_ike_failures_total", &[("reason", reason)], n);
    }
}

/// The IPsec families: SAs installed, every SA's counters summed, and
/// per SA (labels `sa` and `spi`) for the first
/// `crate::ipsec::METRICS_SA_SERIES` SAs by id.
fn ipsec_metrics(s: &mut String, m: &crate::ipsec::IpsecMetrics) {
    if m.sas == 0 {
        return;
    }
    family(s, "tern_ipsec_sas", "gauge", "IPsec SAs installed.").sample("tern_ipsec_sas", &[], m.sas);
    type Pick = fn(&tern_ipsec::SaCounters) -> u64;
    let fams: [(&str, &str, Pick); 7] = [
        ("packets", "Packets encrypted or decrypted on the SA.", |c| c.packets),
        ("bytes", "Bytes (inner packets) encrypted or decrypted on the SA.", |c| c.bytes),
        ("replay_drops", "Inbound packets the anti-replay window refused.", |c| c.replay_drops),
        ("integrity_failures", "Inbound packets whose ICV did not verify.", |c| c.integrity_failures),
        ("seq_exhausted", "Outbound packets dropped: sequence numbers ran out.", |c| c.seq_exhausted),
        ("expired_drops", "Packets dropped: the SA's hard lifetime passed.", |c| c.expired_drops),
        ("decrypt_errors", "Inbound packets authenticated but malformed.", |c| c.decrypt_errors),
    ];
    for (what, help, pick) in fams {
        let name = format!("tern_ipsec_{what}_total");
        let mut f = family(s, &name, "counter", &format!("{help} (sa=\"all\": every SA summed)"));
        f.sample(&name, &[("sa", "all"), ("spi", "all")], pick(&m.totals));
        for (id, spi, c) in &m.per_sa {
            f.sample(&name, &[("sa", &id.to_string()), ("spi", &format!("{spi:#x}"))], pick(c));
        }
    }
}

/// Checks `text` against the Prometheus text format (0.0.4) as a scraper
/// reads it: metric and label names, HELP and TYPE once per family and
/// before its samples, families not split, label values quoted with only
/// `\\`, `\"` and `\n` escapes, no series twice, numeric values, and for
/// histograms buckets with increasing `le`, non-decreasing counts, a last
/// `+Inf` bucket equal to `_count`. The first fault found, with its line.
pub fn check_exposition(text: &str) -> Result<(), String> {
    use std::collections::{BTreeMap, HashSet};
    type Labels = Vec<(String, String)>;
    /// Per histogram series (labels without le): (le, cumulative count)
    /// of each bucket, and `_count`.
    type Hists = BTreeMap<String, (Vec<(f64, f64)>, Option<f64>)>;
    fn valid_name(n: &str, colon: bool) -> bool {
        let mut cs = n.chars();
        cs.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':'))
            && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':'))
    }
    /// Parses `{k="v",...}`, unescaping; the rest of the line after it.
    fn labels(s: &str) -> Result<(Labels, &str), String> {
        let Some(mut rest) = s.strip_prefix('{') else { return Ok((Vec::new(), s)) };
        let mut out: Labels = Vec::new();
        loop {
            if let Some(r) = rest.strip_prefix('}') {
                return Ok((out, r));
            }
            let (k, r) = rest.split_once("=\"").ok_or("label without =\"")?;
            if !valid_name(k, false) || out.iter().any(|(o, _)| o == k) {
                return Err(format!("bad or repeated label name {k:?}"));
            }
            let mut v = String::new();
            let mut chars = r.char_indices();
            let end = loop {
                match chars.next() {
                    None => return Err("unterminated label value".into()),
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, '\\')) => v.push('\\'),
                        Some((_, '"')) => v.push('"'),
                        Some((_, 'n')) => v.push('\n'),
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    Some((_, c)) => v.push(c),
                }
            };
            out.push((k.to_string(), v));
            rest = &r[end + 1..];
            rest = rest.strip_prefix(',').unwrap_or(rest);
        }
    }
    let mut done: HashSet<String> = HashSet::new();
    let mut series: HashSet<String> = HashSet::new();
    let (mut family, mut kind, mut helped) = (String::new(), String::new(), false);
    let mut hist = Hists::new();
    let finish = |hist: &mut Hists| -> Result<(), String> {
        for (k, (buckets, count)) in std::mem::take(hist) {
            if buckets.windows(2).any(|w| w[0].0 >= w[1].0 || w[0].1 > w[1].1) {
                return Err(format!("{k}: buckets not increasing and cumulative"));
            }
            let last = buckets.last().ok_or(format!("{k}: no buckets"))?;
            if last.0 != f64::INFINITY || count.is_some_and(|c| c != last.1) {
                return Err(format!("{k}: the +Inf bucket is missing or differs from _count"));
            }
        }
        Ok(())
    };
    for (no, l) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {l:?}", no + 1);
        if l.is_empty() {
            continue;
        }
        if let Some(rest) = l.strip_prefix("# HELP ").or_else(|| l.strip_prefix("# TYPE ")) {
            let name = rest.split(' ').next().unwrap_or_default();
            if !valid_name(name, true) {
                return Err(at("bad metric name".into()));
            }
            if name != family {
                finish(&mut hist).map_err(at)?;
                if !done.insert(name.to_string()) {
                    return Err(at("family declared twice".into()));
                }
                (family, kind, helped) = (name.to_string(), String::new(), false);
            }
            if l.starts_with("# HELP") {
                if helped || !kind.is_empty() {
                    return Err(at("HELP twice or after TYPE".into()));
                }
                helped = true;
            } else {
                let t = rest[name.len()..].trim();
                if !kind.is_empty() || !["counter", "gauge", "histogram", "summary", "untyped"].contains(&t) {
                    return Err(at("TYPE twice or unknown".into()));
                }
                kind = t.to_string();
            }
            continue;
        }
        if l.starts_with('#') {
            continue;
        }
        let end = l.find(['{', ' ']).ok_or_else(|| at("no value".into()))?;
        let name = &l[..end];
        let (ls, rest) = labels(&l[end..]).map_err(at)?;
        let value = rest.strip_prefix(' ').ok_or_else(|| at("no value".into()))?;
        let v: f64 = value.parse().map_err(|_| at("value not a number".into()))?;
        if kind.is_empty() {
            return Err(at("sample before its TYPE".into()));
        }
        let suffix = name.strip_prefix(family.as_str()).ok_or_else(|| at(format!("outside family {family}")))?;
        let ok = match kind.as_str() {
            "histogram" => ["_bucket", "_sum", "_count"].contains(&suffix),
            _ => suffix.is_empty(),
        };
        if !ok {
            return Err(at(format!("not a sample of the {kind} {family}")));
        }
        if !series.insert(format!("{name}{ls:?}")) {
            return Err(at("series twice".into()));
        }
        if kind == "histogram" {
            let key = format!("{family}{:?}", ls.iter().filter(|(k, _)| k != "le").collect::<Vec<_>>());
            let e = hist.entry(key).or_default();
            match suffix {
                "_bucket" => {
                    let le = ls.iter().find(|(k, _)| k == "le").ok_or_else(|| at("bucket without le".into()))?;
                    let b: f64 = le.1.parse().map_err(|_| at("le not a number".into()))?;
                    e.0.push((b, v));
                }
                "_count" => e.1 = Some(v),
                _ => {}
            }
        }
    }
    finish(&mut hist)
}

/// Scrapes served at once.
pub const MAX_SCRAPES: usize = 16;
/// Scrapes one address may have open at once.
pub const SCRAPES_PER_ADDRESS: usize = 8;
/// How long a request's head may take to arrive, from the connection.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// How long writing an answer may take, however slowly the client reads.
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(10);
/// The longest request head read.
const MAX_HEAD: usize = 16 << 10;

/// The HTTP endpoint: one thread per scrape, at most [`MAX_SCRAPES`] at
/// once and [`SCRAPES_PER_ADDRESS`] per client address. A request's head
/// must arrive within [`HEAD_DEADLINE`]; when the table is full, the
/// connection that has waited longest for its request is closed to make
/// room (a scraper sends its request at once, so only slow or idle clients
/// are ever closed), and with nothing to close the client gets `503`.
pub struct MetricsServer {
    addr: SocketAddr,
    /// The accepting thread's listener, to wake its `accept` at the stop
    /// (a shutdown, not a connection to it: with loopback down or filtered
    /// nothing could connect and the stop would wait for ever).
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    slots: Arc<Slots<IpAddr>>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `listen` ("127.0.0.1:9456"; port 0 picks one).
    pub fn start(listen: &str, src: MetricsSource) -> io::Result<MetricsServer> {
        let l = TcpListener::bind(listen).map_err(|e| io::Error::new(e.kind(), format!("metrics on {listen}: {e}")))?;
        let addr = l.local_addr()?;
        let listener = l.try_clone()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let slots = Arc::new(Slots::new(Policy {
            max: MAX_SCRAPES,
            reserved: 0,
            per_client: SCRAPES_PER_ADDRESS,
            evict_any: true,
        }));
        let slots2 = Arc::clone(&slots);
        let src = Arc::new(src);
        let thread = std::thread::Builder::new().name("tern-metrics".into()).spawn(move || {
            for conn in l.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(mut c) = conn else { continue };
                let Ok(peer) = c.peer_addr() else { continue };
                let Ok(closer) = c.try_clone() else { continue };
                let close = Box::new(move || {
                    let _ = closer.shutdown(std::net::Shutdown::Both);
                });
                let id = match slots2.admit(peer.ip(), false, close) {
                    Ok(id) => id,
                    Err(why) => {
                        // Nothing done here may hold up the next accept. The
                        // request already sent is read first, so that the
                        // close does not reset the connection before the
                        // client reads the answer.
                        let _ = c.set_write_timeout(Some(Duration::from_millis(100)));
                        if c.set_nonblocking(true).is_ok() {
                            let mut sink = [0u8; 4096];
                            for _ in 0..4 {
                                if !matches!((&c).read(&mut sink), Ok(n) if n > 0) {
                                    break;
                                }
                            }
                            let _ = c.set_nonblocking(false);
                        }
                        let body = format!("busy: {why}\n");
                        let _ = write!(
                            c,
                            "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = c.shutdown(std::net::Shutdown::Write);
                        continue;
                    }
                };
                let (src, slots3) = (Arc::clone(&src), Arc::clone(&slots2));
                let spawned = std::thread::Builder::new().name("tern-scrape".into()).spawn(move || {
                    let place = slots3.place(id);
                    let _ = serve(c, &src, &place);
                });
                if spawned.is_err() {
                    // Its place went with the closure that never ran.
                    slots2.place(id);
                }
            }
        })?;
        log::info!("metrics on http://{addr}/metrics");
        Ok(MetricsServer { addr, listener, stop, slots, thread: Some(thread) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Linux ends a blocked (and every later) `accept` on a listener shut
        // down for reading with EINVAL; the thread then sees `stop`.
        let _ = rustix::net::shutdown(&self.listener, rustix::net::Shutdown::Read);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.slots.close_all();
    }
}

/// The end of a request's head (the blank line), if it came.
fn head_end(buf: &[u8]) -> bool {
    buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n")
}

/// Answers one HTTP/1.x request: `GET /metrics` (or `HEAD`), 404 for other
/// paths, 405 for other methods. The connection closes after the answer.
fn serve(c: TcpStream, src: &MetricsSource, place: &Place<'_, IpAddr>) -> io::Result<()> {
    let deadline = Instant::now() + HEAD_DEADLINE;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while !head_end(&buf) && buf.len() < MAX_HEAD {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "request head too slow"));
        }
        c.set_read_timeout(Some(left))?;
        match (&c).read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    // Closed to make room meanwhile: nothing to answer.
    if !place.working() {
        return Ok(());
    }
    let line = String::from_utf8_lossy(buf.split(|&b| b == b'\n').next().unwrap_or_default()).into_owned();
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
    let mut answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        answer.push_str(&body);
    }
    let deadline = Instant::now() + ANSWER_DEADLINE;
    write_by(&mut w, answer.as_bytes(), deadline, |s, t| s.set_write_timeout(Some(t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vrrp_groups_are_exposed() {
        let g = crate::router::vrrp::VrrpInfo {
            group: "lan0/10/ipv4".into(),
            interface: "lan0".into(),
            vrid: 10,
            family: "ipv4".into(),
            state: "master".into(),
            state_code: 2,
            priority: 150,
            configured_priority: 200,
            interval_ms: 100,
            master_interval_ms: 100,
            master: Some("10.1.0.2".into()),
            primary: Some("10.1.0.2".into()),
            virtual_mac: "00:00:5e:00:01:0a".into(),
            addresses: vec!["10.1.0.254".into()],
            preempt: true,
            accept_mode: false,
            adverts_rx: 4,
            adverts_tx: 9,
            transitions: 2,
            became_master: 1,
            priority_zero_rx: 0,
            drops: vec![("bad-ttl".into(), 3), ("wrong-vrid".into(), 0)],
        };
        let src = MetricsSource {
            workers: Vec::new(),
            ifaces: Published::new(IfTable::default()),
            facts: Published::new(ControlFacts { vrrp: vec![g], ..ControlFacts::default() }),
        };
        let text = render(&src);
        check_format(&text);
        for line in [
            "tern_vrrp_state{group=\"lan0/10/ipv4\"} 2",
            "tern_vrrp_priority{group=\"lan0/10/ipv4\"} 150",
            "tern_vrrp_transitions_total{group=\"lan0/10/ipv4\"} 2",
            "tern_vrrp_adverts_received_total{group=\"lan0/10/ipv4\"} 4",
            "tern_vrrp_adverts_sent_total{group=\"lan0/10/ipv4\"} 9",
            "tern_vrrp_drops_total{group=\"lan0/10/ipv4\",reason=\"bad-ttl\"} 3",
        ] {
            assert!(text.contains(&format!("\n{line}\n")), "{line} in\n{text}");
        }
        let none = MetricsSource {
            workers: Vec::new(),
            ifaces: Published::new(IfTable::default()),
            facts: Published::new(ControlFacts::default()),
        };
        assert!(!render(&none).contains("tern_vrrp"), "nothing without groups");
    }

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

    #[test]
    fn ipsec_series_are_totals_and_the_first_sas() {
        let c = tern_ipsec::SaCounters { packets: 5, bytes: 500, replay_drops: 1, ..Default::default() };
        let ipsec = crate::ipsec::IpsecMetrics {
            sas: 3,
            per_sa: vec![(10, 0x1001, c), (20, 0x2001, c)],
            totals: tern_ipsec::SaCounters { packets: 10, bytes: 1000, replay_drops: 2, ..Default::default() },
            live: None,
        };
        let src = MetricsSource {
            workers: Vec::new(),
            ifaces: Published::new(IfTable::new(Vec::new())),
            facts: Published::new(ControlFacts { ipsec, ..ControlFacts::default() }),
        };
        let text = render(&src);
        check_format(&text);
        for line in [
            "tern_ipsec_sas 3",
            "tern_ipsec_packets_total{sa=\"all\",spi=\"all\"} 10",
            "tern_ipsec_packets_total{sa=\"10\",spi=\"0x1001\"} 5",
            "tern_ipsec_replay_drops_total{sa=\"20\",spi=\"0x2001\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }

    #[test]
    fn ike_series_are_the_shards_sums() {
        let stats = tern_ike::IkeStats {
            ike_sas: 4,
            setups: 7,
            rekeys_child: 2,
            failures: vec![("authentication-failed", 3), ("timeout", 1)],
            ..Default::default()
        };
        let chain_cache =
            tern_ike::auth::ChainCacheStats { entries: 3, capacity: 4096, hits: 40, misses: 3, evictions: 0 };
        let ike = crate::ike::IkeMetrics { running: true, stats, esp_dropped: 5, chain_cache, ..Default::default() };
        let src = MetricsSource {
            workers: Vec::new(),
            ifaces: Published::new(IfTable::new(Vec::new())),
            facts: Published::new(ControlFacts { ike, ..ControlFacts::default() }),
        };
        let text = render(&src);
        check_format(&text);
        for line in [
            "tern_ike_sas 4",
            "tern_ike_half_open 0",
            "tern_ike_setups_total 7",
            "tern_ike_rekeys_total{kind=\"child\"} 2",
            "tern_ike_failures_total{reason=\"authentication-failed\"} 3",
            "tern_ike_failures_total{reason=\"timeout\"} 1",
            "tern_ike_cookies_sent_total 0",
            "tern_ike_esp_on_ike_socket_total 5",
            "tern_ike_cert_cache_entries 3",
            "tern_ike_cert_cache_hits_total 40",
            "tern_ike_cert_cache_misses_total 3",
            "tern_ike_cert_cache_evictions_total 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains("tern_ipsec_kernel_esp_total"), "standalone: no kernel sockets");
        let kernel_esp = Some(crate::esp_kernel::KernelEspStats { to_engine: 6, copies: 2, ..Default::default() });
        let src =
            MetricsSource { facts: Published::new(ControlFacts { kernel_esp, ..ControlFacts::default() }), ..src };
        let text = render(&src);
        check_format(&text);
        for line in [
            "tern_ipsec_kernel_esp_total{outcome=\"to-engine\"} 6",
            "tern_ipsec_kernel_esp_total{outcome=\"copy\"} 2",
            "tern_ipsec_kernel_esp_total{outcome=\"runt\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        // Without [[ike]], no tern_ike_ series at all.
        let src = MetricsSource { facts: Published::new(ControlFacts::default()), ..src };
        assert!(!render(&src).contains("tern_ike_"));
    }

    #[test]
    fn skipped_routes_are_exposed_by_source_and_reason() {
        let c = crate::linux::sync::SyncCounters {
            route_msgs: 9,
            nexthop_msgs: 4,
            adds: 3,
            dels: 1,
            ignored_table: 3,
            ignored_foreign_if: 2,
            ..Default::default()
        };
        let src = MetricsSource {
            workers: Vec::new(),
            ifaces: Published::new(IfTable::default()),
            facts: Published::new(ControlFacts {
                sources: vec![crate::api::types::RouteSourceInfo::new("fpm", &c)],
                ..ControlFacts::default()
            }),
        };
        let text = render(&src);
        for line in [
            "tern_route_messages_total{source=\"fpm\"} 9",
            "tern_nexthop_messages_total{source=\"fpm\"} 4",
            "tern_route_changes_total{source=\"fpm\",op=\"add\"} 3",
            "tern_route_changes_total{source=\"fpm\",op=\"del\"} 1",
            "tern_routes_skipped_total{source=\"fpm\",reason=\"table\"} 3",
            "tern_routes_skipped_total{source=\"fpm\",reason=\"foreign_interface\"} 2",
            "tern_routes_skipped_total{source=\"fpm\",reason=\"malformed\"} 0",
        ] {
            assert!(text.contains(&format!("\n{line}\n")), "{line} missing:\n{text}");
        }
        check_format(&text);
    }

    /// Every sample belongs to the family its HELP/TYPE lines announce,
    /// and the whole page reads as the Prometheus text format.
    pub(crate) fn check_format(text: &str) {
        if let Err(e) = check_exposition(text) {
            panic!("{e}\n{text}");
        }
    }

    /// Names operators choose (rule sets, interfaces) reach label values:
    /// quotes, backslashes and newlines in them stay inside the value.
    #[test]
    fn hostile_label_values_stay_well_formed() {
        let odd = "a\"b\\c\nd} e=\"1\"";
        let src = MetricsSource {
            workers: Vec::new(),
            ifaces: Published::new(IfTable::default()),
            facts: Published::new(ControlFacts {
                acl_hits: vec![(odd.to_string(), vec![(1, 60), (2, 120)])],
                links: vec![(odd.to_string(), "up", 3)],
                ..ControlFacts::default()
            }),
        };
        let text = render(&src);
        check_format(&text);
        assert!(
            text.contains("\ntern_acl_rule_hits_total{set=\"a\\\"b\\\\c\\nd} e=\\\"1\\\"\",rule=\"default\"} 2\n"),
            "{text}"
        );
    }

    #[test]
    fn the_checker_catches_breakage() {
        let good = "# HELP x_total X.\n# TYPE x_total counter\nx_total{a=\"1\"} 1\n\
                    # HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n";
        check_exposition(good).expect("good page");
        for (bad, why) in [
            ("x_total 1\n", "sample before TYPE"),
            ("# TYPE x counter\ny 1\n", "outside its family"),
            ("# TYPE x counter\nx{a=\"b\"c\"} 1\n", "unescaped quote"),
            ("# TYPE x counter\nx{a=\"b\\t\"} 1\n", "unknown escape"),
            ("# TYPE x counter\nx one\n", "value"),
            ("# TYPE x counter\nx 1\nx 2\n", "series twice"),
            ("# TYPE x counter\n# TYPE y gauge\n# TYPE x counter\n", "family split"),
            ("# TYPE x counter\n# HELP x X.\n", "HELP after TYPE"),
            ("# TYPE 1x gauge\n", "metric name"),
            ("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n", "not cumulative"),
            ("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_count 2\n", "no +Inf"),
            ("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 3\n", "+Inf differs from count"),
        ] {
            assert!(check_exposition(bad).is_err(), "{why} not caught: {bad:?}");
        }
    }
}
