//! Control-plane sources outside tern: something that feeds the RIB or the
//! neighbour table from elsewhere (the Linux kernel over netlink, FRR's
//! zebra over FPM). The router polls each source every control-loop round.

use crate::neighbor::NeighborTable;
use tern_fib::FibWriter;
use tern_nodes::state::IfTable;
use tern_rcu::Published;

/// What a source may touch while it runs.
pub struct SourceCx<'a> {
    pub fib: &'a mut FibWriter,
    pub neigh: &'a mut NeighborTable,
    /// The interface table as published when the round began.
    pub ifs: &'a IfTable,
    /// Where a source publishes a changed interface table (the kernel
    /// mirror: addresses added with `ip addr`, link state in Linux mode).
    /// Build it from `ifs` and publish once per round.
    pub ifaces: &'a Published<IfTable>,
    pub now_ns: u64,
}

/// A control-plane source. Sources own their routes (their `Source` in the
/// RIB) and resynchronise by mark-and-sweep.
pub trait ControlSource: Send {
    fn name(&self) -> &str;
    /// One round of work; must not block. Returns true if it changed
    /// anything (the router then tells the workers).
    fn poll(&mut self, cx: &mut SourceCx<'_>) -> bool;
    /// Counters and state for `tern` status output and tests.
    fn status(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// What became of the route messages a netlink source decoded (the
    /// skipped ones by reason), for `tern status` and /metrics.
    fn route_counters(&self) -> Option<crate::linux::sync::SyncCounters> {
        None
    }
    /// A reload added or removed interfaces: `driven` is the new list of
    /// tern interfaces backed by a kernel device (`crate::linux::driven`).
    /// Sources that map kernel devices to tern interfaces follow it.
    fn set_driven(&mut self, _driven: Vec<crate::linux::kernel::Driven>) {}
}
