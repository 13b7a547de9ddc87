//! The reference: a packet's classification key, read from its headers
//! (addresses, protocol, ports or ICMP type/code, TCP flags, DSCP); the
//! node adds the interfaces and VLAN.

// Issue 37 item 3: 7 sites here still index packet or batch data
// directly; they go when this file reads through tern-wire views.
#![allow(clippy::indexing_slicing)]

use super::*;

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

/// The classifier key of an IPv6 packet (extension headers walked).
pub fn key_v6(l3: &[u8]) -> PacketKey {
    let proto = l3[6];
    // No extension header (the usual packet): the transport header is
    // next, as the walk would say (its call cost ~40 instructions).
    if !IpProtocol(proto).is_ipv6_ext_header() {
        let mut k = key_v6_fixed(l3);
        l4_fields(&mut k, proto, l3.get(40..).unwrap_or_default());
        return k;
    }
    key_v6_walked(l3)
}

/// The fields of the fixed header: addresses, next header, DSCP.
#[inline(always)]
fn key_v6_fixed(l3: &[u8]) -> PacketKey {
    PacketKey {
        src: be128(l3, 8),
        dst: be128(l3, 24),
        is_v6: true,
        proto: l3[6],
        dscp: ((be16(l3, 0) >> 4) as u8) >> 2,
        ..PacketKey::default()
    }
}

/// [`key_v6`] through the extension-header walk, whatever the next
/// header.
pub(super) fn key_v6_walked(l3: &[u8]) -> PacketKey {
    let mut k = key_v6_fixed(l3);
    if let Ok(w) = ipv6ext::walk(IpProtocol(l3[6]), &l3[40..]) {
        k.proto = w.upper_protocol.0;
        if w.has_upper_header() {
            let proto = k.proto;
            l4_fields(&mut k, proto, l3.get(40 + w.upper_offset..).unwrap_or_default());
        }
    }
    k
}

fn l4_fields(k: &mut PacketKey, proto: u8, l4: &[u8]) {
    match proto {
        6 | 17 | 33 | 132 | 136 if l4.len() >= 4 => {
            k.sport = be16(l4, 0);
            k.dport = be16(l4, 2);
            k.l4_valid = true;
            if proto == 6 {
                if l4.len() >= 14 {
                    k.tcp_flags = l4[13];
                } else {
                    k.l4_valid = false;
                }
            }
        }
        1 | 58 if l4.len() >= 2 => {
            k.icmp_type = l4[0];
            k.icmp_code = l4[1];
            k.l4_valid = true;
        }
        _ => {}
    }
}
