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

// Issue 37 item 3: 10 sites here still index packet or batch data
// directly; they go when this file reads through tern-wire views.
#![allow(clippy::indexing_slicing)]

use super::*;

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
        for (dst, &p) in self.dst.iter_mut().zip(pkts) {
            let (m, d) = cx.pool.pkt(p);
            *dst = be128(d, m.l3_off as usize + 24);
        }
        self.fib.lookup_v6_batch(&self.dst[..n], &mut self.nh[..n]);
        // As in ip4-lookup: the kind once per run of one next hop, and the
        // next index for the kinds that need nothing per packet.
        let mut cache: (NhId, u16, NhKind) = (u32::MAX, NEXT_DROP, NhKind::None);
        for (k, ((o, &id), &p)) in next.iter_mut().zip(&self.nh[..n]).zip(pkts).enumerate() {
            if cache.0 != id {
                let kind = self.fib.nexthop(id).kind;
                let direct = match kind {
                    NhKind::Unicast | NhKind::Glean => Ip6LookupNext::Rewrite as u16,
                    NhKind::Local => Ip6LookupNext::Local as u16,
                    _ => NEXT_DROP,
                };
                cache = (id, if fast { direct } else { NEXT_DROP }, kind);
            }
            let m = cx.pool.meta_mut(p);
            if cache.1 != NEXT_DROP {
                m.nh = id;
                *o = cache.1;
                if m.flags & flags::TRACED != 0 {
                    crate::ip4::trace_nh(cx, &self.fib, p, id);
                }
            } else {
                *o = self.lookup_other(cx, p, id, cache.2, self.dst[k]);
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
            let l3 = &cx.pool.data(p)[off..];
            let ports = if matches!(l3[6], 6 | 17) && l3.len() >= 44 { be32(l3, 40) } else { 0 };
            let flow = u32::from_be_bytes([0, l3[1] & 0x0f, l3[2], l3[3]]);
            let h = flow_hash(be128(l3, 8), dst, l3[6], ports ^ flow);
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
            crate::ip4::trace_nh(cx, &self.fib, p, id);
        }
        next
    }
}
