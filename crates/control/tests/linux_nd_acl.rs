//! Neighbor Discovery for the router passes the receiving interface's
//! input rule set like the rest of its traffic (`ip6-punt-acl`): a rule
//! dropping ICMPv6 from a source drops that source's solicitations and
//! advertisements too, counted on the rule (memory ports, standalone
//! mode: tern itself answers what passes).

mod common;

use common::pkt::*;
use std::net::Ipv6Addr;
use std::path::Path;
use std::time::{Duration, Instant};
use tern_control::config;
use tern_control::router::Router;

const TERN: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const GOOD: [u8; 6] = [0x02, 0, 0, 0, 1, 0xaa];
const BAD: [u8; 6] = [0x02, 0, 0, 0, 1, 0xbb];

const CONFIG: &str = r#"
[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
addresses = ["2001:db8:1::1/64"]
acl_in = "IN"

[[acl]]
name = "IN"
default = "accept"

[[acl.rule]]
action = "drop"
proto = "icmpv6"
src = "fe80::bb/128"
"#;

fn a6(s: &str) -> Ipv6Addr {
    s.parse().expect("ipv6")
}

/// A neighbour solicitation from `src` (link-layer `mac`) for tern's
/// address, to its solicited-node group.
fn ns(src: Ipv6Addr, mac: [u8; 6]) -> Vec<u8> {
    let target = a6("2001:db8:1::1");
    let (group, group_mac) = solicited_node(target);
    eth(group_mac, mac, 0x86dd, &ipv6(src, group, 58, 255, &icmp6(src, group, 135, 0, &ns_body(target, Some(mac)))))
}

/// Drives the control loop until `f` holds.
fn until(router: &mut Router, what: &str, f: impl Fn(&Router) -> bool) {
    common::poll_until(router, what, f)
}

fn is_na_to(f: &[u8], mac: [u8; 6]) -> bool {
    parse_v6(f).is_some_and(|v| v.dst_mac == mac && v.src_mac == TERN && v.next == 58 && v.l4.first() == Some(&136))
}

#[test]
fn a_rule_dropping_icmpv6_from_a_source_drops_its_neighbor_discovery() {
    let plan = config::parse(CONFIG, "t.toml", Path::new(".")).expect("config");
    let mut router = Router::start(plan).expect("router");
    let port = router.mem_ports("lan").expect("lan")[0].clone();

    // The denied source: its solicitation goes no further, counted.
    assert!(port.inject(&ns(a6("fe80::bb"), BAD)));
    until(&mut router, "the NS denied", |r| r.counter("ip6-punt-acl", "denied") == 1);
    assert_eq!(router.acl_hits("IN").expect("IN")[0].0, 1, "counted on the rule");
    // An advertisement from it too.
    let na = icmp6(a6("fe80::bb"), a6("ff02::1"), 136, 0, &na_body(a6("2001:db8:1::bb"), 0x20, BAD));
    assert!(port.inject(&eth(
        [0x33, 0x33, 0, 0, 0, 1],
        BAD,
        0x86dd,
        &ipv6(a6("fe80::bb"), a6("ff02::1"), 58, 255, &na)
    )));
    until(&mut router, "the NA denied", |r| r.counter("ip6-punt-acl", "denied") == 2);
    assert_eq!(router.acl_hits("IN").expect("IN")[0].0, 2);
    assert!(router.neighbors().is_empty(), "nothing learned from the denied source");

    // Another source: answered as before, and its hit is the default's.
    assert!(port.inject(&ns(a6("fe80::aa"), GOOD)));
    let deadline = Instant::now() + Duration::from_secs(10);
    let na = loop {
        if let Some(f) = port.take_sent().into_iter().find(|f| is_na_to(f, GOOD)) {
            break f;
        }
        assert!(Instant::now() < deadline, "no NA for the accepted source");
        if !router.poll() {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    assert_eq!(&na[22..38], &a6("2001:db8:1::1").octets(), "from tern's address");
    assert!(port.take_sent().iter().all(|f| !is_na_to(f, BAD)), "never answered the denied source");
    let hits = router.acl_hits("IN").expect("IN");
    assert_eq!((hits[0].0, hits[1].0), (2, 1), "rule, then the default");
    assert_eq!(router.counter("ip6-local", "ns-answered"), 1);
    router.shutdown();
}
