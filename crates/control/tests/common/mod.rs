//! Shared by the tests that run a [`Router`] over memory ports.
#![allow(dead_code)]

/// The frames these tests send are what a Linux host sends: DF set,
/// padded to the Ethernet minimum (the testkit's other builders leave both
/// to the caller).
pub mod pkt {
    #[allow(unused_imports)] // each test binary uses a different subset
    pub use tern_testkit::packet::{
        ArpOperation, EtherType, GreRepr, Icmpv4Repr, Icmpv6Repr, V4, V6, arp, csum, eth_padded as eth,
        eth_vlan_padded as eth_vlan, ethertype, icmp_echo, icmp6, ipv4_df as ipv4, ipv6, l4_csum6, na_body, ns_body,
        parse_arp, parse_gre, parse_icmp4, parse_icmp6, parse_v4, parse_v6, solicited_node, udp4, udp6,
    };
}

use std::time::{Duration, Instant};
use tern_control::router::Router;

/// Two memory-port interfaces: `lan` 10.0.1.1/24 (02:00:00:00:01:01) and
/// `wan` 10.0.2.1/24 (02:00:00:00:02:01).
pub const LAN_WAN: &str = r#"
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
"#;

/// Drives the router's control loop until `f` holds (10 s at most).
pub fn poll_until(router: &mut Router, what: &str, f: impl Fn(&Router) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f(router) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        if !router.poll() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
