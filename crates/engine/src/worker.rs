//! The worker loop: poll ports, run the graph to completion, transmit.

use crate::clock;
use crate::graph::{Env, Graph, GraphInfo, NodeId};
use crate::stats::{WorkerStats, batch_bucket};
use crate::trace::{TraceShared, Tracer};
use rustix::event::{PollFd, PollFlags, Timespec};
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use tern_packet::{MAX_BATCH, PacketPool, PktIdx, Port, flags};

/// What a worker does when a loop found no packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdlePolicy {
    /// Keep polling the ports (busy polling; lowest latency, a full core).
    Spin,
    /// After `spins` empty loops, sleep in poll(2) on the ports' descriptors
    /// for at most `timeout_ms`.
    Sleep { spins: u32, timeout_ms: u32 },
}

impl Default for IdlePolicy {
    fn default() -> Self {
        IdlePolicy::Sleep { spins: 256, timeout_ms: 10 }
    }
}

#[derive(Clone, Debug)]
pub struct WorkerConfig {
    pub id: u16,
    /// CPU to pin the thread to.
    pub cpu: Option<usize>,
    pub idle: IdlePolicy,
    /// The node received packets enter (normally "ethernet-input").
    pub input_node: NodeId,
}

/// A port and the tern interface its packets arrive on. A worker's port
/// number k must be the same interface in every worker: nodes queue packets
/// for transmission on `Cx::tx[k]`.
pub struct PortBinding {
    pub port: Box<dyn Port>,
    pub ifindex: u16,
    /// The node this port's packets enter, when not the worker's
    /// `input_node` (a TAP carrying the kernel's frames of interface
    /// `ifindex` enters `tap-input`, not `ethernet-input`).
    pub input: Option<NodeId>,
}

impl PortBinding {
    /// A port whose packets enter the worker's input node.
    pub fn new(port: Box<dyn Port>, ifindex: u16) -> PortBinding {
        PortBinding { port, ifindex, input: None }
    }
}

/// Wakes a worker sleeping in poll(2).
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    fn new() -> std::io::Result<Waker> {
        let fd =
            rustix::event::eventfd(0, rustix::event::EventfdFlags::NONBLOCK | rustix::event::EventfdFlags::CLOEXEC)?;
        Ok(Waker { fd })
    }

    pub fn wake(&self) {
        // A full counter (EAGAIN) means a wake-up is already pending.
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }

    fn clear(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut b);
    }
}

/// Which way a captured frame went through its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureDir {
    Rx,
    Tx,
}

/// A copy of one frame taken by a [`CaptureTap`].
#[derive(Clone, Debug)]
pub struct CapturedFrame {
    /// [`clock::now_ns`] of the worker loop that saw it.
    pub t_ns: u64,
    /// The worker's port number.
    pub port: u16,
    pub dir: CaptureDir,
    /// Length on the wire; `data` may be shorter (snap length).
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// Frames a worker copies for `tern capture`: the rx and/or tx frames of
/// one port, into a bounded queue the control thread drains.
///
/// Zero cost when off: the worker reads one relaxed flag per loop; only
/// while a capture runs does it copy frames (one lock per port per batch).
/// A full queue drops the copy (counted), never the packet.
pub struct CaptureTap {
    on: AtomicBool,
    /// The worker's port number to copy.
    port: AtomicU32,
    /// Bit 0: received frames, bit 1: transmitted frames.
    dirs: AtomicU32,
    /// Graph node whose input packets to copy (u32::MAX: none).
    node: AtomicU32,
    snaplen: AtomicU32,
    capacity: usize,
    queue: Mutex<VecDeque<CapturedFrame>>,
    /// Copies not taken because the queue was full.
    pub dropped: AtomicU64,
}

/// [`CaptureTap::start`] direction bits.
pub const CAPTURE_RX: u32 = 1;
pub const CAPTURE_TX: u32 = 2;

impl CaptureTap {
    fn new(capacity: usize) -> CaptureTap {
        CaptureTap {
            on: AtomicBool::new(false),
            port: AtomicU32::new(u32::MAX),
            dirs: AtomicU32::new(0),
            node: AtomicU32::new(u32::MAX),
            snaplen: AtomicU32::new(u32::MAX),
            capacity,
            queue: Mutex::new(VecDeque::new()),
            dropped: AtomicU64::new(0),
        }
    }

    /// Starts copying the frames of port number `port` in the directions
    /// `dirs` (`CAPTURE_RX | CAPTURE_TX`), at most `snaplen` bytes each.
    pub fn start(&self, port: u16, dirs: u32, snaplen: u32) {
        self.node.store(u32::MAX, Ordering::Relaxed);
        self.port.store(u32::from(port), Ordering::Relaxed);
        self.dirs.store(dirs, Ordering::Relaxed);
        self.snaplen.store(snaplen.max(1), Ordering::Relaxed);
        self.on.store(true, Ordering::Release);
    }

    /// Starts copying the packets entering graph node `node` (as the node
    /// sees them: from the link-layer header, or from the IP header for
    /// packets inside tunnels), at most `snaplen` bytes each. Copies carry
    /// port number `u16::MAX`.
    pub fn start_node(&self, node: u16, snaplen: u32) {
        self.port.store(u32::MAX, Ordering::Relaxed);
        self.dirs.store(0, Ordering::Relaxed);
        self.node.store(u32::from(node), Ordering::Relaxed);
        self.snaplen.store(snaplen.max(1), Ordering::Relaxed);
        self.on.store(true, Ordering::Release);
    }

    /// The node being captured, if a node capture runs.
    #[inline]
    pub(crate) fn node(&self) -> Option<u16> {
        match self.node.load(Ordering::Relaxed) {
            u32::MAX => None,
            n => Some(n as u16),
        }
    }

    /// Stops copying; frames already queued stay until taken.
    pub fn stop(&self) {
        self.on.store(false, Ordering::Release);
        self.node.store(u32::MAX, Ordering::Relaxed);
    }

    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Takes every queued copy, oldest first.
    pub fn take(&self) -> Vec<CapturedFrame> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).drain(..).collect()
    }

    /// The directions wanted for port `k`, or 0.
    #[inline]
    fn wants(&self, k: usize) -> u32 {
        if self.port.load(Ordering::Relaxed) as usize == k { self.dirs.load(Ordering::Relaxed) } else { 0 }
    }

    pub(crate) fn copy(&self, pool: &PacketPool, pkts: &[PktIdx], port: usize, dir: CaptureDir, t_ns: u64) {
        let snap = self.snaplen.load(Ordering::Relaxed) as usize;
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        for &p in pkts {
            if q.len() >= self.capacity {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let data = pool.data(p);
            q.push_back(CapturedFrame {
                t_ns,
                port: port as u16,
                dir,
                orig_len: data.len() as u32,
                data: data[..data.len().min(snap)].to_vec(),
            });
        }
    }
}

/// Copies a capture tap queues before dropping new ones.
const CAPTURE_QUEUE: usize = 65536;

/// What the control side shares with a running worker.
pub struct WorkerShared {
    pub id: u16,
    pub stats: WorkerStats,
    pub graph: Arc<GraphInfo>,
    pub port_names: Vec<String>,
    pub port_ifindex: Vec<u16>,
    /// The input node of each port that does not enter the worker's
    /// (`PortBinding::input`); such ports are not the interface's own.
    pub port_input: Vec<Option<NodeId>>,
    pub trace: Arc<TraceShared>,
    /// `tern capture`'s hook on this worker's ports.
    pub capture: CaptureTap,
    stop: AtomicBool,
    waker: Waker,
}

impl WorkerShared {
    pub fn wake(&self) {
        self.waker.wake();
    }

    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.waker.wake();
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A forwarding worker: one thread, one graph, one pool, its ports.
pub struct Worker {
    cfg: WorkerConfig,
    graph: Graph,
    // Ports before the pool: fields drop in order, and a port (an AF_XDP
    // socket over the pool's region) must go before the region.
    ports: Vec<PortBinding>,
    pool: PacketPool,
    tx: Vec<Vec<PktIdx>>,
    tracer: Tracer,
    shared: Arc<WorkerShared>,
    rcu: Option<tern_rcu::Reader>,
    idle_loops: u32,
    started_ns: u64,
}

/// A running worker thread.
pub struct WorkerHandle {
    pub shared: Arc<WorkerShared>,
    join: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    /// Asks the worker to stop and waits for it.
    pub fn stop(mut self) {
        self.shared.request_stop();
        if let Some(j) = self.join.take()
            && j.join().is_err()
        {
            log::error!("worker {} panicked", self.shared.id);
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        if let Some(j) = self.join.take() {
            self.shared.request_stop();
            let _ = j.join();
        }
    }
}

impl Worker {
    pub fn new(
        cfg: WorkerConfig,
        graph: Graph,
        pool: PacketPool,
        ports: Vec<PortBinding>,
        trace: Arc<TraceShared>,
        rcu: Option<tern_rcu::Reader>,
    ) -> std::io::Result<Worker> {
        let stats = WorkerStats::new(graph.node_count(), graph.error_count(), ports.len());
        let shared = Arc::new(WorkerShared {
            id: cfg.id,
            stats,
            graph: Arc::clone(graph.info()),
            port_names: ports.iter().map(|b| b.port.name().to_string()).collect(),
            port_ifindex: ports.iter().map(|b| b.ifindex).collect(),
            port_input: ports.iter().map(|b| b.input).collect(),
            trace: Arc::clone(&trace),
            capture: CaptureTap::new(CAPTURE_QUEUE),
            stop: AtomicBool::new(false),
            waker: Waker::new()?,
        });
        let tx = (0..ports.len()).map(|_| Vec::with_capacity(2 * MAX_BATCH)).collect();
        Ok(Worker {
            tracer: Tracer::new(trace, cfg.id),
            cfg,
            graph,
            pool,
            ports,
            tx,
            shared,
            rcu,
            idle_loops: 0,
            started_ns: clock::now_ns(),
        })
    }

    pub fn shared(&self) -> &Arc<WorkerShared> {
        &self.shared
    }

    pub fn pool(&self) -> &PacketPool {
        &self.pool
    }

    pub fn pool_mut(&mut self) -> &mut PacketPool {
        &mut self.pool
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    pub fn ports_mut(&mut self) -> &mut [PortBinding] {
        &mut self.ports
    }

    /// Starts the worker on its own thread.
    pub fn spawn(self) -> std::io::Result<WorkerHandle> {
        let shared = Arc::clone(&self.shared);
        let name = format!("tern-w{}", self.cfg.id);
        let join = std::thread::Builder::new().name(name).spawn(move || self.run())?;
        Ok(WorkerHandle { shared, join: Some(join) })
    }

    /// Runs until asked to stop, on the calling thread.
    pub fn run(mut self) {
        if let Some(cpu) = self.cfg.cpu {
            let mut set = rustix::thread::CpuSet::new();
            set.set(cpu);
            if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
                log::warn!("worker {}: cannot pin to cpu {cpu}: {e}", self.cfg.id);
            }
        }
        log::info!("worker {} started with {} port(s)", self.cfg.id, self.ports.len());
        while !self.shared.stopping() {
            let n = self.run_once();
            if n == 0 && self.graph.pending() == 0 {
                self.idle();
            } else {
                self.idle_loops = 0;
            }
        }
        self.graph.flush_all(&mut self.pool);
        for q in &mut self.tx {
            self.pool.free_all(q);
            q.clear();
        }
        log::info!("worker {} stopped", self.cfg.id);
    }

    /// One loop: poll nodes, receive from every port, run the graph,
    /// transmit. Returns the number of packets received.
    pub fn run_once(&mut self) -> usize {
        let now_ns = clock::now_ns();
        if let Some(r) = &self.rcu {
            r.quiescent();
        }
        let stats = &self.shared.stats;
        {
            let mut env = Env {
                pool: &mut self.pool,
                stats,
                tx: &mut self.tx,
                tracer: &mut self.tracer,
                now_ns,
                worker: self.cfg.id,
                capture_node: None,
            };
            self.graph.poll(&mut env);
        }
        let input = self.cfg.input_node;
        let mut total = 0;
        let armed = self.tracer.armed();
        let capture = self.shared.capture.is_on();
        for (k, b) in self.ports.iter_mut().enumerate() {
            let q = self.graph.input_mut(b.input.unwrap_or(input));
            let start = q.len();
            let n = b.port.rx_burst(&mut self.pool, q, MAX_BATCH);
            if n == 0 {
                continue;
            }
            let mut bytes = 0u64;
            for &p in &q[start..] {
                let m = self.pool.meta_mut(p);
                m.rx_if = b.ifindex;
                bytes += u64::from(m.len);
            }
            if armed {
                for &p in &q[start..] {
                    self.tracer.start(&mut self.pool, p, b.ifindex, now_ns);
                }
            }
            if capture && self.shared.capture.wants(k) & CAPTURE_RX != 0 {
                self.shared.capture.copy(&self.pool, &q[start..], k, CaptureDir::Rx, now_ns);
            }
            let pc = &stats.ports[k];
            pc.rx_packets.add(n as u64);
            pc.rx_bytes.add(bytes);
            total += n;
        }
        if total > 0 {
            stats.looping.busy_loops.add(1);
            stats.looping.batch_hist[batch_bucket(total)].add(1);
        }
        if total > 0 || self.graph.pending() > 0 {
            let mut env = Env {
                pool: &mut self.pool,
                stats,
                tx: &mut self.tx,
                tracer: &mut self.tracer,
                now_ns,
                worker: self.cfg.id,
                capture_node: if capture {
                    self.shared.capture.node().map(|n| (n, &self.shared.capture))
                } else {
                    None
                },
            };
            self.graph.run(&mut env);
        }
        self.flush_tx(capture, now_ns);
        let stats = &self.shared.stats;
        for (k, b) in self.ports.iter_mut().enumerate() {
            b.port.service(&mut self.pool);
            if total > 0 || self.idle_loops == 0 {
                let s = b.port.stats();
                let pc = &stats.ports[k];
                pc.drv_rx_dropped.set(s.rx_dropped);
                pc.drv_errors.set(s.errors);
            }
        }
        stats.looping.loops.add(1);
        stats.looping.uptime_ns.set(now_ns.saturating_sub(self.started_ns));
        total
    }

    fn flush_tx(&mut self, capture: bool, now_ns: u64) {
        let stats = &self.shared.stats;
        for (k, q) in self.tx.iter_mut().enumerate() {
            if q.is_empty() {
                continue;
            }
            if capture && self.shared.capture.wants(k) & CAPTURE_TX != 0 {
                self.shared.capture.copy(&self.pool, q, k, CaptureDir::Tx, now_ns);
            }
            let mut bytes = 0u64;
            for &p in q.iter() {
                let m = self.pool.meta(p);
                bytes += u64::from(m.len);
                if m.flags & flags::TRACED != 0 {
                    let slot = m.trace;
                    self.tracer.finish(slot, format!("tx {}", self.shared.port_names[k]));
                }
            }
            let out = self.ports[k].port.tx_burst(&mut self.pool, q);
            let pc = &stats.ports[k];
            pc.tx_packets.add(out.sent as u64);
            pc.tx_dropped.add(out.dropped as u64);
            // Bytes are exact when nothing was refused; otherwise the
            // driver's own counters are the reference.
            if out.dropped == 0 {
                pc.tx_bytes.add(bytes);
            }
            q.clear();
        }
    }

    fn idle(&mut self) {
        let IdlePolicy::Sleep { spins, timeout_ms } = self.cfg.idle else {
            std::hint::spin_loop();
            return;
        };
        self.idle_loops += 1;
        if self.idle_loops < spins {
            std::hint::spin_loop();
            return;
        }
        let t0 = clock::now_ns();
        if let Some(r) = &self.rcu {
            r.offline();
        }
        {
            let mut fds: Vec<PollFd<'_>> = self
                .ports
                .iter()
                .filter_map(|b| b.port.wait_fd())
                .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
                .collect();
            fds.push(PollFd::new(&self.shared.waker.fd, PollFlags::IN));
            let ts =
                Timespec { tv_sec: i64::from(timeout_ms / 1000), tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000 };
            let _ = rustix::event::poll(&mut fds, Some(&ts));
        }
        self.shared.waker.clear();
        if let Some(r) = &self.rcu {
            r.online();
        }
        self.shared.stats.looping.idle_ns.add(clock::now_ns().saturating_sub(t0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cx, GraphBuilder, NEXT_TAKEN, Node};
    use tern_packet::{PoolConfig, PortStats, TxOutcome};

    /// Sends every packet back out of port 0 with its first byte incremented.
    struct Echo;
    impl Node for Echo {
        fn name(&self) -> &'static str {
            "echo"
        }
        fn nexts(&self) -> &'static [&'static str] {
            &["drop"]
        }
        fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
            for &p in pkts {
                if let Some(b) = cx.pool.data_mut(p).first_mut() {
                    *b = b.wrapping_add(1);
                }
            }
            cx.tx[0].extend_from_slice(pkts);
            next.fill(NEXT_TAKEN);
        }
    }

    #[derive(Default)]
    struct QueuePort {
        rx: VecDeque<Vec<u8>>,
    }
    impl Port for QueuePort {
        fn name(&self) -> &str {
            "q0"
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
            for &p in pkts {
                pool.free(p);
            }
            TxOutcome { sent: pkts.len(), dropped: 0 }
        }
        fn stats(&self) -> PortStats {
            PortStats::default()
        }
    }

    fn worker(frames: &[&[u8]]) -> Worker {
        let mut b = GraphBuilder::new();
        b.add(Echo);
        let g = b.build().expect("graph");
        let input = g.node_id("echo").expect("echo");
        let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
        let port = QueuePort { rx: frames.iter().map(|f| f.to_vec()).collect() };
        Worker::new(
            WorkerConfig { id: 0, cpu: None, idle: IdlePolicy::Spin, input_node: input },
            g,
            pool,
            vec![PortBinding::new(Box::new(port), 0)],
            TraceShared::new(),
            None,
        )
        .expect("worker")
    }

    #[test]
    fn capture_is_off_until_started_and_copies_rx_and_tx_frames() {
        let mut w = worker(&[&[1, 2, 3], &[5, 6, 7, 8]]);
        w.run_once();
        assert!(w.shared().capture.take().is_empty(), "nothing copied while off");

        let mut w = worker(&[&[1, 2, 3], &[5, 6, 7, 8]]);
        w.shared().capture.start(0, CAPTURE_RX | CAPTURE_TX, 2);
        w.run_once();
        let got = w.shared().capture.take();
        let seen: Vec<_> = got.iter().map(|f| (f.dir, f.orig_len, f.data.clone())).collect();
        assert_eq!(
            seen,
            vec![
                (CaptureDir::Rx, 3, vec![1, 2]),
                (CaptureDir::Rx, 4, vec![5, 6]),
                (CaptureDir::Tx, 3, vec![2, 2]),
                (CaptureDir::Tx, 4, vec![6, 6]),
            ],
            "rx as received, tx as sent, cut at the snap length"
        );
    }

    #[test]
    fn capture_of_another_port_or_direction_copies_nothing() {
        let mut w = worker(&[&[1]]);
        w.shared().capture.start(1, CAPTURE_RX | CAPTURE_TX, 100);
        w.run_once();
        assert!(w.shared().capture.take().is_empty());
        let mut w = worker(&[&[1]]);
        w.shared().capture.start(0, CAPTURE_TX, 100);
        w.run_once();
        let got = w.shared().capture.take();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].dir, CaptureDir::Tx);
        w.shared().capture.stop();
        assert!(!w.shared().capture.is_on());
    }

    #[test]
    fn a_full_capture_queue_drops_copies_not_packets() {
        let tap = CaptureTap::new(4);
        tap.start(0, CAPTURE_RX, 64);
        let mut pool = PacketPool::new(PoolConfig { frames: 64, ..PoolConfig::default() }).expect("pool");
        let pkts: Vec<_> = (0..10u8).map(|i| pool.alloc_from(&[i]).expect("buf")).collect();
        tap.copy(&pool, &pkts, 0, CaptureDir::Rx, 1);
        assert_eq!(tap.take().iter().map(|f| f.data[0]).collect::<Vec<_>>(), vec![0, 1, 2, 3], "oldest kept");
        assert_eq!(tap.dropped.load(Ordering::Relaxed), 6);
        assert_eq!(pool.data(pkts[9]), &[9], "the packets themselves are untouched");

        let frames: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i]).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let mut w = worker(&refs);
        w.shared().capture.start(0, CAPTURE_RX | CAPTURE_TX, 64);
        w.run_once();
        assert_eq!(w.shared().stats.ports[0].tx_packets.get(), 10, "forwarding unaffected by capture");
    }

    /// Sends every packet out of port 1 unchanged.
    struct ToPort1;
    impl Node for ToPort1 {
        fn name(&self) -> &'static str {
            "to-port1"
        }
        fn nexts(&self) -> &'static [&'static str] {
            &["drop"]
        }
        fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
            cx.tx[1].extend_from_slice(pkts);
            next.fill(NEXT_TAKEN);
        }
    }

    #[test]
    fn a_port_with_its_own_input_node_enters_there() {
        let mut b = GraphBuilder::new();
        b.add(Echo);
        b.add(ToPort1);
        let g = b.build().expect("graph");
        let echo = g.node_id("echo").expect("echo");
        let side = g.node_id("to-port1").expect("to-port1");
        let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
        let main = QueuePort { rx: [vec![1u8]].into() };
        let other = QueuePort { rx: [vec![7u8], vec![8u8]].into() };
        let mut w = Worker::new(
            WorkerConfig { id: 0, cpu: None, idle: IdlePolicy::Spin, input_node: echo },
            g,
            pool,
            vec![
                PortBinding::new(Box::new(main), 0),
                PortBinding { input: Some(side), ..PortBinding::new(Box::new(other), 0) },
            ],
            TraceShared::new(),
            None,
        )
        .expect("worker");
        assert_eq!(w.shared().port_input, vec![None, Some(side)]);
        w.shared().capture.start(1, CAPTURE_TX, 64);
        assert_eq!(w.run_once(), 3);
        let ports = &w.shared().stats.ports;
        assert_eq!((ports[0].tx_packets.get(), ports[1].tx_packets.get()), (1, 2));
        let sent: Vec<_> = w.shared().capture.take().into_iter().map(|f| f.data).collect();
        assert_eq!(sent, vec![vec![7], vec![8]], "the side port's packets went through to-port1 only, unchanged");
    }
}
