//! `gre-input`: decapsulates GRE packets addressed to tern (RFC 2784,
//! keys per RFC 2890). `ip4-local`/`ip6-local` send them here; a packet
//! that belongs to a configured tunnel (outer source = remote, outer
//! destination = local, same key) loses its outer headers and enters
//! `ip4-input`/`ip6-input` as received on the tunnel interface.
//!
//! Next nodes: `ip4-input`, `ip6-input` (by the GRE protocol), `drop`.
//! Counters: [`GreError::DESCS`] (`decapsulated` and the decapsulation
//! drops).
//!
//! Config: the tunnel interfaces (endpoints, key, up).
//!
//! Example: a GRE packet from 10.0.2.2 to 10.0.2.1 without key carrying
//! IPv4 leaves for `ip4-input` with `rx_if` = `gre0`; with a checksum that
//! does not verify it is dropped as `bad-checksum`.
//!
//! Reference: one loop, `GreInput::one` per packet; there is no fast path.

#![deny(clippy::indexing_slicing)]

use super::*;
use tern_wire::{GrePacket, Ipv4Packet, Ipv6Packet};

/// The `gre-input` node (see the module).
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
        for (o, &p) in next.iter_mut().zip(pkts) {
            *o = self.one(cx, p);
            if *o != NEXT_DROP {
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
        let l3 = d.get(usize::from(m.l3_off)..).unwrap_or_default();
        // ip4-local / ip6-local only send packets whose upper protocol is
        // GRE, their outer header validated by ip4-input / ip6-input; find
        // where the GRE header starts and the outer addresses.
        let (gre_off, local, remote) = if l3.first().is_some_and(|b| b >> 4 == 4) {
            let Ok(ip) = Ipv4Packet::new_checked(l3) else { return cx.drop(p, GreError::BadHeader) };
            (usize::from(ip.header_len()), IpAddr::V4(ip.dst_addr()), IpAddr::V4(ip.src_addr()))
        } else {
            let Some(ip) = l3.get(..40).map(Ipv6Packet::new_unchecked) else {
                return cx.drop(p, GreError::BadHeader);
            };
            let after = l3.get(40..).unwrap_or_default();
            let Ok(w) = tern_wire::ipv6ext::walk(ip.next_header(), after) else {
                return cx.drop(p, GreError::BadHeader);
            };
            (40 + w.upper_offset, IpAddr::V6(ip.dst_addr()), IpAddr::V6(ip.src_addr()))
        };
        let Some(g) = l3.get(gre_off..) else { return cx.drop(p, GreError::BadHeader) };
        if g.len() < 4 {
            return cx.drop(p, GreError::BadHeader);
        }
        // 4 bytes: the view's reads are in bounds.
        let fl = GrePacket::new_unchecked(g).flags_version();
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
            k.first_chunk::<4>().map(|k| u32::from_be_bytes(*k))
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
        let proto = u16::from(GrePacket::new_unchecked(g).protocol_type());
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
