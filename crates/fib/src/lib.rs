//! tern's forwarding information base: the RIB (every route of every source
//! with its administrative distance), the IPv4 and IPv6 longest-prefix-match
//! structures the workers read, and the next-hop table they point into.
//!
//! ```
//! use tern_fib::{FibConfig, NhKind, RouteAttrs, RouteTarget, Source};
//! let (mut w, r) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
//! let lan = "192.0.2.0/24".parse().unwrap();
//! w.add_route(Source::Connected, lan, RouteTarget::Connected { ifindex: 2 }, RouteAttrs::default()).unwrap();
//! let gw = "192.0.2.1".parse().unwrap();
//! let default = "0.0.0.0/0".parse().unwrap();
//! w.add_route(Source::Static, default, RouteTarget::Via { gw, ifindex: None }, RouteAttrs::default()).unwrap();
//! let nh = r.nexthop(r.lookup_v4(0x0808_0808));
//! assert_eq!((nh.kind, nh.ifindex, nh.gw), (NhKind::Unicast, 2, gw));
//! ```
//!
//! Writers and readers: one [`FibWriter`] lives on the control thread; any
//! number of [`FibReader`] clones live on workers. When a writer call
//! returns, every lookup started afterwards sees its effect; a lookup racing
//! with it sees the old or the new result, never a mix. Memory a reader may
//! still see is reused only after a grace period of the [`tern_rcu::Domain`]
//! given to [`new`].
#![forbid(unsafe_code)]

#[cfg(feature = "bench")]
pub mod bench;
mod changes;
mod lpm;
mod nexthop;
mod prefix;
mod reader;
mod reclaim;
mod rib;
pub mod routefile;
mod types;
mod writer;

#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use changes::{FibChanges, RawFib, RawTrie};
pub use lpm::naive::NaiveLpm;
pub use prefix::{Prefix, PrefixError};
pub use reader::FibReader;
pub use types::{
    ApplyReport, FibConfig, FibError, FibStats, NH_NONE, NextHop, NhId, NhKind, RouteAttrs, RouteDetail, RouteOp,
    RouteTarget, Source,
};
pub use writer::FibWriter;

/// Creates an empty FIB: the writer for the control thread and a reader to
/// clone for each worker. Workers register with `domain`.
pub fn new(cfg: FibConfig, domain: tern_rcu::Domain) -> (FibWriter, FibReader) {
    let shared = Arc::new(reader::Shared {
        nh: nexthop::NhTable::new(cfg.max_nexthops.clamp(2, lpm::multibit::CHILD - 1), cfg.max_ecmp_members),
        v4: lpm::V4Arrays::new(cfg.v4_nodes),
        v6: lpm::V6Arrays::new(cfg.v6_nodes),
        domain,
    });
    let reader = FibReader { shared: Arc::clone(&shared) };
    (FibWriter::new(cfg, shared), reader)
}
