//! What IKE_AUTH's public-key work costs, per algorithm: signing the
//! AUTH payload, checking the peer's chain (parse, issuer signatures,
//! validity, identity) and the whole verify (chain and AUTH signature).
//! Median of 5 runs, in CPU time of this thread (from
//! /proc/thread-self/schedstat, so that other processes sharing the CPUs
//! do not inflate it; wall time where that file is missing).
//!
//! `cargo run --release -p tern-ike --example ike_sign [iterations]`

use std::path::PathBuf;
use std::time::{Duration, Instant};
use tern_ike::auth::AuthError;
use tern_ike::auth::pubkey::Credentials;
use tern_ike::config::Identity;

const NOW: u64 = 1_800_000_000;

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

/// This thread's time on a CPU so far (Linux), or `None`.
fn cpu_time() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(s.split_whitespace().next()?.parse().ok()?))
}

/// Per-operation time of `f`, median of 5 runs of `n` operations.
fn time(n: u32, mut f: impl FnMut()) -> Duration {
    let runs = (0..5)
        .map(|_| {
            let (wall, cpu) = (Instant::now(), cpu_time());
            for _ in 0..n {
                f();
            }
            match (cpu, cpu_time()) {
                (Some(a), Some(b)) => b.saturating_sub(a) / n,
                _ => wall.elapsed() / n,
            }
        })
        .collect();
    median(runs)
}

fn main() -> Result<(), AuthError> {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/certs");
    let ca = [dir.join("ca.pem")];
    let load = |c: &str, k: &str| Credentials::load(&dir.join(c), &dir.join(k), &ca);
    let checker = load("moon.pem", "moon.key")?;
    let octets = vec![0x5a_u8; 400];
    println!("{:<28} {:>10} {:>14} {:>12} {:>8}", "algorithm (chain)", "sign us", "chain+id us", "verify us", "levels");
    for (name, cert, key, pss, levels) in [
        ("ECDSA P-256 SHA-256", "moon.pem", "moon.key", false, 2),
        ("ECDSA P-384 SHA-384", "sun-chain.pem", "sun.key", false, 3),
        ("RSA-2048 PKCS#1 SHA-256", "venus-chain.pem", "venus.key", false, 3),
        ("RSA-2048 PSS SHA-256", "mars-chain.pem", "mars.key", true, 3),
        ("Ed25519", "pluto-chain.pem", "pluto.key", false, 3),
    ] {
        let me = load(cert, key)?.with_rsa_pss(pss);
        let certs = me.certs();
        let id = Identity::Fqdn(format!("{}.tern.test", cert.split(['.', '-']).next().unwrap_or("")));
        let (method, auth) = me.sign(&octets)?;
        checker.verify(&certs, &id, NOW, method, &auth, &octets)?;
        let sign = time(n, || {
            std::hint::black_box(me.sign(&octets).ok());
        });
        // Auth method 2 is refused after the chain and identity checks and
        // before any AUTH signature: the chain's cost alone.
        let chain = time(n, || {
            let r = checker.verify(&certs, &id, NOW, 2, &auth, &octets);
            assert!(matches!(r, Err(AuthError::Method(2, 14))));
        });
        let verify = time(n, || {
            std::hint::black_box(checker.verify(&certs, &id, NOW, method, &auth, &octets).ok());
        });
        println!(
            "{name:<28} {:>10.1} {:>14.1} {:>12.1} {levels:>8}",
            sign.as_secs_f64() * 1e6,
            chain.as_secs_f64() * 1e6,
            verify.as_secs_f64() * 1e6
        );
    }
    Ok(())
}
