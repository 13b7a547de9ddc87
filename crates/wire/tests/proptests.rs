//! Property tests over the whole public API:
//! * `emit` -> `parse` gives back every `Repr` generated from its fields;
//! * checked views, every getter, the walkers and `parse` never panic on
//!   arbitrary bytes, nor on mutations of the real packets of the fuzz seed
//!   corpus (`fuzz/corpus/<target>/`), which reach the deeper paths;
//! * every seed of the corpus (built by scapy, `fuzz/gen_corpus.py`) parses
//!   and verifies: a differential check against another implementation.

mod exercise;

use exercise::{DST4, DST6, SRC4, SRC6};
use proptest::collection::vec;
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use tern_wire::checksum::IpPair;
use tern_wire::ethernet::EthernetFrame;
use tern_wire::ipv6ext::Ipv6FragmentHeader;
use tern_wire::ndisc::{NdOption, PrefixInfo};
use tern_wire::vlan::{self, VlanTag};
use tern_wire::*;

// ---------------------------------------------------------------------------
// Seeds.

const TARGETS: [&str; 10] =
    ["ethernet_vlan", "arp", "ipv4", "ipv6_ext", "icmpv4", "icmpv6_nd", "udp", "tcp", "gre", "esp"];

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir: PathBuf = [env!("CARGO_MANIFEST_DIR"), "fuzz", "corpus", target].iter().collect();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("seed corpus {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    let seeds: Vec<_> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

fn exercise_fn(target: &str) -> fn(&[u8]) {
    match target {
        "ethernet_vlan" => exercise::ethernet_vlan,
        "arp" => exercise::arp,
        "ipv4" => exercise::ipv4,
        "ipv6_ext" => exercise::ipv6_ext,
        "icmpv4" => exercise::icmpv4,
        "icmpv6_nd" => exercise::icmpv6_nd,
        "udp" => exercise::udp,
        "tcp" => exercise::tcp,
        "gre" => exercise::gre,
        "esp" => exercise::esp,
        other => panic!("unknown target {other}"),
    }
}

#[test]
fn every_seed_parses_and_verifies() {
    let v4 = IpPair::V4 { src: SRC4, dst: DST4 };
    for target in TARGETS {
        for (i, seed) in seeds(target).iter().enumerate() {
            let s = &seed[..];
            let ok = match target {
                "ethernet_vlan" => {
                    let walk = vlan::walk_tags(s).unwrap();
                    EthernetRepr::parse(&EthernetFrame::new_checked(s).unwrap()).is_ok()
                        && [EtherType::IPV4, EtherType::IPV6, EtherType::ARP].contains(&walk.ethertype)
                }
                "arp" => ArpRepr::parse(&ArpPacket::new_checked(s).unwrap()).is_ok(),
                "ipv4" => Ipv4Repr::parse(&Ipv4Packet::new_checked(s).unwrap(), ChecksumMode::Verify).is_ok(),
                "ipv6_ext" => {
                    let p = Ipv6Packet::new_checked(s).unwrap();
                    Ipv6Repr::parse(&p).is_ok() && p.walk_ext_headers().is_ok()
                }
                "icmpv4" => Icmpv4Repr::parse(&Icmpv4Packet::new_checked(s).unwrap(), ChecksumMode::Verify).is_ok(),
                "icmpv6_nd" => {
                    Icmpv6Repr::parse(&Icmpv6Packet::new_checked(s).unwrap(), SRC6, DST6, ChecksumMode::Verify).is_ok()
                }
                "udp" => UdpRepr::parse(&UdpPacket::new_checked(s).unwrap(), &v4, ChecksumMode::Verify).is_ok(),
                "tcp" => TcpRepr::parse(&TcpPacket::new_checked(s).unwrap(), &v4, ChecksumMode::Verify).is_ok(),
                "gre" => GreRepr::parse(&GrePacket::new_checked(s).unwrap(), ChecksumMode::Verify).is_ok(),
                "esp" => EspRepr::parse(&EspPacket::new_checked(s).unwrap()).is_ok(),
                _ => unreachable!(),
            };
            assert!(ok, "{target} seed #{i} does not parse");
            exercise_fn(target)(s);
        }
    }
}

/// A seed of `target` with up to 8 bytes overwritten, then possibly cut
/// or extended.
fn mutated(target: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let seeds = seeds(target);
    (
        any::<prop::sample::Index>(),
        vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        prop_oneof![Just(None), (0usize..200).prop_map(Some)],
        vec(any::<u8>(), 0..4),
    )
        .prop_map(move |(which, writes, cut, tail)| {
            let mut b = seeds[which.index(seeds.len())].clone();
            for (at, value) in writes {
                let len = b.len();
                if len > 0 {
                    b[at.index(len)] = value;
                }
            }
            if let Some(cut) = cut {
                b.truncate(cut);
            }
            b.extend_from_slice(&tail);
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(data in vec(any::<u8>(), 0..160)) {
        exercise::all(&data);
    }

    #[test]
    fn mutated_ethernet_vlan(data in mutated("ethernet_vlan")) { exercise::ethernet_vlan(&data) }
    #[test]
    fn mutated_arp(data in mutated("arp")) { exercise::arp(&data) }
    #[test]
    fn mutated_ipv4(data in mutated("ipv4")) { exercise::ipv4(&data) }
    #[test]
    fn mutated_ipv6_ext(data in mutated("ipv6_ext")) { exercise::ipv6_ext(&data) }
    #[test]
    fn mutated_icmpv4(data in mutated("icmpv4")) { exercise::icmpv4(&data) }
    #[test]
    fn mutated_icmpv6_nd(data in mutated("icmpv6_nd")) { exercise::icmpv6_nd(&data) }
    #[test]
    fn mutated_udp(data in mutated("udp")) { exercise::udp(&data) }
    #[test]
    fn mutated_tcp(data in mutated("tcp")) { exercise::tcp(&data) }
    #[test]
    fn mutated_gre(data in mutated("gre")) { exercise::gre(&data) }
    #[test]
    fn mutated_esp(data in mutated("esp")) { exercise::esp(&data) }
}

// ---------------------------------------------------------------------------
// Repr strategies.

fn mac() -> impl Strategy<Value = EthernetAddress> {
    any::<[u8; 6]>().prop_map(EthernetAddress)
}

fn v4() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from)
}

fn v6() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>().prop_map(Ipv6Addr::from)
}

fn v6_not_multicast() -> impl Strategy<Value = Ipv6Addr> {
    v6().prop_filter("not multicast", |a| !a.is_multicast())
}

fn ip_pair() -> impl Strategy<Value = IpPair> {
    prop_oneof![
        (v4(), v4()).prop_map(|(src, dst)| IpPair::V4 { src, dst }),
        (v6(), v6()).prop_map(|(src, dst)| IpPair::V6 { src, dst }),
    ]
}

fn nd_option() -> impl Strategy<Value = (u8, Vec<u8>, PrefixInfo, EthernetAddress, u32)> {
    (
        0u8..6,
        (0usize..3).prop_flat_map(|n| vec(any::<u8>(), n * 8..=n * 8)),
        (any::<u8>(), any::<bool>(), any::<bool>(), any::<u32>(), any::<u32>(), v6()).prop_map(
            |(prefix_len, on_link, autonomous, valid_lifetime, preferred_lifetime, prefix)| PrefixInfo {
                prefix_len,
                on_link,
                autonomous,
                valid_lifetime,
                preferred_lifetime,
                prefix,
            },
        ),
        mac(),
        any::<u32>(),
    )
}

/// Builds an ND option from generated parts (unknown options get type 200
/// and 6 + 8n bytes of data so their length is exact).
fn build_nd_option<'a>(parts: &'a (u8, Vec<u8>, PrefixInfo, EthernetAddress, u32)) -> NdOption<'a> {
    let (kind, data, prefix, mac, mtu) = parts;
    match kind {
        0 => NdOption::SourceLinkLayerAddr(*mac),
        1 => NdOption::TargetLinkLayerAddr(*mac),
        2 => NdOption::PrefixInformation(*prefix),
        3 => NdOption::RedirectedHeader(data),
        4 => NdOption::Mtu(*mtu),
        _ => NdOption::Unknown { option_type: 200, data: &[1, 2, 3, 4, 5, 6] },
    }
}

fn emit_nd_options(parts: &[(u8, Vec<u8>, PrefixInfo, EthernetAddress, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        let option = build_nd_option(p);
        let mut buf = vec![0u8; option.buffer_len()];
        option.emit(&mut buf).unwrap();
        out.extend_from_slice(&buf);
    }
    out
}

/// TCP options as bytes, from a list of (kind selector, value), padded
/// with end-of-list to a multiple of 4 and at most 40 bytes.
fn tcp_options() -> impl Strategy<Value = Vec<u8>> {
    vec((0u8..6, any::<u32>(), any::<u32>()), 0..6).prop_map(|items| {
        let mut out = Vec::new();
        for (kind, a, b) in items {
            let bytes: Vec<u8> = match kind {
                0 => vec![1],
                1 => [&[2u8, 4][..], &(a as u16).to_be_bytes()].concat(),
                2 => vec![3, 3, (a % 15) as u8],
                3 => vec![4, 2],
                4 => [&[8u8, 10][..], &a.to_be_bytes(), &b.to_be_bytes()].concat(),
                _ => vec![30, 4, a as u8, b as u8],
            };
            if out.len() + bytes.len() <= 40 {
                out.extend_from_slice(&bytes);
            }
        }
        let padded = out.len().next_multiple_of(4);
        out.resize(padded, 0);
        out
    })
}

proptest! {
    #[test]
    fn ethernet_round_trip(src in mac(), dst in mac(), et in any::<u16>()) {
        let repr = EthernetRepr { src_addr: src, dst_addr: dst, ethertype: EtherType(et) };
        let mut buf = [0u8; 14];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&EthernetFrame::new_checked(&buf[..]).unwrap()), Ok(repr));
    }

    #[test]
    fn vlan_round_trip(pcp in 0u8..8, dei in any::<bool>(), vid in 0u16..4095, et in any::<u16>()) {
        let repr = VlanRepr { pcp, dei, vid, ethertype: EtherType(et) };
        let mut buf = [0u8; 4];
        repr.emit(&mut VlanTag::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(VlanRepr::parse(&VlanTag::new_checked(&buf[..]).unwrap()), Ok(repr));
    }

    #[test]
    fn arp_round_trip(op in any::<u16>(), sha in mac(), spa in v4(), tha in mac(), tpa in v4()) {
        let repr = ArpRepr {
            operation: ArpOperation(op),
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_hardware_addr: tha,
            target_protocol_addr: tpa,
        };
        let mut buf = [0u8; 28];
        repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()), Ok(repr));
    }

    #[test]
    fn ipv4_round_trip(
        src in v4(), dst in v4(), proto in any::<u8>(), payload_len in 0u16..=65515,
        ttl in any::<u8>(), dscp in 0u8..64, ecn in 0u8..4, ident in any::<u16>(),
        df in any::<bool>(), mf in any::<bool>(), units in 0u16..8192,
    ) {
        let repr = Ipv4Repr {
            src_addr: src, dst_addr: dst, protocol: IpProtocol(proto), payload_len, ttl, dscp, ecn,
            ident, dont_frag: df, more_frags: mf, frag_offset: units * 8,
        };
        let mut buf = vec![0u8; 20 + usize::from(payload_len)];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..])).unwrap();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Ipv4Repr::parse(&p, ChecksumMode::Verify), Ok(repr));
    }

    #[test]
    fn ipv6_round_trip(
        src in v6(), dst in v6(), nh in any::<u8>(), payload_len in 0u16..2000,
        hop_limit in any::<u8>(), tc in any::<u8>(), flow in 0u32..(1 << 20),
    ) {
        let repr = Ipv6Repr {
            src_addr: src, dst_addr: dst, next_header: IpProtocol(nh), payload_len, hop_limit,
            traffic_class: tc, flow_label: flow,
        };
        let mut buf = vec![0u8; 40 + usize::from(payload_len)];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&buf[..]).unwrap()), Ok(repr));
    }

    #[test]
    fn ipv6_fragment_round_trip(nh in any::<u8>(), units in 0u16..8192, m in any::<bool>(), id in any::<u32>()) {
        let repr = Ipv6FragmentRepr { next_header: IpProtocol(nh), frag_offset: units * 8, more_frags: m, ident: id };
        let mut buf = [0u8; 8];
        repr.emit(&mut Ipv6FragmentHeader::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(Ipv6FragmentRepr::parse(&Ipv6FragmentHeader::new_checked(&buf[..]).unwrap()), Ok(repr));
    }

    #[test]
    fn icmpv4_round_trip(
        kind in 0u8..5, code in any::<u8>(), a in any::<u16>(), b in any::<u16>(), rest in any::<u32>(),
        other_type in any::<u8>().prop_filter("not a parsed type", |t| ![0, 3, 8, 11].contains(t)),
        data in vec(any::<u8>(), 0..64),
    ) {
        let repr = match kind {
            0 => Icmpv4Repr::EchoRequest { ident: a, seq_no: b, data: &data },
            1 => Icmpv4Repr::EchoReply { ident: a, seq_no: b, data: &data },
            2 => Icmpv4Repr::DstUnreachable { code, next_hop_mtu: a, data: &data },
            3 => Icmpv4Repr::TimeExceeded { code, data: &data },
            _ => Icmpv4Repr::Other { msg_type: Icmpv4Type(other_type), code, rest_of_header: rest, data: &data },
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..])).unwrap();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Icmpv4Repr::parse(&p, ChecksumMode::Verify), Ok(repr));
    }

    #[test]
    fn icmpv6_round_trip(
        kind in 0u8..7, code in any::<u8>(), a in any::<u16>(), b in any::<u16>(), word in any::<u32>(),
        other_type in any::<u8>().prop_filter("not a parsed type", |t| ![1, 2, 3, 4, 128, 129, 133, 134, 135, 136, 137].contains(t)),
        data in vec(any::<u8>(), 0..64), src in v6(), dst in v6(),
    ) {
        let repr = match kind {
            0 => Icmpv6Repr::EchoRequest { ident: a, seq_no: b, data: &data },
            1 => Icmpv6Repr::EchoReply { ident: a, seq_no: b, data: &data },
            2 => Icmpv6Repr::DstUnreachable { code, data: &data },
            3 => Icmpv6Repr::PacketTooBig { mtu: word, data: &data },
            4 => Icmpv6Repr::TimeExceeded { code, data: &data },
            5 => Icmpv6Repr::ParamProblem { code, pointer: word, data: &data },
            _ => Icmpv6Repr::Other { msg_type: Icmpv6Type(other_type), code, rest_of_header: word, data: &data },
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), src, dst).unwrap();
        let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Icmpv6Repr::parse(&p, src, dst, ChecksumMode::Verify), Ok(repr));
    }

    #[test]
    fn ndisc_round_trip(
        kind in 0u8..5, lladdr in proptest::option::of(mac()), target in v6_not_multicast(),
        dest in v6_not_multicast(), flags in any::<(bool, bool, bool)>(), ra in any::<(u8, u8, u16, u32, u32)>(),
        options in vec(nd_option(), 0..4), src in v6(), dst in v6(),
    ) {
        let options = emit_nd_options(&options);
        let nd = match kind {
            0 => NdiscRepr::RouterSolicit { lladdr },
            1 => NdiscRepr::RouterAdvert {
                hop_limit: ra.0, flags: ra.1, router_lifetime: ra.2, reachable_time: ra.3,
                retrans_time: ra.4, options: &options,
            },
            2 => NdiscRepr::NeighborSolicit { target_addr: target, lladdr },
            3 => NdiscRepr::NeighborAdvert {
                router: flags.0, solicited: flags.1, override_: flags.2, target_addr: target, lladdr,
            },
            _ => NdiscRepr::Redirect { target_addr: target, dest_addr: dest, options: &options },
        };
        let repr = Icmpv6Repr::Ndisc(nd);
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), src, dst).unwrap();
        let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Icmpv6Repr::parse(&p, src, dst, ChecksumMode::Verify), Ok(repr));
    }

    #[test]
    fn nd_option_round_trip(parts in nd_option()) {
        let option = build_nd_option(&parts);
        let mut buf = vec![0u8; option.buffer_len()];
        prop_assert_eq!(option.emit(&mut buf), Ok(buf.len()));
        let parsed: Vec<_> = tern_wire::NdOptions::new(&buf).collect();
        prop_assert_eq!(parsed, vec![Ok(option)]);
    }

    #[test]
    fn udp_round_trip(
        sport in any::<u16>(), dport in 1u16.., payload in vec(any::<u8>(), 0..200), ip in ip_pair(),
    ) {
        let repr = UdpRepr { src_port: sport, dst_port: dport, payload_len: payload.len() as u16 };
        let mut buf = vec![0u8; repr.buffer_len()];
        buf[8..].copy_from_slice(&payload);
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), &ip).unwrap();
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(UdpRepr::parse(&p, &ip, ChecksumMode::Verify), Ok(repr));
        prop_assert_eq!(p.payload(), &payload[..]);
    }

    #[test]
    fn tcp_round_trip(
        sport in 1u16.., dport in 1u16.., seq in any::<u32>(), ack in any::<u32>(), flags in any::<u8>(),
        window in any::<u16>(), urgent in any::<u16>(), options in tcp_options(),
        payload in vec(any::<u8>(), 0..100), ip in ip_pair(),
    ) {
        let repr = TcpRepr {
            src_port: sport, dst_port: dport, seq_number: seq, ack_number: ack, flags: TcpFlags(flags),
            window_len: window, urgent_at: urgent, options: &options, payload_len: payload.len(),
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        let at = repr.header_len();
        buf[at..].copy_from_slice(&payload);
        repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), &ip).unwrap();
        let p = TcpPacket::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(TcpRepr::parse(&p, &ip, ChecksumMode::Verify), Ok(repr));
        prop_assert_eq!(p.payload(), &payload[..]);
    }

    #[test]
    fn gre_round_trip(
        proto in any::<u16>(), csum in any::<bool>(), key in proptest::option::of(any::<u32>()),
        seq in proptest::option::of(any::<u32>()), payload in vec(any::<u8>(), 0..100),
    ) {
        let repr = GreRepr { protocol_type: EtherType(proto), checksum: csum, key, seq_number: seq };
        let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
        let at = repr.buffer_len();
        buf[at..].copy_from_slice(&payload);
        repr.emit(&mut GrePacket::new_unchecked(&mut buf[..])).unwrap();
        let p = GrePacket::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(GreRepr::parse(&p, ChecksumMode::Verify), Ok(repr));
        prop_assert_eq!(p.payload(), &payload[..]);
    }

    #[test]
    fn esp_round_trip(spi in 1u32.., seq in any::<u32>()) {
        let repr = EspRepr { spi, seq_number: seq };
        let mut buf = [0u8; 8];
        repr.emit(&mut EspPacket::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(EspRepr::parse(&EspPacket::new_checked(&buf[..]).unwrap()), Ok(repr));
    }

    /// IPv6 walker against a straightforward reference on generated chains.
    #[test]
    fn ipv6_walk_matches_reference(chain in vec((0u8..4, 0u8..3), 0..10), upper in prop_oneof![Just(6u8), Just(17), Just(58), Just(50), Just(59)]) {
        // Build: each element is (kind: 0 dest opts, 1 routing, 2 fragment (offset 0), 3 AH), size.
        let kinds = [60u8, 43, 44, 51];
        let mut data = Vec::new();
        let mut offsets = Vec::new();
        for (i, &(k, size)) in chain.iter().enumerate() {
            let next = chain.get(i + 1).map(|&(k2, _)| kinds[usize::from(k2)]).unwrap_or(upper);
            offsets.push(data.len());
            match k {
                2 => data.extend_from_slice(&[next, 0, 0, 0, 0, 0, 0, 1]),
                3 => {
                    // AH of (size + 1) * 8 bytes, at least 16: payload len = total/4 - 2.
                    let total = (usize::from(size) + 2) * 8;
                    let mut h = vec![0u8; total];
                    h[0] = next;
                    h[1] = (total / 4 - 2) as u8;
                    data.extend_from_slice(&h);
                }
                _ => {
                    let mut h = vec![0u8; (usize::from(size) + 1) * 8];
                    h[0] = next;
                    h[1] = size;
                    data.extend_from_slice(&h);
                }
            }
        }
        data.extend_from_slice(&[0u8; 20]);
        let first = chain.first().map(|&(k, _)| kinds[usize::from(k)]).unwrap_or(upper);
        let result = tern_wire::ipv6ext::walk(IpProtocol(first), &data);
        if chain.len() > tern_wire::ipv6ext::MAX_EXT_HEADERS {
            prop_assert_eq!(result, Err(Error::Unsupported));
        } else {
            let w = result.unwrap();
            prop_assert_eq!(w.upper_protocol, IpProtocol(upper));
            prop_assert_eq!(w.upper_offset, data.len() - 20);
            prop_assert_eq!(usize::from(w.header_count), chain.len());
            let frag = chain.iter().position(|&(k, _)| k == 2).map(|i| offsets[i]);
            prop_assert_eq!(w.fragment_offset, frag);
        }
    }
}
