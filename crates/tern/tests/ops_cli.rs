//! The operator's CLI and `tern run` as users drive them, on memory ports
//! (no root needed): the socket `tern run` listens on, output into a pipe
//! whose reader left, and `--json` answers and errors.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

const TERN: &str = env!("CARGO_BIN_EXE_tern");

/// A `tern run` on memory ports; stopped and its directory removed on drop.
struct Daemon {
    child: Option<Child>,
    dir: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        common::stop(&mut self.child, Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tern-ops-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch");
    d
}

/// A configuration whose own `[api] socket` is `config.sock` in `dir`.
fn config(dir: &Path, api: &str) -> PathBuf {
    let text = format!(
        "[api]\nsocket = \"{}\"\n{api}\n[metrics]\nlisten = \"\"\n\n\
         [[interface]]\nname = \"lan\"\ndriver = \"memory\"\nmac = \"02:00:00:00:01:01\"\naddresses = [\"10.0.1.1/24\"]\n\n\
         [[route]]\nprefix = \"198.18.0.0/15\"\nvia = \"10.0.1.2\"\n",
        dir.join("config.sock").display()
    );
    let p = dir.join("tern.toml");
    std::fs::write(&p, text).expect("config");
    p
}

fn cli(socket: &Path, args: &[&str]) -> Output {
    Command::new(TERN).arg("--socket").arg(socket).args(args).stdin(Stdio::null()).output().expect("run tern")
}

/// Starts `tern run` with `socket` given on the command line or in
/// TERN_SOCKET, and waits until it answers there.
fn start(tag: &str, socket_by_env: bool) -> (Daemon, PathBuf) {
    start_with(tag, socket_by_env, "")
}

/// `start` with more `[api]` keys.
fn start_with(tag: &str, socket_by_env: bool, api: &str) -> (Daemon, PathBuf) {
    let dir = scratch(tag);
    let cfg = config(&dir, api);
    let socket = dir.join("cli.sock");
    let mut cmd = Command::new(TERN);
    cmd.env_remove("TERN_SOCKET");
    if socket_by_env {
        cmd.env("TERN_SOCKET", &socket);
    } else {
        cmd.arg("--socket").arg(&socket);
    }
    cmd.arg("--log").arg("warn").arg("run").arg("--config").arg(&cfg).stdin(Stdio::null()).stdout(Stdio::null());
    let child = cmd.spawn().expect("tern run");
    let mut d = Daemon { child: Some(child), dir: dir.clone() };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if socket.exists() && cli(&socket, &["status"]).status.success() {
            break;
        }
        if let Some(c) = d.child.as_mut()
            && let Ok(Some(st)) = c.try_wait()
        {
            panic!("tern run exited ({st}) before listening on {}", socket.display());
        }
        assert!(
            Instant::now() < deadline,
            "tern run never answered on {} (config's socket exists: {})",
            socket.display(),
            dir.join("config.sock").exists()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!dir.join("config.sock").exists(), "the configuration's socket is overridden");
    (d, socket)
}

#[test]
fn tern_run_listens_on_the_socket_given_by_flag_or_environment() {
    let (_d, _s) = start("flag", false);
    let (_d2, _s2) = start("env", true);
}

#[test]
fn output_into_a_pipe_nobody_reads_ends_quietly() {
    let (_d, socket) = start("pipe", false);
    for args in [
        &["route", "show", "--json"][..],
        &["route", "show"],
        &["stats", "show"],
        &["capture", "lan", "-w", "-", "-c", "1"],
    ] {
        let (r, w) = std::io::pipe().expect("pipe");
        drop(r); // the reader left, as `head -1` does once it has its line
        let mut child = Command::new(TERN)
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(w)
            .stderr(Stdio::piped())
            .spawn()
            .expect("run tern");
        // A tern that never notices its reader left must fail the test,
        // not hang it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(child.try_wait(), Ok(None)) {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{args:?} kept running with nobody reading");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let o = child.wait_with_output().expect("tern's output");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{args:?}: {:?} {err}", o.status);
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
    }
    // And through a real `head -1`, when there is bash (pipefail: tern's
    // own exit status counts).
    if let Ok(o) = Command::new("bash")
        .arg("-c")
        .arg(format!("set -o pipefail; '{TERN}' --socket '{}' route show --json | head -1", socket.display()))
        .output()
    {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && !err.contains("panicked"), "{:?} {err}", o.status);
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "{");
    }
}

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    })
}

#[test]
fn json_answers_and_errors_parse() {
    let (d, socket) = start("json", false);
    // An error tern answered: its code.
    let o = cli(&socket, &["--json", "route", "get", "not-an-address"]);
    assert!(!o.status.success());
    let v = json_of(&o);
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["error"]["code"], "invalid", "{v}");
    assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    // An error on the CLI's side.
    let o = cli(&d.dir.join("nothing.sock"), &["--json", "status"]);
    assert!(!o.status.success());
    assert_eq!(json_of(&o)["error"]["code"], "cli");
    // config check, good and bad.
    let o = cli(&socket, &["--json", "config", "check", &d.dir.join("tern.toml").display().to_string()]);
    assert!(o.status.success());
    let v = json_of(&o);
    assert_eq!((v["ok"].clone(), v["interfaces"].clone()), (true.into(), 1.into()), "{v}");
    let bad = d.dir.join("bad.toml");
    std::fs::write(&bad, "[api]\nsocket_mode = \"0999\"\n").expect("write");
    let o = cli(&socket, &["config", "check", "--json", &bad.display().to_string()]);
    assert!(!o.status.success());
    let v = json_of(&o);
    assert!(
        v["error"]["message"].as_str().is_some_and(|m| m.contains("bad.toml") && m.contains("api.socket_mode")),
        "{v}"
    );
    // import-nft, good and bad.
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../acl/tests/fixtures/nft");
    let o = cli(&socket, &["--json", "acl", "import-nft", &fixtures.join("fifty_drop.json").display().to_string()]);
    assert!(o.status.success());
    let v = json_of(&o);
    assert_eq!(v["sets"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(v["toml"].as_str().is_some_and(|t| t.contains("[[acl]]")));
    let o = cli(&socket, &["--json", "acl", "import-nft", &fixtures.join("refuse_ct.json").display().to_string()]);
    assert!(!o.status.success());
    assert!(json_of(&o)["error"]["message"].as_str().is_some_and(|m| m.contains("ct")));
    // capture: the summary.
    let pcap = d.dir.join("lan.pcap");
    let o = cli(&socket, &["--json", "capture", "lan", "-w", &pcap.display().to_string(), "--seconds", "0.1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json_of(&o);
    assert_eq!((v["frames"].clone(), v["lost"].clone()), (0.into(), 0.into()), "{v}");
    assert_eq!(v["file"], pcap.display().to_string());
}

/// Holds `n` connections to `socket` as user `uid` until dropped.
struct Holder(Child);

impl Holder {
    fn start(uid: u32, socket: &Path, n: usize) -> Holder {
        use std::io::BufRead;
        let script = "import socket,sys\nss=[]\nfor _ in range(int(sys.argv[2])):\n    s=socket.socket(socket.AF_UNIX)\n    s.connect(sys.argv[1])\n    ss.append(s)\nprint('ok',flush=True)\nsys.stdin.read()\n";
        let id = uid.to_string();
        let mut c = Command::new("setpriv")
            .args(["--reuid", &id, "--regid", &id, "--clear-groups", "/usr/bin/python3", "-c", script])
            .arg(socket)
            .arg(n.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("setpriv python3");
        let mut line = String::new();
        std::io::BufReader::new(c.stdout.as_mut().expect("stdout")).read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "ok", "uid {uid} could not connect");
        Holder(c)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn other_users_filling_the_socket_get_busy_and_the_operator_still_gets_in() {
    let missing = if !common::is_root() {
        Some("root (to act as other users)")
    } else if Command::new("setpriv").arg("--version").output().is_err() {
        Some("setpriv")
    } else if !Path::new("/usr/bin/python3").exists() {
        Some("/usr/bin/python3")
    } else {
        None
    };
    if let Some(m) = missing {
        eprintln!("skipped: needs {m}");
        return;
    }
    // Every user may connect: the limits are the only gate here.
    let (d, socket) = start_with("busy", false, "socket_mode = \"0666\"\n");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&socket).expect("socket").permissions());
    assert_eq!(mode & 0o777, 0o666, "[api] socket_mode");
    let _ = std::fs::set_permissions(&d.dir, std::os::unix::fs::PermissionsExt::from_mode(0o755));
    // Four users, eight idle connections each: every ordinary place.
    let holders: Vec<Holder> = (0..4).map(|i| Holder::start(60_001 + i, &socket, 8)).collect();
    // A fifth user is refused, and told so.
    let o = Command::new("setpriv")
        .args(["--reuid", "60005", "--regid", "60005", "--clear-groups", TERN, "--socket"])
        .arg(&socket)
        .arg("status")
        .stdin(Stdio::null())
        .output()
        .expect("tern as another user");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(err.contains("busy"), "the CLI says busy: {err}");
    // One of the four at its limit replaces its own idle connection.
    let o = Command::new("setpriv")
        .args(["--reuid", "60001", "--regid", "60001", "--clear-groups", TERN, "--socket"])
        .arg(&socket)
        .arg("status")
        .stdin(Stdio::null())
        .output()
        .expect("tern as a holder");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The operator always gets in, again and again.
    for _ in 0..6 {
        let o = cli(&socket, &["status"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    drop(holders);
}

#[test]
fn a_batch_with_json_reports_each_failed_line_as_json() {
    let (d, socket) = start("batch", false);
    let file = d.dir.join("init.cmds");
    std::fs::write(&file, "status\nroute get bogus\nroute frobnicate\n").expect("write");
    let o = cli(&socket, &["--json", "-f", &file.display().to_string()]);
    assert!(!o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    let errors: Vec<serde_json::Value> =
        text.lines().filter(|l| l.starts_with("{\"error\"")).map(|l| serde_json::from_str(l).expect("JSON")).collect();
    assert_eq!(errors.len(), 2, "{text}");
    assert_eq!(errors[0]["error"]["code"], "invalid", "{text}");
    assert!(errors[0]["error"]["message"].as_str().is_some_and(|m| m.contains("init.cmds:2:")), "{text}");
    assert_eq!(errors[1]["error"]["code"], "cli", "{text}");
}
