//! The walk from the start of an Ethernet frame to its transport header:
//! VLAN tags ([`vlan::walk_tags`]), the IPv4 or IPv6 header, and the IPv6
//! extension headers ([`ipv6ext::walk`]).
//!
//! What code outside the forwarding nodes needs when it must touch the
//! transport header of a whole frame (completing a checksum, classifying a
//! captured frame) without parsing the layers below by hand.

use crate::checksum::IpPair;
use crate::ethernet::EtherType;
use crate::ip::IpProtocol;
use crate::ipv4::Ipv4Packet;
use crate::ipv6::{self, Ipv6Packet};
use crate::ipv6ext::{self, Ipv6ExtWalk};
use crate::vlan::{self, VlanWalk};
use crate::{Error, Result};

/// Where the transport header of an Ethernet frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TransportWalk {
    /// The VLAN tags and the network header's EtherType and offset.
    pub vlan: VlanWalk,
    /// The addresses of the network header (what a pseudo-header covers).
    pub ips: IpPair,
    /// The transport protocol: the IPv4 protocol field, or the first IPv6
    /// header that is not a walked extension header.
    pub protocol: IpProtocol,
    /// Offset of the transport header from the start of the frame.
    pub l4_offset: usize,
    /// Length of the transport header and payload, as the IP length
    /// fields give it (Ethernet padding excluded). `l4_offset + l4_len`
    /// never exceeds the frame length.
    pub l4_len: usize,
    /// The packet is a fragment (IPv4 MF or offset, or an IPv6 fragment
    /// header): the transport segment is not all here, and for a later
    /// fragment what sits at `l4_offset` is not a transport header.
    pub fragment: bool,
    /// The IPv6 extension header walk (`None` for IPv4); its offsets count
    /// from the start of the IPv6 payload.
    pub ipv6_ext: Option<Ipv6ExtWalk>,
}

/// Walks an Ethernet frame to its transport header.
///
/// Errors: those of [`vlan::walk_tags`]; [`Error::Unsupported`] for a
/// network protocol other than IPv4 and IPv6; [`Error::Truncated`] when the
/// frame is shorter than the IP header or than its length fields say;
/// [`Error::Malformed`] for a wrong IP version, an IPv4 IHL below 5 or a
/// total length below the header; those of [`ipv6ext::walk`] over the
/// extension headers (bounded by [`ipv6ext::MAX_EXT_HEADERS`]). Never
/// panics, whatever the bytes.
pub fn walk_transport(frame: &[u8]) -> Result<TransportWalk> {
    let vlan = vlan::walk_tags(frame)?;
    let l3 = frame.get(vlan.l3_offset..).ok_or(Error::Truncated)?;
    match vlan.ethertype {
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_checked(l3)?;
            if ip.version() != 4 {
                return Err(Error::Malformed);
            }
            let header_len = usize::from(ip.header_len());
            Ok(TransportWalk {
                vlan,
                ips: IpPair::V4 { src: ip.src_addr(), dst: ip.dst_addr() },
                protocol: ip.protocol(),
                l4_offset: vlan.l3_offset + header_len,
                // check_len: header_len <= total_len <= l3.len().
                l4_len: usize::from(ip.total_len()) - header_len,
                fragment: ip.is_fragment(),
                ipv6_ext: None,
            })
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_checked(l3)?;
            if ip.version() != 6 {
                return Err(Error::Malformed);
            }
            let payload_len = usize::from(ip.payload_len());
            let payload = l3.get(ipv6::HEADER_LEN..ipv6::HEADER_LEN + payload_len).ok_or(Error::Truncated)?;
            let ext = ipv6ext::walk(ip.next_header(), payload)?;
            // The walk only steps over headers that fit in `payload`.
            let l4_len = payload_len.checked_sub(ext.upper_offset).ok_or(Error::Truncated)?;
            Ok(TransportWalk {
                vlan,
                ips: IpPair::V6 { src: ip.src_addr(), dst: ip.dst_addr() },
                protocol: ext.upper_protocol,
                l4_offset: vlan.l3_offset + ipv6::HEADER_LEN + ext.upper_offset,
                l4_len,
                fragment: ext.fragment_offset.is_some(),
                ipv6_ext: Some(ext),
            })
        }
        _ => Err(Error::Unsupported),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum;
    use core::net::{Ipv4Addr, Ipv6Addr};

    const MACS: [u8; 12] = [0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];

    fn eth(ethertype: u16, tags: &[(u16, u16)], l3: &[u8]) -> Vec<u8> {
        let mut f = MACS.to_vec();
        for &(tpid, vid) in tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&vid.to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    fn ipv4(proto: u8, frag: u16, ihl_words: u8, l4: &[u8]) -> Vec<u8> {
        let hl = usize::from(ihl_words) * 4;
        let mut ip = vec![0u8; hl.max(20)];
        ip[0] = 0x40 | ihl_words;
        ip[2..4].copy_from_slice(&((hl.max(20) + l4.len()) as u16).to_be_bytes());
        ip[6..8].copy_from_slice(&frag.to_be_bytes());
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        ip.extend_from_slice(l4);
        ip
    }

    /// IPv6 header + `ext` (already chained) + `l4`, first next header `nh`.
    fn ipv6(nh: u8, ext: &[u8], l4: &[u8]) -> Vec<u8> {
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&((ext.len() + l4.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&[nh, 64]);
        ip.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).octets());
        ip.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).octets());
        ip.extend_from_slice(ext);
        ip.extend_from_slice(l4);
        ip
    }

    #[test]
    fn ipv4_udp_untagged_with_padding() {
        let mut f = eth(0x0800, &[], &ipv4(17, 0, 5, &[0; 8]));
        f.extend_from_slice(&[0xee; 10]); // Ethernet padding
        let w = walk_transport(&f).unwrap();
        assert_eq!((w.protocol, w.l4_offset, w.l4_len, w.fragment), (IpProtocol::UDP, 34, 8, false));
        assert_eq!(w.ips, IpPair::V4 { src: Ipv4Addr::new(10, 0, 0, 1), dst: Ipv4Addr::new(10, 0, 0, 2) });
        assert_eq!(w.ipv6_ext, None);
    }

    #[test]
    fn ipv4_options_behind_two_tags() {
        let f = eth(0x0800, &[(0x88a8, 10), (0x8100, 20)], &ipv4(6, 0, 7, &[0; 20]));
        let w = walk_transport(&f).unwrap();
        assert_eq!(w.vlan.vids(), &[10, 20]);
        assert_eq!((w.protocol, w.l4_offset, w.l4_len), (IpProtocol::TCP, 22 + 28, 20));
    }

    #[test]
    fn ipv4_fragments_are_flagged() {
        for frag in [0x2000, 0x0001, 0x2010] {
            assert!(walk_transport(&eth(0x0800, &[], &ipv4(17, frag, 5, &[0; 8]))).unwrap().fragment);
        }
        // DF alone is not a fragment.
        assert!(!walk_transport(&eth(0x0800, &[], &ipv4(17, 0x4000, 5, &[0; 8]))).unwrap().fragment);
    }

    #[test]
    fn ipv6_through_hop_by_hop_and_destination_options() {
        // hop-by-hop (8 bytes) -> destination options (16 bytes) -> TCP.
        let mut ext = vec![60, 0, 1, 4, 0, 0, 0, 0];
        ext.extend_from_slice(&[6, 1, 1, 12]);
        ext.extend_from_slice(&[0; 12]);
        let f = eth(0x86dd, &[(0x8100, 5)], &ipv6(0, &ext, &[0; 20]));
        let w = walk_transport(&f).unwrap();
        assert_eq!((w.protocol, w.l4_offset, w.l4_len), (IpProtocol::TCP, 18 + 40 + 24, 20));
        let e = w.ipv6_ext.unwrap();
        assert!(e.hop_by_hop && e.routing_offset.is_none());
        assert!(!w.fragment);
    }

    #[test]
    fn ipv6_routing_and_fragment_headers_are_reported() {
        let routing = [17, 0, 0, 0, 0, 0, 0, 0];
        let w = walk_transport(&eth(0x86dd, &[], &ipv6(43, &routing, &[0; 8]))).unwrap();
        assert_eq!(w.ipv6_ext.unwrap().routing_offset, Some(0));
        assert_eq!((w.protocol, w.l4_len), (IpProtocol::UDP, 8));
        let first_fragment = [17, 0, 0, 1, 0, 0, 0, 9];
        let w = walk_transport(&eth(0x86dd, &[], &ipv6(44, &first_fragment, &[0; 8]))).unwrap();
        assert!(w.fragment);
        assert_eq!(w.protocol, IpProtocol::UDP);
    }

    #[test]
    fn the_walk_feeds_the_pseudo_header() {
        // The UDP checksum computed from the walk verifies with the
        // independent RFC 1071 sum over a hand-built pseudo-header.
        let mut f = eth(0x0800, &[], &ipv4(17, 0, 5, &[0x04, 0xd2, 0x16, 0x2e, 0, 9, 0, 0, 0x61]));
        let w = walk_transport(&f).unwrap();
        let seg = &f[w.l4_offset..w.l4_offset + w.l4_len];
        let c = !checksum::combine(&[w.ips.pseudo_header(w.protocol, w.l4_len as u32), checksum::data(seg)]);
        f[40..42].copy_from_slice(&c.to_be_bytes());
        let mut pseudo = vec![10, 0, 0, 1, 10, 0, 0, 2, 0, 17, 0, 9];
        pseudo.extend_from_slice(&f[34..]);
        assert_eq!(checksum::data(&pseudo), 0xffff);
    }

    #[test]
    fn refusals() {
        let arp = eth(0x0806, &[], &[0; 28]);
        assert_eq!(walk_transport(&arp), Err(Error::Unsupported));
        assert_eq!(walk_transport(&MACS), Err(Error::Truncated));
        let mut lying = eth(0x0800, &[], &ipv4(17, 0, 5, &[0; 8]));
        lying[16..18].copy_from_slice(&[0xff, 0xff]); // total length past the frame
        assert_eq!(walk_transport(&lying), Err(Error::Truncated));
        let mut v6_in_v4 = eth(0x0800, &[], &ipv4(17, 0, 5, &[0; 8]));
        v6_in_v4[14] = 0x65;
        assert_eq!(walk_transport(&v6_in_v4), Err(Error::Malformed));
        let short_ihl = eth(0x0800, &[], &ipv4(17, 0, 4, &[0; 8]));
        assert_eq!(walk_transport(&short_ihl), Err(Error::Malformed));
        let mut v6 = eth(0x86dd, &[], &ipv6(17, &[], &[0; 8]));
        v6[19] = 0xff; // payload length past the frame
        assert_eq!(walk_transport(&v6), Err(Error::Truncated));
        // Extension header running past the payload.
        let hbh = eth(0x86dd, &[], &ipv6(0, &[17, 4, 0, 0, 0, 0, 0, 0], &[]));
        assert_eq!(walk_transport(&hbh), Err(Error::Truncated));
    }

    #[test]
    fn every_prefix_and_every_byte_flip_is_safe() {
        let mut ext = vec![60, 0, 1, 4, 0, 0, 0, 0];
        ext.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        let frames = [
            eth(0x0800, &[(0x8100, 7)], &ipv4(6, 0, 6, &[0; 20])),
            eth(0x86dd, &[(0x88a8, 1), (0x8100, 2)], &ipv6(0, &ext, &[0; 8])),
        ];
        for f in &frames {
            for n in 0..=f.len() {
                if let Ok(w) = walk_transport(&f[..n]) {
                    assert!(w.l4_offset + w.l4_len <= n);
                }
            }
            for i in 0..f.len() {
                for v in [0x00, 0x01, 0x0f, 0x2c, 0x3b, 0x80, 0xff] {
                    let mut g = f.clone();
                    g[i] = v;
                    if let Ok(w) = walk_transport(&g) {
                        assert!(w.l4_offset + w.l4_len <= g.len());
                    }
                }
            }
        }
    }
}
