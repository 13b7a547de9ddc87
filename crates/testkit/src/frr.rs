//! The FRR and BIRD lab of `scripts/frr/lab.sh`, driven from Rust: the
//! tests that run tern against real routing daemons (`linux_frr`,
//! `frr_kill`) and `tern-bench convergence` share it.
//!
//! ```text
//!  src ── rsrc [r: tern + zebra/bgpd/ospfd] ri1 ── i1 (BIRD, primary)
//!                                           ri2 ── i2 (BIRD, secondary)
//!                                           ro2 ── o2 (FRR ospfd)
//! ```
//! [`FrrLab`] names the lab's namespaces and files, runs `lab.sh`
//! subcommands in it and takes it down when dropped (unless
//! `TERN_LAB_KEEP` is set). The functions below poll an in-process
//! [`Router`] the way those tests and the measurement do.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tern_control::router::Router;

/// `scripts/frr/lab.sh` in this source tree.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/frr/lab.sh")
}

/// Prefix -> forwarding ("G1,G2" sorted gateways, "dev" for a connected
/// route), as [`kernel_table`] and the tests' views of tern write it.
pub type Table = std::collections::BTreeMap<String, String>;

/// One running lab (see the module).
pub struct FrrLab {
    prefix: String,
    exception: &'static str,
    /// One lab at a time in a process: two would fight over the
    /// machine's cores and the FPM port.
    _one: std::sync::MutexGuard<'static, ()>,
}

static ONE_LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl FrrLab {
    /// Takes down what an earlier run with the same names left, or
    /// `None` (with a message) when this machine cannot run the lab: not
    /// root, or frr / bird2 not installed. `tag` starts the names of the
    /// lab's namespaces (with the process id); `exception` is lab.sh's
    /// `TERN_LAB_EXCEPTION` ("kernel" or "tap").
    pub fn new(tag: &str, exception: &'static str) -> Option<FrrLab> {
        if !crate::netns::is_root() {
            eprintln!("skipped: needs root");
            return None;
        }
        for bin in ["/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "/usr/lib/frr/ospfd", "/usr/sbin/bird"] {
            if !Path::new(bin).exists() {
                eprintln!("skipped: {bin} missing (apt-get install -y frr bird2)");
                return None;
            }
        }
        let one = ONE_LAB.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let t = if exception == "tap" { "t" } else { "" };
        let lab = FrrLab { prefix: format!("{tag}{}{t}-", std::process::id() % 100_000), exception, _one: one };
        lab.sh(&["down"]);
        Some(lab)
    }

    /// What the lab's namespaces and directory names start with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The lab's directory (`/tmp/PREFIX`): daemon configurations, route
    /// files, logs, tern's socket.
    pub fn dir(&self) -> PathBuf {
        PathBuf::from(format!("/tmp/{}", self.prefix))
    }

    /// tern's API socket in the configuration [`FrrLab::linux_config`] writes.
    pub fn socket(&self) -> PathBuf {
        self.dir().join("tern.sock")
    }

    /// `lab.sh ARGS[0] PREFIX ARGS[1..]`: its standard output; fails the
    /// caller (panics) when it fails, except for `down`.
    pub fn sh(&self, args: &[&str]) -> String {
        let Some((first, rest)) = args.split_first() else { return String::new() };
        let out = Command::new("bash")
            .arg(script())
            .arg(first)
            .arg(&self.prefix)
            .args(rest)
            .env("TERN_LAB_EXCEPTION", self.exception)
            .output()
            .expect("run lab.sh");
        assert!(
            out.status.success() || *first == "down",
            "lab.sh {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The full name of the lab's namespace `n` ("r", "src", "i1", ...).
    pub fn ns(&self, n: &str) -> String {
        format!("{}{n}", self.prefix)
    }

    /// Runs a command in namespace `n`: (success, stdout).
    pub fn exec(&self, n: &str, args: &[&str]) -> (bool, String) {
        let out = Command::new("ip").args(["netns", "exec", &self.ns(n)]).args(args).output().expect("ip netns exec");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Three pings from namespace `from` to `to`: (all answered, output).
    pub fn ping(&self, from: &str, to: &str) -> (bool, String) {
        self.exec(from, &["ping", "-c", "3", "-i", "0.2", "-W", "1", to])
    }

    /// tern in Linux mode on the router namespace's four devices with
    /// driver `driver` (`TERN_FRR_DRIVER` in the tests), FPM from zebra
    /// on 127.0.0.1:2620, the API on [`FrrLab::socket`], no metrics.
    pub fn linux_config(&self, driver: &str) -> String {
        let mut s = String::from("[dataplane]\nworkers = 1\npool_frames = 4096\n");
        for (name, dev) in [("src", "rsrc"), ("i1", "ri1"), ("i2", "ri2"), ("o2", "ro2")] {
            s.push_str(&format!("\n[[interface]]\nname = \"{name}\"\ndevice = \"{dev}\"\ndriver = \"{driver}\"\n"));
        }
        s.push_str(&format!(
            "\n[api]\nsocket = \"{}\"\n\n[metrics]\nlisten = \"\"\n\n[linux]\nmode = \"linux\"\n\
             fpm_listen = \"127.0.0.1:2620\"\nfpm_resync_quiet_ms = 500\n",
            self.socket().display()
        ));
        s
    }

    /// The first address of every IPv4 prefix the injectors announce
    /// (`routes4.conf`, written by `lab.sh routes`).
    pub fn announced_v4(&self) -> Vec<u32> {
        let text = std::fs::read_to_string(self.dir().join("routes4.conf")).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter_map(|p| p.parse::<tern_fib::Prefix>().ok())
            .filter_map(|p| match p.addr() {
                IpAddr::V4(a) => Some(u32::from(a)),
                IpAddr::V6(_) => None,
            })
            .collect()
    }
}

impl Drop for FrrLab {
    fn drop(&mut self) {
        if std::env::var_os("TERN_LAB_KEEP").is_some() {
            eprintln!("keeping the lab: scripts/frr/lab.sh down {}", self.prefix);
            return;
        }
        self.sh(&["down"]);
    }
}

/// An address as the standard library writes it (IPv6 compressed), or
/// the text as it was.
pub fn canon_addr(a: &str) -> String {
    a.parse::<IpAddr>().map_or_else(|_| a.to_string(), |a| a.to_string())
}

/// "ADDR/LEN" with the address as [`canon_addr`] writes it.
pub fn canon(p: &str) -> String {
    match p.split_once('/') {
        Some((a, l)) => format!("{}/{l}", canon_addr(a)),
        None => p.to_string(),
    }
}

/// What zebra installed in the router namespace's kernel (main table,
/// IPv4 and IPv6, unicast routes of the protocols zebra sends over FPM:
/// bgp, ospf and kernel, i.e. connected).
pub fn kernel_table(lab: &FrrLab) -> Table {
    let mut m = Table::new();
    for fam in ["-4", "-6"] {
        let (ok, out) = lab.exec("r", &["ip", "-j", fam, "route", "show", "table", "main"]);
        assert!(ok, "ip route: {out}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j route");
        for e in v.as_array().into_iter().flatten() {
            let proto = e["protocol"].as_str().unwrap_or_default();
            if !matches!(proto, "bgp" | "ospf" | "kernel") || e.get("type").is_some_and(|t| t != "unicast") {
                continue;
            }
            let dst = match e["dst"].as_str().unwrap_or_default() {
                "default" if fam == "-4" => "0.0.0.0/0".to_string(),
                "default" => "::/0".to_string(),
                d if d.contains('/') => d.to_string(),
                d if fam == "-4" => format!("{d}/32"),
                d => format!("{d}/128"),
            };
            let key = if let Some(g) = e["gateway"].as_str() {
                canon_addr(g)
            } else if let Some(nhs) = e["nexthops"].as_array() {
                let mut v: Vec<String> = nhs.iter().filter_map(|n| n["gateway"].as_str().map(canon_addr)).collect();
                v.sort();
                v.join(",")
            } else {
                "dev".to_string()
            };
            m.insert(canon(&dst), key);
        }
    }
    m
}

/// Polls the router until `f` holds; panics after `secs` with the
/// sources' state. Returns how long it took.
pub fn until(r: &mut Router, secs: u64, what: &str, mut f: impl FnMut(&mut Router) -> bool) -> Duration {
    let t0 = Instant::now();
    let mut last_check = Instant::now() - Duration::from_secs(1);
    loop {
        if !r.poll() {
            std::thread::sleep(Duration::from_millis(2));
        }
        if last_check.elapsed() >= Duration::from_millis(50) {
            last_check = Instant::now();
            if f(r) {
                return t0.elapsed();
            }
        }
        if t0.elapsed() > Duration::from_secs(secs) {
            panic!("timed out waiting for {what}; sources {:#?}", r.source_status());
        }
    }
}

/// Polls the router on this thread while `f` runs elsewhere (a command
/// that needs tern to answer, e.g. a ping through it).
pub fn while_polling<T: Send>(r: &mut Router, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        let h = s.spawn(f);
        while !h.is_finished() {
            if !r.poll() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        h.join().expect("command thread")
    })
}

/// A counter of the router's `fpm` source, by JSON pointer
/// ("/routes/adds", "/fpm/frames", "/fpm/resyncs", ...); 0 without one.
pub fn fpm_counter(r: &Router, pointer: &str) -> u64 {
    r.source_status()
        .iter()
        .find(|(n, _)| n == "fpm")
        .and_then(|(_, s)| s.pointer(pointer).and_then(serde_json::Value::as_u64))
        .unwrap_or(0)
}

/// The source and first gateway of the route tern uses for `a`.
pub fn gw(r: &Router, a: &str) -> Option<(tern_fib::Source, IpAddr)> {
    let d = r.route_get(a.parse().ok()?)?;
    Some((d.source, d.nexthops.first()?.gw))
}

/// CPU time of the calling thread (user + system), from /proc (10 ms ticks).
pub fn thread_cpu() -> Duration {
    // After the command's closing parenthesis: state, ppid, pgrp, session,
    // tty_nr, tpgid, flags, minflt, cminflt, majflt, cmajflt, utime, stime
    // (clock ticks of 10 ms). tpgid is -1 without a terminal: keep every
    // field, numeric or not, so the positions hold.
    let s = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let after = s.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis((field(11) + field(12)) * 10)
}
