//! Identities on the wire (RFC 7296 3.5) and in configuration strings.
//! Distinguished names are encoded as strongSwan encodes them (so the IDs
//! match byte for byte where strongSwan compares bytes): an RDNSequence of
//! one attribute per RDN, PrintableString when the value allows it, else
//! UTF8String, IA5String for emailAddress.

use super::WireError;
use super::payload::Reader;
use crate::config::Identity;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// ID types (RFC 7296 3.5).
pub const ID_IPV4_ADDR: u8 = 1;
pub const ID_FQDN: u8 = 2;
pub const ID_RFC822_ADDR: u8 = 3;
pub const ID_IPV6_ADDR: u8 = 5;
pub const ID_DER_ASN1_DN: u8 = 9;
pub const ID_KEY_ID: u8 = 11;

/// The ID payload's body after the generic header: ID type, 3 reserved
/// bytes, data (what AUTH's prf(SK_p, IDx') covers).
pub fn id_body(id: &Identity) -> Vec<u8> {
    let mut out = Vec::new();
    encode_id(id, &mut out);
    out
}

pub(super) fn encode_id(id: &Identity, out: &mut Vec<u8>) {
    let (kind, data): (u8, &[u8]) = match id {
        Identity::Ip(IpAddr::V4(a)) => (ID_IPV4_ADDR, &a.octets()[..]),
        Identity::Ip(IpAddr::V6(a)) => (ID_IPV6_ADDR, &a.octets()[..]),
        Identity::Fqdn(s) => (ID_FQDN, s.as_bytes()),
        Identity::Email(s) => (ID_RFC822_ADDR, s.as_bytes()),
        Identity::Dn(d) => (ID_DER_ASN1_DN, d),
        Identity::KeyId(k) => (ID_KEY_ID, k),
    };
    out.extend_from_slice(&[kind, 0, 0, 0]);
    out.extend_from_slice(data);
}

pub(super) fn decode_id(kind: u8, body: &[u8]) -> Result<Identity, WireError> {
    let mut r = Reader::new(body);
    let (Some(id_type), Some(_)) = (r.u8(), r.take(3)) else {
        return Err(WireError::Payload(kind, "identification truncated"));
    };
    let data = r.rest();
    let text = |d: &[u8]| {
        String::from_utf8(d.to_vec()).map_err(|_| WireError::Payload(kind, "identification is not UTF-8 text"))
    };
    Ok(match id_type {
        ID_IPV4_ADDR => {
            let a: [u8; 4] = data.try_into().map_err(|_| WireError::Payload(kind, "ID_IPV4_ADDR not 4 bytes"))?;
            Identity::Ip(IpAddr::V4(Ipv4Addr::from(a)))
        }
        ID_IPV6_ADDR => {
            let a: [u8; 16] = data.try_into().map_err(|_| WireError::Payload(kind, "ID_IPV6_ADDR not 16 bytes"))?;
            Identity::Ip(IpAddr::V6(Ipv6Addr::from(a)))
        }
        ID_FQDN => Identity::Fqdn(text(data)?),
        ID_RFC822_ADDR => Identity::Email(text(data)?),
        ID_DER_ASN1_DN => Identity::Dn(data.to_vec()),
        ID_KEY_ID => Identity::KeyId(data.to_vec()),
        _ => return Err(WireError::Payload(kind, "unsupported identification type")),
    })
}

/// ASN.1 tags.
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const UTF8_STRING: u8 = 0x0c;
const PRINTABLE_STRING: u8 = 0x13;
const IA5_STRING: u8 = 0x16;

/// The attributes a configured DN may name: (names, the DER of the OID's
/// value, whether its value is an IA5String). The first name is how
/// [`Identity`]'s `Display` writes it (as strongSwan does).
const ATTRIBUTES: &[(&[&str], &[u8], bool)] = &[
    (&["C"], &[0x55, 0x04, 0x06], false),
    (&["ST"], &[0x55, 0x04, 0x08], false),
    (&["L"], &[0x55, 0x04, 0x07], false),
    (&["O"], &[0x55, 0x04, 0x0a], false),
    (&["OU"], &[0x55, 0x04, 0x0b], false),
    (&["CN"], &[0x55, 0x04, 0x03], false),
    // strongSwan 5.9 reads and shows SN as the surname (RFC 4519), as
    // charon's own IDs show.
    (&["SN", "surname"], &[0x55, 0x04, 0x04], false),
    (&["serialNumber"], &[0x55, 0x04, 0x05], false),
    (&["DC"], &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19], false),
    (&["UID"], &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01], false),
    (&["E", "emailAddress", "Email"], &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01], true),
];

fn der(tag: u8, content: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes = n.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        let len = bytes.get(skip..).unwrap_or_default();
        out.push(0x80 | len.len() as u8);
        out.extend_from_slice(len);
    }
    out.extend_from_slice(content);
}

fn is_printable(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b" '()+,-./:=?".contains(&b))
}

/// `C=CH, O=strongSwan, CN=moon` to the DER of an X.509 Name.
fn parse_dn(s: &str) -> Result<Vec<u8>, String> {
    let mut rdns = Vec::new();
    // Split on unescaped commas ("\," is a literal comma), or on slashes if
    // the DN starts with one (OpenSSL's "/C=CH/O=strongSwan/CN=moon"), as
    // strongSwan does.
    let (sep, body) = match s.strip_prefix('/') {
        Some(rest) => ('/', rest),
        None => (',', s),
    };
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => cur.push(chars.next().ok_or_else(|| format!("DN {s:?} ends in a backslash"))?),
            c if c == sep => parts.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    parts.push(cur);
    for part in parts {
        let Some((name, value)) = part.split_once('=') else {
            return Err(format!("DN {s:?}: {:?} is not attribute=value", part.trim()));
        };
        let (name, value) = (name.trim(), value.trim());
        let Some(&(_, oid, ia5)) =
            ATTRIBUTES.iter().find(|(names, _, _)| names.iter().any(|n| n.eq_ignore_ascii_case(name)))
        else {
            return Err(format!(
                "DN {s:?}: unknown attribute {name:?} (known: C, ST, L, O, OU, CN, SN, serialNumber, DC, UID, E)"
            ));
        };
        if value.is_empty() {
            return Err(format!("DN {s:?}: {name} has no value"));
        }
        let tag = if ia5 {
            if !value.is_ascii() {
                return Err(format!("DN {s:?}: {name} must be ASCII"));
            }
            IA5_STRING
        } else if is_printable(value) {
            PRINTABLE_STRING
        } else {
            UTF8_STRING
        };
        let mut atv = Vec::new();
        der(OID, oid, &mut atv);
        der(tag, value.as_bytes(), &mut atv);
        let mut seq = Vec::new();
        der(SEQUENCE, &atv, &mut seq);
        der(SET, &seq, &mut rdns);
    }
    let mut out = Vec::new();
    der(SEQUENCE, &rdns, &mut out);
    Ok(out)
}

/// One DER TLV: (tag, content), or `None` if malformed.
fn tlv<'a>(r: &mut Reader<'a>) -> Option<(u8, &'a [u8])> {
    let tag = r.u8()?;
    let first = r.u8()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        r.take(n)?.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    Some((tag, r.take(len)?))
}

fn oid_text(oid: &[u8]) -> String {
    let mut out = String::new();
    let mut arcs = Vec::new();
    let mut v: u64 = 0;
    for &b in oid {
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            arcs.push(v);
            v = 0;
        }
    }
    if let Some((&first, rest)) = arcs.split_first() {
        let (a, b) = if first < 80 { (first / 40, first % 40) } else { (2, first - 80) };
        let _ = write!(out, "{a}.{b}");
        for arc in rest {
            let _ = write!(out, ".{arc}");
        }
    }
    out
}

/// One attribute of a Name: (OID, string tag, value).
type Attribute<'a> = (&'a [u8], u8, &'a [u8]);

/// A Name's attributes in order, RDN sets flattened, or `None` if the DER
/// does not parse.
fn dn_attributes(der: &[u8]) -> Option<Vec<Attribute<'_>>> {
    let mut r = Reader::new(der);
    let (SEQUENCE, rdns) = tlv(&mut r)? else { return None };
    if !r.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    let mut sets = Reader::new(rdns);
    while !sets.is_empty() {
        let (SET, set) = tlv(&mut sets)? else { return None };
        let mut atvs = Reader::new(set);
        while !atvs.is_empty() {
            let (SEQUENCE, atv) = tlv(&mut atvs)? else { return None };
            let mut atv = Reader::new(atv);
            let (OID, oid) = tlv(&mut atv)? else { return None };
            let (tag, value) = tlv(&mut atv)?;
            out.push((oid, tag, value));
        }
    }
    Some(out)
}

/// strongSwan's DN equality (`compare_dn`): the same attributes in the
/// same order with the same values, whatever their string types;
/// PrintableStrings (and emailAddress IA5Strings) of the same type compared
/// without regard to case.
fn same_dn(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let (Some(x), Some(y)) = (dn_attributes(a), dn_attributes(b)) else { return false };
    const EMAIL: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];
    x.len() == y.len()
        && x.iter().zip(&y).all(|(&(oa, ta, va), &(ob, tb, vb))| {
            oa == ob
                && if ta == tb && (ta == PRINTABLE_STRING || (ta == IA5_STRING && oa == EMAIL)) {
                    va.eq_ignore_ascii_case(vb)
                } else {
                    va == vb
                }
        })
}

/// The DER of a Name as text (`C=CH, O=strongSwan, CN=moon`), or `None` if
/// it does not parse.
fn dn_text(der: &[u8]) -> Option<String> {
    let mut out = String::new();
    for (oid, _, value) in dn_attributes(der)? {
        if !out.is_empty() {
            out.push_str(", ");
        }
        match ATTRIBUTES.iter().find(|(_, o, _)| *o == oid) {
            Some((names, _, _)) => out.push_str(names.first().copied().unwrap_or("?")),
            None => out.push_str(&oid_text(oid)),
        }
        out.push('=');
        out.extend(String::from_utf8_lossy(value).chars().map(|c| if c.is_control() { '?' } else { c }));
    }
    Some(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.is_empty() || !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

impl Identity {
    /// Whether a peer's identity is the configured one, as strongSwan
    /// compares them: DNs by attributes and values whatever their string
    /// types (a certificate made by OpenSSL has UTF8Strings where a
    /// configured DN has PrintableStrings), FQDNs and email addresses
    /// without regard to case, addresses and key IDs exactly.
    pub fn matches(&self, other: &Identity) -> bool {
        match (self, other) {
            (Identity::Dn(a), Identity::Dn(b)) => same_dn(a, b),
            (Identity::Fqdn(a), Identity::Fqdn(b)) | (Identity::Email(a), Identity::Email(b)) => {
                a.eq_ignore_ascii_case(b)
            }
            (a, b) => a == b,
        }
    }

    /// Parses a configured identity as strongSwan reads one: an IP address;
    /// `keyid:hex` (or strongSwan's `@#hex`) a key ID; `C=.., O=.., CN=..`
    /// a DN; `@name` an FQDN (the `@` dropped: strongSwan's way to force
    /// one); `user@host` an email address; anything else an FQDN.
    pub fn parse(s: &str) -> Result<Identity, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("empty identity".into());
        }
        if s.eq_ignore_ascii_case("%any") {
            return Err("%any is not an identity: leave the identity out to accept any".into());
        }
        if let Ok(a) = s.parse::<IpAddr>() {
            return Ok(Identity::Ip(a));
        }
        if let Some(h) = s.strip_prefix("keyid:").or_else(|| s.strip_prefix("@#")) {
            return unhex(h)
                .map(Identity::KeyId)
                .ok_or_else(|| format!("key ID {s:?}: not an even number of hex digits"));
        }
        if let Some(fqdn) = s.strip_prefix('@') {
            if fqdn.is_empty() {
                return Err("empty FQDN identity \"@\"".into());
            }
            return Ok(Identity::Fqdn(fqdn.to_string()));
        }
        if s.contains('=') {
            return parse_dn(s).map(Identity::Dn);
        }
        if s.contains('@') {
            return Ok(Identity::Email(s.to_string()));
        }
        Ok(Identity::Fqdn(s.to_string()))
    }
}

/// As strongSwan shows identities: the address, the name, the DN as
/// `C=CH, O=strongSwan, CN=moon`; a key ID as `keyid:hex` (which
/// [`Identity::parse`] reads back). Control characters a peer put in its
/// ID show as `?` (they would forge log lines otherwise).
impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identity::Ip(a) => write!(f, "{a}"),
            Identity::Fqdn(s) | Identity::Email(s) => {
                s.chars().try_for_each(|c| std::fmt::Write::write_char(f, if c.is_control() { '?' } else { c }))
            }
            Identity::Dn(d) => match dn_text(d) {
                Some(t) => f.write_str(&t),
                None => write!(f, "(invalid DN {})", hex(d)),
            },
            Identity::KeyId(k) => write!(f, "keyid:{}", hex(k)),
        }
    }
}
