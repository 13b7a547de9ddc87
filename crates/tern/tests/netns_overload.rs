//! Control traffic first under overload (issue 41, part 3), with the real
//! `tern run` and real routing daemons: the lab of scripts/frr/lab.sh
//! (tern in Linux mode on the XDP lane, FRR's bgpd in eBGP with two BIRD
//! peers over IPv4 and IPv6, hold time 9 s, and ospfd with a neighbour),
//! then 30 s of a raw-socket flood from `src` — (a) towards a transit
//! destination (203.0.113.1, learnt over BGP), (b) towards tern's own
//! address (UDP to a closed port). All along: every BGP session stays
//! Established and its uptime never goes back (no reset), OSPF stays
//! Full, and ARP for tern's address keeps being answered. The counters
//! then show where the flood went (`xdp-lane/forwarded`,
//! `xdp-lane/punt-shed-<class>`); the figures are printed.
//!
//! Needs root, iproute2, frr, bird2, python3 and arping (iputils-arping);
//! skipped with a message otherwise. `TERN_OVERLOAD_SECS` sets the
//! flood's length (default 30), `TERN_OVERLOAD_BLASTERS` the number of
//! sending processes (default 2).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tern_testkit::frr::FrrLab;

mod common;
use common::find_counter;

const TERN: &str = env!("CARGO_BIN_EXE_tern");
const PY: &str = "/usr/bin/python3";
/// How long any setup step may take on a loaded 2-vCPU machine.
const STEP: Duration = Duration::from_secs(180);
const PEERS: [&str; 4] = ["10.2.0.2", "10.3.0.2", "fd00:2::2", "fd00:3::2"];

/// Sends a UDP frame (to port 9) from `src` to `dst` on `iface` as fast as
/// one process can for `secs` seconds; prints the frames sent.
const BLASTER: &str = r#"
import socket, struct, sys, time
iface, dmac, smac, src, dst, secs = sys.argv[1:7]
def csum(b):
    s = sum(struct.unpack('!10H', b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return (~s) & 0xffff
ip = bytearray(struct.pack('!BBHHHBBH4s4s', 0x45, 0, 46, 0, 0, 64, 17, 0, socket.inet_aton(src), socket.inet_aton(dst)))
ip[10:12] = struct.pack('!H', csum(bytes(ip)))
f = bytes.fromhex(dmac.replace(':', '')) + bytes.fromhex(smac.replace(':', '')) + b'\x08\x00' + bytes(ip) \
    + struct.pack('!HHHH', 40000, 9, 26, 0) + b'\0' * 18
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
n = 0
end = time.monotonic() + float(secs)
while time.monotonic() < end:
    for _ in range(2000):
        try:
            s.send(f); n += 1
        except OSError:
            pass
print(n)
"#;

struct Lab {
    lab: FrrLab,
    tern: Option<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.tern.take() {
            let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Lab {
    fn socket(&self) -> String {
        self.lab.socket().display().to_string()
    }

    /// `tern --socket S --json ARGS`, or None while tern is not up.
    fn cli(&self, args: &[&str]) -> Option<serde_json::Value> {
        let o = Command::new(TERN).args(["--socket", &self.socket(), "--json"]).args(args).output().ok()?;
        if !o.status.success() {
            return None;
        }
        serde_json::from_slice(&o.stdout).ok()
    }

    fn vtysh(&self, cmds: &[&str]) -> String {
        let dir = self.lab.dir().join("r");
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.lab.ns("r"), "vtysh", "--vty_socket"]).arg(&dir);
        for x in cmds {
            c.args(["-c", x]);
        }
        let o = c.output().expect("vtysh");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Peer -> (state, uptime in ms) from `show bgp summary json`, both
    /// address families.
    fn bgp(&self) -> BTreeMap<String, (String, u64)> {
        let v: serde_json::Value =
            serde_json::from_str(&self.vtysh(&["show bgp vrf default summary json"])).unwrap_or_default();
        let mut m = BTreeMap::new();
        for af in ["ipv4Unicast", "ipv6Unicast"] {
            if let Some(peers) = v[af]["peers"].as_object() {
                for (p, x) in peers {
                    let state = x["state"].as_str().unwrap_or("?").to_string();
                    m.insert(p.clone(), (state, x["peerUptimeMsec"].as_u64().unwrap_or(0)));
                }
            }
        }
        m
    }

    fn ospf_full(&self) -> bool {
        self.vtysh(&["show ip ospf neighbor"]).lines().any(|l| l.contains("10.4.0.2") && l.contains("Full"))
    }

    fn mac(&self, ns: &str, dev: &str) -> String {
        let (_, out) = self.lab.exec(ns, &["cat", &format!("/sys/class/net/{dev}/address")]);
        out.trim().to_string()
    }

    fn py(&self, ns: &str, script: &str, args: &[String]) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.lab.ns(ns), PY, "-c", script])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python")
    }
}

fn wait_out(c: Child) -> String {
    let o = c.wait_with_output().expect("wait");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + STEP;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn env_u64(k: &str, d: u64) -> u64 {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

/// The lane's counters the tests look at, by "node/error".
type Counters = BTreeMap<&'static str, u64>;

fn counters(lab: &Lab) -> Counters {
    let v = lab.cli(&["stats", "show", "errors", "--all"]).unwrap_or_default();
    let mut m = BTreeMap::new();
    for k in [
        "xdp-lane/forwarded",
        "xdp-lane/punt-egress",
        "xdp-lane/pass-local",
        "xdp-lane/pass-neighbor",
        "xdp-lane/punt-shed-local",
        "xdp-lane/punt-shed-bgp",
        "xdp-lane/punt-shed-neighbor",
        "xdp-lane/punt-shed-ospf",
    ] {
        m.insert(k, find_counter(&v, k).unwrap_or(0));
    }
    m
}

/// The lab up, tern on the XDP lane, every BGP session Established with a
/// 9 s hold time and OSPF Full; then the flood at `dst` for the test's
/// length, watched; returns (frames sent, counters before, after).
fn flood(tag: &str, dst: &str, lane_egress: bool) -> Option<(u64, u64, Counters, Counters)> {
    if !Path::new(PY).exists() || !Command::new("arping").arg("-V").output().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: needs {PY} and arping (apt-get install -y iputils-arping)");
        return None;
    }
    let lab = FrrLab::new(tag, "kernel")?;
    let mut lab = Lab { lab, tern: None };
    lab.lab.sh(&["net"]);
    lab.lab.sh(&["routes", "-1", "-1"]);
    // A veth takes frames the lane redirects to it only with GRO on (or a
    // program of its own) on its peer: with `lane_egress` the hosts' ends
    // get GRO, so that the lane forwards transit itself; without, the
    // lane punts transit to the engine (`punt-egress`), whose worker
    // forwards it over AF_XDP: the overloaded worker's case.
    let gro = if lane_egress { "on" } else { "off" };
    for (ns, dev) in [("src", "src0"), ("i1", "i1"), ("i2", "i2"), ("o2", "o2")] {
        let (ok, _) = lab.lab.exec(ns, &["ethtool", "-K", dev, "gro", gro]);
        assert!(ok, "ethtool -K {dev} gro {gro}");
    }
    let cfg = lab.lab.dir().join("tern.toml");
    std::fs::write(&cfg, lab.lab.linux_config("xdp")).expect("config");
    let log = std::fs::File::create(lab.lab.dir().join("tern.log")).expect("log");
    lab.tern = Some(
        Command::new("ip")
            .args(["netns", "exec", &lab.lab.ns("r"), TERN, "run", "--config"])
            .arg(&cfg)
            .env("TERN_STATE_DIR", lab.lab.dir().join("state"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start tern"),
    );
    until("tern's API", || lab.cli(&["status"]).is_some());
    lab.lab.sh(&["daemons"]);
    // Hold time 9 s (keepalives every 3 s): three lost keepalives in a
    // row drop a session.
    let mut conf = vec!["configure terminal", "router bgp 65000"];
    let timers: Vec<String> = PEERS.iter().map(|p| format!("neighbor {p} timers 3 9")).collect();
    conf.extend(timers.iter().map(String::as_str));
    conf.extend(["end", "clear bgp *"]);
    lab.vtysh(&conf);
    until("every BGP session Established", || {
        let b = lab.bgp();
        b.len() == PEERS.len() && b.values().all(|(s, _)| s == "Established")
    });
    until("OSPF Full", || lab.ospf_full());
    let n = lab.vtysh(&["show bgp neighbors 10.2.0.2"]);
    let hold = n.lines().find(|l| l.contains("Hold time")).unwrap_or("").trim().to_string();
    eprintln!("BGP 10.2.0.2: {hold}");
    until("a route to 203.0.113.0/24 in tern", || {
        lab.cli(&["route", "show"]).is_some_and(|v| v.to_string().contains("203.0.113.0/24"))
    });

    let secs = env_u64("TERN_OVERLOAD_SECS", 30);
    let blasters = env_u64("TERN_OVERLOAD_BLASTERS", 2);
    let dmac = lab.mac("r", "rsrc");
    let smac = lab.mac("src", "src0");
    let before = counters(&lab);
    let args: Vec<String> =
        ["src0", &dmac, &smac, "10.1.0.2", dst, &secs.to_string()].iter().map(|s| s.to_string()).collect();
    let blast: Vec<Child> = (0..blasters).map(|_| lab.py("src", BLASTER, &args)).collect();
    // An ARP request a second, broadcast, for the flood's length.
    let arper = Command::new("ip")
        .args(["netns", "exec", &lab.lab.ns("src"), "arping", "-b", "-I", "src0", "-i", "1", "-c"])
        .arg(secs.to_string())
        .arg("10.1.0.1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("arping");
    let t0 = Instant::now();
    let mut last = lab.bgp();
    let mut polls = 0;
    while t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_secs(1));
        let now = lab.bgp();
        for p in PEERS {
            let (s, up) = now.get(p).cloned().unwrap_or_default();
            let before = last.get(p).map_or(0, |x| x.1);
            assert_eq!(s, "Established", "{p} after {:?} of flood: {now:?}", t0.elapsed());
            assert!(up >= before, "{p}: the session was reset ({before} ms, then {up} ms)");
        }
        assert!(lab.ospf_full(), "OSPF left Full after {:?} of flood", t0.elapsed());
        last = now;
        polls += 1;
    }
    let sent: u64 = blast.into_iter().map(|c| wait_out(c).parse::<u64>().expect("count")).sum();
    let arp = String::from_utf8_lossy(&arper.wait_with_output().expect("arping").stdout).into_owned();
    let figure = |word: &str| -> u64 {
        arp.lines()
            .find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.iter().position(|x| *x == word).and_then(|i| w.get(i + 1)?.parse().ok())
            })
            .unwrap_or(0)
    };
    let (ok, asked) = (figure("Received"), figure("Sent"));
    let after = counters(&lab);
    let text = Command::new(TERN).args(["--socket", &lab.socket(), "stats", "show", "errors"]).output().expect("stats");
    eprintln!("{}", String::from_utf8_lossy(&text.stdout));
    eprintln!(
        "flood to {dst}: {sent} frames in {secs} s ({} pps) from {blasters} blasters; {polls} polls: BGP x4 Established, \
         OSPF Full; ARP {ok}/{asked} answered; counters before {before:?} after {after:?}",
        sent / secs.max(1)
    );
    // (arping itself competes with the senders for the CPUs: it may fall
    // behind its one-a-second schedule, never to nothing.)
    assert!(asked * 2 >= secs, "the ARP prober asked {asked} times in {secs} s:\n{arp}");
    assert!(ok * 10 >= asked * 9, "ARP for tern's address: {ok} of {asked} answered");
    Some((sent, secs, before, after))
}

#[test]
fn a_transit_flood_leaves_bgp_ospf_and_arp_up() {
    let Some((sent, _, before, after)) = flood("tov", "203.0.113.1", true) else { return };
    // The lane forwarded the flood (and the hosts' answers to it).
    let fwd = after["xdp-lane/forwarded"] - before["xdp-lane/forwarded"];
    assert!(fwd >= sent / 2, "the lane forwarded {fwd} of {sent}");
}

#[test]
fn a_transit_flood_through_the_engine_leaves_bgp_ospf_and_arp_up() {
    let Some((sent, _, before, after)) = flood("toe", "203.0.113.1", false) else { return };
    // The lane could not send out of the hosts' veths: the worker had it.
    let punted = after["xdp-lane/punt-egress"] - before["xdp-lane/punt-egress"];
    assert!(punted >= sent / 2, "the lane punted {punted} of {sent} to the engine");
}

#[test]
fn a_flood_at_the_routers_address_is_shed_as_local_and_control_traffic_passes() {
    let Some((sent, _, before, after)) = flood("tol", "10.1.0.1", true) else { return };
    let shed = after["xdp-lane/punt-shed-local"] - before["xdp-lane/punt-shed-local"];
    let passed = after["xdp-lane/pass-local"] - before["xdp-lane/pass-local"];
    assert!(shed > 0, "nothing shed of {sent}");
    assert!(shed + passed <= sent + 10_000, "shed {shed} + passed {passed} of {sent}");
    for k in ["xdp-lane/punt-shed-bgp", "xdp-lane/punt-shed-neighbor", "xdp-lane/punt-shed-ospf"] {
        assert_eq!(after[k], before[k], "{k}: control traffic shed");
    }
}
