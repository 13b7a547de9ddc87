//! A GRE tunnel's adjacency is stacked on the route to its remote and
//! re-stacked when that route changes (issue 37 item 2, VPP's midchain):
//! packets into the tunnel follow the outer next hop the FIB has now, from
//! the first packet after the change, on the direct encapsulation.

mod common;

use common::pkt::*;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};
use tern_control::config;
use tern_control::reload::reload;
use tern_control::router::Router;
use tern_fib::{Prefix, RouteAttrs, RouteTarget, Source};

const TERN_LAN: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const HOST_A: [u8; 6] = [0x02, 0, 0, 0, 1, 0xaa];
const PEER_WAN: [u8; 6] = [0x02, 0, 0, 0, 2, 2];
const PEER_DMZ: [u8; 6] = [0x02, 0, 0, 0, 3, 9];

const CONFIG: &str = r#"
[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24"]

[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24"]

[[interface]]
name = "dmz"
driver = "memory"
mac = "02:00:00:00:03:01"
addresses = ["10.0.3.1/24"]

[[tunnel]]
name = "gre0"
local = "10.0.2.1"
remote = "10.0.2.2"
addresses = ["192.168.255.1/24"]

[[route]]
prefix = "10.9.0.0/16"
interface = "gre0"

[[neighbor_entry]]
interface = "wan"
address = "10.0.2.2"
mac = "02:00:00:00:02:02"

[[neighbor_entry]]
interface = "dmz"
address = "10.0.3.9"
mac = "02:00:00:00:03:09"
"#;

fn a4(s: &str) -> Ipv4Addr {
    s.parse().expect("ipv4")
}

/// Packets `ip4-lookup` has seen so far (inner and outer passes).
fn lookups(r: &Router) -> u64 {
    let w = &r.workers()[0];
    let id = usize::from(w.graph.node_id("ip4-lookup").expect("ip4-lookup"));
    w.stats.snapshot().nodes.get(id).map_or(0, |n| n[1])
}

/// Sends one packet from the lan into the tunnel and returns the only
/// frame that leaves, with the interface it left by.
fn through_tunnel(r: &mut Router, n: u8) -> (&'static str, Vec<u8>) {
    let payload = [n; 32];
    let ip = ipv4(a4("10.0.1.2"), a4("10.9.0.5"), 17, 64, &udp4(a4("10.0.1.2"), a4("10.9.0.5"), 7, 9, &payload));
    assert!(r.mem_ports("lan").expect("lan")[0].inject(&eth(TERN_LAN, HOST_A, 0x0800, &ip)));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while out.is_empty() {
        assert!(Instant::now() < deadline, "packet {n} never left");
        if !r.poll() {
            std::thread::sleep(Duration::from_millis(1));
        }
        for iface in ["lan", "wan", "dmz"] {
            out.extend(r.mem_ports(iface).expect("iface")[0].take_sent().into_iter().map(|f| (iface, f)));
        }
    }
    assert_eq!(out.len(), 1, "one frame out: {out:02x?}");
    out.remove(0)
}

/// Checks a frame is packet `n` inside the tunnel's outer header, sent to
/// `mac`.
fn assert_encapsulated(f: &[u8], mac: [u8; 6], n: u8) {
    assert_eq!(f.get(0..6), Some(&mac[..]), "outer next hop");
    let outer = parse_v4(f).expect("outer IPv4");
    assert_eq!((outer.src, outer.dst, outer.proto), (a4("10.0.2.1"), a4("10.0.2.2"), 47));
    assert!(outer.header_ok);
    let (_, inner) = parse_gre(&outer.l4).expect("GRE");
    let inner = parse_v4(&[&[0u8; 12][..], &[8, 0], inner].concat()).expect("inner");
    assert_eq!(inner.dst, a4("10.9.0.5"));
    assert!(inner.l4.ends_with(&[n; 32]), "packet {n}");
}

#[test]
fn a_route_change_to_the_remote_restacks_the_tunnel() {
    let plan = config::parse(CONFIG, "test.toml", Path::new(".")).expect("config");
    let mut r = Router::start(plan).expect("router");

    // Start-up told the FIB of the tunnel: the direct encapsulation, one
    // pass through ip4-lookup (the inner packet's).
    let before = lookups(&r);
    let (out, f) = through_tunnel(&mut r, 1);
    assert_eq!(out, "wan");
    assert_encapsulated(&f, PEER_WAN, 1);
    assert_eq!(lookups(&r) - before, 1, "no second pass");

    // A more specific route to the remote through another neighbour on
    // another interface: the next packet follows it.
    let host: Prefix = "10.0.2.2/32".parse().expect("prefix");
    let via = RouteTarget::Via { gw: "10.0.3.9".parse().expect("gw"), ifindex: None };
    r.add_route(Source::Static, host, via, RouteAttrs::default()).expect("route");
    let before = lookups(&r);
    let (out, f) = through_tunnel(&mut r, 2);
    assert_eq!(out, "dmz");
    assert_encapsulated(&f, PEER_DMZ, 2);
    assert_eq!(lookups(&r) - before, 1, "still direct");

    // Its removal: back to the wan's neighbour.
    r.del_route(Source::Static, host).expect("del");
    let (out, f) = through_tunnel(&mut r, 3);
    assert_eq!(out, "wan");
    assert_encapsulated(&f, PEER_WAN, 3);

    // The switch: with gre_direct off the same frame takes the second pass.
    r.set_fast_paths(Some("gre_direct"), false).expect("off");
    let before = lookups(&r);
    let (out, f) = through_tunnel(&mut r, 4);
    assert_eq!(out, "wan");
    assert_encapsulated(&f, PEER_WAN, 4);
    assert_eq!(lookups(&r) - before, 2, "inner and outer pass");

    // The remote routed into the tunnel itself: no loop, a counted drop.
    r.set_fast_paths(Some("gre_direct"), true).expect("on");
    let gre0 = r.iface_by_name("gre0").expect("gre0");
    r.add_route(Source::Static, host, RouteTarget::Connected { ifindex: gre0 }, RouteAttrs::default())
        .expect("into the tunnel");
    let ip = ipv4(a4("10.0.1.2"), a4("10.9.0.5"), 17, 64, &udp4(a4("10.0.1.2"), a4("10.9.0.5"), 7, 9, b"loop"));
    assert!(r.mem_ports("lan").expect("lan")[0].inject(&eth(TERN_LAN, HOST_A, 0x0800, &ip)));
    common::poll_until(&mut r, "recursion counted", |r| r.counter("gre-encap", "recursive-encapsulation") == 1);
    for iface in ["wan", "dmz"] {
        assert!(r.mem_ports(iface).expect("iface")[0].take_sent().is_empty(), "{iface}");
    }
}

/// A tunnel a reload adds is stacked at once (the direct encapsulation,
/// one `ip4-lookup` pass), and so is one removed by a reload and added
/// back by the next; the tunnel and the route into it come in one reload
/// (round 1) or the route one reload after (round 2).
#[test]
fn tunnels_added_by_a_reload_are_stacked() {
    let tunnel_at = CONFIG.find("[[tunnel]]").expect("tunnel");
    let route_end = CONFIG.find("[[neighbor_entry]]").expect("neighbours");
    let route_at = CONFIG.find("[[route]]").expect("route");
    let without = format!("{}{}", &CONFIG[..tunnel_at], &CONFIG[route_end..]);
    let tunnel_only = format!("{}{}", &CONFIG[..route_at], &CONFIG[route_end..]);
    let dir = std::env::temp_dir().join(format!("tern-gre-restack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("tern.toml");
    let to = |r: &mut Router, text: &str| {
        std::fs::write(&path, text).expect("write");
        reload(r, &path).map(|rep| rep.changes).expect("reload")
    };
    let plan = config::parse(&without, "test.toml", Path::new(".")).expect("config");
    let mut r = Router::start(plan).expect("router");
    for round in 1..=2u8 {
        if round == 1 {
            let changes = to(&mut r, CONFIG);
            assert!(changes.iter().any(|c| c.contains("gre0 added")), "{changes:?}");
        } else {
            let changes = to(&mut r, &tunnel_only);
            assert!(changes.iter().any(|c| c.contains("gre0 added")), "{changes:?}");
            to(&mut r, CONFIG);
        }
        let before = lookups(&r);
        let (out, f) = through_tunnel(&mut r, round);
        assert_eq!(out, "wan", "round {round}");
        assert_encapsulated(&f, PEER_WAN, round);
        assert_eq!(lookups(&r) - before, 1, "round {round}: direct");
        let changes = to(&mut r, &without);
        assert!(changes.iter().any(|c| c.contains("gre0 removed")), "{changes:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
