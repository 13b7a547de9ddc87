//! Pre-shared key authentication (RFC 7296 2.15):
//! AUTH = prf(prf(Shared Secret, "Key Pad for IKEv2"), <SignedOctets>).
//! Owner: helper "ike-crypto".

use super::AuthError;
use crate::proposal::Prf;

/// The AUTH payload's data for `signed_octets` (RealMessage | Nonce |
/// prf(SK_p, IDx')).
pub fn psk_auth(prf: Prf, psk: &[u8], signed_octets: &[u8]) -> Vec<u8> {
    let _ = (prf, psk, signed_octets);
    todo!("ike-crypto")
}

/// Checks the peer's AUTH data in constant time.
pub fn psk_verify(prf: Prf, psk: &[u8], signed_octets: &[u8], auth: &[u8]) -> Result<(), AuthError> {
    let _ = (prf, psk, signed_octets, auth);
    todo!("ike-crypto")
}

/// The octets both sides sign (RFC 7296 2.15): the message this side sent
/// (or received) as a whole, the other side's nonce, and
/// prf(SK_px, ID payload body). Helper for the state machine.
pub fn signed_octets(prf: Prf, message: &[u8], peer_nonce: &[u8], sk_p: &[u8], id_body: &[u8]) -> Vec<u8> {
    let _ = (prf, message, peer_nonce, sk_p, id_body);
    todo!("ike-crypto")
}
