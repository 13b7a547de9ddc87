//! Name constraints (RFC 5280 4.2.1.10) on the end entity's
//! subjectAltNames, for the name forms IKE identities use: dNSName,
//! rfc822Name, iPAddress. A CA constraining a form tern does not check
//! (directoryName, URI, ...) fails the chain when the end entity carries
//! names of that form (or, for directoryName, always: every certificate
//! has a subject), rather than being ignored.

use crate::auth::AuthError;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::{GeneralName, GeneralSubtree, NameConstraints, ParsedExtension};

/// The name constraints of `ca`, if any.
pub fn of<'a>(ca: &'a X509Certificate<'a>) -> Option<&'a NameConstraints<'a>> {
    ca.extensions().iter().find_map(|e| match e.parsed_extension() {
        ParsedExtension::NameConstraints(nc) => Some(nc),
        _ => None,
    })
}

/// A GeneralName as openssl prints it ("DNS:moon.tern.test",
/// "email:ops@tern.test", "IP:192.0.2.1", "IP:192.0.2.0/255.255.255.0").
pub fn show(g: &GeneralName) -> String {
    fn ip(b: &[u8]) -> String {
        match b.len() {
            4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(b).unwrap_or_default()).to_string(),
            16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap_or_default()).to_string(),
            n => format!("<{n} bytes>"),
        }
    }
    match g {
        GeneralName::DNSName(d) => format!("DNS:{d}"),
        GeneralName::RFC822Name(m) => format!("email:{m}"),
        GeneralName::IPAddress(b) if b.len() == 8 || b.len() == 32 => {
            let (a, m) = b.split_at(b.len() / 2);
            format!("IP:{}/{}", ip(a), ip(m))
        }
        GeneralName::IPAddress(b) => format!("IP:{}", ip(b)),
        GeneralName::URI(u) => format!("URI:{u}"),
        other => other.to_string(),
    }
}

/// The form of a GeneralName, for "same form" comparisons.
fn form(g: &GeneralName) -> u8 {
    match g {
        GeneralName::OtherName(..) => 0,
        GeneralName::RFC822Name(_) => 1,
        GeneralName::DNSName(_) => 2,
        GeneralName::X400Address(_) => 3,
        GeneralName::DirectoryName(_) => 4,
        GeneralName::EDIPartyName(_) => 5,
        GeneralName::URI(_) => 6,
        GeneralName::IPAddress(_) => 7,
        GeneralName::RegisteredID(_) => 8,
    }
}

/// Whether `name` is within `base` (both of the same form). `None`: a
/// form tern does not evaluate.
fn within(name: &GeneralName, base: &GeneralName) -> Option<bool> {
    match (name, base) {
        (GeneralName::DNSName(n), GeneralName::DNSName(c)) => Some(dns_within(n, c)),
        (GeneralName::RFC822Name(n), GeneralName::RFC822Name(c)) => Some(email_within(n, c)),
        (GeneralName::IPAddress(n), GeneralName::IPAddress(c)) => Some(ip_within(n, c)),
        _ => None,
    }
}

/// "host.tern.test" is within "tern.test" (zero or more labels added to
/// the left); with a leading dot (".tern.test", as openssl writes it) only
/// names below it are.
fn dns_within(name: &str, constraint: &str) -> bool {
    let (n, c) =
        (name.trim_end_matches('.').to_ascii_lowercase(), constraint.trim_end_matches('.').to_ascii_lowercase());
    if c.is_empty() {
        return true;
    }
    if c.starts_with('.') {
        return n.ends_with(&c);
    }
    n == c || n.ends_with(&format!(".{c}"))
}

/// A mailbox ("ops@tern.test": that one), a host ("tern.test": mail at
/// that host) or a domain (".tern.test": mail at hosts below it).
fn email_within(name: &str, constraint: &str) -> bool {
    let (n, c) = (name.to_ascii_lowercase(), constraint.to_ascii_lowercase());
    if c.contains('@') {
        return n == c;
    }
    let host = n.rsplit_once('@').map_or(n.as_str(), |(_, h)| h);
    if c.starts_with('.') { host.ends_with(&c) } else { host == c }
}

/// An address within address/mask (8 bytes for IPv4, 32 for IPv6).
fn ip_within(name: &[u8], constraint: &[u8]) -> bool {
    if constraint.len() != 2 * name.len() {
        return false;
    }
    let (addr, mask) = constraint.split_at(name.len());
    name.iter().zip(addr).zip(mask).all(|((n, a), m)| n & m == a & m)
}

/// Checks the end entity's subjectAltNames against `nc`, set by the CA
/// named `ca`.
pub fn check(ee: &X509Certificate, ee_name: &str, nc: &NameConstraints, ca: &str) -> Result<(), AuthError> {
    let refuse = |why: String| Err(AuthError::Untrusted(format!("{ee_name}: {why} (name constraints of {ca})")));
    let permitted: &[GeneralSubtree] = nc.permitted_subtrees.as_deref().unwrap_or(&[]);
    let excluded: &[GeneralSubtree] = nc.excluded_subtrees.as_deref().unwrap_or(&[]);
    if permitted.iter().chain(excluded).any(|s| matches!(s.base, GeneralName::DirectoryName(_))) {
        return refuse("directoryName constraints are not supported".into());
    }
    let names: Vec<&GeneralName> = match ee.subject_alternative_name() {
        Ok(Some(san)) => san.value.general_names.iter().collect(),
        Ok(None) => Vec::new(),
        Err(e) => return refuse(format!("its subjectAltName does not parse ({e})")),
    };
    for name in names {
        let same_form = |s: &&GeneralSubtree| form(&s.base) == form(name);
        for s in excluded.iter().filter(same_form) {
            match within(name, &s.base) {
                Some(false) => {}
                Some(true) => return refuse(format!("{} is excluded by {}", show(name), show(&s.base))),
                None => return refuse(format!("{} is of a constrained form tern does not check", show(name))),
            }
        }
        let mut of_form = permitted.iter().filter(same_form).peekable();
        if of_form.peek().is_none() {
            continue;
        }
        let mut ok = false;
        for s in of_form {
            match within(name, &s.base) {
                Some(true) => ok = true,
                Some(false) => {}
                None => return refuse(format!("{} is of a constrained form tern does not check", show(name))),
            }
        }
        if !ok {
            return refuse(format!("{} is not within the permitted names", show(name)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_email_ip_matching() {
        assert!(dns_within("a.tern.test", "tern.test"));
        assert!(dns_within("TERN.test.", "tern.test"));
        assert!(!dns_within("eviltern.test", "tern.test"));
        assert!(dns_within("a.b.tern.test", ".tern.test"));
        assert!(!dns_within("tern.test", ".tern.test"));
        assert!(dns_within("anything", ""));
        assert!(email_within("ops@tern.test", "tern.test"));
        assert!(!email_within("ops@a.tern.test", "tern.test"));
        assert!(email_within("ops@a.tern.test", ".tern.test"));
        assert!(email_within("Ops@Tern.Test", "ops@tern.test"));
        assert!(!email_within("dev@tern.test", "ops@tern.test"));
        assert!(ip_within(&[192, 0, 2, 7], &[192, 0, 2, 0, 255, 255, 255, 0]));
        assert!(!ip_within(&[192, 0, 3, 7], &[192, 0, 2, 0, 255, 255, 255, 0]));
        assert!(!ip_within(&[192, 0, 2, 7], &[0; 32]), "an IPv6 constraint does not cover IPv4");
        let mut v6 = [0u8; 32];
        v6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        v6[16..20].copy_from_slice(&[0xff; 4]);
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        a[15] = 1;
        assert!(ip_within(&a, &v6));
        a[3] = 0xb9;
        assert!(!ip_within(&a, &v6));
    }
}
