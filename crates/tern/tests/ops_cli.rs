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
        common::tear_down(&mut self.child, &[], &self.dir, Duration::from_secs(5));
    }
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tern-ops-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch");
    d
}

/// A configuration whose own `[api] socket` is `config.sock` in `dir`.
fn config(dir: &Path) -> PathBuf {
    let text = format!(
        "[api]\nsocket = \"{}\"\n\n[metrics]\nlisten = \"\"\n\n\
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
    let dir = scratch(tag);
    let cfg = config(&dir);
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
    for args in [&["route", "show", "--json"][..], &["route", "show"], &["stats", "show"]] {
        let (r, w) = std::io::pipe().expect("pipe");
        drop(r); // the reader left, as `head -1` does once it has its line
        let o = Command::new(TERN)
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(w)
            .stderr(Stdio::piped())
            .output()
            .expect("run tern");
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
    std::fs::write(&bad, "[[interface]]\nname = 7\n").expect("write");
    let o = cli(&socket, &["config", "check", "--json", &bad.display().to_string()]);
    assert!(!o.status.success());
    assert!(json_of(&o)["error"]["message"].as_str().is_some_and(|m| m.contains("bad.toml")));
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
}
