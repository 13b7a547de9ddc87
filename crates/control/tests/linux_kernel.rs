//! The kernel mirror against a real kernel, in a throwaway network
//! namespace: `ip addr`, `ip route`, `ip nexthop` and `ip neigh` on a
//! driven device show up in tern's interface table, RIB and neighbour
//! table; deletions follow; routes on other devices are counted, not
//! installed; a resync (start, overrun) leaves no stale route; deletes of
//! one multipath member or of a next-hop object leave what the kernel keeps.
//!
//! Needs root and iproute2; skipped (with a message) otherwise.

use std::net::IpAddr;
use std::time::{Duration, Instant};
use tern_control::linux::kernel::{Driven, KernelConfig, KernelMirror, KernelStatus};
use tern_control::neighbor::NeighborTable;
use tern_control::source::{ControlSource, SourceCx};
use tern_fib::{FibConfig, FibReader, FibWriter, NhKind, Prefix, RouteAttrs, RouteTarget, Source};
use tern_nodes::state::{IfKind, IfTable, Iface, V4Net, link_local_from_mac};
use tern_rcu::Published;
use tern_testkit::netns::{Netns, veth};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

/// A namespace with two veth pairs (`kd0` driven by tern, `kx0` not),
/// removed on drop; None (with the reason printed) where it cannot run.
fn netns(tag: &str) -> Option<Netns> {
    if !tern_testkit::netns::privileged("the kernel mirror test") {
        return None;
    }
    let ns = Netns::unique(&format!("tlinux{tag}-"));
    veth(&ns, "kd0", &ns, "kp0");
    veth(&ns, "kx0", &ns, "kq0");
    Some(ns)
}

/// Runs `lines` through `ip -n NS -batch`.
fn ip_batch(ns: &Netns, lines: &str) {
    let path = std::env::temp_dir().join(format!("{}.batch", ns.name));
    std::fs::write(&path, lines).expect("batch file");
    ns.ip(&["-batch", &path.display().to_string()]);
    let _ = std::fs::remove_file(&path);
}

struct Rig {
    mirror: KernelMirror,
    fib: FibWriter,
    reader: FibReader,
    neigh: NeighborTable,
    ifaces: Published<IfTable>,
}

fn iface0(v4: Vec<V4Net>) -> Iface {
    let mac = [2, 0, 0, 0, 0, 1];
    Iface {
        index: 0,
        name: "lan0".into(),
        kind: IfKind::Port,
        port: 0,
        mac,
        mtu: 1500,
        up: true,
        v4,
        v6: vec![],
        v6_ll: link_local_from_mac(mac),
        acl_in: None,
        acl_out: None,
        vmacs: Vec::new(),
    }
}

impl Rig {
    /// A mirror driving `kd0` (tern interface 0) in `ns`; the calling
    /// thread moves into the namespace.
    fn new(ns: &Netns, linux_mode: bool, rcvbuf: usize, config_v4: Vec<V4Net>) -> Rig {
        ns.enter();
        let cfg =
            KernelConfig { linux_mode, table: 254, skip_protocols: vec![], rcvbuf, budget_ns: 5_000_000, batch: 8192 };
        let driven = vec![Driven { tern: 0, device: "kd0".into(), v4: config_v4.clone(), v6: vec![] }];
        let mirror = KernelMirror::open(cfg, driven).expect("netlink");
        let (fib, reader) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
        Rig {
            mirror,
            fib,
            reader,
            neigh: NeighborTable::default(),
            ifaces: Published::new(IfTable::new(vec![iface0(config_v4)])),
        }
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
        self.mirror.poll(&mut cx)
    }

    fn until(&mut self, what: &str, f: impl Fn(&Rig) -> bool) {
        let t0 = Instant::now();
        loop {
            self.poll();
            if f(self) {
                return;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                panic!("timed out waiting for {what}; status {:#?}", self.status());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn status(&self) -> KernelStatus {
        self.mirror.status()
    }

    fn nh(&self, a: &str) -> tern_fib::NextHop {
        match ip(a) {
            IpAddr::V4(v) => self.reader.nexthop(self.reader.lookup_v4(u32::from(v))),
            IpAddr::V6(v) => self.reader.nexthop(self.reader.lookup_v6(u128::from(v))),
        }
    }

    fn kernel_routes(&self) -> Vec<Prefix> {
        self.fib.routes().filter(|r| r.source == Source::Kernel).map(|r| r.prefix).collect()
    }
}

#[test]
fn addresses_routes_nexthops_and_neighbours_follow_the_kernel() {
    let Some(ns) = netns("a") else { return };
    let mut rig = Rig::new(&ns, false, 1 << 20, vec![]);
    rig.until("the first sync", |r| r.mirror.synced());

    ns.ip(&["addr", "add", "10.9.0.1/24", "dev", "kd0"]);
    ns.ip(&["addr", "add", "2001:db8:9::1/64", "dev", "kd0", "nodad"]);
    rig.until("the addresses", |r| {
        let t = r.ifaces.load();
        t.ifs[0].has_v4("10.9.0.1".parse().expect("a")) && t.ifs[0].has_v6("2001:db8:9::1".parse().expect("a"))
    });
    assert_eq!(rig.nh("10.9.0.1").kind, NhKind::Local);
    assert_eq!(rig.nh("10.9.0.77").kind, NhKind::Glean, "connected subnet");
    assert_eq!(rig.nh("10.9.0.255").kind, NhKind::Blackhole, "directed broadcast");
    assert_eq!(rig.nh("2001:db8:9::1").kind, NhKind::Local);

    ns.ip(&["route", "add", "10.50.0.0/16", "via", "10.9.0.2", "dev", "kd0"]);
    ns.ip(&["addr", "add", "10.8.0.1/24", "dev", "kx0"]);
    ns.ip(&["route", "add", "10.51.0.0/16", "via", "10.8.0.2", "dev", "kx0"]);
    ns.ip(&["neigh", "add", "10.9.0.2", "lladdr", "02:00:00:00:09:02", "dev", "kd0", "nud", "permanent"]);
    rig.until("the route and its neighbour", |r| r.nh("10.50.1.1").mac == Some([2, 0, 0, 0, 9, 2]));
    let nh = rig.nh("10.50.1.1");
    assert_eq!((nh.kind, nh.ifindex, nh.gw), (NhKind::Unicast, 0, ip("10.9.0.2")));
    assert_eq!(rig.nh("10.51.1.1").kind, NhKind::None, "a route through an undriven device");
    assert!(rig.status().routes.ignored_foreign_if >= 1);
    assert_eq!(rig.neigh.len(), 1);

    // Next-hop objects: the route follows when the object changes.
    ns.ip(&["nexthop", "add", "id", "5", "via", "10.9.0.2", "dev", "kd0"]);
    ns.ip(&["route", "add", "10.60.0.0/16", "nhid", "5"]);
    rig.until("the nhid route", |r| r.nh("10.60.0.1").gw == ip("10.9.0.2"));
    ns.ip(&["nexthop", "replace", "id", "5", "via", "10.9.0.3", "dev", "kd0"]);
    rig.until("the object change", |r| r.nh("10.60.0.1").gw == ip("10.9.0.3"));

    // Several metrics: the best wins, the next takes over.
    ns.ip(&["route", "add", "10.70.0.0/16", "via", "10.9.0.4", "dev", "kd0", "metric", "200"]);
    ns.ip(&["route", "add", "10.70.0.0/16", "via", "10.9.0.5", "dev", "kd0", "metric", "100"]);
    rig.until("the better metric", |r| r.nh("10.70.0.1").gw == ip("10.9.0.5"));
    ns.ip(&["route", "del", "10.70.0.0/16", "via", "10.9.0.5", "dev", "kd0", "metric", "100"]);
    rig.until("the fallback", |r| r.nh("10.70.0.1").gw == ip("10.9.0.4"));

    // Deletions.
    ns.ip(&["route", "del", "10.50.0.0/16"]);
    rig.until("the route deletion", |r| r.nh("10.50.1.1").kind == NhKind::None);
    ns.ip(&["addr", "del", "10.9.0.1/24", "dev", "kd0"]);
    rig.until("the address deletion", |r| !r.ifaces.load().ifs[0].has_v4("10.9.0.1".parse().expect("a")));
    assert_eq!(rig.nh("10.9.0.1").kind, NhKind::None);
    assert_eq!(rig.nh("10.9.0.77").kind, NhKind::None, "the connected route went with it");
    assert_eq!(rig.status().kernel.fib_errors, 0, "{:#?}", rig.status());
}

#[test]
fn configured_addresses_stay_and_resync_sweeps_stale_routes() {
    let Some(ns) = netns("b") else { return };
    ns.ip(&["addr", "add", "10.9.0.1/24", "dev", "kd0"]);
    ns.ip(&["route", "add", "10.50.0.0/16", "via", "10.9.0.2", "dev", "kd0"]);
    let cfg = vec![V4Net { addr: "10.9.0.1".parse().expect("a"), len: 24 }];
    let mut rig = Rig::new(&ns, false, 1 << 20, cfg);
    // A kernel route tern holds from before (a restart, a lost message).
    rig.fib
        .add_route(Source::Kernel, "10.77.0.0/16".parse().expect("p"), RouteTarget::Blackhole, RouteAttrs::default())
        .expect("stale");
    rig.until("the first sync", |r| r.mirror.synced());
    assert_eq!(rig.kernel_routes().len(), 2, "the kernel's connected and via routes: {:?}", rig.kernel_routes());
    assert_eq!(rig.nh("10.77.0.1").kind, NhKind::None, "the stale route was swept");
    assert_eq!(rig.nh("10.50.0.1").gw, ip("10.9.0.2"));
    ns.ip(&["addr", "del", "10.9.0.1/24", "dev", "kd0"]);
    rig.until("the kernel's deletion", |r| r.nh("10.50.0.1").kind == NhKind::None);
    assert!(rig.ifaces.load().ifs[0].has_v4("10.9.0.1".parse().expect("a")), "configured addresses stay");
}

#[test]
fn an_overrun_resyncs_to_exactly_the_kernels_routes() {
    let Some(ns) = netns("c") else { return };
    ns.ip(&["addr", "add", "10.9.0.1/24", "dev", "kd0"]);
    // A small receive buffer so a burst overflows it.
    let mut rig = Rig::new(&ns, false, 4096, vec![]);
    rig.until("the first sync", |r| r.mirror.synced());
    let mut adds = String::new();
    for i in 0..3000u32 {
        adds.push_str(&format!("route add 10.{}.{}.0/24 via 10.9.0.2 dev kd0\n", 100 + i / 256, i % 256));
    }
    ip_batch(&ns, &adds);
    let mut dels = String::new();
    for i in (0..3000u32).step_by(2) {
        dels.push_str(&format!("route del 10.{}.{}.0/24\n", 100 + i / 256, i % 256));
    }
    ip_batch(&ns, &dels);
    // 1500 routes left, plus the connected route.
    rig.until("the resync", |r| {
        r.status().kernel.overruns >= 1 && r.status().kernel.resyncs >= 2 && r.kernel_routes().len() == 1501
    });
    assert_eq!(rig.nh("10.100.1.1").gw, ip("10.9.0.2"), "odd routes stay");
    assert_eq!(rig.nh("10.100.0.1").kind, NhKind::None, "even routes are gone");
}

/// The kernel's deletes that do not name a whole route: `ip -6 route del
/// P via G` on a multipath route removes that member only (its
/// RTM_DELROUTE names only it; the route stays), and `ip nexthop del`
/// removes the routes on the object (IPv4 ones without any RTM_DELROUTE),
/// uncovering a route at a higher metric.
#[test]
fn member_and_nexthop_deletes_leave_what_the_kernel_keeps() {
    let Some(ns) = netns("d") else { return };
    ns.ip(&["addr", "add", "10.9.0.1/24", "dev", "kd0"]);
    ns.ip(&["addr", "add", "2001:db8:9::1/64", "dev", "kd0", "nodad"]);
    let mut rig = Rig::new(&ns, false, 1 << 20, vec![]);
    rig.until("the first sync", |r| r.mirror.synced());

    ns.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:50::/48",
        "nexthop",
        "via",
        "2001:db8:9::2",
        "dev",
        "kd0",
        "nexthop",
        "via",
        "2001:db8:9::3",
        "dev",
        "kd0",
    ]);
    rig.until("the IPv6 multipath route", |r| r.nh("2001:db8:50::1").kind == NhKind::Ecmp);
    ns.ip(&["-6", "route", "del", "2001:db8:50::/48", "via", "2001:db8:9::3", "dev", "kd0"]);
    rig.until("one member left", |r| {
        let nh = r.nh("2001:db8:50::1");
        nh.kind == NhKind::Unicast && nh.gw == ip("2001:db8:9::2")
    });
    ns.ip(&["-6", "route", "del", "2001:db8:50::/48"]);
    rig.until("the route gone", |r| r.nh("2001:db8:50::1").kind == NhKind::None);

    ns.ip(&["nexthop", "add", "id", "7", "via", "10.9.0.2", "dev", "kd0"]);
    ns.ip(&["route", "add", "10.80.0.0/16", "nhid", "7", "metric", "100"]);
    ns.ip(&["route", "add", "10.80.0.0/16", "via", "10.9.0.4", "dev", "kd0", "metric", "200"]);
    ns.ip(&["route", "add", "10.81.0.0/16", "nhid", "7"]);
    rig.until("the routes on the object", |r| {
        r.nh("10.80.0.1").gw == ip("10.9.0.2") && r.nh("10.81.0.1").gw == ip("10.9.0.2")
    });
    ns.ip(&["nexthop", "del", "id", "7"]);
    rig.until("the route behind", |r| r.nh("10.80.0.1").gw == ip("10.9.0.4"));
    rig.until("the route only on the object gone", |r| r.nh("10.81.0.1").kind == NhKind::None);
    assert_eq!(rig.status().kernel.fib_errors, 0, "{:#?}", rig.status());
}

/// Linux mode follows a VRRP daemon's macvlan (keepalived's `use_vmac`,
/// FRR vrrpd's) on a driven device: up and not protodown, its virtual
/// MAC is the interface's; its addresses are the router's; its own
/// link-local is not the interface's; down, protodown or deleted, the MAC
/// goes. A macvlan with another MAC, or on an undriven device, is no
/// VRRP's and changes nothing.
#[test]
fn vrrp_macvlans_give_their_virtual_mac_and_addresses() {
    let Some(ns) = netns("v") else { return };
    ns.ip(&["link", "set", "kd0", "up"]);
    ns.ip(&["link", "set", "kp0", "up"]);
    let mut rig = Rig::new(&ns, true, 1 << 20, vec![]);
    rig.until("the first sync", |r| r.mirror.synced());
    let vmac = [0, 0, 0x5e, 0, 1, 10];
    let accepts = |r: &Rig, m: [u8; 6]| r.ifaces.load().ifs[0].is_vmac(&m);
    let ll_before = rig.ifaces.load().ifs[0].v6_ll;

    ns.ip(&[
        "link",
        "add",
        "link",
        "kd0",
        "name",
        "vrrp.10",
        "address",
        "00:00:5e:00:01:0a",
        "type",
        "macvlan",
        "mode",
        "bridge",
    ]);
    ns.ip(&[
        "link",
        "add",
        "link",
        "kd0",
        "name",
        "mv.other",
        "address",
        "02:00:00:00:77:01",
        "type",
        "macvlan",
        "mode",
        "bridge",
    ]);
    ns.ip(&[
        "link",
        "add",
        "link",
        "kx0",
        "name",
        "vrrp.11",
        "address",
        "00:00:5e:00:01:0b",
        "type",
        "macvlan",
        "mode",
        "bridge",
    ]);
    rig.until("the macvlan, down", |r| r.status().kernel.vrrp_macvlans == 1);
    assert!(!accepts(&rig, vmac), "a down macvlan's MAC is not accepted");
    ns.ip(&["link", "set", "vrrp.10", "up"]);
    ns.ip(&["link", "set", "mv.other", "up"]);
    ns.ip(&["link", "set", "vrrp.11", "up"]);
    rig.until("the virtual MAC", |r| accepts(r, vmac));
    assert_eq!(rig.status().kernel.vrrp_macvlans_active, 1);
    assert!(!accepts(&rig, [2, 0, 0, 0, 0x77, 1]) && !accepts(&rig, [0, 0, 0x5e, 0, 1, 11]));

    ns.ip(&["addr", "add", "10.9.0.254/24", "dev", "vrrp.10"]);
    rig.until("the virtual address", |r| r.ifaces.load().ifs[0].has_v4("10.9.0.254".parse().expect("a")));
    assert_eq!(rig.nh("10.9.0.254").kind, NhKind::Local, "the router's own");
    assert_eq!(rig.ifaces.load().ifs[0].v6_ll, ll_before, "the macvlan's link-local is not the interface's");

    ns.ip(&["link", "set", "vrrp.10", "protodown", "on"]);
    rig.until("protodown", |r| !accepts(r, vmac));
    ns.ip(&["link", "set", "vrrp.10", "protodown", "off"]);
    rig.until("protodown off", |r| accepts(r, vmac));
    ns.ip(&["link", "set", "vrrp.10", "down"]);
    rig.until("down", |r| !accepts(r, vmac));
    ns.ip(&["link", "set", "vrrp.10", "up"]);
    rig.until("up again", |r| accepts(r, vmac));
    ns.ip(&["link", "del", "vrrp.10"]);
    rig.until("deleted", |r| !accepts(r, vmac) && r.status().kernel.vrrp_macvlans == 0);
    rig.until("its address gone", |r| !r.ifaces.load().ifs[0].has_v4("10.9.0.254".parse().expect("a")));
    assert_eq!(rig.nh("10.9.0.254").kind, NhKind::None);
}
