//! The peer's chain (RFC 5280 6, the parts IKE needs): from the end
//! entity up through the intermediates the peer sent to one of the
//! configured CAs, by issuer/subject and signature; each certificate valid
//! at `now`; issuers are CAs; at most [`MAX_DEPTH`] certificates below the
//! CA; their name constraints on the end entity's names. And whether
//! the end entity names the peer's identity (RFC 4945
//! 3.1: the ID is the subject DN or a subjectAltName of the same kind).

use super::algorithm::{PublicKey, verification_algorithm};
use super::constraints;
use crate::auth::AuthError;
use crate::config::Identity;
use x509_parser::asn1_rs::{Any, Class, Tag};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;
use x509_parser::x509::X509Name;

/// Certificates in a path below the CA: the end entity and at most three
/// intermediates.
pub const MAX_DEPTH: usize = 4;

/// A configured CA, parsed once at load.
#[derive(Clone, Debug)]
pub struct Anchor {
    /// Kept for its name constraints, parsed when a path ends here.
    pub der: Vec<u8>,
    pub constrains: bool,
    /// The subject Name's DER, which issuers are matched by.
    pub subject: Vec<u8>,
    pub name: String,
    pub key: PublicKey,
    pub spki: Vec<u8>,
    pub not_before: i64,
    pub not_after: i64,
}

impl Anchor {
    /// `der` as a CA: it must parse, say CA:TRUE and carry a key tern
    /// verifies with.
    pub fn new(der: &[u8]) -> Result<Anchor, String> {
        let (_, cert) = X509Certificate::from_der(der).map_err(|e| format!("it does not parse ({e})"))?;
        let name = cert.subject().to_string();
        if !is_ca(&cert) {
            return Err(format!("{name} is not a CA (no basicConstraints CA:TRUE)"));
        }
        let key = PublicKey::from_spki(cert.public_key()).map_err(|e| format!("{name}: {e}"))?;
        Ok(Anchor {
            der: der.to_vec(),
            constrains: constraints::of(&cert).is_some(),
            subject: cert.subject().as_raw().to_vec(),
            name,
            key,
            spki: cert.public_key().raw.to_vec(),
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
        })
    }
}

fn is_ca(cert: &X509Certificate) -> bool {
    matches!(cert.basic_constraints(), Ok(Some(bc)) if bc.value.ca)
}

/// "2024-01-01 00:00:00 UTC" (proleptic Gregorian, from Unix seconds).
pub fn date(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem / 60 % 60, rem % 60)
}

fn check_validity(name: &str, not_before: i64, not_after: i64, now: i64) -> Result<(), AuthError> {
    if now < not_before || now > not_after {
        return Err(AuthError::Expired {
            subject: name.to_string(),
            not_before: date(not_before),
            not_after: date(not_after),
        });
    }
    Ok(())
}

/// Extensions tern must understand to accept a certificate (RFC 5280
/// 4.2: an unrecognised critical extension fails the certificate), and
/// key usage fit for the certificate's place in the chain.
fn check_extensions(cert: &X509Certificate, name: &str, issuer: bool) -> Result<(), AuthError> {
    for ext in cert.extensions() {
        match ext.parsed_extension() {
            ParsedExtension::UnsupportedExtension { .. } | ParsedExtension::ParseError { .. } if ext.critical => {
                return Err(AuthError::Certificate(format!(
                    "{name} has a critical extension {} tern does not understand",
                    ext.oid
                )));
            }
            ParsedExtension::KeyUsage(ku) if issuer && !ku.key_cert_sign() => {
                return Err(AuthError::Untrusted(format!("{name} may not sign certificates (keyUsage)")));
            }
            ParsedExtension::KeyUsage(ku) if !issuer && !ku.digital_signature() && !ku.non_repudiation() => {
                return Err(AuthError::Certificate(format!("{name} may not make signatures (keyUsage)")));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Issuer signatures already checked, as strongSwan's cert_cache keeps
/// them: a peer that reconnects or re-authenticates, or many tunnels from
/// one certificate, cost one chain verification. Keyed by a SHA-256 over
/// the signed data, the signature and the issuer's key, so a hit is the
/// very check that passed; only successes are kept. Bounded: when full it
/// is emptied (a few misses, no policy to get wrong).
pub struct SignatureCache {
    seen: std::sync::Mutex<std::collections::HashSet<[u8; 32]>>,
    capacity: usize,
}

impl SignatureCache {
    pub fn new(capacity: usize) -> SignatureCache {
        SignatureCache { seen: std::sync::Mutex::new(std::collections::HashSet::new()), capacity }
    }

    pub fn len(&self) -> usize {
        self.seen.lock().map(|s| s.len()).unwrap_or(0)
    }

    fn key(cert: &X509Certificate, key: &PublicKey) -> [u8; 32] {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for part in [cert.tbs_certificate.as_ref(), &cert.signature_value.data, key.bytes()] {
            ctx.update(&(part.len() as u64).to_be_bytes());
            ctx.update(part);
        }
        let mut out = [0; 32];
        out.copy_from_slice(ctx.finish().as_ref());
        out
    }

    // A poisoned lock (a panic elsewhere while holding it) only costs hits.
    fn contains(&self, k: &[u8; 32]) -> bool {
        self.capacity > 0 && self.seen.lock().is_ok_and(|s| s.contains(k))
    }

    fn insert(&self, k: [u8; 32]) {
        if self.capacity == 0 {
            return;
        }
        if let Ok(mut s) = self.seen.lock() {
            if s.len() >= self.capacity {
                s.clear();
            }
            s.insert(k);
        }
    }
}

fn check_signature(
    cert: &X509Certificate,
    name: &str,
    key: &PublicKey,
    issuer: &str,
    cache: &SignatureCache,
) -> Result<(), AuthError> {
    let (alg, alg_name) = verification_algorithm(&cert.signature_algorithm, key)
        .map_err(|e| AuthError::Certificate(format!("{name}: {e}")))?;
    // Signatures are whole octets; unused bits would be a re-encoding.
    if cert.signature_value.unused_bits != 0 {
        return Err(AuthError::Certificate(format!("{name}: its signature BIT STRING has unused bits")));
    }
    // After the checks above, which are cheap and not part of the key.
    let cache_key = SignatureCache::key(cert, key);
    if cache.contains(&cache_key) {
        return Ok(());
    }
    if !key.verify(alg, cert.tbs_certificate.as_ref(), &cert.signature_value.data) {
        return Err(AuthError::Untrusted(format!("the {alg_name} signature on {name} by {issuer} does not verify")));
    }
    cache.insert(cache_key);
    Ok(())
}

/// When a checked path holds: the latest notBefore and the earliest
/// notAfter of its certificates and its CA (Unix seconds, inclusive).
/// Which path [`check`] takes does not depend on the time, so the same
/// certificates succeed exactly when the time is within this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub not_before: i64,
    pub not_after: i64,
}

impl Window {
    pub fn contains(&self, now: i64) -> bool {
        self.not_before <= now && now <= self.not_after
    }

    fn narrow(&mut self, not_before: i64, not_after: i64) {
        self.not_before = self.not_before.max(not_before);
        self.not_after = self.not_after.min(not_after);
    }
}

/// Checks that `certs[0]` chains to one of `anchors` at `now` through
/// `certs[1..]` (in any order; extra certificates are ignored), and
/// returns the [`Window`] of the path it found.
pub fn check(
    certs: &[X509Certificate],
    anchors: &[Anchor],
    now: i64,
    cache: &SignatureCache,
) -> Result<Window, AuthError> {
    let Some(mut cur) = certs.first() else {
        return Err(AuthError::NoCertificate);
    };
    let mut used = vec![false; certs.len()];
    used[0] = true;
    let ee_name = cur.subject().to_string();
    let mut window = Window { not_before: i64::MIN, not_after: i64::MAX };
    for depth in 0..MAX_DEPTH {
        let name = cur.subject().to_string();
        let v = cur.validity();
        check_validity(&name, v.not_before.timestamp(), v.not_after.timestamp(), now)?;
        window.narrow(v.not_before.timestamp(), v.not_after.timestamp());
        check_extensions(cur, &name, depth > 0)?;
        let issuer = cur.issuer().as_raw();
        // A configured CA that signed it ends the path.
        let mut failed = None;
        for a in anchors.iter().filter(|a| a.subject == issuer) {
            match check_signature(cur, &name, &a.key, &a.name, cache) {
                Ok(()) => {
                    check_validity(&a.name, a.not_before, a.not_after, now)?;
                    window.narrow(a.not_before, a.not_after);
                    if a.constrains
                        && let Ok((_, ca)) = X509Certificate::from_der(&a.der)
                        && let Some(nc) = constraints::of(&ca)
                    {
                        constraints::check(&certs[0], &ee_name, nc, &a.name)?;
                    }
                    return Ok(window);
                }
                Err(e) => failed = Some(e),
            }
        }
        // Else an intermediate the peer sent.
        let next = (1..certs.len()).find(|&i| !used[i] && certs[i].subject().as_raw() == issuer);
        let Some(i) = next else {
            return Err(failed.unwrap_or_else(|| {
                AuthError::Untrusted(format!(
                    "issuer {} of {name} is not a configured CA (nor sent by the peer)",
                    cur.issuer()
                ))
            }));
        };
        let up = &certs[i];
        let up_name = up.subject().to_string();
        if !is_ca(up) {
            return Err(AuthError::Untrusted(format!(
                "issuer {up_name} of {name} is not a CA (no basicConstraints CA:TRUE)"
            )));
        }
        if let Ok(Some(bc)) = up.basic_constraints()
            && let Some(len) = bc.value.path_len_constraint
            && (len as usize) < depth
        {
            return Err(AuthError::Untrusted(format!(
                "{up_name} allows {len} intermediates below it, the chain has {depth}"
            )));
        }
        let key =
            PublicKey::from_spki(up.public_key()).map_err(|e| AuthError::Certificate(format!("{up_name}: {e}")))?;
        check_signature(cur, &name, &key, &up_name, cache)?;
        if let Some(nc) = constraints::of(up) {
            constraints::check(&certs[0], &ee_name, nc, &up_name)?;
        }
        used[i] = true;
        cur = up;
    }
    Err(AuthError::Untrusted(format!("no configured CA within {MAX_DEPTH} certificates of the end entity")))
}

/// What an end entity names, for matching the peer's identity (RFC 4945
/// 3.1): the subject DN and the subjectAltNames of the kinds IKE IDs take.
/// Owned, so a checked chain can be remembered without its certificates.
#[derive(Clone, Debug)]
pub struct Names {
    /// The subject Name's DER.
    pub subject: Vec<u8>,
    /// Those an identity can match.
    sans: Vec<San>,
    /// Every subjectAltName as openssl prints them, for messages.
    shown: String,
}

#[derive(Clone, Debug)]
enum San {
    Dns(String),
    Email(String),
    Ip(Vec<u8>),
}

impl Names {
    pub fn of(cert: &X509Certificate) -> Names {
        let general: Vec<&GeneralName> = match cert.subject_alternative_name() {
            Ok(Some(san)) => san.value.general_names.iter().collect(),
            _ => Vec::new(),
        };
        let sans = general
            .iter()
            .filter_map(|g| match g {
                GeneralName::DNSName(d) => Some(San::Dns((*d).to_string())),
                GeneralName::RFC822Name(m) => Some(San::Email((*m).to_string())),
                GeneralName::IPAddress(b) => Some(San::Ip(b.to_vec())),
                _ => None,
            })
            .collect();
        Names { subject: cert.subject().as_raw().to_vec(), sans, shown: list(&general) }
    }

    /// Whether these name `id`: the subject DN (ID_DER_ASN1_DN) or a
    /// subjectAltName of the ID's kind (dNSName for ID_FQDN,
    /// case-insensitive; rfc822Name for ID_RFC822_ADDR; iPAddress for
    /// ID_IPV4/6_ADDR).
    pub fn check(&self, id: &Identity) -> Result<(), AuthError> {
        let ok = match id {
            Identity::Dn(der) => {
                *der == self.subject
                    || matches!(
                        (X509Name::from_der(der), X509Name::from_der(&self.subject)),
                        (Ok((rest, n)), Ok((_, subject))) if rest.is_empty() && same_name(&n, &subject)
                    )
            }
            Identity::Fqdn(f) => {
                let f = f.trim_end_matches('.');
                self.sans.iter().any(|g| matches!(g, San::Dns(d) if d.trim_end_matches('.').eq_ignore_ascii_case(f)))
            }
            Identity::Email(e) => self.sans.iter().any(|g| matches!(g, San::Email(m) if m.eq_ignore_ascii_case(e))),
            Identity::Ip(ip) => {
                let octets = match ip {
                    std::net::IpAddr::V4(a) => a.octets().to_vec(),
                    std::net::IpAddr::V6(a) => a.octets().to_vec(),
                };
                self.sans.iter().any(|g| matches!(g, San::Ip(b) if *b == octets))
            }
            Identity::KeyId(_) => {
                return Err(AuthError::Identity(
                    "ID_KEY_ID (a key id cannot be checked against a certificate; use a DN, FQDN, email or IP)".into(),
                ));
            }
        };
        if ok {
            return Ok(());
        }
        let subject = match X509Name::from_der(&self.subject) {
            Ok((_, n)) => n.to_string(),
            Err(_) => format!("<a DN of {} bytes that does not parse>", self.subject.len()),
        };
        let sans = &self.shown;
        let what = match id {
            Identity::Dn(der) => match X509Name::from_der(der) {
                Ok((_, n)) => format!("DN \"{n}\" (the subject is \"{subject}\")"),
                Err(_) => format!("DN of {} bytes that do not parse (the subject is \"{subject}\")", der.len()),
            },
            Identity::Fqdn(f) => format!("FQDN {f} (its subjectAltNames: {sans})"),
            Identity::Email(e) => format!("email {e} (its subjectAltNames: {sans})"),
            Identity::Ip(ip) => format!("IP {ip} (its subjectAltNames: {sans})"),
            Identity::KeyId(_) => "ID_KEY_ID".into(),
        };
        Err(AuthError::Identity(what))
    }
}

/// Names equal but for their string types (PrintableString in one, UTF8String
/// in the other): the same RDNs in the same order, each with the same
/// attributes and values. Compared by structure, never by their text,
/// which a value with ", CN=" in it could forge.
fn same_name(a: &X509Name, b: &X509Name) -> bool {
    let (ra, rb): (Vec<_>, Vec<_>) = (a.iter_rdn().collect(), b.iter_rdn().collect());
    ra.len() == rb.len()
        && ra.iter().zip(&rb).all(|(x, y)| {
            let (xa, ya): (Vec<_>, Vec<_>) = (x.iter().collect(), y.iter().collect());
            xa.len() == ya.len()
                && xa.iter().zip(&ya).all(|(p, q)| {
                    p.attr_type() == q.attr_type()
                        && match (p.as_str(), q.as_str()) {
                            (Ok(u), Ok(v)) => u == v,
                            _ => {
                                p.attr_value().data == q.attr_value().data
                                    && p.attr_value().tag() == q.attr_value().tag()
                            }
                        }
                })
        })
}

fn list(sans: &[&GeneralName]) -> String {
    if sans.is_empty() {
        return "none".into();
    }
    let names: Vec<String> = sans.iter().map(|g| constraints::show(g)).collect();
    names.join(", ")
}

/// The DER of the element at the start of `data`, and what follows it.
fn element(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (rest, _) = Any::from_der(data).ok()?;
    Some((&data[..data.len() - rest.len()], rest))
}

/// RFC 5280 4.1.1.2: the certificate's signatureAlgorithm "MUST contain
/// the same algorithm identifier as the signature field in the sequence
/// tbsCertificate". Compared byte for byte, which also keeps the unsigned
/// outer copy from being re-encoded (a different tag read the same way
/// by a lenient parser) without anyone noticing.
pub fn algorithms_agree(der: &[u8]) -> bool {
    let agree = || -> Option<bool> {
        let (_, cert) = Any::from_der(der).ok()?;
        let (tbs, rest) = element(cert.data)?;
        let (outer, _) = element(rest)?;
        let (_, tbs) = Any::from_der(tbs).ok()?;
        // [0] version (optional), serialNumber, signature.
        let (first, mut rest) = element(tbs.data)?;
        if first.first() == Some(&0xa0) {
            rest = element(rest)?.1;
        }
        let (inner, _) = element(rest)?;
        Some(inner == outer)
    };
    agree().unwrap_or(false)
}

/// An AlgorithmIdentifier's DER with the universal tags it must have
/// (SEQUENCE, then an OBJECT IDENTIFIER): what the peer sends in RFC 7427
/// AUTH data is checked this strictly.
pub fn strict_algorithm_identifier(der: &[u8]) -> bool {
    let Ok((rest, seq)) = Any::from_der(der) else { return false };
    let Ok((_, oid)) = Any::from_der(seq.data) else { return false };
    rest.is_empty()
        && seq.class() == Class::Universal
        && seq.tag() == Tag::Sequence
        && seq.header.is_constructed()
        && oid.class() == Class::Universal
        && oid.tag() == Tag::Oid
}
