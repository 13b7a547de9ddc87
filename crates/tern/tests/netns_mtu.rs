//! Oversize packets (issue 36 item 3): the real `tern run` between two
//! Linux hosts, wan0 with a smaller MTU than the hosts. Real `ping -M do`
//! from host1: IPv4 with DF gets ICMP "fragmentation needed" with the next
//! hop MTU (RFC 1191) and IPv6 gets "packet too big" with it (RFC 8201),
//! which the host's kernel takes into its route cache; IPv4 without DF is a
//! counted drop. On each lane: AF_PACKET, AF_XDP and the XDP lane (which
//! punts such packets to the engine).
//!
//! host1 (10.0.1.2) eth0 -- lan0 [tern] wan0 (mtu 1400) -- eth0 host2
//!
//! Needs root, iproute2, ping and ethtool; says why and passes without.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{Lab, TERN, cli, counter, find_counter, log_of, must, run_tern, sh};

fn start(lab: &mut Lab, driver: &str) {
    start_or_refused(lab, driver, false);
}

/// Starts tern, or (`refused`) checks that `tern run` refuses wan0's
/// device MTU of 9000.
fn start_or_refused(lab: &mut Lab, driver: &str, refused: bool) {
    let r = &lab.ns[1];
    must("ip", &["-n", r, "link", "set", "lan0", "up"]);
    must("ip", &["-n", r, "link", "set", "wan0", "up"]);
    let cfg = format!(
        r#"
[[interface]]
name = "lan0"
device = "lan0"
driver = "{driver}"
addresses = ["10.0.1.1/24", "2001:db8:1::1/64"]

[[interface]]
name = "wan0"
device = "wan0"
driver = "{driver}"
mtu = 1400
addresses = ["10.0.2.1/24", "2001:db8:2::1/64"]

[api]
socket = "{}"

[metrics]
listen = ""
"#,
        lab.socket()
    );
    let path = lab.dir.join("tern.toml");
    std::fs::write(&path, cfg).expect("config");
    if refused {
        let err = lab.dir.join("refused.log");
        let mut child = Command::new("ip")
            .args(["netns", "exec", &lab.ns[1], TERN, "run", "--config"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).expect("log"))
            .spawn()
            .expect("tern run");
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break st;
            }
            if Instant::now() > deadline || cli(lab, &["status"]).status.success() {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{driver}: tern run took a device it cannot carry");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(!status.success(), "{driver}: tern run took a device it cannot carry");
        let said = std::fs::read_to_string(&err).unwrap_or_default();
        assert!(said.contains("MTU 9000, above the 1778"), "{driver}: {said}");
        return;
    }
    run_tern(lab, &path);
}

fn ping(lab: &Lab, args: &[&str]) -> Output {
    let mut v = vec!["netns", "exec", lab.ns[0].as_str(), "ping", "-n", "-c", "1", "-W", "1"];
    v.extend_from_slice(args);
    sh("ip", &v)
}

/// Pings with `args` until one answers (neighbours resolved, lanes up).
fn ping_ok(lab: &Lab, args: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ping(lab, args).status.success() {
        assert!(Instant::now() < deadline, "ping {args:?} never answered; tern log:\n{}", log_of(lab));
    }
}

/// Pings with `args` (too big for wan0) until host1's kernel has learnt
/// the path MTU to `dst` from tern's ICMP error: its route cache says
/// `mtu 1400`.
fn learns_mtu(lab: &Lab, v6: bool, dst: &str, args: &[&str]) {
    learns(lab, v6, dst, args, 1400);
}

fn learns(lab: &Lab, v6: bool, dst: &str, args: &[&str], mtu: u16) {
    let fam = if v6 { "-6" } else { "-4" };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = ping(lab, args);
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let route = must("ip", &["-n", &lab.ns[0], fam, "route", "get", dst]);
        if route.contains(&format!("mtu {mtu}")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{dst}: no ICMP error with MTU {mtu} learnt by host1 (route: {route}; ping: {said}); tern log:\n{}\nstats:\n{}",
            log_of(lab),
            String::from_utf8_lossy(&cli(lab, &["stats", "show", "errors", "--all"]).stdout)
        );
    }
}

fn stats(lab: &Lab) -> String {
    String::from_utf8_lossy(&cli(lab, &["stats", "show", "errors", "--all"]).stdout).into_owned()
}

/// tshark on host1's eth0 printing each ICMP/ICMPv6 packet's type, code
/// and MTU field, line-buffered, into a file.
struct Wire {
    child: std::process::Child,
    out: std::path::PathBuf,
}

impl Wire {
    /// Starts tshark and waits until it captures; None without tshark.
    fn start(lab: &Lab) -> Option<Wire> {
        if Command::new("tshark").arg("-v").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
            eprintln!("no tshark: the wire is judged by host1's kernel only");
            return None;
        }
        let out = lab.dir.join("wire.txt");
        let err = lab.dir.join("tshark.log");
        let fields = ["icmp.type", "icmp.code", "icmp.mtu", "icmpv6.type", "icmpv6.code", "icmpv6.mtu"];
        let mut args = vec!["netns", "exec", &lab.ns[0], "tshark", "-l", "-n", "-i", "eth0", "-f", "icmp or icmp6"];
        args.extend(["-T", "fields", "-E", "separator=;"]);
        for f in &fields {
            args.extend(["-e", f]);
        }
        let child = Command::new("ip")
            .args(&args)
            .stdout(std::fs::File::create(&out).expect("out"))
            .stderr(std::fs::File::create(&err).expect("log"))
            .spawn()
            .expect("tshark");
        let mut w = Wire { child, out };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&err).unwrap_or_default().contains("Capturing on") {
            if Instant::now() > deadline || w.child.try_wait().ok().flatten().is_some() {
                panic!("tshark did not start: {}", std::fs::read_to_string(&err).unwrap_or_default());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Capturing for real once an echo reply from the router shows.
        while !std::fs::read_to_string(&w.out).unwrap_or_default().lines().any(|l| l.starts_with("0;0;")) {
            assert!(Instant::now() < deadline, "tshark saw no ping");
            let _ = ping(lab, &["10.0.1.1"]);
        }
        Some(w)
    }

    /// Waits until a packet printed as `line` ("type;code;mtu" of ICMP,
    /// then of ICMPv6; a quoted header's fields follow a comma) was on the
    /// wire.
    fn saw(&self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(&self.out).unwrap_or_default();
            if text.lines().any(|l| l == line) {
                return;
            }
            assert!(Instant::now() < deadline, "not on the wire: {line}; tshark saw:\n{text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn oversize(driver: &str, tag: &str) {
    if let Some(why) = common::lab_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("tmtu{}{tag}", std::process::id()));
    start(&mut lab, driver);
    // Fits: 1400 bytes of IP go through, in both families.
    ping_ok(&lab, &["-M", "do", "-s", "1372", "10.0.2.2"]);
    ping_ok(&lab, &["-6", "-M", "do", "-s", "1352", "2001:db8:2::2"]);
    // Without DF (first: host1 does not know the path MTU yet, so it
    // sends 1500 bytes whole): a counted drop (tern does not fragment).
    let key = "ip4-rewrite/fragmentation-unsupported";
    let before = counter(&lab, key);
    let out = ping(&lab, &["-M", "dont", "-s", "1472", "10.0.2.2"]);
    assert!(!out.status.success(), "a 1500-byte packet crossed a 1400-byte MTU");
    let deadline = Instant::now() + Duration::from_secs(10);
    while counter(&lab, key) <= before {
        assert!(Instant::now() < deadline, "no counted drop for the packet without DF:\n{}", stats(&lab));
        std::thread::sleep(Duration::from_millis(100));
    }
    // tshark on host1's wire judges the ICMP errors (when installed).
    let wire = Wire::start(&lab);
    // DF set, 1500 bytes: ICMP fragmentation needed, MTU 1400.
    learns_mtu(&lab, false, "10.0.2.2", &["-M", "do", "-s", "1472", "10.0.2.2"]);
    // IPv6, 1500 bytes: packet too big, MTU 1400.
    learns_mtu(&lab, true, "2001:db8:2::2", &["-6", "-M", "do", "-s", "1452", "2001:db8:2::2"]);
    if let Some(w) = wire {
        // ICMP destination unreachable, fragmentation needed, MTU 1400;
        // ICMPv6 packet too big, MTU 1400.
        w.saw("3,8;4,0;1400;;;");
        w.saw(";;;2,128;0,0;1400");
    }
    // The engine answered both (the XDP lane punts such packets to it):
    // counted since the last look at the counters (the drop above).
    let out = cli(&lab, &["--json", "stats", "show", "errors", "--all"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    for key in ["ip4-rewrite/too-big-df", "ip6-rewrite/too-big"] {
        assert!(find_counter(&v, key).unwrap_or(0) >= 1, "{key} not counted: {v}");
    }
}

#[test]
fn oversize_over_af_packet() {
    oversize("afpacket", "p");
}

#[test]
fn oversize_over_af_xdp() {
    oversize("afxdp", "a");
}

#[test]
fn oversize_over_the_xdp_lane() {
    oversize("xdp", "x");
}

/// An MTU changed with `ip link` under a running tern is followed: the
/// interface takes it (`interface show`, a log line) and oversize packets
/// get ICMP errors with the new MTU; one the lanes cannot carry is logged
/// and the interface keeps its MTU.
#[test]
fn device_mtu_changes_are_followed_over_af_packet() {
    follows("afpacket", "f");
}

#[test]
fn device_mtu_changes_are_followed_by_the_xdp_lane() {
    follows("xdp", "g");
}

fn follows(driver: &str, tag: &str) {
    if let Some(why) = common::lab_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("tmtu{}{tag}", std::process::id()));
    start(&mut lab, driver);
    ping_ok(&lab, &["-M", "do", "-s", "1372", "10.0.2.2"]);
    let shows = |mtu: &str| {
        let out = cli(&lab, &["interface", "show"]);
        String::from_utf8_lossy(&out.stdout).lines().any(|l| l.starts_with("wan0 ") && l.contains(mtu))
    };
    assert!(shows("mtu 1400,"), "{}", String::from_utf8_lossy(&cli(&lab, &["interface", "show"]).stdout));
    must("ip", &["-n", &lab.ns[1], "link", "set", "wan0", "mtu", "1300"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !shows("mtu 1300,") {
        assert!(Instant::now() < deadline, "MTU 1300 not followed; tern log:\n{}", log_of(&lab));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(log_of(&lab).contains("device wan0 has a new MTU 1300"), "{}", log_of(&lab));
    learns(&lab, false, "10.0.2.2", &["-M", "do", "-s", "1372", "10.0.2.2"], 1300);
    learns(&lab, true, "2001:db8:2::2", &["-6", "-M", "do", "-s", "1352", "2001:db8:2::2"], 1300);
    // Beyond what a lane carries: logged, the interface keeps 1300.
    must("ip", &["-n", &lab.ns[1], "link", "set", "wan0", "mtu", "9000"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !log_of(&lab).contains("new MTU 9000") {
        assert!(Instant::now() < deadline, "MTU 9000 not noticed; tern log:\n{}", log_of(&lab));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(log_of(&lab).contains("above the 1778"), "{}", log_of(&lab));
    assert!(shows("mtu 1300,"), "{}", String::from_utf8_lossy(&cli(&lab, &["interface", "show"]).stdout));
}

/// A device MTU above what a lane's buffer holds is refused at start,
/// naming the limit, on every lane.
#[test]
fn jumbo_devices_are_refused_at_start() {
    if let Some(why) = common::lab_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("tmtu{}j", std::process::id()));
    must("ip", &["-n", &lab.ns[1], "link", "set", "wan0", "mtu", "9000"]);
    for driver in ["afpacket", "afxdp", "xdp"] {
        start_or_refused(&mut lab, driver, true);
    }
}
