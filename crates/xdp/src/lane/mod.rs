//! The XDP lane: tern's common case forwarded inside the driver's receive
//! hook (`bpf/lane.c`), everything else handed to tern's userspace engine
//! through the AF_XDP socket of the receive queue, and traffic for Linux
//! passed up, as the steering program does.
//!
//! - [`LaneProgram`]: loads the program, attaches it to devices, registers
//!   the XSKs that take its punts, and publishes its tables.
//! - [`FibMirror`] (inside the program): tern-fib's own arrays mirrored into
//!   mmap'ed array maps, entry by entry, with tern-fib's RCU domain holding
//!   reuse until a kernel grace period.
//! - [`compile_acl`]: a `tern-acl` rule set as the lane's bitmap
//!   classifier (exactly `tern-acl`'s semantics; sets it cannot hold are
//!   left to userspace).
//! - [`counters`]: the lane's counters, named as the userspace nodes'.
//!
//! See docs/XDP.md for the design, the measurements and how the lane is
//! proven to behave as the userspace engine does.

mod acl;
pub mod counters;
pub mod features;
mod fib;
mod layout;
pub(crate) mod program;
mod shm;
pub mod trace;

pub use acl::{LaneAcl, LaneAclFamily, LaneVerdict, compile_acl};
pub use counters::{CounterDesc, CounterKind, CounterValue, LanePortStats, counter, counters};
pub use fib::{FibCapacity, FibMirror, MirrorStats};
pub use layout::{
    ACL_CACHE_BUCKETS, FWD_BUCKETS, LaneGre, LaneIf, LaneIfKind, MAX_IFS, MAX_PORTS, MAX_QUEUES, MAX_SETS, NO_IF,
};
pub use program::{FWD_MEMO_LOCAL, LANE_PROG_NAME, LaneConfig, LaneProgram, LaneTables, PUNT_CLASSES, lane_object};
pub use trace::{LaneTrace, TraceRewrite, TraceVerdict};

/// The kernel interface index of `name` (in this thread's namespace).
pub fn device_ifindex(name: &str) -> Result<u32, crate::XdpError> {
    crate::sys::if_index(name).map_err(|e| crate::XdpError::Unavailable {
        why: crate::Unavailable::NoSuchInterface,
        detail: format!("interface {name}"),
        source: Some(e),
    })
}
