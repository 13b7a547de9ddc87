//! Throwaway network namespaces for `tern lab` (and the tests that do what
//! it does). Everything created is removed when the guard drops.

use std::process::{Command, Output};

/// Runs a command and returns its output, or a message naming it.
pub fn cmd(prog: &str, args: &[&str]) -> Result<Output, String> {
    Command::new(prog).args(args).output().map_err(|e| format!("cannot run {prog}: {e}"))
}

/// Runs a command that must succeed.
pub fn must(prog: &str, args: &[&str]) -> Result<String, String> {
    let out = cmd(prog, args)?;
    if !out.status.success() {
        return Err(format!("`{prog} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A network namespace, deleted on drop (unless kept).
pub struct Netns {
    pub name: String,
    keep: bool,
}

impl Netns {
    pub fn create(name: &str) -> Result<Netns, String> {
        must("ip", &["netns", "add", name])?;
        let ns = Netns { name: name.to_string(), keep: false };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// `ip -n NAME ...`
    pub fn ip(&self, args: &[&str]) -> Result<String, String> {
        let mut v = vec!["-n", self.name.as_str()];
        v.extend_from_slice(args);
        must("ip", &v)
    }

    /// Runs a program inside the namespace.
    pub fn exec(&self, args: &[&str]) -> Result<Output, String> {
        let mut v = vec!["netns", "exec", self.name.as_str()];
        v.extend_from_slice(args);
        cmd("ip", &v)
    }

    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), String> {
        let kv = format!("{key}={value}");
        let out = self.exec(&["sysctl", "-q", "-w", &kv])?;
        if !out.status.success() {
            return Err(format!("sysctl {kv} in {}: {}", self.name, String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(())
    }

    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if !self.keep {
            let _ = cmd("ip", &["netns", "del", &self.name]);
        }
    }
}

/// Creates a veth pair with one end in each namespace.
pub fn veth(a: &Netns, a_name: &str, b: &Netns, b_name: &str) -> Result<(), String> {
    must("ip", &["link", "add", a_name, "netns", &a.name, "type", "veth", "peer", "name", b_name, "netns", &b.name])?;
    a.ip(&["link", "set", a_name, "up"])?;
    b.ip(&["link", "set", b_name, "up"])?;
    Ok(())
}

/// Whether the process runs as root (uid 0), read from /proc.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

/// Deletes namespaces left by earlier labs whose process is gone.
pub fn remove_stale(prefix: &str) -> usize {
    let Ok(out) = must("ip", &["netns", "list"]) else { return 0 };
    let mut n = 0;
    for line in out.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(rest) = name.strip_prefix(prefix) else { continue };
        let pid = rest.split('-').next().unwrap_or_default();
        let alive = !pid.is_empty() && std::path::Path::new(&format!("/proc/{pid}")).exists();
        if !alive && cmd("ip", &["netns", "del", name]).is_ok_and(|o| o.status.success()) {
            n += 1;
        }
    }
    n
}
