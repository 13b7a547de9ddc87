//! The reference: a packet's classification key, read from its headers
//! (addresses, protocol, ports or ICMP type/code, TCP flags, DSCP); the
//! node adds the interfaces and VLAN.

use super::*;
use tern_wire::Ipv6Packet;

/// The classifier key of an IPv4 packet (L3 at the start of `l3`; a
/// header shorter than 20 bytes, which `ip4-input` never lets through,
/// gives the key of an all-zero header).
pub fn key_v4(l3: &[u8]) -> PacketKey {
    let Some(h) = l3.first_chunk::<20>() else { return PacketKey::default() };
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let proto = h[9];
    let mut k = PacketKey {
        src: u128::from(u32::from_be_bytes([h[12], h[13], h[14], h[15]])),
        dst: u128::from(u32::from_be_bytes([h[16], h[17], h[18], h[19]])),
        proto,
        dscp: h[1] >> 2,
        ..PacketKey::default()
    };
    let first_fragment = u16::from_be_bytes([h[6], h[7]]) & 0x1fff == 0;
    if first_fragment {
        l4_fields(&mut k, proto, l3.get(ihl..).unwrap_or_default());
    }
    k
}

/// The classifier key of an IPv6 packet (extension headers walked; a
/// header shorter than 40 bytes, which `ip6-input` never lets through,
/// gives the key of an all-zero header).
pub fn key_v6(l3: &[u8]) -> PacketKey {
    let Some(h) = l3.first_chunk::<40>() else { return PacketKey::default() };
    let proto = h[6];
    // No extension header (the usual packet): the transport header is
    // next, as the walk would say (its call cost ~40 instructions).
    if !IpProtocol(proto).is_ipv6_ext_header() {
        let mut k = key_v6_fixed(h);
        l4_fields(&mut k, proto, l3.get(40..).unwrap_or_default());
        return k;
    }
    key_v6_walked(l3)
}

/// The fields of the fixed header: addresses, next header, DSCP.
#[inline(always)]
fn key_v6_fixed(h: &[u8; 40]) -> PacketKey {
    let ip = Ipv6Packet::new_unchecked(&h[..]);
    PacketKey {
        src: u128::from(ip.src_addr()),
        dst: ip.dst_addr_u128(),
        is_v6: true,
        proto: h[6],
        dscp: ip.traffic_class() >> 2,
        ..PacketKey::default()
    }
}

/// [`key_v6`] through the extension-header walk, whatever the next
/// header.
pub(super) fn key_v6_walked(l3: &[u8]) -> PacketKey {
    let Some(h) = l3.first_chunk::<40>() else { return PacketKey::default() };
    let mut k = key_v6_fixed(h);
    if let Ok(w) = ipv6ext::walk(IpProtocol(h[6]), l3.get(40..).unwrap_or_default()) {
        k.proto = w.upper_protocol.0;
        if w.has_upper_header() {
            let proto = k.proto;
            l4_fields(&mut k, proto, l3.get(40 + w.upper_offset..).unwrap_or_default());
        }
    }
    k
}

fn l4_fields(k: &mut PacketKey, proto: u8, l4: &[u8]) {
    match (proto, l4) {
        (6 | 17 | 33 | 132 | 136, [s0, s1, d0, d1, rest @ ..]) => {
            k.sport = u16::from_be_bytes([*s0, *s1]);
            k.dport = u16::from_be_bytes([*d0, *d1]);
            k.l4_valid = true;
            if proto == 6 {
                // The flags, byte 13 of the TCP header.
                match rest.get(9) {
                    Some(&flags) => k.tcp_flags = flags,
                    None => k.l4_valid = false,
                }
            }
        }
        (1 | 58, [ty, code, ..]) => {
            k.icmp_type = *ty;
            k.icmp_code = *code;
            k.l4_valid = true;
        }
        _ => {}
    }
}
