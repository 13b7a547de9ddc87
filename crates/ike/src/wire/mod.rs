//! The IKEv2 message codec (RFC 7296 3): the header, the generic payload
//! chain and every payload tern reads or writes. Decoding never panics: a
//! malformed message is a [`WireError`]. The encrypted payloads (SK, SKF)
//! are framed here; their bodies are sealed and opened by
//! [`crate::crypto::SkCipher`].
//!
//! Files: `header.rs` (the fixed header), `payload.rs` (the chain, every
//! payload body, SK/SKF framing and AAD), `id.rs` (ID payloads,
//! [`Identity::parse`] and its `Display`, DN encoding), `ts.rs` (traffic
//! selectors), `tests.rs` (with a strongSwan exchange in `testdata/`).
//!
//! Owner: helper "ike-wire".

#![deny(clippy::indexing_slicing)]

use crate::config::{Identity, TrafficSelector};
use crate::proposal::Protocol;

/// Exchange types (RFC 7296 3.1).
pub const IKE_SA_INIT: u8 = 34;
pub const IKE_AUTH: u8 = 35;
pub const CREATE_CHILD_SA: u8 = 36;
pub const INFORMATIONAL: u8 = 37;

/// Header flags.
pub const FLAG_INITIATOR: u8 = 0x08;
pub const FLAG_VERSION: u8 = 0x10;
pub const FLAG_RESPONSE: u8 = 0x20;

/// The fixed header (28 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub spi_i: u64,
    pub spi_r: u64,
    /// The first payload's type.
    pub next_payload: u8,
    /// 0x20 for IKEv2.
    pub version: u8,
    pub exchange: u8,
    pub flags: u8,
    pub message_id: u32,
    /// The whole message's length.
    pub length: u32,
}

pub const HEADER_LEN: usize = 28;

/// Notify message types tern uses (RFC 7296 3.10.1 and others).
pub mod notify {
    pub const UNSUPPORTED_CRITICAL_PAYLOAD: u16 = 1;
    pub const INVALID_IKE_SPI: u16 = 4;
    pub const INVALID_MAJOR_VERSION: u16 = 5;
    pub const INVALID_SYNTAX: u16 = 7;
    pub const INVALID_MESSAGE_ID: u16 = 9;
    pub const INVALID_SPI: u16 = 11;
    pub const NO_PROPOSAL_CHOSEN: u16 = 14;
    pub const INVALID_KE_PAYLOAD: u16 = 17;
    pub const AUTHENTICATION_FAILED: u16 = 24;
    pub const SINGLE_PAIR_REQUIRED: u16 = 34;
    pub const NO_ADDITIONAL_SAS: u16 = 35;
    pub const INTERNAL_ADDRESS_FAILURE: u16 = 36;
    pub const FAILED_CP_REQUIRED: u16 = 37;
    pub const TS_UNACCEPTABLE: u16 = 38;
    pub const INVALID_SELECTORS: u16 = 39;
    pub const TEMPORARY_FAILURE: u16 = 43;
    pub const CHILD_SA_NOT_FOUND: u16 = 44;
    pub const INITIAL_CONTACT: u16 = 16384;
    pub const SET_WINDOW_SIZE: u16 = 16385;
    pub const ADDITIONAL_TS_POSSIBLE: u16 = 16386;
    pub const IPCOMP_SUPPORTED: u16 = 16387;
    pub const NAT_DETECTION_SOURCE_IP: u16 = 16388;
    pub const NAT_DETECTION_DESTINATION_IP: u16 = 16389;
    pub const COOKIE: u16 = 16390;
    pub const USE_TRANSPORT_MODE: u16 = 16391;
    pub const REKEY_SA: u16 = 16393;
    pub const ESP_TFC_PADDING_NOT_SUPPORTED: u16 = 16394;
    pub const NON_FIRST_FRAGMENTS_ALSO: u16 = 16395;
    pub const MOBIKE_SUPPORTED: u16 = 16396;
    pub const IKEV2_FRAGMENTATION_SUPPORTED: u16 = 16430;
    pub const SIGNATURE_HASH_ALGORITHMS: u16 = 16431;
}

/// One SA payload proposal as on the wire (RFC 7296 3.3.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireProposal {
    pub number: u8,
    pub protocol: Protocol,
    /// 8 bytes for a rekeyed IKE SA, 4 for ESP, empty in IKE_SA_INIT.
    pub spi: Vec<u8>,
    /// (transform type, transform id, key length attribute if any).
    pub transforms: Vec<(u8, u16, Option<u16>)>,
}

/// A configuration payload attribute (RFC 7296 3.15.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpAttribute {
    pub kind: u16,
    pub value: Vec<u8>,
}

/// A payload. Unknown non-critical payloads decode as `Unknown`; unknown
/// critical ones are an error ([`WireError::UnsupportedCritical`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// 33
    Sa(Vec<WireProposal>),
    /// 34: DH group number, public value.
    Ke {
        group: u16,
        data: Vec<u8>,
    },
    /// 35 (initiator's) / 36 (responder's)
    IdI(Identity),
    IdR(Identity),
    /// 37: encoding, data.
    Cert {
        encoding: u8,
        data: Vec<u8>,
    },
    /// 38
    CertReq {
        encoding: u8,
        data: Vec<u8>,
    },
    /// 39: method, data.
    Auth {
        method: u8,
        data: Vec<u8>,
    },
    /// 40
    Nonce(Vec<u8>),
    /// 41: protocol (0: none), SPI, type, data.
    Notify {
        protocol: u8,
        spi: Vec<u8>,
        kind: u16,
        data: Vec<u8>,
    },
    /// 42: protocol, SPIs (4 bytes each for ESP; none for IKE).
    Delete {
        protocol: u8,
        spis: Vec<u32>,
    },
    /// 43
    VendorId(Vec<u8>),
    /// 44 / 45
    TsI(Vec<TrafficSelector>),
    TsR(Vec<TrafficSelector>),
    /// 46: the encrypted payload; `first` is the first inner payload's
    /// type, `body` is IV | ciphertext | ICV (see `crypto::SkCipher`).
    Sk {
        first: u8,
        body: Vec<u8>,
    },
    /// 47: configuration (CFG_REQUEST 1, CFG_REPLY 2, ...).
    Cp {
        kind: u8,
        attributes: Vec<CpAttribute>,
    },
    /// 53: an encrypted fragment (RFC 7383).
    Skf {
        first: u8,
        number: u16,
        total: u16,
        body: Vec<u8>,
    },
    Unknown {
        kind: u8,
        data: Vec<u8>,
    },
}

/// A decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub payloads: Vec<Payload>,
}

/// Why a message did not decode.
#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("message too short")]
    Truncated,
    #[error("length {0} in the header does not match the datagram")]
    Length(u32),
    #[error("major version {0} (not 2)")]
    Version(u8),
    #[error("payload {0}: {1}")]
    Payload(u8, &'static str),
    #[error("unsupported critical payload {0}")]
    UnsupportedCritical(u8),
}

mod header;
mod id;
mod payload;
mod ts;

pub use id::{ID_DER_ASN1_DN, ID_FQDN, ID_IPV4_ADDR, ID_IPV6_ADDR, ID_KEY_ID, ID_RFC822_ADDR, id_body};
pub use payload::{decode_payloads, encode_payloads, payload_type, sk_aad, skf_aad};
pub use ts::{TS_IPV4_ADDR_RANGE, TS_IPV6_ADDR_RANGE};

/// Payload types (RFC 7296 3.2, RFC 7383 2.5).
pub mod payload_kind {
    pub const NONE: u8 = 0;
    pub const SA: u8 = 33;
    pub const KE: u8 = 34;
    pub const IDI: u8 = 35;
    pub const IDR: u8 = 36;
    pub const CERT: u8 = 37;
    pub const CERTREQ: u8 = 38;
    pub const AUTH: u8 = 39;
    pub const NONCE: u8 = 40;
    pub const NOTIFY: u8 = 41;
    pub const DELETE: u8 = 42;
    pub const VENDOR_ID: u8 = 43;
    pub const TSI: u8 = 44;
    pub const TSR: u8 = 45;
    pub const SK: u8 = 46;
    pub const CP: u8 = 47;
    pub const EAP: u8 = 48;
    pub const SKF: u8 = 53;
}

#[cfg(test)]
mod tests;
