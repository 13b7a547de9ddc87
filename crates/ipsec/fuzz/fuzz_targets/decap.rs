//! ESP decapsulation of arbitrary bytes, for every algorithm, with and
//! without ESN, through the anti-replay check and window update: errors,
//! never a panic; nothing but a packet this SA sealed decrypts.
//!
//! The first byte picks the algorithm and ESN; the next eight seed the
//! window; the rest is the ESP packet. Half of the runs seal the rest
//! first (so the decryption path past the ICV is reached) and then flip
//! a byte chosen by the input when the input asks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::Instant;
use tern_ipsec::{Cipher, Integ, Key, Lifetime, Sa, SaConfig};

const ALGS: [(Cipher, Integ); 8] = [
    (Cipher::Aes128Gcm, Integ::None),
    (Cipher::Aes256Gcm, Integ::None),
    (Cipher::Aes128Cbc, Integ::HmacSha1_96),
    (Cipher::Aes128Cbc, Integ::HmacSha256_128),
    (Cipher::Aes256Cbc, Integ::HmacSha512_256),
    (Cipher::Aes256Cbc, Integ::HmacSha1_96),
    (Cipher::Aes128Cbc, Integ::HmacSha512_256),
    (Cipher::Aes256Cbc, Integ::HmacSha256_128),
];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let Some((seed, body)) = rest.split_first_chunk::<8>() else { return };
    let (cipher, integ) = ALGS[usize::from(sel) % ALGS.len()];
    let cfg = SaConfig {
        id: 1,
        spi: 0x1234,
        cipher,
        integ,
        key: Key::new(vec![7; cipher.key_len()]),
        integ_key: Key::new(vec![9; integ.key_len()]),
        esn: sel & 0x10 != 0,
        replay_window: if sel & 0x20 != 0 { 0 } else { 64 },
        udp_encap: None,
        soft: Lifetime::default(),
        hard: Lifetime::default(),
    };
    let Ok(sa) = Sa::new(cfg, 1, Instant::now()) else { return };
    let _ = sa.replay_update(u64::from_be_bytes(*seed) >> (sel & 0x3f));
    let mut buf = body.to_vec();
    if sel & 0x40 != 0 {
        // Seal `body` as an inner packet, then maybe corrupt one byte.
        let h = sa.header_len();
        let mut sealed = vec![0u8; h + body.len() + sa.trailer_len(body.len())];
        sealed[h..h + body.len()].copy_from_slice(body);
        let seq = u64::from_be_bytes(*seed) | 1;
        let Ok(n) = sa.encrypt(&mut sealed, body.len(), 4, seq) else { return };
        sealed.truncate(n);
        if sel & 0x80 != 0 && !sealed.is_empty() {
            let i = usize::from(seed[0]) % sealed.len();
            sealed[i] ^= 0x5a;
        }
        buf = sealed;
    }
    let Ok((_spi, lo)) = tern_ipsec::parse_header(&buf) else { return };
    let Ok(seq) = sa.replay_check(lo) else { return };
    if let Ok(d) = sa.decrypt(&mut buf, seq) {
        // Only what this SA sealed, intact, verifies; and it is `body`.
        assert!(sel & 0x40 != 0 && sel & 0x80 == 0, "forged or corrupted ESP verified");
        assert_eq!(buf.get(d.inner), Some(body));
        let _ = sa.replay_update(seq);
    }
});
