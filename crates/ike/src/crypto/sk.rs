//! The encrypted payload (SK, RFC 7296 3.14; AES-GCM per RFC 5282) and the
//! encrypted fragment payload (SKF, RFC 7383), seal and open. The framing
//! (generic payload header, fragment number/total) is `wire`'s; this is
//! the IV, the ciphertext, the padding and the ICV.

use super::CryptoError;
use crate::proposal::{Encr, Integ};

/// One direction's encryption and integrity keys (SK_ei + SK_ai, or SK_er
/// + SK_ar; for GCM the key includes its 4-byte salt).
pub struct SkCipher {
    // filled in by ike-crypto
    _encr: Encr,
    _integ: Option<Integ>,
}

impl SkCipher {
    pub fn new(encr: Encr, integ: Option<Integ>, enc_key: &[u8], integ_key: &[u8]) -> Result<SkCipher, CryptoError> {
        let _ = (enc_key, integ_key);
        Ok(SkCipher { _encr: encr, _integ: integ })
    }

    /// Bytes the encrypted payload adds around `plain_len` bytes of inner
    /// payloads (IV, padding, pad length, ICV), for fragmentation's sums.
    pub fn overhead(&self, plain_len: usize) -> usize {
        let _ = plain_len;
        todo!("ike-crypto")
    }

    /// Encrypts `plain` (the inner payloads) and appends IV | ciphertext
    /// (with padding and pad length) | ICV to `out`. `aad` is everything of
    /// the message before the encrypted payload's body: the IKE header and
    /// the SK/SKF generic payload header (and the SKF's fragment numbers),
    /// with the lengths already final (the caller computes them with
    /// [`SkCipher::overhead`]). For CBC the ICV covers `aad` and the body.
    pub fn seal(&self, aad: &[u8], plain: &[u8], out: &mut Vec<u8>) -> Result<(), CryptoError> {
        let _ = (aad, plain, out);
        todo!("ike-crypto")
    }

    /// Checks and decrypts `body` (IV | ciphertext | ICV) given `aad` as
    /// above. Returns the inner payloads without padding.
    pub fn open(&self, aad: &[u8], body: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let _ = (aad, body);
        todo!("ike-crypto")
    }
}
