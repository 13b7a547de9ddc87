//! The real `tern run` between two hosts in network namespaces, fed with
//! crafted frames from raw sockets: what the hosts see and what tern counts.
//!
//! host1 (10.0.1.2) eth0 -- lan0 [tern] wan0 -- eth0 host2 (10.0.2.2)
//!
//! Runs once over AF_PACKET and once with the automatic driver choice
//! (AF_XDP where it works), and once with the full Internet table loaded.
//! Needs root, iproute2, ping and ethtool; says why and passes without.

use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tern_io::AfPacketPort;
use tern_packet::{PacketPool, PoolConfig, Port};

mod common;
use common::{Lab, cli, counter, log_of, must, run_tern, sh};
use tern_testkit::packet::{Frame, Icmpv4Repr, csum, eth_padded as eth, ethertype, parse_icmp4, parse_v4};

fn skip_reason() -> Option<&'static str> {
    common::lab_missing()
}

impl Lab {
    fn new(tag: &str) -> Lab {
        let lab = Lab::two_hosts(&format!("tnf{}{tag}", std::process::id()));
        let r = &lab.ns[1];
        must("ip", &["-n", r, "link", "set", "lan0", "up"]);
        must("ip", &["-n", r, "link", "set", "wan0", "up"]);
        lab
    }

    /// Starts `tern run` in the router namespace with `extra` config.
    fn start(&mut self, driver: &str, extra: &str) {
        let cfg = format!(
            r#"
[[interface]]
name = "lan0"
device = "lan0"
driver = "{driver}"
addresses = ["10.0.1.1/24", "2001:db8:1::1/64"]

[[interface]]
name = "wan0"
device = "wan0"
driver = "{driver}"
addresses = ["10.0.2.1/24", "2001:db8:2::1/64"]

[api]
socket = "{}"

[metrics]
listen = ""
{extra}
"#,
            self.socket()
        );
        let path = self.dir.join("tern.toml");
        std::fs::write(&path, cfg).expect("config");
        run_tern(self, &path);
    }

    fn log(&self) -> String {
        log_of(self)
    }

    fn cli(&self, args: &[&str]) -> Output {
        cli(self, args)
    }

    fn counter(&self, name: &str) -> u64 {
        counter(self, name)
    }

    fn mac(&self, ns: &str, dev: &str) -> [u8; 6] {
        let out = must("ip", &["-n", ns, "-j", "link", "show", dev]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j");
        let s = v[0]["address"].as_str().expect("address").to_string();
        let mut m = [0u8; 6];
        for (b, part) in m.iter_mut().zip(s.split(':')) {
            *b = u8::from_str_radix(part, 16).expect("hex");
        }
        m
    }

    fn ping_ok(&self, ns: usize, args: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut v = vec!["netns", "exec", self.ns[ns].as_str(), "ping", "-n", "-c", "1", "-W", "1"];
            v.extend_from_slice(args);
            if sh("ip", &v).status.success() {
                return;
            }
            assert!(Instant::now() < deadline, "ping {args:?} never answered; tern log:\n{}", self.log());
        }
    }
}

/// A raw-socket endpoint in a namespace: sends frames, and counts received
/// frames containing `marker` (copies of the first ones kept).
struct Raw {
    tx: std::sync::mpsc::Sender<Vec<u8>>,
    seen: Arc<AtomicU64>,
    kept: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Raw {
    fn open(ns: &str, dev: &str, marker: &'static [u8]) -> Raw {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let seen = Arc::new(AtomicU64::new(0));
        let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (ns, dev) = (ns.to_string(), dev.to_string());
        let (s2, k2, st2) = (Arc::clone(&seen), Arc::clone(&kept), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            tern_io::netdev::enter_netns(&ns).expect("netns");
            let mut port = AfPacketPort::open(&dev).expect("af_packet");
            let mut pool = PacketPool::new(PoolConfig { frames: 4096, ..PoolConfig::default() }).expect("pool");
            let _ = ready_tx.send(());
            let mut got = Vec::new();
            while !st2.load(Ordering::Relaxed) {
                while let Ok(f) = rx.try_recv() {
                    port.send_raw(&f).expect("send");
                }
                got.clear();
                port.rx_burst(&mut pool, &mut got, 256);
                for &p in &got {
                    let d = pool.data(p);
                    if d.windows(marker.len()).any(|w| w == marker) {
                        s2.fetch_add(1, Ordering::Relaxed);
                        let mut k = k2.lock().expect("lock");
                        if k.len() < 64 {
                            k.push(d.to_vec());
                        }
                    }
                }
                pool.free_all(&got);
                if got.is_empty() {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        ready_rx.recv_timeout(Duration::from_secs(10)).expect("raw socket ready");
        Raw { tx, seen, kept, stop, thread: Some(thread) }
    }

    fn send(&self, f: Vec<u8>) {
        self.tx.send(f).expect("send");
    }

    fn wait(&self, n: u64, what: &str) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.seen.load(Ordering::Relaxed) < n {
            assert!(Instant::now() < deadline, "{what}: {} of {n} frames", self.seen.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(5));
        }
        self.kept.lock().expect("lock").clone()
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An IPv4/UDP packet 7777 -> 7777 (ident 1, DF, no UDP checksum: allowed
/// over IPv4).
fn ipv4_udp(src: [u8; 4], dst: [u8; 4], ttl: u8, payload: &[u8]) -> Vec<u8> {
    Frame::new().ipv4(src, dst).ident(1).df().ttl(ttl).udp(7777, 7777).no_checksum().payload(payload).build()
}

fn crafted(driver: &str, tag: &str) {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::new(tag);
    lab.start(driver, "");
    // Resolve neighbours both ways first.
    lab.ping_ok(0, &["10.0.2.2"]);
    lab.ping_ok(0, &["2001:db8:2::2"]);
    let tern_lan = lab.mac(&lab.ns[1], "lan0");
    let h1_mac = lab.mac(&lab.ns[0], "eth0");
    let h1 = Raw::open(&lab.ns[0], "eth0", b"TERNTEST");
    let h2 = Raw::open(&lab.ns[2], "eth0", b"TERNTEST");
    let (a, b) = ([10, 0, 1, 2], [10, 0, 2, 2]);

    // A good packet, then one with a wrong header checksum, one truncated.
    h1.send(eth(tern_lan, h1_mac, 0x0800, &ipv4_udp(a, b, 64, b"TERNTEST good")));
    let mut bad = ipv4_udp(a, b, 64, b"TERNTEST bad checksum");
    bad[10] ^= 0x5a;
    h1.send(eth(tern_lan, h1_mac, 0x0800, &bad));
    let mut cut = ipv4_udp(a, b, 64, b"TERNTEST truncated, its total length says more than the frame holds");
    cut.truncate(40);
    cut.extend_from_slice(b"TERNTEST");
    h1.send(eth(tern_lan, h1_mac, 0x0800, &cut));
    // An MTU-sized packet (1500 bytes of IP).
    let big = ipv4_udp(a, b, 64, &[b"TERNTEST".as_slice(), &[0x42; 1500 - 28 - 8]].concat());
    assert_eq!(big.len(), 1500);
    h1.send(eth(tern_lan, h1_mac, 0x0800, &big));
    let got = h2.wait(2, "good and MTU-sized packets at host2");
    let lens: Vec<usize> = got.iter().map(|f| f.len()).collect();
    assert!(lens.contains(&1514), "the 1500-byte packet arrived whole: {lens:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while lab.counter("ip4-input/bad-checksum") < 1 || lab.counter("ip4-input/truncated") < 1 {
        assert!(
            Instant::now() < deadline,
            "counters: {}\ntern log:\n{}",
            String::from_utf8_lossy(&lab.cli(&["stats", "show", "errors", "--all"]).stdout),
            lab.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(h2.seen.load(Ordering::Relaxed), 2, "the bad and truncated packets never reach host2");

    // TTL 1: time exceeded back to host1, quoting the probe.
    h1.send(eth(tern_lan, h1_mac, 0x0800, &ipv4_udp(a, b, 1, b"TERNTEST ttl one")));
    // (host2 also answers the earlier UDP with port unreachable, which
    // quotes the marker too: look for the time exceeded.)
    let deadline = Instant::now() + Duration::from_secs(20);
    let icmp = loop {
        let back = h1.kept.lock().expect("lock").clone();
        let time_exceeded = |v: &&tern_testkit::packet::V4| {
            matches!(parse_icmp4(&v.l4), Some(Icmpv4Repr::TimeExceeded { code: 0, .. }))
        };
        if let Some(v) = back.iter().filter_map(|f| parse_v4(f)).find(|v| time_exceeded(&v)) {
            break v;
        }
        assert!(Instant::now() < deadline, "no time exceeded at host1");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(icmp.src, std::net::Ipv4Addr::new(10, 0, 1, 1), "from tern's lan address");

    // IPv6 with hop-by-hop and destination-options headers passes.
    let (s6, d6): ([u8; 16], [u8; 16]) = (
        "2001:db8:1::2".parse::<std::net::Ipv6Addr>().expect("v6").octets(),
        "2001:db8:2::2".parse::<std::net::Ipv6Addr>().expect("v6").octets(),
    );
    let mut ext = vec![60, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0];
    let payload = b"TERNTEST ipv6 with extension headers";
    let udp_len = (8 + payload.len()) as u16;
    let mut udp = vec![0x1e, 0x61, 0x1e, 0x61];
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut pseudo = s6.to_vec();
    pseudo.extend_from_slice(&d6);
    pseudo.extend_from_slice(&u32::from(udp_len).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    pseudo.extend_from_slice(&udp);
    let c = csum(&pseudo);
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    ext.extend_from_slice(&udp);
    let mut ip6 = vec![0x60, 0, 0, 0];
    ip6.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    ip6.extend_from_slice(&[0, 64]);
    ip6.extend_from_slice(&s6);
    ip6.extend_from_slice(&d6);
    ip6.extend_from_slice(&ext);
    h1.send(eth(tern_lan, h1_mac, 0x86dd, &ip6));
    let got = h2.wait(3, "IPv6 with extension headers at host2");
    let f = got.iter().find(|f| f.len() > 54 && ethertype(f) == Some(0x86dd)).expect("the IPv6 frame");
    assert_eq!(f[14 + 6], 0, "hop-by-hop header kept");
    assert_eq!(f[14 + 7], 63, "hop limit decremented");
    assert_eq!(&f[14 + 40..], &ext[..], "extension headers and payload untouched");
}

#[test]
fn crafted_frames_over_af_packet() {
    crafted("afpacket", "p");
}

#[test]
fn crafted_frames_over_the_default_driver() {
    crafted("auto", "x");
}

/// Busy polling is on by default where it engages: with the default idle =
/// "sleep", once UDP datagrams to port 9 taught tern the ingress veth's NAPI
/// id, the worker busy-polls while traffic flows (the device then carries
/// tern's busy-poll NAPI settings), hands the NAPI back to the kernel when
/// it goes to sleep (the settings as they were), and forwards what comes
/// after the quiet spell.
#[test]
fn busy_polling_follows_the_traffic_by_default() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::new("b");
    lab.start("afxdp", "");
    lab.ping_ok(0, &["10.0.2.2"]);
    let defer =
        || common::netns_exec(&lab.ns[1], &["cat", "/sys/class/net/lan0/napi_defer_hard_irqs"]).trim().to_string();
    let quiet = defer();
    assert_ne!(quiet, "1000", "not tuned before busy polling engages");
    let engaged = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h1 = lab.ns[0].clone();
        let (engaged, stop) = (&engaged, &stop);
        let sender = s.spawn(move || {
            tern_io::netdev::enter_netns(&h1).expect("netns");
            let sock = std::net::UdpSocket::bind(("10.0.1.2", 0)).expect("bind");
            sock.set_broadcast(true).expect("SO_BROADCAST");
            while !engaged.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                let _ = sock.send_to(b"napi probe", (std::net::Ipv4Addr::BROADCAST, 9));
                // Pacing; the main thread watches the log.
                std::thread::sleep(Duration::from_millis(20));
            }
            while !stop.load(Ordering::Relaxed) {
                let _ = sock.send_to(b"flood", ("10.0.2.2", 5000));
            }
        });
        let wait = |what: &str, cond: &mut dyn FnMut() -> bool| {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !cond() {
                if Instant::now() > deadline {
                    stop.store(true, Ordering::Relaxed);
                    panic!("{what}; tern log:\n{}", lab.log());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        wait("busy polling never engaged", &mut || lab.log().contains("busy polling through the helper socket"));
        engaged.store(true, Ordering::Relaxed);
        wait("never busy-polling under the flood", &mut || defer() == "1000");
        stop.store(true, Ordering::Relaxed);
        sender.join().expect("sender");
    });
    let parked = || defer() == quiet;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !parked() {
        assert!(Instant::now() < deadline, "the idle worker kept the NAPI; tern log:\n{}", lab.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    // Parked: the kernel drives the queue again and wakes the worker.
    let h1 = Raw::open(&lab.ns[0], "eth0", b"TERNQUIET");
    let h2 = Raw::open(&lab.ns[2], "eth0", b"TERNQUIET");
    let (tern_lan, h1_mac) = (lab.mac(&lab.ns[1], "lan0"), lab.mac(&lab.ns[0], "eth0"));
    for _ in 0..20 {
        h1.send(eth(tern_lan, h1_mac, 0x0800, &ipv4_udp([10, 0, 1, 2], [10, 0, 2, 2], 64, b"TERNQUIET")));
    }
    h2.wait(20, "packets after the quiet spell at host2");
}

/// The full Internet table loaded; traffic to 254 destinations and to
/// random destinations inside the table's prefixes arrives at host2 (the
/// table's next hop).
#[test]
fn full_table_forwarding() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let table = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/full-table-2025.txt.gz");
    if !table.exists() {
        eprintln!("skipped: {} not found", table.display());
        return;
    }
    let routes = tern_fib::routefile::load(&table).expect("table");
    let v4: Vec<(u32, u8)> = routes
        .iter()
        .filter_map(|(p, _)| match p {
            tern_fib::Prefix::V4 { addr, len } => Some((u32::from(*addr), *len)),
            _ => None,
        })
        .collect();
    assert!(v4.len() > 800_000);
    let mut lab = Lab::new("t");
    lab.start(
        "auto",
        &format!("[[route_file]]\npath = \"{}\"\nvia = \"10.0.2.2\"\nvia6 = \"2001:db8:2::2\"\n", table.display()),
    );
    lab.ping_ok(0, &["10.0.2.2"]);
    // 254 destinations (one per /24 of a covered /16-or-shorter prefix) and
    // 1000 random covered addresses.
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut dsts = Vec::new();
    while dsts.len() < 1254 {
        let (a, len) = v4[(rnd() % v4.len() as u64) as usize];
        let host = if len >= 32 { 0 } else { (rnd() as u32) & (u32::MAX >> len) };
        let d = a | host;
        let top = d >> 24;
        if top == 0 || top == 10 || top == 127 || top >= 224 {
            continue;
        }
        dsts.push(d);
    }
    let tern_lan = lab.mac(&lab.ns[1], "lan0");
    let h1_mac = lab.mac(&lab.ns[0], "eth0");
    let h1 = Raw::open(&lab.ns[0], "eth0", b"TERNFULL");
    let h2 = Raw::open(&lab.ns[2], "eth0", b"TERNFULL");
    // In bursts of 64, each awaited at host2: the test checks the routes,
    // not how deep the veth and raw-socket rings are on a loaded machine.
    let mut sent = 0u64;
    for chunk in dsts.chunks(64) {
        for d in chunk {
            h1.send(eth(tern_lan, h1_mac, 0x0800, &ipv4_udp([10, 0, 1, 2], d.to_be_bytes(), 64, b"TERNFULL")));
        }
        sent += chunk.len() as u64;
        h2.wait(sent, "every destination of the full table at host2");
    }
    let out = lab.cli(&["route", "get", "8.8.8.8"]);
    assert!(out.status.success());
}
