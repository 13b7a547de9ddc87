//! The fixed IKE header (RFC 7296 3.1).

use super::{HEADER_LEN, Header, WireError};

impl Header {
    /// Decodes the 28-byte header, for dispatch: neither the version nor the
    /// length is checked against anything here ([`super::Message::decode`]
    /// does both), so a responder can still answer INVALID_MAJOR_VERSION
    /// with the SPIs it read.
    pub fn decode(data: &[u8]) -> Result<Header, WireError> {
        let h: &[u8; HEADER_LEN] =
            data.get(..HEADER_LEN).and_then(|h| h.try_into().ok()).ok_or(WireError::Truncated)?;
        let [
            i0,
            i1,
            i2,
            i3,
            i4,
            i5,
            i6,
            i7,
            r0,
            r1,
            r2,
            r3,
            r4,
            r5,
            r6,
            r7,
            next_payload,
            version,
            exchange,
            flags,
            m0,
            m1,
            m2,
            m3,
            l0,
            l1,
            l2,
            l3,
        ] = *h;
        Ok(Header {
            spi_i: u64::from_be_bytes([i0, i1, i2, i3, i4, i5, i6, i7]),
            spi_r: u64::from_be_bytes([r0, r1, r2, r3, r4, r5, r6, r7]),
            next_payload,
            version,
            exchange,
            flags,
            message_id: u32::from_be_bytes([m0, m1, m2, m3]),
            length: u32::from_be_bytes([l0, l1, l2, l3]),
        })
    }

    /// Appends the 28 bytes as they are (the caller, or
    /// [`super::Message::encode`], sets `next_payload` and `length`).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.spi_i.to_be_bytes());
        out.extend_from_slice(&self.spi_r.to_be_bytes());
        out.extend_from_slice(&[self.next_payload, self.version, self.exchange, self.flags]);
        out.extend_from_slice(&self.message_id.to_be_bytes());
        out.extend_from_slice(&self.length.to_be_bytes());
    }

    /// The major version (the high nibble of `version`): 2 for IKEv2.
    pub fn major_version(&self) -> u8 {
        self.version >> 4
    }

    pub fn is_response(&self) -> bool {
        self.flags & super::FLAG_RESPONSE != 0
    }

    pub fn is_initiator(&self) -> bool {
        self.flags & super::FLAG_INITIATOR != 0
    }
}
