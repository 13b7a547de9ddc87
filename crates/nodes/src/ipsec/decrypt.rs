//! `esp-decrypt`: decrypts ESP addressed to tern and hands the inner
//! packet to `ip4-input`/`ip6-input` as received on its tunnel.
//!
//! `ip4-local`/`ip6-local` send ESP (protocol 50) and UDP to port 4500 or
//! to another SA's local ESP-in-UDP port (`udp_encap`'s `src_port`,
//! [`crate::ipsec::is_udp_encap_esp`]) here (their outer header validated
//! by `ip4-input`/`ip6-input`). Per
//! packet, in the order RFC 4303 section 3.4 asks: SPI lookup (the SAs
//! with that SPI, then the one a tunnel lists in `sa_in` whose endpoints
//! are the outer addresses: outer source = remote, destination = local),
//! ESP in UDP only on an SA with `udp_encap` and plain ESP only on one
//! without, the SA usable, the anti-replay check (before any crypto), the
//! ICV and decryption, the window's update (after the ICV verified),
//! padding and next header; the outer headers and ESP framing are then
//! stripped and the packet's `rx_if` is the tunnel. UDP 4500 with the
//! non-ESP marker is IKE: handed to the IKE service's queue
//! (`Shared::ike_rx`, marker stripped, `ike-to-control`) with tern's own
//! IKE in standalone mode (`Params::ike_local`), else dropped as
//! `ike-not-handled`; the non-ESP marker on any other port is dropped as
//! `non-esp-marker` (IKE runs on 4500 alone); NAT keep-alives (one 0xff
//! byte, RFC 3948 2.3) are counted and dropped (`nat-keepalive`) on
//! every port. A traced packet's note names its UDP ports.
//!
//! Multipoint tunnels (remote access): an SA that `Shared::ipsec_clients`
//! lists for a client of a multipoint tunnel whose local address is the
//! outer destination is accepted from any outer source (NAT may move
//! the client), and the inner source must be that client's virtual IP
//! (checked after the ICV; else `client-spoofed`). Point-to-point
//! tunnels are looked up first, and only when the SPI changes from one
//! packet to the next.
//!
//! The SA's counters are added once per run of packets on one SA.
//!
//! A peer's NAT mapping that changed: authenticated ESP in UDP (after the
//! ICV and the window's update) whose outer source port is not the SA's
//! `udp_encap` destination port, or whose outer source is not the
//! tunnel's remote (an SA with `udp_encap` is looked for among the
//! tunnels with the outer destination as local address when no tunnel has
//! the outer source as remote) or a multipoint client's recorded address,
//! is decrypted as usual and
//! reported to the control thread (`Event::EspMoved` on `Shared::events`,
//! counted as `peer-moved`), once per SA and new address per node (the
//! IKE side follows a peer behind a NAT and rekeys the SA onto the new
//! ports, RFC 7296 2.23; a full queue is counted as `peer-moved-lost` and
//! reported again by a later packet).
//!
//! Next nodes: `ip4-input`, `ip6-input` (by the next header), `drop`.
//! Counters: [`EspDecryptError::DESCS`].
//!
//! Config: the tunnel interfaces (`IfKind::Ipsec`: endpoints, `sa_in`, up)
//! and the SAs (`Shared::sas`).
//!
//! Example: ESP from 10.0.2.2 to 10.0.2.1 with the SPI of SA 20, which
//! `ipsec0` lists in `sa_in`, sequence number 5 (new), ICV right, next
//! header 4: the inner IPv4 packet leaves for `ip4-input` with `rx_if` =
//! `ipsec0`; the same packet again is dropped as `replay`.

#![deny(clippy::indexing_slicing)]

use super::*;
use crate::state::IpsecClients;
use tern_ipsec::{EspError, NH_IPV4, NH_IPV6, NH_NONE, ReplayError, is_non_esp_marker, parse_header};
use tern_wire::{IpProtocol, Ipv4Packet, Ipv6Packet};

/// The `esp-decrypt` node (see the module).
pub struct EspDecrypt {
    ifs: Snapshot<IfTable>,
    sas: Snapshot<SaTable>,
    index: InIndex,
    clients: Snapshot<IpsecClients>,
    /// Where IKE on 4500 goes with `Params::ike_local` ([`EspDecrypt::with_ike`]).
    ike: Option<IkeOut>,
    /// Where a peer's new NAT mapping is reported ([`EspDecrypt::with_ike`]).
    events: Option<std::sync::Arc<crossbeam_queue::ArrayQueue<crate::state::Event>>>,
    /// The last one reported: (SA id, source address, port).
    reported: Option<(u32, IpAddr, u16)>,
}

/// The IKE service's queue and the parameters that say whether it runs.
struct IkeOut {
    params: Snapshot<crate::state::Params>,
    rx: std::sync::Arc<crossbeam_queue::ArrayQueue<crate::state::IkeDatagram>>,
    bell: std::sync::Arc<crate::state::Doorbell>,
}

impl EspDecrypt {
    pub fn new(ifs: Snapshot<IfTable>, sas: &SaReader, clients: Snapshot<IpsecClients>) -> Self {
        EspDecrypt {
            ifs,
            sas: sas.snapshot(),
            index: InIndex::default(),
            clients,
            ike: None,
            events: None,
            reported: None,
        }
    }

    /// Hands IKE on 4500 (the non-ESP marker) to `shared.ike_rx` while
    /// `Params::ike_local` is on in standalone mode; without this, or off,
    /// it is dropped as `ike-not-handled`. Also reports peers' new NAT
    /// mappings on `shared.events` (see the module).
    pub fn with_ike(mut self, shared: &crate::state::Shared) -> Self {
        self.ike =
            Some(IkeOut { params: shared.params.snapshot(), rx: shared.ike_rx.clone(), bell: shared.ike_bell.clone() });
        self.events = Some(shared.events.clone());
        self
    }
}

tern_engine::errors! {
    /// `esp-decrypt`'s counters.
    pub enum EspDecryptError {
        BadHeader = drop("bad-header", "outer IP or UDP header truncated, or a fragment (ip4/ip6-reassembly comes first)"),
        Ike = drop("ike-not-handled", "UDP 4500 with the non-ESP marker: IKE, while tern runs none ([[ike]])"),
        IkeToControl = info("ike-to-control", "IKE (UDP 4500, non-ESP marker) handed to the IKE service, marker stripped"),
        IkeFull = drop("ike-queue-full", "IKE (UDP 4500) dropped: the IKE service's queue was full"),
        Keepalive = drop("nat-keepalive", "NAT keep-alive (RFC 3948 2.3)"),
        NonEspMarker = drop("non-esp-marker", "the non-ESP marker (IKE) on an ESP-in-UDP port other than 4500: no IKE there"),
        UnknownSpi = drop("unknown-spi", "no SA with this SPI"),
        NoTunnel = drop("no-tunnel", "the SA is listed by no tunnel with these outer addresses"),
        TunnelDown = drop("tunnel-down", "the tunnel interface is down"),
        Encap = drop("wrong-encapsulation", "ESP in UDP on an SA without udp_encap, or plain ESP on one with it"),
        Expired = drop("sa-expired", "the SA passed its hard lifetime"),
        Replay = drop("replay", "duplicate or older than the anti-replay window"),
        Integrity = drop("integrity", "the ICV does not verify"),
        Truncated = drop("truncated", "ESP shorter than header, IV, trailer and ICV, or not block-aligned"),
        BadPadding = drop("bad-padding", "pad length or padding bytes wrong"),
        Dummy = drop("dummy-packet", "next header 59: a dummy packet (RFC 4303 2.6)"),
        InnerProto = drop("unsupported-payload", "next header other than IPv4 or IPv6"),
        Spoofed = drop("client-spoofed", "multipoint tunnel: the inner source is not the client's virtual IP"),
        Decrypted = info("decrypted", "packets decrypted"),
        Moved = info("peer-moved", "authenticated ESP in UDP from a new address or port for its SA (a NAT's new mapping): reported to the IKE side"),
        MovedLost = info("peer-moved-lost", "a new NAT mapping not reported: the control thread's event queue was full"),
    }
}

tern_engine::edges! {
    /// `esp-decrypt`'s next nodes: the inner packet's input, by family.
    pub enum EspDecryptNext {
        Drop = "drop",
        Ip4 = "ip4-input",
        Ip6 = "ip6-input",
    }
}

impl Node for EspDecrypt {
    fn name(&self) -> &'static str {
        "esp-decrypt"
    }
    fn nexts(&self) -> &'static [&'static str] {
        EspDecryptNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        EspDecryptError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        self.sas.refresh();
        self.index.refresh(&self.ifs);
        self.clients.refresh();
        if let Some(k) = self.ike.as_mut() {
            k.params.refresh();
        }
        let ike = self.ike.as_ref().filter(|k| {
            let p = k.params.current();
            p.ike_local && !p.linux_owns_local
        });
        let ike = ike.map(|k| (&*k.rx, &*k.bell));
        let (ifs, sas, index) = (self.ifs.current(), self.sas.current(), &self.index);
        let clients = self.clients.current();
        let mut run: Option<Run<'_>> = None;
        let mut last: Option<Found<'_>> = None;
        let mut ok = 0;
        let mut pushed = false;
        // In passes over LOOKAHEAD packets (see `run_multi` in `encrypt`),
        // each reading what the one before prefetched: every packet's
        // outer headers and SPI, the SPI's slot in the SA table
        // prefetched; the SPI's SA, prefetched; the SA's slot in the
        // client map (multipoint tunnels' SAs are found there) and its
        // live part; the SA and tunnel; each SA's keys, counters and
        // window; then the packets.
        for (pkts, next) in pkts.chunks(LOOKAHEAD).zip(next.chunks_mut(LOOKAHEAD)) {
            // The comparison build (feature `esp-plain-lookup`, for
            // docs/perf/results/ipsec/callgrind-single-sa-stop54.txt): each
            // packet parsed and its SA found in one pass, nothing prefetched
            // but the SA's state, as before the passes.
            #[cfg(feature = "esp-plain-lookup")]
            let found = {
                let mut found: [Option<(Found<'_>, Outer, u32)>; LOOKAHEAD] = [None; LOOKAHEAD];
                for ((f, o), &p) in found.iter_mut().zip(next.iter_mut()).zip(pkts) {
                    match parse(cx, p) {
                        Ok((outer, spi, lo)) => match resolve((ifs, sas, index, clients), spi, outer, &mut last) {
                            Ok(r) => *f = Some((r, outer, lo)),
                            Err(e) => *o = cx.drop(p, e),
                        },
                        Err(EspDecryptError::Ike) if let Some((rx, _)) = ike => *o = to_ike(cx, p, rx, &mut pushed),
                        Err(e) => *o = cx.drop(p, e),
                    }
                }
                found
            };
            #[cfg(not(feature = "esp-plain-lookup"))]
            let found = {
                // A packet of the SA and tunnel the last one resolved (one
                // tunnel's traffic: every packet after the first) is found
                // here; the others go through the passes, which are
                // skipped when there are none (the one-SA case pays no
                // more than a plain lookup:
                // docs/perf/results/ipsec/callgrind-single-sa-stop54.txt).
                let mut found: [Option<(Found<'_>, Outer, u32)>; LOOKAHEAD] = [None; LOOKAHEAD];
                let mut parsed: [Option<(Outer, u32, u32)>; LOOKAHEAD] = [None; LOOKAHEAD];
                let mut others = false;
                let mut prev_spi = last.map(|f| f.spi);
                for (((f, x), o), &p) in found.iter_mut().zip(parsed.iter_mut()).zip(next.iter_mut()).zip(pkts) {
                    match parse(cx, p) {
                        Ok((outer, spi, lo)) => {
                            if let Some(l) = last
                                && l.spi == spi
                                && l.local == outer.local
                                && l.remote == outer.remote
                            {
                                *f = Some((l, outer, lo));
                                continue;
                            }
                            if prev_spi != Some(spi) {
                                sas.prefetch_spi(spi);
                                prev_spi = Some(spi);
                            }
                            *x = Some((outer, spi, lo));
                            others = true;
                        }
                        Err(EspDecryptError::Ike) if let Some((rx, _)) = ike => *o = to_ike(cx, p, rx, &mut pushed),
                        Err(e) => *o = cx.drop(p, e),
                    }
                }
                if others {
                    let mut prev_spi = last.map(|f| f.spi);
                    let mut first: [Option<&Sa>; LOOKAHEAD] = [None; LOOKAHEAD];
                    for (f, (_, spi, _)) in first.iter_mut().zip(&parsed).filter_map(|(f, x)| Some((f, x.as_ref()?))) {
                        if prev_spi != Some(*spi) {
                            *f = sas.by_spi(*spi).first().map(|s| &**s);
                            if let Some(sa) = *f {
                                sa.prefetch();
                            }
                            prev_spi = Some(*spi);
                        }
                    }
                    let multipoint = !clients.is_empty();
                    for sa in first.iter().flatten() {
                        if multipoint {
                            clients.prefetch_sa(sa.id);
                        }
                        sa.prefetch_live();
                    }
                    // A multipoint client's ESP in UDP: `find_client`
                    // compares the source with the client's recorded one, a
                    // second lookup in the client map (by tunnel and
                    // virtual IP), its slot prefetched here from the SA's
                    // entry the pass above fetched.
                    if multipoint {
                        for sa in first.iter().flatten().filter(|sa| sa.udp_encap.is_some()) {
                            if let Some((ti, vip)) = clients.of_sa(sa.id) {
                                clients.prefetch_client(ti, vip);
                            }
                        }
                    }
                    for (((f, x), o), &p) in found.iter_mut().zip(&parsed).zip(next.iter_mut()).zip(pkts) {
                        let Some((outer, spi, lo)) = *x else { continue };
                        match resolve((ifs, sas, index, clients), spi, outer, &mut last) {
                            Ok(r) => *f = Some((r, outer, lo)),
                            Err(e) => *o = cx.drop(p, e),
                        }
                    }
                }
                found
            };
            let mut prev: Option<&Sa> = None;
            for (f, _, _) in found.iter().flatten() {
                if !prev.is_some_and(|p| std::ptr::eq(p, f.sa)) {
                    f.sa.prefetch_state(cx.worker);
                    prev = Some(f.sa);
                }
            }
            for ((f, o), &p) in found.iter().zip(next.iter_mut()).zip(pkts) {
                let Some((f, outer, lo)) = f else { continue };
                *o = match decrypt_one(cx, p, f, outer, *lo, &mut run) {
                    Ok((n, None)) => {
                        ok += 1;
                        n
                    }
                    Ok((n, Some(moved))) => {
                        ok += 1;
                        report_moved(cx, self.events.as_deref(), &mut self.reported, moved);
                        n
                    }
                    Err(e) => cx.drop(p, e),
                };
            }
        }
        if let Some(r) = run {
            r.flush(cx.worker);
        }
        cx.count(EspDecryptError::Decrypted, ok);
        if pushed && let Some((_, bell)) = ike {
            bell.ring();
        }
    }
}

/// Hands IKE on port 4500 (`parse_outer` saw the non-ESP marker) to the
/// IKE service, marker stripped.
#[cold]
#[inline(never)]
fn to_ike(
    cx: &mut Cx<'_>,
    p: PktIdx,
    rx: &crossbeam_queue::ArrayQueue<crate::state::IkeDatagram>,
    pushed: &mut bool,
) -> u16 {
    let m = *cx.pool.meta(p);
    let d = cx.pool.data(p);
    let Some(udp) = udp_of(d, usize::from(m.l3_off)) else { return cx.drop(p, EspDecryptError::BadHeader) };
    let Some(dg) = crate::ike::datagram(udp.local, udp.remote, m.rx_if, udp.bytes, 4) else {
        return cx.drop(p, EspDecryptError::BadHeader);
    };
    if rx.push(dg).is_err() {
        return cx.drop(p, EspDecryptError::IkeFull);
    }
    *pushed = true;
    cx.drop(p, EspDecryptError::IkeToControl)
}

/// Reports a peer's new NAT mapping (see the module), once per SA and
/// source while they stay the same.
#[cold]
#[inline(never)]
fn report_moved(
    cx: &mut Cx<'_>,
    events: Option<&crossbeam_queue::ArrayQueue<crate::state::Event>>,
    reported: &mut Option<(u32, IpAddr, u16)>,
    moved: (u32, IpAddr, u16),
) {
    let Some(q) = events else { return };
    if *reported == Some(moved) {
        return;
    }
    let (sa, remote, port) = moved;
    if q.push(crate::state::Event::EspMoved { sa, remote, port }).is_ok() {
        *reported = Some(moved);
        cx.count(EspDecryptError::Moved, 1);
    } else {
        cx.count(EspDecryptError::MovedLost, 1);
    }
}

/// A UDP datagram's addresses and bytes (header and payload).
struct Udp<'a> {
    local: IpAddr,
    remote: IpAddr,
    bytes: &'a [u8],
}

/// The UDP datagram of the IP packet at `l3` (`parse_outer` validated it).
fn udp_of(d: &[u8], l3: usize) -> Option<Udp<'_>> {
    let ip = d.get(l3..)?;
    if ip.first().is_some_and(|b| b >> 4 == 4) {
        let v4 = Ipv4Packet::new_checked(ip).ok()?;
        let end = usize::from(v4.total_len()).min(ip.len());
        let bytes = ip.get(usize::from(v4.header_len())..end)?;
        Some(Udp { local: IpAddr::V4(v4.dst_addr()), remote: IpAddr::V4(v4.src_addr()), bytes })
    } else {
        let v6 = ip.get(..40).map(Ipv6Packet::new_unchecked)?;
        let end = (40 + usize::from(v6.payload_len())).min(ip.len());
        let w = tern_wire::ipv6ext::walk(v6.next_header(), ip.get(40..end)?).ok()?;
        let bytes = ip.get(40 + w.upper_offset..end)?;
        Some(Udp { local: IpAddr::V6(v6.dst_addr()), remote: IpAddr::V6(v6.src_addr()), bytes })
    }
}

/// Where the ESP packet lies and what the outer header said.
#[derive(Clone, Copy)]
struct Outer {
    /// ESP's first byte and one past its last, from the data's start.
    esp: (usize, usize),
    local: IpAddr,
    remote: IpAddr,
    udp: bool,
    /// ESP in UDP: the source and destination ports.
    sport: u16,
    dport: u16,
}

fn parse_outer(d: &[u8], l3: usize) -> Result<Outer, EspDecryptError> {
    use EspDecryptError::*;
    let ip = d.get(l3..).ok_or(BadHeader)?;
    let (upper, end, proto, local, remote) = if ip.first().is_some_and(|b| b >> 4 == 4) {
        let v4 = Ipv4Packet::new_checked(ip).map_err(|_| BadHeader)?;
        if v4.is_fragment() {
            return Err(BadHeader);
        }
        let end = usize::from(v4.total_len()).min(ip.len());
        (usize::from(v4.header_len()), end, v4.protocol(), IpAddr::V4(v4.dst_addr()), IpAddr::V4(v4.src_addr()))
    } else {
        let v6 = ip.get(..40).map(Ipv6Packet::new_unchecked).ok_or(BadHeader)?;
        let end = (40 + usize::from(v6.payload_len())).min(ip.len());
        let after = ip.get(40..end).unwrap_or_default();
        let w = tern_wire::ipv6ext::walk(v6.next_header(), after).map_err(|_| BadHeader)?;
        // Extension headers are stepped over; an atomic fragment (RFC
        // 6946) is the whole packet; a fragment tern cannot decrypt (it
        // does not reassemble, and ip6-local keeps those from here).
        if w.fragment_offset.is_some_and(|f| !super::is_atomic_fragment(after, f)) {
            return Err(BadHeader);
        }
        (40 + w.upper_offset, end, w.upper_protocol, IpAddr::V6(v6.dst_addr()), IpAddr::V6(v6.src_addr()))
    };
    if upper > end {
        return Err(BadHeader);
    }
    let (start, udp, sport, dport) = if proto == IpProtocol::UDP {
        let payload = ip.get(upper + 8..end).ok_or(BadHeader)?;
        let port =
            |at: usize| ip.get(at..at + 2).and_then(|b| <[u8; 2]>::try_from(b).ok()).map_or(0, u16::from_be_bytes);
        let (sport, dport) = (port(upper), port(upper + 2));
        if payload == [0xff] {
            return Err(Keepalive);
        }
        if is_non_esp_marker(payload) {
            // IKE runs on 4500 only (RFC 7296 2.23); ip4-local/ip6-local
            // send another port here only for an SA's ESP in UDP.
            return Err(if dport == super::UDP_ENCAP_PORT { Ike } else { NonEspMarker });
        }
        (upper + 8, true, sport, dport)
    } else {
        (upper, false, 0, 0)
    };
    Ok(Outer { esp: (l3 + start, l3 + end), local, remote, udp, sport, dport })
}

/// The SA and tunnel the last packet's SPI and outer addresses picked
/// (the next packet of the same tunnel skips both lookups).
#[derive(Clone, Copy)]
struct Found<'a> {
    spi: u32,
    local: IpAddr,
    remote: IpAddr,
    sa: &'a Sa,
    tunnel: &'a crate::state::Iface,
    /// On a multipoint tunnel: the client's virtual IP, the only inner
    /// source the SA may carry.
    vip: Option<IpAddr>,
    /// Where the peer is as the tables say (the tunnel's remote, or the
    /// client's recorded address): ESP from elsewhere is reported.
    peer: IpAddr,
}

/// The SA with this SPI that a tunnel between these endpoints lists, and
/// that tunnel.
fn find<'a>((ifs, sas, index, clients): Tables<'a, '_>, spi: u32, o: &Outer) -> Result<Found<'a>, EspDecryptError> {
    let cands = sas.by_spi(spi);
    if cands.is_empty() {
        return Err(EspDecryptError::UnknownSpi);
    }
    for sa in cands {
        for &ti in index.by_sa.get(&sa.id).map(Vec::as_slice).unwrap_or_default() {
            if let Some(t) = ifs.get(ti)
                && let Some(x) = t.ipsec()
                && x.local == o.local
                && x.remote == o.remote
            {
                return Ok(Found { spi, local: o.local, remote: o.remote, sa, tunnel: t, vip: None, peer: x.remote });
            }
        }
    }
    if !clients.is_empty()
        && let Ok(f) = find_client(ifs, clients, cands, spi, o)
    {
        return Ok(f);
    }
    if o.udp {
        return find_moved(ifs, index, cands, spi, o);
    }
    Err(EspDecryptError::NoTunnel)
}

/// ESP in UDP from another address than the tunnel's remote: the peer's
/// NAT may have moved it (RFC 3948, RFC 7296 2.23). The SA with this SPI
/// that a tunnel with this local address lists and that has `udp_encap`
/// is tried; once authenticated the packet is taken and the new address
/// reported (see the module), as Linux looks ESP in UDP up by
/// destination and SPI only.
#[cold]
#[inline(never)]
fn find_moved<'a>(
    ifs: &'a IfTable,
    index: &InIndex,
    cands: &'a [std::sync::Arc<Sa>],
    spi: u32,
    o: &Outer,
) -> Result<Found<'a>, EspDecryptError> {
    for sa in cands.iter().filter(|sa| sa.udp_encap.is_some()) {
        for &ti in index.by_sa.get(&sa.id).map(Vec::as_slice).unwrap_or_default() {
            if let Some(t) = ifs.get(ti)
                && let Some(x) = t.ipsec()
                && x.local == o.local
                && !x.is_multipoint()
                && x.remote.is_ipv4() == o.remote.is_ipv4()
            {
                return Ok(Found { spi, local: o.local, remote: o.remote, sa, tunnel: t, vip: None, peer: x.remote });
            }
        }
    }
    Err(EspDecryptError::NoTunnel)
}

/// The SA with this SPI that a client of a multipoint tunnel with this
/// local address holds, whatever the outer source.
#[cold]
#[inline(never)]
fn find_client<'a>(
    ifs: &'a IfTable,
    clients: &IpsecClients,
    cands: &'a [std::sync::Arc<Sa>],
    spi: u32,
    o: &Outer,
) -> Result<Found<'a>, EspDecryptError> {
    for sa in cands {
        if let Some((ti, vip)) = clients.of_sa(sa.id)
            && let Some(t) = ifs.get(ti)
            && let Some(x) = t.ipsec()
            && x.is_multipoint()
            && x.local == o.local
        {
            // Only ESP in UDP compares the source with it (another lookup
            // in the client map, skipped for plain ESP).
            let peer = match sa.udp_encap {
                Some(_) => clients.client(ti, vip).map_or(o.remote, |c| c.remote),
                None => o.remote,
            };
            return Ok(Found { spi, local: o.local, remote: o.remote, sa, tunnel: t, vip: Some(vip), peer });
        }
    }
    Err(EspDecryptError::NoTunnel)
}

/// The tables a packet's lookup reads.
type Tables<'a, 'b> = (&'a IfTable, &'a SaTable, &'b InIndex, &'b IpsecClients);

/// A peer's new source for an inbound SA: (SA id, address, port).
type Moved = (u32, IpAddr, u16);

/// The first pass over a packet: its outer headers, SPI and sequence
/// number's low bits, or why it is dropped.
fn parse(cx: &Cx<'_>, p: PktIdx) -> Result<(Outer, u32, u32), EspDecryptError> {
    let m = cx.pool.meta(p);
    let d = cx.pool.data(p);
    let o = parse_outer(d, usize::from(m.l3_off))?;
    match parse_header(d.get(o.esp.0..o.esp.1).unwrap_or_default()) {
        Ok((spi, lo)) => Ok((o, spi, lo)),
        // SPI 0 is not ESP (RFC 4303 2.1); in UDP the marker was seen above.
        Err(EspError::ZeroSpi) => Err(EspDecryptError::UnknownSpi),
        Err(_) => Err(EspDecryptError::Truncated),
    }
}

/// The SA and tunnel a packet's SPI and outer addresses pick, or why it
/// is dropped. `last` is the previous packet's SA and tunnel.
fn resolve<'a>(
    tables: Tables<'a, '_>,
    spi: u32,
    o: Outer,
    last: &mut Option<Found<'a>>,
) -> Result<Found<'a>, EspDecryptError> {
    match *last {
        Some(f) if f.spi == spi && f.local == o.local && f.remote == o.remote => Ok(f),
        _ => {
            let f = find(tables, spi, &o)?;
            *last = Some(f);
            Ok(f)
        }
    }
}

/// Decrypts one packet that [`resolve`] found the SA and tunnel `f` of:
/// the next node (and the peer's new source when authenticated ESP in UDP
/// came from elsewhere than its SA and tunnel say), or why it is dropped.
/// `run` holds the counters of the current SA's run of packets.
fn decrypt_one<'a>(
    cx: &mut Cx<'_>,
    p: PktIdx,
    f: &Found<'a>,
    o: &Outer,
    lo: u32,
    run: &mut Option<Run<'a>>,
) -> Result<(u16, Option<Moved>), EspDecryptError> {
    use EspDecryptError::*;
    let m = *cx.pool.meta(p);
    let spi = f.spi;
    let (sa, tunnel, vip) = (f.sa, f.tunnel, f.vip);
    if !tunnel.up {
        return Err(TunnelDown);
    }
    if sa.udp_encap.is_some() != o.udp {
        return Err(Encap);
    }
    // The SA's run: its counters are added when another SA comes.
    let r = Run::of(run, sa, cx.worker);
    if !sa.usable() {
        r.delta.expired_drops += 1;
        return Err(Expired);
    }
    let seq = match sa.replay_check(lo) {
        Ok(s) => s,
        Err(e) => {
            r.delta.replay_drops += 1;
            if cx.tracing() {
                trace_replay(cx, p, spi, lo, e);
            }
            return Err(Replay);
        }
    };
    let (off, tunnel_if) = (usize::from(m.off), tunnel.index);
    let frame = cx.pool.frame_mut(p);
    let Some(esp) = frame.get_mut(off + o.esp.0..off + o.esp.1) else { return Err(Truncated) };
    let dec = match sa.decrypt(esp, seq) {
        Ok(dec) => dec,
        Err(e) => {
            let err = match e {
                EspError::Integrity => {
                    r.delta.integrity_failures += 1;
                    Integrity
                }
                EspError::BadPadding => {
                    r.delta.decrypt_errors += 1;
                    BadPadding
                }
                _ => Truncated,
            };
            if cx.tracing() {
                let name = EspDecryptError::DESCS.get(err as usize).map_or("dropped", |d| d.name);
                trace_esp(cx, p, spi, seq, name);
            }
            return Err(err);
        }
    };
    if sa.replay_update(seq).is_err() {
        // Another copy verified since the check (same batch or worker).
        r.delta.replay_drops += 1;
        return Err(Replay);
    }
    let next = match dec.next_header {
        NH_IPV4 => EspDecryptNext::Ip4 as u16,
        NH_IPV6 => EspDecryptNext::Ip6 as u16,
        NH_NONE => return Err(Dummy),
        _ => return Err(InnerProto),
    };
    if let Some(v) = vip
        && esp.get(dec.inner.clone()).and_then(|ip| super::encrypt::inner_addr(ip, true)) != Some(v)
    {
        return Err(Spoofed);
    }
    let inner_len = dec.inner.len();
    r.delta.packets += 1;
    r.delta.bytes += inner_len as u64;
    let start = off + o.esp.0 + dec.inner.start;
    if !cx.pool.set_data(p, start as u16, inner_len as u16) {
        return Err(Truncated);
    }
    let mm = cx.pool.meta_mut(p);
    mm.l3_off = 0;
    mm.rx_if = tunnel_if;
    mm.vlan = 0;
    mm.flags = (mm.flags | flags::DECAP) & !(flags::L2_MULTI | flags::IPV6 | flags::LOCAL_ORIGIN | flags::ENCAP);
    if next == EspDecryptNext::Ip6 as u16 {
        mm.flags |= flags::IPV6;
    }
    if cx.tracing() {
        if o.udp {
            trace_esp(cx, p, spi, seq, &format!("decrypted (udp {} -> {})", o.sport, o.dport));
        } else {
            trace_esp(cx, p, spi, seq, "decrypted");
        }
    }
    // Authenticated and new: where it came from is the peer's.
    let moved = match sa.udp_encap {
        Some(e) if e.dst_port != o.sport || f.peer != o.remote => Some((sa.id, o.remote, o.sport)),
        _ => None,
    };
    Ok((next, moved))
}

#[cold]
#[inline(never)]
fn trace_replay(cx: &mut Cx<'_>, p: PktIdx, spi: u32, lo: u32, e: ReplayError) {
    cx.trace_note(p, || format!("spi {spi:#x} seq {lo}: replay ({e})"));
}
