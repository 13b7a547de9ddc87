//! Helpers shared by the tests that run the real `tern` in network
//! namespaces (each test file uses what it needs).
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Output};
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
