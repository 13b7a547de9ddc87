//! Engine cost of `ip4-reassembly` / `ip6-reassembly` per reassembled
//! datagram, on one core, no I/O: batches of fragments (an ESP-sized
//! datagram cut as a path MTU below the tunnel's cuts it) go through a
//! graph `reassembly -> sink`, against the same frames through `pass ->
//! sink` (copying the frames into buffers, the graph's dispatch); the
//! difference is the reassembly's.
//!
//!     cargo run --release -p tern-nodes --example reass_cost [DATAGRAMS]
//!
//! Prints, per case: ns per datagram and per fragment (median of 5 runs),
//! in the thread's CPU time (`/proc/thread-self/schedstat`), so that a
//! loaded machine stretches the wall clock but not the figure.

use tern_engine::graph::Env;
use tern_engine::trace::Tracer;
use tern_engine::{Cx, ErrorDesc, GraphBuilder, Node, PktIdx, TraceShared, WorkerStats};
use tern_nodes::reass::Reassembly;
use tern_nodes::reass::table::Limits;
use tern_packet::{PacketPool, PoolConfig};

/// Stands for `ip4-local`/`ip6-local`: drops what it gets, counted.
struct Sink(&'static str);

impl Node for Sink {
    fn name(&self) -> &'static str {
        self.0
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
            *o = cx.drop(p, 0u16);
        }
    }
}

/// The baseline's first node: every packet to the sink.
struct Pass(&'static [&'static str]);

impl Node for Pass {
    fn name(&self) -> &'static str {
        "pass"
    }
    fn nexts(&self) -> &'static [&'static str] {
        self.0
    }
    fn process(&mut self, _cx: &mut Cx<'_>, _pkts: &[PktIdx], next: &mut [u16]) {
        next.fill(1);
    }
}

/// `n` bytes of ESP-like payload, in a frame (Ethernet + IPv4 or IPv6 with
/// a fragment header) cut at payload multiples of `piece` bytes; id `id`.
fn fragments(v6: bool, id: u32, n: usize, piece: usize) -> Vec<Vec<u8>> {
    let payload: Vec<u8> = (0..n).map(|i| i as u8).collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < n {
        let end = (at + piece).min(n);
        let more = end < n;
        let part = &payload[at..end];
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        if v6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&((8 + part.len()) as u16).to_be_bytes());
            f.extend_from_slice(&[44, 64]);
            f.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            f.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            let fo = at as u16 | u16::from(more);
            f.extend_from_slice(&[50, 0]);
            f.extend_from_slice(&fo.to_be_bytes());
            f.extend_from_slice(&id.to_be_bytes());
        } else {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
            f.extend_from_slice(&((20 + part.len()) as u16).to_be_bytes());
            f.extend_from_slice(&(id as u16).to_be_bytes());
            let fl = (at / 8) as u16 | if more { 0x2000 } else { 0 };
            f.extend_from_slice(&fl.to_be_bytes());
            f.extend_from_slice(&[64, 50, 0, 0, 10, 0, 2, 2, 10, 0, 2, 1]);
        }
        f.extend_from_slice(part);
        out.push(f);
        at = end;
    }
    out
}

/// CPU time this thread has run, in ns.
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace().next().and_then(|v| v.parse().ok()).expect("run time")
}

/// CPU seconds to run `frames` (grouped in batches of 32) through a graph
/// whose input is the reassembly node (`reass`) or `pass`.
fn time(v6: bool, reass: bool, frames: &[Vec<u8>]) -> (f64, u64) {
    let local = if v6 { "ip6-local" } else { "ip4-local" };
    let mut b = GraphBuilder::new();
    let nexts: &'static [&'static str] = if v6 { &["drop", "ip6-local"] } else { &["drop", "ip4-local"] };
    let input = if reass { b.add(Reassembly::with_limits(v6, Limits::default())) } else { b.add(Pass(nexts)) };
    b.add(Sink(local));
    let mut g = b.build().expect("graph");
    let info = g.info().clone();
    let stats = WorkerStats::new(info.nodes.len(), info.errors.len(), 1);
    let mut tracer = Tracer::new(TraceShared::new(), 0);
    let mut pool = PacketPool::new(PoolConfig { frames: 4096, ..PoolConfig::default() }).expect("pool");
    let mut tx = vec![Vec::new()];
    let t = cpu_ns();
    let mut now = 1u64;
    for batch in frames.chunks(32) {
        for f in batch {
            let p = pool.alloc_from(f).expect("buffer");
            pool.meta_mut(p).l3_off = 14;
            g.input_mut(input).push(p);
        }
        now += 1000;
        let mut env = Env {
            pool: &mut pool,
            stats: &stats,
            tx: &mut tx,
            tracer: &mut tracer,
            now_ns: now,
            worker: 0,
            capture_node: None,
        };
        g.run(&mut env);
    }
    let secs = (cpu_ns() - t) as f64 / 1e9;
    let sunk = info.error_id(local, "sunk").map_or(0, |id| stats.errors[usize::from(id)].get());
    (secs, sunk)
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    println!("{n} datagrams a case; ns per datagram (per fragment), median of 5, less the pass-through baseline");
    for (v6, size, piece, what) in [
        (false, 1480, 1232, "IPv4, 1,480 B in 2 fragments (1,232 + 248)"),
        (false, 1480, 552, "IPv4, 1,480 B in 3 fragments of <= 552"),
        (true, 1480, 1232, "IPv6, 1,480 B in 2 fragments (1,232 + 248)"),
        (true, 1480, 552, "IPv6, 1,480 B in 3 fragments of <= 552"),
    ] {
        let per = fragments(v6, 0, size, piece).len();
        let frames: Vec<Vec<u8>> = (0..n as u32).flat_map(|id| fragments(v6, id % 60_000, size, piece)).collect();
        let mut diffs = Vec::new();
        for _ in 0..5 {
            let (tr, sunk) = time(v6, true, &frames);
            assert_eq!(sunk, n as u64, "every datagram reassembled");
            let (tp, _) = time(v6, false, &frames);
            diffs.push((tr - tp) * 1e9 / n as f64);
        }
        diffs.sort_by(f64::total_cmp);
        let d = diffs[2];
        println!("{what}: {d:.0} ns ({:.0} ns per fragment)", d / per as f64);
    }
}
