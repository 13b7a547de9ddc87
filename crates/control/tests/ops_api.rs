//! The operator's API against a running router on memory ports: the
//! daemon loop runs on its own thread exactly as `tern run` drives it, and
//! the test talks to it through the unix socket like the CLI does.

mod common;
mod ops;

use common::pkt::*;
use ops::*;
use std::path::Path;
use std::time::{Duration, Instant};
use tern_control::api::client::{CallError, Client};
use tern_control::api::types::*;
use tern_control::api::*;

fn done(r: Result<Reply, CallError>) -> String {
    match r {
        Ok(Reply::Done { message }) => message,
        other => panic!("expected done, got {other:?}"),
    }
}

fn api_err(r: Result<Reply, CallError>) -> ApiError {
    match r {
        Err(CallError::Api(e)) => e,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn route_get(c: &mut Client, a: &str) -> Option<RouteInfo> {
    match c.call(&Command::RouteGet(RouteGetArgs { address: a.into() })) {
        Ok(Reply::Route(r)) => r,
        other => panic!("{other:?}"),
    }
}

fn counter(c: &mut Client, node: &str, name: &str) -> u64 {
    match c.call(&Command::StatsShow(StatsShowArgs::default())) {
        Ok(Reply::Stats(s)) => s.errors.iter().find(|e| e.node == node && e.name == name).map_or(0, |e| e.count),
        other => panic!("{other:?}"),
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn routes_added_got_and_deleted_live() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    assert!(done(c.call(&Command::Ping {})).contains("protocol 1"));

    // Before: 203.0.113.7 has no route.
    assert_eq!(route_get(&mut c, "203.0.113.7"), None);
    let m = done(c.call(&Command::RouteAdd(RouteAddArgs {
        prefix: "203.0.113.0/24".into(),
        via: Some("10.0.2.2".into()),
        ..RouteAddArgs::default()
    })));
    assert_eq!(m, "added 203.0.113.0/24");
    let r = route_get(&mut c, "203.0.113.7").expect("route");
    assert_eq!((r.prefix.as_str(), r.source.as_str(), r.kind.as_str()), ("203.0.113.0/24", "api", "via"));
    assert_eq!(r.via, ["10.0.2.2"]);
    assert_eq!(r.nexthops[0].interface.as_deref(), Some("wan"), "resolved through the connected route");

    // It forwards: traffic to it asks for host B, then goes out.
    assert!(t.lan.inject(&udp_to("203.0.113.7")));
    t.answer_arp_for_b();
    let out = Running::recv(&t.wan, 1);
    let v = parse_v4(&out[0]).expect("forwarded");
    assert_eq!((v.dst, v.dst_mac, v.ttl), (a4("203.0.113.7"), HOST_B, 63));

    // Invalid routes change nothing and say why.
    let e = api_err(c.call(&Command::RouteAdd(RouteAddArgs {
        prefix: "203.0.113.0/24".into(),
        via: Some("2001:db8::1".into()),
        ..RouteAddArgs::default()
    })));
    assert_eq!(e.code, ErrorCode::Invalid);
    assert!(e.message.contains("family"), "{e:?}");
    let e = api_err(c.call(&Command::RouteAdd(RouteAddArgs {
        prefix: "10.1.0.0/16".into(),
        interface: Some("nope".into()),
        ..RouteAddArgs::default()
    })));
    assert_eq!(e.code, ErrorCode::NotFound);

    // The config's route is not the API's to delete unless asked.
    let e = api_err(c.call(&Command::RouteDel(RouteDelArgs { prefix: "198.18.0.0/15".into(), source: None })));
    assert!(e.message.contains("source static"), "{e:?}");
    done(c.call(&Command::RouteDel(RouteDelArgs { prefix: "203.0.113.0/24".into(), source: None })));
    assert_eq!(route_get(&mut c, "203.0.113.7"), None);
    assert!(t.lan.inject(&udp_to("203.0.113.7")));
    wait_for("no-route drop", || counter(&mut c, "ip4-lookup", "no-route") >= 1);

    // Listing with filters.
    let Ok(Reply::Routes(l)) =
        c.call(&Command::RouteList(RouteListArgs { source: Some("connected".into()), ..RouteListArgs::default() }))
    else {
        panic!("routes")
    };
    let p: Vec<_> = l.routes.iter().map(|r| r.prefix.as_str()).collect();
    assert_eq!(p, ["10.0.1.0/24", "10.0.2.0/24"]);
}

#[test]
fn interface_down_stops_forwarding_and_up_restores_it() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    assert!(t.lan.inject(&udp_to("198.18.0.9")));
    t.answer_arp_for_b();
    assert_eq!(Running::recv(&t.wan, 1).len(), 1);

    done(c.call(&Command::InterfaceSet(InterfaceSetArgs { name: "wan".into(), up: Some(false), mtu: None })));
    let Ok(Reply::Interfaces(ifs)) = c.call(&Command::InterfaceList {}) else { panic!("list") };
    let wan = ifs.iter().find(|i| i.name == "wan").expect("wan");
    assert!(!wan.admin_up && !wan.up);
    assert!(t.lan.inject(&udp_to("198.18.0.9")));
    wait_for("dropped at the down interface", || {
        let Ok(Reply::Stats(s)) = c.call(&Command::StatsShow(StatsShowArgs::default())) else { return false };
        s.errors.iter().any(|e| e.count > 0 && e.name.contains("down"))
    });
    assert!(
        t.wan.take_sent().iter().all(|f| parse_v4(f).is_none_or(|v| v.dst != a4("198.18.0.9"))),
        "nothing forwarded while down"
    );

    done(c.call(&Command::InterfaceSet(InterfaceSetArgs { name: "wan".into(), up: Some(true), mtu: Some(1400) })));
    assert!(t.lan.inject(&udp_to("198.18.0.9")));
    // Its neighbours were flushed when it went down: ARP again.
    t.answer_arp_for_b();
    let f = Running::recv(&t.wan, 1);
    assert!(f.iter().any(|f| parse_v4(f).is_some_and(|v| v.dst == a4("198.18.0.9"))), "forwards again");
    let Ok(Reply::Interfaces(ifs)) = c.call(&Command::InterfaceList {}) else { panic!("list") };
    assert_eq!(ifs.iter().find(|i| i.name == "wan").map(|i| (i.up, i.mtu)), Some((true, 1400)));

    let e = api_err(c.call(&Command::InterfaceSet(InterfaceSetArgs {
        name: "wan".into(),
        up: Some(false),
        mtu: Some(20),
    })));
    assert_eq!(e.code, ErrorCode::Invalid);
    let Ok(Reply::Interfaces(ifs)) = c.call(&Command::InterfaceList {}) else { panic!("list") };
    assert!(ifs.iter().find(|i| i.name == "wan").is_some_and(|i| i.up), "an invalid MTU changed nothing");
    // Jumbo: above what a lane's buffer holds, refused naming the limit.
    let e = api_err(c.call(&Command::InterfaceSet(InterfaceSetArgs { name: "wan".into(), up: None, mtu: Some(9000) })));
    assert_eq!(e.code, ErrorCode::Invalid);
    assert!(e.message.contains("above the 1778"), "{}", e.message);
    let Ok(Reply::Interfaces(ifs)) = c.call(&Command::InterfaceList {}) else { panic!("list") };
    assert_eq!(ifs.iter().find(|i| i.name == "wan").map(|i| i.mtu), Some(1400), "a refused MTU changed nothing");
}

#[test]
fn addresses_bring_their_routes_live() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    done(c.call(&Command::AddressAdd(AddressArgs { interface: "lan".into(), address: "10.0.9.1/24".into() })));
    let r = route_get(&mut c, "10.0.9.1").expect("local route");
    assert_eq!((r.kind.as_str(), r.interface.as_deref()), ("local", Some("lan")));
    assert_eq!(route_get(&mut c, "10.0.9.77").expect("connected").kind, "connected");
    // tern answers ARP for its new address.
    assert!(t.lan.inject(&eth([0xff; 6], HOST_A, 0x0806, &arp(1, HOST_A, a4("10.0.9.2"), [0; 6], a4("10.0.9.1")))));
    let reply = Running::recv(&t.lan, 1);
    let a = parse_arp(&reply[0]).expect("ARP");
    assert_eq!(a.operation, ArpOperation::REPLY, "ARP reply");
    assert_eq!(a.source_protocol_addr, a4("10.0.9.1"));

    let e =
        api_err(c.call(&Command::AddressAdd(AddressArgs { interface: "wan".into(), address: "10.0.9.5/24".into() })));
    assert!(e.message.contains("overlaps 10.0.9.0/24 of interface lan"), "{e:?}");
    let e =
        api_err(c.call(&Command::AddressAdd(AddressArgs { interface: "wan".into(), address: "10.0.9.1/32".into() })));
    assert!(e.message.contains("already on lan"), "{e:?}");

    done(c.call(&Command::AddressDel(AddressArgs { interface: "lan".into(), address: "10.0.9.1/24".into() })));
    assert_eq!(route_get(&mut c, "10.0.9.77"), None, "connected route gone with its address");
    let Ok(Reply::Addresses(a)) = c.call(&Command::AddressList(AddressListArgs { interface: Some("lan".into()) }))
    else {
        panic!("addresses")
    };
    let global: Vec<_> = a.iter().filter(|a| a.scope == "global").map(|a| a.address.as_str()).collect();
    assert_eq!(global, ["10.0.1.1/24"]);
    // The running configuration follows.
    let Ok(Reply::Text { text }) = c.call(&Command::ConfigShow {}) else { panic!("config") };
    assert!(text.contains("10.0.1.1/24") && !text.contains("10.0.9.1"), "{text}");
}

#[test]
fn trace_and_capture_over_the_api() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    done(c.call(&Command::TraceStart(TraceStartArgs { count: 1 })));
    let Ok(Reply::Capture(start)) = c.call(&Command::CaptureStart(CaptureStartArgs {
        target: "lan".into(),
        direction: None,
        count: Some(2),
        snaplen: None,
    })) else {
        panic!("capture")
    };
    let e = api_err(c.call(&Command::CaptureStart(CaptureStartArgs { target: "wan".into(), ..Default::default() })));
    assert_eq!(e.code, ErrorCode::Refused, "one capture at a time");
    // A node capture is a capture too: refused while the interface's runs.
    let e =
        api_err(c.call(&Command::CaptureStart(CaptureStartArgs { target: "ip4-lookup".into(), ..Default::default() })));
    assert_eq!(e.code, ErrorCode::Refused, "{e:?}");
    assert!(e.message.contains("one capture at a time"), "{e:?}");
    let e = api_err(
        c.call(&Command::CaptureStart(CaptureStartArgs { target: "no-such-node".into(), ..Default::default() })),
    );
    assert!(e.message.contains("no-such-node"), "{e:?}");

    // A ping to tern: traced, captured in (request) and out (reply).
    let echo = ipv4(a4("10.0.1.2"), a4("10.0.1.1"), 1, 64, &icmp_echo(8, 7, 1, b"trace me"));
    let req = eth(TERN_LAN, HOST_A, 0x0800, &echo);
    assert!(t.lan.inject(&eth([0xff; 6], HOST_A, 0x0806, &arp(1, HOST_A, a4("10.0.1.2"), [0; 6], a4("10.0.1.1")))));
    let mut frames = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut sent_ping = false;
    loop {
        let Ok(Reply::Capture(b)) = c.call(&Command::CaptureRead(CaptureIdArgs { id: start.id })) else {
            panic!("read")
        };
        frames.extend(b.frames);
        if b.done {
            break;
        }
        if !sent_ping && !t.lan.take_sent().is_empty() {
            // ARP answered: now the ping (captured frames 3 and 4 would
            // exceed the count of 2, so the capture is the ARP exchange).
            assert!(t.lan.inject(&req));
            sent_ping = true;
        }
        assert!(Instant::now() < deadline, "capture did not finish: {frames:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(frames.len(), 2);
    assert_eq!(frames.iter().map(|f| f.dir.as_str()).collect::<Vec<_>>(), ["rx", "tx"]);
    let first = from_hex(&frames[0].data).expect("hex");
    assert_eq!(parse_arp(&first).map(|a| a.operation), Some(ArpOperation::REQUEST), "the ARP request as received");
    assert!(frames[0].unix_ns > 1_600_000_000_000_000_000, "wall-clock time stamps");
    let e = api_err(c.call(&Command::CaptureRead(CaptureIdArgs { id: start.id })));
    assert_eq!(e.code, ErrorCode::NotFound, "finished captures are gone");

    wait_for("trace record", || matches!(c.call(&Command::TraceShow {}), Ok(Reply::Trace(t)) if !t.packets.is_empty()));
    let Ok(Reply::Trace(tr)) = c.call(&Command::TraceShow {}) else { panic!("trace") };
    let p = &tr.packets[0];
    assert_eq!(p.interface, "lan");
    assert!(p.summary.contains("arp who-has 10.0.1.1 tell 10.0.1.2"), "{}", p.summary);
    assert_eq!(p.hops.first().map(|h| h.node.as_str()), Some("ethernet-input"));
    assert!(p.fate.starts_with("tx"), "{}", p.fate);
    done(c.call(&Command::TraceClear {}));
    assert!(matches!(c.call(&Command::TraceShow {}), Ok(Reply::Trace(t)) if t.packets.is_empty()));
}

#[test]
fn reload_applies_differences_and_refuses_bad_files() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    let path = t.config_path();
    let reload = |c: &mut Client| c.call(&Command::ConfigReload {});

    // Unchanged file: nothing to do.
    assert!(matches!(reload(&mut c), Ok(Reply::Reload(r)) if r.changes.is_empty()));

    // A new route, a moved route, an address and a down interface.
    let v2 = CONFIG_TEXT
        .replace("198.18.0.0/15", "198.19.0.0/16")
        .replace("[\"10.0.1.1/24\"]", "[\"10.0.1.1/24\", \"10.0.7.1/24\"]")
        + "\n[[route]]\nprefix = \"192.0.2.0/24\"\ntype = \"blackhole\"\n";
    std::fs::write(&path, &v2).expect("write");
    let Ok(Reply::Reload(r)) = reload(&mut c) else { panic!("reload") };
    assert!(r.changes.iter().any(|l| l.contains("198.18.0.0/15 removed")), "{r:?}");
    assert!(r.changes.iter().any(|l| l.contains("192.0.2.0/24")), "{r:?}");
    assert!(r.changes.iter().any(|l| l.contains("10.0.7.1/24")), "{r:?}");
    assert_eq!(route_get(&mut c, "192.0.2.1").map(|r| r.kind), Some("blackhole".into()));
    assert_eq!(route_get(&mut c, "198.18.1.1"), None);
    assert_eq!(route_get(&mut c, "10.0.7.1").map(|r| r.kind), Some("local".into()));

    // A syntax error: refused with file and line; nothing changes.
    let broken = v2.replace("type = \"blackhole\"", "type = blackhole");
    std::fs::write(&path, &broken).expect("write");
    let e = api_err(reload(&mut c));
    assert_eq!(e.code, ErrorCode::Invalid);
    let line = broken[..broken.find("type = blackhole").expect("edit")].matches('\n').count() + 1;
    assert!(e.message.starts_with(&format!("{}:{line}:", path.display())), "names file and line {line}: {e:?}");
    // A semantic error names the key.
    std::fs::write(&path, v2.replace("10.0.7.1/24", "10.0.7.300/24")).expect("write");
    let e = api_err(reload(&mut c));
    assert!(e.message.contains("interface[0].addresses[1]"), "{e:?}");
    // Jumbo frames a lane cannot carry: refused naming the key and limit.
    std::fs::write(&path, v2.replace("mac = \"02:00:00:00:02:01\"", "mac = \"02:00:00:00:02:01\"\nmtu = 9000"))
        .expect("write");
    let e = api_err(reload(&mut c));
    assert!(e.message.contains("interface[1].mtu") && e.message.contains("above the 1778"), "{e:?}");
    // A change that needs a restart is refused with its key and line.
    std::fs::write(&path, v2.replace("icmp_rate = 100000", "workers = 2\nicmp_rate = 100000")).expect("write");
    let e = api_err(reload(&mut c));
    assert_eq!(e.code, ErrorCode::Refused);
    assert!(e.message.contains("dataplane.workers") && e.message.contains("restart"), "{e:?}");
    // Still the v2 state.
    assert_eq!(route_get(&mut c, "192.0.2.1").map(|r| r.kind), Some("blackhole".into()));
    let Ok(Reply::Status(s)) = c.call(&Command::Status {}) else { panic!("status") };
    assert_eq!(s.workers, 1);
}

#[test]
fn garbage_on_the_socket_gets_errors_and_the_server_keeps_serving() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    for line in [
        &b"not json\n"[..],
        b"{\"version\":7,\"id\":4,\"op\":\"ping\"}\n",
        b"\xff\xfe\n",
        b"[]\n",
        b"{\"version\":1,\"op\":\"route_add\",\"args\":{\"prefix\":1}}\n",
    ] {
        let r = c.call_raw(line).expect("an answer");
        assert!(!r.ok, "{line:?}");
        assert!(r.error.is_some_and(|e| !e.message.is_empty()));
    }
    let r = c.call_raw(b"{\"version\":7,\"id\":4,\"op\":\"ping\"}\n").expect("answer");
    assert_eq!(r.id, Some(4), "the id of a refused request is repeated");
    // An over-long line closes that connection only.
    let mut big = vec![b'x'; MAX_REQUEST_BYTES + 10];
    big.push(b'\n');
    let r = c.call_raw(&big).expect("answer");
    assert!(r.error.is_some_and(|e| e.message.contains("longer")));
    let mut c2 = t.client();
    assert!(done(c2.call(&Command::Ping {})).contains("tern"));
    assert!(Path::new(&t.socket).exists());
}

#[test]
fn rule_sets_count_hits_and_change_live() {
    let cfg = CONFIG_TEXT.replace("addresses = [\"10.0.1.1/24\"]", "addresses = [\"10.0.1.1/24\"]\nacl_in = \"EDGE\"")
        + "\n[[acl]]\nname = \"EDGE\"\ndefault = \"accept\"\n[[acl.rule]]\naction = \"drop\"\nproto = \"udp\"\ndport = \"5678\"\ncomment = \"no 5678\"\n";
    let t = Running::start(&cfg, false);
    let mut c = t.client();
    assert!(t.lan.inject(&udp_to("198.18.0.9")));
    let hits = |c: &mut Client| match c.call(&Command::AclList(AclListArgs::default())) {
        Ok(Reply::Acls(v)) => v,
        other => panic!("{other:?}"),
    };
    wait_for("a hit on rule 0", || hits(&mut c)[0].rules[0].packets == 1);
    let v = hits(&mut c);
    assert!(v[0].counting);
    assert_eq!(v[0].interfaces_in, ["lan"]);
    assert_eq!(v[0].rules[0].comment.as_deref(), Some("no 5678"));
    assert!(v[0].rules[0].matches.contains("5678"), "{:?}", v[0].rules[0]);
    assert!(t.wan.take_sent().is_empty(), "dropped: no ARP for the next hop");

    // Replace the rule live: 5678 passes now.
    let set: tern_acl::RuleSet = serde_json::from_value(serde_json::json!({
        "name": "EDGE", "default": "accept", "rule": [{"action": "drop", "proto": "udp", "dport": "9999"}]
    }))
    .expect("rule set");
    assert!(done(c.call(&Command::AclSet(AclSetArgs { set, bind_in: vec![], bind_out: vec![] }))).contains("replaced"));
    assert!(t.lan.inject(&udp_to("198.18.0.9")));
    t.answer_arp_for_b();
    assert!(Running::recv(&t.wan, 1).iter().any(|f| parse_v4(f).is_some_and(|v| v.dst == a4("198.18.0.9"))));
    wait_for("default hit", || hits(&mut c)[0].default_packets >= 1);

    // Reload: unbinding is live.
    std::fs::write(t.config_path(), cfg.replace("\nacl_in = \"EDGE\"", "")).expect("write");
    let Ok(Reply::Reload(r)) = c.call(&Command::ConfigReload {}) else { panic!("reload") };
    assert!(r.changes.iter().any(|l| l.contains("acl in -")), "{r:?}");
    assert!(hits(&mut c)[0].interfaces_in.is_empty());

    // A set added at run time (`acl set`, `acl load`) and bound, then a
    // reload of the file, which has neither: the binding goes, then the
    // set (it was last), and its traffic passes.
    let set = |name: &str, dport: &str| -> tern_acl::RuleSet {
        serde_json::from_value(serde_json::json!({
            "name": name, "default": "accept", "rule": [{"action": "drop", "proto": "udp", "dport": dport}]
        }))
        .expect("rule set")
    };
    done(c.call(&Command::AclSet(AclSetArgs {
        set: set("LOADED", "5678"),
        bind_in: vec!["lan".into()],
        bind_out: vec![],
    })));
    assert_eq!(hits(&mut c).len(), 2);
    assert!(t.lan.inject(&udp_to("198.18.0.9")));
    wait_for("LOADED drops", || hits(&mut c)[1].rules[0].packets == 1);
    let Ok(Reply::Reload(r)) = c.call(&Command::ConfigReload {}) else { panic!("reload") };
    assert!(r.changes.iter().any(|l| l.contains("acl in -")), "{r:?}");
    let v = hits(&mut c);
    assert_eq!(v.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["EDGE"], "{r:?}");
    assert!(v[0].interfaces_in.is_empty());
    assert!(t.lan.inject(&udp_to("198.18.0.9")));
    assert!(Running::recv(&t.wan, 1).iter().any(|f| parse_v4(f).is_some_and(|v| v.dst == a4("198.18.0.9"))));

    // The file without any set: EDGE, the last, goes too.
    let no_set = cfg.replace("\nacl_in = \"EDGE\"", "");
    let no_set = &no_set[..no_set.find("\n[[acl]]").expect("acl")];
    std::fs::write(t.config_path(), no_set).expect("write");
    let Ok(Reply::Reload(_)) = c.call(&Command::ConfigReload {}) else { panic!("reload") };
    assert!(hits(&mut c).is_empty());

    // Two sets added at run time; a file with the second only would move
    // it: refused, and both stay.
    done(c.call(&Command::AclSet(AclSetArgs { set: set("FIRST", "1111"), bind_in: vec![], bind_out: vec![] })));
    done(c.call(&Command::AclSet(AclSetArgs {
        set: set("SECOND", "2222"),
        bind_in: vec!["lan".into()],
        bind_out: vec![],
    })));
    let second = "\n[[acl]]\nname = \"SECOND\"\ndefault = \"accept\"\n";
    let bound = no_set.replace("addresses = [\"10.0.1.1/24\"]", "addresses = [\"10.0.1.1/24\"]\nacl_in = \"SECOND\"");
    std::fs::write(t.config_path(), bound + second).expect("write");
    let e = api_err(c.call(&Command::ConfigReload {}));
    assert_eq!(e.code, ErrorCode::Refused, "{e:?}");
    assert!(e.message.contains("restart"), "{e:?}");
    assert_eq!(hits(&mut c).len(), 2);
}

#[test]
fn acl_set_binds_a_new_set_live_or_changes_nothing() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    let list = |c: &mut Client| match c.call(&Command::AclList(AclListArgs::default())) {
        Ok(Reply::Acls(v)) => v,
        other => panic!("{other:?}"),
    };
    assert!(list(&mut c).is_empty());
    let set = |rules: serde_json::Value| -> tern_acl::RuleSet {
        serde_json::from_value(serde_json::json!({"name": "IMPORTED", "default": "accept", "rule": rules}))
            .expect("rule set")
    };
    let drop_udp = serde_json::json!([{"action": "drop", "proto": "udp", "dport": "5678"}]);
    // An unknown interface: refused, and nothing was added.
    let e = api_err(c.call(&Command::AclSet(AclSetArgs {
        set: set(drop_udp.clone()),
        bind_in: vec!["lan".into(), "nope".into()],
        bind_out: vec![],
    })));
    assert_eq!(e.code, ErrorCode::NotFound, "{e:?}");
    assert!(list(&mut c).is_empty());
    // A set that does not compile (unknown interface in a rule): nothing bound.
    let e = api_err(c.call(&Command::AclSet(AclSetArgs {
        set: set(serde_json::json!([{"action": "drop", "iif": "nope"}])),
        bind_in: vec!["lan".into()],
        bind_out: vec![],
    })));
    assert_eq!(e.code, ErrorCode::Invalid, "{e:?}");
    assert!(list(&mut c).is_empty());
    // Added without bindings: the refused attempts left none behind.
    let msg =
        done(c.call(&Command::AclSet(AclSetArgs { set: set(drop_udp.clone()), bind_in: vec![], bind_out: vec![] })));
    assert!(msg.contains("added"), "{msg}");
    let v = list(&mut c);
    assert!(v[0].interfaces_in.is_empty() && v[0].interfaces_out.is_empty(), "{v:?}");
    // Replaced and bound in one step: the next packet meets it.
    let msg = done(c.call(&Command::AclSet(AclSetArgs {
        set: set(drop_udp),
        bind_in: vec!["lan".into()],
        bind_out: vec!["wan".into()],
    })));
    assert!(msg.contains("replaced") && msg.contains("bound in on lan") && msg.contains("bound out on wan"), "{msg}");
    let v = list(&mut c);
    assert_eq!(
        (v[0].interfaces_in.as_slice(), v[0].interfaces_out.as_slice()),
        (&["lan".to_string()][..], &["wan".to_string()][..])
    );
    assert!(t.lan.inject(&udp_to("198.18.0.9")));
    wait_for("a hit on the bound set", || list(&mut c)[0].rules[0].packets == 1);
    assert!(t.wan.take_sent().is_empty());
}

/// The message after "file:line:col: key: " of a configuration error, or
/// the whole of an API error.
fn tail(m: &str, key: &str) -> String {
    m.split_once(&format!(" {key}: ")).map_or_else(|| m.to_string(), |(_, t)| t.to_string())
}

/// Next hops and addresses the file refuses are refused by the API and
/// by a reload too, with the same message (issue 36 item 7: the API took
/// 224.0.0.1, 255.255.255.255, 0.0.0.0, 127.0.0.1 and tern's own address
/// as gateways, and subnets overlapping another interface's).
#[test]
fn file_reload_and_api_refuse_the_same_things_alike() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    let path = t.config_path();
    let before = match c.call(&Command::RouteList(RouteListArgs::default())) {
        Ok(Reply::Routes(l)) => l.routes.len(),
        other => panic!("{other:?}"),
    };
    for gw in ["224.0.0.1", "255.255.255.255", "0.0.0.0", "127.0.0.1", "10.0.2.1", "10.0.1.1", "10.0.3.2"] {
        let api = api_err(c.call(&Command::RouteAdd(RouteAddArgs {
            prefix: "0.0.0.0/0".into(),
            via: Some(gw.into()),
            ..RouteAddArgs::default()
        })));
        assert_eq!(api.code, ErrorCode::Invalid, "{gw}: {api:?}");
        let text = format!("{CONFIG_TEXT}\n[[route]]\nprefix = \"0.0.0.0/0\"\nvia = \"{gw}\"\n");
        let file = tern_control::config::parse(&text, "t.toml", Path::new("/")).expect_err(gw);
        assert_eq!(file.key.as_deref(), Some("route[1].via"));
        assert_eq!(file.message, api.message, "{gw}: the file and the API say the same");
        std::fs::write(&path, &text).expect("write");
        let reload = api_err(c.call(&Command::ConfigReload {}));
        assert_eq!(tail(&reload.message, "route[1].via"), api.message, "{gw}: a reload says the same");
    }
    let own = api_err(c.call(&Command::RouteAdd(RouteAddArgs {
        prefix: "0.0.0.0/0".into(),
        via: Some("10.0.2.1".into()),
        interface: Some("wan".into()),
        ..RouteAddArgs::default()
    })));
    assert!(own.message.contains("black hole"), "{own:?}");
    // Overlapping subnets.
    let api =
        api_err(c.call(&Command::AddressAdd(AddressArgs { interface: "wan".into(), address: "10.0.1.129/25".into() })));
    assert!(api.message.contains("overlaps 10.0.1.0/24 of interface lan"), "{api:?}");
    let text = CONFIG_TEXT.replace("[\"10.0.2.1/24\"]", "[\"10.0.2.1/24\", \"10.0.1.129/25\"]");
    let file = tern_control::config::parse(&text, "t.toml", Path::new("/")).expect_err("overlap");
    assert_eq!(file.key.as_deref(), Some("interface[1].addresses[1]"));
    assert_eq!(file.message, api.message);
    std::fs::write(&path, &text).expect("write");
    let reload = api_err(c.call(&Command::ConfigReload {}));
    assert_eq!(tail(&reload.message, "interface[1].addresses[1]"), api.message);
    // Nothing changed.
    let after = match c.call(&Command::RouteList(RouteListArgs::default())) {
        Ok(Reply::Routes(l)) => l.routes.len(),
        other => panic!("{other:?}"),
    };
    assert_eq!(after, before);
    // A gateway on a connected subnet is still fine, and so is any
    // gateway on a named interface.
    done(c.call(&Command::RouteAdd(RouteAddArgs {
        prefix: "0.0.0.0/0".into(),
        via: Some("10.0.2.9".into()),
        ..RouteAddArgs::default()
    })));
    done(c.call(&Command::RouteAdd(RouteAddArgs {
        prefix: "192.0.2.0/24".into(),
        via: Some("10.9.9.9".into()),
        interface: Some("wan".into()),
        ..RouteAddArgs::default()
    })));
}

fn api_routes(c: &mut Client) -> Vec<(String, Vec<String>)> {
    match c.call(&Command::RouteList(RouteListArgs { source: Some("api".into()), ..RouteListArgs::default() })) {
        Ok(Reply::Routes(l)) => l.routes.into_iter().map(|r| (r.prefix, r.via)).collect(),
        other => panic!("{other:?}"),
    }
}

fn add(prefix: &str, via: &str) -> RouteAddArgs {
    RouteAddArgs { prefix: prefix.into(), via: Some(via.into()), ..RouteAddArgs::default() }
}

fn del(prefix: &str) -> RouteDelArgs {
    RouteDelArgs { prefix: prefix.into(), source: None }
}

/// `route_batch`: many routes in one request, all or nothing.
#[test]
fn route_batches_apply_all_or_nothing() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    let many: Vec<RouteAddArgs> =
        (0..2000).map(|i| add(&format!("100.{}.{}.0/24", i / 256, i % 256), "10.0.2.2")).collect();
    let m = done(c.call(&Command::RouteBatch(RouteBatchArgs { add: many.clone(), del: vec![] })));
    assert!(m.contains("2000"), "{m}");
    assert_eq!(api_routes(&mut c).len(), 2000);
    let r = route_get(&mut c, "100.7.207.1").expect("the last route");
    assert_eq!((r.prefix.as_str(), r.source.as_str()), ("100.7.207.0/24", "api"));

    // One bad route anywhere: nothing of the batch, and the error says which.
    let mut bad: Vec<RouteAddArgs> = (0..100).map(|i| add(&format!("101.0.{i}.0/24"), "10.0.2.3")).collect();
    bad.push(add("101.1.0.0/24", "224.0.0.1"));
    bad.push(add("101.2.0.0/24", "10.0.2.4"));
    // ... replacing routes of the table, deleting others.
    bad.push(add("100.0.1.0/24", "10.0.2.5"));
    let dels = vec![del("100.0.2.0/24"), del("100.0.3.0/24")];
    let e = api_err(c.call(&Command::RouteBatch(RouteBatchArgs { add: bad.clone(), del: dels.clone() })));
    assert_eq!(e.code, ErrorCode::Invalid);
    assert!(e.message.starts_with("add[100]: 224.0.0.1 cannot be a next hop"), "{e:?}");
    let now = api_routes(&mut c);
    assert_eq!(now.len(), 2000, "nothing added or removed");
    assert!(now.iter().all(|(p, via)| !p.starts_with("101.") && via == &["10.0.2.2"]), "nothing replaced");
    // A delete of a route that is not there: nothing either.
    bad.remove(100);
    let mut missing = dels.clone();
    missing.push(del("100.200.0.0/24"));
    let e = api_err(c.call(&Command::RouteBatch(RouteBatchArgs { add: bad.clone(), del: missing })));
    assert_eq!(e.code, ErrorCode::NotFound);
    assert!(e.message.starts_with("del[2]:"), "{e:?}");
    assert_eq!(api_routes(&mut c).len(), 2000);
    // Deleting one twice, or a static route, is refused.
    let e = api_err(c.call(&Command::RouteBatch(RouteBatchArgs { add: vec![], del: vec![del("100.0.2.0/24"); 2] })));
    assert!(e.message.starts_with("del[1]:"), "{e:?}");
    let e = api_err(c.call(&Command::RouteBatch(RouteBatchArgs {
        add: vec![],
        del: vec![RouteDelArgs { prefix: "198.18.0.0/15".into(), source: Some("static".into()) }],
    })));
    assert_eq!(e.code, ErrorCode::Refused, "{e:?}");
    let e = api_err(c.call(&Command::RouteBatch(RouteBatchArgs::default())));
    assert!(e.message.contains("empty"), "{e:?}");
    // The good batch goes through whole.
    done(c.call(&Command::RouteBatch(RouteBatchArgs { add: bad, del: dels })));
    let now = api_routes(&mut c);
    assert_eq!(now.len(), 2000 + 101 - 2, "101 new, one replaced, two removed");
    assert!(!now.iter().any(|(p, _)| p == "100.0.2.0/24" || p == "100.0.3.0/24"));
    assert_eq!(route_get(&mut c, "100.0.1.1").map(|r| r.via), Some(vec!["10.0.2.5".to_string()]));
    // Deleting them all in one request.
    let all: Vec<RouteDelArgs> = now.iter().map(|(p, _)| del(p)).collect();
    done(c.call(&Command::RouteBatch(RouteBatchArgs { add: vec![], del: all })));
    assert!(api_routes(&mut c).is_empty());
    assert_eq!(route_get(&mut c, "198.18.0.1").map(|r| r.source), Some("static".into()), "the config's route stays");
}

/// A huge value in a request gives an error of bounded size (it was
/// quoted whole, as in the configuration's errors).
#[test]
fn huge_values_in_requests_give_bounded_errors() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    let big = "x".repeat(500_000);
    for cmd in [
        Command::RouteAdd(RouteAddArgs {
            prefix: "10.9.0.0/16".into(),
            interface: Some(big.clone()),
            ..Default::default()
        }),
        Command::RouteAdd(RouteAddArgs { prefix: big.clone(), via: Some("10.0.2.2".into()), ..Default::default() }),
        Command::RouteAdd(RouteAddArgs { prefix: "10.9.0.0/16".into(), via: Some(big.clone()), ..Default::default() }),
        Command::RouteAdd(RouteAddArgs { prefix: "10.9.0.0/16".into(), kind: Some(big.clone()), ..Default::default() }),
        Command::AddressAdd(AddressArgs { interface: "lan".into(), address: big.clone() }),
        Command::AddressDel(AddressArgs { interface: big.clone(), address: "10.0.1.1/24".into() }),
        Command::RouteGet(RouteGetArgs { address: big.clone() }),
    ] {
        let e = api_err(c.call(&cmd));
        assert!(e.message.len() < 600, "{} bytes: {}", e.message.len(), &e.message[..200]);
        assert!(e.message.contains("xxxx"), "it quotes the start: {e:?}");
    }
}

/// The fast paths switch live over the API and by reload, and `status`
/// shows them: with them on, a flow the input rule set accepted skips
/// `ip4-acl-in` (`ip4-input/acl-shortcut` counts it, on the rule's
/// counters); off, the same traffic takes the reference path (the
/// shortcut's counter stands still while the rule's keep counting); on
/// again, the shortcut takes it again.
#[test]
fn fast_paths_switch_live_over_the_api() {
    let cfg = CONFIG_TEXT.replace("addresses = [\"10.0.1.1/24\"]", "addresses = [\"10.0.1.1/24\"]\nacl_in = \"EDGE\"")
        + "\n[[acl]]\nname = \"EDGE\"\ndefault = \"drop\"\n[[acl.rule]]\naction = \"accept\"\nproto = \"udp\"\ndport = \"5678\"\n";
    let t = Running::start(&cfg, false);
    let mut c = t.client();
    let status = |c: &mut Client| match c.call(&Command::Status {}) {
        Ok(Reply::Status(s)) => s.fast_paths,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        status(&mut c),
        tern_control::config::FastPathsCfg { direct: true, acl_shortcut: true, gre_direct: true }
    );
    let rule_hits = |c: &mut Client| match c.call(&Command::AclList(AclListArgs::default())) {
        Ok(Reply::Acls(v)) => v[0].rules[0].packets,
        other => panic!("{other:?}"),
    };
    assert!(t.lan.inject(&udp_to("198.18.0.9")));
    t.answer_arp_for_b();
    Running::recv(&t.wan, 1);
    let mut sent = 1;
    // Frames of the accepted flow, one at a time; all forwarded.
    let mut flow = |c: &mut Client, n: u64| {
        for _ in 0..n {
            assert!(t.lan.inject(&udp_to("198.18.0.9")));
            Running::recv(&t.wan, 1);
        }
        sent += n;
        let want = sent;
        wait_for("the rule's counters", || rule_hits(c) == want);
    };
    let shortcut = |c: &mut Client| counter(c, "ip4-input", "acl-shortcut");

    flow(&mut c, 20);
    let taken_on = shortcut(&mut c);
    assert!(taken_on > 0, "the shortcut took the accepted flow");

    let m = done(c.call(&Command::FastPathsSet(FastPathsSetArgs { on: false, name: None })));
    assert_eq!(m, "fast paths: direct off, acl_shortcut off, gre_direct off");
    assert_eq!(
        status(&mut c),
        tern_control::config::FastPathsCfg { direct: false, acl_shortcut: false, gre_direct: false }
    );
    flow(&mut c, 20);
    assert_eq!(shortcut(&mut c), taken_on, "off: every packet through ip4-acl-in");

    let m = done(c.call(&Command::FastPathsSet(FastPathsSetArgs { on: true, name: Some("acl-shortcut".into()) })));
    assert_eq!(m, "fast paths: direct off, acl_shortcut on, gre_direct off");
    flow(&mut c, 10);
    assert_eq!(shortcut(&mut c), taken_on, "the shortcut is the direct path's: still off");

    done(c.call(&Command::FastPathsSet(FastPathsSetArgs { on: true, name: None })));
    flow(&mut c, 20);
    assert!(shortcut(&mut c) > taken_on, "on again: the shortcut takes the flow");

    let e = api_err(c.call(&Command::FastPathsSet(FastPathsSetArgs { on: true, name: Some("warp".into()) })));
    assert_eq!(e.code, ErrorCode::Invalid);
    assert!(e.message.contains("warp"), "{e:?}");

    // A reload sets them from the file.
    std::fs::write(t.config_path(), format!("{cfg}\n[dataplane.fast_paths]\nacl_shortcut = false\n")).expect("write");
    let Ok(Reply::Reload(r)) = c.call(&Command::ConfigReload {}) else { panic!("reload") };
    assert!(r.changes.iter().any(|l| l.contains("fast paths")), "{r:?}");
    assert_eq!(
        status(&mut c),
        tern_control::config::FastPathsCfg { direct: true, acl_shortcut: false, gre_direct: true }
    );
    let before = shortcut(&mut c);
    flow(&mut c, 10);
    assert_eq!(shortcut(&mut c), before, "acl_shortcut = false in the file");
}
