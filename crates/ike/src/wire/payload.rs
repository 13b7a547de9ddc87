//! The generic payload chain and every payload's body.

use super::{Header, Message, Payload, WireError};

impl Message {
    /// Decodes a whole datagram: the header's length must match it; the
    /// SK / SKF payload, if any, must be last.
    pub fn decode(data: &[u8]) -> Result<Message, WireError> {
        let _ = data;
        todo!("ike-wire")
    }

    /// Encodes the message, filling in every next-payload and length field.
    pub fn encode(&self) -> Vec<u8> {
        todo!("ike-wire")
    }
}

/// The type number of a payload.
pub fn payload_type(p: &Payload) -> u8 {
    let _ = p;
    todo!("ike-wire")
}

/// A payload chain without header (the plaintext inside SK): the first
/// payload's type (0 if none) and the bytes.
pub fn encode_payloads(payloads: &[Payload]) -> (u8, Vec<u8>) {
    let _ = payloads;
    todo!("ike-wire")
}

/// Decodes a payload chain whose first payload has type `first`.
pub fn decode_payloads(first: u8, data: &[u8]) -> Result<Vec<Payload>, WireError> {
    let _ = (first, data);
    todo!("ike-wire")
}

/// The bytes before an SK payload's body: the header (next payload SK,
/// length 28 + 4 + `body_len`) and the SK generic payload header. Sealed
/// body appended, this is the datagram.
pub fn sk_aad(header: &Header, first_inner: u8, body_len: usize) -> Vec<u8> {
    let _ = (header, first_inner, body_len);
    todo!("ike-wire")
}

/// As [`sk_aad`] for an encrypted fragment (RFC 7383 2.5): header, SKF
/// generic header, fragment number and total.
pub fn skf_aad(header: &Header, first_inner: u8, number: u16, total: u16, body_len: usize) -> Vec<u8> {
    let _ = (header, first_inner, number, total, body_len);
    todo!("ike-wire")
}
