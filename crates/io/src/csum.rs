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
//! (after hop-by-hop and destination options headers), carrying
//! TCP, UDP (RFC 768: a computed zero is sent as all ones), ICMPv6 (RFC 4443
//! section 2.3, pseudo-header) or ICMPv4 (RFC 792, no pseudo-header).
//! Anything else is left untouched and reported as not completed.

/// Ones'-complement sum of `data` (RFC 1071) added to `acc`, unfolded.
fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Where the L3 header starts and its ethertype, after VLAN tags.
fn l3(frame: &[u8]) -> Option<(usize, u16)> {
    let mut off = 12;
    let mut ty = be16(frame, off)?;
    for _ in 0..2 {
        if ty != 0x8100 && ty != 0x88a8 {
            break;
        }
        off += 4;
        ty = be16(frame, off)?;
    }
    Some((off + 2, ty))
}

/// Completes the transport checksum of an Ethernet frame in place. Returns
/// false (frame unchanged) when the frame is not one of the handled kinds
/// or is inconsistent.
pub(crate) fn complete(frame: &mut [u8]) -> bool {
    let Some((l3_off, ethertype)) = l3(frame) else {
        return false;
    };
    let Some(ip) = frame.get(l3_off..) else {
        return false;
    };
    let (l4_off, l4_len, proto, pseudo) = match ethertype {
        0x0800 => {
            let Some(&vihl) = ip.first() else {
                return false;
            };
            let ihl = usize::from(vihl & 0x0f) * 4;
            let (Some(total), Some(frag), Some(&proto)) = (be16(ip, 2), be16(ip, 6), ip.get(9)) else {
                return false;
            };
            let total = usize::from(total);
            // A fragment carries only part of the transport segment.
            if vihl >> 4 != 4 || ihl < 20 || total < ihl || total > ip.len() || frag & 0x3fff != 0 {
                return false;
            }
            let Some(addrs) = ip.get(12..20) else {
                return false;
            };
            let l4_len = total - ihl;
            let pseudo = sum(addrs, u64::from(proto) + l4_len as u64);
            (l3_off + ihl, l4_len, proto, pseudo)
        }
        0x86dd => {
            let (Some(plen), Some(&first)) = (be16(ip, 4), ip.get(6)) else {
                return false;
            };
            let plen = usize::from(plen);
            if ip.first().map(|v| v >> 4) != Some(6) || 40 + plen > ip.len() {
                return false;
            }
            let (mut nh, mut off) = (first, 40);
            // RFC 8200 section 4: skip the extension headers a sender's
            // stack places before the transport header. A routing header
            // would make the pseudo-header use the final destination
            // (RFC 8200 section 8.1); senders do not leave such packets
            // partial, so it is reported as not handled.
            while matches!(nh, 0 | 60) {
                let (Some(&next), Some(&hlen)) = (ip.get(off), ip.get(off + 1)) else {
                    return false;
                };
                nh = next;
                off += (usize::from(hlen) + 1) * 8;
            }
            if off > 40 + plen {
                return false;
            }
            let l4_len = 40 + plen - off;
            let Some(addrs) = ip.get(8..40) else {
                return false;
            };
            let pseudo = sum(addrs, u64::from(nh) + l4_len as u64);
            (l3_off + off, l4_len, nh, pseudo)
        }
        _ => return false,
    };
    let (field, use_pseudo) = match proto {
        6 => (16, true),
        17 => (6, true),
        58 if ethertype == 0x86dd => (2, true),
        1 if ethertype == 0x0800 => (2, false),
        _ => return false,
    };
    let Some(seg) = frame.get_mut(l4_off..l4_off + l4_len) else {
        return false;
    };
    if field + 2 > seg.len() {
        return false;
    }
    seg[field] = 0;
    seg[field + 1] = 0;
    let mut c = !fold(sum(seg, if use_pseudo { pseudo } else { 0 }));
    if proto == 17 && c == 0 {
        c = 0xffff; // RFC 768: zero means "no checksum"
    }
    seg[field..field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An Ethernet + IPv4 + UDP frame with a valid IPv4 header checksum and
    /// the UDP checksum field set to `csum`.
    pub(crate) fn udp4(payload: &[u8], csum: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
        let total = (20 + 8 + payload.len()) as u16;
        let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        let hc = !fold(sum(&ip, 0));
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
        let pseudo = sum(&ip[12..20], 17 + l4.len() as u64);
        fold(sum(l4, pseudo)) == 0xffff
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
        assert_eq!(fold(sum(&pseudo, 0)), 0xffff);
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
