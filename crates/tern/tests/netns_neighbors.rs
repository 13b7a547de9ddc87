//! Neighbour unreachability detection (RFC 4861 7.3) against real Linux
//! hosts: the real `tern run` between two hosts in network namespaces
//! with a short `reachable_ms`, and one-way UDP traffic from host1 to
//! host2 for many reachable times. Nothing but tern's own probes keeps
//! host2 confirmed (host2 never sends to tern), so every confirmation is
//! Linux's answer to a unicast probe: a solicited NA without the target
//! link-layer address option for IPv6, an ARP reply for IPv4.
//!
//! host1 (10.0.1.2) eth0 -- lan0 [tern] wan0 -- eth0 host2 (10.0.2.2)
//!
//! Runs over AF_PACKET and over the XDP lane. Needs root, iproute2, ping
//! and ethtool; says why and passes without.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{Lab, cli, find_counter, json, log_of, must, run_tern, sh};

const REACHABLE_MS: u64 = 300;
/// How long traffic flows: more than 3 full cycles of REACHABLE, DELAY
/// and PROBE (300 + 100 + 100 ms with one answered probe).
const TRAFFIC: Duration = Duration::from_millis(3000);
const PORT: u16 = 4789;

fn start(lab: &mut Lab, driver: &str) {
    let r = &lab.ns[1];
    must("ip", &["-n", r, "link", "set", "lan0", "up"]);
    must("ip", &["-n", r, "link", "set", "wan0", "up"]);
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

[neighbor]
reachable_ms = {REACHABLE_MS}
delay_ms = 100
retry_ms = 100
probes = 3

[api]
socket = "{}"

[metrics]
listen = ""
"#,
        lab.socket()
    );
    let path = lab.dir.join("tern.toml");
    std::fs::write(&path, cfg).expect("config");
    run_tern(lab, &path);
}

const COUNTERS: [&str; 6] = [
    "ip4-glean/request-sent",
    "ip6-glean/request-sent",
    "ip4-glean/queue-full",
    "ip6-glean/queue-full",
    "ip4-glean/resolution-timeout",
    "ip6-glean/resolution-timeout",
];

fn counters(lab: &Lab) -> Vec<u64> {
    let v = json(lab, &["stats", "show", "errors", "--all"]);
    COUNTERS.iter().map(|c| find_counter(&v, c).unwrap_or(0)).collect()
}

/// tern's entry for `ip`: (state, age_ms), if it has one.
fn neighbor(v: &serde_json::Value, ip: &str) -> Option<(String, u64)> {
    match v {
        serde_json::Value::Object(m) if m.get("ip").and_then(|x| x.as_str()) == Some(ip) => Some((
            m.get("state").and_then(|x| x.as_str()).unwrap_or("").to_string(),
            m.get("age_ms").and_then(serde_json::Value::as_u64).unwrap_or(u64::MAX),
        )),
        serde_json::Value::Object(m) => m.values().find_map(|x| neighbor(x, ip)),
        serde_json::Value::Array(a) => a.iter().find_map(|x| neighbor(x, ip)),
        _ => None,
    }
}

fn ping_ok(lab: &Lab, args: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut v = vec!["netns", "exec", lab.ns[0].as_str(), "ping", "-n", "-c", "1", "-W", "1"];
        v.extend_from_slice(args);
        if sh("ip", &v).status.success() {
            return;
        }
        assert!(Instant::now() < deadline, "ping {args:?} never answered; tern log:\n{}", log_of(lab));
    }
}

/// Counts the UDP datagrams host2 receives, per address family.
struct Receiver {
    got: [Arc<AtomicU64>; 2],
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Receiver {
    fn open(ns: &str) -> Receiver {
        let got = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (i, bind) in ["10.0.2.2", "2001:db8:2::2"].into_iter().enumerate() {
            let (ns, got, stop) = (ns.to_string(), Arc::clone(&got[i]), Arc::clone(&stop));
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            threads.push(std::thread::spawn(move || {
                tern_io::netdev::enter_netns(&ns).expect("netns");
                let ip: IpAddr = bind.parse().expect("ip");
                let s = UdpSocket::bind(SocketAddr::new(ip, PORT)).expect("bind");
                s.set_read_timeout(Some(Duration::from_millis(50))).expect("timeout");
                let _ = ready_tx.send(());
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    if s.recv(&mut buf).is_ok() {
                        got.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
            ready_rx.recv_timeout(Duration::from_secs(10)).expect("receiver ready");
        }
        Receiver { got, stop, threads }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// How many times at least the test looks at the neighbour table while
/// the traffic flows.
const LOOKS: u64 = 11;

/// Sends bursts of 32 datagrams to each of host2's addresses every 20 ms
/// from host1 for `TRAFFIC`, and on until the test has looked at the
/// neighbour table `LOOKS` times (`looks`: on a loaded machine each look,
/// a CLI process, can take a few hundred ms; 60 s at most); the datagrams
/// sent per family.
fn send_bursts(ns: &str, looks: Arc<AtomicU64>) -> std::thread::JoinHandle<[u64; 2]> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        tern_io::netdev::enter_netns(&ns).expect("netns");
        let s4 = UdpSocket::bind("10.0.1.2:0").expect("bind v4");
        let s6 = UdpSocket::bind("[2001:db8:1::2]:0").expect("bind v6");
        let d4: SocketAddr = format!("10.0.2.2:{PORT}").parse().expect("addr");
        let d6: SocketAddr = format!("[2001:db8:2::2]:{PORT}").parse().expect("addr");
        let mut sent = [0u64; 2];
        let start = Instant::now();
        let mut next = start;
        let going = || {
            let t = start.elapsed();
            (t < TRAFFIC || looks.load(Ordering::Acquire) < LOOKS) && t < Duration::from_secs(60)
        };
        while going() {
            for _ in 0..32 {
                if s4.send_to(b"nud v4", d4).is_ok() {
                    sent[0] += 1;
                }
                if s6.send_to(b"nud v6", d6).is_ok() {
                    sent[1] += 1;
                }
            }
            next += Duration::from_millis(20);
            if let Some(d) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
        }
        sent
    })
}

fn neighbours_in_use_stay(driver: &str, tag: &str) {
    if let Some(why) = common::lab_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("nud{}{tag}", std::process::id()));
    start(&mut lab, driver);
    ping_ok(&lab, &["10.0.2.2"]);
    ping_ok(&lab, &["2001:db8:2::2"]);
    let snmp6 = |lab: &Lab| -> u64 {
        let s = must("ip", &["netns", "exec", &lab.ns[2], "cat", "/proc/net/snmp6"]);
        s.lines()
            .find_map(|l| l.strip_prefix("Icmp6InNeighborSolicits"))
            .and_then(|v| v.trim().parse().ok())
            .expect("Icmp6InNeighborSolicits")
    };
    let rx = Receiver::open(&lab.ns[2]);
    let before = counters(&lab);
    let ns_before = snmp6(&lab);
    let started = Instant::now();
    let looked = Arc::new(AtomicU64::new(0));
    let sender = send_bursts(&lab.ns[0], Arc::clone(&looked));
    // The entries must be there whenever we look, in whatever state.
    let mut missing = Vec::new();
    let mut looks = 0;
    while !sender.is_finished() {
        let v = json(&lab, &["neighbor", "show"]);
        for ip in ["10.0.2.2", "2001:db8:2::2"] {
            if neighbor(&v, ip).is_none() {
                missing.push(format!("{ip} at {:?}", started.elapsed()));
            }
        }
        looks += 1;
        looked.store(looks, Ordering::Release);
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = sender.join().expect("sender");
    let deadline = Instant::now() + Duration::from_secs(10);
    while (0..2).any(|i| rx.got[i].load(Ordering::Relaxed) < sent[i]) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let got = [rx.got[0].load(Ordering::Relaxed), rx.got[1].load(Ordering::Relaxed)];
    let after = counters(&lab);
    let report = || {
        format!(
            "sent {sent:?}, received {got:?}; counters {:?} before {before:?} after {after:?}\nneighbours:\n{}\ntern log:\n{}",
            COUNTERS,
            String::from_utf8_lossy(&cli(&lab, &["neighbor", "show"]).stdout),
            log_of(&lab)
        )
    };
    assert!(looks >= LOOKS, "looked at the neighbour table {looks} times");
    assert!(missing.is_empty(), "entries gone while in use: {missing:?}; {}", report());
    assert_eq!(before, after, "no resolution from scratch, no drops while waiting; {}", report());
    assert_eq!(got, sent, "every datagram arrived; {}", report());
    // The traffic lasted several reachable times: the entries live on
    // because host2 answered tern's probes.
    let v = json(&lab, &["neighbor", "show"]);
    for ip in ["10.0.2.2", "2001:db8:2::2"] {
        assert!(neighbor(&v, ip).is_some(), "{ip} survives; {}", report());
    }
    let probes = snmp6(&lab) - ns_before;
    assert!(probes >= 3, "host2 was probed at least 3 times, not {probes}; {}", report());
    drop(rx);
}

#[test]
fn neighbours_in_use_stay_over_af_packet() {
    neighbours_in_use_stay("afpacket", "p");
}

#[test]
fn neighbours_in_use_stay_over_the_xdp_lane() {
    neighbours_in_use_stay("xdp", "x");
}
