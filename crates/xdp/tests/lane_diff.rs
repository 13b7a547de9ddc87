//! Proof that the XDP lane behaves as tern's userspace engine: the same
//! frames (hand-made edge cases, the 100GE scenarios' rule sets, VLANs,
//! GRE both ways, and thousands of random and mutated frames) go through
//! the lane program (BPF_PROG_TEST_RUN) and through the forwarding graph on
//! a `Worker`, over one FIB and one set of tables; every frame the lane
//! decides itself must come out identical, with identical counters and
//! rule hits (see `lane_util/diff.rs`). Needs root; prints "skipped"
//! otherwise.

mod lane_util;

use lane_util::diff::{Diff, Verdict, build, build_with_memos};
use lane_util::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tern_acl::{Action, Rule, RuleAction, RuleSet};
use tern_fib::{FibConfig, FibWriter, Prefix, RouteAttrs, RouteTarget, Source};
use tern_nodes::state::{GreTunnel, IfKind, IfTable, Iface, NO_IF, V4Net, V6Net};

const R_LAN: [u8; 6] = [2, 0, 0, 0, 1, 1];
const R_WAN: [u8; 6] = [2, 0, 0, 0, 2, 1];
const R_DMZ: [u8; 6] = [2, 0, 0, 0, 3, 1];
const HOST_A: [u8; 6] = [2, 0, 0, 0, 1, 0xaa];
const HOST_B: [u8; 6] = [2, 0, 0, 0, 2, 0xbb];
const HOST_C: [u8; 6] = [2, 0, 0, 0, 3, 0xcc];
const HOST_V: [u8; 6] = [2, 0, 0, 0, 1, 0x55];

const LAN: u16 = 0;
const WAN: u16 = 1;
const DMZ: u16 = 2;
const VLAN100: u16 = 3;
const GRE0: u16 = 4;
const GRE6: u16 = 5;

fn iface(index: u16, name: &str, kind: IfKind, port: u16, mac: [u8; 6], mtu: u16) -> Iface {
    Iface { mtu, ..Iface::new(index, name, kind, port, mac) }
}

fn n4(a: &str, len: u8) -> V4Net {
    V4Net { addr: v4(a), len }
}

fn n6(a: &str, len: u8) -> V6Net {
    V6Net { addr: v6(a), len }
}

/// lan (port 0, rule set FW50 in), wan (port 1, MTU 1400, OUT out), dmz
/// (port 2, the drop test in), lan.100 (VLAN 100 on port 0), gre0 (IPv4,
/// no key), gre6 (IPv6, key 42).
fn interfaces() -> IfTable {
    let mut lan = iface(LAN, "lan", IfKind::Port, 0, R_LAN, 1500);
    lan.v4 = vec![n4("10.0.1.1", 24)];
    lan.v6 = vec![n6("2001:db8:1::1", 64)];
    lan.acl_in = Some(0);
    let mut wan = iface(WAN, "wan", IfKind::Port, 1, R_WAN, 1400);
    wan.v4 = vec![n4("10.0.2.1", 24)];
    wan.v6 = vec![n6("2001:db8:2::1", 64)];
    wan.acl_out = Some(1);
    let mut dmz = iface(DMZ, "dmz", IfKind::Port, 2, R_DMZ, 1500);
    dmz.v4 = vec![n4("10.0.3.1", 24)];
    dmz.acl_in = Some(2);
    let mut vl = iface(VLAN100, "lan.100", IfKind::Vlan { parent: LAN, vid: 100 }, 0, R_LAN, 1500);
    vl.v4 = vec![n4("10.0.100.1", 24)];
    vl.v6 = vec![n6("2001:db8:100::1", 64)];
    let t0 =
        GreTunnel { local: "10.0.2.1".parse().expect("a"), remote: "10.0.2.2".parse().expect("a"), key: None, ttl: 64 };
    let mut g0 = iface(GRE0, "gre0", IfKind::Gre(t0), NO_IF, [2, 0x67, 0x72, 0x65, 0, 4], 1476);
    g0.v4 = vec![n4("192.168.255.1", 30)];
    let t6 = GreTunnel {
        local: "2001:db8:2::1".parse().expect("a"),
        remote: "2001:db8:2::2".parse().expect("a"),
        key: Some(42),
        ttl: 50,
    };
    let mut g6 = iface(GRE6, "gre6", IfKind::Gre(t6), NO_IF, [2, 0x67, 0x72, 0x65, 0, 5], 1300);
    g6.v4 = vec![n4("192.168.254.1", 30)];
    g6.v6 = vec![n6("fd00::1", 64)];
    IfTable::new(vec![lan, wan, dmz, vl, g0, g6])
}

/// The routes an interface's addresses imply (as the router adds them).
fn connected(fib: &mut FibWriter, ifs: &IfTable) {
    for f in &ifs.ifs {
        for n in &f.v4 {
            let net = Prefix::V4 { addr: Ipv4Addr::from(u32::from(n.addr) & n.mask()), len: n.len };
            fib.add_route(Source::Connected, net, RouteTarget::Connected { ifindex: f.index }, RouteAttrs::default())
                .expect("connected");
            fib.add_route(
                Source::Local,
                Prefix::V4 { addr: n.addr, len: 32 },
                RouteTarget::Local { ifindex: f.index },
                RouteAttrs::default(),
            )
            .expect("local");
            if let Some(b) = n.broadcast() {
                fib.add_route(
                    Source::Local,
                    Prefix::V4 { addr: b, len: 32 },
                    RouteTarget::Blackhole,
                    RouteAttrs::default(),
                )
                .expect("broadcast");
            }
        }
        for n in &f.v6 {
            let net = Prefix::V6 { addr: Ipv6Addr::from(u128::from(n.addr) & n.mask()), len: n.len };
            fib.add_route(Source::Connected, net, RouteTarget::Connected { ifindex: f.index }, RouteAttrs::default())
                .expect("connected");
            fib.add_route(
                Source::Local,
                Prefix::V6 { addr: n.addr, len: 128 },
                RouteTarget::Local { ifindex: f.index },
                RouteAttrs::default(),
            )
            .expect("local");
        }
    }
}

fn route(fib: &mut FibWriter, p: &str, t: RouteTarget) {
    fib.add_route(Source::Static, p.parse().expect("prefix"), t, RouteAttrs::default()).expect("route");
}

fn via(gw: &str) -> RouteTarget {
    RouteTarget::Via { gw: gw.parse().expect("gw"), ifindex: None }
}

fn rule_sets() -> Vec<RuleSet> {
    let fw50 = tern_acl::scenario_50_drop_rules();
    let mut out = RuleSet::new("OUT", Action::Accept);
    let mut r = Rule::new(RuleAction::Drop);
    r.proto = Some(tern_acl::value::List::one(tern_acl::value::ProtoRange::single(6).expect("tcp")));
    r.dport = Some(tern_acl::value::List::one(tern_acl::value::PortRange::single(23).expect("port")));
    out.rules.push(r);
    let mut r = Rule::new(RuleAction::Count);
    r.proto = Some(tern_acl::value::List::one(tern_acl::value::ProtoRange::single(17).expect("udp")));
    r.dport = Some(tern_acl::value::List::one(tern_acl::value::PortRange::single(53).expect("port")));
    out.rules.push(r);
    let mut r = Rule::new(RuleAction::Drop);
    r.dst = Some(tern_acl::value::List::one(
        tern_acl::value::Prefix::new("2001:db8:ff::dead".parse().expect("a"), 128).expect("p"),
    ));
    out.rules.push(r);
    let mut r = Rule::new(RuleAction::Drop);
    r.dscp = Some(tern_acl::value::List::one(tern_acl::value::DscpRange::single(46).expect("dscp")));
    r.iif = Some(tern_acl::value::List::one(tern_acl::value::IfName("lan.100".into())));
    out.rules.push(r);
    let drop_test = tern_acl::scenario_drop_test();
    vec![fw50, out, drop_test]
}

/// The lab: interfaces, routes, resolved neighbours.
fn fib() -> (FibWriter, tern_fib::FibReader) {
    let cfg = FibConfig {
        max_nexthops: 1 << 12,
        max_ecmp_members: 1 << 10,
        v4_nodes: 1 << 10,
        v6_nodes: 1 << 12,
        ..FibConfig::default()
    };
    let (mut w, r) = tern_fib::new(cfg, tern_rcu::Domain::new());
    connected(&mut w, &interfaces());
    route(&mut w, "198.18.0.0/15", via("10.0.2.2"));
    route(&mut w, "203.0.113.0/24", via("192.168.255.2"));
    route(&mut w, "203.0.114.0/24", via("192.168.254.2"));
    route(&mut w, "2001:db8:ff::/48", via("2001:db8:2::2"));
    route(&mut w, "2001:db8:ee::/48", via("fd00::2"));
    route(&mut w, "198.51.100.0/24", via("10.0.3.2"));
    route(&mut w, "192.0.2.0/24", RouteTarget::Blackhole);
    route(&mut w, "100.64.0.0/10", RouteTarget::Unreachable);
    route(&mut w, "2001:db8:bad::/48", RouteTarget::Prohibit);
    route(
        &mut w,
        "172.16.0.0/12",
        RouteTarget::Ecmp(vec![("10.0.2.2".parse().expect("a"), None), ("10.0.3.3".parse().expect("a"), None)]),
    );
    w.set_neighbor(WAN, "10.0.2.2".parse().expect("a"), Some(HOST_B));
    w.set_neighbor(WAN, "2001:db8:2::2".parse().expect("a"), Some(HOST_B));
    w.set_neighbor(DMZ, "10.0.3.3".parse().expect("a"), Some(HOST_C));
    w.set_neighbor(LAN, "10.0.1.2".parse().expect("a"), Some(HOST_A));
    w.set_neighbor(LAN, "2001:db8:1::2".parse().expect("a"), Some(HOST_A));
    w.set_neighbor(VLAN100, "10.0.100.5".parse().expect("a"), Some(HOST_V));
    w.set_neighbor(VLAN100, "2001:db8:100::5".parse().expect("a"), Some(HOST_V));
    // IPv6 ECMP over wan and lan.100: the member hash reads the flow label.
    route(
        &mut w,
        "2001:db8:e0::/48",
        RouteTarget::Ecmp(vec![
            ("2001:db8:2::2".parse().expect("a"), None),
            ("2001:db8:100::5".parse().expect("a"), None),
        ]),
    );
    (w, r)
}

fn udp4(src: &str, dst: &str, ttl: u8, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    ipv4(v4(src), v4(dst), 17, ttl, &udp(sport, dport, data))
}

fn udp6(src: &str, dst: &str, hop: u8, sport: u16, dport: u16) -> Vec<u8> {
    ipv6(v6(src), v6(dst), 17, hop, &udp(sport, dport, b"lane"))
}

fn lan_frame(l3: Vec<u8>) -> Vec<u8> {
    eth(R_LAN, HOST_A, 0x0800, &l3)
}

fn lan6(l3: Vec<u8>) -> Vec<u8> {
    eth(R_LAN, HOST_A, 0x86dd, &l3)
}

/// Recomputes the IPv4 header checksum of a frame's L3 header at `off`.
fn fix_csum(f: &mut [u8], off: usize) {
    let ihl = usize::from(f[off] & 0x0f) * 4;
    f[off + 10] = 0;
    f[off + 11] = 0;
    let c = csum(&f[off..off + ihl.max(20).min(f.len() - off)]);
    f[off + 10..off + 12].copy_from_slice(&c.to_be_bytes());
}

fn with_lab(f: impl FnOnce(&mut Diff, &mut FibWriter) + Send) {
    if !privileged() {
        return;
    }
    let ns = with_veths(3);
    ns.run(|| {
        let (mut w, r) = fib();
        let mut d = build(interfaces(), 3, &r, &rule_sets(), false);
        f(&mut d, &mut w);
    });
}

#[test]
fn edge_cases_agree_with_userspace() {
    with_lab(|d, _| {
        use Verdict::*;
        let fwd = |d: &mut Diff, port: u16, f: &[u8]| d.run(port, f);
        // Plain forwarding, and the TTL.
        assert_eq!(fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1000, 2000, b"x"))), Forward(WAN));
        assert_eq!(fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "198.18.0.1", 2, 1000, 2000, b"x"))), Forward(WAN));
        assert_eq!(
            fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "198.18.0.1", 1, 1000, 2000, b"x"))),
            Punt("xdp-lane/punt-ttl".into())
        );
        assert_eq!(
            fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "198.18.0.1", 0, 1000, 2000, b"x"))),
            Punt("xdp-lane/punt-ttl".into())
        );
        // The 50 drop rules: a blocked source, and one next to it.
        assert_eq!(
            fwd(d, LAN, &lan_frame(udp4("1.1.7.1", "198.18.0.1", 64, 1, 2, b"x"))),
            Drop("ip4-acl-in/denied".into())
        );
        assert_eq!(fwd(d, LAN, &lan_frame(udp4("1.1.7.2", "198.18.0.1", 64, 1, 2, b"x"))), Forward(WAN));
        // Broken IPv4 headers.
        let good = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1000, 2000, b"payload"));
        let mut f = good.clone();
        f[24] ^= 0xff;
        assert_eq!(fwd(d, LAN, &f), Drop("ip4-input/bad-checksum".into()));
        let mut f = good.clone();
        f[16..18].copy_from_slice(&500u16.to_be_bytes());
        fix_csum(&mut f, 14);
        assert_eq!(fwd(d, LAN, &f), Drop("ip4-input/truncated".into()));
        let mut f = good.clone();
        f[16..18].copy_from_slice(&12u16.to_be_bytes());
        fix_csum(&mut f, 14);
        assert_eq!(fwd(d, LAN, &f), Drop("ip4-input/bad-length".into()));
        let mut f = good.clone();
        f[14] = 0x44;
        assert_eq!(fwd(d, LAN, &f), Drop("ip4-input/bad-header-length".into()));
        let mut f = good.clone();
        f[14] = 0x55;
        assert_eq!(fwd(d, LAN, &f), Drop("ip4-input/bad-version".into()));
        let mut f = good.clone();
        f[14] = 0x46;
        assert_eq!(fwd(d, LAN, &f), Punt("xdp-lane/punt-options".into()), "options: userspace");
        assert_eq!(
            fwd(d, LAN, &lan_frame(udp4("127.0.0.1", "198.18.0.1", 64, 1, 2, b"x"))),
            Drop("ip4-input/martian-source".into())
        );
        // Ethernet padding is trimmed on the way out.
        let mut f = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, b""));
        f.resize(60, 0xee);
        assert_eq!(fwd(d, LAN, &f), Forward(WAN));
        // MACs.
        let mut f = good.clone();
        f[..6].copy_from_slice(&HOST_B);
        assert_eq!(fwd(d, LAN, &f), Drop("ethernet-input/not-for-us".into()));
        let mut f = good.clone();
        f[..6].copy_from_slice(&[0xff; 6]);
        assert_eq!(fwd(d, LAN, &f), Drop("ip4-input/l2-multicast".into()), "broadcast MAC, unicast IP");
        // Not for the lane: ARP, multicast, unknown EtherType, the router.
        assert_eq!(fwd(d, LAN, &eth([0xff; 6], HOST_A, 0x0806, &[0u8; 28])), Punt("xdp-lane/punt-neighbor".into()));
        assert_eq!(
            fwd(d, LAN, &eth([1, 0, 0x5e, 0, 0, 5], HOST_A, 0x0800, &udp4("10.0.1.2", "224.0.0.5", 1, 1, 2, b"o"))),
            Pass("xdp-lane/pass-multicast".into())
        );
        assert_eq!(
            fwd(d, LAN, &eth(R_LAN, HOST_A, 0x88cc, &[0u8; 46])),
            Drop("ethernet-input/unknown-ethertype".into())
        );
        assert_eq!(
            fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "10.0.1.1", 64, 1, 2, b"x"))),
            Punt("xdp-lane/punt-local".into())
        );
        // Routes of every kind.
        assert_eq!(
            fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "192.0.2.9", 64, 1, 2, b"x"))),
            Drop("ip4-lookup/blackhole".into())
        );
        assert_eq!(
            fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "8.8.8.8", 64, 1, 2, b"x"))),
            Punt("xdp-lane/punt-icmp-route".into())
        );
        assert_eq!(
            fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "100.64.0.1", 64, 1, 2, b"x"))),
            Punt("xdp-lane/punt-icmp-route".into())
        );
        assert_eq!(
            fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "198.51.100.7", 64, 1, 2, b"x"))),
            Punt("xdp-lane/punt-unresolved".into())
        );
        // ECMP: both members, the same choice as userspace.
        let mut ports = std::collections::BTreeSet::new();
        for i in 0..64u16 {
            if let Forward(p) = fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "172.16.3.4", 64, 1000 + i, 53, b"e"))) {
                ports.insert(p);
            }
        }
        assert_eq!(ports.len(), 2, "flows spread over both members");
        // MTU 1400 on wan: DF set -> ICMP (userspace), clear -> dropped.
        let big = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, &[7u8; 1400]));
        assert_eq!(fwd(d, LAN, &big), Drop("ip4-rewrite/fragmentation-unsupported".into()));
        let mut df = big.clone();
        df[20] = 0x40;
        fix_csum(&mut df, 14);
        assert_eq!(fwd(d, LAN, &df), Punt("xdp-lane/punt-too-big".into()));
        // Output rule set on wan: telnet dropped, DNS counted.
        let telnet = ipv4(v4("10.0.1.2"), v4("198.18.0.1"), 6, 64, &tcp(4000, 23, 0x02));
        assert_eq!(fwd(d, LAN, &lan_frame(telnet)), Drop("ip4-acl-out/denied".into()));
        assert_eq!(fwd(d, LAN, &lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 5353, 53, b"q"))), Forward(WAN));
        // Truncated TCP header: ports absent, the telnet rule cannot match.
        let short = ipv4(v4("10.0.1.2"), v4("198.18.0.1"), 6, 64, &tcp(4000, 23, 0x02)[..10]);
        assert_eq!(fwd(d, LAN, &lan_frame(short)), Forward(WAN));
    });
}

/// Issue 36: every hostile frame ends under a counter both lanes name
/// alike (none is handed to Linux uncounted in standalone mode), and
/// RFC 1812 5.3.4 / 5.3.7 and RFC 4291's transit checks drop what must
/// not be forwarded, on both lanes.
#[test]
fn hostile_frames_and_rfc1812_checks_agree_with_userspace() {
    with_lab(|d, _| {
        use Verdict::*;
        let drop = |s: &str| Drop(s.into());
        let good = udp4("10.0.1.2", "198.18.0.1", 64, 1000, 2000, b"payload");
        // EtherTypes tern does not handle (a length field, IPv4's
        // neighbours, LLDP, MPLS, the highest).
        for et in [0x0000, 0x05dc, 0x0600, 0x88cc, 0x8847, 0xffff] {
            assert_eq!(d.run(LAN, &eth(R_LAN, HOST_A, et, &good)), drop("ethernet-input/unknown-ethertype"), "{et:#x}");
        }
        // ... also behind a tag, and only for the router's MAC.
        assert_eq!(d.run(LAN, &eth_vlan(R_LAN, HOST_A, 100, 0x88cc, &good)), drop("ethernet-input/unknown-ethertype"));
        assert_eq!(d.run(LAN, &eth(HOST_B, HOST_A, 0x88cc, &good)), drop("ethernet-input/not-for-us"));
        // Truncated and nested 802.1Q tags.
        assert_eq!(d.run(LAN, &eth(R_LAN, HOST_A, 0x8100, &[0, 100])), drop("ethernet-input/too-short"));
        assert_eq!(d.run(LAN, &eth(R_LAN, HOST_A, 0x88a8, &[0])), drop("ethernet-input/too-short"));
        let mut inner = vec![0, 100, 0x08, 0x00];
        inner.extend_from_slice(&good);
        assert_eq!(d.run(LAN, &eth_vlan(R_LAN, HOST_A, 100, 0x8100, &inner)), drop("ethernet-input/nested-vlan"));
        assert_eq!(d.run(LAN, &eth_vlan(R_LAN, HOST_A, 7, 0x88a8, &inner)), drop("ethernet-input/nested-vlan"));
        // Truncated IP headers, untagged and tagged.
        assert_eq!(d.run(LAN, &eth(R_LAN, HOST_A, 0x0800, &good[..19])), drop("ip4-input/too-short"));
        assert_eq!(d.run(LAN, &eth(R_LAN, HOST_A, 0x0800, &[])), drop("ip4-input/too-short"));
        assert_eq!(d.run(LAN, &eth_vlan(R_LAN, HOST_A, 100, 0x0800, &good[..4])), drop("ip4-input/too-short"));
        let good6 = udp6("2001:db8:1::2", "2001:db8:2::2", 64, 1, 2);
        assert_eq!(d.run(LAN, &eth(R_LAN, HOST_A, 0x86dd, &good6[..39])), drop("ip6-input/too-short"));
        let mut icmp6 = good6.clone();
        icmp6[6] = 58;
        assert_eq!(d.run(LAN, &eth(R_LAN, HOST_A, 0x86dd, &icmp6[..40])), drop("ip6-input/truncated"));
        // A group source MAC, whatever the frame.
        let mut bad_src = HOST_A;
        bad_src[0] |= 1;
        assert_eq!(d.run(LAN, &eth(R_LAN, bad_src, 0x0800, &good)), drop("ethernet-input/multicast-source"));
        assert_eq!(d.run(LAN, &eth(R_LAN, [0xff; 6], 0x86dd, &good6)), drop("ethernet-input/multicast-source"));
        assert_eq!(d.run(LAN, &eth([0xff; 6], bad_src, 0x0806, &[0u8; 28])), drop("ethernet-input/multicast-source"));
        // RFC 1812 5.3.4: unicast IP in a link-layer broadcast or multicast.
        let mcast_mac = [1, 0, 0x5e, 0, 0, 9];
        assert_eq!(d.run(LAN, &eth(mcast_mac, HOST_A, 0x0800, &good)), drop("ip4-input/l2-multicast"));
        assert_eq!(d.run(LAN, &eth([0xff; 6], HOST_A, 0x86dd, &good6)), drop("ip6-input/l2-multicast"));
        assert_eq!(d.run(LAN, &eth([0x33, 0x33, 0, 0, 0, 1], HOST_A, 0x86dd, &good6)), drop("ip6-input/l2-multicast"));
        assert_eq!(
            d.run(LAN, &eth_vlan([0xff; 6], HOST_A, 100, 0x0800, &udp4("10.0.100.2", "198.18.0.1", 64, 1, 2, b"v"))),
            drop("ip4-input/l2-multicast")
        );
        // RFC 1812 5.3.7: martian destinations and sources (class E).
        for dst in ["0.0.0.0", "0.1.2.3", "127.0.0.1", "127.255.255.254", "240.0.0.1", "254.255.255.255"] {
            assert_eq!(
                d.run(LAN, &lan_frame(udp4("10.0.1.2", dst, 64, 1, 2, b"m"))),
                drop("ip4-input/martian-destination"),
                "{dst}"
            );
        }
        for src in ["0.0.0.0", "240.0.0.1", "255.255.255.255", "224.0.0.1", "127.0.0.1"] {
            assert_eq!(
                d.run(LAN, &lan_frame(udp4(src, "198.18.0.1", 64, 1, 2, b"m"))),
                drop("ip4-input/martian-source"),
                "{src}"
            );
        }
        // RFC 4291 / RFC 8504: the unspecified source is never forwarded.
        assert_eq!(d.run(LAN, &lan6(udp6("::", "2001:db8:2::2", 64, 1, 2))), drop("ip6-input/martian-source"));
        assert_eq!(d.run(LAN, &lan6(udp6("::1", "2001:db8:2::2", 64, 1, 2))), drop("ip6-input/martian-source"));
        assert_eq!(d.run(LAN, &lan6(udp6("2001:db8:1::2", "::1", 64, 1, 2))), drop("ip6-input/bad-destination"));
        // IPv4-mapped addresses are not forwardable (RFC 6890), either way.
        assert_eq!(
            d.run(LAN, &lan6(udp6("::ffff:10.0.1.2", "2001:db8:2::2", 64, 1, 2))),
            drop("ip6-input/martian-source")
        );
        assert_eq!(
            d.run(LAN, &lan6(udp6("2001:db8:1::2", "::ffff:198.18.0.1", 64, 1, 2))),
            drop("ip6-input/bad-destination")
        );
        // Their neighbours are forwarded: ::fffe:..., ::1:ffff:0:0.
        for dst in ["::fffe:c612:1", "::1:ffff:c612:1"] {
            assert_ne!(
                d.run(LAN, &lan6(udp6("2001:db8:1::2", dst, 64, 1, 2))),
                drop("ip6-input/bad-destination"),
                "{dst}"
            );
        }
        // Priority-tagged frames (VID 0) are the port's, untagged.
        let want = d.run(LAN, &lan_frame(good.clone()));
        assert_eq!(want, Forward(WAN));
        assert_eq!(d.run(LAN, &eth_vlan(R_LAN, HOST_A, 0, 0x0800, &good)), want, "priority tag");
        let mut prio = eth_vlan(R_LAN, HOST_A, 0, 0x0800, &good);
        prio[14] |= 0xe0; // PCP 7
        assert_eq!(d.run(LAN, &prio), want, "priority tag, PCP 7");
        assert_eq!(d.run(LAN, &eth_vlan(R_LAN, HOST_A, 0, 0x86dd, &good6)), Forward(WAN), "priority tag, IPv6");
        assert_eq!(
            d.run(LAN, &eth_vlan(R_LAN, HOST_A, 0, 0x88cc, &good)),
            drop("ethernet-input/unknown-ethertype"),
            "priority tag, LLDP"
        );
        // What stays good: the same frames, well formed.
        assert_eq!(
            d.run(LAN, &eth_vlan(R_LAN, HOST_A, 100, 0x0800, &udp4("10.0.100.2", "198.18.0.1", 64, 1, 2, b"v"))),
            Forward(WAN)
        );
    });
}

#[test]
fn vlans_and_tunnels_agree_with_userspace() {
    with_lab(|d, _| {
        use Verdict::*;
        let inner = udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, b"v");
        assert_eq!(d.run(LAN, &eth_vlan(R_LAN, HOST_V, 100, 0x0800, &inner)), Forward(WAN), "VLAN popped");
        assert_eq!(
            d.run(LAN, &eth_vlan(R_LAN, HOST_V, 999, 0x0800, &inner)),
            Drop("ethernet-input/unknown-vlan".into())
        );
        let to_v = udp4("198.18.0.9", "10.0.100.5", 64, 1, 2, b"v");
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x0800, &to_v)), Forward(LAN), "VLAN pushed");
        // The output rule set keys on the input interface: DSCP 46 from the
        // VLAN is dropped, from the untagged LAN it passes.
        let mut ef = udp4("10.0.100.5", "198.18.0.1", 64, 1, 2, b"ef");
        ef[1] = 46 << 2;
        fix_csum(&mut ef, 0);
        assert_eq!(d.run(LAN, &eth_vlan(R_LAN, HOST_V, 100, 0x0800, &ef)), Drop("ip4-acl-out/denied".into()));
        let mut ef2 = udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, b"ef");
        ef2[1] = 46 << 2;
        fix_csum(&mut ef2, 0);
        assert_eq!(d.run(LAN, &lan_frame(ef2)), Forward(WAN));

        // GRE encapsulation (IPv4 and IPv6 tunnels), inner IPv4 and IPv6.
        for _ in 0..3 {
            assert_eq!(d.run(LAN, &lan_frame(udp4("10.0.1.2", "203.0.113.9", 64, 1, 2, b"tunnel"))), Forward(WAN));
        }
        assert_eq!(d.run(LAN, &lan_frame(udp4("10.0.1.2", "203.0.114.9", 64, 1, 2, b"tunnel6"))), Forward(WAN));
        assert_eq!(d.run(LAN, &lan6(udp6("2001:db8:1::2", "2001:db8:ee::1", 64, 1, 2))), Forward(WAN));
        // The tunnel MTU (1476): too big for gre0 without DF.
        let big = lan_frame(udp4("10.0.1.2", "203.0.113.9", 64, 1, 2, &[1u8; 1460]));
        assert_eq!(d.run(LAN, &big), Drop("ip4-rewrite/fragmentation-unsupported".into()));

        // Decapsulation: from the tunnel's remote to its local address.
        let inner = udp4("10.9.9.9", "10.0.1.2", 30, 7, 8, b"from the tunnel");
        let outer = ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &gre(None, 0x0800, &inner));
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x0800, &outer)), Forward(LAN));
        let inner6 = udp6("2001:db8:77::1", "2001:db8:1::2", 9, 7, 8);
        let outer6 = ipv6(v6("2001:db8:2::2"), v6("2001:db8:2::1"), 47, 64, &gre(Some(42), 0x86dd, &inner6));
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x86dd, &outer6)), Forward(LAN));
        // Wrong key, bad version, checksum present, non-IP payload.
        let wrong = ipv6(v6("2001:db8:2::2"), v6("2001:db8:2::1"), 47, 64, &gre(Some(43), 0x86dd, &inner6));
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x86dd, &wrong)), Drop("gre-input/no-tunnel".into()));
        let mut g = gre(None, 0x0800, &inner);
        g[1] = 1;
        let bad = ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &g);
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x0800, &bad)), Drop("gre-input/bad-header".into()));
        let mut g = gre(None, 0x0800, &inner);
        g[0] = 0x80;
        let ck = ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &g);
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x0800, &ck)), Punt("xdp-lane/punt-gre".into()));
        let arp_in = ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &gre(None, 0x0806, &[0; 28]));
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x0800, &arp_in)), Drop("gre-input/unsupported-payload".into()));
        // A broken inner header is the inner ip4-input's to drop.
        let mut bad_inner = inner.clone();
        bad_inner[10] ^= 1;
        let o = ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &gre(None, 0x0800, &bad_inner));
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x0800, &o)), Drop("ip4-input/bad-checksum".into()));
        // Decapsulated, then encapsulated again into the other tunnel.
        let through = udp4("10.9.9.9", "203.0.114.1", 30, 7, 8, b"relay");
        let o = ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &gre(None, 0x0800, &through));
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x0800, &o)), Forward(WAN));
    });
}

#[test]
fn ipv6_and_the_drop_test_agree_with_userspace() {
    with_lab(|d, _| {
        use Verdict::*;
        assert_eq!(d.run(LAN, &lan6(udp6("2001:db8:1::2", "2001:db8:ff::1", 64, 1, 2))), Forward(WAN));
        assert_eq!(
            d.run(LAN, &lan6(udp6("2001:db8:1::2", "2001:db8:ff::1", 1, 1, 2))),
            Punt("xdp-lane/punt-ttl".into())
        );
        assert_eq!(d.run(LAN, &lan6(udp6("fe80::2", "2001:db8:ff::1", 64, 1, 2))), Punt("xdp-lane/punt-scope".into()));
        assert_eq!(
            d.run(LAN, &lan6(udp6("2001:db8:1::2", "2001:db8:ff::dead", 64, 1, 2))),
            Drop("ip6-acl-out/denied".into())
        );
        assert_eq!(
            d.run(LAN, &lan6(udp6("2001:db8:1::2", "2001:db8:bad::1", 64, 1, 2))),
            Punt("xdp-lane/punt-icmp-route".into())
        );
        assert_eq!(d.run(LAN, &lan6(udp6("::1", "2001:db8:ff::1", 64, 1, 2))), Drop("ip6-input/martian-source".into()));
        assert_eq!(
            d.run(LAN, &lan6(udp6("2001:db8:1::2", "fe80::99", 64, 1, 2))),
            Drop("ip6-input/link-local-not-ours".into())
        );
        assert_eq!(
            d.run(LAN, &lan6(udp6("2001:db8:1::2", "ff05::2", 64, 1, 2))),
            Pass("xdp-lane/pass-multicast".into())
        );
        let mut t = lan6(udp6("2001:db8:1::2", "2001:db8:ff::1", 64, 1, 2));
        t[18..20].copy_from_slice(&900u16.to_be_bytes());
        assert_eq!(d.run(LAN, &t), Drop("ip6-input/truncated".into()));
        let ns = ipv6(v6("2001:db8:1::2"), v6("ff02::1:ff00:1"), 58, 255, &[135, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(d.run(LAN, &lan6(ns)), Punt("xdp-lane/punt-neighbor".into()));
        let hbh = ipv6(v6("2001:db8:1::2"), v6("2001:db8:ff::1"), 0, 64, &[17, 0, 1, 4, 0, 0, 0, 0]);
        assert_eq!(
            d.run(LAN, &lan6(hbh)),
            Punt("xdp-lane/punt-options".into()),
            "extension headers before an output rule set"
        );

        // The drop test on dmz: UDP to accepted ports passes, the rest not.
        let (mut pass, mut drop) = (0, 0);
        for port in (0..65535u16).step_by(997) {
            let f = eth(R_DMZ, HOST_C, 0x0800, &udp4("10.0.3.3", "198.18.0.1", 64, 9, port, b"d"));
            match d.run(DMZ, &f) {
                Forward(WAN) => pass += 1,
                Drop(r) if r == "ip4-acl-in/denied" => drop += 1,
                v => panic!("drop test: {v:?}"),
            }
        }
        assert!(pass > 20 && drop > 20, "both halves: {pass} passed, {drop} dropped");
        let f = eth(R_DMZ, HOST_C, 0x0800, &ipv4(v4("10.0.3.3"), v4("198.18.0.1"), 6, 64, &tcp(1, 100, 2)));
        assert_eq!(d.run(DMZ, &f), Drop("ip4-acl-in/denied".into()), "TCP: default drop");
    });
}

/// 60 IPv6 source rules over random prefixes (in 2001:db8::/32, and
/// shorter ones anywhere in 2000::/3), drop or accept, default accept: 121
/// interval starts that differ in their high words, their low words or
/// both, for the lane's 128-bit search.
fn many_ipv6_source_rules(r: &mut Rng) -> (RuleSet, Vec<(u128, u8)>) {
    let mut set = RuleSet::new("V6SRC", Action::Accept);
    let mut prefixes = Vec::new();
    for i in 0..60 {
        let (addr, len) = if i % 2 == 0 {
            (
                (0x2001_0db8u128 << 96) | (u128::from(r.next()) << 32) | u128::from(r.next() as u32),
                33 + r.below(96) as u8,
            )
        } else {
            ((1u128 << 125) | ((u128::from(r.next()) << 64 | u128::from(r.next())) >> 3), 4 + r.below(61) as u8)
        };
        let mut rule = Rule::new(if i % 3 == 0 { RuleAction::Accept } else { RuleAction::Drop });
        let p = tern_acl::value::Prefix::new_truncating(Ipv6Addr::from(addr).into(), len);
        rule.src = Some(tern_acl::value::List::one(p));
        set.rules.push(rule);
        let mask = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len)) };
        prefixes.push((addr & mask, len));
    }
    (set, prefixes)
}

#[test]
fn many_ipv6_source_intervals_agree_with_userspace() {
    if !privileged() {
        return;
    }
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    let (rules, prefixes) = many_ipv6_source_rules(&mut rng);
    let lane_acl = tern_xdp::lane::compile_acl(&rules, &|_| None);
    assert!(lane_acl.v6.compiled(), "the lane compiles the IPv6 rules: {:?}", lane_acl.v6.not_compiled);
    let ns = with_veths(3);
    ns.run(|| {
        let (_w, r) = fib();
        // The rules on lan's input, no other rule set anywhere.
        let mut ifs = cache_interfaces(Some(0)).ifs.clone();
        for f in &mut ifs {
            f.acl_out = None;
            if f.index != LAN {
                f.acl_in = None;
            }
        }
        let mut d = build(IfTable::new(ifs), 3, &r, &[rules], false);
        // Each prefix's first and last address and their neighbours, and
        // random sources in the same spaces.
        let mut sources: Vec<u128> = Vec::new();
        for &(start, len) in &prefixes {
            let end = start | (u128::MAX >> u32::from(len));
            sources.extend([start, start.wrapping_sub(1), end, end.wrapping_add(1)]);
        }
        for _ in 0..200 {
            sources.push((0x2001_0db8u128 << 96) | (u128::from(rng.next()) << 32) | u128::from(rng.next() as u32));
            sources.push((1u128 << 125) | ((u128::from(rng.next()) << 64 | u128::from(rng.next())) >> 3));
        }
        // Global unicast only (2000::/3): no martian or link-local source.
        sources.retain(|&s| s >> 125 == 1);
        let (mut fwd, mut drop) = (0, 0);
        for s in sources {
            let l3 = ipv6(Ipv6Addr::from(s), v6("2001:db8:ff::1"), 17, 64, &udp(7, 9, b"v6 rules"));
            match d.run(LAN, &lan6(l3)) {
                Verdict::Forward(WAN) => fwd += 1,
                Verdict::Drop(r) if r == "ip6-acl-in/denied" => drop += 1,
                v => panic!("source {:x}: {v:?} (the lane must classify every one)", s),
            }
        }
        assert!(fwd > 50 && drop > 50, "both verdicts: {fwd} forwarded, {drop} dropped");
    });
}

/// A small deterministic generator (xorshift64*), so a failure can be
/// replayed from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}

/// A plausible frame: any of the lab's flows, then maybe broken.
fn random_frame(r: &mut Rng) -> (u16, Vec<u8>) {
    let srcs = ["10.0.1.2", "1.1.9.1", "10.0.100.5", "10.0.3.3", "127.0.0.1", "10.0.2.2", "240.1.1.1", "10.0.1.2"];
    let dsts = [
        "198.18.0.1",
        "198.19.200.3",
        "203.0.113.4",
        "203.0.114.4",
        "172.16.9.9",
        "192.0.2.1",
        "8.8.8.8",
        "10.0.1.2",
        "10.0.100.5",
        "10.0.2.1",
        "198.51.100.3",
        "100.64.1.1",
        "10.0.1.255",
        "224.0.0.1",
        "127.0.0.1",
        "0.1.2.3",
        "240.0.0.9",
    ];
    let dsts6 = [
        "2001:db8:ff::1",
        "2001:db8:ee::3",
        "2001:db8:1::2",
        "2001:db8:2::1",
        "fe80::1",
        "2001:db8:bad::2",
        "2001:db8:e0::9",
    ];
    let port = r.pick(&[LAN, WAN, DMZ]);
    let mac = [R_LAN, R_WAN, R_DMZ][usize::from(port)];
    let ttl = r.pick(&[64u8, 1, 2, 255, 0]);
    let l3 = match r.below(8) {
        0..=2 => {
            let proto = r.pick(&[17u8, 6, 1, 47, 50]);
            let l4 = match proto {
                17 => udp(r.below(65536) as u16, r.below(65536) as u16, &vec![0x5a; r.below(64) as usize]),
                6 => tcp(r.below(65536) as u16, r.pick(&[23u16, 80, 53]), r.below(256) as u8),
                47 => gre(
                    r.pick(&[None, Some(42)]),
                    r.pick(&[0x0800u16, 0x86dd]),
                    &udp4("10.9.9.9", r.pick(&dsts), ttl, 1, 2, b"in"),
                ),
                _ => vec![8, 0, 0, 0, 0, 1, 0, 1],
            };
            ipv4(v4(r.pick(&srcs)), v4(r.pick(&dsts)), proto, ttl, &l4)
        }
        3 => {
            let inner = udp4("10.9.9.9", r.pick(&dsts), ttl, 3, 4, b"tun");
            ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &gre(None, 0x0800, &inner))
        }
        4 | 5 => {
            let mut p = udp6(
                r.pick(&["2001:db8:1::2", "2001:db8:2::2", "fe80::5", "::", "2001:db8:1::2"]),
                r.pick(&dsts6),
                ttl,
                1,
                r.pick(&[53, 80, 9]),
            );
            // Few ports and flow labels, so flows repeat with other labels
            // (2001:db8:e0::/48 is an ECMP route: its hash reads the label).
            let label = r.pick(&[0u32, 1, 0x8_0001, 0xf_ffff]);
            p[1] = (p[1] & 0xf0) | (label >> 16) as u8;
            p[2] = (label >> 8) as u8;
            p[3] = label as u8;
            p
        }
        6 => {
            let inner = udp6("2001:db8:77::1", r.pick(&dsts6), ttl, 3, 4);
            ipv6(v6("2001:db8:2::2"), v6("2001:db8:2::1"), 47, 64, &gre(Some(42), 0x86dd, &inner))
        }
        _ => {
            let mut b = vec![0u8; r.below(80) as usize];
            for x in b.iter_mut() {
                *x = r.next() as u8;
            }
            b
        }
    };
    let et = if !l3.is_empty() && l3[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
    // Now and then a broadcast or multicast destination MAC (RFC 1812
    // 5.3.4), a group source MAC, another EtherType.
    let mac = match r.below(16) {
        0 => [0xff; 6],
        1 => [0x33, 0x33, 0, 0, 0, 1],
        _ => mac,
    };
    let et = match r.below(24) {
        0 => r.pick(&[0x88ccu16, 0x8847, 0x0000, 0x8100]),
        _ => et,
    };
    let mut f = match r.below(6) {
        0 => eth_vlan(mac, HOST_V, r.pick(&[100u16, 100, 100, 7, 0]), et, &l3),
        1 if r.below(8) == 0 => eth(mac, [3, 0, 0, 0, 1, 0xaa], et, &l3),
        _ => eth(mac, HOST_A, et, &l3),
    };
    // Hostile: truncate, pad, flip bytes in the headers.
    match r.below(6) {
        0 => f.truncate(r.below(f.len() as u64 + 1) as usize),
        1 => f.resize(f.len() + r.below(40) as usize, 0),
        2 | 3 => {
            for _ in 0..=r.below(3) {
                let at = 12 + r.below(60) as usize;
                if at < f.len() {
                    f[at] ^= 1 << r.below(8);
                }
            }
        }
        _ => {}
    }
    (port, f)
}

#[test]
fn random_and_hostile_frames_agree_with_userspace() {
    with_lab(|d, _| {
        let seed = std::env::var("TERN_LANE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x7e27_1a9e_u64);
        let mut r = Rng(seed);
        for i in 0..5000 {
            let (port, f) = random_frame(&mut r);
            let _ = i;
            d.run(port, &f);
        }
        let kinds: std::collections::BTreeSet<&str> = d.seen.keys().map(Verdict::kind).collect();
        eprintln!("seed {seed:#x}: {:?}", d.seen);
        assert_eq!(kinds.len(), 4, "forwarded, dropped, punted and passed frames all exercised: {:?}", d.seen);
        let fwd: usize = d.seen.iter().filter(|(k, _)| matches!(k, Verdict::Forward(_))).map(|(_, n)| n).sum();
        assert!(fwd > 300, "enough forwarded frames compared byte for byte: {fwd}");
    });
}

#[test]
fn route_changes_reach_the_lane_in_place() {
    with_lab(|d, w| {
        use Verdict::*;
        let f = lan_frame(udp4("10.0.1.2", "203.0.200.1", 64, 1, 2, b"r"));
        assert_eq!(d.run(LAN, &f), Punt("xdp-lane/punt-icmp-route".into()));
        // A thousand more-specific routes, then the one the frame needs.
        for i in 0..1000u32 {
            let p = Prefix::V4 { addr: Ipv4Addr::from(0x0b00_0000 + (i << 8)), len: 24 + (i % 9) as u8 };
            w.add_route(
                Source::Static,
                p,
                RouteTarget::Via { gw: IpAddr::V4(v4("10.0.3.3")), ifindex: None },
                RouteAttrs::default(),
            )
            .expect("route");
        }
        route(w, "203.0.200.0/24", via("10.0.2.2"));
        let reader = d.shared.fib.clone();
        let ch = w.take_changes();
        d.lane.sync_fib(&reader.raw(), &ch);
        assert_eq!(d.run(LAN, &f), Forward(WAN));
        for i in (0..1000u32).step_by(37) {
            let dst = Ipv4Addr::from(0x0b00_0000 + (i << 8));
            let g = lan_frame(ipv4(v4("10.0.1.2"), dst, 17, 64, &udp(1, 2, b"m")));
            assert_eq!(d.run(LAN, &g), Forward(DMZ), "{dst}");
        }
        // Neighbour changes its MAC: one store, seen at once.
        w.set_neighbor(WAN, "10.0.2.2".parse().expect("a"), Some([2, 0, 0, 0, 2, 0xdd]));
        let ch = w.take_changes();
        d.lane.sync_fib(&reader.raw(), &ch);
        assert_eq!(d.run(LAN, &f), Forward(WAN));
        w.del_route(Source::Static, "203.0.200.0/24".parse().expect("p")).expect("del");
        let ch = w.take_changes();
        d.lane.sync_fib(&reader.raw(), &ch);
        assert_eq!(d.run(LAN, &f), Punt("xdp-lane/punt-icmp-route".into()));
    });
}

/// Runs `f` with the lane of [`interfaces`] and [`rule_sets`] built in
/// Linux control-plane mode, inside fresh namespaces (root only).
fn with_linux_mode_lane(f: impl FnOnce(&mut Diff) + Send) {
    if !privileged() {
        return;
    }
    let ns = with_veths(3);
    ns.run(|| {
        let (_w, r) = fib();
        let mut d = build(interfaces(), 3, &r, &rule_sets(), true);
        f(&mut d);
    });
}

#[test]
fn linux_mode_leaves_the_routers_traffic_to_linux() {
    with_linux_mode_lane(|d| {
        use Verdict::*;
        d.lane.add_local(IpAddr::V4(v4("10.0.1.1"))).expect("local");
        // Linux answers ARP, ND and everything for the router's addresses.
        assert_eq!(d.run(LAN, &eth([0xff; 6], HOST_A, 0x0806, &[0u8; 28])), Pass("xdp-lane/pass-neighbor".into()));
        assert_eq!(
            d.run(LAN, &lan_frame(udp4("10.0.1.2", "10.0.1.1", 64, 1, 2, b"x"))),
            Pass("xdp-lane/pass-local".into())
        );
        assert_eq!(
            d.run(WAN, &eth(R_WAN, HOST_B, 0x0800, &udp4("10.0.2.2", "10.0.2.1", 64, 1, 2, b"x"))),
            Pass("xdp-lane/pass-local".into())
        );
        // Transit and tern's own tunnels stay tern's.
        assert_eq!(d.run(LAN, &lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, b"x"))), Forward(WAN));
        let inner = udp4("10.9.9.9", "10.0.1.2", 30, 7, 8, b"t");
        let outer = ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &gre(None, 0x0800, &inner));
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x0800, &outer)), Forward(LAN));
        // GRE that is not one of tern's tunnels: Linux's.
        let other = ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &gre(Some(99), 0x0800, &inner));
        assert_eq!(d.run(WAN, &eth(R_WAN, HOST_B, 0x0800, &other)), Pass("xdp-lane/pass-local".into()));
        // EtherTypes tern does not handle (LLDP, MPLS, ...): Linux's, and
        // counted; malformed frames are dropped as in standalone mode.
        for et in [0x88cc, 0x8847, 0x0000, 0x05dc] {
            assert_eq!(d.run(LAN, &eth(R_LAN, HOST_A, et, &[0u8; 46])), Pass("xdp-lane/pass-non-ip".into()), "{et:#x}");
        }
        assert_eq!(d.run(LAN, &eth(R_LAN, HOST_A, 0x8100, &[0, 1])), Drop("ethernet-input/too-short".into()));
        assert_eq!(d.run(LAN, &eth(R_LAN, HOST_A, 0x0800, &inner[..10])), Drop("ip4-input/too-short".into()));
    });
}

/// The lane looks a destination up in its local address maps only while
/// they hold an address of the family (lane_cfg's LCFG_LOCAL4/6, which
/// add_local sets and the last remove_local clears): a frame for a local
/// address that ip4-input/ip6-input would drop tells the two apart.
#[test]
fn local_addresses_are_looked_up_only_while_there_are_some() {
    with_linux_mode_lane(|d| {
        let kif = d.kif[usize::from(LAN)];
        let pass_local = |d: &Diff| d.lane.counter("xdp-lane", "pass-local");
        // A bad IPv4 header checksum, to a local address.
        let mut bad4 = lan_frame(udp4("10.0.1.2", "10.0.1.1", 64, 1, 2, b"x"));
        bad4[24] ^= 0xff;
        // IPv6 from a multicast source (a martian), to a local address.
        let bad6 = lan6(udp6("ff02::5", "2001:db8:1::1", 64, 1, 2));
        let run = |d: &mut Diff, f: &[u8]| d.lane.test_run(f, kif, 0).expect("test run").0;
        const DROP: u32 = 1;
        const PASS: u32 = 2;
        assert_eq!(run(d, &bad4), DROP);
        assert_eq!(run(d, &bad6), DROP);
        let p0 = pass_local(d);
        d.lane.add_local(IpAddr::V4(v4("10.0.1.1"))).expect("local");
        assert_eq!(run(d, &bad4), PASS);
        assert_eq!(pass_local(d), p0 + 1);
        // The other family's map is still empty: not looked up.
        assert_eq!(run(d, &bad6), DROP);
        d.lane.add_local(IpAddr::V6("2001:db8:1::1".parse().expect("a"))).expect("local");
        d.lane.add_local(IpAddr::V6("2001:db8:1::77".parse().expect("a"))).expect("local");
        assert_eq!(run(d, &bad6), PASS);
        d.lane.remove_local(IpAddr::V6("2001:db8:1::77".parse().expect("a"))).expect("remove");
        assert_eq!(run(d, &bad6), PASS, "one IPv6 address is left");
        d.lane.remove_local(IpAddr::V6("2001:db8:1::1".parse().expect("a"))).expect("remove");
        assert_eq!(run(d, &bad6), DROP);
        assert_eq!(run(d, &bad4), PASS);
        d.lane.remove_local(IpAddr::V4(v4("10.0.1.1"))).expect("remove");
        assert_eq!(run(d, &bad4), DROP);
        assert_eq!(pass_local(d), p0 + 4);
    });
}

// ---------------------------------------------------------------- the ACL verdict cache

/// Rule sets for the verdict cache: set 0 (`CIN`, on lan and lan.100
/// input) has a rule on every key field, so that two flows differing in
/// one field get different verdicts; count-only rules before them (one
/// matching everything) check that hits are counted on every packet,
/// cached or not. Set 1 (`COUT`, wan output) keys on iif and oif, set 2 is
/// the drop test.
fn cache_rule_sets(extra_dport_drop: Option<u16>) -> Vec<RuleSet> {
    let mut text = String::from(
        r#"
[[acl]]
name = "CIN"
default = "accept"
[[acl.rule]]
action = "count"
proto = "udp"
dport = 53
[[acl.rule]]
action = "count"
[[acl.rule]]
action = "drop"
src = ["10.0.1.66/32", "2001:db8:1::66/128"]
[[acl.rule]]
action = "drop"
dst = ["198.18.0.66/32", "2001:db8:ff::66/128"]
[[acl.rule]]
action = "drop"
proto = "udp"
sport = 6666
[[acl.rule]]
action = "drop"
proto = "tcp"
dport = 23
[[acl.rule]]
action = "drop"
tcp_flags = "syn,!ack"
dport = 80
[[acl.rule]]
action = "drop"
icmp_type = 8
[[acl.rule]]
action = "drop"
icmpv6_type = 128
[[acl.rule]]
action = "drop"
dscp = 46
[[acl.rule]]
action = "drop"
proto = "udp"
vlan = 100
dport = 9
"#,
    );
    if let Some(p) = extra_dport_drop {
        text.push_str(&format!("[[acl.rule]]\naction = \"drop\"\nproto = \"udp\"\ndport = {p}\n"));
    }
    text.push_str(
        r#"
[[acl]]
name = "COUT"
default = "accept"
[[acl.rule]]
action = "count"
oif = "wan"
[[acl.rule]]
action = "drop"
proto = "udp"
iif = "lan.100"
dport = 7
"#,
    );
    let mut sets = tern_acl::parse_toml(&text).expect("rule sets");
    sets.push(tern_acl::scenario_drop_test());
    sets
}

/// The lab's interfaces with CIN also on lan.100 (`lan_in`: lan's input
/// rule set).
fn cache_interfaces(lan_in: Option<u16>) -> IfTable {
    let mut ifs = interfaces().ifs.clone();
    for f in &mut ifs {
        if f.index == LAN {
            f.acl_in = lan_in;
        }
        if f.index == VLAN100 {
            f.acl_in = Some(0);
        }
    }
    IfTable::new(ifs)
}

fn with_cache_lab(buckets: u32, f: impl FnOnce(&mut Diff, &mut FibWriter) + Send) {
    with_memos_lab(buckets, tern_xdp::lane::FWD_BUCKETS, f)
}

/// A lab of three veths with the cache rule sets, the verdict cache of
/// `buckets` buckets and a forwarding memo of `fwd_buckets` buckets per
/// CPU (0: off), pinned to CPU 0 (one CPU's cache and memos see every
/// packet).
fn with_memos_lab(buckets: u32, fwd_buckets: u32, f: impl FnOnce(&mut Diff, &mut FibWriter) + Send) {
    if !privileged() {
        return;
    }
    let ns = with_veths(3);
    ns.run(|| {
        pin_to_cpu0();
        let (mut w, r) = fib();
        let ifs = cache_interfaces(Some(0));
        let mut d = build_with_memos(ifs, 3, &r, &cache_rule_sets(None), false, buckets, fwd_buckets);
        f(&mut d, &mut w);
    });
}

fn with_dscp(mut l3: Vec<u8>, dscp: u8) -> Vec<u8> {
    if l3[0] >> 4 == 4 {
        l3[1] = dscp << 2;
        fix_csum(&mut l3, 0);
    } else {
        let tc = dscp << 2;
        l3[0] = 0x60 | (tc >> 4);
        l3[1] = (tc << 4) | (l3[1] & 0x0f);
    }
    l3
}

/// Pairs of frames (received on lan) whose ACL keys differ in one field
/// and whose verdicts differ, IPv4 and IPv6.
fn one_field_pairs() -> Vec<(&'static str, Vec<u8>, Vec<u8>)> {
    let icmp4 = |t: u8| ipv4(v4("10.0.1.2"), v4("198.18.0.1"), 1, 64, &[t, 0, 0, 0, 0, 1, 0, 1]);
    let icmp6 = |t: u8| ipv6(v6("2001:db8:1::2"), v6("2001:db8:ff::1"), 58, 64, &[t, 0, 0, 0, 0, 1, 0, 1]);
    let tcp4 = |dport: u16, flags: u8| ipv4(v4("10.0.1.2"), v4("198.18.0.1"), 6, 64, &tcp(1000, dport, flags));
    let tcp6 = |dport: u16, flags: u8| ipv6(v6("2001:db8:1::2"), v6("2001:db8:ff::1"), 6, 64, &tcp(1000, dport, flags));
    let u4 = |src: &str, dst: &str, sport: u16, dport: u16| udp4(src, dst, 64, sport, dport, b"c");
    let u6 = |src: &str, dst: &str, sport: u16, dport: u16| udp6(src, dst, 64, sport, dport);
    let (syn, synack) = (0x02, 0x12);
    let v4p = |what, a: Vec<u8>, b: Vec<u8>| (what, lan_frame(a), lan_frame(b));
    let v6p = |what, a: Vec<u8>, b: Vec<u8>| (what, lan6(a), lan6(b));
    vec![
        v4p("v4 src", u4("10.0.1.66", "198.18.0.1", 1, 2), u4("10.0.1.67", "198.18.0.1", 1, 2)),
        v4p("v4 dst", u4("10.0.1.2", "198.18.0.66", 1, 2), u4("10.0.1.2", "198.18.0.67", 1, 2)),
        v4p("v4 sport", u4("10.0.1.2", "198.18.0.1", 6666, 2), u4("10.0.1.2", "198.18.0.1", 6667, 2)),
        v4p("v4 dport", tcp4(23, synack), tcp4(24, synack)),
        v4p("v4 proto", tcp4(23, synack), u4("10.0.1.2", "198.18.0.1", 1000, 23)),
        v4p("v4 tcp flags", tcp4(80, syn), tcp4(80, synack)),
        v4p("v4 icmp type", icmp4(8), icmp4(0)),
        v4p(
            "v4 dscp",
            with_dscp(u4("10.0.1.2", "198.18.0.1", 1, 2), 46),
            with_dscp(u4("10.0.1.2", "198.18.0.1", 1, 2), 45),
        ),
        v6p("v6 src", u6("2001:db8:1::66", "2001:db8:ff::1", 1, 2), u6("2001:db8:1::67", "2001:db8:ff::1", 1, 2)),
        v6p("v6 dst", u6("2001:db8:1::2", "2001:db8:ff::66", 1, 2), u6("2001:db8:1::2", "2001:db8:ff::67", 1, 2)),
        // Keys differing only in an address's high word (the memo and the
        // cache compare those words for IPv6 only).
        v6p(
            "v6 src high word",
            u6("2001:db8:1::66", "2001:db8:ff::1", 1, 2),
            u6("2001:db9:1::66", "2001:db8:ff::1", 1, 2),
        ),
        v6p(
            "v6 dst high word",
            u6("2001:db8:1::2", "2001:db8:ff::66", 1, 2),
            u6("2001:db8:1::2", "2001:db8:ff:1::66", 1, 2),
        ),
        v6p("v6 sport", u6("2001:db8:1::2", "2001:db8:ff::1", 6666, 2), u6("2001:db8:1::2", "2001:db8:ff::1", 6667, 2)),
        v6p("v6 dport", tcp6(23, synack), tcp6(24, synack)),
        v6p("v6 proto", tcp6(23, synack), u6("2001:db8:1::2", "2001:db8:ff::1", 1000, 23)),
        v6p("v6 tcp flags", tcp6(80, syn), tcp6(80, synack)),
        v6p("v6 icmpv6 type", icmp6(128), icmp6(129)),
        v6p(
            "v6 dscp",
            with_dscp(u6("2001:db8:1::2", "2001:db8:ff::1", 1, 2), 46),
            with_dscp(u6("2001:db8:1::2", "2001:db8:ff::1", 1, 2), 45),
        ),
        // The VLAN and the input interface go together (lan.100 is VLAN 100).
        (
            "vlan (and iif)",
            eth_vlan(R_LAN, HOST_V, 100, 0x0800, &u4("10.0.100.5", "198.18.0.1", 1, 9)),
            lan_frame(u4("10.0.100.5", "198.18.0.1", 1, 9)),
        ),
        (
            "iif on output (and vlan)",
            eth_vlan(R_LAN, HOST_V, 100, 0x0800, &u4("10.0.100.5", "198.18.0.1", 1, 7)),
            lan_frame(u4("10.0.100.5", "198.18.0.1", 1, 7)),
        ),
    ]
}

/// Every pair, interleaved a b a b ...: each packet must match userspace
/// (verdict, frame, counters, hits) and the two verdicts must differ.
fn interleave_pairs(d: &mut Diff) {
    for (what, a, b) in one_field_pairs() {
        let (va, vb) = (d.run(LAN, &a), d.run(LAN, &b));
        assert_ne!(va, vb, "{what}: the pair must get different verdicts");
        for _ in 0..4 {
            assert_eq!(d.run(LAN, &a), va, "{what}: a again");
            assert_eq!(d.run(LAN, &b), vb, "{what}: b again");
        }
    }
}

#[test]
fn cached_verdicts_count_every_hit() {
    with_cache_lab(tern_xdp::lane::ACL_CACHE_BUCKETS, |d, _| {
        use Verdict::*;
        // One flow 100 times, dropped by rule 2: rule 1 (count all) and
        // rule 2 count 100 packets each, in the lane as in userspace.
        let dropped = lan_frame(udp4("10.0.1.66", "198.18.0.1", 64, 1, 53, b"x"));
        for _ in 0..100 {
            assert_eq!(d.run(LAN, &dropped), Drop("ip4-acl-in/denied".into()));
        }
        let (lane, engine) = d.hits(0);
        assert_eq!(lane, engine);
        let len = dropped.len() as u64;
        assert_eq!(lane[0], (100, 100 * len), "count rule udp/53");
        assert_eq!(lane[1], (100, 100 * len), "count rule for everything");
        assert_eq!(lane[2], (100, 100 * len), "deciding rule");
        assert!(lane[3..].iter().all(|h| *h == (0, 0)), "{lane:?}");
        // One accepted flow 100 times: the default's slot, and the
        // output rule set's count rule on wan.
        let fwd = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, b"y"));
        for _ in 0..100 {
            assert_eq!(d.run(LAN, &fwd), Forward(WAN));
        }
        let (lane, engine) = d.hits(0);
        assert_eq!(lane, engine);
        assert_eq!(lane[1].0, 200);
        assert_eq!(lane.last().copied(), Some((100, 100 * fwd.len() as u64)), "default policy");
        let (lane, engine) = d.hits(1);
        assert_eq!(lane, engine);
        assert_eq!(lane[0].0, 100, "count rule on oif wan");
        assert_eq!(lane.last().map(|h| h.0), Some(100), "COUT default");
    });
}

#[test]
fn keys_differing_in_one_field_stay_apart_in_the_cache() {
    with_cache_lab(tern_xdp::lane::ACL_CACHE_BUCKETS, |d, _| {
        interleave_pairs(d);
        let (lane, engine) = d.hits(0);
        assert_eq!(lane, engine);
    });
}

/// Each pair as a a b b a a ...: the second packet of each run is answered
/// by the memo (the CPU's last classification), the first by the cache
/// or the classifier, and the memo must not answer for the other key.
#[test]
fn the_last_flow_memo_answers_only_its_own_key() {
    with_cache_lab(tern_xdp::lane::ACL_CACHE_BUCKETS, |d, _| {
        for (what, a, b) in one_field_pairs() {
            let (va, vb) = (d.run(LAN, &a), d.run(LAN, &b));
            assert_ne!(va, vb, "{what}: the pair must get different verdicts");
            for _ in 0..3 {
                for (f, v) in [(&a, &va), (&b, &vb)] {
                    assert_eq!(&d.run(LAN, f), v, "{what}: first of a run");
                    assert_eq!(&d.run(LAN, f), v, "{what}: second of a run (the memo)");
                }
            }
        }
        let (lane, engine) = d.hits(0);
        assert_eq!(lane, engine);
        let (lane, engine) = d.hits(1);
        assert_eq!(lane, engine);
    });
    // With the cache off (and so the memo) too.
    with_cache_lab(0, |d, _| {
        for (what, a, b) in one_field_pairs() {
            let (va, vb) = (d.run(LAN, &a), d.run(LAN, &b));
            assert_ne!(va, vb, "{what}");
            assert_eq!(d.run(LAN, &a), va, "{what}");
            assert_eq!(d.run(LAN, &a), va, "{what}");
        }
    });
}

#[test]
fn colliding_keys_share_one_bucket_correctly() {
    // One bucket of two entries: every key collides with every other, the
    // pairs thrash it and each packet must still be classified exactly.
    with_cache_lab(1, |d, _| {
        interleave_pairs(d);
        // Three flows with three different outcomes in turn, v4 and v6.
        let flows = [
            lan_frame(udp4("10.0.1.66", "198.18.0.1", 64, 1, 2, b"z")),
            lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 53, b"z")),
            lan6(udp6("2001:db8:1::2", "2001:db8:ff::66", 64, 1, 2)),
            lan6(udp6("2001:db8:1::2", "2001:db8:ff::1", 64, 1, 2)),
        ];
        for _ in 0..10 {
            for f in &flows {
                d.run(LAN, f);
            }
        }
        let (lane, engine) = d.hits(0);
        assert_eq!(lane, engine);
    });
    // And with the cache off, the same.
    with_cache_lab(0, |d, _| interleave_pairs(d));
}

#[test]
fn a_rule_or_binding_swap_takes_effect_on_the_next_packet() {
    with_cache_lab(tern_xdp::lane::ACL_CACHE_BUCKETS, |d, _| {
        use Verdict::*;
        let f = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 5000, b"s"));
        let denied = || Drop("ip4-acl-in/denied".into());
        for _ in 0..5 {
            assert_eq!(d.run(LAN, &f), Forward(WAN));
        }
        // A rule dropping the flow: the next packet is dropped.
        d.republish(cache_interfaces(Some(0)), &cache_rule_sets(Some(5000)));
        assert_eq!(d.run(LAN, &f), denied());
        assert_eq!(d.run(LAN, &f), denied());
        // And removed again.
        d.republish(cache_interfaces(Some(0)), &cache_rule_sets(None));
        assert_eq!(d.run(LAN, &f), Forward(WAN));
        // A flip that changes nothing keeps the verdicts.
        d.republish(cache_interfaces(Some(0)), &cache_rule_sets(None));
        assert_eq!(d.run(LAN, &f), Forward(WAN));
        // lan bound to the drop test (UDP 5000 is in a dropped range), then
        // to nothing, then back.
        d.republish(cache_interfaces(Some(2)), &cache_rule_sets(None));
        assert_eq!(d.run(LAN, &f), denied());
        d.republish(cache_interfaces(None), &cache_rule_sets(None));
        assert_eq!(d.run(LAN, &f), Forward(WAN));
        d.republish(cache_interfaces(Some(0)), &cache_rule_sets(Some(5000)));
        assert_eq!(d.run(LAN, &f), denied());
        // The same tables at other positions: lan's set moves from 0 to 1.
        let mut sets = cache_rule_sets(None);
        sets.swap(0, 1);
        let mut ifs = cache_interfaces(Some(1)).ifs.clone();
        for i in &mut ifs {
            if i.index == VLAN100 {
                i.acl_in = Some(1);
            }
            if i.index == WAN {
                i.acl_out = Some(0);
            }
        }
        d.republish(IfTable::new(ifs), &sets);
        assert_eq!(d.run(LAN, &f), Forward(WAN));
        interleave_pairs(d);
    });
}

#[test]
fn the_publication_sequence_wraps_without_stale_verdicts() {
    with_cache_lab(tern_xdp::lane::ACL_CACHE_BUCKETS, |d, _| {
        use Verdict::*;
        let f = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 5000, b"w"));
        // Live half 1 after the first publication: continue from 2^32 - 1.
        d.lane.set_publish_seq(u32::MAX).expect("seq");
        d.republish(cache_interfaces(Some(0)), &cache_rule_sets(Some(5000)));
        // Sequence 0: the flow is cached as dropped under tag 0.
        assert_eq!(d.run(LAN, &f), Drop("ip4-acl-in/denied".into()));
        // Back to 2^32 - 1 without touching the flow's entry, then wrap to 0
        // again with rules that accept it: tag 0 must not answer.
        d.lane.set_publish_seq(u32::MAX - 1).expect("seq");
        d.republish(cache_interfaces(Some(0)), &cache_rule_sets(None));
        d.republish(cache_interfaces(Some(0)), &cache_rule_sets(None));
        assert_eq!(d.run(LAN, &f), Forward(WAN));
    });
}

/// Flows whose keys differ (the source port, which set 0 constrains):
/// UDP to `dport_of(i)`, IPv4 or IPv6 by `i`.
fn distinct_key_flows(n: u16, dport_of: impl Fn(u16) -> u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let sport = 10_000 + i;
            if i % 4 == 3 {
                lan6(udp6("2001:db8:1::2", "2001:db8:ff::1", 64, sport, dport_of(i)))
            } else {
                lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, sport, dport_of(i), b"k"))
            }
        })
        .collect()
}

#[test]
fn a_swap_never_serves_a_stale_verdict_of_many_cached_keys() {
    with_cache_lab(tern_xdp::lane::ACL_CACHE_BUCKETS, |d, _| {
        use Verdict::*;
        // 256 keys, all accepted and cached (each seen twice), half of
        // them to UDP 5000.
        let flows = distinct_key_flows(256, |i| if i % 2 == 0 { 5000 } else { 5001 });
        for _ in 0..2 {
            for f in &flows {
                assert!(matches!(d.run(LAN, f), Forward(_)));
            }
        }
        // A rule dropping UDP 5000: the very next packet of every even
        // flow is dropped, every odd one still forwarded; and back.
        for (extra, even_dropped) in [(Some(5000), true), (None, false), (Some(5000), true)] {
            d.republish(cache_interfaces(Some(0)), &cache_rule_sets(extra));
            for (i, f) in flows.iter().enumerate() {
                let v = d.run(LAN, f);
                if i % 2 == 0 && even_dropped {
                    assert!(matches!(v, Drop(_)), "flow {i}: {v:?}");
                } else {
                    assert!(matches!(v, Forward(_)), "flow {i}: {v:?}");
                }
            }
        }
        let (lane, engine) = d.hits(0);
        assert_eq!(lane, engine);
    });
}

#[test]
fn churn_of_1024_keys_counts_as_the_engine() {
    // 1024 distinct keys (a count-only rule on a quarter of them, a drop
    // on a few) three times over: a cache of 4 buckets thrashes, and after
    // a few misses the lane stops probing it on most packets; the default
    // cache holds them all. Either way every counter matches userspace.
    for buckets in [4, tern_xdp::lane::ACL_CACHE_BUCKETS] {
        with_cache_lab(buckets, |d, _| {
            let mut flows = distinct_key_flows(1024, |i| if i % 8 < 2 { 53 } else { 2000 + i });
            // Every 64th flow to a dropped destination.
            for (i, f) in flows.iter_mut().enumerate().filter(|(i, _)| i % 64 == 6) {
                *f = lan_frame(udp4("10.0.1.2", "198.18.0.66", 64, 10_000 + i as u16, 2000, b"k"));
            }
            for _ in 0..3 {
                for f in &flows {
                    d.run(LAN, f);
                }
            }
            let (lane, engine) = d.hits(0);
            assert_eq!(lane, engine, "{buckets} buckets");
            assert_eq!(lane[0].0, 3 * 256, "count rule udp/53 ({buckets} buckets)");
            assert_eq!(lane[3].0, 3 * 16, "drop dst rule ({buckets} buckets)");
        });
    }
}

/// The fast-path switches (`LaneProgram::set_fast_paths`, which
/// `[dataplane.fast_paths]` drives) act on the very next packet, and the
/// counters and trace records say which path it took: the forwarding memo
/// (`xdp-lane/fwd-memo`), a cached rule set verdict (`xdp-lane/acl-cached`)
/// or neither. Switching the verdict cache off retires the memoised flows
/// that hold rule set verdicts, and fills no new one. Every packet's
/// verdict, frame and rule hits are the engine's (the harness compares
/// them run by run).
#[test]
fn fast_path_switches_act_on_the_next_packet_and_say_so() {
    with_cache_lab(tern_xdp::lane::ACL_CACHE_BUCKETS, |d, _| {
        // Accepted by CIN on lan, counted by its rules 0 and 1.
        let f = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1111, 53, b"s"));
        let paths = |d: &Diff| (d.lane.counter("xdp-lane", "fwd-memo"), d.lane.counter("xdp-lane", "acl-cached"));
        // One packet, traced: its verdict, which paths took it (memo,
        // cached input verdict, cached output verdict: wan's COUT), and
        // the counters' steps.
        let step = |d: &mut Diff, what: &str| -> (bool, bool, bool, u64, u64) {
            let (m0, a0) = paths(d);
            d.lane.trace_arm(1).expect("trace");
            assert!(matches!(d.run(LAN, &f), Verdict::Forward(_)), "{what}: forwarded");
            let t = d.lane.trace_take();
            assert_eq!(t.len(), 1, "{what}: one record");
            let (m1, a1) = paths(d);
            (t[0].fwd_memo, t[0].acl_in_cached, t[0].acl_out_cached, m1 - m0, a1 - a0)
        };
        assert_eq!(d.lane.fast_paths(), (true, true), "both on by default");
        assert_eq!(step(d, "first"), (false, false, false, 0, 0), "classified, looked up, memoised");
        assert_eq!(step(d, "second"), (true, false, false, 1, 0), "the forwarding memo");
        // acl_shortcut off: the memoised flow holds verdicts of CIN and
        // COUT, so it is retired, and not memoised again.
        d.lane.set_fast_paths(false, true).expect("switch");
        assert_eq!(d.lane.fast_paths(), (false, true));
        for what in ["cache off", "cache off, again"] {
            assert_eq!(step(d, what), (false, false, false, 0, 0), "{what}: classified, every time");
        }
        // direct off, acl_shortcut on: the verdict cache answers both rule
        // sets (the first packet's entries are still current), the
        // forwarding memo is not used.
        d.lane.set_fast_paths(true, false).expect("switch");
        for what in ["memo off", "memo off, again"] {
            assert_eq!(step(d, what), (false, true, true, 0, 2), "{what}: the cached verdicts");
        }
        // Both on: the memo learns the flow again.
        d.lane.set_fast_paths(true, true).expect("switch");
        assert!(!step(d, "back on").0, "the first packet fills the memo");
        assert_eq!(step(d, "back on, again"), (true, false, false, 1, 0), "the forwarding memo");
        // Nothing to do for an unchanged switch: no sequence bumped.
        let seqs = d.lane.sequences();
        d.lane.set_fast_paths(true, true).expect("switch");
        assert_eq!(d.lane.sequences(), seqs);
        let (lane, engine) = d.hits(0);
        assert_eq!(lane, engine, "the rule hits are the engine's");
        assert_eq!(lane[0].0, 8, "rule 0 counted every packet");
    });
}

// ---------------------------------------------------------------- the forwarding memo

/// [`with_cache_lab`] with the forwarding memo on or off.
fn with_memo_lab(fwd_memo: bool, f: impl FnOnce(&mut Diff, &mut FibWriter) + Send) {
    let fwd_buckets = if fwd_memo { tern_xdp::lane::FWD_BUCKETS } else { 0 };
    with_memos_lab(tern_xdp::lane::ACL_CACHE_BUCKETS, fwd_buckets, f)
}

/// Copies the FIB writer's changes into the lane (as the router's control
/// loop does).
fn sync_fib(d: &mut Diff, w: &mut FibWriter) {
    let reader = d.shared.fib.clone();
    let ch = w.take_changes();
    d.lane.sync_fib(&reader.raw(), &ch);
}

/// CPU 0's forwarding memo (the tests pin themselves there) holds the flow
/// to `dst` under the lane's current sequences, leaving by `port` (None: a
/// memoised input rule set drop): the flow's next packet is answered by
/// the memo unless the tables change. (The tests that use it have one
/// flow per destination.)
fn assert_memoised(d: &Diff, dst: &str, port: Option<u16>) {
    let (seq, fib_seq) = d.lane.sequences();
    let word = match dst.parse::<IpAddr>().expect("address") {
        IpAddr::V4(a) => u64::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a) as u64,
    };
    let e = d.lane.fwd_memo_entries().expect("memo");
    let cpu0 = e.first().expect("CPU 0");
    assert!(cpu0.contains(&(seq, fib_seq, word, port)), "CPU 0's forwarding memo holds {dst} -> {port:?}");
}

/// The flow's next two packets leave by `port` (the first may fill the
/// memo, the second is answered by it), and CPU 0's memo then holds `dst`
/// under the current sequences. `what` names the step in a failure.
fn forwarded_and_memoised(d: &mut Diff, f: &[u8], dst: &str, port: u16, what: &str) {
    for _ in 0..2 {
        assert_eq!(d.run(LAN, f), Verdict::Forward(port), "{what}");
    }
    assert_memoised(d, dst, Some(port));
}

/// A route change, a neighbour's new MAC and a neighbour's removal each
/// reach the very next packet of a flow the forwarding memo answers (it
/// holds the flow under the current sequences right before each change),
/// in the lane as in userspace (the harness compares the frames byte for
/// byte: the new MAC, the new port), IPv4 and IPv6.
#[test]
fn fib_changes_reach_the_next_packet_of_a_memoised_flow() {
    with_memo_lab(true, |d, w| {
        use Verdict::*;
        let f = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, b"m"));
        forwarded_and_memoised(d, &f, "198.18.0.1", WAN, "first packets");
        // A more specific route, out of dmz.
        route(w, "198.18.0.0/24", via("10.0.3.3"));
        sync_fib(d, w);
        forwarded_and_memoised(d, &f, "198.18.0.1", DMZ, "route change");
        // The next hop's new MAC.
        w.set_neighbor(DMZ, "10.0.3.3".parse().expect("a"), Some([2, 0, 0, 0, 3, 0xdd]));
        sync_fib(d, w);
        forwarded_and_memoised(d, &f, "198.18.0.1", DMZ, "new MAC");
        // The next hop gone: unresolved, for userspace to resolve.
        w.set_neighbor(DMZ, "10.0.3.3".parse().expect("a"), None);
        sync_fib(d, w);
        assert_eq!(d.run(LAN, &f), Punt("xdp-lane/punt-unresolved".into()), "neighbour removed");
        // Back, then the route removed.
        w.set_neighbor(DMZ, "10.0.3.3".parse().expect("a"), Some(HOST_C));
        sync_fib(d, w);
        forwarded_and_memoised(d, &f, "198.18.0.1", DMZ, "neighbour back");
        w.del_route(Source::Static, "198.18.0.0/24".parse().expect("p")).expect("del");
        sync_fib(d, w);
        assert_eq!(d.run(LAN, &f), Forward(WAN), "route removed");

        let f6 = lan6(udp6("2001:db8:1::2", "2001:db8:ff::1", 64, 1, 2));
        forwarded_and_memoised(d, &f6, "2001:db8:ff::1", WAN, "IPv6: first packets");
        w.set_neighbor(WAN, "2001:db8:2::2".parse().expect("a"), Some([2, 0, 0, 0, 2, 0xdd]));
        sync_fib(d, w);
        forwarded_and_memoised(d, &f6, "2001:db8:ff::1", WAN, "IPv6: new MAC");
        w.set_neighbor(WAN, "2001:db8:2::2".parse().expect("a"), None);
        sync_fib(d, w);
        assert_eq!(d.run(LAN, &f6), Punt("xdp-lane/punt-unresolved".into()), "IPv6: neighbour removed");
        route(w, "2001:db8:ff::/64", via("fd00::2"));
        w.set_neighbor(WAN, "2001:db8:2::2".parse().expect("a"), Some(HOST_B));
        sync_fib(d, w);
        assert_eq!(d.run(LAN, &f6), Forward(WAN), "IPv6: a more specific route into gre6 (encapsulated, not memoised)");
        assert_eq!(d.run(LAN, &f6), Forward(WAN));
        // (Each packet's rule hits were compared by the harness; the
        // totals differ by the punted packets, which only userspace counts.)
    });
}

/// Flows out of a GRE tunnel are memoised after decapsulation: the key is
/// the inner header with the tunnel as the input interface, and the outer
/// headers are stripped per packet. The outer header's own flow is
/// memoised too, as GRE to the router (its rule hits, then gre-input for
/// every packet). The rule hits the outer header made on its way in (the
/// lan's input rule set, for a tunnel's packets arriving on the lan) stay
/// the packet's; the inner flow's entry holds and replays only the inner
/// header's after them. The harness compares every packet's frame,
/// verdict, counters and hits with userspace's.
#[test]
fn decapsulated_flows_are_memoised_after_the_outer_headers_hits() {
    with_memo_lab(true, |d, _| {
        use Verdict::*;
        // gre0's packets on the wan (no input rule set), out of the lan.
        let inner = udp4("10.9.9.9", "10.0.1.2", 30, 7, 8, b"from the tunnel");
        let f = eth(R_WAN, HOST_B, 0x0800, &ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &gre(None, 0x0800, &inner)));
        for _ in 0..3 {
            assert_eq!(d.run(WAN, &f), Forward(LAN), "IPv4 in IPv4");
        }
        assert_memoised(d, "10.0.1.2", Some(LAN));
        // The outer header too: GRE to the router, on to gre-input.
        assert_memoised(d, "10.0.2.1", Some(tern_xdp::lane::FWD_MEMO_LOCAL));
        // Its first fragment has the same key, yet goes to userspace: the
        // memo's answer is checked per packet, as the whole path does.
        let mut frag = f.clone();
        frag[14 + 6] |= 0x20; // more fragments
        fix_csum(&mut frag, 14);
        assert_eq!(d.run(WAN, &frag), Punt("xdp-lane/punt-fragment".into()), "a fragment of the outer flow");
        assert_eq!(d.run(WAN, &f), Forward(LAN));
        // IPv6 in IPv6 through gre6 (key 42).
        let inner6 = udp6("2001:db8:77::1", "2001:db8:1::2", 9, 7, 8);
        let outer6 = ipv6(v6("2001:db8:2::2"), v6("2001:db8:2::1"), 47, 64, &gre(Some(42), 0x86dd, &inner6));
        let f6 = eth(R_WAN, HOST_B, 0x86dd, &outer6);
        for _ in 0..3 {
            assert_eq!(d.run(WAN, &f6), Forward(LAN), "IPv6 in IPv6");
        }
        assert_memoised(d, "2001:db8:1::2", Some(LAN));
        assert_memoised(d, "2001:db8:2::1", Some(tern_xdp::lane::FWD_MEMO_LOCAL));
        // gre0's packets arriving on the lan: its input rule set sees the
        // outer header; the inner flow leaves by the wan, through its
        // output rule set.
        let through = udp4("10.9.9.9", "198.18.0.1", 30, 3, 4, b"tun");
        let o = ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &gre(None, 0x0800, &through));
        let fl = eth(R_LAN, HOST_A, 0x0800, &o);
        let total = |h: &[(u64, u64)]| h.iter().map(|x| x.0).sum::<u64>();
        let (in0, out0) = (total(&d.hits(0).0), total(&d.hits(1).0));
        // The first packet takes the whole path: its hits per packet.
        assert_eq!(d.run(LAN, &fl), Forward(WAN), "in on the lan, out of the wan");
        let (per_in, per_out) = (total(&d.hits(0).0) - in0, total(&d.hits(1).0) - out0);
        assert!(per_in > 0 && per_out > 0, "hits on the way in ({per_in}) and out ({per_out})");
        for _ in 0..9 {
            assert_eq!(d.run(LAN, &fl), Forward(WAN), "in on the lan, out of the wan");
        }
        assert_memoised(d, "198.18.0.1", Some(WAN));
        assert_eq!(
            total(&d.hits(0).0) - in0,
            10 * per_in,
            "the outer header's hits in the lan's input set, every packet"
        );
        assert_eq!(
            total(&d.hits(1).0) - out0,
            10 * per_out,
            "the inner header's in the wan's output set, every packet"
        );
    });
}

/// gre-input keeps, per CPU, the last tunnel it looked up. Packets of two
/// tunnels in turn are each decapsulated by their own; a publication that
/// changes a tunnel's key retires what it kept: the next packet with the
/// old key finds no tunnel, in the lane as in userspace, and the new key
/// is served.
#[test]
fn the_last_tunnel_looked_up_is_retired_by_a_publication() {
    with_lab(|d, _| {
        use Verdict::*;
        let inner = udp4("10.9.9.9", "10.0.1.2", 30, 7, 8, b"t");
        let outer = |key| ipv4(v4("10.0.2.2"), v4("10.0.2.1"), 47, 64, &gre(key, 0x0800, &inner));
        let f = eth(R_WAN, HOST_B, 0x0800, &outer(None));
        let keyed = eth(R_WAN, HOST_B, 0x0800, &outer(Some(7)));
        let inner6 = udp6("2001:db8:77::1", "2001:db8:1::2", 9, 7, 8);
        let outer6 = ipv6(v6("2001:db8:2::2"), v6("2001:db8:2::1"), 47, 64, &gre(Some(42), 0x86dd, &inner6));
        let f6 = eth(R_WAN, HOST_B, 0x86dd, &outer6);
        for _ in 0..3 {
            assert_eq!(d.run(WAN, &f), Forward(LAN), "gre0");
            assert_eq!(d.run(WAN, &f), Forward(LAN), "gre0 again");
            assert_eq!(d.run(WAN, &f6), Forward(LAN), "gre6");
            assert_eq!(d.run(WAN, &keyed), Drop("gre-input/no-tunnel".into()), "no tunnel has key 7 yet");
        }
        assert_eq!(d.run(WAN, &f), Forward(LAN));
        // gre0 now wants key 7, published twice: the tables are double
        // buffered, so the second publication writes the half the kept
        // lookup was made in, and only the publication tells them apart.
        let mut ifs = interfaces().ifs.clone();
        for i in &mut ifs {
            if let IfKind::Gre(t) = &mut i.kind
                && i.index == GRE0
            {
                t.key = Some(7);
            }
        }
        d.republish(IfTable::new(ifs.clone()), &rule_sets());
        d.republish(IfTable::new(ifs), &rule_sets());
        assert_eq!(d.run(WAN, &f), Drop("gre-input/no-tunnel".into()), "the old key after the change");
        assert_eq!(d.run(WAN, &keyed), Forward(LAN), "the new key");
        assert_eq!(d.run(WAN, &keyed), Forward(LAN));
        // And back.
        d.republish(interfaces(), &rule_sets());
        assert_eq!(d.run(WAN, &keyed), Drop("gre-input/no-tunnel".into()), "key 7 after the change back");
        assert_eq!(d.run(WAN, &f), Forward(LAN));
    });
}

/// The lab's interfaces and `n` more IPv4 GRE tunnels to the wan's
/// 10.0.2.1: half keyed (remote 10.0.2.2, key `key_of(i)`), half by
/// remote (10.0.2.10 + i, no key). Tunnel i's input rule set is none,
/// FW50, OUT or the drop test by (i / 2) % 4, so a packet decapsulated by the
/// wrong tunnel is decided and counted differently.
fn many_tunnels(n: u16, key_of: impl Fn(u16) -> u32) -> IfTable {
    let mut ifs = interfaces().ifs.clone();
    let first = ifs.len() as u16;
    for i in 0..n {
        let keyed = i.is_multiple_of(2);
        let remote: IpAddr =
            if keyed { "10.0.2.2".parse().expect("a") } else { IpAddr::V4(Ipv4Addr::new(10, 0, 2, 10 + i as u8)) };
        let t = GreTunnel { local: "10.0.2.1".parse().expect("a"), remote, key: keyed.then(|| key_of(i)), ttl: 64 };
        let mut f = iface(first + i, &format!("t{i}"), IfKind::Gre(t), NO_IF, [2, 0x74, 0, 0, 0, i as u8], 1476);
        f.acl_in = [None, Some(0), Some(1), Some(2)][usize::from((i / 2) % 4)];
        ifs.push(f);
    }
    IfTable::new(ifs)
}

/// gre-input's per-CPU tunnel memory has 16 slots: 40 tunnels whose
/// packets interleave at random share them, and every packet must still
/// be decapsulated by its own tunnel (its input rule set's verdict and
/// hits, as in userspace). Then the keyed tunnels' keys rotate, published
/// twice (both halves of the tables rewritten): no slot may name a tunnel
/// by its old key.
#[test]
fn interleaved_tunnels_each_keep_their_own_decapsulation() {
    if !privileged() {
        return;
    }
    const N: u16 = 40;
    let ns = with_veths(3);
    ns.run(|| {
        use Verdict::*;
        let (_w, r) = fib();
        let mut d = build(many_tunnels(N, |i| 100 + u32::from(i)), 3, &r, &rule_sets(), false);
        // From 1.1.3.1, which FW50 drops; OUT counts UDP to port 53.
        let inner = udp4("1.1.3.1", "10.0.1.2", 30, 7, 53, b"t");
        let frame = |i: u16, key_of: &dyn Fn(u16) -> u32| {
            let (src, key) = if i.is_multiple_of(2) {
                (v4("10.0.2.2"), Some(key_of(i)))
            } else {
                (Ipv4Addr::new(10, 0, 2, 10 + i as u8), None)
            };
            eth(R_WAN, HOST_B, 0x0800, &ipv4(src, v4("10.0.2.1"), 47, 64, &gre(key, 0x0800, &inner)))
        };
        let mut rng = Rng(0x7e57_7e57);
        let mut check = |d: &mut Diff, key_of: &dyn Fn(u16) -> u32, owner: &dyn Fn(u16) -> u16| {
            for _ in 0..600 {
                let i = (rng.next() % u64::from(N)) as u16;
                let v = d.run(WAN, &frame(i, key_of));
                // d.run proved the lane agrees with userspace; the
                // tunnel's own rule set decides.
                match (owner(i) / 2) % 4 {
                    0 | 2 => assert_eq!(v, Forward(LAN), "tunnel {}", owner(i)),
                    1 => assert!(matches!(v, Drop(_)), "FW50 drops 1.1.3.1 (tunnel {}): {v:?}", owner(i)),
                    _ => {}
                }
            }
        };
        check(&mut d, &|i| 100 + u32::from(i), &|i| i);
        // Keyed tunnel i now has the key tunnel i + 2 had (mod N): the
        // packet keyed for i belongs to tunnel i - 2.
        let rot = |i: u16| 100 + u32::from((i + 2) % N);
        d.republish(many_tunnels(N, rot), &rule_sets());
        d.republish(many_tunnels(N, rot), &rule_sets());
        check(&mut d, &|i| 100 + u32::from(i), &|i| if i.is_multiple_of(2) { (i + N - 2) % N } else { i });
    });
}

/// What retires a memoised decision is the FIB sequence: wound back to the
/// memo's tag after a route change, the flow's next packet still leaves by
/// the old route (so the test above ran on the memo's path); under the
/// current sequence, by the new one.
#[test]
fn a_memoised_route_answers_only_under_its_own_fib_sequence() {
    with_memo_lab(true, |d, w| {
        use Verdict::*;
        let f = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, b"m"));
        assert_eq!(d.run(LAN, &f), Forward(WAN));
        let (_, old) = d.lane.sequences();
        route(w, "198.18.0.0/24", via("10.0.3.3"));
        sync_fib(d, w);
        let (_, new) = d.lane.sequences();
        assert_ne!(old, new, "a sync that wrote entries bumps the FIB sequence");
        d.lane.set_fib_seq(old).expect("seq");
        let (act, out) = d.lane.test_run(&f, d.kif[usize::from(LAN)], 0).expect("run");
        assert_eq!(act, lane_util::diff::XDP_REDIRECT);
        assert_eq!(out[..6], HOST_B, "the memo's next hop (the old route)");
        d.lane.set_fib_seq(new).expect("seq");
        assert_eq!(d.run(LAN, &f), Forward(DMZ));
        // A sync that writes nothing keeps the sequence (and the memo).
        sync_fib(d, w);
        assert_eq!(d.lane.sequences().1, new);
    });
}

#[test]
fn the_fib_sequence_wraps_without_stale_routes() {
    with_memo_lab(true, |d, w| {
        use Verdict::*;
        let f = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, b"m"));
        // The flow memoised under FIB sequence 0 (just wrapped), via wan.
        d.lane.set_fib_seq(u32::MAX).expect("seq");
        route(w, "203.0.201.0/24", via("10.0.2.2"));
        sync_fib(d, w);
        assert_eq!(d.lane.sequences().1, 0);
        assert_eq!(d.run(LAN, &f), Forward(WAN));
        assert_memoised(d, "198.18.0.1", Some(WAN));
        // Back to 2^32 - 2 without touching the memo, then a route change
        // and a second sync that wraps to 0 again: tag 0 must not answer.
        d.lane.set_fib_seq(u32::MAX - 1).expect("seq");
        route(w, "198.18.0.0/24", via("10.0.3.3"));
        sync_fib(d, w);
        route(w, "203.0.202.0/24", via("10.0.2.2"));
        sync_fib(d, w);
        assert_eq!(d.lane.sequences().1, 0);
        assert_eq!(d.run(LAN, &f), Forward(DMZ));
    });
}

/// Flows into a GRE tunnel are memoised with the tunnel's interface and
/// the underlay's link layer: the next packets get the outer headers from
/// the memo (IPv4 over gre0, IPv6 over the keyed gre6, both on the wan),
/// with the wan's output rule set's hits on the outer frame's bytes. A
/// packet of the flow too big for the tunnel or for the underlay with the
/// outer headers takes the whole path (and its error), TTL 1 goes to
/// userspace, a flow out of one tunnel into another is memoised too, and
/// a new MAC of the underlay's next hop reaches the next packet. The
/// harness compares every frame (outer headers included),
/// verdict, counter and hit with userspace's.
#[test]
fn flows_into_a_tunnel_are_memoised_with_its_outer_headers() {
    with_memo_lab(true, |d, w| {
        use Verdict::*;
        let into = |ttl: u8, data: &[u8]| lan_frame(udp4("10.0.1.2", "203.0.113.5", ttl, 1, 2, data));
        let f = into(64, b"into gre0");
        forwarded_and_memoised(d, &f, "203.0.113.5", WAN, "into gre0");
        let f6 = lan6(udp6("2001:db8:1::2", "2001:db8:ee::5", 64, 1, 2));
        for _ in 0..2 {
            assert_eq!(d.run(LAN, &f6), Forward(WAN), "into gre6");
        }
        assert_memoised(d, "2001:db8:ee::5", Some(WAN));
        let total = |h: &[(u64, u64)]| h.iter().map(|x| x.0).sum::<u64>();
        let out0 = total(&d.hits(1).0);
        assert_eq!(d.run(LAN, &f), Forward(WAN));
        let per = total(&d.hits(1).0) - out0;
        assert!(per > 0, "the wan's output set sees the outer header");
        for _ in 0..7 {
            assert_eq!(d.run(LAN, &f), Forward(WAN));
            assert_eq!(d.run(LAN, &f6), Forward(WAN));
        }
        assert_eq!(total(&d.hits(1).0) - out0, 15 * per, "and every outer header after it");
        // gre0 takes 1476 bytes, the wan 1400: with 24 bytes of outer
        // headers the largest inner packet is 1376. One byte more (1377)
        // and one that exceeds gre0's MTU as well (1480).
        for len in [1377usize, 1480] {
            let big = into(64, &vec![0x5a; len - 28]);
            let v = d.run(LAN, &big);
            assert!(matches!(v, Drop(_) | Punt(_)), "{len} bytes into gre0: {v:?}");
        }
        let fits = into(64, &vec![0x5a; 1376 - 28]);
        assert_eq!(d.run(LAN, &fits), Forward(WAN), "1376 bytes fit");
        assert_eq!(d.run(LAN, &into(1, b"ttl")), Punt("xdp-lane/punt-ttl".into()));
        // Out of one tunnel into another: gre6's packet for 203.0.113.7
        // leaves through gre0, its memo entry holding both.
        let inner = udp4("10.9.9.9", "203.0.113.7", 30, 5, 6, b"via two tunnels");
        let outer6 = ipv6(v6("2001:db8:2::2"), v6("2001:db8:2::1"), 47, 64, &gre(Some(42), 0x0800, &inner));
        let t2t = eth(R_WAN, HOST_B, 0x86dd, &outer6);
        for _ in 0..3 {
            assert_eq!(d.run(WAN, &t2t), Forward(WAN), "gre6 -> gre0");
        }
        assert_memoised(d, "203.0.113.7", Some(WAN));
        // The underlay's next hop moves to another MAC.
        w.set_neighbor(WAN, "10.0.2.2".parse().expect("a"), Some(HOST_C));
        sync_fib(d, w);
        assert_eq!(d.run(LAN, &f), Forward(WAN), "to the new MAC");
        assert_memoised(d, "203.0.113.5", Some(WAN));
        assert_eq!(d.run(LAN, &f), Forward(WAN));
    });
}

/// Packets of a memoised flow that its decision does not fit: TTL 1 goes
/// to userspace, a packet over the egress MTU too with DF, and without DF
/// is dropped counting the input rule set's hits (as the whole path does);
/// a flow the input rule set drops is memoised too, counting every hit.
#[test]
fn a_memoised_flow_still_checks_each_packets_ttl_and_size() {
    with_memo_lab(true, |d, _| {
        use Verdict::*;
        let f = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, b"m"));
        for _ in 0..2 {
            assert_eq!(d.run(LAN, &f), Forward(WAN));
        }
        assert_memoised(d, "198.18.0.1", Some(WAN));
        let ttl1 = lan_frame(udp4("10.0.1.2", "198.18.0.1", 1, 1, 2, b"m"));
        assert_eq!(d.run(LAN, &ttl1), Punt("xdp-lane/punt-ttl".into()));
        assert_memoised(d, "198.18.0.1", Some(WAN));
        // wan's MTU is 1400.
        let mut big = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, &[7u8; 1400]));
        assert_eq!(d.run(LAN, &big), Drop("ip4-rewrite/fragmentation-unsupported".into()));
        assert_memoised(d, "198.18.0.1", Some(WAN));
        big[14 + 6] = 0x40; // DF
        fix_csum(&mut big, 14);
        assert_eq!(d.run(LAN, &big), Punt("xdp-lane/punt-too-big".into()));
        assert_eq!(d.run(LAN, &f), Forward(WAN));
        // An input rule set drop (src 10.0.1.66), memoised with its hits.
        let blocked = lan_frame(udp4("10.0.1.66", "198.18.0.1", 64, 1, 2, b"x"));
        for _ in 0..3 {
            assert_eq!(d.run(LAN, &blocked), Drop("ip4-acl-in/denied".into()));
        }
        assert_memoised(d, "198.18.0.1", None);
        // Each packet's rule hits were compared by the harness (the totals
        // differ by the two punted packets, which only userspace counts).
    });
}

/// The ACL's own memo and cache, without the forwarding memo in front
/// (which answers repeated flows first otherwise): the pairs of
/// [`the_last_flow_memo_answers_only_its_own_key`], and hits counted.
#[test]
fn the_acl_memo_answers_only_its_own_key_without_the_forwarding_memo() {
    with_memo_lab(false, |d, _| {
        for (what, a, b) in one_field_pairs() {
            let (va, vb) = (d.run(LAN, &a), d.run(LAN, &b));
            assert_ne!(va, vb, "{what}: the pair must get different verdicts");
            for _ in 0..3 {
                for (f, v) in [(&a, &va), (&b, &vb)] {
                    assert_eq!(&d.run(LAN, f), v, "{what}: first of a run");
                    assert_eq!(&d.run(LAN, f), v, "{what}: second of a run (the memo)");
                }
            }
        }
        assert!(d.lane.fwd_memo_entries().expect("memo").iter().flatten().all(|e| e.0 == 0 && e.2 == 0), "memo unused");
        let (lane, engine) = d.hits(0);
        assert_eq!(lane, engine);
        let (lane, engine) = d.hits(1);
        assert_eq!(lane, engine);
    });
}

// ------------------------------------------------------- the forwarding memo's flow table

/// `n` IPv4 and `n` IPv6 UDP flows from lan to distinct destinations
/// (198.18.0.100 + i, 2001:db8:ff::1:i), destination port 5000: each frame
/// with its destination as [`assert_memoised`] names it.
fn table_flows(n: u8) -> Vec<(Vec<u8>, String)> {
    let mut flows = Vec::new();
    for i in 0..n {
        let d4 = format!("198.18.0.{}", 100 + u16::from(i));
        flows.push((lan_frame(udp4("10.0.1.2", &d4, 64, 1000 + u16::from(i), 5000, b"t")), d4));
        let d6 = format!("2001:db8:ff::1:{i:x}");
        flows.push((lan6(udp6("2001:db8:1::2", &d6, 64, 1000 + u16::from(i), 5000)), d6));
    }
    flows
}

/// The destination words of the flows CPU 0's forwarding memo holds under
/// the lane's current sequences.
fn memoised_now(d: &Diff) -> Vec<(u64, Option<u16>)> {
    let (seq, fib_seq) = d.lane.sequences();
    let e = d.lane.fwd_memo_entries().expect("memo");
    e.first().expect("CPU 0").iter().filter(|e| (e.0, e.1) == (seq, fib_seq)).map(|e| (e.2, e.3)).collect()
}

/// Many flows interleaved through tables of one bucket (two flows: every
/// flow collides) and of four (eight flows), more flows than either holds,
/// so entries are evicted and refilled all the time: every packet's
/// verdict, frame, counters and rule hits as userspace's (the harness
/// compares each packet), IPv4 and IPv6; the table holds at most what it
/// can, and some flows.
#[test]
fn the_flow_table_answers_many_interleaved_flows_as_userspace() {
    for buckets in [1, 4] {
        with_memos_lab(tern_xdp::lane::ACL_CACHE_BUCKETS, buckets, |d, _| {
            let flows = table_flows(12);
            for round in 0..4 {
                for (f, _) in &flows {
                    assert_eq!(d.run(LAN, f), Verdict::Forward(WAN), "{buckets} buckets, round {round}");
                }
                // A flow twice in a row: the second packet may be answered by the table.
                for (f, _) in flows.iter().step_by(5) {
                    assert_eq!(d.run(LAN, f), Verdict::Forward(WAN));
                    assert_eq!(d.run(LAN, f), Verdict::Forward(WAN));
                }
            }
            let held = memoised_now(d);
            assert!(!held.is_empty() && held.len() <= 2 * buckets as usize, "{buckets} buckets hold {held:?}");
            let (lane, engine) = d.hits(0);
            assert_eq!(lane, engine, "{buckets} buckets");
        });
    }
}

/// With the table holding every flow (24 IPv4 and 24 IPv6 flows, each
/// seen twice), a route change, a neighbour's new MAC and a rule
/// publication each reach the next packet of every one of them, in the
/// lane as in userspace (the harness compares frames byte for byte: the
/// new port, the new MAC), IPv4 and IPv6.
#[test]
fn route_neighbour_and_rule_changes_reach_the_next_packet_of_every_memoised_flow() {
    with_memo_lab(true, |d, w| {
        use Verdict::*;
        let flows = table_flows(24);
        let word = |dst: &str| match dst.parse::<IpAddr>().expect("address") {
            IpAddr::V4(a) => u64::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a) as u64,
        };
        // Every flow memoised: after a change, the memo's miss rate is
        // high and it probes (and fills) on one packet in 16 only, so
        // the flows are run again until the table holds them all.
        let all_memoised = |d: &mut Diff, what: &str| {
            for _ in 0..200 {
                let held = memoised_now(d);
                let missing: Vec<_> =
                    flows.iter().filter(|(_, dst)| !held.iter().any(|h| h.0 == word(dst) && h.1.is_some())).collect();
                if missing.is_empty() {
                    return;
                }
                for (f, _) in missing {
                    d.run(LAN, f);
                }
            }
            panic!("{what}: the flows never all memoised");
        };
        for (f, _) in &flows {
            assert_eq!(d.run(LAN, f), Forward(WAN));
        }
        all_memoised(d, "first packets");
        // A more specific IPv4 route out of dmz: the next packet of every IPv4 flow.
        route(w, "198.18.0.0/24", via("10.0.3.3"));
        sync_fib(d, w);
        for (f, dst) in &flows {
            let port = if dst.contains(':') { WAN } else { DMZ };
            assert_eq!(d.run(LAN, f), Forward(port), "route change: {dst}");
        }
        all_memoised(d, "after the route change");
        // Both next hops' new MACs (the frames are compared byte for byte).
        w.set_neighbor(DMZ, "10.0.3.3".parse().expect("a"), Some([2, 0, 0, 0, 3, 0xdd]));
        w.set_neighbor(WAN, "2001:db8:2::2".parse().expect("a"), Some([2, 0, 0, 0, 2, 0xdd]));
        sync_fib(d, w);
        for (f, dst) in &flows {
            let port = if dst.contains(':') { WAN } else { DMZ };
            assert_eq!(d.run(LAN, f), Forward(port), "new MAC: {dst}");
        }
        all_memoised(d, "after the new MACs");
        // A rule set dropping UDP 5000, published: every flow's next packet.
        d.republish(cache_interfaces(Some(0)), &cache_rule_sets(Some(5000)));
        for (f, dst) in &flows {
            let v = if dst.contains(':') { "ip6-acl-in/denied" } else { "ip4-acl-in/denied" };
            assert_eq!(d.run(LAN, f), Drop(v.into()), "rule publication: {dst}");
        }
        let (lane, engine) = d.hits(0);
        assert_eq!(lane, engine);
    });
}

/// `tern trace` on the XDP lane: armed for N packets, the lane records the
/// next N it decides (as received, with the verdict, the counter that says
/// why, and the rewrite of a forwarded one) and nothing once they are in
/// or while no trace is armed.
#[test]
fn traces_record_what_the_lane_decided() {
    use tern_xdp::lane::TraceVerdict;
    with_lab(|d, _| {
        let plain = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1000, 2000, b"x"));
        d.run(LAN, &plain);
        assert!(d.lane.trace_take().is_empty(), "nothing recorded while no trace is armed");

        let denied = lan_frame(udp4("1.1.7.1", "198.18.0.1", 64, 1, 2, b"x"));
        let ttl1 = lan_frame(udp4("10.0.1.2", "198.18.0.1", 1, 1000, 2000, b"x"));
        let arp = eth([0xff; 6], HOST_A, 0x0806, &[0u8; 28]);
        let mcast = eth([1, 0, 0x5e, 0, 0, 5], HOST_A, 0x0800, &udp4("10.0.1.2", "224.0.0.5", 1, 1, 2, b"o"));
        let tunnel = lan_frame(udp4("10.0.1.2", "203.0.113.9", 64, 1, 2, b"tunnel"));
        let big = lan_frame(udp4("10.0.1.2", "198.18.0.1", 64, 1, 2, &[7u8; 300]));
        let frames = [&plain, &denied, &ttl1, &arp, &mcast, &tunnel, &big];
        d.lane.trace_arm(frames.len() as u32).expect("arm");
        assert_eq!(d.lane.trace_remaining(), frames.len() as u32);
        for f in frames {
            d.run(LAN, f);
        }
        // One more than the budget: not recorded.
        d.run(LAN, &plain);
        let t = d.lane.trace_take();
        assert_eq!(t.len(), frames.len(), "{t:?}");
        assert_eq!(d.lane.trace_remaining(), 0);
        for (rec, f) in t.iter().zip(frames) {
            assert_eq!(rec.len as usize, f.len());
            assert_eq!(rec.head[..], f[..f.len().min(128)], "the frame as received");
            assert_eq!(rec.port, LAN);
        }
        let v: Vec<_> = t.iter().map(|r| (r.verdict, r.reason_name())).collect();
        assert_eq!(
            v,
            [
                (TraceVerdict::Forwarded, None),
                (TraceVerdict::Dropped, Some(("ip4-acl-in", "denied"))),
                (TraceVerdict::Punted, Some(("xdp-lane", "punt-ttl"))),
                (TraceVerdict::Punted, Some(("xdp-lane", "punt-neighbor"))),
                (TraceVerdict::Passed, Some(("xdp-lane", "pass-multicast"))),
                (TraceVerdict::Forwarded, None),
                (TraceVerdict::Forwarded, None),
            ]
        );
        assert_eq!(t[1].action, lane_util::diff::XDP_DROP);
        assert_eq!(t[4].action, lane_util::diff::XDP_PASS);
        let rw = t[0].rewrite.as_ref().expect("forwarded: the rewrite");
        assert_eq!((rw.tx_port, rw.tx_vid, rw.dst_mac, rw.src_mac), (WAN, 0, HOST_B, R_WAN));
        assert!(rw.dec_ttl && !rw.v6 && rw.gre.is_none());
        let gre = t[5].rewrite.as_ref().expect("encapsulated").gre.expect("GRE outer addresses");
        assert_eq!(gre, ("10.0.2.1".parse().unwrap(), "10.0.2.2".parse().unwrap()));
        assert_eq!(t[6].head.len(), 128, "a long frame's first 128 bytes");

        // Re-armed: only packets after it; stopped: none.
        d.lane.trace_arm(1).expect("arm");
        d.run(LAN, &denied);
        d.lane.trace_arm(0).expect("stop");
        d.run(LAN, &plain);
        let t = d.lane.trace_take();
        assert!(t.is_empty(), "stopping discards what was not taken: {t:?}");
        d.lane.trace_arm(2).expect("arm");
        d.run(LAN, &denied);
        let t = d.lane.trace_take();
        assert_eq!(t.len(), 1);
        assert_eq!(d.lane.trace_remaining(), 1);
        assert_eq!(t[0].verdict, TraceVerdict::Dropped);
    });
}

/// An ECMP route added after the lane's first copy of the FIB (as FRR's
/// multipath routes come) is forwarded in the lane over both members, not
/// punted as no route (the FIB's changes once missed the group's entry).
#[test]
fn an_ecmp_route_added_at_run_time_forwards_in_the_lane() {
    with_memo_lab(true, |d, w| {
        route(
            w,
            "172.20.0.0/16",
            RouteTarget::Ecmp(vec![("10.0.2.2".parse().expect("a"), None), ("10.0.100.5".parse().expect("a"), None)]),
        );
        sync_fib(d, w);
        let mut members = std::collections::BTreeSet::new();
        for i in 0..16u16 {
            let f = lan_frame(udp4("10.0.1.2", "172.20.3.4", 64, 3000 + i, 5000, b"e"));
            match d.run(LAN, &f) {
                Verdict::Forward(p) => members.insert(p),
                v => panic!("flow {i}: {v:?}"),
            };
        }
        assert_eq!(members, [LAN, WAN].into_iter().collect(), "flows spread over both members");
    });
}

/// IPv4 flows through an ECMP group are memoised with the member their
/// hash picked (the key holds every field the hash reads), so their next
/// packets leave by the same member as userspace's; TCP headers too short
/// for their flags (the key holds no ports, the hash reads them) are not,
/// so flows that share such a key still spread as userspace spreads them.
/// A flow that hits five rules (CIN: count udp/53, count all, the
/// default; COUT on wan: count oif, the default) is memoised, and the
/// memo's answers count all five on every packet, in the lane as in
/// userspace (the harness compares the hits), IPv4 and IPv6.
#[test]
fn flows_of_many_rule_hits_are_memoised() {
    with_memo_lab(true, |d, _| {
        use Verdict::*;
        for (f, dst) in [
            (lan_frame(udp4("10.0.1.2", "198.18.0.7", 64, 1000, 53, b"dns")), "198.18.0.7"),
            (lan6(udp6("2001:db8:1::2", "2001:db8:ff::7", 64, 1000, 53)), "2001:db8:ff::7"),
        ] {
            let (in0, out0) = (d.hits(0).0, d.hits(1).0);
            for _ in 0..10 {
                assert_eq!(d.run(LAN, &f), Forward(WAN), "{dst}");
            }
            assert_memoised(d, dst, Some(WAN));
            let (lane_in, engine_in) = d.hits(0);
            let (lane_out, engine_out) = d.hits(1);
            assert_eq!((&lane_in, &lane_out), (&engine_in, &engine_out), "{dst}");
            let grew = |now: &[(u64, u64)], then: &[(u64, u64)], i: usize| now[i].0 - then.get(i).map_or(0, |h| h.0);
            let last = lane_in.len() - 1;
            assert_eq!(
                [grew(&lane_in, &in0, 0), grew(&lane_in, &in0, 1), grew(&lane_in, &in0, last)],
                [10, 10, 10],
                "{dst}: count udp/53, count all, the default"
            );
            let last = lane_out.len() - 1;
            assert_eq!([grew(&lane_out, &out0, 0), grew(&lane_out, &out0, last)], [10, 10], "{dst}: COUT");
        }
    });
}

/// IPv4 flows through an ECMP group are memoised with the member their
/// hash picked (the key holds every field the hash reads), so their next
/// packets leave by the same member as userspace's; TCP headers too short
/// for their flags (the key holds no ports, the hash reads them) are not,
/// so flows that share such a key still spread as userspace spreads them.
#[test]
fn ecmp_flows_are_memoised_where_the_key_picks_the_member() {
    with_memo_lab(true, |d, _| {
        use Verdict::*;
        let dst = "172.16.3.4";
        let word = u64::from(u32::from(v4(dst)));
        let mut members = std::collections::BTreeSet::new();
        for i in 0..16u16 {
            let f = lan_frame(udp4("10.0.1.2", dst, 64, 3000 + i, 5000, b"e"));
            let Forward(p) = d.run(LAN, &f) else { panic!("ECMP flow {i} forwarded") };
            assert_eq!(d.run(LAN, &f), Forward(p), "the memo's answer for flow {i}");
            members.insert(p);
            let held = memoised_now(d);
            assert!(held.contains(&(word, Some(p))), "flow {i} memoised leaving by {p}: {held:?}");
        }
        assert_eq!(members.len(), 2, "flows spread over both members");

        // TCP with 8 bytes of header: one key for every port pair.
        let mut members = std::collections::BTreeSet::new();
        for i in 0..16u16 {
            let mut l4 = Vec::new();
            l4.extend_from_slice(&(4000 + i).to_be_bytes());
            l4.extend_from_slice(&80u16.to_be_bytes());
            l4.extend_from_slice(&[0, 0, 0, 1]);
            let f = lan_frame(ipv4(v4("10.0.1.2"), v4("172.16.3.5"), 6, 64, &l4));
            for _ in 0..2 {
                if let Forward(p) = d.run(LAN, &f) {
                    members.insert(p);
                }
            }
        }
        assert_eq!(members.len(), 2, "short TCP headers spread as userspace spreads them");
        let short = u64::from(u32::from(v4("172.16.3.5")));
        assert!(!memoised_now(d).iter().any(|e| e.0 == short), "a key without ports is not memoised");
    });
}

/// IPv6 ECMP: the member is a function of the key and the flow label,
/// which the key does not hold. Flows of one key and 16 flow labels spread
/// over both members (wan, lan.100), each is memoised with its label and
/// answered with its own member (the harness compares each frame with
/// userspace's), also when the labels take turns in the memo's bucket.
#[test]
fn ipv6_ecmp_flows_are_memoised_with_their_flow_label() {
    with_memo_lab(true, |d, w| {
        use Verdict::*;
        w.set_neighbor(VLAN100, "2001:db8:100::5".parse().expect("a"), Some(HOST_V));
        route(
            w,
            "2001:db8:ec::/48",
            RouteTarget::Ecmp(vec![
                ("2001:db8:2::2".parse().expect("a"), None),
                ("2001:db8:100::5".parse().expect("a"), None),
            ]),
        );
        sync_fib(d, w);
        let dst = "2001:db8:ec::4";
        let word = u128::from(v6(dst)) as u64;
        let labelled = |label: u32| {
            let mut f = lan6(udp6("2001:db8:1::2", dst, 64, 7000, 7001));
            f[15] = (f[15] & 0xf0) | ((label >> 16) & 0xf) as u8;
            f[16] = (label >> 8) as u8;
            f[17] = label as u8;
            f
        };
        let mut members = std::collections::BTreeSet::new();
        for i in 0..16u32 {
            let label = 0x1_2345 + i * 0x111;
            let f = labelled(label);
            let v = d.run(LAN, &f);
            let Forward(p) = v else { panic!("label {label:#x}: {v:?}") };
            assert_eq!(d.run(LAN, &f), Forward(p), "the memo's answer for label {label:#x}");
            members.insert(p);
            let held = memoised_now(d);
            assert!(held.contains(&(word, Some(p))), "label {label:#x} memoised leaving by {p}: {held:?}");
        }
        assert_eq!(members, [LAN, WAN].into_iter().collect(), "labels spread over both members");
        // The labels share the key's bucket (two ways): in turn, each
        // packet either finds its own label's entry or fills one.
        for round in 0..3 {
            for i in 0..16u32 {
                let f = labelled(0x1_2345 + i * 0x111);
                assert!(matches!(d.run(LAN, &f), Forward(_)), "round {round}, label {i}");
            }
        }
    });
}

/// Control traffic first on the XDP lane (`bpf/lib/punt.h`): what it
/// hands to Linux for the router is classed exactly as the engine's
/// `linux-punt` classes it (`tern_nodes::linux::class::classify`), each
/// class has its own policer, a flood of pings at the router is shed
/// under `punt-shed-local` while BGP and ARP still pass, and rate 0
/// polices nothing.
#[test]
fn punted_frames_are_classed_as_the_engine_does_and_policed_apart() {
    use lane_util::diff::{XDP_DROP, XDP_PASS};
    use tern_xdp::lane::PUNT_CLASSES;
    with_linux_mode_lane(|d| {
        d.lane.add_local(IpAddr::V4(v4("10.0.1.1"))).expect("local");
        d.lane.add_local(IpAddr::V6(v6("2001:db8:1::1"))).expect("local");
        let kif = d.kif[usize::from(LAN)];
        let shed = |d: &Diff| -> Vec<u64> {
            PUNT_CLASSES.iter().map(|c| d.lane.counter("xdp-lane", &format!("punt-shed-{c}"))).collect()
        };
        let tcp4 =
            |dport: u16, sport: u16| lan_frame(ipv4(v4("10.0.1.2"), v4("10.0.1.1"), 6, 64, &tcp(sport, dport, 0x18)));
        let to_us4 = |proto: u8, l4: &[u8]| lan_frame(ipv4(v4("10.0.1.2"), v4("10.0.1.1"), proto, 64, l4));
        let to_us6 = |nh: u8, l4: &[u8]| lan6(ipv6(v6("2001:db8:1::2"), v6("2001:db8:1::1"), nh, 64, l4));
        let mcast4 =
            |dst: &str, proto: u8| lan_frame(ipv4(v4("10.0.1.2"), v4(dst), proto, 1, &[2, 1, 0, 44, 0, 0, 0, 0]));
        let frames: Vec<(&str, Vec<u8>)> = vec![
            ("arp", eth([0xff; 6], HOST_A, 0x0806, &[0u8; 28])),
            ("ns", lan6(ipv6(v6("fe80::2"), v6("ff02::1:ff00:1"), 58, 255, &[135, 0, 0, 0, 0, 0, 0, 0]))),
            ("ra", lan6(ipv6(v6("fe80::2"), v6("ff02::1"), 58, 255, &[134, 0, 0, 0, 0, 0, 0, 0]))),
            ("bgp to 179", tcp4(179, 40000)),
            ("bgp from 179", tcp4(40000, 179)),
            ("bgp v6", to_us6(6, &tcp(179, 40000, 0x10))),
            ("ospf hello", mcast4("224.0.0.5", 89)),
            ("ospf unicast", to_us4(89, &[2, 1, 0, 44])),
            ("vrrp", mcast4("224.0.0.18", 112)),
            ("ike", to_us4(17, &udp(500, 500, &[1; 28]))),
            ("ike nat-t", to_us4(17, &udp(4500, 4500, &[0, 0, 0, 0, 1, 2, 3, 4]))),
            ("nat keepalive", to_us4(17, &udp(4500, 4500, &[0xff]))),
            ("bfd", to_us4(17, &udp(49152, 3784, &[0x20; 24]))),
            ("bfd v6 multihop", to_us6(17, &udp(49152, 4784, &[0x20; 24]))),
            ("ping", to_us4(1, &[8, 0, 0xf7, 0xfe, 0, 1, 0, 0])),
            ("ping6", to_us6(58, &[128, 0, 0, 0, 0, 1, 0, 1])),
            ("udp closed port", to_us4(17, &udp(1234, 9, b"flood"))),
            ("ssh", tcp4(22, 40000)),
            ("mdns", lan_frame(ipv4(v4("10.0.1.2"), v4("224.0.0.251"), 17, 1, &udp(5353, 5353, b"q")))),
            ("esp", to_us4(50, &[0, 0, 1, 0, 0, 0, 0, 1])),
            ("esp in udp", to_us4(17, &udp(4500, 4500, &[0, 0, 1, 0, 0, 0, 0, 1]))),
            ("lldp", eth([0x01, 0x80, 0xc2, 0, 0, 0x0e], HOST_A, 0x88cc, &[0u8; 46])),
        ];
        // One packet a second and a burst of one per class: a class's
        // first packet passes, its next is shed, under its own counter.
        d.lane.set_punt_rates(&[(1, 1); 7]).expect("rates");
        let mut seen = std::collections::BTreeSet::new();
        for (what, f) in &frames {
            let want = tern_nodes::linux::class::classify(f).map(|c| c.index());
            let mut got = None;
            for _ in 0..3 {
                let before = shed(d);
                let (act, _) = d.lane.test_run(f, kif, 0).expect("test run");
                let after = shed(d);
                let moved: Vec<usize> = (0..PUNT_CLASSES.len()).filter(|&i| after[i] != before[i]).collect();
                assert!(moved.len() <= 1, "{what}: {moved:?}");
                if let Some(&i) = moved.first() {
                    assert_eq!(act, XDP_DROP, "{what}: shed");
                    got = Some(i);
                    break;
                }
                assert_eq!(act, XDP_PASS, "{what}: to Linux");
            }
            assert_eq!(got, want, "{what}: the lane's class against the engine's");
            seen.insert(got);
        }
        assert_eq!(seen.len(), PUNT_CLASSES.len() + 1, "every class and the unclassed: {seen:?}");

        // A ping flood at the router against local = 1/s, burst 50: the
        // burst passes (and what a second of the run adds), the rest is
        // shed; BGP and ARP in the middle of it all pass.
        let mut rates = [(1_000_000, 1000); 7];
        rates[6] = (1, 50);
        d.lane.set_punt_rates(&rates).expect("rates");
        let ping = &frames.iter().find(|(w, _)| *w == "ping").expect("ping").1;
        let bgp = &frames.iter().find(|(w, _)| *w == "bgp to 179").expect("bgp").1;
        let arp = &frames[0].1;
        let before = shed(d);
        let t0 = std::time::Instant::now();
        let (mut passed, mut control) = (0u64, 0);
        for i in 0..2000 {
            let (act, _) = d.lane.test_run(ping, kif, 0).expect("test run");
            passed += u64::from(act == XDP_PASS);
            if i % 100 == 0 {
                for f in [bgp, arp] {
                    let (act, _) = d.lane.test_run(f, kif, 0).expect("test run");
                    assert_eq!(act, XDP_PASS, "control traffic during the flood");
                    control += 1;
                }
            }
        }
        let secs = t0.elapsed().as_secs() + 1;
        assert!((50..=50 + secs).contains(&passed), "{passed} pings passed in about {secs} s");
        let after = shed(d);
        assert_eq!(after[6] - before[6], 2000 - passed, "every shed ping counted");
        for i in 0..6 {
            assert_eq!(after[i], before[i], "class {} shed nothing", PUNT_CLASSES[i]);
        }
        assert_eq!(control, 40);

        // Rate 0: not policed.
        d.lane.set_punt_rates(&[(0, 0); 7]).expect("rates");
        for _ in 0..200 {
            assert_eq!(d.lane.test_run(ping, kif, 0).expect("test run").0, XDP_PASS);
        }
    });
}

// ---------------------------------------------------------------- IPsec

/// An ESP packet (SPI 0x1001, sequence number 1, a few bytes of
/// "ciphertext"): the lanes steer it by its protocol alone.
fn esp4(src: &str, dst: &str) -> Vec<u8> {
    let esp = [0, 0, 0x10, 0x01, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
    ipv4(v4(src), v4(dst), 50, 64, &esp)
}

/// ESP and UDP to ports 500/4500 for the router go to the engine, counted
/// as `punt-ipsec` (standalone mode: every local packet is the engine's,
/// this says which); transit ESP is forwarded by the lane like any IP
/// protocol.
#[test]
fn ipsec_for_the_router_is_punted_and_transit_esp_forwarded() {
    with_lab(|d, _| {
        use Verdict::*;
        let wan = |l3: Vec<u8>| eth(R_WAN, HOST_B, 0x0800, &l3);
        assert_eq!(d.run(WAN, &wan(esp4("10.0.2.2", "10.0.2.1"))), Punt("xdp-lane/punt-ipsec".into()));
        for port in [4500, 500] {
            let f = wan(udp4("10.0.2.2", "10.0.2.1", 64, 4500, port, b"nat-t"));
            assert_eq!(d.run(WAN, &f), Punt("xdp-lane/punt-ipsec".into()), "port {port}");
        }
        let f = wan(udp4("10.0.2.2", "10.0.2.1", 64, 4500, 53, b"dns"));
        assert_eq!(d.run(WAN, &f), Punt("xdp-lane/punt-local".into()));
        let f = eth(R_WAN, HOST_B, 0x86dd, &udp6("2001:db8:2::2", "2001:db8:2::1", 64, 4500, 4500));
        assert_eq!(d.run(WAN, &f), Punt("xdp-lane/punt-ipsec".into()));
        // Transit ESP, both ways.
        let before = d.lane.counter("xdp-lane", "forwarded");
        assert_eq!(d.run(WAN, &wan(esp4("198.18.0.1", "10.0.1.2"))), Forward(LAN));
        assert_eq!(d.run(LAN, &lan_frame(esp4("10.0.1.2", "198.18.0.1"))), Forward(WAN));
        assert_eq!(d.lane.counter("xdp-lane", "forwarded"), before + 2);
    });
}

/// `ip` (an IPv6 packet) with extension headers of types `exts` after
/// its fixed header: hop-by-hop 0 and destination options 60 with a PadN,
/// a routing header 43 of experimental type 253 with no segments left, a
/// fragment header 44 whose offset-and-M field is `frag`.
fn ext6(ip: &[u8], exts: &[u8], frag: u16) -> Vec<u8> {
    let (fixed, payload) = ip.split_at(40);
    let mut fixed = fixed.to_vec();
    let mut chain = Vec::new();
    for (i, &t) in exts.iter().enumerate() {
        let next = exts.get(i + 1).copied().unwrap_or(fixed[6]);
        let [f0, f1] = frag.to_be_bytes();
        chain.extend_from_slice(&match t {
            43 => [next, 0, 253, 0, 0, 0, 0, 0],
            44 => [next, 0, f0, f1, 0, 0, 0x12, 0x34],
            _ => [next, 0, 1, 4, 0, 0, 0, 0],
        });
    }
    fixed[6] = exts[0];
    let plen = u16::from_be_bytes([fixed[4], fixed[5]]) + chain.len() as u16;
    fixed[4..6].copy_from_slice(&plen.to_be_bytes());
    [fixed, chain, payload.to_vec()].concat()
}

/// ESP and ESP in UDP 4500 for the router behind IPv6 extension headers
/// (hop-by-hop, routing, destination options, a first fragment, all four)
/// go to the engine as without them, in both modes (Linux mode once tern
/// terminates IPsec), and so does a later fragment of ESP (no SPI: tern
/// reassembles it); a chain longer than the lane walks stays where any
/// packet for the router goes.
#[test]
fn ipsec_behind_ipv6_extension_headers_is_punted() {
    let esp = [0, 0, 0x10, 0x01, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8];
    let esp6 = ipv6(v6("2001:db8:2::2"), v6("2001:db8:2::1"), 50, 64, &esp);
    let natt6 = udp6("2001:db8:2::2", "2001:db8:2::1", 64, 4500, 4500);
    let chains: [&[u8]; 5] = [&[0], &[43], &[60], &[44], &[0, 43, 60, 44]];
    let wan6 = |l3: Vec<u8>| eth(R_WAN, HOST_B, 0x86dd, &l3);
    let check = |d: &mut Diff, other: &str| {
        use Verdict::*;
        for c in chains {
            for ip in [&esp6, &natt6] {
                assert_eq!(d.run(WAN, &wan6(ext6(ip, c, 0))), Punt("xdp-lane/punt-ipsec".into()), "{c:?}");
            }
        }
        // The first of several fragments holds the SPI and the ports.
        assert_eq!(d.run(WAN, &wan6(ext6(&esp6, &[44], 1))), Punt("xdp-lane/punt-ipsec".into()));
        // A later fragment of ESP (offset 8) goes to tern's reassembly too.
        assert_eq!(d.run(WAN, &wan6(ext6(&esp6, &[44], 8))), Punt("xdp-lane/punt-ipsec".into()));
        // Five headers (the lane walks four).
        let v = d.run(WAN, &wan6(ext6(&natt6, &[0, 43, 60, 60, 60], 0)));
        assert!(v == Pass(other.into()) || v == Punt(other.into()), "{v:?}, want {other}");
    };
    with_linux_mode_lane(|d| {
        d.lane.add_local(IpAddr::V6("2001:db8:2::1".parse().expect("a"))).expect("local");
        d.lane.set_ipsec(true).expect("flag");
        check(d, "xdp-lane/pass-local");
    });
    with_lab(|d, _| check(d, "xdp-lane/punt-local"));
}

/// Linux mode: the router's traffic is Linux's, IPsec too until tern
/// terminates it (an ipsec tunnel: `set_ipsec`); then ESP and ESP in UDP
/// 4500 go to the engine, and the rest still to Linux: IKE too (UDP 500,
/// 4500 with the non-ESP marker, NAT keep-alives), which the kernel's
/// sockets of the IKE service take.
#[test]
fn linux_mode_hands_ipsec_to_the_engine_when_tern_terminates_it() {
    with_linux_mode_lane(|d| {
        use Verdict::*;
        d.lane.add_local(IpAddr::V4(v4("10.0.2.1"))).expect("local");
        d.lane.add_local(IpAddr::V6("2001:db8:2::1".parse().expect("a"))).expect("local");
        let esp = eth(R_WAN, HOST_B, 0x0800, &esp4("10.0.2.2", "10.0.2.1"));
        let natt =
            eth(R_WAN, HOST_B, 0x0800, &udp4("10.0.2.2", "10.0.2.1", 64, 4500, 4500, &[0, 0, 0x10, 1, 0, 0, 0, 1]));
        let natt6 = eth(R_WAN, HOST_B, 0x86dd, &udp6("2001:db8:2::2", "2001:db8:2::1", 64, 4500, 4500));
        let ike_natt = eth(R_WAN, HOST_B, 0x0800, &udp4("10.0.2.2", "10.0.2.1", 64, 4500, 4500, &[0, 0, 0, 0, 1, 2]));
        let keepalive = eth(R_WAN, HOST_B, 0x0800, &udp4("10.0.2.2", "10.0.2.1", 64, 4500, 4500, &[0xff]));
        let ike6 = eth(R_WAN, HOST_B, 0x86dd, &udp6("2001:db8:2::2", "2001:db8:2::1", 64, 500, 500));
        let dns = eth(R_WAN, HOST_B, 0x0800, &udp4("10.0.2.2", "10.0.2.1", 64, 4500, 53, b"x"));
        for f in [&esp, &natt, &natt6, &ike_natt, &keepalive, &ike6, &dns] {
            assert_eq!(d.run(WAN, f), Pass("xdp-lane/pass-local".into()));
        }
        d.lane.set_ipsec(true).expect("flag");
        for f in [&esp, &natt, &natt6] {
            assert_eq!(d.run(WAN, f), Punt("xdp-lane/punt-ipsec".into()));
        }
        for f in [&ike_natt, &keepalive, &ike6, &dns] {
            assert_eq!(d.run(WAN, f), Pass("xdp-lane/pass-local".into()));
        }
        d.lane.set_ipsec(false).expect("flag");
        assert_eq!(d.run(WAN, &esp), Pass("xdp-lane/pass-local".into()));
    });
}
