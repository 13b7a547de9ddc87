//! AF_PACKET driver against real veth pairs in a throwaway namespace.

mod common;

use std::time::Duration;

use common::*;
use tern_io::{AfPacketConfig, AfPacketPort, Fanout, FanoutMode, TpacketVersion, TxMode, netdev};
use tern_packet::Port;

/// How long a test waits for frames that must come: generous, since a
/// loaded machine can keep a softirq or this thread off a CPU for seconds;
/// a passing test waits only as long as they take.
const WAIT: Duration = Duration::from_secs(20);

fn open(ns: &Netns, cfg: AfPacketConfig) -> AfPacketPort {
    ns.in_ns(move || AfPacketPort::open_with(&cfg).expect("open AF_PACKET port"))
}

/// MTU-sized and minimum-sized frames cross the veth byte for byte, with
/// every ring format and transmit mode.
#[test]
fn frames_cross_a_veth_intact_in_every_mode() {
    let Some(ns) = Netns::new() else { return };
    for version in [TpacketVersion::V2, TpacketVersion::V3] {
        for tx_mode in [TxMode::Sendmmsg, TxMode::Ring] {
            let mut ca = AfPacketConfig::new("va");
            ca.version = version;
            ca.tx_mode = tx_mode;
            let mut cb = AfPacketConfig::new("vb");
            cb.version = version;
            let mut a = open(&ns, ca);
            let mut b = open(&ns, cb);
            let (mut pa, mut pb) = (pool(), pool());
            let dst = b.mac();
            let frames: Vec<Vec<u8>> =
                (0..300u32).map(|i| test_frame(dst, i, if i % 2 == 0 { 1514 } else { 60 })).collect();
            assert_eq!(send_all(&mut a, &mut pa, &frames), frames.len(), "{version:?}/{tx_mode:?}");
            let got = recv_until(&mut b, &mut pb, frames.len(), WAIT, is_test_frame);
            assert_eq!(got.len(), frames.len(), "{version:?}/{tx_mode:?}: all frames arrive");
            assert!(got == frames, "{version:?}/{tx_mode:?}: same bytes, same order");
            let (sa, sb) = (a.stats(), b.stats());
            assert_eq!(sa.tx_packets, 300);
            assert_eq!(sa.tx_bytes, frames.iter().map(|f| f.len() as u64).sum::<u64>());
            assert_eq!(sa.tx_dropped, 0);
            assert!(sb.rx_packets >= 300);
            assert_eq!(sb.rx_dropped, 0);
            assert_eq!(pa.available(), pa.capacity() as usize, "tx frees every buffer");
            assert!(drain(&mut a, &mut pa, is_test_frame).is_empty(), "a port never receives what it sent");
        }
    }
}

/// PACKET_IGNORE_OUTGOING: a port does not see frames leaving its
/// interface, while a port without the option does (the control).
#[test]
fn ignore_outgoing_hides_departing_frames() {
    let Some(ns) = Netns::new() else { return };
    let mut quiet = open(&ns, AfPacketConfig::new("va"));
    let mut cfg = AfPacketConfig::new("va");
    cfg.ignore_outgoing = false;
    let mut seer = open(&ns, cfg);
    // A sender through the qdisc layer: bypassed frames skip the taps that
    // deliver outgoing copies, so this is the case the option must handle.
    let mut cfg = AfPacketConfig::new("va");
    cfg.qdisc_bypass = false;
    let mut sender = open(&ns, cfg);
    let mut peer = open(&ns, AfPacketConfig::new("vb"));
    let (mut p, mut pp) = (pool(), pool());
    let frames: Vec<Vec<u8>> = (0..20).map(|i| test_frame([0xff; 6], i, 100)).collect();
    assert_eq!(send_all(&mut sender, &mut p, &frames), 20);
    assert_eq!(recv_until(&mut peer, &mut pp, 20, WAIT, is_test_frame).len(), 20, "frames left va");
    // Taps deliver a departing frame to every socket in one pass, so once
    // `seer` has all of them `quiet` had its chance at each.
    assert_eq!(recv_until(&mut seer, &mut p, 20, WAIT, is_test_frame).len(), 20, "control sees outgoing frames");
    assert!(drain(&mut quiet, &mut p, is_test_frame).is_empty(), "ignore_outgoing port saw its interface's departures");
}

/// Hash fanout splits flows between two sockets and loses none.
#[test]
fn fanout_spreads_flows_over_two_sockets() {
    let Some(ns) = Netns::new() else { return };
    let fan = Fanout { group: (std::process::id() & 0xffff) as u16, mode: FanoutMode::Hash };
    let mut c = AfPacketConfig::new("vb");
    c.fanout = Some(fan);
    let mut b1 = open(&ns, c.clone());
    let mut b2 = open(&ns, c);
    let mut a = open(&ns, AfPacketConfig::new("va"));
    let mut p = pool();
    let dst = netdev_mac(&ns, "vb");
    // 200 UDP flows (distinct source ports): the kernel hashes addresses
    // and ports.
    let frames: Vec<Vec<u8>> = (0..200u16).map(|i| udp_frame(dst, 10_000 + i)).collect();
    assert_eq!(send_all(&mut a, &mut p, &frames), 200);
    let is_ours = |f: &[u8]| f.len() == frames[0].len() && f.get(12..14) == Some(&[0x08, 0x00][..]);
    let mut n1 = 0;
    let mut n2 = 0;
    assert!(
        eventually(WAIT, || {
            n1 += drain(&mut b1, &mut p, is_ours).len();
            n2 += drain(&mut b2, &mut p, is_ours).len();
            n1 + n2 >= 200
        }),
        "only {n1}+{n2} of 200 frames arrived"
    );
    assert_eq!(n1 + n2, 200, "no frame delivered twice");
    assert!(n1 > 0 && n2 > 0, "hash fanout used both sockets: {n1}/{n2}");
}

/// Frames longer than a pool buffer or a ring slot are dropped and counted,
/// never delivered truncated.
#[test]
fn oversized_frames_are_counted_not_delivered() {
    let Some(ns) = Netns::new() else { return };
    ns.ip(&["link", "set", "va", "mtu", "9000"]);
    ns.ip(&["link", "set", "vb", "mtu", "9000"]);
    for version in [TpacketVersion::V2, TpacketVersion::V3] {
        let mut a = open(&ns, AfPacketConfig::new("va"));
        let mut cb = AfPacketConfig::new("vb");
        cb.version = version;
        let mut b = open(&ns, cb);
        let (mut pa, mut pb) = (big_pool(), pool());
        let room = (pb.frame_size() - u32::from(pb.headroom())) as usize; // 1792
        let dst = b.mac();
        let frames = vec![
            test_frame(dst, 1, room),     // fits exactly
            test_frame(dst, 2, room + 1), // longer than a pool buffer
            test_frame(dst, 3, 4000),     // longer than a V2 slot
            test_frame(dst, 4, 64),       // marker: everything before it was handled
        ];
        assert_eq!(send_all(&mut a, &mut pa, &frames), 4);
        let got = recv_until(&mut b, &mut pb, 2, WAIT, is_test_frame);
        let ids: Vec<u32> = got.iter().filter_map(|f| frame_id(f)).collect();
        assert_eq!(ids, [1, 4], "{version:?}");
        assert_eq!(got[0], frames[0]);
        assert_eq!(b.detail_stats().oversize, 2, "{version:?}");
        assert_eq!(b.stats().rx_dropped, 2, "{version:?}");
    }
}

/// When the worker does not keep up, the kernel drops at the ring and the
/// port reports those drops (PACKET_STATISTICS) in rx_dropped.
#[test]
fn ring_overflow_is_reported_as_rx_dropped() {
    let Some(ns) = Netns::new() else { return };
    let mut cb = AfPacketConfig::new("vb");
    cb.block_size = 1 << 16;
    cb.block_count = 1; // 32 slots of 2048 bytes
    let mut b = open(&ns, cb);
    let mut a = open(&ns, AfPacketConfig::new("va"));
    let mut p = pool();
    let dst = b.mac();
    let frames: Vec<Vec<u8>> = (0..200).map(|i| test_frame(dst, i, 64)).collect();
    assert_eq!(send_all(&mut a, &mut p, &frames), 200);
    assert!(eventually(WAIT, || b.stats().rx_dropped >= 200 - 32), "kernel drops not reported: {:?}", b.stats());
    let got = drain(&mut b, &mut p, is_test_frame);
    assert_eq!(got.len(), 32, "the ring held 32 frames");
    assert_eq!(b.stats().rx_dropped, 168);
}

/// The kernel strips 802.1Q tags before packet sockets see frames; the port
/// puts them back so nodes see the wire bytes.
#[test]
fn vlan_tags_are_restored() {
    let Some(ns) = Netns::new() else { return };
    for version in [TpacketVersion::V2, TpacketVersion::V3] {
        let mut a = open(&ns, AfPacketConfig::new("va"));
        let mut cb = AfPacketConfig::new("vb");
        cb.version = version;
        let mut b = open(&ns, cb);
        let mut p = pool();
        let plain = test_frame(b.mac(), 7, 100);
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x20, 0x64]); // PCP 1, VID 100
        tagged.extend_from_slice(&plain[12..]);
        assert_eq!(send_all(&mut a, &mut p, std::slice::from_ref(&tagged)), 1);
        let got = recv_until(&mut b, &mut p, 1, WAIT, |f| f.get(16..18) == Some(&[0x88, 0xb5][..]));
        assert_eq!(got, vec![tagged], "{version:?}");
        assert_eq!(b.detail_stats().vlan_restored, 1);
    }
}

/// A UDP datagram sent by the kernel through a veth has an unfinished
/// checksum; the port completes it (and a port told not to shows why).
#[test]
fn local_udp_checksums_are_completed() {
    let Some(ns) = Netns::new() else { return };
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "va"]);
    let vb_mac = netdev_mac(&ns, "vb");
    let mac_s = vb_mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    ns.ip(&["neigh", "add", "10.77.0.2", "lladdr", &mac_s, "dev", "va"]);
    let mut fixing = open(&ns, AfPacketConfig::new("vb"));
    let mut c = AfPacketConfig::new("vb");
    c.complete_checksums = false;
    let mut raw = open(&ns, c);
    ns.in_ns(|| {
        let s = std::net::UdpSocket::bind("10.77.0.1:0").expect("bind");
        s.send_to(b"checksum me, please", "10.77.0.2:9").expect("send");
    });
    let mut p = pool();
    let is_udp = |f: &[u8]| f.get(12..14) == Some(&[0x08, 0x00][..]) && f.get(23) == Some(&17);
    let fixed = recv_until(&mut fixing, &mut p, 1, WAIT, is_udp);
    let unfixed = recv_until(&mut raw, &mut p, 1, WAIT, is_udp);
    assert_eq!(fixed.len(), 1);
    assert!(udp4_checksum_ok(&fixed[0]), "completed checksum verifies");
    assert_eq!(fixing.detail_stats().csum_completed, 1);
    assert!(!udp4_checksum_ok(&unfixed[0]), "without completion the veth frame carries a partial checksum");
}

/// sent + dropped always equals what was given, even when the socket
/// buffer is tiny and bursts are large.
#[test]
fn tx_accounting_holds_under_pressure() {
    let Some(ns) = Netns::new() else { return };
    let mut c = AfPacketConfig::new("va");
    c.sndbuf = Some(4096);
    let mut a = open(&ns, c);
    let mut p = pool();
    let frames: Vec<Vec<u8>> = (0..256).map(|i| test_frame([0xff; 6], i, 1514)).collect();
    let mut total = 0u64;
    for _ in 0..20 {
        send_all(&mut a, &mut p, &frames);
        total += 256;
    }
    let s = a.stats();
    assert_eq!(s.tx_packets + s.tx_dropped, total, "{s:?} {:?}", a.detail_stats());
    assert_eq!(p.available(), p.capacity() as usize);
}

/// Frames the kernel refuses (a runt, one longer than the MTU) are dropped
/// and counted, and never stall the frames after them, in either mode.
#[test]
fn refused_frames_do_not_stall_transmit() {
    let Some(ns) = Netns::new() else { return };
    for tx_mode in [TxMode::Sendmmsg, TxMode::Ring] {
        let mut ca = AfPacketConfig::new("va");
        ca.tx_mode = tx_mode;
        let mut a = open(&ns, ca);
        let mut b = open(&ns, AfPacketConfig::new("vb"));
        let (mut pa, mut pb) = (pool(), pool());
        let dst = b.mac();
        let mut frames = vec![test_frame(dst, 1, 100), vec![0u8; 10], test_frame(dst, 2, 1600)];
        frames.extend((3..10).map(|i| test_frame(dst, i, 100)));
        let pkts: Vec<_> = frames.iter().map(|f| pa.alloc_from(f).expect("buf")).collect();
        let o = a.tx_burst(&mut pa, &pkts);
        assert_eq!(o.sent + o.dropped, frames.len());
        // A second burst after the refused ones must still go out.
        let later = [pa.alloc_from(&test_frame(dst, 10, 100)).expect("buf")];
        a.tx_burst(&mut pa, &later);
        let got = recv_until(&mut b, &mut pb, 9, WAIT, is_test_frame);
        let ids: Vec<u32> = got.iter().filter_map(|f| frame_id(f)).collect();
        assert_eq!(ids, [1, 3, 4, 5, 6, 7, 8, 9, 10], "{tx_mode:?}");
        if tx_mode == TxMode::Sendmmsg {
            assert_eq!(o.dropped, 2, "runt and over-MTU frames are reported dropped");
        } else {
            assert_eq!(o.dropped, 1, "the runt is dropped before the ring; the kernel skips the long one");
        }
        assert_eq!(pa.available(), pa.capacity() as usize);
    }
}

/// Promiscuous and all-multicast memberships hold while the port is open
/// and end with it.
#[test]
fn memberships_last_as_long_as_the_port() {
    let Some(ns) = Netns::new() else { return };
    // SIOCGIFFLAGS shows only the administrator's flags; the counts that
    // memberships raise are in `ip -d link`.
    let counts = || {
        let out = std::process::Command::new("ip")
            .args(["-n", &ns.name, "-d", "link", "show", "va"])
            .output()
            .expect("ip link");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let count = |key: &str| -> u32 {
            let mut it = text.split_whitespace().skip_while(|w| *w != key);
            it.nth(1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no {key} in {text}"))
        };
        (count("promiscuity"), count("allmulti"))
    };
    assert_eq!(counts(), (0, 0));
    let mut c = AfPacketConfig::new("va");
    c.promisc = true;
    c.allmulti = true;
    let port = open(&ns, c);
    assert_eq!(counts(), (1, 1), "promiscuous and all-multicast while open");
    drop(port);
    assert_eq!(counts(), (0, 0), "memberships end with the socket");
}

/// A link that goes down and up again: transmit while down drops and
/// counts without blocking, the socket reports the error, and traffic
/// flows again once the link is back, in both directions.
#[test]
fn link_flap_is_survived() {
    let Some(ns) = Netns::new() else { return };
    for tx_mode in [TxMode::Sendmmsg, TxMode::Ring] {
        let mut ca = AfPacketConfig::new("va");
        ca.tx_mode = tx_mode;
        let mut a = open(&ns, ca);
        let mut b = open(&ns, AfPacketConfig::new("vb"));
        let (mut pa, mut pb) = (pool(), pool());
        let dst = b.mac();
        ns.ip(&["link", "set", "va", "down"]);
        let frames: Vec<Vec<u8>> = (0..8).map(|i| test_frame(dst, i, 100)).collect();
        let pkts: Vec<_> = frames.iter().map(|f| pa.alloc_from(f).expect("buf")).collect();
        let o = a.tx_burst(&mut pa, &pkts);
        assert_eq!(o.sent + o.dropped, 8);
        if tx_mode == TxMode::Sendmmsg {
            assert_eq!(o.dropped, 8, "nothing leaves a down link");
        }
        assert_eq!(a.take_error().and_then(|e| e.raw_os_error()), Some(libc::ENETDOWN), "{tx_mode:?}");
        assert!(a.take_error().is_none(), "the error is taken once");
        ns.ip(&["link", "set", "va", "up"]);
        // Frames queued in a TX ring while down may leave now; count only
        // the fresh ones.
        let fresh: Vec<Vec<u8>> = (100..108).map(|i| test_frame(dst, i, 100)).collect();
        assert!(
            eventually(WAIT, || {
                send_all(&mut a, &mut pa, &fresh[..1]);
                !drain(&mut b, &mut pb, |f| frame_id(f) == Some(100)).is_empty()
            }),
            "{tx_mode:?}: traffic resumes after the link is up"
        );
        assert_eq!(pa.available(), pa.capacity() as usize);
    }
}

#[test]
fn opening_a_missing_interface_names_it() {
    let e = AfPacketPort::open("tio-missing0").expect_err("no such interface");
    assert!(e.to_string().contains("tio-missing0"), "{e}");
}

fn netdev_mac(ns: &Netns, ifname: &str) -> [u8; 6] {
    let n = ifname.to_string();
    ns.in_ns(move || netdev::mac(&n).expect("mac"))
}

/// Ethernet/IPv4/UDP 10.0.0.1:sport -> 10.0.0.2:7 with valid checksums.
fn udp_frame(dst: [u8; 6], sport: u16) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
    let payload = [0u8; 18];
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    ip[2..4].copy_from_slice(&(20 + 8 + payload.len() as u16).to_be_bytes());
    let c = !fold(sum(&ip, 0));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let mut udp = Vec::new();
    udp.extend_from_slice(&sport.to_be_bytes());
    udp.extend_from_slice(&7u16.to_be_bytes());
    udp.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&payload);
    let pseudo = sum(&ip[12..20], 17 + udp.len() as u64);
    let c = !fold(sum(&udp, pseudo));
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&udp);
    f
}

fn sum(data: &[u8], mut acc: u64) -> u64 {
    for c in data.chunks(2) {
        acc += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    acc
}

fn fold(mut a: u64) -> u16 {
    while a > 0xffff {
        a = (a & 0xffff) + (a >> 16);
    }
    a as u16
}

/// Verifies the UDP checksum of an untagged Ethernet/IPv4 (IHL 5) frame.
fn udp4_checksum_ok(f: &[u8]) -> bool {
    let ip = &f[14..34];
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let l4 = &f[34..14 + total];
    fold(sum(l4, sum(&ip[12..20], 17 + l4.len() as u64))) == 0xffff
}
