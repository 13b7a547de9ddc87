//! Per-rule hit counters, one [`RuleCounters`] per worker per rule set.
//!
//! Each worker owns its counters and is their only writer, so an increment
//! is a relaxed load and a relaxed store (no locked read-modify-write, no
//! shared cache line between workers). Readers (CLI, metrics) may read at
//! any time from any thread and sum across workers; a reader can see a
//! value one increment behind, never a torn one.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::classifier::{Classifier, Verdict};
use crate::key::PacketKey;

/// Packets and bytes that hit one rule (or the default policy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hits {
    pub packets: u64,
    pub bytes: u64,
}

/// Hit counters of one rule set for one worker: one slot per rule and a
/// last slot for packets decided by the default policy.
#[derive(Debug)]
pub struct RuleCounters {
    cells: Box<[[AtomicU64; 2]]>,
}

impl RuleCounters {
    /// Counters for a rule set of `rules` rules.
    pub fn new(rules: usize) -> Self {
        RuleCounters { cells: (0..=rules).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect() }
    }

    /// Counters sized for a compiled classifier.
    pub fn for_classifier(c: &Classifier) -> Self {
        Self::new(c.rule_count())
    }

    /// Number of rules (not counting the default slot).
    pub fn rules(&self) -> usize {
        self.cells.len() - 1
    }

    /// Adds one packet of `bytes` to `rule` (`None`: the default policy).
    /// Only the owning worker may call this (single writer).
    #[inline]
    pub fn add(&self, rule: Option<u32>, bytes: u32) {
        self.add_n(rule, 1, u64::from(bytes));
    }

    /// Adds `packets` packets of `bytes` bytes in all to `rule` (`None`:
    /// the default policy): one update for a run of packets that met the
    /// same rule. Only the owning worker may call this (single writer).
    #[inline]
    pub fn add_n(&self, rule: Option<u32>, packets: u64, bytes: u64) {
        let i = rule.map_or(self.cells.len() - 1, |r| r as usize);
        if let Some([p, b]) = self.cells.get(i) {
            p.store(p.load(Relaxed).wrapping_add(packets), Relaxed);
            b.store(b.load(Relaxed).wrapping_add(bytes), Relaxed);
        }
    }

    /// Counts a classified packet: its deciding rule (or the default) and
    /// every count-only rule it matched before.
    #[inline]
    pub fn record(&self, c: &Classifier, key: &PacketKey, v: &Verdict, bytes: u32) {
        self.record_n(c, key, v, 1, u64::from(bytes));
    }

    /// [`Self::record`] for `packets` packets of the same key (and so the
    /// same verdict) totalling `bytes` bytes.
    #[inline]
    pub fn record_n(&self, c: &Classifier, key: &PacketKey, v: &Verdict, packets: u64, bytes: u64) {
        self.add_n(v.rule, packets, bytes);
        if v.counted() {
            c.count_hits(key, v, |r| self.add_n(Some(r), packets, bytes));
        }
    }

    /// Hits of rule `i`.
    pub fn rule(&self, i: usize) -> Hits {
        if i >= self.rules() {
            return Hits::default();
        }
        self.read(i)
    }

    /// Hits decided by the default policy.
    pub fn default_hits(&self) -> Hits {
        self.read(self.cells.len() - 1)
    }

    fn read(&self, i: usize) -> Hits {
        self.cells.get(i).map_or(Hits::default(), |[p, b]| Hits { packets: p.load(Relaxed), bytes: b.load(Relaxed) })
    }

    /// All slots: rules in order, then the default.
    pub fn snapshot(&self) -> Vec<Hits> {
        (0..self.cells.len()).map(|i| self.read(i)).collect()
    }

    /// Sums the snapshots of several workers' counters of the same rule set.
    pub fn sum<'a>(workers: impl IntoIterator<Item = &'a RuleCounters>) -> Vec<Hits> {
        let mut out: Vec<Hits> = Vec::new();
        for w in workers {
            let s = w.snapshot();
            if out.len() < s.len() {
                out.resize(s.len(), Hits::default());
            }
            for (o, h) in out.iter_mut().zip(s) {
                o.packets = o.packets.wrapping_add(h.packets);
                o.bytes = o.bytes.wrapping_add(h.bytes);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_rules_default_and_sums_workers() {
        let a = RuleCounters::new(3);
        let b = RuleCounters::new(3);
        a.add(Some(1), 100);
        a.add(Some(1), 60);
        a.add(None, 10);
        b.add(Some(1), 1);
        b.add(Some(7), 1); // out of range: ignored, never a panic
        assert_eq!(a.rule(1), Hits { packets: 2, bytes: 160 });
        assert_eq!(a.default_hits(), Hits { packets: 1, bytes: 10 });
        let s = RuleCounters::sum([&a, &b]);
        assert_eq!(s.len(), 4);
        assert_eq!(s[1], Hits { packets: 3, bytes: 161 });
        assert_eq!(s[3].packets, 1);
        a.add_n(Some(2), 3, 180);
        assert_eq!(a.rule(2), Hits { packets: 3, bytes: 180 });
    }

    #[test]
    fn readers_on_other_threads_see_monotonic_values() {
        let c = std::sync::Arc::new(RuleCounters::new(1));
        let w = c.clone();
        let writer = std::thread::spawn(move || {
            for _ in 0..100_000 {
                w.add(Some(0), 1);
            }
        });
        let mut last = 0;
        while !writer.is_finished() {
            let now = c.rule(0).packets;
            assert!(now >= last);
            last = now;
        }
        writer.join().unwrap();
        assert_eq!(c.rule(0).packets, 100_000);
    }
}
