//! VLAN sub-interfaces and GRE tunnels added and removed by a reload while
//! the data plane runs (memory ports: what a tagged host sees).

mod common;

use common::pkt::*;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tern_control::config;
use tern_control::reload::reload;
use tern_control::router::Router;

const TERN_LAN: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const HOST_A: [u8; 6] = [0x02, 0, 0, 0, 1, 0xaa];

const BASE: &str = common::LAN_WAN;

const VLAN100: &str = r#"
[[interface]]
name = "lan.100"
parent = "lan"
vlan = 100
addresses = ["10.0.100.1/24"]
"#;

const GRE: &str = r#"
[[tunnel]]
name = "gre1"
local = "10.0.2.1"
remote = "10.0.2.9"
addresses = ["192.168.9.1/30"]
"#;

fn a4(s: &str) -> Ipv4Addr {
    s.parse().expect("ipv4")
}

struct Lab {
    router: Router,
    dir: PathBuf,
}

impl Lab {
    fn new(text: &str) -> Lab {
        let dir = std::env::temp_dir().join(format!("tern-live-ifaces-{}-{:?}", std::process::id(), Instant::now()));
        std::fs::create_dir_all(&dir).expect("dir");
        let plan = config::parse(text, "test.toml", Path::new(".")).expect("config");
        Lab { router: Router::start(plan).expect("router"), dir }
    }

    fn reload(&mut self, text: &str) -> Result<Vec<String>, String> {
        let path = self.dir.join("tern.toml");
        std::fs::write(&path, text).expect("write");
        reload(&mut self.router, &path).map(|r| r.changes).map_err(|e| e.message)
    }

    fn send(&self, frame: &[u8]) {
        assert!(self.router.mem_ports("lan").expect("lan")[0].inject(frame));
    }

    /// A tagged ARP request from host A (10.0.<vid>.2) for `target`.
    fn tagged_arp(&self, vid: u16, target: &str) {
        let spa = a4(&format!("10.0.{vid}.2"));
        self.send(&eth_vlan([0xff; 6], HOST_A, vid, 0x0806, &arp(1, HOST_A, spa, [0; 6], a4(target))));
    }

    /// Drives the control loop until `f` holds.
    fn until(&mut self, what: &str, f: impl Fn(&Router) -> bool) {
        common::poll_until(&mut self.router, what, f)
    }

    fn take_lan(&self) -> Vec<Vec<u8>> {
        self.router.mem_ports("lan").expect("lan")[0].take_sent()
    }

    /// Waits for one frame on lan.
    fn recv_lan(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(f) = self.take_lan().into_iter().next() {
                return f;
            }
            assert!(Instant::now() < deadline, "nothing sent on lan");
            if !self.router.poll() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    fn unknown_vlan(&self) -> u64 {
        self.router.counter("ethernet-input", "unknown-vlan")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The VLAN id and the ARP operation of a tagged ARP frame.
fn tagged_arp_op(f: &[u8]) -> Option<(u16, u16)> {
    use tern_testkit::wire::{ArpPacket, ArpRepr, EtherType, EthernetFrame, VlanRepr, VlanTag};
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != EtherType::VLAN {
        return None;
    }
    let tag = VlanTag::new_checked(eth.payload()).ok()?;
    let vlan = VlanRepr::parse(&tag).ok()?;
    if vlan.ethertype != EtherType::ARP {
        return None;
    }
    let arp = ArpRepr::parse(&ArpPacket::new_checked(tag.payload()).ok()?).ok()?;
    Some((vlan.vid, arp.operation.0))
}

#[test]
fn a_vlan_added_by_reload_carries_traffic_and_removed_drops_it() {
    let mut lab = Lab::new(BASE);
    // Before: VLAN 100 is unknown.
    lab.tagged_arp(100, "10.0.100.1");
    lab.until("unknown-vlan", |r| r.counter("ethernet-input", "unknown-vlan") == 1);

    let with = format!("{BASE}{VLAN100}");
    let changes = lab.reload(&with).expect("reload adds the VLAN");
    assert!(changes.iter().any(|c| c == "interface lan.100 added"), "{changes:?}");
    let idx = lab.router.iftable().by_name("lan.100").map(|f| f.index).expect("published");
    assert_eq!(lab.router.iftable().vlan_if(0, 100), Some(idx), "the VLAN demux knows it");
    assert!(lab.router.route_get("10.0.100.9".parse().expect("a")).is_some(), "its connected route");

    // Traffic through it: tern answers ARP for its address, tagged.
    lab.tagged_arp(100, "10.0.100.1");
    let reply = lab.recv_lan();
    assert_eq!(tagged_arp_op(&reply), Some((100, 2)), "a tagged ARP reply: {reply:02x?}");
    assert_eq!(&reply[0..6], &HOST_A);
    assert_eq!(&reply[6..12], &TERN_LAN);
    assert_eq!(lab.unknown_vlan(), 1);

    // Removed: its traffic is unknown VLAN again, its routes are gone.
    let changes = lab.reload(BASE).expect("reload removes the VLAN");
    assert!(changes.iter().any(|c| c.starts_with("interface lan.100 removed")), "{changes:?}");
    assert!(lab.router.iftable().by_name("lan.100").is_none());
    assert_eq!(lab.router.iftable().vlan_if(0, 100), None);
    assert!(lab.router.route_get("10.0.100.9".parse().expect("a")).is_none(), "connected route withdrawn");
    lab.tagged_arp(100, "10.0.100.1");
    lab.until("unknown-vlan again", |r| r.counter("ethernet-input", "unknown-vlan") == 2);
    assert!(lab.take_lan().is_empty(), "no answer on a removed VLAN");
    let names: Vec<String> = lab.router.plan().live_ifaces().map(|(_, p)| p.name.clone()).collect();
    assert_eq!(names, ["lan", "wan"]);

    // Added back: it takes the same index again and works.
    lab.reload(&with).expect("reload adds it back");
    assert_eq!(lab.router.iftable().by_name("lan.100").map(|f| f.index), Some(idx), "the freed index is reused");
    lab.tagged_arp(100, "10.0.100.1");
    assert_eq!(tagged_arp_op(&lab.recv_lan()), Some((100, 2)));
}

#[test]
fn an_invalid_reload_adds_nothing() {
    let mut lab = Lab::new(BASE);
    let before = lab.router.iftable().ifs.len();
    // A new VLAN whose subnet is already connected on lan.
    let clash = format!("{BASE}{}", VLAN100.replace("10.0.100.1/24", "10.0.1.9/24"));
    let e = lab.reload(&clash).expect_err("refused");
    assert!(e.contains("10.0.1.0/24") && e.contains("lan"), "{e}");
    // A new VLAN next to a route naming an interface that does not exist.
    let dangling = format!("{BASE}{VLAN100}\n[[route]]\nprefix = \"10.9.0.0/16\"\ninterface = \"lan.200\"\n");
    let e = lab.reload(&dangling).expect_err("refused");
    assert!(e.contains("lan.200"), "{e}");
    // A new physical interface still needs a restart.
    let port =
        format!("{BASE}{VLAN100}\n[[interface]]\nname = \"dmz\"\ndriver = \"memory\"\nmac = \"02:00:00:00:03:01\"\n");
    let e = lab.reload(&port).expect_err("refused");
    assert!(e.contains("dmz") && e.contains("restart"), "{e}");
    assert_eq!(lab.router.iftable().ifs.len(), before, "nothing published");
    assert!(lab.router.iftable().by_name("lan.100").is_none());
    assert!(lab.router.route_get("10.0.100.9".parse().expect("a")).is_none());
    lab.tagged_arp(100, "10.0.100.1");
    lab.until("still unknown", |r| r.counter("ethernet-input", "unknown-vlan") == 1);
}

#[test]
fn removing_a_vlan_a_route_still_names_is_refused() {
    let routed = format!(
        "{BASE}{VLAN100}\n[[route]]\nprefix = \"10.9.0.0/16\"\nvia = \"10.0.100.2\"\ninterface = \"lan.100\"\n"
    );
    let mut lab = Lab::new(&routed);
    let without = routed.replace(VLAN100, "");
    let e = lab.reload(&without).expect_err("refused");
    assert!(e.contains("route[0].interface") && e.contains("lan.100"), "{e}");
    assert!(lab.router.iftable().by_name("lan.100").is_some(), "still there");
    // Without the route it goes, with the route.
    let changes = lab.reload(BASE).expect("reload");
    assert!(changes.iter().any(|c| c.starts_with("interface lan.100 removed")), "{changes:?}");
    assert!(lab.router.route_get("10.9.1.1".parse().expect("a")).is_none());
}

#[test]
fn tunnels_come_and_go_and_later_interfaces_keep_their_index() {
    let two = format!("{BASE}{VLAN100}{}", VLAN100.replace("100", "200"));
    let mut lab = Lab::new(&two);
    let i200 = lab.router.iftable().by_name("lan.200").map(|f| f.index).expect("lan.200");
    // Remove the first VLAN, add a tunnel: lan.200 keeps its index, and a
    // route through it (renumbered by the file) still points at it.
    let next = format!(
        "{BASE}{}{GRE}\n[[route]]\nprefix = \"10.20.0.0/16\"\nvia = \"10.0.200.2\"\ninterface = \"lan.200\"\n",
        VLAN100.replace("100", "200")
    );
    let changes = lab.reload(&next).expect("reload");
    assert!(changes.iter().any(|c| c.starts_with("interface lan.100 removed")), "{changes:?}");
    assert!(changes.iter().any(|c| c == "interface gre1 added"), "{changes:?}");
    let t = lab.router.iftable();
    assert_eq!(t.by_name("lan.200").map(|f| f.index), Some(i200));
    let gre = t.by_name("gre1").map(|f| f.index).expect("gre1");
    assert!(t.tunnels.contains(&gre));
    assert!(t.gre_tunnel("10.0.2.1".parse().expect("a"), "10.0.2.9".parse().expect("a"), None).is_some());
    let r = lab.router.fib().routes().find(|r| r.prefix.to_string() == "10.20.0.0/16").expect("route");
    assert_eq!(format!("{:?}", r.target), format!("Via {{ gw: 10.0.200.2, ifindex: Some({i200}) }}"));
    // And the tunnel goes again.
    lab.reload(&next.replace(GRE, "")).expect("reload");
    let t = lab.router.iftable();
    assert!(t.by_name("gre1").is_none() && t.tunnels.is_empty());
    assert!(lab.router.route_get("192.168.9.2".parse().expect("a")).is_none());
}

#[test]
fn a_tunnel_mtu_is_bounded_by_its_outer_packet_in_the_file_reload_and_api() {
    let mut lab = Lab::new(&format!("{BASE}{GRE}"));
    let gre = lab.router.iftable().by_name("gre1").map(|f| f.index).expect("gre1");
    // IPv4 outer, no key: 24 bytes of outer headers around 1778 at most.
    let e = lab.router.set_interface_mtu(gre, 1755).expect_err("above 1754");
    assert!(e.message.contains("need 68..=1754"), "{}", e.message);
    assert_eq!(lab.router.set_interface_mtu(gre, 1754).map_err(|e| e.message), Ok(true));
    let over = format!("{BASE}{}", GRE.replace("addresses", "mtu = 1755\naddresses"));
    let e = lab.reload(&over).expect_err("a reload above the bound");
    assert!(e.contains("tunnel[0].mtu") && e.contains("need 68..=1754"), "{e}");
    let e = config::parse(&over, "test.toml", Path::new(".")).expect_err("the file above the bound");
    assert!(e.to_string().contains("need 68..=1754"), "{e}");
}
