//! `gre-encap` and `gre-input`: GRE tunnels (RFC 2784, keys per RFC 2890)
//! over IPv4 or IPv6, carrying IPv4 or IPv6.
//!
//! Encapsulation: the rewrite nodes send a packet whose egress interface is
//! a tunnel here with its inner L3 header at `Meta::l3_off` (TTL already
//! decremented, MTU already checked against the tunnel's MTU). This node
//! writes the GRE and outer IP headers in front of it, over the link-layer
//! header it arrived with and into the headroom (no copy of the payload),
//! and routes the result like a packet tern originated.
//!
//! Decapsulation: `ip4-local`/`ip6-local` send GRE packets addressed to us
//! here; a packet that belongs to a configured tunnel (outer source =
//! remote, outer destination = local, same key) loses its outer headers
//! and enters `ip4-input`/`ip6-input` as received on the tunnel interface.
//!
//! Next nodes: `ip4-lookup`, `ip6-lookup`, `interface-output`,
//! `ip4-acl-out` (encap), `ip4-input`, `ip6-input` (decap), `drop`.
//! Counters: [`GreError::DESCS`].

use crate::state::{GreTunnel, IfTable};
use crate::util::*;
use std::net::{IpAddr, Ipv4Addr};
use tern_engine::{Cx, ErrorDesc, NEXT_DROP, Node};
use tern_fib::{FibReader, NhId, NhKind};
use tern_packet::{PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::checksum;

tern_engine::errors! {
    /// `gre-encap` and `gre-input`'s counters.
    pub enum GreError {
        NotTunnel = drop("not-a-tunnel", "sent to encapsulation on a non-tunnel interface (a bug)"),
        Headroom = drop("no-headroom", "no room for the outer headers"),
        Recursion = drop("recursive-encapsulation", "the tunnel's outer packet routed into a tunnel again"),
        NoTunnel = drop("no-tunnel", "GRE packet matching no configured tunnel (endpoints, key)"),
        BadHeader = drop("bad-header", "GRE header truncated, version != 0 or reserved bits set"),
        BadCsum = drop("bad-checksum", "GRE checksum does not verify"),
        InnerProto = drop("unsupported-payload", "GRE payload other than IPv4 or IPv6"),
        TunnelDown = drop("tunnel-down", "the tunnel interface is down"),
        Encap = info("encapsulated", "packets encapsulated"),
        Decap = info("decapsulated", "packets decapsulated"),
    }
}

const GRE_C: u16 = 0x8000;
const GRE_K: u16 = 0x2000;
const GRE_S: u16 = 0x1000;

/// `gre-encap`.
///
/// Per batch and tunnel the node works out the encapsulation once
/// ([`Encap`]): the outer IPv4 and GRE headers as a template with the sum
/// of the outer header's constant words, and, when the tunnel's remote is
/// routed through a resolved neighbour on a plain interface, that route's
/// adjacency with the link-layer, outer IPv4 and GRE headers assembled
/// into one prefix ([`Direct`]). A run of packets into such a tunnel then
/// gets the prefix as one fixed-size copy, the checksum from the
/// template's sum plus the two words that vary (total length and
/// identification), and goes straight to `interface-output` (or
/// `ip4-acl-out`): the same bytes, next hop and counters as routing the
/// outer packet through `ip4-lookup` and `ip4-rewrite` again, without the
/// second pass. Everything else (IPv6 outer headers, an unresolved or ECMP
/// route to the remote, a remote routed into a tunnel, too big for the
/// egress MTU, a traced packet) takes that second pass.
///
/// The inner packet is found at `Meta::l3_off` (whatever precedes it is
/// overwritten or dropped), so the rewrite nodes need not trim the
/// link-layer header they received it with.
pub struct GreEncap {
    ifs: Snapshot<IfTable>,
    fib: FibReader,
    ident: u16,
}

impl GreEncap {
    pub fn new(ifs: Snapshot<IfTable>, fib: FibReader) -> Self {
        GreEncap { ifs, fib, ident: 0 }
    }
}

tern_engine::edges! {
    /// `gre-encap`'s next nodes.
    pub enum GreEncapNext {
        Drop = "drop",
        /// The outer packet's second pass, by its family.
        Ip4 = "ip4-lookup",
        Ip6 = "ip6-lookup",
        /// Direct encapsulation.
        Output = "interface-output",
        AclOut = "ip4-acl-out",
    }
}

/// A tunnel's encapsulation, worked out once per batch.
#[derive(Clone, Copy)]
struct Encap {
    /// The tunnel interface (`tx_if` of the packets it serves).
    tx_if: u16,
    tunnel: Option<GreTunnel>,
    /// GRE header length (4, 8 with a key) and outer + GRE length.
    gre_len: usize,
    hdr: usize,
    /// The outer IPv4 header with total length, identification and
    /// checksum zero (IPv4 tunnels).
    ip: [u8; 20],
    /// The 16-bit big-endian words of `ip`, summed (not folded).
    ip_sum: u32,
    /// The GRE key word.
    key: [u8; 4],
    /// The outer packet's route when it needs no second pass.
    direct: Option<Direct>,
}

/// The longest prefix a direct encapsulation writes: 802.1Q, outer IPv4,
/// GRE with a key.
const MAX_PREFIX: usize = 18 + 20 + 8;

/// An IPv4 tunnel's encapsulation when the route to its remote is a
/// resolved neighbour on a plain or VLAN interface: the outer packet's
/// next hop, egress interface and MTU, and everything written in front of
/// the inner packet.
#[derive(Clone, Copy)]
struct Direct {
    nh: NhId,
    out_if: u16,
    mtu: u16,
    /// `interface-output`, or `ip4-acl-out` when the egress interface has
    /// an output rule set.
    next: u16,
    /// Link-layer header length (14, 18).
    l2: usize,
    /// Link-layer header, outer IPv4 header (total length, identification
    /// and checksum zero) and GRE header (protocol IPv4): `l2 +
    /// Encap::hdr` bytes used.
    prefix: [u8; MAX_PREFIX],
}

impl Encap {
    fn new(ifs: &IfTable, fib: &FibReader, tx_if: u16) -> Encap {
        let tunnel = ifs.get(tx_if).and_then(|f| f.gre().copied());
        let mut e = Encap { tx_if, tunnel, gre_len: 4, hdr: 24, ip: [0; 20], ip_sum: 0, key: [0; 4], direct: None };
        let Some(t) = tunnel else { return e };
        e.gre_len = if t.key.is_some() { 8 } else { 4 };
        e.hdr = t.overhead();
        e.key = t.key.unwrap_or(0).to_be_bytes();
        if let (IpAddr::V4(src), IpAddr::V4(dst)) = (t.local, t.remote) {
            e.ip = outer_v4_template(src, dst, t.ttl);
            e.ip_sum = template_sum(&e.ip);
            let id = fib.lookup_v4(u32::from(dst));
            let nh = fib.nexthop(id);
            if nh.kind == NhKind::Unicast {
                let adj = Adj::new(ifs, &nh, ETH_P_IPV4);
                let l2 = adj.l2_len;
                if adj.state == AdjState::Ready && l2 + e.hdr <= MAX_PREFIX {
                    let mut prefix = [0u8; MAX_PREFIX];
                    prefix[..l2].copy_from_slice(&adj.hdr[..l2]);
                    prefix[l2..l2 + 20].copy_from_slice(&e.ip);
                    write_gre(&mut prefix[l2 + 20..], &e, false);
                    let next = if adj.acl_out { GreEncapNext::AclOut as u16 } else { GreEncapNext::Output as u16 };
                    e.direct = Some(Direct { nh: id, out_if: adj.ifindex, mtu: adj.mtu, next, l2, prefix });
                }
            }
        }
        e
    }

    /// Encapsulates directly the packets at the start of `pkts` that are
    /// for this tunnel and may be (see [`direct_run`]); how many.
    #[inline(always)]
    fn direct_run(&self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16], ident: &mut u16) -> usize {
        let Some(d) = &self.direct else { return 0 };
        // One loop per prefix layout, so that every copy and offset in it
        // has a size known at compile time.
        match (d.l2, self.gre_len) {
            (14, 4) => direct_run::<14, 38>(cx, self, d, pkts, next, ident),
            (14, 8) => direct_run::<14, 42>(cx, self, d, pkts, next, ident),
            (18, 4) => direct_run::<18, 42>(cx, self, d, pkts, next, ident),
            (18, 8) => direct_run::<18, 46>(cx, self, d, pkts, next, ident),
            _ => 0,
        }
    }
}

/// The direct encapsulation of `e` (link-layer header of `L2` bytes, `N`
/// bytes of prefix in all) for the leading packets of `pkts` whose `tx_if`
/// is the tunnel, which are neither traced nor encapsulated already, whose
/// outer packet fits the egress MTU and whose frame has room in front of
/// the inner header; stops at the first other packet and says how many it
/// did. Each gets the prefix, its outer total length, identification (the
/// worker's sequence, `ident`) and checksum, and the GRE protocol of its
/// inner header; its data then starts at the prefix.
#[inline(never)]
fn direct_run<const L2: usize, const N: usize>(
    cx: &mut Cx<'_>,
    e: &Encap,
    d: &Direct,
    pkts: &[PktIdx],
    next: &mut [u16],
    ident: &mut u16,
) -> usize {
    let Some(prefix) = d.prefix.first_chunk::<N>() else { return 0 };
    let mtu = usize::from(d.mtu);
    let mut id = *ident;
    let mut done = 0;
    for (&p, o) in pkts.iter().zip(next.iter_mut()) {
        let (m, frame) = cx.pool.meta_frame_mut(p);
        if m.tx_if != e.tx_if || m.flags & (flags::TRACED | flags::ENCAP) != 0 {
            break;
        }
        let l3 = usize::from(m.l3_off);
        let Some(inner_len) = usize::from(m.len).checked_sub(l3) else { break };
        let outer_len = N - L2 + inner_len;
        // Where the inner header is in the frame; the prefix goes right
        // in front of it.
        let start = usize::from(m.off) + l3;
        if outer_len > mtu || start < N {
            break;
        }
        // The prefix and the inner header's first byte: one range check.
        let Some((h, inner)) = frame.get_mut(start - N..=start).and_then(|f| f.split_first_chunk_mut::<N>()) else {
            break;
        };
        let proto = match inner.first() {
            Some(b) if b >> 4 == 6 => ETH_P_IPV6,
            _ => ETH_P_IPV4,
        };
        id = id.wrapping_add(1);
        *h = *prefix;
        let ip = &mut h[L2..];
        ip[2..4].copy_from_slice(&(outer_len as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        ip[10..12].copy_from_slice(&outer_v4_checksum(e.ip_sum, outer_len as u16, id).to_be_bytes());
        ip[22..24].copy_from_slice(&proto.to_be_bytes());
        m.off = (start - N) as u16;
        m.len = (N + inner_len) as u16;
        m.l3_off = L2 as u16;
        m.vlan = 0;
        m.tx_if = d.out_if;
        m.nh = d.nh;
        m.flags = (m.flags | flags::LOCAL_ORIGIN | flags::ENCAP) & !flags::IPV6;
        *o = d.next;
        done += 1;
    }
    *ident = id;
    done
}

/// The outer IPv4 header of a tunnel, total length, identification and
/// checksum left zero.
fn outer_v4_template(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8) -> [u8; 20] {
    let mut o = [0u8; 20];
    o[0] = 0x45;
    o[8] = ttl;
    o[9] = 47;
    o[12..16].copy_from_slice(&src.octets());
    o[16..20].copy_from_slice(&dst.octets());
    o
}

/// The sum of a header's 16-bit big-endian words, unfolded.
fn template_sum(h: &[u8; 20]) -> u32 {
    h.as_chunks::<2>().0.iter().map(|w| u32::from(u16::from_be_bytes(*w))).sum()
}

/// The header checksum of a template whose total length and
/// identification are now `len` and `ident` (RFC 1071: the template's sum
/// plus the two words, folded and complemented).
#[inline(always)]
fn outer_v4_checksum(sum: u32, len: u16, ident: u16) -> u16 {
    let s = sum + u32::from(len) + u32::from(ident);
    let s = (s & 0xffff) + (s >> 16);
    !(((s & 0xffff) + (s >> 16)) as u16)
}

/// Writes the outer IPv4 header (template, length, identification,
/// checksum) and the GRE header at the start of `d`.
#[inline(always)]
fn write_outer_v4(d: &mut [u8], e: &Encap, inner_v6: bool, len: u16, ident: u16) {
    if let Some(o) = d.first_chunk_mut::<20>() {
        *o = e.ip;
        o[2..4].copy_from_slice(&len.to_be_bytes());
        o[4..6].copy_from_slice(&ident.to_be_bytes());
        o[10..12].copy_from_slice(&outer_v4_checksum(e.ip_sum, len, ident).to_be_bytes());
    }
    write_gre(&mut d[20..], e, inner_v6);
}

/// Writes the GRE header (flags, protocol, key) at the start of `g`.
#[inline(always)]
fn write_gre(g: &mut [u8], e: &Encap, inner_v6: bool) {
    let proto = if inner_v6 { ETH_P_IPV6 } else { ETH_P_IPV4 };
    let keyed = e.gre_len == 8;
    if let Some(w) = g.first_chunk_mut::<4>() {
        let fl = if keyed { GRE_K } else { 0 };
        *w = (u32::from(fl) << 16 | u32::from(proto)).to_be_bytes();
    }
    if keyed && let Some(k) = g.get_mut(4..8).and_then(|k| k.first_chunk_mut::<4>()) {
        *k = e.key;
    }
}

impl Node for GreEncap {
    fn name(&self) -> &'static str {
        "gre-encap"
    }
    fn nexts(&self) -> &'static [&'static str] {
        GreEncapNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        GreError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        let ifs = self.ifs.current();
        let mut encapped = 0;
        let mut cache: Option<Encap> = None;
        let mut i = 0;
        while let Some(&p) = pkts.get(i) {
            let tx_if = cx.pool.meta(p).tx_if;
            // By reference: the template is not copied per packet.
            let e = match &mut cache {
                Some(e) if e.tx_if == tx_if => e,
                c => c.insert(Encap::new(ifs, &self.fib, tx_if)),
            };
            let done = e.direct_run(cx, &pkts[i..], &mut next[i..], &mut self.ident);
            if done > 0 {
                encapped += done as u64;
                i += done;
                continue;
            }
            next[i] = encap(cx, p, e, &mut self.ident);
            if next[i] != NEXT_DROP {
                encapped += 1;
            }
            i += 1;
        }
        cx.count(GreError::Encap, encapped);
    }
}

/// Encapsulates one packet for a second pass through the outer route;
/// `ident` is the worker's outer IPv4 identification sequence.
#[inline(never)]
fn encap(cx: &mut Cx<'_>, p: PktIdx, e: &Encap, ident: &mut u16) -> u16 {
    let m = *cx.pool.meta(p);
    let Some(t) = e.tunnel else { return cx.drop(p, GreError::NotTunnel) };
    if m.flags & flags::ENCAP != 0 {
        return cx.drop(p, GreError::Recursion);
    }
    let l3 = usize::from(m.l3_off);
    let inner_len = usize::from(m.len) - l3;
    let inner_v6 = cx.pool.data(p).get(l3).is_some_and(|b| b >> 4 == 6);
    let hdr = e.hdr;
    // The direct encapsulation ([`direct_run`]) did not take this packet:
    // the outer packet goes through ip4-lookup or ip6-lookup.
    // Data must start exactly at the outer header.
    let ok = if l3 >= hdr { cx.pool.advance(p, l3 - hdr) } else { cx.pool.prepend(p, hdr - l3).is_some() };
    if !ok {
        return cx.drop(p, GreError::Headroom);
    }
    *ident = ident.wrapping_add(1);
    let d = cx.pool.data_mut(p);
    let next = match (t.local, t.remote) {
        (IpAddr::V4(_), IpAddr::V4(_)) => {
            write_outer_v4(d, e, inner_v6, (hdr + inner_len) as u16, *ident);
            GreEncapNext::Ip4 as u16
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let o = &mut d[..40];
            o[..4].copy_from_slice(&[0x60, 0, 0, 0]);
            put16(o, 4, (e.gre_len + inner_len) as u16);
            o[6] = 47;
            o[7] = t.ttl;
            o[8..24].copy_from_slice(&src.octets());
            o[24..40].copy_from_slice(&dst.octets());
            write_gre(&mut d[40..], e, inner_v6);
            GreEncapNext::Ip6 as u16
        }
        _ => return cx.drop(p, GreError::NotTunnel),
    };
    let mm = cx.pool.meta_mut(p);
    mm.l3_off = 0;
    mm.vlan = 0;
    mm.flags = (mm.flags | flags::LOCAL_ORIGIN | flags::ENCAP) & !flags::IPV6;
    if next == GreEncapNext::Ip6 as u16 {
        mm.flags |= flags::IPV6;
    }
    next
}

/// `gre-input`.
pub struct GreInput {
    ifs: Snapshot<IfTable>,
}

impl GreInput {
    pub fn new(ifs: Snapshot<IfTable>) -> Self {
        GreInput { ifs }
    }
}

tern_engine::edges! {
    /// `gre-input`'s next nodes: the inner packet's input, by its family.
    pub enum GreInputNext {
        Drop = "drop",
        Ip4 = "ip4-input",
        Ip6 = "ip6-input",
    }
}

impl Node for GreInput {
    fn name(&self) -> &'static str {
        "gre-input"
    }
    fn nexts(&self) -> &'static [&'static str] {
        GreInputNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        GreError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        let mut n_ok = 0;
        for (i, &p) in pkts.iter().enumerate() {
            next[i] = self.one(cx, p);
            if next[i] != NEXT_DROP {
                n_ok += 1;
            }
        }
        cx.count(GreError::Decap, n_ok);
    }
}

impl GreInput {
    fn one(&self, cx: &mut Cx<'_>, p: PktIdx) -> u16 {
        let m = *cx.pool.meta(p);
        let d = cx.pool.data(p);
        let l3 = &d[usize::from(m.l3_off)..];
        // ip4-local / ip6-local only send packets whose upper protocol is
        // GRE; find where the GRE header starts and the outer addresses.
        let (gre_off, local, remote) = if l3[0] >> 4 == 4 {
            let ihl = usize::from(l3[0] & 0x0f) * 4;
            (
                ihl,
                IpAddr::from(<[u8; 4]>::try_from(&l3[16..20]).unwrap_or_default()),
                IpAddr::from(<[u8; 4]>::try_from(&l3[12..16]).unwrap_or_default()),
            )
        } else {
            let Ok(w) = tern_wire::ipv6ext::walk(tern_wire::IpProtocol(l3[6]), &l3[40..]) else {
                return cx.drop(p, GreError::BadHeader);
            };
            (
                40 + w.upper_offset,
                IpAddr::from(<[u8; 16]>::try_from(&l3[24..40]).unwrap_or_default()),
                IpAddr::from(<[u8; 16]>::try_from(&l3[8..24]).unwrap_or_default()),
            )
        };
        let Some(g) = l3.get(gre_off..) else { return cx.drop(p, GreError::BadHeader) };
        if g.len() < 4 {
            return cx.drop(p, GreError::BadHeader);
        }
        let fl = be16(g, 0);
        // RFC 2784 2.5: discard when bits 1-5 are set (RFC 1701's routing,
        // strict source route and recursion; 2 and 3 are RFC 2890's key and
        // sequence) or the version is not 0; bits 6-12 are ignored.
        if fl & (0x4000 | 0x0800 | 0x0400 | 0x0007) != 0 {
            return cx.drop(p, GreError::BadHeader);
        }
        let mut hlen = 4;
        if fl & GRE_C != 0 {
            hlen += 4;
        }
        let key = if fl & GRE_K != 0 {
            let Some(k) = g.get(hlen..hlen + 4) else { return cx.drop(p, GreError::BadHeader) };
            hlen += 4;
            Some(u32::from_be_bytes([k[0], k[1], k[2], k[3]]))
        } else {
            None
        };
        if fl & GRE_S != 0 {
            hlen += 4;
        }
        if g.len() < hlen {
            return cx.drop(p, GreError::BadHeader);
        }
        if fl & GRE_C != 0 && checksum::data(g) != 0xffff {
            return cx.drop(p, GreError::BadCsum);
        }
        let proto = be16(g, 2);
        let next = match proto {
            ETH_P_IPV4 => GreInputNext::Ip4 as u16,
            ETH_P_IPV6 => GreInputNext::Ip6 as u16,
            _ => return cx.drop(p, GreError::InnerProto),
        };
        let ifs = self.ifs.current();
        let Some(tunnel) = ifs.gre_tunnel(local, remote, key) else { return cx.drop(p, GreError::NoTunnel) };
        if !tunnel.up {
            return cx.drop(p, GreError::TunnelDown);
        }
        let tunnel_if = tunnel.index;
        let strip = usize::from(m.l3_off) + gre_off + hlen;
        if !cx.pool.advance(p, strip) {
            return cx.drop(p, GreError::BadHeader);
        }
        let mm = cx.pool.meta_mut(p);
        mm.l3_off = 0;
        mm.rx_if = tunnel_if;
        mm.vlan = 0;
        mm.flags = (mm.flags | flags::DECAP) & !(flags::L2_MULTI | flags::IPV6 | flags::LOCAL_ORIGIN | flags::ENCAP);
        if next == GreInputNext::Ip6 as u16 {
            mm.flags |= flags::IPV6;
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{IfKind, Iface, NO_IF, Shared, V4Net};
    use std::sync::Arc;
    use tern_engine::graph::Graph;
    use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
    use tern_packet::{PacketPool, PoolConfig};

    fn rng(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// The checksum from the template's sum is the one computed over the
    /// whole header, for random endpoints, TTLs, lengths and ids.
    #[test]
    fn template_checksum_is_the_recomputed_one() {
        let mut r = rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..200_000 {
            let (src, dst) = (Ipv4Addr::from(r() as u32), Ipv4Addr::from(r() as u32));
            let t = outer_v4_template(src, dst, r() as u8);
            let (len, ident) = (r() as u16, r() as u16);
            let mut h = t;
            put16(&mut h, 2, len);
            put16(&mut h, 4, ident);
            assert_eq!(outer_v4_checksum(template_sum(&t), len, ident), !checksum::data(&h), "{h:02x?}");
        }
        // The extremes of the sum.
        let t = outer_v4_template(Ipv4Addr::BROADCAST, Ipv4Addr::BROADCAST, 255);
        for (len, ident) in [(0, 0), (0xffff, 0xffff), (0xffff, 0), (1, 0xfffe)] {
            let mut h = t;
            put16(&mut h, 2, len);
            put16(&mut h, 4, ident);
            assert_eq!(outer_v4_checksum(template_sum(&t), len, ident), !checksum::data(&h));
        }
    }

    const MAC_LAN: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const MAC_WAN: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const MAC_PEER: [u8; 6] = [2, 0, 0, 0, 0, 3];

    fn iface(index: u16, name: &str, kind: IfKind, port: u16, mac: [u8; 6], addr: &str) -> Iface {
        Iface {
            v4: vec![V4Net { addr: addr.parse().expect("addr"), len: 24 }],
            ..Iface::new(index, name, kind, port, mac)
        }
    }

    /// A router: lan (port 0), wan (port 1, or VLAN 7 on it), gre0 to
    /// 10.0.2.2 over the wan; 198.18.0.0/15 routed into the tunnel.
    fn router(key: Option<u32>, vlan: bool, acl_out: bool) -> (Graph, tern_engine::NodeId, Shared) {
        let domain = tern_rcu::Domain::new();
        let (mut fib, reader) = tern_fib::new(FibConfig::default(), domain);
        let p = |s: &str| s.parse::<Prefix>().expect("prefix");
        let wan = if vlan { 3 } else { 1 };
        let gw: IpAddr = "10.0.2.2".parse().expect("gw");
        let report = fib.apply(vec![
            RouteOp::Add(
                Source::Connected,
                p("10.0.1.0/24"),
                RouteTarget::Connected { ifindex: 0 },
                RouteAttrs::default(),
            ),
            RouteOp::Add(
                Source::Connected,
                p("10.0.2.0/24"),
                RouteTarget::Connected { ifindex: wan },
                RouteAttrs::default(),
            ),
            RouteOp::Add(
                Source::Static,
                p("198.18.0.0/15"),
                RouteTarget::Connected { ifindex: 2 },
                RouteAttrs::default(),
            ),
            RouteOp::Add(
                Source::Static,
                p("2001:db8:18::/48"),
                RouteTarget::Connected { ifindex: 2 },
                RouteAttrs::default(),
            ),
        ]);
        assert_eq!(report.failed, 0);
        fib.set_neighbor(wan, gw, Some(MAC_PEER));
        let t = GreTunnel { local: "10.0.2.1".parse().expect("a"), remote: gw, key, ttl: 64 };
        let mut ifs = vec![
            iface(0, "lan", IfKind::Port, 0, MAC_LAN, "10.0.1.1"),
            iface(1, "wan", IfKind::Port, 1, MAC_WAN, if vlan { "10.0.3.1" } else { "10.0.2.1" }),
            iface(2, "gre0", IfKind::Gre(t), NO_IF, [2, 0x67, 0x72, 0x65, 0, 2], "192.168.255.1"),
        ];
        ifs[2].mtu = 1476;
        if vlan {
            ifs.push(iface(3, "wan.7", IfKind::Vlan { parent: 1, vid: 7 }, 1, MAC_WAN, "10.0.2.1"));
        }
        let shared = Shared::new(IfTable::new(ifs.clone()), reader);
        if acl_out {
            crate::direct_tests::publish_rules(&shared, "action = \"drop\"\nproto = \"tcp\"");
            ifs[usize::from(wan)].acl_out = Some(0);
            shared.ifaces.publish(IfTable::new(ifs));
        }
        let built = crate::build_graph(&shared, Arc::new(crossbeam_queue::ArrayQueue::new(4))).expect("graph");
        (built.graph, built.input, shared)
    }

    /// Frames of random lengths to random destinations in the tunnel's
    /// prefixes, UDP and TCP, DF set or not, a few of the tunnel's MTU (too
    /// big for the wan once encapsulated with a key), one in five IPv6.
    fn frames(seed: u64) -> Vec<Vec<u8>> {
        let mut r = rng(seed);
        (0..300)
            .map(|i| {
                let len = if i % 50 == 7 { 1490 } else { 42 + r() as usize % 600 };
                if i % 5 == 1 {
                    return frame6(len.max(62), &mut r);
                }
                let mut f = vec![0u8; len];
                f[0..6].copy_from_slice(&MAC_LAN);
                f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
                f[12..14].copy_from_slice(&[8, 0]);
                let ip = &mut f[14..];
                ip[0] = 0x45;
                put16(ip, 2, (len - 14) as u16);
                ip[6] = if i % 3 == 0 { 0x40 } else { 0 };
                ip[8] = 2 + r() as u8 % 100;
                ip[9] = if i % 4 == 0 { 6 } else { 17 };
                ip[12..16].copy_from_slice(&[10, 0, 1, 2]);
                ip[16..20].copy_from_slice(&[198, 18 + (r() % 2) as u8, r() as u8, r() as u8]);
                let c = !checksum::data(&ip[..20]);
                put16(ip, 10, c);
                for b in ip[20..].iter_mut() {
                    *b = r() as u8;
                }
                f
            })
            .collect()
    }

    /// An IPv6 UDP frame of `len` bytes into the tunnel's IPv6 prefix.
    fn frame6(len: usize, r: &mut impl FnMut() -> u64) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[0..6].copy_from_slice(&MAC_LAN);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        let ip = &mut f[14..];
        ip[0] = 0x60;
        put16(ip, 4, (len - 14 - 40) as u16);
        ip[6] = 17;
        ip[7] = 2 + r() as u8 % 100;
        ip[8..24].copy_from_slice(&"2001:db8:1::2".parse::<std::net::Ipv6Addr>().expect("src").octets());
        let dst = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0x18, r() as u16, 0, 0, 0, r() as u16);
        ip[24..40].copy_from_slice(&dst.octets());
        for b in ip[40..].iter_mut() {
            *b = r() as u8;
        }
        f
    }

    /// Frames sent per port, error counters, metadata of the sent packets.
    type Outcome = (Vec<Vec<Vec<u8>>>, Vec<u64>, Vec<String>);

    /// What came out of each port and the error counters, after running
    /// `frames` through the graph in batches from a pool with `headroom`
    /// bytes in front of each frame (packet `i` marked traced when
    /// `traced(i)`: its encapsulation then takes the second pass through
    /// `ip4-lookup` and `ip4-rewrite`).
    fn run(key: Option<u32>, vlan: bool, acl_out: bool, headroom: u16, traced: fn(usize) -> bool) -> Outcome {
        let (graph, input, _shared) = router(key, vlan, acl_out);
        let pool = PacketPool::new(PoolConfig { frames: 1024, headroom, ..PoolConfig::default() }).expect("pool");
        let mut b = crate::direct_tests::Batches::new(graph, input, pool, 2);
        let mut out = vec![Vec::new(), Vec::new()];
        let mut metas = Vec::new();
        for (c, chunk) in frames(0x9e37_79b9_7f4a_7c15).chunks(100).enumerate() {
            let flags_of = |i: usize| if traced(c * 100 + i) { flags::TRACED } else { 0 };
            let sent = b.run(chunk.iter().enumerate().map(|(i, f)| (f.as_slice(), 0, flags_of(i))), 0);
            for (port, q) in sent.into_iter().enumerate() {
                for (m, data) in q {
                    metas.push(format!(
                        "port {port} tx_if {} nh {} l3 {} vlan {} flags {:#x}",
                        m.tx_if,
                        m.nh,
                        m.l3_off,
                        m.vlan,
                        m.flags & !flags::TRACED
                    ));
                    out[port].push(data);
                }
            }
        }
        let errors = b.stats.errors.iter().map(|c| c.get()).collect();
        (out, errors, metas)
    }

    /// The encapsulation without a second pass through the outer route
    /// gives what the second pass gives: the same frames (link-layer,
    /// outer, GRE headers, identification sequence), metadata and
    /// counters, for IPv4 and IPv6 inside tunnels with and without a key,
    /// out of a plain and a VLAN interface, with and without an output
    /// rule set, with every packet untraced or every seventh traced
    /// (direct runs broken up; the traced packets then leave after the
    /// others, so the order is not compared), and with a headroom too small for the
    /// direct encapsulation (the second pass then drops the packets for
    /// want of room as it did before).
    #[test]
    fn direct_encapsulation_is_the_second_pass() {
        let default_headroom = PoolConfig::default().headroom;
        type Traced = fn(usize) -> bool;
        let patterns: [(&str, Traced); 2] = [("none", |_| false), ("every 7th", |i| i % 7 == 3)];
        for key in [None, Some(0x0102_0304)] {
            for vlan in [false, true] {
                for acl_out in [false, true] {
                    for headroom in [default_headroom, 20] {
                        let slow = run(key, vlan, acl_out, headroom, |_| true);
                        for (name, traced) in patterns {
                            let mut fast = run(key, vlan, acl_out, headroom, traced);
                            let mut slow = slow.clone();
                            if name != "none" {
                                for o in [&mut fast, &mut slow] {
                                    o.0.iter_mut().for_each(|q| q.sort());
                                    o.2.sort();
                                }
                            }
                            let case =
                                format!("key {key:?} vlan {vlan} acl_out {acl_out} headroom {headroom} traced {name}");
                            if headroom == default_headroom {
                                assert!(fast.0[1].len() > 200, "{case}: most encapsulated and sent");
                            } else {
                                assert!(fast.0[1].is_empty(), "{case}: no room for the headers");
                            }
                            assert!(fast.0[0].is_empty(), "{case}");
                            assert_eq!(fast.0, slow.0, "{case}: frames");
                            assert_eq!(fast.1, slow.1, "{case}: counters");
                            assert_eq!(fast.2, slow.2, "{case}: metadata");
                            for f in &fast.0[1] {
                                let l2 = if vlan { 18 } else { 14 };
                                assert_eq!(checksum::data(&f[l2..l2 + 20]), 0xffff, "{case}: outer checksum");
                                assert_eq!(f[0..6], MAC_PEER);
                                let proto = be16(f, l2 + 22);
                                let inner = f[l2 + 20 + if key.is_some() { 8 } else { 4 }] >> 4;
                                assert_eq!((proto, inner), if inner == 6 { (ETH_P_IPV6, 6) } else { (ETH_P_IPV4, 4) });
                            }
                            if headroom == default_headroom {
                                let v6 =
                                    fast.0[1].iter().filter(|f| be16(f, if vlan { 18 } else { 14 } + 22) == ETH_P_IPV6);
                                assert!(v6.count() > 40, "{case}: IPv6 inside");
                            }
                        }
                    }
                }
            }
        }
    }
}
