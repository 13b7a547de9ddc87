//! Packet traces: the path and decisions of the next N packets.
//!
//! The control side arms a trace with a packet budget; each worker marks
//! packets as they arrive until the budget is spent. For a marked packet the
//! engine records every node it passes and the next node chosen, and nodes
//! may add notes ("fib: 10.0.0.0/8 via 192.0.2.1"). When the packet leaves
//! (transmitted or dropped) its record moves to the shared result list.
//! Every marked packet is accounted for: its record is in the list, or it
//! is still in flight (counted), or it was lost (counted: the list was
//! full). Records of a trace armed or cleared since the packet was marked
//! are discarded, not mixed into the new one.
//! Cost when no trace is armed: one relaxed load per loop and one branch
//! per batch.

use serde::Serialize;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tern_packet::{PacketPool, PktIdx, flags};

/// Bytes of each traced packet kept at arrival.
pub const TRACE_HEAD: usize = 128;
/// Traced packets that may be in flight at once in one worker.
const SLOTS: usize = 1024;
/// Finished records kept for readers (oldest dropped beyond).
const KEEP: usize = 10_000;

/// One step of a traced packet.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct TraceHop {
    pub node: &'static str,
    pub next: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Everything recorded about one packet.
#[derive(Clone, Debug, Serialize)]
pub struct TraceRecord {
    pub seq: u64,
    pub worker: u16,
    pub rx_if: u16,
    pub t_ns: u64,
    /// First bytes of the packet as it arrived.
    pub head: Vec<u8>,
    pub len: usize,
    pub hops: Vec<TraceHop>,
    /// "tx port N", "drop: <reason>" or "held".
    pub fate: String,
}

/// Shared between the control side (arms, reads) and the workers.
#[derive(Default)]
pub struct TraceShared {
    armed: AtomicU32,
    seq: AtomicU64,
    /// Bumped by `arm` and `clear`: records of packets marked before are
    /// not the current trace's.
    generation: AtomicU32,
    /// Packets marked and not yet transmitted or dropped (all workers).
    in_flight: AtomicU64,
    /// Records of the current trace that could not be kept.
    lost: AtomicU64,
    done: Mutex<Vec<TraceRecord>>,
}

impl TraceShared {
    pub fn new() -> Arc<TraceShared> {
        Arc::new(TraceShared::default())
    }

    /// Traces the next `n` packets (across all workers); replaces any
    /// budget left.
    pub fn arm(&self, n: u32) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.armed.store(n, Ordering::Relaxed);
    }

    /// Packets marked that have not left their worker yet (held for a
    /// neighbour, queued): their records come once they leave.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Records of the current trace that were lost (the result list was
    /// full), shown by `trace show` as such.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    pub fn remaining(&self) -> u32 {
        self.armed.load(Ordering::Relaxed)
    }

    /// Takes the finished records.
    pub fn take(&self) -> Vec<TraceRecord> {
        std::mem::take(&mut *self.done.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Copies the finished records.
    pub fn peek(&self) -> Vec<TraceRecord> {
        self.done.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Copies the finished records, with (at the same instant) the packets
    /// still in flight and the records lost: every packet marked is in one
    /// of the three.
    pub fn peek_counted(&self) -> (Vec<TraceRecord>, u64, u64) {
        let d = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        (d.clone(), self.in_flight.load(Ordering::Relaxed), self.lost.load(Ordering::Relaxed))
    }

    pub fn clear(&self) {
        let mut d = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.lost.store(0, Ordering::Relaxed);
        d.clear();
    }

    /// Claims one packet from the budget.
    fn claim(&self) -> bool {
        self.armed.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    /// Keeps the record of a packet marked in `generation`; a record of
    /// an earlier trace is discarded.
    fn finish(&self, rec: TraceRecord, generation: u32) {
        let mut d = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        // Under the lock, so that a reader sees the record either in
        // flight or in the list.
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        // `clear` bumps the generation under the lock too.
        if generation != self.generation.load(Ordering::Relaxed) {
            return;
        }
        if d.len() >= KEEP {
            d.remove(0);
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        d.push(rec);
    }
}

/// A worker's side of tracing.
pub struct Tracer {
    shared: Arc<TraceShared>,
    worker: u16,
    /// Records in flight and the generation they were marked in.
    slots: Vec<Option<(TraceRecord, u32)>>,
    free: Vec<u16>,
    pending_notes: Vec<(u16, String)>,
}

impl Tracer {
    pub fn new(shared: Arc<TraceShared>, worker: u16) -> Tracer {
        Tracer {
            shared,
            worker,
            slots: (0..SLOTS).map(|_| None).collect(),
            free: (0..SLOTS as u16).rev().collect(),
            pending_notes: Vec::new(),
        }
    }

    /// True when packets still need to be marked.
    #[inline]
    pub fn armed(&self) -> bool {
        self.shared.armed.load(Ordering::Relaxed) != 0
    }

    /// True when some traced packet is in flight in this worker.
    #[inline]
    pub fn active(&self) -> bool {
        self.free.len() != SLOTS
    }

    /// Marks `pkt` as traced if the budget allows.
    pub fn start(&mut self, pool: &mut PacketPool, pkt: PktIdx, rx_if: u16, now_ns: u64) {
        if self.free.is_empty() || !self.shared.claim() {
            return;
        }
        let Some(slot) = self.free.pop() else { return };
        let generation = self.shared.generation.load(Ordering::Relaxed);
        self.shared.in_flight.fetch_add(1, Ordering::Relaxed);
        let data = pool.data(pkt);
        let rec = TraceRecord {
            seq: self.shared.seq.fetch_add(1, Ordering::Relaxed),
            worker: self.worker,
            rx_if,
            t_ns: now_ns,
            head: data[..data.len().min(TRACE_HEAD)].to_vec(),
            len: data.len(),
            hops: Vec::new(),
            fate: "held".into(),
        };
        self.slots[slot as usize] = Some((rec, generation));
        let m = pool.meta_mut(pkt);
        m.flags |= flags::TRACED;
        m.trace = slot;
    }

    pub(crate) fn note(&mut self, slot: u16, note: String) {
        self.pending_notes.push((slot, note));
    }

    /// Records that the packet in `slot` went from `node` to `next`.
    pub(crate) fn hop(&mut self, slot: u16, node: &'static str, next: &'static str) {
        let mut notes = Vec::new();
        self.pending_notes.retain(|(s, n)| {
            if *s == slot {
                notes.push(n.clone());
                false
            } else {
                true
            }
        });
        if let Some(Some((rec, _))) = self.slots.get_mut(slot as usize) {
            rec.hops.push(TraceHop { node, next, notes });
        }
    }

    /// The packet in `slot` left the worker (the worker calls this for
    /// the packets it sends; a harness that runs a graph itself does too).
    pub fn finish(&mut self, slot: u16, fate: String) {
        if let Some((mut rec, generation)) = self.slots.get_mut(slot as usize).and_then(Option::take) {
            self.free.push(slot);
            // Notes of a packet that left without another hop.
            self.pending_notes.retain(|(s, _)| *s != slot);
            rec.fate = fate;
            self.shared.finish(rec, generation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_packet::PoolConfig;

    #[test]
    fn budget_limits_marked_packets() {
        let shared = TraceShared::new();
        let mut t = Tracer::new(Arc::clone(&shared), 0);
        let mut pool = PacketPool::new(PoolConfig { frames: 8, ..PoolConfig::default() }).expect("pool");
        shared.arm(2);
        let pkts: Vec<_> = (0..3).map(|i| pool.alloc_from(&[i; 10]).expect("buf")).collect();
        for &p in &pkts {
            t.start(&mut pool, p, 1, 5);
        }
        let marked: Vec<_> = pkts.iter().map(|&p| pool.meta(p).flags & flags::TRACED != 0).collect();
        assert_eq!(marked, vec![true, true, false]);
        assert!(!t.armed());
        let slot = pool.meta(pkts[0]).trace;
        t.note(slot, "hello".into());
        t.hop(slot, "a", "b");
        t.finish(slot, "tx".into());
        let recs = shared.take();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].hops, vec![TraceHop { node: "a", next: "b", notes: vec!["hello".into()] }]);
        assert_eq!(recs[0].fate, "tx");
        assert!(t.active(), "one traced packet is still in flight");
        assert_eq!(shared.in_flight(), 1);
    }

    /// Each marked packet is in the list, in flight or lost; a packet of
    /// an earlier trace that leaves after `trace start` is not mixed in.
    #[test]
    fn every_marked_packet_is_accounted_for() {
        let shared = TraceShared::new();
        let mut t = Tracer::new(Arc::clone(&shared), 0);
        let mut pool = PacketPool::new(PoolConfig { frames: 8, ..PoolConfig::default() }).expect("pool");
        shared.arm(3);
        let pkts: Vec<_> = (0..3).map(|i| pool.alloc_from(&[i; 10]).expect("buf")).collect();
        for &p in &pkts {
            t.start(&mut pool, p, 1, 5);
        }
        let slots: Vec<u16> = pkts.iter().map(|&p| pool.meta(p).trace).collect();
        t.finish(slots[0], "tx a".into());
        let (recs, in_flight, lost) = shared.peek_counted();
        assert_eq!((recs.len(), in_flight, lost), (1, 2, 0));
        // A new trace: the old packets still out there are not its records.
        shared.clear();
        shared.arm(1);
        t.finish(slots[1], "tx a".into());
        let q = pool.alloc_from(&[9; 10]).expect("buf");
        t.start(&mut pool, q, 1, 6);
        let qs = pool.meta(q).trace;
        t.finish(qs, "drop: x/y".into());
        let (recs, in_flight, lost) = shared.peek_counted();
        assert_eq!(recs.iter().map(|r| r.fate.as_str()).collect::<Vec<_>>(), vec!["drop: x/y"]);
        assert_eq!((in_flight, lost), (1, 0), "one packet of the old trace is still held");
        t.finish(slots[2], "tx a".into());
        assert_eq!(shared.peek_counted().1, 0);
    }
}
