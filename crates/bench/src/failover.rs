//! `tern-bench failover`: the availability measurement of issue 41. A
//! host sends numbered UDP datagrams (10,000 a second by default) through
//! a VRRP virtual address; the master dies (its VRRP daemon SIGKILLed,
//! then its forwarding stopped: tern SIGKILLed, or the Linux router's
//! forwarding turned off; a killed keepalived alone leaves the master
//! forwarding until the backup's gratuitous ARP moves the virtual MAC,
//! which measures only that move). The gap is the longest run of
//! sequence numbers that never arrived over the rate. For each setup:
//!
//! - `linux`: a keepalived pair over Linux forwarding (the reference);
//! - `tern-afpacket`, `tern-xdp`: a keepalived pair over tern in Linux
//!   mode (`use_vmac`), on the AF_PACKET lane and on the XDP lane;
//! - `tern-vrrp`: tern's own VRRPv3 pair (standalone, `[[vrrp]]`, AF_PACKET);
//!
//! at each advertisement interval (100 ms and 10 ms by default), `--runs`
//! times each, every run in a lab of its own:
//!
//! ```text
//!   host 10.1.0.2 -- br0 --+-- lan0 [r1 .1, priority 200] wan0 --+-- br1 -- server 10.2.0.2
//!   (gw 10.1.0.254)        +-- lan0 [r2 .3, priority 100] wan0 --+   (10.1.0.0/24 via 10.2.0.254)
//! ```
//!
//! The table gives the gap's median, min and max, the goal (3 x
//! interval plus the backup's skew, (256 - 100) / 256 x interval: RFC 5798's
//! Master_Down interval, + 20 ms) and the median of `lost`: every datagram
//! missing between the first and the last that arrived, over the rate.
//! `lost` above the gap means the traffic came back and went again: with
//! keepalived, probably the dead master's kernel (its keepalived
//! SIGKILLed, its macvlan and virtual address left behind) answering the
//! host's ARP probes from the virtual MAC, so that the switch sends the
//! traffic back to it until the new master's next advertisement (`--json` has every run's
//! gaps, `lost_runs`). Needs root, iproute2, ethtool, bridge and keepalived.

use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};
use tern_testkit::netns::{self, Netns, Veth, wait_until};

/// How long one step (a daemon up, roles settled, traffic through) may take.
const STEP: Duration = Duration::from_secs(60);
const VMAC_LAN: &str = "00:00:5e:00:01:0a";
/// The backup's priority (the master's is 200).
const BACKUP_PRIORITY: u32 = 100;
/// UDP port of the server's receiver.
const PORT: u16 = 9999;

/// What `tern-bench failover` measures.
#[derive(Debug, Clone, clap::Args)]
pub struct FailoverArgs {
    /// Runs per setup and interval (each in a fresh lab).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Datagrams per second through the virtual address.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(100..=200_000))]
    pub rate: u32,
    /// Advertisement intervals in milliseconds, comma separated (10 ms steps: keepalived's unit).
    #[arg(long, value_delimiter = ',', default_values_t = [100u32, 10])]
    pub interval_ms: Vec<u32>,
    /// Setups, comma separated: linux, tern-afpacket, tern-xdp, tern-vrrp.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Setup::ALL)]
    pub setup: Vec<Setup>,
    /// The tern binary (default: `tern` beside this program).
    #[arg(long)]
    pub tern_bin: Option<PathBuf>,
    /// Write every run's raw result here as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What forwards, and what speaks VRRP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setup {
    /// keepalived over Linux forwarding.
    Linux,
    /// keepalived over tern in Linux mode, AF_PACKET lane.
    TernAfpacket,
    /// keepalived over tern in Linux mode, XDP lane.
    TernXdp,
    /// tern's own VRRPv3, standalone, AF_PACKET lane.
    TernVrrp,
}

impl Setup {
    pub const ALL: [Setup; 4] = [Setup::Linux, Setup::TernAfpacket, Setup::TernXdp, Setup::TernVrrp];

    fn label(self) -> &'static str {
        match self {
            Setup::Linux => "keepalived, Linux forwarding",
            Setup::TernAfpacket => "keepalived, tern AF_PACKET lane",
            Setup::TernXdp => "keepalived, tern XDP lane",
            Setup::TernVrrp => "tern VRRPv3 (afpacket)",
        }
    }

    fn keepalived(self) -> bool {
        self != Setup::TernVrrp
    }

    /// The `[[interface]]` line choosing the lane.
    fn lane(self) -> &'static str {
        match self {
            Setup::TernXdp => "lane = \"xdp\"",
            _ => "driver = \"afpacket\"",
        }
    }
}

impl fmt::Display for Setup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One run's result.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub setup: Setup,
    pub interval_ms: u32,
    pub rate: u32,
    pub sent: u32,
    pub received: u32,
    /// Longest run of missing sequence numbers.
    pub lost_run: u32,
    pub gap_ms: f64,
    /// Every sequence number missing between the first and the last
    /// that arrived, over the rate: the outage when the traffic came back
    /// and went again (a gap's `lost_runs` say where).
    pub lost_ms: f64,
    /// Every run of at least 1 ms of missing sequence numbers (between
    /// the first and the last that arrived), as [first missing, length];
    /// the master died at sequence number `kill_seq`.
    pub lost_runs: Vec<[u32; 2]>,
    pub kill_seq: u32,
}

/// The goal for `interval_ms`: Master_Down (3 intervals + skew) + 20 ms.
pub fn goal_ms(interval_ms: u32) -> f64 {
    let i = f64::from(interval_ms);
    3.0 * i + f64::from(256 - BACKUP_PRIORITY) * i / 256.0 + 20.0
}

/// The longest run of `false` between the first and the last `true`.
pub fn longest_gap(got: &[bool]) -> u32 {
    let (Some(first), Some(last)) = (got.iter().position(|&b| b), got.iter().rposition(|&b| b)) else {
        return 0;
    };
    let (mut longest, mut run) = (0u32, 0u32);
    for &b in &got[first..=last] {
        run = if b { 0 } else { run + 1 };
        longest = longest.max(run);
    }
    longest
}

/// The runs of `false` of at least `min` between the first and the last
/// `true`, as [start, length].
pub fn gaps(got: &[bool], min: u32) -> Vec<[u32; 2]> {
    let (Some(first), Some(last)) = (got.iter().position(|&b| b), got.iter().rposition(|&b| b)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut start = None;
    for (i, &b) in got.iter().enumerate().take(last + 1).skip(first) {
        match (b, start) {
            (false, None) => start = Some(i as u32),
            (true, Some(s)) => {
                if i as u32 - s >= min {
                    out.push([s, i as u32 - s]);
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Median, min and max of `v` (not empty).
pub fn summary(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
    (median, s[0], s[n - 1])
}

/// The whole measurement: every setup at every interval, `runs` times; the
/// table on stdout, the raw runs in `--json`.
pub fn run(a: &FailoverArgs) -> Result<(), String> {
    if !netns::is_root() {
        return Err("failover needs root".into());
    }
    for p in ["ip", "ethtool", "bridge"] {
        if !netns::on_path(p) {
            return Err(format!("{p} is not installed (apt-get install -y iproute2 ethtool)"));
        }
    }
    if a.setup.iter().any(|s| s.keepalived()) && !netns::on_path("keepalived") {
        return Err("keepalived is not installed (apt-get install -y keepalived)".into());
    }
    if let Some(i) = a.interval_ms.iter().find(|&&i| i == 0 || i % 10 != 0 || i > 40_950) {
        return Err(format!("--interval-ms {i}: need a multiple of 10 in 10..=40950"));
    }
    let tern = tern_bin(a.tern_bin.as_deref())?;
    let mut runs = Vec::new();
    for &interval in &a.interval_ms {
        for &setup in &a.setup {
            for n in 0..a.runs {
                eprintln!("== {setup}, interval {interval} ms, run {} of {}", n + 1, a.runs);
                let r = one_run(&tern, setup, interval, a.rate)?;
                eprintln!("   gap {:.1} ms ({} of {} received)", r.gap_ms, r.received, r.sent);
                runs.push(r);
            }
        }
    }
    print!("{}", table(&runs));
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&runs).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("raw results written to {}", path.display());
    }
    Ok(())
}

/// The table: one row per setup and interval.
pub fn table(runs: &[Run]) -> String {
    let mut out = format!(
        "{:<34} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  runs (ms)\n",
        "setup", "interval", "median", "min", "max", "goal", "lost"
    );
    let mut keys: Vec<(u32, Setup)> = Vec::new();
    for r in runs {
        if !keys.contains(&(r.interval_ms, r.setup)) {
            keys.push((r.interval_ms, r.setup));
        }
    }
    for (interval, setup) in keys {
        let gaps: Vec<f64> =
            runs.iter().filter(|r| r.interval_ms == interval && r.setup == setup).map(|r| r.gap_ms).collect();
        let (med, min, max) = summary(&gaps);
        let lost: Vec<f64> =
            runs.iter().filter(|r| r.interval_ms == interval && r.setup == setup).map(|r| r.lost_ms).collect();
        let each: Vec<String> = gaps.iter().map(|g| format!("{g:.1}")).collect();
        out += &format!(
            "{:<34} {:>5} ms {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1}  {}\n",
            setup.label(),
            interval,
            med,
            min,
            max,
            goal_ms(interval),
            summary(&lost).0,
            each.join(", ")
        );
    }
    out
}

fn tern_bin(given: Option<&Path>) -> Result<PathBuf, String> {
    let p = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?.with_file_name("tern"),
    };
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!("{}: no tern binary there (cargo build --release -p tern, or --tern-bin)", p.display()))
    }
}

/// One lab, one death, one gap.
fn one_run(tern: &Path, setup: Setup, interval_ms: u32, rate: u32) -> Result<Run, String> {
    let mut lab = Lab::new(tern, setup, interval_ms)?;
    lab.await_ready()?;
    let secs = 3u32;
    let kill_at = Duration::from_secs(1);
    let total = rate * secs;
    let (got, sent) = lab.traffic(rate, total, kill_at)?;
    let received = got.iter().filter(|&&b| b).count() as u32;
    let last = got.iter().rposition(|&b| b).unwrap_or(0) as u32;
    if last + rate / 2 < total {
        return Err(format!(
            "{setup}, {interval_ms} ms: traffic did not come back through the backup \
             (last datagram {last} of {total}); logs in {}",
            lab.keep_logs()
        ));
    }
    let lost_run = longest_gap(&got);
    let kill_seq = (u128::from(rate) * kill_at.as_millis() / 1000) as u32;
    let first = got.iter().position(|&b| b).unwrap_or(0);
    let lost = got[first..=last as usize].iter().filter(|&&b| !b).count() as u32;
    Ok(Run {
        lost_ms: f64::from(lost) * 1000.0 / f64::from(rate),
        lost_runs: gaps(&got, (rate / 1000).max(1)),
        kill_seq,
        setup,
        interval_ms,
        rate,
        sent,
        received,
        lost_run,
        gap_ms: f64::from(lost_run) * 1000.0 / f64::from(rate),
    })
}

/// host, switch, server and the two routers, with their daemons.
struct Lab {
    setup: Setup,
    interval_ms: u32,
    tern: PathBuf,
    sw: Netns,
    h: Netns,
    s: Netns,
    r: [Netns; 2],
    dir: PathBuf,
    terns: [Option<Child>; 2],
    kas: [Option<Child>; 2],
    keep: bool,
}

impl Lab {
    fn new(tern: &Path, setup: Setup, interval_ms: u32) -> Result<Lab, String> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let run = N.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let ns = |role: &str| Netns::create(&format!("failover{pid}-{run}{role}")).map_err(String::from);
        let (sw, h, s) = (ns("sw")?, ns("h")?, ns("s")?);
        let r = [ns("r1")?, ns("r2")?];
        let dir = std::env::temp_dir().join(format!("tern-failover-{pid}-{run}"));
        let _ = std::fs::remove_dir_all(&dir);
        for i in 1..=2 {
            std::fs::create_dir_all(dir.join(format!("r{i}"))).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let mut lab = Lab {
            setup,
            interval_ms,
            tern: tern.to_path_buf(),
            sw,
            h,
            s,
            r,
            dir,
            terns: [None, None],
            kas: [None, None],
            keep: false,
        };
        lab.wire()?;
        for i in 0..2 {
            if setup != Setup::Linux {
                lab.start_tern(i)?;
            }
            if setup.keepalived() {
                lab.start_keepalived(i)?;
            }
        }
        Ok(lab)
    }

    fn wire(&self) -> Result<(), String> {
        let (sw, h, s) = (&self.sw, &self.h, &self.s);
        for n in [sw, h, s] {
            n.try_sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
            n.try_sysctl("net.ipv6.conf.default.disable_ipv6", "1")?;
        }
        for br in ["br0", "br1"] {
            sw.try_ip(&["link", "add", br, "type", "bridge", "mcast_snooping", "0", "forward_delay", "0"])?;
            sw.try_ip(&["link", "set", br, "up"])?;
        }
        Veth::new(h, "eth0", sw, "sh").tx_offload_off().try_create()?;
        Veth::new(s, "eth0", sw, "ss").tx_offload_off().try_create()?;
        sw.try_ip(&["link", "set", "sh", "master", "br0"])?;
        sw.try_ip(&["link", "set", "ss", "master", "br1"])?;
        for (i, rn) in self.r.iter().enumerate() {
            let n = i + 1;
            for (dev, port, br) in [("lan0", format!("l{n}"), "br0"), ("wan0", format!("w{n}"), "br1")] {
                Veth::new(rn, dev, sw, &port).tx_offload_off().try_create()?;
                sw.try_ip(&["link", "set", &port, "master", br])?;
                // Frames the XDP lane redirects into a veth need its
                // peer to take them (GRO on, or a program of its own).
                sw.try_exec_must(&["ethtool", "-K", &port, "gro", "on"])?;
            }
            if self.setup == Setup::Linux {
                let a = Self::me(i);
                rn.try_ip(&["addr", "add", &format!("10.1.0.{a}/24"), "dev", "lan0"])?;
                rn.try_ip(&["addr", "add", &format!("10.2.0.{a}/24"), "dev", "wan0"])?;
                rn.try_sysctl("net.ipv4.conf.all.forwarding", "1")?;
                rn.try_sysctl("net.ipv4.conf.default.forwarding", "1")?;
            }
        }
        h.try_ip(&["addr", "add", "10.1.0.2/24", "dev", "eth0"])?;
        h.try_ip(&["route", "add", "default", "via", "10.1.0.254"])?;
        s.try_ip(&["addr", "add", "10.2.0.2/24", "dev", "eth0"])?;
        s.try_ip(&["route", "add", "10.1.0.0/24", "via", "10.2.0.254"])?;
        Ok(())
    }

    fn me(i: usize) -> u8 {
        if i == 0 { 1 } else { 3 }
    }

    fn priority(i: usize) -> u32 {
        if i == 0 { 200 } else { BACKUP_PRIORITY }
    }

    fn rdir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("r{}", i + 1))
    }

    fn socket(&self, i: usize) -> String {
        self.rdir(i).join("tern.sock").display().to_string()
    }

    fn tern_cli(&self, i: usize, args: &[&str]) -> Option<std::process::Output> {
        Command::new(&self.tern).arg("--socket").arg(self.socket(i)).args(args).output().ok()
    }

    fn log(&self, i: usize, what: &str) -> String {
        let s = std::fs::read_to_string(self.rdir(i).join(format!("{what}.log"))).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn start_tern(&mut self, i: usize) -> Result<(), String> {
        let a = Self::me(i);
        let lane = self.setup.lane();
        let sock = self.socket(i);
        let tail = if self.setup == Setup::TernVrrp {
            let group = |iface: &str, vrid: u8, vip: &str| {
                format!(
                    "[[vrrp]]\ninterface = \"{iface}\"\nvrid = {vrid}\npriority = {}\ninterval_ms = {}\n\
                     addresses = [\"{vip}\"]\npreempt = true\n\n",
                    Self::priority(i),
                    self.interval_ms
                )
            };
            group("lan0", 10, "10.1.0.254") + &group("wan0", 20, "10.2.0.254")
        } else {
            "[linux]\nmode = \"linux\"\n".to_string()
        };
        let cfg = format!(
            "[dataplane]\nworkers = 1\n\n\
             [[interface]]\nname = \"lan0\"\ndevice = \"lan0\"\n{lane}\naddresses = [\"10.1.0.{a}/24\"]\n\n\
             [[interface]]\nname = \"wan0\"\ndevice = \"wan0\"\n{lane}\naddresses = [\"10.2.0.{a}/24\"]\n\n\
             {tail}[api]\nsocket = \"{sock}\"\n\n[metrics]\nlisten = \"\"\n"
        );
        let d = self.rdir(i);
        let file = |e: std::io::Error| format!("{}: {e}", d.display());
        std::fs::write(d.join("tern.toml"), cfg).map_err(file)?;
        let log = std::fs::File::create(d.join("tern.log")).map_err(file)?;
        let child = Command::new("ip")
            .args(["netns", "exec", &self.r[i].name])
            .arg(&self.tern)
            .args(["run", "--config"])
            .arg(d.join("tern.toml"))
            .env("TERN_STATE_DIR", d.join("state"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{}: {e}", self.tern.display()))?;
        self.terns[i] = Some(child);
        if !wait_until(STEP, || self.tern_cli(i, &["status"]).is_some_and(|o| o.status.success())) {
            return Err(format!("tern on r{} did not come up:\n{}", i + 1, self.log(i, "tern")));
        }
        Ok(())
    }

    /// keepalived for router `i` (both start as BACKUP, r1 preempts),
    /// logging to `rN/keepalived.log`, where [`Lab::states`] reads its
    /// states.
    fn start_keepalived(&mut self, i: usize) -> Result<(), String> {
        let d = self.rdir(i);
        let file = |e: std::io::Error| format!("{}: {e}", d.display());
        let advert = format!("{}.{:02}", self.interval_ms / 1000, self.interval_ms % 1000 / 10);
        let instance = |name: &str, dev: &str, vrid: u8, vip: &str| {
            format!(
                "vrrp_instance {name} {{\n  state BACKUP\n  interface {dev}\n  virtual_router_id {vrid}\n  \
                 priority {}\n  advert_int {advert}\n  use_vmac vrrp.{vrid}\n  virtual_ipaddress {{\n    {vip}\n  }}\n}}\n",
                Self::priority(i),
            )
        };
        let conf = format!(
            "global_defs {{\n  router_id r{n}\n  script_user root\n  vrrp_version 3\n  vrrp_garp_master_delay 1\n}}\n\
             vrrp_sync_group G {{\n  group {{\n    LAN\n    WAN\n  }}\n}}\n{}{}",
            instance("LAN", "lan0", 10, "10.1.0.254/24"),
            instance("WAN", "wan0", 20, "10.2.0.254/24"),
            n = i + 1
        );
        std::fs::write(d.join("keepalived.conf"), conf).map_err(file)?;
        let log = std::fs::File::create(d.join("keepalived.log")).map_err(file)?;
        let p = |f: &str| d.join(f).display().to_string();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.r[i].name, "keepalived", "--vrrp", "-n", "-l", "-D", "-f"])
            .args([p("keepalived.conf"), "-p".into(), p("ka.pid"), "-r".into(), p("vrrp.pid")])
            .args(["-c".to_string(), p("checkers.pid")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("keepalived: {e}"))?;
        self.kas[i] = Some(child);
        Ok(())
    }

    /// The VRRP states of router `i`'s two groups, lower case.
    fn states(&self, i: usize) -> Vec<String> {
        if self.setup.keepalived() {
            // (The whole log: `log` keeps only its tail for messages.)
            let log = std::fs::read_to_string(self.rdir(i).join("keepalived.log")).unwrap_or_default();
            return ["LAN", "WAN"].iter().filter_map(|inst| keepalived_state(&log, inst)).collect();
        }
        let v: serde_json::Value = self
            .tern_cli(i, &["--json", "vrrp", "show"])
            .and_then(|o| serde_json::from_slice(&o.stdout).ok())
            .unwrap_or_default();
        find_states(&v)
    }

    /// The bridge port the LAN switch sends the virtual MAC to.
    fn vmac_port(&self) -> String {
        let out = self.sw.try_exec(&["bridge", "fdb", "show", "br", "br0"]).map(|o| o.stdout).unwrap_or_default();
        String::from_utf8_lossy(&out)
            .lines()
            .find(|l| l.starts_with(VMAC_LAN))
            .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
            .unwrap_or_default()
    }

    /// r1 master of both groups, r2 backup of both, and the host's ping
    /// through the virtual address going to r1.
    fn await_ready(&mut self) -> Result<(), String> {
        let roles = || {
            let (a, b) = (self.states(0), self.states(1));
            a.len() == 2 && a.iter().all(|s| s == "master") && b.len() == 2 && b.iter().all(|s| s == "backup")
        };
        if !wait_until(STEP, roles) {
            let (a, b) = (self.states(0), self.states(1));
            return Err(format!("roles did not settle (r1 {a:?}, r2 {b:?}); logs in {}", self.keep_logs()));
        }
        let through = || self.h.exec_ok(&["ping", "-c", "1", "-W", "1", "10.2.0.2"]) && self.vmac_port() == "l1";
        if !wait_until(STEP, through) {
            return Err(format!(
                "no traffic through r1 (virtual MAC at {:?}); logs in {}",
                self.vmac_port(),
                self.keep_logs()
            ));
        }
        Ok(())
    }

    /// Router 0 dies: its VRRP daemon SIGKILLed (keepalived's VRRP
    /// process first, as a crash: no last advertisement), then its
    /// forwarding stopped (tern SIGKILLed, or the kernel's turned off).
    fn kill_master(&mut self) {
        if let Some(mut c) = self.kas[0].take() {
            let vrrp = std::fs::read_to_string(self.rdir(0).join("vrrp.pid")).unwrap_or_default();
            if let Ok(pid) = vrrp.trim().parse::<u32>() {
                let _ = netns::output("kill", &["-KILL", &pid.to_string()]);
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        match self.setup {
            Setup::Linux => {
                let _ = self.r[0].try_sysctl("net.ipv4.conf.all.forwarding", "0");
            }
            _ => {
                if let Some(mut c) = self.terns[0].take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
    }

    /// `total` numbered datagrams at `rate`/s from the host to the server,
    /// the master killed after `kill_at`: which arrived, and how many were
    /// sent.
    fn traffic(&mut self, rate: u32, total: u32, kill_at: Duration) -> Result<(Vec<bool>, u32), String> {
        let done = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let sname = self.s.name.clone();
        let stop = Arc::clone(&done);
        let recv = std::thread::spawn(move || -> Result<Vec<bool>, String> {
            let fail = |e: std::io::Error| format!("server: {e}");
            netns::enter(&sname).map_err(fail)?;
            let sock = std::net::UdpSocket::bind(("10.2.0.2", PORT)).map_err(fail)?;
            sock.set_read_timeout(Some(Duration::from_millis(50))).map_err(fail)?;
            let _ = ready_tx.send(());
            let mut got = vec![false; total as usize];
            let mut buf = [0u8; 64];
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = sock.recv(&mut buf)
                    && n >= 4
                {
                    let seq = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
                    if let Some(s) = got.get_mut(seq as usize) {
                        *s = true;
                    }
                }
            }
            Ok(got)
        });
        if ready_rx.recv_timeout(STEP).is_err() {
            done.store(true, Ordering::Relaxed);
            return Err(recv.join().map_err(|_| "receiver panicked".to_string())?.err().unwrap_or_default());
        }
        let hname = self.h.name.clone();
        let send = std::thread::spawn(move || -> Result<u32, String> {
            let fail = |e: std::io::Error| format!("host: {e}");
            netns::enter(&hname).map_err(fail)?;
            let sock = std::net::UdpSocket::bind("10.1.0.2:0").map_err(fail)?;
            sock.connect(("10.2.0.2", PORT)).map_err(fail)?;
            let t0 = Instant::now();
            let step = Duration::from_secs(1) / rate;
            let mut b = [0u8; 32];
            let mut sent = 0;
            for seq in 0..total {
                let due = t0 + step * seq;
                let now = Instant::now();
                if due > now + Duration::from_micros(200) {
                    std::thread::sleep(due - now);
                }
                b[..4].copy_from_slice(&seq.to_be_bytes());
                if sock.send(&b).is_ok() {
                    sent += 1;
                }
            }
            Ok(sent)
        });
        std::thread::sleep(kill_at);
        self.kill_master();
        let sent = send.join().map_err(|_| "sender panicked".to_string());
        // What is in flight lands within the receiver's last timeouts.
        std::thread::sleep(Duration::from_millis(300));
        done.store(true, Ordering::Relaxed);
        let got = recv.join().map_err(|_| "receiver panicked".to_string())??;
        Ok((got, sent??))
    }

    /// Keeps the logs (and says where they are).
    fn keep_logs(&mut self) -> String {
        self.keep = true;
        self.dir.display().to_string()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for i in 0..2 {
            netns::stop(&mut self.kas[i], Duration::from_secs(10));
            netns::stop(&mut self.terns[i], Duration::from_secs(10));
        }
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The state keepalived last entered for instance `inst`, lower case,
/// from its own log, which it writes in order ("(LAN) Entering MASTER
/// STATE"). A notify script's files are not enough: keepalived runs each
/// script in a process of its own, so a MASTER script may finish after the
/// BACKUP one that followed it (the race netns_vrrp_linux.rs had).
fn keepalived_state(log: &str, inst: &str) -> Option<String> {
    let tag = format!("({inst}) Entering ");
    log.lines()
        .rev()
        .find_map(|l| l.split_once(&tag).and_then(|(_, rest)| rest.split_whitespace().next()))
        .map(str::to_lowercase)
}

/// The `state` of every group in `vrrp show --json`'s answer.
fn find_states(v: &serde_json::Value) -> Vec<String> {
    match v {
        serde_json::Value::Object(m) if m.contains_key("vrid") => {
            vec![m.get("state").and_then(|s| s.as_str()).unwrap_or("").to_lowercase()]
        }
        serde_json::Value::Object(m) => m.values().flat_map(find_states).collect(),
        serde_json::Value::Array(a) => a.iter().flat_map(find_states).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_gap_counts_between_first_and_last_arrival() {
        let t = true;
        let f = false;
        assert_eq!(longest_gap(&[f, f, t, t, f, f, f, t, f, t, f, f, f, f]), 3);
        assert_eq!(longest_gap(&[t, t, t]), 0);
        assert_eq!(longest_gap(&[f, f]), 0);
        assert_eq!(longest_gap(&[]), 0);
        assert_eq!(gaps(&[f, t, f, f, t, f, t, f, f, f, t, f], 2), [[2, 2], [7, 3]]);
        assert_eq!(gaps(&[f, f], 1), Vec::<[u32; 2]>::new());
    }

    #[test]
    fn goal_is_master_down_plus_20_ms() {
        // 3 x 100 + 156/256 x 100 + 20.
        assert!((goal_ms(100) - 380.9375).abs() < 1e-9);
        assert!((goal_ms(10) - 56.09375).abs() < 1e-9);
    }

    #[test]
    fn summary_and_table() {
        assert_eq!(summary(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(summary(&[4.0, 1.0]), (2.5, 1.0, 4.0));
        let run = |setup, interval_ms, gap_ms| Run {
            setup,
            interval_ms,
            rate: 10_000,
            sent: 30_000,
            received: 29_000,
            lost_run: 0,
            gap_ms,
            lost_ms: gap_ms,
            lost_runs: Vec::new(),
            kill_seq: 10_000,
        };
        let t = table(&[run(Setup::Linux, 100, 350.0), run(Setup::Linux, 100, 360.0), run(Setup::TernXdp, 10, 50.0)]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[1].contains("Linux forwarding") && lines[1].contains("355.0"), "{t}");
        assert!(lines[2].contains("XDP lane") && lines[2].contains("56.1"), "{t}");
    }

    #[test]
    fn keepalived_states_are_the_last_entered_in_its_log() {
        let log = "Sun Dec  6 10:00:00 2026: (LAN) Entering BACKUP STATE (init)\n\
                   Sun Dec  6 10:00:00 2026: (WAN) Entering BACKUP STATE (init)\n\
                   Sun Dec  6 10:00:01 2026: (LAN) Entering MASTER STATE\n\
                   Sun Dec  6 10:00:01 2026: (LAN) sent 0 priority\n";
        assert_eq!(keepalived_state(log, "LAN").as_deref(), Some("master"));
        assert_eq!(keepalived_state(log, "WAN").as_deref(), Some("backup"));
        assert_eq!(keepalived_state(log, "DMZ"), None);
        assert_eq!(keepalived_state("", "LAN"), None);
    }

    #[test]
    fn tern_states_are_found_in_vrrp_show() {
        let v = serde_json::json!({"groups": [{"vrid": 10, "state": "Master"}, {"vrid": 20, "state": "backup"}]});
        assert_eq!(find_states(&v), ["master", "backup"]);
    }
}
