//! Test frames built with `tern-wire`'s `Repr::emit`, and read back with its
//! `Repr::parse`.
//!
//! A frame is a stack of layers, outermost first, emitted innermost first
//! when [`Frame::build`] runs, so that every length, EtherType, protocol
//! number and checksum follows from what is inside:
//!
//! ```
//! use tern_testkit::packet::Frame;
//! let f = Frame::eth([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 1, 1])
//!     .vlan(100)
//!     .ipv4([10, 0, 100, 2], [10, 0, 2, 9])
//!     .ttl(7)
//!     .udp(7, 9)
//!     .payload(b"hello")
//!     .build();
//! assert_eq!(f.len(), 14 + 4 + 20 + 8 + 5);
//! ```
//!
//! Modifiers (`ttl`, `df`, `ident`, `hop_limit`, `no_checksum`) change the
//! nearest layer they apply to. The function-style helpers below (`eth`,
//! `ipv4`, `udp4`, ...) build one layer around given bytes, for tests that
//! assemble odd frames piece by piece. [`parse_v4`], [`parse_v6`] and
//! [`parse_arp`] read a frame for assertions.
//!
//! The builders trust `tern-wire`; the unit tests at the bottom pin their
//! output to frames made by scapy, so that a bug shared by the wire crate
//! and the node under test still shows.

use std::net::{Ipv4Addr, Ipv6Addr};
use tern_wire::checksum;
use tern_wire::gre::PROTOCOL_TEB;
use tern_wire::{
    ArpPacket, ChecksumMode, EthernetAddress, EthernetFrame, EthernetRepr, GrePacket, Icmpv4Packet, Icmpv6Packet,
    IpPair, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpFlags, TcpPacket, TcpRepr, UdpPacket, UdpRepr,
    VlanRepr, VlanTag,
};

/// The smallest Ethernet frame on the wire without its FCS.
pub const ETH_MIN: usize = 60;

pub use tern_wire::{ArpOperation, ArpRepr, EtherType, GreRepr, Icmpv4Repr, Icmpv6Repr, NdiscRepr};

#[derive(Clone, Debug)]
enum Layer {
    Eth { src: [u8; 6], dst: [u8; 6] },
    Vlan { vid: u16, pcp: u8 },
    Ipv4 { src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, ident: u16, df: bool, dscp: u8 },
    Ipv6 { src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8 },
    Udp { sport: u16, dport: u16, checksum: bool },
    Tcp { sport: u16, dport: u16, flags: u8, seq: u32, ack: u32 },
    Icmp4Echo { reply: bool, ident: u16, seq: u16 },
    Icmp6Echo { reply: bool, ident: u16, seq: u16 },
    Arp(ArpRepr),
    Ns { target: Ipv6Addr, sll: Option<[u8; 6]> },
    Na { target: Ipv6Addr, router: bool, solicited: bool, override_: bool, tll: Option<[u8; 6]> },
    Gre { key: Option<u32> },
}

impl Layer {
    /// The EtherType that announces this layer (as the payload of Ethernet,
    /// a VLAN tag or GRE).
    fn ethertype(&self) -> Option<EtherType> {
        Some(match self {
            Layer::Eth { .. } => PROTOCOL_TEB,
            Layer::Vlan { .. } => EtherType::VLAN,
            Layer::Ipv4 { .. } => EtherType::IPV4,
            Layer::Ipv6 { .. } => EtherType::IPV6,
            Layer::Arp(_) => EtherType::ARP,
            _ => return None,
        })
    }

    /// The IP protocol number that announces this layer.
    fn protocol(&self) -> Option<IpProtocol> {
        Some(match self {
            Layer::Ipv4 { .. } => IpProtocol::IPV4,
            Layer::Ipv6 { .. } => IpProtocol::IPV6,
            Layer::Udp { .. } => IpProtocol::UDP,
            Layer::Tcp { .. } => IpProtocol::TCP,
            Layer::Icmp4Echo { .. } => IpProtocol::ICMP,
            Layer::Icmp6Echo { .. } | Layer::Ns { .. } | Layer::Na { .. } => IpProtocol::ICMPV6,
            Layer::Gre { .. } => IpProtocol::GRE,
            _ => return None,
        })
    }
}

/// A frame under construction: see the module documentation.
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct Frame {
    layers: Vec<Layer>,
    payload: Vec<u8>,
    ethertype: Option<u16>,
    protocol: Option<u8>,
    pad: bool,
}

impl Frame {
    /// No layer yet: for an IP packet without Ethernet (a GRE payload, a
    /// quoted datagram).
    pub fn new() -> Frame {
        Frame::default()
    }

    /// An Ethernet II header from `src` to `dst`.
    pub fn eth(src: impl Into<[u8; 6]>, dst: impl Into<[u8; 6]>) -> Frame {
        Frame::new().then_eth(src, dst)
    }

    /// An inner Ethernet header (behind GRE: transparent Ethernet bridging).
    pub fn then_eth(mut self, src: impl Into<[u8; 6]>, dst: impl Into<[u8; 6]>) -> Frame {
        self.layers.push(Layer::Eth { src: src.into(), dst: dst.into() });
        self
    }

    /// An 802.1Q tag, priority 0.
    pub fn vlan(mut self, vid: u16) -> Frame {
        self.layers.push(Layer::Vlan { vid, pcp: 0 });
        self
    }

    /// An IPv4 header: TTL 64, ident 0, DF clear, DSCP 0, no options.
    pub fn ipv4(mut self, src: impl Into<Ipv4Addr>, dst: impl Into<Ipv4Addr>) -> Frame {
        self.layers.push(Layer::Ipv4 { src: src.into(), dst: dst.into(), ttl: 64, ident: 0, df: false, dscp: 0 });
        self
    }

    /// An IPv6 header: hop limit 64, traffic class and flow label 0.
    pub fn ipv6(mut self, src: impl Into<Ipv6Addr>, dst: impl Into<Ipv6Addr>) -> Frame {
        self.layers.push(Layer::Ipv6 { src: src.into(), dst: dst.into(), hop_limit: 64 });
        self
    }

    /// A UDP header with its checksum.
    pub fn udp(mut self, sport: u16, dport: u16) -> Frame {
        self.layers.push(Layer::Udp { sport, dport, checksum: true });
        self
    }

    /// A TCP header (no options, window 65535) with `flags` and its checksum.
    pub fn tcp(mut self, sport: u16, dport: u16, flags: u8) -> Frame {
        self.layers.push(Layer::Tcp { sport, dport, flags, seq: 0, ack: 0 });
        self
    }

    /// An ICMP echo request.
    pub fn icmp_echo(mut self, ident: u16, seq: u16) -> Frame {
        self.layers.push(Layer::Icmp4Echo { reply: false, ident, seq });
        self
    }

    /// An ICMP echo reply.
    pub fn icmp_echo_reply(mut self, ident: u16, seq: u16) -> Frame {
        self.layers.push(Layer::Icmp4Echo { reply: true, ident, seq });
        self
    }

    /// An ICMPv6 echo request.
    pub fn icmp6_echo(mut self, ident: u16, seq: u16) -> Frame {
        self.layers.push(Layer::Icmp6Echo { reply: false, ident, seq });
        self
    }

    /// An ICMPv6 echo reply.
    pub fn icmp6_echo_reply(mut self, ident: u16, seq: u16) -> Frame {
        self.layers.push(Layer::Icmp6Echo { reply: true, ident, seq });
        self
    }

    /// An ARP message for IPv4 over Ethernet.
    pub fn arp(
        mut self,
        op: ArpOperation,
        sha: impl Into<[u8; 6]>,
        spa: impl Into<Ipv4Addr>,
        tha: impl Into<[u8; 6]>,
        tpa: impl Into<Ipv4Addr>,
    ) -> Frame {
        self.layers.push(Layer::Arp(ArpRepr {
            operation: op,
            source_hardware_addr: EthernetAddress(sha.into()),
            source_protocol_addr: spa.into(),
            target_hardware_addr: EthernetAddress(tha.into()),
            target_protocol_addr: tpa.into(),
        }));
        self
    }

    /// A neighbour solicitation for `target`, with a source link-layer
    /// address option when `sll` is given.
    pub fn ns(mut self, target: impl Into<Ipv6Addr>, sll: Option<[u8; 6]>) -> Frame {
        self.layers.push(Layer::Ns { target: target.into(), sll });
        self
    }

    /// A neighbour advertisement for `target` (solicited and override set),
    /// with a target link-layer address option when `tll` is given.
    pub fn na(mut self, target: impl Into<Ipv6Addr>, tll: Option<[u8; 6]>) -> Frame {
        self.layers.push(Layer::Na { target: target.into(), router: false, solicited: true, override_: true, tll });
        self
    }

    /// A GRE header (RFC 2784, with the RFC 2890 key when given).
    pub fn gre(mut self, key: Option<u32>) -> Frame {
        self.layers.push(Layer::Gre { key });
        self
    }

    /// The bytes after the last layer.
    pub fn payload(mut self, data: &[u8]) -> Frame {
        self.payload = data.to_vec();
        self
    }

    /// The EtherType the innermost Ethernet, VLAN or GRE layer announces,
    /// when no layer follows it (raw payload).
    pub fn ethertype(mut self, ethertype: u16) -> Frame {
        self.ethertype = Some(ethertype);
        self
    }

    /// The protocol the innermost IP layer announces when no layer follows.
    pub fn protocol(mut self, protocol: u8) -> Frame {
        self.protocol = Some(protocol);
        self
    }

    /// Zero-pads the built frame to [`ETH_MIN`] bytes, as a NIC sends it.
    pub fn pad(mut self) -> Frame {
        self.pad = true;
        self
    }

    fn last_ip(&mut self) -> &mut Layer {
        self.layers
            .iter_mut()
            .rev()
            .find(|l| matches!(l, Layer::Ipv4 { .. } | Layer::Ipv6 { .. }))
            .expect("an IP layer before ttl/hop_limit/df/ident/dscp")
    }

    /// TTL of the innermost IPv4 layer, or hop limit of the innermost IPv6.
    pub fn ttl(mut self, value: u8) -> Frame {
        match self.last_ip() {
            Layer::Ipv4 { ttl, .. } => *ttl = value,
            Layer::Ipv6 { hop_limit, .. } => *hop_limit = value,
            _ => unreachable!(),
        }
        self
    }

    /// Same as [`Frame::ttl`], under the IPv6 name.
    pub fn hop_limit(self, value: u8) -> Frame {
        self.ttl(value)
    }

    /// Sets DF on the innermost IPv4 layer.
    pub fn df(mut self) -> Frame {
        if let Layer::Ipv4 { df, .. } = self.last_ip() {
            *df = true;
        }
        self
    }

    /// The identification of the innermost IPv4 layer.
    pub fn ident(mut self, value: u16) -> Frame {
        if let Layer::Ipv4 { ident, .. } = self.last_ip() {
            *ident = value;
        }
        self
    }

    /// The DSCP of the innermost IPv4 layer.
    pub fn dscp(mut self, value: u8) -> Frame {
        if let Layer::Ipv4 { dscp, .. } = self.last_ip() {
            *dscp = value;
        }
        self
    }

    /// Leaves the innermost UDP checksum 0 ("not computed", RFC 768).
    pub fn no_checksum(mut self) -> Frame {
        if let Some(Layer::Udp { checksum, .. }) = self.layers.iter_mut().rev().find(|l| matches!(l, Layer::Udp { .. }))
        {
            *checksum = false;
        }
        self
    }

    /// Sequence and acknowledgement numbers of the innermost TCP layer.
    pub fn seq_ack(mut self, seq_no: u32, ack_no: u32) -> Frame {
        if let Some(Layer::Tcp { seq, ack, .. }) = self.layers.iter_mut().rev().find(|l| matches!(l, Layer::Tcp { .. }))
        {
            (*seq, *ack) = (seq_no, ack_no);
        }
        self
    }

    /// Emits the layers, innermost first. Panics (a test's mistake) if a
    /// field does not fit its header, which `emit` reports.
    pub fn build(&self) -> Vec<u8> {
        let mut inner = self.payload.clone();
        for i in (0..self.layers.len()).rev() {
            let next = self.layers.get(i + 1);
            let ethertype = next
                .and_then(Layer::ethertype)
                .map(|t| t.0)
                .or(self.ethertype)
                .unwrap_or(0x88b5 /* local experimental */);
            let protocol = next.and_then(Layer::protocol).map(|p| p.0).or(self.protocol).unwrap_or(253);
            let ip = self.layers[..i].iter().rev().find_map(|l| match *l {
                Layer::Ipv4 { src, dst, .. } => Some(IpPair::V4 { src, dst }),
                Layer::Ipv6 { src, dst, .. } => Some(IpPair::V6 { src, dst }),
                _ => None,
            });
            inner = self.emit(&self.layers[i], ethertype, protocol, ip, &inner);
        }
        if self.pad && inner.len() < ETH_MIN {
            inner.resize(ETH_MIN, 0);
        }
        inner
    }

    fn emit(&self, layer: &Layer, ethertype: u16, protocol: u8, ip: Option<IpPair>, inner: &[u8]) -> Vec<u8> {
        let v6 = |what: &str| match ip {
            Some(IpPair::V6 { src, dst }) => (src, dst),
            _ => panic!("{what} needs an IPv6 layer outside it"),
        };
        match *layer {
            Layer::Eth { src, dst } => eth(dst, src, ethertype, inner),
            Layer::Vlan { vid, pcp } => vlan_tag(vid, pcp, ethertype, inner),
            Layer::Ipv4 { src, dst, ttl, ident, df, dscp } => ipv4_with(
                Ipv4Repr {
                    src_addr: src,
                    dst_addr: dst,
                    protocol: IpProtocol(protocol),
                    payload_len: len16(inner.len()),
                    ttl,
                    dscp,
                    ecn: 0,
                    ident,
                    dont_frag: df,
                    more_frags: false,
                    frag_offset: 0,
                },
                inner,
            ),
            Layer::Ipv6 { src, dst, hop_limit } => ipv6(src, dst, protocol, hop_limit, inner),
            Layer::Udp { sport, dport, checksum } => match (checksum, ip) {
                (true, Some(pair)) => udp_in(&pair, sport, dport, inner),
                _ => udp(sport, dport, inner),
            },
            Layer::Tcp { sport, dport, flags, seq, ack } => {
                let pair = ip.expect("TCP needs an IP layer outside it");
                tcp_in(&pair, sport, dport, flags, seq, ack, inner)
            }
            Layer::Icmp4Echo { reply, ident, seq } => icmp_echo(if reply { 0 } else { 8 }, ident, seq, inner),
            Layer::Icmp6Echo { reply, ident, seq } => {
                let (src, dst) = v6("ICMPv6");
                let repr = if reply {
                    Icmpv6Repr::EchoReply { ident, seq_no: seq, data: inner }
                } else {
                    Icmpv6Repr::EchoRequest { ident, seq_no: seq, data: inner }
                };
                icmp6_repr(src, dst, &repr)
            }
            Layer::Arp(repr) => {
                let mut b = vec![0; repr.buffer_len()];
                repr.emit(&mut ArpPacket::new_unchecked(&mut b[..])).expect("ARP emit");
                b.extend_from_slice(inner);
                b
            }
            Layer::Ns { target, sll } => {
                let (src, dst) = v6("NS");
                let nd = NdiscRepr::NeighborSolicit { target_addr: target, lladdr: sll.map(EthernetAddress) };
                icmp6_repr(src, dst, &Icmpv6Repr::Ndisc(nd))
            }
            Layer::Na { target, router, solicited, override_, tll } => {
                let (src, dst) = v6("NA");
                let nd = NdiscRepr::NeighborAdvert {
                    router,
                    solicited,
                    override_,
                    target_addr: target,
                    lladdr: tll.map(EthernetAddress),
                };
                icmp6_repr(src, dst, &Icmpv6Repr::Ndisc(nd))
            }
            Layer::Gre { key } => gre(key, ethertype, inner),
        }
    }
}

fn len16(n: usize) -> u16 {
    u16::try_from(n).expect("a test frame longer than 65535 bytes")
}

// ------------------------------------------------------- one layer at a time

/// RFC 1071 checksum over `data`, complemented, ready to store (0 when
/// `data` holds a correct checksum).
pub fn csum(data: &[u8]) -> u16 {
    !checksum::data(data)
}

/// An Ethernet II header in front of `payload` (not padded).
pub fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let repr = EthernetRepr {
        src_addr: EthernetAddress(src),
        dst_addr: EthernetAddress(dst),
        ethertype: EtherType(ethertype),
    };
    let mut f = vec![0; repr.buffer_len()];
    f.extend_from_slice(payload);
    repr.emit(&mut EthernetFrame::new_unchecked(&mut f[..])).expect("Ethernet emit");
    f
}

/// [`eth`] zero-padded to [`ETH_MIN`] bytes.
pub fn eth_padded(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = eth(dst, src, ethertype, payload);
    if f.len() < ETH_MIN {
        f.resize(ETH_MIN, 0);
    }
    f
}

fn vlan_tag(vid: u16, pcp: u8, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let repr = VlanRepr { pcp, dei: false, vid, ethertype: EtherType(ethertype) };
    let mut t = vec![0; repr.buffer_len()];
    t.extend_from_slice(payload);
    repr.emit(&mut VlanTag::new_unchecked(&mut t[..])).expect("VLAN emit");
    t
}

/// An Ethernet header with one 802.1Q tag (not padded).
pub fn eth_vlan(dst: [u8; 6], src: [u8; 6], vid: u16, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    eth(dst, src, EtherType::VLAN.0, &vlan_tag(vid, 0, ethertype, payload))
}

/// [`eth_vlan`] zero-padded to [`ETH_MIN`] bytes.
pub fn eth_vlan_padded(dst: [u8; 6], src: [u8; 6], vid: u16, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    eth_padded(dst, src, EtherType::VLAN.0, &vlan_tag(vid, 0, ethertype, payload))
}

/// An ARP message (Ethernet/IPv4) with operation `op`.
pub fn arp(op: u16, sha: [u8; 6], spa: Ipv4Addr, tha: [u8; 6], tpa: Ipv4Addr) -> Vec<u8> {
    let repr = ArpRepr {
        operation: ArpOperation(op),
        source_hardware_addr: EthernetAddress(sha),
        source_protocol_addr: spa,
        target_hardware_addr: EthernetAddress(tha),
        target_protocol_addr: tpa,
    };
    let mut b = vec![0; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut b[..])).expect("ARP emit");
    b
}

fn ipv4_with(repr: Ipv4Repr, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0; repr.buffer_len()];
    h.extend_from_slice(payload);
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut h[..])).expect("IPv4 emit");
    h
}

fn ipv4_repr(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, len: usize, df: bool) -> Ipv4Repr {
    Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: IpProtocol(proto),
        payload_len: len16(len),
        ttl,
        dscp: 0,
        ecn: 0,
        ident: 0x1234,
        dont_frag: df,
        more_frags: false,
        frag_offset: 0,
    }
}

/// An IPv4 header (ident 0x1234, DF clear, no options) with a valid
/// checksum, then `payload`.
pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_with(ipv4_repr(src, dst, proto, ttl, payload.len(), false), payload)
}

/// [`ipv4`] with DF set, as hosts doing path MTU discovery send.
pub fn ipv4_df(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_with(ipv4_repr(src, dst, proto, ttl, payload.len(), true), payload)
}

/// An IPv6 fixed header, then `payload`.
pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop: u8, payload: &[u8]) -> Vec<u8> {
    let repr = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol(next),
        payload_len: len16(payload.len()),
        hop_limit: hop,
        traffic_class: 0,
        flow_label: 0,
    };
    let mut h = vec![0; repr.buffer_len()];
    h.extend_from_slice(payload);
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut h[..])).expect("IPv6 emit");
    h
}

fn udp_repr(sport: u16, dport: u16, data: &[u8]) -> (UdpRepr, Vec<u8>) {
    let repr = UdpRepr { src_port: sport, dst_port: dport, payload_len: len16(data.len()) };
    let mut u = vec![0; 8];
    u.extend_from_slice(data);
    (repr, u)
}

/// A UDP header with checksum 0 ("not computed", RFC 768), then `data`.
pub fn udp(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let (repr, mut u) = udp_repr(sport, dport, data);
    repr.emit_header(&mut UdpPacket::new_unchecked(&mut u[..])).expect("UDP emit");
    u
}

fn udp_in(ip: &IpPair, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let (repr, mut u) = udp_repr(sport, dport, data);
    repr.emit(&mut UdpPacket::new_unchecked(&mut u[..]), ip).expect("UDP emit");
    u
}

/// A UDP datagram between IPv4 addresses, with its checksum.
pub fn udp4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    udp_in(&IpPair::V4 { src, dst }, sport, dport, data)
}

/// A UDP datagram between IPv6 addresses, with its checksum.
pub fn udp6(src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    udp_in(&IpPair::V6 { src, dst }, sport, dport, data)
}

fn tcp_in(ip: &IpPair, sport: u16, dport: u16, flags: u8, seq: u32, ack: u32, data: &[u8]) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq_number: seq,
        ack_number: ack,
        flags: TcpFlags(flags),
        window_len: 65535,
        urgent_at: 0,
        options: &[],
        payload_len: data.len(),
    };
    let mut t = vec![0; repr.header_len()];
    t.extend_from_slice(data);
    repr.emit(&mut TcpPacket::new_unchecked(&mut t[..]), ip).expect("TCP emit");
    t
}

/// A 20-byte TCP header with `flags`, window 0 and checksum 0 (routers
/// do not check it): the header alone, for tests that only classify.
pub fn tcp(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t =
        tcp_in(&IpPair::V4 { src: Ipv4Addr::UNSPECIFIED, dst: Ipv4Addr::UNSPECIFIED }, sport, dport, flags, 0, 0, &[]);
    let mut p = TcpPacket::new_unchecked(&mut t[..]);
    p.set_window_len(0);
    p.set_checksum(0);
    t
}

/// A TCP segment between IPv4 addresses, with its checksum.
pub fn tcp4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, flags: u8, data: &[u8]) -> Vec<u8> {
    tcp_in(&IpPair::V4 { src, dst }, sport, dport, flags, 0, 0, data)
}

/// An ICMP echo message of type `ty` (8 request, 0 reply) with its checksum.
pub fn icmp_echo(ty: u8, id: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let repr = match ty {
        0 => Icmpv4Repr::EchoReply { ident: id, seq_no: seq, data },
        8 => Icmpv4Repr::EchoRequest { ident: id, seq_no: seq, data },
        _ => Icmpv4Repr::Other {
            msg_type: tern_wire::Icmpv4Type(ty),
            code: 0,
            rest_of_header: (u32::from(id) << 16) | u32::from(seq),
            data,
        },
    };
    let mut m = vec![0; repr.buffer_len()];
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut m[..])).expect("ICMP emit");
    m
}

fn icmp6_repr(src: Ipv6Addr, dst: Ipv6Addr, repr: &Icmpv6Repr<'_>) -> Vec<u8> {
    let mut m = vec![0; repr.buffer_len()];
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut m[..]), src, dst).expect("ICMPv6 emit");
    m
}

/// An ICMPv6 message of any type: `body` is everything after the type,
/// code and checksum; the checksum covers the pseudo-header.
pub fn icmp6(src: Ipv6Addr, dst: Ipv6Addr, ty: u8, code: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0];
    m.extend_from_slice(body);
    let mut p = Icmpv6Packet::new_unchecked(&mut m[..]);
    p.fill_checksum(src, dst);
    m
}

/// The upper-layer checksum of `l4` carried between IPv6 addresses, as it
/// should be stored (0 when `l4` already holds a correct one).
pub fn l4_csum6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, l4: &[u8]) -> u16 {
    let len = u32::try_from(l4.len()).expect("length");
    !checksum::add(checksum::pseudo_header_v6(src, dst, IpProtocol(next), len), checksum::data(l4))
}

/// A neighbour solicitation body (after type, code and checksum).
pub fn ns_body(target: Ipv6Addr, sll: Option<[u8; 6]>) -> Vec<u8> {
    let nd = NdiscRepr::NeighborSolicit { target_addr: target, lladdr: sll.map(EthernetAddress) };
    icmp6_repr(Ipv6Addr::UNSPECIFIED, Ipv6Addr::UNSPECIFIED, &Icmpv6Repr::Ndisc(nd)).split_off(4)
}

/// A neighbour advertisement body with `flags` (0x80 router, 0x40
/// solicited, 0x20 override) and a target link-layer address option.
pub fn na_body(target: Ipv6Addr, flags: u8, tll: [u8; 6]) -> Vec<u8> {
    let nd = NdiscRepr::NeighborAdvert {
        router: flags & 0x80 != 0,
        solicited: flags & 0x40 != 0,
        override_: flags & 0x20 != 0,
        target_addr: target,
        lladdr: Some(EthernetAddress(tll)),
    };
    icmp6_repr(Ipv6Addr::UNSPECIFIED, Ipv6Addr::UNSPECIFIED, &Icmpv6Repr::Ndisc(nd)).split_off(4)
}

/// The solicited-node multicast address of `a` and its Ethernet group.
pub fn solicited_node(a: Ipv6Addr) -> (Ipv6Addr, [u8; 6]) {
    let o = a.octets();
    (
        Ipv6Addr::from([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15]]),
        [0x33, 0x33, 0xff, o[13], o[14], o[15]],
    )
}

/// A GRE header (RFC 2784; the RFC 2890 key when given) announcing
/// `proto`, then `payload`.
pub fn gre(key: Option<u32>, proto: u16, payload: &[u8]) -> Vec<u8> {
    let repr = GreRepr { protocol_type: EtherType(proto), checksum: false, key, seq_number: None };
    let mut g = vec![0; repr.buffer_len()];
    g.extend_from_slice(payload);
    repr.emit(&mut GrePacket::new_unchecked(&mut g[..])).expect("GRE emit");
    g
}

/// Parses `s` as an IPv4 address (a test's literal).
pub fn v4(s: &str) -> Ipv4Addr {
    s.parse().expect("ipv4")
}

/// Parses `s` as an IPv6 address (a test's literal).
pub fn v6(s: &str) -> Ipv6Addr {
    s.parse().expect("ipv6")
}

// ------------------------------------------------------------------ reading

/// An Ethernet + IPv4 frame, read for assertions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V4 {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ttl: u8,
    pub proto: u8,
    pub dont_frag: bool,
    /// The IPv4 payload (total length minus header, options skipped).
    pub l4: Vec<u8>,
    /// Whether the header checksum verifies.
    pub header_ok: bool,
}

/// Reads an untagged Ethernet/IPv4 frame; `None` if it is not one or is
/// cut short.
pub fn parse_v4(f: &[u8]) -> Option<V4> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != EtherType::IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    let repr = Ipv4Repr::parse(&ip, ChecksumMode::Ignore).ok()?;
    Some(V4 {
        dst_mac: eth.dst_addr().0,
        src_mac: eth.src_addr().0,
        src: repr.src_addr,
        dst: repr.dst_addr,
        ttl: repr.ttl,
        proto: repr.protocol.0,
        dont_frag: repr.dont_frag,
        l4: ip.payload().to_vec(),
        header_ok: ip.verify_checksum(),
    })
}

/// An Ethernet + IPv6 frame, read for assertions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V6 {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub hop: u8,
    pub next: u8,
    /// The IPv6 payload (payload length bytes).
    pub l4: Vec<u8>,
}

/// Reads an untagged Ethernet/IPv6 frame; `None` if it is not one or is
/// cut short.
pub fn parse_v6(f: &[u8]) -> Option<V6> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != EtherType::IPV6 {
        return None;
    }
    let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
    let repr = Ipv6Repr::parse(&ip).ok()?;
    Some(V6 {
        dst_mac: eth.dst_addr().0,
        src_mac: eth.src_addr().0,
        src: repr.src_addr,
        dst: repr.dst_addr,
        hop: repr.hop_limit,
        next: repr.next_header.0,
        l4: ip.payload().to_vec(),
    })
}

/// The ARP message of an untagged Ethernet frame, if it is one.
pub fn parse_arp(f: &[u8]) -> Option<ArpRepr> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != EtherType::ARP {
        return None;
    }
    ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).ok()?).ok()
}

/// The EtherType of an untagged frame (`None` when shorter than a header).
pub fn ethertype(f: &[u8]) -> Option<u16> {
    Some(EthernetFrame::new_checked(f).ok()?.ethertype().0)
}

/// The GRE header of an IPv4 or IPv6 payload and what follows it; a
/// carried checksum must verify.
pub fn parse_gre(l4: &[u8]) -> Option<(GreRepr, &[u8])> {
    let p = GrePacket::new_checked(l4).ok()?;
    let repr = GreRepr::parse(&p, ChecksumMode::Verify).ok()?;
    Some((repr, &l4[repr.buffer_len()..]))
}

/// The ICMPv4 message of an IPv4 payload, checksum verified.
pub fn parse_icmp4(l4: &[u8]) -> Option<Icmpv4Repr<'_>> {
    Icmpv4Repr::parse(&Icmpv4Packet::new_checked(l4).ok()?, ChecksumMode::Verify).ok()
}

/// The ICMPv6 message of an IPv6 packet's payload, checksum verified.
pub fn parse_icmp6(v: &V6) -> Option<Icmpv6Repr<'_>> {
    Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&v.l4[..]).ok()?, v.src, v.dst, ChecksumMode::Verify).ok()
}

/// The UDP header and data of an IPv4 packet's payload, checksum verified
/// (a zero checksum passes, as RFC 768 allows).
pub fn parse_udp4(v: &V4) -> Option<(UdpRepr, &[u8])> {
    let p = UdpPacket::new_checked(&v.l4[..]).ok()?;
    let repr = UdpRepr::parse(&p, &IpPair::V4 { src: v.src, dst: v.dst }, ChecksumMode::Verify).ok()?;
    Some((repr, &v.l4[8..8 + usize::from(repr.payload_len)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    const HOST: [u8; 6] = [2, 0, 0, 0, 1, 0xaa];
    const TERN: [u8; 6] = [2, 0, 0, 0, 1, 1];

    // The expected bytes below are scapy's, e.g.
    // bytes(Ether(dst=TERN, src=HOST)/Dot1Q(vlan=100)/IP(src=.., dst=.., id=0, ttl=7)/UDP(sport=7, dport=9)/b"hello")

    #[test]
    fn vlan_ipv4_udp_matches_scapy() {
        let f = Frame::eth(HOST, TERN)
            .vlan(100)
            .ipv4([10, 0, 100, 2], [10, 0, 2, 9])
            .ttl(7)
            .udp(7, 9)
            .payload(b"hello")
            .build();
        let want = hex("020000000101 0200000001aa 8100 0064 0800
             4500 0021 0000 0000 0711 39c2 0a006402 0a000209
             0007 0009 000d 41e7 68656c6c6f");
        assert_eq!(f, want);
    }

    #[test]
    fn ipv6_icmp6_echo_matches_scapy() {
        let f = Frame::eth(HOST, TERN)
            .ipv6(v6("2001:db8:1::2"), v6("2001:db8:1::1"))
            .icmp6_echo(1, 1)
            .payload(b"ping6")
            .build();
        let want = hex("020000000101 0200000001aa 86dd
             6000 0000 000d 3a40 20010db8000100000000000000000002 20010db8000100000000000000000001
             8000 0f6e 0001 0001 70696e6736");
        assert_eq!(f, want);
    }

    #[test]
    fn arp_request_matches_scapy_and_pads() {
        let f = Frame::eth(HOST, [0xff; 6])
            .arp(ArpOperation::REQUEST, HOST, [10, 0, 1, 2], [0; 6], [10, 0, 1, 1])
            .pad()
            .build();
        let mut want = hex("ffffffffffff 0200000001aa 0806 0001 0800 06 04 0001
             0200000001aa 0a000102 000000000000 0a000101");
        want.resize(60, 0);
        assert_eq!(f, want);
        let a = parse_arp(&f).expect("ARP");
        assert_eq!(a.operation, ArpOperation::REQUEST);
        assert_eq!(a.target_protocol_addr, Ipv4Addr::new(10, 0, 1, 1));
    }

    #[test]
    fn gre_with_key_carries_ipv4() {
        let f = Frame::eth(HOST, TERN)
            .ipv4([10, 0, 2, 2], [10, 0, 2, 1])
            .gre(Some(7))
            .ipv4([10, 20, 0, 5], [10, 0, 100, 2])
            .udp(9, 7)
            .payload(b"x")
            .build();
        assert_eq!(&f[14 + 20..14 + 28], &hex("2000 0800 00000007")[..]);
        let outer = parse_v4(&f).expect("outer");
        assert_eq!(outer.proto, 47);
        assert!(outer.header_ok);
        assert_eq!(outer.l4.len(), 8 + 20 + 8 + 1);
    }

    #[test]
    fn ns_and_na_bodies_match_the_hand_layout() {
        let t = v6("2001:db8:1::1");
        let mut ns = vec![0, 0, 0, 0];
        ns.extend_from_slice(&t.octets());
        ns.extend_from_slice(&[1, 1]);
        ns.extend_from_slice(&HOST);
        assert_eq!(ns_body(t, Some(HOST)), ns);
        let mut na = vec![0x60, 0, 0, 0];
        na.extend_from_slice(&t.octets());
        na.extend_from_slice(&[2, 1]);
        na.extend_from_slice(&TERN);
        assert_eq!(na_body(t, 0x60, TERN), na);
    }

    #[test]
    fn layer_checksums_verify() {
        let (a, b) = (v4("10.0.1.2"), v4("10.0.2.9"));
        let ip = ipv4_df(a, b, 17, 64, &udp4(a, b, 1, 2, b"data"));
        assert_eq!(csum(&ip[..20]), 0);
        let f = eth_padded(TERN, HOST, 0x0800, &ip);
        let v = parse_v4(&f).expect("v4");
        assert!(v.dont_frag && v.header_ok);
        let (u, data) = parse_udp4(&v).expect("udp");
        assert_eq!((u.src_port, u.dst_port, data), (1, 2, &b"data"[..]));
        let (s6, d6) = (v6("2001:db8::1"), v6("2001:db8::2"));
        let u6 = udp6(s6, d6, 1, 2, b"x");
        assert_eq!(l4_csum6(s6, d6, 17, &u6), 0);
        let m = icmp6(s6, d6, 128, 0, &[0, 1, 0, 1]);
        assert_eq!(l4_csum6(s6, d6, 58, &m), 0);
        assert_eq!(csum(&icmp_echo(8, 7, 1, b"ping")), 0);
    }
}
