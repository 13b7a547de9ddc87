//! Diffie-Hellman: X25519 (RFC 7748 / RFC 8031), ECP-256/384 (RFC 5903),
//! MODP 2048/3072/4096 (RFC 3526).

use super::CryptoError;
use crate::proposal::DhGroup;
use zeroize::Zeroizing;

/// This side's ephemeral private value for one exchange.
pub struct DhPrivate {
    // filled in by ike-crypto
    _group: DhGroup,
}

impl DhPrivate {
    /// A fresh key pair. Returns the private part and the public value as
    /// the KE payload carries it (RFC 7296 3.4: X25519 32 bytes; ECP x||y
    /// without the 0x04 point marker; MODP big-endian padded to the prime's
    /// length).
    pub fn generate(group: DhGroup) -> Result<(DhPrivate, Vec<u8>), CryptoError> {
        let _ = group;
        todo!("ike-crypto")
    }

    pub fn group(&self) -> DhGroup {
        self._group
    }

    /// The shared secret g^ir with the peer's public value (checked:
    /// length, point on the curve, 1 < y < p-1).
    pub fn agree(self, peer: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let _ = peer;
        todo!("ike-crypto")
    }
}

/// The public value's length in bytes (what a KE payload must carry).
pub fn public_len(group: DhGroup) -> usize {
    match group {
        DhGroup::Modp2048 => 256,
        DhGroup::Modp3072 => 384,
        DhGroup::Modp4096 => 512,
        DhGroup::Ecp256 => 64,
        DhGroup::Ecp384 => 96,
        DhGroup::Curve25519 => 32,
    }
}
