//! `ip4-rewrite`: the forwarding decision made concrete: TTL check and
//! decrement with the incremental checksum update of RFC 1624, MTU check
//! (ICMP "fragmentation needed" when DF is set), and the new Ethernet
//! header from the next hop's MAC and the egress interface.
//!
//! A packet whose egress interface is a GRE tunnel gets the same TTL and
//! MTU treatment (against the tunnel's MTU) and goes to `gre-encap` as it
//! is otherwise: `gre-encap` writes its headers in front of `l3_off`, over
//! the link-layer header the packet arrived with.
//!
//! A packet for an egress interface with an output rule set goes to
//! `ip4-acl-out`, unless it is of the flow that rule set last accepted
//! (`crate::shortcut::OutputAcl`): then straight to `interface-output`,
//! counted on the deciding rule and as `acl-shortcut`.
//!
//! Next nodes: `interface-output`, `ip4-glean` (MAC not resolved yet),
//! `ip4-icmp-error` (TTL expired, too big), `gre-encap`, `ip4-acl-out`
//! (egress interface with an output rule set), `drop`.
//! Counters: [`Ip4RewriteError::DESCS`].
//!
//! Config: the interfaces (MTU, MAC, up, output rule sets) and the FIB's
//! next hops (neighbour MACs).
//!
//! Example: a packet with TTL 64 to a resolved next hop on `wan` leaves
//! for `interface-output` with TTL 63, its checksum updated and
//! `wan`'s MAC and the neighbour's in its Ethernet header; with TTL 1 it
//! leaves for `ip4-icmp-error` (time exceeded), counted as `ttl-expired`.
//!
//! Reference: `rewrite4` rewrites one packet to its adjacency; the batch
//! loop `rewrite_batch` works the adjacency out once per run of one next
//! hop and takes the usual packet through `direct_path` (same bytes and
//! verdicts, `direct_tests`); `rewrite_batch_acl` adds the output rule
//! set's shortcut. Both loops serve `ip6-rewrite` too (`RewriteSteps`).

#![deny(clippy::indexing_slicing)]

use super::*;

/// The `ip4-rewrite` node (see the module).
pub struct Ip4Rewrite {
    fib: FibReader,
    ifs: Snapshot<IfTable>,
    /// Whether an interface has an output rule set.
    acl_out: bool,
    /// The flow an output rule set last accepted.
    shortcut: AclShortcut<Pattern>,
    params: Snapshot<Params>,
}

impl Ip4Rewrite {
    pub fn new(fib: FibReader, ifs: Snapshot<IfTable>, acls: Snapshot<AclTable>, params: Snapshot<Params>) -> Self {
        let acl_out = ifs.current().any_acl_out();
        Ip4Rewrite { fib, ifs, acl_out, shortcut: AclShortcut::new(acls), params }
    }

    /// The batch with output rule sets ([`rewrite_batch_acl`]).
    #[inline(never)]
    fn rewrite_batch_acl(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        let acl = OutputAcl::start(&mut self.shortcut, self.ifs.generation());
        rewrite_batch_acl::<Rewrite4>(cx, pkts, next, (self.ifs.current(), &self.fib), acl);
        if cx.tracing() {
            crate::ip4::trace_rewrite(cx, self.ifs.current(), &self.shortcut, pkts, next);
        }
    }
}

tern_engine::errors! {
    /// `ip4-rewrite`'s counters.
    pub enum Ip4RewriteError {
        NoIf = drop("no-interface", "next hop on an unknown interface"),
        IfDown = drop("interface-down", "egress interface is down"),
        Ttl = info("ttl-expired", "TTL reached 0 (ICMP time exceeded)"),
        TooBig = info("too-big-df", "larger than the egress MTU with DF set (ICMP fragmentation needed)"),
        Frag = drop("fragmentation-unsupported", "larger than the egress MTU without DF (fragmentation not implemented)"),
        Headroom = drop("no-headroom", "no room for the link-layer header"),
        BadNh = drop("bad-nexthop", "next hop of a kind that cannot be forwarded to"),
        AclShortcut = info("acl-shortcut", "accepted by the output rule set without ip4-acl-out: a flow it accepted before"),
    }
}

tern_engine::edges! {
    /// The next nodes of `ip4-rewrite` (table 0) and `ip6-rewrite`
    /// (table 1): one enum, as the two share their loops.
    pub enum RewriteNext {
        Drop = ["drop", "drop"],
        Output = ["interface-output", "interface-output"],
        /// The next hop's link-layer address is not resolved yet.
        Glean = ["ip4-glean", "ip6-glean"],
        /// TTL or hop limit expired, too big, beyond scope.
        Icmp = ["ip4-icmp-error", "ip6-icmp-error"],
        Gre = ["gre-encap", "gre-encap"],
        /// The egress interface has an output rule set.
        AclOut = ["ip4-acl-out", "ip6-acl-out"],
    }
}

impl Node for Ip4Rewrite {
    fn name(&self) -> &'static str {
        "ip4-rewrite"
    }
    fn nexts(&self) -> &'static [&'static str] {
        RewriteNext::names(0)
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip4RewriteError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        if self.ifs.refresh() {
            self.acl_out = self.ifs.current().any_acl_out();
        }
        self.params.refresh();
        let fast = self.params.current().fast_paths;
        if self.acl_out && fast.direct && fast.acl_shortcut {
            self.rewrite_batch_acl(cx, pkts, next);
        } else {
            if self.acl_out {
                self.shortcut.forget();
            }
            // `FastPaths::direct` as a constant: no test per packet.
            if fast.direct {
                rewrite_batch::<Rewrite4, true>(cx, pkts, next, (self.ifs.current(), &self.fib));
            } else {
                rewrite_batch::<Rewrite4, false>(cx, pkts, next, (self.ifs.current(), &self.fib));
            }
        }
    }
}

/// A family's steps of its rewrite node, for the loop both share with
/// output rule sets ([`rewrite_batch_acl`]).
pub(crate) trait RewriteSteps {
    type Pattern: FlowPattern;
    const ETHERTYPE: u16;
    /// The node's `acl-shortcut` counter.
    const ACL_SHORTCUT: u16;
    /// The direct path of a packet (`m`, its data `d`) to adjacency `a`
    /// whose direct path goes to `direct`: its next index, or None for
    /// [`RewriteSteps::general`].
    fn direct(m: &mut Meta, d: &mut [u8], a: &Adj, direct: Option<u16>) -> Option<u16>;
    /// Every other packet.
    fn general(cx: &mut Cx<'_>, p: PktIdx, a: &Adj) -> u16;
}

struct Rewrite4;

impl RewriteSteps for Rewrite4 {
    type Pattern = Pattern;
    const ETHERTYPE: u16 = ETH_P_IPV4;
    const ACL_SHORTCUT: u16 = Ip4RewriteError::AclShortcut as u16;
    #[inline(always)]
    fn direct(m: &mut Meta, d: &mut [u8], a: &Adj, direct: Option<u16>) -> Option<u16> {
        direct_path((m, d), a, direct, ttl4)
    }
    #[inline(always)]
    fn general(cx: &mut Cx<'_>, p: PktIdx, a: &Adj) -> u16 {
        rewrite4(cx, p, a)
    }
}

/// The reference: one packet to its adjacency `a`, every check in turn.
#[inline(never)]
fn rewrite4(cx: &mut Cx<'_>, p: PktIdx, a: &Adj) -> u16 {
    match a.state {
        AdjState::Ready | AdjState::Unresolved | AdjState::Tunnel => {}
        AdjState::NoInterface => return cx.drop(p, Ip4RewriteError::NoIf),
        AdjState::InterfaceDown => return cx.drop(p, Ip4RewriteError::IfDown),
        AdjState::NotForwardable => return cx.drop(p, Ip4RewriteError::BadNh),
    }
    let (m, d) = cx.pool.pkt_mut(p);
    let l3 = m.l3_off as usize;
    let local = m.flags & flags::LOCAL_ORIGIN != 0;
    let Some(ip) = d.get_mut(l3..l3 + 20) else { return cx.drop(p, Ip4RewriteError::Headroom) };
    // The 20 bytes are there: the view's reads are in bounds.
    let mut ip = tern_wire::Ipv4Packet::new_unchecked(ip);
    let ttl = ip.ttl();
    if !local && ttl <= 1 {
        m.aux = icmp_aux(ICMP_TIME_EXCEEDED, 0, 0);
        cx.count(Ip4RewriteError::Ttl, 1);
        return RewriteNext::Icmp as u16;
    }
    if ip.total_len() > a.mtu {
        if ip.dont_frag() {
            m.aux = icmp_aux(ICMP_DEST_UNREACH, UNREACH_FRAG_NEEDED, a.mtu);
            cx.count(Ip4RewriteError::TooBig, 1);
            return RewriteNext::Icmp as u16;
        }
        return cx.drop(p, Ip4RewriteError::Frag);
    }
    // Errors above need no link-layer address; only now resolve it.
    if a.state == AdjState::Unresolved {
        return RewriteNext::Glean as u16;
    }
    if !local {
        // RFC 1624: only the TTL/protocol word changes.
        ip.decrement_ttl();
    }
    let l2 = a.l2_len;
    m.tx_if = a.ifindex;
    if a.state == AdjState::Tunnel {
        return RewriteNext::Gre as u16;
    }
    let next = if a.acl_out { RewriteNext::AclOut as u16 } else { RewriteNext::Output as u16 };
    if l2 == l3 {
        // The data already starts `l2` bytes before L3 (the usual case):
        // nothing moves and the slice in hand is still the packet's.
        write_hdr(d, a, l2);
        return next;
    }
    if !set_l2_len(cx.pool, p, l2) {
        return cx.drop(p, Ip4RewriteError::Headroom);
    }
    write_hdr(cx.pool.data_mut(p), a, l2);
    next
}

/// Writes the adjacency's `l2`-byte link-layer header at the start of `d`.
#[inline(always)]
pub(crate) fn write_hdr(d: &mut [u8], a: &Adj, l2: usize) {
    // The untagged header as a fixed-size copy (a length known only at
    // run time is a call to memcpy per packet).
    if l2 == 14 {
        if let (Some(h), Some(src)) = (d.first_chunk_mut::<14>(), a.hdr.first_chunk::<14>()) {
            *h = *src;
        }
    } else if let (Some(h), Some(src)) = (d.get_mut(..l2), a.hdr.get(..l2)) {
        copy_l2(h, src);
    }
}

/// A link-layer header of any length (802.1Q): out of line, so that the
/// compiler does not fold the fixed-size untagged copy into this call.
#[inline(never)]
pub(crate) fn copy_l2(h: &mut [u8], src: &[u8]) {
    h.copy_from_slice(src);
}

// The batch loops and their direct path.

/// A rewrite node's batch (on interface table `ifs`, next hops of
/// `fib`) without the output rule sets' shortcut. Consecutive packets
/// mostly share a next hop: the loop works out its adjacency once, and
/// whether it takes the direct path ([`RewriteSteps::direct`]).
#[inline(always)]
pub(crate) fn rewrite_batch<F: RewriteSteps, const FAST: bool>(
    cx: &mut Cx<'_>,
    pkts: &[PktIdx],
    next: &mut [u16],
    (ifs, fib): (&IfTable, &FibReader),
) {
    let mut cache: (NhId, Adj) = (u32::MAX, Adj::new(ifs, &NextHop::NONE, F::ETHERTYPE));
    let mut direct: Option<u16> = None;
    for (o, &p) in next.iter_mut().zip(pkts) {
        let (m, d) = cx.pool.pkt_mut(p);
        if cache.0 != m.nh {
            cache = (m.nh, Adj::new(ifs, &fib.nexthop(m.nh), F::ETHERTYPE));
            direct = direct_next(&cache.1).filter(|_| FAST);
        }
        if let Some(nx) = F::direct(m, d, &cache.1, direct) {
            *o = nx;
            continue;
        }
        *o = F::general(cx, p, &cache.1);
    }
}

/// A rewrite node's batch with output rule sets: as [`rewrite_batch`],
/// and while the shortcut `acl` has a flow, a packet bound for the output
/// rule set's node ([`RewriteNext::AclOut`]) asks it first: a run of the flow's
/// packets on an adjacency the flow applies to (`ask`), each
/// compared before its header and metadata are written (a load just
/// after a narrower store to its bytes waits for it); then, for a packet
/// the run did not take, the flow at another length. Once a packet goes
/// to the ACL node, [`rewrite_batch`] takes the rest of the batch. Counts
/// what the shortcut took as `acl-shortcut` ([`RewriteSteps::ACL_SHORTCUT`]).
///
/// Measured (callgrind, instructions per packet of `tern-bench engine
/// --packets 1000000 --scenario single-flow-50fw-out`, over plain's
/// 429.4): 27.7 with every packet through `ip4-acl-out`, 26.2 with the
/// shortcut asked inside the rewrite loop (its compare, the transmitting
/// interface and the verdict kept among the loop's registers), 7.6 with
/// the run's own loop, 13.6 with this loop shared by both families and
/// the plain loop taking the rest after a stop (single-flow6-50fw-out
/// 14.7 over plain6, 255.5 without the shortcut;
/// `git show fdbc271:docs/PERFORMANCE.md`, "The shortcut for output rule sets").
pub(crate) fn rewrite_batch_acl<F: RewriteSteps>(
    cx: &mut Cx<'_>,
    pkts: &[PktIdx],
    next: &mut [u16],
    (ifs, fib): (&IfTable, &FibReader),
    mut acl: OutputAcl<'_, F::Pattern>,
) {
    let mut cache: (NhId, Adj) = (u32::MAX, Adj::new(ifs, &NextHop::NONE, F::ETHERTYPE));
    let mut direct: Option<u16> = None;
    // Whether the adjacency's packets, bound for the output rule set's
    // node, ask the shortcut first: its flow's transmitting interface,
    // the shortcut not stopped in this batch.
    let mut ask = false;
    let mut i = 0;
    while let Some(&p) = pkts.get(i)
        && acl.asks()
    {
        let nh = cx.pool.meta(p).nh;
        if cache.0 != nh {
            cache = (nh, Adj::new(ifs, &fib.nexthop(nh), F::ETHERTYPE));
            direct = direct_next(&cache.1);
            ask = direct == Some(RewriteNext::AclOut as u16) && acl.applies(cache.1.ifindex);
        }
        let a = &cache.1;
        if ask {
            let run = (pkts.get(i..).unwrap_or_default(), next.get_mut(i..).unwrap_or_default());
            let out = RewriteNext::Output as u16;
            let taken =
                acl.run(cx.pool, run, nh, out, |m, d| F::direct(m, d, a, Some(RewriteNext::AclOut as u16)).is_some());
            if taken > 0 {
                i += taken;
                continue;
            }
        }
        let Some(o) = next.get_mut(i) else { break };
        i += 1;
        let (m, d) = cx.pool.pkt_mut(p);
        let asked =
            if ask { acl.ask(meta16(m), d.get(usize::from(m.l3_off)..).unwrap_or_default()) } else { Asked::No };
        *o = match F::direct(m, d, a, direct) {
            Some(nx) => nx,
            None => F::general(cx, p, a),
        };
        if *o == RewriteNext::AclOut as u16 && acl.decide(asked, cx.pool.meta(p)) {
            *o = RewriteNext::Output as u16;
        }
    }
    if let (Some(rest), Some(next)) = (pkts.get(i..), next.get_mut(i..)) {
        rewrite_batch::<F, true>(cx, rest, next, (ifs, fib));
    }
    let taken = acl.finish(cx, ifs, pkts, next, RewriteNext::AclOut as u16);
    if taken != 0 {
        cx.count(F::ACL_SHORTCUT, taken);
    }
}

/// Notes on the traced packets of a rewrite node's batch with the
/// output rule sets' shortcut the packets it took: those bound for
/// `interface-output` on an interface with an output rule set.
#[cold]
#[inline(never)]
pub(crate) fn trace_rewrite<P: FlowPattern>(
    cx: &mut Cx<'_>,
    ifs: &IfTable,
    shortcut: &AclShortcut<P>,
    pkts: &[PktIdx],
    next: &[u16],
) {
    for (&p, &n) in pkts.iter().zip(next) {
        let m = cx.pool.meta(p);
        if m.flags & flags::TRACED == 0 || n != RewriteNext::Output as u16 {
            continue;
        }
        if ifs.get(m.tx_if).is_some_and(|f| f.acl_out.is_some()) {
            let note = shortcut.note();
            cx.trace_note(p, || note);
        }
    }
}

/// A rewrite node's usual packet in one go, to adjacency `a` whose
/// direct path goes to `direct` if it has one: a forwarded (not locally
/// made) packet (`m`, its data `d`) whose 14-byte link-layer header
/// precedes L3 and whose first `N` bytes `l3` passes (the family's checks
/// and writes of its L3 header: [`ttl4`], `hop6`; nothing written when it
/// fails) gets the adjacency's link-layer header (but for a tunnel) and
/// transmitting interface. Its next index, or None for the general path
/// (`rewrite4`, `rewrite6`), which takes every other packet.
#[inline(always)]
pub(crate) fn direct_path<const N: usize>(
    (m, d): (&mut Meta, &mut [u8]),
    a: &Adj,
    direct: Option<u16>,
    l3: impl FnOnce(&mut [u8; N], u16) -> bool,
) -> Option<u16> {
    if let Some(nx) = direct
        && m.l3_off == 14
        && m.flags & flags::LOCAL_ORIGIN == 0
        && let Some(f) = d.first_chunk_mut::<N>()
        && l3(f, a.mtu)
    {
        if nx != RewriteNext::Gre as u16
            && let Some(h) = a.hdr.first_chunk::<14>()
        {
            f[..14].copy_from_slice(h);
        }
        m.tx_if = a.ifindex;
        return Some(nx);
    }
    None
}

/// `ip4-rewrite`'s direct path on a packet's link-layer and IPv4 header
/// (`f`): TTL above 1 and within `mtu`, then the TTL decremented with its
/// checksum (RFC 1624); whether it passed.
#[inline(always)]
fn ttl4(f: &mut [u8; 34], mtu: u16) -> bool {
    let ttl = f[14 + 8];
    if ttl <= 1 || u16::from_be_bytes([f[14 + 2], f[14 + 3]]) > mtu {
        return false;
    }
    f[14 + 8] = ttl - 1;
    let c = checksum::ttl_decremented(u16::from_be_bytes([f[14 + 10], f[14 + 11]]));
    [f[14 + 10], f[14 + 11]] = c.to_be_bytes();
    true
}

/// The next index of the direct path for an adjacency that allows it: a
/// ready untagged one (its header written in front of L3), or a tunnel
/// (`gre-encap` writes its headers over the arriving link-layer header);
/// None otherwise. `ip6-rewrite` has the same next indexes.
#[inline]
pub(crate) fn direct_next(a: &Adj) -> Option<u16> {
    match a.state {
        AdjState::Ready if a.l2_len == 14 => {
            Some(if a.acl_out { RewriteNext::AclOut as u16 } else { RewriteNext::Output as u16 })
        }
        AdjState::Tunnel => Some(RewriteNext::Gre as u16),
        _ => None,
    }
}
