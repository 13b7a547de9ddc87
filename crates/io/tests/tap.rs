//! TapPort against the kernel's own stack, in a throwaway namespace.

mod common;

use std::net::UdpSocket;
use std::time::Duration;

use common::*;
use tern_io::{TapPort, netdev};
use tern_packet::Port;

/// How long a test waits for frames that must come: generous, since a
/// loaded machine can keep a softirq or this thread off a CPU for seconds;
/// a passing test waits only as long as they take.
const WAIT: Duration = Duration::from_secs(20);
const PEER_MAC: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 2];

fn is_udp_to(port: u16) -> impl Fn(&[u8]) -> bool {
    move |f: &[u8]| {
        f.get(12..14) == Some(&[0x08, 0x00][..])
            && f.get(23) == Some(&17)
            && f.get(36..38) == Some(&port.to_be_bytes()[..])
    }
}

/// The kernel sends a datagram out of the TAP: the port receives the frame.
/// The port writes a frame: the kernel delivers it to a local socket.
#[test]
fn tap_exchanges_frames_with_the_kernel() {
    let Some(ns) = Netns::new() else { return };
    let mut tap = ns.in_ns(|| {
        let tap = TapPort::open("ttap%d").expect("create TAP");
        let name = tap.ifname().to_string();
        assert!(name.starts_with("ttap"), "{name}");
        let _ = netdev::sysctl_write(&format!("ipv6/conf/{name}/disable_ipv6"), "1");
        netdev::set_up(&name, true).expect("up");
        assert!(netdev::flags(&name).expect("flags").up);
        tap
    });
    let name = tap.ifname().to_string();
    let mac_s = PEER_MAC.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    ns.ip(&["addr", "add", "10.88.0.1/24", "dev", &name]);
    ns.ip(&["neigh", "add", "10.88.0.2", "lladdr", &mac_s, "dev", &name]);
    let tap_mac = ns.in_ns({
        let n = name.clone();
        move || netdev::mac(&n).expect("mac")
    });
    let mut p = pool();

    // Kernel -> TAP.
    ns.in_ns(|| {
        let s = UdpSocket::bind("10.88.0.1:0").expect("bind");
        s.send_to(b"to the router", "10.88.0.2:4000").expect("send");
    });
    let got = recv_until(&mut tap, &mut p, 1, WAIT, is_udp_to(4000));
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0][0..6], &PEER_MAC, "addressed to the neighbour");
    assert!(got[0].ends_with(b"to the router"));

    // TAP -> kernel: a UDP datagram from 10.88.0.2 to 10.88.0.1:4001.
    let listener = ns.in_ns(|| {
        let s = UdpSocket::bind("10.88.0.1:4001").expect("bind");
        s.set_read_timeout(Some(WAIT)).expect("timeout");
        s
    });
    let frame = udp4_frame(tap_mac, PEER_MAC, [10, 88, 0, 2], [10, 88, 0, 1], 5000, 4001, b"from the router");
    let pkt = p.alloc_from(&frame).expect("buf");
    assert_eq!(tap.tx_burst(&mut p, &[pkt]).sent, 1);
    let mut buf = [0u8; 64];
    let (n, from) = listener.recv_from(&mut buf).expect("kernel received the frame");
    assert_eq!(&buf[..n], b"from the router");
    assert_eq!(from.to_string(), "10.88.0.2:5000");
    let s = tap.stats();
    assert_eq!((s.tx_packets, s.tx_dropped), (1, 0));
    assert!(s.rx_packets >= 1);
}

/// A frame longer than a pool buffer is dropped and counted, not truncated.
#[test]
fn tap_drops_oversized_frames() {
    let Some(ns) = Netns::new() else { return };
    let mut tap = ns.in_ns(|| {
        let tap = TapPort::open("tbig%d").expect("create TAP");
        let n = tap.ifname().to_string();
        let _ = netdev::sysctl_write(&format!("ipv6/conf/{n}/disable_ipv6"), "1");
        netdev::set_mtu(&n, 9000).expect("mtu");
        assert_eq!(netdev::mtu(&n).expect("mtu"), 9000);
        netdev::set_up(&n, true).expect("up");
        tap
    });
    let name = tap.ifname().to_string();
    let mac_s = PEER_MAC.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    ns.ip(&["addr", "add", "10.89.0.1/24", "dev", &name]);
    ns.ip(&["neigh", "add", "10.89.0.2", "lladdr", &mac_s, "dev", &name]);
    ns.in_ns(|| {
        let s = UdpSocket::bind("10.89.0.1:0").expect("bind");
        s.send_to(&[0u8; 3000], "10.89.0.2:4000").expect("send big");
        s.send_to(b"small", "10.89.0.2:4000").expect("send small");
    });
    let mut p = pool();
    let got = recv_until(&mut tap, &mut p, 1, WAIT, is_udp_to(4000));
    assert_eq!(got.len(), 1);
    assert!(got[0].ends_with(b"small"));
    assert_eq!(tap.oversize(), 1);
    assert_eq!(tap.stats().rx_dropped, 1);
}

fn udp4_frame(
    dst: [u8; 6],
    src: [u8; 6],
    sip: [u8; 4],
    dip: [u8; 4],
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let sum = |d: &[u8], mut acc: u64| {
        for c in d.chunks(2) {
            acc += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
        acc
    };
    let fold = |mut a: u64| {
        while a > 0xffff {
            a = (a & 0xffff) + (a >> 16);
        }
        a as u16
    };
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&sip);
    ip.extend_from_slice(&dip);
    let c = !fold(sum(&ip, 0));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut udp = Vec::new();
    udp.extend_from_slice(&sport.to_be_bytes());
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let c = !fold(sum(&udp, sum(&ip[12..20], 17 + udp.len() as u64)));
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&udp);
    f
}

/// A multi-queue TAP takes one queue per opener; the MAC can be set to the
/// one of the interface it stands for.
#[test]
fn multi_queue_tap_with_a_set_mac() {
    let Some(ns) = Netns::new() else { return };
    let mac = [0x02, 0x54, 0x45, 0x52, 0x4e, 0x01];
    let (a, b) = ns.in_ns(move || {
        let a = TapPort::open_queue("tmq0").expect("first queue");
        let b = TapPort::open_queue("tmq0").expect("second queue");
        assert!(TapPort::open("tmq0").is_err(), "a single-queue open of a multi-queue device is refused");
        netdev::set_mac("tmq0", mac).expect("set MAC");
        assert_eq!(netdev::mac("tmq0").expect("mac"), mac);
        (a, b)
    });
    assert_eq!((a.ifname(), b.ifname()), ("tmq0", "tmq0"));
}
