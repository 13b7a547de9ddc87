//! The forwarding-worker side: lock-free lookups.

use std::sync::Arc;

use tern_rcu::Domain;

use crate::changes::{RawFib, RawTrie};
use crate::lpm::multibit::Entry;
use crate::lpm::{V4_STRIDE, V4_TOP, V4Arrays, V4Entry, V6_STRIDE, V6_TOP, V6Arrays, V6Entry};
use crate::nexthop::NhTable;
use crate::tunnel::{TunnelAdj, TunnelTable};
use crate::types::{NextHop, NhId};

/// What the writer and all readers share.
pub(crate) struct Shared {
    pub(crate) nh: NhTable,
    pub(crate) v4: V4Arrays,
    pub(crate) v6: V6Arrays,
    pub(crate) tunnels: TunnelTable,
    pub(crate) domain: Domain,
}

/// A handle for forwarding workers. Clone one per worker thread.
///
/// Lookups never block and never take a lock. A worker registers with the
/// [`Domain`] (see [`FibReader::domain`]) and calls `Reader::quiescent()`
/// between batches; an id it got from a lookup stays valid for
/// [`FibReader::nexthop`] until its next quiescent state.
#[derive(Clone)]
pub struct FibReader {
    pub(crate) shared: Arc<Shared>,
}

impl FibReader {
    /// The grace-period domain workers register with.
    pub fn domain(&self) -> &Domain {
        &self.shared.domain
    }

    /// Longest-prefix match of an IPv4 destination (host byte order).
    #[inline]
    pub fn lookup_v4(&self, dst: u32) -> NhId {
        self.shared.v4.lookup(u64::from(dst) << 32)
    }

    /// Many lookups at once; `out[i]` gets the result for `dst[i]` (the
    /// shorter of the two slices bounds the work). On IPv4 this is the loop
    /// of single lookups with each top entry prefetched 32 lookups ahead
    /// (`MultibitArrays::lookup_batch_ahead`).
    #[inline]
    pub fn lookup_v4_batch(&self, dst: &[u32], out: &mut [NhId]) {
        self.shared.v4.lookup_batch_ahead(dst, |d| u64::from(d) << 32, out);
    }

    /// Longest-prefix match of an IPv6 destination.
    #[inline]
    pub fn lookup_v6(&self, dst: u128) -> NhId {
        self.shared.v6.lookup(dst)
    }

    /// Many IPv6 lookups at once, walked level by level with their cache
    /// misses overlapped (`MultibitArrays::lookup_batch_levels`).
    #[inline]
    pub fn lookup_v6_batch(&self, dst: &[u128], out: &mut [NhId]) {
        self.shared.v6.lookup_batch(dst, out);
    }

    /// The next hop behind an id; unknown ids read as kind `None`.
    #[inline]
    pub fn nexthop(&self, id: NhId) -> NextHop {
        self.shared.nh.get(id)
    }

    /// The member of an ECMP group for a flow hash (hash the 5-tuple);
    /// the id itself for a non-ECMP next hop.
    #[inline]
    pub fn ecmp_pick(&self, id: NhId, hash: u32) -> NhId {
        self.shared.nh.ecmp_pick(id, hash)
    }

    /// The stacked adjacency of tunnel interface `ifindex`: the next hop
    /// its remote resolves to as of the writer's last commit (see
    /// `tunnel.rs`); `None` if the writer was not told of such a tunnel
    /// ([`crate::FibWriter::tunnel_set`]). One load.
    #[inline]
    pub fn tunnel(&self, ifindex: u16) -> Option<TunnelAdj> {
        self.shared.tunnels.get(ifindex)
    }

    /// Every array lookups read, for mirroring into BPF array maps (see
    /// [`crate::FibWriter::take_changes`] for what changed).
    pub fn raw(&self) -> RawFib<'_> {
        let (t4, n4) = self.shared.v4.raw();
        let (t6, n6) = self.shared.v6.raw();
        let (nexthops, ecmp_members) = (self.shared.nh.raw_words(), self.shared.nh.raw_members());
        RawFib {
            v4: RawTrie { top: t4, nodes: n4, top_bits: V4_TOP, stride: V4_STRIDE, child_base: V4Entry::CHILD },
            v6: RawTrie { top: t6, nodes: n6, top_bits: V6_TOP, stride: V6_STRIDE, child_base: V6Entry::CHILD },
            nexthops,
            ecmp_members,
        }
    }
}
