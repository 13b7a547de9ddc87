//! The PRFs (HMAC-SHA1/SHA2) and `prf+` (RFC 7296 2.13).

use crate::proposal::Prf;
use zeroize::Zeroizing;

/// prf(key, data).
pub fn prf(alg: Prf, key: &[u8], data: &[u8]) -> Zeroizing<Vec<u8>> {
    let _ = (alg, key, data);
    todo!("ike-crypto")
}

/// prf+(key, seed) truncated to `len` bytes (T1 | T2 | ...; at most 255
/// blocks).
pub fn prf_plus(alg: Prf, key: &[u8], seed: &[u8], len: usize) -> Zeroizing<Vec<u8>> {
    let _ = (alg, key, seed, len);
    todo!("ike-crypto")
}

/// The PRF's output (and preferred key) length in bytes.
pub fn prf_len(alg: Prf) -> usize {
    match alg {
        Prf::HmacSha1 => 20,
        Prf::HmacSha2_256 => 32,
        Prf::HmacSha2_384 => 48,
        Prf::HmacSha2_512 => 64,
    }
}
