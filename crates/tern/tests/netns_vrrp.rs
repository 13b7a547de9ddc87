//! tern's own VRRPv3 (standalone mode, `[[vrrp]]`) against keepalived
//! (`vrrp_version 3`) and against another tern, in network namespaces:
//!
//! ```text
//!   host (10.1.0.10, gw .254) ── br-lan ──┬── lan0 [router A: tern] wan0 ──┬── br-wan ── server (10.2.0.10,
//!                                          └── lan0 [router B]       wan0 ──┘              10.1/16 via 10.2.0.254)
//! ```
//!
//! Both routers run two groups with the same priorities, vrid 10 on the
//! LAN (10.1.0.254 / 2001:db8:1::254) and vrid 20 on the WAN side
//! (10.2.0.254 / 2001:db8:2::254), so that the host's traffic to the
//! server and the server's answers both go through the master. Each test
//! waits for the states (tern's `vrrp show`, keepalived's notify script),
//! then for the host's ping to the server through the virtual address:
//! after start, after the master stops (the backup takes over), and after
//! it comes back (preemption gives mastership back). Nothing sleeps for a
//! fixed time: every step awaits its condition.
//!
//! The failover gap of a tern pair is measured by `tern-bench failover
//! --setup tern-vrrp` (crates/bench/src/failover.rs), not here.
//!
//! Needs root, iproute2, ping and keepalived (for the keepalived tests);
//! says why and passes without.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tern_testkit::netns::{Netns, Veth, is_root, on_path, stop};

const TERN: &str = env!("CARGO_BIN_EXE_tern");
const WAIT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, PartialEq)]
enum Fam {
    V4,
    V6,
}

/// A router's daemon.
enum Daemon {
    Tern { child: Option<Child>, sock: String, config: PathBuf, log: PathBuf, ns: String },
    Keepalived { child: Option<Child>, config: PathBuf, log: PathBuf, ns: String, dir: PathBuf },
}

struct Rig {
    /// sw, host, server, a, b
    ns: Vec<Netns>,
    dir: PathBuf,
    fam: Fam,
    /// tern's lane.
    driver: &'static str,
    /// tern's advertisement interval.
    interval_ms: u32,
    a: Option<Daemon>,
    b: Option<Daemon>,
}

fn missing(keepalived: bool) -> Option<&'static str> {
    if !is_root() {
        return Some("needs root");
    }
    if !on_path("ip") || !on_path("ping") {
        return Some("needs iproute2 and ping");
    }
    if keepalived && !on_path("keepalived") {
        return Some("needs keepalived (apt-get install keepalived)");
    }
    None
}

impl Rig {
    fn new(base: &str, fam: Fam) -> Rig {
        let names = ["sw", "host", "srv", "a", "b"];
        let ns: Vec<Netns> = names.iter().map(|n| Netns::named(&format!("{base}{n}"))).collect();
        let dir = std::env::temp_dir().join(base);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let (sw, host, srv, a, b) = (&ns[0], &ns[1], &ns[2], &ns[3], &ns[4]);
        for br in ["brl", "brw"] {
            sw.ip(&["link", "add", br, "type", "bridge", "mcast_snooping", "0", "forward_delay", "0"]);
            sw.ip(&["link", "set", "dev", br, "up"]);
        }
        Veth::new(host, "eth0", sw, "ph").create();
        Veth::new(srv, "eth0", sw, "ps").create();
        Veth::new(a, "lan0", sw, "pal").down().create();
        Veth::new(a, "wan0", sw, "paw").down().create();
        Veth::new(b, "lan0", sw, "pbl").down().create();
        Veth::new(b, "wan0", sw, "pbw").down().create();
        for (port, br) in [("ph", "brl"), ("pal", "brl"), ("pbl", "brl"), ("ps", "brw"), ("paw", "brw"), ("pbw", "brw")]
        {
            sw.ip(&["link", "set", "dev", port, "master", br]);
            sw.ip(&["link", "set", "dev", port, "up"]);
        }
        for (n, net, me, via) in [(host, 1, 10, "254"), (srv, 2, 10, "254")] {
            n.sysctl("net.ipv6.conf.all.accept_dad", "0");
            n.exec_must(&["ethtool", "-K", "eth0", "tx", "off"]);
            n.ip(&["link", "set", "eth0", "up"]);
            n.ip(&["addr", "add", &format!("10.{net}.0.{me}/24"), "dev", "eth0"]);
            n.ip(&["-6", "addr", "add", &format!("2001:db8:{net}::{me}/64"), "dev", "eth0", "nodad"]);
            let other = 3 - net;
            n.ip(&["route", "add", &format!("10.{other}.0.0/24"), "via", &format!("10.{net}.0.{via}")]);
            n.ip(&["-6", "route", "add", &format!("2001:db8:{other}::/64"), "via", &format!("2001:db8:{net}::{via}")]);
        }
        Rig { ns, dir, fam, driver: "afpacket", interval_ms: 100, a: None, b: None }
    }

    fn ns_name(&self, i: usize) -> String {
        self.ns[i].name.clone()
    }

    /// tern as router `which` (3: a, 4: b) with `priority`; its address
    /// on both links ends in `me`.
    fn tern(&self, which: usize, me: u8, priority: u8) -> Daemon {
        let ns = self.ns_name(which);
        for dev in ["lan0", "wan0"] {
            self.ns[which].ip(&["link", "set", dev, "up"]);
        }
        let tag = if which == 3 { "a" } else { "b" };
        let sock = self.dir.join(format!("tern-{tag}.sock")).display().to_string();
        let state = |g: &str| self.dir.join(format!("tern-{tag}-{g}.state")).display().to_string();
        let (lan, wan) = match self.fam {
            Fam::V4 => ("\"10.1.0.254\"", "\"10.2.0.254\""),
            Fam::V6 => ("\"2001:db8:1::254\"", "\"2001:db8:2::254\""),
        };
        let cfg = format!(
            r#"
[[interface]]
name = "lan0"
device = "lan0"
driver = "{driver}"
addresses = ["10.1.0.{me}/24", "2001:db8:1::{me}/64"]

[[interface]]
name = "wan0"
device = "wan0"
driver = "{driver}"
addresses = ["10.2.0.{me}/24", "2001:db8:2::{me}/64"]

[[vrrp]]
interface = "lan0"
vrid = 10
priority = {priority}
interval_ms = {interval_ms}
addresses = [{lan}]
preempt = true
accept_mode = true
notify = 'echo "$5" > {lan_state}'

[[vrrp]]
interface = "wan0"
vrid = 20
priority = {priority}
interval_ms = {interval_ms}
addresses = [{wan}]
preempt = true

[api]
socket = "{sock}"

[metrics]
listen = ""
"#,
            lan_state = state("lan"),
            driver = self.driver,
            interval_ms = self.interval_ms,
        );
        let config = self.dir.join(format!("tern-{tag}.toml"));
        std::fs::write(&config, cfg).expect("config");
        let log = self.dir.join(format!("tern-{tag}.log"));
        let mut d = Daemon::Tern { child: None, sock, config, log, ns };
        d.start();
        d
    }

    /// keepalived as router `which` with `priority`, VRRPv3, 100 ms.
    fn keepalived(&self, which: usize, me: u8, priority: u8) -> Daemon {
        let ns = self.ns_name(which);
        let n = &self.ns[which];
        n.sysctl("net.ipv4.ip_forward", "1");
        n.sysctl("net.ipv6.conf.all.forwarding", "1");
        for key in ["all", "default", "lan0", "wan0"] {
            n.sysctl(&format!("net.ipv6.conf.{key}.accept_dad"), "0");
        }
        for (dev, net) in [("lan0", 1), ("wan0", 2)] {
            n.ip(&["link", "set", dev, "up"]);
            n.ip(&["addr", "add", &format!("10.{net}.0.{me}/24"), "dev", dev]);
            n.ip(&["-6", "addr", "add", &format!("2001:db8:{net}::{me}/64"), "dev", dev, "nodad"]);
        }
        let dir = self.dir.join("ka");
        std::fs::create_dir_all(&dir).expect("dir");
        let notify = dir.join("notify.sh");
        std::fs::write(&notify, "#!/bin/sh\necho \"$3\" > \"$(dirname \"$0\")/$2.state\"\n").expect("notify");
        must_ok(Command::new("chmod").args(["755"]).arg(&notify));
        let inst = |name: &str, dev: &str, vrid: u8, addrs: &str| {
            format!(
                "vrrp_instance {name} {{\n  state BACKUP\n  interface {dev}\n  virtual_router_id {vrid}\n  priority {priority}\n  \
                 advert_int 0.1\n  virtual_ipaddress {{\n{addrs}  }}\n  notify \"{}\"\n}}\n",
                notify.display()
            )
        };
        let (lan, wan) = match self.fam {
            Fam::V4 => ("    10.1.0.254/24\n".to_string(), "    10.2.0.254/24\n".to_string()),
            Fam::V6 => (
                // The link-local address tern puts first (RFC 5798
                // 5.2.9), so that both send the same address list.
                format!("    {}/64\n    2001:db8:1::254/64\n", tern_vrrp::virtual_link_local(10)),
                format!("    {}/64\n    2001:db8:2::254/64\n", tern_vrrp::virtual_link_local(20)),
            ),
        };
        let cfg = format!(
            "global_defs {{\n  router_id ka{which}\n  vrrp_version 3\n  script_user root\n  enable_script_security\n}}\n{}{}",
            inst("lan", "lan0", 10, &lan),
            inst("wan", "wan0", 20, &wan),
        );
        let config = dir.join("keepalived.conf");
        std::fs::write(&config, cfg).expect("config");
        let log = dir.join("keepalived.log");
        let mut d = Daemon::Keepalived { child: None, config, log, ns, dir };
        d.start();
        d
    }

    /// Waits until the host's ping reaches the server through the
    /// virtual addresses.
    fn ping_through(&self, when: &str) {
        let dst = if self.fam == Fam::V4 { "10.2.0.10" } else { "2001:db8:2::10" };
        let deadline = Instant::now() + WAIT;
        loop {
            let ok = self.ns[1].exec(&["ping", "-n", "-c", "1", "-W", "1", dst]).status.success();
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "{when}: the host's ping to {dst} never went through\n{}", self.logs());
        }
    }

    /// Waits until the host's ping to the LAN virtual address itself is
    /// answered (the master's, in accept mode).
    fn ping_virtual(&self, when: &str) {
        let dst = if self.fam == Fam::V4 { "10.1.0.254" } else { "2001:db8:1::254" };
        let deadline = Instant::now() + WAIT;
        while !self.ns[1].exec(&["ping", "-n", "-c", "1", "-W", "1", dst]).status.success() {
            assert!(Instant::now() < deadline, "{when}: {dst} never answered\n{}", self.logs());
        }
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        for d in [&self.a, &self.b].into_iter().flatten() {
            s += &d.describe();
        }
        s
    }

    /// Waits until router a is in `a_state` and router b in `b_state`
    /// (both groups).
    fn await_states(&self, a_state: &str, b_state: &str, when: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let a = self.a.as_ref().map(Daemon::states).unwrap_or_default();
            let b = self.b.as_ref().map(Daemon::states).unwrap_or_default();
            let ok = |v: &[String], want: &str| v.len() == 2 && v.iter().all(|s| s == want);
            if ok(&a, a_state) && ok(&b, b_state) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{when}: want a {a_state}, b {b_state}; have a {a:?}, b {b:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for d in [&mut self.a, &mut self.b].into_iter().flatten() {
            d.stop(Duration::from_secs(5));
        }
    }
}

fn must_ok(c: &mut Command) {
    assert!(c.status().expect("run").success(), "{c:?} failed");
}

impl Daemon {
    fn start(&mut self) {
        match self {
            Daemon::Tern { child, sock, config, log, ns } => {
                let _ = std::fs::remove_file(&*sock);
                let logf = std::fs::OpenOptions::new().create(true).append(true).open(&*log).expect("log");
                let c = Command::new("ip")
                    .args(["netns", "exec", ns, TERN, "run", "--config"])
                    .arg(&*config)
                    .env("RUST_LOG", "info,tern_control::router::vrrp=debug")
                    .stdout(Stdio::null())
                    .stderr(logf)
                    .spawn()
                    .expect("tern run");
                *child = Some(c);
                let deadline = Instant::now() + Duration::from_secs(120);
                while !Command::new(TERN).args(["--socket", sock, "status"]).output().is_ok_and(|o| o.status.success())
                {
                    assert!(Instant::now() < deadline, "tern did not come up: {}", self.describe());
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            Daemon::Keepalived { child, config, log, ns, dir } => {
                for f in ["lan.state", "wan.state"] {
                    let _ = std::fs::remove_file(dir.join(f));
                }
                let logf = std::fs::OpenOptions::new().create(true).append(true).open(&*log).expect("log");
                let pid = |n: &str| dir.join(n).display().to_string();
                let c = Command::new("ip")
                    .args(["netns", "exec", ns, "keepalived", "-n", "-l", "-D", "-P", "-f"])
                    .arg(&*config)
                    .args(["-p", &pid("ka.pid"), "-r", &pid("vrrp.pid"), "-c", &pid("chk.pid")])
                    .stdout(logf.try_clone().expect("log"))
                    .stderr(logf)
                    .spawn()
                    .expect("keepalived");
                *child = Some(c);
            }
        }
    }

    /// SIGTERM (tern: priority 0 sent; keepalived likewise), or SIGKILL
    /// when `kill`.
    fn stop_now(&mut self, kill: bool) {
        let child = match self {
            Daemon::Tern { child, .. } | Daemon::Keepalived { child, .. } => child,
        };
        if kill {
            if let Some(mut c) = child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            if let Daemon::Keepalived { dir, .. } = self {
                // keepalived's VRRP child outlives its parent's SIGKILL:
                // kill it too, and remove the pid files (a killed child
                // nobody reaps would look like a running daemon).
                if let Ok(p) = std::fs::read_to_string(dir.join("vrrp.pid")) {
                    let _ = Command::new("kill").args(["-KILL", p.trim()]).status();
                }
                for f in ["ka.pid", "vrrp.pid", "chk.pid"] {
                    let _ = std::fs::remove_file(dir.join(f));
                }
            }
        } else {
            stop(child, Duration::from_secs(10));
        }
    }

    fn stop(&mut self, grace: Duration) {
        let child = match self {
            Daemon::Tern { child, .. } | Daemon::Keepalived { child, .. } => child,
        };
        stop(child, grace);
    }

    /// The two groups' states, lower case ("master", "backup", ...).
    fn states(&self) -> Vec<String> {
        match self {
            Daemon::Tern { child: None, .. } | Daemon::Keepalived { child: None, .. } => vec!["stopped".into(); 2],
            Daemon::Tern { sock, .. } => {
                let out = Command::new(TERN).args(["--socket", sock, "--json", "vrrp", "show"]).output();
                let v: serde_json::Value =
                    out.ok().and_then(|o| serde_json::from_slice(&o.stdout).ok()).unwrap_or_default();
                find_states(&v)
            }
            Daemon::Keepalived { dir, .. } => ["lan.state", "wan.state"]
                .iter()
                .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
                .map(|s| s.trim().to_lowercase())
                .collect(),
        }
    }

    fn describe(&self) -> String {
        match self {
            Daemon::Tern { sock, log, .. } => {
                let show = Command::new(TERN).args(["--socket", sock, "vrrp", "show"]).output();
                format!(
                    "--- tern {}\n{}\n{}",
                    log.display(),
                    show.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default(),
                    tail(log)
                )
            }
            Daemon::Keepalived { log, .. } => format!("--- keepalived {}\n{}", log.display(), tail(log)),
        }
    }
}

fn tail(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The `state` of every group in `vrrp show --json`'s answer.
fn find_states(v: &serde_json::Value) -> Vec<String> {
    match v {
        serde_json::Value::Object(m) if m.contains_key("vrid") => {
            vec![m.get("state").and_then(|s| s.as_str()).unwrap_or("").to_string()]
        }
        serde_json::Value::Object(m) => m.values().flat_map(find_states).collect(),
        serde_json::Value::Array(a) => a.iter().flat_map(find_states).collect(),
        _ => Vec::new(),
    }
}

/// tern (a) master at 200, keepalived (b) backup at 100: tern stops
/// (priority 0), keepalived takes over; tern returns and preempts.
fn tern_master_keepalived_backup(base: &str, fam: Fam) {
    if let Some(why) = missing(true) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut rig = Rig::new(base, fam);
    rig.a = Some(rig.tern(3, 2, 200));
    rig.b = Some(rig.keepalived(4, 3, 100));
    rig.await_states("master", "backup", "start");
    rig.ping_through("tern master");
    rig.a.as_mut().expect("a").stop_now(false);
    rig.await_states("stopped", "master", "tern stopped");
    rig.ping_through("keepalived took over");
    rig.a.as_mut().expect("a").start();
    rig.await_states("master", "backup", "tern back (preemption)");
    rig.ping_through("tern master again");
}

/// keepalived (a) master at 200, tern (b) backup at 100: keepalived is
/// killed, tern takes over on Master_Down; keepalived returns and
/// preempts.
fn keepalived_master_tern_backup(base: &str, fam: Fam) {
    if let Some(why) = missing(true) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut rig = Rig::new(base, fam);
    rig.a = Some(rig.keepalived(3, 3, 200));
    rig.b = Some(rig.tern(4, 2, 100));
    rig.await_states("master", "backup", "start");
    rig.ping_through("keepalived master");
    rig.a.as_mut().expect("a").stop_now(true);
    rig.await_states("stopped", "master", "keepalived killed");
    rig.ping_through("tern took over");
    rig.a.as_mut().expect("a").start();
    rig.await_states("master", "backup", "keepalived back (preemption)");
    rig.ping_through("keepalived master again");
}

#[test]
fn v4_tern_master_keepalived_backup() {
    tern_master_keepalived_backup("vrrp4a", Fam::V4);
}

#[test]
fn v4_keepalived_master_tern_backup() {
    keepalived_master_tern_backup("vrrp4b", Fam::V4);
}

#[test]
fn v6_tern_master_keepalived_backup() {
    tern_master_keepalived_backup("vrrp6a", Fam::V6);
}

#[test]
fn v6_keepalived_master_tern_backup() {
    keepalived_master_tern_backup("vrrp6b", Fam::V6);
}

/// Two terns: the master (200) is SIGKILLed, the backup takes over on
/// Master_Down; the master returns and preempts; then it stops cleanly
/// (priority 0) and the backup takes over again.
fn tern_against_tern(base: &str, driver: &'static str, fam: Fam) {
    if let Some(why) = missing(false) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut rig = Rig::new(base, fam);
    rig.driver = driver;
    rig.a = Some(rig.tern(3, 2, 200));
    rig.b = Some(rig.tern(4, 3, 100));
    rig.await_states("master", "backup", "start");
    rig.ping_through("a master");
    rig.ping_virtual("a master (accept mode)");
    rig.a.as_mut().expect("a").stop_now(true);
    rig.await_states("stopped", "master", "a killed");
    rig.ping_through("b took over");
    rig.ping_virtual("b master (accept mode)");
    rig.a.as_mut().expect("a").start();
    rig.await_states("master", "backup", "a back (preemption)");
    rig.ping_through("a master again");
    // The notify command saw every transition of a's LAN group.
    let f = rig.dir.join("tern-a-lan.state");
    let read = || std::fs::read_to_string(&f).unwrap_or_default().trim().to_string();
    assert!(tern_testkit::netns::wait_until(WAIT, || read() == "master"), "{}: {:?}", f.display(), read());
    rig.a.as_mut().expect("a").stop_now(false);
    rig.await_states("stopped", "master", "a stopped (priority 0)");
    rig.ping_through("b master again");
}

#[test]
fn tern_against_tern_afpacket() {
    tern_against_tern("vrrptt", "afpacket", Fam::V4);
}

/// The XDP lane punts advertisements to the engine in standalone mode
/// (224.0.0.18 / ff02::12, which it otherwise passes to Linux or drops).
#[test]
fn tern_against_tern_xdp() {
    tern_against_tern("vrrpttx", "xdp", Fam::V4);
}

#[test]
fn tern_against_tern_xdp_v6() {
    tern_against_tern("vrrpttx6", "xdp", Fam::V6);
}

/// The AF_XDP steering program hands advertisements to tern
/// (224.0.0.18 / ff02::12 redirected to its socket, not passed to Linux).
#[test]
fn tern_against_tern_afxdp() {
    tern_against_tern("vrrptta", "afxdp", Fam::V4);
}

#[test]
fn tern_against_tern_afxdp_v6() {
    tern_against_tern("vrrptta6", "afxdp", Fam::V6);
}

#[test]
fn tern_against_tern_v6() {
    tern_against_tern("vrrptt6", "afpacket", Fam::V6);
}
