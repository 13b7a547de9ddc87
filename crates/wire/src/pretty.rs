//! One-line summaries of Ethernet frames, as the capture commands print
//! them (the role of smoltcp's `PrettyPrinter`):
//!
//! ```text
//! 02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff arp who-has 10.0.0.1 tell 10.0.0.2
//! 02:00:00:00:00:02 > 02:00:00:00:00:01 vlan 100 ipv4 10.0.0.2 > 10.0.0.1 ttl 64 udp 12345 > 53
//! 02:00:00:00:00:02 > 02:00:00:00:00:01 ipv6 2001:db8::1 > 2001:db8::2 hlim 64 icmp6 type 128 code 0
//! ```
//!
//! A summary reads each header as far as the bytes go, so a capture's
//! snapped head (shorter than the IP length fields say) still shows its
//! addresses and ports. What cannot be read ends the line with
//! `(truncated)` (the bytes stop inside a header), `(malformed)` (a field
//! the protocol forbids: IPv4 IHL below 5, a wrong version, a hop-by-hop
//! header not first, ...), `(unsupported)` (more IPv6 extension headers
//! than [`ipv6ext::MAX_EXT_HEADERS`]) or `(fragment)` (a later fragment,
//! which has no transport header). Formatting never panics, whatever the
//! bytes, and its work is bounded.

use crate::Error;
use crate::arp::{self, ArpOperation, ArpPacket};
use crate::ethernet::{self, EtherType, EthernetFrame};
use crate::icmpv4::Icmpv4Packet;
use crate::ip::IpProtocol;
use crate::ipv4::{self, Ipv4Packet};
use crate::ipv6::{self, Ipv6Packet};
use crate::ipv6ext;
use crate::tcp::TcpPacket;
use crate::udp::UdpPacket;
use crate::vlan::{self, VlanTag};
use core::fmt;

/// Most VLAN tags a summary prints before giving up with `(malformed)`.
/// The forwarding path handles two; a few more are shown so that a
/// capture shows what arrived.
pub const MAX_TAGS: usize = 4;

/// The summary of `frame` (starting at the destination MAC), as a
/// [`Display`](fmt::Display) value: `summary(frame).to_string()`.
#[inline]
pub fn summary(frame: &[u8]) -> Summary<'_> {
    Summary(frame)
}

/// A frame to print on one line; see the [module](self) documentation.
#[derive(Clone, Copy, Debug)]
pub struct Summary<'a>(&'a [u8]);

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let frame = self.0;
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return write!(f, "{} bytes (runt)", frame.len());
        };
        write!(f, "{} > {}", eth.src_addr(), eth.dst_addr())?;
        let mut ethertype = eth.ethertype();
        let mut off = ethernet::HEADER_LEN;
        let mut tags = 0;
        while ethertype.is_vlan_tpid() {
            if tags == MAX_TAGS {
                return f.write_str(" (malformed)");
            }
            let Ok(tag) = VlanTag::new_checked(frame.get(off..).unwrap_or_default()) else {
                return f.write_str(" vlan (truncated)");
            };
            write!(f, " vlan {}", tag.vid())?;
            ethertype = tag.ethertype();
            off += vlan::HEADER_LEN;
            tags += 1;
        }
        let l3 = frame.get(off..).unwrap_or_default();
        match ethertype {
            EtherType::IPV4 => fmt_ipv4(f, l3),
            EtherType::IPV6 => fmt_ipv6(f, l3),
            EtherType::ARP => fmt_arp(f, l3),
            EtherType(other) => write!(f, " ethertype 0x{other:04x}"),
        }
    }
}

fn fmt_ipv4(f: &mut fmt::Formatter<'_>, l3: &[u8]) -> fmt::Result {
    if l3.len() < ipv4::HEADER_LEN {
        return f.write_str(" ipv4 (truncated)");
    }
    // The fixed header is in the buffer: its getters are in bounds. Not
    // `new_checked`: a snapped capture head is shorter than total length.
    let ip = Ipv4Packet::new_unchecked(l3);
    write!(f, " ipv4 {} > {} ttl {}", ip.src_addr(), ip.dst_addr(), ip.ttl())?;
    let header_len = usize::from(ip.header_len());
    let total_len = usize::from(ip.total_len());
    if ip.version() != 4 || header_len < ipv4::HEADER_LEN || total_len < header_len {
        return f.write_str(" (malformed)");
    }
    let upper = l3.get(header_len..total_len.min(l3.len()));
    fmt_transport(f, ip.protocol(), upper, ip.frag_offset() != 0)
}

fn fmt_ipv6(f: &mut fmt::Formatter<'_>, l3: &[u8]) -> fmt::Result {
    if l3.len() < ipv6::HEADER_LEN {
        return f.write_str(" ipv6 (truncated)");
    }
    let ip = Ipv6Packet::new_unchecked(l3);
    write!(f, " ipv6 {} > {} hlim {}", ip.src_addr(), ip.dst_addr(), ip.hop_limit())?;
    if ip.version() != 6 {
        return f.write_str(" (malformed)");
    }
    let end = (ipv6::HEADER_LEN + usize::from(ip.payload_len())).min(l3.len());
    let payload = l3.get(ipv6::HEADER_LEN..end).unwrap_or_default();
    match ipv6ext::walk(ip.next_header(), payload) {
        Ok(walk) => fmt_transport(f, walk.upper_protocol, payload.get(walk.upper_offset..), walk.later_fragment),
        Err(Error::Truncated) => f.write_str(" (truncated)"),
        Err(Error::Unsupported) => f.write_str(" (unsupported)"),
        Err(_) => f.write_str(" (malformed)"),
    }
}

/// The transport header: `upper` is what the buffer holds of it (`None`
/// when the buffer ends before it).
fn fmt_transport(
    f: &mut fmt::Formatter<'_>,
    protocol: IpProtocol,
    upper: Option<&[u8]>,
    later_fragment: bool,
) -> fmt::Result {
    let name = match protocol {
        IpProtocol::TCP => "tcp",
        IpProtocol::UDP => "udp",
        IpProtocol::ICMP => "icmp",
        IpProtocol::ICMPV6 => "icmp6",
        IpProtocol::GRE => "gre",
        IpProtocol::ESP => "esp",
        IpProtocol(other) => return write!(f, " proto {other}"),
    };
    write!(f, " {name}")?;
    if later_fragment {
        return f.write_str(" (fragment)");
    }
    let upper = upper.unwrap_or_default();
    match protocol {
        // Ports are the first four bytes of both headers: the views read
        // them in bounds once four bytes are there.
        IpProtocol::TCP if upper.len() >= 4 => {
            let tcp = TcpPacket::new_unchecked(upper);
            write!(f, " {} > {}", tcp.src_port(), tcp.dst_port())
        }
        IpProtocol::UDP if upper.len() >= 4 => {
            let udp = UdpPacket::new_unchecked(upper);
            write!(f, " {} > {}", udp.src_port(), udp.dst_port())
        }
        // Type and code sit at the same place in ICMP and ICMPv6.
        IpProtocol::ICMP | IpProtocol::ICMPV6 if upper.len() >= 2 => {
            let icmp = Icmpv4Packet::new_unchecked(upper);
            write!(f, " type {} code {}", icmp.msg_type().0, icmp.msg_code())
        }
        IpProtocol::TCP | IpProtocol::UDP | IpProtocol::ICMP | IpProtocol::ICMPV6 => f.write_str(" (truncated)"),
        _ => Ok(()),
    }
}

fn fmt_arp(f: &mut fmt::Formatter<'_>, l3: &[u8]) -> fmt::Result {
    if l3.len() < arp::PACKET_LEN {
        return f.write_str(" arp (truncated)");
    }
    // The 28 bytes the Ethernet/IPv4 getters read are there.
    let p = ArpPacket::new_unchecked(l3);
    match p.operation() {
        ArpOperation::REQUEST => {
            write!(f, " arp who-has {} tell {}", p.target_protocol_addr(), p.source_protocol_addr())
        }
        ArpOperation::REPLY => {
            write!(f, " arp reply {} is-at {}", p.source_protocol_addr(), p.source_hardware_addr())
        }
        ArpOperation(op) => write!(f, " arp op {op}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
    const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
    const HEAD: &str = "02:00:00:00:00:02 > 02:00:00:00:00:01";

    fn eth(tags: &[(u16, u16)], ethertype: u16, l3: &[u8]) -> Vec<u8> {
        let mut f = [DST, SRC].concat();
        for &(tpid, tci) in tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    fn ipv4(proto: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
        let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
        ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        ip[6..8].copy_from_slice(&frag.to_be_bytes());
        ip.extend_from_slice(l4);
        ip
    }

    fn ipv6(nh: u8, rest: &[u8]) -> Vec<u8> {
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&(rest.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[nh, 255]);
        ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        ip.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        ip.extend_from_slice(rest);
        ip
    }

    fn s(frame: &[u8]) -> String {
        summary(frame).to_string()
    }

    const UDP_12345_53: [u8; 8] = [0x30, 0x39, 0, 53, 0, 8, 0, 0];

    #[test]
    fn common_frames() {
        let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
        arp.extend_from_slice(&SRC);
        arp.extend_from_slice(&[10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1]);
        let mut who_has = eth(&[], 0x0806, &arp);
        who_has[..6].copy_from_slice(&[0xff; 6]);
        assert_eq!(s(&who_has), "02:00:00:00:00:02 > ff:ff:ff:ff:ff:ff arp who-has 10.0.0.1 tell 10.0.0.2");
        arp[7] = 2;
        assert_eq!(s(&eth(&[], 0x0806, &arp)), format!("{HEAD} arp reply 10.0.0.2 is-at 02:00:00:00:00:02"));
        arp[6] = 1;
        assert_eq!(s(&eth(&[], 0x0806, &arp)), format!("{HEAD} arp op 258"));

        let udp = eth(&[(0x8100, 100)], 0x0800, &ipv4(17, 0, &UDP_12345_53));
        assert_eq!(s(&udp), format!("{HEAD} vlan 100 ipv4 10.0.0.2 > 10.0.0.1 ttl 64 udp 12345 > 53"));
        let tcp = eth(&[(0x88a8, 0x2007), (0x8100, 8)], 0x0800, &ipv4(6, 0, &[0, 22, 0x04, 0, 0, 0, 0, 0]));
        assert_eq!(s(&tcp), format!("{HEAD} vlan 7 vlan 8 ipv4 10.0.0.2 > 10.0.0.1 ttl 64 tcp 22 > 1024"));
        let icmp = eth(&[], 0x0800, &ipv4(1, 0, &[8, 0, 0, 0, 0, 1, 0, 1]));
        assert!(s(&icmp).ends_with("ttl 64 icmp type 8 code 0"), "{}", s(&icmp));
        let gre = eth(&[], 0x0800, &ipv4(47, 0, &[0, 0, 8, 0]));
        assert!(s(&gre).ends_with("ttl 64 gre"));
        let igmp = eth(&[], 0x0800, &ipv4(2, 0, &[0; 8]));
        assert!(s(&igmp).ends_with("ttl 64 proto 2"));
        assert_eq!(s(&eth(&[], 0x88cc, &[0; 30])), format!("{HEAD} ethertype 0x88cc"));

        let echo6 = eth(&[], 0x86dd, &ipv6(58, &[128, 0, 0, 0, 0, 1, 0, 1]));
        assert_eq!(s(&echo6), format!("{HEAD} ipv6 2001:db8::1 > fe80::2 hlim 255 icmp6 type 128 code 0"));
    }

    #[test]
    fn ipv6_extension_headers_are_walked() {
        // hop-by-hop -> destination options -> UDP.
        let mut rest = vec![60, 0, 5, 2, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0];
        rest.extend_from_slice(&UDP_12345_53);
        assert!(s(&eth(&[], 0x86dd, &ipv6(0, &rest))).ends_with("hlim 255 udp 12345 > 53"));
        // A later fragment has no ports.
        let frag = [17, 0, 0, 0x10, 0, 0, 0, 1, 0x30, 0x39, 0, 53];
        assert!(s(&eth(&[], 0x86dd, &ipv6(44, &frag))).ends_with("hlim 255 udp (fragment)"));
        // Hop-by-hop after destination options is forbidden.
        let bad = [0, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 0];
        assert!(s(&eth(&[], 0x86dd, &ipv6(60, &bad))).ends_with("hlim 255 (malformed)"));
        // Ten destination options headers: beyond the walker's bound.
        let mut many: Vec<u8> = (0..10).flat_map(|_| [60, 0, 1, 4, 0, 0, 0, 0]).collect();
        many[72] = 17;
        assert!(s(&eth(&[], 0x86dd, &ipv6(60, &many))).ends_with("hlim 255 (unsupported)"));
        assert!(s(&eth(&[], 0x86dd, &ipv6(59, &[]))).ends_with("hlim 255 proto 59"));
    }

    #[test]
    fn later_ipv4_fragments_show_no_ports() {
        let frag = eth(&[], 0x0800, &ipv4(17, 0x0010, &UDP_12345_53));
        assert!(s(&frag).ends_with("ttl 64 udp (fragment)"), "{}", s(&frag));
        // The first fragment (MF, offset 0) carries the ports.
        let first = eth(&[], 0x0800, &ipv4(17, 0x2000, &UDP_12345_53));
        assert!(s(&first).ends_with("udp 12345 > 53"));
    }

    #[test]
    fn truncated_frames_print_what_they_hold() {
        let udp = eth(&[(0x8100, 100)], 0x0800, &ipv4(17, 0, &UDP_12345_53));
        assert_eq!(s(&[1, 2, 3]), "3 bytes (runt)");
        assert_eq!(s(&udp[..13]), "13 bytes (runt)");
        assert_eq!(s(&udp[..16]), format!("{HEAD} vlan (truncated)"));
        assert_eq!(s(&udp[..20]), format!("{HEAD} vlan 100 ipv4 (truncated)"));
        assert!(s(&udp[..40]).ends_with("ttl 64 udp (truncated)"));
        // A snapped head: the ports are there though total length says more.
        assert!(s(&udp[..42]).ends_with("ttl 64 udp 12345 > 53"));
        let v6 = eth(&[], 0x86dd, &ipv6(0, &[17, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]));
        assert!(s(&v6[..50]).ends_with("ipv6 (truncated)"));
        assert!(s(&v6[..58]).ends_with("hlim 255 (truncated)"));
        assert!(s(&v6[..63]).ends_with("hlim 255 udp (truncated)"));
        assert!(s(&v6).ends_with("hlim 255 udp 258 > 772"));
        assert!(s(&eth(&[], 0x0806, &[0; 27])).ends_with(" arp (truncated)"));
    }

    #[test]
    fn hostile_frames_are_called_malformed() {
        let mut bad_ihl = eth(&[], 0x0800, &ipv4(17, 0, &UDP_12345_53));
        bad_ihl[14] = 0x44;
        assert_eq!(s(&bad_ihl), format!("{HEAD} ipv4 10.0.0.2 > 10.0.0.1 ttl 64 (malformed)"));
        let mut short_total = eth(&[], 0x0800, &ipv4(17, 0, &UDP_12345_53));
        short_total[16..18].copy_from_slice(&[0, 19]);
        assert!(s(&short_total).ends_with("ttl 64 (malformed)"));
        let mut v6_in_v4 = eth(&[], 0x0800, &ipv4(17, 0, &UDP_12345_53));
        v6_in_v4[14] = 0x65;
        assert!(s(&v6_in_v4).ends_with("ttl 64 (malformed)"));
        let mut v4_in_v6 = eth(&[], 0x86dd, &ipv6(17, &UDP_12345_53));
        v4_in_v6[14] = 0x45;
        assert!(s(&v4_in_v6).ends_with("hlim 255 (malformed)"));
        let too_many_tags = eth(&[(0x8100, 1); 5], 0x0800, &ipv4(17, 0, &UDP_12345_53));
        assert_eq!(s(&too_many_tags), format!("{HEAD} vlan 1 vlan 1 vlan 1 vlan 1 (malformed)"));
        // Options announced past the buffer: no ports read from the options.
        let mut long_ihl = eth(&[], 0x0800, &ipv4(17, 0, &UDP_12345_53));
        long_ihl[14] = 0x4f;
        long_ihl[16..18].copy_from_slice(&[0, 80]);
        assert!(s(&long_ihl).ends_with("ttl 64 udp (truncated)"), "{}", s(&long_ihl));
    }

    #[test]
    fn any_bytes_print_without_panicking() {
        // A deterministic xorshift walk over lengths and bytes, biased to
        // the EtherTypes, TPIDs and next headers that lead deeper.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let interesting = [0x08, 0x00, 0x06, 0x86, 0xdd, 0x81, 0x88, 0xa8, 0x45, 0x60, 0, 60, 43, 44, 51, 17, 6, 58];
        for _ in 0..20_000 {
            let len = (next() % 120) as usize;
            let frame: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if r % 3 == 0 { interesting[(r >> 8) as usize % interesting.len()] } else { (r >> 16) as u8 }
                })
                .collect();
            let line = s(&frame);
            assert!(!line.is_empty() && !line.contains('\n'));
        }
    }
}
