//! Fragments of one datagram that reach different workers: each datagram
//! has an owner worker, chosen by a keyed hash of its key (source,
//! destination, identification, IPv4 protocol), and a worker hands the
//! fragments it does not own to their owner's queue, as VPP's
//! `ip4-full-reassembly` hands them to the owning thread.
//!
//! Why: receive-side scaling need not keep a datagram's fragments
//! together. AF_PACKET's fanout hash (the kernel's flow dissector, which
//! stops at the IP header of every fragment) and most NICs' RSS hash all
//! fragments by addresses alone, but some hash a first fragment with its
//! ports and the rest without, fragments may arrive on two interfaces
//! (two paths), and an IPv6 sender may change its flow label; one worker
//! per datagram costs a copy of the fragments that land elsewhere and
//! nothing when they do not (one worker: no hash at all).
//!
//! A handed fragment is a copy of its frame and metadata (the buffer
//! belongs to the receiving worker's pool, so it cannot travel); the
//! owner takes it into a buffer of its own pool and puts it through its
//! table as if it had received it. The queues are bounded
//! ([`HANDOFF_QUEUE`] fragments per worker and family); a fragment that
//! finds its owner's queue full is dropped and counted
//! (`handoff-full`). The owner is woken once per run of hand-offs (a
//! flag it clears before it drains), not once per fragment.

use super::table::Key;
use crossbeam_queue::ArrayQueue;
use std::hash::BuildHasher;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use tern_packet::Meta;

/// Fragments waiting for one worker, per family.
pub const HANDOFF_QUEUE: usize = 1024;

/// A fragment on its way to its owner: the receiving worker's metadata
/// and a copy of the frame from its first data byte.
pub struct Handed {
    pub meta: Meta,
    pub frame: Vec<u8>,
}

struct Inbox {
    queue: ArrayQueue<Handed>,
    /// Set by the first push since the owner last drained: it is woken.
    kick: AtomicBool,
}

/// Wakes a worker sleeping in poll(2) (its `WorkerShared::wake`).
pub type Wake = Box<dyn Fn() + Send + Sync>;

/// The hand-off queues of all workers (see the module).
pub struct Handoff {
    workers: usize,
    /// Worker `w`'s IPv4 inbox at `2 * w`, its IPv6 inbox at `2 * w + 1`.
    inboxes: Vec<Inbox>,
    /// Keyed, so that a sender cannot choose which worker owns what.
    seed: std::collections::hash_map::RandomState,
    wakers: OnceLock<Vec<Wake>>,
}

impl Handoff {
    /// Queues for `workers` workers (1: no hand-off).
    pub fn new(workers: usize) -> Handoff {
        let workers = workers.max(1);
        let inboxes = if workers > 1 {
            (0..2 * workers)
                .map(|_| Inbox { queue: ArrayQueue::new(HANDOFF_QUEUE), kick: AtomicBool::new(false) })
                .collect()
        } else {
            Vec::new()
        };
        Handoff { workers, inboxes, seed: Default::default(), wakers: OnceLock::new() }
    }

    /// How to wake each worker, by worker number (set once, when they run;
    /// before that, a handed fragment waits for the owner's next loop).
    pub fn set_wakers(&self, wakers: Vec<Wake>) {
        let _ = self.wakers.set(wakers);
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The worker that reassembles `key`'s datagram, when it is not
    /// `worker` (None: `worker` owns it, or there is one worker, or
    /// `worker` is not one of those the queues were made for).
    #[inline]
    pub fn elsewhere(&self, key: &Key, worker: u16) -> Option<usize> {
        let w = usize::from(worker);
        if self.workers <= 1 || w >= self.workers {
            return None;
        }
        let owner = (self.seed.hash_one(key) % self.workers as u64) as usize;
        (owner != w).then_some(owner)
    }

    /// Queues `h` for `owner`'s `v6` node, waking it if this is the first
    /// since it last drained. `Err` (with the fragment) when full.
    pub fn push(&self, owner: usize, v6: bool, h: Handed) -> Result<(), Handed> {
        let Some(inbox) = self.inboxes.get(2 * owner + usize::from(v6)) else { return Err(h) };
        inbox.queue.push(h)?;
        if !inbox.kick.swap(true, Ordering::SeqCst)
            && let Some(wake) = self.wakers.get().and_then(|w| w.get(owner))
        {
            wake();
        }
        Ok(())
    }

    /// Whether `worker`'s `v6` inbox may hold fragments (clears the wake
    /// flag: call it before draining with [`Handoff::pop`]).
    pub fn start(&self, worker: u16, v6: bool) -> bool {
        let Some(inbox) = self.inboxes.get(2 * usize::from(worker) + usize::from(v6)) else { return false };
        inbox.kick.swap(false, Ordering::SeqCst) || !inbox.queue.is_empty()
    }

    /// The next fragment handed to `worker`'s `v6` node.
    pub fn pop(&self, worker: u16, v6: bool) -> Option<Handed> {
        self.inboxes.get(2 * usize::from(worker) + usize::from(v6))?.queue.pop()
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn key(id: u32) -> Key {
        Key { src: [1; 16], dst: [2; 16], id, proto: 50 }
    }

    #[test]
    fn one_worker_hands_nothing_off() {
        let h = Handoff::new(1);
        assert!((0..100).all(|i| h.elsewhere(&key(i), 0).is_none()));
        assert!(h.push(0, false, Handed { meta: Meta::default(), frame: vec![1] }).is_err());
    }

    #[test]
    fn every_datagram_has_one_owner_among_the_workers() {
        let h = Handoff::new(3);
        let mut owned = [0usize; 3];
        for i in 0..300 {
            let k = key(i);
            let elsewhere: Vec<_> = (0..3u16).map(|w| h.elsewhere(&k, w)).collect();
            let owners: Vec<u16> = (0..3u16).filter(|&w| elsewhere[usize::from(w)].is_none()).collect();
            assert_eq!(owners.len(), 1, "datagram {i}: {elsewhere:?}");
            let o = owners[0];
            assert!(elsewhere.iter().flatten().all(|&x| x == usize::from(o)), "{elsewhere:?}");
            owned[usize::from(o)] += 1;
        }
        assert!(owned.iter().all(|&n| n > 50), "spread: {owned:?}");
        // A worker number past the queues keeps its fragments.
        assert!(h.elsewhere(&key(1), 7).is_none());
    }

    #[test]
    fn the_owner_is_woken_once_per_run_and_drains_what_was_handed() {
        let h = Handoff::new(2);
        let woken = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let w = woken.clone();
        h.set_wakers(vec![
            Box::new(|| panic!("worker 0 has nothing")),
            Box::new(move || {
                w.fetch_add(1, Ordering::SeqCst);
            }),
        ]);
        for i in 0..3u8 {
            assert!(h.push(1, true, Handed { meta: Meta::default(), frame: vec![i] }).is_ok());
        }
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert!(!h.start(1, false), "the IPv4 inbox is empty");
        assert!(h.start(1, true));
        let got: Vec<u8> = std::iter::from_fn(|| h.pop(1, true)).map(|x| x.frame[0]).collect();
        assert_eq!(got, [0, 1, 2]);
        assert!(h.push(1, true, Handed { meta: Meta::default(), frame: vec![9] }).is_ok());
        assert_eq!(woken.load(Ordering::SeqCst), 2, "a push after the drain wakes again");
        for _ in 1..HANDOFF_QUEUE {
            assert!(h.push(1, true, Handed { meta: Meta::default(), frame: vec![] }).is_ok());
        }
        assert!(h.push(1, true, Handed { meta: Meta::default(), frame: vec![] }).is_err(), "bounded");
    }
}
