//! Key and ICV lengths of the negotiated algorithms, and their mapping to
//! the ESP data plane's (`tern_ipsec`). Private to the crate: `proposal`
//! may grow the same as methods; these are what the crypto uses.

use super::CryptoError;
use crate::proposal::{Encr, Integ, Prf};

/// The encryption key's length in bytes, with AES-GCM's 4-byte salt
/// (RFC 5282 7.1, RFC 4106 8.1). AES-CBC takes 128, 192 or 256-bit keys,
/// AES-GCM 128 or 256 (ring has no AES-192).
pub(crate) fn encr_key_len(encr: Encr) -> Result<usize, CryptoError> {
    match encr {
        Encr::AesCbc { bits: bits @ (128 | 192 | 256) } => Ok(usize::from(bits) / 8),
        Encr::AesGcm16 { bits: bits @ (128 | 256) } => Ok(usize::from(bits) / 8 + 4),
        Encr::AesCbc { .. } => Err(CryptoError::Unsupported("an AES-CBC key other than 128, 192 or 256 bits")),
        Encr::AesGcm16 { .. } => Err(CryptoError::Unsupported("an AES-GCM key other than 128 or 256 bits")),
    }
}

/// An AEAD: integrity comes with the cipher.
pub(crate) fn is_aead(encr: Encr) -> bool {
    matches!(encr, Encr::AesGcm16 { .. })
}

/// The integrity key's length: the hash's output (RFC 2404, RFC 4868).
pub(crate) fn integ_key_len(integ: Integ) -> usize {
    match integ {
        Integ::HmacSha1_96 => 20,
        Integ::HmacSha2_256_128 => 32,
        Integ::HmacSha2_384_192 => 48,
        Integ::HmacSha2_512_256 => 64,
    }
}

/// The truncated ICV's length.
pub(crate) fn integ_icv_len(integ: Integ) -> usize {
    match integ {
        Integ::HmacSha1_96 => 12,
        Integ::HmacSha2_256_128 => 16,
        Integ::HmacSha2_384_192 => 24,
        Integ::HmacSha2_512_256 => 32,
    }
}

/// The HMAC the integrity algorithm truncates, as the PRF of the same hash.
pub(crate) fn integ_hmac(integ: Integ) -> Prf {
    match integ {
        Integ::HmacSha1_96 => Prf::HmacSha1,
        Integ::HmacSha2_256_128 => Prf::HmacSha2_256,
        Integ::HmacSha2_384_192 => Prf::HmacSha2_384,
        Integ::HmacSha2_512_256 => Prf::HmacSha2_512,
    }
}

/// The ESP data plane's cipher for a child SA's `encr`.
pub(crate) fn esp_cipher(encr: Encr) -> Result<tern_ipsec::Cipher, CryptoError> {
    match encr {
        Encr::AesGcm16 { bits: 128 } => Ok(tern_ipsec::Cipher::Aes128Gcm),
        Encr::AesGcm16 { bits: 256 } => Ok(tern_ipsec::Cipher::Aes256Gcm),
        Encr::AesCbc { bits: 128 } => Ok(tern_ipsec::Cipher::Aes128Cbc),
        Encr::AesCbc { bits: 256 } => Ok(tern_ipsec::Cipher::Aes256Cbc),
        _ => Err(CryptoError::Unsupported("an ESP cipher the data plane lacks (AES-128/256 CBC or GCM-16 only)")),
    }
}

/// The ESP data plane's integrity algorithm (`None` for an AEAD).
pub(crate) fn esp_integ(integ: Option<Integ>) -> Result<tern_ipsec::Integ, CryptoError> {
    match integ {
        None => Ok(tern_ipsec::Integ::None),
        Some(Integ::HmacSha1_96) => Ok(tern_ipsec::Integ::HmacSha1_96),
        Some(Integ::HmacSha2_256_128) => Ok(tern_ipsec::Integ::HmacSha256_128),
        Some(Integ::HmacSha2_512_256) => Ok(tern_ipsec::Integ::HmacSha512_256),
        Some(Integ::HmacSha2_384_192) => {
            Err(CryptoError::Unsupported("ESP with HMAC-SHA-384-192: the data plane lacks it"))
        }
    }
}

/// Checks that `encr` and `integ` go together: an AEAD without integrity,
/// CBC with it.
pub(crate) fn check_pair(encr: Encr, integ: Option<Integ>) -> Result<(), CryptoError> {
    encr_key_len(encr)?;
    match (is_aead(encr), integ) {
        (true, Some(_)) => Err(CryptoError::Unsupported("AES-GCM with an integrity algorithm")),
        (false, None) => Err(CryptoError::Unsupported("AES-CBC without an integrity algorithm")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_agree_with_the_data_plane() {
        for (encr, cipher) in [
            (Encr::AesGcm16 { bits: 128 }, tern_ipsec::Cipher::Aes128Gcm),
            (Encr::AesGcm16 { bits: 256 }, tern_ipsec::Cipher::Aes256Gcm),
            (Encr::AesCbc { bits: 128 }, tern_ipsec::Cipher::Aes128Cbc),
            (Encr::AesCbc { bits: 256 }, tern_ipsec::Cipher::Aes256Cbc),
        ] {
            assert_eq!(esp_cipher(encr), Ok(cipher));
            assert_eq!(encr_key_len(encr), Ok(cipher.key_len()));
            assert_eq!(is_aead(encr), cipher.is_aead());
        }
        for integ in [Integ::HmacSha1_96, Integ::HmacSha2_256_128, Integ::HmacSha2_512_256] {
            let esp = esp_integ(Some(integ)).expect("mapped");
            assert_eq!(integ_key_len(integ), esp.key_len());
            assert_eq!(integ_icv_len(integ), esp.icv_len());
        }
        assert!(esp_integ(Some(Integ::HmacSha2_384_192)).is_err());
        assert!(esp_cipher(Encr::AesCbc { bits: 192 }).is_err());
        assert_eq!(encr_key_len(Encr::AesCbc { bits: 192 }), Ok(24));
        assert!(encr_key_len(Encr::AesGcm16 { bits: 192 }).is_err());
        assert!(encr_key_len(Encr::AesCbc { bits: 64 }).is_err());
        assert!(check_pair(Encr::AesGcm16 { bits: 128 }, Some(Integ::HmacSha1_96)).is_err());
        assert!(check_pair(Encr::AesCbc { bits: 128 }, None).is_err());
        assert!(check_pair(Encr::AesCbc { bits: 128 }, Some(Integ::HmacSha1_96)).is_ok());
    }
}
