//! A route-based IPsec tunnel configured from the file, end to end on
//! memory ports: what tern encrypts decrypts with an independent SA object
//! (tern-ipsec's, built from the same keys as the peer would hold), what
//! the peer encrypts comes out of the lan as the inner packet; replays,
//! corrupted ICVs, unknown SPIs and truncated ESP each land in their
//! counter; the API adds, shows and deletes SAs (10,000 in one call); a
//! reload replaces an SA in one publication. (The netns test with scapy as
//! the peer is crates/tern/tests/netns_ipsec.rs.)

mod common;

use common::pkt::*;
use common::poll_until;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};
use tern_control::api::{IpsecSaAddArgs, IpsecSaShowArgs};
use tern_control::commands;
use tern_control::config::{self, IpsecSaCfg, SecretHex, SpiValue};
use tern_control::router::Router;
use tern_ipsec::Sa;

const TERN_LAN: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const TERN_WAN: [u8; 6] = [0x02, 0, 0, 0, 2, 1];
const HOST_A: [u8; 6] = [0x02, 0, 0, 0, 1, 0xaa];
const PEER: [u8; 6] = [0x02, 0, 0, 0, 2, 7];

const GCM_KEY_OUT: &str = "0x00112233445566778899aabbccddeeff01020304";
const GCM_KEY_IN: &str = "0xffeeddccbbaa99887766554433221100a0b0c0d0";

fn config() -> String {
    format!(
        r#"
[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24"]

[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["192.0.2.1/24"]

[[ipsec_sa]]
id = 10
spi = 0x1001
crypto = "aes-128-gcm"
key = "{GCM_KEY_OUT}"

[[ipsec_sa]]
id = 20
spi = 0x2001
crypto = "aes-128-gcm"
key = "{GCM_KEY_IN}"
replay_window = 64

[[tunnel]]
name = "ipsec0"
type = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.7"
sa_out = 10
sa_in = [20]
addresses = ["172.16.1.1/30"]

[[route]]
prefix = "10.9.0.0/16"
interface = "ipsec0"

[[neighbor_entry]]
interface = "wan"
address = "192.0.2.7"
mac = "02:00:00:00:02:07"

[[neighbor_entry]]
interface = "lan"
address = "10.0.1.2"
mac = "02:00:00:00:01:aa"
"#
    )
}

fn a4(s: &str) -> Ipv4Addr {
    s.parse().expect("ipv4")
}

/// The peer's copy of an SA of the configuration (same keys, its own
/// sequence numbers and window).
fn peer_sa(plan: &config::Plan, id: u32) -> Sa {
    let p = plan.sas.iter().find(|s| s.id == id).expect("SA in the plan");
    let cfg = tern_control::ipsec::sa_config(p).expect("config");
    Sa::new(cfg, 1, Instant::now()).expect("SA")
}

/// Frames that left `iface` within 2 s once one did (or none).
fn sent(r: &mut Router, iface: &str, want: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    while out.len() < want && Instant::now() < deadline {
        if !r.poll() {
            std::thread::sleep(Duration::from_millis(1));
        }
        out.extend(r.mem_ports(iface).expect("iface")[0].take_sent());
    }
    out
}

/// Runs the control loop until the workers have handled what was injected
/// (the counter moved), then returns what left `iface` (nothing expected).
fn settle(r: &mut Router, node: &str, error: &str, before: u64) {
    poll_until(r, &format!("{node}/{error}"), |r| r.counter(node, error) > before);
}

fn inner_packet(n: u8) -> Vec<u8> {
    ipv4(a4("10.0.1.2"), a4("10.9.0.5"), 17, 64, &udp4(a4("10.0.1.2"), a4("10.9.0.5"), 7, 9, &[n; 40]))
}

/// The peer's ESP frame to tern: `inner` encrypted on `sa` with `seq`.
fn peer_frame(sa: &Sa, inner: &[u8], seq: u64) -> Vec<u8> {
    let h = sa.header_len();
    let mut buf = vec![0u8; h + inner.len() + sa.trailer_len(inner.len())];
    buf[h..h + inner.len()].copy_from_slice(inner);
    let n = sa.encrypt(&mut buf, inner.len(), 4, seq).expect("encrypt");
    buf.truncate(n);
    eth(TERN_WAN, PEER, 0x0800, &ipv4(a4("192.0.2.7"), a4("192.0.2.1"), 50, 64, &buf))
}

#[test]
fn tunnel_encrypts_and_decrypts_with_the_configured_sas() {
    let plan = config::parse(&config(), "test.toml", Path::new(".")).expect("config");
    let mut r = Router::start(plan.clone()).expect("router");
    assert_eq!(r.ipsec().len(), 2, "the configuration's SAs are installed");

    // lan -> tunnel: ESP on the wan, SPI 0x1001, sequence numbers 1, 2, 3.
    let peer_in = peer_sa(&plan, 10);
    for n in 1..=3u8 {
        assert!(r.mem_ports("lan").expect("lan")[0].inject(&eth(TERN_LAN, HOST_A, 0x0800, &inner_packet(n))));
        let out = sent(&mut r, "wan", 1);
        assert_eq!(out.len(), 1, "packet {n}: one ESP frame");
        let f = &out[0];
        assert_eq!(f.get(0..6), Some(&PEER[..]));
        let outer = parse_v4(f).expect("outer IPv4");
        assert_eq!((outer.src, outer.dst, outer.proto), (a4("192.0.2.1"), a4("192.0.2.7"), 50));
        assert!(outer.header_ok);
        let (spi, seq) = tern_ipsec::parse_header(&outer.l4).expect("ESP");
        assert_eq!((spi, seq), (0x1001, u32::from(n)));
        let mut esp = outer.l4.clone();
        let d = peer_in.decrypt(&mut esp, u64::from(seq)).expect("the peer decrypts it");
        assert_eq!(d.next_header, 4);
        let inner = parse_v4(&[&[0u8; 12][..], &[8, 0], &esp[d.inner.clone()]].concat()).expect("inner");
        assert_eq!(inner.dst, a4("10.9.0.5"));
        assert_eq!(inner.ttl, 63, "routed once before the tunnel");
        assert!(inner.l4.ends_with(&[n; 40]));
    }
    let info = r.ipsec().info(10).expect("SA 10");
    assert_eq!(info.counters.packets, 3);

    // Peer -> tern: the inner packet leaves the lan.
    let peer_out = peer_sa(&plan, 20);
    let back = ipv4(a4("10.9.0.5"), a4("10.0.1.2"), 17, 64, &udp4(a4("10.9.0.5"), a4("10.0.1.2"), 9, 7, &[0x5a; 33]));
    let frame1 = peer_frame(&peer_out, &back, 1);
    assert!(r.mem_ports("wan").expect("wan")[0].inject(&frame1));
    let out = sent(&mut r, "lan", 1);
    assert_eq!(out.len(), 1, "the inner packet on the lan");
    let inner = parse_v4(&out[0]).expect("inner");
    assert_eq!((inner.src, inner.dst), (a4("10.9.0.5"), a4("10.0.1.2")));
    assert!(inner.l4.ends_with(&[0x5a; 33]));
    assert_eq!(r.ipsec().info(20).expect("SA 20").counters.packets, 1);

    // The same frame again: a replay, counted on the SA and the node.
    let before = r.counter("esp-decrypt", "replay");
    assert!(r.mem_ports("wan").expect("wan")[0].inject(&frame1));
    settle(&mut r, "esp-decrypt", "replay", before);
    assert_eq!(r.ipsec().info(20).expect("SA 20").counters.replay_drops, 1);

    // A flipped ICV byte.
    let mut bad = peer_frame(&peer_out, &back, 2);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let before = r.counter("esp-decrypt", "integrity");
    assert!(r.mem_ports("wan").expect("wan")[0].inject(&bad));
    settle(&mut r, "esp-decrypt", "integrity", before);
    assert_eq!(r.ipsec().info(20).expect("SA 20").counters.integrity_failures, 1);

    // An SPI no SA has.
    let mut other = peer_frame(&peer_out, &back, 3);
    other[14 + 20 + 3] ^= 0x40;
    let before = r.counter("esp-decrypt", "unknown-spi");
    assert!(r.mem_ports("wan").expect("wan")[0].inject(&other));
    settle(&mut r, "esp-decrypt", "unknown-spi", before);

    // ESP cut short.
    let esp = [0u8, 0, 0x20, 0x01, 0, 0, 0, 4, 1, 2, 3];
    let cut = eth(TERN_WAN, PEER, 0x0800, &ipv4(a4("192.0.2.7"), a4("192.0.2.1"), 50, 64, &esp));
    let before = r.counter("esp-decrypt", "truncated");
    assert!(r.mem_ports("wan").expect("wan")[0].inject(&cut));
    settle(&mut r, "esp-decrypt", "truncated", before);

    // None of them reached the lan, and sequence number 4 still does.
    assert!(r.mem_ports("lan").expect("lan")[0].take_sent().is_empty());
    assert!(r.mem_ports("wan").expect("wan")[0].inject(&peer_frame(&peer_out, &back, 4)));
    assert_eq!(sent(&mut r, "lan", 1).len(), 1);
    let c = r.ipsec().info(20).expect("SA 20").counters;
    assert_eq!((c.packets, c.replay_drops, c.integrity_failures), (2, 1, 1));

    // The API and the CLI tell the tunnel and the SAs, never the keys.
    let tunnels = commands::ipsec_tunnel_show(&r);
    assert_eq!(tunnels.len(), 1);
    // 1500 less AES-GCM's most: outer 20, ESP 8, IV 8, padding 3, trailer 2, ICV 16.
    assert_eq!(tunnels[0].mtu, 1443);
    assert_eq!((tunnels[0].tx_packets, tunnels[0].rx_packets), (3, 2));
    let shown =
        serde_json::to_string(&commands::ipsec_sa_show(&r, &IpsecSaShowArgs::default()).expect("show")).expect("json");
    assert!(!shown.contains("00112233") && !shown.contains("ffeeddcc"), "{shown}");
    let cfg_text = commands::config_show(&r).expect("config show");
    assert!(!cfg_text.contains("00112233") && cfg_text.contains("<redacted>"), "{cfg_text}");
    r.shutdown();
}

fn api_sa(id: u32) -> IpsecSaCfg {
    IpsecSaCfg {
        id,
        spi: SpiValue::Number(i64::from(0x10_0000 + id)),
        crypto: "aes-128-cbc".into(),
        integ: "hmac-sha1-96".into(),
        key: SecretHex(format!("0x{:032x}", u128::from(id) * 0x1234_5678_9abc)),
        integ_key: Some(SecretHex(format!("0x{:040x}", u128::from(id)))),
        esn: id.is_multiple_of(2),
        replay_window: 128,
        udp_encap: false,
        udp_src_port: None,
        udp_dst_port: None,
        soft_packets: None,
        soft_bytes: None,
        soft_secs: None,
        hard_packets: None,
        hard_bytes: None,
        hard_secs: None,
    }
}

#[test]
fn api_adds_ten_thousand_sas_in_one_call_shows_and_deletes_them() {
    let plan = config::parse(&config(), "test.toml", Path::new(".")).expect("config");
    let mut r = Router::start(plan).expect("router");
    let sas: Vec<IpsecSaCfg> = (1000..11_000).map(api_sa).collect();
    let t0 = Instant::now();
    let msg = commands::ipsec_sa_add(&mut r, IpsecSaAddArgs { sas }).expect("add");
    eprintln!("10,000 SAs added in {:.2?}: {msg}", t0.elapsed());
    assert_eq!(r.ipsec().len(), 10_002);
    let one = commands::ipsec_sa_show(&r, &IpsecSaShowArgs { id: Some(5000), limit: None }).expect("show");
    assert_eq!(one.sas.len(), 1);
    let v = &one.sas[0];
    assert_eq!(
        (v.spi, v.crypto.as_str(), v.integ.as_str(), v.esn),
        (0x10_0000 + 5000, "aes-128-cbc", "hmac-sha1-96", true)
    );
    assert_eq!((v.source.as_str(), v.state.as_str(), v.packets), ("api", "active", 0));
    let some = commands::ipsec_sa_show(&r, &IpsecSaShowArgs { id: None, limit: Some(5) }).expect("show");
    assert_eq!((some.total, some.sas.len()), (10_002, 5));

    // All or nothing: one bad SA (a duplicate id) in a batch adds none.
    let mut bad: Vec<IpsecSaCfg> = (20_000..20_010).map(api_sa).collect();
    bad.push(api_sa(1000));
    assert!(commands::ipsec_sa_add(&mut r, IpsecSaAddArgs { sas: bad }).is_err());
    assert_eq!(r.ipsec().len(), 10_002);
    // A key of the wrong length names the SA and never the key.
    let mut short = api_sa(30_000);
    short.key = SecretHex("0xabcdef".into());
    let e = commands::ipsec_sa_add(&mut r, IpsecSaAddArgs { sas: vec![short] }).expect_err("short key");
    assert!(e.message.contains("id 30000") && e.message.contains("16-byte") && !e.message.contains("abcdef"), "{e}");

    // Metrics: totals of all, series for the first 1000 only.
    r.ipsec_mut().refresh_metrics();
    let m = r.ipsec().metrics();
    assert_eq!((m.sas, m.per_sa.len()), (10_002, tern_control::ipsec::METRICS_SA_SERIES));

    // Delete: the configuration's tunnel SAs are refused, the rest go.
    assert!(commands::ipsec_sa_del(&mut r, &[10]).is_err());
    let ids: Vec<u32> = (1000..11_000).collect();
    commands::ipsec_sa_del(&mut r, &ids).expect("del");
    assert_eq!(r.ipsec().len(), 2);
    assert!(commands::ipsec_sa_del(&mut r, &[1000]).is_err(), "gone");
    r.shutdown();
}

#[test]
fn reload_replaces_an_sa_and_rekeys_the_tunnel() {
    let dir = std::env::temp_dir().join(format!("tern-ipsec-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("tern.toml");
    std::fs::write(&file, config()).expect("write");
    let plan = config::load(&file).expect("config");
    let mut r = Router::start(plan).expect("router");
    // A new outbound SA 11 and the tunnel moved onto it; SA 20's window
    // changed (replaced in place).
    let text = config()
        .replace("replay_window = 64", "replay_window = 128")
        .replace("sa_out = 10", "sa_out = 11")
        .replace(
            "[[tunnel]]",
            "[[ipsec_sa]]\nid = 11\nspi = 0x1002\ncrypto = \"aes-256-cbc\"\ninteg = \"hmac-sha256-128\"\nkey = \"0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\"\ninteg_key = \"0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\"\n\n[[tunnel]]",
        );
    std::fs::write(&file, &text).expect("write");
    let report = tern_control::reload::reload(&mut r, &file).expect("reload");
    let joined = report.changes.join("\n");
    assert!(joined.contains("ipsec SA 11 (SPI 0x1002) added"), "{joined}");
    assert!(joined.contains("ipsec SA 20 (SPI 0x2001) replaced"), "{joined}");
    assert!(joined.contains("tunnel ipsec0: sa_out 11"), "{joined}");
    assert_eq!(r.ipsec().info(20).expect("20").replay_window, 128);
    // The tunnel's MTU follows its new outbound SA (AES-256-CBC +
    // HMAC-SHA256-128: 20 + 8 + 16 + 15 + 2 + 16 = 77 bytes).
    assert_eq!(commands::ipsec_tunnel_show(&r)[0].mtu, 1423);
    // Packets now leave on SPI 0x1002.
    let inner = inner_packet(9);
    assert!(r.mem_ports("lan").expect("lan")[0].inject(&eth(TERN_LAN, HOST_A, 0x0800, &inner)));
    let out = sent(&mut r, "wan", 1);
    let outer = parse_v4(&out[0]).expect("outer");
    assert_eq!(tern_ipsec::parse_header(&outer.l4).expect("ESP"), (0x1002, 1));
    // A broken SA refuses the whole reload: nothing changes.
    std::fs::write(&file, text.replace("spi = 0x1002", "spi = 0x10")).expect("write");
    assert!(tern_control::reload::reload(&mut r, &file).is_err());
    assert_eq!(r.ipsec().info(11).expect("11").spi, 0x1002);
    r.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tern capture ipsec0`: the tunnel's inner packets, both ways, under a
/// made-up Ethernet header; the ESP on the wan is not among them.
#[test]
fn capture_on_the_tunnel_shows_inner_packets() {
    use tern_control::api::{CaptureIdArgs, CaptureStartArgs, Command, Reply};
    use tern_control::commands::{OpsState, execute};
    let plan = config::parse(&config(), "test.toml", Path::new(".")).expect("config");
    let mut r = Router::start(plan.clone()).expect("router");
    let mut st = OpsState::new(None);
    let start = CaptureStartArgs { target: "ipsec0".into(), count: Some(2), ..CaptureStartArgs::default() };
    let id = match execute(&mut r, &mut st, Command::CaptureStart(start)).expect("a tunnel capture starts") {
        Reply::Capture(b) => b.id,
        other => panic!("unexpected {other:?}"),
    };
    // One packet into the tunnel (sent on it), one out of it (received).
    let out = inner_packet(1);
    assert!(r.mem_ports("lan").expect("lan")[0].inject(&eth(TERN_LAN, HOST_A, 0x0800, &out)));
    assert_eq!(sent(&mut r, "wan", 1).len(), 1, "the ESP frame left");
    let back = ipv4(a4("10.9.0.5"), a4("10.0.1.2"), 17, 64, &udp4(a4("10.9.0.5"), a4("10.0.1.2"), 9, 7, &[0x5a; 33]));
    assert!(r.mem_ports("wan").expect("wan")[0].inject(&peer_frame(&peer_sa(&plan, 20), &back, 1)));
    assert_eq!(sent(&mut r, "lan", 1).len(), 1, "the inner packet left");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut frames = Vec::new();
    while frames.len() < 2 {
        assert!(Instant::now() < deadline, "captured only {}", frames.len());
        r.poll();
        st.poll(&r);
        if let Ok(Reply::Capture(b)) = execute(&mut r, &mut st, Command::CaptureRead(CaptureIdArgs { id })) {
            frames.extend(b.frames);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(frames.len(), 2, "{frames:?}");
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let fake_eth = hex(&[[0u8; 12].as_slice(), &[8, 0]].concat());
    let tx = frames.iter().find(|f| f.dir == "tx").expect("a transmitted copy");
    let rx = frames.iter().find(|f| f.dir == "rx").expect("a received copy");
    // Sent: routed once (TTL 63, checksum updated) before encryption.
    let mut routed = out.clone();
    routed[8] = 63;
    let c = tern_wire::checksum::ttl_decremented(u16::from_be_bytes([out[10], out[11]]));
    routed[10..12].copy_from_slice(&c.to_be_bytes());
    assert_eq!(tx.data, fake_eth.clone() + &hex(&routed), "the inner packet sent into the tunnel");
    assert_eq!(rx.data, fake_eth + &hex(&back), "the inner packet as decrypted");
    r.shutdown();
}

/// The ICMP error tern answers on the lan for `big` (sent there with
/// DF): a destination unreachable's code and next-hop MTU.
fn icmp_for(r: &mut Router, big: &[u8]) -> Option<(u8, u16)> {
    assert!(r.mem_ports("lan").expect("lan")[0].inject(&eth(TERN_LAN, HOST_A, 0x0800, big)));
    let out = sent(r, "lan", 1);
    let v = parse_v4(out.first().expect("an ICMP error on the lan")).expect("IPv4");
    match parse_icmp4(&v.l4)? {
        Icmpv4Repr::DstUnreachable { code, next_hop_mtu, .. } => Some((code, next_hop_mtu)),
        _ => None,
    }
}

/// A tunnel without a configured `mtu` takes its outer interface's (the
/// route to the remote leaves by `wan`) less what ESP with its outbound SA
/// adds, follows that interface's MTU when it changes, and says so in
/// "fragmentation needed"; a configured `mtu` wins.
#[test]
fn tunnel_mtu_follows_the_outer_interface() {
    // wan at 1400: 1400 - 57 (AES-GCM: outer 20, ESP 8, IV 8, padding 3,
    // trailer 2, ICV 16).
    let text = config().replace("addresses = [\"192.0.2.1/24\"]", "addresses = [\"192.0.2.1/24\"]\nmtu = 1400");
    let plan = config::parse(&text, "test.toml", Path::new(".")).expect("config");
    let (wan, tunnel) = (plan.iface_index("wan").expect("wan"), plan.iface_index("ipsec0").expect("ipsec0"));
    let mut r = Router::start(plan).expect("router");
    let mtu = |r: &Router| commands::ipsec_tunnel_show(r)[0].mtu;
    let deadline = Instant::now() + Duration::from_secs(5);
    while mtu(&r) != 1343 && Instant::now() < deadline {
        r.poll();
    }
    assert_eq!(mtu(&r), 1343, "1400 - 57");
    let big = |len: usize| {
        let mut p =
            ipv4(a4("10.0.1.2"), a4("10.9.0.5"), 17, 64, &udp4(a4("10.0.1.2"), a4("10.9.0.5"), 7, 9, &vec![1u8; len]));
        p[6] = 0x40; // DF
        p[10..12].copy_from_slice(&[0, 0]);
        let c = csum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    };
    // 1344 bytes with DF: one too many.
    let e = icmp_for(&mut r, &big(1344 - 28));
    assert_eq!(e, Some((4, 1343)), "fragmentation needed, MTU 1343");
    // 1343 bytes fit: encrypted to the peer.
    assert!(r.mem_ports("lan").expect("lan")[0].inject(&eth(TERN_LAN, HOST_A, 0x0800, &big(1343 - 28))));
    assert_eq!(sent(&mut r, "wan", 1).len(), 1, "a 1343-byte packet leaves encrypted");

    // The outer interface grows to the most the lanes carry (a device of
    // 9000 is refused at start; the interface tops out at 1778): the
    // tunnel follows at once.
    assert!(r.set_interface_mtu(wan, 1778).expect("wan mtu"));
    assert_eq!(mtu(&r), 1778 - 57);
    let e = icmp_for(&mut r, &big(1778 - 57 + 1 - 28));
    assert_eq!(e, Some((4, 1721)), "fragmentation needed, MTU 1721");

    // A configured MTU wins, whatever the outer interface does.
    assert!(r.set_interface_mtu(tunnel, 1200).expect("tunnel mtu"));
    assert!(r.set_interface_mtu(wan, 1500).expect("wan mtu"));
    r.poll();
    assert_eq!(mtu(&r), 1200);
    r.shutdown();
}
