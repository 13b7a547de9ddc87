//! IKE's datagrams through the engine, in standalone mode: tern answers
//! its own addresses there, so the IKE service reads and sends UDP 500
//! and 4500 through the workers rather than kernel sockets.
//!
//! Receiving: with `Params::ike_local` on ([`crate::router::Router::set_ike_local`]),
//! `ip4-local`, `ip6-local` and `esp-decrypt` queue UDP to port 500 and
//! UDP 4500 with the non-ESP marker addressed to the router on
//! `Shared::ike_rx` (marker stripped) and ring `Shared::ike_bell` once per
//! batch; [`EngineUdp::recv`] drains the queue, [`EngineUdp::recv_timeout`]
//! parks on the bell first.
//!
//! Sending: [`EngineUdp::send`] builds the IPv4/IPv6 + UDP packet (source
//! the local address, checksums computed; the non-ESP marker in front
//! when either port is 4500) and queues it on `Shared::ip_inject`, which
//! every worker's `ip-inject` node sends through `ip4-lookup` /
//! `ip6-lookup`: routing and neighbour resolution apply as to any packet
//! tern originates. A worker is woken only for the first packet since one
//! last drained the queue. The IKE service sends a turn's answers with
//! [`EngineUdp::send_deferred`] and wakes the worker once with
//! [`EngineUdp::kick`] when the turn is done: on a CPU it shares with the
//! IKE threads, a worker woken at the first answer preempted the sender,
//! sent that one packet and slept again, a round of two context switches
//! per answer.
//!
//! In Linux mode none of this runs: the kernel owns the router's
//! addresses and the IKE service binds kernel sockets.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;
use tern_engine::WorkerShared;
use tern_nodes::state::{Doorbell, IkeDatagram, InjectQueue, Shared};

/// The IKE service's UDP through the engine (see the module). Cheap to
/// clone; every clone reads the same queue and sends through the same
/// workers.
#[derive(Clone)]
pub struct EngineUdp {
    rx: Arc<crossbeam_queue::ArrayQueue<IkeDatagram>>,
    bell: Arc<Doorbell>,
    tx: Arc<InjectQueue>,
    /// The worker woken when packets wait (every worker polls the queue).
    worker: Option<Arc<WorkerShared>>,
    stats: Arc<Stats>,
}

#[derive(Default)]
struct Stats {
    ipv4_id: AtomicU16,
    sent: AtomicU64,
    refused: AtomicU64,
    received: AtomicU64,
    /// A deferred send found the workers asleep: the next
    /// [`EngineUdp::kick`] wakes one.
    owed: AtomicBool,
    /// Deferred sends since the last kick (one is forced at
    /// [`DEFER_MAX`]).
    deferred: AtomicU32,
    wakes: AtomicU64,
}

/// Deferred sends after which the worker is woken without waiting for the
/// sender's [`EngineUdp::kick`]: a long turn still streams its answers,
/// a wake-up per this many instead of one per answer.
pub const DEFER_MAX: u32 = 32;

/// What an [`EngineUdp`] counted (all its clones together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineUdpStats {
    /// Datagrams queued for the workers.
    pub sent: u64,
    /// Datagrams `send` refused (queue full, or not buildable).
    pub refused: u64,
    /// Datagrams `recv` returned.
    pub received: u64,
    /// Times a worker was woken for the datagrams queued.
    pub wakes: u64,
}

impl EngineUdp {
    /// Over the nodes' queues in `shared`, waking `worker` (the router's
    /// first) when packets are queued for sending.
    pub fn new(shared: &Shared, worker: Option<Arc<WorkerShared>>) -> EngineUdp {
        EngineUdp {
            rx: Arc::clone(&shared.ike_rx),
            bell: Arc::clone(&shared.ike_bell),
            tx: Arc::clone(&shared.ip_inject),
            worker,
            stats: Arc::default(),
        }
    }

    /// Appends every IKE datagram received since the last call as (local
    /// address, remote address, IKE message without the non-ESP marker).
    /// Never blocks.
    pub fn recv(&self, out: &mut Vec<(SocketAddr, SocketAddr, Vec<u8>)>) {
        self.recv_up_to(out, usize::MAX);
    }

    /// [`EngineUdp::recv`], at most `max` datagrams.
    pub fn recv_up_to(&self, out: &mut Vec<(SocketAddr, SocketAddr, Vec<u8>)>, max: usize) {
        let start = out.len();
        while out.len() - start < max
            && let Some(d) = self.rx.pop()
        {
            out.push((d.local, d.remote, d.message));
        }
        self.stats.received.fetch_add((out.len() - start) as u64, Ordering::Relaxed);
    }

    /// Whether a datagram waits.
    pub fn pending(&self) -> bool {
        !self.rx.is_empty()
    }

    /// The doorbell the workers ring when they queued datagrams: a thread
    /// that reads the queue parks on it (and is woken through it).
    pub fn bell(&self) -> &Arc<Doorbell> {
        &self.bell
    }

    /// [`EngineUdp::recv`], first waiting up to `timeout` for a datagram
    /// when none is queued (it may return early and empty).
    pub fn recv_timeout(&self, out: &mut Vec<(SocketAddr, SocketAddr, Vec<u8>)>, timeout: Duration) {
        if self.rx.is_empty() {
            self.bell.wait(timeout, || !self.rx.is_empty());
        }
        self.recv(out);
    }

    /// Sends `ike` from `local` to `remote` (the same family; `local` one
    /// of the router's addresses), the non-ESP marker in front when
    /// either port is 4500. False when the workers' queue is full or the
    /// packet cannot be built (mixed families, over 64 KiB).
    pub fn send(&self, local: SocketAddr, remote: SocketAddr, ike: &[u8]) -> bool {
        match self.queue(local, remote, ike) {
            Some(wake) => {
                if wake {
                    self.wake_worker();
                }
                true
            }
            None => false,
        }
    }

    /// [`EngineUdp::send`] without waking a worker: the caller owes a
    /// [`EngineUdp::kick`] once its batch of sends is done (or every
    /// [`DEFER_MAX`] deferred sends wake one here).
    pub fn send_deferred(&self, local: SocketAddr, remote: SocketAddr, ike: &[u8]) -> bool {
        let Some(wake) = self.queue(local, remote, ike) else { return false };
        if wake {
            self.stats.owed.store(true, Ordering::SeqCst);
        }
        if self.stats.deferred.fetch_add(1, Ordering::Relaxed) + 1 >= DEFER_MAX {
            self.kick();
        }
        true
    }

    /// Wakes a worker if a deferred send found them asleep.
    pub fn kick(&self) {
        self.stats.deferred.store(0, Ordering::Relaxed);
        if self.stats.owed.load(Ordering::Relaxed) && self.stats.owed.swap(false, Ordering::SeqCst) {
            self.wake_worker();
        }
    }

    fn wake_worker(&self) {
        self.stats.wakes.fetch_add(1, Ordering::Relaxed);
        if let Some(w) = &self.worker {
            w.wake();
        }
    }

    /// Builds and queues the packet: whether a worker must be woken, or
    /// `None` (counted) when it cannot be built or the queue is full.
    fn queue(&self, local: SocketAddr, remote: SocketAddr, ike: &[u8]) -> Option<bool> {
        let id = self.stats.ipv4_id.fetch_add(1, Ordering::Relaxed);
        let marked;
        let payload = if local.port() == tern_nodes::ike::NAT_T_PORT || remote.port() == tern_nodes::ike::NAT_T_PORT {
            let mut m = Vec::with_capacity(4 + ike.len());
            m.extend_from_slice(&tern_nodes::ike::NON_ESP_MARKER);
            m.extend_from_slice(ike);
            marked = m;
            &marked[..]
        } else {
            ike
        };
        let Some(pkt) = tern_nodes::ike::udp_packet(local, remote, payload, id) else {
            self.stats.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        match self.tx.push(pkt) {
            Ok(wake) => {
                self.stats.sent.fetch_add(1, Ordering::Relaxed);
                Some(wake)
            }
            Err(_) => {
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// What this handle and its clones counted.
    pub fn stats(&self) -> EngineUdpStats {
        EngineUdpStats {
            sent: self.stats.sent.load(Ordering::Relaxed),
            refused: self.stats.refused.load(Ordering::Relaxed),
            received: self.stats.received.load(Ordering::Relaxed),
            wakes: self.stats.wakes.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        let (_fib, reader) = tern_fib::new(tern_fib::FibConfig::default(), tern_rcu::Domain::new());
        Shared::new(tern_nodes::state::IfTable::default(), reader)
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("socket address")
    }

    #[test]
    fn send_marks_4500_and_queues_whole_packets() {
        let sh = shared();
        let u = EngineUdp::new(&sh, None);
        assert!(u.send(sa("10.0.1.1:500"), sa("10.0.1.2:500"), b"ike"));
        assert!(u.send(sa("10.0.1.1:4500"), sa("10.0.1.2:31000"), b"ike"));
        let p500 = sh.ip_inject.pop().expect("queued");
        assert_eq!(&p500[28..], b"ike", "no marker on 500");
        let p4500 = sh.ip_inject.pop().expect("queued");
        assert_eq!(&p4500[28..], b"\0\0\0\0ike", "the non-ESP marker on 4500");
        assert!(!u.send(sa("10.0.1.1:500"), sa("[2001:db8::2]:500"), b"ike"), "mixed families");
        assert_eq!(u.stats(), EngineUdpStats { sent: 2, refused: 1, received: 0, wakes: 1 });
    }

    /// What `ip-inject` does: clears the wake-up flag, takes every packet.
    fn drain(sh: &Shared) -> usize {
        sh.ip_inject.start();
        std::iter::from_fn(|| sh.ip_inject.pop()).count()
    }

    #[test]
    fn deferred_sends_wake_the_worker_once_at_the_kick() {
        let sh = shared();
        let u = EngineUdp::new(&sh, None);
        let (a, b) = (sa("10.0.1.1:500"), sa("10.0.1.2:500"));
        for _ in 0..3 {
            assert!(u.send_deferred(a, b, b"ike"));
        }
        assert_eq!(u.stats().wakes, 0, "no wake-up before the kick");
        u.kick();
        assert_eq!(u.stats().wakes, 1, "one for the three");
        u.kick();
        assert_eq!(u.stats().wakes, 1, "nothing owed any more");
        assert_eq!(drain(&sh), 3);
        // A worker that drained the queue is asleep again: the next turn
        // owes it one wake-up, however many sends.
        assert!(u.send_deferred(a, b, b"ike"));
        assert!(u.send_deferred(a, b, b"ike"));
        u.kick();
        assert_eq!(u.stats().wakes, 2);
        // Sends while a worker has not drained yet owe nothing more.
        assert!(u.send_deferred(a, b, b"ike"));
        u.kick();
        assert_eq!(u.stats().wakes, 2, "the worker still has the last wake-up's packets to take");
        assert_eq!(drain(&sh), 3);
        // A clone (another thread's handle) pays what this one owes.
        assert!(u.send_deferred(a, b, b"ike"));
        u.clone().kick();
        assert_eq!(u.stats().wakes, 3);
        assert_eq!(u.stats().sent, 7);
    }

    #[test]
    fn a_long_run_of_deferred_sends_wakes_every_defer_max() {
        let sh = shared();
        let u = EngineUdp::new(&sh, None);
        let (a, b) = (sa("10.0.1.1:500"), sa("10.0.1.2:500"));
        for i in 1..=3 * DEFER_MAX {
            assert!(u.send_deferred(a, b, b"ike"));
            // The worker drains each packet as it comes (it is awake).
            if i % DEFER_MAX != 0 {
                assert_eq!(u.stats().wakes, u64::from(i / DEFER_MAX), "after {i} sends");
            }
            drain(&sh);
        }
        assert_eq!(u.stats().wakes, 3, "one every {DEFER_MAX}, without a kick");
    }

    #[test]
    fn send_is_refused_when_full() {
        let sh = shared();
        let u = EngineUdp::new(&sh, None);
        let mut n = 0;
        while u.send(sa("10.0.1.1:500"), sa("10.0.1.2:500"), b"x") {
            n += 1;
            assert!(n <= tern_nodes::state::IKE_QUEUE, "the queue is bounded");
        }
        assert_eq!(n, tern_nodes::state::IKE_QUEUE);
        assert!(sh.ip_inject.pop().is_some());
        assert!(u.send(sa("10.0.1.1:500"), sa("10.0.1.2:500"), b"x"), "room again");
    }

    #[test]
    fn recv_timeout_wakes_on_the_bell() {
        let sh = shared();
        let u = EngineUdp::new(&sh, None);
        let (rx, bell) = (Arc::clone(&sh.ike_rx), Arc::clone(&sh.ike_bell));
        let t = std::thread::spawn(move || {
            let d = IkeDatagram { local: sa("10.0.1.1:500"), remote: sa("10.0.1.2:500"), ifindex: 0, message: vec![1] };
            assert!(rx.push(d).is_ok());
            bell.ring();
        });
        let mut out = Vec::new();
        // Long enough never to be what ends the wait on a loaded machine:
        // the datagram (queued before or after the park) ends it.
        while out.is_empty() {
            u.recv_timeout(&mut out, Duration::from_secs(60));
        }
        t.join().expect("producer");
        assert_eq!(out, vec![(sa("10.0.1.1:500"), sa("10.0.1.2:500"), vec![1])]);
        assert_eq!(u.stats().received, 1);
    }
}
