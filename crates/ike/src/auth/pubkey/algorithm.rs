//! Public keys as certificates carry them, and signature algorithms: the
//! RFC 7427 AlgorithmIdentifiers tern sends, and the `ring` verification
//! algorithm for an AlgorithmIdentifier the peer (or a certificate) names.

use ring::signature::{self as sig, VerificationAlgorithm};
use x509_parser::oid_registry::{
    OID_EC_P256, OID_HASH_SHA1, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_NIST_HASH_SHA256,
    OID_NIST_HASH_SHA384, OID_NIST_HASH_SHA512, OID_PKCS1_RSAENCRYPTION, OID_PKCS1_RSASSAPSS, OID_PKCS1_SHA1WITHRSA,
    OID_PKCS1_SHA256WITHRSA, OID_PKCS1_SHA384WITHRSA, OID_PKCS1_SHA512WITHRSA, OID_SIG_ECDSA_WITH_SHA256,
    OID_SIG_ECDSA_WITH_SHA384, OID_SIG_ECDSA_WITH_SHA512, OID_SIG_ED25519,
};
use x509_parser::public_key::PublicKey as X509PublicKey;
use x509_parser::signature_algorithm::RsaSsaPssParams;
use x509_parser::x509::{AlgorithmIdentifier, SubjectPublicKeyInfo};

/// RSA moduli below this are refused (RFC 8247 2.4: 2048 is the minimum).
pub const RSA_MIN_BITS: usize = 2048;
/// And above this (`ring` verifies up to 8192 bits).
pub const RSA_MAX_BITS: usize = 8192;

/// The DER AlgorithmIdentifiers of RFC 7427 Appendix A that tern signs
/// with (ECDSA and Ed25519 without parameters, RSA PKCS#1 v1.5 with NULL,
/// as RFC 3279/5758/8410 say and strongSwan sends).
pub const ALG_ECDSA_SHA256: &[u8] = &[0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
pub const ALG_ECDSA_SHA384: &[u8] = &[0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
pub const ALG_RSA_SHA256: &[u8] =
    &[0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00];
pub const ALG_ED25519: &[u8] = &[0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70];
/// RSASSA-PSS with SHA-256, MGF1 with SHA-256 and a 32-byte salt
/// (RFC 4055 params; the hash AlgorithmIdentifiers carry NULL as
/// strongSwan's do; the trailer field is the default and so absent).
pub const ALG_RSA_PSS_SHA256: &[u8] = &[
    0x30, 0x41, // AlgorithmIdentifier
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a, // id-RSASSA-PSS
    0x30, 0x34, // RSASSA-PSS-params
    0xa0, 0x0f, // [0] hashAlgorithm: sha256, NULL
    0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, //
    0xa1, 0x1c, // [1] maskGenAlgorithm: id-mgf1 with sha256
    0x30, 0x1a, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08, //
    0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, //
    0xa2, 0x03, 0x02, 0x01, 0x20, // [2] saltLength 32
];

/// A public key from a certificate's SubjectPublicKeyInfo, in the form
/// `ring` verifies with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublicKey {
    /// The uncompressed point.
    P256(Vec<u8>),
    P384(Vec<u8>),
    /// The DER RSAPublicKey and the modulus' size in bits.
    Rsa {
        der: Vec<u8>,
        bits: usize,
    },
    Ed25519(Vec<u8>),
}

impl PublicKey {
    /// The key of `spki`; RSA below [`RSA_MIN_BITS`], curves other than
    /// P-256/P-384 and other key types are refused with the reason.
    pub fn from_spki(spki: &SubjectPublicKeyInfo) -> Result<PublicKey, String> {
        let alg = &spki.algorithm.algorithm;
        let data = spki.subject_public_key.data.to_vec();
        if *alg == OID_PKCS1_RSAENCRYPTION || *alg == OID_PKCS1_RSASSAPSS {
            let X509PublicKey::RSA(rsa) =
                spki.parsed().map_err(|e| format!("its RSA public key does not parse ({e})"))?
            else {
                return Err("its RSA public key does not parse".into());
            };
            let bits = modulus_bits(rsa.modulus);
            if bits < RSA_MIN_BITS {
                return Err(format!("its RSA key has {bits} bits; tern requires at least {RSA_MIN_BITS}"));
            }
            if bits > RSA_MAX_BITS {
                return Err(format!("its RSA key has {bits} bits; tern verifies at most {RSA_MAX_BITS}"));
            }
            Ok(PublicKey::Rsa { der: data, bits })
        } else if *alg == OID_KEY_TYPE_EC_PUBLIC_KEY {
            let curve = spki.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok());
            match curve {
                Some(c) if c == OID_EC_P256 => Ok(PublicKey::P256(data)),
                Some(c) if c == OID_NIST_EC_P384 => Ok(PublicKey::P384(data)),
                Some(c) => Err(format!("its elliptic curve {c} is not supported (P-256 and P-384 are)")),
                None => Err("its EC public key names no curve".into()),
            }
        } else if *alg == OID_SIG_ED25519 {
            if data.len() != 32 {
                return Err(format!("its Ed25519 public key has {} bytes, not 32", data.len()));
            }
            Ok(PublicKey::Ed25519(data))
        } else {
            Err(format!("its public key algorithm {alg} is not supported (ECDSA, RSA, Ed25519 are)"))
        }
    }

    /// "ECDSA P-256", "RSA 2048", "Ed25519".
    pub fn describe(&self) -> String {
        match self {
            PublicKey::P256(_) => "ECDSA P-256".into(),
            PublicKey::P384(_) => "ECDSA P-384".into(),
            PublicKey::Rsa { bits, .. } => format!("RSA {bits}"),
            PublicKey::Ed25519(_) => "Ed25519".into(),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        match self {
            PublicKey::P256(b) | PublicKey::P384(b) | PublicKey::Ed25519(b) => b,
            PublicKey::Rsa { der, .. } => der,
        }
    }

    /// Checks `signature` over `message` with `alg` (from
    /// [`verification_algorithm`] or [`classic_algorithm`]).
    pub fn verify(&self, alg: &'static dyn VerificationAlgorithm, message: &[u8], signature: &[u8]) -> bool {
        sig::UnparsedPublicKey::new(alg, self.bytes()).verify(message, signature).is_ok()
    }
}

/// The size in bits of a big-endian modulus (leading zeros skipped).
fn modulus_bits(m: &[u8]) -> usize {
    let m = match m.iter().position(|&b| b != 0) {
        Some(i) => &m[i..],
        None => return 0,
    };
    m.len() * 8 - m[0].leading_zeros() as usize
}

/// The `ring` algorithm that checks a signature made with `alg` by `key`,
/// and the algorithm's name for messages. Refused: SHA-1 (broken),
/// combinations `ring` lacks (ECDSA with SHA-512), a key of the wrong type
/// for the algorithm, and PSS parameters other than MGF1 with the same
/// hash and a salt the size of the hash.
pub fn verification_algorithm(
    alg: &AlgorithmIdentifier,
    key: &PublicKey,
) -> Result<(&'static dyn VerificationAlgorithm, &'static str), String> {
    let oid = &alg.algorithm;
    let wrong_key = |name: &str| Err(format!("{name} does not go with a {} key", key.describe()));
    if *oid == OID_SIG_ECDSA_WITH_SHA256 {
        match key {
            PublicKey::P256(_) => Ok((&sig::ECDSA_P256_SHA256_ASN1, "ecdsa-with-SHA256")),
            PublicKey::P384(_) => Ok((&sig::ECDSA_P384_SHA256_ASN1, "ecdsa-with-SHA256")),
            _ => wrong_key("ecdsa-with-SHA256"),
        }
    } else if *oid == OID_SIG_ECDSA_WITH_SHA384 {
        match key {
            PublicKey::P256(_) => Ok((&sig::ECDSA_P256_SHA384_ASN1, "ecdsa-with-SHA384")),
            PublicKey::P384(_) => Ok((&sig::ECDSA_P384_SHA384_ASN1, "ecdsa-with-SHA384")),
            _ => wrong_key("ecdsa-with-SHA384"),
        }
    } else if *oid == OID_SIG_ECDSA_WITH_SHA512 {
        Err("ecdsa-with-SHA512 is not supported (SHA-256 and SHA-384 are)".into())
    } else if *oid == OID_PKCS1_SHA256WITHRSA || *oid == OID_PKCS1_SHA384WITHRSA || *oid == OID_PKCS1_SHA512WITHRSA {
        if !matches!(key, PublicKey::Rsa { .. }) {
            return wrong_key("RSA PKCS#1 v1.5");
        }
        Ok(if *oid == OID_PKCS1_SHA256WITHRSA {
            (&sig::RSA_PKCS1_2048_8192_SHA256, "sha256WithRSAEncryption")
        } else if *oid == OID_PKCS1_SHA384WITHRSA {
            (&sig::RSA_PKCS1_2048_8192_SHA384, "sha384WithRSAEncryption")
        } else {
            (&sig::RSA_PKCS1_2048_8192_SHA512, "sha512WithRSAEncryption")
        })
    } else if *oid == OID_PKCS1_RSASSAPSS {
        if !matches!(key, PublicKey::Rsa { .. }) {
            return wrong_key("RSASSA-PSS");
        }
        pss_algorithm(alg)
    } else if *oid == OID_SIG_ED25519 {
        match key {
            PublicKey::Ed25519(_) => Ok((&sig::ED25519, "Ed25519")),
            _ => wrong_key("Ed25519"),
        }
    } else if *oid == OID_PKCS1_SHA1WITHRSA || oid.to_id_string() == "1.2.840.10045.4.1" {
        Err("signatures with SHA-1 are refused: SHA-1 is broken".into())
    } else {
        Err(format!("signature algorithm {oid} is not supported"))
    }
}

/// RSASSA-PSS (RFC 4055 3.1) as `ring` checks it: SHA-256/384/512, MGF1
/// with the same hash, a salt as long as the hash, trailer 1.
fn pss_algorithm(alg: &AlgorithmIdentifier) -> Result<(&'static dyn VerificationAlgorithm, &'static str), String> {
    let params =
        alg.parameters.as_ref().ok_or_else(|| "RSASSA-PSS without parameters".to_string()).and_then(|p| {
            RsaSsaPssParams::try_from(p).map_err(|e| format!("RSASSA-PSS parameters do not parse ({e})"))
        })?;
    let hash = params.hash_algorithm_oid();
    let (alg, name, len): (&'static dyn VerificationAlgorithm, _, _) = if *hash == OID_NIST_HASH_SHA256 {
        (&sig::RSA_PSS_2048_8192_SHA256, "RSASSA-PSS SHA-256", 32)
    } else if *hash == OID_NIST_HASH_SHA384 {
        (&sig::RSA_PSS_2048_8192_SHA384, "RSASSA-PSS SHA-384", 48)
    } else if *hash == OID_NIST_HASH_SHA512 {
        (&sig::RSA_PSS_2048_8192_SHA512, "RSASSA-PSS SHA-512", 64)
    } else if *hash == OID_HASH_SHA1 {
        return Err("RSASSA-PSS with SHA-1 is refused: SHA-1 is broken".into());
    } else {
        return Err(format!("RSASSA-PSS with hash {hash} is not supported"));
    };
    let mgf = params.mask_gen_algorithm().map_err(|e| format!("RSASSA-PSS mask generation does not parse ({e})"))?;
    if mgf.mgf.to_id_string() != "1.2.840.113549.1.1.8" || mgf.hash != *hash {
        return Err(format!(
            "{name} with mask generation {} over {} is not supported (MGF1 with the same hash is)",
            mgf.mgf, mgf.hash
        ));
    }
    if params.salt_length() != len || params.trailer_field() != 1 {
        return Err(format!(
            "{name} with a {}-byte salt (trailer {}) is not supported (a {len}-byte salt is)",
            params.salt_length(),
            params.trailer_field()
        ));
    }
    Ok((alg, name))
}

/// The classic (RFC 7296 3.8, RFC 4754) signature methods: ECDSA with
/// the signature as r | s, the curve tied to the hash.
pub fn classic_algorithm(
    method: u8,
    key: &PublicKey,
) -> Result<(&'static dyn VerificationAlgorithm, &'static str), String> {
    match (method, key) {
        (9, PublicKey::P256(_)) => Ok((&sig::ECDSA_P256_SHA256_FIXED, "ECDSA with SHA-256 on P-256 (method 9)")),
        (10, PublicKey::P384(_)) => Ok((&sig::ECDSA_P384_SHA384_FIXED, "ECDSA with SHA-384 on P-384 (method 10)")),
        (11, _) => Err("ECDSA on P-521 (method 11) is not supported".into()),
        (9 | 10, _) => Err(format!("auth method {method} does not go with a {} key", key.describe())),
        (1, _) => {
            Err("RSA with SHA-1 (auth method 1) is refused: SHA-1 is broken; use RFC 7427 signatures (method 14)"
                .into())
        }
        _ => Err(format!("auth method {method} is not supported")),
    }
}
