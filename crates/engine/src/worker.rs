//! The worker loop: poll ports, run the graph to completion, transmit.

use crate::clock;
use crate::graph::{Env, Graph, GraphInfo, NodeId};
use crate::stats::{Counter, WorkerStats, batch_bucket};
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
    /// for at most `timeout_ms`; after [`QUIET_SLEEPS`] sleeps in a row
    /// without a packet, for at most `long_timeout_ms` while every port is
    /// [settled](tern_packet::Port::settled) and has a descriptor and no
    /// node has a timer running ([`crate::Node::timers_pending`]). Packets
    /// and the control thread's wake-ups end either at once.
    Sleep { spins: u32, timeout_ms: u32, long_timeout_ms: u32 },
}

/// Sleeps without a packet before an idle worker takes the long timeout:
/// a worker with traffic now and then keeps the short one.
pub const QUIET_SLEEPS: u32 = 10;

impl Default for IdlePolicy {
    fn default() -> Self {
        IdlePolicy::Sleep { spins: 256, timeout_ms: 10, long_timeout_ms: 1000 }
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
    /// A tunnel capture (`start_tunnel`): the tunnel's interface index
    /// (u32::MAX: none), and the input nodes whose packets received on it
    /// are its received packets (`node` is then its encapsulation node,
    /// whose packets sent to it are its transmitted ones).
    tunnel: AtomicU32,
    tunnel_rx: [AtomicU32; 2],
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
            tunnel: AtomicU32::new(u32::MAX),
            tunnel_rx: [AtomicU32::new(u32::MAX), AtomicU32::new(u32::MAX)],
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
        self.tunnel.store(u32::MAX, Ordering::Relaxed);
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
        self.tunnel.store(u32::MAX, Ordering::Relaxed);
        self.node.store(u32::from(node), Ordering::Relaxed);
        self.snaplen.store(snaplen.max(1), Ordering::Relaxed);
        self.on.store(true, Ordering::Release);
    }

    /// Starts copying a tunnel interface's inner packets: those entering
    /// `encap` (the tunnel's encapsulation node) to be sent on interface
    /// `ifindex` as transmitted, those entering `inputs` (the IP input
    /// nodes) as received on it, in the directions `dirs`. The copies
    /// start at the inner IP header, so each gets an Ethernet header of
    /// zero addresses and the IP version's type (the capture file is
    /// Ethernet). Copies carry port number `u16::MAX`.
    pub fn start_tunnel(&self, encap: u16, inputs: [u16; 2], ifindex: u16, dirs: u32, snaplen: u32) {
        self.port.store(u32::MAX, Ordering::Relaxed);
        self.dirs.store(dirs, Ordering::Relaxed);
        self.tunnel.store(u32::from(ifindex), Ordering::Relaxed);
        for (slot, n) in self.tunnel_rx.iter().zip(inputs) {
            slot.store(u32::from(n), Ordering::Relaxed);
        }
        self.node.store(u32::from(encap), Ordering::Relaxed);
        self.snaplen.store(snaplen.max(1), Ordering::Relaxed);
        self.on.store(true, Ordering::Release);
    }

    /// Whether graph node `id`'s input is captured, and as which direction.
    #[inline]
    pub(crate) fn node_dir(&self, id: usize) -> Option<CaptureDir> {
        let tunnel = self.tunnel.load(Ordering::Relaxed) != u32::MAX;
        let dirs = self.dirs.load(Ordering::Relaxed);
        if self.node.load(Ordering::Relaxed) as usize == id {
            return match tunnel {
                false => Some(CaptureDir::Rx),
                true if dirs & CAPTURE_TX != 0 => Some(CaptureDir::Tx),
                true => None,
            };
        }
        (tunnel && dirs & CAPTURE_RX != 0 && self.tunnel_rx.iter().any(|n| n.load(Ordering::Relaxed) as usize == id))
            .then_some(CaptureDir::Rx)
    }

    /// Copies the packets of a node capture: all of them, or for a tunnel
    /// capture those sent (`Tx`) or received (`Rx`) on the tunnel, from
    /// their IP header under a made-up Ethernet header.
    pub(crate) fn copy_node(&self, pool: &PacketPool, pkts: &[PktIdx], dir: CaptureDir, t_ns: u64) {
        let tunnel = self.tunnel.load(Ordering::Relaxed);
        if tunnel == u32::MAX {
            self.copy(pool, pkts, usize::from(u16::MAX), dir, t_ns);
            return;
        }
        let snap = self.snaplen.load(Ordering::Relaxed) as usize;
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        for &p in pkts {
            let m = pool.meta(p);
            let on = match dir {
                CaptureDir::Tx => m.tx_if,
                CaptureDir::Rx => m.rx_if,
            };
            if u32::from(on) != tunnel {
                continue;
            }
            let ip = pool.data(p).get(usize::from(m.l3_off)..).unwrap_or_default();
            let ethertype: u16 = if ip.first().is_some_and(|b| b >> 4 == 6) { 0x86dd } else { 0x0800 };
            if q.len() >= self.capacity {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let mut data = Vec::with_capacity((14 + ip.len()).min(snap));
            data.extend_from_slice(&[0; 12]);
            data.extend_from_slice(&ethertype.to_be_bytes());
            data.extend_from_slice(ip);
            data.truncate(snap);
            q.push_back(CapturedFrame { t_ns, port: u16::MAX, dir, orig_len: (14 + ip.len()) as u32, data });
        }
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
        self.tunnel.store(u32::MAX, Ordering::Relaxed);
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
/// How often a busy worker refreshes the ports' driver counters.
const DRV_STATS_EVERY_NS: u64 = 1_000_000;

/// Upper bounds (exclusive) of the [`LoopGaps`] buckets, in nanoseconds;
/// the last bucket has none.
pub const GAP_BOUNDS_NS: [u64; GAP_BUCKETS - 1] = [10_000, 100_000, 1_000_000, 10_000_000];
pub const GAP_BUCKETS: usize = 5;

/// How long a worker went between two polls of its ports: from one loop's
/// start to the next's, not counting time asleep in poll(2) (an idle
/// worker is woken by its ports). A gap is the time a received packet can
/// wait before the worker looks: its own batch's work, and whatever took
/// the CPU from it (a preempting thread, the hypervisor, a page fault).
/// One subtraction and two relaxed stores per loop (the loop's clock
/// reading is already taken).
#[derive(Debug, Default)]
pub struct LoopGaps {
    /// Gaps below 10 us, 100 us, 1 ms, 10 ms, and the rest.
    pub hist: [Counter; GAP_BUCKETS],
    /// The longest gap seen (nanoseconds).
    pub max_ns: Counter,
}

impl LoopGaps {
    /// The bucket of a gap of `ns`.
    #[inline]
    pub fn bucket(ns: u64) -> usize {
        GAP_BOUNDS_NS.iter().position(|&b| ns < b).unwrap_or(GAP_BUCKETS - 1)
    }

    #[inline]
    fn record(&self, ns: u64) {
        self.hist[Self::bucket(ns)].add(1);
        if ns > self.max_ns.get() {
            self.max_ns.set(ns);
        }
    }

    /// The counts, and the longest gap.
    pub fn snapshot(&self) -> ([u64; GAP_BUCKETS], u64) {
        (std::array::from_fn(|i| self.hist[i].get()), self.max_ns.get())
    }
}

/// What the control side knows of one open port of a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSlot {
    pub name: String,
    pub ifindex: u16,
    /// The input node when not the worker's (`PortBinding::input`); such
    /// ports are not the interface's own.
    pub input: Option<NodeId>,
}

impl PortSlot {
    fn of(b: &PortBinding) -> PortSlot {
        PortSlot { name: b.port.name().to_string(), ifindex: b.ifindex, input: b.input }
    }
}

/// A change of a running worker's ports, asked for by the control thread
/// ([`WorkerShared::change_port`]) and applied by the worker between two
/// loops. Port numbers are the same in every worker, so the control thread
/// chooses them.
pub enum PortChange {
    /// Port number `slot` becomes `binding` (a port already there is
    /// closed). Its counters restart from zero.
    Open { slot: usize, binding: PortBinding },
    /// Port number `slot` is closed: nothing is received there any more,
    /// and what nodes still queue for it is dropped (counted as the
    /// port's `tx_dropped`).
    Close { slot: usize },
}

/// What the control side shares with a running worker.
pub struct WorkerShared {
    pub id: u16,
    pub stats: WorkerStats,
    pub graph: Arc<GraphInfo>,
    /// Each port number's port (None: a number not open, or closed live).
    /// Written by the worker when it applies a [`PortChange`].
    slots: Mutex<Vec<Option<PortSlot>>>,
    /// Changes the worker has yet to apply, and whether there are any (one
    /// relaxed load per loop when there are none).
    port_changes: Mutex<Vec<PortChange>>,
    port_changes_pending: AtomicBool,
    pub trace: Arc<TraceShared>,
    /// `tern capture`'s hook on this worker's ports.
    pub capture: CaptureTap,
    /// The gaps between the worker's polls of its ports.
    pub gaps: LoopGaps,
    stop: AtomicBool,
    waker: Waker,
}

impl WorkerShared {
    /// The worker's ports by port number (`stats.ports` has the same
    /// numbering; numbers beyond the end and closed ones are None).
    pub fn ports(&self) -> Vec<Option<PortSlot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// How many port numbers the worker has counters for (open ports plus
    /// the spares given to [`Worker::with_spare_ports`]).
    pub fn port_capacity(&self) -> usize {
        self.stats.ports.len()
    }

    /// Asks the worker to change its ports before its next loop (it is
    /// woken). A slot beyond [`WorkerShared::port_capacity`] is refused
    /// here: the caller keeps the binding.
    pub fn change_port(&self, change: PortChange) -> Result<(), PortChange> {
        let slot = match &change {
            PortChange::Open { slot, .. } | PortChange::Close { slot } => *slot,
        };
        if slot >= self.port_capacity() {
            return Err(change);
        }
        self.port_changes.lock().unwrap_or_else(PoisonError::into_inner).push(change);
        self.port_changes_pending.store(true, Ordering::Release);
        self.waker.wake();
        Ok(())
    }

    /// Whether port changes wait for the worker to apply them.
    pub fn port_changes_pending(&self) -> bool {
        self.port_changes_pending.load(Ordering::Acquire)
    }

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
    /// One queue per port number, spares included (nodes may queue for a
    /// port the worker has not opened yet; [`Worker::flush_tx`] drops
    /// that).
    tx: Vec<Vec<PktIdx>>,
    /// Port names for traces, by port number.
    names: Vec<String>,
    tracer: Tracer,
    shared: Arc<WorkerShared>,
    rcu: Option<tern_rcu::Reader>,
    idle_loops: u32,
    /// Sleeps since the last loop that received a packet.
    quiet_sleeps: u32,
    started_ns: u64,
    /// When the ports were last polled, or the worker woke from poll(2)
    /// (0: not yet).
    last_poll_ns: u64,
    /// When the ports' driver counters are next copied into the stats.
    drv_stats_due_ns: u64,
    /// A port received or sent since they were last copied.
    drv_stats_dirty: bool,
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
        Worker::with_spare_ports(cfg, graph, pool, ports, trace, rcu, 0)
    }

    /// A worker with counters and transmit queues for `spare` port
    /// numbers after its ports, which the control thread may open while
    /// it runs ([`WorkerShared::change_port`]; the TAPs of interfaces
    /// added by a reload).
    pub fn with_spare_ports(
        cfg: WorkerConfig,
        graph: Graph,
        pool: PacketPool,
        ports: Vec<PortBinding>,
        trace: Arc<TraceShared>,
        rcu: Option<tern_rcu::Reader>,
        spare: usize,
    ) -> std::io::Result<Worker> {
        let capacity = ports.len() + spare;
        let stats = WorkerStats::new(graph.node_count(), graph.error_count(), capacity);
        let shared = Arc::new(WorkerShared {
            id: cfg.id,
            stats,
            graph: Arc::clone(graph.info()),
            slots: Mutex::new(ports.iter().map(|b| Some(PortSlot::of(b))).collect()),
            port_changes: Mutex::new(Vec::new()),
            port_changes_pending: AtomicBool::new(false),
            trace: Arc::clone(&trace),
            capture: CaptureTap::new(CAPTURE_QUEUE),
            gaps: LoopGaps::default(),
            stop: AtomicBool::new(false),
            waker: Waker::new()?,
        });
        let tx = (0..capacity).map(|k| Vec::with_capacity(if k < ports.len() { 2 * MAX_BATCH } else { 0 })).collect();
        let names = ports.iter().map(|b| b.port.name().to_string()).collect();
        Ok(Worker {
            names,
            tracer: Tracer::new(trace, cfg.id),
            cfg,
            graph,
            pool,
            ports,
            tx,
            shared,
            rcu,
            idle_loops: 0,
            quiet_sleeps: 0,
            started_ns: clock::now_ns(),
            last_poll_ns: 0,
            drv_stats_due_ns: 0,
            drv_stats_dirty: true,
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
        if let Some(w) = crate::rt::current_thread_warning() {
            log::warn!("worker {} {w}", self.cfg.id);
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
        // What each port's driver counted over the run, kernel ring drops
        // included: where frames were lost shows without the API.
        for b in &self.ports {
            let s = b.port.stats();
            log::info!(
                "worker {}: {}: rx {} (dropped {}), tx {} (dropped {}), errors {}",
                self.cfg.id,
                b.port.name(),
                s.rx_packets,
                s.rx_dropped,
                s.tx_packets,
                s.tx_dropped,
                s.errors
            );
        }
        log::info!("worker {} stopped", self.cfg.id);
    }

    /// One loop: poll nodes, receive from every port, run the graph,
    /// transmit. Returns the number of packets received.
    pub fn run_once(&mut self) -> usize {
        let now_ns = clock::now_ns();
        if self.last_poll_ns != 0 {
            self.shared.gaps.record(now_ns.saturating_sub(self.last_poll_ns));
        }
        self.last_poll_ns = now_ns;
        if let Some(r) = &self.rcu {
            r.quiescent();
        }
        if self.shared.port_changes_pending.load(Ordering::Relaxed) {
            self.apply_port_changes();
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
            self.drv_stats_dirty = true;
            self.quiet_sleeps = 0;
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
        for b in self.ports.iter_mut() {
            b.port.service(&mut self.pool);
        }
        if now_ns >= self.drv_stats_due_ns {
            self.refresh_driver_stats(now_ns);
        }
        let stats = &self.shared.stats;
        stats.looping.loops.add(1);
        stats.looping.uptime_ns.set(now_ns.saturating_sub(self.started_ns));
        total
    }

    /// Copies the ports' driver counters (kernel ring drops, errors) into
    /// the shared stats. A port may need a system call for them (AF_XDP's
    /// XDP_STATISTICS getsockopt), so this runs at most once per
    /// [`DRV_STATS_EVERY_NS`], not every loop: a spinning worker paid two
    /// getsockopts per loop, 15 % of its time. A worker about to sleep
    /// copies them if a port received or sent since the last copy and the
    /// copy is due; if it is not due yet, the sleep lasts only until it is
    /// (an IKE responder's worker sleeps between every few packets, and a
    /// getsockopt per sleep was 4 % of its time). What a scrape sees is
    /// thus never more than [`DRV_STATS_EVERY_NS`] and a loop behind.
    fn refresh_driver_stats(&mut self, now_ns: u64) {
        let stats = &self.shared.stats;
        for (k, b) in self.ports.iter().enumerate() {
            let s = b.port.stats();
            let pc = &stats.ports[k];
            pc.drv_rx_dropped.set(s.rx_dropped);
            pc.drv_errors.set(s.errors);
        }
        self.drv_stats_due_ns = now_ns + DRV_STATS_EVERY_NS;
        self.drv_stats_dirty = false;
    }

    /// Applies the port changes the control thread asked for.
    fn apply_port_changes(&mut self) {
        // The queue stays locked until every change is applied, so that
        // `port_changes_pending` turns false only once old ports are closed
        // (a TAP device goes away with its last queue).
        let mut queue = self.shared.port_changes.lock().unwrap_or_else(PoisonError::into_inner);
        let changes = std::mem::take(&mut *queue);
        let stats = &self.shared.stats;
        let mut slots = self.shared.slots.lock().unwrap_or_else(PoisonError::into_inner);
        for change in changes {
            let (slot, binding) = match change {
                PortChange::Open { slot, binding } => (slot, Some(binding)),
                PortChange::Close { slot } => (slot, None),
            };
            let Some(pc) = stats.ports.get(slot) else { continue };
            // Packets still queued for the old port leave with it.
            if slot < self.ports.len() {
                let q = &mut self.tx[slot];
                if !q.is_empty() {
                    let out = self.ports[slot].port.tx_burst(&mut self.pool, q);
                    pc.tx_packets.add(out.sent as u64);
                    pc.tx_dropped.add(out.dropped as u64);
                    q.clear();
                }
            }
            while self.ports.len() <= slot {
                self.ports.push(PortBinding::new(Box::new(ClosedPort), 0));
                self.names.push(String::new());
            }
            while slots.len() <= slot {
                slots.push(None);
            }
            for c in [
                &pc.rx_packets,
                &pc.rx_bytes,
                &pc.tx_packets,
                &pc.tx_bytes,
                &pc.tx_dropped,
                &pc.drv_rx_dropped,
                &pc.drv_errors,
            ] {
                c.set(0);
            }
            match binding {
                Some(b) => {
                    slots[slot] = Some(PortSlot::of(&b));
                    self.names[slot] = b.port.name().to_string();
                    if self.tx[slot].capacity() == 0 {
                        self.tx[slot].reserve(2 * MAX_BATCH);
                    }
                    self.ports[slot] = b;
                }
                None => {
                    slots[slot] = None;
                    self.names[slot] = String::new();
                    self.ports[slot] = PortBinding::new(Box::new(ClosedPort), 0);
                }
            }
        }
        // Closed ports at the end are not polled at all.
        let open = slots.iter().rposition(Option::is_some).map_or(0, |k| k + 1);
        slots.truncate(open);
        self.ports.truncate(open);
        self.names.truncate(open);
        drop(slots);
        self.shared.port_changes_pending.store(false, Ordering::Release);
        drop(queue);
    }

    fn flush_tx(&mut self, capture: bool, now_ns: u64) {
        let stats = &self.shared.stats;
        for (k, q) in self.tx.iter_mut().enumerate() {
            if q.is_empty() {
                continue;
            }
            self.drv_stats_dirty = true;
            if capture && self.shared.capture.wants(k) & CAPTURE_TX != 0 {
                self.shared.capture.copy(&self.pool, q, k, CaptureDir::Tx, now_ns);
            }
            let mut bytes = 0u64;
            for &p in q.iter() {
                let m = self.pool.meta(p);
                bytes += u64::from(m.len);
                if m.flags & flags::TRACED != 0 {
                    let slot = m.trace;
                    let name = self.names.get(k).map_or("(closed)", String::as_str);
                    self.tracer.finish(slot, format!("tx {name}"));
                }
            }
            let out = match self.ports.get_mut(k) {
                Some(b) => b.port.tx_burst(&mut self.pool, q),
                // A port number not open (yet, or any more).
                None => ClosedPort.tx_burst(&mut self.pool, q),
            };
            let Some(pc) = stats.ports.get(k) else { continue };
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

    /// How long the next sleep may last: the long timeout once the worker
    /// has been quiet and nothing but a packet or a wake-up needs it.
    fn sleep_timeout_ms(&self) -> u32 {
        let IdlePolicy::Sleep { timeout_ms, long_timeout_ms, .. } = self.cfg.idle else {
            return 0;
        };
        let long = self.quiet_sleeps >= QUIET_SLEEPS
            && !self.graph.timers_pending()
            && self.ports.iter().all(|b| b.port.wait_fd().is_some() && b.port.settled());
        if long { long_timeout_ms.max(timeout_ms) } else { timeout_ms }
    }

    fn idle(&mut self) {
        let IdlePolicy::Sleep { spins, .. } = self.cfg.idle else {
            std::hint::spin_loop();
            return;
        };
        self.idle_loops += 1;
        if self.idle_loops < spins {
            std::hint::spin_loop();
            return;
        }
        // A port that busy-polls may want the worker to keep polling.
        let mut ready = true;
        for b in &mut self.ports {
            ready &= b.port.prepare_sleep();
        }
        if !ready {
            std::hint::spin_loop();
            return;
        }
        let mut timeout_ms = self.sleep_timeout_ms();
        let t0 = clock::now_ns();
        // What the drivers counted is current while the worker sleeps, or
        // the sleep ends when the copy is due.
        if self.drv_stats_dirty {
            if t0 >= self.drv_stats_due_ns {
                self.refresh_driver_stats(t0);
            } else {
                timeout_ms = timeout_ms.min((self.drv_stats_due_ns - t0).div_ceil(1_000_000) as u32);
            }
        }
        if let Some(r) = &self.rcu {
            r.offline();
        }
        {
            let mut waiting = Vec::with_capacity(self.ports.len());
            let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(self.ports.len() + 1);
            for (k, b) in self.ports.iter().enumerate() {
                if let Some(fd) = b.port.wait_fd() {
                    waiting.push(k);
                    fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
                }
            }
            fds.push(PollFd::new(&self.shared.waker.fd, PollFlags::IN));
            let ts =
                Timespec { tv_sec: i64::from(timeout_ms / 1000), tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000 };
            let _ = rustix::event::poll(&mut fds, Some(&ts));
            let failed: Vec<usize> = waiting
                .iter()
                .zip(&fds)
                .filter(|(_, f)| f.revents().contains(PollFlags::ERR))
                .map(|(&k, _)| k)
                .collect();
            drop(fds);
            for k in failed {
                self.ports[k].port.poll_error();
            }
        }
        self.quiet_sleeps = self.quiet_sleeps.saturating_add(1);
        self.shared.waker.clear();
        if let Some(r) = &self.rcu {
            r.online();
        }
        let woke = clock::now_ns();
        self.shared.stats.looping.idle_ns.add(woke.saturating_sub(t0));
        // Asleep is not a stall: the next gap starts now.
        self.last_poll_ns = woke;
    }
}

/// A port number with nothing behind it: receives nothing, drops what
/// is sent (the port's `tx_dropped`).
struct ClosedPort;

impl Port for ClosedPort {
    fn name(&self) -> &str {
        "(closed)"
    }
    fn rx_burst(&mut self, _pool: &mut PacketPool, _out: &mut Vec<PktIdx>, _max: usize) -> usize {
        0
    }
    fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> tern_packet::TxOutcome {
        for &p in pkts {
            pool.free(p);
        }
        tern_packet::TxOutcome { sent: 0, dropped: pkts.len() }
    }
    fn stats(&self) -> tern_packet::PortStats {
        tern_packet::PortStats::default()
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
        let inputs: Vec<_> = w.shared().ports().into_iter().map(|s| s.and_then(|s| s.input)).collect();
        assert_eq!(inputs, vec![None, Some(side)]);
        w.shared().capture.start(1, CAPTURE_TX, 64);
        assert_eq!(w.run_once(), 3);
        let ports = &w.shared().stats.ports;
        assert_eq!((ports[0].tx_packets.get(), ports[1].tx_packets.get()), (1, 2));
        let sent: Vec<_> = w.shared().capture.take().into_iter().map(|f| f.data).collect();
        assert_eq!(sent, vec![vec![7], vec![8]], "the side port's packets went through to-port1 only, unchanged");
    }

    #[test]
    fn ports_open_and_close_while_the_worker_runs() {
        let mut b = GraphBuilder::new();
        b.add(ToPort1);
        let g = b.build().expect("graph");
        let input = g.node_id("to-port1").expect("node");
        let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
        let main = QueuePort { rx: [vec![1u8], vec![2u8]].into() };
        let mut w = Worker::with_spare_ports(
            WorkerConfig { id: 0, cpu: None, idle: IdlePolicy::Spin, input_node: input },
            g,
            pool,
            vec![PortBinding::new(Box::new(main), 0)],
            TraceShared::new(),
            None,
            2,
        )
        .expect("worker");
        assert_eq!(w.shared().port_capacity(), 3);
        // Port 1 is not open: what is queued for it is dropped, counted.
        assert_eq!(w.run_once(), 2);
        assert_eq!(w.shared().stats.ports[1].tx_dropped.get(), 2);
        assert_eq!(w.pool().available(), 1024, "nothing leaked");

        let side = QueuePort { rx: [vec![9u8]].into() };
        w.shared()
            .change_port(PortChange::Open { slot: 1, binding: PortBinding::new(Box::new(side), 7) })
            .map_err(|_| "refused")
            .expect("slot 1 exists");
        assert!(w.shared().port_changes_pending());
        assert_eq!(w.run_once(), 1, "the new port is polled from the next loop");
        let ports = w.shared().ports();
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[1].as_ref().map(|s| s.ifindex), Some(7));
        let pc = &w.shared().stats.ports[1];
        assert_eq!((pc.rx_packets.get(), pc.tx_packets.get(), pc.tx_dropped.get()), (1, 1, 0), "counters restarted");

        w.shared().change_port(PortChange::Close { slot: 1 }).map_err(|_| "refused").expect("slot 1 exists");
        w.run_once();
        assert_eq!(w.shared().ports(), vec![w.shared().ports()[0].clone()], "a closed last port is gone");
        assert!(w.shared().change_port(PortChange::Close { slot: 3 }).is_err(), "beyond the spares");
    }

    #[test]
    fn loop_gaps_fall_in_their_buckets() {
        for (ns, b) in [(0, 0), (9_999, 0), (10_000, 1), (99_999, 1), (500_000, 2), (1_000_000, 3), (10_000_000, 4)] {
            assert_eq!(LoopGaps::bucket(ns), b, "{ns} ns");
        }
        let g = LoopGaps::default();
        for ns in [5_000, 50_000, 2_000_000, 20_000_000, 3_000] {
            g.record(ns);
        }
        assert_eq!(g.snapshot(), ([2, 1, 0, 1, 1], 20_000_000));

        // A running worker records one gap per loop after the first.
        let mut w = worker(&[&[1]]);
        for _ in 0..3 {
            w.run_once();
        }
        let (hist, max) = w.shared().gaps.snapshot();
        assert_eq!(hist.iter().sum::<u64>(), 2);
        assert!(max > 0);
    }

    /// Counts `stats()` calls and reports one more ring drop each time.
    struct CountingPort {
        calls: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }
    impl Port for CountingPort {
        fn name(&self) -> &str {
            "c0"
        }
        fn rx_burst(&mut self, pool: &mut PacketPool, out: &mut Vec<PktIdx>, _max: usize) -> usize {
            let Some(p) = pool.alloc_from(&[0u8; 60]) else { return 0 };
            out.push(p);
            1
        }
        fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome {
            pool.free_all(pkts);
            TxOutcome { sent: pkts.len(), dropped: 0 }
        }
        fn stats(&self) -> PortStats {
            let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
            PortStats { rx_dropped: n, ..PortStats::default() }
        }
    }

    #[test]
    fn driver_counters_are_read_once_per_interval_not_every_loop() {
        let mut b = GraphBuilder::new();
        b.add(Echo);
        let g = b.build().expect("graph");
        let input = g.node_id("echo").expect("echo");
        let pool = PacketPool::new(PoolConfig { frames: 256, ..PoolConfig::default() }).expect("pool");
        let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let port = CountingPort { calls: calls.clone() };
        let mut w = Worker::new(
            WorkerConfig {
                id: 0,
                cpu: None,
                idle: IdlePolicy::Sleep { spins: 1, timeout_ms: 1, long_timeout_ms: 1 },
                input_node: input,
            },
            g,
            pool,
            vec![PortBinding::new(Box::new(port), 0)],
            TraceShared::new(),
            None,
        )
        .expect("worker");
        let t0 = clock::now_ns();
        let mut loops = 0u64;
        while clock::now_ns() - t0 < DRV_STATS_EVERY_NS / 2 || loops < 1000 {
            assert_eq!(w.run_once(), 1);
            loops += 1;
        }
        let elapsed = clock::now_ns() - t0;
        let most = elapsed / DRV_STATS_EVERY_NS + 1;
        assert!(calls.load(Ordering::Relaxed) >= 1, "read on the first loop");
        assert!(
            calls.load(Ordering::Relaxed) <= most,
            "{} reads in {loops} loops over {elapsed} ns",
            calls.load(Ordering::Relaxed)
        );
        let shown = w.shared().stats.ports[0].drv_rx_dropped.get();
        assert_eq!(shown, calls.load(Ordering::Relaxed), "the last read is what the stats show");
        // Going to sleep after traffic: the counters are copied at once
        // if a copy is due, or the sleep lasts only until it is, and the
        // loop after it copies them: nothing stays stale while idle.
        w.idle();
        let n = calls.load(Ordering::Relaxed);
        assert!(n == shown + 1 || clock::now_ns() >= w.drv_stats_due_ns, "copied, or slept until due ({n} reads)");
        if n == shown {
            assert_eq!(w.run_once(), 1);
        }
        assert_eq!(calls.load(Ordering::Relaxed), shown + 1);
        assert_eq!(w.shared().stats.ports[0].drv_rx_dropped.get(), shown + 1);
        // Nothing received or sent since that copy: a sleep reads nothing.
        assert!(!w.drv_stats_dirty);
        w.idle();
        assert_eq!(calls.load(Ordering::Relaxed), shown + 1, "no read before a sleep after no traffic");
    }

    /// A port with a real descriptor whose readiness and settledness the
    /// test sets, and which receives one frame when told to.
    struct WaitPort {
        fd: OwnedFd,
        settled: Arc<AtomicBool>,
        frames: Arc<AtomicU32>,
    }
    impl Port for WaitPort {
        fn name(&self) -> &str {
            "w0"
        }
        fn rx_burst(&mut self, pool: &mut PacketPool, out: &mut Vec<PktIdx>, _max: usize) -> usize {
            if self.frames.load(Ordering::Relaxed) == 0 {
                return 0;
            }
            self.frames.fetch_sub(1, Ordering::Relaxed);
            let Some(p) = pool.alloc_from(&[0u8; 60]) else { return 0 };
            out.push(p);
            1
        }
        fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome {
            pool.free_all(pkts);
            TxOutcome { sent: pkts.len(), dropped: 0 }
        }
        fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
            use std::os::fd::AsFd;
            Some(self.fd.as_fd())
        }
        fn settled(&self) -> bool {
            self.settled.load(Ordering::Relaxed)
        }
        fn stats(&self) -> PortStats {
            PortStats::default()
        }
    }

    /// A polling node whose timers the test switches on and off.
    struct Timers(Arc<AtomicBool>);
    impl Node for Timers {
        fn name(&self) -> &'static str {
            "timers"
        }
        fn nexts(&self) -> &'static [&'static str] {
            &["drop"]
        }
        fn process(&mut self, _cx: &mut Cx<'_>, _pkts: &[PktIdx], _next: &mut [u16]) {}
        fn wants_poll(&self) -> bool {
            true
        }
        fn timers_pending(&self) -> bool {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn a_quiet_worker_sleeps_long_only_while_every_port_is_settled() {
        let timers = Arc::new(AtomicBool::new(false));
        let mut b = GraphBuilder::new();
        b.add(Echo);
        b.add(Timers(timers.clone()));
        let g = b.build().expect("graph");
        let input = g.node_id("echo").expect("echo");
        let pool = PacketPool::new(PoolConfig { frames: 256, ..PoolConfig::default() }).expect("pool");
        // An eventfd nobody writes: poll(2) on it times out.
        let fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::NONBLOCK).expect("eventfd");
        let settled = Arc::new(AtomicBool::new(true));
        let frames = Arc::new(AtomicU32::new(0));
        let port = WaitPort { fd, settled: settled.clone(), frames: frames.clone() };
        let policy = IdlePolicy::Sleep { spins: 1, timeout_ms: 1, long_timeout_ms: 700 };
        let mut w = Worker::new(
            WorkerConfig { id: 0, cpu: None, idle: policy, input_node: input },
            g,
            pool,
            vec![PortBinding::new(Box::new(port), 0)],
            TraceShared::new(),
            None,
        )
        .expect("worker");
        assert_eq!(w.sleep_timeout_ms(), 1, "a worker that just started keeps the short timeout");
        for i in 0..QUIET_SLEEPS {
            assert_eq!(w.sleep_timeout_ms(), 1, "after {i} quiet sleeps");
            w.idle();
        }
        assert_eq!(w.sleep_timeout_ms(), 700, "quiet long enough: the long timeout");
        settled.store(false, Ordering::Relaxed);
        assert_eq!(w.sleep_timeout_ms(), 1, "a port with work for `service` keeps it short");
        settled.store(true, Ordering::Relaxed);
        assert_eq!(w.sleep_timeout_ms(), 700);
        timers.store(true, Ordering::Relaxed);
        assert_eq!(w.sleep_timeout_ms(), 1, "a node's timer (a neighbour retry) keeps it short");
        timers.store(false, Ordering::Relaxed);
        assert_eq!(w.sleep_timeout_ms(), 700);
        // A packet makes the worker busy again: the next sleeps are short.
        frames.store(1, Ordering::Relaxed);
        assert_eq!(w.run_once(), 1);
        assert_eq!(w.sleep_timeout_ms(), 1, "a packet resets the quiet count");
        // A port without a descriptor: the worker never sleeps long.
        let mut b = GraphBuilder::new();
        b.add(Echo);
        let g = b.build().expect("graph");
        let input = g.node_id("echo").expect("echo");
        let pool = PacketPool::new(PoolConfig { frames: 256, ..PoolConfig::default() }).expect("pool");
        let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut w = Worker::new(
            WorkerConfig { id: 0, cpu: None, idle: policy, input_node: input },
            g,
            pool,
            vec![PortBinding::new(Box::new(CountingPort { calls }), 0)],
            TraceShared::new(),
            None,
        )
        .expect("worker");
        for _ in 0..QUIET_SLEEPS {
            w.idle();
        }
        assert_eq!(w.sleep_timeout_ms(), 1, "no descriptor to wake on: short sleeps only");
    }
}
