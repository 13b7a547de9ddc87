//! Certificates and signatures. Owner: helper "ike-cert".

use super::AuthError;
use crate::config::Identity;

/// This side's certificate (and chain), its private key, and the CAs the
/// peer's certificate must chain to. Loaded once from PEM or DER files.
pub struct Credentials {
    // filled in by ike-cert
    _private: (),
}

/// A peer's end-entity certificate (DER), after it was checked.
#[derive(Clone, Debug)]
pub struct PeerCert {
    pub der: Vec<u8>,
    /// The subject DN (DER), for ID_DER_ASN1_DN matches and logs.
    pub subject: Vec<u8>,
}

impl Credentials {
    /// Loads `cert` (PEM/DER, the end-entity first, then any
    /// intermediates), `key` (PKCS#8 or SEC1/PKCS#1 PEM: ECDSA P-256/P-384,
    /// RSA >= 2048, Ed25519) and the `cas` (PEM/DER files). Errors name the
    /// file and what is wrong with it.
    pub fn load(
        cert: &std::path::Path,
        key: &std::path::Path,
        cas: &[std::path::PathBuf],
    ) -> Result<Credentials, AuthError> {
        let _ = (cert, key, cas);
        todo!("ike-cert")
    }

    /// The CERT payloads to send (X.509 Certificate - Signature, encoding
    /// 4): the end-entity's DER first, then intermediates.
    pub fn certs(&self) -> Vec<Vec<u8>> {
        todo!("ike-cert")
    }

    /// The CERTREQ payload's data (encoding 4): SHA-1 hashes of the CAs'
    /// SubjectPublicKeyInfo, concatenated.
    pub fn certreq(&self) -> Vec<u8> {
        todo!("ike-cert")
    }

    /// This side's identity as its certificate states it (the subject DN),
    /// for `local_id` left unset.
    pub fn identity(&self) -> Identity {
        todo!("ike-cert")
    }

    /// The AUTH payload for `signed_octets`: (auth method, data). Method 14
    /// (RFC 7427) with the ASN.1 AlgorithmIdentifier prefix; the hash is
    /// SHA-256 (SHA-384 for P-384; Ed25519 signs the octets themselves).
    pub fn sign(&self, signed_octets: &[u8]) -> Result<(u8, Vec<u8>), AuthError> {
        let _ = signed_octets;
        todo!("ike-cert")
    }

    /// Checks the peer's chain (`certs`: end-entity first, as received)
    /// against this side's CAs at `now` (seconds since the Unix epoch), that
    /// the end-entity names `id` (the peer's ID payload: subject DN, or a
    /// subjectAltName of the same kind), and that `auth` (method, data) is
    /// its signature over `signed_octets`. Accepts methods 14 (RFC 7427), 1
    /// (RSA PKCS#1 SHA-1 is refused: broken) and 9/10/11 (ECDSA with
    /// SHA-256/384/512).
    pub fn verify(
        &self,
        certs: &[Vec<u8>],
        id: &Identity,
        now: u64,
        method: u8,
        auth: &[u8],
        signed_octets: &[u8],
    ) -> Result<PeerCert, AuthError> {
        let _ = (certs, id, now, method, auth, signed_octets);
        todo!("ike-cert")
    }
}
