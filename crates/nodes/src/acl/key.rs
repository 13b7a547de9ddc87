//! The reference: a packet's classification key, read from its headers
//! (addresses, protocol, ports or ICMP type/code, TCP flags, DSCP); the
//! node adds the interfaces and VLAN.

use super::*;
use tern_wire::Ipv6Packet;

/// The bits [`key_v4`] reads (for some protocol) of an IPv4 header without
/// options and its first 14 transport bytes, byte by byte: the IHL (where
/// the transport header starts), the DSCP, the fragment offset, protocol,
/// addresses, ports or ICMP type and code, TCP flags. The one list every
/// cached IPv4 verdict's masks are checked against when compiling
/// ([`covers`]; `acl::runs`), and which `key_bits_are_what_the_keys_read`
/// holds to [`key_v4`]: a key field read from another bit fails that test,
/// and once listed, the build until every cache compares it.
pub(crate) const KEY_BITS_V4: [u8; 34] = [
    0x0f, 0xfc, 0, 0, 0, 0, 0x1f, 0xff, // IHL, DSCP, fragment offset
    0, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, // protocol, source
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // destination, ports or ICMP type and code
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, // TCP flags (transport byte 13)
];

/// [`KEY_BITS_V4`] for [`key_v6`] of an IPv6 header without extension
/// headers and its first 14 transport bytes: the DSCP, next header,
/// addresses, ports or ICMPv6 type and code, TCP flags.
pub(crate) const KEY_BITS_V6: [u8; 54] = {
    let mut b = [0xffu8; 54];
    let mut i = 0;
    while i < 54 {
        let keep: u8 = match i {
            0 => 0x0f,
            1 => 0xc0,
            6 | 8..=43 | 53 => 0xff,
            _ => 0,
        };
        if let Some(x) = b.split_at_mut(i).1.first_mut() {
            *x = keep;
        }
        i += 1;
    }
    b
};

/// Whether little-endian word `mask`, laid over `bits` from byte `at`
/// on, keeps every bit listed there (bytes past `bits` list none).
pub(crate) const fn covers(mask: u64, bits: &[u8], at: usize) -> bool {
    let mut i = 0;
    while i < 8 {
        let want = match bits.split_at_checked(at + i) {
            Some((_, rest)) => match rest.first() {
                Some(&b) => b,
                None => 0,
            },
            None => 0,
        };
        if (mask >> (8 * i)) as u8 & want != want {
            return false;
        }
        i += 1;
    }
    true
}

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
