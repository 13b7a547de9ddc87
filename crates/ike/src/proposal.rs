//! Algorithms (IANA "IKEv2 Parameters" transform IDs), proposals in
//! strongSwan's syntax, and selection.
//!
//! Owner: helper "ike-wire" (parsing, wire conversion, selection).

/// Encryption (transform type 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encr {
    /// ENCR_AES_CBC (12) with a key of 128 or 256 bits.
    AesCbc { bits: u16 },
    /// ENCR_AES_GCM_16 (20), 16-byte ICV, with a key of 128 or 256 bits.
    AesGcm16 { bits: u16 },
}

/// Pseudo-random function (transform type 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prf {
    HmacSha1,     // 2
    HmacSha2_256, // 5
    HmacSha2_384, // 6
    HmacSha2_512, // 7
}

/// Integrity (transform type 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Integ {
    HmacSha1_96,      // 2
    HmacSha2_256_128, // 12
    HmacSha2_384_192, // 13
    HmacSha2_512_256, // 14
}

/// Diffie-Hellman group (transform type 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DhGroup {
    Modp2048,   // 14
    Modp3072,   // 15
    Modp4096,   // 16
    Ecp256,     // 19
    Ecp384,     // 20
    Curve25519, // 31
}

/// What a proposal is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    Ike,
    Esp,
}

/// One proposal: every listed algorithm of each type is acceptable (the
/// wire's transforms). An IKE proposal has encr, prf, dh and (without an
/// AEAD) integ; an ESP proposal has encr, integ unless AEAD, optional dh
/// (PFS) and esn.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Proposal {
    pub encr: Vec<Encr>,
    pub prf: Vec<Prf>,
    pub integ: Vec<Integ>,
    pub dh: Vec<DhGroup>,
    /// ESP: extended sequence numbers acceptable (true) / not (false); both
    /// may be listed. Empty for IKE.
    pub esn: Vec<bool>,
}

/// The algorithms an exchange settled on: one of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chosen {
    pub encr: Encr,
    pub prf: Option<Prf>,
    pub integ: Option<Integ>,
    pub dh: Option<DhGroup>,
    pub esn: bool,
}

impl Encr {
    /// The ESP data plane's cipher.
    pub fn esp_cipher(self) -> Option<tern_ipsec::Cipher> {
        todo!("ike-wire")
    }

    /// Key length in bytes (GCM: with its 4-byte salt).
    pub fn key_len(self) -> usize {
        todo!("ike-wire")
    }
}

impl Integ {
    /// The ESP data plane's integrity algorithm; `None` for HMAC-SHA-384,
    /// which tern_ipsec lacks: ESP proposals with it are neither offered
    /// nor accepted.
    pub fn esp_integ(self) -> Option<tern_ipsec::Integ> {
        todo!("ike-wire")
    }

    pub fn key_len(self) -> usize {
        todo!("ike-wire")
    }

    pub fn icv_len(self) -> usize {
        todo!("ike-wire")
    }
}

impl Proposal {
    /// Parses strongSwan's syntax (`aes128gcm16-prfsha256-x25519`).
    pub fn parse(s: &str, protocol: Protocol) -> Result<Proposal, String> {
        let _ = (s, protocol);
        todo!("ike-wire")
    }

    /// The proposal as an SA payload carries it.
    pub fn to_wire(&self, number: u8, protocol: Protocol, spi: Vec<u8>) -> crate::wire::WireProposal {
        let _ = (number, protocol, spi);
        todo!("ike-wire")
    }
}

impl Chosen {
    /// The responder's single-transform answer.
    pub fn to_wire(&self, number: u8, protocol: Protocol, spi: Vec<u8>) -> crate::wire::WireProposal {
        let _ = (number, protocol, spi);
        todo!("ike-wire")
    }

    /// The responder's answer as the initiator reads it: exactly one
    /// transform of each type.
    pub fn from_wire(p: &crate::wire::WireProposal) -> Result<Chosen, String> {
        let _ = p;
        todo!("ike-wire")
    }

    /// Whether one of `ours` offered this choice.
    pub fn offered_by(&self, ours: &[Proposal]) -> bool {
        let _ = ours;
        todo!("ike-wire")
    }
}

impl std::fmt::Display for Chosen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let _ = f;
        todo!("ike-wire")
    }
}

/// Responder selection (RFC 7296 2.7): the first of THEIR proposals that
/// one of ours accepts. Returns their proposal number, the choice and
/// their SPI.
pub fn select(
    ours: &[Proposal],
    theirs: &[crate::wire::WireProposal],
    protocol: Protocol,
) -> Option<(u8, Chosen, Vec<u8>)> {
    let _ = (ours, theirs, protocol);
    todo!("ike-wire")
}
