//! `esp-encrypt` and `esp-decrypt` through the whole graph: a router with
//! a lan, a wan and two IPsec tunnels over it (IPv4 outside with plain
//! ESP, IPv6 outside with ESP in UDP), its peer's SAs built from the same
//! configurations to decrypt what tern sends and encrypt what it receives.

use super::*;
use crate::direct_tests::Batches;
use crate::state::{IfKind, Iface, IpsecTunnel, NO_IF, Shared, V4Net, V6Net};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Instant;
use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
use tern_ipsec::{Cipher, Integ, Key, Lifetime, SaConfig, SaDb, UdpEncap};
use tern_packet::{PacketPool, PoolConfig};

const MAC_LAN: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_WAN: [u8; 6] = [2, 0, 0, 0, 0, 2];
const MAC_PEER: [u8; 6] = [2, 0, 0, 0, 0, 3];
const MAC_HOST: [u8; 6] = [2, 0, 0, 0, 0, 4];
const LAN: u16 = 0;
const WAN: u16 = 1;
const T4: u16 = 2;
const T6: u16 = 3;
/// The multipoint (remote access) tunnel `ra0`.
const T_RA: u16 = 4;

fn v4(s: &str) -> Ipv4Addr {
    s.parse().expect("v4")
}
fn v6(s: &str) -> Ipv6Addr {
    s.parse().expect("v6")
}

/// SA `id`: the keys follow from the id, so tern and its peer build the
/// same SA from it.
fn sa_cfg(id: u32, cipher: Cipher, integ: Integ, udp: bool) -> SaConfig {
    let key = |n: usize, s: u8| Key::new((0..n).map(|i| (i as u8).wrapping_mul(7) ^ s).collect());
    SaConfig {
        id,
        spi: 0x1000 * id,
        cipher,
        integ,
        key: key(cipher.key_len(), id as u8),
        integ_key: key(integ.key_len(), 0x80 | id as u8),
        esn: id.is_multiple_of(2),
        replay_window: 64,
        udp_encap: udp.then(UdpEncap::default),
        soft: Lifetime::default(),
        hard: Lifetime::default(),
    }
}

/// Tunnel SAs: 1 out / 2 in on `ipsec4` (GCM, plain ESP), 3 out / 4 in on
/// `ipsec6` (CBC + HMAC-SHA-256, ESP in UDP).
fn sa_cfgs() -> Vec<SaConfig> {
    vec![
        sa_cfg(1, Cipher::Aes128Gcm, Integ::None, false),
        sa_cfg(2, Cipher::Aes256Gcm, Integ::None, false),
        sa_cfg(3, Cipher::Aes128Cbc, Integ::HmacSha256_128, true),
        sa_cfg(4, Cipher::Aes256Cbc, Integ::HmacSha1_96, true),
    ]
}

/// The peer's copy of SA `id`.
fn peer_sa(id: u32) -> tern_ipsec::Sa {
    let cfg = sa_cfgs().into_iter().find(|c| c.id == id).expect("sa");
    tern_ipsec::Sa::new(cfg, 1, Instant::now()).expect("sa")
}

struct Rig {
    fib: tern_fib::FibWriter,
    b: Batches,
    info: Arc<tern_engine::GraphInfo>,
    shared: Shared,
    db: SaDb,
}

/// The router: lan 10.0.1.1/24 and 2001:db8:1::1/64 (port 0), wan
/// 10.0.2.1/24 and 2001:db8:2::1/64 (port 1); ipsec4 to 10.0.2.2 carries 198.18.0.0/15
/// and 2001:db8:18::/48, ipsec6 to 2001:db8:2::2 carries 198.20.0.0/16;
/// 10.0.2.200/32 routed into ipsec4 itself (recursion); headroom and MTU
/// as given.
fn rig(headroom: u16, tunnel_mtu: u16, sas: Vec<SaConfig>) -> Rig {
    let domain = tern_rcu::Domain::new();
    let (mut fib, reader) = tern_fib::new(FibConfig::default(), domain);
    let p = |s: &str| s.parse::<Prefix>().expect("prefix");
    let conn = |pfx: &str, ifindex: u16| {
        RouteOp::Add(Source::Connected, p(pfx), RouteTarget::Connected { ifindex }, RouteAttrs::default())
    };
    let stat = |pfx: &str, ifindex: u16| {
        RouteOp::Add(Source::Static, p(pfx), RouteTarget::Connected { ifindex }, RouteAttrs::default())
    };
    let report = fib.apply(vec![
        RouteOp::Add(Source::Connected, p("10.0.1.1/32"), RouteTarget::Local { ifindex: LAN }, RouteAttrs::default()),
        RouteOp::Add(Source::Connected, p("10.0.2.1/32"), RouteTarget::Local { ifindex: WAN }, RouteAttrs::default()),
        RouteOp::Add(
            Source::Connected,
            p("2001:db8:1::1/128"),
            RouteTarget::Local { ifindex: LAN },
            RouteAttrs::default(),
        ),
        RouteOp::Add(
            Source::Connected,
            p("2001:db8:2::1/128"),
            RouteTarget::Local { ifindex: WAN },
            RouteAttrs::default(),
        ),
        conn("10.0.1.0/24", LAN),
        conn("10.0.2.0/24", WAN),
        conn("2001:db8:1::/64", LAN),
        conn("2001:db8:2::/64", WAN),
        stat("198.18.0.0/15", T4),
        stat("2001:db8:18::/48", T4),
        stat("198.20.0.0/16", T6),
        stat("10.0.2.200/32", T4),
    ]);
    assert_eq!(report.failed, 0);
    fib.set_neighbor(WAN, "10.0.2.2".parse().expect("a"), Some(MAC_PEER));
    fib.set_neighbor(WAN, "2001:db8:2::2".parse().expect("a"), Some(MAC_PEER));
    fib.set_neighbor(LAN, "10.0.1.2".parse().expect("a"), Some(MAC_HOST));
    fib.set_neighbor(LAN, "2001:db8:1::2".parse().expect("a"), Some(MAC_HOST));
    fib.tunnel_set(T4, "10.0.2.2".parse().expect("a"));
    fib.tunnel_set(T6, "2001:db8:2::2".parse().expect("a"));
    let port = |index: u16, name: &str, mac, a4: &str, a6: &str| Iface {
        v4: vec![V4Net { addr: v4(a4), len: 24 }],
        v6: vec![V6Net { addr: v6(a6), len: 64 }],
        ..Iface::new(index, name, IfKind::Port, index, mac)
    };
    let tunnel = |index: u16, name: &str, local: &str, remote: &str, out: u32, inb: u32| Iface {
        mtu: tunnel_mtu,
        v4: vec![V4Net { addr: Ipv4Addr::new(192, 168, 255, index as u8), len: 32 }],
        ..Iface::new(
            index,
            name,
            IfKind::Ipsec(IpsecTunnel {
                local: local.parse().expect("a"),
                remote: remote.parse().expect("a"),
                sa_out: out,
                sa_in: vec![inb],
                ttl: 64,
            }),
            NO_IF,
            [2, 0x65, 0x73, 0x70, 0, index as u8],
        )
    };
    let ifs = vec![
        port(LAN, "lan", MAC_LAN, "10.0.1.1", "2001:db8:1::1"),
        port(WAN, "wan", MAC_WAN, "10.0.2.1", "2001:db8:2::1"),
        tunnel(T4, "ipsec4", "10.0.2.1", "10.0.2.2", 1, 2),
        tunnel(T6, "ipsec6", "2001:db8:2::1", "2001:db8:2::2", 3, 4),
        Iface {
            v4: vec![V4Net { addr: v4("10.3.0.1"), len: 24 }],
            ..Iface::new(
                T_RA,
                "ra0",
                IfKind::Ipsec(IpsecTunnel {
                    local: a4("10.0.2.1"),
                    remote: a4("0.0.0.0"),
                    sa_out: 0,
                    sa_in: vec![],
                    ttl: 64,
                }),
                NO_IF,
                [2, 0x65, 0x73, 0x70, 0, T_RA as u8],
            )
        },
    ];
    let mut shared = Shared::new(IfTable::new(ifs), reader);
    let mut db = SaDb::with_workers(1);
    db.add_batch(sas).expect("sas");
    db.publish();
    shared.sas = db.reader();
    let built = crate::build_graph(&shared, Arc::new(crossbeam_queue::ArrayQueue::new(4))).expect("graph");
    let info = built.graph.info().clone();
    let pool = PacketPool::new(PoolConfig { frames: 512, headroom, ..PoolConfig::default() }).expect("pool");
    Rig { fib, b: Batches::new(built.graph, built.input, pool, 2), info, shared, db }
}

impl Rig {
    fn counter(&self, node: &str, name: &str) -> u64 {
        let id = self.info.error_id(node, name).unwrap_or_else(|| panic!("{node}/{name}"));
        self.b.stats.errors.get(usize::from(id)).map_or(0, |c| c.get())
    }

    /// Every counter that is not zero, as "node/name".
    fn nonzero(&self) -> Vec<(String, u64)> {
        self.info
            .errors
            .iter()
            .zip(self.b.stats.errors.iter())
            .filter(|(_, c)| c.get() != 0)
            .map(|(e, c)| (format!("{}/{}", e.node, e.name), c.get()))
            .collect()
    }

    /// Frames (bytes, rx_if) through the graph as one batch: per port.
    fn run(&mut self, frames: &[(Vec<u8>, u16)]) -> Vec<Vec<Vec<u8>>> {
        self.b
            .run(frames.iter().map(|(f, i)| (f.as_slice(), *i, 0)), 0)
            .into_iter()
            .map(|q| q.into_iter().map(|(_, d)| d).collect())
            .collect()
    }
}

fn csum_fix4(ip: &mut [u8]) {
    ip[10] = 0;
    ip[11] = 0;
    let c = !checksum::data(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
}

/// An IPv4 UDP packet (no link layer) of `len` bytes, DF as given.
fn ip4(src: Ipv4Addr, dst: Ipv4Addr, len: usize, df: bool, fill: u8) -> Vec<u8> {
    let mut ip = vec![0u8; len];
    ip[..20].copy_from_slice(&[
        0x45,
        0,
        0,
        0,
        0,
        7,
        if df { 0x40 } else { 0 },
        0,
        33,
        17,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ]);
    ip[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    for (i, b) in ip[20..].iter_mut().enumerate() {
        *b = fill ^ i as u8;
    }
    csum_fix4(&mut ip);
    ip
}

/// An IPv6 UDP packet of `len` bytes.
fn ip6(src: Ipv6Addr, dst: Ipv6Addr, len: usize, fill: u8) -> Vec<u8> {
    let mut ip = vec![0u8; len];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    ip[6] = 17;
    ip[7] = 33;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    for (i, b) in ip[40..].iter_mut().enumerate() {
        *b = fill ^ i as u8;
    }
    ip
}

fn eth(dst: [u8; 6], src: [u8; 6], ip: &[u8]) -> Vec<u8> {
    let et: [u8; 2] = if ip[0] >> 4 == 6 { [0x86, 0xdd] } else { [8, 0] };
    [&dst[..], &src[..], &et[..], ip].concat()
}

/// Rewrites a plaintext ESP body before encryption.
type BodyEdit = dyn Fn(&mut Vec<u8>);

/// The peer's ESP frame to tern on the wan: `inner` encrypted with `sa` at
/// `seq` (next header from the inner version, or `nh`), outer from `src`
/// to `dst`, in UDP 4500 when the SA says so; `body` rewrites the
/// plaintext body (inner + trailer) before encryption when given.
fn esp_frame(
    sa: &tern_ipsec::Sa,
    seq: u64,
    inner: &[u8],
    (src, dst): (IpAddr, IpAddr),
    nh: Option<u8>,
    body: Option<&BodyEdit>,
) -> Vec<u8> {
    let h = sa.header_len();
    let nh = nh.unwrap_or(if inner[0] >> 4 == 6 { 41 } else { 4 });
    let mut buf = vec![0u8; h + inner.len() + sa.trailer_len(inner.len())];
    buf[h..h + inner.len()].copy_from_slice(inner);
    let n = match body {
        None => sa.encrypt(&mut buf, inner.len(), nh, seq).expect("encrypt"),
        Some(f) => {
            let padded = (inner.len() + 2).next_multiple_of(sa.cipher.align());
            let mut b = buf[h..h + padded].to_vec();
            for (i, x) in b[inner.len()..].iter_mut().enumerate() {
                *x = i as u8 + 1;
            }
            let l = b.len();
            b[l - 2] = (padded - inner.len() - 2) as u8;
            b[l - 1] = nh;
            f(&mut b);
            buf.truncate(h);
            buf.extend_from_slice(&b);
            buf.resize(h + b.len() + sa.icv_len(), 0);
            sa.encrypt_raw(&mut buf, b.len(), seq).expect("encrypt")
        }
    };
    buf.truncate(n);
    outer(buf, (src, dst), sa.udp_encap.map(|u| (u.src_port, u.dst_port)))
}

/// `payload` behind an outer IPv4/IPv6 header (ESP, or UDP with `udp`
/// ports), as a frame from the peer to tern's wan.
fn outer(payload: Vec<u8>, (src, dst): (IpAddr, IpAddr), udp: Option<(u16, u16)>) -> Vec<u8> {
    let mut l4 = payload;
    if let Some((s, d)) = udp {
        let mut u = [0u8; 8];
        u[0..2].copy_from_slice(&s.to_be_bytes());
        u[2..4].copy_from_slice(&d.to_be_bytes());
        u[4..6].copy_from_slice(&((8 + l4.len()) as u16).to_be_bytes());
        l4 = [&u[..], &l4].concat();
    }
    let proto = if udp.is_some() { 17 } else { 50 };
    let ip = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut ip = ip4(s, d, 20, false, 0);
            ip[9] = proto;
            ip[8] = 64;
            ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
            csum_fix4(&mut ip);
            [ip, l4].concat()
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut ip = ip6(s, d, 40, 0);
            ip[6] = proto;
            ip[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
            if udp.is_some() {
                // IPv6 requires the UDP checksum.
                let ph = checksum::pseudo_header_v6(s, d, tern_wire::IpProtocol::UDP, l4.len() as u32);
                let c = !checksum::add(ph, checksum::data(&l4));
                l4[6..8].copy_from_slice(&c.to_be_bytes());
            }
            [ip, l4].concat()
        }
        _ => panic!("mixed"),
    };
    eth(MAC_WAN, MAC_PEER, &ip)
}

fn a4(s: &str) -> IpAddr {
    IpAddr::V4(v4(s))
}
fn a6(s: &str) -> IpAddr {
    IpAddr::V6(v6(s))
}

/// What the peer reads from a frame tern sent on the wan through tunnel
/// SA `id`: (sequence number, decrypted inner packet).
fn peer_decrypt(frame: &[u8], sa: &tern_ipsec::Sa) -> (u64, Vec<u8>) {
    assert_eq!(&frame[..6], &MAC_PEER, "to the peer");
    let ip = &frame[14..];
    let (proto, l4) = if ip[0] >> 4 == 4 {
        assert_eq!(checksum::data(&ip[..20]), 0xffff, "outer checksum");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, ip.len());
        (ip[9], &ip[20..])
    } else {
        assert_eq!(u16::from_be_bytes([ip[4], ip[5]]) as usize + 40, ip.len());
        (ip[6], &ip[40..])
    };
    let esp = if sa.udp_encap.is_some() {
        assert_eq!(proto, 17);
        assert_eq!(&l4[..4], &[0x11, 0x94, 0x11, 0x94], "4500 -> 4500");
        assert_eq!(u16::from_be_bytes([l4[4], l4[5]]) as usize, l4.len());
        if ip[0] >> 4 == 6 {
            let ph = checksum::pseudo_header_v6(
                v6("2001:db8:2::1"),
                v6("2001:db8:2::2"),
                tern_wire::IpProtocol::UDP,
                l4.len() as u32,
            );
            assert_eq!(checksum::add(ph, checksum::data(l4)), 0xffff, "UDP checksum over IPv6");
        }
        &l4[8..]
    } else {
        assert_eq!(proto, 50);
        l4
    };
    let (spi, lo) = tern_ipsec::parse_header(esp).expect("esp");
    assert_eq!(spi, sa.spi);
    let seq = sa.replay_check(lo).expect("new sequence number");
    let mut esp = esp.to_vec();
    let d = sa.decrypt(&mut esp, seq).expect("decrypts");
    sa.replay_update(seq).expect("update");
    (seq, esp[d.inner].to_vec())
}

/// Packets routed into both tunnels (4in4, 6in4 plain ESP; 4in6 in UDP)
/// leave encrypted on the wan; the peer decrypts the inner packets tern
/// forwarded (TTL less one), with sequence numbers 1, 2, 3... per SA.
#[test]
fn encrypts_what_is_routed_into_the_tunnels() {
    let mut r = rig(256, 1400, sa_cfgs());
    let (p1, p3) = (peer_sa(1), peer_sa(3));
    let mut inners = Vec::new();
    for i in 0..40usize {
        let len = 28 + (i * 37) % 1300;
        let pkt = match i % 3 {
            0 => ip4(v4("10.0.1.2"), Ipv4Addr::new(198, 18, 0, i as u8), len, i % 2 == 0, i as u8),
            1 => ip6(v6("2001:db8:1::2"), v6("2001:db8:18::5"), len.max(48), i as u8),
            _ => ip4(v4("10.0.1.2"), Ipv4Addr::new(198, 20, 1, i as u8), len, false, i as u8),
        };
        inners.push(pkt);
    }
    let frames: Vec<_> = inners.iter().map(|p| (eth(MAC_LAN, MAC_HOST, p), LAN)).collect();
    let sent = r.run(&frames);
    assert!(sent[0].is_empty());
    assert_eq!(sent[1].len(), inners.len(), "{:?}", r.nonzero());
    // Forwarded: TTL / hop limit less one (the IPv4 checksum updated),
    // the rest as sent; IPv4 and IPv6 leave in their own order.
    let key = |p: &[u8], forwarded: bool| {
        let mut k = p.to_vec();
        let ttl = if p[0] >> 4 == 4 { 8 } else { 7 };
        if forwarded {
            k[ttl] += 1;
        }
        if p[0] >> 4 == 4 {
            k[10] = 0;
            k[11] = 0;
        }
        k
    };
    let mut want: Vec<Vec<u8>> = inners.iter().map(|p| key(p, false)).collect();
    let (mut s1, mut s3) = (0, 0);
    for f in &sent[1] {
        let v6_outer = f[14] >> 4 == 6;
        let (sa, next) = if v6_outer { (&p3, &mut s3) } else { (&p1, &mut s1) };
        let (seq, inner) = peer_decrypt(f, sa);
        *next += 1;
        assert_eq!(seq, *next, "consecutive");
        if inner[0] >> 4 == 4 {
            assert_eq!(checksum::data(&inner[..20]), 0xffff);
        }
        let k = key(&inner, true);
        let at = want.iter().position(|w| *w == k).expect("an inner packet sent");
        want.swap_remove(at);
    }
    assert!(want.is_empty());
    assert_eq!(r.counter("esp-encrypt", "encrypted"), 40);
    let info = r.db.info(1).expect("sa 1");
    assert_eq!((info.counters.packets, info.seq_out), (s1, s1));
    assert_eq!(r.db.info(3).expect("sa 3").seq_out, s3);
    let bytes: usize = inners.iter().filter(|p| p[0] >> 4 == 6 || p[16] == 198 && p[17] == 18).map(Vec::len).sum();
    assert_eq!(info.counters.bytes, bytes as u64);
}

/// ESP from the peer on both tunnels (IPv4 outside plain, IPv6 outside
/// in UDP; IPv4 and IPv6 inside) is decrypted and forwarded to the lan as
/// received on the tunnel; replays are dropped, reordering within the
/// window accepted once.
#[test]
fn decrypts_what_the_peer_sends() {
    let mut r = rig(256, 1400, sa_cfgs());
    let (p2, p4) = (peer_sa(2), peer_sa(4));
    let mut frames = Vec::new();
    let mut want = Vec::new();
    for (k, seq) in [3u64, 1, 2, 5, 4].into_iter().enumerate() {
        let inner4 = ip4(v4("198.18.0.9"), v4("10.0.1.2"), 60 + k * 100, false, k as u8);
        let inner6 = ip6(v6("2001:db8:18::9"), v6("2001:db8:1::2"), 80 + k * 90, k as u8);
        frames.push((esp_frame(&p2, seq, &inner4, (a4("10.0.2.2"), a4("10.0.2.1")), None, None), WAN));
        frames.push((esp_frame(&p4, seq, &inner6, (a6("2001:db8:2::2"), a6("2001:db8:2::1")), None, None), WAN));
        want.push(inner4);
        want.push(inner6);
    }
    let sent = r.run(&frames);
    assert_eq!(sent[0].len(), 10, "{:?}", r.nonzero());
    // IPv4 and IPv6 leave in their own order: match by contents.
    for f in &sent[0] {
        assert_eq!(&f[..6], &MAC_HOST);
        let inner = &f[14..];
        let payload = if inner[0] >> 4 == 4 { 20 } else { 40 };
        let at = want.iter().position(|w| w.len() == inner.len() && w[payload..] == inner[payload..]);
        want.swap_remove(at.expect("a packet the peer sent"));
    }
    assert_eq!(r.counter("esp-decrypt", "decrypted"), 10);
    // The same frames again: every one a replay.
    let sent = r.run(&frames);
    assert!(sent[0].is_empty());
    assert_eq!(r.counter("esp-decrypt", "replay"), 10);
    let i2 = r.db.info(2).expect("sa 2");
    assert_eq!((i2.counters.packets, i2.counters.replay_drops, i2.seq_in), (5, 5, 5));
}

/// Every drop counter of both nodes, each hit by one crafted frame and
/// nothing else counted as a drop.
#[test]
fn every_drop_is_counted_by_name() {
    let p2 = peer_sa(2);
    let fwd = (a4("10.0.2.2"), a4("10.0.2.1"));
    let fwd6 = (a6("2001:db8:2::2"), a6("2001:db8:2::1"));
    let inner = ip4(v4("198.18.0.9"), v4("10.0.1.2"), 100, false, 1);
    let good = |seq| esp_frame(&p2, seq, &inner, fwd, None, None);
    let lan_pkt = |dst: &str, len: usize| eth(MAC_LAN, MAC_HOST, &ip4(v4("10.0.1.2"), v4(dst), len, false, 3));
    type Case<'a> = (&'static str, &'static str, Box<dyn Fn(&mut Rig) -> Vec<(Vec<u8>, u16)> + 'a>);
    let cases: Vec<Case> = vec![
        (
            "esp-decrypt",
            "unknown-spi",
            Box::new(|_| {
                let mut f = good(1);
                f[14 + 20 + 3] ^= 0x55;
                vec![(f, WAN)]
            }),
        ),
        ("esp-decrypt", "replay", Box::new(|_| vec![(good(7), WAN), (good(7), WAN)])),
        (
            "esp-decrypt",
            "integrity",
            Box::new(|_| {
                let mut f = good(1);
                let n = f.len();
                f[n - 1] ^= 1;
                vec![(f, WAN)]
            }),
        ),
        (
            "esp-decrypt",
            "truncated",
            Box::new(|_| {
                let mut f = good(1);
                f.truncate(14 + 20 + 20);
                f[16..18].copy_from_slice(&40u16.to_be_bytes());
                let mut ip = f[14..34].to_vec();
                csum_fix4(&mut ip);
                f[14..34].copy_from_slice(&ip);
                vec![(f, WAN)]
            }),
        ),
        (
            "esp-decrypt",
            "bad-padding",
            Box::new(|_| {
                let bad = |b: &mut Vec<u8>| {
                    let l = b.len();
                    b[l - 2] = 200;
                };
                vec![(esp_frame(&p2, 1, &inner, fwd, None, Some(&bad)), WAN)]
            }),
        ),
        ("esp-decrypt", "dummy-packet", Box::new(|_| vec![(esp_frame(&p2, 1, &inner, fwd, Some(59), None), WAN)])),
        (
            "esp-decrypt",
            "unsupported-payload",
            Box::new(|_| vec![(esp_frame(&p2, 1, &inner, fwd, Some(17), None), WAN)]),
        ),
        (
            "esp-decrypt",
            "no-tunnel",
            Box::new(|_| vec![(esp_frame(&p2, 1, &inner, (a4("10.0.2.3"), a4("10.0.2.1")), None, None), WAN)]),
        ),
        (
            "esp-decrypt",
            "wrong-encapsulation",
            Box::new(|_| {
                // SA 4 wants UDP; sent as plain ESP.
                let mut cfg = sa_cfgs().into_iter().find(|c| c.id == 4).expect("sa");
                cfg.udp_encap = None;
                let plain = tern_ipsec::Sa::new(cfg, 1, Instant::now()).expect("sa");
                vec![(esp_frame(&plain, 1, &inner, fwd6, None, None), WAN)]
            }),
        ),
        (
            "esp-decrypt",
            "ike-not-handled",
            Box::new(|_| vec![(outer(vec![0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8], fwd6, Some((4500, 4500))), WAN)]),
        ),
        ("esp-decrypt", "nat-keepalive", Box::new(|_| vec![(outer(vec![0xff], fwd6, Some((4500, 4500))), WAN)])),
        (
            "esp-decrypt",
            "tunnel-down",
            Box::new(|r| {
                let mut t = (*r.shared.ifaces.load()).clone();
                t.ifs[usize::from(T4)].up = false;
                r.shared.ifaces.publish(IfTable::new(t.ifs));
                vec![(good(1), WAN)]
            }),
        ),
        (
            "esp-decrypt",
            "sa-expired",
            Box::new(|r| {
                let mut c = sa_cfgs();
                c[1].hard.packets = Some(1);
                *r = rig(256, 1400, c);
                let _ = r.run(&[(good(1), WAN)]);
                assert_eq!(r.db.poll_events(Instant::now()).len(), 1);
                r.b.stats.errors.iter().for_each(|c| c.set(0));
                vec![(good(2), WAN)]
            }),
        ),
        (
            "esp-encrypt",
            "no-sa",
            Box::new(|r| {
                let mut c = sa_cfgs();
                c.remove(0);
                *r = rig(256, 1400, c);
                vec![(lan_pkt("198.18.0.1", 100), LAN)]
            }),
        ),
        (
            "esp-encrypt",
            "seq-exhausted",
            Box::new(|r| {
                // SA 1 is without ESN: 2^32 - 1 is the last number.
                r.db.get(1).expect("sa").set_seq_out(u64::from(u32::MAX) - 1);
                vec![(lan_pkt("198.18.0.1", 100), LAN), (lan_pkt("198.18.0.1", 100), LAN)]
            }),
        ),
        (
            "esp-encrypt",
            "sa-expired",
            Box::new(|r| {
                let mut c = sa_cfgs();
                c[0].hard.packets = Some(1);
                *r = rig(256, 1400, c);
                vec![(lan_pkt("198.18.0.1", 100), LAN), (lan_pkt("198.18.0.1", 100), LAN)]
            }),
        ),
        (
            "esp-encrypt",
            "no-headroom",
            Box::new(|r| {
                *r = rig(0, 1400, sa_cfgs());
                vec![(lan_pkt("198.18.0.1", 100), LAN)]
            }),
        ),
        (
            "esp-encrypt",
            "no-tailroom",
            Box::new(|r| {
                *r = rig(256, 9000, sa_cfgs());
                let room = PoolConfig::default().frame_size as usize - 256;
                vec![(lan_pkt("198.18.0.1", room - 14), LAN)]
            }),
        ),
        (
            "esp-encrypt",
            "recursive-encapsulation",
            Box::new(|r| {
                // The remote itself routed into the tunnel: 10.0.2.200 is;
                // the FIB stacks it `via_tunnel`, so the direct path
                // declines and the second pass meets the tunnel again.
                r.fib.tunnel_set(T4, a4("10.0.2.200"));
                let mut t = (*r.shared.ifaces.load()).clone();
                if let IfKind::Ipsec(x) = &mut t.ifs[usize::from(T4)].kind {
                    x.remote = a4("10.0.2.200");
                }
                r.shared.ifaces.publish(IfTable::new(t.ifs));
                vec![(lan_pkt("198.18.0.1", 100), LAN)]
            }),
        ),
    ];
    for (node, name, make) in cases {
        let mut r = rig(256, 1400, sa_cfgs());
        let frames = make(&mut r);
        let _ = r.run(&frames);
        assert_eq!(r.counter(node, name), 1, "{node}/{name}: {:?}", r.nonzero());
        let drops: Vec<_> = r
            .nonzero()
            .into_iter()
            .filter(|(n, _)| {
                let (nn, en) = n.split_once('/').expect("name");
                r.info.errors.iter().any(|e| e.node == nn && e.name == en && e.kind == tern_engine::ErrorKind::Drop)
            })
            .collect();
        assert_eq!(drops, vec![(format!("{node}/{name}"), 1)], "{node}/{name}: only this drop");
    }
}

/// A packet bigger than the tunnel's MTU with DF set is answered with
/// ICMP "fragmentation needed" carrying the tunnel's MTU (ip4-rewrite's
/// check against the tunnel interface), not encrypted.
#[test]
fn too_big_for_the_tunnel_is_answered_with_frag_needed() {
    let mut r = rig(256, 1400, sa_cfgs());
    let big = eth(MAC_LAN, MAC_HOST, &ip4(v4("10.0.1.2"), v4("198.18.0.1"), 1401, true, 0));
    let sent = r.run(&[(big, LAN)]);
    assert!(sent[1].is_empty());
    assert_eq!(sent[0].len(), 1, "{:?}", r.nonzero());
    let icmp = &sent[0][0][14 + 20..];
    assert_eq!((icmp[0], icmp[1]), (3, 4), "fragmentation needed");
    assert_eq!(u16::from_be_bytes([icmp[6], icmp[7]]), 1400);
    assert_eq!(r.counter("esp-encrypt", "encrypted"), 0);
}

/// A traced packet's hops note SPI, sequence number and verdict.
#[test]
fn traces_note_spi_sequence_and_verdict() {
    let mut r = rig(256, 1400, sa_cfgs());
    let p2 = peer_sa(2);
    let f = esp_frame(
        &p2,
        9,
        &ip4(v4("198.18.0.9"), v4("10.0.1.2"), 80, false, 1),
        (a4("10.0.2.2"), a4("10.0.2.1")),
        None,
        None,
    );
    let out = eth(MAC_LAN, MAC_HOST, &ip4(v4("10.0.1.2"), v4("198.18.0.1"), 80, false, 3));
    r.b.trace.arm(3);
    let frames = [(f.clone(), WAN, flags::TRACED), (f, WAN, flags::TRACED), (out, LAN, flags::TRACED)];
    let _ = r.b.run(frames.iter().map(|(f, i, fl)| (f.as_slice(), *i, *fl)), 0);
    let notes: Vec<String> =
        r.b.trace
            .take()
            .into_iter()
            .flat_map(|rec| rec.hops.into_iter().filter(|h| h.node.starts_with("esp-")).flat_map(|h| h.notes))
            .collect();
    assert!(notes.contains(&format!("spi {:#x} seq 9: decrypted", p2.spi)), "{notes:?}");
    assert!(notes.iter().any(|n| n.starts_with(&format!("spi {:#x} seq 9: replay", p2.spi))), "{notes:?}");
    assert!(notes.contains(&"spi 0x1000 seq 1: encrypted".to_string()), "{notes:?}");
}

/// A multipoint tunnel's clients: A (10.3.0.10 at 10.0.2.7, SAs 11 out /
/// 12 in, plain ESP) and B (10.3.0.11 at 10.0.2.8, SAs 13 / 14, in UDP).
fn ra_clients(with_a: bool) -> crate::state::IpsecClients {
    use crate::state::IpsecClient;
    let mut c = crate::state::IpsecClients::default();
    if with_a {
        c.insert_client(T_RA, a4("10.3.0.10"), IpsecClient { sa_out: 11, remote: a4("10.0.2.7") });
        c.insert_sa(12, T_RA, a4("10.3.0.10"));
    }
    c.insert_client(T_RA, a4("10.3.0.11"), IpsecClient { sa_out: 13, remote: a4("10.0.2.8") });
    c.insert_sa(14, T_RA, a4("10.3.0.11"));
    // An IPv6 virtual address over IPv4 outside.
    c.insert_client(T_RA, a6("2001:db8:77::10"), IpsecClient { sa_out: 15, remote: a4("10.0.2.9") });
    c.insert_sa(16, T_RA, a6("2001:db8:77::10"));
    c
}

fn ra_rig() -> (Rig, [tern_ipsec::Sa; 6]) {
    let extra = [
        sa_cfg(11, Cipher::Aes128Gcm, Integ::None, false),
        sa_cfg(12, Cipher::Aes128Gcm, Integ::None, false),
        sa_cfg(13, Cipher::Aes128Cbc, Integ::HmacSha256_128, true),
        sa_cfg(14, Cipher::Aes128Cbc, Integ::HmacSha256_128, true),
        sa_cfg(15, Cipher::Aes256Gcm, Integ::None, false),
        sa_cfg(16, Cipher::Aes256Gcm, Integ::None, false),
    ];
    let peers = extra.clone().map(|c| tern_ipsec::Sa::new(c, 1, Instant::now()).expect("sa"));
    let mut r = rig(256, 1400, sa_cfgs().into_iter().chain(extra).collect());
    let p = |s: &str| s.parse::<Prefix>().expect("prefix");
    let conn = |pfx: &str| {
        RouteOp::Add(Source::Connected, p(pfx), RouteTarget::Connected { ifindex: T_RA }, RouteAttrs::default())
    };
    let report = r.fib.apply(vec![conn("10.3.0.0/24"), conn("2001:db8:77::/64")]);
    assert_eq!(report.failed, 0);
    r.fib.set_neighbor(WAN, a4("10.0.2.7"), Some(MAC_PEER));
    r.fib.set_neighbor(WAN, a4("10.0.2.8"), Some(MAC_PEER));
    r.fib.set_neighbor(WAN, a4("10.0.2.9"), Some(MAC_PEER));
    r.shared.ipsec_clients.publish(ra_clients(true));
    (r, peers)
}

/// The outer destination of a frame tern sent.
fn outer_dst(f: &[u8]) -> IpAddr {
    encrypt::inner_addr(&f[14..], false).expect("ip")
}

/// Outbound on a multipoint tunnel: each packet leaves with the SA and to
/// the outer address of the client its inner destination names; no
/// client is `no-client`; a client removed (a new publication) is gone.
#[test]
fn multipoint_tunnel_encrypts_to_the_client_of_the_inner_destination() {
    let (mut r, [a_out, _, b_out, _, c_out, _]) = ra_rig();
    let to = |dst: &str, fill| eth(MAC_LAN, MAC_HOST, &ip4(v4("10.0.1.2"), v4(dst), 120, false, fill));
    let frames = vec![
        (to("10.3.0.10", 1), LAN),
        (to("10.3.0.11", 2), LAN),
        (to("10.3.0.12", 3), LAN),
        (to("10.3.0.10", 4), LAN),
    ];
    let sent = r.run(&frames);
    assert_eq!(sent[1].len(), 3, "{:?}", r.nonzero());
    let mut seen = Vec::new();
    for f in &sent[1] {
        let dst = outer_dst(f);
        let sa = if dst == a4("10.0.2.7") { &a_out } else { &b_out };
        assert!(dst == a4("10.0.2.7") || dst == a4("10.0.2.8"), "{dst}");
        let (seq, inner) = peer_decrypt(f, sa);
        seen.push((dst, seq, inner[16..20].to_vec(), inner[20]));
    }
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (a4("10.0.2.7"), 1, vec![10, 3, 0, 10], 1),
            (a4("10.0.2.7"), 2, vec![10, 3, 0, 10], 4),
            (a4("10.0.2.8"), 1, vec![10, 3, 0, 11], 2),
        ]
    );
    assert_eq!(r.counter("esp-encrypt", "no-client"), 1);
    assert_eq!(r.counter("esp-encrypt", "encrypted"), 3);
    assert_eq!(r.db.info(11).expect("sa 11").counters.packets, 2);
    // IPv6 inside, to the IPv6 client.
    let v6pkt = ip6(v6("2001:db8:1::2"), v6("2001:db8:77::10"), 100, 7);
    let sent = r.run(&[(eth(MAC_LAN, MAC_HOST, &v6pkt), LAN)]);
    assert_eq!(sent[1].len(), 1, "{:?}", r.nonzero());
    assert_eq!(outer_dst(&sent[1][0]), a4("10.0.2.9"));
    let (_, inner) = peer_decrypt(&sent[1][0], &c_out);
    assert_eq!(&inner[24..40], &v6("2001:db8:77::10").octets());
    // Client A goes: its packets are dropped, B's still leave.
    r.shared.ipsec_clients.publish(ra_clients(false));
    let sent = r.run(&[(to("10.3.0.10", 5), LAN), (to("10.3.0.11", 6), LAN)]);
    assert_eq!(sent[1].len(), 1);
    assert_eq!(outer_dst(&sent[1][0]), a4("10.0.2.8"));
    assert_eq!(r.counter("esp-encrypt", "no-client"), 2);
}

/// Inbound on a multipoint tunnel: a client's SA is accepted from any
/// outer source (NAT may move it) and enters on the tunnel; an inner
/// source other than the client's virtual IP is `client-spoofed`; a
/// removed client's SA is listed by no tunnel.
#[test]
fn multipoint_tunnel_decrypts_its_clients_and_checks_their_source() {
    let (mut r, [_, a_in, _, b_in, _, c_in]) = ra_rig();
    let wan = |src: &str| (a4(src), a4("10.0.2.1"));
    let from = |src: &str, fill| ip4(v4(src), v4("10.0.1.2"), 100, false, fill);
    let frames = vec![
        (esp_frame(&a_in, 1, &from("10.3.0.10", 1), wan("10.0.2.7"), None, None), WAN),
        (esp_frame(&b_in, 1, &from("10.3.0.11", 2), wan("10.0.2.8"), None, None), WAN),
        // A behind another NAT address: still A's SA.
        (esp_frame(&a_in, 2, &from("10.3.0.10", 3), wan("10.0.2.99"), None, None), WAN),
        // A claiming B's address.
        (esp_frame(&a_in, 3, &from("10.3.0.11", 4), wan("10.0.2.7"), None, None), WAN),
        // The IPv6 client, from its address and from another.
        (
            esp_frame(&c_in, 1, &ip6(v6("2001:db8:77::10"), v6("2001:db8:1::2"), 90, 5), wan("10.0.2.9"), None, None),
            WAN,
        ),
        (
            esp_frame(&c_in, 2, &ip6(v6("2001:db8:77::11"), v6("2001:db8:1::2"), 90, 6), wan("10.0.2.9"), None, None),
            WAN,
        ),
    ];
    let sent = r.run(&frames);
    let mut fills: Vec<u8> =
        sent[0].iter().map(|f| if f[14] >> 4 == 4 { f[14 + 20] } else { 10 + f[14 + 40] }).collect();
    fills.sort();
    assert_eq!(fills, vec![1, 2, 3, 15], "{:?}", r.nonzero());
    assert_eq!(r.counter("esp-decrypt", "decrypted"), 4);
    assert_eq!(r.counter("esp-decrypt", "client-spoofed"), 2);
    // Client A removed: its SA no longer enters.
    r.shared.ipsec_clients.publish(ra_clients(false));
    let sent = r.run(&[(esp_frame(&a_in, 9, &from("10.3.0.10", 9), wan("10.0.2.7"), None, None), WAN)]);
    assert!(sent[0].is_empty());
    assert_eq!(r.counter("esp-decrypt", "no-tunnel"), 1);
}

/// The direct encapsulation (the FIB's stacked adjacency, link-layer
/// header written by `esp-encrypt`) gives what the second pass through
/// `ip4-lookup`/`ip6-lookup` and the rewrite nodes gives: the same frames
/// (ciphertext included: same keys, same sequence numbers), metadata and
/// counters, for both tunnels (IPv4 outside, IPv6 outside in UDP), and
/// skips the second lookups; too big for the egress MTU (a tunnel MTU set
/// above what the wan carries) takes the second pass, which drops or
/// answers as it always did.
#[test]
fn direct_encapsulation_is_the_second_pass() {
    let run = |direct: bool, tunnel_mtu: u16| {
        let mut r = rig(256, tunnel_mtu, sa_cfgs());
        let fast_paths = crate::state::FastPaths { gre_direct: direct, ..crate::state::FastPaths::ALL };
        r.shared.params.publish(crate::state::Params { fast_paths, ..crate::state::Params::default() });
        let mut frames = Vec::new();
        for i in 0..60usize {
            let len = 40 + (i * 53) % 1400;
            let pkt = match i % 3 {
                0 => ip4(v4("10.0.1.2"), Ipv4Addr::new(198, 18, 1, i as u8), len, false, i as u8),
                1 => ip6(v6("2001:db8:1::2"), v6("2001:db8:18::7"), len.max(48), i as u8),
                _ => ip4(v4("10.0.1.2"), Ipv4Addr::new(198, 20, 2, i as u8), len, false, i as u8),
            };
            frames.push((eth(MAC_LAN, MAC_HOST, &pkt), LAN));
        }
        let mut out = Vec::new();
        for chunk in frames.chunks(25) {
            let sent = r.b.run(chunk.iter().map(|(f, i)| (f.as_slice(), *i, 0)), 0);
            for (port, q) in sent.into_iter().enumerate() {
                for (m, data) in q {
                    let meta =
                        format!("tx_if {} nh {} l3 {} vlan {} flags {:#x}", m.tx_if, m.nh, m.l3_off, m.vlan, m.flags);
                    out.push((port, data, meta));
                }
            }
        }
        let lookups: u64 = ["ip4-lookup", "ip6-lookup"]
            .iter()
            .map(|n| {
                let id = r.info.node_id(n).expect("node");
                r.b.stats.nodes.get(usize::from(id)).map_or(0, |c| c.packets.get())
            })
            .sum();
        let errors: Vec<u64> = r.b.stats.errors.iter().map(|c| c.get()).collect();
        (out, errors, lookups)
    };
    for tunnel_mtu in [1400, 1500] {
        let (fast, slow) = (run(true, tunnel_mtu), run(false, tunnel_mtu));
        assert_eq!(fast.0.len(), slow.0.len(), "mtu {tunnel_mtu}");
        assert!(fast.0.len() >= 55, "mtu {tunnel_mtu}: most sent ({})", fast.0.len());
        // The same frames and metadata (IPv4 and IPv6 outer packets may
        // leave in another order: the second pass groups them by family).
        let mut a = fast.0.clone();
        let mut b = slow.0.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b, "mtu {tunnel_mtu}: frames and metadata");
        assert_eq!(fast.1, slow.1, "mtu {tunnel_mtu}: counters");
        let saved = slow.2 - fast.2;
        assert!(saved >= 40, "mtu {tunnel_mtu}: {saved} second lookups saved");
        if tunnel_mtu == 1500 {
            // Those too big for the wan once encrypted took the second pass.
            assert!(saved < 60, "mtu 1500: some took the second pass ({saved} saved)");
        }
    }
}

/// `frame` (Ethernet + IPv6) with extension headers of the given types
/// inserted after the fixed header (hop-by-hop 0 and destination options
/// 60 with a PadN, a routing header 43 of experimental type 253 with no
/// segments left, a fragment header 44 with this offset-and-M field).
fn with_ext6(frame: &[u8], exts: &[u8], frag: u16) -> Vec<u8> {
    let (head, payload) = frame.split_at(14 + 40);
    let mut ip = head.to_vec();
    let upper = ip[14 + 6];
    let mut chain = Vec::new();
    for (i, &t) in exts.iter().enumerate() {
        let next = exts.get(i + 1).copied().unwrap_or(upper);
        let [f0, f1] = frag.to_be_bytes();
        chain.extend_from_slice(&match t {
            43 => [next, 0, 253, 0, 0, 0, 0, 0],
            44 => [next, 0, f0, f1, 0, 0, 0x12, 0x34],
            _ => [next, 0, 1, 4, 0, 0, 0, 0],
        });
    }
    ip[14 + 6] = exts[0];
    let plen = u16::from_be_bytes([ip[14 + 4], ip[14 + 5]]) + chain.len() as u16;
    ip[14 + 4..14 + 6].copy_from_slice(&plen.to_be_bytes());
    [ip, chain, payload.to_vec()].concat()
}

/// ESP in UDP 4500 over IPv6 behind extension headers (hop-by-hop,
/// routing, destination options, an atomic fragment, and all four) is
/// decrypted like without them.
#[test]
fn decrypts_esp_behind_ipv6_extension_headers() {
    let mut r = rig(256, 1400, sa_cfgs());
    let p4 = peer_sa(4);
    let inner = ip6(v6("2001:db8:18::9"), v6("2001:db8:1::2"), 100, 3);
    let from = (a6("2001:db8:2::2"), a6("2001:db8:2::1"));
    let chains: [&[u8]; 5] = [&[0], &[43], &[60], &[44], &[0, 43, 60, 44]];
    let frames: Vec<(Vec<u8>, u16)> = chains
        .iter()
        .zip(1u64..)
        .map(|(c, seq)| (with_ext6(&esp_frame(&p4, seq, &inner, from, None, None), c, 0), WAN))
        .collect();
    let sent = r.run(&frames);
    assert_eq!(sent[0].len(), chains.len(), "{:?}", r.nonzero());
    for f in &sent[0] {
        assert_eq!(&f[14 + 40..], &inner[40..], "the inner packet");
    }
    assert_eq!(r.counter("esp-decrypt", "decrypted"), chains.len() as u64);
    assert_eq!(r.db.info(4).expect("sa 4").counters.packets, chains.len() as u64);
}

/// ESP over IPv4 and ESP in UDP 4500 over IPv6 that arrive in fragments,
/// in either order, are reassembled (`ip4-reassembly`, `ip6-reassembly`)
/// and decrypted; each fragment is counted once, as `reassembled`.
#[test]
fn decrypts_fragmented_esp() {
    let mut r = rig(256, 1400, sa_cfgs());
    let (p2, p4) = (peer_sa(2), peer_sa(4));
    let inner4 = ip4(v4("198.18.0.9"), v4("10.0.1.2"), 1000, false, 7);
    let inner6 = ip6(v6("2001:db8:18::9"), v6("2001:db8:1::2"), 1100, 8);
    let fragment = crate::reass::testing::fragment;
    let f4 = fragment(&esp_frame(&p2, 1, &inner4, (a4("10.0.2.2"), a4("10.0.2.1")), None, None), &[512], 77);
    let f6 = fragment(&esp_frame(&p4, 1, &inner6, (a6("2001:db8:2::2"), a6("2001:db8:2::1")), None, None), &[256], 78);
    let [a4_, b4] = <[Vec<u8>; 2]>::try_from(f4).expect("two");
    let [a6_, b6] = <[Vec<u8>; 2]>::try_from(f6).expect("two");
    let sent = r.run(&[(b4, WAN), (a6_, WAN), (a4_, WAN), (b6, WAN)]);
    assert_eq!(sent[0].len(), 2, "{:?}", r.nonzero());
    let mut got: Vec<&[u8]> = sent[0].iter().map(|f| &f[14..]).collect();
    got.sort_by_key(|g| g[0] >> 4);
    assert_eq!(got[0][20..], inner4[20..], "the inner IPv4 packet");
    assert_eq!(got[1][40..], inner6[40..], "the inner IPv6 packet");
    assert_eq!(r.counter("esp-decrypt", "decrypted"), 2);
    for node in ["ip4-reassembly", "ip6-reassembly"] {
        assert_eq!(r.counter(node, "reassembled"), 2, "{node}");
        assert_eq!(r.counter(node, "datagrams"), 1, "{node}");
    }
    // One fragment alone is held, and counted nothing yet.
    let a = fragment(&esp_frame(&p2, 2, &inner4, (a4("10.0.2.2"), a4("10.0.2.1")), None, None), &[512], 79);
    assert!(r.run(&[(a[0].clone(), WAN)])[0].is_empty());
    let drops: Vec<_> = r.nonzero().into_iter().filter(|(n, _)| n.contains("reassembly")).collect();
    assert_eq!(drops.len(), 4, "{drops:?}");
}

/// The peer's ESP in UDP on SA `sa` from UDP port `sport`.
fn esp_from_port(sa: &tern_ipsec::Sa, seq: u64, inner: &[u8], addrs: (IpAddr, IpAddr), sport: u16) -> Vec<u8> {
    let h = sa.header_len();
    let mut buf = vec![0u8; h + inner.len() + sa.trailer_len(inner.len())];
    buf[h..h + inner.len()].copy_from_slice(inner);
    let nh = if inner[0] >> 4 == 6 { 41 } else { 4 };
    let n = sa.encrypt(&mut buf, inner.len(), nh, seq).expect("encrypt");
    buf.truncate(n);
    outer(buf, addrs, Some((sport, 4500)))
}

/// The peers' new NAT mappings reported on `shared.events`.
fn moves(r: &Rig) -> Vec<crate::state::Event> {
    std::iter::from_fn(|| r.shared.events.pop()).filter(|e| matches!(e, crate::state::Event::EspMoved { .. })).collect()
}

/// ESP in UDP from a new source port (the peer's NAT mapped it anew) is
/// decrypted as before and, once authenticated, reported once to the
/// control thread; a forged or replayed packet from another port is not.
#[test]
fn authenticated_esp_from_a_new_port_is_reported_once() {
    let mut r = rig(256, 1400, sa_cfgs());
    let p4 = peer_sa(4);
    let addrs = (a6("2001:db8:2::2"), a6("2001:db8:2::1"));
    let inner = |k: u8| ip6(v6("2001:db8:18::9"), v6("2001:db8:1::2"), 120, k);
    // From the port the SA has: nothing to report.
    let sent = r.run(&[(esp_from_port(&p4, 1, &inner(1), addrs, 4500), WAN)]);
    assert_eq!(sent[0].len(), 1, "{:?}", r.nonzero());
    assert!(moves(&r).is_empty());
    // A forged packet (bad ICV) and a replay from other ports: dropped,
    // not reported.
    let mut forged = esp_from_port(&p4, 2, &inner(2), addrs, 4700);
    let last = forged.len() - 1;
    forged[last] ^= 1;
    let replay = esp_from_port(&p4, 1, &inner(1), addrs, 4800);
    let sent = r.run(&[(forged, WAN), (replay, WAN)]);
    assert!(sent[0].is_empty());
    assert_eq!((r.counter("esp-decrypt", "integrity"), r.counter("esp-decrypt", "replay")), (1, 1));
    assert!(moves(&r).is_empty(), "only authenticated ESP counts");
    // Three packets from the new mapping: all decrypted, one report.
    let frames: Vec<_> = (3..6).map(|s| (esp_from_port(&p4, s, &inner(s as u8), addrs, 4600), WAN)).collect();
    let sent = r.run(&frames);
    assert_eq!(sent[0].len(), 3, "{:?}", r.nonzero());
    assert_eq!(moves(&r), [crate::state::Event::EspMoved { sa: 4, remote: a6("2001:db8:2::2"), port: 4600 }]);
    assert_eq!(r.counter("esp-decrypt", "peer-moved"), 1);
    let sent = r.run(&[(esp_from_port(&p4, 6, &inner(6), addrs, 4600), WAN)]);
    assert_eq!(sent[0].len(), 1);
    assert!(moves(&r).is_empty(), "reported once");
    // A new address too: the tunnel's SA is found by its local address,
    // the packet taken once authenticated and the address reported; plain
    // ESP (SA 2, no udp_encap) from elsewhere is still no tunnel's.
    let moved = (a6("2001:db8:2::9"), a6("2001:db8:2::1"));
    let sent = r.run(&[(esp_from_port(&p4, 7, &inner(7), moved, 4600), WAN)]);
    assert_eq!(sent[0].len(), 1, "{:?}", r.nonzero());
    assert_eq!(moves(&r), [crate::state::Event::EspMoved { sa: 4, remote: a6("2001:db8:2::9"), port: 4600 }]);
    let plain = ip4(v4("198.18.0.9"), v4("10.0.1.2"), 60, false, 1);
    let sent = r.run(&[(esp_frame(&peer_sa(2), 1, &plain, (a4("10.0.2.9"), a4("10.0.2.1")), None, None), WAN)]);
    assert!(sent[0].is_empty());
    assert_eq!(r.counter("esp-decrypt", "no-tunnel"), 1);
}

/// A batch of 100 packets (more than one `LOOKAHEAD` pass) to two clients,
/// in runs and interleaved, with strays to no client between them: each
/// client's packets leave in the batch's order with its sequence numbers
/// 1, 2, 3... (one reservation per run of one SA, none skipped or
/// repeated across passes), and each SA counts its own.
#[test]
fn multipoint_batches_keep_each_sas_sequence_across_passes() {
    let (mut r, [a_out, _, b_out, _, _, _]) = ra_rig();
    let to = |dst: &str, fill| eth(MAC_LAN, MAC_HOST, &ip4(v4("10.0.1.2"), v4(dst), 60, false, fill));
    // Runs of 1..=7 packets, alternating A and B, every 13th to nobody.
    let mut frames = Vec::new();
    let (mut want_a, mut want_b, mut nobody) = (Vec::new(), Vec::new(), 0);
    let mut run_len = 1;
    let mut a = true;
    while frames.len() < 100 {
        for _ in 0..run_len {
            let fill = frames.len() as u8;
            if frames.len() % 13 == 12 {
                frames.push((to("10.3.0.99", fill), LAN));
                nobody += 1;
            } else if a {
                frames.push((to("10.3.0.10", fill), LAN));
                want_a.push(fill);
            } else {
                frames.push((to("10.3.0.11", fill), LAN));
                want_b.push(fill);
            }
        }
        a = !a;
        run_len = run_len % 7 + 1;
    }
    let sent = r.run(&frames);
    assert_eq!(sent[1].len(), want_a.len() + want_b.len(), "{:?}", r.nonzero());
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    for f in &sent[1] {
        let (sa, got) = if outer_dst(f) == a4("10.0.2.7") { (&a_out, &mut got_a) } else { (&b_out, &mut got_b) };
        let (seq, inner) = peer_decrypt(f, sa);
        got.push((seq, inner[20]));
    }
    let numbered = |fills: &[u8]| fills.iter().enumerate().map(|(i, &f)| (i as u64 + 1, f)).collect::<Vec<_>>();
    assert_eq!(got_a, numbered(&want_a), "client A: its sequence in the batch's order");
    assert_eq!(got_b, numbered(&want_b), "client B: its sequence in the batch's order");
    assert_eq!(r.counter("esp-encrypt", "no-client"), nobody);
    assert_eq!(r.db.info(11).expect("sa 11").counters.packets, want_a.len() as u64);
    assert_eq!(r.db.info(13).expect("sa 13").counters.packets, want_b.len() as u64);
    // The next batch goes on from there.
    let sent = r.run(&[(to("10.3.0.10", 200), LAN)]);
    assert_eq!(peer_decrypt(&sent[1][0], &a_out).0, want_a.len() as u64 + 1);
}

/// The passes of `esp-encrypt` (destination, client, SA, each resolved
/// in its own pass over the batch) decide each packet on its own: in a
/// batch of 70 (A A C C B X B, ten times: C a client whose SA is not
/// installed, X a destination with no client), A's and B's packets leave
/// numbered in order, each of the others is `no-sa` or `no-client`.
#[test]
fn multipoint_passes_decide_each_packet_on_its_own() {
    use crate::state::IpsecClient;
    let (mut r, [a_out, _, b_out, _, _, _]) = ra_rig();
    let mut c = ra_clients(true);
    c.insert_client(T_RA, a4("10.3.0.12"), IpsecClient { sa_out: 99, remote: a4("10.0.2.7") });
    r.shared.ipsec_clients.publish(c);
    let to = |dst: &str, fill| eth(MAC_LAN, MAC_HOST, &ip4(v4("10.0.1.2"), v4(dst), 60, false, fill));
    let (mut frames, mut want_a, mut want_b, mut no_sa, mut nobody) = (Vec::new(), Vec::new(), Vec::new(), 0, 0);
    for i in 0..70u8 {
        let dst = match i % 7 {
            0 | 1 => {
                want_a.push(i);
                "10.3.0.10"
            }
            2 | 3 => {
                no_sa += 1;
                "10.3.0.12"
            }
            4 | 6 => {
                want_b.push(i);
                "10.3.0.11"
            }
            _ => {
                nobody += 1;
                "10.3.0.99"
            }
        };
        frames.push((to(dst, i), LAN));
    }
    let sent = r.run(&frames);
    assert_eq!(sent[1].len(), want_a.len() + want_b.len(), "{:?}", r.nonzero());
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    for f in &sent[1] {
        let (sa, got) = if outer_dst(f) == a4("10.0.2.7") { (&a_out, &mut got_a) } else { (&b_out, &mut got_b) };
        let (seq, inner) = peer_decrypt(f, sa);
        got.push((seq, inner[20]));
    }
    let numbered = |fills: &[u8]| fills.iter().enumerate().map(|(i, &f)| (i as u64 + 1, f)).collect::<Vec<_>>();
    assert_eq!(got_a, numbered(&want_a));
    assert_eq!(got_b, numbered(&want_b));
    assert_eq!(r.counter("esp-encrypt", "no-sa"), no_sa);
    assert_eq!(r.counter("esp-encrypt", "no-client"), nobody);
}

/// A batch of 90 ESP packets on two clients' SAs (more than one
/// `LOOKAHEAD` pass), interleaved, with an unknown SPI, a replayed packet
/// and a forged one among them: each is decided on its own, the good ones
/// enter in order, and each SA counts its own packets and drops.
#[test]
fn multipoint_decrypts_a_batch_of_many_sas_across_passes() {
    let (mut r, [_, a_in, _, b_in, _, _]) = ra_rig();
    let wan = |src: &str| (a4(src), a4("10.0.2.1"));
    let from = |src: &str, fill| ip4(v4(src), v4("10.0.1.2"), 60, false, fill);
    let mut frames = Vec::new();
    let mut want = Vec::new();
    let (mut seq_a, mut seq_b) = (0, 0);
    for i in 0..90u8 {
        let f = match i % 10 {
            3 => esp_frame(&a_in, seq_a.max(1), &from("10.3.0.10", i), wan("10.0.2.7"), None, None), // replay
            7 => {
                let mut f = esp_frame(&b_in, 1000 + u64::from(i), &from("10.3.0.11", i), wan("10.0.2.8"), None, None);
                let n = f.len();
                f[n - 1] ^= 1; // ICV broken
                f
            }
            9 => {
                let mut f = esp_frame(&a_in, 5000, &from("10.3.0.10", i), wan("10.0.2.7"), None, None);
                f[14 + 20] ^= 0x40; // another SPI
                f
            }
            k if k % 2 == 0 => {
                seq_a += 1;
                want.push(i);
                esp_frame(&a_in, seq_a, &from("10.3.0.10", i), wan("10.0.2.7"), None, None)
            }
            _ => {
                seq_b += 1;
                want.push(i);
                esp_frame(&b_in, seq_b, &from("10.3.0.11", i), wan("10.0.2.8"), None, None)
            }
        };
        frames.push((f, WAN));
    }
    let sent = r.run(&frames);
    let got: Vec<u8> = sent[0].iter().map(|f| f[14 + 20]).collect();
    assert_eq!(got, want, "{:?}", r.nonzero());
    assert_eq!(r.counter("esp-decrypt", "decrypted"), want.len() as u64);
    assert_eq!(r.counter("esp-decrypt", "replay"), 9);
    assert_eq!(r.counter("esp-decrypt", "integrity"), 9);
    assert_eq!(r.counter("esp-decrypt", "unknown-spi"), 9);
    let (a, b) = (r.db.info(12).expect("sa 12").counters, r.db.info(14).expect("sa 14").counters);
    assert_eq!((a.packets, a.replay_drops), (seq_a, 9));
    assert_eq!((b.packets, b.integrity_failures), (seq_b, 9));
}

/// A multipoint tunnel's direct path (the FIB's next hop for each
/// client's outer address, looked up by `esp-encrypt`) gives what the
/// second pass through `ip4-lookup` and the rewrite gives: the same
/// frames, metadata and counters, without the second lookups; a client
/// whose outer address is not resolved yet takes the second pass.
#[test]
fn multipoint_direct_encapsulation_is_the_second_pass() {
    use crate::state::IpsecClient;
    let run = |direct: bool| {
        let (mut r, _) = ra_rig();
        let fast_paths = crate::state::FastPaths { gre_direct: direct, ..crate::state::FastPaths::ALL };
        r.shared.params.publish(crate::state::Params { fast_paths, ..crate::state::Params::default() });
        let mut c = ra_clients(true);
        // D: behind an address with no neighbour entry (on SA 11 too).
        c.insert_client(T_RA, a4("10.3.0.20"), IpsecClient { sa_out: 11, remote: a4("10.0.2.50") });
        r.shared.ipsec_clients.publish(c);
        let mut frames = Vec::new();
        for i in 0..60usize {
            let len = 40 + (i * 53) % 1300;
            let pkt = match i % 5 {
                0 | 1 => ip4(v4("10.0.1.2"), v4("10.3.0.10"), len, false, i as u8),
                2 => ip4(v4("10.0.1.2"), v4("10.3.0.11"), len, false, i as u8),
                3 => ip6(v6("2001:db8:1::2"), v6("2001:db8:77::10"), len.max(48), i as u8),
                _ => ip4(v4("10.0.1.2"), v4("10.3.0.20"), len, false, i as u8),
            };
            frames.push((eth(MAC_LAN, MAC_HOST, &pkt), LAN));
        }
        let mut out = Vec::new();
        for chunk in frames.chunks(25) {
            let sent = r.b.run(chunk.iter().map(|(f, i)| (f.as_slice(), *i, 0)), 0);
            for (port, q) in sent.into_iter().enumerate() {
                for (m, data) in q {
                    let meta =
                        format!("tx_if {} nh {} l3 {} vlan {} flags {:#x}", m.tx_if, m.nh, m.l3_off, m.vlan, m.flags);
                    out.push((port, data, meta));
                }
            }
        }
        let id = r.info.node_id("ip4-lookup").expect("node");
        let lookups = r.b.stats.nodes.get(usize::from(id)).map_or(0, |c| c.packets.get());
        let errors: Vec<u64> = r.b.stats.errors.iter().map(|c| c.get()).collect();
        (out, errors, lookups)
    };
    let (fast, slow) = (run(true), run(false));
    assert!(fast.0.len() >= 48, "most sent ({})", fast.0.len());
    let (mut a, mut b) = (fast.0.clone(), slow.0.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "frames and metadata");
    assert_eq!(fast.1, slow.1, "counters");
    // 48 to resolved clients go direct; D's 12 take the second pass.
    assert_eq!(slow.2 - fast.2, 48, "second lookups saved");
}

/// ESP in UDP the kernel reassembled (Linux mode), rebuilt whole by the
/// control side and queued on `Shared::esp_from_kernel`: a worker's
/// `esp-from-kernel` hands it to `esp-decrypt` (IPv6 outer here, SA 4
/// with `udp_encap`), whose inner packet leaves to the host; a packet
/// over a buffer and one neither IPv4 nor IPv6 are each counted once.
#[test]
fn esp_in_udp_from_the_kernel_is_decrypted() {
    let mut r = rig(256, 1400, sa_cfgs());
    let p4 = peer_sa(4);
    let inner6 = ip6(v6("2001:db8:18::9"), v6("2001:db8:1::2"), 1300, 9);
    let frame = esp_frame(&p4, 1, &inner6, (a6("2001:db8:2::2"), a6("2001:db8:2::1")), None, None);
    let q = Arc::clone(&r.shared.esp_from_kernel);
    assert_eq!(q.push(frame[14..].to_vec()), Ok(true), "the first packet wakes a worker");
    assert_eq!(q.push(vec![0x45; 4000]), Ok(false), "a giant: no second wake-up");
    assert_eq!(q.push(vec![0x25; 40]), Ok(false));
    r.b.poll(0);
    let sent = r.run(&[]);
    assert!(q.is_empty());
    assert_eq!(sent[0].len(), 1, "{:?}", r.nonzero());
    assert_eq!(sent[0][0][14 + 40..], inner6[40..], "the inner IPv6 packet");
    assert_eq!(r.counter("esp-from-kernel", "from-kernel"), 1);
    assert_eq!(r.counter("esp-from-kernel", "too-big-for-buffer"), 1);
    assert_eq!(r.counter("esp-from-kernel", "bad-packet"), 1);
    assert_eq!(r.counter("esp-decrypt", "decrypted"), 1);
    assert_eq!(r.db.info(4).expect("sa 4").counters.packets, 1);
    // The same datagram again (the kernel's copy of a frame tern took
    // too would be one): a replay, counted as such.
    q.push(frame[14..].to_vec()).expect("room");
    r.b.poll(0);
    assert!(r.run(&[])[0].is_empty());
    assert_eq!(r.counter("esp-decrypt", "replay"), 1);
}

/// Linux mode where the kernel has its own copy of every frame
/// (AF_PACKET): UDP fragments for the router are put back together too, so
/// that fragmented ESP in UDP reaches `esp-decrypt`; other fragmented UDP
/// (DNS here) is left to Linux once whole, counted once as such.
#[test]
fn linux_mode_reassembles_udp_fragments_for_esp_in_udp() {
    let mut r = rig(256, 1400, sa_cfgs());
    let params = crate::state::Params { linux_owns_local: true, ..(*r.shared.params.load()).clone() };
    r.shared.params.publish(params);
    let p4 = peer_sa(4);
    let inner6 = ip6(v6("2001:db8:18::9"), v6("2001:db8:1::2"), 1100, 8);
    let (peer, us) = (a6("2001:db8:2::2"), a6("2001:db8:2::1"));
    let fragment = crate::reass::testing::fragment;
    let esp = fragment(&esp_frame(&p4, 1, &inner6, (peer, us), None, None), &[256, 512], 91);
    let dns = fragment(&outer(vec![7; 900], (peer, us), Some((5353, 53))), &[512], 92);
    let frames: Vec<(Vec<u8>, u16)> = esp.into_iter().chain(dns).map(|f| (f, WAN)).collect();
    let sent = r.run(&frames);
    assert_eq!(sent[0].len(), 1, "{:?}", r.nonzero());
    assert_eq!(sent[0][0][14 + 40..], inner6[40..], "the inner IPv6 packet");
    assert_eq!(r.counter("esp-decrypt", "decrypted"), 1);
    assert_eq!(r.counter("ip6-reassembly", "datagrams"), 2);
    assert_eq!(r.counter("ip6-local", "left-to-linux"), 1, "the DNS datagram, once whole");
}

/// ESP in UDP on SA `sa` between the UDP ports `(sport, dport)`.
fn esp_between_ports(
    sa: &tern_ipsec::Sa,
    seq: u64,
    inner: &[u8],
    addrs: (IpAddr, IpAddr),
    ports: (u16, u16),
) -> Vec<u8> {
    let h = sa.header_len();
    let mut buf = vec![0u8; h + inner.len() + sa.trailer_len(inner.len())];
    buf[h..h + inner.len()].copy_from_slice(inner);
    let nh = if inner[0] >> 4 == 6 { 41 } else { 4 };
    let n = sa.encrypt(&mut buf, inner.len(), nh, seq).expect("encrypt");
    buf.truncate(n);
    outer(buf, addrs, Some(ports))
}

/// The SAs' own UDP ports instead of 4500 (`udp_encap = { src_port =
/// 4600, dst_port = 4601 }` on `ipsec6`'s SAs): ESP in UDP to 4600 is
/// decrypted, over IPv4 and IPv6 ip4-local/ip6-local send UDP 4600 to
/// `esp-decrypt`, which drops the non-ESP marker there (no IKE but on
/// 4500) and keep-alives, each frame in one counter; what tern encrypts
/// leaves from 4600 to 4601; UDP to a port no SA uses (4700) is ordinary
/// local UDP, and 4600 becomes one again once no SA uses it.
#[test]
fn esp_in_udp_on_the_sas_own_ports() {
    let ports = Some(UdpEncap { src_port: 4600, dst_port: 4601 });
    let cfgs: Vec<_> = sa_cfgs()
        .into_iter()
        .map(|c| if c.udp_encap.is_some() { SaConfig { udp_encap: ports, ..c } } else { c })
        .collect();
    let peer = |id: u32| {
        let cfg = cfgs.iter().find(|c| c.id == id).expect("sa").clone();
        tern_ipsec::Sa::new(cfg, 1, Instant::now()).expect("sa")
    };
    let (p3, p4) = (peer(3), peer(4));
    let mut r = rig(256, 1400, cfgs.clone());
    assert_eq!(&r.shared.sas.load().encap_ports()[..], &[4600]);
    let addrs6 = (a6("2001:db8:2::2"), a6("2001:db8:2::1"));
    let addrs4 = (a4("10.0.2.2"), a4("10.0.2.1"));
    let inner = |k: u8| ip6(v6("2001:db8:18::9"), v6("2001:db8:1::2"), 120, k);
    // ESP in UDP 4601 -> 4600 on SA 4: decrypted, to the lan, no move
    // reported (the source port is the SA's dst_port).
    let sent = r.run(&[(esp_between_ports(&p4, 1, &inner(1), addrs6, (4601, 4600)), WAN)]);
    assert_eq!(sent[0].len(), 1, "{:?}", r.nonzero());
    assert_eq!(r.counter("esp-decrypt", "decrypted"), 1);
    assert!(moves(&r).is_empty());
    // ip4-local sends UDP 4600 to esp-decrypt too (an SPI no SA has),
    // 4700 (no SA's port) stays local UDP: port unreachable.
    let bogus = vec![0, 0, 0x77, 0x77, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8];
    let to4600 = outer(bogus.clone(), addrs4, Some((4601, 4600)));
    let to4700 = outer(bogus.clone(), addrs4, Some((4601, 4700)));
    r.run(&[(to4600.clone(), WAN), (to4700.clone(), WAN)]);
    assert_eq!(r.counter("esp-decrypt", "unknown-spi"), 1, "{:?}", r.nonzero());
    assert_eq!(r.counter("ip4-local", "udp-port-unreachable"), 1, "{:?}", r.nonzero());
    // The non-ESP marker on 4600 over IPv4 and IPv6: no IKE there, its
    // own counter (on 4500 it is still IKE's); a keep-alive on 4600.
    let marker = vec![0, 0, 0, 0, 1, 2, 3, 4];
    r.run(&[
        (outer(marker.clone(), addrs4, Some((4601, 4600))), WAN),
        (outer(marker.clone(), addrs6, Some((4601, 4600))), WAN),
        (outer(marker.clone(), addrs4, Some((4500, 4500))), WAN),
        (outer(vec![0xff], addrs4, Some((4601, 4600))), WAN),
    ]);
    assert_eq!(r.counter("esp-decrypt", "non-esp-marker"), 2, "{:?}", r.nonzero());
    assert_eq!(r.counter("esp-decrypt", "ike-not-handled"), 1, "{:?}", r.nonzero());
    assert_eq!(r.counter("esp-decrypt", "nat-keepalive"), 1, "{:?}", r.nonzero());
    // What tern encrypts on SA 3 leaves from 4600 to 4601.
    let pkt = ip4(v4("10.0.1.2"), v4("198.20.1.1"), 100, false, 3);
    let sent = r.run(&[(eth(MAC_LAN, MAC_HOST, &pkt), LAN)]);
    assert_eq!(sent[1].len(), 1, "{:?}", r.nonzero());
    let l4 = &sent[1][0][14 + 40..];
    assert_eq!((sent[1][0][14 + 6], &l4[..4]), (17, &[0x11, 0xf8, 0x11, 0xf9][..]), "UDP 4600 -> 4601");
    let mut esp = l4[8..].to_vec();
    let (spi, lo) = tern_ipsec::parse_header(&esp).expect("esp");
    assert_eq!(spi, p3.spi);
    let d = p3.decrypt(&mut esp, p3.replay_check(lo).expect("new")).expect("the peer decrypts it");
    let got = &esp[d.inner];
    assert_eq!((got[8], &got[12..]), (pkt[8] - 1, &pkt[12..]), "the inner packet, forwarded");
    // No SA uses 4600 any more: ordinary local UDP again.
    r.db.del(3).expect("del");
    r.db.del(4).expect("del");
    r.db.publish();
    assert!(r.shared.sas.load().encap_ports().is_empty());
    let before = r.counter("esp-decrypt", "unknown-spi");
    r.run(&[(to4600, WAN)]);
    assert_eq!(r.counter("esp-decrypt", "unknown-spi"), before);
    assert_eq!(r.counter("ip4-local", "udp-port-unreachable"), 2, "{:?}", r.nonzero());
}
