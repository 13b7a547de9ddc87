//! VRRP with unmodified Linux daemons (issue 41, part 1): a pair of tern
//! routers in Linux mode, each with its own keepalived (`use_vmac`, so
//! keepalived puts the virtual MAC on a macvlan over the router's device,
//! which tern's kernel mirror follows), a LAN host using the virtual
//! address as its gateway, a server behind both routers (its route back
//! through the WAN side's virtual address). The master's keepalived is
//! SIGKILLed, its LAN link set down, its daemon stopped: each time the
//! host's traffic moves to the backup, and back to the master (which
//! preempts) once it recovers; on the userspace lane (AF_PACKET) and on
//! the XDP lane.
//!
//! The failover gap (a host's numbered datagrams through the virtual
//! address while the master dies) is measured by `tern-bench failover`
//! (crates/bench/src/failover.rs), not here.
//!
//! Needs root, iproute2, ethtool and keepalived (`apt-get install -y
//! keepalived`); skipped with a message otherwise.

mod common;

use common::{TERN, is_root};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tern_testkit::netns::{Netns, Veth, on_path, wait_until};

/// How long any one step may take on a loaded 2-vCPU machine.
const STEP: Duration = Duration::from_secs(60);
const VMAC_LAN: &str = "00:00:5e:00:01:0a";
/// The IPv6 group's virtual MAC (RFC 5798 7.3: 00-00-5E-00-02-{VRID}).
const VMAC_LAN6: &str = "00:00:5e:00:02:0a";

/// What forwards between the LAN and the server: tern in Linux mode with
/// this lane (`driver`/`lane` line); with `tap`, the TAP exception path
/// (keepalived on the TAPs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fwd {
    lane: &'static str,
    tap: bool,
}

const USERSPACE: Fwd = Fwd { lane: "driver = \"afpacket\"", tap: false };
const XDP: Fwd = Fwd { lane: "lane = \"xdp\"", tap: false };
const TAP: Fwd = Fwd { lane: "driver = \"afpacket\"", tap: true };

/// host (10.1.0.2) -- br0 -- r1, r2 (lan0 10.1.0.1 / .3, VIP 10.1.0.254)
/// r1, r2 (wan0 10.2.0.1 / .3, VIP 10.2.0.254) -- br1 -- server (10.2.0.2).
struct Pair {
    fwd: Fwd,
    advert_int: &'static str,
    /// An IPv6 group on the LAN too (VRID 10, fd00:1::254; the routers at
    /// fd00:1::1 and ::3, the host at ::2), in keepalived's sync group.
    v6: bool,
    sw: Netns,
    h: Netns,
    /// The server's namespace, held for the pair's life.
    _s: Netns,
    r: [Netns; 2],
    dir: PathBuf,
    tern: [Option<Child>; 2],
    ka: [Option<Child>; 2],
}

fn skip() -> bool {
    if !is_root() {
        eprintln!("skipped: needs root");
        return true;
    }
    for p in ["keepalived", "ethtool", "bridge"] {
        if !on_path(p) {
            eprintln!("skipped: {p} is not installed (apt-get install -y keepalived ethtool iproute2)");
            return true;
        }
    }
    false
}

impl Pair {
    fn new(tag: &str, fwd: Fwd, advert_int: &'static str) -> Pair {
        Pair::with_v6(tag, fwd, advert_int, false)
    }

    fn with_v6(tag: &str, fwd: Fwd, advert_int: &'static str, v6: bool) -> Pair {
        let ns = |role: &str| Netns::unique(&format!("vrl{tag}{role}"));
        let (sw, h, s) = (ns("sw"), ns("h"), ns("s"));
        let r = [ns("r1"), ns("r2")];
        let dir = std::env::temp_dir().join(format!("vrrplinux-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        for n in [&sw, &h, &s] {
            if v6 && n.name == h.name {
                continue;
            }
            n.sysctl("net.ipv6.conf.all.disable_ipv6", "1");
            n.sysctl("net.ipv6.conf.default.disable_ipv6", "1");
        }
        for br in ["br0", "br1"] {
            sw.ip(&["link", "add", br, "type", "bridge"]);
            sw.ip(&["link", "set", br, "up"]);
        }
        Veth::new(&h, "eth0", &sw, "sh").tx_offload_off().create();
        Veth::new(&s, "eth0", &sw, "ss").tx_offload_off().create();
        sw.ip(&["link", "set", "sh", "master", "br0"]);
        sw.ip(&["link", "set", "ss", "master", "br1"]);
        for (i, rn) in r.iter().enumerate() {
            let n = i + 1;
            for (dev, port, br) in [("lan0", format!("l{n}"), "br0"), ("wan0", format!("w{n}"), "br1")] {
                Veth::new(rn, dev, &sw, &port).tx_offload_off().create();
                sw.ip(&["link", "set", &port, "master", br]);
                // Frames the XDP lane redirects into a veth need its
                // peer to take them (GRO on, or a program of its own).
                sw.exec_ok(&["ethtool", "-K", &port, "gro", "on"]);
            }
            std::fs::create_dir_all(dir.join(format!("r{n}"))).expect("router directory");
        }
        h.ip(&["addr", "add", "10.1.0.2/24", "dev", "eth0"]);
        h.ip(&["route", "add", "default", "via", "10.1.0.254"]);
        if v6 {
            h.ip(&["addr", "add", "fd00:1::2/64", "dev", "eth0", "nodad"]);
        }
        s.ip(&["addr", "add", "10.2.0.2/24", "dev", "eth0"]);
        s.ip(&["route", "add", "10.1.0.0/24", "via", "10.2.0.254"]);
        let mut p = Pair { fwd, advert_int, v6, sw, h, _s: s, r, dir, tern: [None, None], ka: [None, None] };
        for i in 0..2 {
            p.start_tern(i, fwd.lane, fwd.tap);
        }
        for i in 0..2 {
            p.start_keepalived(i);
        }
        p.await_roles(0);
        p
    }

    /// The device keepalived runs on for tern interface `name`: the
    /// interface's TAP on the TAP exception path, else the device.
    fn kdev(&self, name: &str) -> String {
        if self.fwd.tap { format!("tern-{name}") } else { name.to_string() }
    }

    fn rdir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("r{}", i + 1))
    }

    fn socket(&self, i: usize) -> String {
        self.rdir(i).join("tern.sock").display().to_string()
    }

    fn tern_cli(&self, i: usize, args: &[&str]) -> std::process::Output {
        let sock = self.socket(i);
        let mut v = vec!["--socket", sock.as_str()];
        v.extend_from_slice(args);
        Command::new(TERN).args(&v).output().expect("tern cli")
    }

    fn log(&self, i: usize, what: &str) -> String {
        std::fs::read_to_string(self.rdir(i).join(format!("{what}.log"))).unwrap_or_default()
    }

    fn start_tern(&mut self, i: usize, lane: &str, tap: bool) {
        let a = if i == 0 { 1 } else { 3 };
        let exception = if tap { "exception = \"tap\"" } else { "" };
        let lan6 = if self.v6 { format!(", \"fd00:1::{a}/64\"") } else { String::new() };
        let cfg = format!(
            r#"
[dataplane]
workers = 1

[[interface]]
name = "lan0"
device = "lan0"
{lane}
addresses = ["10.1.0.{a}/24"{lan6}]

[[interface]]
name = "wan0"
device = "wan0"
{lane}
addresses = ["10.2.0.{a}/24"]

[linux]
mode = "linux"
{exception}

[api]
socket = "{}"
"#,
            self.socket(i)
        );
        let d = self.rdir(i);
        std::fs::write(d.join("tern.toml"), cfg).expect("config");
        let log = std::fs::File::create(d.join("tern.log")).expect("log");
        self.tern[i] = Some(
            Command::new("ip")
                .args(["netns", "exec", &self.r[i].name, TERN, "run", "--config"])
                .arg(d.join("tern.toml"))
                .env("TERN_STATE_DIR", d.join("state"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("tern run"),
        );
        let ok = wait_until(STEP, || self.tern_cli(i, &["status"]).status.success());
        assert!(ok, "tern r{} did not come up:\n{}", i + 1, self.log(i, "tern"));
    }

    /// keepalived for router `i` (priority 200 for r1, 100 for r2; both
    /// start as BACKUP and r1 preempts), logging to `rN/keepalived.log`
    /// (where [`Pair::state`] reads its states); its notify script also
    /// writes `rN/LAN.state` and `rN/WAN.state`.
    fn start_keepalived(&mut self, i: usize) {
        let d = self.rdir(i);
        let prio = if i == 0 { 200 } else { 100 };
        let notify = d.join("notify.sh");
        // A killed VRRP process may linger as a zombie nobody reaps (in
        // a container): its pid file would say keepalived still runs.
        for f in ["LAN.state", "WAN.state", "ka.pid", "vrrp.pid", "checkers.pid"] {
            let _ = std::fs::remove_file(d.join(f));
        }
        std::fs::write(
            &notify,
            format!(
                "#!/bin/sh\n# $1 type, $2 name, $3 state\necho \"$3\" > {0}/$2.tmp && mv {0}/$2.tmp {0}/$2.state\n",
                d.display()
            ),
        )
        .expect("notify script");
        let _ = Command::new("chmod").args(["755"]).arg(&notify).status();
        let instance = |name: &str, dev: &str, vrid: u8, vip: &str| {
            format!(
                "vrrp_instance {name} {{\n  state BACKUP\n  interface {dev}\n  virtual_router_id {vrid}\n  priority {prio}\n  \
                 advert_int {}\n  use_vmac vrrp.{vrid}\n  virtual_ipaddress {{\n    {vip}\n  }}\n  notify {}\n}}\n",
                self.advert_int,
                notify.display()
            )
        };
        // The IPv6 group: VRID 10 too (IPv4 and IPv6 groups are apart,
        // RFC 5798 5.2.3), its own macvlan and virtual MAC.
        let (lan6, member6) = if self.v6 {
            let i6 = instance("LAN6", &self.kdev("lan0"), 10, "fd00:1::254/64").replace("vrrp.10", "vrrp6.10");
            (i6, "    LAN6\n")
        } else {
            (String::new(), "")
        };
        let conf = format!(
            "global_defs {{\n  router_id r{n}\n  script_user root\n  vrrp_version 3\n  vrrp_garp_master_delay 1\n}}\n\
             vrrp_sync_group G {{\n  group {{\n    LAN\n    WAN\n{member6}  }}\n}}\n{}{}{lan6}",
            instance("LAN", &self.kdev("lan0"), 10, "10.1.0.254/24"),
            instance("WAN", &self.kdev("wan0"), 20, "10.2.0.254/24"),
            n = i + 1
        );
        std::fs::write(d.join("keepalived.conf"), conf).expect("keepalived config");
        let log = std::fs::File::create(d.join("keepalived.log")).expect("log");
        let p = |f: &str| d.join(f).display().to_string();
        self.ka[i] = Some(
            Command::new("ip")
                .args(["netns", "exec", &self.r[i].name, "keepalived", "--vrrp", "-n", "-l", "-D", "-f"])
                .args([p("keepalived.conf"), "-p".into(), p("ka.pid"), "-r".into(), p("vrrp.pid")])
                .args(["-c".to_string(), p("checkers.pid")])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("keepalived"),
        );
    }

    /// Kills keepalived of router `i` with `sig`: SIGKILL takes its VRRP
    /// process first (as a crash would: no last advertisement), SIGTERM
    /// the parent (a clean stop: priority 0, its macvlans removed).
    fn stop_keepalived(&mut self, i: usize, sig: &str) {
        let Some(mut c) = self.ka[i].take() else { return };
        if sig == "KILL" {
            let vrrp = std::fs::read_to_string(self.rdir(i).join("vrrp.pid")).unwrap_or_default();
            if let Ok(pid) = vrrp.trim().parse::<u32>() {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            }
            let _ = c.kill();
        } else {
            let _ = Command::new("kill").args([&format!("-{sig}"), &c.id().to_string()]).status();
        }
        let deadline = Instant::now() + STEP;
        while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    }

    /// The state keepalived `i` last entered for instance `inst`, from its
    /// own log, which it writes in order ("(LAN) Entering MASTER STATE").
    /// (The notify script's files are not enough: keepalived runs its
    /// scripts in processes of their own, so a MASTER script may finish
    /// after the BACKUP one that followed it.)
    fn state(&self, i: usize, inst: &str) -> String {
        let log = self.log(i, "keepalived");
        let tag = format!("({inst}) Entering ");
        log.lines()
            .rev()
            .find_map(|l| l.split_once(&tag).and_then(|(_, rest)| rest.split_whitespace().next()))
            .unwrap_or_default()
            .to_string()
    }

    /// Waits until router `master` is MASTER of both instances (and the
    /// other, if its keepalived runs, BACKUP of both).
    fn await_roles(&self, master: usize) {
        let other = 1 - master;
        let insts: &[&str] = if self.v6 { &["LAN", "WAN", "LAN6"] } else { &["LAN", "WAN"] };
        let ok = wait_until(STEP, || {
            insts.iter().all(|inst| {
                self.state(master, inst) == "MASTER"
                    && (self.ka[other].is_none() || self.state(other, inst) != "MASTER")
            })
        });
        assert!(
            ok,
            "r{} did not become master ({:?}, {:?} / {:?}, {:?}):\n{}\n{}",
            master + 1,
            self.state(0, "LAN"),
            self.state(0, "WAN"),
            self.state(1, "LAN"),
            self.state(1, "WAN"),
            self.log(master, "keepalived"),
            self.log(master, "tern")
        );
    }

    /// The bridge port the LAN switch sends the virtual MAC to.
    fn vmac_port(&self) -> String {
        self.port_of(VMAC_LAN)
    }

    /// The bridge port the LAN switch sends `mac` to.
    fn port_of(&self, mac: &str) -> String {
        let out = self.sw.try_exec(&["bridge", "fdb", "show", "br", "br0"]).map(|o| o.stdout).unwrap_or_default();
        String::from_utf8_lossy(&out)
            .lines()
            .find(|l| l.starts_with(mac))
            .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
            .unwrap_or_default()
    }

    fn ping_once(&self) -> bool {
        self.h.exec_ok(&["ping", "-c", "1", "-W", "1", "10.2.0.2"])
    }

    /// Waits until the host reaches the server through the virtual
    /// address, its frames to the virtual MAC going to router `via`.
    fn await_traffic_via(&self, via: usize, what: &str) {
        let port = format!("l{}", via + 1);
        let ok = wait_until(STEP, || self.ping_once() && self.vmac_port() == port);
        assert!(
            ok,
            "{what}: no traffic through r{} (virtual MAC at {:?}):\nr1 tern:\n{}\nr2 tern:\n{}\nr{} keepalived:\n{}",
            via + 1,
            self.vmac_port(),
            self.log(0, "tern"),
            self.log(1, "tern"),
            via + 1,
            self.log(via, "keepalived")
        );
        // Several in a row: no flapping between the two.
        for n in 0..5 {
            assert!(self.ping_once(), "{what}: ping {n} after the move failed");
        }
        // The host's gateway is the virtual MAC (not a router's own,
        // which a kernel answering ARP for the virtual address on the
        // base device would have given).
        let neigh = self.h.ip(&["neigh", "show", "10.1.0.254"]);
        assert!(neigh.contains(VMAC_LAN), "{what}: the host's gateway: {neigh}");
    }
}

impl Pair {
    /// Waits until the host reaches the IPv6 virtual address, which
    /// router `via` answers from the IPv6 virtual MAC (the host's
    /// neighbour entry, and the switch's port for that MAC).
    fn await_v6_via(&self, via: usize, what: &str) {
        let port = format!("l{}", via + 1);
        let ping6 = || self.h.exec_ok(&["ping", "-6", "-c", "1", "-W", "1", "fd00:1::254"]);
        let ok = wait_until(STEP, || ping6() && self.port_of(VMAC_LAN6) == port);
        assert!(
            ok,
            "{what}: fd00:1::254 not answered through r{} (IPv6 virtual MAC at {:?}):\nr{} tern:\n{}\nkeepalived:\n{}",
            via + 1,
            self.port_of(VMAC_LAN6),
            via + 1,
            self.log(via, "tern"),
            self.log(via, "keepalived")
        );
        for n in 0..5 {
            assert!(ping6(), "{what}: ping6 {n} after the move failed");
        }
        let neigh = self.h.ip(&["-6", "neigh", "show", "fd00:1::254"]);
        assert!(neigh.contains(VMAC_LAN6), "{what}: the host's neighbour entry: {neigh}");
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for i in 0..2 {
            self.stop_keepalived(i, "TERM");
            tern_testkit::netns::stop(&mut self.tern[i], Duration::from_secs(10));
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("logs kept in {}", self.dir.display());
        }
    }
}

/// The three failures in turn, each undone with r1 preempting back.
fn failover(tag: &str, fwd: Fwd) {
    if skip() {
        return;
    }
    let mut p = Pair::new(tag, fwd, "0.1");
    p.await_traffic_via(0, "start");
    if fwd == XDP {
        let lane = p.lan0(0, "lane");
        assert!(lane.contains("xdp native"), "lan0's lane: {lane}");
    }
    let kernel_vmac = format!("{VMAC_LAN} (kernel)");
    assert!(p.vmacs(0).contains(&kernel_vmac), "r1's lan0 takes keepalived's virtual MAC: {}", p.vmacs(0));

    // 1. keepalived on the master crashes.
    p.stop_keepalived(0, "KILL");
    p.await_traffic_via(1, "r1's keepalived killed");
    p.start_keepalived(0);
    p.await_roles(0);
    p.await_traffic_via(0, "r1's keepalived back");

    // 2. The master's LAN link goes down.
    p.r[0].ip(&["link", "set", "lan0", "down"]);
    let ok = wait_until(STEP, || p.state(1, "LAN") == "MASTER");
    assert!(ok, "r2 did not take over from a link down:\n{}", p.log(1, "keepalived"));
    p.await_traffic_via(1, "r1's lan0 down");
    p.r[0].ip(&["link", "set", "lan0", "up"]);
    p.await_roles(0);
    p.await_traffic_via(0, "r1's lan0 up again");

    // 3. The master's daemon is stopped (a clean stop: priority 0).
    p.stop_keepalived(0, "TERM");
    let ok = wait_until(STEP, || p.state(1, "LAN") == "MASTER" && p.state(1, "WAN") == "MASTER");
    assert!(ok, "r2 did not take over from a stop:\n{}", p.log(1, "keepalived"));
    p.await_traffic_via(1, "r1's keepalived stopped");
    // keepalived removed its macvlans: r1 no longer takes the MAC.
    let ok = wait_until(STEP, || !p.vmacs(0).contains(VMAC_LAN));
    assert!(ok, "r1's lan0 still takes the virtual MAC: {}", p.vmacs(0));
    p.start_keepalived(0);
    p.await_roles(0);
    p.await_traffic_via(0, "r1's keepalived started again");
}

impl Pair {
    /// The virtual MACs tern's lan0 on router `i` accepts, as `tern
    /// interface show` lists them.
    fn vmacs(&self, i: usize) -> String {
        self.lan0(i, "virtual_macs")
    }

    /// Field `field` of lan0 on router `i` in `tern interface show`'s
    /// JSON ("" without the field).
    fn lan0(&self, i: usize, field: &str) -> String {
        let out = self.tern_cli(i, &["--json", "interface", "show"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let list = |v: &serde_json::Value| -> Option<String> {
            let lan = v.as_array()?.iter().find(|i| i["name"] == "lan0")?;
            Some(lan.get(field).map(|m| m.to_string()).unwrap_or_default())
        };
        list(&v).or_else(|| list(v.get("interfaces")?)).unwrap_or_else(|| format!("no lan0 in {v}"))
    }
}

#[test]
fn keepalived_pair_fails_over_on_the_userspace_lane() {
    failover("u", USERSPACE);
}

#[test]
fn keepalived_pair_fails_over_on_the_xdp_lane() {
    failover("x", XDP);
}

#[test]
fn keepalived_pair_fails_over_on_the_tap_exception_path() {
    failover("t", TAP);
}

/// An IPv6 virtual address (keepalived's IPv6 group, `use_vmac`: its own
/// macvlan with 00:00:5e:00:02:0a) over tern in Linux mode on the XDP
/// lane: the host pings it through the master; the master's keepalived
/// killed, the backup answers from the same virtual MAC; back on r1 once
/// it returns and preempts.
#[test]
fn keepalived_ipv6_virtual_address_fails_over_on_the_xdp_lane() {
    if skip() {
        return;
    }
    let mut p = Pair::with_v6("6", XDP, "0.1", true);
    p.await_v6_via(0, "start");
    let kernel_vmac = format!("{VMAC_LAN6} (kernel)");
    assert!(p.vmacs(0).contains(&kernel_vmac), "r1's lan0 takes the IPv6 virtual MAC: {}", p.vmacs(0));
    p.stop_keepalived(0, "KILL");
    let ok = wait_until(STEP, || p.state(1, "LAN6") == "MASTER");
    assert!(ok, "r2 did not take the IPv6 group over:\n{}", p.log(1, "keepalived"));
    p.await_v6_via(1, "r1's keepalived killed");
    p.start_keepalived(0);
    p.await_roles(0);
    p.await_v6_via(0, "r1's keepalived back");
}
