//! The TAP exception path of Linux mode: `linux-punt` and `tap-input`.
//!
//! With `[linux] exception = "tap"` the kernel does not see the frames of
//! the devices tern drives; each port has a TAP device instead (the
//! kernel's side of the interface: same MAC, the addresses, what `ip
//! addr`, FRR and ssh use), and the worker polls one queue of it like any
//! other port (`Params::tap_ports` maps a port to its TAP's port number).
//!
//! * `linux-punt`: what Linux owns (ARP and ND for the router's addresses
//!   and the answers to its own requests, ping, BGP, OSPF, SSH, anything
//!   addressed to the router, multicast tern does not route) goes into the
//!   TAP of the interface it arrived on, as it arrived; a VLAN
//!   sub-interface has its own TAP, which gets the frame without its
//!   802.1Q tag (Linux sees the sub-interface as a plain Ethernet link).
//! * `tap-input`: frames the kernel writes to a TAP leave the interface it
//!   stands for unchanged (`PortBinding::input` makes the TAP's frames
//!   enter here, with `rx_if` the interface); on a VLAN sub-interface's
//!   TAP they get the sub-interface's 802.1Q tag first.
//!
//! * `ip4-punt-acl`, `ip6-punt-acl`: multicast and broadcast that
//!   `ip4-input`/`ip6-input` punt (OSPF hellos, DHCP, OSPFv3) never reach
//!   `ip4-acl-in`/`ip6-acl-in`, which sit before the lookup; when the
//!   receiving interface has an input rule set they pass it here first,
//!   so a rule that drops OSPF from a source drops it before Linux sees
//!   it. The same holds for what `ip6-input` sends straight to
//!   `ip6-local` (Neighbor Discovery to the all-nodes, all-routers and
//!   solicited-node groups, anything to tern's link-local address): it
//!   passes the rule set here, then goes on to `ip6-local` (which answers,
//!   learns, or punts it to Linux), so a rule dropping ICMPv6 from a
//!   source drops its solicitations and advertisements too, counted on
//!   the rule. (Unicast for the router already passed the input rule
//!   set.) A rule set that drops by default must therefore accept ND
//!   (ICMPv6 types 135 and 136) for IPv6 to work on the interface.
//!
//! One node a file: [`punt`], [`tap_input`], [`punt_acl`]; [`class`]
//! classes what `linux-punt` hands to Linux (control traffic first).

use crate::state::{AclTable, IfKind, IfTable, NO_IF, Params, Shared};
use crate::util::TokenBucket;
use tern_acl::Action;
use tern_engine::{Cx, ErrorDesc, NEXT_TAKEN, Node};
use tern_packet::{PktIdx, flags};
use tern_rcu::Snapshot;

pub mod class;
pub mod punt;
pub mod punt_acl;
pub mod tap_input;

pub use punt::{LinuxPunt, LinuxPuntError, LinuxPuntNext};
pub use punt_acl::{PuntAcl, PuntAclError, PuntAclNext};
pub use tap_input::{TapInput, TapInputError, TapInputNext};

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::state::{GreTunnel, Iface, V4Net, link_local_from_mac};
    use crossbeam_queue::ArrayQueue;
    use std::net::Ipv4Addr;
    use std::sync::Arc;
    use tern_engine::graph::Env;
    use tern_engine::trace::Tracer;
    use tern_engine::{TraceShared, WorkerStats};
    use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
    use tern_packet::{PacketPool, PoolConfig};

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const HOST: [u8; 6] = [2, 0, 0, 0, 0, 0xaa];
    const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
    const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
    /// The address of VLAN 100 on port 0 (interface 3).
    const OURS_VLAN: Ipv4Addr = Ipv4Addr::new(10, 0, 100, 1);

    fn iface(index: u16, kind: IfKind, port: u16) -> Iface {
        Iface {
            index,
            name: format!("if{index}"),
            kind,
            port,
            mac: MAC,
            mtu: 1500,
            up: true,
            v4: if index == 0 { vec![V4Net { addr: OURS, len: 24 }] } else { vec![] },
            v6: vec![],
            v6_ll: link_local_from_mac(MAC),
            acl_in: None,
            acl_out: None,
            vmacs: Vec::new(),
        }
    }

    /// A worker's graph over two ports, a GRE tunnel and VLAN 100 on port
    /// 0, with OURS local on port 0 and OURS_VLAN on the VLAN; `taps`:
    /// `Params::tap_ports`. Five transmit queues.
    struct Rig {
        shared: Shared,
        graph: tern_engine::Graph,
        pool: PacketPool,
        stats: WorkerStats,
        fib: tern_fib::FibWriter,
    }

    impl Rig {
        fn new(taps: Vec<u16>) -> Rig {
            let (mut fib, reader) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
            let local = |addr, ifindex| {
                RouteOp::Add(
                    Source::Local,
                    Prefix::V4 { addr, len: 32 },
                    RouteTarget::Local { ifindex },
                    RouteAttrs::default(),
                )
            };
            let report = fib.apply([local(OURS, 0), local(OURS_VLAN, 3)]);
            assert!(report.errors.is_empty());
            let gre = GreTunnel { local: OURS.into(), remote: PEER.into(), key: None, ttl: 64 };
            let mut vlan = iface(3, IfKind::Vlan { parent: 0, vid: 100 }, 0);
            vlan.v4 = vec![V4Net { addr: OURS_VLAN, len: 24 }];
            let ifs = IfTable::new(vec![
                iface(0, IfKind::Port, 0),
                iface(1, IfKind::Port, 1),
                iface(2, IfKind::Gre(gre), NO_IF),
                vlan,
            ]);
            let shared = Shared::new(ifs, reader);
            shared.params.publish(Params { linux_owns_local: true, tap_ports: taps, ..Params::default() });
            let graph = crate::build_graph(&shared, Arc::new(ArrayQueue::new(4))).expect("graph").graph;
            let stats = WorkerStats::new(graph.node_count(), graph.error_count(), 5);
            let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
            Rig { shared, graph, pool, stats, fib }
        }

        /// Runs `frame`, received on interface `rx_if`, into node `node`;
        /// returns the transmit queues' frames.
        fn run(&mut self, node: &str, rx_if: u16, frame: &[u8]) -> Vec<Vec<Vec<u8>>> {
            self.run_at(node, rx_if, &[frame.to_vec()], 0)
        }

        /// Runs `frames` as one batch at clock `now_ns` (the worker loop's
        /// time, which the nodes' token buckets read).
        fn run_at(&mut self, node: &str, rx_if: u16, frames: &[Vec<u8>], now_ns: u64) -> Vec<Vec<Vec<u8>>> {
            let id = self.graph.node_id(node).expect("node");
            for frame in frames {
                let p = self.pool.alloc_from(frame).expect("buffer");
                self.pool.meta_mut(p).rx_if = rx_if;
                self.graph.input_mut(id).push(p);
            }
            let mut tx = vec![Vec::new(); 5];
            let mut tracer = Tracer::new(TraceShared::new(), 0);
            let mut env = Env {
                pool: &mut self.pool,
                stats: &self.stats,
                tx: &mut tx,
                tracer: &mut tracer,
                now_ns,
                worker: 0,
                capture_node: None,
            };
            self.graph.run(&mut env);
            let out = tx.iter().map(|q| q.iter().map(|&p| self.pool.data(p).to_vec()).collect()).collect();
            for q in &tx {
                self.pool.free_all(q);
            }
            out
        }

        fn count(&self, node: &str, name: &str) -> u64 {
            let id = self.graph.info().error_id(node, name).expect("counter");
            self.stats.errors[usize::from(id)].get()
        }
    }

    fn eth(dst: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&HOST);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn arp(op: u16, tpa: Ipv4Addr) -> Vec<u8> {
        let mut a = vec![0, 1, 8, 0, 6, 4];
        a.extend_from_slice(&op.to_be_bytes());
        a.extend_from_slice(&HOST);
        a.extend_from_slice(&PEER.octets());
        a.extend_from_slice(&if op == 2 { MAC } else { [0; 6] });
        a.extend_from_slice(&tpa.octets());
        eth(if op == 1 { [0xff; 6] } else { MAC }, 0x0806, &a)
    }

    fn ipv4(dst: Ipv4Addr, proto: u8, payload: &[u8]) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0];
        h[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
        h.extend_from_slice(&PEER.octets());
        h.extend_from_slice(&dst.octets());
        let c = !tern_wire::checksum::data(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h.extend_from_slice(payload);
        let dst_mac = if dst.is_multicast() { [0x01, 0, 0x5e, 0, 0, 5] } else { MAC };
        eth(dst_mac, 0x0800, &h)
    }

    fn echo() -> Vec<u8> {
        let mut icmp = vec![8, 0, 0, 0, 0, 1, 0, 1, b'p', b'i', b'n', b'g'];
        let c = !tern_wire::checksum::data(&icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        icmp
    }

    /// Only `queue` got a frame, and it is `frame`, unchanged.
    fn only_in(out: &[Vec<Vec<u8>>], queue: usize, frame: &[u8]) {
        for (q, frames) in out.iter().enumerate() {
            if q == queue {
                assert_eq!(frames.as_slice(), [frame.to_vec()], "queue {q}");
            } else {
                assert!(frames.is_empty(), "queue {q}: {frames:02x?}");
            }
        }
    }

    #[test]
    fn what_linux_owns_goes_into_the_taps_unchanged() {
        let mut rig = Rig::new(vec![2, 3]);
        for frame in [
            arp(1, OURS),                                    // request for our address
            arp(2, OURS),                                    // answer to the kernel's request
            ipv4(OURS, 1, &echo()),                          // ping
            ipv4(OURS, 6, &[0; 20]),                         // TCP (BGP, SSH)
            ipv4(OURS, 17, &[0; 8]),                         // UDP
            ipv4(Ipv4Addr::new(224, 0, 0, 5), 89, &[0; 24]), // OSPF hello
        ] {
            only_in(&rig.run("ethernet-input", 0, &frame), 2, &frame);
        }
        assert_eq!(rig.count("linux-punt", "punted"), 6);
        assert_eq!(rig.count("arp-input", "reply-sent"), 0);
        assert_eq!(rig.count("ip4-local", "echo-reply-sent"), 0);
        assert_eq!(rig.count("ip4-local", "left-to-linux"), 0);
        assert!(rig.shared.events.pop().is_some(), "ARP still teaches tern the neighbour");

        // Not Linux's: an ARP request for another address.
        let out = rig.run("ethernet-input", 0, &arp(1, Ipv4Addr::new(10, 0, 1, 9)));
        assert!(out.iter().all(Vec::is_empty));
        assert_eq!(rig.count("arp-input", "request-not-ours"), 1);

        // A tunnel has no TAP: counted, not lost.
        let inner = ipv4(OURS, 6, &[0; 20]);
        let out = rig.run("ip4-local", 2, &inner[14..]);
        assert!(out.iter().all(Vec::is_empty));
        assert_eq!(rig.count("linux-punt", "no-tap"), 1);
    }

    #[test]
    fn what_linux_writes_to_a_tap_leaves_its_interface_unchanged() {
        let mut rig = Rig::new(vec![2, 3]);
        let reply = arp(2, PEER);
        only_in(&rig.run("tap-input", 1, &reply), 1, &reply);
        assert_eq!(rig.count("tap-input", "from-linux"), 1);
        let out = rig.run("tap-input", 1, &reply[..10]);
        assert!(out.iter().all(Vec::is_empty));
        assert_eq!(rig.count("tap-input", "too-short"), 1);
        let out = rig.run("tap-input", 7, &reply);
        assert!(out.iter().all(Vec::is_empty));
        assert_eq!(rig.count("tap-input", "no-interface"), 1);
    }

    /// Binds a rule set to interface 0's input: OSPF from PEER and OSPFv3
    /// from fe80::2 dropped, everything else accepted.
    fn bind_input_rules(rig: &Rig) {
        let set = tern_acl::parse_toml(&format!(
            "[[acl]]\nname = \"I\"\ndefault = \"accept\"\n[[acl.rule]]\naction = \"drop\"\nproto = \"ospf\"\nsrc = \"{PEER}/32\"\n\
             [[acl.rule]]\naction = \"drop\"\nproto = \"ospf\"\nsrc = \"fe80::2/128\"\n"
        ))
        .expect("rules")
        .remove(0);
        let classifier = tern_acl::compile(&set, &|_| None).expect("compile");
        let counters = vec![tern_acl::RuleCounters::for_classifier(&classifier)];
        let mut table = crate::state::AclTable::default();
        table.sets.push(crate::state::AclSet { name: set.name.clone(), classifier, counters });
        rig.shared.acls.publish(table);
        let mut ifs = rig.shared.ifaces.load().ifs.clone();
        ifs[0].acl_in = Some(0);
        rig.shared.ifaces.publish(IfTable::new(ifs));
    }

    #[test]
    fn punted_multicast_and_broadcast_pass_the_input_rule_set() {
        let mut rig = Rig::new(vec![2, 3]);
        bind_input_rules(&rig);
        let hello = ipv4(Ipv4Addr::new(224, 0, 0, 5), 89, &[0; 24]);
        assert!(rig.run("ethernet-input", 0, &hello).iter().all(Vec::is_empty), "Linux never sees it");
        assert_eq!(rig.count("ip4-punt-acl", "denied"), 1);
        assert_eq!(rig.count("linux-punt", "punted"), 0);
        let hits = rig.shared.acls.load().sets[0].counters[0].rule(0);
        assert_eq!(hits.packets, 1, "counted on the rule that dropped it");

        // What the rules accept still reaches Linux: broadcast (DHCP), and
        // OSPF on an interface without rules.
        let mut dhcp = ipv4(Ipv4Addr::BROADCAST, 17, &[0, 68, 0, 67, 0, 8, 0, 0]);
        dhcp[..6].copy_from_slice(&[0xff; 6]);
        only_in(&rig.run("ethernet-input", 0, &dhcp), 2, &dhcp);
        only_in(&rig.run("ethernet-input", 1, &hello), 3, &hello);
        assert_eq!(rig.count("linux-punt", "punted"), 2);
        assert_eq!(rig.count("ip4-punt-acl", "denied"), 1);

        // IPv6 multicast tern does not listen to (OSPFv3 to ff02::5): from
        // the source the rules name dropped, from another punted.
        let ospf3 = |src: u8| {
            let mut h = vec![0x60, 0, 0, 0, 0, 8, 89, 1];
            h.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, src]);
            h.extend_from_slice(&[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5]);
            h.extend_from_slice(&[0; 8]);
            eth([0x33, 0x33, 0, 0, 0, 5], 0x86dd, &h)
        };
        assert!(rig.run("ethernet-input", 0, &ospf3(2)).iter().all(Vec::is_empty));
        assert_eq!(rig.count("ip6-punt-acl", "denied"), 1);
        only_in(&rig.run("ethernet-input", 0, &ospf3(3)), 2, &ospf3(3));
        assert_eq!(rig.count("linux-punt", "punted"), 3);
    }

    /// `frame` with an 802.1Q tag of `vid` after the MAC addresses.
    fn tagged(frame: &[u8], vid: u16) -> Vec<u8> {
        let mut f = frame[..12].to_vec();
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&vid.to_be_bytes());
        f.extend_from_slice(&frame[12..]);
        f
    }

    #[test]
    fn a_vlan_sub_interface_has_its_own_untagged_tap() {
        // Interface 3 (VLAN 100 on port 0): TAP on port 4.
        let mut rig = Rig::new(vec![2, 3, NO_IF, 4]);
        for frame in [arp(1, OURS_VLAN), ipv4(OURS_VLAN, 1, &echo()), ipv4(OURS_VLAN, 6, &[0; 20])] {
            only_in(&rig.run("ethernet-input", 0, &tagged(&frame, 100)), 4, &frame);
        }
        assert_eq!(rig.count("linux-punt", "punted"), 3);
        // Untagged traffic of the parent still goes to the parent's TAP.
        let frame = ipv4(OURS, 1, &echo());
        only_in(&rig.run("ethernet-input", 0, &frame), 2, &frame);

        // What Linux writes to the sub-interface's TAP leaves the parent's
        // port tagged.
        let reply = arp(2, PEER);
        only_in(&rig.run("tap-input", 3, &reply), 0, &tagged(&reply, 100));
        assert_eq!(rig.count("tap-input", "from-linux"), 1);

        // Without a TAP of its own (tap_ports too short) a sub-interface's
        // packet is counted, not sent to the parent's TAP.
        let mut rig = Rig::new(vec![2, 3]);
        assert!(rig.run("ethernet-input", 0, &tagged(&arp(1, OURS_VLAN), 100)).iter().all(Vec::is_empty));
        assert_eq!(rig.count("linux-punt", "no-tap"), 1);
    }

    #[test]
    fn without_taps_the_kernel_keeps_its_own_copy() {
        let mut rig = Rig::new(Vec::new());
        for frame in [arp(1, OURS), ipv4(OURS, 6, &[0; 20])] {
            assert!(rig.run("ethernet-input", 0, &frame).iter().all(Vec::is_empty));
        }
        assert_eq!(rig.count("arp-input", "left-to-linux"), 1);
        assert_eq!(rig.count("ip4-local", "left-to-linux"), 1);
        assert!(
            rig.run("ethernet-input", 0, &ipv4(Ipv4Addr::new(224, 0, 0, 5), 89, &[0; 24])).iter().all(Vec::is_empty)
        );
        assert_eq!(rig.count("ip4-input", "multicast"), 1);
        assert_eq!(rig.count("linux-punt", "punted"), 0);
    }

    /// The exception path's policer: a flood of punts at one interface is
    /// cut to its burst plus its rate over the flood's duration (clock
    /// given to the node, not read), each interface has its own bucket,
    /// transit in the same batches is untouched, and rate 0 is unlimited.
    #[test]
    fn punts_are_policed_per_interface_and_transit_is_not() {
        let mut rig = Rig::new(vec![2, 3, NO_IF, 4]);
        rig.shared.params.publish(Params {
            linux_owns_local: true,
            tap_ports: vec![2, 3, NO_IF, 4],
            punt_rate: 100,
            punt_burst: 10,
            // The per-interface bucket alone (the classes': below).
            punt_classes: [(0, 0); 7],
            ..Params::default()
        });
        // Transit: 198.51.100.0/24 via a resolved neighbour on port 1.
        let gw = Ipv4Addr::new(10, 0, 2, 2);
        let report = rig.fib.apply([
            RouteOp::Add(
                Source::Connected,
                Prefix::V4 { addr: Ipv4Addr::new(10, 0, 2, 0), len: 24 },
                RouteTarget::Connected { ifindex: 1 },
                RouteAttrs::default(),
            ),
            RouteOp::Add(
                Source::Static,
                Prefix::V4 { addr: Ipv4Addr::new(198, 51, 100, 0), len: 24 },
                RouteTarget::Via { gw: gw.into(), ifindex: Some(1) },
                RouteAttrs::default(),
            ),
        ]);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        rig.fib.set_neighbor(1, gw.into(), Some([2, 0, 0, 0, 2, 0xbb]));
        let ping = ipv4(OURS, 1, &echo());
        let transit = ipv4(Ipv4Addr::new(198, 51, 100, 7), 17, &[0; 8]);
        let mut batch: Vec<Vec<u8>> = vec![ping.clone(); 20];
        batch.extend(std::iter::repeat_n(transit, 5));

        // 2000 pings/s for a second (a batch of 20 every 10 ms) against
        // 100/s with a burst of 10: the burst, then one per 10 ms.
        let t0 = 5_000_000_000u64;
        let (mut punted, mut forwarded) = (0, 0);
        for k in 0..100u64 {
            let out = rig.run_at("ethernet-input", 0, &batch, t0 + k * 10_000_000);
            punted += out[2].len();
            forwarded += out[1].len();
        }
        assert_eq!(punted, 10 + 99, "burst + rate x 0.99 s");
        assert_eq!(rig.count("linux-punt", "policed"), 2000 - 109);
        assert_eq!(rig.count("linux-punt", "punted"), 109);
        assert_eq!(forwarded, 500, "transit is not policed");

        // The VLAN's bucket is its own: full while the parent's is empty.
        let t1 = t0 + 99 * 10_000_000;
        let tagged_pings = vec![tagged(&ipv4(OURS_VLAN, 1, &echo()), 100); 20];
        let out = rig.run_at("ethernet-input", 0, &tagged_pings, t1);
        assert_eq!(out[4].len(), 10, "the VLAN's burst");
        assert!(
            rig.run_at("ethernet-input", 0, std::slice::from_ref(&ping), t1)[2].is_empty(),
            "the parent's bucket is empty"
        );

        // Rate 0: unlimited.
        rig.shared.params.publish(Params {
            linux_owns_local: true,
            tap_ports: vec![2, 3, NO_IF, 4],
            punt_rate: 0,
            punt_classes: [(0, 0); 7],
            ..Params::default()
        });
        let out = rig.run_at("ethernet-input", 0, &vec![ping; 200], t1);
        assert_eq!(out[2].len(), 200);
    }

    fn tcp(sport: u16, dport: u16) -> Vec<u8> {
        let mut t = sport.to_be_bytes().to_vec();
        t.extend_from_slice(&dport.to_be_bytes());
        t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        t
    }

    /// Control traffic first: a flood of pings at the router is shed by
    /// its own class (`local`) and by nothing else, while BGP keepalives
    /// and ARP in the same batches all reach the TAP, even with the
    /// per-interface bucket empty (control classes skip it); each class's
    /// drops have their own counter.
    #[test]
    fn a_flood_at_the_router_cannot_starve_its_control_traffic() {
        let mut rig = Rig::new(vec![2, 3, NO_IF, 4]);
        let mut classes = crate::state::DEFAULT_PUNT_CLASSES;
        classes[1] = (100, 10); // bgp
        classes[6] = (1000, 50); // local
        rig.shared.params.publish(Params {
            linux_owns_local: true,
            tap_ports: vec![2, 3, NO_IF, 4],
            punt_rate: 10_000,
            punt_burst: 20,
            punt_classes: classes,
            ..Params::default()
        });
        let ping = ipv4(OURS, 1, &echo());
        let bgp = ipv4(OURS, 6, &tcp(179, 40000));
        let who_has = arp(1, OURS);
        // 100 batches 10 ms apart (1 s): 100 pings, one keepalive and one
        // ARP request each: 10,000 pings/s against 1000/s.
        let mut batch = vec![ping.clone(); 50];
        batch.push(bgp.clone());
        batch.extend(std::iter::repeat_n(ping.clone(), 50));
        batch.push(who_has.clone());
        let t0 = 7_000_000_000u64;
        let (mut pings, mut keepalives, mut arps) = (0, 0, 0);
        for k in 0..100u64 {
            let out = rig.run_at("ethernet-input", 0, &batch, t0 + k * 10_000_000);
            for f in &out[2] {
                if *f == ping {
                    pings += 1;
                } else if *f == bgp {
                    keepalives += 1;
                } else if *f == who_has {
                    arps += 1;
                }
            }
        }
        assert_eq!(keepalives, 100, "every keepalive reached Linux");
        assert_eq!(arps, 100, "every ARP request reached Linux");
        assert_eq!(rig.count("linux-punt", "shed-bgp"), 0);
        assert_eq!(rig.count("linux-punt", "shed-neighbor"), 0);
        // The pings: the class lets its burst (50) through, then 10 per
        // 10 ms (1000/s); the interface's bucket (burst 20) then cuts the
        // first batch's 50 to 20 and passes the later 10s whole.
        assert_eq!(pings, 20 + 99 * 10);
        assert_eq!(rig.count("linux-punt", "shed-local"), 10_000 - 50 - 99 * 10);
        assert_eq!(rig.count("linux-punt", "policed"), 30);
        // A BGP flood is shed by BGP's own class, not by the others'.
        let flood = vec![bgp.clone(); 100];
        let t1 = t0 + 100 * 10_000_000;
        let out = rig.run_at("ethernet-input", 0, &flood, t1);
        assert_eq!(out[2].len(), 10, "BGP's burst");
        assert_eq!(rig.count("linux-punt", "shed-bgp"), 90);
        let out = rig.run_at("ethernet-input", 0, std::slice::from_ref(&who_has), t1);
        assert_eq!(out[2].len(), 1, "ARP still passes");
    }
}
