//! What IKEv2's cryptography costs in tern-ike, one core:
//!
//!     taskset -c 0 cargo run --release -p tern-ike --example ike_crypto [-- SECONDS_PER_RUN]
//!
//! Per operation, median of five runs, in this thread's CPU time
//! (/proc/thread-self/schedstat, so other load on the machine counts
//! little): a Diffie-Hellman key pair generated and a shared secret
//! agreed with a peer's public value (what a responder does per
//! IKE_SA_INIT), prf+ of 200 bytes (the IKE SA's keys with SHA-256 and
//! AES-256-CBC take about that), the IKE SA's key derivation, and an
//! encrypted payload of 300 bytes sealed and opened.

use std::hint::black_box;
use std::time::{Duration, Instant};
use tern_ike::crypto::{DhPrivate, IkeKeys, SkCipher, prf_plus};
use tern_ike::proposal::{Chosen, DhGroup, Encr, Integ, Prf};

fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

/// Microseconds per call of `f`: the median of five runs of `secs` each.
fn micros(secs: f64, mut f: impl FnMut()) -> f64 {
    let mut runs = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let c0 = cpu_ns();
        let mut n = 0u64;
        while t.elapsed() < Duration::from_secs_f64(secs) {
            f();
            n += 1;
        }
        let s = match (c0, cpu_ns()) {
            (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
            _ => t.elapsed().as_secs_f64(),
        };
        runs.push(s * 1e6 / n as f64);
    }
    runs.sort_by(f64::total_cmp);
    runs[2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secs: f64 = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(0.5);
    println!("{:<44} {:>10}", "operation (one core, median of 5)", "us/op");
    for (name, g) in [
        ("X25519 generate + agree", DhGroup::Curve25519),
        ("ECP-256 generate + agree", DhGroup::Ecp256),
        ("ECP-384 generate + agree", DhGroup::Ecp384),
        ("MODP-2048 generate + agree", DhGroup::Modp2048),
        ("MODP-3072 generate + agree", DhGroup::Modp3072),
        ("MODP-4096 generate + agree", DhGroup::Modp4096),
    ] {
        let (_, peer) = DhPrivate::generate(g)?;
        let us = micros(secs, || {
            let (k, public) = DhPrivate::generate(g).expect("generate");
            black_box(public);
            black_box(k.agree(&peer).expect("agree"));
        });
        println!("{name:<44} {us:>10.1}");
    }
    let key = [7u8; 32];
    let seed = [9u8; 80];
    let us = micros(secs, || {
        black_box(prf_plus(Prf::HmacSha2_256, black_box(&key), &seed, 200));
    });
    println!("{:<44} {us:>10.2}", "prf+ HMAC-SHA-256, 200 bytes");
    let chosen = Chosen {
        encr: Encr::AesGcm16 { bits: 128 },
        prf: Some(Prf::HmacSha2_256),
        integ: None,
        dh: Some(DhGroup::Curve25519),
        esn: false,
    };
    let us = micros(secs, || {
        black_box(IkeKeys::derive(&chosen, &key, &seed[..32], &seed[32..64], 1, 2).expect("derive"));
    });
    println!("{:<44} {us:>10.2}", "IKE SA keys (aes128gcm16-prfsha256)");
    let plain = [0x5au8; 300];
    let aad = [1u8; 32];
    for (name, encr, integ, ek, ik) in [
        ("SK seal + open 300 B, AES-128-GCM-16", Encr::AesGcm16 { bits: 128 }, None, 20, 0),
        (
            "SK seal + open 300 B, AES-256-CBC/SHA-256",
            Encr::AesCbc { bits: 256 },
            Some(Integ::HmacSha2_256_128),
            32,
            32,
        ),
    ] {
        let c = SkCipher::new(encr, integ, &vec![3u8; ek], &vec![4u8; ik])?;
        let mut out = Vec::with_capacity(400);
        let us = micros(secs, || {
            out.clear();
            c.seal(&aad, &plain, &mut out).expect("seal");
            black_box(c.open(&aad, &out).expect("open"));
        });
        println!("{name:<44} {us:>10.2}");
    }
    Ok(())
}
