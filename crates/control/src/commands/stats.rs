//! `stats` and `graph` commands (the sums are `crate::stats`').

use super::*;

pub fn stats_show(router: &Router, st: &OpsState, since_clear: bool) -> StatsReport {
    let workers = router.workers();
    let base = if since_clear { st.baseline.as_ref() } else { None };
    let base_snap = base.map(|(_, b)| b.as_slice());
    let now = tern_engine::clock::now_ns();
    let ifs = router.iftable();
    let lane = lane_counts(router);
    let lane_base = if since_clear && base.is_some() { Some(&st.lane_baseline) } else { None };
    let mut ports = port_counters(&workers);
    if base.is_none() {
        add_lane_ports(&mut ports, &lane, None);
    }
    let mut interfaces: Vec<InterfaceCounters> =
        ports.into_iter().map(|(i, c)| InterfaceCounters { interface: ifname(&ifs, i), counters: c }).collect();
    interfaces.extend(tap_counters(&workers).into_iter().map(|(n, c)| InterfaceCounters { interface: n, counters: c }));
    interfaces.sort_by(|a, b| a.interface.cmp(&b.interface));
    if let Some(b) = base_snap {
        // Per-port baselines: subtract each worker's saved port counters.
        let mut old: HashMap<String, PortCounters> = HashMap::new();
        for (w, snap) in workers.iter().zip(b) {
            let slots = w.ports();
            for (k, p) in snap.ports.iter().enumerate() {
                let Some(key) = port_key(&slots, k, &ifs) else { continue };
                let c = old.entry(key).or_default();
                c.rx_packets += p.rx_packets;
                c.rx_bytes += p.rx_bytes;
                c.tx_packets += p.tx_packets;
                c.tx_bytes += p.tx_bytes;
                c.tx_dropped += p.tx_dropped;
                c.driver_rx_dropped += p.drv_rx_dropped;
                c.driver_errors += p.drv_errors;
            }
        }
        for l in &mut interfaces {
            if let Some(o) = old.get(&l.interface) {
                let c = &mut l.counters;
                c.rx_packets = c.rx_packets.saturating_sub(o.rx_packets);
                c.rx_bytes = c.rx_bytes.saturating_sub(o.rx_bytes);
                c.tx_packets = c.tx_packets.saturating_sub(o.tx_packets);
                c.tx_bytes = c.tx_bytes.saturating_sub(o.tx_bytes);
                c.tx_dropped = c.tx_dropped.saturating_sub(o.tx_dropped);
                c.driver_rx_dropped = c.driver_rx_dropped.saturating_sub(o.driver_rx_dropped);
                c.driver_errors = c.driver_errors.saturating_sub(o.driver_errors);
            }
        }
        // The lane's share since the clear.
        let mut extra = HashMap::new();
        add_lane_ports(&mut extra, &lane, lane_base);
        let extra: HashMap<String, PortCounters> = extra.into_iter().map(|(i, c)| (ifname(&ifs, i), c)).collect();
        for l in &mut interfaces {
            if let Some(e) = extra.get(&l.interface) {
                let c = &mut l.counters;
                c.rx_packets += e.rx_packets;
                c.rx_bytes += e.rx_bytes;
                c.tx_packets += e.tx_packets;
                c.tx_bytes += e.tx_bytes;
            }
        }
    }
    for (name, _, n) in router.link_states() {
        if let Some(l) = interfaces.iter_mut().find(|l| l.interface == name) {
            l.counters.link_changes = n;
        }
    }
    let mut errors = error_stats(&workers, base_snap);
    for e in &mut errors {
        let key = (e.node.as_str(), e.name.as_str());
        let now = lane.errors.iter().find(|(k, _)| **k == key).map_or(0, |(_, v)| *v);
        let old = lane_base.and_then(|b| b.errors.iter().find(|(k, _)| **k == key)).map_or(0, |(_, v)| *v);
        e.count += now.saturating_sub(old);
    }
    errors.extend(lane.own.iter().map(|o| o.stat(lane_base)));
    StatsReport {
        interval_ms: match base {
            Some((t, _)) => now.saturating_sub(*t) / 1_000_000,
            None => router.uptime_ns() / 1_000_000,
        },
        nodes: node_stats(&workers, base_snap),
        errors,
        interfaces,
        lanes: lane_stats(&lane, lane_base),
    }
}

pub fn graph_show(router: &Router) -> GraphView {
    let Some(w) = router.lanes().first() else { return GraphView::default() };
    let g = &w.graph;
    GraphView {
        nodes: g
            .nodes
            .iter()
            .map(|n| GraphNode {
                name: n.name.into(),
                nexts: n.nexts.iter().map(|s| (*s).into()).collect(),
                errors: g.errors.iter().filter(|e| e.node == n.name).map(|e| e.name.into()).collect(),
            })
            .collect(),
    }
}

pub fn graph_dot(router: &Router) -> String {
    router.lanes().first().map(|w| w.graph.to_dot()).unwrap_or_default()
}

/// `top_sample`: the totals `tern top` makes rates of, in one answer.
/// The same sums as `stats_show` (without a baseline), the workers' raw
/// loop and sleep counters, and the FIB's counters (never a route list).
pub fn top_sample(router: &Router, st: &OpsState) -> TopSample {
    let uptime_ns = router.uptime_ns();
    let report = stats_show(router, st, false);
    let ifs = router.iftable();
    let plan = router.plan();
    let interfaces = report
        .interfaces
        .into_iter()
        .map(|c| {
            let known = plan.live_ifaces().find(|(_, p)| p.name == c.interface);
            let (lane, up) = match known {
                Some((idx, p)) => (iface_lane(router, p).lane, ifs.get(idx).is_some_and(|l| l.up)),
                // Not an interface of the plan: a TAP of the exception path.
                None => (Some("tap".to_string()), true),
            };
            TopInterface { name: c.interface, lane, up, counters: c.counters }
        })
        .collect();
    let workers = router
        .workers()
        .iter()
        .map(|w| {
            let s = w.stats.snapshot();
            TopWorker {
                id: w.id,
                uptime_ns: s.uptime_ns,
                idle_ns: s.idle_ns,
                loops: s.loops,
                busy_loops: s.busy_loops,
                rx_packets: s.ports.iter().map(|p| p.rx_packets).sum(),
            }
        })
        .collect();
    TopSample {
        version: env!("CARGO_PKG_VERSION").into(),
        uptime_ns,
        tsc_per_ns: tern_intrin::tsc_per_ns(),
        interfaces,
        nodes: report
            .nodes
            .into_iter()
            .map(|n| TopNode { node: n.node, calls: n.calls, packets: n.packets, cycles: n.cycles })
            .collect(),
        errors: report
            .errors
            .into_iter()
            .filter(|e| e.count > 0)
            .map(|e| TopCounter { node: e.node, name: e.name, kind: e.kind, count: e.count })
            .collect(),
        lane: report.lanes,
        workers,
        fib: route_summary(router),
    }
}
