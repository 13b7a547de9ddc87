//! Memory ports: packet I/O without a device, for tests and the engine
//! benchmark.
//!
//! Three shapes, all implementing [`Port`]:
//!
//! * [`MemPort::new`]: frames given to [`MemPort::inject`] are received;
//!   transmitted frames are kept until [`MemPort::take_sent`].
//! * [`MemPort::pair`]: two connected ports; what one transmits the other
//!   receives (multi-node tests, two tern instances back to back).
//! * [`MemPort::generator`]: receive cycles through template frames (forever
//!   or N frames); transmit counts and frees. The engine benchmark measures
//!   the engine, so receive costs one buffer allocation and one copy of the
//!   template per packet, and nothing else.
//!
//! Queues are bounded ([`DEFAULT_QUEUE_FRAMES`], see
//! [`MemPort::set_queue_capacity`]): a transmit into a full queue drops and
//! counts, as a device would. Queue buffers are recycled, so a steady stream
//! allocates nothing. A [`MemHandle`] lets another thread inject and collect
//! while the port itself belongs to a worker.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tern_packet::{PacketPool, PktIdx, Port, PortStats, TxOutcome};

/// Default bound of a memory queue, in frames.
pub const DEFAULT_QUEUE_FRAMES: usize = 65536;

/// A bounded FIFO of frames with recycled buffers.
#[derive(Debug)]
struct Queue {
    frames: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    capacity: usize,
}

impl Queue {
    fn new() -> Arc<Mutex<Queue>> {
        Arc::new(Mutex::new(Queue { frames: VecDeque::new(), spare: Vec::new(), capacity: DEFAULT_QUEUE_FRAMES }))
    }

    /// Appends a copy of `frame`; false when the queue is full.
    fn push(&mut self, frame: &[u8]) -> bool {
        if self.frames.len() >= self.capacity {
            return false;
        }
        let mut v = self.spare.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(frame);
        self.frames.push_back(v);
        true
    }
}

/// Locks a queue. A queue holds plain frames and every critical section is
/// a few statements that cannot leave it half-updated, so a lock poisoned
/// by a panicking test thread is still consistent and is used as is.
fn lock(q: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    q.lock().unwrap_or_else(|p| p.into_inner())
}

/// Template frames laid out back to back.
#[derive(Debug)]
struct Generator {
    bytes: Vec<u8>,
    /// (start, len) of each template in `bytes`.
    frames: Vec<(usize, usize)>,
    next: usize,
    /// Frames left to generate; `None`: endless.
    remaining: Option<u64>,
}

#[derive(Debug)]
enum Rx {
    Queue(Arc<Mutex<Queue>>),
    Gen(Generator),
}

#[derive(Debug)]
enum Tx {
    /// Kept for `take_sent` (own queue) or received by the peer.
    Queue { q: Arc<Mutex<Queue>>, peer: bool },
    /// Counted and freed.
    Count,
}

/// A port backed by memory. See the module documentation.
#[derive(Debug)]
pub struct MemPort {
    name: String,
    rx: Rx,
    tx: Tx,
    stats: PortStats,
}

impl MemPort {
    /// A port that receives injected frames and keeps what it transmits.
    pub fn new(name: impl Into<String>) -> MemPort {
        MemPort {
            name: name.into(),
            rx: Rx::Queue(Queue::new()),
            tx: Tx::Queue { q: Queue::new(), peer: false },
            stats: PortStats::default(),
        }
    }

    /// Two connected ports: what `a` transmits `b` receives and back.
    pub fn pair(a: impl Into<String>, b: impl Into<String>) -> (MemPort, MemPort) {
        let (ab, ba) = (Queue::new(), Queue::new());
        let pa = MemPort {
            name: a.into(),
            rx: Rx::Queue(ba.clone()),
            tx: Tx::Queue { q: ab.clone(), peer: true },
            stats: PortStats::default(),
        };
        let pb = MemPort {
            name: b.into(),
            rx: Rx::Queue(ab),
            tx: Tx::Queue { q: ba, peer: true },
            stats: PortStats::default(),
        };
        (pa, pb)
    }

    /// A traffic generator: each received packet is the next of `templates`
    /// (cycling), `count` packets in all (`None`: endless). Transmitted
    /// packets are counted and freed. `None` when `templates` is empty, a
    /// template is empty or longer than 65535 bytes.
    pub fn generator<T: AsRef<[u8]>>(name: impl Into<String>, templates: &[T], count: Option<u64>) -> Option<MemPort> {
        if templates.is_empty() {
            return None;
        }
        let mut bytes = Vec::new();
        let mut frames = Vec::with_capacity(templates.len());
        for t in templates {
            let t = t.as_ref();
            if t.is_empty() || t.len() > usize::from(u16::MAX) {
                return None;
            }
            frames.push((bytes.len(), t.len()));
            bytes.extend_from_slice(t);
            // Pad to whole 64-byte chunks: receive copies fixed-size chunks
            // (inlined vector moves) instead of calling memmove.
            bytes.resize(bytes.len().next_multiple_of(COPY_CHUNK), 0);
        }
        Some(MemPort {
            name: name.into(),
            rx: Rx::Gen(Generator { bytes, frames, next: 0, remaining: count }),
            tx: Tx::Count,
            stats: PortStats::default(),
        })
    }

    /// Makes transmit count and free packets instead of keeping them (a
    /// sink for benchmarks).
    pub fn count_tx_only(&mut self) {
        self.tx = Tx::Count;
    }

    /// Bounds this port's receive queue and (unless it belongs to a peer)
    /// its transmit queue to `frames` frames. A full receive queue refuses
    /// injections (and a peer's transmissions); a full transmit queue drops
    /// and counts.
    pub fn set_queue_capacity(&mut self, frames: usize) {
        if let Rx::Queue(q) = &self.rx {
            lock(q).capacity = frames;
        }
        if let Tx::Queue { q, peer: false } = &self.tx {
            lock(q).capacity = frames;
        }
    }

    /// Queues a frame for reception. False when the receive queue is full
    /// or this port is a generator.
    pub fn inject(&mut self, frame: &[u8]) -> bool {
        match &self.rx {
            Rx::Queue(q) => lock(q).push(frame),
            Rx::Gen(_) => false,
        }
    }

    /// Transmitted frames not yet taken, oldest first. Always empty for a
    /// generator, a counting port, or a port of a pair (its frames went to
    /// the peer).
    pub fn take_sent(&mut self) -> Vec<Vec<u8>> {
        self.handle().take_sent()
    }

    /// Frames waiting to be received.
    pub fn pending_rx(&self) -> usize {
        match &self.rx {
            Rx::Queue(q) => lock(q).frames.len(),
            Rx::Gen(g) => g.remaining.map_or(usize::MAX, |r| usize::try_from(r).unwrap_or(usize::MAX)),
        }
    }

    /// A handle to inject and collect frames from another thread while a
    /// worker owns the port.
    pub fn handle(&self) -> MemHandle {
        MemHandle {
            rx: match &self.rx {
                Rx::Queue(q) => Some(q.clone()),
                Rx::Gen(_) => None,
            },
            sent: match &self.tx {
                Tx::Queue { q, peer: false } => Some(q.clone()),
                _ => None,
            },
        }
    }

    fn rx_queue(&mut self, q: &Mutex<Queue>, pool: &mut PacketPool, out: &mut Vec<PktIdx>, max: usize) -> usize {
        let room = (pool.frame_size() - u32::from(pool.headroom())) as usize;
        let mut q = lock(q);
        let mut n = 0;
        while n < max {
            let Some(len) = q.frames.front().map(Vec::len) else {
                break;
            };
            if len > room || len == 0 {
                // Cannot be stored: a real device would drop it too.
                if let Some(f) = q.frames.pop_front() {
                    q.spare.push(f);
                }
                self.stats.rx_dropped += 1;
                continue;
            }
            let idx = match q.frames.front().and_then(|f| pool.alloc_from(f)) {
                Some(i) => i,
                // No buffer: leave the frame queued (back-pressure), like a
                // NIC ring that is not refilled.
                None => break,
            };
            if let Some(f) = q.frames.pop_front() {
                q.spare.push(f);
            }
            out.push(idx);
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
            n += 1;
        }
        n
    }
}

/// Templates are copied in chunks of this many bytes.
const COPY_CHUNK: usize = 64;

/// A new buffer holding the first `len` bytes of `padded` (a template
/// padded to whole chunks). The copy may write up to 63 bytes past `len`
/// into the buffer's tailroom, which nobody reads.
#[inline]
fn copy_template(pool: &mut PacketPool, padded: Option<&[u8]>, len: usize) -> Option<PktIdx> {
    let src = padded?;
    let head = usize::from(pool.headroom());
    if head + src.len() > pool.frame_size() as usize {
        return pool.alloc_from(src.get(..len)?);
    }
    let idx = pool.alloc_len(len)?;
    // Cannot fail: the padded template fits after the headroom (above).
    let Some(dst) = pool.frame_mut(idx).get_mut(head..head + src.len()) else { return Some(idx) };
    // A minimum-size frame is one chunk: one fixed-size copy, no loop.
    if let (Some(d), Some(s)) = (dst.first_chunk_mut::<COPY_CHUNK>(), src.first_chunk::<COPY_CHUNK>())
        && src.len() == COPY_CHUNK
    {
        *d = *s;
        return Some(idx);
    }
    for (d, s) in dst.chunks_exact_mut(COPY_CHUNK).zip(src.chunks_exact(COPY_CHUNK)) {
        if let (Ok(d), Ok(s)) = (<&mut [u8; COPY_CHUNK]>::try_from(d), <&[u8; COPY_CHUNK]>::try_from(s)) {
            *d = *s;
        }
    }
    Some(idx)
}

/// Generates up to `max` packets; a free function so it can borrow the
/// generator and the stats of one port at once.
fn rx_gen(g: &mut Generator, stats: &mut PortStats, pool: &mut PacketPool, out: &mut Vec<PktIdx>, max: usize) -> usize {
    let room = (pool.frame_size() - u32::from(pool.headroom())) as usize;
    let want = match g.remaining {
        Some(r) => max.min(usize::try_from(r).unwrap_or(usize::MAX)),
        None => max,
    };
    let (mut delivered, mut consumed) = (0, 0);
    while consumed < want {
        let (start, len) = g.frames.get(g.next).copied().unwrap_or((0, 0));
        if len > room {
            // The pool can never hold this template: count it as a device
            // would count a frame longer than its buffers.
            stats.rx_dropped += 1;
        } else {
            let Some(idx) = copy_template(pool, g.bytes.get(start..start + len.next_multiple_of(COPY_CHUNK)), len)
            else {
                break; // no buffer: generate the rest next time
            };
            out.push(idx);
            stats.rx_bytes += len as u64;
            delivered += 1;
        }
        consumed += 1;
        g.next += 1;
        if g.next >= g.frames.len() {
            g.next = 0;
        }
    }
    stats.rx_packets += delivered as u64;
    if let Some(r) = &mut g.remaining {
        *r -= consumed as u64;
    }
    delivered
}

impl Port for MemPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, out: &mut Vec<PktIdx>, max: usize) -> usize {
        match &mut self.rx {
            Rx::Gen(g) => rx_gen(g, &mut self.stats, pool, out, max),
            Rx::Queue(q) => {
                let q = q.clone();
                self.rx_queue(&q, pool, out, max)
            }
        }
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome {
        let mut sent = 0;
        match &self.tx {
            Tx::Count => {
                for &p in pkts {
                    self.stats.tx_bytes += u64::from(pool.meta(p).len);
                }
                sent = pkts.len();
            }
            Tx::Queue { q, .. } => {
                let mut q = lock(q);
                for &p in pkts {
                    let data = pool.data(p);
                    if q.push(data) {
                        self.stats.tx_bytes += data.len() as u64;
                        sent += 1;
                    }
                }
            }
        }
        pool.free_all(pkts);
        let dropped = pkts.len() - sent;
        self.stats.tx_packets += sent as u64;
        self.stats.tx_dropped += dropped as u64;
        TxOutcome { sent, dropped }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Injects into and collects from a [`MemPort`] owned by another thread.
#[derive(Clone, Debug)]
pub struct MemHandle {
    rx: Option<Arc<Mutex<Queue>>>,
    sent: Option<Arc<Mutex<Queue>>>,
}

impl MemHandle {
    /// Queues a frame for the port to receive; false when its queue is full
    /// or it is a generator.
    pub fn inject(&self, frame: &[u8]) -> bool {
        self.rx.as_ref().is_some_and(|q| lock(q).push(frame))
    }

    /// Queues several frames at once: the port receives all of them or,
    /// when they do not all fit, none (returns false). A worker polling
    /// meanwhile sees them together, which makes batching reproducible.
    pub fn inject_all<T: AsRef<[u8]>>(&self, frames: &[T]) -> bool {
        let Some(q) = self.rx.as_ref() else { return false };
        let mut q = lock(q);
        if q.frames.len() + frames.len() > q.capacity {
            return false;
        }
        frames.iter().all(|f| q.push(f.as_ref()))
    }

    /// Frames the port transmitted and nobody took yet, oldest first.
    pub fn take_sent(&self) -> Vec<Vec<u8>> {
        match &self.sent {
            Some(q) => lock(q).frames.drain(..).collect(),
            None => Vec::new(),
        }
    }

    /// Number of transmitted frames waiting in the queue.
    pub fn sent_len(&self) -> usize {
        self.sent.as_ref().map_or(0, |q| lock(q).frames.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_packet::PoolConfig;

    fn pool(frames: u32) -> PacketPool {
        PacketPool::new(PoolConfig { frames, ..PoolConfig::default() }).expect("pool")
    }

    #[test]
    fn injected_frames_are_received_in_order_after_the_headroom() {
        let mut p = pool(16);
        let mut port = MemPort::new("m0");
        assert!(port.inject(&[1, 2, 3]));
        assert!(port.inject(&[4, 5]));
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut p, &mut out, 32), 2);
        assert_eq!(p.data(out[0]), &[1, 2, 3]);
        assert_eq!(p.data(out[1]), &[4, 5]);
        assert_eq!(p.meta(out[0]).off, p.headroom());
        let s = port.stats();
        assert_eq!((s.rx_packets, s.rx_bytes), (2, 5));
        assert_eq!(port.rx_burst(&mut p, &mut out, 32), 0);
    }

    #[test]
    fn rx_respects_max_and_keeps_the_rest() {
        let mut p = pool(16);
        let mut port = MemPort::new("m0");
        for i in 0..5u8 {
            port.inject(&[i]);
        }
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut p, &mut out, 3), 3);
        assert_eq!(port.pending_rx(), 2);
        assert_eq!(port.rx_burst(&mut p, &mut out, 3), 2);
        let got: Vec<u8> = out.iter().map(|&i| p.data(i)[0]).collect();
        assert_eq!(got, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn empty_pool_leaves_frames_queued_and_counts_no_drop() {
        let mut p = pool(1);
        let mut port = MemPort::new("m0");
        port.inject(&[1]);
        port.inject(&[2]);
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut p, &mut out, 8), 1);
        assert_eq!(port.stats().rx_dropped, 0);
        assert_eq!(port.pending_rx(), 1);
        p.free_all(&out);
        out.clear();
        assert_eq!(port.rx_burst(&mut p, &mut out, 8), 1);
        assert_eq!(p.data(out[0]), &[2]);
    }

    #[test]
    fn oversized_injection_is_dropped_and_counted() {
        let mut p = pool(4);
        let mut port = MemPort::new("m0");
        let room = (p.frame_size() - u32::from(p.headroom())) as usize;
        port.inject(&vec![7; room + 1]);
        port.inject(&vec![8; room]);
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut p, &mut out, 8), 1);
        assert_eq!(p.data(out[0]).len(), room);
        assert_eq!(port.stats().rx_dropped, 1);
    }

    #[test]
    fn transmitted_frames_are_collected_and_buffers_freed() {
        let mut p = pool(4);
        let mut port = MemPort::new("m0");
        let a = p.alloc_from(b"abc").expect("buf");
        let b = p.alloc_from(b"de").expect("buf");
        let o = port.tx_burst(&mut p, &[a, b]);
        assert_eq!(o, TxOutcome { sent: 2, dropped: 0 });
        assert_eq!(p.available(), 4);
        assert_eq!(port.take_sent(), vec![b"abc".to_vec(), b"de".to_vec()]);
        assert!(port.take_sent().is_empty());
        let s = port.stats();
        assert_eq!((s.tx_packets, s.tx_bytes), (2, 5));
    }

    #[test]
    fn full_tx_queue_drops_counts_and_frees() {
        let mut p = pool(8);
        let mut port = MemPort::new("m0");
        port.set_queue_capacity(2);
        let pkts: Vec<_> = (0..5u8).map(|i| p.alloc_from(&[i]).expect("buf")).collect();
        let o = port.tx_burst(&mut p, &pkts);
        assert_eq!(o, TxOutcome { sent: 2, dropped: 3 });
        assert_eq!(p.available(), 8);
        assert_eq!(port.stats().tx_dropped, 3);
        assert_eq!(port.take_sent(), vec![vec![0], vec![1]]);
    }

    #[test]
    fn pair_delivers_both_ways() {
        let mut pa = pool(8);
        let mut pb = pool(8);
        let (mut a, mut b) = MemPort::pair("a", "b");
        let x = pa.alloc_from(b"ping").expect("buf");
        assert_eq!(a.tx_burst(&mut pa, &[x]).sent, 1);
        assert!(a.take_sent().is_empty(), "a pair's frames go to the peer");
        let mut out = Vec::new();
        assert_eq!(b.rx_burst(&mut pb, &mut out, 8), 1);
        assert_eq!(pb.data(out[0]), b"ping");
        assert_eq!(b.tx_burst(&mut pb, &out).sent, 1);
        out.clear();
        assert_eq!(a.rx_burst(&mut pa, &mut out, 8), 1);
        assert_eq!(pa.data(out[0]), b"ping");
        assert_eq!(b.rx_burst(&mut pb, &mut out, 8), 0, "nothing loops back");
    }

    #[test]
    fn generator_cycles_templates_and_stops_after_count() {
        let mut p = pool(64);
        let mut g = MemPort::generator("gen", &[vec![1u8; 64], vec![2u8; 60]], Some(5)).expect("gen");
        let mut out = Vec::new();
        assert_eq!(g.rx_burst(&mut p, &mut out, 3), 3);
        assert_eq!(g.rx_burst(&mut p, &mut out, 8), 2);
        assert_eq!(g.rx_burst(&mut p, &mut out, 8), 0);
        let firsts: Vec<(u8, usize)> = out.iter().map(|&i| (p.data(i)[0], p.data(i).len())).collect();
        assert_eq!(firsts, [(1, 64), (2, 60), (1, 64), (2, 60), (1, 64)]);
        assert_eq!(g.stats().rx_bytes, 64 * 3 + 60 * 2);
        let o = g.tx_burst(&mut p, &out);
        assert_eq!(o.sent, 5);
        assert_eq!(p.available(), 64);
        assert_eq!(g.stats().tx_bytes, 64 * 3 + 60 * 2);
    }

    #[test]
    fn endless_generator_is_bounded_by_max_and_pool() {
        let mut p = pool(10);
        let mut g = MemPort::generator("gen", &[[0u8; 64]], None).expect("gen");
        let mut out = Vec::new();
        assert_eq!(g.rx_burst(&mut p, &mut out, 4), 4);
        assert_eq!(g.rx_burst(&mut p, &mut out, 256), 6, "limited by free buffers");
        assert!(!g.inject(&[1]));
    }

    #[test]
    fn generator_counts_templates_the_pool_cannot_hold() {
        let mut p = pool(8);
        let big = vec![0u8; p.frame_size() as usize];
        let mut g = MemPort::generator("gen", &[big, vec![1u8; 64]], Some(4)).expect("gen");
        let mut out = Vec::new();
        assert_eq!(g.rx_burst(&mut p, &mut out, 8), 2);
        assert_eq!(g.stats().rx_dropped, 2);
        assert_eq!(g.rx_burst(&mut p, &mut out, 8), 0, "count reached");
    }

    #[test]
    fn generator_refuses_bad_templates() {
        assert!(MemPort::generator::<Vec<u8>>("g", &[], None).is_none());
        assert!(MemPort::generator("g", &[Vec::new()], None).is_none());
        assert!(MemPort::generator("g", &[vec![0; 70000]], None).is_none());
    }

    #[test]
    fn handle_works_from_another_thread() {
        let mut p = pool(8);
        let mut port = MemPort::new("m0");
        let h = port.handle();
        std::thread::spawn(move || assert!(h.inject(b"from afar"))).join().expect("thread");
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut p, &mut out, 8), 1);
        port.tx_burst(&mut p, &out);
        let h = port.handle();
        assert_eq!(h.sent_len(), 1);
        assert_eq!(std::thread::spawn(move || h.take_sent()).join().expect("thread"), vec![b"from afar".to_vec()]);
    }
}
