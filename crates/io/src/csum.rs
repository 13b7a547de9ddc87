//! Completing transport checksums the sender left for "hardware" to fill.
//!
//! A packet sent by a local socket through a veth or a TAP keeps the
//! kernel's CHECKSUM_PARTIAL state: its TCP/UDP checksum field holds only
//! the pseudo-header sum, because the (virtual) device promised to finish
//! it. A packet socket receives it as is, flagged TP_STATUS_CSUMNOTREADY. A
//! router that forwards those bytes to another device would emit a wrong
//! checksum that the destination drops. So the AF_PACKET driver completes
//! the checksum of such frames, computing it from scratch (it does not trust
//! what the field holds).
//!
//! Handled: Ethernet with up to two VLAN tags, IPv4 (unfragmented) and IPv6
//! (after hop-by-hop, destination options and AH headers; not behind a
//! routing or fragment header), carrying TCP, UDP (RFC 768: a computed zero
//! is sent as all ones), ICMPv6 (RFC 4443 section 2.3, pseudo-header) or
//! ICMPv4 (RFC 792, no pseudo-header). The headers are read with
//! tern-wire's walk ([`tern_wire::walk_transport`]) and summed with its
//! checksum functions. Anything else is left untouched and reported as not
//! completed.

use tern_wire::checksum::{self, IpPair};
use tern_wire::{IpProtocol, walk_transport};

/// Completes the transport checksum of an Ethernet frame in place. Returns
/// false (frame unchanged) when the frame is not one of the handled kinds
/// or is inconsistent.
pub(crate) fn complete(frame: &mut [u8]) -> bool {
    let Ok(walk) = walk_transport(frame) else {
        return false;
    };
    // A fragment carries only part of the transport segment. A routing
    // header would make the pseudo-header use the final destination (RFC
    // 8200 section 8.1); senders do not leave such packets partial, so it
    // is reported as not handled.
    if walk.fragment || walk.ipv6_ext.is_some_and(|ext| ext.routing_offset.is_some()) {
        return false;
    }
    let v6 = matches!(walk.ips, IpPair::V6 { .. });
    // The checksum field's offset in the transport header, and whether the
    // sum covers a pseudo-header.
    let (field, pseudo) = match walk.protocol {
        IpProtocol::TCP => (16, true),
        IpProtocol::UDP => (6, true),
        IpProtocol::ICMPV6 if v6 => (2, true),
        IpProtocol::ICMP if !v6 => (2, false),
        _ => return false,
    };
    let Some(seg) = frame.get_mut(walk.l4_offset..walk.l4_offset + walk.l4_len) else {
        return false;
    };
    let Some(slot) = seg.get_mut(field..field + 2) else {
        return false;
    };
    slot.fill(0);
    let data = checksum::data(seg);
    let sum = if pseudo {
        // l4_len is bounded by the 16-bit IP length fields.
        checksum::combine(&[walk.ips.pseudo_header(walk.protocol, walk.l4_len as u32), data])
    } else {
        data
    };
    let mut c = !sum;
    if walk.protocol == IpProtocol::UDP && c == 0 {
        c = 0xffff; // RFC 768: zero means "no checksum"
    }
    let Some(slot) = seg.get_mut(field..field + 2) else {
        return false; // checked above
    };
    slot.copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// RFC 1071 one's-complement sum written out plainly, independent of
    /// tern-wire's word-at-a-time version, for the checks below.
    fn reference_sum(data: &[u8]) -> u16 {
        let mut acc: u64 = data.chunks(2).map(|c| u64::from(c[0]) << 8 | u64::from(*c.get(1).unwrap_or(&0))).sum();
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    /// An Ethernet + IPv4 + UDP frame with a valid IPv4 header checksum and
    /// the UDP checksum field set to `csum`.
    pub(crate) fn udp4(payload: &[u8], csum: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
        let total = (20 + 8 + payload.len()) as u16;
        let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        let hc = !checksum::data(&ip);
        ip[10..12].copy_from_slice(&hc.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&1234u16.to_be_bytes());
        f.extend_from_slice(&5678u16.to_be_bytes());
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&csum.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// True when the UDP checksum of a `udp4` frame verifies.
    pub(crate) fn udp4_ok(f: &[u8]) -> bool {
        let ip = &f[14..34];
        let l4 = &f[34..];
        let mut pseudo = ip[12..20].to_vec();
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        pseudo.extend_from_slice(l4);
        reference_sum(&pseudo) == 0xffff
    }

    #[test]
    fn completes_udp4_whatever_the_field_held() {
        for start in [0u16, 0x1234, 0xffff] {
            let mut f = udp4(b"hello, router", start);
            assert!(complete(&mut f));
            assert!(udp4_ok(&f), "field started as {start:#x}");
        }
    }

    #[test]
    fn completes_udp4_behind_a_vlan_tag() {
        let plain = udp4(b"tagged", 0);
        let mut f = plain[..12].to_vec();
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        f.extend_from_slice(&plain[12..]);
        assert!(complete(&mut f));
        let mut untagged = f[..12].to_vec();
        untagged.extend_from_slice(&f[16..]);
        assert!(udp4_ok(&untagged));
    }

    #[test]
    fn completes_tcp6_and_matches_a_reference() {
        // IPv6 TCP SYN from 2001:db8::1 to 2001:db8::2, ports 1000 -> 80.
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x86, 0xdd];
        let mut ip = vec![0x60, 0, 0, 0, 0, 20, 6, 64];
        let mut src = [0u8; 16];
        src[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        let mut dst = src;
        src[15] = 1;
        dst[15] = 2;
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        f.extend_from_slice(&ip);
        let tcp = [0x03, 0xe8, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0xab, 0xcd, 0, 0];
        f.extend_from_slice(&tcp);
        assert!(complete(&mut f));
        // Independent check: sum of pseudo-header and segment folds to all ones.
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src);
        pseudo.extend_from_slice(&dst);
        pseudo.extend_from_slice(&20u32.to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 6]);
        pseudo.extend_from_slice(&f[54..]);
        assert_eq!(reference_sum(&pseudo), 0xffff);
    }

    /// Ethernet + IPv6 (2001:db8::1 > 2001:db8::2) + `ext` + `l4`, the
    /// first next header `nh`.
    fn ipv6(nh: u8, ext: &[u8], l4: &[u8]) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x86, 0xdd, 0x60, 0, 0, 0];
        f.extend_from_slice(&((ext.len() + l4.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[nh, 64]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(ext);
        f.extend_from_slice(l4);
        f
    }

    #[test]
    fn completes_icmp6_behind_hop_by_hop() {
        // Hop-by-hop (router alert, as MLD has it) -> ICMPv6 echo request.
        let hbh = [58, 0, 5, 2, 0, 0, 1, 0];
        let echo = [128, 0, 0x55, 0x55, 0, 7, 0, 1, b'p', b'i', b'n', b'g'];
        let mut f = ipv6(0, &hbh, &echo);
        assert!(complete(&mut f));
        let l4 = &f[14 + 40 + 8..];
        let mut pseudo = f[22..54].to_vec();
        pseudo.extend_from_slice(&(l4.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 58]);
        pseudo.extend_from_slice(l4);
        assert_eq!(reference_sum(&pseudo), 0xffff);
        assert_ne!(&l4[2..4], &[0x55, 0x55]);
    }

    #[test]
    fn completes_icmp4_without_a_pseudo_header() {
        let mut f = udp4(&[], 0);
        f[14 + 9] = 1; // protocol ICMP; the 8 "UDP" bytes become an echo
        f[34..42].copy_from_slice(&[8, 0, 0x12, 0x34, 0, 1, 0, 2]);
        assert!(complete(&mut f));
        assert_eq!(reference_sum(&f[34..]), 0xffff);
    }

    #[test]
    fn leaves_routing_headers_and_ipv6_fragments_alone() {
        let udp = [0x04, 0xd2, 0, 53, 0, 8, 0xab, 0xcd];
        for (nh, ext) in [(43u8, [17, 0, 0, 0, 0, 0, 0, 0]), (44, [17, 0, 0, 1, 0, 0, 0, 9])] {
            let mut f = ipv6(nh, &ext, &udp);
            let before = f.clone();
            assert!(!complete(&mut f), "next header {nh}");
            assert_eq!(f, before);
        }
        // The same UDP behind a destination options header is completed.
        let mut f = ipv6(60, &[17, 0, 1, 4, 0, 0, 0, 0], &udp);
        assert!(complete(&mut f));
    }

    #[test]
    fn leaves_fragments_and_unknown_protocols_alone() {
        let mut f = udp4(b"x", 0x1111);
        f[14 + 6] = 0x20; // more fragments
        let before = f.clone();
        assert!(!complete(&mut f));
        assert_eq!(f, before);
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(!complete(&mut arp));
    }

    #[test]
    fn udp_zero_becomes_all_ones() {
        // Find a payload whose checksum computes to zero by adjusting two
        // payload bytes: then the field must hold 0xffff.
        let mut f = udp4(&[0, 0], 0);
        assert!(complete(&mut f));
        let c = u16::from_be_bytes([f[40], f[41]]);
        // Adding the current checksum value into the payload word makes the
        // new sum's complement zero.
        let fix = c;
        f[42..44].copy_from_slice(&fix.to_be_bytes());
        assert!(complete(&mut f));
        assert_eq!(u16::from_be_bytes([f[40], f[41]]), 0xffff);
        assert!(udp4_ok(&f));
    }

    #[test]
    fn never_panics_on_short_or_lying_frames() {
        let f = udp4(b"payload", 0);
        for n in 0..f.len() {
            let mut g = f[..n].to_vec();
            let _ = complete(&mut g);
        }
        let mut g = f.clone();
        g[16] = 0xff; // total length far beyond the frame
        g[17] = 0xff;
        assert!(!complete(&mut g));
    }
}
