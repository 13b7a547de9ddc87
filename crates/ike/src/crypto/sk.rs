//! The encrypted payload (SK, RFC 7296 3.14; AES-GCM per RFC 5282) and the
//! encrypted fragment payload (SKF, RFC 7383), seal and open. The framing
//! (generic payload header, fragment number/total) is `wire`'s; this is
//! the IV, the ciphertext, the padding and the ICV.

use super::CryptoError;
use super::algs;
use super::prf::hmac_parts;
use crate::proposal::{Encr, Integ};
use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit, block_padding::NoPadding};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use ring::aead;
use std::sync::atomic::{AtomicU64, Ordering};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// AES's block, CBC's IV.
const BLOCK: usize = 16;
/// AES-GCM's explicit IV in the payload (RFC 5282 3.1).
const GCM_IV: usize = 8;
/// ENCR_AES_GCM_16's tag.
const GCM_TAG: usize = 16;
/// The salt at the end of an AES-GCM key (RFC 5282 7.1).
const GCM_SALT: usize = 4;

/// One direction's encryption and integrity keys (SK_ei + SK_ai, or SK_er
/// + SK_ar; for GCM the key includes its 4-byte salt).
///
/// The keys are kept as bytes, zeroized when dropped; the AES key schedule
/// and HMAC state are built per message (ring's and RustCrypto's keyed
/// states would otherwise live as long as the SA, and ring does not wipe
/// them). An IKE SA sends a handful of messages: the cost is negligible.
pub struct SkCipher {
    encr: Encr,
    integ: Option<Integ>,
    enc_key: Zeroizing<Box<[u8]>>,
    integ_key: Zeroizing<Box<[u8]>>,
    /// AES-GCM's next explicit IV: a per-key counter (RFC 5282 3.1: the IV
    /// must never repeat under one key) from a random start, so that even
    /// two instances built from the same key by mistake would not collide
    /// in practice.
    gcm_iv: AtomicU64,
}

impl SkCipher {
    /// Errors if the pair is not usable (GCM with integrity, CBC without,
    /// a key size AES lacks) or a key has the wrong length.
    pub fn new(encr: Encr, integ: Option<Integ>, enc_key: &[u8], integ_key: &[u8]) -> Result<SkCipher, CryptoError> {
        algs::check_pair(encr, integ)?;
        if enc_key.len() != algs::encr_key_len(encr)? {
            return Err(CryptoError::Unsupported("an encryption key of the wrong length"));
        }
        if integ_key.len() != integ.map_or(0, algs::integ_key_len) {
            return Err(CryptoError::Unsupported("an integrity key of the wrong length"));
        }
        let mut start = [0u8; 8];
        if algs::is_aead(encr) {
            SystemRandom::new().fill(&mut start).map_err(|_| CryptoError::Random)?;
        }
        Ok(SkCipher {
            encr,
            integ,
            enc_key: Zeroizing::new(Box::from(enc_key)),
            integ_key: Zeroizing::new(Box::from(integ_key)),
            gcm_iv: AtomicU64::new(u64::from_be_bytes(start)),
        })
    }

    pub fn encr(&self) -> Encr {
        self.encr
    }

    pub fn integ(&self) -> Option<Integ> {
        self.integ
    }

    /// (encryption key, integrity key), for the key derivation's tests.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> (&[u8], &[u8]) {
        (&self.enc_key, &self.integ_key)
    }

    fn icv_len(&self) -> usize {
        match self.integ {
            Some(i) => algs::integ_icv_len(i),
            None => GCM_TAG,
        }
    }

    fn iv_len(&self) -> usize {
        if algs::is_aead(self.encr) { GCM_IV } else { BLOCK }
    }

    /// Padding for `plain_len` bytes: with the pad length octet, CBC fills
    /// the block; GCM pads nothing (RFC 5282 3: no alignment needed).
    fn pad_len(&self, plain_len: usize) -> usize {
        if algs::is_aead(self.encr) { 0 } else { (BLOCK - (plain_len + 1) % BLOCK) % BLOCK }
    }

    /// Bytes the encrypted payload adds around `plain_len` bytes of inner
    /// payloads (IV, padding, pad length, ICV), for fragmentation's sums.
    pub fn overhead(&self, plain_len: usize) -> usize {
        self.iv_len() + self.pad_len(plain_len) + 1 + self.icv_len()
    }

    /// Encrypts `plain` (the inner payloads) and appends IV | ciphertext
    /// (with padding and pad length) | ICV to `out`. `aad` is everything of
    /// the message before the encrypted payload's body: the IKE header and
    /// the SK/SKF generic payload header (and the SKF's fragment numbers),
    /// with the lengths already final (the caller computes them with
    /// [`SkCipher::overhead`]). For CBC the ICV covers `aad` and the body.
    pub fn seal(&self, aad: &[u8], plain: &[u8], out: &mut Vec<u8>) -> Result<(), CryptoError> {
        if algs::is_aead(self.encr) {
            let iv = self.gcm_iv.fetch_add(1, Ordering::Relaxed).to_be_bytes();
            self.seal_with_iv(aad, plain, &iv, out)
        } else {
            let mut iv = [0u8; BLOCK];
            SystemRandom::new().fill(&mut iv).map_err(|_| CryptoError::Random)?;
            self.seal_with_iv(aad, plain, &iv, out)
        }
    }

    /// [`SkCipher::seal`] with a given IV (8 bytes for GCM, 16 for CBC).
    fn seal_with_iv(&self, aad: &[u8], plain: &[u8], iv: &[u8], out: &mut Vec<u8>) -> Result<(), CryptoError> {
        let pad = self.pad_len(plain.len());
        let mut buf = Zeroizing::new(Vec::with_capacity(plain.len() + pad + 1 + GCM_TAG));
        buf.extend_from_slice(plain);
        buf.resize(plain.len() + pad, 0);
        // `pad` < 16.
        buf.push(pad as u8);
        self.seal_padded(aad, &mut buf, iv, out)
    }

    /// Encrypts `buf` (payloads | padding | pad length, aligned for CBC)
    /// and appends IV | ciphertext | ICV to `out`.
    fn seal_padded(&self, aad: &[u8], buf: &mut [u8], iv: &[u8], out: &mut Vec<u8>) -> Result<(), CryptoError> {
        if iv.len() != self.iv_len() {
            return Err(CryptoError::Malformed("IV of the wrong length"));
        }
        match self.integ {
            None => {
                let key = self.gcm_key()?;
                let tag = key
                    .seal_in_place_separate_tag(self.gcm_nonce(iv)?, aead::Aad::from(aad), buf)
                    .map_err(|_| CryptoError::Unsupported("AES-GCM refused to seal"))?;
                out.reserve(iv.len() + buf.len() + GCM_TAG);
                out.extend_from_slice(iv);
                out.extend_from_slice(buf);
                out.extend_from_slice(tag.as_ref());
            }
            Some(integ) => {
                cbc_encrypt(&self.enc_key, iv, buf)?;
                let start = out.len();
                out.reserve(iv.len() + buf.len() + algs::integ_icv_len(integ));
                out.extend_from_slice(iv);
                out.extend_from_slice(buf);
                let mac = hmac_parts(algs::integ_hmac(integ), &self.integ_key, &[aad, &out[start..]]);
                out.extend_from_slice(mac.get(..algs::integ_icv_len(integ)).unwrap_or_default());
            }
        }
        Ok(())
    }

    /// Checks and decrypts `body` (IV | ciphertext | ICV) given `aad` as
    /// above. Returns the inner payloads without padding.
    pub fn open(&self, aad: &[u8], body: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let (iv_len, icv_len) = (self.iv_len(), self.icv_len());
        // At least the pad length octet (a whole block for CBC).
        let min_ct = if algs::is_aead(self.encr) { 1 } else { BLOCK };
        if body.len() < iv_len + min_ct + icv_len {
            return Err(CryptoError::Malformed("shorter than IV, pad length and ICV"));
        }
        let (iv, rest) = body.split_at(iv_len);
        let ct_len = rest.len() - icv_len;
        let mut plain = match self.integ {
            None => {
                let key = self.gcm_key()?;
                let mut buf = rest.to_vec();
                let n = key
                    .open_in_place(self.gcm_nonce(iv)?, aead::Aad::from(aad), &mut buf)
                    .map_err(|_| CryptoError::Integrity)?
                    .len();
                buf.truncate(n);
                buf
            }
            Some(integ) => {
                if ct_len % BLOCK != 0 {
                    return Err(CryptoError::Malformed("ciphertext not a multiple of the block"));
                }
                let (signed, icv) = body.split_at(iv_len + ct_len);
                let mac = hmac_parts(algs::integ_hmac(integ), &self.integ_key, &[aad, signed]);
                let ok = mac.get(..icv_len).map(|m| m.ct_eq(icv).into()).unwrap_or(false);
                if !ok {
                    return Err(CryptoError::Integrity);
                }
                let mut buf = signed.get(iv_len..).unwrap_or_default().to_vec();
                cbc_decrypt(&self.enc_key, iv, &mut buf)?;
                buf
            }
        };
        let Some(&pad) = plain.last() else {
            return Err(CryptoError::Malformed("no pad length"));
        };
        let Some(keep) = plain.len().checked_sub(usize::from(pad) + 1) else {
            return Err(CryptoError::Malformed("pad length beyond the data"));
        };
        plain.truncate(keep);
        Ok(plain)
    }

    fn gcm_key(&self) -> Result<aead::LessSafeKey, CryptoError> {
        let alg = match self.encr {
            Encr::AesGcm16 { bits: 128 } => &aead::AES_128_GCM,
            Encr::AesGcm16 { bits: 256 } => &aead::AES_256_GCM,
            _ => return Err(CryptoError::Unsupported("not AES-GCM-128/256")),
        };
        let key = self.enc_key.get(..self.enc_key.len().saturating_sub(GCM_SALT)).unwrap_or_default();
        let key = aead::UnboundKey::new(alg, key).map_err(|_| CryptoError::Unsupported("AES-GCM key length"))?;
        Ok(aead::LessSafeKey::new(key))
    }

    /// salt | IV (RFC 5282 4).
    fn gcm_nonce(&self, iv: &[u8]) -> Result<aead::Nonce, CryptoError> {
        let salt = self.enc_key.get(self.enc_key.len().saturating_sub(GCM_SALT)..).unwrap_or_default();
        let mut n = [0u8; aead::NONCE_LEN];
        if salt.len() + iv.len() != n.len() {
            return Err(CryptoError::Malformed("IV of the wrong length"));
        }
        n[..GCM_SALT].copy_from_slice(salt);
        n[GCM_SALT..].copy_from_slice(iv);
        Ok(aead::Nonce::assume_unique_for_key(n))
    }
}

/// The algorithms only: keys are never printed.
impl std::fmt::Debug for SkCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkCipher").field("encr", &self.encr).field("integ", &self.integ).finish_non_exhaustive()
    }
}

/// AES-CBC in place over whole blocks (`buf` is aligned by the caller).
fn cbc_encrypt(key: &[u8], iv: &[u8], buf: &mut [u8]) -> Result<(), CryptoError> {
    let len = buf.len();
    let bad = |_| CryptoError::Unsupported("AES-CBC key or IV length");
    let r = match key.len() {
        16 => cbc::Encryptor::<aes::Aes128>::new_from_slices(key, iv)
            .map_err(bad)?
            .encrypt_padded_mut::<NoPadding>(buf, len)
            .map(|_| ()),
        24 => cbc::Encryptor::<aes::Aes192>::new_from_slices(key, iv)
            .map_err(bad)?
            .encrypt_padded_mut::<NoPadding>(buf, len)
            .map(|_| ()),
        32 => cbc::Encryptor::<aes::Aes256>::new_from_slices(key, iv)
            .map_err(bad)?
            .encrypt_padded_mut::<NoPadding>(buf, len)
            .map(|_| ()),
        _ => return Err(CryptoError::Unsupported("AES-CBC key length")),
    };
    r.map_err(|_| CryptoError::Malformed("not a multiple of the block"))
}

fn cbc_decrypt(key: &[u8], iv: &[u8], buf: &mut [u8]) -> Result<(), CryptoError> {
    let bad = |_| CryptoError::Unsupported("AES-CBC key or IV length");
    let r = match key.len() {
        16 => cbc::Decryptor::<aes::Aes128>::new_from_slices(key, iv)
            .map_err(bad)?
            .decrypt_padded_mut::<NoPadding>(buf)
            .map(|_| ()),
        24 => cbc::Decryptor::<aes::Aes192>::new_from_slices(key, iv)
            .map_err(bad)?
            .decrypt_padded_mut::<NoPadding>(buf)
            .map(|_| ()),
        32 => cbc::Decryptor::<aes::Aes256>::new_from_slices(key, iv)
            .map_err(bad)?
            .decrypt_padded_mut::<NoPadding>(buf)
            .map(|_| ()),
        _ => return Err(CryptoError::Unsupported("AES-CBC key length")),
    };
    r.map_err(|_| CryptoError::Malformed("ciphertext not a multiple of the block"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::unhex;

    pub(crate) const ENCRS: [Encr; 5] = [
        Encr::AesCbc { bits: 128 },
        Encr::AesCbc { bits: 192 },
        Encr::AesCbc { bits: 256 },
        Encr::AesGcm16 { bits: 128 },
        Encr::AesGcm16 { bits: 256 },
    ];
    pub(crate) const INTEGS: [Integ; 4] =
        [Integ::HmacSha1_96, Integ::HmacSha2_256_128, Integ::HmacSha2_384_192, Integ::HmacSha2_512_256];

    /// Every usable pair, with distinct made-up keys.
    fn all_ciphers() -> Vec<SkCipher> {
        let mut v = Vec::new();
        for encr in ENCRS {
            let integs: Vec<Option<Integ>> =
                if algs::is_aead(encr) { vec![None] } else { INTEGS.iter().copied().map(Some).collect() };
            for integ in integs {
                let ek: Vec<u8> = (0..algs::encr_key_len(encr).expect("len") as u8).collect();
                let ik: Vec<u8> = (100..100 + integ.map_or(0, algs::integ_key_len) as u8).collect();
                v.push(SkCipher::new(encr, integ, &ek, &ik).expect("new"));
            }
        }
        v
    }

    #[test]
    fn round_trip_every_pair_and_length() {
        let aad = b"IKE header and SK payload header";
        for c in all_ciphers() {
            for len in (0..=48).chain([255, 300, 1500]) {
                let plain: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
                let mut out = b"prefix".to_vec();
                c.seal(aad, &plain, &mut out).expect("seal");
                assert_eq!(&out[..6], b"prefix", "seal appends");
                let body = &out[6..];
                assert_eq!(body.len(), len + c.overhead(len), "{:?} {:?} {len}", c.encr, c.integ);
                if !algs::is_aead(c.encr) {
                    assert_eq!((body.len() - BLOCK - c.icv_len()) % BLOCK, 0);
                }
                assert_eq!(c.open(aad, body).expect("open"), plain, "{:?} {:?} {len}", c.encr, c.integ);
            }
        }
    }

    #[test]
    fn a_flipped_bit_anywhere_fails_integrity() {
        let aad = b"hdr-aad";
        let plain = b"inner payloads, 37 bytes of them....";
        for c in all_ciphers() {
            let mut body = Vec::new();
            c.seal(aad, plain, &mut body).expect("seal");
            for bit in 0..body.len() * 8 {
                let mut b = body.clone();
                b[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(c.open(aad, &b), Err(CryptoError::Integrity), "{:?} {:?} bit {bit}", c.encr, c.integ);
            }
            for bit in 0..aad.len() * 8 {
                let mut a = aad.to_vec();
                a[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(c.open(&a, &body), Err(CryptoError::Integrity));
            }
            assert_eq!(c.open(b"", &body), Err(CryptoError::Integrity));
        }
    }

    #[test]
    fn truncations_and_extensions_fail() {
        let aad = b"hdr";
        for c in all_ciphers() {
            let mut body = Vec::new();
            c.seal(aad, b"0123456789abcdef0123", &mut body).expect("seal");
            for len in 0..body.len() {
                assert!(c.open(aad, &body[..len]).is_err(), "{:?} {:?} len {len}", c.encr, c.integ);
                // The tail alone (IV missing) too.
                assert!(c.open(aad, &body[body.len() - len..]).is_err());
            }
            for extra in [1, 16] {
                let mut b = body.clone();
                b.extend(std::iter::repeat_n(0, extra));
                assert!(c.open(aad, &b).is_err());
            }
        }
    }

    #[test]
    fn keys_of_another_direction_fail() {
        let a = SkCipher::new(Encr::AesGcm16 { bits: 128 }, None, &[1; 20], &[]).expect("new");
        let b = SkCipher::new(Encr::AesGcm16 { bits: 128 }, None, &[2; 20], &[]).expect("new");
        let mut body = Vec::new();
        a.seal(b"x", b"hello", &mut body).expect("seal");
        assert_eq!(b.open(b"x", &body), Err(CryptoError::Integrity));
        let a =
            SkCipher::new(Encr::AesCbc { bits: 128 }, Some(Integ::HmacSha2_256_128), &[1; 16], &[1; 32]).expect("new");
        let b =
            SkCipher::new(Encr::AesCbc { bits: 128 }, Some(Integ::HmacSha2_256_128), &[1; 16], &[2; 32]).expect("new");
        body.clear();
        a.seal(b"x", b"hello", &mut body).expect("seal");
        assert_eq!(b.open(b"x", &body), Err(CryptoError::Integrity));
    }

    #[test]
    fn ivs_differ_between_messages() {
        for c in all_ciphers() {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            c.seal(b"", b"same", &mut a).expect("seal");
            c.seal(b"", b"same", &mut b).expect("seal");
            assert_ne!(a[..c.iv_len()], b[..c.iv_len()]);
            assert_ne!(a, b);
        }
    }

    /// A message whose ICV is right but whose padding is not: a pad length
    /// beyond the data is an error, not a panic.
    #[test]
    fn pad_length_beyond_the_data_is_malformed() {
        for c in all_ciphers() {
            let aligned = if algs::is_aead(c.encr) { 5 } else { 16 };
            for pad in [aligned as u8, 200, 255] {
                let mut buf = vec![0u8; aligned];
                *buf.last_mut().expect("non-empty") = pad;
                let iv = vec![9u8; c.iv_len()];
                let mut body = Vec::new();
                c.seal_padded(b"a", &mut buf, &iv, &mut body).expect("seal");
                assert_eq!(c.open(b"a", &body), Err(CryptoError::Malformed("pad length beyond the data")));
            }
            // A pad length that is exactly the rest is fine: empty payloads.
            let mut buf = vec![0u8; aligned];
            *buf.last_mut().expect("non-empty") = aligned as u8 - 1;
            let mut body = Vec::new();
            c.seal_padded(b"a", &mut buf, &vec![9u8; c.iv_len()], &mut body).expect("seal");
            assert_eq!(c.open(b"a", &body), Ok(Vec::new()));
        }
    }

    #[test]
    fn cbc_not_block_aligned_is_malformed() {
        let c =
            SkCipher::new(Encr::AesCbc { bits: 128 }, Some(Integ::HmacSha2_256_128), &[1; 16], &[1; 32]).expect("new");
        // IV + 17 bytes + ICV.
        assert_eq!(
            c.open(b"", &[0u8; 16 + 17 + 16]),
            Err(CryptoError::Malformed("ciphertext not a multiple of the block"))
        );
        assert_eq!(
            c.open(b"", &[0u8; 16 + 16 + 15]),
            Err(CryptoError::Malformed("shorter than IV, pad length and ICV"))
        );
        let g = SkCipher::new(Encr::AesGcm16 { bits: 256 }, None, &[1; 36], &[]).expect("new");
        assert!(matches!(g.open(b"", &[0u8; 8 + 16]), Err(CryptoError::Malformed(_))));
    }

    #[test]
    fn unusable_keys_and_pairs_refused() {
        let gcm = Encr::AesGcm16 { bits: 128 };
        let cbc = Encr::AesCbc { bits: 256 };
        let sha = Some(Integ::HmacSha2_256_128);
        for (encr, integ, ek, ik) in [
            (gcm, None, 16, 0), // the salt missing
            (gcm, None, 21, 0),
            (gcm, sha, 20, 32), // GCM with integrity
            (cbc, None, 32, 0), // CBC without
            (cbc, sha, 16, 32), // a 128-bit key for AES-256
            (cbc, sha, 32, 20), // a SHA-1-sized key for SHA-256
            (Encr::AesGcm16 { bits: 192 }, None, 28, 0),
            (Encr::AesCbc { bits: 100 }, sha, 13, 32),
        ] {
            assert!(
                matches!(SkCipher::new(encr, integ, &vec![0; ek], &vec![0; ik]), Err(CryptoError::Unsupported(_))),
                "{encr:?} {integ:?} {ek} {ik}"
            );
        }
    }

    proptest::proptest! {
        /// Arbitrary bodies never panic and never pass (the ICV or tag of
        /// random bytes matches with negligible probability).
        #[test]
        fn arbitrary_bodies_are_refused(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
                                        aad in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            for c in all_ciphers() {
                proptest::prop_assert!(c.open(&aad, &body).is_err());
            }
        }
    }

    /// Known answers computed independently, once, with Python's
    /// `cryptography` (38.0.4, /usr/bin/python3):
    ///
    /// ```text
    /// aad = b"IKE-HDR+SK-HDR"; plain = b"inner payloads!"  # 15 bytes
    /// # AES-128-CBC + HMAC-SHA-256-128, key 00..0f, integ key 20..3f, IV a0..af:
    /// # padded = plain + b"\x00" (pad length 0: 15 + 1 = 16)
    /// ct = Cipher(AES(k), CBC(iv)).encryptor().update(padded)
    /// icv = hmac.new(ik, aad + iv + ct, "sha256").digest()[:16]; iv + ct + icv
    /// # AES-256-GCM-16, key 00..1f | salt c0 c1 c2 c3, IV 01..08:
    /// # plaintext plain + b"\x00", nonce salt + iv
    /// iv + AESGCM(k).encrypt(salt + iv, plain + b"\x00", aad)
    /// ```
    #[test]
    fn known_answers() {
        let aad = b"IKE-HDR+SK-HDR";
        let plain = b"inner payloads!";
        let ek: Vec<u8> = (0..16).collect();
        let ik: Vec<u8> = (0x20..0x40).collect();
        let iv: Vec<u8> = (0xa0..0xb0).collect();
        let c = SkCipher::new(Encr::AesCbc { bits: 128 }, Some(Integ::HmacSha2_256_128), &ek, &ik).expect("new");
        let mut out = Vec::new();
        c.seal_with_iv(aad, plain, &iv, &mut out).expect("seal");
        assert_eq!(
            out,
            unhex("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf2f97858a6241484f168a9ecfcfb209c1584c37b90e30839f8ed3b4c6af52fdc4")
        );
        let mut ek: Vec<u8> = (0..32).collect();
        ek.extend_from_slice(&[0xc0, 0xc1, 0xc2, 0xc3]);
        let iv: Vec<u8> = (1..9).collect();
        let g = SkCipher::new(Encr::AesGcm16 { bits: 256 }, None, &ek, &[]).expect("new");
        out.clear();
        g.seal_with_iv(aad, plain, &iv, &mut out).expect("seal");
        assert_eq!(out, unhex("0102030405060708e11d8da62ce1e047190bb2af736964aca733b8405af329d751522e607a724640"));
        assert_eq!(g.open(aad, &out).expect("open"), plain);
    }
}
