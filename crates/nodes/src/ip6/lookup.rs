//! `ip6-lookup`: longest-prefix match of the IPv6 destination.
//!
//! Next nodes: `ip6-rewrite`, `ip6-local`, `ip6-icmp-error`, `drop`.
//! Counters: [`Ip6LookupError::DESCS`].
//!
//! Config: the FIB (routes and next hops, read lock-free).
//!
//! Example: with a route 2001:db8:2::/64 via 2001:db8:2::2, a packet for
//! 2001:db8:2::9 gets that next hop in `Meta::nh` and leaves for
//! `ip6-rewrite`; without a route it leaves for `ip6-icmp-error` (no
//! route), counted as `no-route`.
//!
//! Reference: `Ip6Lookup::lookup_other` settles any next hop of one
//! packet; the batch loop gives a run of one next hop its next index once.
//!
//! Trusts no header: a packet whose IPv6 header does not fit its buffer
//! (it did not come through `ip6-input`, a bug upstream) is dropped and
//! counted as `truncated`, its destination never read.

use super::*;
use std::net::IpAddr;
use tern_wire::Ipv6Packet;

/// The `ip6-lookup` node (see the module).
pub struct Ip6Lookup {
    fib: FibReader,
    params: Snapshot<Params>,
    dst: Vec<u128>,
    nh: Vec<NhId>,
}

impl Ip6Lookup {
    pub fn new(fib: FibReader, params: Snapshot<Params>) -> Self {
        Ip6Lookup { fib, params, dst: vec![0; MAX_BATCH], nh: vec![0; MAX_BATCH] }
    }
}

tern_engine::edges! {
    /// `ip6-lookup`'s next nodes.
    pub enum Ip6LookupNext {
        Drop = "drop",
        Rewrite = "ip6-rewrite",
        Local = "ip6-local",
        Icmp = "ip6-icmp-error",
    }
}

tern_engine::errors! {
    /// `ip6-lookup`'s counters.
    pub enum Ip6LookupError {
        Blackhole = drop("blackhole", "route to a blackhole"),
        NoRoute = info("no-route", "no route to the destination (ICMPv6 no route)"),
        Unreachable = info("unreachable", "unreachable route (ICMPv6 address unreachable)"),
        Prohibited = info("prohibited", "prohibit route (ICMPv6 administratively prohibited)"),
        Truncated = drop("truncated", "IPv6 header past the end of the packet (not from ip6-input)"),
    }
}

impl Node for Ip6Lookup {
    fn name(&self) -> &'static str {
        "ip6-lookup"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Ip6LookupNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip6LookupError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.params.refresh();
        let fast = self.params.current().fast_paths.direct;
        let n = pkts.len().min(MAX_BATCH);
        let pkts = pkts.get(..n).unwrap_or(pkts);
        // The destinations, each header's length checked once (as in
        // ip4-lookup).
        let mut short = false;
        for (dst, &p) in self.dst.iter_mut().zip(pkts) {
            let (m, d) = cx.pool.pkt(p);
            *dst = match d.get(m.l3_off as usize..).and_then(<[u8]>::first_chunk::<40>) {
                Some(h) => Ipv6Packet::new_unchecked(h).dst_addr_u128(),
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

/// Whether packet `p`'s IPv6 header fits its buffer.
#[inline]
fn has_header(cx: &Cx<'_>, p: PktIdx) -> bool {
    let off = cx.pool.meta(p).l3_off as usize;
    cx.pool.data(p).get(off..).is_some_and(|l3| l3.len() >= 40)
}

impl Ip6Lookup {
    /// The batch, its destinations in `self.dst`: as in ip4-lookup, the
    /// kind once per run of one next hop, and with `FAST` the next index
    /// for the kinds that need nothing per packet; with `CHECK`, packets
    /// too short for their header are dropped.
    #[inline(always)]
    fn lookup_batch<const FAST: bool, const CHECK: bool>(
        &mut self,
        cx: &mut Cx<'_>,
        pkts: &[PktIdx],
        next: &mut [u16],
    ) {
        let n = pkts.len();
        let (Some(dsts), Some(nhs)) = (self.dst.get(..n), self.nh.get_mut(..n)) else { return };
        self.fib.lookup_v6_batch(dsts, nhs);
        let mut cache: (NhId, u16, NhKind) = (u32::MAX, NEXT_DROP, NhKind::None);
        // The destination (16 bytes) is loaded only off the usual path.
        let dst = |k: usize| self.dst.get(k).copied().unwrap_or_default();
        for (k, ((o, &id), &p)) in next.iter_mut().zip(&self.nh).zip(pkts).enumerate() {
            if CHECK && !has_header(cx, p) {
                *o = cx.drop(p, Ip6LookupError::Truncated);
                continue;
            }
            if cache.0 != id {
                let kind = self.fib.nexthop(id).kind;
                let direct = match kind {
                    NhKind::Unicast | NhKind::Glean => Ip6LookupNext::Rewrite as u16,
                    NhKind::Local => Ip6LookupNext::Local as u16,
                    _ => NEXT_DROP,
                };
                cache = (id, if FAST { direct } else { NEXT_DROP }, kind);
            }
            let m = cx.pool.meta_mut(p);
            if cache.1 != NEXT_DROP {
                m.nh = id;
                *o = cache.1;
                if m.flags & flags::TRACED != 0 {
                    crate::ip4::trace_nh(cx, &self.fib, p, IpAddr::V6(dst(k).into()), id, true);
                }
            } else {
                *o = self.lookup_other(cx, p, id, cache.2, dst(k));
            }
        }
    }
}

impl Ip6Lookup {
    /// A packet whose next hop is an ECMP group or a route that drops or
    /// answers.
    #[inline(never)]
    fn lookup_other(&self, cx: &mut Cx<'_>, p: PktIdx, mut id: NhId, mut kind: NhKind, dst: u128) -> u16 {
        if kind == NhKind::Ecmp {
            let off = cx.pool.meta(p).l3_off as usize;
            let l3 = cx.pool.data(p).get(off..).unwrap_or_default();
            let (src, proto, flow) = match l3.first_chunk::<40>() {
                Some(h) => {
                    let ip = Ipv6Packet::new_unchecked(h);
                    (u128::from(ip.src_addr()), ip.next_header().0, ip.flow_label())
                }
                None => (0, 0, 0),
            };
            let ports = if matches!(proto, 6 | 17) { be32(l3, 40) } else { 0 };
            let h = flow_hash(src, dst, proto, ports ^ flow);
            id = self.fib.ecmp_pick(id, h);
            kind = self.fib.nexthop(id).kind;
            cx.pool.meta_mut(p).hash = h;
        }
        let m = cx.pool.meta_mut(p);
        m.nh = id;
        let next = match kind {
            NhKind::Unicast | NhKind::Glean => Ip6LookupNext::Rewrite as u16,
            NhKind::Local => Ip6LookupNext::Local as u16,
            NhKind::Blackhole => cx.drop(p, Ip6LookupError::Blackhole),
            NhKind::Unreachable => {
                m.aux = icmp_aux(ICMP6_DEST_UNREACH, U6_ADDR, 0);
                cx.count(Ip6LookupError::Unreachable, 1);
                Ip6LookupNext::Icmp as u16
            }
            NhKind::Prohibit => {
                m.aux = icmp_aux(ICMP6_DEST_UNREACH, U6_ADMIN, 0);
                cx.count(Ip6LookupError::Prohibited, 1);
                Ip6LookupNext::Icmp as u16
            }
            NhKind::None | NhKind::Ecmp => {
                m.aux = icmp_aux(ICMP6_DEST_UNREACH, U6_NO_ROUTE, 0);
                cx.count(Ip6LookupError::NoRoute, 1);
                Ip6LookupNext::Icmp as u16
            }
        };
        if cx.traced(p) {
            crate::ip4::trace_nh(cx, &self.fib, p, IpAddr::V6(dst.into()), id, false);
        }
        next
    }
}
