//! The FPM server against a client speaking zebra's `dplane_fpm_nl`
//! framing over real TCP: routes and next-hop groups land in the RIB as
//! source `fpm`; updates are atomic; malformed input is counted, a broken
//! stream is closed; a reconnect resyncs by mark and sweep; a zebra that
//! never returns has its routes removed.

use std::io::Write;
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};
use tern_control::linux::fpm::{FpmConfig, FpmServer, FpmStatus, frame};
use tern_control::linux::nl::{NexthopSpec, NlBuilder, RTM_DELROUTE, RTM_NEWNEXTHOP, RTM_NEWROUTE, RouteSpec};
use tern_control::linux::sync::IfMap;
use tern_control::neighbor::NeighborTable;
use tern_control::source::{ControlSource, SourceCx};
use tern_fib::{FibConfig, FibReader, FibWriter, NhKind, RouteAttrs, RouteTarget, Source};
use tern_nodes::state::{IfKind, IfTable, Iface, link_local_from_mac};
use tern_rcu::Published;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

struct Rig {
    server: FpmServer,
    fib: FibWriter,
    reader: FibReader,
    neigh: NeighborTable,
    ifaces: Published<IfTable>,
}

fn iface(index: u16) -> Iface {
    let mac = [2, 0, 0, 0, 0, index as u8 + 1];
    Iface {
        index,
        name: format!("p{index}"),
        kind: IfKind::Port,
        port: index,
        mac,
        mtu: 1500,
        up: true,
        v4: vec![],
        v6: vec![],
        v6_ll: link_local_from_mac(mac),
        acl_in: None,
        acl_out: None,
        vmacs: Vec::new(),
    }
}

impl Rig {
    fn new(quiet_ms: u64, stale_ms: u64) -> Rig {
        let cfg = FpmConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            table: 254,
            resync_quiet_ns: quiet_ms * 1_000_000,
            resync_hold_ns: 0,
            stale_ns: stale_ms * 1_000_000,
            budget_ns: 5_000_000,
            batch: 8192,
        };
        let mut ifs = IfMap::default();
        ifs.insert(7, 0);
        ifs.insert(8, 1);
        let server = FpmServer::bind(cfg, ifs).expect("bind");
        let (mut fib, reader) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
        for (p, i) in [("10.0.0.0/24", 0), ("10.0.1.0/24", 1)] {
            fib.add_route(
                Source::Connected,
                p.parse().expect("p"),
                RouteTarget::Connected { ifindex: i },
                RouteAttrs::default(),
            )
            .expect("connected");
        }
        let ifaces = Published::new(IfTable::new(vec![iface(0), iface(1)]));
        Rig { server, fib, reader, neigh: NeighborTable::default(), ifaces }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.server.local_addr().expect("addr")).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        s
    }

    fn poll(&mut self) -> bool {
        let ifs = self.ifaces.load();
        let mut cx = SourceCx {
            fib: &mut self.fib,
            neigh: &mut self.neigh,
            ifs: &ifs,
            ifaces: &self.ifaces,
            now_ns: tern_engine::clock::now_ns(),
        };
        self.server.poll(&mut cx)
    }

    /// Polls until `f` holds (or fails after 10 s, printing the status).
    fn until(&mut self, what: &str, f: impl Fn(&Rig) -> bool) {
        let t0 = Instant::now();
        while !f(self) {
            if t0.elapsed() > Duration::from_secs(10) {
                panic!("timed out waiting for {what}; status {:#?}", self.status());
            }
            if !self.poll() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    fn status(&self) -> FpmStatus {
        self.server.status()
    }

    fn nh(&self, a: &str) -> tern_fib::NextHop {
        match ip(a) {
            IpAddr::V4(v) => self.reader.nexthop(self.reader.lookup_v4(u32::from(v))),
            IpAddr::V6(v) => self.reader.nexthop(self.reader.lookup_v6(u128::from(v))),
        }
    }

    fn fpm_routes(&self) -> usize {
        self.fib.routes().filter(|r| r.source == Source::Fpm).count()
    }
}

fn route(dst: &str, len: u8, gw: &str, oif: u32) -> RouteSpec {
    RouteSpec::unicast(ip(dst), len, vec![(Some(ip(gw)), oif)])
}

fn new_route(dst: &str, len: u8, gw: &str, oif: u32) -> Vec<u8> {
    let mut b = NlBuilder::new();
    b.route(RTM_NEWROUTE, 0, &route(dst, len, gw, oif));
    frame(&b.buf)
}

#[test]
fn routes_groups_and_updates_reach_the_fib() {
    let mut rig = Rig::new(50, 60_000);
    let mut c = rig.connect();
    rig.until("the connection", |r| r.status().fpm.connections == 1);

    let mut b = NlBuilder::new();
    b.nexthop(
        RTM_NEWNEXTHOP,
        0,
        &NexthopSpec { id: 1, gateway: Some(ip("10.0.0.2")), oif: Some(7), ..Default::default() },
    );
    b.nexthop(
        RTM_NEWNEXTHOP,
        0,
        &NexthopSpec { id: 2, gateway: Some(ip("10.0.1.2")), oif: Some(8), ..Default::default() },
    );
    b.nexthop(RTM_NEWNEXTHOP, 0, &NexthopSpec { id: 3, group: vec![(1, 1), (2, 1)], ..Default::default() });
    let mut grouped = RouteSpec::unicast(ip("198.51.100.0"), 24, vec![]);
    grouped.nh_id = Some(3);
    b.route(RTM_NEWROUTE, 0, &grouped);
    let mut stream = frame(&b.buf);
    stream.extend(new_route("203.0.113.0", 24, "10.0.0.2", 7));
    stream.extend(new_route("2001:db8:1::", 48, "10.0.0.2", 7)); // wrong family: counted
    let mut v6 = NlBuilder::new();
    v6.route(RTM_NEWROUTE, 0, &RouteSpec::unicast(ip("2001:db8:2::"), 48, vec![(Some(ip("fe80::2")), 8)]));
    stream.extend(frame(&v6.buf));
    c.write_all(&stream).expect("write");

    rig.until("the routes", |r| r.status().routes.route_msgs == 4);
    assert_eq!(rig.nh("198.51.100.7").kind, NhKind::Ecmp, "the group became an ECMP route");
    let one = rig.nh("203.0.113.9");
    assert_eq!((one.kind, one.ifindex, one.gw), (NhKind::Unicast, 0, ip("10.0.0.2")));
    let six = rig.nh("2001:db8:2::1");
    assert_eq!((six.kind, six.ifindex, six.gw), (NhKind::Unicast, 1, ip("fe80::2")));
    assert_eq!(rig.status().routes.ignored_family, 1);

    // An update is a delete and the new route in one frame.
    let mut b = NlBuilder::new();
    b.route(RTM_DELROUTE, 0, &route("203.0.113.0", 24, "10.0.0.2", 7));
    b.route(RTM_NEWROUTE, 0, &route("203.0.113.0", 24, "10.0.1.2", 8));
    c.write_all(&frame(&b.buf)).expect("write");
    rig.until("the update", |r| r.status().routes.route_msgs == 6);
    let moved = rig.nh("203.0.113.9");
    assert_eq!((moved.ifindex, moved.gw), (1, ip("10.0.1.2")));

    // A withdrawal.
    let mut b = NlBuilder::new();
    b.route(RTM_DELROUTE, 0, &route("203.0.113.0", 24, "10.0.1.2", 8));
    c.write_all(&frame(&b.buf)).expect("write");
    rig.until("the withdrawal", |r| r.nh("203.0.113.9").kind == NhKind::None);
    assert_eq!(rig.status().fpm.fib_errors, 0);
}

#[test]
fn malformed_messages_are_counted_and_bad_framing_closes_the_stream() {
    let mut rig = Rig::new(50, 60_000);
    let mut c = rig.connect();
    let mut stream = frame(&[0xde, 0xad, 0xbe, 0xef, 1, 2]); // netlink garbage in a good frame
    let mut bad_route = NlBuilder::new();
    bad_route.begin(RTM_NEWROUTE, 0, 0).bytes(&[2, 24, 0]).end(); // rtmsg cut short
    stream.extend(frame(&bad_route.buf));
    stream.extend([1, 2, 0, 4]); // a protobuf frame with no body: skipped
    stream.extend(new_route("203.0.113.0", 24, "10.0.0.2", 7));
    c.write_all(&stream).expect("write");
    rig.until("the good route", |r| r.nh("203.0.113.1").kind == NhKind::Unicast);
    let s = rig.status();
    assert_eq!(s.routes.malformed, 2, "{s:#?}");
    assert_eq!(s.fpm.frames_other_type, 1);
    assert_eq!(s.fpm.framing_errors, 0);

    c.write_all(&[9, 9, 0, 1]).expect("write"); // not FPM version 1
    rig.until("the close", |r| r.status().fpm.disconnects == 1);
    assert_eq!(rig.status().fpm.framing_errors, 1);
    assert_eq!(rig.nh("203.0.113.1").kind, NhKind::Unicast, "routes survive the disconnect");
}

#[test]
fn reconnect_resyncs_and_sweeps_what_zebra_no_longer_has() {
    let mut rig = Rig::new(100, 60_000);
    let mut c = rig.connect();
    let mut stream = new_route("203.0.113.0", 24, "10.0.0.2", 7);
    stream.extend(new_route("198.51.100.0", 24, "10.0.0.2", 7));
    c.write_all(&stream).expect("write");
    rig.until("two routes", |r| r.fpm_routes() == 2);
    rig.until("the first resync", |r| r.status().fpm.resyncs == 1);

    // zebra restarts: the old connection dies, a new one resends only one
    // of the routes.
    drop(c);
    rig.until("the disconnect", |r| r.status().fpm.disconnects == 1);
    assert_eq!(rig.fpm_routes(), 2, "kept while zebra is away");
    let mut c = rig.connect();
    c.write_all(&new_route("203.0.113.0", 24, "10.0.1.2", 8)).expect("write");
    rig.until("the second resync", |r| r.status().fpm.resyncs == 2);
    assert_eq!(rig.fpm_routes(), 1);
    assert_eq!(rig.nh("198.51.100.1").kind, NhKind::None, "the stale route is gone");
    assert_eq!(rig.nh("203.0.113.1").ifindex, 1, "the resent route is the new one");
    assert_eq!(rig.status().fpm.swept, 1);
}

#[test]
fn a_zebra_that_never_returns_loses_its_routes() {
    let mut rig = Rig::new(50, 300);
    let mut c = rig.connect();
    c.write_all(&new_route("203.0.113.0", 24, "10.0.0.2", 7)).expect("write");
    rig.until("the route", |r| r.fpm_routes() == 1);
    drop(c);
    rig.until("the stale timeout", |r| r.fpm_routes() == 0);
    assert_eq!(rig.nh("203.0.113.1").kind, NhKind::None);
}

#[test]
fn a_large_burst_is_ingested_across_polls() {
    let mut rig = Rig::new(50, 60_000);
    let mut c = rig.connect();
    let n = 50_000u32;
    let mut stream = Vec::new();
    for i in 0..n {
        let a = std::net::Ipv4Addr::from(0x0b00_0000 + (i << 8));
        stream.extend(new_route(&a.to_string(), 24, "10.0.0.2", 7));
    }
    let writer = std::thread::spawn(move || c.write_all(&stream).map(|_| c));
    rig.until("every route", |r| r.fpm_routes() == n as usize);
    let _c = writer.join().expect("writer").expect("write");
    assert_eq!(rig.status().routes.adds, u64::from(n));
    assert_eq!(rig.nh("11.0.200.1").gw, ip("10.0.0.2"));
}

/// zebra's withdrawal names neither the type (RTN_UNSPEC) nor a next hop
/// (FRR rt_netlink.c, `netlink_route_multipath_msg_encode`): the route
/// leaves the FIB, IPv4 and IPv6. Routes tern does not install are
/// counted by reason, and `tern status` / /metrics read them through
/// `ControlSource::route_counters`.
#[test]
fn zebra_withdrawals_leave_the_fib_and_skips_are_counted() {
    let mut rig = Rig::new(50, 60_000);
    let mut c = rig.connect();
    let mut stream = new_route("203.0.113.0", 24, "10.0.0.2", 7);
    let mut b = NlBuilder::new();
    b.route(RTM_NEWROUTE, 0, &RouteSpec::unicast(ip("2001:db8:113::"), 48, vec![(Some(ip("fe80::2")), 8)]));
    let mut other_table = route("198.51.100.0", 24, "10.0.0.2", 7);
    other_table.table = 100;
    b.route(RTM_NEWROUTE, 0, &other_table);
    let mut multicast = route("198.51.101.0", 24, "10.0.0.2", 7);
    multicast.kind = 5; // RTN_MULTICAST
    b.route(RTM_NEWROUTE, 0, &multicast);
    b.route(RTM_NEWROUTE, 0, &route("198.51.102.0", 24, "10.9.0.2", 99)); // an undriven device
    stream.extend(frame(&b.buf));
    c.write_all(&stream).expect("write");
    rig.until("the routes", |r| r.status().routes.route_msgs == 5);
    assert_eq!(rig.fpm_routes(), 2);

    let mut b = NlBuilder::new();
    for (dst, len) in [("203.0.113.0", 24), ("2001:db8:113::", 48)] {
        let mut del = RouteSpec::unicast(ip(dst), len, vec![]);
        del.kind = 0; // RTN_UNSPEC, as zebra sends it
        b.route(RTM_DELROUTE, 0, &del);
    }
    c.write_all(&frame(&b.buf)).expect("write");
    rig.until("the withdrawals", |r| r.fpm_routes() == 0);
    assert_eq!(rig.nh("203.0.113.1").kind, NhKind::None);
    assert_eq!(rig.nh("2001:db8:113::1").kind, NhKind::None);
    let s = rig.status();
    // (The third delete is the undriven route's: an older version of it
    // would have to go; the RIB had none.)
    assert_eq!((s.routes.dels, s.fpm.del_unknown, s.fpm.fib_errors), (3, 1, 0), "{s:#?}");

    let info = tern_control::api::types::RouteSourceInfo::new(
        rig.server.name(),
        &rig.server.route_counters().expect("a route source"),
    );
    let skipped = |reason: &str| info.skipped.iter().find(|(r, _)| r == reason).map(|(_, n)| *n);
    assert_eq!(info.name, "fpm");
    assert_eq!(
        (skipped("table"), skipped("type"), skipped("foreign_interface"), skipped("malformed")),
        (Some(1), Some(1), Some(1), Some(0)),
        "{info:?}"
    );
    assert_eq!((info.route_msgs, info.adds, info.dels), (7, 2, 3), "{info:?}");
}
