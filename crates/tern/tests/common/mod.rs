//! Helpers shared by the tests that run the real `tern` in network
//! namespaces (each test file uses what it needs).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

pub fn sh(prog: &str, args: &[&str]) -> Output {
    Command::new(prog).args(args).output().unwrap_or_else(|e| panic!("{prog}: {e}"))
}

pub fn must(prog: &str, args: &[&str]) -> String {
    let o = sh(prog, args);
    assert!(o.status.success(), "{prog} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stops the daemon (SIGTERM, then SIGKILL after `grace`), deletes the
/// namespaces and the scratch directory: a lab's teardown, also when an
/// assertion failed.
pub fn tear_down(daemon: &mut Option<Child>, namespaces: &[String], dir: &Path, grace: Duration) {
    if let Some(mut d) = daemon.take() {
        let _ = sh("kill", &["-TERM", &d.id().to_string()]);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && matches!(d.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = d.kill();
        let _ = d.wait();
    }
    for n in namespaces {
        let _ = sh("ip", &["netns", "del", n]);
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `ip netns exec NS ARGS...`, which must succeed; its stdout.
pub fn netns_exec(ns: &str, args: &[&str]) -> String {
    let mut v = vec!["netns", "exec", ns];
    v.extend_from_slice(args);
    must("ip", &v)
}

/// The two-host topology of the netns tests, router side left to the
/// caller: namespaces `[h1, r, h2]` (loopback up), veths `h1:eth0 --
/// r:lan0` and `h2:eth0 -- r:wan0`, host N at 10.0.N.2/24 and
/// 2001:db8:N::2/64 with default routes via .1 / ::1, no DAD, and full
/// transport checksums in the hosts' frames (tx offload off: AF_XDP and
/// the router's kernel see them finished, as from a host on a wire).
pub fn two_hosts(ns: &[String; 3]) {
    for n in ns {
        must("ip", &["netns", "add", n]);
        must("ip", &["-n", n, "link", "set", "lo", "up"]);
    }
    let (h1, r, h2) = (&ns[0], &ns[1], &ns[2]);
    must("ip", &["link", "add", "eth0", "netns", h1, "type", "veth", "peer", "name", "lan0", "netns", r]);
    must("ip", &["link", "add", "eth0", "netns", h2, "type", "veth", "peer", "name", "wan0", "netns", r]);
    for (h, n) in [(h1, 1), (h2, 2)] {
        netns_exec(h, &["sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0"]);
        netns_exec(h, &["ethtool", "-K", "eth0", "tx", "off"]);
        must("ip", &["-n", h, "link", "set", "eth0", "up"]);
        must("ip", &["-n", h, "addr", "add", &format!("10.0.{n}.2/24"), "dev", "eth0"]);
        must("ip", &["-n", h, "-6", "addr", "add", &format!("2001:db8:{n}::2/64"), "dev", "eth0", "nodad"]);
        must("ip", &["-n", h, "route", "add", "default", "via", &format!("10.0.{n}.1")]);
        must("ip", &["-n", h, "-6", "route", "add", "default", "via", &format!("2001:db8:{n}::1")]);
    }
}

/// A /metrics scrape from inside namespace `ns` (the server listens on
/// its loopback, 127.0.0.1:9456).
pub fn scrape_in(ns: &str) -> String {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        tern_io::netdev::enter_netns(&ns).expect("enter netns");
        let mut s = std::net::TcpStream::connect("127.0.0.1:9456").expect("metrics");
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").expect("request");
        let mut body = String::new();
        s.read_to_string(&mut body).expect("answer");
        body
    })
    .join()
    .expect("scrape thread")
}

/// The value of sample `name` (with its labels) in a scrape.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the scrape"))
}

/// Why a two-host lab cannot run here (not root, a tool missing), if so.
pub fn lab_missing() -> Option<&'static str> {
    if !is_root() {
        return Some("needs root");
    }
    for (p, a) in [("ip", "-V"), ("ping", "-V"), ("ethtool", "--version")] {
        if Command::new(p).arg(a).stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
            return Some("needs iproute2, iputils-ping and ethtool");
        }
    }
    None
}

/// The [`two_hosts`] topology in namespaces `{base}h1`, `{base}r`,
/// `{base}h2`, a work directory, and the `tern` daemon once started; all
/// torn down on drop.
pub struct Lab {
    pub ns: [String; 3],
    pub dir: PathBuf,
    pub daemon: Option<Child>,
}

impl Lab {
    pub fn two_hosts(base: &str) -> Lab {
        let ns = [format!("{base}h1"), format!("{base}r"), format!("{base}h2")];
        let dir = std::env::temp_dir().join(base);
        let _ = std::fs::create_dir_all(&dir);
        let lab = Lab { ns, dir, daemon: None };
        two_hosts(&lab.ns);
        lab
    }

    /// The control socket of the daemon started in the work directory.
    pub fn socket(&self) -> String {
        self.dir.join("tern.sock").display().to_string()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        tear_down(&mut self.daemon, &self.ns, &self.dir, Duration::from_secs(10));
    }
}
