//! Control traffic first under overload (issue 41, part 3), with the real
//! `tern run` and real routing daemons: the lab of scripts/frr/lab.sh
//! (tern in Linux mode, FRR's bgpd in eBGP with two BIRD peers over IPv4
//! and IPv6, hold time 9 s, and ospfd with a neighbour), a keepalived pair
//! across tern's `src` link (one VRRP group mastered by the router, one by
//! the host, 1 s adverts), then a flood from `src` by the project's own
//! generator (`tern-bench gen --via afxdp|afpacket`, the RFC 2544
//! tester's user-space senders, as the kernel here refuses live frames;
//! one AF_XDP process, the others AF_PACKET) — (a) towards a transit
//! destination (203.0.113.1, learnt over BGP), (b) towards tern's own
//! address (UDP to a closed port). All along: every BGP session stays
//! Established and its uptime never goes back (no reset), OSPF stays
//! Full, ARP for tern's address and IPv6 neighbour discovery (the cache
//! flushed, then a ping) keep being answered, and neither keepalived
//! changes state (no spurious failover). The generator's offered frames
//! are at least twice what tern delivered (the transit cases: what reached
//! the next hops; the router's address: what reached Linux), so the flood
//! is beyond what tern forwards (but for the XDP lane's own forwarding,
//! which on a veth runs in the senders' transmit softirq: no sender on the
//! box outruns it); the counters then show where it went
//! (`xdp-lane/forwarded`, `punt-shed-<class>` of the XDP lane or of the
//! AF_XDP steering program); the figures are printed.
//!
//! Lanes: the XDP lane (forwarding in the driver, or, with no redirect
//! into the hosts' veths, punting transit to the worker) and the AF_XDP
//! lane (`steer.c` and the worker) for the router's address.
//!
//! Needs root, iproute2, frr, bird2, keepalived, arping (iputils-arping)
//! and the `tern-bench` binary beside `tern` (built by `cargo test
//! --workspace`; `cargo build -p tern-bench`), or `TERN_BENCH=PATH`;
//! skipped with a message otherwise. `TERN_OVERLOAD_SECS` sets the
//! flood's length (default 20), `TERN_OVERLOAD_SENDERS` the number of
//! sending processes (default 3: with a debug build of tern-bench, two
//! offer about 1.9 times what the debug worker forwards, three 2.7 times).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tern_testkit::frr::FrrLab;

mod common;
use common::find_counter;

const TERN: &str = env!("CARGO_BIN_EXE_tern");
/// How long any setup step may take on a loaded 2-vCPU machine.
const STEP: Duration = Duration::from_secs(180);
const PEERS: [&str; 4] = ["10.2.0.2", "10.3.0.2", "fd00:2::2", "fd00:3::2"];

/// The generator: `TERN_BENCH`, else `tern-bench` beside `tern`.
fn bench_bin() -> Option<PathBuf> {
    let p = match std::env::var_os("TERN_BENCH") {
        Some(p) => PathBuf::from(p),
        None => Path::new(TERN).with_file_name("tern-bench"),
    };
    p.exists().then_some(p)
}

struct Lab {
    lab: FrrLab,
    tern: Option<Child>,
    kas: Vec<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for mut c in self.kas.drain(..).chain(self.tern.take()) {
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

    /// A device's kernel counter (`rx_packets`, ...).
    fn dev_stat(&self, ns: &str, dev: &str, what: &str) -> u64 {
        let (_, out) = self.lab.exec(ns, &["cat", &format!("/sys/class/net/{dev}/statistics/{what}")]);
        out.trim().parse().unwrap_or(0)
    }

    /// keepalived in namespace `ns` on `dev`: group 51 (10.1.0.251) with
    /// priority `p51`, group 52 (10.1.0.252) with `p52`, 1 s adverts,
    /// logging to `ka-NS.log`.
    fn start_keepalived(&mut self, ns: &str, dev: &str, p51: u32, p52: u32) {
        let d = self.lab.dir();
        let instance = |vrid: u32, prio: u32| {
            format!(
                "vrrp_instance G{vrid} {{\n  state BACKUP\n  interface {dev}\n  virtual_router_id {vrid}\n  \
                 priority {prio}\n  advert_int 1\n  virtual_ipaddress {{\n    10.1.0.{vrid}/24\n  }}\n}}\n"
            )
        };
        let conf = format!(
            "global_defs {{\n  router_id {ns}\n  vrrp_version 3\n  vrrp_garp_master_delay 1\n}}\n{}{}",
            instance(51, p51),
            instance(52, p52)
        );
        let f = |x: &str| d.join(format!("ka-{ns}{x}")).display().to_string();
        std::fs::write(f(".conf"), conf).expect("keepalived.conf");
        let log = std::fs::File::create(f(".log")).expect("keepalived log");
        let c = Command::new("ip")
            .args(["netns", "exec", &self.lab.ns(ns), "keepalived", "--vrrp", "-n", "-l", "-D", "-f"])
            .args([f(".conf"), "-p".into(), f(".pid"), "-r".into(), f("-vrrp.pid"), "-c".into(), f("-chk.pid")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("keepalived");
        self.kas.push(c);
    }

    /// keepalived's log in `ns`.
    fn ka_log(&self, ns: &str) -> String {
        std::fs::read_to_string(self.lab.dir().join(format!("ka-{ns}.log"))).unwrap_or_default()
    }
}

/// The state keepalived last entered for `inst`, from its log (written in
/// order), lower case.
fn ka_state(log: &str, inst: &str) -> String {
    let tag = format!("({inst}) Entering ");
    log.lines()
        .rev()
        .find_map(|l| l.split_once(&tag).and_then(|(_, rest)| rest.split_whitespace().next()))
        .unwrap_or_default()
        .to_lowercase()
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

/// The lanes' counters the tests look at, by "node/error".
type Counters = BTreeMap<String, u64>;

const CLASSES: [&str; 7] = ["neighbor", "bgp", "ospf", "vrrp", "ike", "bfd", "local"];

fn counters(lab: &Lab) -> Counters {
    let v = lab.cli(&["stats", "show", "errors", "--all"]).unwrap_or_default();
    let mut names: Vec<String> =
        ["xdp-lane/forwarded", "xdp-lane/punt-egress", "xdp-lane/pass-local", "xdp-steer/pass-local"]
            .map(String::from)
            .into();
    for node in ["xdp-lane", "xdp-steer"] {
        names.extend(CLASSES.iter().map(|c| format!("{node}/punt-shed-{c}")));
    }
    names.into_iter().map(|k| (k.clone(), find_counter(&v, &k).unwrap_or(0))).collect()
}

/// What a flood run saw.
struct Flood {
    /// Frames the generators offered.
    sent: u64,
    /// Frames that reached the transit next hops (i1, i2).
    delivered: u64,
    before: Counters,
    after: Counters,
}

impl Flood {
    fn delta(&self, k: &str) -> u64 {
        self.after.get(k).copied().unwrap_or(0) - self.before.get(k).copied().unwrap_or(0)
    }
}

/// The lab up, tern on `driver` ("xdp": the XDP lane; "afxdp": AF_XDP and
/// the steering program), every BGP session Established with a 9 s hold
/// time, OSPF Full, the keepalived pair settled; then the flood at `dst`
/// for the test's length, watched.
fn flood(tag: &str, dst: &str, driver: &str, lane_egress: bool) -> Option<Flood> {
    if !Command::new("arping").arg("-V").output().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: needs arping (apt-get install -y iputils-arping)");
        return None;
    }
    if !Command::new("keepalived").arg("--version").output().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: needs keepalived (apt-get install -y keepalived)");
        return None;
    }
    let Some(bench) = bench_bin() else {
        eprintln!("skipped: needs tern-bench beside tern (cargo build -p tern-bench) or TERN_BENCH");
        return None;
    };
    let lab = FrrLab::new(tag, "kernel")?;
    let mut lab = Lab { lab, tern: None, kas: Vec::new() };
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
    std::fs::write(&cfg, lab.lab.linux_config(driver)).expect("config");
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
    // VRRP across the flooded link: the router masters group 51, the
    // host group 52 (whose adverts cross tern's lane into the router).
    lab.start_keepalived("r", "rsrc", 200, 100);
    lab.start_keepalived("src", "src0", 100, 200);
    until("every BGP session Established", || {
        let b = lab.bgp();
        b.len() == PEERS.len() && b.values().all(|(s, _)| s == "Established")
    });
    until("OSPF Full", || lab.ospf_full());
    until("a route to 203.0.113.0/24 in tern", || {
        lab.cli(&["route", "show"]).is_some_and(|v| v.to_string().contains("203.0.113.0/24"))
    });
    let roles = |lab: &Lab| {
        let (r, h) = (lab.ka_log("r"), lab.ka_log("src"));
        [ka_state(&r, "G51"), ka_state(&r, "G52"), ka_state(&h, "G51"), ka_state(&h, "G52")]
    };
    until("VRRP roles (router master of 51, host of 52)", || roles(&lab) == ["master", "backup", "backup", "master"]);
    let transitions =
        |lab: &Lab| lab.ka_log("r").matches(") Entering ").count() + lab.ka_log("src").matches(") Entering ").count();
    let settled = transitions(&lab);

    let secs = env_u64("TERN_OVERLOAD_SECS", 20);
    let senders = env_u64("TERN_OVERLOAD_SENDERS", 3);
    let dmac = lab.mac("r", "rsrc");
    let smac = lab.mac("src", "src0");
    let before = counters(&lab);
    let hops = |lab: &Lab| lab.dev_stat("i1", "i1", "rx_packets") + lab.dev_stat("i2", "i2", "rx_packets");
    let hops0 = hops(&lab);
    let procs: Vec<Child> = (0..senders)
        .map(|k| {
            Command::new("ip")
                .args(["netns", "exec", &lab.lab.ns("src")])
                .arg(&bench)
                // (One AF_XDP socket per queue: the first sender's; the
                // others send through AF_PACKET.)
                .args(["gen", "--dev", "src0", "--scenario", "single-flow-50fw", "--via"])
                .arg(if k == 0 { "afxdp" } else { "afpacket" })
                .args(["--dst-mac", &dmac, "--src-mac", &smac, "--src", "10.1.0.2", "--dst", dst])
                .args(["--seconds", &secs.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("tern-bench gen")
        })
        .collect();
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
    let (mut polls, mut nd_ok) = (0u64, 0u64);
    while t0.elapsed() < Duration::from_secs(secs) {
        // Neighbour discovery: the host forgets tern's IPv6 address, then
        // pings it: a solicitation first, answered by Linux on the router
        // (the echo itself is the bulk, `local`, which the flood fills:
        // only the neighbour entry is checked).
        lab.lab.exec("src", &["ip", "-6", "neigh", "flush", "dev", "src0"]);
        lab.lab.exec("src", &["ping", "-6", "-c", "1", "-W", "1", "fd00:1::1"]);
        let (_, neigh) = lab.lab.exec("src", &["ip", "-6", "neigh", "show", "fd00:1::1", "dev", "src0"]);
        nd_ok += u64::from(neigh.contains("lladdr"));
        let now = lab.bgp();
        for p in PEERS {
            let (s, up) = now.get(p).cloned().unwrap_or_default();
            let before = last.get(p).map_or(0, |x| x.1);
            assert_eq!(s, "Established", "{p} after {:?} of flood: {now:?}", t0.elapsed());
            assert!(up >= before, "{p}: the session was reset ({before} ms, then {up} ms)");
        }
        assert!(lab.ospf_full(), "OSPF left Full after {:?} of flood", t0.elapsed());
        assert_eq!(
            transitions(&lab),
            settled,
            "a VRRP transition under the flood:\n{}\n{}",
            lab.ka_log("r"),
            lab.ka_log("src")
        );
        last = now;
        polls += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut sent = 0;
    for c in procs {
        let o = c.wait_with_output().expect("tern-bench gen");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "tern-bench gen: {}{out}", String::from_utf8_lossy(&o.stderr));
        let n = out.split_whitespace().find_map(|w| w.strip_prefix("pkts=")).and_then(|n| n.parse::<u64>().ok());
        sent += n.unwrap_or_else(|| panic!("tern-bench gen said {out:?}"));
    }
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
    let delivered = hops(&lab) - hops0;
    let after = counters(&lab);
    assert_eq!(transitions(&lab), settled, "a VRRP transition under the flood");
    let text = Command::new(TERN).args(["--socket", &lab.socket(), "stats", "show", "errors"]).output().expect("stats");
    eprintln!("{}", String::from_utf8_lossy(&text.stdout));
    let moved: Vec<String> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .map(|(k, v)| format!("{k} +{}", v - before[k]))
        .collect();
    eprintln!(
        "{driver} lane, flood to {dst}: {sent} frames offered in {secs} s ({} pps) by {senders} senders, {delivered} \
         reached the next hops; {polls} polls: BGP x4 Established, OSPF Full, VRRP roles kept; ARP {ok}/{asked} \
         answered, ND {nd_ok}/{polls}; counters: {}",
        sent / secs.max(1),
        moved.join(", ")
    );
    // (arping and the pings compete with the senders for the CPUs: they
    // may fall behind their schedule, never to nothing.)
    assert!(asked * 2 >= secs, "the ARP prober asked {asked} times in {secs} s:\n{arp}");
    assert!(ok * 10 >= asked * 9, "ARP for tern's address: {ok} of {asked} answered");
    assert!(polls >= 3 && nd_ok * 10 >= polls * 9, "ND for tern's address: {nd_ok} of {polls} resolved");
    Some(Flood { sent, delivered, before, after })
}

#[test]
fn a_transit_flood_leaves_bgp_ospf_vrrp_and_arp_up() {
    let Some(f) = flood("tov", "203.0.113.1", "xdp", true) else { return };
    // The lane forwarded what reached the next hops. (Not twice its
    // capacity here: on a veth the lane runs in the senders' own transmit
    // softirq, so no sender on the same box outruns it; the worker's path
    // and the router's address are flooded beyond capacity below.)
    // (The next hops also receive what Linux on the router sends them,
    // BGP, OSPF, ARP: a few a second.)
    let fwd = f.delta("xdp-lane/forwarded");
    assert!(fwd + 1000 >= f.delivered, "the lane forwarded {fwd}, {} reached the next hops", f.delivered);
    assert!(f.delivered > 0 && f.sent >= f.delivered, "offered {}, delivered {}", f.sent, f.delivered);
}

#[test]
fn a_transit_flood_through_the_engine_leaves_bgp_ospf_vrrp_and_arp_up() {
    let Some(f) = flood("toe", "203.0.113.1", "xdp", false) else { return };
    // The lane could not send out of the hosts' veths: the worker had it.
    let punted = f.delta("xdp-lane/punt-egress");
    assert!(punted + 1000 >= f.delivered, "the lane punted {punted}, {} reached the next hops", f.delivered);
    assert!(f.sent >= 2 * f.delivered, "offered {} frames, {} delivered: not twice", f.sent, f.delivered);
}

/// The router's own address flooded: shed as `local`, control classes
/// untouched, on the lane `node` ("xdp-lane" or the AF_XDP lane's
/// "xdp-steer").
fn own_address_flood(tag: &str, driver: &str, node: &str) {
    let Some(f) = flood(tag, "10.1.0.1", driver, true) else { return };
    let shed = f.delta(&format!("{node}/punt-shed-local"));
    let passed = f.delta(&format!("{node}/pass-local"));
    assert!(shed > 0, "nothing shed of {}", f.sent);
    assert!(shed + passed <= f.sent + 10_000, "shed {shed} + passed {passed} of {}", f.sent);
    assert!(f.sent >= 2 * passed, "offered {} frames, {passed} reached Linux: not twice", f.sent);
    for c in ["bgp", "neighbor", "ospf", "vrrp"] {
        assert_eq!(f.delta(&format!("{node}/punt-shed-{c}")), 0, "{node}/punt-shed-{c}: control traffic shed");
    }
}

#[test]
fn a_flood_at_the_routers_address_is_shed_as_local_and_control_traffic_passes() {
    own_address_flood("tol", "xdp", "xdp-lane");
}

#[test]
fn a_flood_at_the_routers_address_on_the_afxdp_lane_is_shed_by_the_steering_program() {
    own_address_flood("tos", "afxdp", "xdp-steer");
}

/// Standalone tern on the AF_XDP lane (no routing daemons: a host and the
/// router on one veth): the steering program knows tern's own addresses
/// and sends what is for them to tern policed per class
/// (`xdp-steer/local-to-tern`); a UDP flood at the router's address from
/// `tern-bench gen` is shed as `local` (here 100/s, burst 10) while ARP
/// (tern answers it itself) keeps resolving.
#[test]
fn standalone_afxdp_lane_polices_the_routers_own_traffic() {
    use tern_testkit::netns::{Netns, Veth, is_root};
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let Some(bench) = bench_bin() else {
        eprintln!("skipped: needs tern-bench beside tern (cargo build -p tern-bench) or TERN_BENCH");
        return;
    };
    if !Command::new("arping").arg("-V").output().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: needs arping (apt-get install -y iputils-arping)");
        return;
    }
    let (h, r) = (Netns::unique("ovsh"), Netns::unique("ovsr"));
    Veth::new(&h, "eth0", &r, "lan0").tx_offload_off().create();
    h.ip(&["addr", "add", "10.9.0.2/24", "dev", "eth0"]);
    let dir = std::env::temp_dir().join(format!("overload-standalone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("tern.sock").display().to_string();
    let cfg = format!(
        "[dataplane]\nworkers = 1\npool_frames = 4096\n\n[dataplane.punt]\nlocal = {{ rate = 100, burst = 10 }}\n\n\
         [[interface]]\nname = \"lan0\"\ndevice = \"lan0\"\ndriver = \"afxdp\"\naddresses = [\"10.9.0.1/24\"]\n\n\
         [api]\nsocket = \"{sock}\"\n\n[metrics]\nlisten = \"\"\n"
    );
    std::fs::write(dir.join("tern.toml"), cfg).expect("config");
    let log = std::fs::File::create(dir.join("tern.log")).expect("log");
    let mut tern = Some(
        Command::new("ip")
            .args(["netns", "exec", &r.name, TERN, "run", "--config"])
            .arg(dir.join("tern.toml"))
            .env("TERN_STATE_DIR", dir.join("state"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("tern run"),
    );
    let tern_log = || std::fs::read_to_string(dir.join("tern.log")).unwrap_or_default();
    let stats = || -> serde_json::Value {
        Command::new(TERN)
            .args(["--socket", &sock, "--json", "stats", "show", "errors", "--all"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| serde_json::from_slice(&o.stdout).ok())
            .unwrap_or_default()
    };
    let counter = |v: &serde_json::Value, k: &str| find_counter(v, k).unwrap_or(0);
    let deadline = Instant::now() + STEP;
    while !h.exec_ok(&["ping", "-c", "1", "-W", "1", "10.9.0.1"]) {
        assert!(Instant::now() < deadline, "tern never answered a ping:\n{}", tern_log());
    }
    let before = stats();
    assert!(counter(&before, "xdp-steer/local-to-tern") > 0, "the ping went to tern policed: {before}");
    let rmac = r.ip(&["-br", "link", "show", "lan0"]).split_whitespace().nth(2).unwrap_or("").to_string();
    let hmac = h.ip(&["-br", "link", "show", "eth0"]).split_whitespace().nth(2).unwrap_or("").to_string();
    let secs = 5;
    let flood = Command::new("ip")
        .args(["netns", "exec", &h.name])
        .arg(&bench)
        .args(["gen", "--dev", "eth0", "--scenario", "single-flow-50fw", "--via", "afpacket"])
        .args(["--dst-mac", &rmac, "--src-mac", &hmac, "--src", "10.9.0.2", "--dst", "10.9.0.1"])
        .args(["--seconds", &secs.to_string()])
        .output()
        .expect("tern-bench gen");
    let out = String::from_utf8_lossy(&flood.stdout).into_owned();
    assert!(flood.status.success(), "tern-bench gen: {out}{}", String::from_utf8_lossy(&flood.stderr));
    let sent: u64 = out.split_whitespace().find_map(|w| w.strip_prefix("pkts=")?.parse().ok()).expect("pkts=");
    // ARP after the flood, tern's own answer.
    let arp = h.exec_ok(&["arping", "-c", "3", "-w", "5", "-I", "eth0", "10.9.0.1"]);
    let after = stats();
    let d = |k: &str| counter(&after, k) - counter(&before, k);
    let (shed, sent_on) = (d("xdp-steer/punt-shed-local"), d("xdp-steer/local-to-tern"));
    eprintln!("standalone AF_XDP: {sent} offered, {shed} shed as local, {sent_on} to tern (policed)");
    tern_testkit::netns::stop(&mut tern, Duration::from_secs(10));
    assert!(arp, "ARP for the router under its own policer");
    // 100/s with a burst of 10 per CPU: at most about 2 x (10 + 100 x
    // (secs + 1)) of the flood reach tern.
    assert!(sent_on <= 2 * (10 + 100 * (secs + 2)) + 100, "{sent_on} of {sent} reached tern");
    assert!(shed + sent_on >= sent * 9 / 10, "shed {shed} + to tern {sent_on} of {sent}");
    assert_eq!(d("xdp-steer/punt-shed-neighbor"), 0, "ARP shed");
    let _ = std::fs::remove_dir_all(&dir);
}
