//! What IKE_AUTH's public-key work costs, per algorithm: signing the
//! AUTH payload, checking the peer's chain (parse, issuer signatures,
//! validity, identity) and the whole verify (chain and AUTH signature),
//! without and with the caches (issuer signatures and checked chains: a
//! peer seen before).
//! Median of 5 runs, in CPU time of this thread (from
//! /proc/thread-self/schedstat, so that other processes sharing the CPUs
//! do not inflate it; wall time where that file is missing).
//!
//! `cargo run --release -p tern-ike --example ike_sign`

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

/// Per-operation time of `f`, median of 5 runs, each at least 200 ms of
/// CPU: the scheduler accounts a thread's time by ticks, so shorter runs
/// would be mostly rounding.
fn time(mut f: impl FnMut()) -> Duration {
    const RUN: Duration = Duration::from_millis(200);
    let runs = (0..5)
        .map(|_| {
            let (wall, cpu) = (Instant::now(), cpu_time());
            let mut n = 0u32;
            loop {
                for _ in 0..16 {
                    f();
                }
                n += 16;
                let spent = match (cpu, cpu_time()) {
                    (Some(a), Some(b)) => b.saturating_sub(a),
                    _ => wall.elapsed(),
                };
                if spent >= RUN {
                    return spent / n;
                }
            }
        })
        .collect();
    median(runs)
}

fn main() -> Result<(), AuthError> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/certs");
    let ca = [dir.join("ca.pem")];
    let load = |c: &str, k: &str| Credentials::load(&dir.join(c), &dir.join(k), &ca);
    let cold = load("moon.pem", "moon.key")?.with_signature_cache(0);
    let warm = load("moon.pem", "moon.key")?;
    let octets = vec![0x5a_u8; 400];
    println!(
        "{:<26} {:>8} {:>8} {:>10} {:>10} {:>10} {:>7}",
        "algorithm", "levels", "sign us", "chain us", "verify us", "chain us", "verify us"
    );
    println!("{:<26} {:>8} {:>8} {:>21} {:>21}", "", "", "", "(uncached)", "(cached)");
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
        warm.verify(&certs, &id, NOW, method, &auth, &octets)?;
        let sign = time(|| {
            std::hint::black_box(me.sign(&octets).ok());
        });
        // Auth method 2 is refused after the chain and identity checks and
        // before any AUTH signature: the chain's cost alone.
        let chain = |c: &Credentials| {
            time(|| {
                let r = c.verify(&certs, &id, NOW, 2, &auth, &octets);
                assert!(matches!(r, Err(AuthError::Method(2, 14))));
            })
        };
        let verify = |c: &Credentials| {
            time(|| {
                std::hint::black_box(c.verify(&certs, &id, NOW, method, &auth, &octets).ok());
            })
        };
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "{name:<26} {levels:>8} {:>8.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            us(sign),
            us(chain(&cold)),
            us(verify(&cold)),
            us(chain(&warm)),
            us(verify(&warm))
        );
    }
    Ok(())
}
