//! End to end with real daemons (issue 8): tern in Linux mode drives the
//! four devices of the lab's router namespace (scripts/frr/lab.sh); FRR's
//! zebra on the same host streams its routes to tern over FPM; bgpd peers
//! over eBGP (IPv4 and IPv6) with two bird injectors advertising a subset
//! of the real table; ospfd forms an adjacency with a second FRR through a
//! tern-driven device. Checks: the routes reach tern's FIB, traffic to
//! covered destinations arrives (answered by the injector), OSPF's route
//! carries traffic, a withdrawal on the primary moves traffic to the
//! secondary and back, and tern never answers for the kernel (no
//! duplicate ARP or echo replies).
//!
//! `frr_bird_churn_keeps_tern_exactly_on_zebras_table` (issue 35) holds
//! tern to zebra's table exactly through withdrawals, failovers and
//! restarts of either side.
//!
//! Needs root, iproute2, frr and bird2 (`apt-get install -y frr bird2`);
//! skipped with a message otherwise. `TERN_FRR_ROUTES=N4,N6` sizes the
//! table (default 2000,200; 0 = all); `TERN_FRR_DRIVER` picks the driver
//! (default auto: AF_XDP where it works, else AF_PACKET).

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use tern_control::router::Router;
use tern_fib::Source;
use tern_testkit::frr::{self, FrrLab as Lab, Table, gw, kernel_table, until, while_polling};

/// tern's configuration in the lab, with the driver `TERN_FRR_DRIVER` names.
fn config(lab: &Lab) -> String {
    lab.linux_config(&std::env::var("TERN_FRR_DRIVER").unwrap_or_else(|_| "auto".into()))
}

/// Every non-zero node counter, for failure messages.
fn counters(r: &Router) -> String {
    let Some(w) = r.workers().into_iter().next() else { return String::new() };
    let snap = r.stats();
    w.graph
        .errors
        .iter()
        .zip(&snap.errors)
        .filter(|(_, n)| **n > 0)
        .map(|(e, n)| format!("{}/{}={n}", e.node, e.name))
        .collect::<Vec<_>>()
        .join(" ")
}

fn fpm_routes(r: &Router) -> u64 {
    frr::fpm_counter(r, "/routes/adds")
}

#[test]
fn frr_bgp_ospf_and_failover_through_tern() {
    let Some(lab) = Lab::new("tlx", "kernel") else { return };
    let sizes = std::env::var("TERN_FRR_ROUTES").unwrap_or_else(|_| "2000,200".into());
    let (n4, n6) = sizes.split_once(',').unwrap_or(("2000", "200"));
    lab.sh(&["net"]);
    lab.sh(&["routes", n4, n6]);

    tern_io::netdev::enter_netns(&lab.ns("r")).expect("enter the router namespace");
    let plan = tern_control::config::parse(&config(&lab), "linux_frr.toml", Path::new("/tmp")).expect("config");
    let mut r = Router::start(plan).expect("tern starts");
    lab.sh(&["daemons"]);

    // BGP routes through FPM, IPv4 and IPv6, on the primary.
    let took = until(&mut r, 120, "BGP routes over FPM", |r| {
        gw(r, "203.0.113.1") == Some((Source::Fpm, "10.2.0.2".parse().expect("a")))
            && gw(r, "2001:db8:113::1").is_some_and(|(s, _)| s == Source::Fpm)
    });
    eprintln!("first BGP routes in tern after {took:.2?}; fpm {:?}", r.source_status());
    let (ok, out) = while_polling(&mut r, || lab.ping("src", "203.0.113.1"));
    assert!(ok, "ping through tern to a BGP destination: {out}");
    assert!(!out.contains("DUP"), "{out}");
    let (ok, out) = while_polling(&mut r, || lab.ping("src", "2001:db8:113::1"));
    assert!(ok, "IPv6 ping through tern: {out}");

    // The router's own address: Linux answers, once.
    let (ok, out) = while_polling(&mut r, || lab.ping("src", "10.1.0.1"));
    assert!(ok && !out.contains("DUP"), "ping to the router itself: {out}");
    assert_eq!(r.counter("arp-input", "reply-sent"), 0, "tern answered ARP for the kernel");
    assert_eq!(r.counter("ip4-local", "echo-reply-sent"), 0, "tern answered ping for the kernel");
    // With AF_PACKET tern sees (and leaves) its copy of the router's own
    // traffic; with AF_XDP the steering program passes it up untouched.
    eprintln!("ip4-local left-to-linux: {}", r.counter("ip4-local", "left-to-linux"));

    // OSPF across a tern-driven device: adjacency, route, traffic.
    until(&mut r, 60, "the OSPF route", |r| gw(r, "10.255.2.1").is_some_and(|(s, _)| s == Source::Fpm));
    let nbr = lab.sh(&["vtysh", "r", "show ip ospf neighbor"]);
    assert!(nbr.contains("Full"), "{nbr}");
    if let Ok(secs) = std::env::var("TERN_LAB_PAUSE") {
        // Debugging: keep tern forwarding while someone looks around.
        let secs = secs.parse().unwrap_or(60);
        eprintln!("pausing {secs} s: lab prefix {}", lab.prefix());
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(secs) {
            if !r.poll() {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
    // o2 learns the way back (r redistributes its connected subnets) a
    // moment after r learns o2's loopback: wait for that, in o2's kernel.
    let t0 = Instant::now();
    while !lab.exec("o2", &["ip", "route", "get", "10.1.0.2"]).1.contains("via 10.4.0.1") {
        assert!(t0.elapsed() < Duration::from_secs(60), "o2 never learned the route back to src");
        while_polling(&mut r, || std::thread::sleep(Duration::from_millis(100)));
    }
    let (ok, out) = while_polling(&mut r, || lab.ping("src", "10.255.2.1"));
    assert!(
        ok,
        "ping to the OSPF-learned loopback: {out}\n{}\n{:?}",
        counters(&r),
        r.route_get("10.255.2.1".parse().expect("a"))
    );

    // Every prefix the injectors announce arrives.
    let want = n4.parse::<u64>().unwrap_or(0).max(1) + n6.parse::<u64>().unwrap_or(0).max(1);
    until(&mut r, 120, "every BGP prefix", |r| fpm_routes(r) >= want);

    // Withdraw on the primary: traffic moves to the secondary, then back.
    lab.sh(&["birdc", "i1", "disable up4"]);
    let t =
        until(&mut r, 60, "the failover", |r| gw(r, "203.0.113.1").is_some_and(|(_, g)| g.to_string() == "10.3.0.2"));
    eprintln!("withdrawal to failover in tern: {t:.2?}");
    let (ok, out) = while_polling(&mut r, || lab.ping("src", "203.0.113.1"));
    assert!(ok, "ping after the failover (answered by the secondary): {out}");
    lab.sh(&["birdc", "i1", "enable up4"]);
    let t = until(&mut r, 60, "the return", |r| gw(r, "203.0.113.1").is_some_and(|(_, g)| g.to_string() == "10.2.0.2"));
    eprintln!("re-advertisement to return in tern: {t:.2?}");

    // FRR restarts: tern keeps forwarding on the routes it has, takes the
    // table zebra resends and sweeps what zebra no longer has.
    let resyncs = |r: &Router| {
        r.source_status()
            .iter()
            .find(|(n, _)| n == "fpm")
            .and_then(|(_, s)| s.pointer("/fpm/resyncs").and_then(serde_json::Value::as_u64))
            .unwrap_or(0)
    };
    let before = resyncs(&r);
    lab.sh(&["restart-frr"]);
    let (ok, out) = while_polling(&mut r, || lab.ping("src", "203.0.113.1"));
    assert!(ok, "forwarding continues while FRR restarts: {out}");
    until(&mut r, 120, "the resync after FRR's restart", |r| resyncs(r) > before);
    until(&mut r, 120, "the routes after FRR's restart", |r| {
        gw(r, "203.0.113.1") == Some((Source::Fpm, "10.2.0.2".parse().expect("a")))
            && gw(r, "10.255.2.1").is_some_and(|(s, _)| s == Source::Fpm)
    });
    let (ok, out) = while_polling(&mut r, || lab.ping("src", "203.0.113.1"));
    assert!(
        ok,
        "ping after FRR's restart: {out}\n{}\n{:?}\n{:?}",
        counters(&r),
        r.route_get("203.0.113.1".parse().expect("a")),
        r.route_get("10.1.0.2".parse().expect("a"))
    );
    let fpm = r.source_status();
    eprintln!("sources: {fpm:?}");
    r.shutdown();
}

fn tap_config(lab: &Lab) -> String {
    format!(
        r#"
[dataplane]
workers = 1
pool_frames = 4096

[[interface]]
name = "src"
device = "rsrc"
driver = "afpacket"
addresses = ["10.1.0.1/24", "fd00:1::1/64"]

[[interface]]
name = "i1"
device = "ri1"
driver = "afpacket"
addresses = ["10.2.0.1/24", "fd00:2::1/64"]

[[interface]]
name = "i2"
device = "ri2"
driver = "afpacket"
addresses = ["10.3.0.1/24", "fd00:3::1/64"]

[[interface]]
name = "o2"
device = "ro2"
driver = "afpacket"
addresses = ["10.4.0.1/24"]

[api]
socket = "/tmp/{p}/tern.sock"

[metrics]
listen = ""

[linux]
mode = "linux"
exception = "tap"
fpm_listen = "127.0.0.1:2620"
fpm_resync_quiet_ms = 500
"#,
        p = lab.prefix(),
    )
}

/// Port counters of tern interface `iface` (its device) and of its TAP.
fn ports(r: &Router, iface: &str) -> (tern_control::api::types::PortCounters, tern_control::api::types::PortCounters) {
    let workers = r.workers();
    let index = r.plan().iface_index(iface).expect("interface");
    let dev = tern_control::commands::port_counters(&workers).remove(&index).unwrap_or_default();
    let tap = tern_control::commands::tap_counters(&workers)
        .remove(&tern_control::linux::tap_name(iface))
        .unwrap_or_default();
    (dev, tap)
}

/// The TAP exception path with real daemons: tern owns r's four devices,
/// FRR on r uses the TAPs (tern-src, tern-i1, tern-i2, tern-o2). ospfd
/// and ospf6d form adjacencies with o2 (their multicast hellos are punted
/// into tern-o2, and what they write there leaves through ro2), bgpd holds eBGP
/// sessions (IPv4 and IPv6) with the bird injectors, the routes they learn
/// reach tern over FPM, and tern forwards the transit to them (its port
/// counters say so; the kernel never sees transit in this mode).
#[test]
fn frr_ospf_and_bgp_through_the_tap_exception_path() {
    let Some(lab) = Lab::new("tlx", "tap") else { return };
    if std::fs::metadata("/dev/net/tun").is_err() {
        eprintln!("skipped: needs /dev/net/tun");
        return;
    }
    lab.sh(&["net"]);
    lab.sh(&["routes", "-1", "-1"]);

    tern_io::netdev::enter_netns(&lab.ns("r")).expect("enter the router namespace");
    let plan = tern_control::config::parse(&tap_config(&lab), "linux_frr_tap.toml", Path::new("/tmp")).expect("config");
    let mut r = Router::start(plan).expect("tern starts");
    // The kernel's side of each interface is its TAP, with the addresses
    // tern's configuration gives it; the veths hold none.
    let (ok, addrs) = lab.exec("r", &["ip", "-br", "addr", "show", "dev", "tern-o2"]);
    assert!(ok && addrs.contains("10.4.0.1/24"), "tern-o2: {addrs}");
    let (_, addrs) = lab.exec("r", &["ip", "-br", "addr", "show", "dev", "ro2"]);
    assert!(!addrs.contains("10.4.0.1"), "ro2 holds tern's address: {addrs}");
    while_polling(&mut r, || lab.sh(&["daemons"]));

    // OSPF: a full adjacency on both sides (each saw the other's hellos:
    // 224.0.0.5 punted into tern-o2, ospfd's hellos out of ro2), and the
    // route to o2's loopback in tern, from zebra over FPM, through o2.
    until(&mut r, 90, "the OSPF route", |r| gw(r, "10.255.2.1") == Some((Source::Fpm, "10.4.0.2".parse().expect("a"))));
    for ns in ["r", "o2"] {
        let nbr = while_polling(&mut r, || lab.sh(&["vtysh", ns, "show ip ospf neighbor"]));
        assert!(nbr.contains("Full"), "{ns}: {nbr}");
    }
    // OSPFv3 the same way: ff02::5 punted into tern-o2, the route to o2's
    // IPv6 loopback (through o2's link-local address) in tern.
    until(&mut r, 90, "the OSPFv3 route", |r| gw(r, "fd00:255:2::1").is_some_and(|(s, _)| s == Source::Fpm));
    for ns in ["r", "o2"] {
        let nbr = while_polling(&mut r, || lab.sh(&["vtysh", ns, "show ipv6 ospf6 neighbor"]));
        assert!(nbr.contains("Full"), "{ns}: {nbr}");
    }
    let (o2, o2_tap) = ports(&r, "o2");
    assert!(o2_tap.tx_packets > 0 && o2_tap.rx_packets > 0, "tern-o2 carried nothing: {o2_tap:?}");
    assert!(o2.tx_packets >= o2_tap.rx_packets, "what Linux wrote to tern-o2 left through ro2: {o2:?} {o2_tap:?}");
    assert_eq!(r.counter("ip4-input", "multicast"), 0, "multicast dropped instead of punted");

    // BGP: IPv4 and IPv6 sessions over tern-i1 and tern-i2, the primary's
    // routes in tern.
    // (The IPv6 next hop is the peer's link-local address or its global
    // one, as bgpd chooses.)
    until(&mut r, 90, "BGP routes over FPM", |r| {
        gw(r, "203.0.113.1") == Some((Source::Fpm, "10.2.0.2".parse().expect("a")))
            && gw(r, "2001:db8:113::1").is_some_and(|(s, _)| s == Source::Fpm)
    });
    let bgp = while_polling(&mut r, || lab.sh(&["vtysh", "r", "show bgp summary"]));
    eprintln!("{bgp}");

    // Transit to the learned prefixes: forwarded by tern (the echo
    // requests leave through i1's and o2's devices, counted by tern), and
    // answered.
    let t0 = Instant::now();
    while !lab.exec("o2", &["ip", "route", "get", "10.1.0.2"]).1.contains("via 10.4.0.1")
        || !lab.exec("o2", &["ip", "-6", "route", "get", "fd00:1::2"]).1.contains("via fe80:")
    {
        assert!(t0.elapsed() < Duration::from_secs(60), "o2 never learned the routes back to src");
        while_polling(&mut r, || std::thread::sleep(Duration::from_millis(100)));
    }
    let punted = r.counter("linux-punt", "punted");
    for (dst, iface) in
        [("203.0.113.1", "i1"), ("2001:db8:113::1", "i1"), ("10.255.2.1", "o2"), ("fd00:255:2::1", "o2")]
    {
        let (before, _) = ports(&r, iface);
        let (ok, out) = while_polling(&mut r, || lab.exec("src", &["ping", "-c", "20", "-i", "0.01", "-W", "2", dst]));
        assert!(ok && out.contains(" 0% packet loss"), "ping {dst} through tern: {out}\n{}", counters(&r));
        let (after, _) = ports(&r, iface);
        assert!(after.tx_packets >= before.tx_packets + 20, "{dst}: tern sent {before:?} -> {after:?} on {iface}");
        assert!(after.rx_packets >= before.rx_packets + 20, "{dst}: the replies came back through {iface}");
    }
    // The router's own address: Linux answers through tern-src, tern
    // never answers itself.
    let (ok, out) = while_polling(&mut r, || lab.ping("src", "10.1.0.1"));
    assert!(ok && !out.contains("DUP"), "ping to the router itself: {out}");
    assert!(r.counter("linux-punt", "punted") > punted, "the pings to the router went through the TAP");
    for (node, name) in [
        ("arp-input", "reply-sent"),
        ("ip4-local", "echo-reply-sent"),
        ("ip4-local", "left-to-linux"),
        ("linux-punt", "no-tap"),
    ] {
        assert_eq!(r.counter(node, name), 0, "{node}/{name}\n{}", counters(&r));
    }

    // An input rule set on o2 dropping OSPF from o2's addresses drops the
    // hellos before Linux sees them (multicast is punted ahead of the
    // lookup, where ip4-acl-in and ip6-acl-in sit): ospfd and ospf6d on r
    // lose their adjacencies.
    let set = tern_acl::parse_toml(
        "[[acl]]\nname = \"no-ospf\"\ndefault = \"accept\"\n\
         [[acl.rule]]\naction = \"drop\"\nproto = \"ospf\"\nsrc = \"10.4.0.2/32\"\n\
         [[acl.rule]]\naction = \"drop\"\nproto = \"ospf\"\nsrc = \"fe80::/10\"\n",
    )
    .expect("rules")
    .remove(0);
    r.replace_rule_set(set).expect("rule set");
    let o2_index = r.plan().iface_index("o2").expect("o2");
    r.set_interface_acls(o2_index, Some("no-ospf".into()), None).expect("bind");
    let t0 = Instant::now();
    loop {
        let v4 = while_polling(&mut r, || lab.sh(&["vtysh", "r", "show ip ospf neighbor"]));
        let v6 = while_polling(&mut r, || lab.sh(&["vtysh", "r", "show ipv6 ospf6 neighbor"]));
        if !v4.contains("Full") && !v6.contains("Full") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "an adjacency survived the rules: {v4}\n{v6}");
        while_polling(&mut r, || std::thread::sleep(Duration::from_millis(200)));
    }
    assert!(r.counter("ip4-punt-acl", "denied") > 0, "{}", counters(&r));
    assert!(r.counter("ip6-punt-acl", "denied") > 0, "{}", counters(&r));
    eprintln!("{}", counters(&r));
    r.shutdown();
}

/// A route's forwarding as a string both tables can be put in: the
/// gateways (sorted, joined by ","), or "dev" for a connected route, or
/// the route type.
fn target_key(t: &tern_fib::RouteTarget) -> String {
    use tern_fib::RouteTarget as T;
    match t {
        T::Via { gw, .. } => gw.to_string(),
        T::Ecmp(m) => {
            let mut v: Vec<String> = m.iter().map(|(g, _)| g.to_string()).collect();
            v.sort();
            v.join(",")
        }
        T::Connected { .. } => "dev".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// tern's `fpm` routes: prefix -> forwarding.
fn tern_table(r: &Router) -> std::collections::BTreeMap<String, String> {
    r.fib()
        .routes()
        .filter(|d| d.source == Source::Fpm)
        .map(|d| (d.prefix.to_string(), target_key(&d.target)))
        .collect()
}

/// Polls tern until its `fpm` routes are exactly the kernel's table
/// (zebra's) and that table is what the step wants (`want`); fails
/// after `secs` with the differences.
fn until_same_table(r: &mut Router, lab: &Lab, secs: u64, what: &str, want: impl Fn(&Table) -> bool) {
    let t0 = Instant::now();
    loop {
        let k = while_polling(r, || kernel_table(lab));
        for _ in 0..200 {
            if !r.poll() {
                break;
            }
        }
        let t = tern_table(r);
        if t == k && want(&k) {
            eprintln!("{what}: {} routes, tern = zebra's table after {:.2?}", t.len(), t0.elapsed());
            return;
        }
        if t0.elapsed() > Duration::from_secs(secs) {
            let missing: Vec<_> = k.iter().filter(|(p, g)| t.get(*p) != Some(g)).take(10).collect();
            let stale: Vec<_> = t.iter().filter(|(p, g)| k.get(*p) != Some(g)).take(10).collect();
            panic!(
                "{what}: tern {} routes, kernel {}; missing or different {missing:?}; stale or different {stale:?}; sources {:?}",
                t.len(),
                k.len(),
                r.source_status()
            );
        }
        while_polling(r, || std::thread::sleep(Duration::from_millis(200)));
    }
}

/// Real peers, real churn (issue 35): BIRD announces, withdraws and
/// re-announces a slice of the real table through FRR to tern, IPv4 and
/// IPv6; the primary fails over to the secondary and back (every route
/// moves to another next-hop object); tern is stopped in the middle of a
/// table's worth of updates and restarted; zebra restarts. After every
/// step tern's `fpm` routes are exactly zebra's table in the kernel
/// (prefix and next hop: 0 stale, 0 missing), and traffic to the covered
/// destination goes where the table says, or nowhere once withdrawn.
///
/// `TERN_FRR_CHURN=N4,N6` sizes it (default 100000,20000, issue 35's
/// size: about three minutes of a debug build on the project's 2-vCPU
/// machine; 10000,2000 for a quick run).
#[test]
fn frr_bird_churn_keeps_tern_exactly_on_zebras_table() {
    let Some(lab) = Lab::new("tlx", "kernel") else { return };
    let sizes = std::env::var("TERN_FRR_CHURN").unwrap_or_else(|_| "100000,20000".into());
    let (n4, n6) = sizes.split_once(',').unwrap_or(("100000", "20000"));
    lab.sh(&["net"]);
    eprintln!("{}", lab.sh(&["routes", n4, n6]).trim());
    let bgp4 = lab.announced_v4().len();
    let bgp6 =
        std::fs::read_to_string(format!("/tmp/{}/routes6.conf", lab.prefix())).unwrap_or_default().lines().count();

    tern_io::netdev::enter_netns(&lab.ns("r")).expect("enter the router namespace");
    let plan = tern_control::config::parse(&config(&lab), "linux_frr.toml", Path::new("/tmp")).expect("config");
    let mut r = Router::start(plan.clone()).expect("tern starts");
    while_polling(&mut r, || lab.sh(&["daemons"]));
    let a4: IpAddr = "203.0.113.1".parse().expect("a");
    let a6: IpAddr = "2001:db8:113::1".parse().expect("a");
    let ping_ok = |r: &mut Router, to: &str| {
        let (ok, out) = while_polling(r, || lab.ping("src", to));
        assert!(ok && !out.contains("DUP"), "ping {to} through tern: {out}\n{}", counters(r));
    };
    let on = |r: &Router, a: IpAddr, gw: &str| {
        let d = r.route_get(a);
        assert!(
            d.as_ref()
                .is_some_and(|d| d.source == Source::Fpm && d.nexthops.first().is_some_and(|n| n.gw.to_string() == gw)),
            "{a}: {d:?}"
        );
    };
    let bgp_count = |r: &Router| {
        r.fib()
            .routes()
            .filter(|d| d.source == Source::Fpm && !matches!(d.target, tern_fib::RouteTarget::Connected { .. }))
            .count()
    };

    // 1. Announce: every prefix, IPv4 and IPv6, on the primary.
    // Every announced prefix, IPv4 ones through `gw4`.
    let all_on = |gw4: &'static str| {
        move |k: &Table| {
            k.values().filter(|g| *g == gw4).count() >= bgp4
                && k.iter().filter(|(p, g)| p.contains(':') && *g != "dev").count() >= bgp6
        }
    };
    until_same_table(&mut r, &lab, 300, "announce", all_on("10.2.0.2"));
    on(&r, a4, "10.2.0.2");
    ping_ok(&mut r, "203.0.113.1");
    ping_ok(&mut r, "2001:db8:113::1");

    // 2. The primary withdraws its IPv4 routes: all move to the
    // secondary (a delete and an add per route in zebra's frames, each
    // naming another next-hop object).
    lab.sh(&["birdc", "i1", "disable up4"]);
    until_same_table(&mut r, &lab, 300, "failover to the secondary", all_on("10.3.0.2"));
    on(&r, a4, "10.3.0.2");
    ping_ok(&mut r, "203.0.113.1");

    // 3. Both withdraw everything: nothing of BGP may stay in tern.
    for (ns, p) in [("i2", "up4"), ("i1", "up6"), ("i2", "up6")] {
        lab.sh(&["birdc", ns, &format!("disable {p}")]);
    }
    until_same_table(&mut r, &lab, 300, "withdrawal", |k| {
        k.values().filter(|g| g.starts_with("10.") || g.starts_with("fe80:")).count() < 10
    });
    let left = bgp_count(&r);
    assert!(left < 50, "{left} routes besides the connected ones stayed after the withdrawal");
    assert!(r.route_get(a4).is_none_or(|d| d.source != Source::Fpm), "{:?}", r.route_get(a4));
    assert!(r.route_get(a6).is_none_or(|d| d.source != Source::Fpm), "{:?}", r.route_get(a6));
    let (ok, out) =
        while_polling(&mut r, || lab.exec("src", &["ping", "-c", "2", "-i", "0.2", "-W", "1", "203.0.113.1"]));
    assert!(!ok, "a withdrawn destination still answers through tern: {out}");

    // 4. Re-announce: all back, on the primary.
    for (ns, p) in [("i1", "up4"), ("i1", "up6"), ("i2", "up4"), ("i2", "up6")] {
        lab.sh(&["birdc", ns, &format!("enable {p}")]);
    }
    until_same_table(&mut r, &lab, 300, "re-announce", all_on("10.2.0.2"));
    on(&r, a4, "10.2.0.2");
    ping_ok(&mut r, "203.0.113.1");
    ping_ok(&mut r, "2001:db8:113::1");

    // 5. tern stops in the middle of a table's worth of updates (the
    // primary fails over again) and comes back: zebra reconnects and
    // resends, tern takes it and sweeps what zebra no longer has.
    lab.sh(&["birdc", "i1", "disable up4"]);
    let t0 = Instant::now();
    let frames0 = frr::fpm_counter(&r, "/fpm/frames");
    while frr::fpm_counter(&r, "/fpm/frames") < frames0 + 10 && t0.elapsed() < Duration::from_secs(30) {
        if !r.poll() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    r.shutdown();
    lab.sh(&["birdc", "i1", "enable up4"]);
    let mut r = Router::start(plan.clone()).expect("tern restarts");
    until_same_table(&mut r, &lab, 300, "tern restarted mid-table", all_on("10.2.0.2"));
    on(&r, a4, "10.2.0.2");
    ping_ok(&mut r, "203.0.113.1");

    // 6. zebra (and bgpd, ospfd) restart: the same, from zebra's side.
    while_polling(&mut r, || lab.sh(&["restart-frr"]));
    until_same_table(&mut r, &lab, 300, "zebra restarted", all_on("10.2.0.2"));
    on(&r, a4, "10.2.0.2");
    ping_ok(&mut r, "203.0.113.1");
    ping_ok(&mut r, "2001:db8:113::1");
    let info = r.route_sources();
    eprintln!("sources: {info:?}");
    let fpm = info.iter().find(|s| s.name == "fpm").expect("the fpm source");
    assert!(fpm.dels > 0, "{fpm:?}");
    r.shutdown();
}
