//! The reassembly nodes in a graph: fragments spread over two workers
//! meet at their datagram's owner; new limits are taken at the next
//! batch.

use super::testing::fragment;
use super::*;
use crate::state::{IfTable, Shared};
use std::sync::Mutex;
use tern_engine::graph::Env;
use tern_engine::trace::Tracer;
use tern_engine::{Graph, GraphBuilder, NodeId, TraceShared, WorkerStats};
use tern_fib::FibConfig;
use tern_packet::{PacketPool, PoolConfig};

/// Stands for `ip4-local`: keeps a copy of what reaches it, from L3.
struct Sink(Arc<Mutex<Vec<Vec<u8>>>>);

impl Node for Sink {
    fn name(&self) -> &'static str {
        "ip4-local"
    }
    fn nexts(&self) -> &'static [&'static str] {
        &["drop"]
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        const E: [ErrorDesc; 1] = [ErrorDesc::drop("sunk", "packets that reached the sink")];
        &E
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        for (o, &p) in next.iter_mut().zip(pkts) {
            let l3 = usize::from(cx.pool.meta(p).l3_off);
            let got = cx.pool.data(p).get(l3..).unwrap_or_default().to_vec();
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(got);
            *o = cx.drop(p, 0u16);
        }
    }
}

/// One worker: `ip4-reassembly -> ip4-local` with its pool and counters.
struct Lane {
    id: u16,
    graph: Graph,
    input: NodeId,
    pool: PacketPool,
    stats: WorkerStats,
    tracer: Tracer,
    got: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Lane {
    fn new(id: u16, node: Reassembly) -> Lane {
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut b = GraphBuilder::new();
        let input = b.add(node);
        b.add(Sink(got.clone()));
        let graph = b.build().expect("graph");
        let stats = WorkerStats::new(graph.node_count(), graph.error_count(), 1);
        let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
        Lane { id, graph, input, pool, stats, tracer: Tracer::new(TraceShared::new(), id), got }
    }

    /// One worker loop at `now`: the nodes' poll, then `frames` received.
    fn run(&mut self, frames: &[&[u8]], now: u64) {
        for f in frames {
            let p = self.pool.alloc_from(f).expect("buffer");
            self.pool.meta_mut(p).l3_off = 14;
            self.graph.input_mut(self.input).push(p);
        }
        let mut tx = vec![Vec::new()];
        let mut env = Env {
            pool: &mut self.pool,
            stats: &self.stats,
            tx: &mut tx,
            tracer: &mut self.tracer,
            now_ns: now,
            worker: self.id,
            capture_node: None,
        };
        self.graph.poll(&mut env);
        self.graph.run(&mut env);
    }

    fn counter(&self, name: &str) -> u64 {
        let info = self.graph.info();
        info.error_id("ip4-reassembly", name).map_or(0, |id| self.stats.errors[usize::from(id)].get())
    }

    fn got(&self) -> Vec<Vec<u8>> {
        self.got.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Buffers in use (all of them are freed or passed on).
    fn in_use(&self) -> usize {
        1024 - self.pool.available()
    }
}

/// An Ethernet frame with IPv4 ESP from 10.0.2.2 to 10.0.2.1, `n` bytes of
/// payload.
fn esp_frame(n: usize, seed: u8) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00, 0x45, 0];
    f.extend_from_slice(&((20 + n) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, 50, 0, 0, 10, 0, 2, 2, 10, 0, 2, 1]);
    f.extend((0..n).map(|i| (i as u8).wrapping_mul(seed)));
    f
}

/// Fragments of 40 datagrams, each cut in three and dealt to two workers
/// (first and last to one, the middle to the other, or the other way):
/// every datagram is reassembled once, at its owner, whole; each
/// fragment is counted once as `reassembled` and, when it was received
/// by the other worker, once as `handed-off`.
#[test]
fn fragments_spread_over_two_workers_meet_at_the_owner() {
    let h = Arc::new(Handoff::new(2));
    let mut lanes: Vec<Lane> = (0..2)
        .map(|w| Lane::new(w, Reassembly::with_limits(false, Limits::default()).with_handoff(h.clone())))
        .collect();
    let mut wanted = Vec::new();
    for id in 0..40u32 {
        let frame = esp_frame(1200, id as u8 | 1);
        wanted.push(frame[14 + 20..].to_vec());
        let frags = fragment(&frame, &[400, 800], 1000 + id);
        let (a, b) = (usize::from(id % 2 == 0), usize::from(id % 2 == 1));
        lanes[a].run(&[&frags[0]], 1000);
        lanes[b].run(&[&frags[1]], 1000);
        lanes[a].run(&[&frags[2]], 1000);
    }
    // The hand-offs of the last loop are taken in the next one.
    for l in &mut lanes {
        l.run(&[], 2000);
    }
    let mut got: Vec<Vec<u8>> = lanes.iter().flat_map(Lane::got).collect();
    assert_eq!(got.len(), 40, "every datagram once");
    for g in &got {
        assert_eq!(u16::from_be_bytes([g[2], g[3]]), 1220, "total length");
        assert_eq!(g[6..8], [0, 0], "no fragment fields left");
        assert_eq!(tern_wire::checksum::data(&g[..20]), 0xffff, "header checksum");
    }
    let mut payloads: Vec<Vec<u8>> = got.iter_mut().map(|g| g[20..].to_vec()).collect();
    payloads.sort();
    wanted.sort();
    assert_eq!(payloads, wanted);
    let sum = |name: &str| lanes.iter().map(|l| l.counter(name)).sum::<u64>();
    assert_eq!(sum("reassembled"), 120);
    assert_eq!(sum("datagrams"), 40);
    let handed = sum("handed-off");
    assert!((40..=80).contains(&handed), "each datagram has fragments on both workers: {handed}");
    assert!(lanes.iter().all(|l| l.got().len() < 40), "both workers own datagrams");
    assert_eq!(sum("handoff-full"), 0);
    for l in &lanes {
        assert_eq!(l.in_use(), 0, "worker {}: no buffer kept", l.id);
    }
}

/// One worker hands nothing off, whatever its number.
#[test]
fn one_worker_keeps_every_fragment() {
    let mut lane =
        Lane::new(3, Reassembly::with_limits(false, Limits::default()).with_handoff(Arc::new(Handoff::new(1))));
    let frags = fragment(&esp_frame(600, 3), &[304], 9);
    lane.run(&[&frags[1], &frags[0]], 1);
    assert_eq!(lane.got().len(), 1);
    assert_eq!(lane.counter("handed-off"), 0);
}

/// New limits published to the workers apply at the next batch and keep
/// what is held: a datagram under way still completes, a fragment past
/// the new `max_size` is dropped, and the smaller table evicts down to
/// its size.
#[test]
fn published_limits_apply_at_the_next_batch() {
    let (_fib, reader) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
    let shared = Shared::new(IfTable::default(), reader);
    let mut lane = Lane::new(0, Reassembly::new(&shared, false));
    let frags: Vec<Vec<Vec<u8>>> = (0..3).map(|i| fragment(&esp_frame(1200, 5), &[600], 20 + i)).collect();
    lane.run(&[&frags[0][0], &frags[1][0], &frags[2][0]], 1);
    assert!(lane.got().is_empty());
    let limits = Limits { datagrams: 2, max_size: 1000, ..Limits::default() };
    shared.params.publish(Params { reass: limits, ..Params::default() });
    // The oldest of three goes; the second completes (1,200 bytes, but it
    // was under way: its last fragment ends at 1,200 > 1,000, dropped).
    lane.run(&[&frags[1][1]], 2);
    assert_eq!(lane.counter("evicted"), 1, "down to two datagrams");
    assert_eq!(lane.counter("too-big"), 2, "the fragment past max_size, and the one held of its datagram");
    assert!(lane.got().is_empty());
    // A datagram within the new bound completes.
    let small = fragment(&esp_frame(800, 7), &[400], 30);
    lane.run(&[&small[0], &small[1]], 3);
    assert_eq!(lane.got().len(), 1);
    assert_eq!(lane.counter("reassembled"), 2);
}
