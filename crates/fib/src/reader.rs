//! The forwarding-worker side: lock-free lookups.

use std::sync::Arc;

use tern_rcu::Domain;

use crate::lpm::LpmReader;
use crate::nexthop::NhTable;
use crate::types::{NextHop, NhId};

/// What the writer and all readers share.
pub(crate) struct Shared {
    pub(crate) nh: NhTable,
    pub(crate) v4: LpmReader,
    pub(crate) v6: LpmReader,
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
        self.shared.v4.lookup(u128::from(dst) << 96)
    }

    /// Many lookups at once; `out[i]` gets the result for `dst[i]` (the
    /// shorter of the two slices bounds the work).
    #[inline]
    pub fn lookup_v4_batch(&self, dst: &[u32], out: &mut [NhId]) {
        for (d, o) in dst.iter().zip(out.iter_mut()) {
            *o = self.lookup_v4(*d);
        }
    }

    /// Longest-prefix match of an IPv6 destination.
    #[inline]
    pub fn lookup_v6(&self, dst: u128) -> NhId {
        self.shared.v6.lookup(dst)
    }

    #[inline]
    pub fn lookup_v6_batch(&self, dst: &[u128], out: &mut [NhId]) {
        for (d, o) in dst.iter().zip(out.iter_mut()) {
            *o = self.lookup_v6(*d);
        }
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

    /// The raw next-hop entries (4 words each, layout in `nexthop.rs`) and
    /// ECMP member ids, for mirroring into BPF array maps.
    pub fn raw_nexthops(
        &self,
    ) -> (
        &[std::sync::atomic::AtomicU64],
        &[std::sync::atomic::AtomicU32],
    ) {
        (self.shared.nh.raw_words(), self.shared.nh.raw_members())
    }
}
