//! Throwaway network namespaces, veth pairs and the two-host lab.
//!
//! One implementation of what `tern lab`, the RFC 2544 tester and the
//! tests of `tern`, `tern-xdp` and `tern-control` each used to carry.
//! Everything runs iproute2, `ethtool` and `sysctl` as child processes, so
//! a failure quotes the command to rerun by hand. Each operation comes
//! twice: fallible (`create`, `try_*`, [`run`], [`output`]: a
//! [`CmdError`]) for tools, and panicking (`named`, `ip`, `exec`, ...) for
//! test fixtures. A namespace deletes itself on drop, also when the test
//! failed, which also removes its veths. Work inside a namespace runs on a
//! thread that entered it ([`Netns::run`]), because setns(2) changes only
//! the calling thread.
//!
//! Without the crate's `full` feature only this module is built (what
//! `tern lab` links).

use std::fmt;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A command that could not start, or failed: its command line (to rerun
/// by hand) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError {
    /// The command line.
    pub cmd: String,
    /// Why it could not start, or its exit status and stderr.
    pub detail: String,
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` failed: {}", self.cmd, self.detail)
    }
}

impl std::error::Error for CmdError {}

impl From<CmdError> for String {
    fn from(e: CmdError) -> String {
        e.to_string()
    }
}

fn cmd_line(prog: &str, args: &[&str]) -> String {
    std::iter::once(prog).chain(args.iter().copied()).collect::<Vec<_>>().join(" ")
}

/// Runs a program (stdin closed) and returns its output, whatever its exit
/// status; an error only if it cannot start.
pub fn output(prog: &str, args: &[&str]) -> Result<Output, CmdError> {
    Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CmdError { cmd: cmd_line(prog, args), detail: format!("cannot start: {e}") })
}

/// Runs a program that must succeed; its stdout, or an error quoting the
/// command, its status and its stderr.
pub fn run(prog: &str, args: &[&str]) -> Result<String, CmdError> {
    let o = output(prog, args)?;
    if !o.status.success() {
        return Err(CmdError {
            cmd: cmd_line(prog, args),
            detail: format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr).trim()),
        });
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Whether this process runs as root (uid 0), read from /proc.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

/// True when namespace tests can run (root); otherwise prints why `what`
/// is skipped and returns false, for `if !privileged(..) { return; }`.
pub fn privileged(what: &str) -> bool {
    let root = is_root();
    if !root {
        eprintln!("skipped: {what} needs root");
    }
    root
}

/// Runs a program and returns its output; panics only if it cannot start.
pub fn sh(prog: &str, args: &[&str]) -> Output {
    output(prog, args).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs a program that must succeed; its stdout.
pub fn must(prog: &str, args: &[&str]) -> String {
    run(prog, args).unwrap_or_else(|e| panic!("{e}"))
}

/// Whether a program ran and succeeded.
pub fn sh_ok(prog: &str, args: &[&str]) -> bool {
    output(prog, args).is_ok_and(|o| o.status.success())
}

/// `ip netns exec NS ARGS...`, which must succeed; its stdout.
pub fn netns_exec(ns: &str, args: &[&str]) -> String {
    let mut v = vec!["netns", "exec", ns];
    v.extend_from_slice(args);
    must("ip", &v)
}

/// Whether `prog` can be started at all (`prog arg` with output discarded).
pub fn have(prog: &str, arg: &str) -> bool {
    Command::new(prog).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// Whether a program is on PATH (found, not run).
pub fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(prog).is_file()))
}

/// Enters the namespace at `path` (or named `name` under /run/netns) on
/// the calling thread.
pub fn enter(name_or_path: &str) -> std::io::Result<()> {
    let path = if name_or_path.contains('/') {
        PathBuf::from(name_or_path)
    } else {
        Path::new("/run/netns").join(name_or_path)
    };
    let f = File::open(path)?;
    move_into_link_name_space(f.as_fd(), Some(LinkNameSpaceType::Network))?;
    Ok(())
}

/// A network namespace with its loopback up, deleted on drop (unless kept).
#[derive(Debug)]
pub struct Netns {
    pub name: String,
    file: File,
    keep: bool,
}

impl Netns {
    /// Creates namespace `name` (which must not exist) with its loopback up.
    pub fn create(name: &str) -> Result<Netns, CmdError> {
        run("ip", &["netns", "add", name])?;
        let path = format!("/run/netns/{name}");
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                let _ = output("ip", &["netns", "del", name]);
                return Err(CmdError { cmd: format!("open {path}"), detail: e.to_string() });
            }
        };
        let ns = Netns { name: name.to_string(), file, keep: false };
        ns.try_ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// [`Netns::create`] that must succeed.
    pub fn named(name: &str) -> Netns {
        Netns::create(name).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Creates a namespace named `{prefix}{pid}-{n}`: parallel tests and
    /// leftovers of earlier runs never collide.
    pub fn unique(prefix: &str) -> Netns {
        Netns::named(&format!("{prefix}{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)))
    }

    /// `ip -n NAME args...`; its stdout.
    pub fn try_ip(&self, args: &[&str]) -> Result<String, CmdError> {
        let mut v = vec!["-n", self.name.as_str()];
        v.extend_from_slice(args);
        run("ip", &v)
    }

    /// [`Netns::try_ip`] that must succeed.
    pub fn ip(&self, args: &[&str]) -> String {
        self.try_ip(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs a program inside the namespace (`ip netns exec`, which also
    /// mounts the namespace's own /sys for it); its output, whatever its
    /// exit status.
    pub fn try_exec(&self, args: &[&str]) -> Result<Output, CmdError> {
        let mut v = vec!["netns", "exec", self.name.as_str()];
        v.extend_from_slice(args);
        output("ip", &v)
    }

    /// [`Netns::try_exec`] of a program that must succeed; its stdout.
    pub fn try_exec_must(&self, args: &[&str]) -> Result<String, CmdError> {
        let mut v = vec!["netns", "exec", self.name.as_str()];
        v.extend_from_slice(args);
        run("ip", &v)
    }

    /// Runs a program inside the namespace; its output (panics only if it
    /// cannot start).
    pub fn exec(&self, args: &[&str]) -> Output {
        self.try_exec(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Netns::exec`] that must succeed; its stdout.
    pub fn exec_must(&self, args: &[&str]) -> String {
        self.try_exec_must(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Whether [`Netns::exec`] succeeded.
    pub fn exec_ok(&self, args: &[&str]) -> bool {
        self.try_exec(args).is_ok_and(|o| o.status.success())
    }

    /// Sets a sysctl inside the namespace.
    pub fn try_sysctl(&self, key: &str, value: &str) -> Result<(), CmdError> {
        self.try_exec_must(&["sysctl", "-q", "-w", &format!("{key}={value}")]).map(drop)
    }

    /// [`Netns::try_sysctl`] that must succeed.
    pub fn sysctl(&self, key: &str, value: &str) {
        self.try_sysctl(key, value).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs `f` on a new thread inside this namespace.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| self.spawn(s, f).join().expect("thread in netns panicked"))
    }

    /// Spawns `f` in this namespace on a scoped thread.
    pub fn spawn<'s, 'e: 's, T: Send + 's>(
        &'e self,
        s: &'s std::thread::Scope<'s, 'e>,
        f: impl FnOnce() -> T + Send + 's,
    ) -> std::thread::ScopedJoinHandle<'s, T> {
        s.spawn(move || {
            self.enter();
            f()
        })
    }

    /// Moves the calling thread into this namespace. Only the calling
    /// thread changes: use it in a thread spawned for the purpose.
    pub fn try_enter(&self) -> std::io::Result<()> {
        move_into_link_name_space(self.file.as_fd(), Some(LinkNameSpaceType::Network))?;
        Ok(())
    }

    /// Moves the calling thread into this namespace (for threads the test
    /// spawns itself; [`Netns::run`] and [`Netns::spawn`] do it for theirs).
    pub fn enter(&self) {
        self.try_enter().expect("setns");
    }

    /// The MAC address of device `dev` in this namespace.
    pub fn mac_of(&self, dev: &str) -> [u8; 6] {
        let text = self.exec_must(&["cat", &format!("/sys/class/net/{dev}/address")]);
        parse_mac(text.trim()).unwrap_or_else(|| panic!("{dev}: MAC {text:?}"))
    }

    /// Leaves the namespace in place after drop (to look at a failure).
    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Best effort: the namespace may already be gone.
        if !self.keep {
            let _ = output("ip", &["netns", "del", &self.name]);
        }
    }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// `02:00:00:00:00:last`, a locally administered test MAC.
pub fn mac(last: u8) -> [u8; 6] {
    [0x02, 0x00, 0x00, 0x00, 0x00, last]
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_str(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// A veth pair to create: `a_dev` in `a`, `b_dev` in `b` (the same
/// namespace for both ends is fine).
pub struct Veth<'n> {
    a: (&'n Netns, &'n str),
    b: (&'n Netns, &'n str),
    macs: Option<([u8; 6], [u8; 6])>,
    queues: Option<u32>,
    tx_off: bool,
    up: bool,
}

impl<'n> Veth<'n> {
    pub fn new(a: &'n Netns, a_dev: &'n str, b: &'n Netns, b_dev: &'n str) -> Veth<'n> {
        Veth { a: (a, a_dev), b: (b, b_dev), macs: None, queues: None, tx_off: false, up: true }
    }

    /// The two ends' MAC addresses.
    pub fn macs(mut self, a: [u8; 6], b: [u8; 6]) -> Veth<'n> {
        self.macs = Some((a, b));
        self
    }

    /// `queues` rx and tx queues on each end.
    pub fn queues(mut self, queues: u32) -> Veth<'n> {
        self.queues = Some(queues);
        self
    }

    /// Turns tx checksum offload off on both ends, so that frames from
    /// normal sockets carry finished checksums (as from a host on a wire;
    /// AF_XDP and AF_PACKET readers see them otherwise unfinished).
    pub fn tx_offload_off(mut self) -> Veth<'n> {
        self.tx_off = true;
        self
    }

    /// Leaves both ends down, for the caller to configure first (IPv6 off
    /// before a device is up keeps its neighbour discovery off the wire).
    pub fn down(mut self) -> Veth<'n> {
        self.up = false;
        self
    }

    /// Creates the pair and sets both ends up (unless [`Veth::down`]).
    pub fn create(self) {
        self.try_create().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Veth::create`], failing with the command that failed.
    pub fn try_create(self) -> Result<(), CmdError> {
        let ((na, a), (nb, b)) = (self.a, self.b);
        let (ma, mb) = self.macs.map(|(x, y)| (mac_str(x), mac_str(y))).unzip();
        let q = self.queues.map(|q| q.to_string());
        let mut owned: Vec<String> = vec!["link".into(), "add".into(), a.into()];
        if let Some(m) = &ma {
            owned.extend(["address".into(), m.clone()]);
        }
        if let Some(q) = &q {
            owned.extend(["numtxqueues".into(), q.clone(), "numrxqueues".into(), q.clone()]);
        }
        owned.extend(["type".into(), "veth".into(), "peer".into(), "name".into(), b.into()]);
        if let Some(m) = &mb {
            owned.extend(["address".into(), m.clone()]);
        }
        if let Some(q) = &q {
            owned.extend(["numtxqueues".into(), q.clone(), "numrxqueues".into(), q.clone()]);
        }
        owned.extend(["netns".into(), nb.name.clone()]);
        let args: Vec<&str> = owned.iter().map(String::as_str).collect();
        na.try_ip(&args)?;
        if self.up {
            na.try_ip(&["link", "set", a, "up"])?;
            nb.try_ip(&["link", "set", b, "up"])?;
        }
        if self.tx_off {
            na.exec_ok(&["ethtool", "-K", a, "tx", "off"]);
            nb.exec_ok(&["ethtool", "-K", b, "tx", "off"]);
        }
        Ok(())
    }
}

/// A veth pair `a_dev` (in `a`) <-> `b_dev` (in `b`), both up.
pub fn try_veth(a: &Netns, a_dev: &str, b: &Netns, b_dev: &str) -> Result<(), CmdError> {
    Veth::new(a, a_dev, b, b_dev).try_create()
}

/// [`try_veth`] that must succeed.
pub fn veth(a: &Netns, a_dev: &str, b: &Netns, b_dev: &str) {
    Veth::new(a, a_dev, b, b_dev).create();
}

/// Waits until `cond` holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::yield_now();
    }
}

/// Deletes namespaces `{prefix}{pid}-...` whose process is gone (left by
/// a run that was killed before its guards dropped); how many.
pub fn remove_stale(prefix: &str) -> usize {
    let Ok(out) = run("ip", &["netns", "list"]) else { return 0 };
    let mut n = 0;
    for line in out.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(rest) = name.strip_prefix(prefix) else { continue };
        let pid = rest.split('-').next().unwrap_or_default();
        let alive = !pid.is_empty() && Path::new(&format!("/proc/{pid}")).exists();
        if !alive && sh_ok("ip", &["netns", "del", name]) {
            n += 1;
        }
    }
    n
}

// ----------------------------------------------------------- two-host lab

/// Why a two-host lab cannot run here (not root, a tool missing), if so.
pub fn lab_missing() -> Option<&'static str> {
    if !is_root() {
        return Some("needs root");
    }
    if !(have("ip", "-V") && have("ping", "-V") && have("ethtool", "--version")) {
        return Some("needs iproute2, iputils-ping and ethtool");
    }
    None
}

/// The two-host topology, router side left to the caller: namespaces
/// `[h1, r, h2]` (loopback up), veths `h1:eth0 -- r:lan0` and
/// `h2:eth0 -- r:wan0`, host N at 10.0.N.2/24 and 2001:db8:N::2/64 with
/// default routes via .1 / ::1, no DAD, and full transport checksums in
/// the hosts' frames (tx offload off: AF_XDP and the router's kernel see
/// them finished, as from a host on a wire).
pub struct Lab {
    /// The namespace names `[h1, r, h2]`.
    pub ns: [String; 3],
    /// The namespaces themselves, deleted when the lab drops.
    pub netns: [Netns; 3],
    /// A scratch directory, removed on drop.
    pub dir: PathBuf,
    /// The daemon under test once started: stopped (SIGTERM, then SIGKILL
    /// after 10 s) on drop, before the namespaces go.
    pub daemon: Option<Child>,
}

impl Lab {
    /// The lab in namespaces `{base}h1`, `{base}r`, `{base}h2`, with the
    /// scratch directory `$TMPDIR/{base}`.
    pub fn two_hosts(base: &str) -> Lab {
        let netns =
            [Netns::named(&format!("{base}h1")), Netns::named(&format!("{base}r")), Netns::named(&format!("{base}h2"))];
        let dir = std::env::temp_dir().join(base);
        let _ = std::fs::create_dir_all(&dir);
        let [h1, r, h2] = &netns;
        Veth::new(h1, "eth0", r, "lan0").down().create();
        Veth::new(h2, "eth0", r, "wan0").down().create();
        for (h, n) in [(h1, 1), (h2, 2)] {
            h.sysctl("net.ipv6.conf.all.accept_dad", "0");
            h.exec_must(&["ethtool", "-K", "eth0", "tx", "off"]);
            h.ip(&["link", "set", "eth0", "up"]);
            h.ip(&["addr", "add", &format!("10.0.{n}.2/24"), "dev", "eth0"]);
            h.ip(&["-6", "addr", "add", &format!("2001:db8:{n}::2/64"), "dev", "eth0", "nodad"]);
            h.ip(&["route", "add", "default", "via", &format!("10.0.{n}.1")]);
            h.ip(&["-6", "route", "add", "default", "via", &format!("2001:db8:{n}::1")]);
        }
        let ns = [h1.name.clone(), r.name.clone(), h2.name.clone()];
        Lab { ns, netns, dir, daemon: None }
    }

    /// The control socket of a daemon started in the scratch directory.
    pub fn socket(&self) -> String {
        self.dir.join("tern.sock").display().to_string()
    }

    /// Stops the daemon: SIGTERM, then SIGKILL after `grace`.
    pub fn stop_daemon(&mut self, grace: Duration) {
        stop(&mut self.daemon, grace);
    }
}

/// Stops a child process if there is one: SIGTERM, then SIGKILL after
/// `grace`; reaps it.
pub fn stop(child: &mut Option<Child>, grace: Duration) {
    if let Some(mut d) = child.take() {
        let _ = sh("kill", &["-TERM", &d.id().to_string()]);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && matches!(d.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = d.kill();
        let _ = d.wait();
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stop_daemon(Duration::from_secs(10));
        let _ = std::fs::remove_dir_all(&self.dir);
        // The namespaces drop after this, deleting themselves.
    }
}

/// A /metrics scrape from inside namespace `ns` (the server listens on its
/// loopback, `127.0.0.1:9456`).
pub fn scrape_in(ns: &str) -> String {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter(&ns).expect("enter netns");
        let mut s = std::net::TcpStream::connect("127.0.0.1:9456").expect("metrics");
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").expect("request");
        let mut body = String::new();
        s.read_to_string(&mut body).expect("answer");
        body
    })
    .join()
    .expect("scrape thread")
}

/// The value of sample `name` (with its labels) in a scrape; panics if
/// it is missing.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the scrape"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_quote_the_command() {
        let e = run("sh", &["-c", "echo oops >&2; exit 3"]).expect_err("exit 3");
        assert_eq!(e.cmd, "sh -c echo oops >&2; exit 3");
        assert!(e.detail.contains("oops") && e.detail.contains('3'), "{e}");
        let e = output("/nonexistent/prog", &["x"]).expect_err("cannot start");
        assert!(e.to_string().starts_with("`/nonexistent/prog x` failed: cannot start"), "{e}");
        assert_eq!(run("echo", &["hi"]), Ok("hi\n".to_string()));
        assert_eq!(String::from(e.clone()), e.to_string());
    }

    #[test]
    fn mac_round_trip() {
        assert_eq!(parse_mac("02:ab:00:10:ff:09"), Some([0x02, 0xab, 0x00, 0x10, 0xff, 0x09]));
        assert_eq!(mac_str([0x02, 0xab, 0, 0x10, 0xff, 9]), "02:ab:00:10:ff:09");
        assert_eq!(parse_mac("02:ab:00:10:ff"), None);
        assert_eq!(parse_mac("02:ab:00:10:ff:09:01"), None);
        assert_eq!(parse_mac("zz:ab:00:10:ff:09"), None);
    }

    #[test]
    fn creating_an_existing_namespace_is_an_error_naming_it() {
        if !privileged("the netns helper test") {
            return;
        }
        let a = Netns::unique("tkit-dup");
        let e = Netns::create(&a.name).expect_err("exists already");
        assert!(e.cmd.contains(&a.name), "{e}");
        assert!(a.try_ip(&["link", "show", "lo"]).is_ok(), "the first one is untouched");
        assert!(a.try_ip(&["link", "show", "nosuchdev0"]).is_err());
    }

    #[test]
    fn a_veth_pair_between_two_namespaces_carries_a_ping_and_goes_with_them() {
        if !privileged("the netns helper test") {
            return;
        }
        let name_a;
        {
            let a = Netns::unique("tkit-a");
            let b = Netns::unique("tkit-b");
            name_a = a.name.clone();
            Veth::new(&a, "x0", &b, "y0").macs(mac(1), mac(2)).queues(2).tx_offload_off().create();
            a.ip(&["addr", "add", "10.99.0.1/24", "dev", "x0"]);
            b.ip(&["addr", "add", "10.99.0.2/24", "dev", "y0"]);
            assert!(a.ip(&["link", "show", "x0"]).contains("02:00:00:00:00:01"));
            assert!(a.exec_ok(&["ping", "-c", "1", "-W", "5", "10.99.0.2"]));
            // Only b holds 10.99.0.2: binding to it works on b's threads.
            assert!(b.run(|| std::net::UdpSocket::bind("10.99.0.2:0").is_ok()), "run() enters the namespace");
            assert!(std::net::UdpSocket::bind("10.99.0.2:0").is_err(), "and the test thread stays outside");
        }
        let left = String::from_utf8_lossy(&sh("ip", &["netns", "list"]).stdout).into_owned();
        assert!(!left.contains(&name_a), "dropped namespaces are deleted");
    }
}
