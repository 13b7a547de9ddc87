//! The strongSwan rig's parts that `netns_ike.rs`, `netns_ike_ra.rs` and
//! `netns_ike_more.rs` share: whether the machine can run them, tern's
//! control API, the certificates, ping's summary, charon's log without
//! its per-packet lines, and the cleanup their rigs' `Drop` does (each
//! file keeps its own topology and cases).
#![allow(dead_code)]

use crate::common::{Lab, log_of};
use std::path::Path;
use std::time::{Duration, Instant};
use tern_testkit::netns::remove_stale;
use tern_testkit::strongswan::{Charon, kill_pids_in, tail};

pub const TERN_ID: &str = "tern.example";
pub const SWAN_ID: &str = "swan.example";

/// Why this machine cannot run the interop tests, if so; else the
/// namespaces that killed earlier runs of `prefix` left are removed.
pub fn missing(prefix: &str) -> Option<String> {
    if let Some(why) = crate::common::lab_missing() {
        return Some(why.to_string());
    }
    let why = tern_testkit::strongswan::missing();
    if why.is_none() {
        remove_stale(prefix);
    }
    why
}

/// One call of tern's control API (one JSON line each way): the
/// answer's `result.data`, or the error message.
pub fn api(lab: &Lab, op: &str, args: serde_json::Value) -> Result<serde_json::Value, String> {
    use std::io::{BufRead, Write};
    let sock = lab.0.socket();
    let mut s = std::os::unix::net::UnixStream::connect(&sock).map_err(|e| format!("{sock}: {e}"))?;
    let req = serde_json::json!({"version": 1, "op": op, "args": args});
    writeln!(s, "{req}").map_err(|e| e.to_string())?;
    let mut line = String::new();
    std::io::BufReader::new(s).read_line(&mut line).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| format!("{e}: {line}"))?;
    if v["ok"] == true {
        Ok(v["result"]["data"].clone())
    } else {
        Err(v["error"]["message"].as_str().unwrap_or(&line).to_string())
    }
}

/// tern's IKE SAs (the API's `ike_sa_show`); empty when it does not answer.
pub fn tern_sas(lab: &Lab) -> Vec<serde_json::Value> {
    match api(lab, "ike_sa_show", serde_json::json!({})) {
        Ok(serde_json::Value::Array(a)) => a,
        _ => Vec::new(),
    }
}

/// "N received" of ping's summary.
pub fn received(text: &str) -> u32 {
    text.split(',').find_map(|p| p.trim().strip_suffix(" received").and_then(|n| n.trim().parse().ok())).unwrap_or(0)
}

/// Waits up to `secs` for `f`; panics naming `what`, with `logs()`.
pub fn wait(what: &str, secs: u64, logs: impl Fn() -> String, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {}", logs());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The last `n` lines of charon's log without the per-packet lines of its
/// socket threads (ESP in UDP comes through them too).
pub fn charon_tail(c: &Charon, n: usize) -> String {
    let log = c.log();
    let kept: Vec<&str> = log
        .lines()
        .filter(|l| {
            !(l.contains("waiting for data on sockets")
                || (l.contains("[NET] sending packet") || l.contains("[NET] received packet"))
                    && !l.ends_with(" bytes)"))
        })
        .collect();
    tail(&kept.join("\n"), n)
}

/// tern's log tail then each charon's, for a failure's message.
pub fn logs<'a>(lab: &Lab, charons: impl IntoIterator<Item = (String, &'a Charon)>) -> String {
    let mut s = format!("\n--- tern log:\n{}", tail(&log_of(lab), 40));
    for (name, c) in charons {
        s += &format!("\n--- {name} log:\n{}", charon_tail(c, 40));
    }
    s
}

/// What a rig's `Drop` does, on success and while a panic unwinds: the
/// charons and tern stopped, then whatever still runs in the rig's
/// namespaces (a ping, a tern that ignored SIGTERM) killed, before the
/// namespaces and the scratch directory go.
pub fn stop_all<'a>(charons: impl IntoIterator<Item = &'a mut Charon>, lab: &mut Lab, extra_ns: &[&str]) {
    for c in charons {
        c.stop(Duration::from_secs(5));
    }
    lab.stop_daemon(Duration::from_secs(5));
    for ns in lab.ns.iter().map(String::as_str).chain(extra_ns.iter().copied()) {
        kill_pids_in(ns);
    }
}

/// A CA and ECDSA P-256 certificates for tern and charon (subjectAltName
/// DNS = their identities), and an untrusted CA's certificate for tern
/// (`evil`); made with openssl in `dir`.
pub fn make_certs(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let ossl = |args: &[&str]| -> Result<(), String> {
        let o = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(|e| format!("openssl: {e}"))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(format!("openssl {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr)))
        }
    };
    for (ca, cn) in [("ca", "Interop CA"), ("evilca", "Evil CA")] {
        ossl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", &format!("{ca}.key")])?;
        ossl(&[
            "req",
            "-x509",
            "-new",
            "-key",
            &format!("{ca}.key"),
            "-subj",
            &format!("/O=tern/CN={cn}"),
            "-days",
            "30",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-out",
            &format!("{ca}.pem"),
        ])?;
    }
    for (name, id, ca) in [("tern", TERN_ID, "ca"), ("swan", SWAN_ID, "ca"), ("evil", TERN_ID, "evilca")] {
        ossl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", &format!("{name}.ec.key")])?;
        ossl(&["pkcs8", "-topk8", "-nocrypt", "-in", &format!("{name}.ec.key"), "-out", &format!("{name}.key")])?;
        ossl(&[
            "req",
            "-new",
            "-key",
            &format!("{name}.key"),
            "-subj",
            &format!("/O=tern/CN={id}"),
            "-out",
            &format!("{name}.csr"),
        ])?;
        std::fs::write(
            dir.join(format!("{name}.ext")),
            format!("subjectAltName=DNS:{id}\nbasicConstraints=CA:FALSE\n"),
        )
        .map_err(|e| e.to_string())?;
        ossl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.pem"),
        ])?;
    }
    Ok(())
}

/// Puts charon's certificate, key and CA into its swanctl folders under
/// `charon_dir` (made if missing).
pub fn charon_creds(charon_dir: &Path, certs: &Path) {
    for (from, to) in [("swan.pem", "x509/swan.pem"), ("swan.key", "private/swan.key"), ("ca.pem", "x509ca/ca.pem")] {
        let to = charon_dir.join(to);
        if let Some(d) = to.parent() {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        }
        std::fs::copy(certs.join(from), &to).unwrap_or_else(|e| panic!("{from}: {e}"));
    }
}
