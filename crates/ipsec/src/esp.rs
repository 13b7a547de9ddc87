//! ESP encapsulation and decapsulation in tunnel mode (RFC 4303), with
//! AES-GCM (RFC 4106) or AES-CBC (RFC 3602) + HMAC (RFC 2404, RFC 4868),
//! 32-bit or extended sequence numbers, in place in the packet's buffer.
//!
//! ```text
//!  0       4       8          8+iv                      +pad +2        +icv
//!  | SPI   | seq   | IV       | inner packet | 1 2 3 .. | pl | nh | ICV |
//!                             |<------------ encrypted --------->|
//!  |<-------------- authenticated (CBC + HMAC; GCM: SPI+seq as AAD) ->|
//! ```
//!
//! * GCM: the 8-byte explicit IV is the 64-bit sequence number (unique
//!   per key, RFC 4106 section 3.1); nonce = salt || IV; AAD = SPI ||
//!   seq (8 bytes) or SPI || seq high || seq low (12, ESN, RFC 4106
//!   section 5). The ICV is GCM's 16-byte tag.
//! * CBC: the 16-byte IV is the cipher applied, under the SA's key, to a
//!   block holding the 64-bit sequence number (unique per key), which
//!   NIST SP 800-38A Appendix C approves for unpredictable IVs: no random
//!   source per packet. The HMAC covers SPI, sequence number, IV and
//!   ciphertext, then the high 32 bits of the sequence number with ESN
//!   (RFC 4303 section 3.3.2.1); the ICV is its truncation, checked in
//!   constant time BEFORE decryption.
//! * Padding: 1, 2, 3, ... (RFC 4303 section 2.4) to the cipher's
//!   alignment (4 bytes GCM, 16 CBC); a receiver checks it.

use crate::config::{Cipher, Integ, Key, SaError};
use crate::sa::Sa;
use aes::cipher::{BlockEncrypt, BlockEncryptMut, InnerIvInit, KeyInit, block_padding::NoPadding};
use hmac::{Hmac, Mac};
use ring::aead;
use std::ops::Range;

/// SPI + sequence number.
pub const HEADER_LEN: usize = 8;

/// Next header values of tunnel mode.
pub const NH_IPV4: u8 = 4;
pub const NH_IPV6: u8 = 41;
/// A dummy packet (traffic flow confidentiality, RFC 4303 section 2.6):
/// decrypted, then dropped by the receiver.
pub const NH_NONE: u8 = 59;

/// Why ESP encapsulation or decapsulation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EspError {
    #[error("ESP packet shorter than header, IV, trailer and ICV")]
    Truncated,
    #[error("ciphertext not a multiple of the cipher's block")]
    BadLength,
    #[error("ICV does not verify")]
    Integrity,
    #[error("pad length or padding bytes wrong")]
    BadPadding,
    #[error("no room after the packet for padding and ICV")]
    NoTailroom,
    #[error("inner packet too big for ESP")]
    TooBig,
    #[error("SPI 0 (reserved; in UDP it marks IKE)")]
    ZeroSpi,
    /// Never seen: the keys are checked when the SA is made.
    #[error("the SA's keys could not be expanded")]
    Keys,
}

/// A decapsulated packet: where the inner packet lies in the buffer and
/// what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decap {
    /// The inner packet's bytes in the buffer given to [`Sa::decrypt`].
    pub inner: Range<usize>,
    /// The next header (4 IPv4, 41 IPv6, 59 a dummy packet).
    pub next_header: u8,
    /// The full sequence number.
    pub seq: u64,
}

/// SPI and the low 32 bits of the sequence number of an ESP packet.
#[inline]
pub fn parse_header(esp: &[u8]) -> Result<(u32, u32), EspError> {
    let h: &[u8; 8] = esp.first_chunk().ok_or(EspError::Truncated)?;
    let [s0, s1, s2, s3, q0, q1, q2, q3] = *h;
    let spi = u32::from_be_bytes([s0, s1, s2, s3]);
    if spi == 0 {
        return Err(EspError::ZeroSpi);
    }
    Ok((spi, u32::from_be_bytes([q0, q1, q2, q3])))
}

// Boxed in `Crypto`; one of the two per SA.
#[allow(clippy::large_enum_variant)]
pub(crate) enum CbcKey {
    A128(aes::Aes128),
    A256(aes::Aes256),
}

pub(crate) enum HmacKey {
    Sha1(Hmac<sha1::Sha1>),
    Sha256(Hmac<sha2::Sha256>),
    Sha512(Hmac<sha2::Sha512>),
}

/// An SA's expanded keys (built on its first packet: see `sa`; the SA
/// boxes them, GCM's inline in the box, CBC's larger schedules boxed).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Crypto {
    Gcm {
        key: aead::LessSafeKey,
        salt: [u8; 4],
    },
    Cbc {
        key: Box<CbcKey>,
        mac: Box<HmacKey>,
    },
    /// The build failed (cannot happen: `check` passed): every packet is
    /// refused.
    Unusable,
}

impl Crypto {
    /// Hints the CPU to fetch the expanded keys (ring's AES-GCM key with
    /// its GHASH table is about nine lines; CBC's schedules and HMAC
    /// states are boxed apart).
    #[inline]
    pub(crate) fn prefetch(&self) {
        match self {
            Crypto::Gcm { .. } => tern_intrin::prefetch_lines(self, 16),
            Crypto::Cbc { key, mac } => {
                tern_intrin::prefetch_lines(&**key, 8);
                tern_intrin::prefetch_lines(&**mac, 8);
            }
            Crypto::Unusable => {}
        }
    }

    /// What `new` would refuse, without expanding anything.
    pub(crate) fn check(cipher: Cipher, integ: Integ, key: &Key, integ_key: &Key) -> Result<(), SaError> {
        let bad = |what: &'static str, expected: usize, got: usize| SaError::KeyLength { what, expected, got };
        if key.len() != cipher.key_len() {
            return Err(bad(cipher.name(), cipher.key_len(), key.len()));
        }
        if !cipher.is_aead() {
            if integ == Integ::None {
                return Err(SaError::CbcWithoutInteg(cipher));
            }
            if integ_key.len() != integ.key_len() {
                return Err(bad(integ.name(), integ.key_len(), integ_key.len()));
            }
        }
        Ok(())
    }

    pub(crate) fn new(cipher: Cipher, integ: Integ, key: &[u8], integ_key: &[u8]) -> Result<Crypto, SaError> {
        let bad = |what: &'static str, expected: usize, got: usize| SaError::KeyLength { what, expected, got };
        let k = key;
        if k.len() != cipher.key_len() {
            return Err(bad(cipher.name(), cipher.key_len(), k.len()));
        }
        Ok(match cipher {
            Cipher::Aes128Gcm | Cipher::Aes256Gcm => {
                let alg = if cipher == Cipher::Aes128Gcm { &aead::AES_128_GCM } else { &aead::AES_256_GCM };
                let (ck, salt) = k.split_at(k.len() - 4);
                let unbound =
                    aead::UnboundKey::new(alg, ck).map_err(|_| bad(cipher.name(), cipher.key_len(), k.len()))?;
                let mut s = [0u8; 4];
                s.copy_from_slice(salt);
                Crypto::Gcm { key: aead::LessSafeKey::new(unbound), salt: s }
            }
            Cipher::Aes128Cbc | Cipher::Aes256Cbc => {
                let key = match cipher {
                    Cipher::Aes128Cbc => {
                        CbcKey::A128(aes::Aes128::new_from_slice(k).map_err(|_| bad(cipher.name(), 16, k.len()))?)
                    }
                    _ => CbcKey::A256(aes::Aes256::new_from_slice(k).map_err(|_| bad(cipher.name(), 32, k.len()))?),
                };
                let ik = integ_key;
                let e = |_| bad(integ.name(), integ.key_len(), ik.len());
                if ik.len() != integ.key_len() {
                    return Err(bad(integ.name(), integ.key_len(), ik.len()));
                }
                let mac = match integ {
                    Integ::HmacSha1_96 => HmacKey::Sha1(<Hmac<_> as Mac>::new_from_slice(ik).map_err(e)?),
                    Integ::HmacSha256_128 => HmacKey::Sha256(<Hmac<_> as Mac>::new_from_slice(ik).map_err(e)?),
                    Integ::HmacSha512_256 => HmacKey::Sha512(<Hmac<_> as Mac>::new_from_slice(ik).map_err(e)?),
                    Integ::None => return Err(SaError::CbcWithoutInteg(cipher)),
                };
                Crypto::Cbc { key: Box::new(key), mac: Box::new(mac) }
            }
        })
    }
}

/// The truncated ICV of `integ` under `key` over `data`, computed by the
/// code ESP uses (for known-answer tests and traffic generators; any key
/// length HMAC accepts).
pub fn icv(integ: Integ, key: &[u8], data: &[u8]) -> Result<Vec<u8>, SaError> {
    let e = |_| SaError::KeyLength { what: integ.name(), expected: integ.key_len(), got: key.len() };
    let mac = match integ {
        Integ::HmacSha1_96 => HmacKey::Sha1(<Hmac<_> as Mac>::new_from_slice(key).map_err(e)?),
        Integ::HmacSha256_128 => HmacKey::Sha256(<Hmac<_> as Mac>::new_from_slice(key).map_err(e)?),
        Integ::HmacSha512_256 => HmacKey::Sha512(<Hmac<_> as Mac>::new_from_slice(key).map_err(e)?),
        Integ::None => return Ok(Vec::new()),
    };
    let mut out = vec![0u8; integ.icv_len()];
    hmac_into(&mac, &[data], &mut out);
    Ok(out)
}

/// HMAC over `parts`, truncated into `out` (its length).
fn hmac_into(mac: &HmacKey, parts: &[&[u8]], out: &mut [u8]) {
    fn run<M: Mac + Clone>(m: &M, parts: &[&[u8]], out: &mut [u8]) {
        let mut m = m.clone();
        for p in parts {
            m.update(p);
        }
        let tag = m.finalize().into_bytes();
        for (o, t) in out.iter_mut().zip(tag.iter()) {
            *o = *t;
        }
    }
    match mac {
        HmacKey::Sha1(m) => run(m, parts, out),
        HmacKey::Sha256(m) => run(m, parts, out),
        HmacKey::Sha512(m) => run(m, parts, out),
    }
}

/// Constant-time check of the truncated HMAC over `parts` against `icv`.
fn hmac_verify(mac: &HmacKey, parts: &[&[u8]], icv: &[u8]) -> bool {
    fn run<M: Mac + Clone>(m: &M, parts: &[&[u8]], icv: &[u8]) -> bool {
        let mut m = m.clone();
        for p in parts {
            m.update(p);
        }
        m.verify_truncated_left(icv).is_ok()
    }
    match mac {
        HmacKey::Sha1(m) => run(m, parts, icv),
        HmacKey::Sha256(m) => run(m, parts, icv),
        HmacKey::Sha512(m) => run(m, parts, icv),
    }
}

/// The CBC IV of sequence number `seq`: E_K(seq || "ESP-IV\0\0").
fn cbc_iv(key: &CbcKey, seq: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&seq.to_be_bytes());
    b[8..].copy_from_slice(b"ESP-IV\0\0");
    let mut block = aes::Block::from(b);
    match key {
        CbcKey::A128(k) => k.encrypt_block(&mut block),
        CbcKey::A256(k) => k.encrypt_block(&mut block),
    }
    block.into()
}

fn cbc_encrypt(key: &CbcKey, iv: &[u8; 16], buf: &mut [u8]) -> Result<(), EspError> {
    let n = buf.len();
    let r =
        match key {
            CbcKey::A128(k) => cbc::Encryptor::<aes::Aes128>::inner_iv_init(k.clone(), iv.into())
                .encrypt_padded_mut::<NoPadding>(buf, n),
            CbcKey::A256(k) => cbc::Encryptor::<aes::Aes256>::inner_iv_init(k.clone(), iv.into())
                .encrypt_padded_mut::<NoPadding>(buf, n),
        };
    r.map(|_| ()).map_err(|_| EspError::BadLength)
}

fn cbc_decrypt(key: &CbcKey, iv: &[u8; 16], buf: &mut [u8]) -> Result<(), EspError> {
    use aes::cipher::BlockDecryptMut;
    let r = match key {
        CbcKey::A128(k) => {
            cbc::Decryptor::<aes::Aes128>::inner_iv_init(k.clone(), iv.into()).decrypt_padded_mut::<NoPadding>(buf)
        }
        CbcKey::A256(k) => {
            cbc::Decryptor::<aes::Aes256>::inner_iv_init(k.clone(), iv.into()).decrypt_padded_mut::<NoPadding>(buf)
        }
    };
    r.map(|_| ()).map_err(|_| EspError::BadLength)
}

impl Sa {
    /// Encapsulates in place. `buf` holds [`Sa::header_len`] bytes of room,
    /// then the inner packet (`inner_len` bytes), then at least
    /// [`Sa::trailer_len`] bytes of room; `seq` is a number
    /// [`Sa::reserve_seq`] gave. Writes SPI, sequence number, IV, padding,
    /// trailer and ICV, encrypts, and returns the ESP packet's length
    /// (from `buf[0]`).
    pub fn encrypt(&self, buf: &mut [u8], inner_len: usize, next_header: u8, seq: u64) -> Result<usize, EspError> {
        let h = self.header_len();
        let padded = (inner_len + 2).next_multiple_of(self.cipher.align());
        let pad = padded - inner_len - 2;
        // The trailer: 1, 2, 3... then pad length and next header.
        let trailer = buf.get_mut(h + inner_len..h + padded).ok_or(EspError::NoTailroom)?;
        for (i, b) in trailer.iter_mut().enumerate() {
            *b = (i + 1) as u8;
        }
        if let [.., pl, nh] = trailer {
            *pl = pad as u8;
            *nh = next_header;
        }
        self.encrypt_raw(buf, padded, seq)
    }

    /// Encrypts a body the caller framed itself: `buf` holds
    /// [`Sa::header_len`] bytes of room, then `body_len` bytes (inner
    /// packet, padding, pad length, next header: aligned to the cipher,
    /// whatever they say), then room for the ICV. For traffic generators
    /// and tests of malformed trailers; [`Sa::encrypt`] is this after
    /// writing a correct trailer.
    pub fn encrypt_raw(&self, buf: &mut [u8], body_len: usize, seq: u64) -> Result<usize, EspError> {
        let h = self.header_len();
        if !body_len.is_multiple_of(self.cipher.align()) {
            return Err(EspError::BadLength);
        }
        let icv = self.icv_len();
        let total = h + body_len + icv;
        if total > buf.len() {
            return Err(EspError::NoTailroom);
        }
        if total > usize::from(u16::MAX) {
            return Err(EspError::TooBig);
        }
        let seq_lo = (seq as u32).to_be_bytes();
        let seq_hi = ((seq >> 32) as u32).to_be_bytes();
        let (head, rest) = buf.split_at_mut(h);
        let (body, tail) = rest.split_at_mut(body_len);
        let spi = self.spi.to_be_bytes();
        head.get_mut(..4).ok_or(EspError::Truncated)?.copy_from_slice(&spi);
        head.get_mut(4..8).ok_or(EspError::Truncated)?.copy_from_slice(&seq_lo);
        let tag_out = tail.get_mut(..icv).ok_or(EspError::NoTailroom)?;
        match self.crypto().ok_or(EspError::Keys)? {
            Crypto::Gcm { key, salt } => {
                let iv = seq.to_be_bytes();
                head.get_mut(8..16).ok_or(EspError::Truncated)?.copy_from_slice(&iv);
                let nonce = gcm_nonce(salt, &iv);
                let tag = if self.esn {
                    let aad = aad12(&spi, &seq_hi, &seq_lo);
                    key.seal_in_place_separate_tag(nonce, aead::Aad::from(aad), body)
                } else {
                    let aad = aad8(&spi, &seq_lo);
                    key.seal_in_place_separate_tag(nonce, aead::Aad::from(aad), body)
                };
                let tag = tag.map_err(|_| EspError::TooBig)?;
                tag_out.copy_from_slice(tag.as_ref());
            }
            Crypto::Cbc { key, mac } => {
                let iv = cbc_iv(key, seq);
                head.get_mut(8..24).ok_or(EspError::Truncated)?.copy_from_slice(&iv);
                cbc_encrypt(key, &iv, body)?;
                let hi: &[u8] = if self.esn { &seq_hi } else { &[] };
                hmac_into(mac, &[head, body, hi], tag_out);
            }
            Crypto::Unusable => return Err(EspError::Keys),
        }
        Ok(total)
    }

    /// Decapsulates in place an ESP packet (`esp`: from the SPI to the end
    /// of the ICV) whose full sequence number is `seq` (from
    /// [`Sa::replay_check`]). Verifies the ICV, decrypts, checks the
    /// padding; the caller then updates the replay window.
    pub fn decrypt(&self, esp: &mut [u8], seq: u64) -> Result<Decap, EspError> {
        let h = self.header_len();
        let icv = self.icv_len();
        let align = self.cipher.align();
        let len = esp.len();
        if len < h + icv + align {
            return Err(EspError::Truncated);
        }
        let ct_len = len - h - icv;
        let seq_hi = ((seq >> 32) as u32).to_be_bytes();
        match self.crypto().ok_or(EspError::Keys)? {
            Crypto::Gcm { key, salt } => {
                let (head, rest) = esp.split_at_mut(h);
                let (spi, seq_lo, iv) = match head.first_chunk::<16>() {
                    Some(b) => (sub4(b, 0), sub4(b, 4), sub8(b, 8)),
                    None => return Err(EspError::Truncated),
                };
                let nonce = gcm_nonce(salt, &iv);
                let r = if self.esn {
                    key.open_in_place(nonce, aead::Aad::from(aad12(&spi, &seq_hi, &seq_lo)), rest)
                } else {
                    key.open_in_place(nonce, aead::Aad::from(aad8(&spi, &seq_lo)), rest)
                };
                r.map_err(|_| EspError::Integrity)?;
            }
            Crypto::Cbc { key, mac } => {
                if !ct_len.is_multiple_of(16) {
                    return Err(EspError::BadLength);
                }
                let (authed, tag) = esp.split_at_mut(len - icv);
                let hi: &[u8] = if self.esn { &seq_hi } else { &[] };
                if !hmac_verify(mac, &[authed, hi], tag) {
                    return Err(EspError::Integrity);
                }
                let (head, body) = authed.split_at_mut(h);
                let iv: [u8; 16] = match head.get(8..24).and_then(|s| <[u8; 16]>::try_from(s).ok()) {
                    Some(iv) => iv,
                    None => return Err(EspError::Truncated),
                };
                cbc_decrypt(key, &iv, body)?;
            }
            Crypto::Unusable => return Err(EspError::Keys),
        }
        let body = esp.get(h..h + ct_len).ok_or(EspError::Truncated)?;
        let [.., pl, nh] = *body else { return Err(EspError::Truncated) };
        let pad = usize::from(pl);
        if pad + 2 > ct_len {
            return Err(EspError::BadPadding);
        }
        let inner_len = ct_len - pad - 2;
        let padding = body.get(inner_len..inner_len + pad).ok_or(EspError::BadPadding)?;
        if padding.iter().enumerate().any(|(i, &b)| usize::from(b) != i + 1) {
            return Err(EspError::BadPadding);
        }
        Ok(Decap { inner: h..h + inner_len, next_header: nh, seq })
    }
}

fn sub4(b: &[u8; 16], at: usize) -> [u8; 4] {
    let mut o = [0u8; 4];
    for (i, x) in o.iter_mut().enumerate() {
        *x = b.get(at + i).copied().unwrap_or(0);
    }
    o
}

fn sub8(b: &[u8; 16], at: usize) -> [u8; 8] {
    let mut o = [0u8; 8];
    for (i, x) in o.iter_mut().enumerate() {
        *x = b.get(at + i).copied().unwrap_or(0);
    }
    o
}

fn gcm_nonce(salt: &[u8; 4], iv: &[u8; 8]) -> aead::Nonce {
    let [s0, s1, s2, s3] = *salt;
    let [i0, i1, i2, i3, i4, i5, i6, i7] = *iv;
    aead::Nonce::assume_unique_for_key([s0, s1, s2, s3, i0, i1, i2, i3, i4, i5, i6, i7])
}

fn aad8(spi: &[u8; 4], lo: &[u8; 4]) -> [u8; 8] {
    let ([a, b, c, d], [e, f, g, h]) = (*spi, *lo);
    [a, b, c, d, e, f, g, h]
}

fn aad12(spi: &[u8; 4], hi: &[u8; 4], lo: &[u8; 4]) -> [u8; 12] {
    let ([a, b, c, d], [e, f, g, h], [i, j, k, l]) = (*spi, *hi, *lo);
    [a, b, c, d, e, f, g, h, i, j, k, l]
}

/// RFC 3948: UDP-encapsulated ESP is told from IKE by a non-zero first
/// word (IKE's non-ESP marker is four zero bytes).
#[inline]
pub fn is_non_esp_marker(udp_payload: &[u8]) -> bool {
    udp_payload.first_chunk::<4>() == Some(&[0; 4])
}
