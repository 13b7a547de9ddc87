//! `gre-encap` and `gre-input`: GRE tunnels (RFC 2784, keys per RFC 2890)
//! over IPv4 or IPv6, carrying IPv4 or IPv6.
//!
//! Encapsulation: the rewrite nodes send a packet whose egress interface is
//! a tunnel here with its data starting at the inner L3 header (TTL already
//! decremented, MTU already checked against the tunnel's MTU). This node
//! prepends the GRE and outer IP headers into the headroom (no copy of the
//! payload) and routes the result like a packet tern originated.
//!
//! Decapsulation: `ip4-local`/`ip6-local` send GRE packets addressed to us
//! here; a packet that belongs to a configured tunnel (outer source =
//! remote, outer destination = local, same key) loses its outer headers
//! and enters `ip4-input`/`ip6-input` as received on the tunnel interface.
//!
//! Next nodes: `ip4-lookup`, `ip6-lookup` (encap), `ip4-input`,
//! `ip6-input` (decap), `drop`. Counters: [`GRE_ERRORS`].

use crate::state::IfTable;
use crate::util::*;
use std::net::IpAddr;
use tern_engine::{Cx, ErrorDesc, Node};
use tern_packet::{PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::checksum;

const E_NOT_TUNNEL: u16 = 0;
const E_HEADROOM: u16 = 1;
const E_RECURSION: u16 = 2;
const E_NO_TUNNEL: u16 = 3;
const E_BAD_HEADER: u16 = 4;
const E_BAD_CSUM: u16 = 5;
const E_INNER_PROTO: u16 = 6;
const E_TUNNEL_DOWN: u16 = 7;
const E_ENCAP: u16 = 8;
const E_DECAP: u16 = 9;

pub const GRE_ERRORS: &[ErrorDesc] = &[
    ErrorDesc::drop("not-a-tunnel", "sent to encapsulation on a non-tunnel interface (a bug)"),
    ErrorDesc::drop("no-headroom", "no room for the outer headers"),
    ErrorDesc::drop("recursive-encapsulation", "the tunnel's outer packet routed into a tunnel again"),
    ErrorDesc::drop("no-tunnel", "GRE packet matching no configured tunnel (endpoints, key)"),
    ErrorDesc::drop("bad-header", "GRE header truncated, version != 0 or reserved bits set"),
    ErrorDesc::drop("bad-checksum", "GRE checksum does not verify"),
    ErrorDesc::drop("unsupported-payload", "GRE payload other than IPv4 or IPv6"),
    ErrorDesc::drop("tunnel-down", "the tunnel interface is down"),
    ErrorDesc::info("encapsulated", "packets encapsulated"),
    ErrorDesc::info("decapsulated", "packets decapsulated"),
];

const NEXT_IP4: u16 = 1;
const NEXT_IP6: u16 = 2;

const GRE_C: u16 = 0x8000;
const GRE_K: u16 = 0x2000;
const GRE_S: u16 = 0x1000;

/// `gre-encap`.
pub struct GreEncap {
    ifs: Snapshot<IfTable>,
    ident: u16,
}

impl GreEncap {
    pub fn new(ifs: Snapshot<IfTable>) -> Self {
        GreEncap { ifs, ident: 0 }
    }
}

impl Node for GreEncap {
    fn name(&self) -> &'static str {
        "gre-encap"
    }
    fn nexts(&self) -> &'static [&'static str] {
        &["drop", "ip4-lookup", "ip6-lookup"]
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        GRE_ERRORS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        let mut encapped = 0;
        for (i, &p) in pkts.iter().enumerate() {
            let m = *cx.pool.meta(p);
            let Some(t) = self.ifs.current().get(m.tx_if).and_then(|f| f.gre().copied()) else {
                next[i] = cx.drop(p, E_NOT_TUNNEL);
                continue;
            };
            if m.flags & flags::ENCAP != 0 {
                next[i] = cx.drop(p, E_RECURSION);
                continue;
            }
            let inner_len = usize::from(m.len) - usize::from(m.l3_off);
            let inner_v6 = cx.pool.data(p).get(usize::from(m.l3_off)).is_some_and(|b| b >> 4 == 6);
            let gre_len = if t.key.is_some() { 8 } else { 4 };
            let outer_len = if t.remote.is_ipv4() { 20 } else { 40 };
            let hdr = outer_len + gre_len;
            // Data must start exactly at the outer header.
            let l3 = usize::from(m.l3_off);
            let ok = if l3 >= hdr { cx.pool.advance(p, l3 - hdr) } else { cx.pool.prepend(p, hdr - l3).is_some() };
            if !ok {
                next[i] = cx.drop(p, E_HEADROOM);
                continue;
            }
            self.ident = self.ident.wrapping_add(1);
            let d = cx.pool.data_mut(p);
            let g = &mut d[outer_len..outer_len + gre_len];
            put16(g, 0, if t.key.is_some() { GRE_K } else { 0 });
            put16(g, 2, if inner_v6 { ETH_P_IPV6 } else { ETH_P_IPV4 });
            if let Some(key) = t.key {
                g[4..8].copy_from_slice(&key.to_be_bytes());
            }
            match (t.local, t.remote) {
                (IpAddr::V4(src), IpAddr::V4(dst)) => {
                    let o = &mut d[..20];
                    o[0] = 0x45;
                    o[1] = 0;
                    put16(o, 2, (20 + gre_len + inner_len) as u16);
                    put16(o, 4, self.ident);
                    put16(o, 6, 0);
                    o[8] = t.ttl;
                    o[9] = 47;
                    put16(o, 10, 0);
                    o[12..16].copy_from_slice(&src.octets());
                    o[16..20].copy_from_slice(&dst.octets());
                    let c = !checksum::data(o);
                    put16(o, 10, c);
                    next[i] = NEXT_IP4;
                }
                (IpAddr::V6(src), IpAddr::V6(dst)) => {
                    let o = &mut d[..40];
                    o[..4].copy_from_slice(&[0x60, 0, 0, 0]);
                    put16(o, 4, (gre_len + inner_len) as u16);
                    o[6] = 47;
                    o[7] = t.ttl;
                    o[8..24].copy_from_slice(&src.octets());
                    o[24..40].copy_from_slice(&dst.octets());
                    next[i] = NEXT_IP6;
                }
                _ => {
                    next[i] = cx.drop(p, E_NOT_TUNNEL);
                    continue;
                }
            }
            let mm = cx.pool.meta_mut(p);
            mm.l3_off = 0;
            mm.vlan = 0;
            mm.flags = (mm.flags | flags::LOCAL_ORIGIN | flags::ENCAP) & !flags::IPV6;
            if !t.remote.is_ipv4() {
                mm.flags |= flags::IPV6;
            }
            encapped += 1;
        }
        cx.count(E_ENCAP, encapped);
    }
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

impl Node for GreInput {
    fn name(&self) -> &'static str {
        "gre-input"
    }
    fn nexts(&self) -> &'static [&'static str] {
        &["drop", "ip4-input", "ip6-input"]
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        GRE_ERRORS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        let mut n_ok = 0;
        for (i, &p) in pkts.iter().enumerate() {
            next[i] = self.one(cx, p);
            if next[i] != 0 {
                n_ok += 1;
            }
        }
        cx.count(E_DECAP, n_ok);
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
                return cx.drop(p, E_BAD_HEADER);
            };
            (
                40 + w.upper_offset,
                IpAddr::from(<[u8; 16]>::try_from(&l3[24..40]).unwrap_or_default()),
                IpAddr::from(<[u8; 16]>::try_from(&l3[8..24]).unwrap_or_default()),
            )
        };
        let Some(g) = l3.get(gre_off..) else { return cx.drop(p, E_BAD_HEADER) };
        if g.len() < 4 {
            return cx.drop(p, E_BAD_HEADER);
        }
        let fl = be16(g, 0);
        // RFC 2784 2.5: discard when bits 1-5 are set (RFC 1701's routing,
        // strict source route and recursion; 2 and 3 are RFC 2890's key and
        // sequence) or the version is not 0; bits 6-12 are ignored.
        if fl & (0x4000 | 0x0800 | 0x0400 | 0x0007) != 0 {
            return cx.drop(p, E_BAD_HEADER);
        }
        let mut hlen = 4;
        if fl & GRE_C != 0 {
            hlen += 4;
        }
        let key = if fl & GRE_K != 0 {
            let Some(k) = g.get(hlen..hlen + 4) else { return cx.drop(p, E_BAD_HEADER) };
            hlen += 4;
            Some(u32::from_be_bytes([k[0], k[1], k[2], k[3]]))
        } else {
            None
        };
        if fl & GRE_S != 0 {
            hlen += 4;
        }
        if g.len() < hlen {
            return cx.drop(p, E_BAD_HEADER);
        }
        if fl & GRE_C != 0 && checksum::data(g) != 0xffff {
            return cx.drop(p, E_BAD_CSUM);
        }
        let proto = be16(g, 2);
        let next = match proto {
            ETH_P_IPV4 => NEXT_IP4,
            ETH_P_IPV6 => NEXT_IP6,
            _ => return cx.drop(p, E_INNER_PROTO),
        };
        let ifs = self.ifs.current();
        let Some(tunnel) = ifs.gre_tunnel(local, remote, key) else { return cx.drop(p, E_NO_TUNNEL) };
        if !tunnel.up {
            return cx.drop(p, E_TUNNEL_DOWN);
        }
        let tunnel_if = tunnel.index;
        let strip = usize::from(m.l3_off) + gre_off + hlen;
        if !cx.pool.advance(p, strip) {
            return cx.drop(p, E_BAD_HEADER);
        }
        let mm = cx.pool.meta_mut(p);
        mm.l3_off = 0;
        mm.rx_if = tunnel_if;
        mm.vlan = 0;
        mm.flags = (mm.flags | flags::DECAP) & !(flags::L2_MULTI | flags::IPV6 | flags::LOCAL_ORIGIN | flags::ENCAP);
        if next == NEXT_IP6 {
            mm.flags |= flags::IPV6;
        }
        next
    }
}
