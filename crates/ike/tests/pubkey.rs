//! Certificates and RFC 7427 signatures: round trips for every key type,
//! signatures made by openssl (committed by tests/certs/gen.sh) verified,
//! tern's signatures verified by openssl when it is installed, and every
//! way a peer's chain, identity or AUTH data can be wrong.

use std::net::IpAddr;
use std::path::PathBuf;
use tern_ike::auth::pubkey::{Credentials, hash_algorithms};
use tern_ike::auth::{AUTH_DIGITAL_SIGNATURE, AuthError};
use tern_ike::config::Identity;

/// 2027-01-15: inside every fixture's validity but the expired one's.
const NOW: u64 = 1_800_000_000;
const MSG: &[u8] = b"RealMessage1 | NonceR | prf(SK_pi, IDi')";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/certs")
}

fn file(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn creds(cert: &str, key: &str) -> Credentials {
    Credentials::load(&dir().join(cert), &dir().join(key), &[dir().join("ca.pem")])
        .unwrap_or_else(|e| panic!("{cert}: {e}"))
}

/// Every DER certificate of a PEM file.
fn ders(name: &str) -> Vec<Vec<u8>> {
    let data = file(name);
    x509_parser::pem::Pem::iter_from_buffer(&data).map(|p| p.expect("PEM").contents).collect()
}

fn fqdn(s: &str) -> Identity {
    Identity::Fqdn(s.into())
}

/// The DER AlgorithmIdentifiers of RFC 7427 Appendix A (written out here
/// independently of the crate's own constants).
const ALG_ECDSA_SHA256: &[u8] = &[0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const ALG_ECDSA_SHA384: &[u8] = &[0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
const ALG_RSA_SHA256: &[u8] =
    &[0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00];
const ALG_RSA_SHA1: &[u8] = &[0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05, 0x05, 0x00];
const ALG_ED25519: &[u8] = &[0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70];
/// RSASSA-PSS, SHA-256, MGF1 SHA-256, salt 32 (hash identifiers without
/// the NULL parameters, as some implementations send them).
const ALG_PSS_SHA256_NO_NULL: &[u8] = &[
    0x30, 0x3d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a, 0x30, 0x30, 0xa0, 0x0d, 0x30, 0x0b,
    0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0xa1, 0x1a, 0x30, 0x18, 0x06, 0x09, 0x2a, 0x86,
    0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08, 0x30, 0x0b, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02,
    0x01, 0xa2, 0x03, 0x02, 0x01, 0x20,
];

fn auth_data(alg: &[u8], sig: &[u8]) -> Vec<u8> {
    let mut d = vec![alg.len() as u8];
    d.extend_from_slice(alg);
    d.extend_from_slice(sig);
    d
}

/// (name, certificate file as sent, key file, identity, expected
/// AlgorithmIdentifier, PSS).
type Entity = (&'static str, &'static str, &'static str, &'static str, &'static [u8], bool);
const ENTITIES: &[Entity] = &[
    ("moon", "moon.pem", "moon.key", "moon.tern.test", ALG_ECDSA_SHA256, false),
    ("sun", "sun-chain.pem", "sun.key", "sun.tern.test", ALG_ECDSA_SHA384, false),
    ("venus", "venus-chain.pem", "venus.key", "venus.tern.test", ALG_RSA_SHA256, false),
    ("mars", "mars-chain.pem", "mars.key", "mars.tern.test", &[], true),
    ("pluto", "pluto-chain.pem", "pluto.key", "pluto.tern.test", ALG_ED25519, false),
];

#[test]
fn pubkey_sign_verify_round_trips() {
    let checker = creds("moon.pem", "moon.key");
    for &(name, cert, key, id, alg, pss) in ENTITIES {
        let me = creds(cert, key).with_rsa_pss(pss);
        let (method, data) = me.sign(MSG).unwrap();
        assert_eq!(method, AUTH_DIGITAL_SIGNATURE, "{name}");
        let len = data[0] as usize;
        if pss {
            assert_eq!(
                &data[3..14],
                &[0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a],
                "{name}: RSASSA-PSS OID"
            );
        } else {
            assert_eq!(&data[1..1 + len], alg, "{name}: AlgorithmIdentifier");
        }
        let peer =
            checker.verify(&me.certs(), &fqdn(id), NOW, method, &data, MSG).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(peer.der, me.certs()[0]);
        let Identity::Dn(subject) = me.identity() else { panic!("{name}: identity is not a DN") };
        assert_eq!(peer.subject, subject);
        assert_eq!(peer.subject_name(), format!("O=tern, CN={id}"));
        // The identity as a DN verifies too.
        checker.verify(&me.certs(), &me.identity(), NOW, method, &data, MSG).unwrap();
        // Other octets do not.
        let err = checker.verify(&me.certs(), &fqdn(id), NOW, method, &data, b"other octets").unwrap_err();
        assert!(matches!(&err, AuthError::Signature(m) if m.contains("does not verify")), "{name}: {err}");
    }
}

#[test]
fn pubkey_chain_sent_with_the_end_entity_is_what_the_cert_file_holds() {
    let sun = creds("sun-chain.pem", "sun.key");
    assert_eq!(sun.certs(), ders("sun-chain.pem"));
    assert_eq!(sun.certs().len(), 2);
    assert_eq!(creds("moon.pem", "moon.key").certs().len(), 1);
}

#[test]
fn pubkey_verifies_openssl_signatures() {
    let checker = creds("moon.pem", "moon.key");
    let msg = file("msg.bin");
    let cases: &[(&str, &str, &[u8])] = &[
        ("moon", "moon.pem", ALG_ECDSA_SHA256),
        ("sun", "sun-chain.pem", ALG_ECDSA_SHA384),
        ("venus", "venus-chain.pem", ALG_RSA_SHA256),
        ("mars", "mars-chain.pem", ALG_PSS_SHA256_NO_NULL),
        ("pluto", "pluto-chain.pem", ALG_ED25519),
    ];
    for &(name, cert, alg) in cases {
        let sig = file(&format!("msg.{name}.sig"));
        let id = fqdn(&format!("{name}.tern.test"));
        checker
            .verify(&ders(cert), &id, NOW, AUTH_DIGITAL_SIGNATURE, &auth_data(alg, &sig), &msg)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut bad = sig.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(checker.verify(&ders(cert), &id, NOW, AUTH_DIGITAL_SIGNATURE, &auth_data(alg, &bad), &msg).is_err());
    }
    // The PSS identifier tern itself sends (hash identifiers with NULL).
    let mars = creds("mars-chain.pem", "mars.key").with_rsa_pss(true);
    let (_, data) = mars.sign(b"x").unwrap();
    let alg = &data[1..1 + data[0] as usize];
    let sig = file("msg.mars.sig");
    checker.verify(&ders("mars-chain.pem"), &fqdn("mars.tern.test"), NOW, 14, &auth_data(alg, &sig), &msg).unwrap();
}

#[test]
fn pubkey_openssl_verifies_tern_signatures() {
    if std::process::Command::new("openssl").arg("version").output().is_err() {
        eprintln!(
            "openssl is not installed: skipped (the other direction is checked by pubkey_verifies_openssl_signatures)"
        );
        return;
    }
    let tmp = std::env::temp_dir().join(format!("tern-ike-pubkey-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let msg = tmp.join("msg");
    std::fs::write(&msg, MSG).unwrap();
    for &(name, cert, key, _, _, pss) in ENTITIES {
        let me = creds(cert, key).with_rsa_pss(pss);
        let (_, data) = me.sign(MSG).unwrap();
        let sig = tmp.join(format!("{name}.sig"));
        std::fs::write(&sig, &data[1 + data[0] as usize..]).unwrap();
        let pubkey = tmp.join(format!("{name}.pub"));
        let out = std::process::Command::new("openssl")
            .args(["x509", "-pubkey", "-noout", "-in"])
            .arg(dir().join(format!("{name}.pem")))
            .output()
            .unwrap();
        assert!(out.status.success());
        std::fs::write(&pubkey, &out.stdout).unwrap();
        let mut cmd = std::process::Command::new("openssl");
        match name {
            "pluto" => cmd
                .args(["pkeyutl", "-verify", "-rawin", "-pubin", "-inkey"])
                .arg(&pubkey)
                .arg("-in")
                .arg(&msg)
                .arg("-sigfile")
                .arg(&sig),
            _ => {
                let hash = if name == "sun" { "-sha384" } else { "-sha256" };
                cmd.args(["dgst", hash, "-verify"]).arg(&pubkey).arg("-signature").arg(&sig);
                if pss {
                    cmd.args(["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"]);
                }
                cmd.arg(&msg)
            }
        };
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{name}: openssl refused tern's signature: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn pubkey_classic_ecdsa_methods() {
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let checker = creds("moon.pem", "moon.key");
    let pkcs8 = x509_parser::pem::Pem::iter_from_buffer(&file("moon.key")).next().unwrap().unwrap().contents;
    let rng = ring::rand::SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng).unwrap();
    let sig = key.sign(&rng, MSG).unwrap();
    assert_eq!(sig.as_ref().len(), 64, "r | s");
    let certs = ders("moon.pem");
    let id = fqdn("moon.tern.test");
    checker.verify(&certs, &id, NOW, 9, sig.as_ref(), MSG).unwrap();
    let err = checker.verify(&certs, &id, NOW, 10, sig.as_ref(), MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Signature(m) if m.contains("does not go with a ECDSA P-256")), "{err}");
    let err = checker.verify(&certs, &id, NOW, 11, sig.as_ref(), MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Signature(m) if m.contains("P-521")), "{err}");
    let err = checker.verify(&certs, &id, NOW, 1, sig.as_ref(), MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Signature(m) if m.contains("SHA-1 is broken")), "{err}");
    assert_eq!(checker.verify(&certs, &id, NOW, 2, sig.as_ref(), MSG).unwrap_err(), AuthError::Method(2, 14));
}

/// A peer that announced no RFC 7427 hashes (or not the one a key signs
/// with) gets the classic methods: ECDSA P-256 / SHA-256 as method 9,
/// P-384 / SHA-384 as 10, r | s fixed width (RFC 4754), which the
/// verifying side checks with ring's fixed-format algorithms. RSA (whose
/// method 1 is SHA-1) and Ed25519 (no classic method) are refused with the
/// reason; with the hash announced, RFC 7427 as before.
#[test]
fn pubkey_signs_classic_methods_for_peers_without_rfc7427() {
    use tern_ike::auth::pubkey::{HASH_IDENTITY, HASH_SHA256, HASH_SHA384, HASH_SHA512, hash_mask};
    let bit = |h: u8| 1u8 << h;
    assert_eq!(hash_mask(&[0, 2, 0, 3, 0, 4, 0, 5]), bit(2) | bit(3) | bit(4) | bit(5));
    assert_eq!(hash_mask(&[0, 2, 1, 0, 0]), bit(2), "unknown numbers and an odd byte left out");
    assert_eq!(hash_mask(&[]), 0);
    for &(name, cert, key, id, _, pss) in ENTITIES {
        let me = creds(cert, key).with_rsa_pss(pss);
        let (certs, id) = (ders(cert), fqdn(id));
        let all = bit(HASH_SHA256) | bit(HASH_SHA384) | bit(HASH_SHA512) | bit(HASH_IDENTITY);
        let (method, data) = me.sign_for(MSG, all).unwrap();
        assert_eq!(method, 14, "{name}: RFC 7427 when announced");
        me.verify(&certs, &id, NOW, method, &data, MSG).unwrap();
        for mask in [0, bit(HASH_SHA512)] {
            match (name, me.sign_for(MSG, mask)) {
                ("moon", Ok((method, sig))) => {
                    assert_eq!((method, sig.len()), (9, 64), "{name}");
                    me.verify(&certs, &id, NOW, 9, &sig, MSG).unwrap();
                    assert!(me.verify(&certs, &id, NOW, 9, &sig, b"another message").is_err());
                }
                ("sun", Ok((method, sig))) => {
                    assert_eq!((method, sig.len()), (10, 96), "{name}");
                    me.verify(&certs, &id, NOW, 10, &sig, MSG).unwrap();
                }
                ("venus" | "mars", Err(AuthError::Signature(m))) => {
                    assert!(m.contains("SHA-1") && m.contains("RFC 8247"), "{name}: {m}")
                }
                ("pluto", Err(AuthError::Signature(m))) => assert!(m.contains("RFC 8420"), "{name}: {m}"),
                (_, other) => panic!("{name} with hashes {mask:#x}: {other:?}"),
            }
        }
    }
    // P-384 announced only SHA2-256: not its hash, the classic method.
    let sun = creds("sun-chain.pem", "sun.key");
    assert_eq!(sun.sign_for(MSG, bit(HASH_SHA256)).unwrap().0, 10);
    assert_eq!(sun.sign_for(MSG, bit(HASH_SHA384)).unwrap().0, 14);
}

fn moon_auth() -> (Credentials, Vec<u8>) {
    let moon = creds("moon.pem", "moon.key");
    let (_, data) = moon.sign(MSG).unwrap();
    (moon, data)
}

#[test]
fn pubkey_expired_and_not_yet_valid() {
    let checker = creds("moon.pem", "moon.key");
    let expired = creds("expired.pem", "expired.key");
    let (_, data) = expired.sign(MSG).unwrap();
    let err = checker.verify(&expired.certs(), &fqdn("expired.tern.test"), NOW, 14, &data, MSG).unwrap_err();
    assert_eq!(
        err,
        AuthError::Expired {
            subject: "O=tern, CN=expired.tern.test".into(),
            not_before: "2020-01-01 00:00:00 UTC".into(),
            not_after: "2021-01-01 00:00:00 UTC".into(),
        }
    );
    assert!(err.to_string().contains("certificate O=tern, CN=expired.tern.test is not valid now"), "{err}");
    // Within its validity, the CA (made in 2026) is not yet valid: every
    // certificate of the path counts.
    let err = checker.verify(&expired.certs(), &fqdn("expired.tern.test"), 1_600_000_000, 14, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Expired { subject, .. } if subject == "O=tern, CN=tern Test Root CA"), "{err}");
    // Before the (2026) fixtures were made: not yet valid.
    let (moon, data) = moon_auth();
    let err = checker.verify(&moon.certs(), &fqdn("moon.tern.test"), 1_000_000_000, 14, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Expired { subject, .. } if subject.contains("moon.tern.test")), "{err}");
    // An intermediate's validity counts too: sun's chain long after
    // everything expired names the first certificate found invalid.
    let sun = creds("sun-chain.pem", "sun.key");
    let (_, data) = sun.sign(MSG).unwrap();
    let err = checker.verify(&sun.certs(), &fqdn("sun.tern.test"), 6_000_000_000, 14, &data, MSG).unwrap_err();
    assert!(matches!(err, AuthError::Expired { .. }), "{err}");
}

#[test]
fn pubkey_untrusted_chains() {
    let checker = creds("moon.pem", "moon.key");
    // Signed by a CA nobody configured (same subject and SANs as moon).
    let evil =
        Credentials::load(&dir().join("evil.pem"), &dir().join("evil.key"), &[dir().join("evil-ca.pem")]).unwrap();
    let (_, data) = evil.sign(MSG).unwrap();
    let err = checker.verify(&evil.certs(), &fqdn("moon.tern.test"), NOW, 14, &data, MSG).unwrap_err();
    assert!(
        matches!(&err, AuthError::Untrusted(m) if m.contains("issuer O=tern, CN=Evil CA") && m.contains("not a configured CA")),
        "{err}"
    );
    // The evil CA sent along does not help: it is not configured.
    let mut with_ca = evil.certs();
    with_ca.extend(ders("evil-ca.pem"));
    let err = checker.verify(&with_ca, &fqdn("moon.tern.test"), NOW, 14, &data, MSG).unwrap_err();
    assert!(matches!(err, AuthError::Untrusted(_)), "{err}");
    // The intermediate left out.
    let sun = creds("sun-chain.pem", "sun.key");
    let (_, data) = sun.sign(MSG).unwrap();
    let err = checker.verify(&sun.certs()[..1], &fqdn("sun.tern.test"), NOW, 14, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Untrusted(m) if m.contains("ECDSA Intermediate")), "{err}");
    // Issued by an end entity (moon), which is no CA.
    let notca = creds("notca.pem", "notca.key");
    let (_, data) = notca.sign(MSG).unwrap();
    let mut chain = notca.certs();
    chain.extend(ders("moon.pem"));
    let err = checker.verify(&chain, &fqdn("notca.tern.test"), NOW, 14, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Untrusted(m) if m.contains("is not a CA")), "{err}");
    // An intermediate with the right subject but another key: its
    // signature on the end entity does not verify.
    let mut forged = sun.certs();
    forged[1] = ders("evil-ca.pem")[0].clone();
    let err = checker.verify(&forged, &fqdn("sun.tern.test"), NOW, 14, &data, MSG).unwrap_err();
    assert!(matches!(err, AuthError::Untrusted(_)), "{err}");
}

#[test]
fn pubkey_identities_each_kind() {
    let checker = creds("moon.pem", "moon.key");
    let (moon, data) = moon_auth();
    let certs = moon.certs();
    let ok = |id: Identity| checker.verify(&certs, &id, NOW, 14, &data, MSG).map(|_| ());
    ok(fqdn("moon.tern.test")).unwrap();
    ok(fqdn("MOON.Tern.Test")).unwrap();
    ok(Identity::Email("moon@tern.test".into())).unwrap();
    ok(Identity::Ip("192.0.2.1".parse().unwrap())).unwrap();
    ok(Identity::Ip("2001:db8::1".parse().unwrap())).unwrap();
    ok(moon.identity()).unwrap();
    let wrong: &[(Identity, &str)] = &[
        (fqdn("sun.tern.test"), "FQDN sun.tern.test"),
        (Identity::Email("sun@tern.test".into()), "email sun@tern.test"),
        (Identity::Ip("192.0.2.2".parse::<IpAddr>().unwrap()), "IP 192.0.2.2"),
        (Identity::Ip("2001:db8::2".parse::<IpAddr>().unwrap()), "IP 2001:db8::2"),
        (creds("sun-chain.pem", "sun.key").identity(), "DN \"O=tern, CN=sun.tern.test\""),
        (Identity::KeyId(b"moon".to_vec()), "ID_KEY_ID"),
        (Identity::Dn(b"garbage".to_vec()), "do not parse"),
        // The CN is not a subjectAltName.
        (fqdn("tern.test"), "DNS:moon.tern.test"),
    ];
    for (id, words) in wrong {
        let err = ok(id.clone()).unwrap_err();
        assert!(matches!(&err, AuthError::Identity(m) if m.contains(words)), "{id:?}: {err}");
    }
}

#[test]
fn pubkey_tampered_and_truncated_auth_data() {
    let checker = creds("moon.pem", "moon.key");
    let (moon, data) = moon_auth();
    let (certs, id) = (moon.certs(), fqdn("moon.tern.test"));
    for i in 0..data.len() {
        let mut bad = data.clone();
        bad[i] ^= 0x80;
        assert!(checker.verify(&certs, &id, NOW, 14, &bad, MSG).is_err(), "byte {i} flipped");
    }
    for len in 0..data.len() {
        let err = checker.verify(&certs, &id, NOW, 14, &data[..len], MSG).unwrap_err();
        assert!(matches!(err, AuthError::Signature(_)), "{len}: {err}");
    }
    let err = checker.verify(&certs, &id, NOW, 14, &[], MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Signature(m) if m.contains("truncated")), "{err}");
    // An AlgorithmIdentifier that is not one.
    let err = checker.verify(&certs, &id, NOW, 14, &auth_data(b"\x30\x03\x01\x02\x03", &data[13..]), MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Signature(m) if m.contains("does not parse")), "{err}");
    // The right signature under another algorithm's name.
    let sig = &data[1 + data[0] as usize..];
    for (alg, words) in
        [(ALG_RSA_SHA256, "does not go with"), (ALG_ED25519, "does not go with"), (ALG_RSA_SHA1, "SHA-1")]
    {
        let err = checker.verify(&certs, &id, NOW, 14, &auth_data(alg, sig), MSG).unwrap_err();
        assert!(matches!(&err, AuthError::Signature(m) if m.contains(words)), "{err}");
    }
    // SHA-384 with the P-256 key is a valid combination, but not what
    // signed: it does not verify.
    let err = checker.verify(&certs, &id, NOW, 14, &auth_data(ALG_ECDSA_SHA384, sig), MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Signature(m) if m.contains("does not verify")), "{err}");
}

#[test]
fn pubkey_garbage_certificates() {
    let checker = creds("moon.pem", "moon.key");
    let (moon, data) = moon_auth();
    let id = fqdn("moon.tern.test");
    assert_eq!(checker.verify(&[], &id, NOW, 14, &data, MSG).unwrap_err(), AuthError::NoCertificate);
    let der = moon.certs()[0].clone();
    for len in 0..der.len() {
        let err = checker.verify(&[der[..len].to_vec()], &id, NOW, 14, &data, MSG).unwrap_err();
        assert!(matches!(&err, AuthError::Certificate(m) if m.contains("certificate 1")), "{len}: {err}");
    }
    let mut trailing = der.clone();
    trailing.push(0);
    let err = checker.verify(&[trailing], &id, NOW, 14, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Certificate(m) if m.contains("trailing")), "{err}");
    // Any byte of the certificate changed: an error (the signature on it
    // or its parse fails), never a panic, never accepted.
    for i in 0..der.len() {
        let mut bad = der.clone();
        bad[i] ^= 0x01;
        assert!(checker.verify(&[bad], &id, NOW, 14, &data, MSG).is_err(), "byte {i}");
    }
    let err = checker.verify(&vec![der.clone(); 9], &id, NOW, 14, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Certificate(m) if m.contains("at most 8")), "{err}");
    // A garbage intermediate after a good end entity is named.
    let err = checker.verify(&[der, b"junk".to_vec()], &id, NOW, 14, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Certificate(m) if m.contains("certificate 2 does not parse")), "{err}");
}

#[test]
fn pubkey_weak_rsa_refused() {
    let err = Credentials::load(&dir().join("weak.pem"), &dir().join("weak.key"), &[dir().join("ca.pem")]).unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("weak.pem") && m.contains("1024 bits")), "{err}");
    // In a peer's certificate (the signature does not matter: refused before).
    let checker = creds("moon.pem", "moon.key");
    let err = checker
        .verify(&ders("weak.pem"), &fqdn("weak.tern.test"), NOW, 14, &auth_data(ALG_RSA_SHA256, &[0; 128]), MSG)
        .unwrap_err();
    assert!(matches!(&err, AuthError::Certificate(m) if m.contains("1024 bits")), "{err}");
}

#[test]
fn pubkey_key_files() {
    let ca = [dir().join("ca.pem")];
    let load = |c: &str, k: &str| Credentials::load(&dir().join(c), &dir().join(k), &ca);
    // SEC1 and PKCS#1 keys load and sign like their PKCS#8 forms.
    let checker = creds("moon.pem", "moon.key");
    for (cert, key, id) in
        [("moon.pem", "moon.sec1.key", "moon.tern.test"), ("venus-chain.pem", "venus.pkcs1.key", "venus.tern.test")]
    {
        let me = load(cert, key).unwrap_or_else(|e| panic!("{key}: {e}"));
        let (m, data) = me.sign(MSG).unwrap();
        checker.verify(&me.certs(), &fqdn(id), NOW, m, &data, MSG).unwrap();
    }
    // Another certificate's key.
    let err = load("moon.pem", "notca.key").unwrap_err();
    assert!(
        matches!(&err, AuthError::Config(m) if m.contains("notca.key") && m.contains("not the private key")),
        "{err}"
    );
    let err = load("moon.pem", "sun.key").unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("sun.key") && m.contains("ECDSA P-256")), "{err}");
    let err = load("moon.pem", "venus.pkcs1.key").unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("RSA PRIVATE KEY")), "{err}");
    // Missing, empty, encrypted, not a key.
    let err = load("moon.pem", "nonexistent.key").unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("nonexistent.key")), "{err}");
    let err = load("moon.key", "moon.key").unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("no CERTIFICATE")), "{err}");
    let from = |key: &[u8]| {
        Credentials::from_bytes(("moon.pem", &file("moon.pem")), ("k", key), &[("ca.pem", &file("ca.pem"))])
    };
    let err = from(b"").unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("empty")), "{err}");
    let err = from(b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n").unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("encrypted")), "{err}");
    let err = from(b"-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n").unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("PEM")), "{err}");
    assert!(from(b"\x30\x03\x02\x01\x00").is_err());
    // A SEC1 key without its public half cannot be used by ring.
    let err = from(b"-----BEGIN EC PRIVATE KEY-----\nMDECAQEEIAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8goAoGCCqGSM49AwEH\n-----END EC PRIVATE KEY-----\n").unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("openssl pkcs8 -topk8 -nocrypt")), "{err}");
    // CAs: must be CAs, at least one.
    let err =
        Credentials::load(&dir().join("moon.pem"), &dir().join("moon.key"), &[dir().join("sun.pem")]).unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("sun.pem") && m.contains("not a CA")), "{err}");
    let err = Credentials::load(&dir().join("moon.pem"), &dir().join("moon.key"), &[]).unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("no CA")), "{err}");
}

#[test]
fn pubkey_certreq_and_hash_algorithms() {
    use sha1::{Digest, Sha1};
    let two = Credentials::load(
        &dir().join("moon.pem"),
        &dir().join("moon.key"),
        &[dir().join("ca.pem"), dir().join("evil-ca.pem")],
    )
    .unwrap();
    let mut want = Vec::new();
    for f in ["ca.pem", "evil-ca.pem"] {
        let der = &ders(f)[0];
        let (_, c) = x509_parser::parse_x509_certificate(der).unwrap();
        want.extend_from_slice(&Sha1::digest(c.public_key().raw));
    }
    assert_eq!(two.certreq(), want);
    assert_eq!(two.certreq().len(), 40);
    assert_eq!(hash_algorithms(), vec![2, 3, 4, 5]);
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn pubkey_arbitrary_input_is_an_error_not_a_panic(
            cert in proptest::collection::vec(any::<u8>(), 0..600),
            auth in proptest::collection::vec(any::<u8>(), 0..200),
            method in any::<u8>(),
        ) {
            let checker = creds("moon.pem", "moon.key");
            prop_assert!(checker.verify(&[cert], &fqdn("moon.tern.test"), NOW, method, &auth, MSG).is_err());
            let moon = checker.certs();
            prop_assert!(checker.verify(&moon, &fqdn("moon.tern.test"), NOW, method, &auth, MSG).is_err());
        }
    }
}

#[test]
fn pubkey_chain_depth_and_path_length() {
    let checker = creds("moon.pem", "moon.key");
    // The end entity and three intermediates: as deep as tern goes.
    let ok = creds("deep4-ee-chain.pem", "deep4-ee.key");
    let (m, data) = ok.sign(MSG).unwrap();
    assert_eq!(ok.certs().len(), 4);
    checker.verify(&ok.certs(), &fqdn("deep4-ee.tern.test"), NOW, m, &data, MSG).unwrap();
    // In any order after the end entity.
    let mut shuffled = ok.certs();
    shuffled[1..].reverse();
    checker.verify(&shuffled, &fqdn("deep4-ee.tern.test"), NOW, m, &data, MSG).unwrap();
    // Four intermediates: one too many.
    let deep = creds("deep5-chain.pem", "deep5.key");
    let (m, data) = deep.sign(MSG).unwrap();
    let err = checker.verify(&deep.certs(), &fqdn("deep5.tern.test"), NOW, m, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Untrusted(m) if m.contains("within 4 certificates")), "{err}");
    // A CA below one with pathlen:0.
    let plen = creds("plen-ee-chain.pem", "plen-ee.key");
    let (m, data) = plen.sign(MSG).unwrap();
    let err = checker.verify(&plen.certs(), &fqdn("plen-ee.tern.test"), NOW, m, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Untrusted(m) if m.contains("Path Length 0 allows 0 intermediates")), "{err}");
}

#[test]
fn pubkey_ca_directory() {
    let tmp = std::env::temp_dir().join(format!("tern-ike-cadir-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let load = || Credentials::load(&dir().join("moon.pem"), &dir().join("moon.key"), std::slice::from_ref(&tmp));
    let err = load().unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("no certificate files")), "{err}");
    std::fs::write(tmp.join("README"), "not a certificate").unwrap();
    std::fs::copy(dir().join("ca.pem"), tmp.join("root.crt")).unwrap();
    std::fs::copy(dir().join("evil-ca.pem"), tmp.join("evil.pem")).unwrap();
    let two = load().unwrap();
    assert_eq!(two.certreq().len(), 40, "both CAs of the directory, not the README");
    let (moon, data) = moon_auth();
    two.verify(&moon.certs(), &fqdn("moon.tern.test"), NOW, 14, &data, MSG).unwrap();
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// A DER Name of one-attribute RDNs: (attribute OID's last arc under
/// 2.5.4, string tag, value).
fn dn(rdns: &[(u8, u8, &str)]) -> Vec<u8> {
    let mut seq = Vec::new();
    for &(arc, tag, value) in rdns {
        let atv = [tlv(0x06, &[0x55, 0x04, arc]), tlv(tag, value.as_bytes())].concat();
        seq.extend(tlv(0x31, &tlv(0x30, &atv)));
    }
    tlv(0x30, &seq)
}

#[test]
fn pubkey_dn_identity_by_structure() {
    const O: u8 = 10;
    const CN: u8 = 3;
    const UTF8: u8 = 0x0c;
    const PRINTABLE: u8 = 0x13;
    let checker = creds("moon.pem", "moon.key");
    let (moon, data) = moon_auth();
    let verify = |id: Vec<u8>| checker.verify(&moon.certs(), &Identity::Dn(id), NOW, 14, &data, MSG);
    // The subject's own DER (openssl wrote UTF8Strings).
    let same = dn(&[(O, UTF8, "tern"), (CN, UTF8, "moon.tern.test")]);
    assert_eq!(Identity::Dn(same.clone()), moon.identity());
    verify(same).unwrap();
    // The same name in PrintableStrings.
    verify(dn(&[(O, PRINTABLE, "tern"), (CN, PRINTABLE, "moon.tern.test")])).unwrap();
    // Reads the same as text ("O=tern, CN=moon.tern.test") but is one
    // attribute: refused.
    let forged = dn(&[(O, UTF8, "tern, CN=moon.tern.test")]);
    {
        use x509_parser::prelude::FromDer;
        let (_, name) = x509_parser::x509::X509Name::from_der(&forged).unwrap();
        assert_eq!(name.to_string(), "O=tern, CN=moon.tern.test", "the forgery reads like the subject");
    }
    let err = verify(forged).unwrap_err();
    assert!(matches!(err, AuthError::Identity(_)), "{err}");
    // Other order, other value, one more RDN.
    for id in [
        dn(&[(CN, UTF8, "moon.tern.test"), (O, UTF8, "tern")]),
        dn(&[(O, UTF8, "tern"), (CN, UTF8, "MOON.tern.test")]),
        dn(&[(O, UTF8, "tern"), (CN, UTF8, "moon.tern.test"), (CN, UTF8, "x")]),
    ] {
        assert!(matches!(verify(id), Err(AuthError::Identity(_))));
    }
}

/// A short-form DER element.
fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
    assert!(body.len() < 128);
    let mut v = vec![tag, body.len() as u8];
    v.extend_from_slice(body);
    v
}

/// RSASSA-PSS's AlgorithmIdentifier: the hash (last arc under
/// 2.16.840.1.101.3.4.2: 1 SHA-256, 2 SHA-384, 3 SHA-512) for the digest
/// and MGF1, and the salt length.
fn pss(hash_arc: u8, salt: u8) -> Vec<u8> {
    const PSS: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a];
    const MGF1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08];
    let hash =
        tlv(0x30, &[tlv(0x06, &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, hash_arc]), vec![0x05, 0x00]].concat());
    let mgf = tlv(0x30, &[tlv(0x06, MGF1), hash.clone()].concat());
    let params = tlv(0x30, &[tlv(0xa0, &hash), tlv(0xa1, &mgf), tlv(0xa2, &tlv(0x02, &[salt]))].concat());
    tlv(0x30, &[tlv(0x06, PSS), params].concat())
}

#[test]
fn pubkey_verifies_other_hashes_openssl_made() {
    let checker = creds("moon.pem", "moon.key");
    let msg = file("msg.bin");
    let ecdsa_sha384 = ALG_ECDSA_SHA384.to_vec();
    let rsa_sha512 = [&ALG_RSA_SHA256[..12], &[0x0d, 0x05, 0x00]].concat();
    let cases = [
        ("moon-sha384", "moon.pem", "moon", ecdsa_sha384),
        ("venus-sha512", "venus-chain.pem", "venus", rsa_sha512),
        ("mars-sha512", "mars-chain.pem", "mars", pss(3, 64)),
        // The RFC 7427 example's form with SHA-256 (built, not copied).
        ("mars", "mars-chain.pem", "mars", pss(1, 32)),
    ];
    for (sig, cert, name, alg) in cases {
        let auth = auth_data(&alg, &file(&format!("msg.{sig}.sig")));
        checker
            .verify(&ders(cert), &fqdn(&format!("{name}.tern.test")), NOW, 14, &auth, &msg)
            .unwrap_or_else(|e| panic!("{sig}: {e}"));
    }
    // A PSS salt other than the hash's length: refused by name, whether
    // the signature was made with it or not.
    for sig in ["mars-salt20", "mars"] {
        let auth = auth_data(&pss(1, 20), &file(&format!("msg.{sig}.sig")));
        let err = checker.verify(&ders("mars-chain.pem"), &fqdn("mars.tern.test"), NOW, 14, &auth, &msg).unwrap_err();
        assert!(matches!(&err, AuthError::Signature(m) if m.contains("20-byte salt")), "{err}");
    }
    // MGF1 over another hash than the digest's.
    let mut mixed = pss(1, 32);
    let at = mixed.len() - 8; // the MGF1 hash OID's last arc, before NULL and [2]
    assert_eq!(mixed[at], 0x01);
    mixed[at] = 0x03;
    let auth = auth_data(&mixed, &file("msg.mars.sig"));
    let err = checker.verify(&ders("mars-chain.pem"), &fqdn("mars.tern.test"), NOW, 14, &auth, &msg).unwrap_err();
    assert!(matches!(&err, AuthError::Signature(m) if m.contains("mask generation")), "{err}");
}

#[test]
fn pubkey_credentials_are_shared_across_engine_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Credentials>();
    let moon = std::sync::Arc::new(creds("moon.pem", "moon.key"));
    let (_, data) = moon.sign(MSG).unwrap();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (moon, data) = (moon.clone(), data.clone());
            std::thread::spawn(move || moon.verify(&moon.certs(), &fqdn("moon.tern.test"), NOW, 14, &data, MSG).is_ok())
        })
        .collect();
    for t in threads {
        assert!(t.join().unwrap());
    }
}

#[test]
fn pubkey_der_files() {
    // strongSwan's pki writes DER by default: certificates, SEC1 EC keys,
    // PKCS#1 RSA keys. The fixtures' PEM bodies are those DERs.
    let tmp = std::env::temp_dir().join(format!("tern-ike-der-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let der = |pem: &str| {
        let path = tmp.join(format!("{pem}.der"));
        let body = x509_parser::pem::Pem::iter_from_buffer(&file(pem)).next().unwrap().unwrap().contents;
        std::fs::write(&path, body).unwrap();
        path
    };
    let ca = der("ca.pem");
    let checker = creds("moon.pem", "moon.key");
    for (cert, key, id) in [
        ("moon.pem", "moon.key", "moon.tern.test"),
        ("moon.pem", "moon.sec1.key", "moon.tern.test"),
        ("pluto.pem", "pluto.key", "pluto.tern.test"),
        ("venus.pem", "venus.pkcs1.key", "venus.tern.test"),
        ("venus.pem", "venus.key", "venus.tern.test"),
    ] {
        let me = Credentials::load(&der(cert), &der(key), std::slice::from_ref(&ca))
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        let (m, data) = me.sign(MSG).unwrap();
        // pluto and venus need their intermediates, which the DER file
        // (one certificate) cannot hold: sent along here.
        let mut certs = me.certs();
        if cert != "moon.pem" {
            certs.extend(ders(&format!("{}-chain.pem", cert.trim_end_matches(".pem")))[1..].to_vec());
        }
        checker.verify(&certs, &fqdn(id), NOW, m, &data, MSG).unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    // A DER key of the wrong type for the certificate.
    let err = Credentials::load(&der("moon.pem"), &der("venus.key"), std::slice::from_ref(&ca)).unwrap_err();
    assert!(matches!(&err, AuthError::Config(m) if m.contains("venus.key.der") && m.contains("ECDSA P-256")), "{err}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn pubkey_signature_cache() {
    let checker = creds("moon.pem", "moon.key");
    assert_eq!(checker.cached_signatures(), 0);
    let (moon, data) = moon_auth();
    let id = fqdn("moon.tern.test");
    checker.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap();
    assert_eq!(checker.cached_signatures(), 1, "root -> moon");
    checker.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap();
    assert_eq!(checker.cached_signatures(), 1, "the same signature again");
    // With moon's signature cached, no changed byte of its certificate
    // passes (the cache is keyed by the signed data, signature and key).
    let der = moon.certs()[0].clone();
    for i in 0..der.len() {
        let mut bad = der.clone();
        bad[i] ^= 0x01;
        assert!(checker.verify(&[bad], &id, NOW, 14, &data, MSG).is_err(), "byte {i}");
    }
    // Validity is still checked on a hit.
    let err = checker.verify(&moon.certs(), &id, 1_000_000_000, 14, &data, MSG).unwrap_err();
    assert!(matches!(err, AuthError::Expired { .. }), "{err}");
    // So are the identity and the AUTH signature.
    assert!(matches!(
        checker.verify(&moon.certs(), &fqdn("x.tern.test"), NOW, 14, &data, MSG),
        Err(AuthError::Identity(_))
    ));
    assert!(matches!(checker.verify(&moon.certs(), &id, NOW, 14, &data, b"other"), Err(AuthError::Signature(_))));
    // Two more for sun's chain (intermediate -> sun, root -> intermediate).
    let sun = creds("sun-chain.pem", "sun.key");
    let (_, sdata) = sun.sign(MSG).unwrap();
    checker.verify(&sun.certs(), &fqdn("sun.tern.test"), NOW, 14, &sdata, MSG).unwrap();
    assert_eq!(checker.cached_signatures(), 3);
    // Off, and bounded.
    let off = creds("moon.pem", "moon.key").with_signature_cache(0);
    off.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap();
    assert_eq!(off.cached_signatures(), 0);
    let one = creds("moon.pem", "moon.key").with_signature_cache(1);
    one.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap();
    one.verify(&sun.certs(), &fqdn("sun.tern.test"), NOW, 14, &sdata, MSG).unwrap();
    assert_eq!(one.cached_signatures(), 1);
    one.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap();
}

/// notBefore and notAfter (Unix seconds) of a PEM file's first certificate.
fn validity(name: &str) -> (u64, u64) {
    use x509_parser::prelude::FromDer;
    let der = &ders(name)[0];
    let (_, c) = x509_parser::certificate::X509Certificate::from_der(der).expect("parses");
    let v = c.validity();
    (v.not_before.timestamp() as u64, v.not_after.timestamp() as u64)
}

#[test]
fn pubkey_chain_cache() {
    let checker = creds("moon.pem", "moon.key");
    let (moon, data) = moon_auth();
    let id = fqdn("moon.tern.test");
    assert_eq!(checker.cached_chains(), 0);
    checker.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap();
    assert_eq!(checker.cached_chains(), 1);
    let peer = checker.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap();
    assert_eq!(checker.cached_chains(), 1, "a hit");
    assert_eq!(peer.subject_name(), "O=tern, CN=moon.tern.test");
    // On a hit the AUTH signature is still checked, every time.
    let err = checker.verify(&moon.certs(), &id, NOW, 14, &data, b"another message").unwrap_err();
    assert!(matches!(&err, AuthError::Signature(m) if m.contains("does not verify")), "{err}");
    let mut bad = data.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(matches!(checker.verify(&moon.certs(), &id, NOW, 14, &bad, MSG), Err(AuthError::Signature(_))));
    // And the identity.
    let err = checker.verify(&moon.certs(), &fqdn("sun.tern.test"), NOW, 14, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Identity(m) if m.contains("FQDN sun.tern.test")), "{err}");
    // The window of the path is every certificate's, the CA's included:
    // moon is valid a second longer than the root CA, and at that second
    // the cached chain is not used and the CA named.
    let (ca_from, ca_until) = validity("ca.pem");
    let (moon_from, moon_until) = validity("moon.pem");
    assert!(moon_from > ca_from && moon_until > ca_until, "the fixtures' dates");
    checker.verify(&moon.certs(), &id, ca_until, 14, &data, MSG).unwrap();
    checker.verify(&moon.certs(), &id, moon_from, 14, &data, MSG).unwrap();
    let err = checker.verify(&moon.certs(), &id, moon_until, 14, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Expired { subject, .. } if subject == "O=tern, CN=tern Test Root CA"), "{err}");
    let err = checker.verify(&moon.certs(), &id, moon_from - 1, 14, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Expired { subject, .. } if subject.contains("moon.tern.test")), "{err}");
    assert_eq!(checker.cached_chains(), 1, "failures are not kept");
    // An expired certificate never enters, and stays refused.
    let expired = creds("expired.pem", "expired.key");
    let (_, edata) = expired.sign(MSG).unwrap();
    for _ in 0..2 {
        let err = checker.verify(&expired.certs(), &fqdn("expired.tern.test"), NOW, 14, &edata, MSG).unwrap_err();
        assert!(matches!(err, AuthError::Expired { .. }), "{err}");
    }
    // Untrusted: the same subject and names as moon from another CA, with
    // moon's chain cached; and that CA sent along.
    let evil =
        Credentials::load(&dir().join("evil.pem"), &dir().join("evil.key"), &[dir().join("evil-ca.pem")]).unwrap();
    let (_, vdata) = evil.sign(MSG).unwrap();
    let mut with_ca = evil.certs();
    with_ca.extend(ders("evil-ca.pem"));
    for certs in [evil.certs(), with_ca] {
        for _ in 0..2 {
            let err = checker.verify(&certs, &id, NOW, 14, &vdata, MSG).unwrap_err();
            assert!(matches!(err, AuthError::Untrusted(_)), "{err}");
        }
    }
    // moon's own chain with an extra certificate is another entry.
    let mut extra = moon.certs();
    extra.extend(ders("ecdsa-int.pem"));
    checker.verify(&extra, &id, NOW, 14, &data, MSG).unwrap();
    assert_eq!(checker.cached_chains(), 2);
    // The cache is the checker's: one trusting only the evil CA does not
    // take moon, however often moon was accepted elsewhere.
    let err = evil.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap_err();
    assert!(matches!(err, AuthError::Untrusted(_)), "{err}");
    // Off, and bounded (emptied when full).
    let off = creds("moon.pem", "moon.key").with_signature_cache(0);
    off.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap();
    assert_eq!(off.cached_chains(), 0);
    let sun = creds("sun-chain.pem", "sun.key");
    let (_, sdata) = sun.sign(MSG).unwrap();
    let one = creds("moon.pem", "moon.key").with_signature_cache(1);
    one.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap();
    one.verify(&sun.certs(), &fqdn("sun.tern.test"), NOW, 14, &sdata, MSG).unwrap();
    assert_eq!(one.cached_chains(), 1);
    one.verify(&moon.certs(), &id, NOW, 14, &data, MSG).unwrap();
}

#[test]
fn pubkey_critical_extensions_and_name_constraints() {
    let checker = creds("moon.pem", "moon.key");
    let critical = creds("critical.pem", "critical.key");
    let (m, data) = critical.sign(MSG).unwrap();
    let err = checker.verify(&critical.certs(), &fqdn("critical.tern.test"), NOW, m, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Certificate(m) if m.contains("critical extension 1.3.6.1.4.1.99999.1")), "{err}");
    // Name constraints on the intermediate (the same verdicts as openssl
    // verify gives): nc-ee keeps to them.
    let nc = creds("nc-ee-chain.pem", "nc-ee.key");
    let (m, data) = nc.sign(MSG).unwrap();
    checker.verify(&nc.certs(), &fqdn("nc-ee.tern.test"), NOW, m, &data, MSG).unwrap();
    for (name, words) in [
        ("nc-out", "DNS:nc-out.example is not within the permitted names"),
        ("nc-bad", "DNS:x.bad.tern.test is excluded by DNS:bad.tern.test"),
        ("nc-ip", "IP:198.51.100.1 is not within the permitted names"),
    ] {
        let me = creds(&format!("{name}-chain.pem"), &format!("{name}.key"));
        let (m, data) = me.sign(MSG).unwrap();
        let err = checker.verify(&me.certs(), &fqdn(&format!("{name}.tern.test")), NOW, m, &data, MSG).unwrap_err();
        assert!(
            matches!(&err, AuthError::Untrusted(m) if m.contains(words) && m.contains("name constraints of O=tern, CN=tern Test Name Constraints")),
            "{name}: {err}"
        );
    }
    // The same constraints on a configured CA (a trust anchor) hold too.
    let anchored =
        Credentials::load(&dir().join("moon.pem"), &dir().join("moon.key"), &[dir().join("nc-int.pem")]).unwrap();
    let out = creds("nc-out-chain.pem", "nc-out.key");
    let (m, data) = out.sign(MSG).unwrap();
    let err = anchored.verify(&out.certs()[..1], &fqdn("nc-out.tern.test"), NOW, m, &data, MSG).unwrap_err();
    assert!(matches!(&err, AuthError::Untrusted(m) if m.contains("not within the permitted names")), "{err}");
    let (m, data) = nc.sign(MSG).unwrap();
    anchored.verify(&nc.certs()[..1], &fqdn("nc-ee.tern.test"), NOW, m, &data, MSG).unwrap();
}

/// The chain cache's counters: a miss then hits; when full it is emptied
/// and the entries dropped count as evictions; size 0 keeps nothing and
/// checks every chain in full (misses).
#[test]
fn pubkey_chain_cache_counts() {
    let (moon, mdata) = moon_auth();
    let sun = creds("sun-chain.pem", "sun.key");
    let (_, sdata) = sun.sign(MSG).unwrap();
    let checker = creds("moon.pem", "moon.key").with_signature_cache(1);
    let verify = |c: &Credentials| {
        c.verify(&moon.certs(), &fqdn("moon.tern.test"), NOW, 14, &mdata, MSG).unwrap();
    };
    verify(&checker);
    verify(&checker);
    verify(&checker);
    let s = checker.chain_cache_stats();
    assert_eq!((s.entries, s.capacity, s.hits, s.misses, s.evictions), (1, 1, 2, 1, 0));
    checker.verify(&sun.certs(), &fqdn("sun.tern.test"), NOW, 14, &sdata, MSG).unwrap();
    let s = checker.chain_cache_stats();
    assert_eq!((s.entries, s.hits, s.misses, s.evictions), (1, 2, 2, 1), "moon's entry made room for sun's");
    verify(&checker);
    assert_eq!(checker.chain_cache_stats().misses, 3, "moon was evicted");
    let off = creds("moon.pem", "moon.key").with_signature_cache(0);
    verify(&off);
    verify(&off);
    let s = off.chain_cache_stats();
    assert_eq!((s.entries, s.capacity, s.hits, s.misses), (0, 0, 0, 2));
}
