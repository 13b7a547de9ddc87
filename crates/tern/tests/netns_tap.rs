//! Linux mode with the TAP exception path (`[linux] exception = "tap"`):
//! the real `tern run` drives two veths, the kernel's side of each is a TAP
//! (`tern-lan0`, `tern-wan0`) holding the interface's MAC and addresses.
//!
//! host1 (10.0.1.2) eth0 -- lan0 [tern + Linux on tern-lan0/tern-wan0] wan0 -- eth0 host2 (10.0.2.2)
//!
//! What the hosts see: ping to the router's addresses answered (by Linux:
//! tern counts the punts and answers nothing itself), ARP and ND for them
//! answered with the interface's MAC, a TCP connection to a listener on the
//! router (port 179, standing in for BGP) established, and transit traffic
//! forwarded by tern. Needs root, iproute2, ping, ethtool and
//! /dev/net/tun; says why and passes without.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{Lab, metric, must, netns_exec, scrape_in, sh};

const TERN: &str = env!("CARGO_BIN_EXE_tern");

fn skip_reason() -> Option<&'static str> {
    if let Some(why) = common::lab_missing() {
        return Some(why);
    }
    if std::fs::metadata("/dev/net/tun").is_err() {
        return Some("needs /dev/net/tun");
    }
    None
}

/// Polls `f` until it returns `Some`, or fails with `what` after `secs`.
fn wait_for<T>(secs: u64, what: impl Fn() -> String, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{}", what());
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Lab {
    fn new(tag: &str) -> Lab {
        // Full checksums in the hosts' frames matter here too: the
        // router's kernel checks the TCP segments tern hands it.
        let lab = Lab::two_hosts(&format!("ttap{}{tag}", std::process::id()));
        let r = &lab.ns[1];
        // The router's kernel: no DAD wait for the addresses tern gives it.
        lab.exec_ok(r, &["sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0"]);
        lab.exec_ok(r, &["sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0"]);
        lab
    }

    fn exec_ok(&self, ns: &str, args: &[&str]) -> String {
        netns_exec(ns, args)
    }

    fn start(&mut self, workers: u16) {
        let cfg = format!(
            r#"
[dataplane]
workers = {workers}

[[interface]]
name = "lan0"
device = "lan0"
driver = "afpacket"
addresses = ["10.0.1.1/24", "2001:db8:1::1/64"]

[[interface]]
name = "wan0"
device = "wan0"
addresses = ["10.0.2.1/24", "2001:db8:2::1/64"]

[linux]
mode = "linux"
exception = "tap"

[api]
socket = "{}"

[metrics]
listen = "127.0.0.1:9456"
"#,
            self.socket()
        );
        let path = self.dir.join("tern.toml");
        std::fs::write(&path, cfg).expect("config");
        let log = std::fs::File::create(self.dir.join("tern.log")).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns[1], TERN, "run", "--config"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("tern run");
        self.daemon = Some(child);
        wait_for(
            120,
            || format!("tern did not come up: {}", self.log()),
            || self.cli(&["status"]).status.success().then_some(()),
        );
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("tern.log")).unwrap_or_default()
    }

    fn cli(&self, args: &[&str]) -> Output {
        let sock = self.socket();
        let mut v = vec!["--socket", sock.as_str()];
        v.extend_from_slice(args);
        Command::new(TERN).args(&v).output().expect("tern cli")
    }

    /// Counter `node`/`name` of `tern stats show errors`.
    fn counter(&self, node: &str, name: &str) -> u64 {
        let out = self.cli(&["--json", "stats", "show", "errors", "--all"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        find(&v, &|m| {
            m.get("node").and_then(|x| x.as_str()) == Some(node) && m.get("name").and_then(|x| x.as_str()) == Some(name)
        })
        .and_then(|m| m.get("count").and_then(serde_json::Value::as_u64))
        .unwrap_or(0)
    }

    /// Port counter `key` of the `tern stats` interface entry `iface`.
    fn port_counter(&self, iface: &str, key: &str) -> Option<u64> {
        let out = self.cli(&["--json", "stats", "show", "interfaces"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let m = find(&v, &|m| m.get("interface").and_then(|x| x.as_str()) == Some(iface))?;
        m.get("counters")?.get(key)?.as_u64()
    }

    fn mac(&self, ns: &str, dev: &str) -> String {
        let out = must("ip", &["-n", ns, "-j", "link", "show", dev]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j");
        v[0]["address"].as_str().expect("address").to_string()
    }

    fn has_addr(&self, ns: &str, dev: &str, addr: &str) -> bool {
        let o = sh("ip", &["-n", ns, "-j", "addr", "show", "dev", dev]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        find(&v, &|m| m.get("local").and_then(|x| x.as_str()) == Some(addr)).is_some()
    }

    /// The link-layer address host `ns` resolved for `ip`.
    fn neigh(&self, ns: &str, ip: &str) -> Option<String> {
        let o = sh("ip", &["-n", ns, "-j", "neigh", "show", ip]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        v.get(0)?.get("lladdr")?.as_str().map(str::to_string)
    }

    fn ping_ok(&self, ns: usize, dst: &str) {
        wait_for(
            30,
            || format!("ping {dst} from {} never answered; tern log:\n{}", self.ns[ns], self.log()),
            || {
                let o = sh("ip", &["netns", "exec", &self.ns[ns], "ping", "-n", "-c", "1", "-W", "1", dst]);
                o.status.success().then_some(())
            },
        );
    }
}

/// The first object in `v` (searched depth first) that `pred` accepts.
fn find<'a>(
    v: &'a serde_json::Value,
    pred: &dyn Fn(&serde_json::Map<String, serde_json::Value>) -> bool,
) -> Option<&'a serde_json::Map<String, serde_json::Value>> {
    match v {
        serde_json::Value::Object(m) if pred(m) => Some(m),
        serde_json::Value::Object(m) => m.values().find_map(|x| find(x, pred)),
        serde_json::Value::Array(a) => a.iter().find_map(|x| find(x, pred)),
        _ => None,
    }
}

/// A TCP connection from `from_ns` to `to`, accepted by `listener` (in the
/// router's namespace): the router's banner arrives, and the listener sees
/// the client's address.
fn tcp_exchange(from_ns: &str, listener: &TcpListener, to: SocketAddr) -> (String, SocketAddr) {
    let ns = from_ns.to_string();
    let client = std::thread::spawn(move || {
        tern_io::netdev::enter_netns(&ns).expect("enter host namespace");
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(20)).expect("connect to the router");
        s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        let mut got = String::new();
        s.read_to_string(&mut got).expect("read the banner");
        got
    });
    let (mut conn, peer) = listener.accept().expect("accept");
    conn.write_all(b"OPEN from the router's Linux\n").expect("write");
    drop(conn);
    (client.join().expect("client"), peer)
}

#[test]
fn tap_exception_path_carries_the_routers_own_traffic() {
    run(1);
}

/// Two workers: each owns a queue of every TAP (and an AF_PACKET fanout
/// member of every device).
#[test]
fn tap_exception_path_with_two_workers() {
    run(2);
}

fn run(workers: u16) {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::new(&format!("w{workers}"));
    lab.start(workers);
    let (h1, r, h2) = (lab.ns[0].clone(), lab.ns[1].clone(), lab.ns[2].clone());

    // The kernel's side of lan0: a TAP with lan0's MAC, holding the
    // configured addresses (pushed by the kernel mirror).
    let lan_mac = lab.mac(&r, "lan0");
    assert_eq!(lab.mac(&r, "tern-lan0"), lan_mac, "the TAP carries the interface's MAC");
    wait_for(
        20,
        || format!("addresses never reached tern-lan0: {}", must("ip", &["-n", &r, "addr"])),
        || (lab.has_addr(&r, "tern-lan0", "10.0.1.1") && lab.has_addr(&r, "tern-lan0", "2001:db8:1::1")).then_some(()),
    );
    assert!(!lab.has_addr(&r, "lan0", "10.0.1.1"), "the driven device itself holds no address");
    // wan0's driver is auto: AF_PACKET here, and no XDP program (it would
    // pass the router's traffic to wan0's own, silenced, stack).
    let link = must("ip", &["-n", &r, "-j", "link", "show", "wan0"]);
    assert!(!link.contains("\"xdp\""), "an XDP program on wan0: {link}");

    // Ping to the router's addresses: ARP/ND and echo answered by Linux,
    // through the TAP; tern answers nothing itself.
    lab.ping_ok(0, "10.0.1.1");
    lab.ping_ok(0, "2001:db8:1::1");
    // Answered once: the kernel takes nothing from lan0's own frames
    // (strict rp_filter there), only from the TAP.
    for dst in ["10.0.1.1", "2001:db8:1::1"] {
        let o = sh("ip", &["netns", "exec", &h1, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "1", dst]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && !out.contains("DUP"), "ping {dst}: {out}");
    }
    assert_eq!(lab.neigh(&h1, "10.0.1.1").as_deref(), Some(lan_mac.as_str()), "ARP answered with lan0's MAC");
    assert_eq!(lab.neigh(&h1, "2001:db8:1::1").as_deref(), Some(lan_mac.as_str()), "ND answered with lan0's MAC");
    for (node, name) in [
        ("arp-input", "reply-sent"),
        ("ip4-local", "echo-reply-sent"),
        ("ip6-local", "echo-reply-sent"),
        ("ip6-local", "ns-answered"),
        ("ip4-local", "left-to-linux"),
        ("linux-punt", "no-tap"),
    ] {
        assert_eq!(lab.counter(node, name), 0, "{node}/{name}");
    }
    let punted = lab.counter("linux-punt", "punted");
    let from_linux = lab.counter("tap-input", "from-linux");
    assert!(punted >= 4, "ARP request, echo request, NS, echo request: {punted} punted\n{}", lab.log());
    assert!(from_linux >= 4, "ARP reply, echo reply, NA, echo reply: {from_linux} from Linux");
    // /metrics counts the TAP apart from its interface: tx is what tern
    // punted to Linux, rx what Linux sent.
    let text = scrape_in(&r);
    let tap_tx = metric(&text, "tern_interface_tx_packets_total{interface=\"tern-lan0\"}");
    let tap_rx = metric(&text, "tern_interface_rx_packets_total{interface=\"tern-lan0\"}");
    assert!(tap_tx >= 4.0, "tern-lan0 tx {tap_tx} in /metrics:\n{text}");
    assert!(tap_rx >= 4.0, "tern-lan0 rx {tap_rx} in /metrics");
    assert!(lab.port_counter("tern-lan0", "tx_packets").unwrap_or(0) >= 4, "the TAP's counters in tern stats");
    assert!(lab.port_counter("tern-lan0", "rx_packets").unwrap_or(0) >= 4);
    // The kernel mirror's skipped routes: the local table's routes for the
    // router's addresses at least, in /metrics, `tern status` and its JSON.
    let skipped = metric(&text, "tern_routes_skipped_total{source=\"kernel\",reason=\"table\"}");
    assert!(skipped >= 1.0, "local-table routes not counted as skipped:\n{text}");
    let out = String::from_utf8_lossy(&lab.cli(&["status"]).stdout).into_owned();
    assert!(out.contains("source kernel") && out.contains("skipped: table "), "{out}");
    let v: serde_json::Value =
        serde_json::from_slice(&lab.cli(&["--json", "status"]).stdout).expect("tern --json status");
    assert_eq!(v.pointer("/sources/0/name").and_then(|n| n.as_str()), Some("kernel"), "{v}");

    // TCP to a listener on the router (BGP's port), IPv4 and IPv6.
    let listener = {
        let r = r.clone();
        std::thread::spawn(move || {
            tern_io::netdev::enter_netns(&r).expect("enter router namespace");
            TcpListener::bind("[::]:179").expect("listen on 179")
        })
        .join()
        .expect("listener")
    };
    let (banner, peer) = tcp_exchange(&h1, &listener, "10.0.1.1:179".parse().expect("addr"));
    assert_eq!(banner, "OPEN from the router's Linux\n");
    assert_eq!(peer.ip().to_canonical().to_string(), "10.0.1.2");
    let (banner, peer) = tcp_exchange(&h1, &listener, "[2001:db8:1::1]:179".parse().expect("addr"));
    assert_eq!(banner, "OPEN from the router's Linux\n");
    assert_eq!(peer.ip().to_string(), "2001:db8:1::2");
    assert!(lab.counter("linux-punt", "punted") > punted, "the TCP segments went through the TAP");

    // Transit stays in tern: host1 reaches host2 through lan0 and wan0.
    let wan_tx = lab.port_counter("wan0", "tx_packets").unwrap_or(0);
    lab.ping_ok(0, "10.0.2.2");
    lab.ping_ok(0, "2001:db8:2::2");
    assert!(lab.port_counter("wan0", "tx_packets").unwrap_or(0) >= wan_tx + 2, "forwarded out of wan0 by tern");
    // The kernel forwards nothing itself (it would see no transit anyway).
    let fwd = lab.exec_ok(&r, &["sysctl", "-n", "net.ipv4.conf.tern-lan0.forwarding"]);
    assert_eq!(fwd.trim(), "0");
    // host2 resolved the router through wan0's TAP too.
    let wan_mac = lab.mac(&r, "wan0");
    assert_eq!(lab.neigh(&h2, "10.0.2.1").as_deref(), Some(wan_mac.as_str()));
    assert_eq!(lab.counter("arp-input", "reply-sent"), 0);
}
