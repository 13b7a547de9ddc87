//! The whole data plane (config -> router -> workers -> nodes) on memory
//! ports: what a host on each side sees.

mod common;

use common::pkt::*;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::{Duration, Instant};
use tern_control::config;
use tern_control::router::Router;

const TERN_LAN: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const TERN_WAN: [u8; 6] = [0x02, 0, 0, 0, 2, 1];
const HOST_A: [u8; 6] = [0x02, 0, 0, 0, 1, 0xaa];
const HOST_B: [u8; 6] = [0x02, 0, 0, 0, 2, 0xbb];

const CONFIG: &str = r#"
[dataplane]
icmp_rate = 100000
icmp_burst = 1000

[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24", "2001:db8:1::1/64"]

[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24", "2001:db8:2::1/64"]
mtu = 1400

[[route]]
prefix = "198.18.0.0/15"
via = "10.0.2.2"

[[route]]
prefix = "2001:db8:ff::/48"
via = "2001:db8:2::2"
"#;

fn a4(s: &str) -> Ipv4Addr {
    s.parse().expect("ipv4")
}
fn a6(s: &str) -> Ipv6Addr {
    s.parse().expect("ipv6")
}

struct Lab {
    router: Router,
}

impl Lab {
    fn new() -> Lab {
        let plan = config::parse(CONFIG, "test.toml", Path::new(".")).expect("config");
        Lab { router: Router::start(plan).expect("router") }
    }

    fn send(&self, iface: &str, frame: &[u8]) {
        assert!(self.router.mem_ports(iface).expect("iface")[0].inject(frame));
    }

    /// Waits until `iface` transmitted at least `n` frames, driving the
    /// control loop meanwhile, and returns them.
    fn recv(&mut self, iface: &str, n: usize) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        while got.len() < n {
            got.extend(self.router.mem_ports(iface).expect("iface")[0].take_sent());
            if got.len() >= n {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{iface}: only {} of {n} frames: {:02x?}\n{}",
                got.len(),
                got,
                self.counters()
            );
            if !self.router.poll() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        got
    }

    /// Every non-zero error counter, for failure messages.
    fn counters(&self) -> String {
        let w = &self.router.workers()[0];
        let s = w.stats.snapshot();
        w.graph
            .errors
            .iter()
            .zip(&s.errors)
            .filter(|(_, n)| **n > 0)
            .map(|(e, n)| format!("{}/{}={n}", e.node, e.name))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Drives the control loop until `f` holds.
    fn until(&mut self, what: &str, f: impl Fn(&Router) -> bool) {
        common::poll_until(&mut self.router, what, f)
    }

    fn resolve_b(&mut self) {
        // tern asks for 10.0.2.2; host B answers.
        let req = self.recv("wan", 1);
        let r = &req[0];
        assert_eq!(&r[0..6], &[0xff; 6], "ARP request is broadcast");
        let a = parse_arp(r).expect("an ARP request");
        assert_eq!(a.operation, ArpOperation::REQUEST);
        assert_eq!(a.target_protocol_addr, a4("10.0.2.2"), "asks for the gateway");
        assert_eq!(a.source_protocol_addr, a4("10.0.2.1"), "from tern's wan address");
        self.send("wan", &eth(TERN_WAN, HOST_B, 0x0806, &arp(2, HOST_B, a4("10.0.2.2"), TERN_WAN, a4("10.0.2.1"))));
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Router::shutdown consumes; leave it to process exit for tests.
    }
}

#[test]
fn arp_reply_for_own_address() {
    let mut lab = Lab::new();
    lab.send("lan", &eth([0xff; 6], HOST_A, 0x0806, &arp(1, HOST_A, a4("10.0.1.2"), [0; 6], a4("10.0.1.1"))));
    let out = lab.recv("lan", 1);
    let f = &out[0];
    assert_eq!(&f[0..6], &HOST_A);
    assert_eq!(&f[6..12], &TERN_LAN);
    let a = parse_arp(f).expect("an ARP reply");
    assert_eq!(a.operation, ArpOperation::REPLY);
    assert_eq!(a.source_hardware_addr.0, TERN_LAN, "sender hw = tern");
    assert_eq!(a.source_protocol_addr, a4("10.0.1.1"));
    assert_eq!(a.target_hardware_addr.0, HOST_A);
    // The request taught tern host A's address.
    lab.until("neighbour learned", |r| r.neighbors().len() == 1);
    // No ARP for someone else's address.
    lab.send("lan", &eth([0xff; 6], HOST_A, 0x0806, &arp(1, HOST_A, a4("10.0.1.2"), [0; 6], a4("10.0.1.77"))));
    lab.until("request-not-ours counted", |r| r.counter("arp-input", "request-not-ours") == 1);
    assert!(lab.router.mem_ports("lan").expect("lan")[0].take_sent().is_empty());
}

#[test]
fn forwards_after_resolving_the_next_hop() {
    let mut lab = Lab::new();
    let payload = b"hello through tern";
    let ip =
        ipv4(a4("10.0.1.2"), a4("198.18.0.7"), 17, 64, &udp4(a4("10.0.1.2"), a4("198.18.0.7"), 1234, 5678, payload));
    for _ in 0..3 {
        lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &ip));
    }
    lab.resolve_b();
    let out = lab.recv("wan", 3);
    for f in &out {
        let v = parse_v4(f).expect("ipv4 frame");
        assert_eq!(v.dst_mac, HOST_B);
        assert_eq!(v.src_mac, TERN_WAN);
        assert_eq!(v.ttl, 63);
        assert!(v.header_ok, "checksum updated incrementally must verify");
        assert_eq!((v.src, v.dst, v.proto), (a4("10.0.1.2"), a4("198.18.0.7"), 17));
        assert_eq!(&v.l4[8..], payload);
    }
    // Resolved now: the next packet goes straight out.
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &ip));
    assert_eq!(lab.recv("wan", 1).len(), 1);
    assert_eq!(lab.router.counter("ip4-glean", "request-sent"), 1, "one ARP request for three queued packets");
}

#[test]
fn answers_ping_and_sends_icmp_errors() {
    let mut lab = Lab::new();
    let echo = icmp_echo(8, 7, 1, b"abcdefgh");
    // Tern needs host A's MAC to answer: the ARP request teaches it.
    lab.send("lan", &eth([0xff; 6], HOST_A, 0x0806, &arp(1, HOST_A, a4("10.0.1.2"), [0; 6], a4("10.0.1.1"))));
    lab.recv("lan", 1);
    lab.until("neighbour learned", |r| r.neighbors().len() == 1);

    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &ipv4(a4("10.0.1.2"), a4("10.0.2.1"), 1, 64, &echo)));
    let f = lab.recv("lan", 1).remove(0);
    let v = parse_v4(&f).expect("echo reply");
    assert_eq!((v.src, v.dst, v.proto), (a4("10.0.2.1"), a4("10.0.1.2"), 1));
    assert_eq!(v.l4[0], 0, "echo reply");
    assert_eq!(csum(&v.l4), 0, "ICMP checksum");
    assert_eq!(&v.l4[8..], b"abcdefgh");
    assert!(v.header_ok);

    // TTL 1 towards a routed destination: time exceeded from tern.
    let udp = udp4(a4("10.0.1.2"), a4("198.18.0.9"), 40000, 33434, b"probe");
    let probe = ipv4(a4("10.0.1.2"), a4("198.18.0.9"), 17, 1, &udp);
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &probe));
    let f = lab.recv("lan", 1).remove(0);
    let v = parse_v4(&f).expect("time exceeded");
    assert_eq!((v.src, v.dst, v.proto), (a4("10.0.1.1"), a4("10.0.1.2"), 1));
    assert_eq!((v.l4[0], v.l4[1]), (11, 0));
    assert_eq!(csum(&v.l4), 0);
    assert_eq!(&v.l4[8..8 + probe.len()], &probe[..], "quotes the whole probe");

    // No route: destination unreachable (net).
    let lost = ipv4(a4("10.0.1.2"), a4("203.0.113.5"), 17, 64, &udp4(a4("10.0.1.2"), a4("203.0.113.5"), 1, 2, b"x"));
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &lost));
    let v = parse_v4(&lab.recv("lan", 1)[0]).expect("unreachable");
    assert_eq!((v.l4[0], v.l4[1]), (3, 0));
    assert_eq!(&v.l4[8..28], &lost[..20]);

    // UDP to tern itself: port unreachable.
    let udp = ipv4(a4("10.0.1.2"), a4("10.0.1.1"), 17, 64, &udp4(a4("10.0.1.2"), a4("10.0.1.1"), 5, 53, b"q"));
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &udp));
    let v = parse_v4(&lab.recv("lan", 1)[0]).expect("port unreachable");
    assert_eq!((v.l4[0], v.l4[1]), (3, 3));

    // Too big with DF for the 1400-byte wan MTU: fragmentation needed, MTU
    // 1400 (decided before any ARP for the next hop).
    let big =
        ipv4(a4("10.0.1.2"), a4("198.18.0.7"), 17, 64, &udp4(a4("10.0.1.2"), a4("198.18.0.7"), 1, 2, &[7u8; 1450]));
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &big));
    let v = parse_v4(&lab.recv("lan", 1)[0]).expect("frag needed");
    assert_eq!((v.l4[0], v.l4[1]), (3, 4));
    assert_eq!(u16::from_be_bytes([v.l4[6], v.l4[7]]), 1400);
    assert_eq!(v.l4.len(), 576 - 20, "quote limited to 576 bytes total");
}

#[test]
fn bad_packets_are_counted_not_forwarded() {
    let mut lab = Lab::new();
    let good = ipv4(a4("10.0.1.2"), a4("198.18.0.7"), 17, 64, &udp4(a4("10.0.1.2"), a4("198.18.0.7"), 1, 2, b"ok"));
    let mut bad_csum = good.clone();
    bad_csum[10] ^= 0xff;
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &bad_csum));
    let mut truncated = eth(TERN_LAN, HOST_A, 0x0800, &good);
    truncated.truncate(14 + 16);
    lab.send("lan", &truncated);
    let mut long_len = good.clone();
    long_len[2..4].copy_from_slice(&2000u16.to_be_bytes());
    let c = {
        long_len[10] = 0;
        long_len[11] = 0;
        csum(&long_len[..20])
    };
    long_len[10..12].copy_from_slice(&c.to_be_bytes());
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &long_len));
    lab.send("lan", &eth([2, 9, 9, 9, 9, 9], HOST_A, 0x0800, &good));
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x88cc, b"lldp"));
    let martian = ipv4(a4("127.0.0.1"), a4("198.18.0.7"), 17, 64, b"12345678");
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &martian));
    lab.until("all six counted", |r| {
        r.counter("ip4-input", "bad-checksum") == 1
            && r.counter("ip4-input", "too-short") == 1
            && r.counter("ip4-input", "truncated") == 1
            && r.counter("ethernet-input", "not-for-us") == 1
            && r.counter("ethernet-input", "unknown-ethertype") == 1
            && r.counter("ip4-input", "martian-source") == 1
    });
    assert!(lab.router.mem_ports("wan").expect("wan")[0].take_sent().is_empty(), "nothing forwarded, no ARP");
}

#[test]
fn ipv6_nd_ping_and_forwarding() {
    let mut lab = Lab::new();
    let host = a6("2001:db8:1::2");
    let tern = a6("2001:db8:1::1");
    // NS for tern's address -> solicited NA with the target link-layer address.
    let (sn, sn_mac) = solicited_node(tern);
    let ns = icmp6(host, sn, 135, 0, &ns_body(tern, Some(HOST_A)));
    lab.send("lan", &eth(sn_mac, HOST_A, 0x86dd, &ipv6(host, sn, 58, 255, &ns)));
    let v = parse_v6(&lab.recv("lan", 1)[0]).expect("NA");
    assert_eq!((v.src, v.dst, v.next, v.hop), (tern, host, 58, 255));
    assert_eq!(v.dst_mac, HOST_A);
    assert_eq!(v.l4[0], 136);
    assert_eq!(v.l4[4] & 0x60, 0x60, "solicited + override");
    assert_eq!(&v.l4[8..24], &tern.octets());
    assert_eq!(&v.l4[26..32], &TERN_LAN);
    assert_eq!(l4_csum6(v.src, v.dst, 58, &v.l4), 0);
    lab.until("host learned from the NS", |r| r.neighbors().len() == 1);

    // NS with hop limit 64 is invalid (RFC 4861 7.1.1).
    lab.send("lan", &eth(sn_mac, HOST_A, 0x86dd, &ipv6(host, sn, 58, 64, &ns)));
    lab.until("bad nd counted", |r| r.counter("ip6-local", "bad-nd") == 1);

    // ping6 to tern.
    let echo = icmp6(host, tern, 128, 0, &[0, 1, 0, 1, 9, 9, 9, 9]);
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x86dd, &ipv6(host, tern, 58, 64, &echo)));
    let v = parse_v6(&lab.recv("lan", 1)[0]).expect("echo reply");
    assert_eq!((v.src, v.dst, v.l4[0]), (tern, host, 129));
    assert_eq!(l4_csum6(v.src, v.dst, 58, &v.l4), 0);

    // Forward to 2001:db8:ff::5 via 2001:db8:2::2 (resolved by NS/NA on wan).
    let dst = a6("2001:db8:ff::5");
    let udp = udp6(host, dst, 1000, 2000, b"six");
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x86dd, &ipv6(host, dst, 17, 64, &udp)));
    let gw = a6("2001:db8:2::2");
    let nsf = lab.recv("wan", 1).remove(0);
    let v = parse_v6(&nsf).expect("NS from tern");
    let (gsn, gsn_mac) = solicited_node(gw);
    assert_eq!((v.dst, v.dst_mac, v.hop, v.l4[0]), (gsn, gsn_mac, 255, 135));
    assert_eq!(&v.l4[8..24], &gw.octets());
    assert_eq!(l4_csum6(v.src, v.dst, 58, &v.l4), 0);
    let na = icmp6(gw, v.src, 136, 0, &na_body(gw, 0x60, HOST_B));
    lab.send("wan", &eth(TERN_WAN, HOST_B, 0x86dd, &ipv6(gw, v.src, 58, 255, &na)));
    let v = parse_v6(&lab.recv("wan", 1)[0]).expect("forwarded");
    assert_eq!((v.dst_mac, v.src_mac, v.hop, v.dst), (HOST_B, TERN_WAN, 63, dst));
    assert_eq!(l4_csum6(v.src, v.dst, 17, &v.l4), 0);

    // Hop limit 1: time exceeded; too big for wan's 1400: packet too big.
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x86dd, &ipv6(host, dst, 17, 1, &udp)));
    let v = parse_v6(&lab.recv("lan", 1)[0]).expect("time exceeded");
    assert_eq!((v.src, v.dst, v.l4[0], v.l4[1]), (tern, host, 3, 0));
    let big = udp6(host, dst, 1, 2, &[0u8; 1400]);
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x86dd, &ipv6(host, dst, 17, 64, &big)));
    let v = parse_v6(&lab.recv("lan", 1)[0]).expect("too big");
    assert_eq!((v.l4[0], u32::from_be_bytes([v.l4[4], v.l4[5], v.l4[6], v.l4[7]])), (2, 1400));
    assert!(v.l4.len() + 40 <= 1280, "quote within the minimum MTU");
    assert_eq!(l4_csum6(v.src, v.dst, 58, &v.l4), 0);

    // Extension headers pass through forwarding untouched (hop-by-hop + dest opts).
    let mut ext = vec![60, 0, 1, 4, 0, 0, 0, 0]; // hop-by-hop: next=dest opts, PadN
    ext.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]); // dest opts: next=UDP
    ext.extend_from_slice(&udp);
    let with_ext = ipv6(host, dst, 0, 64, &ext);
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x86dd, &with_ext));
    let v = parse_v6(&lab.recv("wan", 1)[0]).expect("forwarded with extension headers");
    assert_eq!((v.next, v.hop), (0, 63));
    assert_eq!(v.l4, ext);
}

#[test]
fn trace_shows_the_path() {
    let mut lab = Lab::new();
    lab.router.trace().arm(1);
    let echo = icmp_echo(8, 1, 1, b"t");
    lab.send("lan", &eth(TERN_LAN, HOST_A, 0x0800, &ipv4(a4("10.0.1.2"), a4("10.0.1.1"), 1, 64, &echo)));
    lab.until("one trace", |r| !r.trace().peek().is_empty());
    let t = &lab.router.trace().take()[0];
    let path: Vec<&str> = t.hops.iter().map(|h| h.node).collect();
    assert_eq!(&path[..4], &["ethernet-input", "ip4-input", "ip4-lookup", "ip4-local"]);
    assert!(t.hops[2].notes[0].contains("Local"), "{:?}", t.hops[2]);
}
