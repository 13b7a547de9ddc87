//! `ip4-lookup`: longest-prefix match of the destination in the FIB; the
//! chosen next hop goes into `Meta::nh` so later nodes never look up again.
//!
//! Next nodes: `ip4-rewrite` (unicast, connected), `ip4-local` (our
//! address), `ip4-icmp-error` (no route, unreachable, prohibited), `drop`
//! (blackhole). Counters: [`Ip4LookupError::DESCS`].
//!
//! Config: the FIB (routes and next hops, read lock-free).
//!
//! Example: with a route 10.0.2.0/24 via 10.0.2.2, a packet for 10.0.2.9
//! gets that next hop in `Meta::nh` and leaves for `ip4-rewrite`; without
//! a route it leaves for `ip4-icmp-error` with net unreachable in
//! `Meta::aux`, counted as `no-route`.
//!
//! Reference: `Ip4Lookup::lookup_other` settles any next hop of one
//! packet; the batch loop looks all destinations up in one call and gives
//! a run of packets with one next hop of a kind that needs nothing per
//! packet (`lookup_next`) its next index once.
//!
//! Trusts no header: a packet whose IPv4 header does not fit its buffer
//! (it did not come through `ip4-input`, a bug upstream) is dropped and
//! counted as `truncated`, its destination never read.

use super::*;
use std::net::IpAddr;
use tern_wire::Ipv4Packet;

/// The `ip4-lookup` node (see the module).
pub struct Ip4Lookup {
    fib: FibReader,
    params: Snapshot<Params>,
    dst: [u32; MAX_BATCH],
    nh: [NhId; MAX_BATCH],
}

impl Ip4Lookup {
    pub fn new(fib: FibReader, params: Snapshot<Params>) -> Self {
        Ip4Lookup { fib, params, dst: [0; MAX_BATCH], nh: [0; MAX_BATCH] }
    }
}

tern_engine::errors! {
    /// `ip4-lookup`'s counters.
    pub enum Ip4LookupError {
        Blackhole = drop("blackhole", "route to a blackhole"),
        NoRoute = info("no-route", "no route to the destination (ICMP net unreachable)"),
        Unreachable = info("unreachable", "unreachable route (ICMP host unreachable)"),
        Prohibited = info("prohibited", "prohibit route (ICMP administratively prohibited)"),
        Truncated = drop("truncated", "IPv4 header past the end of the packet (not from ip4-input)"),
    }
}

tern_engine::edges! {
    /// `ip4-lookup`'s next nodes.
    pub enum Ip4LookupNext {
        Drop = "drop",
        Rewrite = "ip4-rewrite",
        Local = "ip4-local",
        Icmp = "ip4-icmp-error",
    }
}

impl Node for Ip4Lookup {
    fn name(&self) -> &'static str {
        "ip4-lookup"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Ip4LookupNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip4LookupError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.params.refresh();
        // `FastPaths::direct` as a constant: no test per packet.
        let fast = self.params.current().fast_paths.direct;
        let n = pkts.len().min(MAX_BATCH);
        let pkts = pkts.get(..n).unwrap_or(pkts);
        // The destinations, each header's length checked once; a packet
        // too short for its header (none from `ip4-input`) sends the
        // batch through the loop that drops it.
        let mut short = false;
        for (dst, &p) in self.dst.iter_mut().zip(pkts) {
            let (m, d) = cx.pool.pkt(p);
            *dst = match d.get(m.l3_off as usize..).and_then(<[u8]>::first_chunk::<20>) {
                Some(h) => Ipv4Packet::new_unchecked(h).dst_addr_u32(),
                None => {
                    short = true;
                    0
                }
            };
        }
        match (fast, short) {
            (true, false) => self.lookup_batch::<true, false>(cx, pkts, next),
            (false, false) => self.lookup_batch::<false, false>(cx, pkts, next),
            (true, true) => self.lookup_batch::<true, true>(cx, pkts, next),
            (false, true) => self.lookup_batch::<false, true>(cx, pkts, next),
        }
    }
}

/// Whether packet `p`'s IPv4 header fits its buffer.
#[inline]
fn has_header(cx: &Cx<'_>, p: PktIdx) -> bool {
    let off = cx.pool.meta(p).l3_off as usize;
    cx.pool.data(p).get(off..).is_some_and(|l3| l3.len() >= 20)
}

impl Ip4Lookup {
    /// The batch, its destinations in `self.dst`; with `FAST`, the next
    /// hop kinds that need nothing per packet are settled once per run of
    /// one next hop; with `CHECK`, packets too short for their header are
    /// dropped.
    #[inline(always)]
    fn lookup_batch<const FAST: bool, const CHECK: bool>(
        &mut self,
        cx: &mut Cx<'_>,
        pkts: &[PktIdx],
        next: &mut [u16],
    ) {
        let n = pkts.len();
        let (Some(dsts), Some(nhs)) = (self.dst.get(..n), self.nh.get_mut(..n)) else { return };
        self.fib.lookup_v4_batch(dsts, nhs);
        // Consecutive packets mostly share a next hop: its kind once, and
        // for the kinds that simply move on (unicast, glean, local) the
        // next index once too (NEXT_DROP: work it out per packet).
        let mut cache: (NhId, u16, NhKind) = (u32::MAX, 0, NhKind::None);
        for ((o, (&id, &dst)), &p) in next.iter_mut().zip(self.nh.iter().zip(&self.dst)).zip(pkts) {
            if CHECK && !has_header(cx, p) {
                *o = cx.drop(p, Ip4LookupError::Truncated);
                continue;
            }
            if cache.0 != id {
                let kind = self.fib.nexthop(id).kind;
                cache = (id, if FAST { lookup_next(kind) } else { NEXT_DROP }, kind);
            }
            let m = cx.pool.meta_mut(p);
            if cache.1 != NEXT_DROP {
                m.nh = id;
                *o = cache.1;
                if m.flags & flags::TRACED != 0 {
                    trace_nh(cx, &self.fib, p, IpAddr::V4(dst.into()), id, true);
                }
            } else {
                *o = self.lookup_other(cx, p, id, cache.2, dst);
            }
        }
    }
}

/// The next index for a next hop kind that needs nothing per packet;
/// [`NEXT_DROP`] (which no such kind has) for the others.
#[inline(always)]
fn lookup_next(kind: NhKind) -> u16 {
    match kind {
        NhKind::Unicast | NhKind::Glean => Ip4LookupNext::Rewrite as u16,
        NhKind::Local => Ip4LookupNext::Local as u16,
        _ => NEXT_DROP,
    }
}

/// The lookup's note in a traced packet's record (ip4- and ip6-lookup):
/// the destination looked up, the next hop it gave (id, kind, interface,
/// gateway, MAC), and whether the direct path settled it (a run of one
/// next hop given its next index once). The FIB's readers hold no
/// routes, so the matching prefix is `tern route get`'s to say.
#[cold]
pub(crate) fn trace_nh(cx: &mut Cx<'_>, fib: &FibReader, p: PktIdx, dst: IpAddr, id: NhId, direct: bool) {
    let nh = fib.nexthop(id);
    let how = if direct { ", direct path" } else { "" };
    cx.trace_note(p, || {
        format!("fib: {dst} -> nh {id} {:?} if {} via {} mac {:?}{how}", nh.kind, nh.ifindex, nh.gw, nh.mac)
    });
}

impl Ip4Lookup {
    /// A packet whose next hop is not one [`lookup_next`] settles: an ECMP
    /// group (a member by flow hash), or a route that drops or answers.
    #[inline(never)]
    fn lookup_other(&self, cx: &mut Cx<'_>, p: PktIdx, mut id: NhId, mut kind: NhKind, dst: u32) -> u16 {
        if kind == NhKind::Ecmp {
            let m = cx.pool.meta(p);
            let l3 = cx.pool.data(p).get(m.l3_off as usize..).unwrap_or_default();
            let (src, proto) = match l3.first_chunk::<20>() {
                Some(h) => (Ipv4Packet::new_unchecked(h).src_addr_u32(), h[9]),
                None => (0, 0),
            };
            let h = flow_hash(u128::from(src), u128::from(dst), proto, v4_ports(l3));
            id = self.fib.ecmp_pick(id, h);
            kind = self.fib.nexthop(id).kind;
            cx.pool.meta_mut(p).hash = h;
        }
        let m = cx.pool.meta_mut(p);
        m.nh = id;
        let next = match kind {
            NhKind::Unicast | NhKind::Glean => Ip4LookupNext::Rewrite as u16,
            NhKind::Local => Ip4LookupNext::Local as u16,
            NhKind::Blackhole => cx.drop(p, Ip4LookupError::Blackhole),
            NhKind::Unreachable => {
                m.aux = icmp_aux(ICMP_DEST_UNREACH, UNREACH_HOST, 0);
                cx.count(Ip4LookupError::Unreachable, 1);
                Ip4LookupNext::Icmp as u16
            }
            NhKind::Prohibit => {
                m.aux = icmp_aux(ICMP_DEST_UNREACH, UNREACH_ADMIN, 0);
                cx.count(Ip4LookupError::Prohibited, 1);
                Ip4LookupNext::Icmp as u16
            }
            NhKind::None | NhKind::Ecmp => {
                m.aux = icmp_aux(ICMP_DEST_UNREACH, UNREACH_NET, 0);
                cx.count(Ip4LookupError::NoRoute, 1);
                Ip4LookupNext::Icmp as u16
            }
        };
        if cx.traced(p) {
            trace_nh(cx, &self.fib, p, IpAddr::V4(dst.into()), id, false);
        }
        next
    }
}
