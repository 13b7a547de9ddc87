//! The TAP exception path on a memory port: a device the kernel never sees
//! at all. The kernel's side is the TAP `tern-lan`, in a throwaway network
//! namespace; frames injected into the memory port for the router reach
//! Linux through it, and Linux's answers come out of the memory port.
//!
//! Needs root and iproute2; skipped (with a message) otherwise.

mod common;

use common::pkt::*;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tern_control::config;
use tern_control::router::Router;
use tern_testkit::netns::{Netns, is_root, sh};

const TERN: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const HOST: [u8; 6] = [0x02, 0, 0, 0, 1, 0xaa];

/// Moves this test thread into a fresh namespace named `prefix-PID`
/// (deleted when the guard drops), or None (with the reason printed) where
/// the test cannot run.
fn enter_fresh_netns(prefix: &str) -> Option<Netns> {
    if !is_root() || std::fs::metadata("/dev/net/tun").is_err() {
        eprintln!("skipped: needs root and /dev/net/tun");
        return None;
    }
    let name = format!("{prefix}-{}", std::process::id());
    let _ = sh("ip", &["netns", "del", &name]);
    let ns = Netns::named(&name);
    ns.enter();
    Some(ns)
}

/// Drives the control loop until the kernel mirror has given `tap` the
/// address `addr`.
fn await_tap_address(router: &mut Router, tap: &str, addr: Ipv4Addr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !tern_io::netdev::addresses(tap).expect("addresses").iter().any(|a| a.addr == addr) {
        router.poll();
        assert!(Instant::now() < deadline, "{addr} never reached {tap}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Drives the control loop until the TAP `tap` is gone. A removed
/// interface's TAP is closed by the workers when they take the port change
/// the reload published, so it can outlive the reload's return briefly.
fn await_tap_gone(router: &mut Router, tap: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while tern_io::netdev::ifindex(tap).is_ok() {
        router.poll();
        assert!(Instant::now() < deadline, "the TAP {tap} is still there; {}", diagnosis(router));
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Drives the control loop until `iface` sent a frame `want` accepts.
fn await_frame(router: &mut Router, iface: &str, want: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        router.poll();
        if let Some(f) = router.mem_ports(iface).expect("iface")[0].take_sent().into_iter().find(|f| want(f)) {
            return f;
        }
        assert!(Instant::now() < deadline, "no such frame from {iface}; {}", diagnosis(router));
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What a failed wait reports: every non-zero error and info counter, each
/// TAP's port counters and Linux's view of the TAPs (ARP table, links).
fn diagnosis(router: &Router) -> String {
    let counters: Vec<String> = tern_control::commands::error_stats(&router.workers(), None)
        .into_iter()
        .filter(|e| e.count > 0)
        .map(|e| format!("{}/{} {}", e.node, e.name, e.count))
        .collect();
    let taps = tern_control::commands::tap_counters(&router.workers());
    let ip = |args: &[&str]| {
        Command::new("ip")
            .args(args)
            .output()
            .map_or_else(|e| e.to_string(), |o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    format!(
        "counters: {counters:?}\nTAPs: {taps:?}\nip link: {}\nip neigh: {}\nip addr: {}",
        ip(&["-s", "link"]),
        ip(&["neigh"]),
        ip(&["addr"])
    )
}

/// One memory port, "lan", with Linux owning the exceptions through a TAP.
const LAN_TAP: &str = r#"
[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24"]

[linux]
mode = "linux"
exception = "tap"
"#;

#[test]
fn a_memory_port_reaches_linux_through_its_tap() {
    let Some(_ns) = enter_fresh_netns("tlinuxtap") else { return };
    let cfg = LAN_TAP;
    let plan = config::parse(cfg, "t.toml", Path::new(".")).expect("config");
    let mut router = Router::start(plan).expect("router");
    assert_eq!(tern_io::netdev::mac("tern-lan").expect("the TAP exists"), TERN);
    let (ours, host) = (Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 1, 2));
    // The kernel mirror gives the kernel the configured address on the TAP.
    await_tap_address(&mut router, "tern-lan", ours);

    // ARP for the router's address: Linux answers, with the TAP's (the
    // interface's) MAC.
    let port = &router.mem_ports("lan").expect("lan")[0];
    assert!(port.inject(&eth([0xff; 6], HOST, 0x0806, &arp(1, HOST, host, [0; 6], ours))));
    let reply = await_frame(&mut router, "lan", |f| f.get(12..14) == Some(&[8, 6]) && f.get(20..22) == Some(&[0, 2]));
    assert_eq!(&reply[0..6], &HOST);
    assert_eq!(&reply[22..28], &TERN, "sender hardware address");
    assert_eq!(&reply[28..32], &ours.octets(), "sender protocol address");

    // Ping: the echo reply is Linux's.
    let port = &router.mem_ports("lan").expect("lan")[0];
    assert!(port.inject(&eth(TERN, HOST, 0x0800, &ipv4(host, ours, 1, 64, &icmp_echo(8, 7, 1, b"via the tap")))));
    let reply = await_frame(&mut router, "lan", |f| parse_v4(f).is_some_and(|v| v.proto == 1 && v.l4[0] == 0));
    let v = parse_v4(&reply).expect("ipv4");
    assert_eq!((v.src, v.dst, v.dst_mac, v.src_mac), (ours, host, HOST, TERN));
    assert!(v.header_ok);
    assert!(v.l4.ends_with(b"via the tap"));

    assert!(router.counter("linux-punt", "punted") >= 2);
    assert!(router.counter("tap-input", "from-linux") >= 2);
    assert_eq!(router.counter("arp-input", "reply-sent"), 0);
    assert_eq!(router.counter("ip4-local", "echo-reply-sent"), 0);
    router.shutdown();
}

/// The frame without its 802.1Q tag when it carries VLAN `vid`.
fn untag(f: &[u8], vid: u16) -> Option<Vec<u8>> {
    if f.get(12..16)? != [0x81, 0x00, (vid >> 8) as u8, vid as u8] {
        return None;
    }
    Some([&f[..12], &f[16..]].concat())
}

/// A VLAN sub-interface has its own TAP (`tern-lan.7`), where Linux sees
/// plain Ethernet with the sub-interface's address: tern strips the tag of
/// what it punts there and tags what Linux sends back (no kernel VLAN
/// device involved).
#[test]
fn a_vlan_sub_interface_reaches_linux_through_its_own_untagged_tap() {
    let Some(_ns) = enter_fresh_netns("tlinuxtapv") else { return };
    let cfg = include_str!("configs/tap-vlan.toml");
    let plan = config::parse(cfg, "t.toml", Path::new(".")).expect("config");
    let mut router = Router::start(plan).expect("router");
    assert_eq!(tern_io::netdev::mac("tern-lan.7").expect("the sub-interface's TAP exists"), TERN);
    let (ours, host) = (Ipv4Addr::new(10, 0, 7, 1), Ipv4Addr::new(10, 0, 7, 2));
    await_tap_address(&mut router, "tern-lan.7", ours);
    let on_parent = tern_io::netdev::addresses("tern-lan").expect("addresses");
    assert!(!on_parent.iter().any(|a| a.addr == ours), "the parent's TAP holds the VLAN's address");

    // ARP on VLAN 7: Linux answers on tern-lan.7, the answer leaves lan
    // tagged.
    let port = &router.mem_ports("lan").expect("lan")[0];
    assert!(port.inject(&eth_vlan([0xff; 6], HOST, 7, 0x0806, &arp(1, HOST, host, [0; 6], ours))));
    let reply = await_frame(&mut router, "lan", |f| {
        untag(f, 7).is_some_and(|u| u.get(12..14) == Some(&[8, 6]) && u.get(20..22) == Some(&[0, 2]))
    });
    let reply = untag(&reply, 7).expect("tagged");
    assert_eq!(&reply[22..28], &TERN, "sender hardware address");
    assert_eq!(&reply[28..32], &ours.octets(), "sender protocol address");

    // Ping on VLAN 7: Linux's echo reply, tagged.
    let port = &router.mem_ports("lan").expect("lan")[0];
    let echo = ipv4(host, ours, 1, 64, &icmp_echo(8, 7, 1, b"via the vlan's tap"));
    assert!(port.inject(&eth_vlan(TERN, HOST, 7, 0x0800, &echo)));
    let reply = await_frame(&mut router, "lan", |f| {
        untag(f, 7).and_then(|u| parse_v4(&u)).is_some_and(|v| v.proto == 1 && v.l4[0] == 0)
    });
    let v = parse_v4(&untag(&reply, 7).expect("tagged")).expect("ipv4");
    assert_eq!((v.src, v.dst, v.dst_mac, v.src_mac), (ours, host, HOST, TERN));
    assert!(v.header_ok && v.l4.ends_with(b"via the vlan's tap"));

    // The VLAN's address is not the parent's: untagged ARP for it goes
    // nowhere near Linux.
    let port = &router.mem_ports("lan").expect("lan")[0];
    let before = router.counter("linux-punt", "punted");
    assert!(port.inject(&eth([0xff; 6], HOST, 0x0806, &arp(1, HOST, host, [0; 6], ours))));
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        router.poll();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(router.counter("linux-punt", "punted"), before);
    assert!(before >= 2);
    assert!(router.counter("tap-input", "from-linux") >= 2);
    for (node, name) in [("linux-punt", "not-tagged"), ("linux-punt", "no-tap"), ("tap-input", "no-headroom")] {
        assert_eq!(router.counter(node, name), 0, "{node}/{name}");
    }
    router.shutdown();
}

/// What `tern config reload` (and the API) changes on an interface
/// reaches its TAP: admin state (a VLAN sub-interface's TAP goes down with
/// its parent) and MTU. A physical interface cannot be added while tern
/// runs: such a reload is refused, and no TAP appears; a sub-interface
/// removed takes its TAP with it.
#[test]
fn reloads_reach_the_taps() {
    let Some(ns) = enter_fresh_netns("tlinuxtapr") else { return };
    let dir = std::env::temp_dir().join(&ns.name);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("tern.toml");
    let cfg = |lan: &str, extra: &str| {
        format!(
            r#"
[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24"]
{lan}
[[interface]]
name = "lan.7"
parent = "lan"
vlan = 7
addresses = ["10.0.7.1/24"]
{extra}
[linux]
mode = "linux"
exception = "tap"
"#
        )
    };
    std::fs::write(&path, cfg("", "")).expect("config");
    let plan = config::parse(&cfg("", ""), "tern.toml", &dir).expect("config");
    let mut router = Router::start(plan).expect("router");
    let up = |tap: &str| tern_io::netdev::flags(tap).expect("the TAP exists").up;
    // Polls the router until `done` holds (20 s at most: a fixed 200 ms
    // of polling is not enough when a loaded machine keeps this thread
    // off its CPU).
    let settle = |router: &mut Router, what: &str, done: &dyn Fn(&Router) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(router) {
            assert!(Instant::now() < deadline, "{what}");
            router.poll();
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    settle(&mut router, "the TAPs up", &|_| up("tern-lan") && up("tern-lan.7"));
    assert!(up("tern-lan") && up("tern-lan.7"));

    let reload = |router: &mut Router, text: &str| {
        std::fs::write(&path, text).expect("config");
        tern_control::reload::reload(router, &path)
    };
    reload(&mut router, &cfg("up = false", "")).expect("reload: lan down");
    settle(&mut router, "the TAPs down", &|r| {
        !up("tern-lan") && !up("tern-lan.7") && !r.iftable().ifs[0].up && !r.iftable().ifs[1].up
    });
    assert!(!up("tern-lan"), "the TAP went down with its interface");
    assert!(!up("tern-lan.7"), "a sub-interface's TAP goes down with its parent");
    let ifs = router.iftable();
    assert!(!ifs.ifs[0].up && !ifs.ifs[1].up, "the kernel mirror agrees with tern");

    reload(&mut router, &cfg("mtu = 1400", "")).expect("reload: lan up, MTU 1400");
    settle(&mut router, "the TAPs up, MTU 1400", &|r| {
        up("tern-lan")
            && up("tern-lan.7")
            && tern_io::netdev::mtu("tern-lan").ok() == Some(1400)
            && r.iftable().ifs[0].mtu == 1400
            && r.iftable().ifs[0].up
    });
    assert!(up("tern-lan") && up("tern-lan.7"));
    assert_eq!(tern_io::netdev::mtu("tern-lan").expect("mtu"), 1400);
    assert_eq!(router.iftable().ifs[0].mtu, 1400);
    assert!(router.iftable().ifs[0].up);

    let added = "\n[[interface]]\nname = \"lan2\"\ndriver = \"memory\"\nmac = \"02:00:00:00:02:01\"\n";
    let e = reload(&mut router, &cfg("mtu = 1400", added)).expect_err("adding an interface needs a restart");
    assert!(e.message.contains("restart"), "{}", e.message);
    assert!(tern_io::netdev::ifindex("tern-lan2").is_err(), "no TAP for a refused interface");
    assert!(up("tern-lan.7"), "the refused reload left the other TAPs alone");
    let only_lan = cfg("mtu = 1400", "").replace("name = \"lan.7\"\nparent = \"lan\"\nvlan = 7\n", "");
    let only_lan = only_lan.replace("[[interface]]\naddresses = [\"10.0.7.1/24\"]\n", "");
    assert!(!only_lan.contains("lan.7"), "{only_lan}");
    let r = reload(&mut router, &only_lan).expect("removing a sub-interface is live");
    assert!(r.changes.iter().any(|c| c.contains("TAP tern-lan.7 deleted")), "{:?}", r.changes);
    await_tap_gone(&mut router, "tern-lan.7");
    assert!(up("tern-lan"));
    router.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A VLAN sub-interface added by a reload gets its TAP at once (with the
/// parent's MAC and the sub-interface's address in Linux), Linux answers
/// on the new VLAN through it; removed, the TAP goes and the VLAN's frames
/// are dropped as unknown VLAN.
#[test]
fn a_vlan_added_live_gets_its_tap_and_loses_it_when_removed() {
    let Some(ns) = enter_fresh_netns("tlinuxtapa") else { return };
    let dir = std::env::temp_dir().join(&ns.name);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("tern.toml");
    let base = LAN_TAP;
    let vlan = "\n[[interface]]\nname = \"lan.7\"\nparent = \"lan\"\nvlan = 7\naddresses = [\"10.0.7.1/24\"]\n";
    let plan = config::parse(base, "tern.toml", &dir).expect("config");
    let mut router = Router::start(plan).expect("router");
    assert!(tern_io::netdev::ifindex("tern-lan.7").is_err());
    let reload = |router: &mut Router, text: &str| {
        std::fs::write(&path, text).expect("config");
        tern_control::reload::reload(router, &path)
    };
    let r = reload(&mut router, &format!("{base}{vlan}")).expect("adding a sub-interface is live");
    assert!(r.changes.iter().any(|c| c == "interface lan.7 added with TAP tern-lan.7"), "{:?}", r.changes);
    assert_eq!(tern_io::netdev::mac("tern-lan.7").expect("the new TAP exists"), TERN);
    let (ours, host) = (Ipv4Addr::new(10, 0, 7, 1), Ipv4Addr::new(10, 0, 7, 2));
    await_tap_address(&mut router, "tern-lan.7", ours);
    let port = &router.mem_ports("lan").expect("lan")[0];
    assert!(port.inject(&eth_vlan([0xff; 6], HOST, 7, 0x0806, &arp(1, HOST, host, [0; 6], ours))));
    let reply = await_frame(&mut router, "lan", |f| {
        untag(f, 7).is_some_and(|u| u.get(12..14) == Some(&[8, 6]) && u.get(20..22) == Some(&[0, 2]))
    });
    let reply = untag(&reply, 7).expect("tagged");
    assert_eq!(&reply[28..32], &ours.octets(), "Linux answered for the new sub-interface's address");
    assert_eq!(router.counter("linux-punt", "no-tap"), 0);

    let r = reload(&mut router, base).expect("removing it is live");
    assert!(r.changes.iter().any(|c| c.contains("TAP tern-lan.7 deleted")), "{:?}", r.changes);
    await_tap_gone(&mut router, "tern-lan.7");
    let unknown = router.counter("ethernet-input", "unknown-vlan");
    let port = &router.mem_ports("lan").expect("lan")[0];
    assert!(port.inject(&eth_vlan([0xff; 6], HOST, 7, 0x0806, &arp(1, HOST, host, [0; 6], ours))));
    let deadline = Instant::now() + Duration::from_secs(10);
    while router.counter("ethernet-input", "unknown-vlan") == unknown {
        router.poll();
        assert!(Instant::now() < deadline, "VLAN 7 not counted as unknown");
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = tern_control::commands::tap_counters(&router.workers());
    assert!(!stats.contains_key("tern-lan.7"), "the removed TAP's counters are gone: {:?}", stats.keys());
    assert!(stats.contains_key("tern-lan"));
    router.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
