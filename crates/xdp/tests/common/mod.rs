//! Throwaway network namespaces and veth pairs for the AF_XDP tests.
//!
//! Every test builds its own namespaces (names carry the process id and a
//! counter, so parallel tests and leftover runs never collide) and removes
//! them on drop, also when the test fails. Work inside a namespace runs on a
//! thread that entered it ([`Netns::run`]), because setns(2) changes only
//! the calling thread.
#![allow(dead_code)]

use std::net::Ipv4Addr;

#[allow(unused_imports)] // each test binary uses a different subset
pub use tern_testkit::netns::{Netns, is_root, mac, wait_until};
use tern_testkit::netns::{Veth, mac_str};
use tern_testkit::packet::Frame;

/// True when the tests can create namespaces and load BPF (root). Tests
/// print why and return early otherwise.
pub fn privileged() -> bool {
    tern_testkit::netns::privileged("AF_XDP netns test")
}

/// Runs `args[0]` with the rest, which must succeed.
pub fn sh(args: &[&str]) {
    tern_testkit::netns::must(args[0], &args[1..]);
}

/// A namespace `txdp{role}{pid}-{n}`, deleted on drop.
pub fn netns(role: &str) -> Netns {
    Netns::unique(&format!("txdp{role}"))
}

/// A veth pair `a` (in `na`, MAC mac(ma)) <-> `b` (in `nb`, MAC mac(mb)),
/// both up, with `queues` queues each way and tx checksum offload off on
/// both (UDP from normal sockets crosses AF_XDP with bad checksums
/// otherwise).
pub fn veth(na: &Netns, a: &str, ma: u8, nb: &Netns, b: &str, mb: u8, queues: u32) {
    Veth::new(na, a, nb, b).macs(mac(ma), mac(mb)).queues(queues).tx_offload_off().create();
}

/// gen (g0 10.77.1.2) <-> rtr (r0 10.77.1.1); gen routes 10.77.2.0/24 via
/// the router.
pub struct Rig2 {
    pub gen_ns: Netns,
    pub rtr: Netns,
}

pub const R0_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 1);
pub const G0_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 2);
pub const R1_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 1);
pub const S0_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 2);
pub const MAC_R0: u8 = 0x10;
pub const MAC_G0: u8 = 0x11;
pub const MAC_R1: u8 = 0x20;
pub const MAC_S0: u8 = 0x21;

impl Rig2 {
    pub fn new(queues: u32) -> Rig2 {
        let gen_ns = netns("g");
        let rtr = netns("r");
        veth(&rtr, "r0", MAC_R0, &gen_ns, "g0", MAC_G0, queues);
        rtr.ip(&["addr", "add", "10.77.1.1/24", "dev", "r0"]);
        gen_ns.ip(&["addr", "add", "10.77.1.2/24", "dev", "g0"]);
        gen_ns.ip(&["route", "add", "10.77.2.0/24", "via", "10.77.1.1"]);
        Rig2 { gen_ns, rtr }
    }
}

/// gen (g0) <-> (r0) rtr (r1) <-> (s0 10.77.2.2) sink.
pub struct Rig3 {
    pub gen_ns: Netns,
    pub rtr: Netns,
    pub sink: Netns,
}

impl Rig3 {
    pub fn new() -> Rig3 {
        let Rig2 { gen_ns, rtr } = Rig2::new(1);
        let sink = netns("s");
        veth(&rtr, "r1", MAC_R1, &sink, "s0", MAC_S0, 1);
        rtr.ip(&["addr", "add", "10.77.2.1/24", "dev", "r1"]);
        sink.ip(&["addr", "add", "10.77.2.2/24", "dev", "s0"]);
        sink.ip(&["route", "add", "10.77.1.0/24", "via", "10.77.2.1"]);
        // The forwarder under test answers no ARP: give both ends static
        // neighbours for the router.
        sink.ip(&["neigh", "add", "10.77.2.1", "lladdr", &mac_str(mac(MAC_R1)), "dev", "s0"]);
        Rig3 { gen_ns, rtr, sink }
    }
}

/// The UDP payload of an Ethernet/IPv4/UDP frame, with the IPv4 source
/// and destination and the destination port (the checksum is not checked).
pub fn udp_payload(frame: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr, u16, &[u8])> {
    use tern_testkit::wire::{EtherType, EthernetFrame, IpProtocol, Ipv4Packet, UdpPacket};
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if ip.protocol() != IpProtocol::UDP {
        return None;
    }
    let ip_payload = &frame[14 + usize::from(ip.header_len())..14 + usize::from(ip.total_len())];
    let udp = UdpPacket::new_checked(ip_payload).ok()?;
    Some((ip.src_addr(), ip.dst_addr(), udp.dst_port(), &ip_payload[8..usize::from(udp.len())]))
}

/// An Ethernet/IPv4/UDP frame from port 4000 (TTL 64, DF, UDP checksum 0:
/// "not computed", RFC 768).
pub fn udp_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    Frame::eth(src_mac, dst_mac).ipv4(src, dst).df().udp(4000, dport).no_checksum().payload(payload).build()
}
