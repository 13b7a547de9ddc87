//! Identities on the wire (RFC 7296 3.5) and in configuration strings.

use crate::config::Identity;

/// The ID payload's body after the generic header: ID type, 3 reserved
/// bytes, data (what AUTH's prf(SK_p, IDx') covers).
pub fn id_body(id: &Identity) -> Vec<u8> {
    let _ = id;
    todo!("ike-wire")
}

impl Identity {
    /// Parses a configured identity: an IP address, `user@host` (email),
    /// `C=.., O=.., CN=..` (a DN), `keyid:hex`, else an FQDN (a leading
    /// `@` stripped).
    pub fn parse(s: &str) -> Result<Identity, String> {
        let _ = s;
        todo!("ike-wire")
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let _ = f;
        todo!("ike-wire")
    }
}
