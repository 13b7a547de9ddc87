//! `gre-encap` and `gre-input`: GRE tunnels (RFC 2784, keys per RFC 2890)
//! over IPv4 or IPv6, carrying IPv4 or IPv6.
//!
//! Encapsulation: the rewrite nodes send a packet whose egress interface is
//! a tunnel here with its inner L3 header at `Meta::l3_off` (TTL already
//! decremented, MTU already checked against the tunnel's MTU). This node
//! writes the GRE and outer IP headers in front of it, over the link-layer
//! header it arrived with and into the headroom (no copy of the payload),
//! and routes the result like a packet tern originated.
//!
//! Decapsulation: `ip4-local`/`ip6-local` send GRE packets addressed to us
//! here; a packet that belongs to a configured tunnel (outer source =
//! remote, outer destination = local, same key) loses its outer headers
//! and enters `ip4-input`/`ip6-input` as received on the tunnel interface.
//!
//! One node a file: [`encap`] and [`input`]; both count under
//! [`GreError`].

use crate::state::{GreTunnel, IfTable, Params};
use crate::util::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tern_engine::{Cx, ErrorDesc, NEXT_DROP, Node};
use tern_fib::{FibReader, NhId, NhKind};
use tern_packet::{PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::checksum;

tern_engine::errors! {
    /// `gre-encap` and `gre-input`'s counters.
    pub enum GreError {
        NotTunnel = drop("not-a-tunnel", "sent to encapsulation on a non-tunnel interface (a bug)"),
        Headroom = drop("no-headroom", "no room for the outer headers"),
        Recursion = drop("recursive-encapsulation", "the tunnel's outer packet routed into a tunnel again"),
        NoTunnel = drop("no-tunnel", "GRE packet matching no configured tunnel (endpoints, key)"),
        BadHeader = drop("bad-header", "GRE header truncated, version != 0 or reserved bits set"),
        BadCsum = drop("bad-checksum", "GRE checksum does not verify"),
        InnerProto = drop("unsupported-payload", "GRE payload other than IPv4 or IPv6"),
        TunnelDown = drop("tunnel-down", "the tunnel interface is down"),
        Encap = info("encapsulated", "packets encapsulated"),
        Decap = info("decapsulated", "packets decapsulated"),
        ToEsp = info("to-esp-encrypt", "packets of IPsec tunnels handed to esp-encrypt"),
    }
}

const GRE_C: u16 = 0x8000;
const GRE_K: u16 = 0x2000;
const GRE_S: u16 = 0x1000;

pub mod encap;
pub mod input;

pub use encap::{GreEncap, GreEncapNext};
pub use input::{GreInput, GreInputNext};

#[cfg(test)]
mod tests {
    use super::encap::{outer_v4_checksum, outer_v4_template, template_sum};
    use super::*;
    use crate::state::{IfKind, Iface, NO_IF, Shared, V4Net};
    use std::sync::Arc;
    use tern_engine::graph::Graph;
    use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
    use tern_packet::{PacketPool, PoolConfig};

    fn rng(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// The checksum from the template's sum is the one computed over the
    /// whole header, for random endpoints, TTLs, lengths and ids.
    #[test]
    fn template_checksum_is_the_recomputed_one() {
        let mut r = rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..200_000 {
            let (src, dst) = (Ipv4Addr::from(r() as u32), Ipv4Addr::from(r() as u32));
            let t = outer_v4_template(src, dst, r() as u8);
            let (len, ident) = (r() as u16, r() as u16);
            let mut h = t;
            put16(&mut h, 2, len);
            put16(&mut h, 4, ident);
            assert_eq!(outer_v4_checksum(template_sum(&t), len, ident), !checksum::data(&h), "{h:02x?}");
        }
        // The extremes of the sum.
        let t = outer_v4_template(Ipv4Addr::BROADCAST, Ipv4Addr::BROADCAST, 255);
        for (len, ident) in [(0, 0), (0xffff, 0xffff), (0xffff, 0), (1, 0xfffe)] {
            let mut h = t;
            put16(&mut h, 2, len);
            put16(&mut h, 4, ident);
            assert_eq!(outer_v4_checksum(template_sum(&t), len, ident), !checksum::data(&h));
        }
    }

    const MAC_LAN: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const MAC_WAN: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const MAC_PEER: [u8; 6] = [2, 0, 0, 0, 0, 3];

    fn iface(index: u16, name: &str, kind: IfKind, port: u16, mac: [u8; 6], addr: &str) -> Iface {
        Iface {
            v4: vec![V4Net { addr: addr.parse().expect("addr"), len: 24 }],
            ..Iface::new(index, name, kind, port, mac)
        }
    }

    /// A router: lan (port 0), wan (port 1, or VLAN 7 on it), gre0 to
    /// 10.0.2.2 over the wan; 198.18.0.0/15 routed into the tunnel.
    fn router(key: Option<u32>, vlan: bool, acl_out: bool) -> (Graph, tern_engine::NodeId, Shared) {
        let domain = tern_rcu::Domain::new();
        let (mut fib, reader) = tern_fib::new(FibConfig::default(), domain);
        let p = |s: &str| s.parse::<Prefix>().expect("prefix");
        let wan = if vlan { 3 } else { 1 };
        let gw: IpAddr = "10.0.2.2".parse().expect("gw");
        let report = fib.apply(vec![
            RouteOp::Add(
                Source::Connected,
                p("10.0.1.0/24"),
                RouteTarget::Connected { ifindex: 0 },
                RouteAttrs::default(),
            ),
            RouteOp::Add(
                Source::Connected,
                p("10.0.2.0/24"),
                RouteTarget::Connected { ifindex: wan },
                RouteAttrs::default(),
            ),
            RouteOp::Add(
                Source::Static,
                p("198.18.0.0/15"),
                RouteTarget::Connected { ifindex: 2 },
                RouteAttrs::default(),
            ),
            RouteOp::Add(
                Source::Static,
                p("2001:db8:18::/48"),
                RouteTarget::Connected { ifindex: 2 },
                RouteAttrs::default(),
            ),
        ]);
        assert_eq!(report.failed, 0);
        fib.set_neighbor(wan, gw, Some(MAC_PEER));
        // The tunnel's adjacency, stacked on the route to the remote.
        fib.tunnel_set(2, gw);
        let t = GreTunnel { local: "10.0.2.1".parse().expect("a"), remote: gw, key, ttl: 64 };
        let mut ifs = vec![
            iface(0, "lan", IfKind::Port, 0, MAC_LAN, "10.0.1.1"),
            iface(1, "wan", IfKind::Port, 1, MAC_WAN, if vlan { "10.0.3.1" } else { "10.0.2.1" }),
            iface(2, "gre0", IfKind::Gre(t), NO_IF, [2, 0x67, 0x72, 0x65, 0, 2], "192.168.255.1"),
        ];
        if let Some(g) = ifs.get_mut(2) {
            g.mtu = 1476;
        }
        if vlan {
            ifs.push(iface(3, "wan.7", IfKind::Vlan { parent: 1, vid: 7 }, 1, MAC_WAN, "10.0.2.1"));
        }
        let shared = Shared::new(IfTable::new(ifs.clone()), reader);
        if acl_out {
            crate::direct_tests::publish_rules(&shared, "action = \"drop\"\nproto = \"tcp\"");
            if let Some(w) = ifs.get_mut(usize::from(wan)) {
                w.acl_out = Some(0);
            }
            shared.ifaces.publish(IfTable::new(ifs));
        }
        let built = crate::build_graph(&shared, Arc::new(crossbeam_queue::ArrayQueue::new(4))).expect("graph");
        (built.graph, built.input, shared)
    }

    /// Frames of random lengths to random destinations in the tunnel's
    /// prefixes, UDP and TCP, DF set or not, a few of the tunnel's MTU (too
    /// big for the wan once encapsulated with a key), one in five IPv6.
    fn frames(seed: u64) -> Vec<Vec<u8>> {
        let mut r = rng(seed);
        (0..300)
            .map(|i| {
                let len = if i % 50 == 7 { 1490 } else { 42 + r() as usize % 600 };
                if i % 5 == 1 {
                    return frame6(len.max(62), &mut r);
                }
                let ip_len = len - 14;
                let [l0, l1] = (ip_len as u16).to_be_bytes();
                let df = if i % 3 == 0 { 0x40 } else { 0 };
                let (ttl, proto) = (2 + r() as u8 % 100, if i % 4 == 0 { 6 } else { 17 });
                let dst = [198, 18 + (r() % 2) as u8, r() as u8, r() as u8];
                let mut ip: Vec<u8> = [0x45, 0, l0, l1, 0, 0, df, 0, ttl, proto, 0, 0, 10, 0, 1, 2].into();
                ip.extend(dst);
                let c = !checksum::data(&ip);
                if let Some(w) = ip.get_mut(10..12) {
                    w.copy_from_slice(&c.to_be_bytes());
                }
                ip.extend((20..ip_len).map(|_| r() as u8));
                [&MAC_LAN[..], &[2, 0, 0, 0, 0, 0x10, 8, 0], &ip].concat()
            })
            .collect()
    }

    /// An IPv6 UDP frame of `len` bytes into the tunnel's IPv6 prefix.
    fn frame6(len: usize, r: &mut impl FnMut() -> u64) -> Vec<u8> {
        let [l0, l1] = ((len - 14 - 40) as u16).to_be_bytes();
        let mut ip: Vec<u8> = [0x60, 0, 0, 0, l0, l1, 17, 2 + r() as u8 % 100].into();
        ip.extend("2001:db8:1::2".parse::<std::net::Ipv6Addr>().expect("src").octets());
        ip.extend(std::net::Ipv6Addr::new(0x2001, 0xdb8, 0x18, r() as u16, 0, 0, 0, r() as u16).octets());
        ip.extend((14 + 40..len).map(|_| r() as u8));
        [&MAC_LAN[..], &[2, 0, 0, 0, 0, 0x10, 0x86, 0xdd], &ip].concat()
    }

    /// Frames sent per port, error counters, metadata of the sent packets,
    /// packets through `ip4-lookup` (inner and outer).
    type Outcome = (Vec<Vec<Vec<u8>>>, Vec<u64>, Vec<String>, u64);

    /// What came out of each port and the error counters, after running
    /// `frames` through the graph in batches from a pool with `headroom`
    /// bytes in front of each frame, with GRE's direct encapsulation on or
    /// off (`direct`: `FastPaths::gre_direct`, published as the router
    /// does; off, every encapsulation takes the second pass through
    /// `ip4-lookup` and `ip4-rewrite`), packet `i` marked traced when
    /// `traced(i)`.
    fn run(
        key: Option<u32>,
        (vlan, acl_out): (bool, bool),
        headroom: u16,
        direct: bool,
        traced: fn(usize) -> bool,
    ) -> Outcome {
        let (graph, input, shared) = router(key, vlan, acl_out);
        // Off, the outer packets pass ip4-rewrite: without its output rule
        // set shortcut, so that they reach ip4-acl-out as direct ones do.
        let fast_paths = crate::state::FastPaths { gre_direct: direct, acl_shortcut: direct, direct: true };
        shared.params.publish(Params { fast_paths, ..Params::default() });
        let pool = PacketPool::new(PoolConfig { frames: 1024, headroom, ..PoolConfig::default() }).expect("pool");
        let lookup = graph.info().node_id("ip4-lookup").expect("ip4-lookup");
        let mut b = crate::direct_tests::Batches::new(graph, input, pool, 2);
        let mut out = vec![Vec::new(), Vec::new()];
        let mut metas = Vec::new();
        for (c, chunk) in frames(0x9e37_79b9_7f4a_7c15).chunks(100).enumerate() {
            let flags_of = |i: usize| if traced(c * 100 + i) { flags::TRACED } else { 0 };
            let sent = b.run(chunk.iter().enumerate().map(|(i, f)| (f.as_slice(), 0, flags_of(i))), 0);
            for (port, q) in sent.into_iter().enumerate() {
                for (m, data) in q {
                    metas.push(format!(
                        "port {port} tx_if {} nh {} l3 {} vlan {} flags {:#x}",
                        m.tx_if,
                        m.nh,
                        m.l3_off,
                        m.vlan,
                        m.flags & !flags::TRACED
                    ));
                    if let Some(q) = out.get_mut(port) {
                        q.push(data);
                    }
                }
            }
        }
        let errors = b.stats.errors.iter().map(|c| c.get()).collect();
        let lookups = b.stats.nodes.get(usize::from(lookup)).map_or(0, |n| n.packets.get());
        (out, errors, metas, lookups)
    }

    /// A traced packet into the tunnel says which path it took: "direct"
    /// with the FIB's stacked adjacency, "second pass: gre_direct off" and
    /// a second `ip4-lookup` with the switch off.
    #[test]
    fn traces_say_which_encapsulation_packets_take() {
        let (graph, input, shared) = router(None, false, false);
        let pool = PacketPool::new(PoolConfig { frames: 256, ..PoolConfig::default() }).expect("pool");
        let mut b = crate::direct_tests::Batches::new(graph, input, pool, 2);
        let f = frames(7).into_iter().find(|f| f.get(12..14) == Some(&[8, 0][..])).expect("an IPv4 frame");
        let traced = |b: &mut crate::direct_tests::Batches, direct: bool| {
            let fast_paths = crate::state::FastPaths { gre_direct: direct, ..crate::state::FastPaths::ALL };
            shared.params.publish(Params { fast_paths, ..Params::default() });
            b.trace.clear();
            b.trace.arm(1);
            let frames = (0..4).map(|i| (f.as_slice(), 0, if i == 2 { flags::TRACED } else { 0 }));
            assert_eq!(b.run(frames, 0).get(1).map(Vec::len), Some(4), "all encapsulated and sent");
            let rec = b.trace.take().into_iter().next().expect("record");
            let encap = rec.hops.iter().find(|h| h.node == "gre-encap").expect("gre-encap hop").clone();
            let lookups = rec.hops.iter().filter(|h| h.node == "ip4-lookup").count();
            (encap.notes, encap.next, lookups)
        };
        let (notes, next, lookups) = traced(&mut b, true);
        assert!(notes.iter().any(|n| n.starts_with("direct")), "{notes:?}");
        assert_eq!((next, lookups), ("interface-output", 1));
        let (notes, next, lookups) = traced(&mut b, false);
        assert_eq!(notes, ["second pass: gre_direct off"]);
        assert_eq!((next, lookups), ("ip4-lookup", 2));
    }

    /// The encapsulation without a second pass through the outer route
    /// gives what the second pass gives: the same frames (link-layer,
    /// outer, GRE headers, identification sequence), metadata and
    /// counters, for IPv4 and IPv6 inside tunnels with and without a key,
    /// out of a plain and a VLAN interface, with and without an output
    /// rule set, with every packet untraced or every seventh traced
    /// (a traced packet takes the direct encapsulation as the others do,
    /// in their order), and with a headroom too small for the
    /// direct encapsulation (the second pass then drops the packets for
    /// want of room as it did before).
    #[test]
    fn direct_encapsulation_is_the_second_pass() {
        let default_headroom = PoolConfig::default().headroom;
        type Traced = fn(usize) -> bool;
        let patterns: [(&str, Traced); 2] = [("none", |_| false), ("every 7th", |i| i % 7 == 3)];
        for key in [None, Some(0x0102_0304)] {
            for vlan in [false, true] {
                for acl_out in [false, true] {
                    for headroom in [default_headroom, 20] {
                        let slow = run(key, (vlan, acl_out), headroom, false, |_| false);
                        for (name, traced) in patterns {
                            let fast = run(key, (vlan, acl_out), headroom, true, traced);
                            let case =
                                format!("key {key:?} vlan {vlan} acl_out {acl_out} headroom {headroom} traced {name}");
                            let (lan, wan) = match &fast.0[..] {
                                [lan, wan] => (lan, wan),
                                _ => panic!("{case}: two ports"),
                            };
                            if headroom == default_headroom {
                                assert!(wan.len() > 200, "{case}: most encapsulated and sent");
                            } else {
                                assert!(wan.is_empty(), "{case}: no room for the headers");
                            }
                            assert!(lan.is_empty(), "{case}");
                            assert_eq!(fast.0, slow.0, "{case}: frames");
                            assert_eq!(fast.1, slow.1, "{case}: counters");
                            assert_eq!(fast.2, slow.2, "{case}: metadata");
                            // The outer packets the direct encapsulation
                            // took skipped the second pass.
                            let second_passes_saved = slow.3 - fast.3;
                            if headroom == default_headroom {
                                assert!(second_passes_saved > 200, "{case}: {second_passes_saved} direct");
                            } else {
                                assert_eq!(second_passes_saved, 0, "{case}");
                            }
                            for f in wan {
                                let l2 = if vlan { 18 } else { 14 };
                                let outer = f.get(l2..l2 + 20).expect("outer header");
                                assert_eq!(checksum::data(outer), 0xffff, "{case}: outer checksum");
                                assert_eq!(f.get(0..6), Some(&MAC_PEER[..]));
                                let proto = be16(f, l2 + 22);
                                let inner = f.get(l2 + 20 + if key.is_some() { 8 } else { 4 }).expect("inner") >> 4;
                                assert_eq!((proto, inner), if inner == 6 { (ETH_P_IPV6, 6) } else { (ETH_P_IPV4, 4) });
                            }
                            if headroom == default_headroom {
                                let v6 = wan.iter().filter(|f| be16(f, if vlan { 18 } else { 14 } + 22) == ETH_P_IPV6);
                                assert!(v6.count() > 40, "{case}: IPv6 inside");
                            }
                        }
                    }
                }
            }
        }
    }
}
