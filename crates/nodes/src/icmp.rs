//! `ip4-icmp-error` and `ip6-icmp-error`: turn a packet that cannot be
//! delivered into the ICMP error its source should get.
//!
//! The reason arrives in `Meta::aux` (see [`crate::ip4::icmp_aux`]): type,
//! code and, for "fragmentation needed" / "packet too big", the MTU. The
//! error is built in place in front of the offending packet (the headroom
//! holds the new headers), quotes as much of it as the RFCs allow, and is
//! routed like any packet. Errors are rate-limited per worker by a token
//! bucket (RFC 1812 4.3.2.8, RFC 4443 2.4(f)).

use crate::state::{IfTable, Params, is_link_local};
use crate::util::*;
use tern_engine::{Cx, ErrorDesc, NEXT_DROP, Node};
use tern_packet::{PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::{Icmpv4Packet, Icmpv4Type, Icmpv6Packet, Icmpv6Type, IpProtocol, Ipv4Packet, Ipv6Packet};

tern_engine::edges! {
    /// `ip4-icmp-error`'s next nodes.
    pub enum Icmp4Next {
        Drop = "drop",
        Lookup = "ip4-lookup",
    }
}

tern_engine::edges! {
    /// `ip6-icmp-error`'s next nodes.
    pub enum Icmp6Next {
        Drop = "drop",
        Lookup = "ip6-lookup",
        Output = "interface-output",
    }
}

tern_engine::errors! {
    /// The counters of `ip4-icmp-error` and `ip6-icmp-error`.
    pub enum IcmpError {
        Multicast = drop("no-error-for-multicast", "no ICMP error about a link-layer or IP multicast/broadcast"),
        Fragment = drop("no-error-for-fragment", "no ICMP error about a non-initial fragment"),
        AboutError = drop("no-error-for-error", "no ICMP error about an ICMP error"),
        BadSource = drop("no-error-for-source", "source address cannot receive an ICMP error"),
        Rate = drop("rate-limited", "ICMP error suppressed by the rate limit"),
        NoAddr = drop("no-source-address", "no address to send the ICMP error from"),
        Headroom = drop("no-headroom", "no room to build the ICMP error"),
        Sent = info("sent", "ICMP errors sent"),
    }
}

/// Copies the Ethernet source of the frame (still in front of L3).
pub(crate) fn l2_source(d: &[u8], l3off: usize) -> [u8; 6] {
    match d.get(6..12) {
        Some(mac) if l3off >= 12 => <[u8; 6]>::try_from(mac).unwrap_or(BROADCAST_MAC),
        _ => BROADCAST_MAC,
    }
}

/// Makes room for `hdr` bytes of new headers right before L3 and puts the
/// data start there (`l3_off` becomes 0), keeping `quote` bytes of the old
/// packet after them.
fn make_room(cx: &mut Cx<'_>, p: PktIdx, hdr: usize, quote: usize) -> bool {
    let l3 = cx.pool.meta(p).l3_off as usize;
    let ok = if l3 >= hdr { cx.pool.advance(p, l3 - hdr) } else { cx.pool.prepend(p, hdr - l3).is_some() };
    if !ok {
        return false;
    }
    cx.pool.meta_mut(p).l3_off = 0;
    cx.pool.set_len(p, hdr + quote)
}

// ----------------------------------------------------------------- IPv4

/// `ip4-icmp-error` (RFC 792, RFC 1812 4.3.2). Next: `ip4-lookup`, `drop`.
pub struct Ip4IcmpError {
    ifs: Snapshot<IfTable>,
    params: Snapshot<Params>,
    bucket: TokenBucket,
    ident: u16,
}

impl Ip4IcmpError {
    pub fn new(ifs: Snapshot<IfTable>, params: Snapshot<Params>) -> Self {
        let bucket = TokenBucket::new(params.icmp_rate, params.icmp_burst);
        Ip4IcmpError { ifs, params, bucket, ident: 0 }
    }
}

impl Node for Ip4IcmpError {
    fn name(&self) -> &'static str {
        "ip4-icmp-error"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Icmp4Next::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        IcmpError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        if self.params.refresh() {
            self.bucket.configure(self.params.icmp_rate, self.params.icmp_burst);
        }
        for (o, &p) in next.iter_mut().zip(pkts) {
            *o = self.one(cx, p);
        }
    }
}

impl Ip4IcmpError {
    fn one(&mut self, cx: &mut Cx<'_>, p: PktIdx) -> u16 {
        let m = *cx.pool.meta(p);
        let (ty, code, mtu) = ((m.aux >> 8) as u8, m.aux as u8, (m.aux >> 16) as u16);
        let l3off = m.l3_off as usize;
        let d = cx.pool.data(p);
        let l3 = d.get(l3off..).unwrap_or_default();
        // ip4-input validated the header; one that does not pass is
        // dropped as the engine's `unspecified` (a bug upstream).
        let Ok(ip) = Ipv4Packet::new_checked(l3) else { return NEXT_DROP };
        let ihl = usize::from(ip.header_len());
        // RFC 1812 4.3.2.7: never about link-layer broadcast/multicast, IP
        // multicast, non-initial fragments, ICMP errors, or from sources
        // that do not name a single host.
        if m.flags & flags::L2_MULTI != 0 || ip.dst_addr().octets()[0] >= 224 {
            return cx.drop(p, IcmpError::Multicast);
        }
        if ip.frag_offset() != 0 {
            return cx.drop(p, IcmpError::Fragment);
        }
        if ip.protocol() == IpProtocol::ICMP && matches!(l3.get(ihl), Some(3 | 4 | 5 | 11 | 12)) {
            return cx.drop(p, IcmpError::AboutError);
        }
        let src = ip.src_addr();
        if src.is_unspecified() || src.octets()[0] >= 224 || src.is_loopback() {
            return cx.drop(p, IcmpError::BadSource);
        }
        let ifs = self.ifs.current();
        let from = ifs
            .get(m.rx_if)
            .and_then(|i| i.v4_source_for(src))
            .or_else(|| ifs.ifs.iter().find_map(|i| i.v4.first().map(|n| n.addr)));
        let Some(from) = from else { return cx.drop(p, IcmpError::NoAddr) };
        if !self.bucket.take(cx.now_ns) {
            return cx.drop(p, IcmpError::Rate);
        }
        // RFC 1812 4.3.2.3: quote as much as fits in 576 bytes.
        let quote = l3.len().min(576 - 28);
        if !make_room(cx, p, 28, quote) {
            return cx.drop(p, IcmpError::Headroom);
        }
        self.ident = self.ident.wrapping_add(1);
        let d = cx.pool.data_mut(p);
        // make_room left 28 bytes of headers and the quote.
        let Some((ip, icmp)) = d.split_at_mut_checked(20).filter(|(_, icmp)| icmp.len() >= 8) else {
            return cx.drop(p, IcmpError::Headroom);
        };
        let mut ip = Ipv4Packet::new_unchecked(ip);
        ip.set_version(4);
        ip.set_header_len(20);
        // Internetwork control (RFC 1812 4.3.2.5: precedence 6).
        ip.set_dscp(0x30);
        ip.set_ecn(0);
        ip.set_total_len((28 + quote) as u16);
        ip.set_ident(self.ident);
        ip.set_flags_frag_word(0);
        ip.set_ttl(64);
        ip.set_protocol(IpProtocol::ICMP);
        ip.set_src_addr(from);
        ip.set_dst_addr(src);
        ip.fill_checksum();
        let mut icmp = Icmpv4Packet::new_unchecked(icmp);
        icmp.set_msg_type(Icmpv4Type(ty));
        icmp.set_msg_code(code);
        let frag_needed = ty == crate::ip4::ICMP_DEST_UNREACH && code == crate::ip4::UNREACH_FRAG_NEEDED;
        icmp.set_rest_of_header(if frag_needed { u32::from(mtu) } else { 0 });
        icmp.fill_checksum();
        let mm = cx.pool.meta_mut(p);
        mm.flags = (mm.flags | flags::LOCAL_ORIGIN) & !flags::L2_MULTI;
        cx.count(IcmpError::Sent, 1);
        cx.trace_note(p, || format!("icmp type {ty} code {code} from {from} to {src}"));
        Icmp4Next::Lookup as u16
    }
}

// ----------------------------------------------------------------- IPv6

/// `ip6-icmp-error` (RFC 4443). Next: `ip6-lookup`, `interface-output`
/// (errors to link-local sources go straight back on the link), `drop`.
pub struct Ip6IcmpError {
    ifs: Snapshot<IfTable>,
    params: Snapshot<Params>,
    bucket: TokenBucket,
}

impl Ip6IcmpError {
    pub fn new(ifs: Snapshot<IfTable>, params: Snapshot<Params>) -> Self {
        let bucket = TokenBucket::new(params.icmp_rate, params.icmp_burst);
        Ip6IcmpError { ifs, params, bucket }
    }
}

impl Node for Ip6IcmpError {
    fn name(&self) -> &'static str {
        "ip6-icmp-error"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Icmp6Next::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        IcmpError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        if self.params.refresh() {
            self.bucket.configure(self.params.icmp_rate, self.params.icmp_burst);
        }
        for (o, &p) in next.iter_mut().zip(pkts) {
            *o = self.one(cx, p);
        }
    }
}

impl Ip6IcmpError {
    fn one(&mut self, cx: &mut Cx<'_>, p: PktIdx) -> u16 {
        let m = *cx.pool.meta(p);
        let (ty, code, mtu) = ((m.aux >> 8) as u8, m.aux as u8, (m.aux >> 16) as u16);
        let l3off = m.l3_off as usize;
        let d = cx.pool.data(p);
        let l2_src = l2_source(d, l3off);
        let l3 = d.get(l3off..).unwrap_or_default();
        // ip6-input validated the header; one that does not pass is
        // dropped as the engine's `unspecified` (a bug upstream).
        let Some(ip) = l3.get(..40).map(Ipv6Packet::new_unchecked) else { return NEXT_DROP };
        let src = ip.src_addr();
        let dst_mcast = ip.dst_addr().is_multicast();
        // RFC 4443 2.4(e): Packet Too Big may answer multicast; nothing else.
        let too_big = ty == crate::ip6::ICMP6_PACKET_TOO_BIG;
        if (dst_mcast || m.flags & flags::L2_MULTI != 0) && !too_big {
            return cx.drop(p, IcmpError::Multicast);
        }
        if ip.next_header() == IpProtocol::ICMPV6 && l3.get(40).is_some_and(|&t| t < 128) {
            return cx.drop(p, IcmpError::AboutError);
        }
        if src.is_unspecified() || src.is_multicast() {
            return cx.drop(p, IcmpError::BadSource);
        }
        let ifs = self.ifs.current();
        let Some(iface) = ifs.get(m.rx_if) else { return cx.drop(p, IcmpError::NoAddr) };
        let from = iface.v6_source_for(src);
        if !self.bucket.take(cx.now_ns) {
            return cx.drop(p, IcmpError::Rate);
        }
        // RFC 4443 2.4(c): as much as fits without exceeding the minimum MTU.
        let quote = l3.len().min(1280 - 48);
        if !make_room(cx, p, 48, quote) {
            return cx.drop(p, IcmpError::Headroom);
        }
        let d = cx.pool.data_mut(p);
        // make_room left 48 bytes of headers and the quote.
        let Some((ip, icmp)) = d.split_at_mut_checked(40).filter(|(_, icmp)| icmp.len() >= 8) else {
            return cx.drop(p, IcmpError::Headroom);
        };
        let mut ip = Ipv6Packet::new_unchecked(ip);
        ip.set_version(6);
        ip.set_traffic_class(0);
        ip.set_flow_label(0);
        ip.set_payload_len((8 + quote) as u16);
        ip.set_next_header(IpProtocol::ICMPV6);
        ip.set_hop_limit(64);
        ip.set_src_addr(from);
        ip.set_dst_addr(src);
        let mut icmp = Icmpv6Packet::new_unchecked(icmp);
        icmp.set_msg_type(Icmpv6Type(ty));
        icmp.set_msg_code(code);
        icmp.set_rest_of_header(if too_big { u32::from(mtu) } else { 0 });
        icmp.fill_checksum(from, src);
        let mm = cx.pool.meta_mut(p);
        mm.flags = (mm.flags | flags::LOCAL_ORIGIN) & !flags::L2_MULTI;
        cx.count(IcmpError::Sent, 1);
        cx.trace_note(p, || format!("icmpv6 type {ty} code {code} from {from} to {src}"));
        if is_link_local(src) {
            if !set_l2_len(cx.pool, p, iface.l2_len()) {
                return cx.drop(p, IcmpError::Headroom);
            }
            let (m, d) = cx.pool.pkt_mut(p);
            write_l2(d, l2_src, iface, ETH_P_IPV6);
            m.tx_if = iface.index;
            return Icmp6Next::Output as u16;
        }
        Icmp6Next::Lookup as u16
    }
}
