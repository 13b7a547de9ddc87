//! Control-plane sources outside tern: something that feeds the RIB or the
//! neighbour table from elsewhere (the Linux kernel over netlink, FRR's
//! zebra over FPM). The router polls each source every control-loop round.

use crate::neighbor::NeighborTable;
use serde::Serialize;
use tern_fib::FibWriter;
use tern_nodes::state::{IfTable, V4Net, V6Net};
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
    fn route_counters(&self) -> Option<SyncCounters> {
        None
    }
    /// A reload added or removed interfaces: `driven` is the new list of
    /// tern interfaces backed by a kernel device (`crate::linux::driven`).
    /// Sources that map kernel devices to tern interfaces follow it.
    fn set_driven(&mut self, _driven: Vec<Driven>) {}
}

/// A tern interface the mirror follows: its index, the kernel device name,
/// and the addresses its configuration gives (never removed).
#[derive(Clone, Debug)]
pub struct Driven {
    pub tern: u16,
    pub device: String,
    pub v4: Vec<V4Net>,
    pub v6: Vec<V6Net>,
}

/// Why route messages were not installed, and what was done.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SyncCounters {
    /// Route messages decoded (new and delete).
    pub route_msgs: u64,
    pub nexthop_msgs: u64,
    /// Operations handed to the RIB.
    pub adds: u64,
    pub dels: u64,
    /// Routes of another table (VRFs, policy routing).
    pub ignored_table: u64,
    /// Local, broadcast, multicast, anycast, throw, NAT routes and cached
    /// clones.
    pub ignored_type: u64,
    /// Source-specific routes (IPv6 `from`), which tern cannot express.
    pub ignored_source_specific: u64,
    /// No next hop through an interface tern drives.
    pub ignored_foreign_if: u64,
    /// An IPv4 route through an IPv6 next hop (RFC 5549): not supported.
    pub ignored_family: u64,
    /// A route naming a next-hop object tern has not seen.
    pub unknown_nexthop: u64,
    /// Routes of a protocol the configuration leaves to another source.
    pub ignored_protocol: u64,
    /// Messages that failed to decode.
    pub malformed: u64,
    /// Next-hop objects known now.
    pub nexthop_objects: u64,
    /// Routes re-resolved because their next-hop object changed.
    pub reresolved: u64,
}

impl SyncCounters {
    /// Route messages not installed, by reason, as `tern status` and
    /// /metrics name them (`tern_routes_skipped_total{reason}`).
    pub fn skipped(&self) -> [(&'static str, u64); 8] {
        [
            ("table", self.ignored_table),
            ("type", self.ignored_type),
            ("source_specific", self.ignored_source_specific),
            ("foreign_interface", self.ignored_foreign_if),
            ("family", self.ignored_family),
            ("unknown_nexthop", self.unknown_nexthop),
            ("protocol", self.ignored_protocol),
            ("malformed", self.malformed),
        ]
    }
}
