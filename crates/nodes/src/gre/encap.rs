//! `gre-encap`: puts a packet routed into a GRE tunnel inside the
//! tunnel's GRE and outer IP headers and routes the outer packet.
//!
//! Per batch and tunnel the node works out the encapsulation once
//! (`Encap`): the outer IPv4 and GRE headers as a template with the sum
//! of the outer header's constant words, and, when the tunnel's stacked
//! adjacency (`FibReader::tunnel(tx_if)`: the next hop the FIB resolved
//! the remote to, re-stacked by the FIB's writer whenever routes change,
//! VPP's midchain; no lookup here) is a resolved neighbour on a plain or
//! VLAN interface, that adjacency with the link-layer, outer IPv4 and GRE
//! headers assembled into one prefix (`Direct`). A run of packets into such a tunnel then
//! gets the prefix as one fixed-size copy, the checksum from the
//! template's sum plus the two words that vary (total length and
//! identification), and goes straight to `interface-output` (or
//! `ip4-acl-out`): the same bytes, next hop and counters as routing the
//! outer packet through `ip4-lookup` and `ip4-rewrite` again, without the
//! second pass. Everything else (IPv6 outer headers, an unresolved or ECMP
//! route to the remote, a remote routed into a tunnel (the stacked
//! adjacency's `via_tunnel`; the second pass then drops the packet as
//! `recursive-encapsulation`), a tunnel the FIB was not told of, too big
//! for the egress MTU, `FastPaths::gre_direct` off) takes that second
//! pass. A traced packet takes the path the others take, with a note
//! "direct" when it is the direct one and "second pass: " and why when it
//! is not.
//!
//! The inner packet is found at `Meta::l3_off` (whatever precedes it is
//! overwritten or dropped), so the rewrite nodes need not trim the
//! link-layer header they received it with.
//!
//! Next nodes: `ip4-lookup`, `ip6-lookup` (the outer packet's second
//! pass), `interface-output`, `ip4-acl-out` (direct encapsulation),
//! `esp-encrypt` (IPsec tunnels' packets, handed over as they are),
//! `drop`.
//! Counters: [`GreError::DESCS`] (`encapsulated` and the encapsulation
//! drops).
//!
//! Config: the tunnel interfaces (`IfKind::Gre`: endpoints, key, TTL,
//! MTU) and the FIB's adjacency of each (`FibWriter::tunnel_set`, which
//! the control plane calls for every tunnel it has).
//!
//! Example: a packet routed to `gre0` (local 10.0.2.1, remote 10.0.2.2,
//! no key) gets a 20-byte outer IPv4 header 10.0.2.1 -> 10.0.2.2,
//! protocol 47, and a 4-byte GRE header with protocol 0x0800, and leaves
//! for `ip4-lookup` (or, with the remote's route resolved, straight for
//! `interface-output` with its Ethernet header too).
//!
//! Reference: `encap` encapsulates one packet for the second pass;
//! `direct_run` is the fast path (same bytes, next hop and counters:
//! `direct_tests`).

// Header bytes are reached through `get`/`first_chunk`/tern-wire views
// after one length check; offsets fixed at compile time fold away.
#![deny(clippy::indexing_slicing)]

use super::*;

/// The `gre-encap` node (see the module).
pub struct GreEncap {
    ifs: Snapshot<IfTable>,
    fib: FibReader,
    params: Snapshot<Params>,
    ident: u16,
}

impl GreEncap {
    pub fn new(ifs: Snapshot<IfTable>, fib: FibReader, params: Snapshot<Params>) -> Self {
        GreEncap { ifs, fib, params, ident: 0 }
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
        /// IPsec tunnels' packets (`esp-encrypt` encapsulates them).
        Esp = "esp-encrypt",
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
    /// Why there is no `direct` (for traces).
    why: &'static str,
    /// An IPsec tunnel: its packets go to `esp-encrypt`.
    esp: bool,
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
    /// The encapsulation into tunnel `tx_if`; with `direct`
    /// (`FastPaths::gre_direct`), its [`Direct`] prefix if it has one.
    fn new(ifs: &IfTable, fib: &FibReader, tx_if: u16, direct: bool) -> Encap {
        let tunnel = ifs.get(tx_if).and_then(|f| f.gre().copied());
        let mut e = Encap {
            tx_if,
            tunnel,
            gre_len: 4,
            hdr: 24,
            ip: [0; 20],
            ip_sum: 0,
            key: [0; 4],
            direct: None,
            why: "not a tunnel",
            esp: false,
        };
        let Some(t) = tunnel else {
            if ifs.get(tx_if).is_some_and(|f| f.ipsec().is_some()) {
                e.esp = true;
                e.why = "an IPsec tunnel: to esp-encrypt";
            }
            return e;
        };
        e.why = "IPv6 outer header";
        e.gre_len = if t.key.is_some() { 8 } else { 4 };
        e.hdr = t.overhead();
        e.key = t.key.unwrap_or(0).to_be_bytes();
        if let (IpAddr::V4(src), IpAddr::V4(dst)) = (t.local, t.remote) {
            e.ip = outer_v4_template(src, dst, t.ttl);
            e.ip_sum = template_sum(&e.ip);
            if !direct {
                e.why = "gre_direct off";
                return e;
            }
            // The tunnel's adjacency, stacked by the FIB on the route to
            // the remote (one load; none if the FIB was not told of the
            // tunnel, or the remote leaves through a tunnel again).
            let Some(stacked) = fib.tunnel(tx_if) else {
                e.why = "the FIB has no adjacency for the tunnel";
                return e;
            };
            if stacked.via_tunnel {
                e.why = "the remote is routed into a tunnel";
                return e;
            }
            let nh = fib.nexthop(stacked.nh);
            e.why = "the remote's next hop is not a resolved neighbour on a port or VLAN";
            if nh.kind == NhKind::Unicast {
                let adj = Adj::new(ifs, &nh, ETH_P_IPV4);
                if adj.state == AdjState::Ready
                    && let Some(prefix) = direct_prefix(&adj, &e)
                {
                    let next = if adj.acl_out { GreEncapNext::AclOut as u16 } else { GreEncapNext::Output as u16 };
                    let (out_if, mtu, l2) = (adj.ifindex, adj.mtu, adj.l2_len);
                    e.direct = Some(Direct { nh: stacked.nh, out_if, mtu, next, l2, prefix });
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

/// The link-layer header of `adj`, `e`'s outer IPv4 header and its GRE
/// header (protocol IPv4) in one prefix, if they fit.
fn direct_prefix(adj: &Adj, e: &Encap) -> Option<[u8; MAX_PREFIX]> {
    let mut prefix = [0u8; MAX_PREFIX];
    let (l2, rest) = prefix.split_at_mut_checked(adj.l2_len)?;
    l2.copy_from_slice(adj.hdr.get(..adj.l2_len)?);
    let (ip, gre) = rest.split_first_chunk_mut::<20>()?;
    *ip = e.ip;
    if gre.len() < e.gre_len {
        return None;
    }
    write_gre(gre, e, false);
    Some(prefix)
}

/// Writes `v` big-endian at `at` in `h` (nothing if out of range; with
/// constant offsets into a fixed-size header the check folds away).
#[inline(always)]
fn set16(h: &mut [u8], at: usize, v: u16) {
    if let Some(w) = h.get_mut(at..).and_then(<[u8]>::first_chunk_mut::<2>) {
        *w = v.to_be_bytes();
    }
}

/// The direct encapsulation of `e` (link-layer header of `L2` bytes, `N`
/// bytes of prefix in all) for the leading packets of `pkts` whose `tx_if`
/// is the tunnel, which are not encapsulated already, whose
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
        if m.tx_if != e.tx_if || m.flags & flags::ENCAP != 0 {
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
        set16(h, L2 + 2, outer_len as u16);
        set16(h, L2 + 4, id);
        set16(h, L2 + 10, outer_v4_checksum(e.ip_sum, outer_len as u16, id));
        set16(h, L2 + 22, proto);
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

/// Notes "direct" on the traced packets of a direct run.
#[cold]
#[inline(never)]
fn trace_direct(cx: &mut Cx<'_>, pkts: &[PktIdx]) {
    for &p in pkts {
        cx.trace_note(p, || "direct: outer headers from the resolved route to the remote".into());
    }
}

/// Notes why a traced packet takes the second pass.
#[cold]
#[inline(never)]
fn trace_second_pass(cx: &mut Cx<'_>, p: PktIdx, e: &Encap) {
    let why = if e.direct.is_some() { "too big for the egress MTU, or no room in front" } else { e.why };
    cx.trace_note(p, || format!("second pass: {why}"));
}

/// The outer IPv4 header of a tunnel, total length, identification and
/// checksum left zero.
pub(super) fn outer_v4_template(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8) -> [u8; 20] {
    let ([s0, s1, s2, s3], [d0, d1, d2, d3]) = (src.octets(), dst.octets());
    [0x45, 0, 0, 0, 0, 0, 0, 0, ttl, 47, 0, 0, s0, s1, s2, s3, d0, d1, d2, d3]
}

/// The sum of a header's 16-bit big-endian words, unfolded.
pub(super) fn template_sum(h: &[u8; 20]) -> u32 {
    h.as_chunks::<2>().0.iter().map(|w| u32::from(u16::from_be_bytes(*w))).sum()
}

/// The header checksum of a template whose total length and
/// identification are now `len` and `ident` (RFC 1071: the template's sum
/// plus the two words, folded and complemented).
#[inline(always)]
pub(super) fn outer_v4_checksum(sum: u32, len: u16, ident: u16) -> u16 {
    let s = sum + u32::from(len) + u32::from(ident);
    let s = (s & 0xffff) + (s >> 16);
    !(((s & 0xffff) + (s >> 16)) as u16)
}

/// Writes the outer IPv4 header (template, length, identification,
/// checksum) and the GRE header at the start of `d`.
#[inline(always)]
fn write_outer_v4(d: &mut [u8], e: &Encap, inner_v6: bool, len: u16, ident: u16) {
    let Some((o, gre)) = d.split_first_chunk_mut::<20>() else { return };
    *o = e.ip;
    set16(o, 2, len);
    set16(o, 4, ident);
    set16(o, 10, outer_v4_checksum(e.ip_sum, len, ident));
    write_gre(gre, e, inner_v6);
}

/// Writes the outer IPv6 header (payload length `payload`) and the GRE
/// header at the start of `d`.
fn write_outer_v6(
    d: &mut [u8],
    e: &Encap,
    t: &GreTunnel,
    (src, dst): (Ipv6Addr, Ipv6Addr),
    inner_v6: bool,
    payload: u16,
) {
    let Some((o, gre)) = d.split_first_chunk_mut::<40>() else { return };
    *o = [0; 40];
    let mut ip = tern_wire::Ipv6Packet::new_unchecked(&mut o[..]);
    ip.set_version(6);
    ip.set_payload_len(payload);
    ip.set_next_header(tern_wire::IpProtocol::from(47));
    ip.set_hop_limit(t.ttl);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    write_gre(gre, e, inner_v6);
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
    if keyed && let Some(k) = g.get_mut(4..).and_then(<[u8]>::first_chunk_mut::<4>) {
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
        self.params.refresh();
        let ifs = self.ifs.current();
        let fast = self.params.current().fast_paths.gre_direct;
        let mut encapped = 0;
        let mut to_esp = 0;
        let mut cache: Option<Encap> = None;
        let mut i = 0;
        while let (Some(rest), Some(outs)) = (pkts.get(i..), next.get_mut(i..)) {
            let Some(&p) = rest.first() else { break };
            let tx_if = cx.pool.meta(p).tx_if;
            // By reference: the template is not copied per packet.
            let e = match &mut cache {
                Some(e) if e.tx_if == tx_if => e,
                c => c.insert(Encap::new(ifs, &self.fib, tx_if, fast)),
            };
            let done = e.direct_run(cx, rest, outs, &mut self.ident);
            if done > 0 {
                if cx.tracing() {
                    trace_direct(cx, rest.get(..done).unwrap_or_default());
                }
                encapped += done as u64;
                i += done;
                continue;
            }
            if cx.tracing() {
                trace_second_pass(cx, p, e);
            }
            let Some(o) = outs.first_mut() else { break };
            *o = encap(cx, p, e, &mut self.ident);
            if e.esp {
                to_esp += 1;
            } else if *o != NEXT_DROP {
                encapped += 1;
            }
            i += 1;
        }
        cx.count(GreError::Encap, encapped);
        cx.count(GreError::ToEsp, to_esp);
    }
}

/// Encapsulates one packet for a second pass through the outer route;
/// `ident` is the worker's outer IPv4 identification sequence.
#[inline(never)]
fn encap(cx: &mut Cx<'_>, p: PktIdx, e: &Encap, ident: &mut u16) -> u16 {
    if e.esp {
        return GreEncapNext::Esp as u16;
    }
    let m = *cx.pool.meta(p);
    let Some(t) = e.tunnel else { return cx.drop(p, GreError::NotTunnel) };
    if m.flags & flags::ENCAP != 0 {
        return cx.drop(p, GreError::Recursion);
    }
    let l3 = usize::from(m.l3_off);
    let inner_len = usize::from(m.len).saturating_sub(l3);
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
            write_outer_v6(d, e, &t, (src, dst), inner_v6, (e.gre_len + inner_len) as u16);
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
