//! IKE's datagrams through the whole graph (standalone mode): UDP 500
//! and UDP 4500 with the non-ESP marker for the router land on
//! `Shared::ike_rx` with `Params::ike_local` on, and are answered or
//! dropped as before with it off; `ip-inject` sends what the IKE service
//! built through the lookups, neighbour resolution included.

use crate::direct_tests::Batches;
use crate::ike::udp_packet;
use crate::state::{IfKind, IfTable, Iface, IkeDatagram, Params, Shared, V4Net, V6Net};
use std::net::SocketAddr;
use std::sync::Arc;
use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
use tern_packet::{PacketPool, PoolConfig};
use tern_wire::{IpProtocol, checksum};

const MAC_LAN: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_WAN: [u8; 6] = [2, 0, 0, 0, 0, 2];
const MAC_HOST: [u8; 6] = [2, 0, 0, 0, 0, 4];
const LAN: u16 = 0;
const WAN: u16 = 1;

struct Rig {
    b: Batches,
    info: Arc<tern_engine::GraphInfo>,
    shared: Shared,
    _fib: tern_fib::FibWriter,
}

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

/// lan 10.0.1.1/24, 2001:db8:1::1/64 (port 0; the host .2 resolved);
/// wan 10.0.2.1/24, 2001:db8:2::1/64 (port 1; nothing resolved).
fn rig(params: Params) -> Rig {
    let (mut fib, reader) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
    let p = |s: &str| s.parse::<Prefix>().expect("prefix");
    let local = |pfx: &str, ifindex| {
        RouteOp::Add(Source::Connected, p(pfx), RouteTarget::Local { ifindex }, RouteAttrs::default())
    };
    let conn = |pfx: &str, ifindex| {
        RouteOp::Add(Source::Connected, p(pfx), RouteTarget::Connected { ifindex }, RouteAttrs::default())
    };
    let report = fib.apply(vec![
        local("10.0.1.1/32", LAN),
        local("10.0.2.1/32", WAN),
        local("2001:db8:1::1/128", LAN),
        local("2001:db8:2::1/128", WAN),
        conn("10.0.1.0/24", LAN),
        conn("10.0.2.0/24", WAN),
        conn("2001:db8:1::/64", LAN),
        conn("2001:db8:2::/64", WAN),
    ]);
    assert_eq!(report.failed, 0);
    fib.set_neighbor(LAN, "10.0.1.2".parse().expect("a"), Some(MAC_HOST));
    fib.set_neighbor(LAN, "2001:db8:1::2".parse().expect("a"), Some(MAC_HOST));
    let port = |index: u16, name: &str, mac, a4: &str, a6: &str| Iface {
        v4: vec![V4Net { addr: a4.parse().expect("a"), len: 24 }],
        v6: vec![V6Net { addr: a6.parse().expect("a"), len: 64 }],
        ..Iface::new(index, name, IfKind::Port, index, mac)
    };
    let ifs = vec![
        port(LAN, "lan", MAC_LAN, "10.0.1.1", "2001:db8:1::1"),
        port(WAN, "wan", MAC_WAN, "10.0.2.1", "2001:db8:2::1"),
    ];
    let shared = Shared::new(IfTable::new(ifs), reader);
    shared.params.publish(params);
    let built = crate::build_graph(&shared, Arc::new(crossbeam_queue::ArrayQueue::new(4))).expect("graph");
    let info = built.graph.info().clone();
    let pool = PacketPool::new(PoolConfig { frames: 512, ..PoolConfig::default() }).expect("pool");
    Rig { b: Batches::new(built.graph, built.input, pool, 2), info, shared, _fib: fib }
}

fn ike_on() -> Params {
    Params { ike_local: true, ..Params::default() }
}

impl Rig {
    fn counter(&self, node: &str, name: &str) -> u64 {
        let id = self.info.error_id(node, name).unwrap_or_else(|| panic!("{node}/{name}"));
        self.b.stats.errors.get(usize::from(id)).map_or(0, |c| c.get())
    }

    /// Every counter that is not zero, as "node/name".
    fn nonzero(&self) -> Vec<String> {
        self.info
            .errors
            .iter()
            .zip(self.b.stats.errors.iter())
            .filter(|(_, c)| c.get() != 0)
            .map(|(e, c)| format!("{}/{} {}", e.node, e.name, c.get()))
            .collect()
    }

    /// Frames from the host on lan, one batch: what each port sent.
    fn run(&mut self, frames: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
        self.b
            .run(frames.iter().map(|f| (f.as_slice(), LAN, 0)), 0)
            .into_iter()
            .map(|q| q.into_iter().map(|(_, d)| d).collect())
            .collect()
    }

    fn take_ike(&self) -> Vec<IkeDatagram> {
        std::iter::from_fn(|| self.shared.ike_rx.pop()).collect()
    }
}

/// A frame from the host on lan: `payload` in UDP from `from` to `to`.
fn udp_frame(from: &str, to: &str, payload: &[u8]) -> Vec<u8> {
    let ip = udp_packet(sa(from), sa(to), payload, 1).expect("packet");
    let et: [u8; 2] = if ip[0] >> 4 == 6 { [0x86, 0xdd] } else { [8, 0] };
    [&MAC_LAN[..], &MAC_HOST[..], &et[..], &ip].concat()
}

const IKE_MSG: &[u8] = b"\x11\x22\x33\x44\x55\x66\x77\x88 an IKE_SA_INIT";

fn marked(msg: &[u8]) -> Vec<u8> {
    [&[0u8; 4][..], msg].concat()
}

#[test]
fn ike_off_udp_500_is_port_unreachable_and_4500_not_handled() {
    let mut r = rig(Params::default());
    let sent = r.run(&[
        udp_frame("10.0.1.2:500", "10.0.1.1:500", IKE_MSG),
        udp_frame("[2001:db8:1::2]:500", "[2001:db8:1::1]:500", IKE_MSG),
        udp_frame("10.0.1.2:4500", "10.0.1.1:4500", &marked(IKE_MSG)),
    ]);
    assert!(r.take_ike().is_empty(), "no IKE service: nothing queued");
    assert_eq!(r.counter("ip4-local", "udp-port-unreachable"), 1);
    assert_eq!(r.counter("ip6-local", "udp-port-unreachable"), 1);
    assert_eq!(r.counter("esp-decrypt", "ike-not-handled"), 1);
    assert_eq!(r.counter("ip4-local", "ike-to-control"), 0);
    // The two ICMP errors went back to the host.
    assert_eq!(sent[LAN as usize].len(), 2, "{:?}", r.nonzero());
}

#[test]
fn ike_on_hands_500_and_marked_4500_to_the_queue() {
    let mut r = rig(ike_on());
    let sent = r.run(&[
        udp_frame("10.0.1.2:500", "10.0.1.1:500", IKE_MSG),
        udp_frame("[2001:db8:1::2]:501", "[2001:db8:1::1]:500", IKE_MSG),
        udp_frame("10.0.1.2:31000", "10.0.2.1:4500", &marked(IKE_MSG)),
        udp_frame("[2001:db8:1::2]:4500", "[2001:db8:1::1]:4500", &marked(b"six")),
        // A NAT keep-alive, ESP in UDP on no SA, and UDP to another port.
        udp_frame("10.0.1.2:4500", "10.0.1.1:4500", &[0xff]),
        udp_frame("10.0.1.2:4500", "10.0.1.1:4500", &[0, 0, 0x10, 0, 0, 0, 0, 1, 9, 9, 9, 9]),
        udp_frame("10.0.1.2:53", "10.0.1.1:53", b"dns"),
    ]);
    let got = r.take_ike();
    let dg = |local: &str, remote: &str, m: &[u8]| IkeDatagram {
        local: sa(local),
        remote: sa(remote),
        ifindex: LAN,
        message: m.to_vec(),
    };
    // ip4-local and ip6-local hand over 500 first, esp-decrypt 4500 after.
    assert_eq!(
        got,
        vec![
            dg("10.0.1.1:500", "10.0.1.2:500", IKE_MSG),
            dg("[2001:db8:1::1]:500", "[2001:db8:1::2]:501", IKE_MSG),
            dg("10.0.2.1:4500", "10.0.1.2:31000", IKE_MSG),
            dg("[2001:db8:1::1]:4500", "[2001:db8:1::2]:4500", b"six"),
        ]
    );
    assert_eq!(r.counter("ip4-local", "ike-to-control"), 1);
    assert_eq!(r.counter("ip6-local", "ike-to-control"), 1);
    assert_eq!(r.counter("esp-decrypt", "ike-to-control"), 2);
    assert_eq!(r.counter("esp-decrypt", "ike-not-handled"), 0);
    assert_eq!(r.counter("esp-decrypt", "nat-keepalive"), 1);
    assert_eq!(r.counter("esp-decrypt", "unknown-spi"), 1, "ESP in UDP still goes to the SAs");
    assert_eq!(r.counter("ip4-local", "udp-port-unreachable"), 1, "only port 53's");
    assert_eq!(sent[LAN as usize].len(), 1, "only the ICMP error for port 53: {:?}", r.nonzero());
}

#[test]
fn a_full_queue_is_counted() {
    let mut r = rig(ike_on());
    let filler = IkeDatagram { local: sa("10.0.1.1:500"), remote: sa("10.0.1.9:500"), ifindex: 0, message: vec![] };
    while r.shared.ike_rx.push(filler.clone()).is_ok() {}
    r.run(&[
        udp_frame("10.0.1.2:500", "10.0.1.1:500", IKE_MSG),
        udp_frame("[2001:db8:1::2]:500", "[2001:db8:1::1]:500", IKE_MSG),
        udp_frame("10.0.1.2:4500", "10.0.1.1:4500", &marked(IKE_MSG)),
    ]);
    assert_eq!(r.counter("ip4-local", "ike-queue-full"), 1);
    assert_eq!(r.counter("ip6-local", "ike-queue-full"), 1);
    assert_eq!(r.counter("esp-decrypt", "ike-queue-full"), 1);
    assert!(r.take_ike().iter().all(|d| *d == filler), "nothing but the filler");
}

#[test]
fn linux_mode_leaves_ike_to_the_kernel_even_with_ike_local() {
    let mut r = rig(Params { linux_owns_local: true, ..ike_on() });
    r.run(&[
        udp_frame("10.0.1.2:500", "10.0.1.1:500", IKE_MSG),
        udp_frame("[2001:db8:1::2]:500", "[2001:db8:1::1]:500", IKE_MSG),
        udp_frame("10.0.1.2:4500", "10.0.1.1:4500", &marked(IKE_MSG)),
    ]);
    assert!(r.take_ike().is_empty());
    assert_eq!(r.counter("ip4-local", "left-to-linux"), 2);
    assert_eq!(r.counter("ip6-local", "left-to-linux"), 1);
}

/// The IPv4/IPv6 packet of an Ethernet frame, its UDP checksum verified.
fn udp_of(frame: &[u8]) -> (&[u8], &[u8]) {
    let ip = &frame[14..];
    let (h, udp) = if ip[0] >> 4 == 4 {
        let hdr: &[u8; 20] = ip[..20].try_into().expect("20");
        assert_eq!(checksum::header20(hdr), 0xffff, "IPv4 header checksum");
        let ph = checksum::pseudo_header_v4(
            <[u8; 4]>::try_from(&ip[12..16]).expect("4").into(),
            <[u8; 4]>::try_from(&ip[16..20]).expect("4").into(),
            IpProtocol::UDP,
            (ip.len() - 20) as u16,
        );
        assert_eq!(checksum::add(ph, checksum::data(&ip[20..])), 0xffff, "UDP checksum");
        ip.split_at(20)
    } else {
        let ph = checksum::pseudo_header_v6(
            <[u8; 16]>::try_from(&ip[8..24]).expect("16").into(),
            <[u8; 16]>::try_from(&ip[24..40]).expect("16").into(),
            IpProtocol::UDP,
            (ip.len() - 40) as u32,
        );
        assert_eq!(checksum::add(ph, checksum::data(&ip[40..])), 0xffff, "UDP checksum");
        ip.split_at(40)
    };
    (h, udp)
}

#[test]
fn ip_inject_routes_what_the_ike_service_sends() {
    let mut r = rig(ike_on());
    let v4 = udp_packet(sa("10.0.1.1:500"), sa("10.0.1.2:500"), IKE_MSG, 9).expect("v4");
    let v6 = udp_packet(sa("[2001:db8:1::1]:4500"), sa("[2001:db8:1::2]:4500"), &marked(b"reply"), 0).expect("v6");
    // To the unresolved wan peer: the packet waits, an ARP request leaves.
    let far = udp_packet(sa("10.0.2.1:500"), sa("10.0.2.7:500"), IKE_MSG, 10).expect("v4");
    for p in [&v4, &v6, &far] {
        assert!(r.shared.ip_inject.push(p.clone()).is_ok());
    }
    r.b.poll(1);
    let sent = r.run(&[]);
    assert_eq!(r.counter("ip-inject", "injected"), 3, "{:?}", r.nonzero());
    assert!(r.shared.ip_inject.is_empty());
    let lan = &sent[LAN as usize];
    assert_eq!(lan.len(), 2, "{:?}", r.nonzero());
    for (frame, want) in lan.iter().zip([&v4, &v6]) {
        assert_eq!(&frame[..6], &MAC_HOST, "to the resolved host");
        assert_eq!(&frame[6..12], &MAC_LAN);
        assert_eq!(&frame[14..], &want[..], "sent as built: TTL kept, nothing rewritten");
        let (_, udp) = udp_of(frame);
        assert!(udp.ends_with(b"reply") || udp.ends_with(IKE_MSG));
    }
    let wan = &sent[WAN as usize];
    assert_eq!(wan.len(), 1, "one ARP request: {:?}", r.nonzero());
    assert_eq!(&wan[0][12..14], &[8, 6], "ARP");
    assert_eq!(&wan[0][38..42], &[10, 0, 2, 7], "asks for the IKE peer");
}

#[test]
fn ip_inject_drops_what_is_not_ip() {
    let mut r = rig(ike_on());
    assert!(r.shared.ip_inject.push(vec![0x20, 1, 2, 3]).is_ok());
    assert!(r.shared.ip_inject.push(Vec::new()).is_ok());
    r.b.poll(1);
    let sent = r.run(&[]);
    assert_eq!(r.counter("ip-inject", "bad-packet"), 2);
    assert_eq!(r.counter("ip-inject", "injected"), 0);
    assert!(sent.iter().all(Vec::is_empty));
}

#[test]
fn the_inject_queue_asks_for_one_wake_up_per_drain() {
    let r = rig(ike_on());
    let q = &r.shared.ip_inject;
    let pkt = || udp_packet(sa("10.0.1.1:500"), sa("10.0.1.2:500"), b"x", 0).expect("p");
    assert_eq!(q.push(pkt()), Ok(true), "the first packet wakes a worker");
    assert_eq!(q.push(pkt()), Ok(false), "the next ones need not");
    assert!(q.start(), "a worker looks");
    assert_eq!(q.push(pkt()), Ok(true), "after it looked, the next push wakes again");
}

#[test]
fn ip_inject_without_a_route_is_dropped_not_answered() {
    let mut r = rig(ike_on());
    let lost = udp_packet(sa("10.0.1.1:500"), sa("192.0.2.9:500"), IKE_MSG, 1).expect("v4");
    let lost6 = udp_packet(sa("[2001:db8:1::1]:500"), sa("[2001:db8:99::9]:500"), IKE_MSG, 1).expect("v6");
    assert!(r.shared.ip_inject.push(lost).is_ok());
    assert!(r.shared.ip_inject.push(lost6).is_ok());
    r.b.poll(1);
    let sent = r.run(&[]);
    assert_eq!(r.counter("ip-inject", "injected"), 2);
    assert!(sent.iter().all(Vec::is_empty), "nothing leaves: {sent:?} {:?}", r.nonzero());
    assert!(r.take_ike().is_empty(), "no error came back to the IKE queue");
    assert_eq!(r.counter("ip4-lookup", "no-route"), 1);
    assert_eq!(r.counter("ip6-lookup", "no-route"), 1);
    // The IPv4 error tern sends itself ends in ip4-local, as an echo
    // reply's would: no loop.
    assert_eq!(r.counter("ip4-local", "icmp-consumed"), 1, "{:?}", r.nonzero());
}

/// IKE that arrives in fragments (IKE_AUTH with certificates from a peer
/// without RFC 7383) is reassembled before it is handed over: one that
/// fits a buffer through `ip4-local`/`ip6-local`, one larger than a
/// buffer (4,000 bytes) straight from `ip4-reassembly`/`ip6-reassembly`;
/// other UDP that large is `too-big-for-buffer`.
#[test]
fn fragmented_ike_is_reassembled_and_handed_over() {
    use crate::reass::testing::fragment;
    let mut r = rig(ike_on());
    let big: Vec<u8> = (0..4000u32).map(|i| (i * 13) as u8).collect();
    let small = &big[..1000];
    let mut frames = Vec::new();
    frames.extend(fragment(&udp_frame("10.0.1.2:500", "10.0.1.1:500", small), &[504], 1));
    let mut f = fragment(&udp_frame("10.0.1.2:4500", "10.0.1.1:4500", &marked(&big)), &[1400, 2800], 2);
    f.reverse();
    frames.extend(f);
    frames.extend(fragment(&udp_frame("[2001:db8:1::2]:500", "[2001:db8:1::1]:500", &big), &[1400, 2800], 3));
    frames.extend(fragment(&udp_frame("10.0.1.2:53", "10.0.1.1:53", &big), &[1400, 2800], 4));
    r.run(&frames);
    let got = r.take_ike();
    // (In the order the nodes ran: those too big for a buffer first.)
    let mut msgs: Vec<(SocketAddr, usize)> = got.iter().map(|d| (d.local, d.message.len())).collect();
    msgs.sort();
    assert_eq!(
        msgs,
        [(sa("10.0.1.1:500"), 1000), (sa("10.0.1.1:4500"), 4000), (sa("[2001:db8:1::1]:500"), 4000)],
        "{:?}",
        r.nonzero()
    );
    assert!(got.iter().all(|d| big.starts_with(&d.message)), "the messages whole");
    assert_eq!(r.counter("ip4-local", "ike-to-control"), 1);
    assert_eq!(r.counter("ip4-reassembly", "ike-to-control"), 1);
    assert_eq!(r.counter("ip6-reassembly", "ike-to-control"), 1);
    assert_eq!(r.counter("ip4-reassembly", "reassembled"), 5);
    assert_eq!(r.counter("ip6-reassembly", "reassembled"), 3);
    assert_eq!(r.counter("ip4-reassembly", "too-big-for-buffer"), 3);
}
