//! `esp-encrypt`: encrypts a packet routed into an IPsec tunnel with the
//! tunnel's outbound SA and routes the outer packet.
//!
//! Per batch, packets come in runs of one tunnel (`tx_if`): per run the
//! node finds the tunnel and its SA once, checks the SA is usable, and
//! reserves the run's sequence numbers with one atomic operation
//! ([`tern_ipsec::Sa::reserve_seq`]: the SA's counter is the numbers' one
//! owner, see `tern_ipsec::sa`); then each packet is encrypted in place
//! (the ESP header and IV go in the headroom in front of the inner header,
//! padding, trailer and ICV after it) and gets its outer IPv4 or IPv6
//! header (protocol 50, or UDP 4500 → 4500 with checksum 0 over IPv4, RFC
//! 3948; over IPv6 the UDP checksum is computed), identification from the
//! worker's sequence, DF clear, TTL/hop limit from the tunnel. The SA's
//! counters are added once per run.
//!
//! Direct path (as `gre-encap`'s, under the same switch
//! `FastPaths::gre_direct`): when the tunnel's stacked adjacency in the
//! FIB (`FibReader::tunnel`, re-stacked by the FIB's writer whenever
//! routes change; the control plane calls `FibWriter::tunnel_set` for
//! IPsec tunnels as for GRE ones) is a resolved neighbour on a port or
//! VLAN, the node also writes the outer packet's link-layer header and
//! sends it straight to `interface-output` (or `ip4-acl-out` /
//! `ip6-acl-out`): the same bytes, next hop and counters as the second
//! pass through `ip4-lookup`/`ip6-lookup` and the rewrite node, without
//! it. Outer packets too big for the egress MTU, without room for the
//! link-layer header, or any other route to the remote take the second
//! pass.
//!
//! The inner packet is found at `Meta::l3_off` (what precedes it is
//! overwritten), as `gre-encap` leaves it. Packets past the end of the
//! SA's sequence numbers (or its hard packet lifetime) are dropped and the
//! SA stops; it never wraps.
//!
//! Next nodes: `ip4-lookup`, `ip6-lookup` (the outer packet's second
//! pass), `interface-output`, `ip4-acl-out`, `ip6-acl-out` (direct),
//! `drop`.
//! Counters: [`EspEncryptError::DESCS`].
//!
//! Multipoint tunnels (remote access, `remote` 0.0.0.0 or ::; one branch
//! per run on the tunnel's kind): each packet's client is picked by its
//! inner destination in `Shared::ipsec_clients` (the client's `sa_out`
//! and outer address); none is dropped as `no-client`. The direct path
//! there is the FIB's next hop for the client's outer address, looked up
//! here once per run of clients at one address (under the same switch;
//! a next hop that is no resolved neighbour on a port or VLAN, such as
//! an ECMP group or a tunnel, takes the second pass).
//!
//! Config: the tunnel interfaces (`IfKind::Ipsec`: endpoints, `sa_out`,
//! TTL), the SAs (`Shared::sas`) and the multipoint tunnels' clients
//! (`Shared::ipsec_clients`).
//!
//! Example: a 100-byte IPv4 packet routed to `ipsec0` (local 10.0.2.1,
//! remote 10.0.2.2, SA with AES-128-GCM) leaves for `ip4-lookup` as 10.0.2.1
//! -> 10.0.2.2 protocol 50: 20 + 8 (SPI, sequence) + 8 (IV) + 100 + 2
//! (padding to 4) + 2 (pad length, next header 4) + 16 (ICV) = 156 bytes.

#![deny(clippy::indexing_slicing)]

use super::*;
use crate::state::{IpsecClients, Params};
use crate::util::{Adj, AdjState, ETH_P_IPV4, ETH_P_IPV6};
use tern_fib::{FibReader, NhId, NhKind};
use tern_ipsec::{NH_IPV4, NH_IPV6};
use tern_wire::IpProtocol;

/// The `esp-encrypt` node (see the module).
pub struct EspEncrypt {
    ifs: Snapshot<IfTable>,
    sas: Snapshot<SaTable>,
    fib: FibReader,
    params: Snapshot<Params>,
    clients: Snapshot<IpsecClients>,
    ident: u16,
}

impl EspEncrypt {
    pub fn new(
        ifs: Snapshot<IfTable>,
        fib: FibReader,
        params: Snapshot<Params>,
        sas: &SaReader,
        clients: Snapshot<IpsecClients>,
    ) -> Self {
        EspEncrypt { ifs, sas: sas.snapshot(), fib, params, clients, ident: 0 }
    }
}

/// A tunnel's outer route when it needs no second pass: the stacked
/// adjacency's next hop, egress interface, MTU, link-layer header and the
/// next node.
#[derive(Clone, Copy)]
struct Direct {
    nh: NhId,
    out_if: u16,
    mtu: u16,
    next: u16,
    l2: usize,
    hdr: [u8; 18],
}

/// The direct route of tunnel `tx_if` towards a remote of this family.
fn direct(ifs: &IfTable, fib: &FibReader, tx_if: u16, v4: bool) -> Option<Direct> {
    let stacked = fib.tunnel(tx_if)?;
    if stacked.via_tunnel {
        return None;
    }
    direct_via(ifs, fib, stacked.nh, v4)
}

/// The direct route through next hop `id`, if it is a resolved neighbour
/// on a port or VLAN (not a tunnel: that is the second pass).
fn direct_via(ifs: &IfTable, fib: &FibReader, id: NhId, v4: bool) -> Option<Direct> {
    let nh = fib.nexthop(id);
    if nh.kind != NhKind::Unicast {
        return None;
    }
    let adj = Adj::new(ifs, &nh, if v4 { ETH_P_IPV4 } else { ETH_P_IPV6 });
    if adj.state != AdjState::Ready || adj.l2_len > adj.hdr.len() {
        return None;
    }
    let next = match (adj.acl_out, v4) {
        (false, _) => EspEncryptNext::Output,
        (true, true) => EspEncryptNext::AclOut4,
        (true, false) => EspEncryptNext::AclOut6,
    } as u16;
    Some(Direct { nh: id, out_if: adj.ifindex, mtu: adj.mtu, next, l2: adj.l2_len, hdr: adj.hdr })
}

/// The direct route to a multipoint tunnel's client at `remote`: the
/// FIB's next hop for it now (the lookup `ip4-lookup`/`ip6-lookup` would
/// make), when that is a resolved neighbour on a port or VLAN.
fn direct_to(ifs: &IfTable, fib: &FibReader, remote: IpAddr) -> Option<Direct> {
    let (id, v4) = match remote {
        IpAddr::V4(a) => (fib.lookup_v4(u32::from(a)), true),
        IpAddr::V6(a) => (fib.lookup_v6(u128::from(a)), false),
    };
    direct_via(ifs, fib, id, v4)
}

tern_engine::errors! {
    /// `esp-encrypt`'s counters.
    pub enum EspEncryptError {
        NotTunnel = drop("not-a-tunnel", "sent to encryption on a non-IPsec interface (a bug)"),
        NoSa = drop("no-sa", "the tunnel's outbound SA is not installed"),
        Expired = drop("sa-expired", "the tunnel's outbound SA passed its hard lifetime"),
        Exhausted = drop("seq-exhausted", "the outbound SA ran out of sequence numbers (it never wraps)"),
        Headroom = drop("no-headroom", "no room in front of the packet for the outer and ESP headers"),
        Tailroom = drop("no-tailroom", "no room after the packet for padding, trailer and ICV"),
        Recursion = drop("recursive-encapsulation", "the tunnel's outer packet routed into a tunnel again"),
        Family = drop("mixed-endpoints", "the tunnel's local and remote addresses are of different families"),
        NoClient = drop("no-client", "multipoint tunnel: no client has the inner destination as virtual IP"),
        Encrypted = info("encrypted", "packets encrypted"),
    }
}

tern_engine::edges! {
    /// `esp-encrypt`'s next nodes: the outer packet's route, by family.
    pub enum EspEncryptNext {
        Drop = "drop",
        Ip4 = "ip4-lookup",
        Ip6 = "ip6-lookup",
        /// Direct: the outer packet's link-layer header written here.
        Output = "interface-output",
        AclOut4 = "ip4-acl-out",
        AclOut6 = "ip6-acl-out",
    }
}

impl Node for EspEncrypt {
    fn name(&self) -> &'static str {
        "esp-encrypt"
    }
    fn nexts(&self) -> &'static [&'static str] {
        EspEncryptNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        EspEncryptError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        self.sas.refresh();
        self.params.refresh();
        let mut i = 0;
        let mut done = 0;
        while let Some(&first) = pkts.get(i) {
            let tx_if = cx.pool.meta(first).tx_if;
            let len = pkts.get(i..).unwrap_or_default().iter().take_while(|&&p| cx.pool.meta(p).tx_if == tx_if).count();
            let (Some(run), Some(outs)) = (pkts.get(i..i + len), next.get_mut(i..i + len)) else { break };
            done += self.run(cx, tx_if, run, outs);
            i += len.max(1);
        }
        cx.count(EspEncryptError::Encrypted, done);
    }
}

impl EspEncrypt {
    /// Encrypts a run of packets into tunnel `tx_if`; how many.
    fn run(&mut self, cx: &mut Cx<'_>, tx_if: u16, pkts: &[PktIdx], next: &mut [u16]) -> u64 {
        let ifs = self.ifs.current();
        let drop_all = |cx: &mut Cx<'_>, next: &mut [u16], e: EspEncryptError| {
            for (o, &p) in next.iter_mut().zip(pkts) {
                *o = cx.drop(p, e);
            }
            0
        };
        let Some(t) = ifs.get(tx_if).and_then(|f| f.ipsec()) else {
            return drop_all(cx, next, EspEncryptError::NotTunnel);
        };
        let (src, dst) = (t.local, t.remote);
        if t.is_multipoint() {
            return self.run_multi(cx, tx_if, (src, t.ttl), pkts, next);
        }
        if src.is_ipv4() != dst.is_ipv4() {
            return drop_all(cx, next, EspEncryptError::Family);
        }
        let Some(sa) = self.sas.current().get(t.sa_out) else { return drop_all(cx, next, EspEncryptError::NoSa) };
        let d = if self.params.current().fast_paths.gre_direct {
            direct(ifs, &self.fib, tx_if, dst.is_ipv4())
        } else {
            None
        };
        let mut run = None;
        let ok = encrypt_on(cx, &mut self.ident, sa, (src, dst, t.ttl), d.as_ref(), pkts, next, &mut run);
        if let Some(r) = run {
            r.flush(cx.worker);
        }
        ok
    }
}

impl EspEncrypt {
    /// Encrypts a run of packets into multipoint tunnel `tx_if`, each
    /// with the SA of the client its inner destination names; how many.
    ///
    /// In passes over [`LOOKAHEAD`] packets at a time, as VPP's nodes
    /// do, each pass reading what the previous one prefetched, so that the
    /// cache misses of the batch's packets overlap instead of following
    /// one another: (1) each packet's inner destination, its slot in the
    /// client map prefetched; (2) its client, the slot of the client's SA
    /// in the SA table prefetched; (3) the SA, prefetched; (4) the SA's
    /// live part; (5) its keys, counters and window ([`Sa::prefetch_state`]);
    /// then the packets, each run of consecutive packets on one SA with
    /// one reservation of sequence numbers and one addition to its
    /// counters (a tunnel's burst). A packet to the previous one's
    /// destination reuses its answer. Measured with `tern-bench engine
    /// --spread K --extra-sas 1000000 --burst B` (the figures:
    /// docs/PERFORMANCE.md, "IPsec ESP"; raw:
    /// docs/perf/results/ipsec/spread-prefetch-stop53.txt).
    #[inline(never)]
    fn run_multi(
        &mut self,
        cx: &mut Cx<'_>,
        tx_if: u16,
        (src, ttl): (IpAddr, u8),
        pkts: &[PktIdx],
        next: &mut [u16],
    ) -> u64 {
        self.clients.refresh();
        let (clients, sas) = (self.clients.current(), self.sas.current());
        let mut ok = 0;
        let mut run: Option<Run<'_>> = None;
        let mut last: Option<(IpAddr, &Sa, IpAddr)> = None;
        let direct_on = self.params.current().fast_paths.gre_direct;
        // The last client address's direct route (most clients sit behind
        // the same next hop: one FIB lookup a run of clients).
        let mut routed: Option<(IpAddr, Option<Direct>)> = None;
        for (pkts, next) in pkts.chunks(LOOKAHEAD).zip(next.chunks_mut(LOOKAHEAD)) {
            // Pass 1: each packet's inner destination (None: dropped), its
            // client's slot prefetched.
            let mut dst: [Option<IpAddr>; LOOKAHEAD] = [None; LOOKAHEAD];
            let mut prev: Option<IpAddr> = last.map(|(d, _, _)| d);
            for ((t, o), &p) in dst.iter_mut().zip(next.iter_mut()).zip(pkts) {
                let m = cx.pool.meta(p);
                let inner = cx.pool.data(p).get(usize::from(m.l3_off)..).unwrap_or_default();
                let Some(d) = inner_addr(inner, false) else {
                    *o = cx.drop(p, EspEncryptError::NoClient);
                    continue;
                };
                if prev != Some(d) {
                    clients.prefetch_client(tx_if, d);
                    prev = Some(d);
                }
                *t = Some(d);
            }
            // Pass 2: each client, its SA's slot in the SA table prefetched
            // (None: dropped; the address: a destination seen just before).
            let mut client: [Option<(u32, IpAddr)>; LOOKAHEAD] = [None; LOOKAHEAD];
            let mut prev: Option<(IpAddr, u32, IpAddr)> = last.map(|(d, sa, r)| (d, sa.id, r));
            for (((c, d), o), &p) in client.iter_mut().zip(&dst).zip(next.iter_mut()).zip(pkts) {
                let Some(d) = *d else { continue };
                if let Some((pd, sa, remote)) = prev
                    && pd == d
                {
                    *c = Some((sa, remote));
                    continue;
                }
                let Some(x) = clients.client(tx_if, d) else {
                    *o = cx.drop(p, EspEncryptError::NoClient);
                    continue;
                };
                sas.prefetch(x.sa_out);
                prev = Some((d, x.sa_out, x.remote));
                *c = Some((x.sa_out, x.remote));
            }
            // Pass 3: each SA, prefetched (None: dropped).
            let mut to: [Option<(&Sa, IpAddr)>; LOOKAHEAD] = [None; LOOKAHEAD];
            for ((((t, c), d), o), &p) in to.iter_mut().zip(&client).zip(&dst).zip(next.iter_mut()).zip(pkts) {
                let (Some((id, remote)), Some(d)) = (*c, *d) else { continue };
                if let Some((ld, sa, lr)) = last
                    && ld == d
                    && sa.id == id
                {
                    *t = Some((sa, lr));
                    continue;
                }
                let Some(sa) = sas.get(id).map(|s| &**s) else {
                    *o = cx.drop(p, EspEncryptError::NoSa);
                    continue;
                };
                sa.prefetch();
                last = Some((d, sa, remote));
                *t = Some((sa, remote));
            }
            // Pass 4: each SA's live part; pass 5: what encrypting on each
            // SA reads besides the SA.
            let mut prev: Option<&Sa> = None;
            for &(sa, _) in to.iter().flatten() {
                if !prev.is_some_and(|p| std::ptr::eq(p, sa)) {
                    sa.prefetch_live();
                    prev = Some(sa);
                }
            }
            let mut prev: Option<&Sa> = None;
            for &(sa, _) in to.iter().flatten() {
                if !prev.is_some_and(|p| std::ptr::eq(p, sa)) {
                    sa.prefetch_state(cx.worker);
                    prev = Some(sa);
                }
            }
            // Then the packets, a run of one SA (and outer address) at a time.
            let mut k = 0;
            while let Some(&t) = to.get(k).filter(|_| k < pkts.len()) {
                let Some((sa, remote)) = t else {
                    k += 1;
                    continue;
                };
                let same = |t: &Option<(&Sa, IpAddr)>| t.is_some_and(|(s, r)| std::ptr::eq(s, sa) && r == remote);
                let len = to.get(k..pkts.len()).unwrap_or_default().iter().take_while(|t| same(t)).count().max(1);
                let (Some(rp), Some(ro)) = (pkts.get(k..k + len), next.get_mut(k..k + len)) else { break };
                let d = match routed {
                    Some((a, d)) if a == remote => d,
                    _ => {
                        let d = if direct_on { direct_to(self.ifs.current(), &self.fib, remote) } else { None };
                        routed = Some((remote, d));
                        d
                    }
                };
                ok += encrypt_on(cx, &mut self.ident, sa, (src, remote, ttl), d.as_ref(), rp, ro, &mut run);
                k += len;
            }
        }
        if let Some(r) = run {
            r.flush(cx.worker);
        }
        ok
    }
}

/// Encrypts `pkts`, all on `sa` towards `dst`: the sequence numbers
/// reserved with one atomic operation, the counters added to `run`
/// (flushed first if it holds another SA's); how many.
#[allow(clippy::too_many_arguments)]
fn encrypt_on<'a>(
    cx: &mut Cx<'_>,
    ident: &mut u16,
    sa: &'a Sa,
    addrs: (IpAddr, IpAddr, u8),
    d: Option<&Direct>,
    pkts: &[PktIdx],
    next: &mut [u16],
    run: &mut Option<Run<'a>>,
) -> u64 {
    let r = Run::of(run, sa, cx.worker);
    if !sa.usable() {
        r.delta.expired_drops += pkts.len() as u64;
        for (o, &p) in next.iter_mut().zip(pkts) {
            *o = cx.drop(p, EspEncryptError::Expired);
        }
        return 0;
    }
    let seqs = sa.reserve_seq(pkts.len());
    let mut ok = 0;
    for (k, (o, &p)) in next.iter_mut().zip(pkts).enumerate() {
        if k >= seqs.count {
            *o = if seqs.exhausted {
                r.delta.seq_exhausted += 1;
                cx.drop(p, EspEncryptError::Exhausted)
            } else {
                r.delta.expired_drops += 1;
                cx.drop(p, EspEncryptError::Expired)
            };
            continue;
        }
        let seq = seqs.first + k as u64;
        *ident = ident.wrapping_add(1);
        *o = match encrypt_one(cx, p, sa, addrs, seq, *ident, d) {
            Ok((next, inner_len)) => {
                r.delta.packets += 1;
                r.delta.bytes += inner_len as u64;
                ok += 1;
                if cx.tracing() {
                    trace_esp(cx, p, sa.spi, seq, "encrypted");
                }
                next
            }
            Err(e) => {
                if cx.tracing() {
                    trace_esp(cx, p, sa.spi, seq, "dropped");
                }
                cx.drop(p, e)
            }
        };
    }
    ok
}

/// The source (`src`) or destination address of the IP packet `ip`.
pub(super) fn inner_addr(ip: &[u8], src: bool) -> Option<IpAddr> {
    match ip.first()? >> 4 {
        4 => {
            let at = if src { 12 } else { 16 };
            let b: [u8; 4] = ip.get(at..at + 4)?.try_into().ok()?;
            Some(IpAddr::from(b))
        }
        6 => {
            let at = if src { 8 } else { 24 };
            let b: [u8; 16] = ip.get(at..at + 16)?.try_into().ok()?;
            Some(IpAddr::from(b))
        }
        _ => None,
    }
}

/// Encrypts one packet and writes its outer headers (and, on the direct
/// path, the link-layer header); the next node and the inner packet's
/// length.
fn encrypt_one(
    cx: &mut Cx<'_>,
    p: PktIdx,
    sa: &Sa,
    (src, dst, ttl): (IpAddr, IpAddr, u8),
    seq: u64,
    ident: u16,
    direct: Option<&Direct>,
) -> Result<(u16, usize), EspEncryptError> {
    let (m, frame) = cx.pool.meta_frame_mut(p);
    if m.flags & flags::ENCAP != 0 {
        return Err(EspEncryptError::Recursion);
    }
    let l3 = usize::from(m.l3_off);
    let inner_len = usize::from(m.len).checked_sub(l3).ok_or(EspEncryptError::Headroom)?;
    let start = usize::from(m.off) + l3;
    let nh = match frame.get(start) {
        Some(b) if b >> 4 == 6 => NH_IPV6,
        _ => NH_IPV4,
    };
    let outer = if dst.is_ipv4() { 20 } else { 40 };
    let udp = if sa.udp_encap.is_some() { 8 } else { 0 };
    let esp_hdr = sa.header_len();
    let hdr = outer + udp + esp_hdr;
    let outer_start = start.checked_sub(hdr).ok_or(EspEncryptError::Headroom)?;
    let end = start + inner_len + sa.trailer_len(inner_len);
    let esp = frame.get_mut(start - esp_hdr..end).ok_or(EspEncryptError::Tailroom)?;
    let esp_len = sa.encrypt(esp, inner_len, nh, seq).map_err(|_| EspEncryptError::Tailroom)?;
    let total = outer + udp + esp_len;
    let Ok(total16) = u16::try_from(total) else { return Err(EspEncryptError::Tailroom) };
    let (h, rest) = frame
        .get_mut(outer_start..)
        .and_then(|f| f.split_at_mut_checked(outer + udp))
        .ok_or(EspEncryptError::Headroom)?;
    let proto = if udp > 0 { 17 } else { super::IPPROTO_ESP };
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let (o, u) = h.split_first_chunk_mut::<20>().ok_or(EspEncryptError::Headroom)?;
            let ([l0, l1], [i0, i1]) = (total16.to_be_bytes(), ident.to_be_bytes());
            let ([s0, s1, s2, s3], [d0, d1, d2, d3]) = (s.octets(), d.octets());
            *o = [0x45, 0, l0, l1, i0, i1, 0, 0, ttl, proto, 0, 0, s0, s1, s2, s3, d0, d1, d2, d3];
            let c = !checksum::header20(o);
            if let Some(w) = o.get_mut(10..12) {
                w.copy_from_slice(&c.to_be_bytes());
            }
            if let (Some(e), Some(u)) = (sa.udp_encap, u.first_chunk_mut::<8>()) {
                // RFC 3948 section 2.1: the checksum SHOULD be 0 over IPv4.
                write_udp(u, e.src_port, e.dst_port, (8 + esp_len) as u16, 0);
            }
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let (o, u) = h.split_first_chunk_mut::<40>().ok_or(EspEncryptError::Headroom)?;
            *o = [0; 40];
            let mut ip = tern_wire::Ipv6Packet::new_unchecked(&mut o[..]);
            ip.set_version(6);
            ip.set_payload_len((udp + esp_len) as u16);
            ip.set_next_header(IpProtocol::from(proto));
            ip.set_hop_limit(ttl);
            ip.set_src_addr(s);
            ip.set_dst_addr(d);
            if let (Some(e), Some(u)) = (sa.udp_encap, u.first_chunk_mut::<8>()) {
                // Over IPv6 a zero UDP checksum is not allowed (RFC 8200
                // 8.1): computed over the encrypted payload.
                let len = (8 + esp_len) as u16;
                write_udp(u, e.src_port, e.dst_port, len, 0);
                let ph = checksum::pseudo_header_v6(s, d, IpProtocol::UDP, u32::from(len));
                let body = rest.get(..esp_len).unwrap_or_default();
                let mut c = !checksum::combine(&[ph, checksum::data(u), checksum::data(body)]);
                if c == 0 {
                    c = 0xffff;
                }
                if let Some(w) = u.get_mut(6..8) {
                    w.copy_from_slice(&c.to_be_bytes());
                }
            }
        }
        _ => return Err(EspEncryptError::Family),
    }
    m.off = outer_start as u16;
    m.len = total16;
    m.l3_off = 0;
    m.vlan = 0;
    m.flags = (m.flags | flags::LOCAL_ORIGIN | flags::ENCAP) & !flags::IPV6;
    if !dst.is_ipv4() {
        m.flags |= flags::IPV6;
    }
    if let Some(d) = direct
        && total <= usize::from(d.mtu)
        && let Some(l2_start) = outer_start.checked_sub(d.l2)
        && let (Some(l2), Some(hdr)) = (frame.get_mut(l2_start..outer_start), d.hdr.get(..d.l2))
    {
        l2.copy_from_slice(hdr);
        m.off = l2_start as u16;
        m.len = (d.l2 + total) as u16;
        m.l3_off = d.l2 as u16;
        m.tx_if = d.out_if;
        m.nh = d.nh;
        return Ok((d.next, inner_len));
    }
    Ok(if dst.is_ipv4() { (EspEncryptNext::Ip4 as u16, inner_len) } else { (EspEncryptNext::Ip6 as u16, inner_len) })
}

fn write_udp(u: &mut [u8; 8], sport: u16, dport: u16, len: u16, csum: u16) {
    let ([a, b], [c, d], [e, f], [g, h]) =
        (sport.to_be_bytes(), dport.to_be_bytes(), len.to_be_bytes(), csum.to_be_bytes());
    *u = [a, b, c, d, e, f, g, h];
}
