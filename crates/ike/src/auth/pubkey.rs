//! Certificates and signatures (RFC 7296 2.15, RFC 7427, RFC 8420).
//! Owner: helper "ike-cert".
//!
//! - `algorithm`: public keys and the RFC 7427 AlgorithmIdentifiers.
//! - `keyfile`: certificate and private key files (PEM/DER; PKCS#8, SEC1,
//!   PKCS#1).
//! - `chain`: the peer's chain against the configured CAs, and its
//!   identity; `constraints`: the CAs' name constraints.
//! - `cache`: peers' chains already checked (per [`Credentials`], bounded,
//!   still checked for validity at each use): a setup from a certificate
//!   seen before costs the AUTH signature and the identity match only.
//!
//! Signing: ECDSA P-256 with SHA-256, P-384 with SHA-384 (the signature
//! in DER, as RFC 7427 says), RSA with SHA-256 in PKCS#1 v1.5 or, with
//! [`Credentials::with_rsa_pss`], RSASSA-PSS (strongSwan's `rsa/pss`),
//! Ed25519 over the octets themselves (RFC 8420). Verifying: those, RSA
//! and ECDSA with SHA-384/512 where `ring` has them, and the classic ECDSA
//! methods 9 and 10 (RFC 4754); SHA-1 is refused.

mod algorithm;
mod cache;
mod chain;
mod constraints;
mod keyfile;

pub use algorithm::{RSA_MAX_BITS, RSA_MIN_BITS};
pub use chain::MAX_DEPTH;

use super::{AUTH_DIGITAL_SIGNATURE, AuthError};
use crate::config::Identity;
use algorithm::PublicKey;
pub use cache::ChainCacheStats;
use cache::{ChainCache, Checked};
use chain::{Anchor, Names};
use keyfile::SigningKey;
use ring::rand::SystemRandom;
use std::sync::Arc;
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;
use x509_parser::x509::AlgorithmIdentifier;

/// The hash algorithms (RFC 7427 4, IANA "IKEv2 Hash Algorithms") tern
/// verifies signatures with: the SIGNATURE_HASH_ALGORITHMS notify's data,
/// each as a 16-bit number. 2 SHA2-256, 3 SHA2-384, 4 SHA2-512,
/// 5 Identity (Ed25519, RFC 8420).
pub fn hash_algorithms() -> Vec<u16> {
    vec![2, 3, 4, 5]
}

/// Peers send an end entity and a few intermediates; more is refused
/// before any signature is checked.
const MAX_PEER_CERTS: usize = 8;

/// This side's certificate (and chain), its private key, and the CAs the
/// peer's certificate must chain to. Loaded once from PEM or DER files.
pub struct Credentials {
    /// End entity first, then intermediates (DER).
    chain: Vec<Vec<u8>>,
    subject: Vec<u8>,
    subject_name: String,
    key: SigningKey,
    rsa_pss: bool,
    cas: Vec<Anchor>,
    /// The CERTREQ payload's data, computed once.
    certreq: Vec<u8>,
    rng: SystemRandom,
    signatures: chain::SignatureCache,
    chains: ChainCache,
    /// SHA-256 of what it was loaded from (a reload compares it).
    fingerprint: [u8; 32],
}

/// Issuer signatures, and peers' checked chains, remembered by default
/// (a few hundred kB, and about 2 MB, at most).
pub const SIGNATURE_CACHE: usize = 4096;

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("subject", &self.subject_name)
            .field("certs", &self.chain.len())
            .field("rsa_pss", &self.rsa_pss)
            .field("cas", &self.cas.iter().map(|c| c.name.as_str()).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// A peer's end-entity certificate (DER), after it was checked.
#[derive(Clone, Debug)]
pub struct PeerCert {
    pub der: Vec<u8>,
    /// The subject DN (DER), for ID_DER_ASN1_DN matches and logs.
    pub subject: Vec<u8>,
}

impl PeerCert {
    /// The subject DN as text ("O=tern, CN=moon.tern.test"), for logs and
    /// `tern ike sa show`.
    pub fn subject_name(&self) -> String {
        match x509_parser::x509::X509Name::from_der(&self.subject) {
            Ok((_, name)) => name.to_string(),
            Err(_) => format!("<a DN of {} bytes that does not parse>", self.subject.len()),
        }
    }
}

fn read(path: &std::path::Path) -> Result<Vec<u8>, AuthError> {
    std::fs::read(path).map_err(|e| AuthError::Config(format!("{}: {e}", path.display())))
}

/// The certificate files of a CA directory, sorted; none is an error.
fn ca_directory(dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>, AuthError> {
    let failed = |e: std::io::Error| AuthError::Config(format!("{}: {e}", dir.display()));
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(failed)? {
        let path = entry.map_err(failed)?.path();
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        if path.is_file() && matches!(ext.as_deref(), Some("pem" | "crt" | "cer" | "der")) {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(AuthError::Config(format!(
            "{}: no certificate files (.pem, .crt, .cer, .der) in it",
            dir.display()
        )));
    }
    files.sort();
    Ok(files)
}

impl Credentials {
    /// Loads `cert` (PEM/DER, the end-entity first, then any
    /// intermediates), `key` (PKCS#8 or SEC1/PKCS#1 PEM: ECDSA P-256/P-384,
    /// RSA >= 2048, Ed25519) and the `cas` (PEM/DER files). Errors name the
    /// file and what is wrong with it. A CA path that is a directory (as
    /// strongSwan's `x509ca`) stands for its `.pem`, `.crt`, `.cer` and
    /// `.der` files. DER keys: PKCS#8, SEC1 or PKCS#1 as the certificate's
    /// key type says.
    pub fn load(
        cert: &std::path::Path,
        key: &std::path::Path,
        cas: &[std::path::PathBuf],
    ) -> Result<Credentials, AuthError> {
        let mut ca_files = Vec::new();
        for path in cas {
            if path.is_dir() {
                ca_files.extend(ca_directory(path)?);
            } else {
                ca_files.push(path.clone());
            }
        }
        let ca_data = ca_files.iter().map(|p| read(p)).collect::<Result<Vec<_>, _>>()?;
        let ca_names: Vec<String> = ca_files.iter().map(|p| p.display().to_string()).collect();
        let cas: Vec<(&str, &[u8])> =
            ca_names.iter().map(String::as_str).zip(ca_data.iter().map(Vec::as_slice)).collect();
        Credentials::from_bytes(
            (&cert.display().to_string(), &read(cert)?),
            (&key.display().to_string(), &read(key)?),
            &cas,
        )
    }

    /// [`Credentials::load`] from the files' contents, each with the name
    /// errors call it by.
    pub fn from_bytes(
        cert: (&str, &[u8]),
        key: (&str, &[u8]),
        cas: &[(&str, &[u8])],
    ) -> Result<Credentials, AuthError> {
        let bad = |file: &str, why: String| AuthError::Config(format!("{file}: {why}"));
        let chain = keyfile::certificates(cert.1).map_err(|e| bad(cert.0, e))?;
        let (_, ee) = X509Certificate::from_der(&chain[0])
            .map_err(|e| bad(cert.0, format!("the certificate does not parse ({e})")))?;
        for (i, der) in chain.iter().enumerate().skip(1) {
            X509Certificate::from_der(der)
                .map_err(|e| bad(cert.0, format!("certificate {} does not parse ({e})", i + 1)))?;
        }
        let subject_name = ee.subject().to_string();
        let public = PublicKey::from_spki(ee.public_key()).map_err(|e| bad(cert.0, format!("{subject_name}: {e}")))?;
        let key_pair = keyfile::private_key(key.1, &public).map_err(|e| bad(key.0, e))?;
        let mut anchors = Vec::new();
        for (file, data) in cas {
            for der in keyfile::certificates(data).map_err(|e| bad(file, e))? {
                anchors.push(Anchor::new(&der).map_err(|e| bad(file, e))?);
            }
        }
        if anchors.is_empty() {
            return Err(AuthError::Config(
                "no CA certificate configured: the peer's certificate could not be checked".into(),
            ));
        }
        let mut h = ring::digest::Context::new(&ring::digest::SHA256);
        for part in std::iter::once(cert.1).chain(std::iter::once(key.1)).chain(cas.iter().map(|c| c.1)) {
            h.update(&(part.len() as u64).to_be_bytes());
            h.update(part);
        }
        let mut fingerprint = [0u8; 32];
        fingerprint.copy_from_slice(h.finish().as_ref());
        let mut certreq = Vec::with_capacity(20 * anchors.len());
        for ca in &anchors {
            certreq.extend_from_slice(ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &ca.spki).as_ref());
        }
        Ok(Credentials {
            fingerprint,
            subject: ee.subject().as_raw().to_vec(),
            subject_name,
            chain,
            key: key_pair,
            rsa_pss: false,
            cas: anchors,
            certreq,
            rng: SystemRandom::new(),
            signatures: chain::SignatureCache::new(SIGNATURE_CACHE),
            chains: ChainCache::new(SIGNATURE_CACHE),
        })
    }

    /// Sign with RSASSA-PSS instead of PKCS#1 v1.5 (an RSA key only;
    /// strongSwan's `charon.rsa_pss`). Off by default: PKCS#1 v1.5 is what
    /// every peer verifies.
    pub fn with_rsa_pss(mut self, pss: bool) -> Credentials {
        self.rsa_pss = pss;
        self
    }

    /// How many verified issuer signatures (on the peers' certificates),
    /// and how many checked chains, to remember; 0: check every chain in
    /// full. Default [`SIGNATURE_CACHE`].
    pub fn with_signature_cache(mut self, entries: usize) -> Credentials {
        self.signatures = chain::SignatureCache::new(entries);
        self.chains = ChainCache::new(entries);
        self
    }

    /// SHA-256 over the certificate, key and CA files' contents as loaded
    /// (length-prefixed, in order): equal fingerprints, same credentials.
    /// A reload compares it to notice files changed under the same names.
    pub fn fingerprint(&self) -> [u8; 32] {
        self.fingerprint
    }

    /// Issuer signatures remembered now (for metrics and tests).
    pub fn cached_signatures(&self) -> usize {
        self.signatures.len()
    }

    /// Peers' checked chains remembered now (for metrics and tests).
    pub fn cached_chains(&self) -> usize {
        self.chains.len()
    }

    /// Forgets the peers' chains checked so far (a reload replaced these
    /// credentials: their CAs may no longer be trusted).
    pub fn flush_chain_cache(&self) {
        self.chains.flush();
    }

    /// The chain cache's entries, size, hits, misses and evictions.
    pub fn chain_cache_stats(&self) -> ChainCacheStats {
        self.chains.stats()
    }

    /// The subject DN of this side's certificate, as text ("O=tern,
    /// CN=moon.tern.test"), for logs.
    pub fn subject_name(&self) -> &str {
        &self.subject_name
    }

    /// The CERT payloads to send (X.509 Certificate - Signature, encoding
    /// 4): the end-entity's DER first, then intermediates.
    pub fn certs(&self) -> Vec<Vec<u8>> {
        self.chain.clone()
    }

    /// The CERTREQ payload's data (encoding 4): SHA-1 hashes of the CAs'
    /// SubjectPublicKeyInfo, concatenated.
    pub fn certreq(&self) -> Vec<u8> {
        self.certreq.clone()
    }

    /// This side's identity as its certificate states it (the subject DN),
    /// for `local_id` left unset.
    pub fn identity(&self) -> Identity {
        Identity::Dn(self.subject.clone())
    }

    /// The AUTH payload for `signed_octets`: (auth method, data). Method 14
    /// (RFC 7427) with the ASN.1 AlgorithmIdentifier prefix; the hash is
    /// SHA-256 (SHA-384 for P-384; Ed25519 signs the octets themselves).
    pub fn sign(&self, signed_octets: &[u8]) -> Result<(u8, Vec<u8>), AuthError> {
        let failed = |_| AuthError::Signature("signing failed (the system's random number generator?)".into());
        let (alg, signature): (&[u8], Vec<u8>) = match &self.key {
            SigningKey::P256(k) => {
                (algorithm::ALG_ECDSA_SHA256, k.sign(&self.rng, signed_octets).map_err(failed)?.as_ref().to_vec())
            }
            SigningKey::P384(k) => {
                (algorithm::ALG_ECDSA_SHA384, k.sign(&self.rng, signed_octets).map_err(failed)?.as_ref().to_vec())
            }
            SigningKey::Rsa(k) => {
                let (alg, padding): (_, &'static dyn ring::signature::RsaEncoding) = if self.rsa_pss {
                    (algorithm::ALG_RSA_PSS_SHA256, &ring::signature::RSA_PSS_SHA256)
                } else {
                    (algorithm::ALG_RSA_SHA256, &ring::signature::RSA_PKCS1_SHA256)
                };
                let mut signature = vec![0; k.public().modulus_len()];
                k.sign(padding, &self.rng, signed_octets, &mut signature).map_err(failed)?;
                (alg, signature)
            }
            SigningKey::Ed25519(k) => (algorithm::ALG_ED25519, k.sign(signed_octets).as_ref().to_vec()),
        };
        let mut data = Vec::with_capacity(1 + alg.len() + signature.len());
        // Every AlgorithmIdentifier above is shorter than 256 bytes.
        data.push(alg.len() as u8);
        data.extend_from_slice(alg);
        data.extend_from_slice(&signature);
        Ok((AUTH_DIGITAL_SIGNATURE, data))
    }

    /// The AUTH payload for a peer that announced the RFC 7427 hashes in
    /// `peer_hashes` (bit n: hash algorithm n of its
    /// SIGNATURE_HASH_ALGORITHMS; 0: it sent none). With the hash this
    /// key signs with among them, [`Credentials::sign`] (method 14);
    /// otherwise the classic methods (RFC 7296 3.8, RFC 4754): ECDSA P-256
    /// with SHA-256 (9), P-384 with SHA-384 (10). RSA's classic method (1)
    /// hashes with SHA-1, which RFC 8247 forbids for signing, and Ed25519
    /// has none (RFC 8420): both are refused with the reason.
    pub fn sign_for(&self, signed_octets: &[u8], peer_hashes: u8) -> Result<(u8, Vec<u8>), AuthError> {
        let hash = match &self.key {
            SigningKey::P256(_) | SigningKey::Rsa(_) => HASH_SHA256,
            SigningKey::P384(_) => HASH_SHA384,
            SigningKey::Ed25519(_) => HASH_IDENTITY,
        };
        if peer_hashes & (1 << hash) != 0 {
            return self.sign(signed_octets);
        }
        let failed = |_| AuthError::Signature("signing failed (the system's random number generator?)".into());
        let (method, der, width) = match &self.key {
            SigningKey::P256(k) => (9, k.sign(&self.rng, signed_octets).map_err(failed)?, 32),
            SigningKey::P384(k) => (10, k.sign(&self.rng, signed_octets).map_err(failed)?, 48),
            SigningKey::Rsa(_) => {
                return Err(AuthError::Signature(format!(
                    "the peer does not take RFC 7427 signatures with SHA2-256 ({}), and RSA's classic auth method (1) signs with SHA-1, which RFC 8247 forbids: enable RFC 7427 on the peer (strongSwan does by default) or use an ECDSA certificate",
                    announced(peer_hashes)
                )));
            }
            SigningKey::Ed25519(_) => {
                return Err(AuthError::Signature(format!(
                    "the peer does not take RFC 7427 signatures with the identity hash ({}), the only way Ed25519 signs (RFC 8420): enable RFC 7427 on the peer or use an ECDSA certificate",
                    announced(peer_hashes)
                )));
            }
        };
        let fixed = ecdsa_fixed(der.as_ref(), width).ok_or_else(|| {
            AuthError::Signature("the ECDSA signature is not the DER SEQUENCE of two integers".into())
        })?;
        Ok((method, fixed))
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
        if certs.is_empty() {
            return Err(AuthError::NoCertificate);
        }
        if certs.len() > MAX_PEER_CERTS {
            return Err(AuthError::Certificate(format!(
                "the peer sent {} certificates; tern takes at most {MAX_PEER_CERTS}",
                certs.len()
            )));
        }
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        // A chain checked before and valid now (see `cache`); else the full
        // check, which also says which certificate is not valid now.
        let cache_key = ChainCache::key(certs);
        let checked = match self.chains.get(&cache_key, now) {
            Some(c) => c,
            None => {
                let c = Arc::new(self.check_chain(certs, now)?);
                self.chains.insert(cache_key, c.clone());
                c
            }
        };
        checked.names.check(id)?;
        let (key, name) = (&checked.key, &checked.name);
        let (alg, alg_name, signature) = match method {
            AUTH_DIGITAL_SIGNATURE => {
                let (alg_der, signature) = split_rfc7427(auth)?;
                let alg_id = match AlgorithmIdentifier::from_der(alg_der) {
                    Ok((rest, a)) if rest.is_empty() && chain::strict_algorithm_identifier(alg_der) => a,
                    _ => {
                        return Err(AuthError::Signature("the AUTH data's AlgorithmIdentifier does not parse".into()));
                    }
                };
                let (alg, alg_name) = algorithm::verification_algorithm(&alg_id, key)
                    .map_err(|e| AuthError::Signature(format!("{name}: {e}")))?;
                (alg, alg_name, signature)
            }
            1 | 9 | 10 | 11 => {
                let (alg, alg_name) = algorithm::classic_algorithm(method, key)
                    .map_err(|e| AuthError::Signature(format!("{name}: {e}")))?;
                (alg, alg_name, auth)
            }
            other => return Err(AuthError::Method(other, AUTH_DIGITAL_SIGNATURE)),
        };
        if !key.verify(alg, signed_octets, signature) {
            return Err(AuthError::Signature(format!(
                "the {alg_name} signature by {name} ({}) does not verify",
                key.describe()
            )));
        }
        Ok(PeerCert { der: certs[0].clone(), subject: checked.names.subject.clone() })
    }

    /// The peer's chain checked in full (parsed, against the CAs at `now`).
    fn check_chain(&self, certs: &[Vec<u8>], now: i64) -> Result<Checked, AuthError> {
        let mut parsed = Vec::with_capacity(certs.len());
        for (i, der) in certs.iter().enumerate() {
            match X509Certificate::from_der(der) {
                Ok(([], c)) => {
                    if !chain::algorithms_agree(der) {
                        return Err(AuthError::Certificate(format!(
                            "the peer's certificate {} has a signatureAlgorithm unlike its tbsCertificate's",
                            i + 1
                        )));
                    }
                    parsed.push(c)
                }
                Ok(_) => {
                    return Err(AuthError::Certificate(format!("the peer's certificate {} has trailing bytes", i + 1)));
                }
                Err(e) => {
                    return Err(AuthError::Certificate(format!(
                        "the peer's certificate {} does not parse ({e})",
                        i + 1
                    )));
                }
            }
        }
        let ee = &parsed[0];
        let name = ee.subject().to_string();
        let key = PublicKey::from_spki(ee.public_key()).map_err(|e| AuthError::Certificate(format!("{name}: {e}")))?;
        let window = chain::check(&parsed, &self.cas, now, &self.signatures)?;
        Ok(Checked { key, names: Names::of(ee), name, window })
    }
}

/// RFC 7427 hash algorithm numbers (IANA "IKEv2 Hash Algorithms").
pub const HASH_SHA256: u8 = 2;
pub const HASH_SHA384: u8 = 3;
pub const HASH_SHA512: u8 = 4;
pub const HASH_IDENTITY: u8 = 5;

/// The hash algorithms a SIGNATURE_HASH_ALGORITHMS notify's data lists
/// (16-bit numbers), as a bit mask (bit n: number n; numbers above 7 are
/// none tern signs with and are left out).
pub fn hash_mask(data: &[u8]) -> u8 {
    data.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).filter(|&n| n < 8).fold(0, |m, n| m | 1 << n)
}

fn announced(mask: u8) -> String {
    if mask == 0 {
        return "it sent no SIGNATURE_HASH_ALGORITHMS".into();
    }
    let names: Vec<String> = (0..8u8)
        .filter(|n| mask & (1 << n) != 0)
        .map(|n| match n {
            HASH_SHA256 => "SHA2-256".into(),
            HASH_SHA384 => "SHA2-384".into(),
            HASH_SHA512 => "SHA2-512".into(),
            HASH_IDENTITY => "identity".into(),
            other => format!("hash {other}"),
        })
        .collect();
    format!("it announced {}", names.join(", "))
}

/// An ECDSA signature from its DER form (SEQUENCE of INTEGER r, s) to the
/// fixed r | s of RFC 4754, each `width` bytes.
fn ecdsa_fixed(der: &[u8], width: usize) -> Option<Vec<u8>> {
    fn int(b: &[u8]) -> Option<(&[u8], &[u8])> {
        let (&tag, rest) = b.split_first()?;
        let (&len, rest) = rest.split_first()?;
        let len = usize::from(len);
        if tag != 0x02 || len > 0x7f || rest.len() < len {
            return None;
        }
        let (v, rest) = rest.split_at(len);
        Some((v, rest))
    }
    let (&tag, rest) = der.split_first()?;
    let (len, body) = match rest.split_first()? {
        (&0x81, r) => (usize::from(*r.first()?), r.get(1..)?),
        (&l, r) if l < 0x80 => (usize::from(l), r),
        _ => return None,
    };
    if tag != 0x30 || body.len() != len {
        return None;
    }
    let (r, rest) = int(body)?;
    let (s, rest) = int(rest)?;
    if !rest.is_empty() {
        return None;
    }
    let mut out = vec![0u8; 2 * width];
    for (i, v) in [r, s].into_iter().enumerate() {
        let v = v.strip_prefix(&[0]).unwrap_or(v);
        if v.len() > width {
            return None;
        }
        out.get_mut(i * width + width - v.len()..(i + 1) * width)?.copy_from_slice(v);
    }
    Some(out)
}

/// RFC 7427 3: the AUTH data is the AlgorithmIdentifier's length (one
/// byte), the AlgorithmIdentifier (DER), then the signature.
fn split_rfc7427(auth: &[u8]) -> Result<(&[u8], &[u8]), AuthError> {
    let truncated = || AuthError::Signature(format!("the AUTH data ({} bytes) is truncated", auth.len()));
    let (&len, rest) = auth.split_first().ok_or_else(truncated)?;
    let len = usize::from(len);
    if len == 0 || rest.len() <= len {
        return Err(truncated());
    }
    Ok(rest.split_at(len))
}
