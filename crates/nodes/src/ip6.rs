//! IPv6 forwarding nodes: `ip6-input`, `ip6-lookup`, `ip6-rewrite`,
//! `ip6-local` (echo, Neighbour Discovery).

use crate::ip4::{RewriteNext, RewriteSteps, direct_path, icmp_aux, rewrite_batch, rewrite_batch_acl};
use crate::shortcut::{
    AclShortcut, InputAcl, NO_FLOW, OutputAcl, Pattern6, TCP_FLOW, ValidateAcl, meta16, validate_batch_acl,
};
use crate::state::{AclTable, Event, Heard, IfTable, Iface, Shared, is_link_local};
use crate::util::*;
use std::net::{IpAddr, Ipv6Addr};
use tern_engine::{Cx, ErrorDesc, NEXT_DROP, Node};
use tern_fib::{FibReader, NhId, NhKind};
use tern_intrin::Bytes16;
use tern_packet::{MAX_BATCH, Meta, PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::{IpProtocol, checksum, ipv6ext};

pub const ICMP6_DEST_UNREACH: u8 = 1;
pub const ICMP6_PACKET_TOO_BIG: u8 = 2;
pub const ICMP6_TIME_EXCEEDED: u8 = 3;
pub const ICMP6_PARAM_PROBLEM: u8 = 4;
pub const U6_NO_ROUTE: u8 = 0;
pub const U6_ADMIN: u8 = 1;
pub const U6_BEYOND_SCOPE: u8 = 2;
pub const U6_ADDR: u8 = 3;
pub const U6_PORT: u8 = 4;
pub const U6_REJECT: u8 = 6;

fn addr(d: &[u8], at: usize) -> Ipv6Addr {
    Ipv6Addr::from(be128(d, at))
}

// ---------------------------------------------------------------- ip6-input

/// `ip6-input`: validates the fixed IPv6 header (RFC 8200 section 3:
/// version, payload length against the frame), drops martians, trims
/// padding, and sends link-scoped traffic for tern (ND, link-local) to
/// `ip6-local` (through `ip6-punt-acl` when the receiving interface has an
/// input rule set): link-local destinations are never forwarded (RFC 4291
/// section 2.5.6). Multicast groups tern does not listen to are dropped,
/// or with the TAP exception path of Linux mode (`Params::punt_to_tap`)
/// handed to Linux (OSPFv3, MLD), through `ip6-punt-acl` when the
/// receiving interface has an input rule set.
///
/// Next nodes: `ip6-lookup`, `ip6-local`, `ip6-acl-in` (when the receiving
/// interface has an input rule set, unless the packet's flow is one the
/// rule set accepted: `crate::shortcut`), `linux-punt`,
/// `ip6-punt-acl`, `drop`. Counters: [`Ip6InputError::DESCS`].
pub struct Ip6Input {
    ifs: Snapshot<IfTable>,
    params: Snapshot<crate::state::Params>,
    /// By interface index, whether it has an input rule set; empty when
    /// none has (as `Ip4Input`'s).
    acl_in: Vec<bool>,
    /// The flow the input rule set last accepted.
    shortcut: AclShortcut<Pattern6>,
}

impl Ip6Input {
    pub fn new(shared: &Shared) -> Self {
        let ifs = shared.ifaces.snapshot();
        let acl_in = crate::ip4::acl_in_by_index(ifs.current());
        Ip6Input { ifs, params: shared.params.snapshot(), acl_in, shortcut: AclShortcut::new(shared.acls.snapshot()) }
    }
}

tern_engine::errors! {
    /// `ip6-input`'s counters.
    pub enum Ip6InputError {
        TooShort = drop("too-short", "shorter than an IPv6 header"),
        BadVersion = drop("bad-version", "IP version is not 6"),
        Truncated = drop("truncated", "payload length beyond the frame"),
        MartianSrc = drop("martian-source", "multicast or loopback source, or the unspecified source to a unicast address"),
        BadDst = drop("bad-destination", "unspecified or loopback destination"),
        Multicast = drop("multicast", "multicast group tern does not listen to"),
        LinkLocal = drop("link-local-not-ours", "link-local destination that is not tern's"),
        AclShortcut = info("acl-shortcut", "accepted by the input rule set without ip6-acl-in: a flow it accepted before"),
        L2Multi = drop("l2-multicast", "unicast destination in a link-layer broadcast or multicast (RFC 1812 5.3.4)"),
    }
}

tern_engine::edges! {
    /// `ip6-input`'s next nodes.
    pub enum Ip6InputNext {
        Drop = "drop",
        Lookup = "ip6-lookup",
        /// ND, and link-local or multicast for tern.
        Local = "ip6-local",
        /// The receiving interface has an input rule set.
        AclIn = "ip6-acl-in",
        /// Multicast for Linux (TAP exception path).
        Punt = "linux-punt",
        /// Link-scoped traffic for tern through the input rule set.
        PuntAcl = "ip6-punt-acl",
    }
}

impl Node for Ip6Input {
    fn name(&self) -> &'static str {
        "ip6-input"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Ip6InputNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip6InputError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        let ifs_changed = self.ifs.refresh();
        if ifs_changed {
            self.acl_in = crate::ip4::acl_in_by_index(self.ifs.current());
        }
        self.params.refresh();
        let ifs = self.ifs.current();
        let punt = self.params.current().punt_to_tap();
        if self.acl_in.is_empty() {
            for (o, &p) in next.iter_mut().zip(pkts) {
                *o = validate6::<NO_FLOW>(cx, ifs, p, punt, None);
            }
            return;
        }
        let flow = self.shortcut.start(ifs_changed);
        let worker = cx.worker;
        let state = (&self.acl_in[..], ifs, &mut self.shortcut, flow);
        let hits = validate_batch_acl(cx, pkts, next, &Validate6 { ifs, punt }, state);
        let taken = self.shortcut.finish(worker, hits);
        if taken != 0 {
            cx.count(Ip6InputError::AclShortcut, taken);
        }
    }
}

/// `ip6-input`'s validation with input rule sets, for the shortcut's
/// batch loop.
struct Validate6<'a> {
    ifs: &'a IfTable,
    punt: bool,
}

impl ValidateAcl<Pattern6> for Validate6<'_> {
    #[inline(always)]
    fn validate<const S: u8>(&self, cx: &mut Cx<'_>, p: PktIdx, acl: &mut InputAcl<'_, Pattern6>) -> u16 {
        validate6::<S>(cx, self.ifs, p, self.punt, Some(acl))
    }
}

/// Validates one packet's IPv6 header: the next index or a drop. With
/// input rule sets (`acl`), a packet bound for `ip6-lookup` goes through
/// its interface's rule set first (`ip6-acl-in`) unless the shortcut
/// takes it (`S`: how to ask, as `ip4-input`), and link-scoped traffic
/// for tern or Linux through `ip6-punt-acl`.
#[inline(always)]
fn validate6<const S: u8>(
    cx: &mut Cx<'_>,
    ifs: &IfTable,
    p: PktIdx,
    punt: bool,
    acl: Option<&mut InputAcl<'_, Pattern6>>,
) -> u16 {
    let (m, d) = cx.pool.pkt(p);
    // The metadata as the shortcut compares it, read before anything
    // writes it (see `meta16`).
    let meta = if S == NO_FLOW { Bytes16::ZERO } else { meta16(m) };
    let l3off = m.l3_off as usize;
    // The common case in one go: version 6, the payload in the frame, a
    // source and a destination whose first bytes rule out every address
    // the general checks look for (::/8 holds :: and ::1, ff00::/8 is
    // multicast, fe00::/8 holds link-local). Everything else takes the
    // general path, which gives these packets the same verdicts. With
    // input rule sets, the first 8 transport bytes must be in the frame
    // too (the shortcut reads them).
    let (h, h48) = match acl {
        None => (d.get(l3off..).and_then(<[u8]>::first_chunk::<40>), None),
        Some(_) => match d.get(l3off..).and_then(<[u8]>::first_chunk::<48>) {
            Some(h48) => (h48.first_chunk::<40>(), Some(h48)),
            None => (None, None),
        },
    };
    if let Some(h) = h
        && h[0] >> 4 == 6
        && TOP6[usize::from(h[8])] & GENERAL_SRC | TOP6[usize::from(h[24])] & GENERAL_DST == 0
        && m.flags & flags::L2_MULTI == 0
        && direct_paths()
    {
        let want = l3off + 40 + usize::from(u16::from_be_bytes([h[4], h[5]]));
        if want > d.len() {
            return cx.drop(p, Ip6InputError::Truncated);
        }
        if want < d.len() {
            m.len = want as u16;
        }
        return match (acl, h48) {
            (Some(a), Some(h48)) => {
                let tcp = if S == TCP_FLOW { d.get(l3off + 53).copied().unwrap_or(0) } else { 0 };
                a.direct::<S>(meta, m, h48, tcp)
            }
            _ => Ip6InputNext::Lookup as u16,
        };
    }
    let n = validate6_general(cx, ifs, p, punt);
    let Some(a) = acl else { return n };
    if !a.has_rules(cx.pool.meta(p).rx_if) {
        return n;
    }
    if n == Ip6InputNext::Lookup as u16 {
        a.stop();
        Ip6InputNext::AclIn as u16
    } else if n == Ip6InputNext::Punt as u16 || n == Ip6InputNext::Local as u16 {
        // Link-scoped traffic for tern (ND, link-local) passes the input
        // rule set too, in `ip6-punt-acl`.
        Ip6InputNext::PuntAcl as u16
    } else {
        n
    }
}

/// First bytes of IPv6 addresses the direct path of [`validate6`] leaves
/// to the general checks: as a source ::/8 and ff00::/8, as a destination
/// ::/8, fe00::/8 and ff00::/8.
static TOP6: [u8; 256] = {
    let mut t = [0u8; 256];
    t[0] = GENERAL_SRC | GENERAL_DST;
    t[0xfe] = GENERAL_DST;
    t[0xff] = GENERAL_SRC | GENERAL_DST;
    t
};
const GENERAL_SRC: u8 = 1;
const GENERAL_DST: u8 = 2;

#[inline(never)]
fn validate6_general(cx: &mut Cx<'_>, ifs: &IfTable, p: PktIdx, punt: bool) -> u16 {
    let (m, d) = cx.pool.pkt(p);
    let l3off = m.l3_off as usize;
    let Some(l3) = d.get(l3off..) else { return cx.drop(p, Ip6InputError::TooShort) };
    if l3.len() < 40 {
        return cx.drop(p, Ip6InputError::TooShort);
    }
    if l3[0] >> 4 != 6 {
        return cx.drop(p, Ip6InputError::BadVersion);
    }
    let total = 40 + usize::from(be16(l3, 4));
    if total > l3.len() {
        return cx.drop(p, Ip6InputError::Truncated);
    }
    let src = be128(l3, 8);
    let dst = be128(l3, 24);
    // Multicast and loopback sources, and (RFC 4291 2.5.2) the unspecified
    // one but to a multicast group (ND's duplicate address detection).
    if src >> 120 == 0xff || src == 1 || (src == 0 && dst >> 120 != 0xff) {
        return cx.drop(p, Ip6InputError::MartianSrc);
    }
    if dst == 0 || dst == 1 {
        return cx.drop(p, Ip6InputError::BadDst);
    }
    let next = if dst >> 120 == 0xff {
        // Link-scope all-nodes, all-routers and solicited-node groups.
        let is_all =
            dst == 0xff02_0000_0000_0000_0000_0000_0000_0001 || dst == 0xff02_0000_0000_0000_0000_0000_0000_0002;
        let is_sol = dst >> 24 == 0x00ff_0200_0000_0000_0000_0000_01ff; // ff02::1:ff00:0/104
        if is_all || is_sol {
            Ip6InputNext::Local as u16
        } else if punt {
            Ip6InputNext::Punt as u16
        } else {
            return cx.drop(p, Ip6InputError::Multicast);
        }
    } else if is_link_local(Ipv6Addr::from(dst)) {
        match ifs.get(m.rx_if) {
            Some(i) if u128::from(i.v6_ll) == dst => Ip6InputNext::Local as u16,
            _ => return cx.drop(p, Ip6InputError::LinkLocal),
        }
    } else if m.flags & flags::L2_MULTI != 0 {
        // RFC 1812 5.3.4 (RFC 8504): unicast in a link-layer broadcast or
        // multicast is not routed.
        return cx.drop(p, Ip6InputError::L2Multi);
    } else {
        Ip6InputNext::Lookup as u16
    };
    let want = l3off + total;
    if want < d.len() {
        cx.pool.set_len(p, want);
    }
    next
}

// --------------------------------------------------------------- ip6-lookup

/// `ip6-lookup`: longest-prefix match of the IPv6 destination.
///
/// Next nodes: `ip6-rewrite`, `ip6-local`, `ip6-icmp-error`, `drop`.
/// Counters: [`Ip6LookupError::DESCS`].
pub struct Ip6Lookup {
    fib: FibReader,
    dst: Vec<u128>,
    nh: Vec<NhId>,
}

impl Ip6Lookup {
    pub fn new(fib: FibReader) -> Self {
        Ip6Lookup { fib, dst: vec![0; MAX_BATCH], nh: vec![0; MAX_BATCH] }
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
                cache = (id, if direct_paths() { direct } else { NEXT_DROP }, kind);
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

// -------------------------------------------------------------- ip6-rewrite

/// `ip6-rewrite`: hop limit check and decrement, MTU check (ICMPv6 Packet
/// Too Big: IPv6 routers never fragment, RFC 8200 section 5), Ethernet
/// header. Packets with a link-local source are not forwarded off their
/// link (RFC 4291 2.5.6; ICMPv6 "beyond scope of source address").
///
/// Tunnel egress interfaces go to `gre-encap`, and the flow an output
/// rule set last accepted skips `ip6-acl-out` (see `ip4-rewrite`).
///
/// Next nodes: `interface-output`, `ip6-glean`, `ip6-icmp-error`,
/// `gre-encap`, `ip6-acl-out`, `drop`. Counters: [`Ip6RewriteError::DESCS`].
pub struct Ip6Rewrite {
    fib: FibReader,
    ifs: Snapshot<IfTable>,
    /// Whether an interface has an output rule set.
    acl_out: bool,
    /// The flow an output rule set last accepted.
    shortcut: AclShortcut<Pattern6>,
}

impl Ip6Rewrite {
    pub fn new(fib: FibReader, ifs: Snapshot<IfTable>, acls: Snapshot<AclTable>) -> Self {
        let acl_out = ifs.current().any_acl_out();
        Ip6Rewrite { fib, ifs, acl_out, shortcut: AclShortcut::new(acls) }
    }

    /// The batch with output rule sets (`crate::ip4::rewrite_batch_acl`).
    #[inline(never)]
    fn rewrite_batch_acl(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16], ifs_changed: bool) {
        let acl = OutputAcl::start(&mut self.shortcut, ifs_changed);
        rewrite_batch_acl::<Rewrite6>(cx, pkts, next, (self.ifs.current(), &self.fib), acl);
    }
}

struct Rewrite6;

impl RewriteSteps for Rewrite6 {
    type Pattern = Pattern6;
    const ETHERTYPE: u16 = ETH_P_IPV6;
    const ACL_SHORTCUT: u16 = Ip6RewriteError::AclShortcut as u16;
    #[inline(always)]
    fn direct(m: &mut Meta, d: &mut [u8], a: &Adj, direct: Option<u16>) -> Option<u16> {
        direct_path((m, d), a, direct, hop6)
    }
    #[inline(always)]
    fn general(cx: &mut Cx<'_>, p: PktIdx, a: &Adj) -> u16 {
        rewrite6(cx, p, a)
    }
}

/// `ip6-rewrite`'s direct path (`crate::ip4::direct_path`) on a packet's
/// link-layer and IPv6 header (`f`): hop limit above 1, a source that is
/// not link-local, within `mtu`; then the hop limit decremented; whether
/// it passed.
#[inline(always)]
fn hop6(f: &mut [u8; 54], mtu: u16) -> bool {
    let hop = f[14 + 7];
    let link_local_src = f[14 + 8] == 0xfe && f[14 + 9] & 0xc0 == 0x80;
    if hop <= 1 || link_local_src || 40 + u16::from_be_bytes([f[14 + 4], f[14 + 5]]) > mtu {
        return false;
    }
    f[14 + 7] = hop - 1;
    true
}

tern_engine::errors! {
    /// `ip6-rewrite`'s counters.
    pub enum Ip6RewriteError {
        NoInterface = drop("no-interface", "next hop on an unknown interface"),
        InterfaceDown = drop("interface-down", "egress interface is down"),
        HopLimitExpired = info("hop-limit-expired", "hop limit reached 0 (ICMPv6 time exceeded)"),
        TooBig = info("too-big", "larger than the egress MTU (ICMPv6 packet too big)"),
        LinkLocalSource = info("link-local-source", "link-local source cannot leave its link (ICMPv6 beyond scope)"),
        NoHeadroom = drop("no-headroom", "no room for the link-layer header"),
        BadNexthop = drop("bad-nexthop", "next hop of a kind that cannot be forwarded to"),
        AclShortcut = info("acl-shortcut", "accepted by the output rule set without ip6-acl-out: a flow it accepted before"),
    }
}

impl Node for Ip6Rewrite {
    fn name(&self) -> &'static str {
        "ip6-rewrite"
    }
    fn nexts(&self) -> &'static [&'static str] {
        RewriteNext::names(1)
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip6RewriteError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        let ifs_changed = self.ifs.refresh();
        if ifs_changed {
            self.acl_out = self.ifs.current().any_acl_out();
        }
        if self.acl_out {
            self.rewrite_batch_acl(cx, pkts, next, ifs_changed);
        } else {
            rewrite_batch::<Rewrite6>(cx, pkts, next, (self.ifs.current(), &self.fib));
        }
    }
}

#[inline(never)]
fn rewrite6(cx: &mut Cx<'_>, p: PktIdx, a: &Adj) -> u16 {
    match a.state {
        AdjState::Ready | AdjState::Unresolved | AdjState::Tunnel => {}
        AdjState::NoInterface => return cx.drop(p, Ip6RewriteError::NoInterface),
        AdjState::InterfaceDown => return cx.drop(p, Ip6RewriteError::InterfaceDown),
        AdjState::NotForwardable => return cx.drop(p, Ip6RewriteError::BadNexthop),
    }
    let (m, d) = cx.pool.pkt_mut(p);
    let l3 = m.l3_off as usize;
    let local = m.flags & flags::LOCAL_ORIGIN != 0;
    let Some(ip) = d.get_mut(l3..l3 + 40) else { return cx.drop(p, Ip6RewriteError::NoHeadroom) };
    let hop = ip[7];
    if !local && hop <= 1 {
        m.aux = icmp_aux(ICMP6_TIME_EXCEEDED, 0, 0);
        cx.count(Ip6RewriteError::HopLimitExpired, 1);
        return RewriteNext::Icmp as u16;
    }
    if !local && ip[8] == 0xfe && ip[9] & 0xc0 == 0x80 {
        m.aux = icmp_aux(ICMP6_DEST_UNREACH, U6_BEYOND_SCOPE, 0);
        cx.count(Ip6RewriteError::LinkLocalSource, 1);
        return RewriteNext::Icmp as u16;
    }
    let total = 40 + be16(ip, 4);
    if total > a.mtu {
        m.aux = icmp_aux(ICMP6_PACKET_TOO_BIG, 0, a.mtu);
        cx.count(Ip6RewriteError::TooBig, 1);
        return RewriteNext::Icmp as u16;
    }
    // Errors above need no link-layer address; only now resolve it.
    if a.state == AdjState::Unresolved {
        return RewriteNext::Glean as u16;
    }
    if !local {
        ip[7] = hop - 1;
    }
    let l2 = a.l2_len;
    m.tx_if = a.ifindex;
    // gre-encap writes its headers in front of `l3_off` itself.
    if a.state == AdjState::Tunnel {
        return RewriteNext::Gre as u16;
    }
    if l2 != l3 && !set_l2_len(cx.pool, p, l2) {
        return cx.drop(p, Ip6RewriteError::NoHeadroom);
    }
    let d = cx.pool.data_mut(p);
    // The untagged header as a fixed-size copy (a length known only at
    // run time is a call to memcpy per packet).
    if l2 == 14 {
        if let (Some(h), Some(src)) = (d.first_chunk_mut::<14>(), a.hdr.first_chunk::<14>()) {
            *h = *src;
        }
    } else if let (Some(h), Some(src)) = (d.get_mut(..l2), a.hdr.get(..l2)) {
        crate::ip4::copy_l2(h, src);
    }
    if a.acl_out { RewriteNext::AclOut as u16 } else { RewriteNext::Output as u16 }
}

// ---------------------------------------------------------------- ip6-local

/// `ip6-local`: IPv6 packets for tern itself: echo requests (RFC 4443 4.1),
/// Neighbour Discovery (RFC 4861: answers solicitations for its addresses,
/// learns from solicitations and advertisements, validating hop limit 255
/// and code 0 as section 7.1.1/7.1.2 require), and ICMPv6 port unreachable
/// for UDP it does not serve.
///
/// In Linux mode (`Params::linux_owns_local`) the kernel answers echo,
/// solicitations and everything else for the router (it saw the frame
/// too); tern only learns neighbours from ND and counts the rest as
/// `left-to-linux`. With the TAP exception path (`Params::punt_to_tap`)
/// the kernel has no copy: what it owns goes to `linux-punt` (echo,
/// solicitations for its addresses, advertisements after tern learned from
/// them, router discovery, other ICMPv6, other protocols, fragments).
///
/// Next nodes: `ip6-lookup` (echo replies to global addresses),
/// `interface-output` (ND answers and replies to link-local sources, sent
/// straight back on the link), `ip6-icmp-error`, `gre-input`,
/// `linux-punt`, `drop`.
/// Counters: [`Ip6LocalError::DESCS`].
pub struct Ip6Local {
    ifs: Snapshot<IfTable>,
    params: Snapshot<crate::state::Params>,
    shared: Shared,
}

impl Ip6Local {
    pub fn new(shared: &Shared) -> Self {
        Ip6Local { ifs: shared.ifaces.snapshot(), params: shared.params.snapshot(), shared: shared.clone() }
    }
}

tern_engine::errors! {
    /// `ip6-local`'s counters.
    pub enum Ip6LocalError {
        BadExt = drop("bad-extension-header", "extension header chain malformed or too long"),
        Fragment = drop("fragment", "fragment addressed to the router (no reassembly)"),
        BadIcmp = drop("bad-icmp", "ICMPv6 message too short or with a bad checksum"),
        Echo = info("echo-reply-sent", "echo requests answered"),
        McastEcho = drop("multicast-echo", "echo request to a multicast group (not answered)"),
        NsAnswered = info("ns-answered", "neighbour solicitations for our addresses answered"),
        NsOther = drop("ns-not-ours", "neighbour solicitation for an address that is not ours"),
        Na = drop("na-received", "neighbour advertisements consumed (learned)"),
        BadNd = drop("bad-nd", "ND message failing RFC 4861 validation"),
        NdIgnored = drop("nd-ignored", "router solicitation/advertisement or redirect (not handled)"),
        IcmpOther = drop("icmp-consumed", "ICMPv6 for the router other than echo request and ND"),
        Tcp = drop("tcp-to-router", "TCP segment for the router (no local service)"),
        Udp = info("udp-port-unreachable", "UDP datagram for the router (ICMPv6 port unreachable)"),
        Proto = drop("protocol-unhandled", "other upper-layer protocol for the router"),
        EventsFull = info("event-queue-full", "a learned neighbour could not be reported"),
        NoIf = drop("no-interface", "received on an unknown interface"),
        Linux = drop("left-to-linux", "for the router in Linux mode: the kernel got its own copy and answers it"),
    }
}

tern_engine::edges! {
    /// `ip6-local`'s next nodes.
    pub enum Ip6LocalNext {
        Drop = "drop",
        /// Echo replies to global addresses.
        Lookup = "ip6-lookup",
        /// ND answers and replies to link-local sources.
        Output = "interface-output",
        Icmp = "ip6-icmp-error",
        Gre = "gre-input",
        Punt = "linux-punt",
    }
}

impl Node for Ip6Local {
    fn name(&self) -> &'static str {
        "ip6-local"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Ip6LocalNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip6LocalError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        self.params.refresh();
        let params = self.params.current();
        let linux = if params.punt_to_tap() {
            Linux::Punt
        } else if params.linux_owns_local {
            Linux::HasCopy
        } else {
            Linux::No
        };
        for (i, &p) in pkts.iter().enumerate() {
            let ifs = self.ifs.current();
            next[i] = local6(cx, ifs, &self.shared, p, linux);
        }
    }
}

/// Who answers for the router in `ip6-local`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Linux {
    /// tern (standalone mode).
    No,
    /// Linux, which saw the frame itself.
    HasCopy,
    /// Linux, through the TAP exception path.
    Punt,
}

impl Linux {
    /// What becomes of a packet Linux answers: punted, or dropped as
    /// left to Linux; `None` in standalone mode.
    fn leave(self, cx: &mut Cx<'_>, p: PktIdx) -> Option<u16> {
        match self {
            Linux::No => None,
            Linux::HasCopy => Some(cx.drop(p, Ip6LocalError::Linux)),
            Linux::Punt => Some(Ip6LocalNext::Punt as u16),
        }
    }
}

fn local6(cx: &mut Cx<'_>, ifs: &IfTable, shared: &Shared, p: PktIdx, linux: Linux) -> u16 {
    let m = *cx.pool.meta(p);
    let Some(iface) = ifs.get(m.rx_if) else { return cx.drop(p, Ip6LocalError::NoIf) };
    let l3off = m.l3_off as usize;
    let d = cx.pool.data(p);
    let l3 = &d[l3off..];
    let walk = match ipv6ext::walk(IpProtocol(l3[6]), &l3[40..]) {
        Ok(w) => w,
        Err(_) => return cx.drop(p, Ip6LocalError::BadExt),
    };
    if walk.fragment_offset.is_some() {
        // Linux reassembles what it is given.
        return if linux == Linux::Punt { Ip6LocalNext::Punt as u16 } else { cx.drop(p, Ip6LocalError::Fragment) };
    }
    let up = 40 + walk.upper_offset;
    let src = addr(l3, 8);
    let dst = addr(l3, 24);
    let l2_src = if l3off >= 12 { <[u8; 6]>::try_from(&d[6..12]).unwrap_or(BROADCAST_MAC) } else { BROADCAST_MAC };
    match walk.upper_protocol {
        IpProtocol::ICMPV6 => {}
        IpProtocol::GRE => return Ip6LocalNext::Gre as u16,
        _ if linux != Linux::No => return linux.leave(cx, p).unwrap_or(NEXT_DROP),
        IpProtocol::UDP => {
            cx.pool.meta_mut(p).aux = icmp_aux(ICMP6_DEST_UNREACH, U6_PORT, 0);
            cx.count(Ip6LocalError::Udp, 1);
            return Ip6LocalNext::Icmp as u16;
        }
        IpProtocol::TCP => return cx.drop(p, Ip6LocalError::Tcp),
        _ => return cx.drop(p, Ip6LocalError::Proto),
    }
    let icmp = &l3[up..];
    if icmp.len() < 8 {
        return cx.drop(p, Ip6LocalError::BadIcmp);
    }
    let pseudo = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, icmp.len() as u32);
    if checksum::add(pseudo, checksum::data(icmp)) != 0xffff {
        return cx.drop(p, Ip6LocalError::BadIcmp);
    }
    let (ty, code, hop) = (icmp[0], icmp[1], l3[7]);
    match ty {
        128 => {
            if let Some(n) = linux.leave(cx, p) {
                return n;
            }
            if dst.segments()[0] >> 8 == 0xff {
                return cx.drop(p, Ip6LocalError::McastEcho);
            }
            echo_reply6(cx, iface, p, up, l2_src)
        }
        135 | 136 => {
            if hop != 255 || code != 0 || icmp.len() < 24 {
                return cx.drop(p, Ip6LocalError::BadNd);
            }
            let target = addr(icmp, 8);
            if target.segments()[0] >> 8 == 0xff {
                return cx.drop(p, Ip6LocalError::BadNd);
            }
            if ty == 136 {
                let Some((target, mac, how)) = parse_na(icmp, dst) else { return cx.drop(p, Ip6LocalError::BadNd) };
                // With or without the target's link-layer address: an
                // answer to a unicast probe often comes without it
                // (RFC 4861 7.2.4) and still confirms the neighbour.
                let ev = Event::Neighbor { ifindex: iface.index, ip: IpAddr::V6(target), mac, how };
                if shared.events.push(ev).is_err() {
                    cx.count(Ip6LocalError::EventsFull, 1);
                }
                // The kernel's own solicitations wait for these.
                return if linux == Linux::Punt { Ip6LocalNext::Punt as u16 } else { cx.drop(p, Ip6LocalError::Na) };
            }
            let Some(opt_ll) = nd_lladdr(&icmp[24..], 1) else { return cx.drop(p, Ip6LocalError::BadNd) };
            let dad = src.is_unspecified();
            if dad && (opt_ll.is_some() || dst.segments()[0] != 0xff02) {
                return cx.drop(p, Ip6LocalError::BadNd);
            }
            if !iface.has_v6(target) {
                return cx.drop(p, Ip6LocalError::NsOther);
            }
            if !dad
                && let Some(mac) = opt_ll
                && shared
                    .events
                    .push(Event::Neighbor {
                        ifindex: iface.index,
                        ip: IpAddr::V6(src),
                        mac: Some(mac),
                        how: Heard::Sender { create: true },
                    })
                    .is_err()
            {
                cx.count(Ip6LocalError::EventsFull, 1);
            }
            if let Some(n) = linux.leave(cx, p) {
                // The kernel answers the solicitation for its address.
                return n;
            }
            let (to_ip, to_mac) = if dad {
                (Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1), [0x33, 0x33, 0, 0, 0, 1])
            } else {
                (src, opt_ll.unwrap_or(l2_src))
            };
            build_na(cx, iface, p, target, to_ip, to_mac, !dad);
            cx.count(Ip6LocalError::NsAnswered, 1);
            Ip6LocalNext::Output as u16
        }
        _ if linux == Linux::Punt => Ip6LocalNext::Punt as u16,
        133 | 134 | 137 => cx.drop(p, Ip6LocalError::NdIgnored),
        _ => cx.drop(p, Ip6LocalError::IcmpOther),
    }
}

/// A neighbour advertisement's ICMPv6 message (type 136, hop limit and
/// code already checked), sent to `dst`: its target, the target
/// link-layer address option if present, and its flags (RFC 4861 4.4).
/// `None` when it fails RFC 4861 7.1.2 validation: too short, a multicast
/// target, malformed options, or solicited yet sent to a multicast group.
fn parse_na(icmp: &[u8], dst: Ipv6Addr) -> Option<(Ipv6Addr, Option<[u8; 6]>, Heard)> {
    if icmp.len() < 24 {
        return None;
    }
    let target = addr(icmp, 8);
    if target.segments()[0] >> 8 == 0xff {
        return None;
    }
    let mac = nd_lladdr(&icmp[24..], 2)?;
    let (router, solicited, override_) = (icmp[4] & 0x80 != 0, icmp[4] & 0x40 != 0, icmp[4] & 0x20 != 0);
    if solicited && dst.segments()[0] >> 8 == 0xff {
        return None;
    }
    Some((target, mac, Heard::Advert { solicited, override_, router }))
}

/// The link-layer address option of type `want` in an ND options area.
/// `None`: options malformed; `Some(None)`: absent.
fn nd_lladdr(mut opts: &[u8], want: u8) -> Option<Option<[u8; 6]>> {
    let mut found = None;
    for _ in 0..tern_wire::ndisc::MAX_ND_OPTIONS {
        if opts.is_empty() {
            return Some(found);
        }
        if opts.len() < 2 {
            return None;
        }
        let len = usize::from(opts[1]) * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        if opts[0] == want && len >= 8 {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&opts[2..8]);
            found = Some(mac);
        }
        opts = &opts[len..];
    }
    None
}

/// Turns the echo request in `p` into its reply (type 129, addresses
/// swapped, any extension headers removed).
fn echo_reply6(cx: &mut Cx<'_>, iface: &Iface, p: PktIdx, up: usize, l2_src: [u8; 6]) -> u16 {
    let l3off = cx.pool.meta(p).l3_off as usize;
    let total = cx.pool.data(p).len() - l3off;
    let icmp_len = total - up;
    {
        let d = cx.pool.data_mut(p);
        let l3 = &mut d[l3off..];
        if up != 40 {
            l3.copy_within(up..total, 40);
            l3[6] = 58;
        }
        put16(l3, 4, icmp_len as u16);
        let mut src = [0u8; 16];
        src.copy_from_slice(&l3[8..24]);
        l3.copy_within(24..40, 8);
        l3[24..40].copy_from_slice(&src);
        l3[7] = 64;
        l3[40] = 129;
        // The pseudo-header sums the same two addresses, so only the type
        // word changes (RFC 1624).
        let c = checksum::update(be16(l3, 42), u16::from_be_bytes([128, l3[41]]), u16::from_be_bytes([129, l3[41]]));
        put16(l3, 42, c);
    }
    cx.pool.set_len(p, l3off + 40 + icmp_len);
    let m = cx.pool.meta_mut(p);
    m.flags |= flags::LOCAL_ORIGIN;
    cx.count(Ip6LocalError::Echo, 1);
    let dst = Ipv6Addr::from(be128(cx.pool.data(p), l3off + 24));
    if is_link_local(dst) {
        // No route exists for link-local destinations: answer on the link.
        return send_on_link(cx, iface, p, l2_src);
    }
    Ip6LocalNext::Lookup as u16
}

/// Sends `p` (L3 ready) back out of `iface` to `mac`.
fn send_on_link(cx: &mut Cx<'_>, iface: &Iface, p: PktIdx, mac: [u8; 6]) -> u16 {
    if !set_l2_len(cx.pool, p, iface.l2_len()) {
        return cx.drop(p, Ip6LocalError::BadIcmp);
    }
    let (m, d) = cx.pool.pkt_mut(p);
    write_l2(d, mac, iface, ETH_P_IPV6);
    m.tx_if = iface.index;
    Ip6LocalNext::Output as u16
}

/// Rewrites `p` into a neighbour advertisement for `target` (RFC 4861
/// 7.2.4): router flag, solicited flag as asked, override, target
/// link-layer address option.
fn build_na(
    cx: &mut Cx<'_>,
    iface: &Iface,
    p: PktIdx,
    target: Ipv6Addr,
    to_ip: Ipv6Addr,
    to_mac: [u8; 6],
    solicited: bool,
) {
    let l3off = cx.pool.meta(p).l3_off as usize;
    cx.pool.set_len(p, l3off + 72);
    {
        let d = cx.pool.data_mut(p);
        let l3 = &mut d[l3off..l3off + 72];
        l3[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 32, 58, 255]);
        l3[8..24].copy_from_slice(&target.octets());
        l3[24..40].copy_from_slice(&to_ip.octets());
        let icmp = &mut l3[40..];
        icmp[0] = 136;
        icmp[1] = 0;
        icmp[2] = 0;
        icmp[3] = 0;
        icmp[4] = 0x80 | if solicited { 0x40 } else { 0 } | 0x20;
        icmp[5..8].fill(0);
        icmp[8..24].copy_from_slice(&target.octets());
        icmp[24] = 2;
        icmp[25] = 1;
        icmp[26..32].copy_from_slice(&iface.mac);
        let pseudo = checksum::pseudo_header_v6(target, to_ip, IpProtocol::ICMPV6, 32);
        let c = !checksum::add(pseudo, checksum::data(icmp));
        put16(icmp, 2, c);
    }
    cx.pool.meta_mut(p).flags |= flags::LOCAL_ORIGIN;
    if !set_l2_len(cx.pool, p, iface.l2_len()) {
        return;
    }
    let (m, d) = cx.pool.pkt_mut(p);
    write_l2(d, to_mac, iface, ETH_P_IPV6);
    m.tx_if = iface.index;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An NA's ICMPv6 message: flags byte, target ::9 in 2001:db8::/64,
    /// then `opts`.
    fn na(flags: u8, opts: &[u8]) -> Vec<u8> {
        let mut m = vec![136, 0, 0, 0, flags, 0, 0, 0];
        m.extend_from_slice(&"2001:db8::9".parse::<Ipv6Addr>().expect("a").octets());
        m.extend_from_slice(opts);
        m
    }

    const TLLA: [u8; 8] = [2, 1, 2, 0, 0, 0, 0, 9];
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];

    fn unicast() -> Ipv6Addr {
        "2001:db8::1".parse().expect("a")
    }

    #[test]
    fn na_with_target_link_layer_address_and_flags() {
        let (t, mac, how) = parse_na(&na(0x60, &TLLA), unicast()).expect("valid");
        assert_eq!(t, "2001:db8::9".parse::<Ipv6Addr>().expect("a"));
        assert_eq!(mac, Some(MAC));
        assert_eq!(how, Heard::Advert { solicited: true, override_: true, router: false });
        let (_, _, how) = parse_na(&na(0xa0, &TLLA), unicast()).expect("valid");
        assert_eq!(how, Heard::Advert { solicited: false, override_: true, router: true });
    }

    #[test]
    fn na_without_target_link_layer_address_is_kept() {
        // What Linux sends in answer to a unicast NS: S set, O clear, no
        // option (RFC 4861 7.2.4).
        let (_, mac, how) = parse_na(&na(0x40, &[]), unicast()).expect("valid without the option");
        assert_eq!(mac, None);
        assert_eq!(how, Heard::Advert { solicited: true, override_: false, router: false });
        // A source link-layer option (type 1) is not the target's.
        let (_, mac, _) = parse_na(&na(0x40, &[1, 1, 2, 0, 0, 0, 0, 7]), unicast()).expect("valid");
        assert_eq!(mac, None);
    }

    #[test]
    fn invalid_nas_are_refused() {
        let all_nodes: Ipv6Addr = "ff02::1".parse().expect("a");
        assert!(parse_na(&na(0x40, &TLLA), all_nodes).is_none(), "solicited to multicast");
        assert!(parse_na(&na(0x20, &TLLA), all_nodes).is_some(), "unsolicited to multicast is fine");
        assert!(parse_na(&na(0x40, &[2, 0, 0, 0, 0, 0, 0, 0]), unicast()).is_none(), "zero-length option");
        assert!(parse_na(&na(0x40, &[2, 2, 0, 0]), unicast()).is_none(), "option longer than the message");
        assert!(parse_na(&na(0x40, &[])[..20], unicast()).is_none(), "truncated");
        let mut m = na(0x40, &[]);
        m[8] = 0xff;
        assert!(parse_na(&m, unicast()).is_none(), "multicast target");
    }
}
