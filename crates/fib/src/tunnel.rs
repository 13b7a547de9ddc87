//! Tunnel adjacencies (VPP's midchain): each tunnel the writer was told of
//! ([`crate::FibWriter::tunnel_set`]) holds its *stacked* next hop, what
//! the tunnel's remote resolves to in this FIB, so that the node that
//! encapsulates reads the outer packet's next hop in O(1)
//! ([`crate::FibReader::tunnel`]) instead of looking the remote up.
//!
//! Re-stacking: every commit of the writer (each call that changes
//! routes or neighbours publishes one) resolves every tunnel's remote
//! again and stores what changed. Tunnels are few and a lookup costs a
//! few loads, so this simple rule is also a cheap one; it cannot miss a
//! change (a covering route added, replaced or removed, a gateway
//! re-resolved, a neighbour's host route) since it asks the FIB itself.
//! A neighbour's MAC changes in place in the next-hop entry: the stacked
//! id stays and readers see the new MAC through it.
//!
//! Lifetime: a stacked id is always one the FIB holds (the result of a
//! lookup at the last commit); an id a re-stack replaces is released by
//! the route that held it, in that same commit, and reused only after a
//! grace period, so a reader that read the old one keeps a valid id
//! until its next quiescent state, as with a lookup.
//!
//! Recursion: a remote that resolves through a tunnel (this one or
//! another) is stacked with [`TunnelAdj::via_tunnel`] set; nothing
//! recurses here (one lookup, no following of the tunnel's own
//! adjacency), and the encapsulating node sends such outer packets
//! through the general route lookup, which drops them
//! (`recursive-encapsulation`) when they reach a tunnel again.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::types::NhId;

/// The tunnel entry readers load: 0 for no tunnel, else `PRESENT`, maybe
/// `VIA_TUNNEL`, and the stacked id in the low bits.
const PRESENT: u32 = 1 << 31;
const VIA_TUNNEL: u32 = 1 << 30;
const ID_MASK: u32 = VIA_TUNNEL - 1;

/// A tunnel's stacked adjacency as readers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelAdj {
    /// What the tunnel's remote resolves to now: the outer packet's next
    /// hop (`NH_NONE`: no route to the remote).
    pub nh: NhId,
    /// That next hop (or a member of its ECMP group) leaves through a
    /// tunnel: encapsulating again would recurse.
    pub via_tunnel: bool,
}

impl TunnelAdj {
    pub(crate) fn pack(self) -> u32 {
        PRESENT | if self.via_tunnel { VIA_TUNNEL } else { 0 } | (self.nh & ID_MASK)
    }

    pub(crate) fn unpack(w: u32) -> Option<TunnelAdj> {
        (w & PRESENT != 0).then_some(TunnelAdj { nh: w & ID_MASK, via_tunnel: w & VIA_TUNNEL != 0 })
    }
}

/// The readers' table: one word per interface index (u16), 256 KiB
/// reserved, touched only where tunnels are.
pub(crate) struct TunnelTable {
    words: Box<[AtomicU32]>,
}

impl TunnelTable {
    pub(crate) fn new() -> TunnelTable {
        TunnelTable { words: bytemuck::allocation::zeroed_slice_box(1 << 16) }
    }

    /// Acquire: the next-hop entry behind the id was written before the id
    /// was stored (`store` releases).
    #[inline]
    pub(crate) fn get(&self, ifindex: u16) -> Option<TunnelAdj> {
        TunnelAdj::unpack(self.words.get(usize::from(ifindex))?.load(Ordering::Acquire))
    }

    pub(crate) fn store(&self, ifindex: u16, adj: Option<TunnelAdj>) {
        if let Some(w) = self.words.get(usize::from(ifindex)) {
            w.store(adj.map_or(0, TunnelAdj::pack), Ordering::Release);
        }
    }
}

/// The writer's record of a tunnel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tunnel {
    pub(crate) ifindex: u16,
    pub(crate) remote: IpAddr,
    /// What readers see now.
    pub(crate) adj: TunnelAdj,
}
