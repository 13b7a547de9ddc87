//! `tern ike sa show` pages as an operator reads them: the real `tern run`
//! (two IKE threads, standalone on AF_PACKET) answers 150 IKE_SA_INITs
//! from h2 (as many source ports; each leaves a half-open IKE SA, 30 s),
//! and the CLI, 64 at a time, following each page's "more:" line, lists
//! every SA exactly once, in id order, as `--limit 0` does; the counts by
//! state come first; `--remote` and `--peer` filter; `--json` says where
//! the next page starts.
//!
//! Needs root and iproute2; says why and passes without.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

mod common;
use common::{Lab, cli, json, log_of, run_tern};
use tern_testkit::strongswan::Lane;

const N: usize = 150;

/// An IKE_SA_INIT request (RFC 7296 1.2): header, SA (one IKE proposal:
/// AES-GCM-16-128, PRF-HMAC-SHA2-256, X25519), KE (group 31), Nonce.
fn sa_init(k: u64) -> Vec<u8> {
    let transforms: [&[u8]; 3] =
        [&[3, 0, 0, 12, 1, 0, 0, 20, 0x80, 0x0e, 0x00, 0x80], &[3, 0, 0, 8, 2, 0, 0, 5], &[0, 0, 0, 8, 4, 0, 0, 31]];
    let t: Vec<u8> = transforms.concat();
    let mut proposal = vec![0, 0, 0, 0, 1, 1, 0, 3];
    proposal.extend_from_slice(&t);
    let plen = proposal.len() as u16;
    proposal[2..4].copy_from_slice(&plen.to_be_bytes());
    let mut sa = vec![34, 0, 0, 0];
    sa.extend_from_slice(&proposal);
    let slen = sa.len() as u16;
    sa[2..4].copy_from_slice(&slen.to_be_bytes());
    // A public value that is no small-order point: bytes of a counter
    // hashed by multiplication.
    let mut public = [0u8; 32];
    for (i, b) in public.iter_mut().enumerate() {
        *b = ((k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 8 * 8)) as u8) ^ (i as u8).wrapping_mul(37) ^ 0x5a;
    }
    let mut ke = vec![40, 0, 0, 40, 0, 31, 0, 0];
    ke.extend_from_slice(&public);
    let mut nonce = vec![0, 0, 0, 36];
    nonce.extend((0..32u8).map(|i| i ^ k as u8));
    let mut m = Vec::new();
    m.extend_from_slice(&(0x1000_0000_0000_0000u64 + k).to_be_bytes());
    m.extend_from_slice(&[0; 8]);
    m.extend_from_slice(&[33, 0x20, 34, 0x08, 0, 0, 0, 0]);
    let len = (28 + sa.len() + ke.len() + nonce.len()) as u32;
    m.extend_from_slice(&len.to_be_bytes());
    m.extend_from_slice(&sa);
    m.extend_from_slice(&ke);
    m.extend_from_slice(&nonce);
    m
}

fn config(lab: &Lab) -> String {
    format!(
        r#"{}
[api]
socket = "{}"

[metrics]
listen = ""

[ike_service]
threads = 2

[[tunnel]]
name = "ra0"
type = "ipsec"
local = "10.0.2.1"
remote = "any"
addresses = ["10.77.0.1/24"]

[[ike]]
name = "ra"
local = "10.0.2.1"
remote = "any"
tunnel = "ra0"
auth = "psk"
psk = "pages-psk-0123456789"
proposals = ["aes128gcm16-prfsha256-x25519"]
esp_proposals = ["aes128gcm16"]
pool = "10.77.0.10-10.77.0.250"
"#,
        Lane::AfPacket.interfaces(&[("lan0", "10.0.1.1/24"), ("wan0", "10.0.2.1/24")]),
        lab.0.socket()
    )
}

fn text(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The ids of a human page and its "more:" command's arguments.
fn page(out: &str) -> (Vec<u64>, Option<Vec<String>>) {
    let mut ids = Vec::new();
    let mut more = None;
    for line in out.lines() {
        if let Some(cmd) = line.strip_prefix("more: tern ") {
            more = Some(cmd.split_whitespace().map(String::from).collect());
        } else if !line.contains("IKE SAs:")
            && let Some(id) = line.split_whitespace().next().and_then(|w| w.parse().ok())
        {
            ids.push(id);
        }
    }
    (ids, more)
}

#[test]
fn ike_sa_show_pages_each_sa_once() {
    if let Some(why) = common::lab_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut lab = Lab::two_hosts(&format!("ikepg{}", std::process::id()));
    let cfg = lab.dir.join("tern.toml");
    std::fs::write(&cfg, config(&lab)).expect("config");
    run_tern(&mut lab, &cfg);
    // From h2, each from its own socket (port): one half-open SA each.
    lab.netns[2].run(|| {
        for k in 0..N as u64 {
            let s = UdpSocket::bind("10.0.2.2:0").expect("bind");
            s.send_to(&sa_init(k), "10.0.2.1:500").expect("send");
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let exact = format!("{N} IKE SAs: 0 established, 0 rekeying, {N} connecting, 0 deleting");
    let want = format!("{N} IKE SAs: 0 established, {N} half-open (`tern ike sa summary`: by state and peer)");
    loop {
        let out = text(&cli(&lab, &["ike", "sa", "summary"]));
        // The page's counters are the threads' (published within 200 ms).
        let page = text(&cli(&lab, &["ike", "sa", "show", "--limit", "1"]));
        if out.lines().next() == Some(exact.as_str()) && page.lines().next() == Some(want.as_str()) {
            break;
        }
        assert!(Instant::now() < deadline, "summary: {out}\nlog: {}", log_of(&lab));
        std::thread::sleep(Duration::from_millis(100));
    }
    let all: Vec<u64> = json(&lab, &["ike", "sa", "show", "--limit", "0"])["sas"]
        .as_array()
        .expect("sas")
        .iter()
        .filter_map(|s| s["id"].as_u64())
        .collect();
    assert_eq!(all.len(), N);
    assert!(all.windows(2).all(|w| w[0] < w[1]), "by id");
    // Page by page as the operator does: 150 in pages of 64 is three.
    let mut args: Vec<String> = ["ike", "sa", "show", "--limit", "64"].map(String::from).to_vec();
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = text(&cli(&lab, &a));
        assert_eq!(out.lines().next(), Some(want.as_str()), "the counts first");
        let (ids, more) = page(&out);
        assert!(ids.len() <= 64, "{out}");
        seen.extend(ids);
        pages += 1;
        match more {
            Some(next) => args = next,
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, all, "every SA once, in order");
    // JSON: where the next page starts.
    let v = json(&lab, &["ike", "sa", "show", "--limit", "100"]);
    assert_eq!(v["next_after"].as_u64(), Some(all[99]));
    assert_eq!(v["summary"]["connecting"].as_u64(), Some(N as u64));
    let v = json(&lab, &["ike", "sa", "show", "--after", &all[99].to_string()]);
    assert!(v["next_after"].is_null());
    assert_eq!(v["sas"].as_array().map(Vec::len), Some(N - 100));
    // Filters.
    let (ids, _) = page(&text(&cli(&lab, &["ike", "sa", "show", "--remote", "10.0.2.2"])));
    assert_eq!(ids.len(), 100.min(N), "all from h2, one page");
    let (ids, more) = page(&text(&cli(&lab, &["ike", "sa", "show", "--peer", "nobody"])));
    assert!(ids.is_empty() && more.is_none());
    let out = cli(&lab, &["ike", "sa", "show", "--remote", "not-an-address"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an IP address"));
}
