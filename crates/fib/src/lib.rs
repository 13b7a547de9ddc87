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
//! * IPv4 FIB: DIR-24-8 (a 2^24-entry direct array plus 256-entry blocks),
//!   IPv6 FIB: a 16-bit direct array plus 256-entry blocks; both flat `u32`
//!   arrays updated in place (`lpm/multibit.rs`), exposed read-only through
//!   [`FibReader::raw`] with [`FibWriter::take_changes`] for BPF mirrors.
//! * Next hops (`nexthop.rs`): a flat table of 32-byte entries, shared and
//!   reference-counted, the MAC updated in place by ARP/ND; ECMP groups
//!   pick a member by flow hash.
//!
//! # Measured (`tern bench fib`, see `bench.rs` for the method)
//! On the shared full table (901,899 IPv4 + 160,147 IPv6 prefixes), Xeon
//! @ 2.8 GHz (Ice Lake, KVM, 2 vCPUs shared with other builds: load average
//! 5-12, so figures are per CPU-second and vary by ~2x between runs):
//!
//! | | IPv4 | IPv6 |
//! |---|---|---|
//! | load (writer CPU) | 0.55-0.70 s | 0.12-0.16 s |
//! | FIB memory | 64.4 MiB | 37.5 MiB |
//! | lookups, covered prefixes, single / batch | 43-58 / 39-59 M/s | 8-11 / 14-16 M/s |
//! | lookups, Zipf mix, single / batch | 65-70 / 49-87 M/s | 13-20 / 16-18 M/s |
//! | lookups, cache-hot keys, single / batch | 360-660 / 360-520 M/s | 60-80 / 26-40 M/s |
//! | updates, one call each (insert / delete) | 1.1-1.4 / 0.75-0.92 M/s | 0.6 / 0.5 M/s |
//! | prefix-trie 0.10 (covered, single) | 3-5 M/s | 2.7-4.2 M/s |
//! | Linux (ip -batch load; `ip route get`) | 21-37 s; 10-13 us | 2.4-4.9 s; 18-41 us |
//!
//! The IPv6 batch figures above are of the earlier AMAC lanes; batches now
//! walk level-synchronously with prefetches (`lookup_v6_batch`): 34-46 M/s
//! covered and 41-56 M/s Zipf at load 4-6, 1.7-2.1x the AMAC lanes in the
//! same runs (docs/PERFORMANCE.md).
//!
//! Candidates measured on the same keys: a poptrie (5 MiB, 15-34 M/s on
//! covered IPv4 keys: two dependent misses at the last level and a
//! software popcount), 18/6 and 16/8 multibit tries (17 and 25 MiB, 40-85
//! M/s), a static DIR-24-8 (58-106 M/s: the bound for ours). Cold lookups
//! are bound by cache and TLB misses in the 64 MiB array; huge pages (THP
//! `always`, or an `madvise` helper in tern-intrin) are the next step.
#![forbid(unsafe_code)]

#[cfg(feature = "bench")]
pub mod bench;
mod changes;
mod keyhash;
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
