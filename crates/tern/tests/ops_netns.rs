//! The real `tern run` in a network namespace between two hosts, driven
//! with the real CLI over its API socket: routes added, looked up and
//! removed live; an interface taken down and up; a trace; a capture read
//! back by tshark; a metrics scrape; batch files; reloads good and bad,
//! through the CLI and through SIGHUP.
//!
//! Needs root (network namespaces), iproute2 and ping; tshark for the
//! capture check. Without them the test says why and passes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{Lab, is_root, metric, must, scrape_in, sh};

const TERN: &str = env!("CARGO_BIN_EXE_tern");

fn have(prog: &str) -> bool {
    // `--version` (tshark's -V would start a live capture).
    let flag = if prog == "ip" { "-V" } else { "--version" };
    Command::new(prog).arg(flag).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

impl Lab {
    fn exec(&self, ns: usize, args: &[&str]) -> Output {
        let mut v = vec!["netns", "exec", self.ns[ns].as_str()];
        v.extend_from_slice(args);
        sh("ip", &v)
    }

    fn ping(&self, ns: usize, dst: &str) -> bool {
        self.exec(ns, &["ping", "-n", "-c", "1", "-W", "1", dst]).status.success()
    }

    /// `ping` until it succeeds (ARP and the first packets may take a moment).
    fn ping_ok(&self, ns: usize, dst: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.ping(ns, dst) {
            assert!(Instant::now() < deadline, "ping {dst} from {} never succeeded", self.ns[ns]);
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("tern.sock")
    }

    fn config(&self) -> PathBuf {
        self.dir.join("tern.toml")
    }

    /// Runs the CLI: (success, stdout, stderr).
    fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let o = Command::new(TERN)
            .arg("--socket")
            .arg(self.socket())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run tern");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.cli(args);
        assert!(ok, "tern {args:?} failed: {err}{out}");
        out
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut v = args.to_vec();
        v.push("--json");
        serde_json::from_str(&self.ok(&v)).expect("JSON output")
    }
}

fn config(dir: &Path, extra: &str) -> String {
    format!(
        r#"[[interface]]
name = "lan0"
device = "lan0"
addresses = ["10.0.1.1/24"]

[[interface]]
name = "wan0"
device = "wan0"
addresses = ["10.0.2.1/24"]

[api]
socket = "{}"

[metrics]
listen = "127.0.0.1:9456"
{extra}"#,
        dir.join("tern.sock").display()
    )
}

#[test]
fn the_cli_operates_a_running_tern_in_a_netns_lab() {
    if !is_root() {
        eprintln!("skipped: needs root to create network namespaces");
        return;
    }
    if !have("ip") || !Path::new("/usr/bin/ping").exists() && !Path::new("/bin/ping").exists() {
        eprintln!("skipped: needs iproute2 and ping");
        return;
    }
    // The testkit's two hosts (namespaces, daemon and scratch directory
    // removed on drop, also when an assertion fails), router forwarding off.
    let mut lab = Lab::two_hosts(&format!("tops{}", std::process::id()));
    let (r, h2) = (lab.ns[1].clone(), lab.ns[2].clone());
    must("ip", &["netns", "exec", &r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=0"]);
    for dev in ["lan0", "wan0"] {
        must("ip", &["-n", &r, "link", "set", dev, "up"]);
    }
    std::fs::write(lab.config(), config(&lab.dir, "")).expect("config");
    let log = std::fs::File::create(lab.dir.join("tern.log")).expect("log");
    let child = Command::new("ip")
        .args(["netns", "exec", &r, TERN, "run", "--config"])
        .arg(lab.config())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start tern");
    lab.daemon = Some(child);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !lab.cli(&["status"]).0 {
        let log = std::fs::read_to_string(lab.dir.join("tern.log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "tern did not come up:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(lab.ok(&["status"]).contains("workers     1"));

    // Forwarding as configured.
    lab.ping_ok(0, "10.0.2.2");

    // A route added live is used, shown by `route get`, and removed.
    must("ip", &["-n", &h2, "addr", "add", "198.51.100.1/32", "dev", "eth0"]);
    assert!(!lab.ping(0, "198.51.100.1"), "no route yet");
    assert!(lab.ok(&["route", "add", "198.51.100.0/24", "via", "10.0.2.2"]).contains("added"));
    lab.ping_ok(0, "198.51.100.1");
    let g = lab.json(&["route", "get", "198.51.100.1"]);
    assert_eq!(g["prefix"], "198.51.100.0/24", "{g}");
    assert_eq!(g["source"], "api");
    assert_eq!(g["nexthops"][0]["interface"], "wan0");
    assert!(g["nexthops"][0]["mac"].is_string(), "resolved next hop: {g}");
    let human = lab.ok(&["route", "get", "198.51.100.1"]);
    assert!(human.contains("via 10.0.2.2") && human.contains("lladdr"), "{human}");
    lab.ok(&["route", "del", "198.51.100.0/24"]);
    assert!(!lab.ping(0, "198.51.100.1"), "route removed");
    let (ok, _, err) = lab.cli(&["route", "del", "198.51.100.0/24"]);
    assert!(!ok && err.contains("no api route"), "{err}");

    // An interface down stops forwarding through it; up restores it.
    lab.ok(&["interface", "set", "wan0", "down"]);
    assert!(!lab.ping(0, "10.0.2.2"));
    let ifs = lab.json(&["interface", "show"]);
    assert_eq!(ifs[1]["name"], "wan0");
    assert_eq!(ifs[1]["up"], false);
    // tern cannot see the peers' checksum offload; it says what a veth needs.
    let w = ifs[0]["warnings"][0].as_str().unwrap_or_default();
    assert!(w.contains("lan0 is a veth") && w.contains("tx off"), "{ifs}");
    assert!(lab.ok(&["interface", "show"]).contains("warning: device wan0 is a veth"));
    let log = std::fs::read_to_string(lab.dir.join("tern.log")).unwrap_or_default();
    assert!(log.contains("device lan0 is a veth"), "{log}");
    lab.ok(&["interface", "set", "wan0", "up"]);
    lab.ping_ok(0, "10.0.2.2");

    // Trace: the path of the next packets.
    lab.ok(&["trace", "start", "4"]);
    lab.ping_ok(0, "10.0.2.2");
    let t = lab.json(&["trace", "show"]);
    let hops: Vec<String> = t["packets"]
        .as_array()
        .expect("packets")
        .iter()
        .flat_map(|p| p["hops"].as_array().cloned().unwrap_or_default())
        .filter_map(|h| h["node"].as_str().map(String::from))
        .collect();
    assert!(hops.iter().any(|h| h == "ip4-lookup"), "{t}");
    assert!(lab.ok(&["trace", "show"]).contains("ethernet-input"));

    // Capture: frames of lan0 into a pcap file tshark reads.
    let pcap = lab.dir.join("lan0.pcap");
    let cap_out = lab.dir.join("capture.out");
    let cap_err = lab.dir.join("capture.err");
    let mut cap = Command::new(TERN)
        .arg("--socket")
        .arg(lab.socket())
        .args(["capture", "lan0", "--direction", "rx", "-c", "2", "-w"])
        .arg(&pcap)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&cap_out).expect("file"))
        .stderr(std::fs::File::create(&cap_err).expect("file"))
        .spawn()
        .expect("capture");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        lab.exec(0, &["ping", "-n", "-c", "1", "-W", "1", "10.0.2.2"]);
        if let Ok(Some(st)) = cap.try_wait() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = cap.kill();
            panic!("capture did not finish: {}", std::fs::read_to_string(&cap_err).unwrap_or_default());
        }
    };
    let err = std::fs::read_to_string(&cap_err).unwrap_or_default();
    assert!(status.success(), "{err}");
    let out = std::fs::read_to_string(&cap_out).unwrap_or_default();
    assert!(out.contains("2 frames written"), "{out}{err}");
    if have("tshark") {
        let o = sh("tshark", &["-r", pcap.to_str().expect("path"), "-T", "fields", "-e", "eth.src", "-e", "ip.src"]);
        assert!(o.status.success(), "tshark: {}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.lines().any(|l| l.contains("10.0.1.2")), "the pings from host1: {text}");
    } else {
        eprintln!("tshark not installed: the capture file is not read back");
    }

    // Metrics, scraped inside the router's namespace.
    let m = scrape_in(&r);
    assert!(m.starts_with("HTTP/1.0 200") || m.starts_with("HTTP/1.1 200"), "{m}");
    assert!(metric(&m, "tern_interface_rx_packets_total{interface=\"lan0\"}") > 5.0);
    assert!(metric(&m, "tern_api_requests_total") > 5.0);
    assert_eq!(metric(&m, "tern_interface_up{interface=\"wan0\"}"), 1.0);

    // Shows.
    assert!(lab.ok(&["stats", "show", "nodes"]).contains("ip4-input"));
    assert!(lab.ok(&["worker", "show"]).contains("load%"));
    assert!(lab.ok(&["graph", "dot"]).starts_with("digraph"));
    assert!(lab.ok(&["neighbor", "show"]).contains("10.0.2.2"));

    // Batch file, stopping at the first error with -e.
    let batch = lab.dir.join("init.cmds");
    std::fs::write(
        &batch,
        "# comment\nroute add 203.0.113.0/24 blackhole\nroute bogus\nroute add 203.0.114.0/24 blackhole\n",
    )
    .expect("batch");
    let o =
        Command::new(TERN).arg("--socket").arg(lab.socket()).arg("-f").arg(&batch).arg("-e").output().expect("batch");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("init.cmds:3"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(lab.ok(&["route", "get", "203.0.113.9"]).contains("blackhole"));
    assert!(lab.ok(&["route", "get", "203.0.114.9"]).contains("no route"), "-e stopped before line 4");

    // Routes from a file, in route_batch requests: a refused route names
    // its line and its batch adds nothing; then the good file, and a
    // delete file.
    let routes = lab.dir.join("routes.txt");
    std::fs::write(
        &routes,
        "# from a file
203.0.120.0/24 via 10.0.2.2
203.0.121.0/24 via 224.0.0.1
",
    )
    .expect("routes");
    let (ok, _, err) = lab.cli(&["route", "add", "--file", &routes.display().to_string()]);
    assert!(!ok && err.contains("routes.txt:3") && err.contains("cannot be a next hop"), "{err}");
    assert!(lab.ok(&["route", "get", "203.0.120.9"]).contains("no route"), "nothing of the batch");
    std::fs::write(
        &routes,
        "203.0.120.0/24 via 10.0.2.2
203.0.121.0/24 blackhole
",
    )
    .expect("routes");
    assert!(lab.ok(&["route", "add", "-f", &routes.display().to_string()]).contains("2 route(s) added"));
    assert!(lab.ok(&["route", "get", "203.0.121.9"]).contains("blackhole"));
    std::fs::write(
        &routes,
        "203.0.120.0/24
203.0.121.0/24
",
    )
    .expect("prefixes");
    assert!(lab.ok(&["route", "del", "--file", &routes.display().to_string()]).contains("2 route(s) removed"));
    assert!(lab.ok(&["route", "get", "203.0.120.9"]).contains("no route"));

    // Reload: a good change is applied, a bad file is refused with its line.
    let extra = "\n[[route]]\nprefix = \"192.0.2.0/24\"\nvia = \"10.0.2.2\"\n";
    std::fs::write(lab.config(), config(&lab.dir, extra)).expect("config");
    assert!(lab.ok(&["config", "reload"]).contains("route 192.0.2.0/24 added"));
    assert!(lab.ok(&["route", "get", "192.0.2.1"]).contains("static"));
    std::fs::write(lab.config(), config(&lab.dir, "\n[[route]]\nprefix = \"192.0.2.0/24\"\nvia = 10.0.2.2\n"))
        .expect("config");
    let (ok, _, err) = lab.cli(&["config", "reload"]);
    assert!(!ok, "a bad file is refused");
    assert!(err.contains("tern.toml:19"), "names the line: {err}");
    assert!(lab.ok(&["route", "get", "192.0.2.1"]).contains("static"), "the running config stays");
    // SIGHUP reloads too.
    std::fs::write(lab.config(), config(&lab.dir, "")).expect("config");
    let pid = lab.daemon.as_ref().map(|d| d.id().to_string()).expect("daemon");
    must("kill", &["-HUP", &pid]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !lab.ok(&["route", "get", "192.0.2.1"]).contains("no route") {
        assert!(Instant::now() < deadline, "SIGHUP reload did not remove the route");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A rule set loaded and bound in one step (as after acl import-nft;
    // last: a set the file does not hold makes reloads refuse until a restart).
    let fw = lab.dir.join("fw.toml");
    std::fs::write(
        &fw,
        "[[acl]]\nname = \"NFT_IN\"\ndefault = \"accept\"\n[[acl.rule]]\naction = \"count\"\nproto = \"icmp\"\n",
    )
    .expect("fw");
    let fw = fw.to_str().expect("path");
    let (ok, _, err) = lab.cli(&["acl", "load", fw, "--in", "lan0=NOPE"]);
    assert!(!ok && err.contains("no rule set \"NOPE\""), "{err}");
    assert!(lab.ok(&["acl", "load", fw, "--in", "lan0=NFT_IN"]).contains("bound in on lan0"));
    let acls = lab.json(&["acl", "show"]);
    assert_eq!(acls[0]["interfaces_in"][0], "lan0", "{acls}");

    // A clean stop.
    let mut d = lab.daemon.take().expect("daemon");
    must("kill", &["-TERM", &d.id().to_string()]);
    let st = d.wait().expect("wait");
    assert!(st.success(), "tern exits cleanly on SIGTERM");
    assert!(!lab.socket().exists(), "the API socket is removed on exit");
}
