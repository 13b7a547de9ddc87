//! IKEv2's cryptography: Diffie-Hellman, PRFs and `prf+` (RFC 7296 2.13),
//! the IKE SA's keys (2.14) and a child SA's (2.17), the encrypted
//! payload's seal and open (3.14, RFC 5282 for GCM).
//!
//! Owner: helper "ike-crypto". Secrets are zeroized when dropped; MACs are
//! compared in constant time.

mod algs;
pub mod dh;
pub mod keys;
pub mod prf;
pub mod sk;

pub use dh::DhPrivate;
pub use keys::{IkeKeys, child_keys};
pub use prf::{prf, prf_plus};
pub use sk::SkCipher;

/// What went wrong in the crypto.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    #[error("the peer's key exchange data is not a valid {0:?} public value")]
    BadPublic(crate::proposal::DhGroup),
    #[error("the encrypted payload failed its integrity check")]
    Integrity,
    #[error("the encrypted payload is malformed: {0}")]
    Malformed(&'static str),
    #[error("the system's random number generator failed")]
    Random,
    /// An algorithm combination or key this code cannot use (an IKE
    /// proposal without a PRF, AES-GCM with an integrity algorithm, a key
    /// of the wrong length, an ESP integrity algorithm the data plane
    /// lacks): the proposal selection should have refused it.
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
}

/// Hex to bytes, for the tests' vectors.
#[cfg(test)]
pub(crate) fn unhex(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(|c| c.is_ascii_hexdigit()).collect();
    s.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap_or("zz"), 16).unwrap_or(0)).collect()
}
