//! Golden runs per node (as Snabb's lwaftr and VPP's `test/` do): for each
//! node under test, the smallest configuration that reaches it, input
//! frames aimed at each of its branches and drops, and as expectation the
//! frames every interface sent plus that node's counters (packets it
//! handled and each non-zero error).
//!
//! A case lives in `tests/node_golden/<node>/`. The configuration and the
//! input frames are written here with the testkit's builders and committed
//! beside the expectations (`config.toml`, `in-<iface>.pcap`, so that
//! `tshark -r` shows them); the test fails if the committed files and this
//! file disagree. `TERN_BLESS=1 cargo test -p tern-control --test
//! node_golden` rewrites them all; review `out-*.pcap` and `counters.txt`
//! before committing.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use tern_testkit::config::{Config, Rule};
use tern_testkit::golden::{self, Check, Counters};
use tern_testkit::packet::{self, Frame, v4, v6};
use tern_testkit::wire::{EtherType, GrePacket, GreRepr};

const TERN_LAN: [u8; 6] = [2, 0, 0, 0, 1, 1];
const TERN_WAN: [u8; 6] = [2, 0, 0, 0, 2, 1];
const HOST_A: [u8; 6] = [2, 0, 0, 0, 1, 0xaa];
const GW: [u8; 6] = [2, 0, 0, 0, 2, 0xbb];

/// Two memory interfaces, routes beyond the wan gateway, static
/// neighbours: what every case starts from.
fn base() -> Config {
    Config::new()
        .dataplane("icmp_rate", "100000")
        .dataplane("icmp_burst", "10000")
        .memory("lan", "02:00:00:00:01:01", &["10.0.1.1/24", "2001:db8:1::1/64"])
        .memory("wan", "02:00:00:00:02:01", &["10.0.2.1/24", "2001:db8:2::1/64"])
        .route_via("198.18.0.0/15", "10.0.2.2")
        .route_via("2001:db8:ff::/48", "2001:db8:2::2")
        .neighbor("lan", "10.0.1.2", "02:00:00:00:01:aa")
        .neighbor("wan", "10.0.2.2", "02:00:00:00:02:bb")
        .neighbor("lan", "2001:db8:1::2", "02:00:00:00:01:aa")
        .neighbor("wan", "2001:db8:2::2", "02:00:00:00:02:bb")
}

/// A frame from host A into tern's lan port.
fn from_a() -> Frame {
    Frame::eth(HOST_A, TERN_LAN)
}

/// A frame from the gateway into tern's wan port.
fn from_gw() -> Frame {
    Frame::eth(GW, TERN_WAN)
}

fn a4(s: &str) -> Ipv4Addr {
    v4(s)
}

fn a6(s: &str) -> Ipv6Addr {
    v6(s)
}

/// An IPv4 UDP frame from host A to `dst`.
fn udp_a(dst: &str, dport: u16, data: &[u8]) -> Vec<u8> {
    from_a().ipv4(a4("10.0.1.2"), a4(dst)).udp(40000, dport).payload(data).build()
}

/// Byte `at` of the IPv4 header (after 14 bytes of Ethernet) set to `value`,
/// checksum left as it was (bad) unless `fix` is set.
fn poke_v4(mut f: Vec<u8>, at: usize, value: u8, fix: bool) -> Vec<u8> {
    f[14 + at] = value;
    if fix {
        f[24..26].copy_from_slice(&[0, 0]);
        let ihl = usize::from(f[14] & 0x0f).max(5) * 4;
        let c = packet::csum(&f[14..14 + ihl]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
    f
}

/// Writes (when blessing) or checks the case's configuration and inputs,
/// then runs it and compares outputs and the counters of `nodes`.
fn run(node: &str, nodes: &[&str], config: Config, inputs: &[(&str, Vec<Vec<u8>>)]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node_golden").join(node);
    std::fs::create_dir_all(&dir).expect("case directory");
    let mut check = Check::new();
    check.text(
        &dir.join("config.toml"),
        &format!("# Golden run of {node}: written by node_golden.rs\n{}", config.toml()),
    );
    for (iface, frames) in inputs {
        check.frames(&dir.join(format!("in-{iface}.pcap")), frames);
    }
    check.merge(golden::run_case(&dir, Counters::Nodes(nodes)));
    check.finish();
}

#[test]
fn ip4_input() {
    let good = udp_a("198.18.0.7", 5678, b"forward me");
    let mut truncated = good.clone();
    truncated.truncate(14 + 20 + 4);
    let lan = vec![
        good.clone(),
        poke_v4(good.clone(), 10, 0x12, false), // bad checksum
        truncated,
        poke_v4(good.clone(), 0, 0x65, true), // version 6 behind EtherType IPv4
        poke_v4(good.clone(), 0, 0x44, true), // IHL 4
        poke_v4(good.clone(), 3, 16, true),   // total length 16, below the header
        udp_a("224.0.0.5", 1, b"multicast"),
        udp_a("255.255.255.255", 1, b"broadcast"),
        udp_a("240.0.0.1", 1, b"class e"),
        from_a().ipv4(a4("127.0.0.1"), a4("198.18.0.7")).udp(1, 2).payload(b"martian source").build(),
        Frame::eth(HOST_A, [0xff; 6]).ipv4(a4("10.0.1.2"), a4("198.18.0.7")).udp(1, 2).payload(b"l2 bcast").build(),
        packet::eth(TERN_LAN, HOST_A, 0x0800, &[0x45, 0, 0, 10]), // shorter than a header
        from_a().ipv4(a4("10.0.1.2"), a4("10.0.1.1")).icmp_echo(7, 1).payload(b"ping tern").build(),
    ];
    run("ip4-input", &["ip4-input"], base(), &[("lan", lan)]);
}

#[test]
fn ip4_rewrite() {
    let big = |df: bool| {
        let f = from_a().ipv4(a4("10.0.1.2"), a4("198.18.0.9")).udp(1, 2).payload(&[0x5a; 1450]);
        if df { f.df() } else { f }.build()
    };
    let lan = vec![
        udp_a("198.18.0.7", 5678, b"ttl 64 becomes 63"),
        from_a().ipv4(a4("10.0.1.2"), a4("198.18.0.7")).ttl(1).udp(1, 33434).payload(b"ttl 1").build(),
        from_a().ipv4(a4("10.0.1.2"), a4("198.18.0.7")).ttl(2).udp(1, 33434).payload(b"ttl 2").build(),
        from_a().ipv4(a4("10.0.1.2"), a4("198.18.0.7")).dscp(46).udp(1, 2).payload(b"dscp ef").build(),
        big(true),
        big(false),
    ];
    let wan = vec![from_gw().ipv4(a4("198.18.0.7"), a4("10.0.1.2")).udp(5678, 40000).payload(b"and back").build()];
    let config = base().iface_key("wan", "mtu", "1400");
    run("ip4-rewrite", &["ip4-rewrite"], config, &[("lan", lan), ("wan", wan)]);
}

#[test]
fn ip4_acl_in() {
    let tcp = |dport: u16| from_a().ipv4(a4("10.0.1.2"), a4("198.18.0.7")).tcp(40000, dport, 0x02).build();
    let lan = vec![
        from_a().ipv4(a4("10.0.1.66"), a4("198.18.0.7")).udp(1, 2).payload(b"blocked source").build(),
        udp_a("198.18.0.7", 53, b"counted then accepted"),
        udp_a("198.18.0.7", 5000, b"udp accepted"),
        tcp(22),
        tcp(22),
        tcp(23),
        from_a().ipv4(a4("10.0.1.2"), a4("10.0.1.1")).icmp_echo(7, 1).payload(b"ping tern").build(),
    ];
    let config = base().acl_in("lan", "IN").acl(
        "IN",
        "drop",
        &[
            Rule::drop().src("10.0.1.66/32"),
            Rule::count().proto("udp").dport(53),
            Rule::accept().proto("udp"),
            Rule::accept().proto("tcp").dport(22),
        ],
    );
    run("ip4-acl-in", &["ip4-acl-in", "ip4-input"], config, &[("lan", lan)]);
}

#[test]
fn ip4_acl_out() {
    let tcp = |dport: u16| from_a().ipv4(a4("10.0.1.2"), a4("198.18.0.7")).tcp(40000, dport, 0x02).build();
    let lan = vec![
        udp_a("198.18.0.7", 5678, b"out"),
        udp_a("198.18.0.66", 5678, b"blocked destination"),
        tcp(25),
        tcp(80),
        udp_a("10.0.1.1", 53, b"for tern: no output rule set on the way"),
    ];
    let config = base().acl_out("wan", "OUT").acl(
        "OUT",
        "accept",
        &[Rule::drop().dst("198.18.0.66/32"), Rule::drop().proto("tcp").dport(25)],
    );
    run("ip4-acl-out", &["ip4-acl-out", "ip4-rewrite"], config, &[("lan", lan)]);
}

/// The base configuration with tunnel gre0 (key 7) to the wan gateway.
fn with_tunnel() -> Config {
    base().gre("gre0", "10.0.2.1", "10.0.2.2", Some(7), &["192.168.255.1/30"]).route_dev("10.20.0.0/16", "gre0")
}

#[test]
fn gre_encap() {
    let lan = vec![
        udp_a("10.20.0.5", 9, b"into the tunnel"),
        udp_a("10.20.0.6", 9, b"a second flow"),
        from_a().ipv4(a4("10.0.1.2"), a4("10.20.0.5")).ttl(1).udp(1, 2).payload(b"expires first").build(),
        from_a().ipv4(a4("10.0.1.2"), a4("10.20.0.5")).df().udp(1, 2).payload(&[0x33; 1460]).build(),
    ];
    run("gre-encap", &["gre-encap"], with_tunnel(), &[("lan", lan)]);
}

/// A GRE packet from the gateway to tern's wan address carrying `inner`.
fn gre_from_gw(repr: GreRepr, inner: &[u8], corrupt_checksum: bool) -> Vec<u8> {
    let mut g = vec![0; repr.buffer_len()];
    g.extend_from_slice(inner);
    repr.emit(&mut GrePacket::new_unchecked(&mut g[..])).expect("GRE");
    if corrupt_checksum {
        g[4] ^= 0x55;
    }
    let ip = packet::ipv4(a4("10.0.2.2"), a4("10.0.2.1"), 47, 64, &g);
    packet::eth(TERN_WAN, GW, 0x0800, &ip)
}

#[test]
fn gre_input() {
    let inner = Frame::new().ipv4(a4("10.20.0.5"), a4("10.0.1.2")).udp(9, 7).payload(b"out of the tunnel").build();
    let inner6 = Frame::new().ipv6(a6("2001:db8:20::5"), a6("2001:db8:1::2")).udp(9, 7).payload(b"v6 inside").build();
    let gre = |proto: EtherType, key: Option<u32>, checksum: bool| GreRepr {
        protocol_type: proto,
        checksum,
        key,
        seq_number: None,
    };
    let mut version1 = gre_from_gw(gre(EtherType::IPV4, Some(7), false), &inner, false);
    version1[14 + 20 + 1] |= 1;
    let wan = vec![
        gre_from_gw(gre(EtherType::IPV4, Some(7), false), &inner, false),
        gre_from_gw(gre(EtherType::IPV6, Some(7), false), &inner6, false),
        gre_from_gw(gre(EtherType::IPV4, Some(8), false), &inner, false),
        gre_from_gw(gre(EtherType::IPV4, None, false), &inner, false),
        gre_from_gw(gre(EtherType::IPV4, Some(7), true), &inner, false),
        gre_from_gw(gre(EtherType::IPV4, Some(7), true), &inner, true),
        gre_from_gw(gre(EtherType(0x6558), Some(7), false), &inner, false),
        version1,
    ];
    run("gre-input", &["gre-input"], with_tunnel(), &[("wan", wan)]);
}

#[test]
fn ip6_input() {
    let udp6 = |src: &str, dst: &str, data: &[u8]| from_a().ipv6(a6(src), a6(dst)).udp(1, 2).payload(data).build();
    let good = udp6("2001:db8:1::2", "2001:db8:ff::7", b"v6 forward");
    let mut truncated = good.clone();
    truncated.truncate(14 + 40 + 4);
    let mut version4 = good.clone();
    version4[14] = 0x40;
    let lan = vec![
        good,
        truncated,
        version4,
        udp6("ff02::1", "2001:db8:ff::7", b"multicast source"),
        udp6("2001:db8:1::2", "::1", b"loopback destination"),
        from_a().ipv6(a6("2001:db8:1::2"), a6("2001:db8:1::1")).icmp6_echo(1, 1).payload(b"ping6").build(),
        packet::eth(TERN_LAN, HOST_A, 0x86dd, &[0x60, 0, 0, 0]),
    ];
    run("ip6-input", &["ip6-input"], base(), &[("lan", lan)]);
}

#[test]
fn ip6_rewrite() {
    let lan = vec![
        from_a().ipv6(a6("2001:db8:1::2"), a6("2001:db8:ff::7")).udp(1, 2).payload(b"hop limit 64 becomes 63").build(),
        from_a().ipv6(a6("2001:db8:1::2"), a6("2001:db8:ff::7")).hop_limit(1).udp(1, 2).payload(b"hop 1").build(),
        from_a().ipv6(a6("2001:db8:1::2"), a6("2001:db8:ff::7")).udp(1, 2).payload(&[0x66; 1400]).build(),
    ];
    let config = base().iface_key("wan", "mtu", "1400");
    run("ip6-rewrite", &["ip6-rewrite"], config, &[("lan", lan)]);
}

/// [`run`] with `extra` TOML after the builder's configuration (route
/// types the builder has no setter for).
fn run_with(node: &str, nodes: &[&str], config: Config, extra: &str, inputs: &[(&str, Vec<Vec<u8>>)]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node_golden").join(node);
    std::fs::create_dir_all(&dir).expect("case directory");
    let mut check = Check::new();
    check.text(
        &dir.join("config.toml"),
        &format!("# Golden run of {node}: written by node_golden.rs\n{}\n{extra}", config.toml()),
    );
    for (iface, frames) in inputs {
        check.frames(&dir.join(format!("in-{iface}.pcap")), frames);
    }
    check.merge(golden::run_case(&dir, Counters::Nodes(nodes)));
    check.finish();
}

/// Routes of the kinds that drop or answer, for both families.
const ROUTE_TYPES: &str = "[[route]]\nprefix = \"192.0.2.0/24\"\ntype = \"blackhole\"\n\n\
[[route]]\nprefix = \"198.51.100.0/24\"\ntype = \"unreachable\"\n\n\
[[route]]\nprefix = \"203.0.113.0/24\"\ntype = \"prohibit\"\n\n\
[[route]]\nprefix = \"2001:db8:bb::/48\"\ntype = \"blackhole\"\n\n\
[[route]]\nprefix = \"2001:db8:cc::/48\"\ntype = \"unreachable\"\n\n\
[[route]]\nprefix = \"2001:db8:dd::/48\"\ntype = \"prohibit\"\n";

#[test]
fn ip4_lookup() {
    let lan = vec![
        udp_a("198.18.0.7", 9, b"via 10.0.2.2, out of wan"),
        udp_a("10.0.2.9", 9, b"connected, neighbour unknown: ARP"),
        udp_a("10.0.1.1", 9, b"ours: ip4-local"),
        udp_a("100.64.0.1", 9, b"no route: net unreachable"),
        udp_a("192.0.2.1", 9, b"blackhole: silence"),
        udp_a("198.51.100.1", 9, b"unreachable: host unreachable"),
        udp_a("203.0.113.1", 9, b"prohibit: admin prohibited"),
    ];
    let wan =
        vec![from_gw().ipv4(a4("198.18.0.7"), a4("10.0.1.2")).udp(9, 40000).payload(b"connected, resolved").build()];
    run_with("ip4-lookup", &["ip4-lookup"], base(), ROUTE_TYPES, &[("lan", lan), ("wan", wan)]);
}

#[test]
fn ip6_lookup() {
    let udp6 = |dst: &str, data: &[u8]| from_a().ipv6(a6("2001:db8:1::2"), a6(dst)).udp(40000, 9).payload(data).build();
    let lan = vec![
        udp6("2001:db8:ff::7", b"via 2001:db8:2::2, out of wan"),
        udp6("2001:db8:2::9", b"connected, neighbour unknown: NS"),
        udp6("2001:db8:1::1", b"ours: ip6-local"),
        udp6("2001:db8:aa::1", b"no route"),
        udp6("2001:db8:bb::1", b"blackhole: silence"),
        udp6("2001:db8:cc::1", b"unreachable: address unreachable"),
        udp6("2001:db8:dd::1", b"prohibit: admin prohibited"),
    ];
    let wan = vec![
        from_gw().ipv6(a6("2001:db8:ff::7"), a6("2001:db8:1::2")).udp(9, 40000).payload(b"connected, resolved").build(),
    ];
    run_with("ip6-lookup", &["ip6-lookup"], base(), ROUTE_TYPES, &[("lan", lan), ("wan", wan)]);
}

#[test]
fn ip4_local() {
    let echo = |dst: &str, data: &[u8]| from_a().ipv4(a4("10.0.1.2"), a4(dst)).icmp_echo(7, 1).payload(data).build();
    let mut bad_icmp = echo("10.0.1.1", b"bad icmp checksum");
    bad_icmp[14 + 20 + 2] ^= 0xff;
    let fragment = poke_v4(echo("10.0.1.1", b"first fragment"), 6, 0x20, true);
    let lan = vec![
        echo("10.0.1.1", b"ping tern"),
        echo("10.0.2.1", b"ping tern's wan address"),
        bad_icmp,
        fragment,
        from_a().ipv4(a4("10.0.1.2"), a4("10.0.1.1")).udp(40000, 9).payload(b"udp: port unreachable").build(),
        from_a().ipv4(a4("10.0.1.2"), a4("10.0.1.1")).tcp(40000, 22, 0x02).build(),
        from_a().ipv4(a4("10.0.1.2"), a4("10.0.1.1")).protocol(99).payload(b"protocol 99").build(),
        from_a().ipv4(a4("10.0.1.2"), a4("10.0.1.1")).icmp_echo_reply(7, 1).payload(b"an echo reply").build(),
    ];
    run("ip4-local", &["ip4-local"], base(), &[("lan", lan)]);
}

/// An ICMPv6 message of type `ty` from `src` to `dst` in a frame from
/// host A to `dst_mac`, hop limit `hop`.
fn icmp6_a(dst_mac: [u8; 6], src: &str, dst: &str, hop: u8, ty: u8, body: &[u8]) -> Vec<u8> {
    let m = packet::icmp6(a6(src), a6(dst), ty, 0, body);
    packet::eth(dst_mac, HOST_A, 0x86dd, &packet::ipv6(a6(src), a6(dst), 58, hop, &m))
}

#[test]
fn ip6_local() {
    let (sn, sn_mac) = packet::solicited_node(a6("2001:db8:1::1"));
    let sn = sn.to_string();
    let ns = |target: &str, hop: u8| {
        icmp6_a(sn_mac, "2001:db8:1::2", &sn, hop, 135, &packet::ns_body(a6(target), Some(HOST_A)))
    };
    let lan = vec![
        from_a().ipv6(a6("2001:db8:1::2"), a6("2001:db8:1::1")).icmp6_echo(1, 1).payload(b"ping6 tern").build(),
        ns("2001:db8:1::1", 255),
        ns("2001:db8:1::99", 255),
        ns("2001:db8:1::1", 64), // hop limit not 255: RFC 4861 7.1.1
        icmp6_a(
            TERN_LAN,
            "2001:db8:1::2",
            "2001:db8:1::1",
            255,
            136,
            &packet::na_body(a6("2001:db8:1::2"), 0x60, HOST_A),
        ),
        icmp6_a([0x33, 0x33, 0, 0, 0, 2], "fe80::1aa", "ff02::2", 255, 133, &[0; 12]),
        icmp6_a(sn_mac, "2001:db8:1::2", &sn, 255, 135, &[0; 4]), // too short for a target
        from_a().ipv6(a6("2001:db8:1::2"), a6("2001:db8:1::1")).udp(40000, 9).payload(b"udp: port unreachable").build(),
        from_a().ipv6(a6("2001:db8:1::2"), a6("2001:db8:1::1")).tcp(40000, 22, 0x02).build(),
    ];
    run("ip6-local", &["ip6-local"], base(), &[("lan", lan)]);
}

#[test]
fn arp_input() {
    use tern_testkit::wire::ArpOperation;
    let arp = |dst: [u8; 6], op: ArpOperation, sha: [u8; 6], spa: &str, tha: [u8; 6], tpa: &str| {
        Frame::eth(sha, dst).arp(op, sha, a4(spa), tha, a4(tpa)).pad().build()
    };
    let host_b = [2, 0, 0, 0, 1, 0xbb];
    let mut hw_type_6 = arp([0xff; 6], ArpOperation::REQUEST, HOST_A, "10.0.1.2", [0; 6], "10.0.1.1");
    hw_type_6[15] = 6;
    let op_3 = arp([0xff; 6], ArpOperation(3), HOST_A, "10.0.1.2", [0; 6], "10.0.1.1");
    let lan = vec![
        arp([0xff; 6], ArpOperation::REQUEST, HOST_A, "10.0.1.2", [0; 6], "10.0.1.1"),
        arp(TERN_LAN, ArpOperation::REPLY, host_b, "10.0.1.3", TERN_LAN, "10.0.1.1"),
        arp([0xff; 6], ArpOperation::REQUEST, host_b, "10.0.1.3", [0; 6], "10.0.1.3"), // gratuitous
        arp([0xff; 6], ArpOperation::REQUEST, HOST_A, "10.0.1.2", [0; 6], "10.0.1.99"),
        hw_type_6,
        op_3,
        Frame::eth(HOST_A, [0xff; 6])
            .arp(ArpOperation::REQUEST, [3, 0, 0, 0, 0, 1], a4("10.0.1.4"), [0; 6], a4("10.0.1.1"))
            .pad()
            .build(), // group sender
        packet::eth([0xff; 6], HOST_A, 0x0806, &[0, 1, 8, 0, 6, 4, 0, 1]), // cut after the operation
    ];
    run("arp-input", &["arp-input"], base(), &[("lan", lan)]);
}
