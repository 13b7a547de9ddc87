//! `tern top` against a tern forwarding a ping flood in a namespace lab:
//! `--once --json` parses and has the forwarding interfaces' rates; the
//! live view runs in tmux (a real terminal), shows the interfaces and
//! nodes with non-zero rates, sorts and filters with its keys, and `q`
//! gives the shell back with the terminal restored.
//!
//! Needs root (network namespaces), iproute2, ping and tmux; without them
//! the test says why and passes.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{Lab, TERN, cli, is_root, log_of, run_tern};

fn have(prog: &str, flag: &str) -> bool {
    Command::new(prog).arg(flag).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// A child process killed (and reaped) when dropped.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A tmux session of its own server socket, killed when dropped.
struct Tmux {
    sock: String,
    name: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> String {
        let o = Command::new("tmux")
            .args(["-u", "-L", &self.sock])
            .args(args)
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .output()
            .expect("tmux");
        assert!(o.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn start(sock: &str, name: &str) -> Tmux {
        let t = Tmux { sock: sock.into(), name: name.into() };
        t.cmd(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "160",
            "-y",
            "48",
            "env",
            "PS1=top-test$ ",
            "TERM=xterm-256color",
            "bash",
            "--norc",
            "--noprofile",
            "-i",
        ]);
        t
    }

    fn keys(&self, keys: &[&str]) {
        let mut v = vec!["send-keys", "-t", self.name.as_str()];
        v.extend_from_slice(keys);
        self.cmd(&v);
    }

    fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", &self.name])
    }

    /// The screen once `ok` holds for it (or a failure showing the last).
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "waiting for {what}; the screen:\n{s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.sock, "kill-server"]).output();
    }
}

/// The cells of a pane's row on the screen: the text between the first
/// two box borders, split on whitespace.
fn cells(line: &str) -> Vec<String> {
    line.split('│').nth(1).unwrap_or("").split_whitespace().map(String::from).collect()
}

/// The nodes pane's engine rows: (node, packets/s, ns/packet).
fn engine_nodes(screen: &str) -> Vec<(String, String, String)> {
    screen
        .lines()
        .map(cells)
        .filter(|c| c.get(1).is_some_and(|l| l == "engine"))
        .map(|c| (c[0].clone(), c.get(2).cloned().unwrap_or_default(), c.get(3).cloned().unwrap_or_default()))
        .collect()
}

/// The figures of "1.2k", "3.4M", "56": for comparing only.
fn value(s: &str) -> f64 {
    let (num, mult) = match s.chars().last() {
        Some('k') => (&s[..s.len() - 1], 1e3),
        Some('M') => (&s[..s.len() - 1], 1e6),
        Some('G') => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    num.parse::<f64>().unwrap_or(f64::NAN) * mult
}

/// The interface row's rx packets/s (the fifth cell from the right).
fn rx_rate(screen: &str, iface: &str) -> Option<f64> {
    screen.lines().map(cells).find(|c| c.first().is_some_and(|n| n == iface)).and_then(|c| {
        let i = c.len().checked_sub(5)?;
        Some(value(&c[i]))
    })
}

const CONFIG: &str = r#"
[[interface]]
name = "lan0"
device = "lan0"
addresses = ["10.0.1.1/24"]

[[interface]]
name = "wan0"
device = "wan0"
driver = "afxdp"
addresses = ["10.0.2.1/24"]

[api]
socket = "SOCKET"

[metrics]
listen = ""
"#;

#[test]
fn tern_top_shows_a_forwarding_tern_live_and_once() {
    if !is_root() {
        eprintln!("skipped: needs root to create network namespaces");
        return;
    }
    if !have("ip", "-V") || !Path::new("/usr/bin/ping").exists() && !Path::new("/bin/ping").exists() {
        eprintln!("skipped: needs iproute2 and ping");
        return;
    }
    if !have("tmux", "-V") {
        eprintln!("skipped: needs tmux (scripts/setup.sh installs it)");
        return;
    }
    let base = format!("toptm{}", std::process::id());
    let mut lab = Lab::two_hosts(&base);
    let r = lab.ns[1].clone();
    for dev in ["lan0", "wan0"] {
        common::must("ip", &["-n", &r, "link", "set", dev, "up"]);
    }
    let config = lab.dir.join("tern.toml");
    std::fs::write(&config, CONFIG.replace("SOCKET", &lab.socket())).expect("config");
    run_tern(&mut lab, &config);

    // Traffic through both lanes until the test ends: a ping flood from
    // host 1 to host 2 (at most two minutes).
    let deadline = Instant::now() + Duration::from_secs(20);
    while !Command::new("ip")
        .args(["netns", "exec", &lab.ns[0], "ping", "-n", "-c", "1", "-W", "1", "10.0.2.2"])
        .output()
        .expect("ping")
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "no ping through tern; its log:\n{}", log_of(&lab));
    }
    let _flood = Kill(
        Command::new("ip")
            .args(["netns", "exec", &lab.ns[0], "ping", "-n", "-q", "-f", "-w", "120", "10.0.2.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ping flood"),
    );

    // --once --json: one object with the rates of one interval.
    let o = cli(&lab, &["top", "--once", "--json", "--interval", "500"]);
    assert!(o.status.success(), "tern top --once --json: {}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("tern top --json is JSON");
    assert!(v["interval_s"].as_f64().is_some_and(|s| s > 0.3), "{v}");
    for name in ["lan0", "wan0"] {
        let i = v["interfaces"].as_array().and_then(|a| a.iter().find(|i| i["name"] == name));
        let i = i.unwrap_or_else(|| panic!("{name} in {v}"));
        for k in ["rx_pps", "tx_pps", "rx_bps", "tx_bps"] {
            assert!(i[k].as_f64().is_some_and(|x| x > 0.0), "{name} {k} is not above zero: {i}");
        }
    }
    let nodes = v["nodes"].as_array().expect("nodes");
    assert!(
        nodes.iter().any(|n| n["lane"] == "engine" && n["pps"].as_f64().is_some_and(|x| x > 0.0)),
        "an engine node forwards: {v}"
    );
    assert!(v["workers"].as_array().is_some_and(|w| !w.is_empty()), "{v}");
    assert!(v["fib"]["v4_routes"].as_u64().is_some_and(|n| n >= 2), "connected routes: {v}");

    // Plain text when standard output is not a terminal: no escapes.
    let o = cli(&lab, &["top", "--interval", "300"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("lan0") && text.contains("interfaces"), "{text}");
    assert!(!text.contains('\x1b'), "escape sequences in plain text: {text:?}");

    // The live view in a real terminal.
    let t = Tmux::start(&base, &base);
    t.wait_for("the shell's prompt", |s| s.contains("top-test$"));
    let command = format!("{TERN} --socket {} top --interval 300", lab.socket());
    t.keys(&[&command, "Enter"]);
    let s = t.wait_for("interfaces and engine nodes with non-zero rates", |s| {
        ["lan0", "wan0"].iter().all(|i| rx_rate(s, i).is_some_and(|x| x > 0.0))
            && engine_nodes(s).iter().any(|(_, pps, _)| value(pps) > 0.0)
    });
    assert!(s.contains("1 interfaces") && s.contains("2 nodes") && s.contains("tern "), "{s}");

    // What the screen shows while tern top redraws may be half of the new
    // frame (tmux takes the update in pieces): each check waits for the
    // whole of what it expects, and fails with the last screen.
    let sorted_desc = |v: &[f64]| v.windows(2).all(|w| w[0] >= w[1]);
    let names = |s: &str| engine_nodes(s).into_iter().map(|n| n.0).collect::<Vec<_>>();

    // `s` three times: by cost, highest first.
    t.keys(&["s", "s", "s"]);
    t.wait_for("nodes by ns/packet, highest first", |s| {
        let costs: Vec<f64> = engine_nodes(s).iter().map(|(_, _, ns)| value(ns)).collect();
        s.contains("sort: cost") && costs.len() >= 2 && sorted_desc(&costs)
    });
    // Once more: by name; then `r` reverses it.
    t.keys(&["s"]);
    let s = t.wait_for("nodes by name", |s| {
        let n = names(s);
        s.contains("sort: name") && n.len() >= 2 && n.windows(2).all(|w| w[0] <= w[1])
    });
    let by_name = names(&s);
    t.keys(&["r"]);
    let s = t.wait_for("nodes by name, reversed", |s| {
        let n = names(s);
        s.contains("(reversed)") && n.len() >= 2 && n.windows(2).all(|w| w[0] >= w[1])
    });
    assert_ne!(by_name, names(&s), "`r` changed the order");

    // `/` and text filter the rows; Enter applies.
    t.keys(&["/", "ip4", "Enter"]);
    t.wait_for("only the rows the filter matches", |s| {
        let n = names(s);
        s.contains("filter: ip4")
            && !n.is_empty()
            && n.iter().all(|n| n.contains("ip4"))
            && !s.contains("ethernet-input")
            // Interfaces are filtered too.
            && rx_rate(s, "lan0").is_none()
    });

    // `q` quits: the shell's prompt again, the alternate screen left.
    t.keys(&["q"]);
    let s = t.wait_for("the shell after q", |s| {
        s.lines().rev().find(|l| !l.trim().is_empty()).is_some_and(|l| l.trim_end() == "top-test$")
    });
    assert!(!s.contains("1 interfaces"), "the view is still on the screen:\n{s}");
    let alt = t.cmd(&["display-message", "-p", "-t", &base, "#{alternate_on}"]);
    assert_eq!(alt.trim(), "0", "the alternate screen is still on");
    let cmd = t.cmd(&["display-message", "-p", "-t", &base, "#{pane_current_command}"]);
    assert_eq!(cmd.trim(), "bash", "tern top still runs");
}

/// No tern to talk to: a clear error (an error object with --json), exit
/// status 1, nothing on the terminal changed; a bad interval is refused.
#[test]
fn tern_top_without_a_tern_says_so() {
    let sock = std::env::temp_dir().join(format!("top-no-tern-{}.sock", std::process::id()));
    let run = |args: &[&str]| {
        Command::new(TERN).arg("--socket").arg(&sock).args(args).stdin(Stdio::null()).output().expect("tern top")
    };
    let o = run(&["top", "--once"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot connect") && err.contains("is tern running?"), "{err}");
    assert!(o.stdout.is_empty() && !err.contains('\x1b'), "{o:?}");
    let o = run(&["--json", "top"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON error");
    assert_eq!((v["ok"].as_bool(), v["error"]["code"].as_str()), (Some(false), Some("cli")), "{v}");
    let o = run(&["top", "--interval", "5"]);
    assert_eq!(o.status.code(), Some(2), "clap refuses an interval below 100 ms");
    assert!(String::from_utf8_lossy(&o.stderr).contains("100"), "{o:?}");
}
