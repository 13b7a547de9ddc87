//! The fixed IKE header (RFC 7296 3.1).

use super::{Header, WireError};

impl Header {
    /// Decodes the 28-byte header (for dispatch; [`super::Message::decode`]
    /// checks the length against the datagram).
    pub fn decode(data: &[u8]) -> Result<Header, WireError> {
        let _ = data;
        todo!("ike-wire")
    }

    /// Appends the 28 bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let _ = out;
        todo!("ike-wire")
    }
}
