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
//! with it sees the old or the new result for its address, never a mix.
//! Memory a reader may still see is reused only after a grace period of the
//! [`tern_rcu::Domain`] given to [`new`]; the writer never waits for one.
//!
//! # Structure
//! * RIB (`rib.rs`, `writer.rs`): every route of every source; the best
//!   active one per prefix (lowest distance, metric, then source order)
//!   drives the FIB; gateways without an interface resolve through the
//!   connected routes and re-resolve when those change. Prefixes map to
//!   their routes through an open-addressed table whose cells hold the
//!   routes inline (one cache line per lookup, prefetchable: `rib.rs`);
//!   a batch ([`FibWriter::apply`]) prefetches eight operations ahead.
//! * IPv4 FIB: DIR-24-8 (a 2^24-entry direct array plus 256-entry blocks)
//!   of 16-bit entries (32 MiB; next-hop ids below 2^15, see
//!   [`FibConfig::max_nexthops`]); IPv6 FIB: the same shape of 16-bit
//!   entries whose values from 2^13 up point to blocks (50.6 MiB for the
//!   full table; next-hop ids below 2^13); both flat arrays updated in place
//!   (`lpm/multibit.rs`), exposed read-only through [`FibReader::raw`]
//!   with [`FibWriter::take_changes`] for BPF mirrors.
//! * Next hops (`nexthop.rs`): a flat table of 32-byte entries, shared and
//!   reference-counted, the MAC updated in place by ARP/ND; ECMP groups
//!   pick a member by flow hash.
//! * Tunnel adjacencies (`tunnel.rs`, VPP's midchain): each tunnel the
//!   writer knows ([`FibWriter::tunnel_set`]) is stacked on what its
//!   remote resolves to, re-stacked at every commit, and read in O(1)
//!   by interface ([`FibReader::tunnel`]).
//!
//! # Measured
//! `tern-bench fib` (`crates/bench/src/fib.rs` gives the method); the figures, with the
//! commands, the machine's load and the alternatives measured on the same
//! keys, are in docs/PERFORMANCE.md ("FIB: the full Internet table" and
//! the subsections after it). The latest (2026-11-23, full table: 901,899
//! IPv4 + 160,147 IPv6 prefixes, one core of a 2-vCPU Ice Lake VM at load
//! 0.6-2.8, medians of 3 runs): IPv4 lookups 166 M/s on covered addresses
//! in batches of 256 (84 M/s single), 243 M/s on a Zipf mix; IPv6 38 M/s
//! covered in batches of 256; IPv4 loaded in 0.25 s of CPU; 2.7 M IPv4
//! inserts/s one call each; reader arrays 32.2 MiB (IPv4) + 37.5 MiB
//! (IPv6).
#![forbid(unsafe_code)]

mod changes;
mod connected;
mod keyhash;
mod lpm;
mod nexthop;
mod prefix;
mod reader;
mod reclaim;
mod rib;
pub mod routefile;
mod tunnel;
mod types;
mod writer;

#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use changes::{FibChanges, RawFib, RawTrie};
/// The multibit trie under both FIBs, generic over entry width and shape.
/// Public for the laboratory (`tern-bench fib` measures other shapes on the
/// same keys); the router reaches it only through [`FibWriter`] and
/// [`FibReader`].
#[doc(hidden)]
pub use lpm::multibit;
pub use lpm::naive::NaiveLpm;
pub use prefix::{Prefix, PrefixError};
pub use reader::FibReader;
pub use tunnel::TunnelAdj;
pub use types::{
    ApplyReport, FibConfig, FibError, FibStats, NH_NONE, NextHop, NhId, NhKind, RouteAttrs, RouteDetail, RouteOp,
    RouteTarget, Source,
};
pub use writer::FibWriter;

/// Creates an empty FIB: the writer for the control thread and a reader to
/// clone for each worker. Workers register with `domain`.
pub fn new(cfg: FibConfig, domain: tern_rcu::Domain) -> (FibWriter, FibReader) {
    let shared = Arc::new(reader::Shared {
        nh: nexthop::NhTable::new(cfg.max_nexthops.clamp(2, (1 << 31) - 1), cfg.max_ecmp_members),
        v4: lpm::V4Arrays::new(cfg.v4_nodes),
        v6: lpm::V6Arrays::new(cfg.v6_nodes),
        tunnels: tunnel::TunnelTable::new(),
        domain,
    });
    let reader = FibReader { shared: Arc::clone(&shared) };
    (FibWriter::new(cfg, shared), reader)
}
