//! IPv4 forwarding nodes: `ip4-input`, `ip4-lookup`, `ip4-rewrite`,
//! `ip4-local`.

use crate::acl::Pattern;
use crate::shortcut::{
    AclShortcut, Asked, FlowPattern, InputAcl, NO_FLOW, OutputAcl, ValidateAcl, meta16, validate_batch_acl,
};
use crate::state::{AclTable, IfTable};
use crate::util::*;
use tern_engine::{Cx, ErrorDesc, NEXT_DROP, Node};
use tern_fib::{FibReader, NextHop, NhId, NhKind};
use tern_intrin::Bytes16;
use tern_packet::{MAX_BATCH, Meta, PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::checksum;

/// ICMP type/code (and MTU) a node asks `ip4-icmp-error` to send, packed
/// into `Meta::aux`.
#[inline]
pub fn icmp_aux(ty: u8, code: u8, mtu: u16) -> u32 {
    u32::from(mtu) << 16 | u32::from(ty) << 8 | u32::from(code)
}

pub const ICMP_DEST_UNREACH: u8 = 3;
pub const ICMP_TIME_EXCEEDED: u8 = 11;
pub const UNREACH_NET: u8 = 0;
pub const UNREACH_HOST: u8 = 1;
pub const UNREACH_PROTOCOL: u8 = 2;
pub const UNREACH_PORT: u8 = 3;
pub const UNREACH_FRAG_NEEDED: u8 = 4;
pub const UNREACH_ADMIN: u8 = 13;

// ---------------------------------------------------------------- ip4-input

/// `ip4-input`: validates an IPv4 header (RFC 1812 5.2.2: version, header
/// length, total length against the frame, checksum) and drops martian
/// sources; trims Ethernet padding. Multicast and limited broadcast are
/// not routed: dropped, or with the TAP exception path of Linux mode
/// (`Params::punt_to_tap`) handed to Linux (OSPF hellos, DHCP), through
/// `ip4-punt-acl` when the receiving interface has an input rule set.
///
/// Next nodes: `ip4-lookup`, `ip4-acl-in` (when the receiving interface has
/// an input rule set, unless the packet's flow is one the rule set accepted:
/// `crate::shortcut`), `linux-punt`, `ip4-punt-acl`, `drop`. Counters:
/// [`Ip4InputError::DESCS`].
pub struct Ip4Input {
    ifs: Snapshot<IfTable>,
    params: Snapshot<crate::state::Params>,
    /// By interface index, whether it has an input rule set; empty when
    /// none has, and the loop then skips the question. Worked out again
    /// only when a new table is published.
    acl_in: Vec<bool>,
    /// The flow the input rule set last accepted.
    shortcut: AclShortcut<Pattern>,
}

impl Ip4Input {
    pub fn new(shared: &crate::state::Shared) -> Self {
        let ifs = shared.ifaces.snapshot();
        let acl_in = acl_in_by_index(ifs.current());
        Ip4Input { ifs, params: shared.params.snapshot(), acl_in, shortcut: AclShortcut::new(shared.acls.snapshot()) }
    }
}

/// [`Ip4Input::acl_in`] for a table (by position, as `IfTable::get`).
pub(crate) fn acl_in_by_index(ifs: &IfTable) -> Vec<bool> {
    if !ifs.any_acl_in() {
        return Vec::new();
    }
    ifs.ifs.iter().map(|f| f.acl_in.is_some()).collect()
}

tern_engine::edges! {
    /// `ip4-input`'s next nodes.
    pub enum Ip4InputNext {
        Drop = "drop",
        Lookup = "ip4-lookup",
        /// The receiving interface has an input rule set.
        AclIn = "ip4-acl-in",
        /// Multicast or broadcast for Linux (TAP exception path).
        Punt = "linux-punt",
        /// The same, through the input rule set.
        PuntAcl = "ip4-punt-acl",
    }
}

tern_engine::errors! {
    /// `ip4-input`'s counters.
    pub enum Ip4InputError {
        TooShort = drop("too-short", "shorter than an IPv4 header"),
        BadVersion = drop("bad-version", "IP version is not 4"),
        BadHdrLen = drop("bad-header-length", "IHL below 5 or beyond the frame"),
        BadLen = drop("bad-length", "total length smaller than the header"),
        Truncated = drop("truncated", "total length beyond the frame"),
        BadCsum = drop("bad-checksum", "header checksum does not verify"),
        MartianSrc = drop("martian-source", "source is multicast, broadcast, loopback or 0/8"),
        Multicast = drop("multicast", "multicast destination (no multicast routing)"),
        Broadcast = drop("broadcast", "limited broadcast destination"),
        AclShortcut = info("acl-shortcut", "accepted by the input rule set without ip4-acl-in: a flow it accepted before"),
        MartianDst = drop("martian-destination", "destination in 0/8, 127/8 or 240/4 (RFC 1812 5.3.7)"),
        L2Multi = drop("l2-multicast", "unicast destination in a link-layer broadcast or multicast (RFC 1812 5.3.4)"),
    }
}

impl Node for Ip4Input {
    fn name(&self) -> &'static str {
        "ip4-input"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Ip4InputNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip4InputError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        let ifs_changed = self.ifs.refresh();
        if ifs_changed {
            self.acl_in = acl_in_by_index(self.ifs.current());
        }
        self.params.refresh();
        let punt = self.params.current().punt_to_tap();
        // Two loops, so that the one without input rule sets carries no
        // trace of the question.
        if self.acl_in.is_empty() {
            validate_batch(cx, pkts, next, punt);
        } else {
            let flow = self.shortcut.start(ifs_changed);
            let worker = cx.worker;
            let ifs = self.ifs.current();
            let state = (&self.acl_in[..], ifs, &mut self.shortcut, flow);
            let hits = validate_batch_acl(cx, pkts, next, &Validate4 { punt }, state);
            let taken = self.shortcut.finish(worker, hits);
            if taken != 0 {
                cx.count(Ip4InputError::AclShortcut, taken);
            }
        }
    }
}

/// [`ip4_validate`] over a batch, without input rule sets. Its own
/// function, so that the loop's registers are its own.
#[inline(never)]
fn validate_batch(cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16], punt: bool) {
    for (o, &p) in next.iter_mut().zip(pkts) {
        *o = ip4_validate::<NO_FLOW>(cx, p, punt, None);
    }
}

/// `ip4-input`'s validation with input rule sets, for the shortcut's
/// batch loop.
struct Validate4 {
    punt: bool,
}

impl ValidateAcl<Pattern> for Validate4 {
    #[inline(always)]
    fn validate<const S: u8>(&self, cx: &mut Cx<'_>, p: PktIdx, acl: &mut InputAcl<'_, Pattern>) -> u16 {
        ip4_validate::<S>(cx, p, self.punt, Some(acl))
    }
}

/// `ip4-input`'s general paths with input rule sets (`acl`): a packet
/// bound for `ip4-lookup` or Linux ([`Ip4InputNext::Punt`]) goes
/// through its receiving interface's input rule set first, if it has
/// one; a packet for `ip4-acl-in` stops the shortcut for the rest of the
/// batch.
#[inline]
fn through_acl_in_direct(n: u16, rx_if: u16, acl: Option<&mut InputAcl<'_, Pattern>>) -> u16 {
    let Some(a) = acl else { return n };
    if !a.has_rules(rx_if) {
        return n;
    }
    if n == Ip4InputNext::Lookup as u16 {
        a.stop();
        Ip4InputNext::AclIn as u16
    } else if n == Ip4InputNext::Punt as u16 {
        Ip4InputNext::PuntAcl as u16
    } else {
        n
    }
}

/// Validates one packet's IPv4 header; the next index (lookup, or
/// [`Ip4InputNext::Punt`]: multicast or broadcast for Linux) or a drop.
#[inline(always)]
fn ip4_validate<const S: u8>(
    cx: &mut Cx<'_>,
    p: PktIdx,
    punt: bool,
    mut acl: Option<&mut InputAcl<'_, Pattern>>,
) -> u16 {
    let (m, d) = cx.pool.pkt(p);
    // The metadata as the input rule set's shortcut compares it, read
    // before anything writes it (see `meta16`).
    let meta = if S == NO_FLOW { Bytes16::ZERO } else { meta16(m) };
    let l3off = m.l3_off as usize;
    // The common case in one test: version 4 with a 20-byte header, all of
    // it in the frame (with an input rule set, the first 14 transport
    // bytes too, which its shortcut reads). Everything else takes the
    // general path, which gives these packets the same verdicts.
    let (h, h34) = match acl {
        None => (d.get(l3off..).and_then(|l3| l3.first_chunk::<20>()), None),
        Some(_) => match d.get(l3off..).and_then(|l3| l3.first_chunk::<34>()) {
            Some(h34) => (h34.first_chunk::<20>(), Some(h34)),
            None => (None, None),
        },
    };
    let Some(h) = h.filter(|h| h[0] == 0x45 && m.flags & flags::L2_MULTI == 0 && direct_paths()) else {
        let n = ip4_validate_general(cx, p, punt);
        return through_acl_in_direct(n, cx.pool.meta(p).rx_if, acl);
    };
    let tot = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if tot < 20 {
        return cx.drop(p, Ip4InputError::BadLen);
    }
    let want = l3off + tot;
    if want > d.len() {
        return cx.drop(p, Ip4InputError::Truncated);
    }
    if checksum::header20(h) != 0xffff {
        return cx.drop(p, Ip4InputError::BadCsum);
    }
    // A martian source or a destination in 0/8, 127/8 or 224/3, both in
    // one test.
    if TOP_BYTE[usize::from(h[12])] & MARTIAN_SRC | TOP_BYTE[usize::from(h[16])] & SPECIAL_DST != 0 {
        if TOP_BYTE[usize::from(h[12])] & MARTIAN_SRC != 0 {
            return cx.drop(p, Ip4InputError::MartianSrc);
        }
        let dst = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
        let n = ip4_special_dst(cx, p, punt, dst, want);
        return through_acl_in_direct(n, cx.pool.meta(p).rx_if, acl);
    }
    m.flags |= flags::L3_CSUM_OK;
    // Ethernet padding: trimming only shortens the data, which the frame
    // still holds (the data is `m.len` bytes, so `want` fits in a u16).
    if want < d.len() {
        m.len = want as u16;
    }
    match acl.as_mut() {
        None => Ip4InputNext::Lookup as u16,
        Some(a) => match h34 {
            Some(h34) => a.direct::<S>(meta, m, h34, h34[33]),
            None => Ip4InputNext::Lookup as u16,
        },
    }
}

/// What an address's first byte says, by that byte: [`MARTIAN_SRC`] for
/// 0/8, 127/8 and 224/3 (not a valid source), [`SPECIAL_DST`] for the same
/// (as destinations: 0/8, 127/8 and 240/4 martian, 224/4 multicast,
/// 255.255.255.255 the limited broadcast).
static TOP_BYTE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        if b == 0 || b == 127 || b >= 224 {
            t[b] |= MARTIAN_SRC;
            t[b] |= SPECIAL_DST;
        }
        b += 1;
    }
    t
};
const MARTIAN_SRC: u8 = 1;
const SPECIAL_DST: u8 = 2;

/// [`ip4_validate`] for any header: options, other versions, headers cut
/// short. Same checks, one at a time.
#[cold]
#[inline(never)]
fn ip4_validate_general(cx: &mut Cx<'_>, p: PktIdx, punt: bool) -> u16 {
    let (m, d) = cx.pool.pkt(p);
    let l3off = m.l3_off as usize;
    let Some(l3) = d.get(l3off..) else { return cx.drop(p, Ip4InputError::TooShort) };
    if l3.len() < 20 {
        return cx.drop(p, Ip4InputError::TooShort);
    }
    if l3[0] >> 4 != 4 {
        return cx.drop(p, Ip4InputError::BadVersion);
    }
    let ihl = usize::from(l3[0] & 0x0f) * 4;
    if ihl < 20 || ihl > l3.len() {
        return cx.drop(p, Ip4InputError::BadHdrLen);
    }
    let tot = usize::from(be16(l3, 2));
    if tot < ihl {
        return cx.drop(p, Ip4InputError::BadLen);
    }
    if tot > l3.len() {
        return cx.drop(p, Ip4InputError::Truncated);
    }
    if checksum::data(&l3[..ihl]) != 0xffff {
        return cx.drop(p, Ip4InputError::BadCsum);
    }
    let src = be32(l3, 12);
    let dst = be32(l3, 16);
    let src_top = (src >> 24) as u8;
    if src_top >= 224 || src_top == 127 || src_top == 0 {
        return cx.drop(p, Ip4InputError::MartianSrc);
    }
    let want = l3off + tot;
    if TOP_BYTE[(dst >> 24) as usize] & SPECIAL_DST != 0 || m.flags & flags::L2_MULTI != 0 {
        return ip4_special_dst(cx, p, punt, dst, want);
    }
    cx.pool.meta_mut(p).flags |= flags::L3_CSUM_OK;
    if want < cx.pool.meta(p).len as usize {
        cx.pool.set_len(p, want);
    }
    Ip4InputNext::Lookup as u16
}

/// A valid header whose destination is in 0/8, 127/8 or 224/3, or that
/// came in a link-layer broadcast or multicast: multicast and limited
/// broadcast go to Linux ([`Ip4InputNext::Punt`]) or are dropped; 0/8, 127/8 and
/// the rest of 240/4 are never destinations (RFC 1812 5.3.7), and unicast
/// in a link-layer group frame is not routed (RFC 1812 5.3.4).
#[cold]
#[inline(never)]
fn ip4_special_dst(cx: &mut Cx<'_>, p: PktIdx, punt: bool, dst: u32, want: usize) -> u16 {
    let group = (224..240).contains(&(dst >> 24));
    if !punt && dst == u32::MAX {
        return cx.drop(p, Ip4InputError::Broadcast);
    }
    if !punt && group {
        return cx.drop(p, Ip4InputError::Multicast);
    }
    if !group && dst != u32::MAX {
        let top = dst >> 24;
        if top == 0 || top == 127 || top >= 240 {
            return cx.drop(p, Ip4InputError::MartianDst);
        }
        if cx.pool.meta(p).flags & flags::L2_MULTI != 0 {
            return cx.drop(p, Ip4InputError::L2Multi);
        }
    }
    cx.pool.meta_mut(p).flags |= flags::L3_CSUM_OK;
    if want < cx.pool.meta(p).len as usize {
        cx.pool.set_len(p, want);
    }
    if group || dst == u32::MAX { Ip4InputNext::Punt as u16 } else { Ip4InputNext::Lookup as u16 }
}

// --------------------------------------------------------------- ip4-lookup

/// `ip4-lookup`: longest-prefix match of the destination in the FIB; the
/// chosen next hop goes into `Meta::nh` so later nodes never look up again.
///
/// Next nodes: `ip4-rewrite` (unicast, connected), `ip4-local` (our
/// address), `ip4-icmp-error` (no route, unreachable, prohibited), `drop`
/// (blackhole). Counters: [`Ip4LookupError::DESCS`].
pub struct Ip4Lookup {
    fib: FibReader,
    dst: [u32; MAX_BATCH],
    nh: [NhId; MAX_BATCH],
}

impl Ip4Lookup {
    pub fn new(fib: FibReader) -> Self {
        Ip4Lookup { fib, dst: [0; MAX_BATCH], nh: [0; MAX_BATCH] }
    }
}

tern_engine::errors! {
    /// `ip4-lookup`'s counters.
    pub enum Ip4LookupError {
        Blackhole = drop("blackhole", "route to a blackhole"),
        NoRoute = info("no-route", "no route to the destination (ICMP net unreachable)"),
        Unreachable = info("unreachable", "unreachable route (ICMP host unreachable)"),
        Prohibited = info("prohibited", "prohibit route (ICMP administratively prohibited)"),
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
        let n = pkts.len().min(MAX_BATCH);
        for (dst, &p) in self.dst.iter_mut().zip(pkts) {
            let (m, d) = cx.pool.pkt(p);
            *dst = be32(d, m.l3_off as usize + 16);
        }
        self.fib.lookup_v4_batch(&self.dst[..n], &mut self.nh[..n]);
        // Consecutive packets mostly share a next hop: its kind once, and
        // for the kinds that simply move on (unicast, glean, local) the
        // next index once too (NEXT_DROP: work it out per packet).
        let mut cache: (NhId, u16, NhKind) = (u32::MAX, 0, NhKind::None);
        for (k, ((o, &id), &p)) in next.iter_mut().zip(&self.nh[..n]).zip(pkts).enumerate() {
            if cache.0 != id {
                let kind = self.fib.nexthop(id).kind;
                cache = (id, if direct_paths() { lookup_next(kind) } else { NEXT_DROP }, kind);
            }
            let m = cx.pool.meta_mut(p);
            if cache.1 != NEXT_DROP {
                m.nh = id;
                *o = cache.1;
                if m.flags & flags::TRACED != 0 {
                    trace_nh(cx, &self.fib, p, id);
                }
            } else {
                *o = self.lookup_other(cx, p, id, cache.2, self.dst[k]);
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

/// The lookup's note in a traced packet's record (ip4- and ip6-lookup).
#[cold]
pub(crate) fn trace_nh(cx: &mut Cx<'_>, fib: &FibReader, p: PktIdx, id: NhId) {
    let nh = fib.nexthop(id);
    cx.trace_note(p, || format!("fib: nh {id} {:?} if {} via {} mac {:?}", nh.kind, nh.ifindex, nh.gw, nh.mac));
}

impl Ip4Lookup {
    /// A packet whose next hop is not one [`lookup_next`] settles: an ECMP
    /// group (a member by flow hash), or a route that drops or answers.
    #[inline(never)]
    fn lookup_other(&self, cx: &mut Cx<'_>, p: PktIdx, mut id: NhId, mut kind: NhKind, dst: u32) -> u16 {
        if kind == NhKind::Ecmp {
            let m = cx.pool.meta(p);
            let l3 = &cx.pool.data(p)[m.l3_off as usize..];
            let h = flow_hash(u128::from(be32(l3, 12)), u128::from(dst), l3[9], v4_ports(l3));
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
            trace_nh(cx, &self.fib, p, id);
        }
        next
    }
}

// -------------------------------------------------------------- ip4-rewrite

/// `ip4-rewrite`: the forwarding decision made concrete: TTL check and
/// decrement with the incremental checksum update of RFC 1624, MTU check
/// (ICMP "fragmentation needed" when DF is set), and the new Ethernet
/// header from the next hop's MAC and the egress interface.
///
/// A packet whose egress interface is a GRE tunnel gets the same TTL and
/// MTU treatment (against the tunnel's MTU) and goes to `gre-encap` as it
/// is otherwise: `gre-encap` writes its headers in front of `l3_off`, over
/// the link-layer header the packet arrived with.
///
/// A packet for an egress interface with an output rule set goes to
/// `ip4-acl-out`, unless it is of the flow that rule set last accepted
/// (`crate::shortcut::OutputAcl`): then straight to `interface-output`,
/// counted on the deciding rule and as `acl-shortcut`.
///
/// Next nodes: `interface-output`, `ip4-glean` (MAC not resolved yet),
/// `ip4-icmp-error` (TTL expired, too big), `gre-encap`, `ip4-acl-out`
/// (egress interface with an output rule set), `drop`.
/// Counters: [`Ip4RewriteError::DESCS`].
pub struct Ip4Rewrite {
    fib: FibReader,
    ifs: Snapshot<IfTable>,
    /// Whether an interface has an output rule set.
    acl_out: bool,
    /// The flow an output rule set last accepted.
    shortcut: AclShortcut<Pattern>,
}

impl Ip4Rewrite {
    pub fn new(fib: FibReader, ifs: Snapshot<IfTable>, acls: Snapshot<AclTable>) -> Self {
        let acl_out = ifs.current().any_acl_out();
        Ip4Rewrite { fib, ifs, acl_out, shortcut: AclShortcut::new(acls) }
    }

    /// The batch with output rule sets ([`rewrite_batch_acl`]).
    #[inline(never)]
    fn rewrite_batch_acl(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16], ifs_changed: bool) {
        let acl = OutputAcl::start(&mut self.shortcut, ifs_changed);
        rewrite_batch_acl::<Rewrite4>(cx, pkts, next, (self.ifs.current(), &self.fib), acl);
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
        let ifs_changed = self.ifs.refresh();
        if ifs_changed {
            self.acl_out = self.ifs.current().any_acl_out();
        }
        if self.acl_out {
            self.rewrite_batch_acl(cx, pkts, next, ifs_changed);
        } else {
            rewrite_batch::<Rewrite4>(cx, pkts, next, (self.ifs.current(), &self.fib));
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

/// A rewrite node's batch (on interface table `ifs`, next hops of
/// `fib`) without the output rule sets' shortcut. Consecutive packets
/// mostly share a next hop: the loop works out its adjacency once, and
/// whether it takes the direct path ([`RewriteSteps::direct`]).
#[inline(always)]
pub(crate) fn rewrite_batch<F: RewriteSteps>(
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
            direct = direct_next(&cache.1).filter(|_| direct_paths());
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
/// Measured (callgrind, instructions per packet of `tern bench engine
/// --packets 1000000 --scenario single-flow-50fw-out`, over plain's
/// 429.4): 27.7 with every packet through `ip4-acl-out`, 26.2 with the
/// shortcut asked inside the rewrite loop (its compare, the transmitting
/// interface and the verdict kept among the loop's registers), 7.6 with
/// the run's own loop, 13.6 with this loop shared by both families and
/// the plain loop taking the rest after a stop (single-flow6-50fw-out
/// 14.7 over plain6, 255.5 without the shortcut;
/// docs/PERFORMANCE.md, "The shortcut for output rule sets").
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
            direct = direct_next(&cache.1).filter(|_| direct_paths());
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
        rewrite_batch::<F>(cx, rest, next, (ifs, fib));
    }
    let taken = acl.finish(cx, ifs, pkts, next, RewriteNext::AclOut as u16);
    if taken != 0 {
        cx.count(F::ACL_SHORTCUT, taken);
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
    let ttl = ip[8];
    if !local && ttl <= 1 {
        m.aux = icmp_aux(ICMP_TIME_EXCEEDED, 0, 0);
        cx.count(Ip4RewriteError::Ttl, 1);
        return RewriteNext::Icmp as u16;
    }
    let tot = be16(ip, 2);
    if tot > a.mtu {
        if ip[6] & 0x40 != 0 {
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
        ip[8] = ttl - 1;
        put16(ip, 10, checksum::ttl_decremented(be16(ip, 10)));
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

// ---------------------------------------------------------------- ip4-local

/// `ip4-local`: packets addressed to one of tern's own addresses. Answers
/// ICMP echo requests (RFC 792, RFC 1812 4.3.3.6) and answers UDP and other
/// protocols it does not serve with ICMP unreachable (port, protocol), as a
/// host would (RFC 1122 3.2.2.1).
///
/// GRE packets go to `gre-input`, which decapsulates those of configured
/// tunnels.
///
/// In Linux mode (`Params::linux_owns_local`) the kernel received its own
/// copy of the frame and answers it (ping, BGP, SSH, ...): tern drops its
/// copy, counted as `left-to-linux`, so nothing is answered twice. GRE of
/// tern's own tunnels is still decapsulated here. With the TAP exception
/// path (`Params::punt_to_tap`) the kernel has no copy: the packet goes
/// to `linux-punt` instead.
///
/// Next nodes: `ip4-lookup` (the echo reply), `ip4-icmp-error`,
/// `gre-input`, `linux-punt`, `drop`. Counters: [`Ip4LocalError::DESCS`].
pub struct Ip4Local {
    params: Snapshot<crate::state::Params>,
}

impl Ip4Local {
    pub fn new(shared: &crate::state::Shared) -> Self {
        Ip4Local { params: shared.params.snapshot() }
    }
}

tern_engine::errors! {
    /// `ip4-local`'s counters.
    pub enum Ip4LocalError {
        Fragment = drop("fragment", "fragment addressed to the router (no reassembly)"),
        BadIcmp = drop("bad-icmp", "ICMP message too short or with a bad checksum"),
        Echo = info("echo-reply-sent", "echo requests answered"),
        IcmpOther = drop("icmp-consumed", "ICMP message for the router other than echo request"),
        Tcp = drop("tcp-to-router", "TCP segment for the router (no local service)"),
        Udp = info("udp-port-unreachable", "UDP datagram for the router (ICMP port unreachable)"),
        Proto = info("protocol-unreachable", "other protocol for the router (ICMP protocol unreachable)"),
        Linux = drop("left-to-linux", "for the router in Linux mode: the kernel got its own copy and answers it"),
    }
}

tern_engine::edges! {
    /// `ip4-local`'s next nodes.
    pub enum Ip4LocalNext {
        Drop = "drop",
        /// Echo replies.
        Lookup = "ip4-lookup",
        Icmp = "ip4-icmp-error",
        Gre = "gre-input",
        Punt = "linux-punt",
    }
}

impl Node for Ip4Local {
    fn name(&self) -> &'static str {
        "ip4-local"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Ip4LocalNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip4LocalError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.params.refresh();
        let params = self.params.current();
        let (linux, punt) = (params.linux_owns_local, params.punt_to_tap());
        for (i, &p) in pkts.iter().enumerate() {
            next[i] = local4(cx, p, linux, punt);
        }
    }
}

fn local4(cx: &mut Cx<'_>, p: PktIdx, linux: bool, punt: bool) -> u16 {
    let (m, d) = cx.pool.pkt_mut(p);
    let l3off = m.l3_off as usize;
    let l3 = &mut d[l3off..];
    let ihl = usize::from(l3[0] & 0x0f) * 4;
    if linux && l3[9] != 47 {
        return if punt { Ip4LocalNext::Punt as u16 } else { cx.drop(p, Ip4LocalError::Linux) };
    }
    if be16(l3, 6) & 0x3fff != 0 {
        return cx.drop(p, Ip4LocalError::Fragment);
    }
    match l3[9] {
        1 => {
            let icmp_len = l3.len() - ihl;
            if icmp_len < 8 || checksum::data(&l3[ihl..]) != 0xffff {
                return cx.drop(p, Ip4LocalError::BadIcmp);
            }
            if l3[ihl] != 8 || l3[ihl + 1] != 0 {
                return cx.drop(p, Ip4LocalError::IcmpOther);
            }
            // Echo reply in place: type 8 -> 0, swap addresses, fresh TTL.
            l3[ihl] = 0;
            let c = checksum::update(be16(l3, ihl + 2), 0x0800, 0x0000);
            put16(l3, ihl + 2, c);
            let mut src = [0u8; 4];
            src.copy_from_slice(&l3[12..16]);
            l3.copy_within(16..20, 12);
            l3[16..20].copy_from_slice(&src);
            l3[8] = 64;
            l3[10] = 0;
            l3[11] = 0;
            let c = !checksum::data(&l3[..ihl]);
            put16(l3, 10, c);
            m.flags |= flags::LOCAL_ORIGIN;
            cx.count(Ip4LocalError::Echo, 1);
            Ip4LocalNext::Lookup as u16
        }
        6 => cx.drop(p, Ip4LocalError::Tcp),
        47 => Ip4LocalNext::Gre as u16,
        17 => {
            m.aux = icmp_aux(ICMP_DEST_UNREACH, UNREACH_PORT, 0);
            cx.count(Ip4LocalError::Udp, 1);
            Ip4LocalNext::Icmp as u16
        }
        _ => {
            m.aux = icmp_aux(ICMP_DEST_UNREACH, UNREACH_PROTOCOL, 0);
            cx.count(Ip4LocalError::Proto, 1);
            Ip4LocalNext::Icmp as u16
        }
    }
}
