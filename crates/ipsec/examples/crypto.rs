//! Raw crypto speed of the libraries tern-ipsec uses, beside its ESP
//! encrypt and decrypt on the same buffers, one core:
//!
//!     cargo run --release -p tern-ipsec --example crypto [-- SECONDS_PER_CASE]
//!
//! Raw: ring's AES-128-GCM seal in place; RustCrypto's AES-128-CBC
//! encryption followed by HMAC-SHA-1 over the ciphertext (what ESP
//! computes). ESP: `Sa::encrypt` (header, IV, padding, trailer, cipher,
//! ICV) and `Sa::decrypt` (ICV, cipher, padding) with the replay check and
//! update. Gbps counts the payload (1418 or 64 bytes), Mpps the packets;
//! median of three runs, per second of this thread's CPU time (so a
//! loaded machine reads about as an idle one).

use std::hint::black_box;
use std::time::{Duration, Instant};
use tern_ipsec::*;

/// Nanoseconds this thread ran on a CPU (/proc/thread-self/schedstat):
/// the machine's other load does not count, as in `openssl speed`.
fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

fn rate(secs: f64, len: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut runs = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let c0 = cpu_ns();
        let mut n = 0u64;
        while t.elapsed() < Duration::from_secs_f64(secs) {
            for _ in 0..64 {
                f();
            }
            n += 64;
        }
        let s = match (c0, cpu_ns()) {
            (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
            _ => t.elapsed().as_secs_f64(),
        };
        runs.push(n as f64 / s);
    }
    runs.sort_by(f64::total_cmp);
    let pps = runs[1];
    (pps * len as f64 * 8.0 / 1e9, pps / 1e6)
}

fn sa(cipher: Cipher, integ: Integ) -> Sa {
    let cfg = SaConfig {
        id: 1,
        spi: 0x1000,
        cipher,
        integ,
        key: Key::new(vec![0x42; cipher.key_len()]),
        integ_key: Key::new(vec![0x24; integ.key_len()]),
        esn: false,
        replay_window: 1024,
        udp_encap: None,
        soft: Lifetime::default(),
        hard: Lifetime::default(),
    };
    Sa::new(cfg, 1, Instant::now()).expect("sa")
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0.5);
    println!("{:<44} {:>6} {:>9} {:>8}", "case", "bytes", "Gbps", "Mpps");
    let show = |name: &str, len: usize, (g, m): (f64, f64)| println!("{name:<44} {len:>6} {g:>9.2} {m:>8.3}");
    for len in [1418usize, 64] {
        // Raw ring AES-128-GCM.
        {
            use ring::aead;
            let k = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_128_GCM, &[7; 16]).expect("key"));
            let mut buf = vec![0u8; len];
            let mut ctr = 0u64;
            show(
                "raw ring AES-128-GCM seal",
                len,
                rate(secs, len, || {
                    ctr += 1;
                    let mut n = [0u8; 12];
                    n[4..].copy_from_slice(&ctr.to_be_bytes());
                    let tag = k.seal_in_place_separate_tag(
                        aead::Nonce::assume_unique_for_key(n),
                        aead::Aad::from([0u8; 8]),
                        &mut buf,
                    );
                    black_box(tag.ok());
                }),
            );
        }
        // Raw RustCrypto AES-128-CBC + HMAC-SHA-1.
        {
            use aes::cipher::{BlockEncryptMut, KeyIvInit, block_padding::NoPadding};
            use hmac::Mac;
            let mac = <hmac::Hmac<sha1::Sha1> as Mac>::new_from_slice(&[5; 20]).expect("key");
            let n = len.next_multiple_of(16);
            let mut buf = vec![0u8; n];
            show(
                "raw RustCrypto AES-128-CBC + HMAC-SHA1",
                len,
                rate(secs, len, || {
                    let c = cbc::Encryptor::<aes::Aes128>::new(&[3; 16].into(), &[1; 16].into());
                    let _ = c.encrypt_padded_mut::<NoPadding>(&mut buf, n);
                    let mut m = mac.clone();
                    m.update(&buf);
                    black_box(m.finalize().into_bytes());
                }),
            );
        }
        // Their two halves apart.
        {
            use aes::cipher::{BlockEncryptMut, KeyIvInit, block_padding::NoPadding};
            use hmac::Mac;
            let n = len.next_multiple_of(16);
            let mut buf = vec![0u8; n];
            show(
                "raw RustCrypto AES-128-CBC encrypt alone",
                len,
                rate(secs, len, || {
                    let c = cbc::Encryptor::<aes::Aes128>::new(&[3; 16].into(), &[1; 16].into());
                    black_box(c.encrypt_padded_mut::<NoPadding>(&mut buf, n).ok());
                }),
            );
            let mac = <hmac::Hmac<sha1::Sha1> as Mac>::new_from_slice(&[5; 20]).expect("key");
            show(
                "raw RustCrypto HMAC-SHA1 alone",
                len,
                rate(secs, len, || {
                    let mut m = mac.clone();
                    m.update(&buf);
                    black_box(m.finalize().into_bytes());
                }),
            );
        }
        if std::env::var_os("RAW_ONLY").is_some() {
            continue;
        }
        for (c, i, name) in [
            (Cipher::Aes128Gcm, Integ::None, "AES-128-GCM"),
            (Cipher::Aes128Cbc, Integ::HmacSha1_96, "AES-128-CBC + HMAC-SHA1-96"),
        ] {
            let tx = sa(c, i);
            let rx = sa(c, i);
            let h = tx.header_len();
            let total = h + len + tx.trailer_len(len);
            let mut buf = vec![0u8; total];
            let mut seq = 0u64;
            show(
                &format!("ESP encrypt {name}"),
                len,
                rate(secs, len, || {
                    seq += 1;
                    black_box(tx.encrypt(&mut buf, len, NH_IPV4, seq).ok());
                }),
            );
            // Decrypt: a ring of sealed packets, each decrypted from a
            // copy (the copy is counted; it is small beside the crypto).
            let sealed: Vec<Vec<u8>> = (1..=256u64)
                .map(|s| {
                    let mut b = vec![0u8; total];
                    let n = tx.encrypt(&mut b, len, NH_IPV4, s).expect("encrypt");
                    b.truncate(n);
                    b
                })
                .collect();
            let mut k = 0usize;
            let mut work = sealed[0].clone();
            show(
                &format!("ESP decrypt {name} (+ replay, + copy)"),
                len,
                rate(secs, len, || {
                    let src = &sealed[k % sealed.len()];
                    k += 1;
                    work.copy_from_slice(src);
                    let lo = u32::from_be_bytes([work[4], work[5], work[6], work[7]]);
                    // The window off for the bench's repeats: check + update
                    // still run.
                    let s = rx.replay_check(lo).unwrap_or(u64::from(lo));
                    let d = rx.decrypt(&mut work, s);
                    let _ = rx.replay_update(s);
                    black_box(d.ok());
                }),
            );
        }
    }
}
