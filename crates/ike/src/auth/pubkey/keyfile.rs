//! Reading certificate and private key files: PEM (one or more blocks) or
//! DER. Private keys: PKCS#8 ("PRIVATE KEY") of every type, SEC1 ("EC
//! PRIVATE KEY", what strongSwan's `pki --gen --type ecdsa` writes) and
//! PKCS#1 ("RSA PRIVATE KEY"); encrypted keys are refused.

use super::algorithm::PublicKey;
use ring::rand::SystemRandom;
use ring::signature::{self as sig, KeyPair};
use x509_parser::asn1_rs::{Any, Class, FromDer, Tag};
use x509_parser::pem::Pem;

/// A private key `ring` signs with.
pub enum SigningKey {
    P256(sig::EcdsaKeyPair),
    P384(sig::EcdsaKeyPair),
    Rsa(sig::RsaKeyPair),
    Ed25519(sig::Ed25519KeyPair),
}

/// The PEM blocks of `data` as (label, DER), or `data` itself as one DER
/// block (label "") when it holds no PEM.
pub fn blocks(data: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    if !data.windows(11).any(|w| w == b"-----BEGIN ") {
        if data.is_empty() {
            return Err("it is empty".into());
        }
        return Ok(vec![(String::new(), data.to_vec())]);
    }
    let mut out = Vec::new();
    for pem in Pem::iter_from_buffer(data) {
        let pem = pem.map_err(|e| format!("its PEM does not decode ({e})"))?;
        out.push((pem.label, pem.contents));
    }
    Ok(out)
}

/// The certificates (DER) of a PEM or DER file's contents.
pub fn certificates(data: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for (label, der) in blocks(data)? {
        match label.as_str() {
            "" | "CERTIFICATE" | "X509 CERTIFICATE" => out.push(der),
            // A key or parameters in the same file: not ours to read here.
            _ => {}
        }
    }
    if out.is_empty() {
        return Err("it holds no CERTIFICATE".into());
    }
    Ok(out)
}

/// The private key in `data` (PEM or DER), for the certificate whose
/// public key is `public`: it must be that key's private half.
pub fn private_key(data: &[u8], public: &PublicKey) -> Result<SigningKey, String> {
    let pem = data.windows(11).any(|w| w == b"-----BEGIN ");
    if pem && data.windows(9).any(|w| w == b"ENCRYPTED") {
        return Err("it is encrypted; tern reads unencrypted keys (decrypt with openssl pkey)".into());
    }
    let blocks = blocks(data)?;
    let (label, der) = blocks
        .iter()
        .find(|(l, _)| l.is_empty() || l.ends_with("PRIVATE KEY"))
        .ok_or_else(|| "it holds no PRIVATE KEY".to_string())?;
    let rng = SystemRandom::new();
    let reject = |e: ring::error::KeyRejected| format!("it is not a {} private key ({e})", public.describe());
    let key = match (public, label.as_str()) {
        (PublicKey::P256(_), "EC PRIVATE KEY") => {
            SigningKey::P256(sec1(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, der, &rng)?)
        }
        (PublicKey::P384(_), "EC PRIVATE KEY") => {
            SigningKey::P384(sec1(&sig::ECDSA_P384_SHA384_ASN1_SIGNING, der, &rng)?)
        }
        (PublicKey::P256(_), "PRIVATE KEY") => SigningKey::P256(
            sig::EcdsaKeyPair::from_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, der, &rng).map_err(reject)?,
        ),
        (PublicKey::P384(_), "PRIVATE KEY") => SigningKey::P384(
            sig::EcdsaKeyPair::from_pkcs8(&sig::ECDSA_P384_SHA384_ASN1_SIGNING, der, &rng).map_err(reject)?,
        ),
        (PublicKey::P256(_), "") => SigningKey::P256(
            sig::EcdsaKeyPair::from_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, der, &rng)
                .or_else(|_| sec1(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, der, &rng).map_err(|_| ()))
                .map_err(|_| format!("it is not a {} private key (PKCS#8 or SEC1)", public.describe()))?,
        ),
        (PublicKey::P384(_), "") => SigningKey::P384(
            sig::EcdsaKeyPair::from_pkcs8(&sig::ECDSA_P384_SHA384_ASN1_SIGNING, der, &rng)
                .or_else(|_| sec1(&sig::ECDSA_P384_SHA384_ASN1_SIGNING, der, &rng).map_err(|_| ()))
                .map_err(|_| format!("it is not a {} private key (PKCS#8 or SEC1)", public.describe()))?,
        ),
        (PublicKey::Rsa { .. }, "PRIVATE KEY") => SigningKey::Rsa(sig::RsaKeyPair::from_pkcs8(der).map_err(reject)?),
        (PublicKey::Rsa { .. }, "RSA PRIVATE KEY") => SigningKey::Rsa(sig::RsaKeyPair::from_der(der).map_err(reject)?),
        (PublicKey::Rsa { .. }, "") => SigningKey::Rsa(
            sig::RsaKeyPair::from_pkcs8(der).or_else(|_| sig::RsaKeyPair::from_der(der)).map_err(reject)?,
        ),
        (PublicKey::Ed25519(_), "PRIVATE KEY" | "") => {
            // openssl writes PKCS#8 v1 (no public key in the file):
            // "maybe_unchecked" accepts it; the public key is compared
            // with the certificate's below.
            SigningKey::Ed25519(sig::Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).map_err(reject)?)
        }
        (_, label) => return Err(format!("its {label} is not the certificate's {} key", public.describe())),
    };
    let derived: &[u8] = match &key {
        SigningKey::P256(k) | SigningKey::P384(k) => k.public_key().as_ref(),
        SigningKey::Rsa(k) => k.public_key().as_ref(),
        SigningKey::Ed25519(k) => k.public_key().as_ref(),
    };
    if derived != public.bytes() {
        return Err("it is not the private key of the certificate's public key".into());
    }
    Ok(key)
}

/// A SEC1 ECPrivateKey (RFC 5915):
/// SEQUENCE { version 1, privateKey OCTET STRING, [0] parameters OID
/// OPTIONAL, [1] publicKey BIT STRING OPTIONAL }. `ring` takes the private
/// scalar with its public point.
fn sec1(alg: &'static sig::EcdsaSigningAlgorithm, der: &[u8], rng: &SystemRandom) -> Result<sig::EcdsaKeyPair, String> {
    const CONVERT: &str = "convert it with openssl pkcs8 -topk8 -nocrypt";
    let bad = || format!("its SEC1 EC private key does not parse; {CONVERT}");
    let (_, seq) = Any::from_der(der).map_err(|_| bad())?;
    if seq.tag() != Tag::Sequence {
        return Err(bad());
    }
    let (rest, _version) = Any::from_der(seq.data).map_err(|_| bad())?;
    let (mut rest, private) = Any::from_der(rest).map_err(|_| bad())?;
    if private.tag() != Tag::OctetString {
        return Err(bad());
    }
    let mut public = None;
    while !rest.is_empty() {
        let (r, field) = Any::from_der(rest).map_err(|_| bad())?;
        rest = r;
        if field.class() == Class::ContextSpecific && field.tag() == Tag(1) {
            let (_, bits) = Any::from_der(field.data).map_err(|_| bad())?;
            // A BIT STRING: the unused-bits count (0), then the point.
            match bits.data.split_first() {
                Some((0, point)) if bits.tag() == Tag::BitString => public = Some(point),
                _ => return Err(bad()),
            }
        }
    }
    let public = public.ok_or_else(|| format!("its SEC1 EC private key has no public key; {CONVERT}"))?;
    sig::EcdsaKeyPair::from_private_key_and_public_key(alg, private.data, public, rng)
        .map_err(|e| format!("its SEC1 EC private key is not valid ({e}); {CONVERT}"))
}
