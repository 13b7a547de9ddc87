//! The lanes that move packets, as one service of the [`Router`]: the
//! workers (a thread each, with its pool, ports and graph), their inject
//! queues, the memory ports' handles, the packet trace they share, and
//! the XDP programs, AF_XDP sockets and XDP lane on the devices.
//!
//! [`Router`]: crate::router::Router

use crate::afxdp::XdpDevices;
use crate::xdplane::XdpLane;
use crossbeam_queue::ArrayQueue;
use std::collections::HashMap;
use std::sync::Arc;
use tern_engine::{PortChange, TraceShared, WorkerHandle, WorkerShared};
use tern_io::MemHandle;
use tern_nodes::state::Inject;

pub struct Lanes {
    workers: Vec<WorkerHandle>,
    /// Each worker's queue of frames the control plane sends (probes).
    injects: Vec<Arc<ArrayQueue<Inject>>>,
    /// Memory ports' handles by interface name, one per worker.
    mem: HashMap<String, Vec<MemHandle>>,
    trace: Arc<TraceShared>,
    xdp: XdpDevices,
}

impl Lanes {
    /// Lanes without workers yet ([`Lanes::add_worker`]).
    pub(crate) fn new(trace: Arc<TraceShared>, xdp: XdpDevices) -> Lanes {
        Lanes { workers: Vec::new(), injects: Vec::new(), mem: HashMap::new(), trace, xdp }
    }

    /// A started worker and its inject queue.
    pub(crate) fn add_worker(&mut self, worker: WorkerHandle, inject: Arc<ArrayQueue<Inject>>) {
        self.workers.push(worker);
        self.injects.push(inject);
    }

    /// A memory port's handle of interface `iface` (one per worker, in
    /// worker order).
    pub(crate) fn add_mem_port(&mut self, iface: &str, handle: MemHandle) {
        self.mem.entry(iface.to_string()).or_default().push(handle);
    }

    /// How many workers run.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// The workers' shared state, in worker order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<WorkerShared>> {
        self.workers.iter().map(|w| &w.shared)
    }

    /// The first worker's shared state (its graph names the nodes and
    /// counters every worker has).
    pub fn first(&self) -> Option<&Arc<WorkerShared>> {
        self.workers.first().map(|w| &w.shared)
    }

    /// Wakes every worker (something they read was published).
    pub fn wake_all(&self) {
        for w in &self.workers {
            w.shared.wake();
        }
    }

    /// Queues a frame for the first worker to send and wakes it; false
    /// when its queue is full (or no worker runs).
    /// Whether worker 0 has taken every injected frame.
    pub(crate) fn inject_idle(&self) -> bool {
        self.injects.first().is_none_or(|q| q.is_empty())
    }

    pub(crate) fn inject(&self, inj: Inject) -> bool {
        if let Some(q) = self.injects.first()
            && q.push(inj).is_ok()
            && let Some(w) = self.workers.first()
        {
            w.shared.wake();
            return true;
        }
        false
    }

    /// Asks every worker to make a port change (`make` builds worker `w`'s);
    /// those it refuses (no such slot) are logged with `what`.
    pub(crate) fn change_ports(&self, what: &str, mut make: impl FnMut(usize) -> Option<PortChange>) {
        for (w, h) in self.workers.iter().enumerate() {
            let Some(change) = make(w) else { continue };
            if h.shared.change_port(change).is_err() {
                log::error!("worker {}: {what}", h.shared.id);
            }
        }
    }

    /// Whether a worker has a port change asked of it still to apply.
    pub fn port_changes_pending(&self) -> bool {
        self.workers.iter().any(|w| w.shared.port_changes_pending())
    }

    /// How many ports each worker can hold (its own, TAPs and spares).
    pub fn port_capacity(&self) -> usize {
        self.workers.first().map_or(0, |w| w.shared.port_capacity())
    }

    /// Handles of a memory interface's ports (one per worker).
    pub fn mem_ports(&self, iface: &str) -> Option<&[MemHandle]> {
        self.mem.get(iface).map(Vec::as_slice)
    }

    /// The packet trace every worker records into.
    pub fn trace(&self) -> &Arc<TraceShared> {
        &self.trace
    }

    /// Whether a `tern capture` is on in some worker.
    pub fn capturing(&self) -> bool {
        self.workers.iter().any(|w| w.shared.capture.is_on())
    }

    /// The XDP programs and userspace ports of the router's devices.
    pub fn xdp(&self) -> &XdpDevices {
        &self.xdp
    }

    pub(crate) fn xdp_mut(&mut self) -> &mut XdpDevices {
        &mut self.xdp
    }

    /// The XDP lane, when devices run it.
    pub fn lane(&self) -> Option<&XdpLane> {
        self.xdp.lane.as_ref()
    }

    pub(crate) fn lane_mut(&mut self) -> Option<&mut XdpLane> {
        self.xdp.lane.as_mut()
    }

    /// Stops the workers (the XDP devices stay until the lanes drop).
    pub(crate) fn stop_workers(&mut self) {
        for w in self.workers.drain(..) {
            w.stop();
        }
    }
}
