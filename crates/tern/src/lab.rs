//! `tern lab`: a three-namespace topology on this machine, tern routing
//! between two hosts, and the checks a newcomer wants to see.
//!
//! ```text
//!   host1 (10.0.1.2, 2001:db8:1::2)         host2 (10.0.2.2, 2001:db8:2::2)
//!      eth0 ──veth── lan0 [tern] wan0 ──veth── eth0
//!                 10.0.1.1        10.0.2.1
//! ```
//! The router namespace's kernel holds no addresses and does not forward:
//! every routed packet, ARP and ND answer, and ICMP error comes from tern.

use clap::Args;
use serde::Serialize;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tern_control::api::client::Client;
use tern_control::api::daemon::{Daemon, DaemonOptions};
use tern_control::api::{Command, Reply};
use tern_control::router::Router;
use tern_engine::worker::WorkerShared;
use tern_testkit::netns::{Netns, is_root, remove_stale, try_veth as veth};

#[derive(Args)]
pub struct LabArgs {
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// After the checks, keep tern running (until Ctrl-C) and leave the
    /// namespaces up afterwards; `tern lab --cleanup` removes them.
    #[arg(long)]
    keep: bool,
    /// Remove namespaces left by earlier labs and exit.
    #[arg(long)]
    cleanup: bool,
    /// UDP packets in the stream check.
    #[arg(long, default_value_t = 100_000)]
    packets: u64,
    /// Use this configuration instead of the built-in one (device names
    /// lan0 and wan0 in the router namespace).
    #[arg(long)]
    config: Option<std::path::PathBuf>,
}

/// The built-in configuration of the lab's router.
pub const DEFAULT_CONFIG: &str = include_str!("lab.toml");

const PREFIX: &str = "tern-lab-";

type CheckFn<'a> = Box<dyn Fn() -> Result<String, String> + 'a>;

#[derive(Serialize)]
struct Check {
    name: String,
    ok: bool,
    detail: String,
}

#[derive(Serialize, Default)]
struct PortLine {
    interface: String,
    rx_packets: u64,
    rx_dropped: u64,
    tx_packets: u64,
    tx_dropped: u64,
}

#[derive(Serialize)]
struct NodeLine {
    node: String,
    packets: u64,
    ns_per_packet: f64,
}

#[derive(Serialize, Default)]
struct Report {
    ok: bool,
    namespaces: Vec<String>,
    checks: Vec<Check>,
    ports: Vec<PortLine>,
    nodes: Vec<NodeLine>,
    /// Counters with a non-zero value (drops and events), "node/name".
    counters: Vec<(String, u64)>,
}

/// Runs the lab; tern's API listens on `socket` (the global `--socket`)
/// while it runs, so `tern stats`, `tern trace` and the shell reach it.
pub fn run(a: LabArgs, socket: &Path) -> Result<ExitCode, String> {
    if !is_root() {
        return Err("tern lab creates network namespaces and needs root (try sudo)".into());
    }
    for tool in ["ip", "ping", "ethtool"] {
        if tern_testkit::netns::output(tool, &["--version"]).is_err()
            && tern_testkit::netns::output(tool, &["-V"]).is_err()
        {
            return Err(format!("{tool} not found: install iproute2, iputils-ping and ethtool (scripts/setup.sh)"));
        }
    }
    let removed = remove_stale(PREFIX);
    if a.cleanup {
        println!("removed {removed} stale lab namespace(s)");
        return Ok(ExitCode::SUCCESS);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(|e| format!("signal handler: {e}"))?;
    }
    let config_path = a.config.as_ref().map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
    let config_text = match &a.config {
        Some(p) => std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?,
        None => DEFAULT_CONFIG.to_string(),
    };
    let plan = tern_control::config::parse(&config_text, "lab config", std::path::Path::new("."))
        .map_err(|e| e.to_string())?;

    let pid = std::process::id();
    let mut h1 = Netns::create(&format!("{PREFIX}{pid}-h1"))?;
    let mut r = Netns::create(&format!("{PREFIX}{pid}-r"))?;
    let mut h2 = Netns::create(&format!("{PREFIX}{pid}-h2"))?;
    build_topology(&h1, &r, &h2)?;
    if !a.json {
        eprintln!("lab: namespaces {} - {} - {} ready; starting tern", h1.name, r.name, h2.name);
        eprintln!(
            "lab: the hosts' veths (eth0) have `ethtool -K eth0 tx off gro on`, what tern's veth warnings ask for (docs/XDP.md, \"Veth labs\")"
        );
    }

    // tern runs in this process, on threads inside the router namespace.
    let (tx, rx) = std::sync::mpsc::channel::<Msg>();
    let r_name = r.name.clone();
    let socket = socket.to_path_buf();
    let stop_router = Arc::new(AtomicBool::new(false));
    let stop_r = Arc::clone(&stop_router);
    let router_thread = std::thread::Builder::new()
        .name("tern-control".into())
        .spawn(move || {
            if let Err(e) = tern_io::netdev::enter_netns(&r_name) {
                let _ = tx.send(Msg::Failed(format!("enter {r_name}: {e}")));
                return;
            }
            match Router::start(plan) {
                Ok(mut router) => {
                    match start_daemon(&router, config_path, socket) {
                        Ok(mut daemon) => {
                            let api = Ok((daemon.socket().to_path_buf(), daemon.metrics_addr()));
                            let _ = tx.send(Msg::Started(router.workers(), api));
                            // The lab does not reload on SIGHUP; `tern config reload` does.
                            let no_hup = AtomicBool::new(false);
                            daemon.run(&mut router, &stop_r, &no_hup);
                            drop(daemon);
                        }
                        Err(e) => {
                            let _ = tx.send(Msg::Started(router.workers(), Err(e)));
                            router.run(&stop_r);
                        }
                    }
                    let report = collect(&router);
                    router.shutdown();
                    let _ = tx.send(Msg::Report(report));
                }
                Err(e) => {
                    let _ = tx.send(Msg::Failed(format!("tern did not start: {e}")));
                }
            }
        })
        .map_err(|e| e.to_string())?;
    let (workers, api) = match rx.recv() {
        Ok(Msg::Started(w, api)) => (w, api),
        Ok(Msg::Failed(e)) => return Err(e),
        _ => return Err("the router thread stopped".into()),
    };
    if let Err(e) = &api
        && !a.json
    {
        eprintln!("lab: tern runs without its API ({e}); `tern` commands cannot reach this lab");
    }

    let mut checks = Vec::new();
    let mut step = |name: &str, r: Result<String, String>| {
        let ok = r.is_ok();
        let detail = r.unwrap_or_else(|e| e);
        if !a.json {
            eprintln!("{} {name}: {detail}", if ok { "  ok  " } else { " FAIL " });
        }
        checks.push(Check { name: name.into(), ok, detail });
    };
    let mut checks_list: Vec<(&str, CheckFn<'_>)> = Vec::new();
    if let Ok((path, _)) = &api {
        checks_list.push(("API answers `tern status`", Box::new(move || api_status(path))));
    }
    checks_list.extend::<Vec<(&str, CheckFn<'_>)>>(vec![
        ("ping host1 -> host2 (IPv4)", Box::new(|| ping(&h1, &["-c", "3", "-i", "0.2", "-W", "2", "10.0.2.2"]))),
        ("ping host2 -> host1 (IPv4)", Box::new(|| ping(&h2, &["-c", "3", "-i", "0.2", "-W", "2", "10.0.1.2"]))),
        (
            "ping host1 -> host2 (IPv6)",
            Box::new(|| ping(&h1, &["-6", "-c", "3", "-i", "0.2", "-W", "2", "2001:db8:2::2"])),
        ),
        (
            "ping host2 -> host1 (IPv6)",
            Box::new(|| ping(&h2, &["-6", "-c", "3", "-i", "0.2", "-W", "2", "2001:db8:1::2"])),
        ),
        (
            "ping tern's own addresses",
            Box::new(|| {
                ping(&h1, &["-c", "1", "-W", "2", "10.0.2.1"])?;
                ping(&h1, &["-6", "-c", "1", "-W", "2", "2001:db8:1::1"])
            }),
        ),
        (
            "TTL 1 -> time exceeded from tern",
            Box::new(|| {
                expect_icmp(
                    &h1,
                    &["-c", "1", "-t", "1", "-W", "2", "10.0.2.2"],
                    "From 10.0.1.1",
                    "Time to live exceeded",
                )
            }),
        ),
        (
            "hop limit 1 -> time exceeded from tern (IPv6)",
            Box::new(|| {
                expect_icmp(
                    &h1,
                    &["-6", "-c", "1", "-t", "1", "-W", "2", "2001:db8:2::2"],
                    "From 2001:db8:1::1",
                    "Time exceeded",
                )
            }),
        ),
        (
            "unrouted destination -> unreachable from tern",
            Box::new(|| expect_icmp(&h1, &["-c", "1", "-W", "2", "203.0.113.9"], "From 10.0.1.1", "Unreachable")),
        ),
    ]);
    // Every check of the list and the UDP stream.
    let expected = checks_list.len() + 1;
    for (name, f) in &checks_list {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        step(name, f());
    }
    if !stop.load(Ordering::Relaxed) {
        step(
            &format!("UDP stream of {} packets host1 -> host2", a.packets),
            udp_stream(&h1, &r, &h2, &workers, a.packets, &stop),
        );
    }
    drop(checks_list);

    if a.keep && !stop.load(Ordering::Relaxed) {
        let mut try_more = match &api {
            Ok((p, _)) if p == Path::new(tern_control::config::DEFAULT_SOCKET) => {
                ", `tern stats`, `tern trace start 5` then `tern trace show`, or `tern` (the shell)".to_string()
            }
            Ok((p, _)) => format!(", `tern --socket {0} stats` or `tern --socket {0} trace start 5`", p.display()),
            Err(_) => String::new(),
        };
        if let Ok((_, Some(m))) = &api {
            try_more += &format!(", `ip netns exec {} curl -s {m}/metrics`", r.name);
        }
        eprintln!(
            "lab: tern keeps running; try `ip netns exec {} ping 10.0.2.2`{try_more}. Ctrl-C stops tern and leaves the namespaces; `tern lab --cleanup` removes them.",
            h1.name
        );
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
        h1.keep();
        r.keep();
        h2.keep();
    }
    stop_router.store(true, Ordering::Relaxed);
    let mut report = match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Msg::Report(r)) => r,
        _ => Report::default(),
    };
    let _ = router_thread.join();
    report.namespaces = vec![h1.name.clone(), r.name.clone(), h2.name.clone()];
    let interrupted = stop.load(Ordering::Relaxed) && !a.keep;
    report.ok = !interrupted && !checks.is_empty() && checks.iter().all(|c| c.ok) && checks.len() == expected;
    report.checks = checks;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print_summary(&report, interrupted);
    }
    Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn build_topology(h1: &Netns, r: &Netns, h2: &Netns) -> Result<(), String> {
    for h in [h1, h2] {
        h.try_sysctl("net.ipv6.conf.all.accept_dad", "0")?;
        h.try_sysctl("net.ipv6.conf.default.accept_dad", "0")?;
    }
    // The metrics endpoint listens on the router namespace's loopback.
    r.try_ip(&["link", "set", "lo", "up"])?;
    r.try_sysctl("net.ipv4.ip_forward", "0")?;
    r.try_sysctl("net.ipv6.conf.all.forwarding", "0")?;
    veth(h1, "eth0", r, "lan0")?;
    veth(h2, "eth0", r, "wan0")?;
    for (h, n) in [(h1, 1), (h2, 2)] {
        // A host's stack leaves transport checksums to the veth (offload);
        // a real NIC would fill them in, AF_XDP sees them unfinished. Make
        // the hosts send finished packets, as hosts on a wire do.
        // GRO on gives the host's veth the receive queue that XDP
        // redirects need (a real NIC always has one): with it, tern's XDP
        // lane forwards to the host in the kernel; without it, every
        // routed packet would take the userspace path out of that device.
        let out = h.try_exec(&["ethtool", "-K", "eth0", "tx", "off", "gro", "on"])?;
        if !out.status.success() {
            return Err(format!(
                "ethtool -K eth0 tx off gro on in {}: {}",
                h.name,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        h.try_ip(&["addr", "add", &format!("10.0.{n}.2/24"), "dev", "eth0"])?;
        h.try_ip(&["-6", "addr", "add", &format!("2001:db8:{n}::2/64"), "dev", "eth0", "nodad"])?;
        h.try_ip(&["route", "add", "default", "via", &format!("10.0.{n}.1")])?;
        h.try_ip(&["-6", "route", "add", "default", "via", &format!("2001:db8:{n}::1")])?;
    }
    Ok(())
}

/// The daemon beside the lab's router: the API on `socket` and the
/// configuration's metrics endpoint (inside the router's namespace). A
/// metrics endpoint that cannot open does not cost the lab its API: the
/// daemon starts again without it (and fails again if the API was what
/// failed).
fn start_daemon(router: &Router, config_path: Option<PathBuf>, socket: PathBuf) -> Result<Daemon, String> {
    let opts = DaemonOptions { config_path, socket: Some(socket), metrics: None };
    Daemon::start(router, opts.clone()).or_else(|e| {
        let d = Daemon::start(router, DaemonOptions { metrics: Some(String::new()), ..opts })?;
        log::warn!("lab: {e}; running without the metrics endpoint");
        Ok(d)
    })
}

/// `tern status` over the lab's API socket: the daemon answers and sees
/// the lab's two interfaces.
fn api_status(socket: &Path) -> Result<String, String> {
    let mut c = Client::connect(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    match c.call(&Command::Status {}).map_err(|e| e.to_string())? {
        Reply::Status(s) if s.interfaces == 2 => Ok(format!(
            "{}: tern {}, {} interfaces, {} worker(s), {} routes",
            socket.display(),
            s.version,
            s.interfaces,
            s.workers,
            s.fib.v4_routes + s.fib.v6_routes
        )),
        Reply::Status(s) => Err(format!("status shows {} interfaces, not 2", s.interfaces)),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

fn ping(ns: &Netns, args: &[&str]) -> Result<String, String> {
    let mut v = vec!["ping"];
    v.extend_from_slice(args);
    let out = ns.try_exec(&v)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let summary = text.lines().find(|l| l.contains("packets transmitted")).unwrap_or("").trim().to_string();
    let rtt = text.lines().find(|l| l.starts_with("rtt")).unwrap_or("").trim().to_string();
    if out.status.success() && summary.contains(" 0% packet loss") {
        Ok(format!("{summary}; {rtt}"))
    } else {
        Err(format!("{summary} {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

fn expect_icmp(ns: &Netns, args: &[&str], from: &str, what: &str) -> Result<String, String> {
    let mut v = vec!["ping"];
    v.extend_from_slice(args);
    let out = ns.try_exec(&v)?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().find(|l| l.contains(from) && l.contains(what)) {
        Some(l) => Ok(l.trim().to_string()),
        None => Err(format!("no \"{what}\" {from}: {}", text.trim().replace('\n', " | "))),
    }
}

/// Sends `n` numbered UDP datagrams from host1 to host2 at a steady pace
/// and counts, at host2, how many distinct ones arrived.
/// Drop counters on the stream's path that are not tern's own: host2's
/// UDP socket and device, and frames the XDP lane redirected to wan0 that
/// host2's veth had no room for.
fn path_drops(r: &Netns, h2: &Netns, workers: &[Arc<WorkerShared>]) -> Vec<(&'static str, u64)> {
    let read = |ns: &Netns, args: &[&str]| {
        ns.try_exec(args).ok().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
    };
    let snmp = read(h2, &["cat", "/proc/net/snmp"]);
    let udp: Vec<&str> = snmp.lines().filter(|l| l.starts_with("Udp:")).collect();
    let rcvbuf = match udp.as_slice() {
        [names, values, ..] => names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == "RcvbufErrors")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0),
        _ => 0,
    };
    let h2_rx = read(h2, &["cat", "/sys/class/net/eth0/statistics/rx_dropped"]).trim().parse().unwrap_or(0);
    let xmit_err = read(r, &["ethtool", "-S", "wan0"])
        .lines()
        .filter(|l| l.contains("xdp_xmit_errors"))
        .filter_map(|l| l.rsplit(':').next()?.trim().parse::<u64>().ok())
        .sum();
    let counters = tern_control::commands::port_counters(workers);
    let tern_rx: u64 = counters.values().map(|c| c.driver_rx_dropped).sum();
    let tern_tx: u64 = counters.values().map(|c| c.tx_dropped).sum();
    vec![
        ("tern: receive ring full (worker fell behind)", tern_rx),
        ("tern: transmit drops", tern_tx),
        ("wan0: host2's veth full for the XDP lane's redirects", xmit_err),
        ("host2: device drops", h2_rx),
        ("host2: UDP socket buffer full", rcvbuf),
    ]
}

fn udp_stream(
    h1: &Netns,
    r: &Netns,
    h2: &Netns,
    workers: &[Arc<WorkerShared>],
    n: u64,
    stop: &AtomicBool,
) -> Result<String, String> {
    let before = path_drops(r, h2, workers);
    let received = Arc::new(AtomicU64::new(0));
    let dups = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let rx_thread = {
        let (received, dups, ready, done) =
            (Arc::clone(&received), Arc::clone(&dups), Arc::clone(&ready), Arc::clone(&done));
        let ns = h2.name.clone();
        std::thread::spawn(move || -> Result<(), String> {
            tern_io::netdev::enter_netns(&ns).map_err(|e| e.to_string())?;
            let sock = UdpSocket::bind("10.0.2.2:9000").map_err(|e| e.to_string())?;
            // Room for bursts while this thread waits for a CPU (the lab
            // shares the machine with tern's worker and the sender).
            if rustix::net::sockopt::set_socket_recv_buffer_size_force(&sock, 32 << 20).is_err() {
                let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&sock, 32 << 20);
            }
            sock.set_read_timeout(Some(Duration::from_millis(50))).map_err(|e| e.to_string())?;
            let mut seen = vec![false; n as usize];
            ready.store(true, Ordering::Release);
            let mut buf = [0u8; 2048];
            let mut idle_since = None;
            loop {
                match sock.recv(&mut buf) {
                    Ok(len) if len >= 8 => {
                        idle_since = None;
                        let seq = u64::from_be_bytes(buf[..8].try_into().unwrap_or_default());
                        match seen.get_mut(seq as usize) {
                            Some(s) if !*s => {
                                *s = true;
                                received.fetch_add(1, Ordering::Relaxed);
                            }
                            Some(_) => {
                                dups.fetch_add(1, Ordering::Relaxed);
                            }
                            None => {}
                        }
                    }
                    Ok(_) => {}
                    Err(_) => {
                        if done.load(Ordering::Acquire) {
                            let since = *idle_since.get_or_insert_with(Instant::now);
                            if since.elapsed() > Duration::from_millis(500) || received.load(Ordering::Relaxed) == n {
                                return Ok(());
                            }
                        }
                    }
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ready.load(Ordering::Acquire) {
        if Instant::now() > deadline {
            return Err("receiver did not start".into());
        }
        std::thread::yield_now();
    }
    let ns = h1.name.clone();
    let sent = std::thread::scope(|s| {
        s.spawn(|| -> Result<u64, String> {
            tern_io::netdev::enter_netns(&ns).map_err(|e| e.to_string())?;
            let sock = UdpSocket::bind("10.0.1.2:0").map_err(|e| e.to_string())?;
            sock.connect("10.0.2.2:9000").map_err(|e| e.to_string())?;
            let mut payload = [0u8; 18];
            // 100k packets per second: paced in bursts of 100 every ms.
            // A sender that lost its CPU for a while does not catch up
            // with back-to-back bursts (that would test the rings' depth,
            // not the routing): the schedule restarts from now.
            let mut due = Instant::now();
            let mut sent = 0u64;
            while sent < n && !stop.load(Ordering::Relaxed) {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                } else if now - due > Duration::from_millis(1) {
                    due = now;
                }
                due += Duration::from_millis(1);
                for _ in 0..100.min(n - sent) {
                    payload[..8].copy_from_slice(&sent.to_be_bytes());
                    let mut tries = 0;
                    while let Err(e) = sock.send(&payload) {
                        // ENOBUFS: the local queue is full; retry.
                        tries += 1;
                        if tries > 1000 {
                            return Err(format!("send: {e}"));
                        }
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    sent += 1;
                }
            }
            Ok(sent)
        })
        .join()
        .map_err(|_| "sender panicked".to_string())?
    });
    done.store(true, Ordering::Release);
    let rx_res = rx_thread.join().map_err(|_| "receiver panicked".to_string())?;
    let sent = sent?;
    rx_res?;
    let got = received.load(Ordering::Relaxed);
    let d = dups.load(Ordering::Relaxed);
    let lost = sent.saturating_sub(got);
    let mut msg = format!("sent {sent}, received {got} at host2, lost {lost}, duplicated {d}");
    if lost == 0 {
        return if d == 0 && sent == n { Ok(msg) } else { Err(msg) };
    }
    // Loss is acceptable on a shared machine only when a counter saw every
    // lost packet: a ring that overflowed while its reader had no CPU.
    // Loss that no counter explains fails the check.
    let after = path_drops(r, h2, workers);
    let mut counted = 0;
    for ((what, a), (_, b)) in after.iter().zip(&before) {
        let n = a.saturating_sub(*b);
        if n > 0 {
            msg.push_str(&format!("; {what}: {n}"));
            counted += n;
        }
    }
    if counted >= lost && d == 0 && sent == n {
        msg.push_str(" (every lost packet counted: the machine starved a ring's reader)");
        Ok(msg)
    } else {
        msg.push_str(&format!("; {} lost without a counter", lost.saturating_sub(counted)));
        Err(msg)
    }
}

enum Msg {
    /// The workers, and the API socket (or why there is none).
    Started(Vec<Arc<WorkerShared>>, Result<(PathBuf, Option<std::net::SocketAddr>), String>),
    Failed(String),
    Report(Report),
}

/// tern's counters at the end of the lab.
fn collect(router: &Router) -> Report {
    let stats = router.stats();
    let workers = router.workers();
    let Some(w) = workers.first() else { return Report::default() };
    let tsc = tern_intrin::tsc_per_ns();
    let ifs = router.iftable();
    // The workers' counters plus what the XDP lane forwarded and dropped
    // in the kernel without the workers seeing it.
    let mut ports: Vec<PortLine> = tern_control::commands::port_counters_with_lane(router)
        .into_iter()
        .map(|(i, c)| PortLine {
            interface: ifs.get(i).map_or_else(|| format!("#{i}"), |f| f.name.clone()),
            rx_packets: c.rx_packets,
            rx_dropped: c.driver_rx_dropped,
            tx_packets: c.tx_packets,
            tx_dropped: c.tx_dropped,
        })
        .collect();
    ports.sort_by(|a, b| a.interface.cmp(&b.interface));
    let nodes = w
        .graph
        .nodes
        .iter()
        .zip(&stats.nodes)
        .filter(|(_, n)| n[1] > 0)
        .map(|(d, n)| NodeLine {
            node: d.name.to_string(),
            packets: n[1],
            ns_per_packet: n[2] as f64 / tsc / n[1] as f64,
        })
        .collect();
    let mut counters: Vec<(String, u64)> = w
        .graph
        .errors
        .iter()
        .zip(&stats.errors)
        .filter(|(_, n)| **n > 0)
        .map(|(e, n)| (format!("{}/{}", e.node, e.name), *n))
        .collect();
    let mut lane: Vec<(String, u64)> = tern_control::commands::lane_counts(router)
        .errors
        .into_iter()
        .filter(|(_, n)| *n > 0)
        // The lane's own counters are named `xdp-lane/...`; its drops carry
        // the engine node's name, so they say whose they are.
        .map(|((node, name), n)| {
            let who = if node == "xdp-lane" { "" } else { "xdp-lane " };
            (format!("{who}{node}/{name}"), n)
        })
        .collect();
    lane.sort();
    counters.extend(lane);
    Report { ports, nodes, counters, ..Report::default() }
}

fn print_summary(r: &Report, interrupted: bool) {
    println!();
    println!(
        "tern lab: {}",
        if r.ok {
            "every check passed"
        } else if interrupted {
            "interrupted"
        } else {
            "SOME CHECKS FAILED"
        }
    );
    println!();
    println!("{:<50} result", "check");
    for c in &r.checks {
        println!("{:<50} {}", c.name, if c.ok { "ok" } else { "FAILED" });
    }
    println!();
    println!("{:<10} {:>12} {:>10} {:>12} {:>10}", "interface", "rx packets", "rx drops", "tx packets", "tx drops");
    for p in &r.ports {
        println!(
            "{:<10} {:>12} {:>10} {:>12} {:>10}",
            p.interface, p.rx_packets, p.rx_dropped, p.tx_packets, p.tx_dropped
        );
    }
    println!();
    println!("{:<18} {:>10} {:>10}", "node", "packets", "ns/packet");
    for n in &r.nodes {
        println!("{:<18} {:>10} {:>10.1}", n.node, n.packets, n.ns_per_packet);
    }
    if !r.counters.is_empty() {
        println!();
        println!("counters (drops and events):");
        for (name, n) in &r.counters {
            println!("  {name:<40} {n}");
        }
    }
}
