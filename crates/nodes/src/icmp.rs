//! `ip4-icmp-error` and `ip6-icmp-error`: turn a packet that cannot be
//! delivered into the ICMP error its source should get.
//!
//! The reason arrives in `Meta::aux` (see [`crate::ip4::icmp_aux`]): type,
//! code and, for "fragmentation needed" / "packet too big", the MTU. The
//! error is built in place in front of the offending packet (the headroom
//! holds the new headers), quotes as much of it as the RFCs allow, and is
//! routed like any packet. Errors are rate-limited per worker by a token
//! bucket (RFC 1812 4.3.2.8, RFC 4443 2.4(f)).

// Issue 37 item 3: 35 sites here still index packet or batch data
// directly; they go when this file reads through tern-wire views.
#![allow(clippy::indexing_slicing)]

use crate::state::{IfTable, Params, is_link_local};
use crate::util::*;
use std::net::{Ipv4Addr, Ipv6Addr};
use tern_engine::{Cx, ErrorDesc, Node};
use tern_packet::{PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::{IpProtocol, checksum};

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
fn l2_source(d: &[u8], l3off: usize) -> [u8; 6] {
    if l3off >= 12 { <[u8; 6]>::try_from(&d[6..12]).unwrap_or(BROADCAST_MAC) } else { BROADCAST_MAC }
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
        for (i, &p) in pkts.iter().enumerate() {
            next[i] = self.one(cx, p);
        }
    }
}

impl Ip4IcmpError {
    fn one(&mut self, cx: &mut Cx<'_>, p: PktIdx) -> u16 {
        let m = *cx.pool.meta(p);
        let (ty, code, mtu) = ((m.aux >> 8) as u8, m.aux as u8, (m.aux >> 16) as u16);
        let l3off = m.l3_off as usize;
        let d = cx.pool.data(p);
        let l3 = &d[l3off..];
        let ihl = usize::from(l3[0] & 0x0f) * 4;
        // RFC 1812 4.3.2.7: never about link-layer broadcast/multicast, IP
        // multicast, non-initial fragments, ICMP errors, or from sources
        // that do not name a single host.
        if m.flags & flags::L2_MULTI != 0 || l3[16] >= 224 {
            return cx.drop(p, IcmpError::Multicast);
        }
        if be16(l3, 6) & 0x1fff != 0 {
            return cx.drop(p, IcmpError::Fragment);
        }
        if l3[9] == 1 && l3.len() > ihl && matches!(l3[ihl], 3 | 4 | 5 | 11 | 12) {
            return cx.drop(p, IcmpError::AboutError);
        }
        let src = Ipv4Addr::new(l3[12], l3[13], l3[14], l3[15]);
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
        let total = (28 + quote) as u16;
        d[0] = 0x45;
        d[1] = 0xc0;
        put16(d, 2, total);
        put16(d, 4, self.ident);
        put16(d, 6, 0);
        d[8] = 64;
        d[9] = 1;
        put16(d, 10, 0);
        d[12..16].copy_from_slice(&from.octets());
        d[16..20].copy_from_slice(&src.octets());
        let c = !checksum::data(&d[..20]);
        put16(d, 10, c);
        d[20] = ty;
        d[21] = code;
        put16(d, 22, 0);
        put16(d, 24, 0);
        put16(
            d,
            26,
            if ty == crate::ip4::ICMP_DEST_UNREACH && code == crate::ip4::UNREACH_FRAG_NEEDED { mtu } else { 0 },
        );
        let c = !checksum::data(&d[20..]);
        put16(d, 22, c);
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
        for (i, &p) in pkts.iter().enumerate() {
            next[i] = self.one(cx, p);
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
        let l3 = &d[l3off..];
        let src = Ipv6Addr::from(be128(l3, 8));
        let dst_mcast = l3[24] == 0xff;
        // RFC 4443 2.4(e): Packet Too Big may answer multicast; nothing else.
        let too_big = ty == crate::ip6::ICMP6_PACKET_TOO_BIG;
        if (dst_mcast || m.flags & flags::L2_MULTI != 0) && !too_big {
            return cx.drop(p, IcmpError::Multicast);
        }
        if l3[6] == 58 && l3.len() > 40 && l3[40] < 128 {
            return cx.drop(p, IcmpError::AboutError);
        }
        if src.is_unspecified() || src.segments()[0] >> 8 == 0xff {
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
        let plen = (8 + quote) as u16;
        d[..4].copy_from_slice(&[0x60, 0, 0, 0]);
        put16(d, 4, plen);
        d[6] = 58;
        d[7] = 64;
        d[8..24].copy_from_slice(&from.octets());
        d[24..40].copy_from_slice(&src.octets());
        d[40] = ty;
        d[41] = code;
        put16(d, 42, 0);
        let rest: u32 = if too_big { u32::from(mtu) } else { 0 };
        d[44..48].copy_from_slice(&rest.to_be_bytes());
        let pseudo = checksum::pseudo_header_v6(from, src, IpProtocol::ICMPV6, u32::from(plen));
        let c = !checksum::add(pseudo, checksum::data(&d[40..]));
        put16(d, 42, c);
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
