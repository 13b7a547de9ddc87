//! Counter aggregation: the workers' counters summed, with what the XDP
//! lane counted itself (it forwards and drops without the workers seeing
//! the packets), for the API (`tern stats`, `interface show`) and
//! /metrics alike.

use crate::api::types::*;
use crate::router::Router;
use std::collections::HashMap;
use std::sync::Arc;
use tern_engine::stats::{BATCH_BUCKETS, StatsSnapshot};
use tern_engine::{PortSlot, WorkerShared};
use tern_nodes::state::IfTable;

pub(crate) fn ifname(ifs: &IfTable, index: u16) -> String {
    ifs.get(index).map_or_else(|| format!("if{index}"), |i| i.name.clone())
}

/// Whether port `k` of a worker is not its interface's own (a TAP of the
/// exception path, whose frames are the kernel's).
pub(crate) fn side_port(slot: &PortSlot) -> bool {
    slot.input.is_some()
}

/// The name `tern stats` lists port `k` of a worker under: its
/// interface's, or for a TAP the TAP device's. None for a port number not
/// open (a TAP removed by a reload: its counters are gone with it).
pub(crate) fn port_key(slots: &[Option<PortSlot>], k: usize, ifs: &IfTable) -> Option<String> {
    let slot = slots.get(k)?.as_ref()?;
    if side_port(slot) {
        return Some(slot.name.clone());
    }
    Some(ifname(ifs, slot.ifindex))
}

/// Adds one worker's port counters to a sum.
fn add_port(c: &mut PortCounters, p: &tern_engine::stats::PortCounters) {
    c.rx_packets += p.rx_packets.get();
    c.rx_bytes += p.rx_bytes.get();
    c.tx_packets += p.tx_packets.get();
    c.tx_bytes += p.tx_bytes.get();
    c.tx_dropped += p.tx_dropped.get();
    c.driver_rx_dropped += p.drv_rx_dropped.get();
    c.driver_errors += p.drv_errors.get();
}

/// Per-port counters summed over workers, by interface index (an
/// interface's own ports; TAPs are in [`tap_counters`]).
pub fn port_counters(workers: &[Arc<WorkerShared>]) -> HashMap<u16, PortCounters> {
    let mut m: HashMap<u16, PortCounters> = HashMap::new();
    for w in workers {
        let slots = w.ports();
        for (k, p) in w.stats.ports.iter().enumerate() {
            let Some(Some(slot)) = slots.get(k) else { continue };
            if side_port(slot) {
                continue;
            }
            add_port(m.entry(slot.ifindex).or_default(), p);
        }
    }
    m
}

/// The TAP exception path's ports summed over workers, by TAP device:
/// rx is what Linux sent, tx what tern punted to it.
pub fn tap_counters(workers: &[Arc<WorkerShared>]) -> HashMap<String, PortCounters> {
    let mut m: HashMap<String, PortCounters> = HashMap::new();
    for w in workers {
        let slots = w.ports();
        for (k, p) in w.stats.ports.iter().enumerate() {
            let Some(Some(slot)) = slots.get(k) else { continue };
            if side_port(slot) {
                add_port(m.entry(slot.name.clone()).or_default(), p);
            }
        }
    }
    m
}

/// What the XDP lane counted itself (it forwards and drops without the
/// workers seeing the packets): counters by (node, counter) and packets by
/// tern interface index. Empty when no device runs the lane.
#[derive(Clone, Debug, Default)]
pub struct LaneCounts {
    pub errors: HashMap<(&'static str, &'static str), u64>,
    pub ports: HashMap<u16, PortCounters>,
    /// The kernel programs' own outcomes, which no worker node counts: the
    /// XDP lane's forwards, punts and passes to Linux (node `xdp-lane`)
    /// and the AF_XDP steering programs' passes and policer sheds (node
    /// `xdp-steer`).
    pub own: Vec<LaneOwn>,
}

/// One of [`LaneCounts::own`].
#[derive(Clone, Debug)]
pub struct LaneOwn {
    pub node: &'static str,
    pub error: &'static str,
    /// "forward", "punt", "pass" or "info".
    pub kind: &'static str,
    pub help: &'static str,
    pub count: u64,
}

impl LaneOwn {
    pub fn stat(&self, base: Option<&LaneCounts>) -> ErrorStat {
        let old = base
            .and_then(|b| b.own.iter().find(|o| o.node == self.node && o.error == self.error))
            .map_or(0, |o| o.count);
        ErrorStat {
            node: self.node.into(),
            name: self.error.into(),
            kind: self.kind.into(),
            help: self.help.into(),
            count: self.count.saturating_sub(old),
        }
    }
}

pub fn lane_counts(router: &Router) -> LaneCounts {
    let mut out = LaneCounts::default();
    for (error, help, count) in router.xdp_steer_passes() {
        // (The class policers' sheds are drops; the rest passes.)
        let kind = if error.starts_with("punt-shed-") { "drop" } else { "pass" };
        out.own.push(LaneOwn { node: "xdp-steer", error, kind, help, count });
    }
    let Some(lane) = router.xdp_lane() else { return out };
    for c in lane.counters() {
        *out.errors.entry((c.desc.node, c.desc.error)).or_default() += c.value;
        if c.desc.node == "xdp-lane" {
            out.own.push(LaneOwn {
                node: c.desc.node,
                error: c.desc.error,
                kind: c.desc.kind.label(),
                help: c.desc.help(),
                count: c.value,
            });
        }
    }
    for w in router.workers() {
        for ifindex in w.ports().into_iter().flatten().map(|s| s.ifindex) {
            if out.ports.contains_key(&ifindex) {
                continue;
            }
            let l = lane.port_stats(ifindex);
            out.ports.insert(
                ifindex,
                PortCounters {
                    rx_packets: l.rx_packets,
                    rx_bytes: l.rx_bytes,
                    tx_packets: l.tx_packets,
                    tx_bytes: l.tx_bytes,
                    ..PortCounters::default()
                },
            );
        }
    }
    out
}

/// The XDP lane's counters (minus `base`) for `tern stats`: its own
/// (forwarded, punts, passes) and its share of the drops and events, in
/// the program's order. Empty without the lane.
pub fn lane_stats(lane: &LaneCounts, base: Option<&LaneCounts>) -> Vec<LaneStat> {
    tern_xdp::lane::counters()
        .iter()
        .filter_map(|d| {
            let now = *lane.errors.get(&(d.node, d.error))?;
            let old = base.and_then(|b| b.errors.get(&(d.node, d.error))).copied().unwrap_or(0);
            Some(LaneStat {
                lane: "xdp".into(),
                node: d.node.into(),
                name: d.error.into(),
                kind: lane_kind(d.kind).into(),
                count: now.saturating_sub(old),
            })
        })
        .collect()
}

/// A lane counter's kind as `tern stats` and /metrics name it.
pub fn lane_kind(k: tern_xdp::lane::CounterKind) -> &'static str {
    use tern_xdp::lane::CounterKind;
    match k {
        CounterKind::Drop => "drop",
        CounterKind::Info => "info",
        CounterKind::Punt => "punt",
        CounterKind::Pass => "pass",
        CounterKind::Forward => "forward",
    }
}

/// Adds the lane's port counters (minus `base`) to the workers'.
pub fn add_lane_ports(m: &mut HashMap<u16, PortCounters>, lane: &LaneCounts, base: Option<&LaneCounts>) {
    for (i, l) in &lane.ports {
        let b = base.and_then(|b| b.ports.get(i)).cloned().unwrap_or_default();
        let c = m.entry(*i).or_default();
        c.rx_packets += l.rx_packets.saturating_sub(b.rx_packets);
        c.rx_bytes += l.rx_bytes.saturating_sub(b.rx_bytes);
        c.tx_packets += l.tx_packets.saturating_sub(b.tx_packets);
        c.tx_bytes += l.tx_bytes.saturating_sub(b.tx_bytes);
    }
}

/// The workers' port counters plus what the XDP lane forwarded itself.
pub fn port_counters_with_lane(router: &Router) -> HashMap<u16, PortCounters> {
    let mut m = port_counters(&router.workers());
    add_lane_ports(&mut m, &lane_counts(router), None);
    m
}

/// Per-node figures over all workers, minus `base` when given.
pub fn node_stats(workers: &[Arc<WorkerShared>], base: Option<&[StatsSnapshot]>) -> Vec<NodeStats> {
    let Some(w0) = workers.first() else { return Vec::new() };
    let tsc = tern_intrin::tsc_per_ns();
    let mut sums: Vec<[u64; 3]> = vec![[0; 3]; w0.graph.nodes.len()];
    for (wi, w) in workers.iter().enumerate() {
        let b = base.and_then(|b| b.get(wi));
        for (i, n) in w.stats.nodes.iter().enumerate() {
            let Some(s) = sums.get_mut(i) else { continue };
            let old = b.and_then(|b| b.nodes.get(i)).copied().unwrap_or([0; 3]);
            s[0] += n.calls.get().saturating_sub(old[0]);
            s[1] += n.packets.get().saturating_sub(old[1]);
            s[2] += n.clocks.get().saturating_sub(old[2]);
        }
    }
    w0.graph
        .nodes
        .iter()
        .zip(sums)
        .map(|(d, [calls, packets, cycles])| {
            let per = |x: f64| if packets > 0 { x / packets as f64 } else { 0.0 };
            NodeStats {
                node: d.name.into(),
                calls,
                packets,
                packets_per_call: if calls > 0 { packets as f64 / calls as f64 } else { 0.0 },
                cycles,
                cycles_per_packet: per(cycles as f64),
                ns_per_packet: per(cycles as f64 / tsc),
            }
        })
        .collect()
}

/// Every drop reason and event counter over all workers.
pub fn error_stats(workers: &[Arc<WorkerShared>], base: Option<&[StatsSnapshot]>) -> Vec<ErrorStat> {
    let Some(w0) = workers.first() else { return Vec::new() };
    let mut sums = vec![0u64; w0.graph.errors.len()];
    for (wi, w) in workers.iter().enumerate() {
        let b = base.and_then(|b| b.get(wi));
        for (i, c) in w.stats.errors.iter().enumerate() {
            if let Some(s) = sums.get_mut(i) {
                *s += c.get().saturating_sub(b.and_then(|b| b.errors.get(i)).copied().unwrap_or(0));
            }
        }
    }
    w0.graph
        .errors
        .iter()
        .zip(sums)
        .map(|(e, count)| ErrorStat {
            node: e.node.into(),
            name: e.name.into(),
            kind: format!("{:?}", e.kind).to_lowercase(),
            help: e.help.into(),
            count,
        })
        .collect()
}

pub fn worker_infos(workers: &[Arc<WorkerShared>]) -> Vec<WorkerInfo> {
    workers
        .iter()
        .map(|w| {
            let s = w.stats.snapshot();
            let rx: u64 = s.ports.iter().map(|p| p.rx_packets).sum();
            let pct = |a: u64, b: u64| if b > 0 { 100.0 * a as f64 / b as f64 } else { 0.0 };
            let idle_pct = pct(s.idle_ns.min(s.uptime_ns), s.uptime_ns);
            WorkerInfo {
                id: w.id,
                ports: w.ports().into_iter().flatten().map(|s| s.name).collect(),
                uptime_ms: s.uptime_ns / 1_000_000,
                loops: s.loops,
                busy_loops: s.busy_loops,
                idle_ms: s.idle_ns / 1_000_000,
                load_pct: if s.uptime_ns > 0 { 100.0 - idle_pct } else { 0.0 },
                idle_pct,
                busy_loops_pct: pct(s.busy_loops, s.loops),
                rx_packets: rx,
                avg_batch: if s.busy_loops > 0 { rx as f64 / s.busy_loops as f64 } else { 0.0 },
                batch_hist: (0..BATCH_BUCKETS)
                    .map(|b| BatchBucket {
                        min: 1 << b,
                        max: if b + 1 == BATCH_BUCKETS { u64::MAX } else { (1 << (b + 1)) - 1 },
                        loops: s.batch_hist[b],
                    })
                    .collect(),
                loop_gaps: {
                    let (hist, _) = w.gaps.snapshot();
                    hist.iter()
                        .enumerate()
                        .map(|(b, &loops)| GapBucket {
                            below_us: tern_engine::GAP_BOUNDS_NS.get(b).map(|ns| ns / 1000),
                            loops,
                        })
                        .collect()
                },
                max_loop_gap_us: w.gaps.max_ns.get() as f64 / 1e3,
            }
        })
        .collect()
}

impl Router {
    /// Totals of every worker's counters, and of the XDP lane's under the
    /// same names (drops, encapsulations, port packets).
    pub fn stats(&self) -> tern_engine::stats::StatsSnapshot {
        let mut total = tern_engine::stats::StatsSnapshot::default();
        let lanes = self.lanes();
        for w in lanes.iter() {
            total.accumulate(&w.stats.snapshot());
        }
        if let (Some(lane), Some(w)) = (lanes.lane(), lanes.first()) {
            for c in lane.counters() {
                if let Some(id) = w.graph.error_id(c.desc.node, c.desc.error)
                    && let Some(e) = total.errors.get_mut(usize::from(id))
                {
                    *e += c.value;
                }
            }
            for (p, slot) in total.ports.iter_mut().zip(w.ports()) {
                let Some(slot) = slot.filter(|s| s.input.is_none()) else { continue };
                let l = lane.port_stats(slot.ifindex);
                p.rx_packets += l.rx_packets;
                p.rx_bytes += l.rx_bytes;
                p.tx_packets += l.tx_packets;
                p.tx_bytes += l.tx_bytes;
            }
        }
        total
    }

    /// Sum of one named counter over all workers and the XDP lane.
    pub fn counter(&self, node: &str, error: &str) -> u64 {
        let lanes = self.lanes();
        let lane = lanes.lane().map_or(0, |l| l.counter(node, error));
        lane + lanes
            .iter()
            .filter_map(|w| {
                let id = w.graph.error_id(node, error)?;
                w.stats.errors.get(usize::from(id)).map(tern_engine::Counter::get)
            })
            .sum::<u64>()
    }
}
