//! Authentication (RFC 7296 2.15): pre-shared keys, and certificates with
//! digital signatures (RFC 7427: ECDSA P-256/P-384, RSA PKCS#1 v1.5 and
//! RSASSA-PSS >= 2048 bits, Ed25519 per RFC 8420), the peer's chain
//! checked against configured CAs and its identity. A peer that announced
//! no RFC 7427 hash tern signs with (SIGNATURE_HASH_ALGORITHMS) gets the
//! classic ECDSA methods 9/10 (RFC 4754); RSA (whose classic method is
//! SHA-1) and Ed25519 then refuse to sign, with the reason.
//!
//! Owner: helper "ike-cert" (everything under `auth/` but `psk`, which is
//! "ike-crypto"'s).

pub mod psk;
pub mod pubkey;

pub use pubkey::{ChainCacheStats, Credentials, PeerCert};

/// The AUTH payload's method numbers tern uses (RFC 7296 3.8, RFC 7427).
pub const AUTH_SHARED_KEY: u8 = 2;
pub const AUTH_DIGITAL_SIGNATURE: u8 = 14;

/// Why authentication failed (logged with the peer's name; counted).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("the AUTH payload does not match (wrong pre-shared key?)")]
    Mismatch,
    #[error("the peer used auth method {0}, this side expects {1}")]
    Method(u8, u8),
    #[error("no certificate from the peer")]
    NoCertificate,
    #[error("certificate: {0}")]
    Certificate(String),
    /// `subject`: the certificate's subject DN ("O=tern, CN=moon"), so the
    /// log line names which certificate of the chain it is.
    #[error("certificate {subject} is not valid now (not before {not_before}, not after {not_after})")]
    Expired { subject: String, not_before: String, not_after: String },
    #[error("the certificate does not chain to a configured CA: {0}")]
    Untrusted(String),
    #[error("the certificate does not name the identity {0}")]
    Identity(String),
    #[error("signature: {0}")]
    Signature(String),
    #[error("{0}")]
    Config(String),
}
