//! The signature math IKE_AUTH does, in the two libraries tern-ike links:
//! ring (which `auth/` used for every signature) and aws-lc-rs (already
//! here for X25519 and ECDH). ECDSA P-256 with SHA-256 signing and
//! verifying (the key parsed per call, as `UnparsedPublicKey` does, and
//! parsed once), over 400 bytes (about what an IKE_AUTH signs). Per
//! operation, median of 5 runs of 200 ms of this thread's CPU.
//!
//! `cargo run --release -p tern-ike --example ike_sigmath`

use std::hint::black_box;
use std::time::Duration;

fn cpu() -> Duration {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    Duration::from_nanos(s.split_whitespace().next().and_then(|x| x.parse().ok()).unwrap_or(0))
}

fn us(mut f: impl FnMut()) -> f64 {
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = cpu();
            let mut n = 0u32;
            loop {
                for _ in 0..16 {
                    f();
                }
                n += 16;
                let spent = cpu() - t;
                if spent >= Duration::from_millis(200) {
                    return spent.as_secs_f64() * 1e6 / f64::from(n);
                }
            }
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[2]
}

fn main() {
    let msg = vec![0x5a_u8; 400];
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(&ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
        .expect("a P-256 key");
    let r = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
        pkcs8.as_ref(),
        &rng,
    )
    .expect("ring takes it");
    let a = aws_lc_rs::signature::EcdsaKeyPair::from_pkcs8(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
        pkcs8.as_ref(),
    )
    .expect("aws-lc-rs takes it");
    use aws_lc_rs::signature::KeyPair as _;
    use ring::signature::KeyPair as _;
    let public = r.public_key().as_ref().to_vec();
    assert_eq!(public, a.public_key().as_ref());
    let sig = r.sign(&rng, &msg).expect("signs").as_ref().to_vec();
    let arng = aws_lc_rs::rand::SystemRandom::new();

    let ring_sign = us(|| {
        black_box(r.sign(&rng, &msg).ok());
    });
    let aws_sign = us(|| {
        black_box(a.sign(&arng, &msg).ok());
    });
    let ring_verify = us(|| {
        let k = ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_ASN1, &public);
        assert!(k.verify(&msg, &sig).is_ok());
    });
    let aws_verify = us(|| {
        let k = aws_lc_rs::signature::UnparsedPublicKey::new(&aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1, &public);
        assert!(k.verify(&msg, &sig).is_ok());
    });
    let parsed = aws_lc_rs::signature::ParsedPublicKey::new(&aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1, &public)
        .expect("a valid point");
    let aws_parsed = us(|| {
        assert!(parsed.verify_sig(&msg, &sig).is_ok());
    });
    println!("ECDSA P-256 SHA-256, us per operation (median of 5):");
    println!("  sign                    ring {ring_sign:6.1}   aws-lc-rs {aws_sign:6.1}");
    println!("  verify                  ring {ring_verify:6.1}   aws-lc-rs {aws_verify:6.1}");
    println!("  verify, key parsed once                aws-lc-rs {aws_parsed:6.1}");
}
