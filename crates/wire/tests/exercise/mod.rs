//! One function per parser that drives a byte buffer through everything a
//! caller can do with it: `new_checked`, every getter and accessor, the
//! walkers, `Repr::parse`, and `emit` -> `parse` on the result, asserting
//! that the round trip gives the same `Repr` back.
//!
//! Shared by the property tests (`tests/proptests.rs`) and the cargo-fuzz
//! targets (`fuzz/fuzz_targets/*.rs`, via `#[path]`), so both check the
//! same oracle. A panic here is a bug: either a getter went out of bounds
//! on a checked view, or emit and parse disagree.
#![allow(dead_code)]

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use tern_wire::checksum::IpPair;
use tern_wire::ethernet::EthernetFrame;
use tern_wire::ipv6ext::{self, AuthHeader, Ipv6ExtHeader, Ipv6FragmentHeader};
use tern_wire::ndisc::NdOptions;
use tern_wire::tcp::TcpOptions;
use tern_wire::vlan::{self, VlanTag};
use tern_wire::*;

pub const SRC4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
pub const DST4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
pub const SRC6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const DST6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);

pub fn pairs() -> [IpPair; 2] {
    [IpPair::V4 { src: SRC4, dst: DST4 }, IpPair::V6 { src: SRC6, dst: DST6 }]
}

pub fn ethernet_vlan(data: &[u8]) {
    frame(data);
    if let Ok(frame) = EthernetFrame::new_checked(data) {
        black_box((frame.dst_addr(), frame.src_addr(), frame.ethertype(), frame.payload()));
        let dst = frame.dst_addr();
        black_box((dst.is_broadcast(), dst.is_multicast(), dst.is_unicast(), dst.is_local()));
        let repr = EthernetRepr::parse(&frame).expect("checked frame parses");
        let mut buf = [0u8; 14];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..])).expect("emit");
        assert_eq!(EthernetRepr::parse(&EthernetFrame::new_unchecked(&buf[..])), Ok(repr));
        assert_eq!(&buf[..], &data[..14]);
    }
    match vlan::walk_tags(data) {
        Ok(walk) => {
            assert!(walk.l3_offset <= data.len());
            assert_eq!(walk.l3_offset, 14 + 4 * walk.tag_count());
            assert_eq!(walk.vids().len(), walk.tag_count());
            assert!(walk.vids().iter().all(|&v| v < 0xfff));
            assert!(!walk.ethertype.is_vlan_tpid());
            black_box((walk.outer_vid(), walk.inner_vid()));
        }
        Err(e) => assert_ne!(e, Error::BadChecksum),
    }
    let tag_bytes = data.get(14..).unwrap_or(data);
    if let Ok(tag) = VlanTag::new_checked(tag_bytes) {
        black_box((tag.tci(), tag.pcp(), tag.dei(), tag.vid(), tag.ethertype(), tag.payload()));
        if let Ok(repr) = VlanRepr::parse(&tag) {
            let mut buf = [0u8; 4];
            repr.emit(&mut VlanTag::new_unchecked(&mut buf[..])).expect("emit");
            assert_eq!(VlanRepr::parse(&VlanTag::new_unchecked(&buf[..])), Ok(repr));
        }
    }
}

/// The frame walk and the pretty-printer over a whole Ethernet frame.
pub fn frame(data: &[u8]) {
    match walk_transport(data) {
        Ok(w) => {
            assert!(w.l4_offset >= w.vlan.l3_offset);
            assert!(w.l4_offset + w.l4_len <= data.len(), "the transport segment is in the frame");
            black_box(w.ips.pseudo_header(w.protocol, w.l4_len as u32));
            match w.ips {
                IpPair::V4 { .. } => assert_eq!(w.ipv6_ext, None),
                IpPair::V6 { .. } => assert!(w.ipv6_ext.is_some()),
            }
        }
        Err(e) => assert_ne!(e, Error::BadChecksum),
    }
    let line = pretty::summary(data).to_string();
    assert!(!line.is_empty() && !line.contains('\n'));
}

/// `l3` behind an untagged Ethernet header of `ethertype`, through [`frame`].
fn framed(ethertype: u16, l3: &[u8]) {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    frame(&f);
}

pub fn arp(data: &[u8]) {
    let Ok(p) = ArpPacket::new_checked(data) else {
        return;
    };
    black_box((
        p.hardware_type(),
        p.protocol_type(),
        p.hardware_len(),
        p.protocol_len(),
        p.operation(),
        p.is_ethernet_ipv4(),
    ));
    black_box((p.source_hardware_addr(), p.source_protocol_addr(), p.target_hardware_addr(), p.target_protocol_addr()));
    if let Ok(repr) = ArpRepr::parse(&p) {
        let mut buf = [0u8; 28];
        repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..])).expect("emit");
        assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).expect("28 bytes")), Ok(repr));
        assert_eq!(&buf[..], &data[..28]);
    }
}

pub fn ipv4(data: &[u8]) {
    framed(0x0800, data);
    let Ok(p) = Ipv4Packet::new_checked(data) else {
        return;
    };
    black_box((p.version(), p.header_len(), p.dscp(), p.ecn(), p.tos(), p.total_len()));
    black_box((p.ident(), p.flags_frag_word(), p.reserved_flag(), p.dont_frag(), p.more_frags()));
    black_box((p.frag_offset(), p.is_fragment(), p.ttl(), p.protocol(), p.checksum()));
    black_box((p.src_addr(), p.dst_addr(), p.src_addr_u32(), p.dst_addr_u32()));
    black_box((p.options(), p.payload()));
    let valid = p.verify_checksum();
    let mut copy = Ipv4Packet::new_unchecked(data.to_vec());
    let before = copy.ttl();
    let after = copy.decrement_ttl();
    assert_eq!(after, before.saturating_sub(1));
    assert_eq!(copy.verify_checksum(), valid, "decrement_ttl keeps the checksum's validity");

    if let Ok(repr) = Ipv4Repr::parse(&p, ChecksumMode::Ignore) {
        assert_eq!(usize::from(repr.payload_len), p.payload().len());
        let mut buf = vec![0u8; repr.buffer_len() + usize::from(repr.payload_len)];
        let mut out = Ipv4Packet::new_unchecked(&mut buf[..]);
        repr.emit(&mut out).expect("emit");
        out.payload_mut().copy_from_slice(p.payload());
        let out = Ipv4Packet::new_checked(&buf[..]).expect("emitted header is checked");
        assert_eq!(Ipv4Repr::parse(&out, ChecksumMode::Verify), Ok(repr));
        assert_eq!(out.payload(), p.payload());
    }
}

pub fn ipv6_ext(data: &[u8]) {
    framed(0x86dd, data);
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        black_box((p.version(), p.traffic_class(), p.dscp(), p.ecn(), p.flow_label()));
        black_box((p.payload_len(), p.next_header(), p.hop_limit(), p.src_addr(), p.dst_addr()));
        black_box((p.dst_addr_u128(), p.payload()));
        if let Ok(walk) = p.walk_ext_headers() {
            assert!(walk.upper_offset >= 40);
            assert!(walk.upper_offset <= 40 + usize::from(p.payload_len()));
            assert!(usize::from(walk.header_count) <= ipv6ext::MAX_EXT_HEADERS);
            assert!(!walk.upper_protocol.is_ipv6_ext_header() || walk.later_fragment);
            black_box(walk.has_upper_header());
        }
        if let Ok(repr) = Ipv6Repr::parse(&p) {
            let mut buf = vec![0u8; 40 + usize::from(repr.payload_len)];
            repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..])).expect("emit");
            assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&buf[..])), Ok(repr));
            assert_eq!(&buf[..40], &data[..40]);
        }
    }
    // The walker and the extension header views on their own.
    if let Some((&first, rest)) = data.split_first() {
        if let Ok(walk) = ipv6ext::walk(IpProtocol(first), rest) {
            assert!(walk.upper_offset <= rest.len());
        }
        if let Ok(h) = Ipv6ExtHeader::new_checked(rest) {
            black_box((h.next_header(), h.header_len(), h.data(), h.routing_type(), h.segments_left()));
            for option in h.options().take(4096) {
                black_box(option.ok());
            }
        }
        if let Ok(h) = Ipv6FragmentHeader::new_checked(rest) {
            black_box((h.next_header(), h.frag_offset(), h.more_frags(), h.ident(), h.payload()));
            let repr = Ipv6FragmentRepr::parse(&h).expect("checked header parses");
            let mut buf = [0u8; 8];
            repr.emit(&mut Ipv6FragmentHeader::new_unchecked(&mut buf[..])).expect("emit");
            assert_eq!(Ipv6FragmentRepr::parse(&Ipv6FragmentHeader::new_unchecked(&buf[..])), Ok(repr));
        }
        if let Ok(h) = AuthHeader::new_checked(rest) {
            black_box((h.next_header(), h.header_len(), h.spi(), h.seq_number(), h.icv()));
        }
    }
}

pub fn icmpv4(data: &[u8]) {
    let Ok(p) = Icmpv4Packet::new_checked(data) else {
        return;
    };
    black_box((p.msg_type(), p.msg_code(), p.checksum(), p.rest_of_header(), p.echo_ident()));
    black_box((p.echo_seq_no(), p.next_hop_mtu(), p.pointer(), p.data(), p.verify_checksum()));
    black_box(p.msg_type().is_error());
    if let Ok(repr) = Icmpv4Repr::parse(&p, ChecksumMode::Ignore) {
        assert_eq!(repr.buffer_len(), data.len());
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..])).expect("emit");
        let out = Icmpv4Packet::new_checked(&buf[..]).expect("emitted message is checked");
        assert_eq!(Icmpv4Repr::parse(&out, ChecksumMode::Verify), Ok(repr));
    }
}

pub fn icmpv6_nd(data: &[u8]) {
    let Ok(p) = Icmpv6Packet::new_checked(data) else {
        return;
    };
    black_box((p.msg_type(), p.msg_code(), p.checksum(), p.rest_of_header(), p.echo_ident()));
    black_box((p.echo_seq_no(), p.mtu(), p.pointer(), p.data(), p.verify_checksum(SRC6, DST6)));
    black_box((p.msg_type().is_error(), p.msg_type().is_ndisc()));
    let options_at = p.msg_type().header_len();
    // Each option that parses must survive emit -> parse; the walk stops
    // at the first bad one.
    for option in NdOptions::new(&data[options_at..]).map_while(|o| o.ok()) {
        let mut buf = vec![0u8; option.buffer_len()];
        if option.emit(&mut buf).is_ok() {
            let again: Vec<_> = NdOptions::new(&buf).collect();
            assert_eq!(again, vec![Ok(option)]);
        }
    }
    if let Ok(repr) = Icmpv6Repr::parse(&p, SRC6, DST6, ChecksumMode::Ignore) {
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), SRC6, DST6).expect("emit");
        let out = Icmpv6Packet::new_checked(&buf[..]).expect("emitted message is checked");
        assert_eq!(Icmpv6Repr::parse(&out, SRC6, DST6, ChecksumMode::Verify), Ok(repr));
    }
}

pub fn udp(data: &[u8]) {
    let Ok(p) = UdpPacket::new_checked(data) else {
        return;
    };
    black_box((p.src_port(), p.dst_port(), p.len(), p.is_empty(), p.checksum(), p.payload()));
    for ip in pairs() {
        black_box(p.verify_checksum(&ip));
        if let Ok(repr) = UdpRepr::parse(&p, &ip, ChecksumMode::Ignore) {
            let mut buf = vec![0u8; repr.buffer_len()];
            buf[8..].copy_from_slice(p.payload());
            repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), &ip).expect("emit");
            let out = UdpPacket::new_checked(&buf[..]).expect("emitted datagram is checked");
            assert_eq!(UdpRepr::parse(&out, &ip, ChecksumMode::Verify), Ok(repr));
        }
    }
}

pub fn tcp(data: &[u8]) {
    let Ok(p) = TcpPacket::new_checked(data) else {
        return;
    };
    black_box((p.src_port(), p.dst_port(), p.seq_number(), p.ack_number(), p.header_len()));
    black_box((p.options_len(), p.flags(), p.fin(), p.syn(), p.rst(), p.psh(), p.ack(), p.urg()));
    black_box((p.ece(), p.cwr(), p.window_len(), p.checksum(), p.urgent_at(), p.options(), p.payload()));
    for option in TcpOptions::new(p.options()) {
        black_box(option.ok());
    }
    for ip in pairs() {
        let valid = p.verify_checksum(&ip);
        let mut copy = TcpPacket::new_unchecked(data.to_vec());
        if copy.clamp_mss(536) {
            assert_eq!(copy.verify_checksum(&ip), valid, "clamp_mss keeps the checksum's validity");
        }
        if let Ok(repr) = TcpRepr::parse(&p, &ip, ChecksumMode::Ignore) {
            let mut buf = vec![0u8; repr.buffer_len()];
            let header_len = repr.header_len();
            buf[header_len..].copy_from_slice(p.payload());
            repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), &ip).expect("emit");
            let out = TcpPacket::new_checked(&buf[..]).expect("emitted segment is checked");
            assert_eq!(TcpRepr::parse(&out, &ip, ChecksumMode::Verify), Ok(repr));
        }
    }
}

pub fn gre(data: &[u8]) {
    let Ok(p) = GrePacket::new_checked(data) else {
        return;
    };
    black_box((p.flags_version(), p.checksum_present(), p.key_present(), p.seq_present()));
    black_box((p.reserved0(), p.version(), p.protocol_type(), p.header_len(), p.checksum()));
    black_box((p.key(), p.seq_number(), p.payload(), p.verify_checksum()));
    if let Ok(repr) = GreRepr::parse(&p, ChecksumMode::Ignore) {
        let mut buf = vec![0u8; repr.buffer_len() + p.payload().len()];
        buf[repr.buffer_len()..].copy_from_slice(p.payload());
        repr.emit(&mut GrePacket::new_unchecked(&mut buf[..])).expect("emit");
        let out = GrePacket::new_checked(&buf[..]).expect("emitted header is checked");
        assert_eq!(GreRepr::parse(&out, ChecksumMode::Verify), Ok(repr));
    }
}

pub fn esp(data: &[u8]) {
    let Ok(p) = EspPacket::new_checked(data) else {
        return;
    };
    black_box((p.spi(), p.seq_number(), p.payload()));
    if let Ok(repr) = EspRepr::parse(&p) {
        let mut buf = [0u8; 8];
        repr.emit(&mut EspPacket::new_unchecked(&mut buf[..])).expect("emit");
        assert_eq!(EspRepr::parse(&EspPacket::new_unchecked(&buf[..])), Ok(repr));
    }
}

/// Every exercise, for inputs whose protocol is not known.
pub fn all(data: &[u8]) {
    ethernet_vlan(data);
    arp(data);
    ipv4(data);
    ipv6_ext(data);
    icmpv4(data);
    icmpv6_nd(data);
    udp(data);
    tcp(data);
    gre(data);
    esp(data);
}
