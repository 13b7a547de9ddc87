//! The nodes' direct paths against their general paths.
//!
//! `ethernet-input`, `ip4-input`, `ip4-lookup`, `ip4-rewrite` and their
//! IPv6 counterparts settle the usual packet (untagged unicast to a
//! resolved next hop) in a few steps of their own and hand every other
//! packet to the general code.
//! These tests run the same frames through the whole graph twice, once
//! with the direct paths and the rule sets' shortcut switched off at run
//! time (`Params::fast_paths`, published as the router publishes it), and
//! require the same frames out of every port, the same counters and the
//! same metadata: for valid frames and for frames broken in each way the
//! general code checks (version, header length, total length, checksum,
//! martian sources, multicast and broadcast, TTL, MTU, MACs, VLANs, ...),
//! in batches of several sizes, with and without an input rule set.

use crate::state::{
    AclSet, AclTable, FastPaths, GreTunnel, IfKind, IfTable, Iface, NO_IF, Params, Shared, V4Net, VmacOwner,
};
use crate::util::put16;
use std::net::IpAddr;
use std::sync::Arc;
use tern_engine::graph::{Env, Graph};
use tern_engine::trace::Tracer;
use tern_engine::{NodeId, TraceShared, WorkerStats};
use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
use tern_packet::{Meta, PacketPool, PoolConfig, flags};
use tern_wire::checksum;

const MAC_LAN: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_WAN: [u8; 6] = [2, 0, 0, 0, 0, 2];
const MAC_PEER: [u8; 6] = [2, 0, 0, 0, 0, 3];
const MAC_PEER2: [u8; 6] = [2, 0, 0, 0, 0, 4];
const MAC_VLAN_PEER: [u8; 6] = [2, 0, 0, 0, 0, 5];
/// lan's virtual MAC (VRRP's, VRID 10), and wan.7's (VRID 7).
const VMAC_LAN: [u8; 6] = [0, 0, 0x5e, 0, 1, 10];
const VMAC_SUB: [u8; 6] = [0, 0, 0x5e, 0, 1, 7];

fn rng(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Publishes one rule set (index 0) holding one rule, given as TOML keys,
/// and default accept. Interface names: lan, wan.
pub(crate) fn publish_rules(shared: &Shared, rule: &str) {
    let text = format!("[[acl]]\nname = \"T\"\ndefault = \"accept\"\n[[acl.rule]]\n{rule}\n");
    let set = tern_acl::parse_toml(&text).expect("rules").remove(0);
    let names = |n: &str| ["lan", "wan"].iter().position(|&i| i == n).map(|i| i as u16);
    let classifier = tern_acl::compile(&set, &names).expect("compile");
    let counters = vec![tern_acl::RuleCounters::for_classifier(&classifier)];
    let mut table = AclTable::default();
    table.sets.push(AclSet { name: set.name.clone(), classifier, counters });
    shared.acls.publish(table);
}

fn iface(index: u16, name: &str, kind: IfKind, port: u16, mac: [u8; 6], addr: &str, mtu: u16) -> Iface {
    let v4 = vec![V4Net { addr: addr.parse().expect("addr"), len: 24 }];
    Iface { mtu, v4, ..Iface::new(index, name, kind, port, mac) }
}

/// lan (port 0), wan (port 1, MTU 1400), wan.7 (VLAN 7 on port 1), dmz
/// (port 2, down, with lan's MAC) and gre0 (to 10.0.2.2 over the wan);
/// routes of every kind: resolved and unresolved gateways, a gateway on
/// the VLAN, ECMP, blackhole, unreachable, prohibit, tern's own
/// addresses, and an IPv6 route. With `acl_in`, lan has an input rule set.
fn router(acl_in: bool) -> (Graph, NodeId, Shared) {
    let (graph, input, shared, _fib) = router_with(acl_in, false);
    (graph, input, shared)
}

/// [`router`], with `acl_out`: wan has an output rule set (the same set
/// as lan's input rule set); and the FIB's writer.
fn router_with(acl_in: bool, acl_out: bool) -> (Graph, NodeId, Shared, tern_fib::FibWriter) {
    let domain = tern_rcu::Domain::new();
    let (mut fib, reader) = tern_fib::new(FibConfig::default(), domain);
    let p = |s: &str| s.parse::<Prefix>().expect("prefix");
    let ip = |s: &str| s.parse::<IpAddr>().expect("address");
    let add = |prefix: &str, source: Source, target: RouteTarget| {
        RouteOp::Add(source, p(prefix), target, RouteAttrs::default())
    };
    let report = fib.apply(vec![
        add("10.0.1.0/24", Source::Connected, RouteTarget::Connected { ifindex: 0 }),
        add("10.0.2.0/24", Source::Connected, RouteTarget::Connected { ifindex: 1 }),
        add("10.0.3.0/24", Source::Connected, RouteTarget::Connected { ifindex: 2 }),
        add("10.0.1.1/32", Source::Connected, RouteTarget::Local { ifindex: 0 }),
        add("10.0.2.1/32", Source::Connected, RouteTarget::Local { ifindex: 1 }),
        add("198.18.0.0/16", Source::Static, RouteTarget::Via { gw: ip("10.0.2.2"), ifindex: None }),
        add("198.19.0.0/16", Source::Static, RouteTarget::Via { gw: ip("10.0.2.3"), ifindex: None }),
        add("198.20.0.0/16", Source::Static, RouteTarget::Via { gw: ip("10.0.3.2"), ifindex: None }),
        add("198.21.0.0/16", Source::Static, RouteTarget::Ecmp(vec![(ip("10.0.2.2"), None), (ip("10.0.2.4"), None)])),
        add("203.0.113.0/24", Source::Static, RouteTarget::Blackhole),
        add("203.0.114.0/24", Source::Static, RouteTarget::Unreachable),
        add("203.0.115.0/24", Source::Static, RouteTarget::Prohibit),
        add("2001:db8:2::/64", Source::Connected, RouteTarget::Connected { ifindex: 1 }),
        add("2001:db8:18::/48", Source::Static, RouteTarget::Via { gw: ip("2001:db8:2::2"), ifindex: None }),
        add(
            "2001:db8:21::/48",
            Source::Static,
            RouteTarget::Ecmp(vec![(ip("2001:db8:2::2"), None), (ip("2001:db8:2::4"), None)]),
        ),
        add("198.22.0.0/16", Source::Static, RouteTarget::Connected { ifindex: 4 }),
        add("2001:db8:22::/48", Source::Static, RouteTarget::Connected { ifindex: 4 }),
    ]);
    assert_eq!(report.failed, 0);
    fib.set_neighbor(0, ip("10.0.1.2"), Some([2, 0, 0, 0, 0, 0x10]));
    fib.set_neighbor(1, ip("10.0.2.2"), Some(MAC_PEER));
    fib.set_neighbor(1, ip("10.0.2.4"), Some(MAC_PEER2));
    fib.set_neighbor(2, ip("10.0.3.2"), Some(MAC_VLAN_PEER));
    fib.set_neighbor(1, ip("2001:db8:2::2"), Some(MAC_PEER));
    fib.set_neighbor(1, ip("2001:db8:2::4"), Some(MAC_PEER2));
    let tunnel = GreTunnel { local: ip("10.0.2.1"), remote: ip("10.0.2.2"), key: None, ttl: 64 };
    fib.tunnel_set(4, tunnel.remote);
    let mut ifs = vec![
        iface(0, "lan", IfKind::Port, 0, MAC_LAN, "10.0.1.1", 1500),
        iface(1, "wan", IfKind::Port, 1, MAC_WAN, "10.0.2.1", 1400),
        iface(2, "wan.7", IfKind::Vlan { parent: 1, vid: 7 }, 1, MAC_WAN, "10.0.3.1", 1400),
        iface(3, "dmz", IfKind::Port, 2, MAC_LAN, "10.0.4.1", 1500),
        iface(4, "gre0", IfKind::Gre(tunnel), NO_IF, [2, 0x67, 0x72, 0x65, 0, 4], "192.168.255.1", 1476),
    ];
    ifs[3].up = false;
    ifs[0].set_vmacs(VmacOwner::Kernel, &[VMAC_LAN]);
    ifs[2].set_vmacs(VmacOwner::Vrrp, &[VMAC_SUB]);
    let shared = Shared::new(IfTable::new(ifs.clone()), reader);
    if acl_in || acl_out {
        publish_rules(&shared, "action = \"drop\"\nsrc = \"10.0.1.66/32\"");
        ifs[0].acl_in = acl_in.then_some(0);
        ifs[1].acl_out = acl_out.then_some(0);
        shared.ifaces.publish(IfTable::new(ifs));
    }
    let built = crate::build_graph(&shared, Arc::new(crossbeam_queue::ArrayQueue::new(4))).expect("graph");
    (built.graph, built.input, shared, fib)
}

/// A frame and the interface it arrives on: mostly valid untagged IPv4
/// unicast to the routes above, and one in three broken in one way.
fn frame(r: &mut impl FnMut() -> u64) -> (Vec<u8>, u16) {
    let pick = |r: &mut dyn FnMut() -> u64, n: u64| (r() % n) as usize;
    let payload = [18, 30, 60, 200, 1000, 1386, 1400, 1480][pick(r, 8)];
    let tagged = pick(r, 12) == 0;
    let l3 = if tagged { 18 } else { 14 };
    let six = pick(r, 5) == 0;
    let hdr = if six { 40 } else { 20 };
    let mut f = vec![0u8; (l3 + hdr + payload).max(60)];
    f[0..6].copy_from_slice(
        &[MAC_LAN, MAC_WAN, [0xff; 6], [1, 0, 0x5e, 0, 0, 5], [2, 9, 9, 9, 9, 9], VMAC_LAN, VMAC_SUB][match pick(r, 20)
        {
            0 => 2,
            1 => 3,
            2 => 4,
            3 => 1,
            4 | 5 => 5,
            6 => 6,
            _ => 0,
        }],
    );
    // A group source MAC now and then (dropped by ethernet-input).
    f[6..12].copy_from_slice(&[if pick(r, 40) == 0 { 3 } else { 2 }, 0, 0, 0, 0, 0x10]);
    if tagged {
        f[12..14].copy_from_slice(&[0x81, 0]);
        // VID 0: a priority tag (the port's, as untagged); PCP 5.
        put16(&mut f, 14, [7, 7, 8, 0x1007, 0, 0xa000][pick(r, 6)]);
    }
    let et: u16 = match pick(r, 48) {
        0 => 0x0806,
        1 => 0x88b5,
        2 => 0x8100,
        3 => 0x88cc,
        4 => 0x8847,
        5 => 0x0000,
        _ if six => 0x86dd,
        _ => 0x0800,
    };
    put16(&mut f, l3 - 2, et);
    let rx_if = match pick(r, 16) {
        0 => 1,
        1 => 9,
        2 => 3, // down
        _ => 0,
    };
    let ip = &mut f[l3..];
    if six {
        ip[0] = 0x60;
        put16(ip, 4, payload as u16);
        ip[6] = 17;
        ip[7] = [0, 1, 2, 64][pick(r, 4)];
        let addr = |s: &str| s.parse::<std::net::Ipv6Addr>().expect("address").octets();
        let src = match pick(r, 24) {
            0 => addr("fe80::1"),
            1 => addr("ff02::1"),
            2 => addr("::1"),
            3 => addr("::"),
            4 => addr("fec0::1"),
            _ => addr("2001:db8:1::2"),
        };
        ip[8..24].copy_from_slice(&src);
        let dst = match pick(r, 24) {
            0 => addr("ff02::1"),
            1 => addr("ff05::2"),
            2 => addr("fe80::1"),
            3 => addr("::"),
            4 => addr("::1"),
            5 => addr("fe80::ff:fe00:2"),
            6 => addr("::ffff:10.0.2.2"),
            _ => std::net::Ipv6Addr::new(
                0x2001,
                0xdb8,
                [0x18, 0x18, 0x18, 0x22, 2, 0x99][pick(r, 6)],
                0,
                0,
                0,
                0,
                r() as u16,
            )
            .octets(),
        };
        ip[24..40].copy_from_slice(&dst);
        match pick(r, 20) {
            0 => put16(ip, 4, payload as u16 + 1), // one byte beyond the frame
            1 => put16(ip, 4, payload as u16 - 2), // padding to trim
            2 => ip[0] = 0x40,                     // version 4 in an IPv6 frame
            _ => {}
        }
        if pick(r, 40) == 0 {
            f.truncate(l3 + pick(r, 40));
        }
        return (f, rx_if);
    }
    let mut tot = (hdr + payload) as u16;
    ip[0] = 0x45;
    ip[6] = if pick(r, 2) == 0 { 0x40 } else { 0 };
    ip[8] = [0, 1, 2, 64, 64, 64, 255][pick(r, 7)];
    ip[9] = [6, 17, 1, 47][pick(r, 4)];
    let src: [u8; 4] = match pick(r, 40) {
        0 => [0, 1, 2, 3],
        1 => [127, 0, 0, 1],
        2 => [224, 0, 0, 9],
        3 => [240, 1, 1, 1],
        4 => [255, 255, 255, 255],
        5 | 9 | 10 => [10, 0, 1, 66],
        6 => [223, 255, 255, 254],
        7 => [1, 0, 0, 1],
        _ => [10, 0, 1, 2],
    };
    ip[12..16].copy_from_slice(&src);
    let dst: [u8; 4] = match pick(r, 27) {
        24 => [0, 1, 2, 3],
        25 => [127, 0, 0, 1],
        26 => [254, 1, 2, 3],
        0 => [224, 0, 0, 5],
        1 => [255, 255, 255, 255],
        2 => [240, 0, 0, 1],
        3 => [239, 255, 255, 255],
        4 => [10, 0, 1, 1],
        5 => [10, 0, 2, 77],
        6 => [192, 0, 2, 1],
        7 => [203, 0, 113, r() as u8],
        8 => [203, 0, 114, r() as u8],
        9 => [203, 0, 115, r() as u8],
        10 => [198, 19, r() as u8, r() as u8],
        11 => [198, 20, r() as u8, r() as u8],
        12 | 13 => [198, 21, r() as u8, r() as u8],
        14 => [10, 0, 1, 99],
        15 | 16 => [198, 22, r() as u8, r() as u8],
        _ => [198, 18, r() as u8, r() as u8],
    };
    ip[16..20].copy_from_slice(&dst);
    for b in ip[20..].iter_mut() {
        *b = r() as u8;
    }
    // One frame in three broken (or unusual) in one way.
    let mut fix_csum = true;
    match pick(r, 30) {
        0 => ip[0] = 0x46, // a 24-byte header: options
        1 => ip[0] = 0x44, // IHL 4
        2 => ip[0] = 0x55, // version 5
        3 => ip[0] = 0x4f, // 60 bytes of header
        4 => tot = 19,
        5 => tot += 1, // one byte beyond the frame
        6 => tot -= 2, // Ethernet padding to trim
        7 => tot = 20, // a bare header
        8 => fix_csum = false,
        9 => tot = 0xffff,
        _ => {}
    }
    put16(ip, 2, tot);
    if fix_csum {
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        if (20..=ip.len()).contains(&ihl) {
            let c = !checksum::data(&ip[..ihl]);
            put16(ip, 10, c);
        }
    } else {
        put16(ip, 10, 0x1234);
    }
    // Frames cut inside the header.
    if pick(r, 40) == 0 {
        f.truncate(l3 + pick(r, 20));
    }
    (f, rx_if)
}

/// A worker's graph, pool, counters and tracer, for tests that run frames
/// through the graph batch by batch.
pub(crate) struct Batches {
    graph: Graph,
    input: NodeId,
    pool: PacketPool,
    pub(crate) stats: WorkerStats,
    tracer: Tracer,
    /// The traces of the packets marked: `trace.arm(n)` marks the next
    /// `n` frames given with `flags::TRACED`.
    pub(crate) trace: Arc<TraceShared>,
    ports: usize,
}

impl Batches {
    /// One round of the polling nodes (`control-inject`, `ip-inject`):
    /// what they emit waits in the graph for the next [`Batches::run`].
    pub(crate) fn poll(&mut self, now_ns: u64) {
        let mut tx = vec![Vec::new(); self.ports];
        let mut env = Env {
            pool: &mut self.pool,
            stats: &self.stats,
            tx: &mut tx,
            tracer: &mut self.tracer,
            now_ns,
            worker: 0,
            capture_node: None,
        };
        self.graph.poll(&mut env);
    }

    pub(crate) fn new(graph: Graph, input: NodeId, pool: PacketPool, ports: usize) -> Batches {
        let info = graph.info().clone();
        let stats = WorkerStats::new(info.nodes.len(), info.errors.len(), ports);
        let trace = TraceShared::new();
        Batches { graph, input, pool, stats, tracer: Tracer::new(Arc::clone(&trace), 0), trace, ports }
    }

    /// One batch: each frame (bytes, receiving interface, `Meta::flags`)
    /// into the graph's input, one graph run at `now_ns`; what each port
    /// was to send (metadata and bytes), its buffers freed.
    pub(crate) fn run<'a>(
        &mut self,
        frames: impl IntoIterator<Item = (&'a [u8], u16, u16)>,
        now_ns: u64,
    ) -> Vec<Vec<(Meta, Vec<u8>)>> {
        for (f, rx_if, fl) in frames {
            let p = self.pool.alloc_from(f).expect("buffer");
            let m = self.pool.meta_mut(p);
            m.rx_if = rx_if;
            if fl & flags::TRACED != 0 && self.tracer.armed() {
                // Marked as a worker marks a packet: flag and record.
                m.flags |= fl & !flags::TRACED;
                self.tracer.start(&mut self.pool, p, rx_if, now_ns);
            } else {
                m.flags |= fl;
            }
            self.graph.input_mut(self.input).push(p);
        }
        let mut tx = vec![Vec::new(); self.ports];
        let mut env = Env {
            pool: &mut self.pool,
            stats: &self.stats,
            tx: &mut tx,
            tracer: &mut self.tracer,
            now_ns,
            worker: 0,
            capture_node: None,
        };
        self.graph.run(&mut env);
        tx.iter()
            .enumerate()
            .map(|(port, q)| {
                q.iter()
                    .map(|&p| {
                        let sent = (*self.pool.meta(p), self.pool.data(p).to_vec());
                        if sent.0.flags & flags::TRACED != 0 {
                            self.tracer.finish(sent.0.trace, format!("tx port {port}"));
                        }
                        self.pool.free(p);
                        sent
                    })
                    .collect()
            })
            .collect()
    }
}

/// Switches the fast paths as the router does: a new `Params` published
/// to the nodes, which read it at their next batch.
fn set_fast_paths(shared: &Shared, fast_paths: FastPaths) {
    let p = Params { fast_paths, ..(*shared.params.load()).clone() };
    shared.params.publish(p);
}

/// What a run gave.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// Frames sent, per port.
    sent: Vec<Vec<Vec<u8>>>,
    /// Error and note counters, by global error id.
    errors: Vec<u64>,
    /// Packets per node.
    nodes: Vec<u64>,
    /// The metadata of the sent packets.
    metas: Vec<String>,
}

/// `frames` through [`router_with`] (with an input rule set on lan, an
/// output rule set on wan, or neither).
fn run(direct: bool, (acl_in, acl_out): (bool, bool), batch: usize, frames: &[(Vec<u8>, u16)]) -> Outcome {
    let (graph, input, shared, _fib) = router_with(acl_in, acl_out);
    drive(direct, (graph, &shared), input, batch, frames)
}

/// Runs `frames` (bytes, receiving interface) through `graph` in batches
/// of `batch`, with the direct paths on or off: what came out.
fn drive(
    direct: bool,
    (graph, shared): (Graph, &Shared),
    input: NodeId,
    batch: usize,
    frames: &[(Vec<u8>, u16)],
) -> Outcome {
    // GRE's direct encapsulation stays on: off, the outer packets take a
    // second pass and leave after the batch's others (its own
    // differential is `gre::tests`).
    set_fast_paths(shared, if direct { FastPaths::ALL } else { FastPaths { gre_direct: true, ..FastPaths::NONE } });
    let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
    let mut b = Batches::new(graph, input, pool, 2);
    let mut out = vec![Vec::new(), Vec::new()];
    let mut metas = Vec::new();
    for (c, chunk) in frames.chunks(batch).enumerate() {
        let sent = b.run(chunk.iter().map(|(f, rx_if)| (f.as_slice(), *rx_if, 0)), c as u64 * 1_000_000);
        for (port, q) in sent.into_iter().enumerate() {
            for (m, data) in q {
                metas.push(format!(
                    "port {port} rx_if {} tx_if {} nh {} l3 {} vlan {} flags {:#x} hash {}",
                    m.rx_if, m.tx_if, m.nh, m.l3_off, m.vlan, m.flags, m.hash
                ));
                out[port].push(data);
            }
        }
    }
    Outcome {
        sent: out,
        errors: b.stats.errors.iter().map(|c| c.get()).collect(),
        nodes: b.stats.nodes.iter().map(|n| n.packets.get()).collect(),
        metas,
    }
}

#[test]
fn direct_paths_are_the_general_paths() {
    let mut r = rng(0x2545_f491_4f6c_dd1d);
    let frames: Vec<(Vec<u8>, u16)> = (0..6000).map(|_| frame(&mut r)).collect();
    let info = router(false).0.info().clone();
    let gre_encap = usize::from(info.node_id("gre-encap").expect("gre-encap"));
    // Issue 36's checks, each met by some frame on both paths.
    let checks: Vec<usize> = [
        ("ethernet-input", "multicast-source"),
        ("ethernet-input", "unknown-ethertype"),
        ("ethernet-input", "nested-vlan"),
        ("ip4-input", "martian-destination"),
        ("ip4-input", "l2-multicast"),
        ("ip6-input", "l2-multicast"),
        ("ip6-input", "martian-source"),
    ]
    .iter()
    .map(|(n, e)| usize::from(info.error_id(n, e).unwrap_or_else(|| panic!("{n}/{e}"))))
    .collect();
    let mut forwarded_without_rules = 0;
    for rules in [(false, false), (true, false), (false, true)] {
        for batch in [1, 7, 256] {
            let general = run(false, rules, batch, &frames);
            let direct = run(true, rules, batch, &frames);
            let case = format!("rule sets (in, out) {rules:?}, batches of {batch}");
            if rules == (false, false) {
                forwarded_without_rules = direct.sent[1].len();
            } else {
                // The rule set drops what 10.0.1.66 sends.
                let with = direct.sent[1].len();
                assert!(
                    with + 5 < forwarded_without_rules,
                    "{case}: {with} forwarded with the rule set, {forwarded_without_rules} without"
                );
            }
            // The frames exercise both paths and most verdicts.
            assert!(direct.sent[1].len() > 400, "{case}: forwarded to the wan: {}", direct.sent[1].len());
            assert!(direct.sent[0].len() > 50, "{case}: ICMP errors and ARP to the lan: {}", direct.sent[0].len());
            assert!(direct.nodes[gre_encap] > 60, "{case}: into the tunnel: {}", direct.nodes[gre_encap]);
            let kinds = general.errors.iter().filter(|&&c| c > 0).count();
            assert!(kinds >= 15, "{case}: {kinds} kinds of drops and notes");
            for &c in &checks {
                assert!(general.errors[c] > 0, "{case}: {:?} met", info.errors[c]);
            }
            assert_eq!(direct.errors, general.errors, "{case}: counters");
            assert_eq!(direct.nodes, general.nodes, "{case}: packets per node");
            assert_eq!(direct.metas, general.metas, "{case}: metadata");
            assert_eq!(direct.sent, general.sent, "{case}: frames");
        }
    }
}

/// Frames to an interface's virtual MAC are forwarded as frames to its
/// own MAC are, on both paths; to a virtual MAC of another interface, or
/// of a sub-interface without its tag, or once it is gone, they are
/// `not-for-us`.
#[test]
fn frames_to_a_virtual_mac_are_the_interfaces() {
    let frame = |dst: [u8; 6], vid: Option<u16>| {
        let mut f = vec![0u8; 14];
        f[0..6].copy_from_slice(&dst);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
        if let Some(v) = vid {
            f.splice(12..12, [0x81, 0, (v >> 8) as u8, v as u8]);
        }
        let l3 = f.len();
        put16(&mut f, l3 - 2, 0x0800);
        f.resize(l3 + 46, 0);
        let ip = &mut f[l3..];
        ip[0] = 0x45;
        put16(ip, 2, 46);
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 1, 2]);
        ip[16..20].copy_from_slice(&[198, 18, 0, 1]);
        let c = !checksum::data(&ip[..20]);
        put16(ip, 10, c);
        f
    };
    let info = router(false).0.info().clone();
    let not_for_us = usize::from(info.error_id("ethernet-input", "not-for-us").expect("counter"));
    let frames = vec![
        (frame(MAC_LAN, None), 0),
        (frame(VMAC_LAN, None), 0),
        (frame(VMAC_SUB, None), 1), // wan.7's, untagged on the wan
        (frame(VMAC_LAN, None), 1), // lan's, on the wan
        (frame(VMAC_SUB, Some(7)), 1),
        (frame(VMAC_SUB, Some(8)), 1),
    ];
    for direct in [false, true] {
        let out = run(direct, (false, false), 7, &frames);
        assert_eq!(out.sent[1].len(), 3, "direct {direct}: own MAC, lan's vmac, wan.7's vmac tagged");
        assert_eq!(out.errors[not_for_us], 3, "direct {direct}");
        assert!(out.sent[1].iter().all(|g| g[6..12] == MAC_WAN), "sent from the wan's own MAC");
    }
    // The owner clears it: frames to it are not for us any more.
    for direct in [false, true] {
        let (graph, input, shared, _fib) = router_with(false, false);
        let mut t = (*shared.ifaces.load()).clone();
        assert!(t.set_vmacs(0, VmacOwner::Kernel, &[]));
        shared.ifaces.publish(t);
        let out = drive(direct, (graph, &shared), input, 7, &frames[..2]);
        assert_eq!(out.sent[1].len(), 1, "direct {direct}: only the frame to lan's own MAC");
        assert_eq!(out.errors[not_for_us], 1, "direct {direct}");
    }
}

#[test]
fn a_forwarded_frame_is_rewritten() {
    // One frame through the direct paths, checked byte by byte.
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&MAC_LAN);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
    put16(&mut f, 12, 0x0800);
    let ip = &mut f[14..];
    ip[0] = 0x45;
    put16(ip, 2, 46);
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 1, 2]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 1]);
    let c = !checksum::data(&ip[..20]);
    put16(ip, 10, c);
    let out = run(true, (false, false), 1, &[(f.clone(), 0)]);
    assert_eq!(out.sent[1].len(), 1, "one frame out of the wan");
    let g = &out.sent[1][0];
    assert_eq!(g[0..6], MAC_PEER);
    assert_eq!(g[6..12], MAC_WAN);
    assert_eq!(g[14 + 8], 63, "TTL");
    assert_eq!(checksum::data(&g[14..34]), 0xffff, "checksum");
    assert_eq!(g[14..], {
        let mut want = f[14..].to_vec();
        want[8] = 63;
        want[10..12].copy_from_slice(&g[24..26]);
        want
    });
    assert!(out.metas[0].contains("tx_if 1"), "{}", out.metas[0]);
    assert!(out.metas[0].contains(&format!("flags {:#x}", flags::L3_CSUM_OK)), "{}", out.metas[0]);
}

/// A priority-tagged frame (802.1Q VID 0) is the port's, untagged: an ARP
/// request in one is answered with an untagged reply (the tag removed
/// before arp-input answers in place), and an IPv4 packet is forwarded as
/// its untagged twin is.
#[test]
fn priority_tagged_frames_are_untagged() {
    let host = [2, 0, 0, 0, 0, 0x10];
    let mut req = vec![0xff; 6];
    req.extend_from_slice(&host);
    req.extend_from_slice(&[0x81, 0, 0xa0, 0, 0x08, 0x06]); // PCP 5, VID 0, ARP
    req.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    req.extend_from_slice(&host);
    req.extend_from_slice(&[10, 0, 1, 2, 0, 0, 0, 0, 0, 0, 10, 0, 1, 1]);
    req.resize(64, 0);
    for direct in [true, false] {
        let out = run(direct, (false, false), 1, &[(req.clone(), 0)]);
        assert_eq!(out.sent[0].len(), 1, "one ARP reply");
        let r = &out.sent[0][0];
        assert_eq!(r[0..6], host);
        assert_eq!(r[6..12], MAC_LAN);
        assert_eq!(r[12..14], [0x08, 0x06], "untagged");
        assert_eq!(r[14..22], [0, 1, 8, 0, 6, 4, 0, 2], "an ARP reply");
        assert_eq!(r[22..28], MAC_LAN);
        assert_eq!(r[28..32], [10, 0, 1, 1]);
    }
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&MAC_LAN);
    f[6..12].copy_from_slice(&host);
    put16(&mut f, 12, 0x0800);
    let ip = &mut f[14..];
    ip[0] = 0x45;
    put16(ip, 2, 46);
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 1, 2]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 1]);
    let c = !checksum::data(&ip[..20]);
    put16(ip, 10, c);
    let mut tagged = f[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0, 0xe0, 0]);
    tagged.extend_from_slice(&f[12..]);
    let plain = run(true, (false, false), 1, &[(f, 0)]);
    assert_eq!(plain.sent[1].len(), 1, "forwarded");
    for direct in [true, false] {
        let out = run(direct, (false, false), 1, &[(tagged.clone(), 0)]);
        assert_eq!(out.sent, plain.sent, "the same frame out (direct paths {direct})");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// Arbitrary bytes after a plausible Ethernet header (our MAC, IPv4 or
    /// IPv6, then anything): the direct paths give what the general paths
    /// give, and nothing panics.
    #[test]
    fn arbitrary_frames_agree(
        frames in proptest::collection::vec(
            (proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120), proptest::prelude::any::<bool>()),
            1..40,
        ),
    ) {
        let frames: Vec<(Vec<u8>, u16)> = frames
            .into_iter()
            .map(|(body, six)| {
                let mut f = MAC_LAN.to_vec();
                f.extend_from_slice(&[2, 0, 0, 0, 0, 0x10]);
                f.extend_from_slice(if six { &[0x86, 0xdd] } else { &[0x08, 0x00] });
                f.extend_from_slice(&body);
                // Mostly a version nibble that matches, sometimes a valid
                // IPv4 checksum, so that frames get past the first checks.
                if let Some(b) = f.get_mut(14) {
                    *b = if six { 0x60 | (*b & 0x0f) } else if *b & 1 == 0 { 0x45 } else { *b };
                }
                if !six && f.len() >= 34 && f[14] == 0x45 {
                    f[24] = 0;
                    f[25] = 0;
                    let c = !checksum::data(&f[14..34]);
                    put16(&mut f, 24, c);
                }
                (f, 0)
            })
            .collect();
        let general = run(false, (false, false), 16, &frames);
        let direct = run(true, (false, false), 16, &frames);
        proptest::prop_assert_eq!(direct, general);
    }
}

/// An untagged IPv4 frame from the lan's peer: `src` to `dst`, protocol
/// `proto` with ports 1234 -> `dport`, TCP flags `tcp`, DSCP `dscp`,
/// `payload` bytes of transport data.
fn v4_frame(src: [u8; 4], dst: [u8; 4], proto: u8, dport: u16, tcp: u8, dscp: u8, payload: usize) -> Vec<u8> {
    let l4 = if proto == 6 { 20 } else { 8 };
    let mut f = vec![0u8; (14 + 20 + l4 + payload).max(60)];
    f[0..6].copy_from_slice(&MAC_LAN);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
    put16(&mut f, 12, 0x0800);
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[1] = dscp << 2;
    put16(ip, 2, (20 + l4 + payload) as u16);
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let c = !checksum::data(&ip[..20]);
    put16(ip, 10, c);
    put16(ip, 20, 1234);
    put16(ip, 22, dport);
    if proto == 6 {
        ip[20 + 12] = 0x50;
        ip[20 + 13] = tcp;
    }
    f
}

/// Runs `frames` (bytes, receiving interface; batches of `batch`) through
/// a router whose lan has a rule set of several rules as its input rule
/// set (or with `out`, wan as its output rule set): what came out, and
/// the rule set's counters (packets and bytes per rule and the default).
fn run_rules(direct: bool, out: bool, batch: usize, frames: &[(Vec<u8>, u16)]) -> (Outcome, Vec<(u64, u64)>) {
    let (graph, input, shared, _fib) = router_with(!out, out);
    publish_rules(
        &shared,
        "action = \"drop\"\nsrc = \"10.0.1.66/32\"\n\
         [[acl.rule]]\naction = \"drop\"\nsrc = \"2001:db8:1::66/128\"\n\
         [[acl.rule]]\naction = \"count\"\nproto = \"udp\"\ndport = 53\n\
         [[acl.rule]]\naction = \"drop\"\nproto = \"tcp\"\ndport = 22\ntcp_flags = \"syn\"\n\
         [[acl.rule]]\naction = \"drop\"\ndst = \"198.18.0.99/32\"\ndscp = 10\n\
         [[acl.rule]]\naction = \"drop\"\ndst = \"2001:db8:18::99/128\"\ndscp = 10\n\
         [[acl.rule]]\naction = \"accept\"\nproto = \"udp\"\ndport = 4000\n\
         [[acl.rule]]\naction = \"accept\"\nproto = \"tcp\"\ndport = 22",
    );
    let outcome = drive(direct, (graph, &shared), input, batch, frames);
    let acls = shared.acls.load();
    let set = acls.get(0).expect("rule set");
    let rules = tern_acl::RuleCounters::sum(&set.counters).iter().map(|h| (h.packets, h.bytes)).collect();
    (outcome, rules)
}

/// `ip4-input`'s shortcut through the input rule set (the flow the rule
/// set last accepted) decides and counts as `ip4-acl-in` does: the same
/// frames out, the same drops, the same hits and bytes on every rule, for
/// bursts of flows that differ from each other in every key field
/// (addresses, protocol, ports, TCP flags, DSCP) and in length, accepted,
/// dropped and seen by a count-only rule; only the packets it takes skip
/// `ip4-acl-in`, and it counts them. The same for `ip4-rewrite`'s
/// shortcut through wan's output rule set and `ip4-acl-out`, with flows
/// that the rewrite node does not send to the rule set (TTL expired, too
/// big, out to the lan) among them.
#[test]
fn acl_shortcuts_decide_and_count_as_ip4_acl_nodes() {
    let ttl = |mut f: Vec<u8>, ttl: u8| {
        f[14 + 8] = ttl;
        put16(&mut f, 14 + 10, 0);
        let c = !checksum::data(&f[14..34]);
        put16(&mut f, 14 + 10, c);
        f
    };
    let flows = [
        v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 4000, 0, 0, 30),
        v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 4000, 0, 0, 200), // another length
        v4_frame([10, 0, 1, 2], [198, 18, 0, 2], 17, 4000, 0, 0, 30),  // destination
        v4_frame([10, 0, 1, 3], [198, 18, 0, 1], 17, 4000, 0, 0, 30),  // source
        v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 4001, 0, 0, 30),  // port
        v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 53, 0, 0, 30),    // count-only rule
        v4_frame([10, 0, 1, 66], [198, 18, 0, 1], 17, 4000, 0, 0, 30), // dropped source
        v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 6, 22, 0x10, 0, 30),  // TCP ACK: accepted
        v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 6, 22, 0x02, 0, 30),  // TCP SYN: dropped
        v4_frame([10, 0, 1, 2], [198, 18, 0, 99], 17, 4000, 0, 10, 30), // DSCP 10: dropped
        v4_frame([10, 0, 1, 2], [198, 18, 0, 99], 17, 4000, 0, 0, 30), // DSCP 0: accepted
        v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 1, 0, 0, 0, 30),      // ICMP
        ttl(v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 4000, 0, 0, 30), 1), // TTL expires
        ttl(v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 4000, 0, 0, 30), 9), // another TTL: taken
        v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 4000, 0, 0, 1380), // too big for the wan
        v4_frame([10, 0, 1, 5], [10, 0, 1, 2], 17, 4000, 0, 0, 30),    // out to the lan
    ];
    let pairs = [[7, 8], [0, 1], [0, 2], [0, 3], [0, 4], [0, 5], [0, 6], [10, 9], [0, 11], [0, 12], [0, 13], [0, 14]];
    let pairs = [pairs.as_slice(), &[[14, 0], [0, 15], [15, 0]]].concat();
    shortcut_agrees_with_acl_node(&flows, &pairs, false, false);
    shortcut_agrees_with_acl_node(&flows, &pairs, false, true);
}

/// `ip6-input`'s shortcut decides and counts as `ip6-acl-in` does, as
/// `ip4-input`'s; besides the key fields, flows differ in what the key
/// leaves out (flow label, hop limit: taken) and in what the shortcut
/// leaves to `ip6-acl-in` (an extension header, a fragment, a TCP header
/// cut short, transport bytes past the payload). The same for
/// `ip6-rewrite`'s shortcut and `ip6-acl-out` (with a hop limit that
/// expires, and packets of one key whose flow labels send them through
/// either gateway of an ECMP route: each gets its own gateway's header).
#[test]
fn acl_shortcuts_decide_and_count_as_ip6_acl_nodes() {
    let f = |src: u8, dst: u8, proto: u8, dport: u16, tcp: u8, dscp: u8, payload: usize| V6 {
        src,
        dst,
        proto,
        dport,
        tcp,
        dscp,
        payload,
        ..V6::default()
    };
    let flows = [
        f(2, 1, 17, 4000, 0, 0, 30).frame(),
        f(2, 1, 17, 4000, 0, 0, 200).frame(),    // another length
        f(2, 2, 17, 4000, 0, 0, 30).frame(),     // destination
        f(3, 1, 17, 4000, 0, 0, 30).frame(),     // source
        f(2, 1, 17, 4001, 0, 0, 30).frame(),     // port
        f(2, 1, 17, 53, 0, 0, 30).frame(),       // count-only rule
        f(0x66, 1, 17, 4000, 0, 0, 30).frame(),  // dropped source
        f(2, 1, 6, 22, 0x10, 0, 30).frame(),     // TCP ACK: accepted
        f(2, 1, 6, 22, 0x02, 0, 30).frame(),     // TCP SYN: dropped
        f(2, 0x99, 17, 4000, 0, 10, 30).frame(), // DSCP 10: dropped
        f(2, 0x99, 17, 4000, 0, 8, 30).frame(),  // DSCP 8 (byte 1 alone differs): accepted
        f(2, 1, 58, 0, 0, 0, 30).frame(),        // ICMPv6
        V6 { label: 0x5_4321, ..f(2, 1, 17, 4000, 0, 0, 30) }.frame(), // flow label: taken
        V6 { hop_limit: 9, ..f(2, 1, 17, 4000, 0, 0, 30) }.frame(), // hop limit: taken
        V6 { ext: Some(0), ..f(2, 1, 17, 4000, 0, 0, 30) }.frame(), // hop-by-hop options
        V6 { ext: Some(44), ..f(2, 1, 17, 4000, 0, 0, 30) }.frame(), // first fragment
        V6 { ext: Some(0), ..f(2, 1, 17, 53, 0, 0, 30) }.frame(), // count-only rule behind options
        f(2, 1, 17, 4000, 0, 0, 0).frame(),      // UDP header alone (48 L3 bytes)
        f(2, 1, 6, 22, 0x02, 0, 0).frame(),      // TCP SYN, no data
        V6 { cut: 10, ..f(2, 1, 6, 22, 0x02, 0, 0) }.frame(), // TCP header cut to 10 bytes
        V6 { cut: 4, ..f(2, 1, 17, 4000, 0, 0, 0) }.frame(), // UDP ports only
        f(2, 1, 6, 22, 0x10, 0, 0).frame(),      // TCP ACK, no data: accepted by a rule
        V6 { cut: 10, ..f(2, 1, 6, 22, 0x10, 0, 0) }.frame(), // cut short: by the default
        V6 { hop_limit: 1, ..f(2, 1, 17, 4000, 0, 0, 30) }.frame(), // hop limit expires
        f(2, 1, 17, 4000, 0, 0, 1380).frame(),   // too big for the wan
        // One flow's key by ECMP, its flow labels hashed to either gateway.
        V6 { net: 0x21, label: 1, ..f(2, 1, 17, 4000, 0, 0, 30) }.frame(),
        V6 { net: 0x21, label: 2, ..f(2, 1, 17, 4000, 0, 0, 30) }.frame(),
        V6 { net: 0x21, label: 3, ..f(2, 1, 17, 4000, 0, 0, 30) }.frame(),
        V6 { net: 0x21, label: 4, ..f(2, 1, 17, 4000, 0, 0, 30) }.frame(),
    ];
    let pairs = [
        [7, 8],
        [0, 1],
        [0, 2],
        [0, 3],
        [0, 4],
        [0, 5],
        [0, 6],
        [10, 9],
        [0, 11],
        [0, 12],
        [0, 13],
        [0, 14],
        [14, 16],
        [0, 15],
        [0, 17],
        [17, 20],
        [18, 19],
        [8, 19],
        [7, 18],
        [21, 22],
        [22, 21],
        [0, 23],
        [23, 0],
        [0, 24],
        [24, 0],
        [25, 26],
        [26, 27],
        [27, 28],
        [28, 25],
    ];
    shortcut_agrees_with_acl_node(&flows, &pairs, true, false);
    shortcut_agrees_with_acl_node(&flows, &pairs, true, true);
}

/// An untagged IPv6 frame from the lan's peer (2001:db8:1::`src` to
/// 2001:db8:18::`dst`), for the shortcut's tests.
#[derive(Clone, Copy)]
struct V6 {
    src: u8,
    dst: u8,
    proto: u8,
    dport: u16,
    tcp: u8,
    dscp: u8,
    /// Transport data after the 8-byte UDP/ICMPv6 or 20-byte TCP header.
    payload: usize,
    label: u32,
    hop_limit: u8,
    /// An 8-byte extension header first: hop-by-hop options (0) or a
    /// first fragment (44).
    ext: Option<u8>,
    /// The payload length cuts the transport header to this many bytes
    /// (0: whole); the frame carries the rest as padding.
    cut: usize,
    /// The destination's network: 2001:db8:`net`::/48 (0x18: one
    /// gateway; 0x21: two, ECMP).
    net: u8,
}

impl Default for V6 {
    fn default() -> V6 {
        V6 {
            src: 2,
            dst: 1,
            proto: 17,
            dport: 4000,
            tcp: 0,
            dscp: 0,
            payload: 0,
            label: 0,
            hop_limit: 64,
            ext: None,
            cut: 0,
            net: 0x18,
        }
    }
}

impl V6 {
    fn frame(&self) -> Vec<u8> {
        let mut l4 = vec![0u8; if self.proto == 6 { 20 } else { 8 } + self.payload];
        put16(&mut l4, 0, 1234);
        put16(&mut l4, 2, self.dport);
        if self.proto == 6 {
            l4[12] = 0x50;
            l4[13] = self.tcp;
        } else if self.proto == 58 {
            l4[0] = 128;
        }
        // A transport header cut short by the payload length; the frame
        // still carries all of it, as padding.
        let cut = if self.cut > 0 { l4.len() - self.cut } else { 0 };
        let mut ext = Vec::new();
        if let Some(e) = self.ext {
            ext = vec![self.proto, 0, 0, 0, 0, 0, 0, 0];
            if e == 44 {
                ext[3] = 1; // offset 0, more fragments
            }
        }
        let plen = ext.len() + l4.len() - cut;
        let mut f = vec![0u8; 14 + 40];
        f[0..6].copy_from_slice(&MAC_LAN);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
        put16(&mut f, 12, 0x86dd);
        let first = 6u32 << 28 | u32::from(self.dscp) << 22 | self.label;
        f[14..18].copy_from_slice(&first.to_be_bytes());
        put16(&mut f, 18, plen as u16);
        f[20] = self.ext.unwrap_or(self.proto);
        f[21] = self.hop_limit;
        f[22..38].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, self.src]);
        f[38..54].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, self.net, 0, 0, 0, 0, 0, 0, 0, 0, 0, self.dst]);
        f.extend_from_slice(&ext);
        f.extend_from_slice(&l4);
        f.resize(f.len().max(60), 0);
        f
    }
}

/// Runs bursts of `flows` (each pair of `pairs` first, the second after
/// the first in long bursts, so that the shortcut has learnt the first
/// when the second comes; then random bursts) through a router whose lan
/// has a rule set of several rules for the family (`six`), with the
/// direct paths on and off, in batches of several sizes: the same frames,
/// drops, metadata and rule counters; only the packets the input node's
/// shortcut takes skip the ACL node, and it counts them.
fn shortcut_agrees_with_acl_node(flows: &[Vec<u8>], pairs: &[[usize; 2]], six: bool, out: bool) {
    let (input, acl_node) = match (six, out) {
        (false, false) => ("ip4-input", "ip4-acl-in"),
        (true, false) => ("ip6-input", "ip6-acl-in"),
        (false, true) => ("ip4-rewrite", "ip4-acl-out"),
        (true, true) => ("ip6-rewrite", "ip6-acl-out"),
    };
    let mut r = rng(0x9e37_79b9_7f4a_7c15);
    let mut frames = Vec::new();
    for pair in pairs {
        for &f in pair {
            frames.extend(std::iter::repeat_n((flows[f].clone(), 0), 300));
        }
    }
    while frames.len() < 12000 {
        let f = &flows[(r() % flows.len() as u64) as usize];
        for _ in 0..1 + r() % 300 {
            frames.push((f.clone(), 0));
        }
    }
    let (graph, ..) = router_with(!out, out);
    let info = graph.info();
    let acl_in = usize::from(info.node_id(acl_node).expect("acl node"));
    let taken_id = info.errors.iter().position(|e| e.node == input && e.name == "acl-shortcut").expect("counter");
    for batch in [1, 7, 64, 256] {
        let (general, general_rules) = run_rules(false, out, batch, &frames);
        let (mut direct, direct_rules) = run_rules(true, out, batch, &frames);
        let case = format!("{input}, batches of {batch}");
        let taken = direct.errors[taken_id];
        assert_eq!(general.errors[taken_id], 0, "{case}: no shortcut without the direct paths");
        assert!(taken > frames.len() as u64 / 5, "{case}: the shortcut took {taken} of {}", frames.len());
        assert_eq!(direct_rules, general_rules, "{case}: rule counters");
        assert!(general_rules.iter().filter(|h| h.0 > 0).count() >= 5, "{case}: rules hit: {general_rules:?}");
        assert_eq!(direct.nodes[acl_in] + taken, general.nodes[acl_in], "{case}: packets through {acl_node}");
        direct.nodes[acl_in] = general.nodes[acl_in];
        direct.errors[taken_id] = 0;
        assert_eq!(direct.errors, general.errors, "{case}: counters");
        assert_eq!(direct.nodes, general.nodes, "{case}: packets per node");
        assert!(direct.metas == general.metas, "{case}: metadata differs");
        assert!(direct.sent == general.sent, "{case}: frames differ (order or bytes)");
    }
}

/// A new rule set applies to the shortcut's flow from the next batch: the
/// flow it accepted is forgotten, not taken past a rule that now drops it.
#[test]
fn acl_shortcut_forgets_its_flow_when_the_rules_change() {
    let v6 = V6 { payload: 30, ..V6::default() }.frame();
    let v4 = v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 4000, 0, 0, 30);
    let cases = [(&v4, "ip4-input", "10.0.1.2/32"), (&v6, "ip6-input", "2001:db8:1::2/128")];
    let cases = cases.iter().flat_map(|&c| [(c, false), ((c.0, c.1.replace("input", "rewrite").leak(), c.2), true)]);
    for ((f, node, drop), out) in cases {
        let (graph, input_node, shared, _fib) = router_with(!out, out);
        publish_rules(&shared, "action = \"drop\"\nsrc = \"10.0.1.66/32\"");
        let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
        let mut b = Batches::new(graph, input_node, pool, 2);
        let batch = |b: &mut Batches, t: u64| b.run((0..32).map(|_| (f.as_slice(), 0, 0)), t)[1].len();
        assert_eq!(batch(&mut b, 0), 32, "{node}");
        assert_eq!(batch(&mut b, 1_000_000), 32, "{node}");
        let info = b.graph.info().clone();
        let taken_id = info.errors.iter().position(|e| e.node == node && e.name == "acl-shortcut").expect("counter");
        assert_eq!(b.stats.errors[taken_id].get(), 32, "{node}: the second batch went by the shortcut");
        publish_rules(&shared, &format!("action = \"drop\"\nsrc = \"{drop}\""));
        assert_eq!(batch(&mut b, 2_000_000), 0, "{node}: dropped by the new rule set");
        assert_eq!(batch(&mut b, 3_000_000), 0, "{node}: and still");
        assert_eq!(b.stats.errors[taken_id].get(), 32, "{node}");
    }
}

/// An interface change applies to the shortcut's flow from the next
/// batch (`tern_acl::verdict`'s one invalidation rule): once the
/// receiving (or, for the output rule sets, transmitting) interface is
/// bound to another rule set, which drops everything, the flow the first
/// set accepted is dropped at once, its packets byte for byte the ones
/// the cache took, and the rule set's node counts them.
#[test]
fn acl_shortcut_forgets_its_flow_when_the_interfaces_change() {
    let v6 = V6 { payload: 30, ..V6::default() }.frame();
    let v4 = v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 4000, 0, 0, 30);
    for (f, four) in [(v4, true), (v6, false)] {
        for out in [false, true] {
            let node = match (four, out) {
                (true, false) => "ip4-input",
                (false, false) => "ip6-input",
                (true, true) => "ip4-rewrite",
                (false, true) => "ip6-rewrite",
            };
            let acl_node = format!("ip{}-acl-{}", if four { 4 } else { 6 }, if out { "out" } else { "in" });
            let (graph, input_node, shared, _fib) = router_with(!out, out);
            let sets = tern_acl::parse_toml(
                "[[acl]]\nname = \"A\"\ndefault = \"accept\"\n[[acl.rule]]\naction = \"accept\"\nproto = \"udp\"\n\
                 [[acl]]\nname = \"D\"\ndefault = \"drop\"\n[[acl.rule]]\naction = \"drop\"\nproto = \"udp\"\n",
            )
            .expect("rules");
            let mut table = AclTable::default();
            for set in &sets {
                let classifier = tern_acl::compile(set, &|_| None).expect("compile");
                let counters = vec![tern_acl::RuleCounters::for_classifier(&classifier)];
                table.sets.push(AclSet { name: set.name.clone(), classifier, counters });
            }
            shared.acls.publish(table);
            let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
            let mut b = Batches::new(graph, input_node, pool, 2);
            let batch = |b: &mut Batches, t: u64| b.run((0..32).map(|_| (f.as_slice(), 0, 0)), t)[1].len();
            assert_eq!(batch(&mut b, 0), 32, "{node}");
            assert_eq!(batch(&mut b, 1_000_000), 32, "{node}");
            let info = b.graph.info().clone();
            let id = |n: &str, e: &str| info.errors.iter().position(|c| c.node == n && c.name == e).expect("counter");
            let (taken, denied) = (id(node, "acl-shortcut"), id(&acl_node, "denied"));
            assert_eq!(b.stats.errors[taken].get(), 32, "{node}: the second batch went by the shortcut");
            let mut ifs = shared.ifaces.load().ifs.clone();
            if out {
                ifs[1].acl_out = Some(1);
            } else {
                ifs[0].acl_in = Some(1);
            }
            shared.ifaces.publish(IfTable::new(ifs));
            assert_eq!(batch(&mut b, 2_000_000), 0, "{node}: dropped by the newly bound set");
            assert_eq!(batch(&mut b, 3_000_000), 0, "{node}: and still");
            assert_eq!(b.stats.errors[taken].get(), 32, "{node}");
            assert_eq!(b.stats.errors[denied].get(), 64, "{node}: {acl_node} decided them");
        }
    }
}

/// The output rule set's shortcut keeps to its flow's transmitting
/// interface: once a route sends the flow out of another interface bound
/// to the same rule set, whose rule drops it there, the flow is dropped,
/// though its packets are the flow's byte for byte.
#[test]
fn acl_out_shortcut_keeps_to_its_interface() {
    let v6 = V6 { payload: 30, ..V6::default() }.frame();
    let v4 = v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 4000, 0, 0, 30);
    let ip = |s: &str| s.parse::<IpAddr>().expect("address");
    for (f, node, route, gw) in
        [(v4, "ip4-rewrite", "198.18.0.0/16", "10.0.1.2"), (v6, "ip6-rewrite", "2001:db8:18::/48", "2001:db8:1::2")]
    {
        let (graph, input_node, shared, mut fib) = router_with(false, true);
        fib.set_neighbor(0, ip(gw), Some([2, 0, 0, 0, 0, 0x10]));
        publish_rules(&shared, "action = \"drop\"\noif = \"lan\"");
        let mut ifs = shared.ifaces.load().ifs.clone();
        ifs[0].acl_out = Some(0);
        shared.ifaces.publish(IfTable::new(ifs));
        let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
        let mut b = Batches::new(graph, input_node, pool, 2);
        let batch = |b: &mut Batches, t: u64| -> Vec<usize> {
            b.run((0..32).map(|_| (f.as_slice(), 0, 0)), t).iter().map(Vec::len).collect()
        };
        assert_eq!(batch(&mut b, 0), [0, 32], "{node}: out of the wan");
        assert_eq!(batch(&mut b, 1_000_000), [0, 32], "{node}");
        let info = b.graph.info().clone();
        let id = |n: &str, e: &str| info.errors.iter().position(|c| c.node == n && c.name == e).expect("counter");
        let (taken, denied) = (id(node, "acl-shortcut"), id(&node.replace("rewrite", "acl-out"), "denied"));
        assert_eq!(b.stats.errors[taken].get(), 32, "{node}: the second batch went by the shortcut");
        let report = fib.apply([RouteOp::Add(
            Source::Static,
            route.parse().expect("prefix"),
            RouteTarget::Via { gw: ip(gw), ifindex: Some(0) },
            RouteAttrs::default(),
        )]);
        assert_eq!(report.failed, 0);
        assert_eq!(batch(&mut b, 2_000_000), [0, 0], "{node}: dropped on the way out of the lan");
        assert_eq!(batch(&mut b, 3_000_000), [0, 0], "{node}: and still");
        assert_eq!(b.stats.errors[taken].get(), 32, "{node}");
        assert_eq!(b.stats.errors[denied].get(), 64, "{node}");
    }
}

/// `ip4-local` trusts no header: a packet that reaches it without passing
/// `ip4-input` (cut short, or an IHL beyond the frame) is dropped and
/// counted as the engine's `unspecified` (a bug upstream), never read out
/// of bounds; a whole echo request is still answered.
#[test]
fn ip4_local_drops_a_header_it_cannot_read() {
    let (graph, _, _, _fib) = router_with(false, false);
    let local = graph.node_id("ip4-local").expect("ip4-local");
    let pool = PacketPool::new(PoolConfig { frames: 64, ..PoolConfig::default() }).expect("pool");
    let mut b = Batches::new(graph, local, pool, 2);
    let info = b.graph.info().clone();
    let unspecified = info.errors.iter().position(|e| e.name == "unspecified").expect("counter");
    let echo = info.errors.iter().position(|e| e.node == "ip4-local" && e.name == "echo-reply-sent").expect("counter");
    // An echo request from 10.0.1.2 to 10.0.1.1, Meta::l3_off 0 (no
    // link-layer header), then the same cut inside its header, and with
    // an IHL of 60 in a 28-byte packet.
    let mut ip = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 1, 2, 10, 0, 1, 1, 8, 0, 0xf7, 0xff, 0, 0, 0, 0];
    let c = !checksum::data(&ip[..20]);
    put16(&mut ip, 10, c);
    let cut = ip[..12].to_vec();
    let mut long_ihl = ip.clone();
    long_ihl[0] = 0x4f;
    b.run([(cut.as_slice(), 0, 0), (long_ihl.as_slice(), 0, 0)], 0);
    assert_eq!(b.stats.errors[unspecified].get(), 2);
    assert_eq!(b.stats.errors[echo].get(), 0);
    b.run([(ip.as_slice(), 0, 0)], 1);
    assert_eq!(b.stats.errors[echo].get(), 1, "the whole request is answered");
    assert_eq!(b.stats.errors[unspecified].get(), 2);
}

/// A traced packet takes the path its untraced neighbours take, fast path
/// included, and its record says so: with an input rule set that accepted
/// the flow, `ip4-input` sends it straight to `ip4-lookup` with the notes
/// "direct path" and "acl T: cached verdict, rule N"; with the fast paths
/// switched off at run time, the same packet goes through `ip4-acl-in`,
/// whose note names the same rule, and no fast-path note appears.
#[test]
fn traces_show_the_fast_path_packets_take() {
    let f = v4_frame([10, 0, 1, 2], [198, 18, 0, 1], 17, 4000, 0, 0, 30);
    let (graph, input_node, shared, _fib) = router_with(true, false);
    publish_rules(&shared, "action = \"accept\"\nproto = \"udp\"\ndport = 4000");
    let pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
    let mut b = Batches::new(graph, input_node, pool, 2);
    // The first batch teaches the shortcut the flow.
    assert_eq!(b.run((0..8).map(|_| (f.as_slice(), 0, 0)), 0)[1].len(), 8);
    let traced = |b: &mut Batches, t: u64| {
        b.trace.clear();
        b.trace.arm(1);
        // The traced packet in the middle of the flow's others.
        let frames = (0..8).map(|i| (f.as_slice(), 0, if i == 3 { flags::TRACED } else { 0 }));
        assert_eq!(b.run(frames, t)[1].len(), 8, "all forwarded");
        let recs = b.trace.take();
        assert_eq!(recs.len(), 1, "one record");
        recs.into_iter().next().expect("record")
    };
    let rec = traced(&mut b, 1_000_000);
    let path: Vec<&str> = rec.hops.iter().map(|h| h.node).collect();
    assert!(!path.contains(&"ip4-acl-in"), "the shortcut's path: {path:?}");
    let input = rec.hops.iter().find(|h| h.node == "ip4-input").expect("ip4-input hop");
    assert_eq!(input.next, "ip4-lookup");
    assert!(input.notes.iter().any(|n| n == "direct path"), "notes: {:?}", input.notes);
    let cached = input.notes.iter().find_map(|n| n.strip_prefix("acl T: cached verdict, ")).expect("cached verdict");
    assert!(cached.starts_with("rule "), "{cached}");
    assert_eq!(rec.fate, "tx port 1");

    set_fast_paths(&shared, FastPaths::NONE);
    let rec = traced(&mut b, 2_000_000);
    let path: Vec<&str> = rec.hops.iter().map(|h| h.node).collect();
    assert!(path.contains(&"ip4-acl-in"), "the reference path: {path:?}");
    let notes: Vec<&String> = rec.hops.iter().flat_map(|h| &h.notes).collect();
    assert!(!notes.iter().any(|n| n.contains("direct path") || n.contains("cached verdict")), "{notes:?}");
    let decided = format!("acl T: Accept by {cached}");
    assert!(notes.iter().any(|n| **n == decided), "the ACL node decided as the cache said ({decided}): {notes:?}");
}
