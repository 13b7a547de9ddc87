//! No node panics on packet bytes (issue 37 item 3), and traces follow
//! the path packets really take (item 4).
//!
//! Each node of the graph, fed directly, gets frames of every protocol it
//! reads cut to every length, with `Meta::l3_off` sometimes claiming more
//! than the frame holds and the rest of the metadata (interfaces, next
//! hop, ICMP request, flags) random: every packet must leave, counted
//! (sent, or dropped under a reason), and none may panic. A traced packet
//! must cross the nodes its untraced twin crosses, with and without the
//! fast paths, and say where a fast path settled it.

use crate::direct_tests::Batches;
use crate::state::{FastPaths, GreTunnel, IfKind, IfTable, Iface, IpsecTunnel, NO_IF, Params, Shared, V4Net, V6Net};
use crossbeam_queue::ArrayQueue;
use std::net::IpAddr;
use std::sync::Arc;
use tern_engine::graph::Env;
use tern_engine::trace::Tracer;
use tern_engine::{Graph, TraceShared, WorkerStats};
use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
use tern_packet::{PacketPool, PoolConfig, flags};
use tern_wire::checksum;

const MAC0: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC1: [u8; 6] = [2, 0, 0, 0, 0, 2];
const PEER: [u8; 6] = [2, 0, 0, 0, 0, 9];

fn rng(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Ports lan (0) and wan (1), VLAN 7 on wan (2), gre0 to the wan peer
/// (3), ipsec0 to the same peer (4, SAs [`esp_sa`] 1 out, 2 in); routes of every kind for both families, one neighbour resolved
/// and one not (so that `ip4-glean`/`ip6-glean` have work); with
/// `linux`, Linux owns the local addresses through TAPs on ports 2 and 3.
fn router(linux: bool) -> (Shared, Graph, tern_fib::FibWriter) {
    let (mut fib, reader) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
    let p = |s: &str| s.parse::<Prefix>().expect("prefix");
    let ip = |s: &str| s.parse::<IpAddr>().expect("address");
    let add =
        |prefix: &str, target: RouteTarget| RouteOp::Add(Source::Static, p(prefix), target, RouteAttrs::default());
    let report = fib.apply(vec![
        add("10.0.1.0/24", RouteTarget::Connected { ifindex: 0 }),
        add("10.0.2.0/24", RouteTarget::Connected { ifindex: 1 }),
        add("10.0.1.1/32", RouteTarget::Local { ifindex: 0 }),
        add("10.0.2.1/32", RouteTarget::Local { ifindex: 1 }),
        add("198.18.0.0/16", RouteTarget::Via { gw: ip("10.0.2.2"), ifindex: None }),
        add("198.19.0.0/16", RouteTarget::Ecmp(vec![(ip("10.0.2.2"), None), (ip("10.0.2.4"), None)])),
        add("198.20.0.0/16", RouteTarget::Connected { ifindex: 3 }),
        add("198.21.0.0/16", RouteTarget::Connected { ifindex: 4 }),
        add("203.0.113.0/24", RouteTarget::Blackhole),
        add("203.0.114.0/24", RouteTarget::Unreachable),
        add("203.0.115.0/24", RouteTarget::Prohibit),
        add("2001:db8:1::/64", RouteTarget::Connected { ifindex: 0 }),
        add("2001:db8:2::/64", RouteTarget::Connected { ifindex: 1 }),
        add("2001:db8:1::1/128", RouteTarget::Local { ifindex: 0 }),
        add("2001:db8:18::/48", RouteTarget::Via { gw: ip("2001:db8:2::2"), ifindex: None }),
        add("2001:db8:19::/48", RouteTarget::Ecmp(vec![(ip("2001:db8:2::2"), None), (ip("2001:db8:2::4"), None)])),
        add("2001:db8:ff::/48", RouteTarget::Blackhole),
    ]);
    assert_eq!(report.failed, 0);
    fib.set_neighbor(1, ip("10.0.2.2"), Some(PEER));
    fib.set_neighbor(1, ip("2001:db8:2::2"), Some(PEER));
    let tunnel = GreTunnel { local: ip("10.0.2.1"), remote: ip("10.0.2.2"), key: Some(7), ttl: 64 };
    let ipsec = IpsecTunnel { local: ip("10.0.2.1"), remote: ip("10.0.2.2"), sa_out: 1, sa_in: vec![2], ttl: 64 };
    let mut ifs = vec![
        Iface::new(0, "lan", IfKind::Port, 0, MAC0),
        Iface::new(1, "wan", IfKind::Port, 1, MAC1),
        Iface::new(2, "wan.7", IfKind::Vlan { parent: 1, vid: 7 }, 1, MAC1),
        Iface::new(3, "gre0", IfKind::Gre(tunnel), NO_IF, MAC1),
        Iface::new(4, "ipsec0", IfKind::Ipsec(ipsec), NO_IF, MAC1),
    ];
    for (i, f) in ifs.iter_mut().enumerate() {
        let n = i as u8 + 1;
        f.v4 = vec![V4Net { addr: [10, 0, n, 1].into(), len: 24 }];
        f.v6 = vec![V6Net { addr: [0x2001, 0xdb8, u16::from(n), 0, 0, 0, 0, 1].into(), len: 64 }];
        f.v6_ll = crate::state::link_local_from_mac(f.mac);
    }
    let mut shared = Shared::new(IfTable::new(ifs), reader);
    let mut sas = tern_ipsec::SaDb::with_workers(1);
    sas.add_batch(vec![esp_sa(1), esp_sa(2)]).expect("sas");
    sas.publish();
    shared.sas = sas.reader();
    let params = if linux {
        Params { linux_owns_local: true, tap_ports: vec![2, 3, 2, NO_IF], ..Params::default() }
    } else {
        Params::default()
    };
    shared.params.publish(params);
    let graph = crate::build_graph(&shared, Arc::new(ArrayQueue::new(4))).expect("graph").graph;
    (shared, graph, fib)
}

/// The wire tests' SAs: AES-128-GCM, keys from the id.
fn esp_sa(id: u32) -> tern_ipsec::SaConfig {
    tern_ipsec::SaConfig {
        id,
        spi: 0x100 * id,
        cipher: tern_ipsec::Cipher::Aes128Gcm,
        integ: tern_ipsec::Integ::None,
        key: tern_ipsec::Key::new(vec![id as u8; 20]),
        integ_key: tern_ipsec::Key::default(),
        esn: false,
        replay_window: 64,
        udp_encap: None,
        soft: tern_ipsec::Lifetime::default(),
        hard: tern_ipsec::Lifetime::default(),
    }
}

/// An ESP packet of SA 2 from the peer carrying `inner`, sequence `seq`.
fn esp_in(inner: &[u8], seq: u64) -> Vec<u8> {
    let sa = tern_ipsec::Sa::new(esp_sa(2), 1, std::time::Instant::now()).expect("sa");
    let h = sa.header_len();
    let mut b = vec![0u8; h + inner.len() + sa.trailer_len(inner.len())];
    if let Some(d) = b.get_mut(h..h + inner.len()) {
        d.copy_from_slice(inner);
    }
    let n = sa.encrypt(&mut b, inner.len(), 4, seq).expect("encrypt");
    b.truncate(n);
    b
}

fn ipv4(proto: u8, dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0, 10, 0, 1, 2];
    h.extend_from_slice(&dst);
    let total = (20 + l4.len()) as u16;
    if let Some(t) = h.get_mut(2..4) {
        t.copy_from_slice(&total.to_be_bytes());
    }
    let c = !checksum::data(&h);
    if let Some(c0) = h.get_mut(10..12) {
        c0.copy_from_slice(&c.to_be_bytes());
    }
    h.extend_from_slice(l4);
    h
}

fn ipv6(next: u8, src: [u16; 8], dst: [u16; 8], l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 255]);
    h.extend_from_slice(&std::net::Ipv6Addr::from(src).octets());
    h.extend_from_slice(&std::net::Ipv6Addr::from(dst).octets());
    h.extend_from_slice(l4);
    h
}

fn eth(dst: [u8; 6], ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&PEER);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

/// An IPv4 ESP packet from the wan peer (10.0.2.2) to 10.0.2.1.
fn esp4(esp: &[u8]) -> Vec<u8> {
    let mut p = ipv4(50, [10, 0, 2, 1], esp);
    if let Some(src) = p.get_mut(12..16) {
        src.copy_from_slice(&[10, 0, 2, 2]);
    }
    if let Some(c) = p.get_mut(10..12) {
        c.copy_from_slice(&[0, 0]);
    }
    let c = !checksum::data(p.get(..20).unwrap_or_default());
    if let Some(c0) = p.get_mut(10..12) {
        c0.copy_from_slice(&c.to_be_bytes());
    }
    p
}

/// Frames of every kind a node reads, each whole (the cuts come later).
fn templates() -> Vec<Vec<u8>> {
    let us6 = [0x2001, 0xdb8, 1, 0, 0, 0, 0, 1];
    let host6 = [0x2001, 0xdb8, 1, 0, 0, 0, 0, 2];
    let ll6 = [0xfe80, 0, 0, 0, 0, 0, 0, 2];
    let echo = [8, 0, 0xf7, 0xfe, 0, 1, 0, 0];
    let mut ns = vec![135, 0, 0, 0, 0, 0, 0, 0];
    ns.extend_from_slice(&std::net::Ipv6Addr::from(us6).octets());
    ns.extend_from_slice(&[1, 1, 2, 0, 0, 0, 0, 9]);
    let mut na = vec![136, 0, 0, 0, 0x60, 0, 0, 0];
    na.extend_from_slice(&std::net::Ipv6Addr::from(host6).octets());
    na.extend_from_slice(&[2, 1, 2, 0, 0, 0, 0, 9]);
    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
    arp.extend_from_slice(&PEER);
    arp.extend_from_slice(&[10, 0, 1, 2, 0, 0, 0, 0, 0, 0, 10, 0, 1, 1]);
    let mut arp_reply = arp.clone();
    if let Some(op) = arp_reply.get_mut(7) {
        *op = 2;
    }
    let gre = [0x20, 0, 8, 0, 0, 0, 0, 7];
    let mut gre_in = gre.to_vec();
    gre_in.extend_from_slice(&ipv4(17, [10, 0, 1, 2], &[0, 1, 0, 2, 0, 8, 0, 0]));
    let mut tagged = vec![0x08, 0x00];
    tagged.extend_from_slice(&ipv4(1, [10, 0, 3, 1], &echo));
    let mut v4_options = ipv4(17, [198, 18, 0, 1], &[0, 1, 0, 2, 0, 8, 0, 0]);
    if let Some(b) = v4_options.first_mut() {
        *b = 0x4f; // IHL 60 in a 28-byte packet
    }
    vec![
        eth(MAC0, 0x0800, &ipv4(17, [198, 18, 0, 1], &[0, 1, 0, 2, 0, 8, 0, 0])),
        eth(MAC0, 0x0800, &ipv4(6, [198, 19, 0, 1], &[0; 20])),
        eth(MAC0, 0x0800, &ipv4(1, [10, 0, 1, 1], &echo)),
        eth(MAC0, 0x0800, &ipv4(17, [10, 0, 2, 9], &[0, 1, 0, 2, 0, 8, 0, 0])),
        eth(MAC0, 0x0800, &ipv4(47, [10, 0, 2, 1], &gre_in)),
        eth(MAC0, 0x0800, &ipv4(17, [198, 20, 0, 1], &[0, 1, 0, 2, 0, 8, 0, 0])),
        eth(MAC0, 0x0800, &ipv4(17, [198, 21, 0, 1], &[0, 1, 0, 2, 0, 8, 0, 0])),
        eth(MAC1, 0x0800, &esp4(&esp_in(&ipv4(17, [10, 0, 1, 2], &[0, 1, 0, 2, 0, 8, 0, 0]), 5))),
        eth(
            MAC1,
            0x0800,
            &ipv4(17, [10, 0, 2, 1], &[&[0x11, 0x94, 0x11, 0x94, 0, 40, 0, 0][..], &esp_in(&[0x45; 8], 6)].concat()),
        ),
        eth(MAC0, 0x0800, &v4_options),
        eth([0xff; 6], 0x0806, &arp),
        eth(MAC0, 0x0806, &arp_reply),
        eth(MAC1, 0x8100, &[&[0, 7][..], &tagged].concat()),
        eth(MAC0, 0x86dd, &ipv6(17, host6, [0x2001, 0xdb8, 0x18, 0, 0, 0, 0, 1], &[0, 1, 0, 2, 0, 8, 0, 0])),
        eth(MAC0, 0x86dd, &ipv6(6, host6, [0x2001, 0xdb8, 0x19, 0, 0, 0, 0, 1], &[0; 20])),
        eth(MAC0, 0x86dd, &ipv6(58, host6, us6, &[128, 0, 0, 0, 0, 1, 0, 1])),
        eth([0x33, 0x33, 0xff, 0, 0, 1], 0x86dd, &ipv6(58, ll6, [0xff02, 0, 0, 0, 0, 1, 0xff00, 1], &ns)),
        eth(MAC0, 0x86dd, &ipv6(58, ll6, us6, &na)),
        eth(MAC0, 0x86dd, &ipv6(58, ll6, [0xff02, 0, 0, 0, 0, 0, 0, 2], &[133, 0, 0, 0, 0, 0, 0, 0])),
        eth(MAC0, 0x86dd, &ipv6(0, host6, us6, &[17, 0, 1, 4, 0, 0, 0, 0])),
        eth(MAC0, 0x86dd, &ipv6(17, host6, [0x2001, 0xdb8, 2, 0, 0, 0, 0, 7], &[0, 1, 0, 2, 0, 8, 0, 0])),
    ]
}

/// The nodes of the files converted here (the others' files have their
/// own tests): all but `control-inject`, which reads no packet.
const MINE: [&str; 17] = [
    "ethernet-input",
    "arp-input",
    "ip4-lookup",
    "ip6-lookup",
    "ip4-local",
    "ip6-local",
    "ip4-icmp-error",
    "ip6-icmp-error",
    "ip4-glean",
    "ip6-glean",
    "ip4-punt-acl",
    "ip6-punt-acl",
    "linux-punt",
    "tap-input",
    "interface-output",
    "esp-encrypt",
    "esp-decrypt",
];

/// Each node of [`MINE`], fed directly with every template cut to every length, the
/// metadata random: nothing panics, and every packet is sent, kept by a
/// glean node, or dropped and counted; `ip4-lookup`, `ip6-lookup` and
/// `ethernet-input` count their cut packets under their own reasons.
#[test]
fn no_node_panics_on_cut_frames_and_every_drop_is_counted() {
    for linux in [false, true] {
        for direct in [true, false] {
            cut_frames_through_every_node(linux, direct);
        }
    }
}

fn cut_frames_through_every_node(linux: bool, direct: bool) {
    let (shared, mut graph, _fib) = router(linux);
    if !direct {
        let p = Params { fast_paths: FastPaths::NONE, ..(*shared.params.load()).clone() };
        shared.params.publish(p);
    }
    let info = graph.info().clone();
    let stats = WorkerStats::new(info.nodes.len(), info.errors.len(), 4);
    let mut pool = PacketPool::new(PoolConfig { frames: 4096, ..PoolConfig::default() }).expect("pool");
    let mut tracer = Tracer::new(TraceShared::new(), 0);
    let mut r = rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(linux) ^ u64::from(direct) << 1);
    let counter = |node: &str, name: &str| {
        let id = info.error_id(node, name).unwrap_or_else(|| panic!("{node}/{name}"));
        stats.errors.get(usize::from(id)).map_or(0, tern_engine::Counter::get)
    };
    // Packets the glean nodes hold (nothing resolves a neighbour here):
    // those they took in less those they dropped.
    let gleans = ["ip4-glean", "ip6-glean"].map(|g| (g, graph.node_id(g).expect("glean")));
    let held = || -> u64 {
        let mut n = 0;
        for (g, id) in gleans {
            n += stats.nodes.get(usize::from(id)).map_or(0, |c| c.packets.get());
            for (e, c) in info.errors.iter().zip(stats.errors.iter()) {
                if e.node == g && e.kind == tern_engine::ErrorKind::Drop {
                    n -= c.get();
                }
            }
        }
        n
    };
    let templates = templates();
    let mut now = 1_000_000_000u64;
    for node in MINE {
        let id = graph.node_id(node).expect("node");
        let free_before = pool.available();
        let held_before = held();
        let drops_before = stats.nodes.first().map_or(0, |c| c.packets.get());
        let (mut given, mut sent, mut short_l3) = (0u64, 0u64, 0u64);
        for t in &templates {
            for len in 0..=t.len() {
                // Some at the length, a few bytes flipped in others.
                let mut f = t.get(..len).unwrap_or_default().to_vec();
                if r().is_multiple_of(4)
                    && let Some(b) = f.get_mut((r() as usize) % len.max(1))
                {
                    *b ^= r() as u8;
                }
                let Some(p) = pool.alloc_from(&f) else { panic!("pool exhausted") };
                let m = pool.meta_mut(p);
                m.rx_if = (r() % 5) as u16;
                m.tx_if = (r() % 5) as u16;
                // The L3 offset a node before would have set, or one
                // claiming more than the frame holds.
                m.l3_off = match r() % 4 {
                    0 => (len + (r() % 64) as usize) as u16,
                    1 => 0,
                    _ => 14,
                };
                m.nh = (r() % 24) as u32;
                m.aux = (r() as u32) & 0xffff_0f0f;
                m.flags |= (r() as u16) & (flags::IPV6 | flags::L2_MULTI | flags::LOCAL_ORIGIN | flags::DECAP);
                m.vlan = if r().is_multiple_of(4) { 7 } else { 0 };
                let need = if node == "ip6-lookup" { 40 } else { 20 };
                short_l3 += u64::from(usize::from(m.l3_off) + need > len);
                graph.input_mut(id).push(p);
                given += 1;
            }
            let mut tx = vec![Vec::new(); 4];
            now += 1_000_000;
            let mut env = Env {
                pool: &mut pool,
                stats: &stats,
                tx: &mut tx,
                tracer: &mut tracer,
                now_ns: now,
                worker: 0,
                capture_node: None,
            };
            graph.run(&mut env);
            for q in &tx {
                sent += q.len() as u64;
                pool.free_all(q);
            }
        }
        let dropped = stats.nodes.first().map_or(0, |c| c.packets.get()) - drops_before;
        // Nodes may answer in place or make a packet (ICMP errors, ARP and
        // ND replies), never lose one.
        let kept = held() - held_before;
        assert_eq!(
            pool.available() + kept as usize,
            free_before,
            "{node}: a buffer leaked (linux {linux}, direct {direct})"
        );
        assert!(sent + dropped + kept >= given, "{node}: {given} given, {sent} sent, {dropped} dropped, {kept} held");
        match node {
            "ip4-lookup" | "ip6-lookup" => {
                assert!(short_l3 > 0);
                assert_eq!(counter(node, "truncated"), short_l3, "{node}: cut headers dropped as truncated");
            }
            "ethernet-input" => assert!(counter(node, "too-short") >= 14, "{node}: frames under 14 bytes"),
            _ => {}
        }
    }
}

/// The nodes a traced packet's record names, in order.
fn path(rec: &tern_engine::TraceRecord) -> Vec<&'static str> {
    rec.hops.iter().map(|h| h.node).collect()
}

/// A traced packet crosses the nodes its untraced twin crosses (the
/// graph's per-node packet counts tell which), with the fast paths on and
/// off; with them on, `ethernet-input` and the lookup say "direct path"
/// and the lookup names the destination and the next hop; off, no note
/// says so.
#[test]
fn a_traced_packet_takes_the_path_of_its_untraced_twin() {
    let v4 = eth(MAC0, 0x0800, &ipv4(17, [198, 18, 0, 1], &[0, 1, 0, 2, 0, 8, 0, 0]));
    let v6 = eth(
        MAC0,
        0x86dd,
        &ipv6(17, [0x2001, 0xdb8, 1, 0, 0, 0, 0, 2], [0x2001, 0xdb8, 0x18, 0, 0, 0, 0, 1], &[0, 1, 0, 2, 0, 8, 0, 0]),
    );
    let ecmp = eth(MAC0, 0x0800, &ipv4(17, [198, 19, 0, 1], &[0, 1, 0, 2, 0, 8, 0, 0]));
    for (frame, lookup, dst) in
        [(&v4, "ip4-lookup", "198.18.0.1"), (&v6, "ip6-lookup", "2001:db8:18::1"), (&ecmp, "ip4-lookup", "198.19.0.1")]
    {
        for direct in [true, false] {
            let (shared, graph, _fib) = router(false);
            if !direct {
                let p = Params { fast_paths: FastPaths::NONE, ..(*shared.params.load()).clone() };
                shared.params.publish(p);
            }
            let input = graph.node_id("ethernet-input").expect("input");
            let names: Vec<&str> = graph.info().nodes.iter().map(|n| n.name).collect();
            let pool = PacketPool::new(PoolConfig { frames: 256, ..PoolConfig::default() }).expect("pool");
            let mut b = Batches::new(graph, input, pool, 4);
            // The untraced twin alone: which nodes it crossed.
            let before: Vec<u64> = b.stats.nodes.iter().map(|c| c.packets.get()).collect();
            let sent = b.run([(frame.as_slice(), 0, 0)], 1_000);
            assert_eq!(sent.iter().map(Vec::len).sum::<usize>(), 1, "forwarded");
            let crossed: Vec<&str> = b
                .stats
                .nodes
                .iter()
                .zip(&before)
                .zip(&names)
                .filter(|((c, n0), _)| c.packets.get() > **n0)
                .map(|(_, &n)| n)
                .collect();
            // The traced one, between two untraced.
            b.trace.arm(1);
            let frames = (0..3).map(|i| (frame.as_slice(), 0, if i == 1 { flags::TRACED } else { 0 }));
            assert_eq!(b.run(frames, 2_000).iter().map(Vec::len).sum::<usize>(), 3);
            let recs = b.trace.take();
            let rec = recs.first().expect("a record");
            let mut traced = path(rec);
            traced.sort_unstable();
            let mut crossed = crossed;
            crossed.sort_unstable();
            assert_eq!(traced, crossed, "direct {direct}: the traced packet's nodes are its twin's");
            assert_eq!(rec.fate, "tx port 1");
            let notes =
                |node: &str| rec.hops.iter().find(|h| h.node == node).map(|h| h.notes.clone()).unwrap_or_default();
            let eth_direct = notes("ethernet-input").iter().any(|n| n == "direct path");
            assert_eq!(eth_direct, direct, "ethernet-input: {:?}", notes("ethernet-input"));
            let fib = notes(lookup);
            let fib = fib.iter().find(|n| n.starts_with("fib: ")).expect("the lookup's note");
            assert!(fib.starts_with(&format!("fib: {dst} -> nh ")), "{fib}");
            assert!(fib.contains("Unicast if 1 via "), "{fib}");
            // An ECMP group's member is picked per packet, never directly.
            let lookup_direct = fib.ends_with(", direct path");
            assert_eq!(lookup_direct, direct && dst != "198.19.0.1", "{fib}");
            if !direct {
                assert!(rec.hops.iter().flat_map(|h| &h.notes).all(|n| !n.contains("direct")), "{:?}", rec.hops);
            }
        }
    }
}

/// tern's own VRRP (issue 41): advertisements to 224.0.0.18 / ff02::12
/// reach the control thread's queue in standalone mode and not in Linux
/// mode; ARP requests and neighbour solicitations for a virtual address
/// are answered with its virtual MAC only while it is published.
#[test]
#[allow(clippy::indexing_slicing)]
fn vrrp_adverts_reach_the_control_thread_and_virtual_addresses_answer_with_the_virtual_mac() {
    let advert4 = {
        let mut ip = ipv4(112, [224, 0, 0, 18], &[0x31, 10, 100, 1, 0, 100, 0, 0, 10, 0, 1, 254]);
        ip[8] = 255;
        ip[10] = 0;
        ip[11] = 0;
        let c = !checksum::data(&ip[..20]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        eth([1, 0, 0x5e, 0, 0, 0x12], 0x0800, &ip)
    };
    let advert6 = eth(
        [0x33, 0x33, 0, 0, 0, 0x12],
        0x86dd,
        &ipv6(112, [0xfe80, 0, 0, 0, 0, 0, 0, 9], [0xff02, 0, 0, 0, 0, 0, 0, 0x12], &[0x31, 10, 100, 1, 0, 100, 0, 0]),
    );
    for linux in [false, true] {
        let (shared, graph, _fib) = router(linux);
        let input = graph.node_id("ethernet-input").expect("input");
        let pool = PacketPool::new(PoolConfig { frames: 256, ..PoolConfig::default() }).expect("pool");
        let mut b = Batches::new(graph, input, pool, 4);
        let sent = b.run([(advert4.as_slice(), 0, 0), (advert6.as_slice(), 0, 0)], 1_000);
        let got: Vec<_> = std::iter::from_fn(|| shared.control_rx.pop()).collect();
        if linux {
            // TAP exception path: the kernel's VRRP daemon gets them.
            assert!(got.is_empty(), "Linux mode: the kernel's");
            assert_eq!(sent[2].len(), 2, "both punted to lan's TAP (port 2): {sent:?}");
            continue;
        }
        assert_eq!(sent.iter().map(Vec::len).sum::<usize>(), 0, "nothing answered or forwarded: {sent:?}");
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].ifindex, got[0].packet.as_slice()), (0, &advert4[14..]));
        assert_eq!((got[1].ifindex, got[1].packet.as_slice()), (0, &advert6[14..]));
    }

    let vmac4 = [0, 0, 0x5e, 0, 1, 10];
    let vmac6 = [0, 0, 0x5e, 0, 2, 10];
    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
    arp.extend_from_slice(&PEER);
    arp.extend_from_slice(&[10, 0, 1, 2, 0, 0, 0, 0, 0, 0, 10, 0, 1, 254]);
    let arp = eth([0xff; 6], 0x0806, &arp);
    let target: std::net::Ipv6Addr = "2001:db8:1::254".parse().expect("a");
    let src = [0x2001, 0xdb8, 1, 0, 0, 0, 0, 2];
    let sol = [0xff02, 0, 0, 0, 0, 1, 0xff00, 0x0254];
    let mut ns = vec![135, 0, 0, 0, 0, 0, 0, 0];
    ns.extend_from_slice(&target.octets());
    ns.extend_from_slice(&[1, 1]);
    ns.extend_from_slice(&PEER);
    let pseudo = checksum::pseudo_header_v6(
        std::net::Ipv6Addr::from(src),
        std::net::Ipv6Addr::from(sol),
        tern_wire::IpProtocol::ICMPV6,
        ns.len() as u32,
    );
    let c = !checksum::add(pseudo, checksum::data(&ns));
    ns[2..4].copy_from_slice(&c.to_be_bytes());
    let ns = eth([0x33, 0x33, 0xff, 0, 0x02, 0x54], 0x86dd, &ipv6(58, src, sol, &ns));
    for published in [false, true] {
        let (shared, graph, _fib) = router(false);
        if published {
            let mut p = (*shared.params.load()).clone();
            p.virtual_addrs = vec![
                crate::state::VirtualAddr { ifindex: 0, addr: [10, 0, 1, 254].into(), mac: vmac4 },
                crate::state::VirtualAddr { ifindex: 0, addr: target.into(), mac: vmac6 },
            ];
            shared.params.publish(p);
        }
        let input = graph.node_id("ethernet-input").expect("input");
        let pool = PacketPool::new(PoolConfig { frames: 256, ..PoolConfig::default() }).expect("pool");
        let mut b = Batches::new(graph, input, pool, 4);
        let sent = b.run([(arp.as_slice(), 0, 0), (ns.as_slice(), 0, 0)], 1_000);
        let out: Vec<&Vec<u8>> = sent.iter().flatten().map(|(_, f)| f).collect();
        if !published {
            assert!(out.is_empty(), "not ours: no answer");
            continue;
        }
        assert_eq!(out.len(), 2, "{out:?}");
        let reply = out.iter().find(|f| f[12..14] == [8, 6]).expect("ARP reply");
        assert_eq!((&reply[..6], &reply[6..12]), (&PEER[..], &vmac4[..]), "Ethernet from the virtual MAC");
        assert_eq!(reply[20..22], [0, 2], "a reply");
        assert_eq!((&reply[22..28], &reply[28..32]), (&vmac4[..], &[10, 0, 1, 254][..]));
        let na = out.iter().find(|f| f[12..14] == [0x86, 0xdd]).expect("NA");
        assert_eq!(&na[6..12], &vmac6[..], "Ethernet from the virtual MAC");
        let icmp = &na[54..];
        assert_eq!(icmp[0], 136);
        assert_eq!(&icmp[8..24], &target.octets()[..]);
        assert_eq!((icmp[24], &icmp[26..32]), (2, &vmac6[..]), "target link-layer address: the virtual MAC");
    }
}
