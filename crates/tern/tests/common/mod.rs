//! Helpers shared by the tests that run the real `tern` in network
//! namespaces: the testkit's lab (each test file uses what it needs).
#![allow(dead_code, unused_imports)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
pub use tern_testkit::netns::{is_root, lab_missing, metric, must, netns_exec, scrape_in, sh, stop};

/// The testkit's two-host lab, wrapped so that each test file can add the
/// methods it needs (starting its daemon, its CLI calls).
pub struct Lab(pub tern_testkit::netns::Lab);

/// The `tern` binary under test.
pub const TERN: &str = env!("CARGO_BIN_EXE_tern");

impl Lab {
    /// See [`tern_testkit::netns::Lab::two_hosts`].
    pub fn two_hosts(base: &str) -> Lab {
        Lab(tern_testkit::netns::Lab::two_hosts(base))
    }
}

/// Runs `tern run --config CONFIG` in the lab router's namespace, its log in
/// the lab's `tern.log`, and waits until its API answers.
pub fn run_tern(lab: &mut Lab, config: &Path) {
    let log = std::fs::File::create(lab.dir.join("tern.log")).expect("log");
    let child = Command::new("ip")
        .args(["netns", "exec", &lab.ns[1], TERN, "run", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("tern run");
    lab.daemon = Some(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !cli(lab, &["status"]).status.success() {
        assert!(Instant::now() < deadline, "tern did not come up: {}", log_of(lab));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the lab's tern wrote to its log so far.
pub fn log_of(lab: &Lab) -> String {
    std::fs::read_to_string(lab.dir.join("tern.log")).unwrap_or_default()
}

/// The operator CLI against the lab's tern.
pub fn cli(lab: &Lab, args: &[&str]) -> Output {
    // The testkit's socket, whatever a test file's own `Lab` methods say.
    let sock = lab.0.socket();
    let mut v = vec!["--socket", sock.as_str()];
    v.extend_from_slice(args);
    Command::new(TERN).args(&v).output().expect("tern cli")
}

/// The CLI's `--json` answer (null when it printed none).
pub fn json(lab: &Lab, args: &[&str]) -> serde_json::Value {
    let mut v = vec!["--json"];
    v.extend_from_slice(args);
    serde_json::from_slice(&cli(lab, &v).stdout).unwrap_or_default()
}

/// A counter "node/name" as `tern stats show errors --json` reports it.
pub fn counter(lab: &Lab, name: &str) -> u64 {
    find_counter(&json(lab, &["stats", "show", "errors", "--all"]), name).unwrap_or(0)
}

/// Finds `"node/name": N` or `{node, name, count}` shapes in the stats JSON.
pub fn find_counter(v: &serde_json::Value, name: &str) -> Option<u64> {
    let (node, err) = name.split_once('/')?;
    match v {
        serde_json::Value::Object(m) => {
            let nm = m.get("node").and_then(|x| x.as_str());
            let en = m.get("name").or_else(|| m.get("error")).and_then(|x| x.as_str());
            if nm == Some(node) && en == Some(err) {
                for key in ["count", "packets", "value", "total"] {
                    if let Some(n) = m.get(key).and_then(serde_json::Value::as_u64) {
                        return Some(n);
                    }
                }
            }
            if let Some(n) = m.get(name).and_then(serde_json::Value::as_u64) {
                return Some(n);
            }
            m.values().find_map(|x| find_counter(x, name))
        }
        serde_json::Value::Array(a) => a.iter().find_map(|x| find_counter(x, name)),
        _ => None,
    }
}

impl std::ops::Deref for Lab {
    type Target = tern_testkit::netns::Lab;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Lab {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// Runs the Python script at `path` in namespace `ns` with scapy's
/// Python (`/usr/bin/python3`), its output piped.
pub fn python_in(lab: &Lab, ns: usize, path: &Path, args: &[&str]) -> Child {
    let p = path.display().to_string();
    let mut v = vec!["netns", "exec", lab.ns[ns].as_str(), "/usr/bin/python3", p.as_str()];
    v.extend_from_slice(args);
    Command::new("ip").args(&v).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("python")
}

/// Waits (30 s at most) for a file a script writes when it is ready.
pub fn wait_file(p: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !p.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The JSON lines a script printed (it must have succeeded).
pub fn json_lines(child: Child) -> Vec<serde_json::Value> {
    let out = child.wait_with_output().expect("python");
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Why the ESP tests cannot run here: no scapy with its IPsec layer.
pub fn scapy_missing() -> Option<&'static str> {
    let ok = Command::new("/usr/bin/python3")
        .args(["-c", "from scapy.layers.ipsec import SecurityAssociation"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok { None } else { Some("no scapy with scapy.layers.ipsec in /usr/bin/python3") }
}

/// An SA's counter as `tern ipsec sa show ID --json` tells it.
pub fn sa_counter(lab: &Lab, id: usize, what: &str) -> u64 {
    let v = json(lab, &["ipsec", "sa", "show", &id.to_string()]);
    let sas = v.pointer("/sas").or_else(|| v.pointer("/data/sas")).cloned().unwrap_or_default();
    sas.get(0).and_then(|s| s.get(what)).and_then(serde_json::Value::as_u64).unwrap_or(0)
}
