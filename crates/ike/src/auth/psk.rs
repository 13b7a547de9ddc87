//! Pre-shared key authentication (RFC 7296 2.15):
//! AUTH = prf(prf(Shared Secret, "Key Pad for IKEv2"), <SignedOctets>).
//! Owner: helper "ike-crypto".

use super::AuthError;
use crate::crypto::prf::prf;
use crate::proposal::Prf;
use subtle::ConstantTimeEq;

/// The key pad (17 ASCII octets, no terminating NUL).
const KEY_PAD: &[u8] = b"Key Pad for IKEv2";

/// The AUTH payload's data for `signed_octets` (RealMessage | Nonce |
/// prf(SK_p, IDx')).
pub fn psk_auth(prf_alg: Prf, psk: &[u8], signed_octets: &[u8]) -> Vec<u8> {
    let key = prf(prf_alg, psk, KEY_PAD);
    prf(prf_alg, &key, signed_octets).to_vec()
}

/// Checks the peer's AUTH data in constant time.
pub fn psk_verify(prf_alg: Prf, psk: &[u8], signed_octets: &[u8], auth: &[u8]) -> Result<(), AuthError> {
    let key = prf(prf_alg, psk, KEY_PAD);
    let want = prf(prf_alg, &key, signed_octets);
    // Slices of different lengths compare unequal (the length is public).
    if bool::from(want.as_slice().ct_eq(auth)) { Ok(()) } else { Err(AuthError::Mismatch) }
}

/// The octets both sides sign (RFC 7296 2.15): the message this side sent
/// (or received) as a whole, the other side's nonce, and
/// prf(SK_px, ID payload body). Helper for the state machine.
pub fn signed_octets(prf_alg: Prf, message: &[u8], peer_nonce: &[u8], sk_p: &[u8], id_body: &[u8]) -> Vec<u8> {
    let maced_id = prf(prf_alg, sk_p, id_body);
    let mut v = Vec::with_capacity(message.len() + peer_nonce.len() + maced_id.len());
    v.extend_from_slice(message);
    v.extend_from_slice(peer_nonce);
    v.extend_from_slice(&maced_id);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::prf::prf_len;
    use crate::crypto::unhex;

    const PSK: &[u8] = b"correct horse battery staple";

    fn octets() -> Vec<u8> {
        let nonce: Vec<u8> = (0..32).collect();
        let sk_p: Vec<u8> = (100..132).collect();
        signed_octets(Prf::HmacSha2_256, b"IKE_SA_INIT request bytes", &nonce, &sk_p, b"\x02\x00\x00\x00tern.example")
    }

    /// Computed independently, once, with Python's hmac (/usr/bin/python3):
    ///
    /// ```text
    /// so = msg + nonce + hmac.new(skp, idb, "sha256").digest()
    /// hmac.new(hmac.new(psk, b"Key Pad for IKEv2", h).digest(), so, h)
    /// ```
    /// with msg = b"IKE_SA_INIT request bytes", nonce = bytes(range(32)),
    /// skp = bytes(range(100, 132)), idb = b"\x02\0\0\0tern.example".
    #[test]
    fn matches_python() {
        let so = octets();
        assert_eq!(
            so,
            unhex(
                "494b455f53415f494e49542072657175657374206279746573000102030405060708090a0b0c0d0e0f101112131415161718\
                 191a1b1c1d1e1f4e7fa9ffded7093d066c195157f0056c5f9a3c01969832cec9cf7aa24ca231b6"
            )
        );
        assert_eq!(
            psk_auth(Prf::HmacSha2_256, PSK, &so),
            unhex("f75147b92520a6ac8becdba4ff0e5c6b80c19ccabfda722e8163fc93ceb9f07d")
        );
        assert_eq!(psk_auth(Prf::HmacSha1, PSK, &so), unhex("0b0e54793667077745502211960ccae4db65e814"));
    }

    #[test]
    fn verify_accepts_its_own_and_refuses_the_rest() {
        let so = octets();
        for alg in [Prf::HmacSha1, Prf::HmacSha2_256, Prf::HmacSha2_384, Prf::HmacSha2_512] {
            let auth = psk_auth(alg, PSK, &so);
            assert_eq!(auth.len(), prf_len(alg));
            assert_eq!(psk_verify(alg, PSK, &so, &auth), Ok(()));
            assert_eq!(psk_verify(alg, b"wrong psk", &so, &auth), Err(AuthError::Mismatch));
            let mut other = so.clone();
            other[0] ^= 1;
            assert_eq!(psk_verify(alg, PSK, &other, &auth), Err(AuthError::Mismatch));
            for i in 0..auth.len() {
                let mut bad = auth.clone();
                bad[i] ^= 0x80;
                assert_eq!(psk_verify(alg, PSK, &so, &bad), Err(AuthError::Mismatch));
            }
            assert_eq!(psk_verify(alg, PSK, &so, &auth[..auth.len() - 1]), Err(AuthError::Mismatch));
            assert_eq!(psk_verify(alg, PSK, &so, &[]), Err(AuthError::Mismatch));
            let mut longer = auth.clone();
            longer.push(0);
            assert_eq!(psk_verify(alg, PSK, &so, &longer), Err(AuthError::Mismatch));
        }
    }
}
