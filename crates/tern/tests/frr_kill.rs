//! The real `tern run` against real FRR and BIRD, killed (issue 35): in
//! the lab of scripts/frr/lab.sh (tern in Linux mode on the router
//! namespace's four devices, zebra streaming over FPM, BIRD injecting a
//! slice of the real table over eBGP) `tern run` gets SIGKILL while zebra
//! is streaming the table to it and is started again with the same
//! configuration; then half the table is withdrawn in BIRD; then zebra
//! restarts. After each step tern's `fpm` routes, as `tern route show
//! --json` lists them, must be exactly the routes zebra installed in the
//! router namespace's kernel (prefix and next hop: 0 stale, 0 missing).
//! After the final stop the host is as it was: no XDP program on the
//! devices, no TAP, every sysctl tern changed back.
//!
//! Needs root, iproute2, frr and bird2 (`apt-get install -y frr bird2`);
//! skipped with a message otherwise. `TERN_FRR_KILL=N4,N6` sizes the table
//! (default 3000,300); `TERN_FRR_DRIVER` picks the driver (default auto).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tern_testkit::frr::{FrrLab, Table, canon, canon_addr, kernel_table};

const TERN: &str = env!("CARGO_BIN_EXE_tern");
/// How long any one step may take on a loaded 2-vCPU machine.
const STEP: Duration = Duration::from_secs(180);

struct Lab {
    lab: FrrLab,
    dir: PathBuf,
    tern: Option<Child>,
}

impl std::ops::Deref for Lab {
    type Target = FrrLab;
    fn deref(&self) -> &FrrLab {
        &self.lab
    }
}

impl Lab {
    fn new() -> Option<Lab> {
        let lab = FrrLab::new("tk", "kernel")?;
        Some(Lab { dir: lab.dir(), lab, tern: None })
    }

    fn socket(&self) -> String {
        self.lab.socket().display().to_string()
    }

    fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// Starts `tern run` in the router namespace (`ip netns exec` execs
    /// it: the child is tern) and waits until its API answers.
    fn start(&mut self, log_name: &str) {
        assert!(self.tern.is_none(), "tern already running");
        let log = std::fs::File::create(self.dir.join(log_name)).expect("log");
        self.tern = Some(
            Command::new("ip")
                .args(["netns", "exec", &self.ns("r"), TERN, "run", "--config"])
                .arg(self.dir.join("tern.toml"))
                .env("TERN_STATE_DIR", self.state())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start tern"),
        );
        let deadline = Instant::now() + STEP;
        while self.cli(&["status"]).is_none() {
            let log = std::fs::read_to_string(self.dir.join(log_name)).unwrap_or_default();
            let exited = self.tern.as_mut().is_some_and(|c| !matches!(c.try_wait(), Ok(None)));
            assert!(!exited && Instant::now() < deadline, "tern did not come up:\n{log}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends `sig` to tern and waits until it has exited.
    fn stop(&mut self, sig: &str) {
        let mut c = self.tern.take().expect("tern running");
        assert!(Command::new("kill").args([sig, &c.id().to_string()]).status().expect("kill").success());
        let deadline = Instant::now() + STEP;
        while matches!(c.try_wait(), Ok(None)) {
            assert!(Instant::now() < deadline, "tern did not exit after {sig}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `tern --socket S --json ARGS`: the JSON it prints, or None when
    /// the command failed (tern not up yet).
    fn cli(&self, args: &[&str]) -> Option<serde_json::Value> {
        let o = Command::new(TERN).args(["--socket", &self.socket(), "--json"]).args(args).output().ok()?;
        if !o.status.success() {
            return None;
        }
        serde_json::from_slice(&o.stdout).ok()
    }

    /// A counter of tern's `fpm` source (`tern status`).
    fn fpm(&self, key: &str) -> u64 {
        self.cli(&["status"])
            .and_then(|s| s["sources"].as_array()?.iter().find(|x| x["name"] == "fpm").and_then(|x| x[key].as_u64()))
            .unwrap_or(0)
    }

    /// tern's `fpm` routes in use, and its connected ones (zebra sends
    /// the connected routes too; tern's own copy of those wins): prefix ->
    /// next hops (sorted, ",") or "dev" for a connected route or the kind.
    fn tern_table(&self) -> Option<Table> {
        let v = self.cli(&["route", "show"])?;
        let routes = v.get("routes").unwrap_or(&v).as_array()?.clone();
        let mut m = Table::new();
        let wanted = |r: &&serde_json::Value| r["best"] == true && (r["source"] == "fpm" || r["kind"] == "connected");
        for r in routes.iter().filter(wanted) {
            let kind = r["kind"].as_str().unwrap_or_default();
            let key = match kind {
                "via" | "ecmp" => {
                    let mut g: Vec<String> =
                        r["via"].as_array().into_iter().flatten().filter_map(|g| g.as_str().map(canon_addr)).collect();
                    g.sort();
                    g.join(",")
                }
                "connected" => "dev".into(),
                k => k.to_string(),
            };
            m.insert(canon(r["prefix"].as_str().unwrap_or_default()), key);
        }
        Some(m)
    }

    /// Waits until the kernel's table is what the step wants and tern's
    /// `fpm` routes are exactly that table; fails after [`STEP`] with the
    /// differences.
    fn until_same_table(&self, what: &str, want: impl Fn(&Table) -> Result<(), String>) -> usize {
        let deadline = Instant::now() + STEP;
        loop {
            let k = kernel_table(&self.lab);
            let t = self.tern_table().unwrap_or_default();
            let wanted = want(&k);
            if t == k && wanted.is_ok() {
                eprintln!("{what}: {} routes, tern = zebra's table", t.len());
                return t.len();
            }
            if Instant::now() > deadline {
                let missing: Vec<_> = k.iter().filter(|(p, g)| t.get(*p) != Some(g)).take(10).collect();
                let stale: Vec<_> = t.iter().filter(|(p, g)| k.get(*p) != Some(g)).take(10).collect();
                let n_missing = k.iter().filter(|(p, g)| t.get(*p) != Some(g)).count();
                let n_stale = t.iter().filter(|(p, g)| k.get(*p) != Some(g)).count();
                panic!(
                    "{what}: tern {} routes, kernel {}; the kernel's table as wanted: {wanted:?}; {n_missing} missing or different {missing:?}; {n_stale} stale or different {stale:?}; tern status {:?}",
                    t.len(),
                    k.len(),
                    self.cli(&["status"])
                );
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.tern.take() {
            let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        // The lab itself goes down when `self.lab` is dropped, after this.
    }
}

/// The prefixes of a BIRD route file (`route P via G;` lines).
fn prefixes(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("route ")?.split_whitespace().next().map(canon))
        .collect()
}

/// Keeps the first `keep` lines of a BIRD route file.
fn truncate(file: &Path, keep: usize) {
    let s = std::fs::read_to_string(file).expect("route file");
    let mut out: String = s.lines().take(keep).collect::<Vec<_>>().join("\n");
    out.push('\n');
    std::fs::write(file, out).expect("write route file");
}

/// Every prefix of `on` in `k` on a gateway, none of `off`.
fn has(k: &Table, on: &BTreeSet<String>, off: &BTreeSet<String>) -> Result<(), String> {
    let missing = on.iter().filter(|p| k.get(*p).is_none_or(|g| g == "dev")).count();
    let extra = off.iter().filter(|p| k.contains_key(*p)).count();
    if missing == 0 && extra == 0 {
        Ok(())
    } else {
        Err(format!("{missing} announced prefixes missing, {extra} withdrawn ones present"))
    }
}

fn config(lab: &Lab) -> String {
    lab.linux_config(&std::env::var("TERN_FRR_DRIVER").unwrap_or_else(|_| "auto".into()))
}

const DEVS: [&str; 4] = ["rsrc", "ri1", "ri2", "ro2"];

/// What tern may change on the router's devices, as the kernel says it.
fn host_state(lab: &Lab) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let mut keys = vec!["net.ipv4.ip_forward".to_string(), "net.ipv6.conf.all.forwarding".to_string()];
    for dev in DEVS {
        for k in
            ["ipv4.conf.{}.forwarding", "ipv4.conf.{}.arp_ignore", "ipv4.conf.{}.arp_accept", "ipv4.conf.{}.rp_filter"]
                .into_iter()
                .chain(["ipv6.conf.{}.disable_ipv6", "ipv6.conf.{}.accept_ra", "ipv6.conf.{}.forwarding"])
        {
            keys.push(format!("net.{}", k.replace("{}", dev)));
        }
    }
    for k in keys {
        let (_, val) = lab.exec("r", &["sysctl", "-n", &k]);
        v.push((k, val.trim().to_string()));
    }
    for dev in DEVS {
        let (_, link) = lab.exec("r", &["ip", "-o", "link", "show", dev]);
        let flags = link.split('<').nth(1).and_then(|s| s.split('>').next()).unwrap_or("").to_string();
        v.push((format!("{dev} link up"), flags.split(',').any(|f| f == "UP").to_string()));
    }
    v
}

#[test]
fn tern_killed_mid_table_and_zebra_restarted_converge_to_zebras_table() {
    let Some(mut lab) = Lab::new() else { return };
    let sizes = std::env::var("TERN_FRR_KILL").unwrap_or_else(|_| "3000,300".into());
    let (n4, n6) = sizes.split_once(',').unwrap_or(("3000", "300"));
    lab.sh(&["net"]);
    eprintln!("{}", lab.sh(&["routes", n4, n6]).trim());
    std::fs::write(lab.dir.join("tern.toml"), config(&lab)).expect("config");
    let files4 = [lab.dir.join("routes4.conf"), lab.dir.join("i2/routes4.conf")];
    let files6 = [lab.dir.join("routes6.conf"), lab.dir.join("i2/routes6.conf")];
    let all: BTreeSet<String> = prefixes(&files4[0]).into_iter().chain(prefixes(&files6[0])).collect();
    let none = BTreeSet::new();
    let before = host_state(&lab);

    // 1. tern comes up, then the daemons: zebra connects and streams the
    // table; tern gets SIGKILL once part of it has arrived.
    lab.start("tern1.log");
    lab.sh(&["daemons"]);
    let deadline = Instant::now() + STEP;
    let first = (all.len() as u64 / 10).clamp(1, 200);
    let mut at_kill = 0;
    while at_kill < first {
        assert!(Instant::now() < deadline, "no routes over FPM: {:?}", lab.cli(&["status"]));
        std::thread::sleep(Duration::from_millis(5));
        at_kill = lab.fpm("adds");
    }
    lab.stop("-KILL");
    eprintln!("tern killed after {at_kill} fpm route adds of the table's {} prefixes", all.len());

    // 2. The same tern again: zebra reconnects and resends; tern ends on
    // exactly zebra's table.
    lab.start("tern2.log");
    let log2 = std::fs::read_to_string(lab.dir.join("tern2.log")).unwrap_or_default();
    assert!(log2.contains("did not stop cleanly"), "the restart after SIGKILL restores what was left:\n{log2}");
    lab.until_same_table("tern killed mid-table and restarted", |k| has(k, &all, &none));
    // What tern changed on the host while it runs (the final check's
    // other side): an XDP program per device with the AF_XDP driver, the
    // sysctls of Linux mode.
    let (_, links) = lab.exec("r", &["ip", "-d", "link", "show"]);
    let running = host_state(&lab);
    let changed: Vec<_> = before.iter().zip(&running).filter(|(b, a)| b != a).map(|(_, a)| a).collect();
    assert!(!changed.is_empty(), "tern changed no sysctl: the final check would prove nothing");
    eprintln!("while tern runs: XDP programs on {} devices; changed {changed:?}", links.matches("prog/xdp").count());

    // 3. BIRD withdraws half the table (both peers): the kernel drops it,
    // so must tern.
    for f in files4.iter().chain(&files6) {
        let n = prefixes(f).len();
        truncate(f, n.div_ceil(2));
    }
    let kept: BTreeSet<String> = prefixes(&files4[0]).into_iter().chain(prefixes(&files6[0])).collect();
    let gone: BTreeSet<String> = all.difference(&kept).cloned().collect();
    assert!(!gone.is_empty() && kept.contains("203.0.113.0/24"));
    for n in ["i1", "i2"] {
        let out = lab.sh(&["birdc", n, "configure"]);
        assert!(out.contains("econfigur"), "birdc configure in {n}: {out}");
    }
    let dels0 = lab.fpm("dels");
    lab.until_same_table("half withdrawn", |k| has(k, &kept, &gone));
    assert!(lab.fpm("dels") - dels0 >= gone.len() as u64, "fewer deletes than withdrawn prefixes");

    // 4. zebra restarts: it resends its whole table to tern, which keeps
    // what zebra still has and sweeps the rest.
    let msgs0 = lab.fpm("route_msgs");
    lab.sh(&["restart-frr"]);
    let deadline = Instant::now() + STEP;
    while lab.fpm("route_msgs") < msgs0 + kept.len() as u64 {
        assert!(Instant::now() < deadline, "zebra never resent its table: {:?}", lab.cli(&["status"]));
        std::thread::sleep(Duration::from_millis(200));
    }
    lab.until_same_table("zebra restarted", |k| has(k, &kept, &gone));
    let (ok, out) = lab.exec("src", &["ping", "-c", "3", "-i", "0.2", "-W", "2", "203.0.113.1"]);
    assert!(ok && !out.contains("DUP"), "ping through tern after it all: {out}");

    // 5. A clean stop leaves the host as it was before tern first ran,
    // although its first run was killed.
    lab.stop("-TERM");
    let (_, links) = lab.exec("r", &["ip", "-d", "link", "show"]);
    assert!(!links.contains("xdp"), "an XDP program stayed on a device:\n{links}");
    let (_, taps) = lab.exec("r", &["ip", "-d", "link", "show", "type", "tun"]);
    assert!(taps.trim().is_empty(), "a TAP stayed:\n{taps}");
    let after = host_state(&lab);
    let left: Vec<_> = before.iter().zip(&after).filter(|(b, a)| b != a).collect();
    assert!(left.is_empty(), "not restored after SIGKILL, restart and stop: {left:?}");
    let files: Vec<_> = std::fs::read_dir(lab.state()).map(|d| d.filter_map(Result::ok).collect()).unwrap_or_default();
    assert!(files.is_empty(), "state files left after a clean stop: {files:?}");
}
