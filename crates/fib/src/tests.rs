//! Behaviour of the RIB and the writer/reader pair as a whole.

use std::net::IpAddr;

use crate::*;

fn p(s: &str) -> Prefix {
    s.parse().expect("test prefix")
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

fn v4(s: &str) -> u32 {
    match ip(s) {
        IpAddr::V4(a) => a.into(),
        IpAddr::V6(_) => panic!("not v4"),
    }
}

fn v6(s: &str) -> u128 {
    match ip(s) {
        IpAddr::V6(a) => a.into(),
        IpAddr::V4(_) => panic!("not v6"),
    }
}

fn fib() -> (FibWriter, FibReader) {
    let cfg = FibConfig {
        v4_nodes: 1 << 12,
        v4_leaves: 1 << 16,
        v6_nodes: 1 << 12,
        v6_leaves: 1 << 16,
        ..Default::default()
    };
    new(cfg, tern_rcu::Domain::new())
}

const A: RouteAttrs = RouteAttrs { distance: None, metric: 0 };

fn via(gw: &str, ifindex: Option<u16>) -> RouteTarget {
    RouteTarget::Via { gw: ip(gw), ifindex }
}

#[test]
fn best_route_by_distance_falls_back_on_delete() {
    let (mut w, r) = fib();
    let net = p("198.51.100.0/24");
    w.add_route(Source::Kernel, net, via("10.0.0.1", Some(1)), A).expect("kernel");
    w.add_route(Source::Static, net, via("10.0.0.2", Some(2)), A).expect("static");
    w.add_route(Source::Neighbor, net, RouteTarget::Blackhole, A).expect("neighbor");
    let dst = v4("198.51.100.7");
    assert_eq!(r.nexthop(r.lookup_v4(dst)).ifindex, 2, "static (1) beats kernel (100)");
    w.del_route(Source::Static, net).expect("del static");
    assert_eq!(r.nexthop(r.lookup_v4(dst)).ifindex, 1, "falls back to kernel");
    w.del_route(Source::Kernel, net).expect("del kernel");
    assert_eq!(r.nexthop(r.lookup_v4(dst)).kind, NhKind::Blackhole, "then to the neighbor source (250)");
    w.del_route(Source::Neighbor, net).expect("del last");
    assert_eq!(r.lookup_v4(dst), NH_NONE);
    assert_eq!(w.del_route(Source::Neighbor, net), Err(FibError::NotFound { source: Source::Neighbor, prefix: net }));
    assert_eq!(w.stats().rib_entries, 0);
    assert_eq!(w.stats().nexthops, 0, "every next hop released");
}

#[test]
fn explicit_distance_metric_and_source_order() {
    let (mut w, r) = fib();
    let net = p("2001:db8:1::/48");
    let dst = v6("2001:db8:1::9");
    w.add_route(Source::Static, net, via("fe80::1", Some(1)), A).expect("static");
    // FPM carries zebra's distance: 0 beats static's default 1.
    w.add_route(Source::Fpm, net, via("fe80::2", Some(2)), RouteAttrs { distance: Some(0), metric: 0 }).expect("fpm");
    assert_eq!(r.nexthop(r.lookup_v6(dst)).ifindex, 2);
    // Same distance: the lower metric wins.
    w.add_route(Source::Fpm, net, via("fe80::2", Some(2)), RouteAttrs { distance: Some(1), metric: 10 }).expect("fpm2");
    assert_eq!(r.nexthop(r.lookup_v6(dst)).ifindex, 1, "static (1, 0) beats fpm (1, 10)");
    // Same distance and metric: source order (Static before Fpm).
    w.add_route(Source::Fpm, net, via("fe80::2", Some(2)), RouteAttrs { distance: Some(1), metric: 0 }).expect("fpm3");
    assert_eq!(r.nexthop(r.lookup_v6(dst)).ifindex, 1);
    let details: Vec<RouteDetail> = w.routes().collect();
    assert_eq!(details.len(), 2);
    assert_eq!(details.iter().filter(|d| d.best).count(), 1);
    assert!(details.iter().any(|d| d.best && d.source == Source::Static));
}

#[test]
fn kernel_distance_is_configurable() {
    let cfg = FibConfig {
        kernel_distance: 0,
        v4_nodes: 64,
        v4_leaves: 1024,
        v6_nodes: 64,
        v6_leaves: 1024,
        ..Default::default()
    };
    let (mut w, r) = new(cfg, tern_rcu::Domain::new());
    let net = p("10.0.0.0/8");
    w.add_route(Source::Static, net, via("192.0.2.1", Some(1)), A).expect("static");
    w.add_route(Source::Kernel, net, via("192.0.2.2", Some(2)), A).expect("kernel");
    assert_eq!(r.nexthop(r.lookup_v4(v4("10.1.1.1"))).ifindex, 2, "kernel at distance 0 wins");
}

#[test]
fn via_resolves_through_connected_and_waits_when_it_cannot() {
    let (mut w, r) = fib();
    let dst = v4("203.0.113.5");
    w.add_route(Source::Static, p("203.0.113.0/24"), via("192.0.2.1", None), A).expect("unresolved add is fine");
    assert_eq!(r.lookup_v4(dst), NH_NONE, "inactive until the gateway is reachable");
    let d = w.routes().next().expect("kept in the RIB");
    assert!(!d.active && !d.best);
    w.add_route(Source::Connected, p("192.0.2.0/24"), RouteTarget::Connected { ifindex: 7 }, A).expect("conn");
    let nh = r.nexthop(r.lookup_v4(dst));
    assert_eq!((nh.kind, nh.ifindex, nh.gw), (NhKind::Unicast, 7, ip("192.0.2.1")));
    assert_eq!(r.nexthop(r.lookup_v4(v4("192.0.2.99"))).kind, NhKind::Glean);
    // A longer connected subnet on another interface takes over.
    w.add_route(Source::Connected, p("192.0.2.0/25"), RouteTarget::Connected { ifindex: 8 }, A).expect("conn2");
    assert_eq!(r.nexthop(r.lookup_v4(dst)).ifindex, 8);
    w.del_route(Source::Connected, p("192.0.2.0/25")).expect("del conn2");
    assert_eq!(r.nexthop(r.lookup_v4(dst)).ifindex, 7);
    w.del_route(Source::Connected, p("192.0.2.0/24")).expect("del conn");
    assert_eq!(r.lookup_v4(dst), NH_NONE, "inactive again");
    // With an ifindex the gateway is used as given.
    w.add_route(Source::Api, p("203.0.113.0/24"), via("198.51.100.1", Some(3)), A).expect("api");
    assert_eq!(r.nexthop(r.lookup_v4(dst)).ifindex, 3);
}

#[test]
fn target_kinds_and_family_checks() {
    let (mut w, r) = fib();
    let cases = [
        ("10.1.0.0/16", RouteTarget::Blackhole, NhKind::Blackhole),
        ("10.2.0.0/16", RouteTarget::Unreachable, NhKind::Unreachable),
        ("10.3.0.0/16", RouteTarget::Prohibit, NhKind::Prohibit),
        ("10.4.0.1/32", RouteTarget::Local { ifindex: 4 }, NhKind::Local),
    ];
    for (net, t, kind) in cases {
        w.add_route(Source::Config, p(net), t, A).expect(net);
        assert_eq!(r.nexthop(r.lookup_v4(v4(&net[..net.len() - 3]) | 1)).kind, kind, "{net}");
    }
    assert_eq!(r.nexthop(r.lookup_v4(v4("10.4.0.1"))).ifindex, 4);
    let bad = w.add_route(Source::Config, p("10.5.0.0/16"), via("2001:db8::1", None), A);
    assert!(matches!(bad, Err(FibError::FamilyMismatch { .. })));
    assert_eq!(w.add_route(Source::Config, p("10.5.0.0/16"), RouteTarget::Ecmp(vec![]), A), Err(FibError::EmptyEcmp));
    assert_eq!(w.stats().errors, 2);
}

#[test]
fn neighbor_macs_and_host_routes() {
    let (mut w, r) = fib();
    w.add_route(Source::Connected, p("192.0.2.0/24"), RouteTarget::Connected { ifindex: 2 }, A).expect("conn");
    w.add_route(Source::Static, p("0.0.0.0/0"), via("192.0.2.1", None), A).expect("default");
    let gw_nh = r.lookup_v4(v4("8.8.8.8"));
    assert_eq!(r.nexthop(gw_nh).mac, None);
    let mac = [2, 0, 0, 0, 0, 1];
    w.set_neighbor(2, ip("192.0.2.1"), Some(mac));
    assert_eq!(r.nexthop(gw_nh).mac, Some(mac), "updated in place, same id");
    assert_eq!(r.lookup_v4(v4("8.8.8.8")), gw_nh);
    let host = r.nexthop(r.lookup_v4(v4("192.0.2.1")));
    assert_eq!((host.kind, host.mac), (NhKind::Unicast, Some(mac)), "host route to the neighbour");
    assert_eq!(w.route_get(ip("192.0.2.1")).map(|d| d.source), Some(Source::Neighbor));
    // A neighbour outside any connected subnet of its interface: MAC only.
    w.set_neighbor(3, ip("192.0.2.50"), Some(mac));
    assert_eq!(r.nexthop(r.lookup_v4(v4("192.0.2.50"))).kind, NhKind::Glean);
    w.set_neighbor(2, ip("192.0.2.1"), None);
    assert_eq!(r.nexthop(gw_nh).mac, None);
    assert_eq!(r.nexthop(r.lookup_v4(v4("192.0.2.1"))).kind, NhKind::Glean, "host route removed");
    // Resolved before the subnet exists: the host route follows the subnet.
    w.set_neighbor(5, ip("2001:db8::5"), Some(mac));
    assert_eq!(w.route_get(ip("2001:db8::5")), None);
    w.add_route(Source::Connected, p("2001:db8::/64"), RouteTarget::Connected { ifindex: 5 }, A).expect("conn6");
    assert_eq!(r.nexthop(r.lookup_v6(v6("2001:db8::5"))).mac, Some(mac));
    w.del_route(Source::Connected, p("2001:db8::/64")).expect("del conn6");
    assert_eq!(r.lookup_v6(v6("2001:db8::5")), NH_NONE);
}

#[test]
fn resync_sweeps_what_was_not_re_added() {
    let (mut w, r) = fib();
    for i in 0..10u32 {
        let net = Prefix::v4((0x0a00_0000 | (i << 16)).into(), 16).expect("net");
        w.add_route(Source::Kernel, net, via("192.0.2.1", Some(1)), A).expect("add");
    }
    w.add_route(Source::Static, p("10.3.0.0/16"), via("192.0.2.9", Some(9)), A).expect("static");
    w.begin_resync(Source::Kernel);
    for i in [1u32, 3, 5] {
        let net = Prefix::v4((0x0a00_0000 | (i << 16)).into(), 16).expect("net");
        w.add_route(Source::Kernel, net, via("192.0.2.1", Some(1)), A).expect("re-add");
    }
    w.add_route(Source::Kernel, p("10.200.0.0/16"), via("192.0.2.1", Some(1)), A).expect("new");
    assert_eq!(w.end_resync(Source::Kernel), 7);
    assert_ne!(r.lookup_v4(v4("10.1.0.1")), NH_NONE);
    assert_ne!(r.lookup_v4(v4("10.200.0.1")), NH_NONE);
    assert_eq!(r.lookup_v4(v4("10.2.0.1")), NH_NONE);
    assert_eq!(r.nexthop(r.lookup_v4(v4("10.3.0.1"))).ifindex, 9, "other sources untouched");
    assert_eq!(w.end_resync(Source::Kernel), 0, "nothing left to sweep");
}

#[test]
fn ecmp_spreads_flows_over_members() {
    let (mut w, r) = fib();
    w.add_route(Source::Connected, p("192.0.2.0/24"), RouteTarget::Connected { ifindex: 2 }, A).expect("conn");
    let members: Vec<(IpAddr, Option<u16>)> =
        vec![(ip("192.0.2.1"), None), (ip("192.0.2.2"), None), (ip("192.0.2.3"), None), (ip("10.9.9.9"), None)];
    w.add_route(Source::Static, p("0.0.0.0/0"), RouteTarget::Ecmp(members), A).expect("ecmp");
    let g = r.lookup_v4(v4("1.1.1.1"));
    assert_eq!(r.nexthop(g).kind, NhKind::Ecmp);
    let mut count = std::collections::HashMap::new();
    for h in 0..30_000u32 {
        let m = r.ecmp_pick(g, h.wrapping_mul(0x9e37_79b9));
        let nh = r.nexthop(m);
        assert_eq!(nh.kind, NhKind::Unicast);
        *count.entry(nh.gw).or_insert(0) += 1;
    }
    assert_eq!(count.len(), 3, "the unresolvable member is left out");
    assert!(count.values().all(|&c| c > 9_000), "{count:?}");
    let d = w.route_get(ip("1.1.1.1")).expect("route");
    assert_eq!(d.nexthops.len(), 3);
    assert_eq!(w.stats().ecmp_groups, 1);
}

#[test]
fn apply_reports_errors_and_applies_the_rest() {
    let (mut w, r) = fib();
    let ops = vec![
        RouteOp::Add(Source::Api, p("10.0.0.0/8"), RouteTarget::Blackhole, A),
        RouteOp::Del(Source::Api, p("11.0.0.0/8")),
        RouteOp::Add(Source::Api, p("12.0.0.0/8"), via("::1", None), A),
        RouteOp::Add(Source::Api, p("2001:db8::/32"), RouteTarget::Prohibit, A),
    ];
    let rep = w.apply(ops);
    assert_eq!((rep.applied, rep.failed), (2, 2));
    assert_eq!(rep.errors.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(r.nexthop(r.lookup_v4(v4("10.1.2.3"))).kind, NhKind::Blackhole);
    assert_eq!(r.nexthop(r.lookup_v6(v6("2001:db8::1"))).kind, NhKind::Prohibit);
    let s = w.stats();
    assert_eq!((s.v4_routes, s.v6_routes), (1, 1));
}

#[test]
fn route_get_finds_the_longest_installed_prefix() {
    let (mut w, _r) = fib();
    w.add_route(Source::Static, p("10.0.0.0/8"), RouteTarget::Blackhole, A).expect("a");
    w.add_route(Source::Static, p("10.1.0.0/16"), via("192.0.2.1", None), A).expect("inactive");
    let d = w.route_get(ip("10.1.2.3")).expect("some route");
    assert_eq!(d.prefix, p("10.0.0.0/8"), "inactive routes are skipped");
    assert!(d.best && d.active);
    assert_eq!(w.route_get(ip("11.0.0.1")), None);
}

#[test]
fn unknown_ids_are_none() {
    let (_w, r) = fib();
    assert_eq!(r.nexthop(NH_NONE).kind, NhKind::None);
    assert_eq!(r.nexthop(12345).kind, NhKind::None);
    assert_eq!(r.nexthop(u32::MAX).kind, NhKind::None);
    assert_eq!(r.ecmp_pick(u32::MAX, 1), u32::MAX);
}

#[test]
fn readers_never_see_an_unknown_next_hop_while_the_writer_churns() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let domain = tern_rcu::Domain::new();
    let (mut w, r) = new(FibConfig::default(), domain.clone());
    w.add_route(Source::Connected, p("192.0.2.0/24"), RouteTarget::Connected { ifindex: 1 }, A).expect("conn");
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let r = r.clone();
        let stop = Arc::clone(&stop);
        let qs = domain.register();
        std::thread::spawn(move || {
            let mut seen = 0u64;
            let mut out = [0; 64];
            let mut x = 0x1234_5678u32;
            while !stop.load(Ordering::Relaxed) {
                let dst: Vec<u32> = (0..64)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        0x0a00_0000 | (x & 0x00ff_ffff)
                    })
                    .collect();
                r.lookup_v4_batch(&dst, &mut out);
                for &id in &out {
                    let nh = r.nexthop(r.ecmp_pick(id, x));
                    if id != NH_NONE {
                        assert_ne!(nh.kind, NhKind::None, "id {id} from a lookup must be known");
                        seen += 1;
                    }
                }
                qs.quiescent();
            }
            seen
        })
    };
    let mut x = 99u32;
    for round in 0..3000u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let len = 8 + (x % 17) as u8;
        let net = Prefix::new_truncated(IpAddr::V4((0x0a00_0000 | (x & 0x00ff_ffff)).into()), len).expect("net");
        let gw = IpAddr::V4((0xc000_0200 | (round % 200 + 1)).into());
        if x & 3 == 0 {
            let _ = w.del_route(Source::Static, net);
        } else {
            let t = if x & 4 == 0 {
                RouteTarget::Via { gw, ifindex: None }
            } else {
                RouteTarget::Ecmp(vec![(gw, None), (IpAddr::V4((0xc000_0200 | (round % 7 + 1)).into()), Some(3))])
            };
            w.add_route(Source::Static, net, t, A).expect("add");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let seen = reader.join().expect("reader thread");
    assert!(seen > 0, "the reader did look things up");
    assert!(w.stats().nexthops < 1000, "next hops are recycled");
}

/// A lookup done by hand over the raw arrays, the way a BPF program
/// mirroring them would.
fn raw_lookup_v4(raw: &RawTrie<'_, std::sync::atomic::AtomicU16>, dst: u32) -> NhId {
    use std::sync::atomic::Ordering::Acquire;
    let mut e = u32::from(raw.top[(dst >> (32 - raw.top_bits)) as usize].load(Acquire));
    let mut off = raw.top_bits;
    while e >= raw.child_base {
        let chunk = ((u64::from(dst) << 32) << off >> (64 - raw.stride)) as usize;
        e = u32::from(raw.nodes[(((e - raw.child_base) as usize) << raw.stride) | chunk].load(Acquire));
        off += raw.stride;
    }
    e
}

#[test]
fn raw_views_and_changes_describe_the_lookup() {
    let (mut w, r) = fib();
    let _ = w.take_changes();
    w.add_route(Source::Static, p("10.0.0.0/8"), via("192.0.2.1", Some(1)), A).expect("a");
    w.add_route(Source::Static, p("10.1.2.128/25"), via("192.0.2.2", Some(1)), A).expect("b");
    let ch = w.take_changes();
    assert_eq!(ch.nexthops.len(), 1, "two adjacent next-hop ids: {:?}", ch.nexthops);
    let top_bits = r.raw().v4.top_bits;
    assert_eq!(ch.v4_top.iter().map(|r| r.len()).sum::<usize>(), 1 << (top_bits - 8), "the top entries of a /8");
    assert!(!ch.v4_blocks.is_empty(), "the /25 needed blocks");
    assert!(ch.v6_top.is_empty() && ch.v6_blocks.is_empty());
    let raw = r.raw();
    for dst in [v4("10.1.2.200"), v4("10.1.2.1"), v4("10.200.0.1"), v4("11.0.0.1")] {
        assert_eq!(raw_lookup_v4(&raw.v4, dst), r.lookup_v4(dst));
    }
    let id = r.lookup_v4(v4("10.1.2.200"));
    let word = raw.nexthops[id as usize * 4 + 3].load(std::sync::atomic::Ordering::Acquire);
    assert_eq!(word as u32, v4("192.0.2.2"), "gateway in word 3");
    w.set_neighbor(1, ip("192.0.2.2"), Some([1; 6]));
    assert_eq!(w.take_changes().nexthops, vec![id..id + 1], "a MAC update touches one entry");
    assert_eq!(w.take_changes(), FibChanges::default());
}

/// An ECMP route's changes name the group's next-hop entry, its members'
/// and the member slots: a mirror that copies only them (the XDP lane's
/// maps) holds the group (it once missed the group's own entry, and the
/// lane read a group made at run time as no route).
#[test]
fn changes_name_an_ecmp_group_and_its_members() {
    let (mut w, r) = fib();
    w.add_route(Source::Connected, p("192.0.2.0/24"), RouteTarget::Connected { ifindex: 2 }, A).expect("conn");
    let _ = w.take_changes();
    let members: Vec<(IpAddr, Option<u16>)> = vec![(ip("192.0.2.1"), None), (ip("192.0.2.2"), None)];
    w.add_route(Source::Static, p("10.0.0.0/8"), RouteTarget::Ecmp(members), A).expect("ecmp");
    let ch = w.take_changes();
    let has = |rs: &[std::ops::Range<u32>], x: u32| rs.iter().any(|r| r.contains(&x));
    let g = r.lookup_v4(v4("10.1.1.1"));
    assert_eq!(r.nexthop(g).kind, NhKind::Ecmp);
    assert!(has(&ch.nexthops, g), "the group's entry {g} in {:?}", ch.nexthops);
    let raw = r.raw();
    let base = raw.nexthops[g as usize * 4 + 1].load(std::sync::atomic::Ordering::Acquire) as u32;
    for slot in base..base + 2 {
        assert!(has(&ch.ecmp_members, slot), "member slot {slot} in {:?}", ch.ecmp_members);
        let m = raw.ecmp_members[slot as usize].load(std::sync::atomic::Ordering::Acquire);
        assert!(has(&ch.nexthops, m), "member {m} in {:?}", ch.nexthops);
    }
}

/// Trie entries are 16 bits: an IPv6 route whose next hop got an id of
/// 2^13 or more, or an IPv4 route with an id of 2^15 or more, is refused
/// with an error, stays in the RIB uninstalled, and leaves nothing stale
/// in the FIB; IPv4 takes the ids IPv6 cannot.
/// IPv6 routes can only install next hops below 2^13, IPv4 ones below
/// 2^15: IPv4 next hops take ids from 2^13 first, so that a router with
/// many IPv4 neighbours (a next hop each, for their host routes) still
/// installs IPv6 routes. With one shared lowest-first range, the IPv6
/// route below would get id 10,001 and be refused.
#[test]
fn many_ipv4_next_hops_leave_the_ipv6_ids_free() {
    let (mut w, r) = fib();
    let ops: Vec<RouteOp> = (1..=10_000u32)
        .map(|i| {
            let a = std::net::Ipv4Addr::from(0x0a00_0000 | i);
            RouteOp::Add(
                Source::Static,
                Prefix::V4 { addr: a, len: 32 },
                RouteTarget::Via { gw: IpAddr::V4(a), ifindex: Some(1) },
                A,
            )
        })
        .collect();
    assert!(w.apply(ops).errors.is_empty());
    assert_eq!(w.stats().nexthops, 10_000);
    let first = r.lookup_v4(0x0a00_0001);
    assert!((1 << 13..1 << 15).contains(&first), "IPv4 ids from 2^13: {first}");
    let q6 = p("2001:db8::/32");
    w.add_route(Source::Static, q6, via("fe80::1", Some(1)), A).expect("an IPv6 id is free");
    let id6 = r.lookup_v6(v6("2001:db8::1"));
    assert!((1..1 << 13).contains(&id6), "IPv6 id {id6}");
    // Every IPv4 route still answers with its own next hop.
    assert!((1..=10_000u32).all(|i| r.lookup_v4(0x0a00_0000 | i) != NH_NONE));
}

#[test]
fn next_hop_ids_past_the_entries_are_refused_cleanly() {
    let (mut w, r) = fib();
    // 8,191 next hops alive (ids 1..=8191), each of an IPv6 route.
    let ops: Vec<RouteOp> = (1..=8191u32)
        .map(|i| {
            let q =
                Prefix::V6 { addr: std::net::Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(i) << 64), len: 64 };
            let gw = IpAddr::V6(std::net::Ipv6Addr::from(0xfe80_u128 << 112 | u128::from(i)));
            RouteOp::Add(Source::Static, q, RouteTarget::Via { gw, ifindex: Some(1) }, A)
        })
        .collect();
    assert!(w.apply(ops).errors.is_empty());
    assert_eq!(w.stats().nexthops, 8191);
    let wide6 = Err(FibError::Full("IPv6 next-hop id space (13 bits)"));
    let q6 = p("2001:db8:ffff::/48");
    assert_eq!(w.add_route(Source::Static, q6, via("fe80::ffff:1", Some(1)), A), wide6, "ids 1..8192 taken");
    assert_eq!(r.lookup_v6(v6("2001:db8:ffff::1")), NH_NONE, "not installed");
    assert!(w.routes().any(|d| d.prefix == q6), "kept in the RIB");
    // IPv4 routes take ids 8192..=32767, the range IPv6 cannot use.
    let ops: Vec<RouteOp> = (8192..=32767u32)
        .map(|i| {
            let q = Prefix::V4 { addr: std::net::Ipv4Addr::from(0x1400_0000 | i << 8), len: 24 };
            let gw = IpAddr::V4(std::net::Ipv4Addr::from(0x6440_0000 | i));
            RouteOp::Add(Source::Static, q, RouteTarget::Via { gw, ifindex: Some(1) }, A)
        })
        .collect();
    assert!(w.apply(ops).errors.is_empty());
    assert_eq!(w.stats().nexthops, 32768, "with the refused IPv6 route's");
    assert_eq!(r.lookup_v4(0x1400_0000 | 8192 << 8 | 5), 8192, "IPv4 holds ids IPv6 cannot");
    assert_eq!(r.lookup_v4(0x1400_0000 | 32767 << 8 | 5), 32767);
    let wide = Err(FibError::Full("IPv4 next-hop id space (15 bits)"));
    assert_eq!(
        w.add_route(Source::Static, p("10.0.0.0/8"), via("192.0.2.1", Some(1)), A),
        wide,
        "every id below 2^15 taken"
    );
    assert_eq!(r.lookup_v4(v4("10.1.2.3")), NH_NONE, "not installed");
    assert!(w.routes().any(|d| d.prefix == p("10.0.0.0/8")), "kept in the RIB");
    assert!(w.route_get(ip("10.1.2.3")).is_none(), "the RIB knows it is not installed");
    // Ids 7 and 8 freed (the lowest free id is taken first; IPv4 falls back
    // to the IPv6 range when its own is full), two routes on them, then the
    // longer one moved to a wide id.
    for i in [7u128, 8] {
        let q = Prefix::V6 { addr: std::net::Ipv6Addr::from(0x2001_0db8_u128 << 96 | i << 64), len: 64 };
        w.del_route(Source::Static, q).expect("del v6");
    }
    w.del_route(Source::Static, p("10.0.0.0/8")).expect("del, and ids 7 and 8 are free after their grace period");
    w.add_route(Source::Static, p("10.0.0.0/8"), RouteTarget::Blackhole, A).expect("id 7");
    w.add_route(Source::Static, p("10.1.0.0/16"), RouteTarget::Prohibit, A).expect("id 8");
    assert_eq!((r.lookup_v4(v4("10.2.0.1")), r.lookup_v4(v4("10.1.2.3"))), (7, 8));
    let errors = w.stats().errors;
    assert_eq!(w.add_route(Source::Static, p("10.1.0.0/16"), via("192.0.2.9", Some(1)), A), wide);
    assert_eq!(w.stats().errors, errors + 1);
    let d = w.routes().find(|d| d.prefix == p("10.1.0.0/16")).expect("kept in the RIB");
    assert!(d.nh >= 1 << 15);
    assert!(w.route_get(ip("10.1.2.3")).is_some_and(|g| g.prefix == p("10.0.0.0/8")), "the RIB: not installed");
    assert_eq!(r.lookup_v4(v4("10.1.2.3")), 7, "the /8 answers: the /16's old next hop is gone");
    // Deleting the /8 leaves nothing of either prefix behind.
    w.del_route(Source::Static, p("10.0.0.0/8")).expect("del /8");
    assert_eq!(r.lookup_v4(v4("10.1.2.3")), NH_NONE);
    w.del_route(Source::Static, p("10.1.0.0/16")).expect("del /16");
    assert_eq!(r.lookup_v4(v4("10.1.2.3")), NH_NONE);
    // An IPv6 route on a narrow id is installed.
    w.del_route(Source::Static, q6).expect("del the uninstalled /48");
    w.add_route(Source::Static, q6, RouteTarget::Blackhole, A).expect("a narrow id");
    assert!((1..1 << 13).contains(&r.lookup_v6(v6("2001:db8:ffff::1"))));
}

#[test]
fn handles_cross_threads() {
    fn reader<T: Send + Sync + Clone>() {}
    fn writer<T: Send>() {}
    reader::<FibReader>();
    writer::<FibWriter>();
}

/// The whole writer (RIB, cached targets, the trie's deletes that ask the
/// RIB for a covering prefix's next hop) against the naive reference:
/// random nested prefixes of one family added, replaced and deleted one
/// call each and in batches, every lookup compared by gateway.
mod writer_against_reference {
    use proptest::prelude::*;

    use super::*;
    use crate::lpm::naive::NaiveLpm;
    use crate::prefix::mask128;

    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// A prefix near one of a few roots, so that prefixes nest (inside one
    /// trie block, too).
    fn prefix(rng: &mut u64, v6: bool) -> Prefix {
        let r = next(rng);
        let (root, width): (u128, u8) = if v6 { (0x2001_0db8 << 96, 128) } else { (0x0a00_0000 << 96, 32) };
        let len = match r % 4 {
            0 => 8 + (r >> 8) as u8 % 17,
            1 => 24 + (r >> 8) as u8 % 9,
            _ if v6 => 32 + (r >> 8) as u8 % 33,
            _ => (r >> 8) as u8 % 33,
        };
        // Debug builds skip IPv4's shortest prefixes (millions of top
        // entries each, seconds unoptimised); release builds test them.
        let len = len.max(if cfg!(debug_assertions) && !v6 { 9 } else { 0 }).min(width);
        let noise = (u128::from(next(rng)) << 64 | u128::from(next(rng))) >> (8 + (r >> 16) % 24);
        let bits = (root ^ noise) & mask128(len);
        if v6 { Prefix::V6 { addr: bits.into(), len } } else { Prefix::V4 { addr: ((bits >> 96) as u32).into(), len } }
    }

    fn gw(v6: bool, k: u64) -> IpAddr {
        if v6 { ip(&format!("fd00::{}", k + 1)) } else { ip(&format!("100.64.0.{}", k + 1)) }
    }

    fn check(r: &FibReader, naive: &NaiveLpm, key: u128, v6: bool) {
        let got = if v6 { r.lookup_v6(key) } else { r.lookup_v4((key >> 96) as u32) };
        let want = naive.lookup(key);
        let got_gw = (got != NH_NONE).then(|| r.nexthop(got).gw);
        let want_gw = (want != NH_NONE).then(|| gw(v6, u64::from(want) - 1));
        assert_eq!(got_gw, want_gw, "key {key:#034x}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Operations go one call each (`add_route`, `del_route`) or into
        /// batches of 1-24 (`apply`, which prefetches several operations
        /// ahead: a batch may add, delete and re-add one prefix inside its
        /// window); the reference is updated in order, and batches are
        /// applied before every check and every single call.
        #[test]
        fn interleaved_routes_match_the_reference(v6 in any::<bool>(), seed in any::<u64>(), n in 50usize..300) {
            let (mut w, r) = fib();
            let mut naive = NaiveLpm::new();
            let mut rng = seed | 1;
            let mut live: Vec<Prefix> = Vec::new();
            let width = if v6 { 128 } else { 32 };
            let mut batch: Vec<RouteOp> = Vec::new();
            let mut batch_max = 1 + next(&mut rng) as usize % 24;
            let flush = |w: &mut FibWriter, batch: &mut Vec<RouteOp>| {
                if !batch.is_empty() {
                    let rep = w.apply(std::mem::take(batch));
                    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
                }
            };
            for i in 0..n {
                let op = next(&mut rng) % 8;
                let batched = !next(&mut rng).is_multiple_of(3);
                if op < 5 || live.is_empty() {
                    let q = prefix(&mut rng, v6);
                    let k = next(&mut rng) % 6;
                    let t = RouteTarget::Via { gw: gw(v6, k), ifindex: Some(1) };
                    if batched {
                        batch.push(RouteOp::Add(Source::Fpm, q, t, A));
                    } else {
                        flush(&mut w, &mut batch);
                        w.add_route(Source::Fpm, q, t, A).expect("room");
                    }
                    naive.insert(q.bits128(), q.len(), k as NhId + 1);
                    live.push(q);
                } else {
                    let q = live.swap_remove(next(&mut rng) as usize % live.len());
                    if naive.remove(q.bits128(), q.len()).is_some() {
                        if batched {
                            batch.push(RouteOp::Del(Source::Fpm, q));
                        } else {
                            flush(&mut w, &mut batch);
                            w.del_route(Source::Fpm, q).expect("present");
                        }
                    }
                    live.retain(|x| *x != q);
                }
                if batch.len() >= batch_max {
                    flush(&mut w, &mut batch);
                    batch_max = 1 + next(&mut rng) as usize % 24;
                }
                if i % 16 == 0 {
                    flush(&mut w, &mut batch);
                    for q in &live {
                        let host = !mask128(q.len()) & mask128(width);
                        check(&r, &naive, q.bits128(), v6);
                        check(&r, &naive, q.bits128() | host, v6);
                        check(&r, &naive, q.bits128() | (u128::from(next(&mut rng)) << 64 | u128::from(next(&mut rng))) & host, v6);
                    }
                }
            }
            flush(&mut w, &mut batch);
            for q in &live {
                check(&r, &naive, q.bits128(), v6);
            }
            for q in &live {
                let _ = w.del_route(Source::Fpm, *q);
            }
            prop_assert_eq!(w.stats().nexthops, 0, "every next hop released with its last route");
            for _ in 0..64 {
                check(&r, &NaiveLpm::new(), u128::from(next(&mut rng)) << 64, v6);
            }
        }
    }
}

/// `FibWriter::stats` keeps the RIB's figures as counters updated on each
/// insert and delete instead of walking the RIB; after any sequence of
/// adds, replaces and deletes (several sources on few prefixes, so that
/// entry lists spill to the heap, grow and shrink back; single calls,
/// batches with failures, a resync sweep) they equal a full walk.
mod stats_counters_against_a_walk {
    use proptest::prelude::*;

    use super::*;

    const SOURCES: [Source; 4] = [Source::Static, Source::Kernel, Source::Fpm, Source::Api];

    fn op(k: u8, s: u8, n: u8, g: u8) -> RouteOp {
        let prefix = if n.is_multiple_of(5) {
            Prefix::V6 { addr: std::net::Ipv6Addr::new(0x2001, 0xdb8, u16::from(n), 0, 0, 0, 0, 0), len: 48 }
        } else {
            Prefix::V4 { addr: std::net::Ipv4Addr::new(10, n, 0, 0), len: 16 }
        };
        let source = SOURCES[usize::from(s) % SOURCES.len()];
        if k < 3 {
            let gw = if prefix.is_v4() {
                ip(&format!("192.0.2.{}", g % 3 + 1))
            } else {
                ip(&format!("fd00::{}", g % 3 + 1))
            };
            let attrs = RouteAttrs { distance: None, metric: u32::from(g % 2) };
            RouteOp::Add(source, prefix, RouteTarget::Via { gw, ifindex: Some(1) }, attrs)
        } else {
            // May name a route that is not there: a counted failure.
            RouteOp::Del(source, prefix)
        }
    }

    fn same(w: &FibWriter) -> Result<(), TestCaseError> {
        let (entries, heap) = w.walk_rib_counts();
        prop_assert_eq!(w.rib_counts(), (entries, heap));
        prop_assert_eq!(w.stats().rib_entries, entries);
        Ok(())
    }

    proptest! {
        #[test]
        fn rib_counters_equal_a_walk(
            ops in proptest::collection::vec((0u8..5, any::<u8>(), 0u8..12, any::<u8>(), 0u8..4), 1..400),
        ) {
            let (mut w, _r) = fib();
            let mut batch = Vec::new();
            for (k, s, n, g, how) in ops {
                let o = op(k, s, n, g);
                match how {
                    0 => match o {
                        RouteOp::Add(s, p, t, a) => {
                            let _ = w.add_route(s, p, t, a);
                        }
                        RouteOp::Del(s, p) => {
                            let _ = w.del_route(s, p);
                        }
                    },
                    1 | 2 => batch.push(o),
                    _ => {
                        w.apply(std::mem::take(&mut batch));
                        if g.is_multiple_of(7) {
                            // Mark and sweep one source: what it did not
                            // re-add goes.
                            let s = SOURCES[usize::from(s) % SOURCES.len()];
                            w.begin_resync(s);
                            w.end_resync(s);
                        }
                    }
                }
                same(&w)?;
            }
            w.apply(batch);
            same(&w)?;
        }
    }
}

/// `apply_all_or_nothing`: a batch that fails part way (the IPv4 trie out
/// of blocks) leaves every route as it was (deleted, replaced, added on a
/// prefix another source has, added new) and what readers look up too;
/// a batch that fits is applied whole.
#[test]
fn all_or_nothing_batches_leave_nothing_of_a_failure() {
    let cfg = FibConfig { v4_nodes: 4, ..Default::default() };
    let (mut w, r) = new(cfg, tern_rcu::Domain::new());
    let gw = |i: u8| via(&format!("192.0.2.{i}"), Some(1));
    w.add_route(Source::Static, p("10.0.0.0/8"), gw(1), A).expect("static");
    w.add_route(Source::Api, p("192.0.2.0/24"), gw(1), A).expect("api");
    w.add_route(Source::Api, p("198.51.100.0/24"), gw(2), A).expect("api");
    let snapshot = |w: &FibWriter| -> Vec<String> {
        w.routes()
            .map(|d| {
                format!("{} {} {:?} {} {} {} {}", d.prefix, d.source, d.target, d.distance, d.metric, d.best, d.active)
            })
            .collect()
    };
    let probes = ["10.1.0.1", "10.1.5.1", "192.0.2.9", "198.51.100.9", "203.0.113.9", "10.9.9.9"].map(v4);
    let seen = |r: &FibReader| probes.map(|a| (r.lookup_v4(a) != NH_NONE).then(|| r.nexthop(r.lookup_v4(a)).gw));
    let (routes, looked) = (snapshot(&w), seen(&r));
    let stats = w.stats();

    let mut ops = vec![
        RouteOp::Del(Source::Api, p("198.51.100.0/24")),
        RouteOp::Add(Source::Api, p("192.0.2.0/24"), gw(3), RouteAttrs { distance: None, metric: 5 }),
        RouteOp::Add(Source::Api, p("10.0.0.0/8"), RouteTarget::Blackhole, A),
        RouteOp::Add(Source::Api, p("203.0.113.0/24"), gw(1), A),
        RouteOp::Del(Source::Api, p("192.0.2.0/24")),
        RouteOp::Add(Source::Api, p("192.0.2.0/24"), gw(4), A),
    ];
    // Host routes in distinct /24s: a trie block each, more than 4.
    ops.extend((0..10).map(|i| RouteOp::Add(Source::Api, p(&format!("10.1.{i}.1/32")), gw(2), A)));
    let (i, e) = w.apply_all_or_nothing(ops.clone()).expect_err("the trie runs out of blocks");
    assert!(matches!(e, FibError::Full(_)) && i > 6, "{i}: {e}");
    assert_eq!(snapshot(&w), routes, "every route as it was");
    assert_eq!(seen(&r), looked, "and what readers find");
    assert_eq!((w.stats().rib_entries, w.stats().v4_routes), (stats.rib_entries, stats.v4_routes));

    // Without the host routes (their blocks wait out a grace period
    // before reuse), it all goes in.
    ops.truncate(6);
    assert_eq!(w.apply_all_or_nothing(ops), Ok(6));
    assert!(w.route(Source::Api, p("198.51.100.0/24")).is_none());
    assert_eq!(w.route(Source::Api, p("192.0.2.0/24")).map(|d| d.target), Some(gw(4)));
    assert_eq!(w.route(Source::Api, p("10.0.0.0/8")).map(|d| d.target), Some(RouteTarget::Blackhole));
    assert_eq!(r.nexthop(r.lookup_v4(v4("203.0.113.9"))).gw, ip("192.0.2.1"));
}

/// Tunnel adjacencies (`tunnel.rs`): a tunnel is stacked on what its
/// remote resolves to, and re-stacked when a route covering it comes,
/// changes or goes, or its neighbour resolves.
#[test]
fn tunnel_follows_the_route_to_its_remote() {
    let (mut w, r) = fib();
    let remote = ip("10.0.2.2");
    let mac = [2, 0, 0, 0, 0, 9];
    assert_eq!(r.tunnel(5), None, "not a tunnel yet");
    w.tunnel_set(5, remote);
    assert_eq!(r.tunnel(5), Some(TunnelAdj { nh: NH_NONE, via_tunnel: false }), "no route to the remote");

    w.add_route(Source::Connected, p("10.0.2.0/24"), RouteTarget::Connected { ifindex: 1 }, A).expect("conn");
    let adj = r.tunnel(5).expect("tunnel");
    assert_eq!(adj.nh, r.lookup_v4(v4("10.0.2.2")));
    assert_eq!((r.nexthop(adj.nh).kind, r.nexthop(adj.nh).ifindex), (NhKind::Glean, 1));

    // The neighbour resolves: its host route, a Unicast next hop.
    w.set_neighbor(1, remote, Some(mac));
    let nh = r.nexthop(r.tunnel(5).expect("tunnel").nh);
    assert_eq!((nh.kind, nh.ifindex, nh.gw, nh.mac), (NhKind::Unicast, 1, remote, Some(mac)));

    // A more specific route through another neighbour and interface, then
    // its removal.
    w.add_route(Source::Connected, p("10.0.3.0/24"), RouteTarget::Connected { ifindex: 3 }, A).expect("conn 3");
    w.add_route(Source::Static, p("10.0.2.2/32"), via("10.0.3.9", None), A).expect("static");
    let nh = r.nexthop(r.tunnel(5).expect("tunnel").nh);
    assert_eq!((nh.ifindex, nh.gw), (3, ip("10.0.3.9")), "the static /32 (distance 1) over the neighbour's (250)");
    w.del_route(Source::Static, p("10.0.2.2/32")).expect("del");
    let nh = r.nexthop(r.tunnel(5).expect("tunnel").nh);
    assert_eq!((nh.ifindex, nh.gw), (1, remote), "back on the neighbour");

    // The remote routed into the tunnel itself: stacked, flagged, no loop.
    w.add_route(Source::Api, p("10.0.2.2/32"), RouteTarget::Connected { ifindex: 5 }, A).expect("into tunnel");
    assert!(r.tunnel(5).expect("tunnel").via_tunnel);
    // Into another tunnel: flagged as soon as that one is a tunnel.
    w.add_route(Source::Api, p("10.0.2.2/32"), RouteTarget::Connected { ifindex: 6 }, A).expect("into 6");
    assert!(!r.tunnel(5).expect("tunnel").via_tunnel, "6 is no tunnel yet");
    w.tunnel_set(6, ip("10.0.3.3"));
    assert!(r.tunnel(5).expect("tunnel").via_tunnel);
    assert!(!r.tunnel(6).expect("tunnel 6").via_tunnel, "6's remote leaves by interface 3");
    assert_eq!(w.tunnel(6).map(|(a, t)| (a, t.nh)), Some((ip("10.0.3.3"), r.lookup_v4(v4("10.0.3.3")))));
    w.del_route(Source::Api, p("10.0.2.2/32")).expect("del");
    assert_eq!(r.nexthop(r.tunnel(5).expect("tunnel").nh).gw, remote);

    // The neighbour goes: back to the connected route.
    w.set_neighbor(1, remote, None);
    assert_eq!(r.nexthop(r.tunnel(5).expect("tunnel").nh).kind, NhKind::Glean);
    w.del_route(Source::Connected, p("10.0.2.0/24")).expect("del conn");
    assert_eq!(r.tunnel(5).map(|t| t.nh), Some(NH_NONE));

    assert!(w.tunnel_remove(5));
    assert!(!w.tunnel_remove(5));
    assert_eq!(r.tunnel(5), None);
    assert!(r.tunnel(6).is_some());
}

#[test]
fn tunnel_to_an_ipv6_remote_and_ecmp() {
    let (mut w, r) = fib();
    w.tunnel_set(7, ip("2001:db8:2::2"));
    w.add_route(Source::Connected, p("2001:db8:2::/64"), RouteTarget::Connected { ifindex: 1 }, A).expect("conn");
    let adj = r.tunnel(7).expect("tunnel");
    assert_eq!(adj.nh, r.lookup_v6(v6("2001:db8:2::2")));
    assert_eq!(r.nexthop(adj.nh).ifindex, 1);
    let ecmp = RouteTarget::Ecmp(vec![(ip("fe80::1"), Some(1)), (ip("fe80::2"), Some(7))]);
    w.add_route(Source::Static, p("2001:db8::/32"), ecmp, A).expect("ecmp");
    w.del_route(Source::Connected, p("2001:db8:2::/64")).expect("del");
    let adj = r.tunnel(7).expect("tunnel");
    assert_eq!(r.nexthop(adj.nh).kind, NhKind::Ecmp);
    assert!(adj.via_tunnel, "a member leaves through the tunnel itself");
}

/// After any churn of routes (single calls and batches, several sources,
/// targets through plain interfaces and through the tunnels themselves,
/// ECMP) and neighbours, each tunnel's stacked adjacency equals a fresh
/// lookup of its remote, and its recursion flag says whether that next
/// hop (a member of it) leaves through a tunnel.
mod tunnels_against_fresh_lookups {
    use proptest::prelude::*;

    use super::*;

    /// (ifindex, remote) of the tunnels.
    const TUNNELS: [(u16, &str); 3] = [(10, "10.0.2.2"), (11, "10.0.3.7"), (12, "2001:db8:2::2")];

    fn prefix(n: u8, len: u8) -> Prefix {
        if n.is_multiple_of(4) {
            let len = 32 + len % 97;
            Prefix::new_truncated(ip("2001:db8:2::2"), len).expect("v6")
        } else {
            let a = if n % 4 == 1 { "10.0.2.2" } else { "10.0.3.7" };
            Prefix::new_truncated(ip(a), 8 + len % 25).expect("v4")
        }
    }

    fn target(v6: bool, t: u8, g: u8) -> RouteTarget {
        let ifx = [1u16, 2, 10, 11, 12][usize::from(g % 5)];
        let gw = |k: u8| if v6 { ip(&format!("fe80::{}", k % 3 + 1)) } else { ip(&format!("10.0.{}.1", k % 3 + 2)) };
        match t % 5 {
            0 => RouteTarget::Connected { ifindex: ifx },
            1 => RouteTarget::Via { gw: gw(g), ifindex: Some(ifx) },
            2 => RouteTarget::Via { gw: gw(g), ifindex: None },
            3 => RouteTarget::Ecmp(vec![
                (gw(g), Some(ifx)),
                (gw(g.wrapping_add(1)), Some([1, 2, 10][usize::from(g % 3)])),
            ]),
            _ => RouteTarget::Blackhole,
        }
    }

    fn check(w: &FibWriter, r: &FibReader) -> Result<(), TestCaseError> {
        for (i, a) in TUNNELS {
            let remote = ip(a);
            let want = match remote {
                IpAddr::V4(x) => r.lookup_v4(x.into()),
                IpAddr::V6(x) => r.lookup_v6(x.into()),
            };
            let adj = r.tunnel(i).expect("tunnel");
            prop_assert_eq!(adj.nh, want, "tunnel {}", i);
            let n = r.nexthop(want);
            let members: Vec<NextHop> = match n.kind {
                NhKind::Ecmp => (0..64u32).map(|h| r.nexthop(r.ecmp_pick(want, h << 26))).collect(),
                _ => vec![n],
            };
            let via = members.iter().any(|m| {
                matches!(m.kind, NhKind::Unicast | NhKind::Glean) && TUNNELS.iter().any(|(t, _)| *t == m.ifindex)
            });
            prop_assert_eq!(adj.via_tunnel, via, "tunnel {} via a tunnel", i);
            prop_assert_eq!(w.tunnel(i), Some((remote, adj)));
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn stacked_next_hop_is_a_fresh_lookup(
            ops in proptest::collection::vec((0u8..8, any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()), 1..120),
        ) {
            let (mut w, r) = fib();
            for (i, a) in TUNNELS {
                w.tunnel_set(i, ip(a));
            }
            let mut batch = Vec::new();
            for (k, n, len, t, g) in ops {
                let pf = prefix(n, len);
                let source = [Source::Connected, Source::Static, Source::Api][usize::from(g % 3)];
                let op = if k < 4 {
                    RouteOp::Add(source, pf, target(!pf.is_v4(), t, g), A)
                } else {
                    RouteOp::Del(source, pf)
                };
                match k {
                    0 | 4 => match op {
                        RouteOp::Add(s, p, t, a) => {
                            let _ = w.add_route(s, p, t, a);
                        }
                        RouteOp::Del(s, p) => {
                            let _ = w.del_route(s, p);
                        }
                    },
                    6 => {
                        let (ifx, a) = [(1, "10.0.2.2"), (2, "10.0.3.7"), (1, "2001:db8:2::2")][usize::from(g % 3)];
                        w.set_neighbor(ifx, ip(a), (t % 2 == 0).then_some([2, 0, 0, 0, 0, t]));
                    }
                    7 => {
                        w.apply(std::mem::take(&mut batch));
                    }
                    _ => batch.push(op),
                }
                check(&w, &r)?;
            }
            w.apply(batch);
            check(&w, &r)?;
        }
    }
}

/// Remote-access clients: many /32 host routes to tunnels under one pool
/// route, added and removed in a scattered order, against a model of
/// which address has a host route to which interface. Every address of
/// the pool (and one past each end) is looked up in the FIB and resolved
/// through the connected subnets; a gateway route through one client
/// follows its host route as it comes and goes (the writer's
/// gateway re-resolution of a host prefix).
#[test]
fn many_host_routes_under_one_prefix_match_a_model() {
    use std::collections::HashMap;
    use std::net::Ipv4Addr;
    const POOL_IF: u16 = 7;
    let (mut w, r) = fib();
    let base = v4("10.128.0.0");
    let pool = p("10.128.0.0/22");
    w.add_route(Source::Connected, pool, RouteTarget::Connected { ifindex: POOL_IF }, A).expect("pool");
    // A gateway route through client .3 (to be): resolved by the pool now.
    let gw = IpAddr::V4(Ipv4Addr::from(base + 3));
    let remote = p("198.51.100.0/24");
    w.add_route(Source::Static, remote, RouteTarget::Via { gw, ifindex: None }, A).expect("via client");
    let mut model: HashMap<u32, u16> = HashMap::new();
    let check = |w: &FibWriter, model: &HashMap<u32, u16>, pool_on: bool| {
        for a in base.wrapping_sub(1)..=base + 1024 {
            let want = model.get(&a).copied().or((pool_on && (base..base + 1024).contains(&a)).then_some(POOL_IF));
            let nh = r.lookup_v4(a);
            let got = (nh != NH_NONE).then(|| r.nexthop(nh).ifindex);
            assert_eq!(got, want, "lookup {}", Ipv4Addr::from(a));
            assert_eq!(w.connected_interface(IpAddr::V4(Ipv4Addr::from(a))), want, "connected {}", Ipv4Addr::from(a));
        }
        let via = r.nexthop(r.lookup_v4(v4("198.51.100.1")));
        assert_eq!(Some(via.ifindex), model.get(&(base + 3)).copied().or(Some(POOL_IF)), "via the client");
    };
    // 1000 clients, in the scattered order 1, 1+389, ... (389 is odd, so
    // i * 389 mod 1024 visits each address once).
    let order: Vec<u32> = (0..1000u32).map(|i| (1 + i * 389) % 1024).collect();
    for (k, &off) in order.iter().enumerate() {
        let ifindex = 100 + (k % 3) as u16;
        let host = Prefix::host(IpAddr::V4(Ipv4Addr::from(base + off)));
        w.add_route(Source::Static, host, RouteTarget::Connected { ifindex }, A).expect("host route");
        model.insert(base + off, ifindex);
        if k % 250 == 0 {
            check(&w, &model, true);
        }
    }
    check(&w, &model, true);
    // Re-adding one to another tunnel moves it.
    let host = Prefix::host(IpAddr::V4(Ipv4Addr::from(base + order[0])));
    w.add_route(Source::Static, host, RouteTarget::Connected { ifindex: 200 }, A).expect("move");
    model.insert(base + order[0], 200);
    check(&w, &model, true);
    // Remove every other, in reverse, then the rest.
    for pass in [0, 1] {
        for (k, &off) in order.iter().enumerate().rev().filter(|(k, _)| k % 2 == pass) {
            let host = Prefix::host(IpAddr::V4(Ipv4Addr::from(base + off)));
            w.del_route(Source::Static, host).expect("del host route");
            model.remove(&(base + off));
            if k % 200 == 1 {
                check(&w, &model, true);
            }
        }
        check(&w, &model, true);
        assert!(w.del_route(Source::Static, Prefix::host(IpAddr::V4(Ipv4Addr::from(base + order[pass])))).is_err());
    }
    assert!(model.is_empty());
    w.del_route(Source::Connected, pool).expect("del pool");
    for a in base..base + 1024 {
        assert_eq!(r.lookup_v4(a), NH_NONE);
        assert_eq!(w.connected_interface(IpAddr::V4(Ipv4Addr::from(a))), None);
    }
}

/// A neighbour's host route follows the connected subnets of its
/// interface when those are host routes to tunnels: it exists exactly
/// while some connected prefix of its interface holds its address.
#[test]
fn neighbor_route_follows_connected_host_routes() {
    let (mut w, _r) = fib();
    let mac = Some([2, 0, 0, 0, 0, 1]);
    let pool = p("10.128.0.0/22");
    w.add_route(Source::Connected, pool, RouteTarget::Connected { ifindex: 7 }, A).expect("pool");
    let (a5, a6) = (ip("10.128.0.5"), ip("10.128.0.6"));
    w.set_neighbor(100, a5, mac);
    w.set_neighbor(7, a6, mac);
    let has = |w: &FibWriter, a: IpAddr| w.route(Source::Neighbor, Prefix::host(a)).is_some();
    assert!(!has(&w, a5), "no subnet of if 100 holds .5");
    assert!(has(&w, a6), "the pool on if 7 holds .6");
    let tgt = RouteTarget::Connected { ifindex: 100 };
    w.add_route(Source::Static, Prefix::host(a5), tgt.clone(), A).expect("host .5");
    w.add_route(Source::Static, Prefix::host(a6), tgt, A).expect("host .6");
    assert!(has(&w, a5), "the host route on if 100 holds .5");
    assert!(has(&w, a6), "the pool still holds .6 on if 7");
    w.del_route(Source::Static, Prefix::host(a5)).expect("del .5");
    assert!(!has(&w, a5));
    w.del_route(Source::Connected, pool).expect("del pool");
    assert!(!has(&w, a6), "nothing of if 7 holds .6");
    w.del_route(Source::Static, Prefix::host(a6)).expect("del .6");
    assert!(!has(&w, a6));
}
