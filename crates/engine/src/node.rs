//! The node contract.

use crate::stats::Counter;
use crate::trace::Tracer;
use tern_packet::{PacketPool, PktIdx, flags};

/// Next index 0 of every node is the engine's `drop` node.
pub const NEXT_DROP: u16 = 0;

/// The node kept the packet (queued it for transmission, held it while a
/// neighbour resolves, freed it after copying): the engine must not move it.
pub const NEXT_TAKEN: u16 = u16::MAX;

/// Whether an error counter counts dropped packets or just events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The packet was dropped for this reason.
    Drop,
    /// Something worth counting happened (an ARP reply sent, ...).
    Info,
}

/// A named counter a node declares.
#[derive(Clone, Copy, Debug)]
pub struct ErrorDesc {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: ErrorKind,
}

impl ErrorDesc {
    pub const fn drop(name: &'static str, help: &'static str) -> ErrorDesc {
        ErrorDesc { name, help, kind: ErrorKind::Drop }
    }
    pub const fn info(name: &'static str, help: &'static str) -> ErrorDesc {
        ErrorDesc { name, help, kind: ErrorKind::Info }
    }
}

/// A graph node. Its documentation follows one template: synopsis, next
/// nodes, counters, configuration, example.
pub trait Node: Send {
    /// Unique name in the graph, e.g. "ip4-input".
    fn name(&self) -> &'static str;

    /// Names of the next nodes, by next index. Entry 0 must be "drop".
    fn nexts(&self) -> &'static [&'static str];

    /// The counters this node keeps; a node refers to them by their index in
    /// this slice.
    fn errors(&self) -> &'static [ErrorDesc] {
        &[]
    }

    /// Processes `pkts` (at most `MAX_BATCH`), writing each packet's next
    /// index into `next[i]` (`next.len() == pkts.len()`). A packet whose next
    /// is [`NEXT_DROP`] must carry its reason (use [`Cx::drop`]); a packet the
    /// node keeps gets [`NEXT_TAKEN`]. `next` arrives filled with
    /// [`NEXT_DROP`], so a packet a node forgets is dropped, not leaked.
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]);

    /// Whether the engine must call [`Node::poll`] every worker loop.
    fn wants_poll(&self) -> bool {
        false
    }

    /// Called once per worker loop before the graph runs: a node may emit
    /// packets it holds or creates (timers, queues, injected frames).
    fn poll(&mut self, _cx: &mut Cx<'_>, _emit: &mut Emit) {}

    /// Whether [`Node::poll`] has work that time alone brings due (retries,
    /// expiries): an idle worker then keeps its short sleep instead of the
    /// long one, so the timer fires on time.
    fn timers_pending(&self) -> bool {
        false
    }
}

/// Packets a node emits from `poll`, each with its next index.
#[derive(Default)]
pub struct Emit {
    pub(crate) pkts: Vec<(PktIdx, u16)>,
}

impl Emit {
    #[inline]
    pub fn push(&mut self, pkt: PktIdx, next: u16) {
        self.pkts.push((pkt, next));
    }
}

/// What a node sees of its worker while it runs.
pub struct Cx<'a> {
    /// The worker's packet buffers.
    pub pool: &'a mut PacketPool,
    /// Monotonic time of this loop (see [`crate::clock::now_ns`]).
    pub now_ns: u64,
    /// Worker number.
    pub worker: u16,
    /// Transmit queues, by port number: packets pushed here are sent by the
    /// worker after the graph run.
    pub tx: &'a mut [Vec<PktIdx>],
    pub(crate) counters: &'a [Counter],
    pub(crate) error_base: u16,
    pub(crate) tracer: &'a mut Tracer,
}

impl Cx<'_> {
    /// Marks `pkt` dropped for the node's error `err` and returns
    /// [`NEXT_DROP`], so a node writes `next[i] = cx.drop(p, E_BAD)`.
    #[inline(always)]
    pub fn drop(&mut self, pkt: PktIdx, err: u16) -> u16 {
        self.pool.meta_mut(pkt).error = self.error_base + err;
        NEXT_DROP
    }

    /// Adds `n` to the node's counter `err` (for [`ErrorKind::Info`]
    /// counters; drops are counted by the drop node).
    #[inline(always)]
    pub fn count(&self, err: u16, n: u64) {
        if let Some(c) = self.counters.get((self.error_base + err) as usize) {
            c.add(n);
        }
    }

    /// True when `pkt` is being traced.
    #[inline(always)]
    pub fn traced(&self, pkt: PktIdx) -> bool {
        self.pool.meta(pkt).flags & flags::TRACED != 0
    }

    /// Attaches a note to `pkt`'s trace (the closure runs only if traced).
    #[inline]
    pub fn trace_note(&mut self, pkt: PktIdx, note: impl FnOnce() -> String) {
        if self.traced(pkt) {
            let slot = self.pool.meta(pkt).trace;
            self.tracer.note(slot, note());
        }
    }

    /// Starts tracing a packet this node created, if tracing is armed.
    pub fn maybe_trace_new(&mut self, pkt: PktIdx, rx_if: u16) {
        if self.tracer.armed() {
            self.tracer.start(self.pool, pkt, rx_if, self.now_ns);
        }
    }
}
