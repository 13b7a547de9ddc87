//! tern's graph engine.
//!
//! A forwarding worker is a graph of nodes. A node is a function over a
//! batch of packets (up to [`MAX_BATCH`]) that writes, for each packet, the
//! index of its next node; the engine then moves the packets to their next
//! nodes in bulk (the VPP/grout model). One worker thread owns its graph,
//! its packet pool and its ports, and runs every batch to completion.
//!
//! Observability is built in rather than bolted on:
//! * per node and per worker: calls, packets and TSC cycles ([`stats`]);
//! * every dropped packet carries a named reason, counted per worker;
//! * a packet trace records the path and decisions of the next N packets.
//!
//! Counters have a single writer (their worker) and are read by the control
//! thread; they are atomics written with plain load/store, never a locked
//! read-modify-write.
#![forbid(unsafe_code)]

pub mod clock;
pub mod graph;
pub mod node;
pub mod rt;
pub mod stats;
pub mod trace;
pub mod worker;

pub use graph::{Graph, GraphBuilder, GraphError, GraphInfo, NodeId};
pub use node::{Cx, Emit, ErrorDesc, ErrorKind, NEXT_DROP, NEXT_TAKEN, Node};
pub use stats::{Counter, WorkerStats};
pub use tern_packet::{MAX_BATCH, PktIdx};
pub use trace::{TraceHop, TraceRecord, TraceShared};
pub use worker::{
    GAP_BOUNDS_NS, GAP_BUCKETS, IdlePolicy, LoopGaps, PortBinding, PortChange, PortSlot, Worker, WorkerConfig,
    WorkerHandle, WorkerShared,
};
