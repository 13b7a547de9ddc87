//! Firewall, VLANs and GRE through the whole data plane on memory ports.

mod common;

use common::pkt::*;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};
use tern_control::config;
use tern_control::router::Router;

const TERN_LAN: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const TERN_WAN: [u8; 6] = [0x02, 0, 0, 0, 2, 1];
const PEER_WAN: [u8; 6] = [0x02, 0, 0, 0, 2, 2];
const HOST_A: [u8; 6] = [0x02, 0, 0, 0, 1, 0xaa];
const HOST_B: [u8; 6] = [0x02, 0, 0, 0, 2, 0xbb];

fn a4(s: &str) -> Ipv4Addr {
    s.parse().expect("ipv4")
}

fn start(text: &str) -> Router {
    let plan = config::parse(text, "test.toml", Path::new(".")).expect("config");
    Router::start(plan).expect("router")
}

fn send(r: &Router, iface: &str, frame: &[u8]) {
    assert!(r.mem_ports(iface).expect("iface")[0].inject(frame));
}

/// Drives the routers' control loops until `iface` of `r[which]` sent `n`
/// frames; returns them.
fn recv(routers: &mut [&mut Router], which: usize, iface: &str, n: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    loop {
        got.extend(routers[which].mem_ports(iface).expect("iface")[0].take_sent());
        if got.len() >= n {
            return got;
        }
        assert!(Instant::now() < deadline, "{iface}: {} of {n} frames", got.len());
        let mut did = false;
        for r in routers.iter_mut() {
            did |= r.poll();
        }
        if !did {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Every non-zero counter of a router, for failure messages.
fn counters(r: &Router) -> String {
    let w = &r.workers()[0];
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

fn until(r: &mut Router, what: &str, f: impl Fn(&Router) -> bool) {
    common::poll_until(r, what, f)
}

/// Answers tern's ARP request for `ip` on `iface` with `mac`.
fn answer_arp(r: &mut Router, iface: &str, tern_mac: [u8; 6], ip: &str, mac: [u8; 6]) {
    let req = recv(&mut [r], 0, iface, 1).remove(0);
    let tern_ip =
        parse_arp(&req).unwrap_or_else(|| panic!("ARP request expected, got {req:02x?}")).source_protocol_addr;
    send(r, iface, &eth(tern_mac, mac, 0x0806, &arp(2, mac, a4(ip), tern_mac, tern_ip)));
}

const VLAN_CONFIG: &str = r#"
[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24"]

[[interface]]
name = "lan.100"
parent = "lan"
vlan = 100
addresses = ["10.0.100.1/24"]

[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24"]
"#;

#[test]
fn vlan_tagged_and_untagged_on_one_port() {
    let mut r = start(VLAN_CONFIG);
    // ARP on the VLAN is answered tagged.
    send(
        &r,
        "lan",
        &eth_vlan([0xff; 6], HOST_A, 100, 0x0806, &arp(1, HOST_A, a4("10.0.100.2"), [0; 6], a4("10.0.100.1"))),
    );
    let f = recv(&mut [&mut r], 0, "lan", 1).remove(0);
    assert_eq!(&f[12..16], &[0x81, 0x00, 0x00, 100], "tagged with VLAN 100");
    assert_eq!(&f[16..18], &[8, 6]);
    assert_eq!(&f[18 + 6..18 + 8], &[0, 2], "an ARP reply");
    assert_eq!(&f[18 + 14..18 + 18], &[10, 0, 100, 1]);
    until(&mut r, "neighbour on the VLAN", |r| r.neighbors().len() == 1);

    // Tagged in, untagged out on wan.
    let ip = ipv4(a4("10.0.100.2"), a4("10.0.2.9"), 17, 64, &udp4(a4("10.0.100.2"), a4("10.0.2.9"), 1, 2, b"v"));
    send(&r, "lan", &eth_vlan(TERN_LAN, HOST_A, 100, 0x0800, &ip));
    answer_arp(&mut r, "wan", TERN_WAN, "10.0.2.9", HOST_B);
    let f = recv(&mut [&mut r], 0, "wan", 1).remove(0);
    let v = parse_v4(&f).expect("untagged IPv4 on wan");
    assert_eq!((v.src, v.dst, v.ttl), (a4("10.0.100.2"), a4("10.0.2.9"), 63));
    assert!(v.header_ok);

    // Untagged in on wan, tagged out towards the VLAN host.
    let back = ipv4(a4("10.0.2.9"), a4("10.0.100.2"), 17, 64, &udp4(a4("10.0.2.9"), a4("10.0.100.2"), 2, 1, b"w"));
    send(&r, "wan", &eth(TERN_WAN, HOST_B, 0x0800, &back));
    let f = recv(&mut [&mut r], 0, "lan", 1).remove(0);
    assert_eq!(&f[0..6], &HOST_A);
    assert_eq!(&f[12..16], &[0x81, 0x00, 0x00, 100]);
    assert_eq!(&f[16..18], &[8, 0]);
    assert_eq!(f[18 + 8], 63, "TTL");

    // The untagged subnet still works on the same port, and an unknown VLAN is dropped and counted.
    send(
        &r,
        "lan",
        &eth(TERN_LAN, HOST_A, 0x0800, &ipv4(a4("10.0.1.2"), a4("10.0.1.1"), 1, 64, &icmp_echo(8, 1, 1, b"u"))),
    );
    send(&r, "lan", &eth_vlan(TERN_LAN, HOST_A, 200, 0x0800, &ip));
    until(&mut r, "unknown vlan counted, echo answered", |r| {
        r.counter("ethernet-input", "unknown-vlan") == 1 && r.counter("ip4-local", "echo-reply-sent") == 1
    });
}

fn acl_config(rules: &str) -> String {
    format!(
        r#"
[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24"]
acl_in = "FW"

[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24"]

[[route]]
prefix = "0.0.0.0/0"
via = "10.0.2.2"

{rules}
"#
    )
}

#[test]
fn fifty_drop_rules_drop_only_their_sources() {
    let mut rules = String::from("[[acl]]\nname = \"FW\"\ndefault = \"accept\"\n");
    for n in 1..=50 {
        rules.push_str(&format!("[[acl.rule]]\naction = \"drop\"\nsrc = \"1.1.{n}.1/32\"\n"));
    }
    let mut r = start(&acl_config(&rules));
    let pkt = |src: &str| {
        let ip = ipv4(a4(src), a4("198.18.0.1"), 17, 64, &udp4(a4(src), a4("198.18.0.1"), 1000, 2000, b"fw"));
        eth(TERN_LAN, HOST_A, 0x0800, &ip)
    };
    for _ in 0..3 {
        send(&r, "lan", &pkt("1.1.7.1"));
    }
    send(&r, "lan", &pkt("1.1.51.1"));
    send(&r, "lan", &pkt("10.0.1.2"));
    answer_arp(&mut r, "wan", TERN_WAN, "10.0.2.2", PEER_WAN);
    let out = recv(&mut [&mut r], 0, "wan", 2);
    let srcs: Vec<Ipv4Addr> = out.iter().map(|f| parse_v4(f).expect("v4").src).collect();
    assert!(srcs.contains(&a4("1.1.51.1")) && srcs.contains(&a4("10.0.1.2")), "{srcs:?}");
    until(&mut r, "three denials", |r| r.counter("ip4-acl-in", "denied") == 3);
    let acls = r.shared().acls.load();
    let set = &acls.sets[0];
    let hits = tern_acl::RuleCounters::sum(set.counters.iter());
    assert_eq!(hits[6].packets, 3, "rule 7 (1.1.7.1) hit three times");
    assert_eq!(hits[50].packets, 2, "default accepted two");
    std::thread::sleep(Duration::from_millis(50));
    assert!(r.mem_ports("wan").expect("wan")[0].take_sent().is_empty(), "nothing else left");
}

#[test]
fn drop_test_scenario_passes_exactly_the_legitimate_half() {
    let set = tern_acl::scenario_drop_test();
    let doc =
        toml::to_string(&tern_acl::AclDocument { acl: vec![tern_acl::RuleSet { name: "FW".into(), ..set.clone() }] })
            .expect("toml");
    let mut r = start(&acl_config(&doc));
    let pkt = |dport: u16| {
        let ip =
            ipv4(a4("10.0.1.2"), a4("198.18.0.1"), 17, 64, &udp4(a4("10.0.1.2"), a4("198.18.0.1"), 4000, dport, b"d"));
        eth(TERN_LAN, HOST_A, 0x0800, &ip)
    };
    // Resolve the gateway with one legitimate packet first.
    let first = (0..=u16::MAX).find(|&p| tern_acl::scenario::drop_test_accepts(p)).expect("an accepted port");
    send(&r, "lan", &pkt(first));
    answer_arp(&mut r, "wan", TERN_WAN, "10.0.2.2", PEER_WAN);
    recv(&mut [&mut r], 0, "wan", 1);
    // 400 packets spread over the port space: tern must forward exactly
    // those the reference evaluator accepts.
    let mut expect_pass = 0;
    for i in 0..400u32 {
        let dport = (i * 163) as u16;
        let key = tern_acl::PacketKey::v4(a4("10.0.1.2"), a4("198.18.0.1"), 17).with_ports(4000, dport).with_ifs(0, 0);
        let reference = tern_acl::linear::evaluate(&set, &|n| (n == "lan").then_some(0), &key);
        assert_eq!(reference.action == tern_acl::Action::Accept, tern_acl::scenario::drop_test_accepts(dport));
        if reference.action == tern_acl::Action::Accept {
            expect_pass += 1;
        }
        send(&r, "lan", &pkt(dport));
    }
    assert!(expect_pass > 100 && expect_pass < 300, "about half: {expect_pass}");
    let out = recv(&mut [&mut r], 0, "wan", expect_pass);
    assert_eq!(out.len(), expect_pass);
    for f in &out {
        let v = parse_v4(f).expect("v4");
        let dport = u16::from_be_bytes([v.l4[2], v.l4[3]]);
        assert!(tern_acl::scenario::drop_test_accepts(dport), "port {dport} should have been dropped");
    }
    until(&mut r, "the rest denied", |r| r.counter("ip4-acl-in", "denied") == (400 - expect_pass) as u64);
}

fn gre_config(me: u8, peer: u8, lan: &str, remote_lan: &str) -> String {
    format!(
        r#"
[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:{me:02x}"
addresses = ["{lan}"]

[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:{me:02x}"
addresses = ["10.0.2.{me}/24"]

[[tunnel]]
name = "gre0"
local = "10.0.2.{me}"
remote = "10.0.2.{peer}"
key = 7
addresses = ["192.168.255.{me}/24"]

[[route]]
prefix = "{remote_lan}"
interface = "gre0"
"#
    )
}

#[test]
fn gre_between_two_terns() {
    let mut a = start(&gre_config(1, 2, "10.0.1.1/24", "10.9.0.0/16"));
    let mut b = start(&gre_config(2, 1, "10.9.0.1/16", "10.0.1.0/24"));
    let a_wan = [0x02, 0, 0, 0, 2, 1];
    let b_wan = [0x02, 0, 0, 0, 2, 2];
    let b_lan = [0x02, 0, 0, 0, 1, 2];
    // The two wan ports are one link: shuttle frames both ways.
    let shuttle = |a: &Router, b: &Router| {
        let mut n = 0;
        for f in a.mem_ports("wan").expect("wan")[0].take_sent() {
            n += 1;
            b.mem_ports("wan").expect("wan")[0].inject(&f);
        }
        for f in b.mem_ports("wan").expect("wan")[0].take_sent() {
            n += 1;
            a.mem_ports("wan").expect("wan")[0].inject(&f);
        }
        n
    };
    let payload = b"through the tunnel";
    let ip = ipv4(a4("10.0.1.2"), a4("10.9.0.5"), 17, 64, &udp4(a4("10.0.1.2"), a4("10.9.0.5"), 7, 9, payload));
    send(&a, "lan", &eth([0x02, 0, 0, 0, 1, 1], HOST_A, 0x0800, &ip));
    let mut outer_seen = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    let delivered = loop {
        assert!(
            Instant::now() < deadline,
            "the packet never came out of b's lan\nA: {}\nB: {}",
            counters(&a),
            counters(&b)
        );
        // Keep a copy of A's first GRE frame for the header checks.
        let sent = a.mem_ports("wan").expect("wan")[0].take_sent();
        for f in &sent {
            if parse_v4(f).is_some_and(|v| v.proto == 47) && outer_seen.is_none() {
                outer_seen = Some(f.clone());
            }
            b.mem_ports("wan").expect("wan")[0].inject(f);
        }
        shuttle(&a, &b);
        a.poll();
        b.poll();
        let lan_out = b.mem_ports("lan").expect("lan")[0].take_sent();
        if lan_out.iter().any(|f| ethertype(f) == Some(0x0806)) {
            // b asks for 10.9.0.5: answer.
            send(&b, "lan", &eth(b_lan, HOST_B, 0x0806, &arp(2, HOST_B, a4("10.9.0.5"), b_lan, a4("10.9.0.1"))));
        }
        if let Some(f) = lan_out.into_iter().find(|f| ethertype(f) == Some(0x0800)) {
            break f;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let v = parse_v4(&delivered).expect("inner packet at b's lan");
    assert_eq!((v.src, v.dst, v.ttl), (a4("10.0.1.2"), a4("10.9.0.5"), 62), "TTL decremented by both routers");
    assert_eq!(&v.l4[8..], payload);
    let o = outer_seen.expect("a GRE frame on the wire");
    assert_eq!(&o[0..6], &b_wan);
    assert_eq!(&o[6..12], &a_wan);
    let outer = parse_v4(&o).expect("outer IPv4");
    assert_eq!((outer.src, outer.dst, outer.proto, outer.ttl), (a4("10.0.2.1"), a4("10.0.2.2"), 47, 64));
    assert!(outer.header_ok);
    let (gre, gre_payload) = parse_gre(&outer.l4).expect("GRE");
    assert_eq!(
        gre,
        GreRepr { protocol_type: EtherType::IPV4, checksum: false, key: Some(7), seq_number: None },
        "K bit, key 7, IPv4 payload"
    );
    let mut inner = ip.clone();
    inner[8] -= 1;
    inner[10] = 0;
    inner[11] = 0;
    let c = csum(&inner[..20]);
    inner[10..12].copy_from_slice(&c.to_be_bytes());
    assert_eq!(gre_payload, &inner[..], "the inner packet, TTL decremented once");
    assert!(a.counter("gre-encap", "encapsulated") >= 1);
    assert!(b.counter("gre-input", "decapsulated") >= 1);

    // Too big for the tunnel (MTU 1500 - 28) with DF: fragmentation needed, MTU 1472.
    let big = ipv4(a4("10.0.1.2"), a4("10.9.0.5"), 17, 64, &udp4(a4("10.0.1.2"), a4("10.9.0.5"), 7, 9, &[1u8; 1460]));
    send(&a, "lan", &eth([0x02, 0, 0, 0, 1, 1], HOST_A, 0x0800, &big));
    let deadline = Instant::now() + Duration::from_secs(10);
    let err = loop {
        assert!(Instant::now() < deadline, "no ICMP error");
        a.poll();
        let out = a.mem_ports("lan").expect("lan")[0].take_sent();
        if out.iter().any(|f| ethertype(f) == Some(0x0806)) {
            send(
                &a,
                "lan",
                &eth(
                    [0x02, 0, 0, 0, 1, 1],
                    HOST_A,
                    0x0806,
                    &arp(2, HOST_A, a4("10.0.1.2"), [0x02, 0, 0, 0, 1, 1], a4("10.0.1.1")),
                ),
            );
        }
        if let Some(f) = out.into_iter().find(|f| ethertype(f) == Some(0x0800)) {
            break f;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let v = parse_v4(&err).expect("icmp");
    assert!(
        matches!(parse_icmp4(&v.l4), Some(Icmpv4Repr::DstUnreachable { code: 4, next_hop_mtu: 1472, .. })),
        "fragmentation needed, MTU 1472: {:02x?}",
        v.l4
    );

    // A GRE packet with the wrong key is dropped and counted.
    let mut bad = outer.l4.clone();
    bad[7] = 8;
    let wrong = ipv4(a4("10.0.2.1"), a4("10.0.2.2"), 47, 64, &bad);
    send(&b, "wan", &eth(b_wan, a_wan, 0x0800, &wrong));
    until(&mut b, "no-tunnel counted", |r| r.counter("gre-input", "no-tunnel") == 1);
}

fn tool(name: &str) -> bool {
    std::process::Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// One GRE frame as tern A sends it (gateway resolved up front).
fn gre_frame_from_a() -> (Router, Vec<u8>) {
    let mut a = start(&gre_config(1, 2, "10.0.1.1/24", "10.9.0.0/16"));
    let ip = ipv4(a4("10.0.1.2"), a4("10.9.0.5"), 17, 64, &udp4(a4("10.0.1.2"), a4("10.9.0.5"), 7, 9, b"dissect me"));
    send(&a, "lan", &eth([0x02, 0, 0, 0, 1, 1], HOST_A, 0x0800, &ip));
    answer_arp(&mut a, "wan", [0x02, 0, 0, 0, 2, 1], "10.0.2.2", [0x02, 0, 0, 0, 2, 2]);
    let f = recv(&mut [&mut a], 0, "wan", 1).remove(0);
    (a, f)
}

#[test]
fn tshark_dissects_terns_gre() {
    if !tool("tshark") {
        eprintln!("SKIP: tshark not installed (apt-get install tshark)");
        return;
    }
    let (_a, frame) = gre_frame_from_a();
    let dir = std::env::temp_dir().join(format!("tern-gre-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("gre.pcap");
    let mut w = tern_io::PcapWriter::create(&path, tern_io::TsPrecision::Micro).expect("pcap");
    w.write_frame(Duration::from_secs(1), &frame).expect("write");
    drop(w);
    let out = std::process::Command::new("tshark")
        .args([
            "-r",
            path.to_str().expect("path"),
            "-T",
            "fields",
            "-E",
            "separator=,",
            "-E",
            "aggregator=;",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "gre.key",
            "-e",
            "gre.proto",
            "-e",
            "udp.dstport",
            "-e",
            "_ws.malformed",
        ])
        .output()
        .expect("tshark");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().expect("one packet");
    let f: Vec<&str> = line.split(',').collect();
    assert_eq!(f[0], "10.0.2.1;10.0.1.2", "outer and inner sources: {line}");
    assert_eq!(f[1], "10.0.2.2;10.9.0.5", "{line}");
    assert_eq!(f[2], "0x00000007", "{line}");
    assert_eq!(f[3], "0x0800", "{line}");
    assert_eq!(f[4], "9", "{line}");
    assert_eq!(f.get(5).copied().unwrap_or(""), "", "tshark found nothing malformed: {line}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scapy_built_gre_is_decapsulated() {
    let script = "import sys\nfrom scapy.all import Ether, IP, GRE, UDP\n\
        p = Ether(dst='02:00:00:00:02:01', src='02:00:00:00:02:02')/IP(src='10.0.2.2', dst='10.0.2.1', ttl=30)/\
        GRE(key_present=1, key=7, chksum_present=1)/IP(src='10.9.0.5', dst='10.0.1.2', ttl=20)/UDP(sport=9, dport=7)/b'from scapy'\n\
        sys.stdout.write(bytes(p).hex())\n";
    let Ok(out) = std::process::Command::new("/usr/bin/python3").args(["-c", script]).output() else {
        eprintln!("SKIP: python3 not found");
        return;
    };
    if !out.status.success() {
        eprintln!(
            "SKIP: scapy not installed (apt-get install python3-scapy): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let hex = String::from_utf8_lossy(&out.stdout);
    let frame: Vec<u8> =
        (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex")).collect();
    let mut a = start(&gre_config(1, 2, "10.0.1.1/24", "10.9.0.0/16"));
    send(&a, "wan", &frame);
    // a resolves host 10.0.1.2 on its lan, then delivers the inner packet.
    answer_arp(&mut a, "lan", [0x02, 0, 0, 0, 1, 1], "10.0.1.2", HOST_A);
    let v = parse_v4(&recv(&mut [&mut a], 0, "lan", 1)[0]).expect("inner packet");
    assert_eq!((v.src, v.dst, v.ttl), (a4("10.9.0.5"), a4("10.0.1.2"), 19));
    assert_eq!(&v.l4[8..], b"from scapy");
    // The same packet with a corrupted GRE checksum is dropped and counted.
    let mut bad = frame.clone();
    let gre_at = 14 + 20;
    bad[gre_at + 4] ^= 0x55;
    send(&a, "wan", &bad);
    until(&mut a, "bad checksum counted", |r| r.counter("gre-input", "bad-checksum") == 1);
}
