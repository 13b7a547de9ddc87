//! Counters shared between a worker (the only writer) and readers.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter with exactly one writer thread. `add` is a relaxed load and a
/// relaxed store (no locked instruction); readers see a recent value.
#[derive(Default, Debug)]
#[repr(transparent)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline(always)]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
    #[inline(always)]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Per-node counters of one worker.
#[derive(Default, Debug)]
pub struct NodeCounters {
    /// Times the node's process function ran.
    pub calls: Counter,
    /// Packets it processed.
    pub packets: Counter,
    /// TSC cycles spent inside it.
    pub clocks: Counter,
}

/// Per-port counters of one worker: what the worker did, plus the driver's
/// own counters copied periodically.
#[derive(Default, Debug)]
pub struct PortCounters {
    pub rx_packets: Counter,
    pub rx_bytes: Counter,
    pub tx_packets: Counter,
    pub tx_bytes: Counter,
    /// Packets the port refused on transmit (ring full, error).
    pub tx_dropped: Counter,
    /// Driver: packets it could not deliver to us (kernel ring drops...).
    pub drv_rx_dropped: Counter,
    pub drv_errors: Counter,
}

/// Number of log2 buckets of the receive batch-size histogram (1, 2-3,
/// 4-7, ... 256+).
pub const BATCH_BUCKETS: usize = 10;

/// How a worker spends its loops.
#[derive(Default, Debug)]
pub struct LoopCounters {
    pub loops: Counter,
    /// Loops that received at least one packet.
    pub busy_loops: Counter,
    /// Nanoseconds spent sleeping in poll(2) while idle.
    pub idle_ns: Counter,
    /// Nanoseconds since the worker started (updated every loop batch).
    pub uptime_ns: Counter,
    /// Histogram of packets received per busy loop.
    pub batch_hist: [Counter; BATCH_BUCKETS],
}

/// All counters of one worker.
#[derive(Debug)]
pub struct WorkerStats {
    pub nodes: Box<[NodeCounters]>,
    /// Indexed by global error id (see `GraphInfo::errors`).
    pub errors: Box<[Counter]>,
    pub ports: Box<[PortCounters]>,
    pub looping: LoopCounters,
}

impl WorkerStats {
    pub fn new(nodes: usize, errors: usize, ports: usize) -> WorkerStats {
        WorkerStats {
            nodes: (0..nodes).map(|_| NodeCounters::default()).collect(),
            errors: (0..errors).map(|_| Counter::default()).collect(),
            ports: (0..ports).map(|_| PortCounters::default()).collect(),
            looping: LoopCounters::default(),
        }
    }

    /// A plain copy, for reports.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            nodes: self.nodes.iter().map(|n| [n.calls.get(), n.packets.get(), n.clocks.get()]).collect(),
            errors: self.errors.iter().map(Counter::get).collect(),
            ports: self
                .ports
                .iter()
                .map(|p| PortSnapshot {
                    rx_packets: p.rx_packets.get(),
                    rx_bytes: p.rx_bytes.get(),
                    tx_packets: p.tx_packets.get(),
                    tx_bytes: p.tx_bytes.get(),
                    tx_dropped: p.tx_dropped.get(),
                    drv_rx_dropped: p.drv_rx_dropped.get(),
                    drv_errors: p.drv_errors.get(),
                })
                .collect(),
            loops: self.looping.loops.get(),
            busy_loops: self.looping.busy_loops.get(),
            idle_ns: self.looping.idle_ns.get(),
            uptime_ns: self.looping.uptime_ns.get(),
            batch_hist: std::array::from_fn(|i| self.looping.batch_hist[i].get()),
        }
    }
}

/// Bucket of the batch-size histogram for `n` packets (n >= 1).
#[inline]
pub fn batch_bucket(n: usize) -> usize {
    ((usize::BITS - 1 - n.max(1).leading_zeros()) as usize).min(BATCH_BUCKETS - 1)
}

/// A copy of one worker's counters at one moment (summable).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Per node: [calls, packets, clocks].
    pub nodes: Vec<[u64; 3]>,
    pub errors: Vec<u64>,
    pub ports: Vec<PortSnapshot>,
    pub loops: u64,
    pub busy_loops: u64,
    pub idle_ns: u64,
    pub uptime_ns: u64,
    pub batch_hist: [u64; BATCH_BUCKETS],
}

#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct PortSnapshot {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_dropped: u64,
    pub drv_rx_dropped: u64,
    pub drv_errors: u64,
}

impl StatsSnapshot {
    /// Adds another worker's counters into this one (same graph shape).
    pub fn accumulate(&mut self, o: &StatsSnapshot) {
        if self.nodes.len() < o.nodes.len() {
            self.nodes.resize(o.nodes.len(), [0; 3]);
        }
        for (a, b) in self.nodes.iter_mut().zip(&o.nodes) {
            for k in 0..3 {
                a[k] += b[k];
            }
        }
        if self.errors.len() < o.errors.len() {
            self.errors.resize(o.errors.len(), 0);
        }
        for (a, b) in self.errors.iter_mut().zip(&o.errors) {
            *a += b;
        }
        self.loops += o.loops;
        self.busy_loops += o.busy_loops;
        self.idle_ns += o.idle_ns;
        self.uptime_ns += o.uptime_ns;
        for (a, b) in self.batch_hist.iter_mut().zip(&o.batch_hist) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_adds() {
        let c = Counter::default();
        c.add(3);
        c.add(4);
        assert_eq!(c.get(), 7);
    }

    #[test]
    fn buckets() {
        assert_eq!(batch_bucket(1), 0);
        assert_eq!(batch_bucket(2), 1);
        assert_eq!(batch_bucket(3), 1);
        assert_eq!(batch_bucket(4), 2);
        assert_eq!(batch_bucket(256), 8);
        assert_eq!(batch_bucket(100_000), BATCH_BUCKETS - 1);
    }

    #[test]
    fn snapshots_accumulate() {
        let a = WorkerStats::new(2, 3, 1);
        a.nodes[1].packets.add(5);
        a.errors[2].add(1);
        let mut s = a.snapshot();
        s.accumulate(&a.snapshot());
        assert_eq!(s.nodes[1][1], 10);
        assert_eq!(s.errors[2], 2);
    }
}
