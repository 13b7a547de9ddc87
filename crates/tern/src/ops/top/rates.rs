//! `tern top`'s arithmetic: rates from two [`TopSample`]s, and the
//! filtering and sorting of their rows. No terminal here: the live view,
//! `--once` and `--json` all show what [`Rates::between`] computes.

use serde::Serialize;
use std::cmp::Ordering;
use std::collections::HashMap;
use tern_control::api::types::{PortCounters, TopSample};

/// Why two samples give no rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoRates {
    /// The second sample's clock or a counter is behind the first's: tern
    /// restarted in between (or a port was re-created). The second sample
    /// is the new baseline.
    Restarted,
    /// Both samples were taken at the same instant.
    ZeroInterval,
}

/// One interval's rates: what `tern top --json` prints (field names are
/// stable: docs/CLI.md lists them).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rates {
    pub version: String,
    /// tern's uptime at the second sample, in seconds.
    pub uptime_s: f64,
    /// Seconds between the two samples (tern's clock).
    pub interval_s: f64,
    /// The lanes the interfaces use ("xdp native", "afxdp copy"...).
    pub lanes: Vec<String>,
    pub interfaces: Vec<IfaceRate>,
    pub nodes: Vec<NodeRate>,
    /// Drop reasons of both lanes with their rates (the non-zero totals).
    pub drops: Vec<DropRate>,
    pub workers: Vec<WorkerRate>,
    pub fib: FibRate,
    /// The XDP lane's own counters (empty without the lane).
    pub xdp: Vec<XdpRate>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IfaceRate {
    pub name: String,
    pub lane: Option<String>,
    pub up: bool,
    pub rx_pps: f64,
    pub tx_pps: f64,
    pub rx_bps: f64,
    pub tx_bps: f64,
    /// Transmit drops, driver receive drops and driver errors, per second.
    pub drops_ps: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeRate {
    /// "engine" or "xdp".
    pub lane: String,
    pub node: String,
    pub pps: f64,
    /// Engine nodes only (the XDP lane counts no calls or clocks).
    pub calls_ps: Option<f64>,
    pub packets_per_call: Option<f64>,
    pub ns_per_packet: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DropRate {
    pub node: String,
    pub reason: String,
    pub per_s: f64,
    /// Since tern started.
    pub total: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WorkerRate {
    pub id: u16,
    /// Share of the interval not asleep waiting for packets, percent.
    pub load_pct: f64,
    /// Share of the loops that found packets, percent.
    pub busy_loops_pct: f64,
    pub loops_ps: f64,
    pub rx_pps: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FibRate {
    pub v4_routes: usize,
    pub v6_routes: usize,
    /// FIB changes applied per second (adds, deletes, replacements).
    pub updates_ps: f64,
    pub adds_ps: f64,
    pub dels_ps: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct XdpRate {
    pub node: String,
    pub name: String,
    /// "forward", "punt", "pass", "drop" or "info".
    pub kind: String,
    pub per_s: f64,
    pub total: u64,
}

/// `b - a`, or None when `b` is behind.
fn delta(a: u64, b: u64) -> Option<u64> {
    b.checked_sub(a)
}

fn port_deltas(a: &PortCounters, b: &PortCounters) -> Option<[u64; 5]> {
    Some([
        delta(a.rx_packets, b.rx_packets)?,
        delta(a.tx_packets, b.tx_packets)?,
        delta(a.rx_bytes, b.rx_bytes)?,
        delta(a.tx_bytes, b.tx_bytes)?,
        delta(
            a.tx_dropped + a.driver_rx_dropped + a.driver_errors,
            b.tx_dropped + b.driver_rx_dropped + b.driver_errors,
        )?,
    ])
}

impl Rates {
    /// The rates between sample `a` and the later `b`. A row `a` lacks
    /// counts from zero (a counter that appeared); a counter of `b` below
    /// `a`'s, or `b` older than `a`, is a restart.
    pub fn between(a: &TopSample, b: &TopSample) -> Result<Rates, NoRates> {
        let dt_ns = delta(a.uptime_ns, b.uptime_ns).ok_or(NoRates::Restarted)?;
        if dt_ns == 0 {
            return Err(NoRates::ZeroInterval);
        }
        let dt = dt_ns as f64 / 1e9;
        let per = |d: u64| d as f64 / dt;
        let restarted = NoRates::Restarted;

        let old_ifs: HashMap<&str, &PortCounters> =
            a.interfaces.iter().map(|i| (i.name.as_str(), &i.counters)).collect();
        let zero = PortCounters::default();
        let mut interfaces = Vec::new();
        let mut lanes: Vec<String> = Vec::new();
        for i in &b.interfaces {
            let old = old_ifs.get(i.name.as_str()).copied().unwrap_or(&zero);
            let [rxp, txp, rxb, txb, drops] = port_deltas(old, &i.counters).ok_or(restarted)?;
            interfaces.push(IfaceRate {
                name: i.name.clone(),
                lane: i.lane.clone(),
                up: i.up,
                rx_pps: per(rxp),
                tx_pps: per(txp),
                rx_bps: per(rxb) * 8.0,
                tx_bps: per(txb) * 8.0,
                drops_ps: per(drops),
            });
            if let Some(l) = &i.lane
                && l != "tap"
                && !lanes.contains(l)
            {
                lanes.push(l.clone());
            }
        }

        let old_nodes: HashMap<&str, [u64; 3]> =
            a.nodes.iter().map(|n| (n.node.as_str(), [n.calls, n.packets, n.cycles])).collect();
        let mut nodes = Vec::new();
        for n in &b.nodes {
            let [c0, p0, k0] = old_nodes.get(n.node.as_str()).copied().unwrap_or([0; 3]);
            let calls = delta(c0, n.calls).ok_or(restarted)?;
            let packets = delta(p0, n.packets).ok_or(restarted)?;
            let cycles = delta(k0, n.cycles).ok_or(restarted)?;
            let per_packet = |x: f64| (packets > 0).then(|| x / packets as f64);
            nodes.push(NodeRate {
                lane: "engine".into(),
                node: n.node.clone(),
                pps: per(packets),
                calls_ps: Some(per(calls)),
                packets_per_call: (calls > 0).then(|| packets as f64 / calls as f64),
                ns_per_packet: if b.tsc_per_ns > 0.0 { per_packet(cycles as f64 / b.tsc_per_ns) } else { None },
            });
        }

        let old_errors: HashMap<(&str, &str), u64> =
            a.errors.iter().map(|e| ((e.node.as_str(), e.name.as_str()), e.count)).collect();
        let mut drops = Vec::new();
        for e in b.errors.iter().filter(|e| e.kind == "drop") {
            let old = old_errors.get(&(e.node.as_str(), e.name.as_str())).copied().unwrap_or(0);
            let d = delta(old, e.count).ok_or(restarted)?;
            drops.push(DropRate { node: e.node.clone(), reason: e.name.clone(), per_s: per(d), total: e.count });
        }

        let old_lane: HashMap<(&str, &str), u64> =
            a.lane.iter().map(|l| ((l.node.as_str(), l.name.as_str()), l.count)).collect();
        let mut xdp = Vec::new();
        // The XDP lane's "nodes": each node's counters summed (it counts
        // outcomes, not calls or clocks).
        let mut xdp_nodes: Vec<(String, f64)> = Vec::new();
        for l in &b.lane {
            let old = old_lane.get(&(l.node.as_str(), l.name.as_str())).copied().unwrap_or(0);
            let d = delta(old, l.count).ok_or(restarted)?;
            xdp.push(XdpRate {
                node: l.node.clone(),
                name: l.name.clone(),
                kind: l.kind.clone(),
                per_s: per(d),
                total: l.count,
            });
            // Events (`info`) count packets already counted by an outcome.
            if l.kind == "info" {
                continue;
            }
            match xdp_nodes.iter_mut().find(|(n, _)| *n == l.node) {
                Some((_, r)) => *r += per(d),
                None => xdp_nodes.push((l.node.clone(), per(d))),
            }
        }
        nodes.extend(xdp_nodes.into_iter().map(|(node, pps)| NodeRate {
            lane: "xdp".into(),
            node,
            pps,
            calls_ps: None,
            packets_per_call: None,
            ns_per_packet: None,
        }));

        let old_workers: HashMap<u16, &tern_control::api::types::TopWorker> =
            a.workers.iter().map(|w| (w.id, w)).collect();
        let mut workers = Vec::new();
        for w in &b.workers {
            let o = old_workers.get(&w.id);
            let f = |g: fn(&tern_control::api::types::TopWorker) -> u64| delta(o.map_or(0, |o| g(o)), g(w));
            let up = f(|w| w.uptime_ns).ok_or(restarted)?;
            let idle = f(|w| w.idle_ns).ok_or(restarted)?;
            let loops = f(|w| w.loops).ok_or(restarted)?;
            let busy = f(|w| w.busy_loops).ok_or(restarted)?;
            let rx = f(|w| w.rx_packets).ok_or(restarted)?;
            let pct = |x: u64, of: u64| if of > 0 { 100.0 * x.min(of) as f64 / of as f64 } else { 0.0 };
            workers.push(WorkerRate {
                id: w.id,
                load_pct: if up > 0 { 100.0 - pct(idle, up) } else { 0.0 },
                busy_loops_pct: pct(busy, loops),
                loops_ps: per(loops),
                rx_pps: per(rx),
            });
        }

        let fib = FibRate {
            v4_routes: b.fib.v4_routes,
            v6_routes: b.fib.v6_routes,
            updates_ps: per(delta(a.fib.fib_updates, b.fib.fib_updates).ok_or(restarted)?),
            adds_ps: per(delta(a.fib.adds, b.fib.adds).ok_or(restarted)?),
            dels_ps: per(delta(a.fib.dels, b.fib.dels).ok_or(restarted)?),
        };

        Ok(Rates {
            version: b.version.clone(),
            uptime_s: b.uptime_ns as f64 / 1e9,
            interval_s: dt,
            lanes,
            interfaces,
            nodes,
            drops,
            workers,
            fib,
            xdp,
        })
    }
}

/// What rows are sorted by (`s` cycles through them in this order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    /// Packets per second, highest first.
    #[default]
    Packets,
    /// Bits per second (interfaces; other rows: packets), highest first.
    Bits,
    /// Drops per second (interfaces and drop reasons), highest first.
    Drops,
    /// Nanoseconds per packet (nodes; other rows: packets), highest first.
    Cost,
    /// Names, A to Z.
    Name,
}

impl SortKey {
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Packets => SortKey::Bits,
            SortKey::Bits => SortKey::Drops,
            SortKey::Drops => SortKey::Cost,
            SortKey::Cost => SortKey::Name,
            SortKey::Name => SortKey::Packets,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Packets => "packets",
            SortKey::Bits => "bits",
            SortKey::Drops => "drops",
            SortKey::Cost => "cost",
            SortKey::Name => "name",
        }
    }
}

/// How rows are chosen and ordered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// Rows whose name contains this (any case); empty: all.
    pub filter: String,
    pub sort: SortKey,
    /// Reverse the order.
    pub reverse: bool,
    /// Hide rows whose rates are all zero (never interfaces).
    pub hide_zero: bool,
}

/// A row of a pane, as sorting and filtering see it.
pub trait Row {
    /// What the filter matches and `name` sorts by.
    fn name(&self) -> String;
    /// The value for a numeric sort key (higher first).
    fn value(&self, key: SortKey) -> f64;
    /// Whether every rate of the row is zero.
    fn idle(&self) -> bool;
}

impl Row for IfaceRate {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn value(&self, key: SortKey) -> f64 {
        match key {
            SortKey::Bits => self.rx_bps + self.tx_bps,
            SortKey::Drops => self.drops_ps,
            _ => self.rx_pps + self.tx_pps,
        }
    }
    fn idle(&self) -> bool {
        self.rx_pps == 0.0 && self.tx_pps == 0.0 && self.drops_ps == 0.0
    }
}

impl Row for NodeRate {
    fn name(&self) -> String {
        self.node.clone()
    }
    fn value(&self, key: SortKey) -> f64 {
        match key {
            SortKey::Cost => self.ns_per_packet.unwrap_or(0.0),
            _ => self.pps,
        }
    }
    fn idle(&self) -> bool {
        self.pps == 0.0
    }
}

impl Row for DropRate {
    fn name(&self) -> String {
        format!("{}/{}", self.node, self.reason)
    }
    fn value(&self, _: SortKey) -> f64 {
        self.per_s
    }
    fn idle(&self) -> bool {
        self.per_s == 0.0
    }
}

impl Row for XdpRate {
    fn name(&self) -> String {
        format!("{}/{}", self.node, self.name)
    }
    fn value(&self, _: SortKey) -> f64 {
        self.per_s
    }
    fn idle(&self) -> bool {
        self.per_s == 0.0
    }
}

impl View {
    /// The rows to show, in order.
    pub fn rows<'a, R: Row>(&self, rows: &'a [R], never_hide: bool) -> Vec<&'a R> {
        let needle = self.filter.to_lowercase();
        let mut v: Vec<&R> = rows
            .iter()
            .filter(|r| needle.is_empty() || r.name().to_lowercase().contains(&needle))
            .filter(|r| never_hide || !self.hide_zero || !r.idle())
            .collect();
        let by_name = |a: &&R, b: &&R| a.name().cmp(&b.name());
        match self.sort {
            SortKey::Name => v.sort_by(by_name),
            k => v.sort_by(|a, b| {
                b.value(k).partial_cmp(&a.value(k)).unwrap_or(Ordering::Equal).then_with(|| by_name(a, b))
            }),
        }
        if self.reverse {
            v.reverse();
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_control::api::types::*;

    fn sample(t_ms: u64, lan_rx: u64, node_pkts: u64) -> TopSample {
        let iface = |name: &str, rx: u64, tx: u64| TopInterface {
            name: name.into(),
            lane: Some("afxdp copy".into()),
            up: true,
            counters: PortCounters {
                rx_packets: rx,
                rx_bytes: rx * 100,
                tx_packets: tx,
                tx_bytes: tx * 100,
                tx_dropped: 0,
                ..PortCounters::default()
            },
        };
        TopSample {
            version: "0.1.0".into(),
            uptime_ns: t_ms * 1_000_000,
            tsc_per_ns: 2.0,
            interfaces: vec![iface("lan", lan_rx, 0), iface("wan", 0, lan_rx / 2)],
            nodes: vec![
                TopNode {
                    node: "ip4-lookup".into(),
                    calls: node_pkts / 10,
                    packets: node_pkts,
                    cycles: node_pkts * 200,
                },
                TopNode { node: "ip6-lookup".into(), calls: 0, packets: 0, cycles: 0 },
            ],
            errors: vec![TopCounter {
                node: "ip4-input".into(),
                name: "ttl-expired".into(),
                kind: "drop".into(),
                count: node_pkts / 100,
            }],
            lane: vec![LaneStat {
                lane: "xdp".into(),
                node: "xdp-lane".into(),
                name: "forwarded".into(),
                kind: "forward".into(),
                count: node_pkts,
            }],
            workers: vec![TopWorker {
                id: 0,
                uptime_ns: t_ms * 1_000_000,
                idle_ns: t_ms * 250_000,
                loops: t_ms * 10,
                busy_loops: t_ms * 5,
                rx_packets: lan_rx,
            }],
            fib: FibSummary { v4_routes: 5, fib_updates: t_ms, ..FibSummary::default() },
        }
    }

    #[test]
    fn rates_over_an_interval() {
        let a = sample(1000, 1000, 2000);
        let b = sample(3000, 21_000, 42_000);
        let r = Rates::between(&a, &b).expect("rates");
        assert_eq!(r.interval_s, 2.0);
        let lan = &r.interfaces[0];
        assert_eq!((lan.name.as_str(), lan.rx_pps, lan.rx_bps), ("lan", 10_000.0, 8_000_000.0));
        assert_eq!(r.interfaces[1].tx_pps, 5_000.0);
        let n = &r.nodes[0];
        assert_eq!(n.pps, 20_000.0);
        assert_eq!(n.packets_per_call, Some(10.0));
        // 200 ticks a packet at 2 ticks/ns.
        assert_eq!(n.ns_per_packet, Some(100.0));
        assert_eq!(r.nodes[1].ns_per_packet, None, "no packets: no cost, not NaN");
        assert_eq!(r.drops[0].per_s, 200.0);
        assert_eq!(r.workers[0].load_pct, 75.0);
        assert_eq!(r.workers[0].busy_loops_pct, 50.0);
        assert_eq!(r.fib.updates_ps, 1000.0);
        let xdp_node = r.nodes.iter().find(|n| n.lane == "xdp").expect("xdp lane row");
        assert_eq!((xdp_node.node.as_str(), xdp_node.pps), ("xdp-lane", 20_000.0));
        assert_eq!(r.lanes, vec!["afxdp copy".to_string()]);
    }

    #[test]
    fn a_restart_gives_no_rates_never_negative_ones() {
        let a = sample(5000, 50_000, 90_000);
        // tern restarted: its clock and counters start again.
        let b = sample(1000, 100, 200);
        assert_eq!(Rates::between(&a, &b), Err(NoRates::Restarted));
        // A clock ahead but a counter behind (a port re-created) is one too.
        let mut c = sample(6000, 60_000, 95_000);
        c.interfaces[0].counters.rx_bytes = 0;
        assert_eq!(Rates::between(&a, &c), Err(NoRates::Restarted));
        let mut c = sample(6000, 60_000, 95_000);
        c.workers[0].idle_ns = 0;
        assert_eq!(Rates::between(&a, &c), Err(NoRates::Restarted));
        // From the new baseline on, rates again.
        let d = sample(2000, 1100, 400);
        let r = Rates::between(&b, &d).expect("rates after the restart");
        assert!(r.interfaces.iter().all(|i| i.rx_pps >= 0.0 && i.tx_pps >= 0.0));
        assert_eq!(r.interfaces[0].rx_pps, 1000.0);
    }

    #[test]
    fn a_zero_interval_gives_no_rates() {
        let a = sample(1000, 10, 10);
        assert_eq!(Rates::between(&a, &a.clone()), Err(NoRates::ZeroInterval));
    }

    #[test]
    fn a_counter_that_appears_counts_from_zero() {
        let mut a = sample(1000, 0, 0);
        a.errors.clear();
        a.interfaces.pop();
        let b = sample(2000, 0, 500);
        let r = Rates::between(&a, &b).expect("rates");
        assert_eq!(r.drops[0].per_s, 5.0);
        assert_eq!(r.interfaces.len(), 2);
    }

    fn node(name: &str, pps: f64, ns: Option<f64>) -> NodeRate {
        NodeRate { lane: "engine".into(), node: name.into(), pps, ns_per_packet: ns, ..NodeRate::default() }
    }

    fn names<R: Row>(v: &[&R]) -> Vec<String> {
        v.iter().map(|r| r.name()).collect()
    }

    #[test]
    fn sorting_by_each_key_and_reversed() {
        let rows = vec![node("b-node", 10.0, Some(50.0)), node("a-node", 30.0, Some(5.0)), node("c-node", 20.0, None)];
        let mut v = View::default();
        assert_eq!(names(&v.rows(&rows, false)), ["a-node", "c-node", "b-node"]);
        v.sort = SortKey::Cost;
        assert_eq!(names(&v.rows(&rows, false)), ["b-node", "a-node", "c-node"]);
        v.sort = SortKey::Name;
        assert_eq!(names(&v.rows(&rows, false)), ["a-node", "b-node", "c-node"]);
        v.reverse = true;
        assert_eq!(names(&v.rows(&rows, false)), ["c-node", "b-node", "a-node"]);
        // Equal values keep a stable order by name.
        let tied = vec![node("y", 1.0, None), node("x", 1.0, None)];
        assert_eq!(names(&View::default().rows(&tied, false)), ["x", "y"]);
        // The cycle visits every key once.
        let mut k = SortKey::Packets;
        let mut seen = vec![k];
        for _ in 0..4 {
            k = k.next();
            seen.push(k);
        }
        assert_eq!(k.next(), SortKey::Packets);
        seen.dedup();
        assert_eq!(seen.len(), 5);
    }

    #[test]
    fn filtering_and_hiding_idle_rows() {
        let rows = vec![node("ip4-lookup", 10.0, None), node("ip6-lookup", 0.0, None), node("IP4-rewrite", 5.0, None)];
        let v = View { filter: "ip4".into(), ..View::default() };
        assert_eq!(names(&v.rows(&rows, false)), ["ip4-lookup", "IP4-rewrite"], "any case");
        let v = View { hide_zero: true, ..View::default() };
        assert_eq!(names(&v.rows(&rows, false)), ["ip4-lookup", "IP4-rewrite"]);
        assert_eq!(v.rows(&rows, true).len(), 3, "never hidden where asked");
        let v = View { filter: "nothing-like-it".into(), ..View::default() };
        assert!(v.rows(&rows, false).is_empty());
    }
}
