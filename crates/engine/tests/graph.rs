//! The engine with toy nodes and an in-memory port.

use std::collections::VecDeque;
use std::sync::Arc;
use tern_engine::graph::{ERR_BAD_NEXT, ERR_GRAPH_LOOP};
use tern_engine::{
    Cx, ErrorDesc, GraphBuilder, GraphError, IdlePolicy, NEXT_TAKEN, Node, PortBinding, TraceShared, Worker,
    WorkerConfig,
};
use tern_packet::{PacketPool, PktIdx, PoolConfig, Port, PortStats, TxOutcome};

/// Sends even-first-byte packets to "tx", odd ones to drop (counted as "odd"),
/// byte 0xff to a looping pair, byte 0xfe to an invalid next index.
struct Split;
impl Node for Split {
    fn name(&self) -> &'static str {
        "split"
    }
    fn nexts(&self) -> &'static [&'static str] {
        &["drop", "tx", "loop-a"]
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        const E: &[ErrorDesc] = &[ErrorDesc::drop("odd", "first byte is odd"), ErrorDesc::info("seen", "packets seen")];
        E
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        cx.count(1u16, pkts.len() as u64);
        for (i, &p) in pkts.iter().enumerate() {
            let b = cx.pool.data(p)[0];
            cx.trace_note(p, || format!("first byte {b}"));
            next[i] = match b {
                0xff => 2,
                0xfe => 9,
                b if b % 2 == 1 => cx.drop(p, 0u16),
                _ => 1,
            };
        }
    }
}

struct Loop(&'static str, &'static [&'static str]);
impl Node for Loop {
    fn name(&self) -> &'static str {
        self.0
    }
    fn nexts(&self) -> &'static [&'static str] {
        self.1
    }
    fn process(&mut self, _cx: &mut Cx<'_>, _pkts: &[PktIdx], next: &mut [u16]) {
        next.fill(1);
    }
}

/// Queues every packet on port 0.
struct Tx;
impl Node for Tx {
    fn name(&self) -> &'static str {
        "tx"
    }
    fn nexts(&self) -> &'static [&'static str] {
        &["drop"]
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        cx.tx[0].extend_from_slice(pkts);
        next.fill(NEXT_TAKEN);
    }
}

type Sent = Arc<std::sync::Mutex<Vec<Vec<u8>>>>;

#[derive(Default)]
struct VecPort {
    rx: VecDeque<Vec<u8>>,
    sent: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    stats: PortStats,
}
impl Port for VecPort {
    fn name(&self) -> &str {
        "vec0"
    }
    fn rx_burst(&mut self, pool: &mut PacketPool, out: &mut Vec<PktIdx>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(f) = self.rx.pop_front() else { break };
            let Some(p) = pool.alloc_from(&f) else { break };
            out.push(p);
            n += 1;
        }
        n
    }
    fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome {
        let mut sent = self.sent.lock().expect("lock");
        for &p in pkts {
            sent.push(pool.data(p).to_vec());
            pool.free(p);
        }
        self.stats.tx_packets += pkts.len() as u64;
        TxOutcome { sent: pkts.len(), dropped: 0 }
    }
    fn stats(&self) -> PortStats {
        self.stats
    }
}

fn graph() -> tern_engine::Graph {
    let mut b = GraphBuilder::new();
    b.add(Split);
    b.add(Loop("loop-a", &["drop", "loop-b"]));
    b.add(Loop("loop-b", &["drop", "loop-a"]));
    b.add(Tx);
    b.build().expect("graph")
}

#[test]
fn builder_rejects_bad_graphs() {
    let mut b = GraphBuilder::new();
    b.add(Loop("a", &["drop", "nowhere"]));
    assert!(matches!(b.build(), Err(GraphError::UnknownNext { node: "a", next: "nowhere" })));
    let mut b = GraphBuilder::new();
    b.add(Loop("a", &["a"]));
    assert!(matches!(b.build(), Err(GraphError::FirstNextNotDrop("a"))));
    let mut b = GraphBuilder::new();
    b.add(Loop("a", &["drop"]));
    b.add(Loop("a", &["drop"]));
    assert!(matches!(b.build(), Err(GraphError::DuplicateNode("a"))));
}

fn worker_with(frames: Vec<Vec<u8>>) -> (Worker, Sent, Arc<TraceShared>) {
    let g = graph();
    let input = g.node_id("split").expect("split");
    let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
    let port = VecPort { rx: frames.into(), ..VecPort::default() };
    let sent = Arc::clone(&port.sent);
    let trace = TraceShared::new();
    let w = Worker::new(
        WorkerConfig { id: 0, cpu: None, idle: IdlePolicy::Spin, input_node: input },
        g,
        pool,
        vec![PortBinding::new(Box::new(port), 3)],
        Arc::clone(&trace),
        None,
    )
    .expect("worker");
    (w, sent, trace)
}

#[test]
fn packets_reach_their_next_nodes_and_every_drop_is_counted() {
    // 600 packets: more than two batches, so the graph splits the input.
    let frames: Vec<Vec<u8>> = (0..600u32).map(|i| vec![(i % 4) as u8, 1, 2, 3]).collect();
    let (mut w, sent, _) = worker_with(frames);
    let start_free = w.pool().available();
    let mut got = 0;
    while got < 600 {
        let n = w.run_once();
        assert!(n > 0, "port ran dry early");
        got += n;
    }
    assert_eq!(sent.lock().expect("lock").len(), 300, "even packets transmitted");
    assert!(sent.lock().expect("lock").iter().all(|f| f[0] % 2 == 0));
    let info = Arc::clone(&w.shared().graph);
    let s = w.shared().stats.snapshot();
    let odd = info.error_id("split", "odd").expect("odd") as usize;
    let seen = info.error_id("split", "seen").expect("seen") as usize;
    assert_eq!(s.errors[odd], 300);
    assert_eq!(s.errors[seen], 600);
    let split = info.node_id("split").expect("id") as usize;
    assert_eq!(s.nodes[split][1], 600);
    assert!(s.nodes[split][0] >= 3, "600 packets need at least 3 calls of 256");
    assert_eq!(s.ports[0].rx_packets, 600);
    assert_eq!(s.ports[0].tx_packets, 300);
    assert_eq!(w.pool().available(), start_free, "no buffer leaked");
}

#[test]
fn loops_and_bad_nexts_are_dropped_with_reasons() {
    let (mut w, sent, _) = worker_with(vec![vec![0xff], vec![0xfe], vec![2]]);
    let free = w.pool().available();
    w.run_once();
    let s = w.shared().stats.snapshot();
    assert_eq!(s.errors[ERR_GRAPH_LOOP as usize], 1);
    assert_eq!(s.errors[ERR_BAD_NEXT as usize], 1);
    assert_eq!(sent.lock().expect("lock").len(), 1);
    assert_eq!(w.pool().available(), free);
}

#[test]
fn trace_records_path_notes_and_fate() {
    let (mut w, _sent, trace) = worker_with(vec![vec![2, 0], vec![3, 0], vec![4, 0]]);
    trace.arm(2);
    w.run_once();
    let mut recs = trace.take();
    recs.sort_by_key(|r| r.seq);
    assert_eq!(recs.len(), 2, "only the budget is traced");
    assert_eq!(recs[0].rx_if, 3);
    assert_eq!(recs[0].hops[0].node, "split");
    assert_eq!(recs[0].hops[0].next, "tx");
    assert_eq!(recs[0].hops[0].notes, vec!["first byte 2".to_string()]);
    assert_eq!(recs[0].fate, "tx vec0");
    assert_eq!(recs[1].fate, "drop: split/odd");
    assert_eq!(trace.remaining(), 0);
}

#[test]
fn dot_lists_every_edge() {
    let g = graph();
    let dot = g.info().to_dot();
    assert!(dot.contains("\"split\" -> \"tx\""));
    assert!(dot.contains("\"loop-a\" -> \"loop-b\""));
    assert!(dot.starts_with("digraph"));
}

#[test]
fn spawned_worker_stops_on_request() {
    let (w, _sent, _) = worker_with(vec![vec![2]]);
    let h = w.spawn().expect("spawn");
    let shared = Arc::clone(&h.shared);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while shared.stats.snapshot().ports[0].tx_packets == 0 {
        assert!(std::time::Instant::now() < deadline, "worker never transmitted");
        std::thread::yield_now();
    }
    h.stop();
}
