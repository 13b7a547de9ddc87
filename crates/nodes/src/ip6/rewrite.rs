//! `ip6-rewrite`: hop limit check and decrement, MTU check (ICMPv6 Packet
//! Too Big: IPv6 routers never fragment, RFC 8200 section 5), Ethernet
//! header. Packets with a link-local source are not forwarded off their
//! link (RFC 4291 2.5.6; ICMPv6 "beyond scope of source address").
//!
//! Tunnel egress interfaces go to `gre-encap`, and the flow an output
//! rule set last accepted skips `ip6-acl-out` (see `ip4-rewrite`).
//!
//! Next nodes: `interface-output`, `ip6-glean`, `ip6-icmp-error`,
//! `gre-encap`, `ip6-acl-out`, `drop`. Counters: [`Ip6RewriteError::DESCS`].
//!
//! Config: the interfaces (MTU, MAC, up, output rule sets) and the FIB's
//! next hops (neighbour MACs).
//!
//! Example: a packet with hop limit 64 to a resolved next hop on `wan`
//! leaves for `interface-output` with hop limit 63 and its new Ethernet
//! header; with hop limit 1 it leaves for `ip6-icmp-error` (time
//! exceeded), counted as `hop-limit-expired`.
//!
//! Reference: `rewrite6` rewrites one packet to its adjacency; the batch
//! loops are `ip4-rewrite`'s (`crate::ip4::rewrite_batch`), with `hop6`
//! as this family's direct path.

#![deny(clippy::indexing_slicing)]

use super::*;

/// The `ip6-rewrite` node (see the module).
pub struct Ip6Rewrite {
    fib: FibReader,
    ifs: Snapshot<IfTable>,
    /// Whether an interface has an output rule set.
    acl_out: bool,
    /// The flow an output rule set last accepted.
    shortcut: AclShortcut<Pattern6>,
    params: Snapshot<Params>,
}

impl Ip6Rewrite {
    pub fn new(fib: FibReader, ifs: Snapshot<IfTable>, acls: Snapshot<AclTable>, params: Snapshot<Params>) -> Self {
        let acl_out = ifs.current().any_acl_out();
        Ip6Rewrite { fib, ifs, acl_out, shortcut: AclShortcut::new(acls), params }
    }

    /// The batch with output rule sets (`crate::ip4::rewrite_batch_acl`).
    #[inline(never)]
    fn rewrite_batch_acl(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        let acl = OutputAcl::start(&mut self.shortcut, self.ifs.generation());
        rewrite_batch_acl::<Rewrite6>(cx, pkts, next, (self.ifs.current(), &self.fib), acl);
        if cx.tracing() {
            crate::ip4::trace_rewrite(cx, self.ifs.current(), &self.shortcut, pkts, next);
        }
    }
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
                rewrite_batch::<Rewrite6, true>(cx, pkts, next, (self.ifs.current(), &self.fib));
            } else {
                rewrite_batch::<Rewrite6, false>(cx, pkts, next, (self.ifs.current(), &self.fib));
            }
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
    // The 40 bytes are there: the view's reads are in bounds.
    let mut ip = tern_wire::Ipv6Packet::new_unchecked(ip);
    let hop = ip.hop_limit();
    if !local && hop <= 1 {
        m.aux = icmp_aux(ICMP6_TIME_EXCEEDED, 0, 0);
        cx.count(Ip6RewriteError::HopLimitExpired, 1);
        return RewriteNext::Icmp as u16;
    }
    if !local && is_link_local(ip.src_addr()) {
        m.aux = icmp_aux(ICMP6_DEST_UNREACH, U6_BEYOND_SCOPE, 0);
        cx.count(Ip6RewriteError::LinkLocalSource, 1);
        return RewriteNext::Icmp as u16;
    }
    if 40 + ip.payload_len() > a.mtu {
        m.aux = icmp_aux(ICMP6_PACKET_TOO_BIG, 0, a.mtu);
        cx.count(Ip6RewriteError::TooBig, 1);
        return RewriteNext::Icmp as u16;
    }
    // Errors above need no link-layer address; only now resolve it.
    if a.state == AdjState::Unresolved {
        return RewriteNext::Glean as u16;
    }
    if !local {
        ip.set_hop_limit(hop - 1);
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

// The batch loops' direct path for IPv6.

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
