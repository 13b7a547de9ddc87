//! GRE (RFC 2784) with the key and sequence number extensions of RFC 2890.
//!
//! ```text
//!  0                   1                   2                   3
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |C| |K|S| Reserved0       | Ver |         Protocol Type         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |      Checksum (optional)      |       Reserved1 (optional)    |
//! |                         Key (optional)                        |
//! |                 Sequence Number (optional)                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```

use crate::checksum;
use crate::ethernet::EtherType;
use crate::field::{read_u16, read_u32, write_u16, write_u32};
use crate::{ChecksumMode, Error, Result};

mod flag {
    /// Checksum present (bit 0).
    pub const C: u16 = 0x8000;
    /// Key present (bit 2, RFC 2890).
    pub const K: u16 = 0x2000;
    /// Sequence number present (bit 3, RFC 2890).
    pub const S: u16 = 0x1000;
    /// Bits 1, 4 and 5: routing present, strict source route and the top
    /// of the recursion control of RFC 1701. RFC 2784 section 2.5: "A
    /// receiver MUST discard a packet where any of bits 1-5 are non-zero,
    /// unless that receiver implements RFC 1701" (bits 2 and 3 are K and S
    /// since RFC 2890).
    pub const MUST_BE_ZERO: u16 = 0x4000 | 0x0800 | 0x0400;
    /// Bits 6-12. RFC 2784 section 2.5: "MUST be sent as zero and MUST be
    /// ignored on receipt".
    pub const IGNORED: u16 = 0x03f8;
    pub const VERSION: u16 = 0x0007;
}

/// Length of the base GRE header (flags, version, protocol type).
pub const BASE_HEADER_LEN: usize = 4;

/// The EtherType GRE uses for transparent Ethernet bridging (RFC 1701).
pub const PROTOCOL_TEB: EtherType = EtherType(0x6558);

/// A read/write view of a GRE header and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GrePacket<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> GrePacket<T> {
        GrePacket { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<GrePacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Validates the flags that shape the header and the resulting length:
    /// * 4 bytes present, else [`Error::Truncated`];
    /// * bits 1, 4, 5 clear, else [`Error::Malformed`] (RFC 2784 section
    ///   2.5 "MUST discard"; bits 6-12 are ignored as that section says);
    /// * version 0, else [`Error::Unsupported`] (RFC 2784 section 2.3.1;
    ///   version 1 is PPTP's enhanced GRE, RFC 2637);
    /// * the checksum, key and sequence fields the flags announce present,
    ///   else [`Error::Truncated`].
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < BASE_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let word = self.flags_version();
        if word & flag::MUST_BE_ZERO != 0 {
            return Err(Error::Malformed);
        }
        if word & flag::VERSION != 0 {
            return Err(Error::Unsupported);
        }
        if len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The first 16 bits: flags, reserved bits and version.
    #[inline]
    pub fn flags_version(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 0)
    }

    #[inline]
    pub fn checksum_present(&self) -> bool {
        self.flags_version() & flag::C != 0
    }

    #[inline]
    pub fn key_present(&self) -> bool {
        self.flags_version() & flag::K != 0
    }

    #[inline]
    pub fn seq_present(&self) -> bool {
        self.flags_version() & flag::S != 0
    }

    /// Reserved bits 6-12, which a receiver ignores (RFC 2784 section 2.5).
    #[inline]
    pub fn reserved0(&self) -> u16 {
        self.flags_version() & flag::IGNORED
    }

    #[inline]
    pub fn version(&self) -> u8 {
        (self.flags_version() & flag::VERSION) as u8
    }

    /// EtherType of the payload (RFC 2784 section 2.4).
    #[inline]
    pub fn protocol_type(&self) -> EtherType {
        EtherType(read_u16(self.buffer.as_ref(), 2))
    }

    /// Header length in bytes: 4, plus 4 for each of checksum, key and
    /// sequence number present.
    #[inline]
    pub fn header_len(&self) -> usize {
        let w = self.flags_version();
        BASE_HEADER_LEN
            + 4 * (usize::from(w & flag::C != 0) + usize::from(w & flag::K != 0) + usize::from(w & flag::S != 0))
    }

    #[inline]
    fn key_offset(&self) -> usize {
        BASE_HEADER_LEN + 4 * usize::from(self.checksum_present())
    }

    #[inline]
    fn seq_offset(&self) -> usize {
        self.key_offset() + 4 * usize::from(self.key_present())
    }

    /// The checksum field, when present.
    #[inline]
    pub fn checksum(&self) -> Option<u16> {
        self.checksum_present().then(|| read_u16(self.buffer.as_ref(), BASE_HEADER_LEN))
    }

    /// The key (RFC 2890 section 2.1), when present.
    #[inline]
    pub fn key(&self) -> Option<u32> {
        self.key_present().then(|| read_u32(self.buffer.as_ref(), self.key_offset()))
    }

    /// The sequence number (RFC 2890 section 2.2), when present.
    #[inline]
    pub fn seq_number(&self) -> Option<u32> {
        self.seq_present().then(|| read_u32(self.buffer.as_ref(), self.seq_offset()))
    }

    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// Whether the checksum verifies over header and payload (RFC 2784
    /// section 2.5.1); true when there is no checksum.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        !self.checksum_present() || checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GrePacket<T> {
    /// Sets the whole first word (flags, reserved, version). Changing C, K
    /// or S moves the optional fields: set the word first, then them.
    #[inline]
    pub fn set_flags_version(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 0, value);
    }

    #[inline]
    pub fn set_protocol_type(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), 2, value.0);
    }

    /// Writes the checksum field (and zeroes Reserved1); no-op without C.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        if self.checksum_present() {
            write_u32(self.buffer.as_mut(), BASE_HEADER_LEN, u32::from(value) << 16);
        }
    }

    /// Writes the key; no-op without K.
    #[inline]
    pub fn set_key(&mut self, value: u32) {
        if self.key_present() {
            let at = self.key_offset();
            write_u32(self.buffer.as_mut(), at, value);
        }
    }

    /// Writes the sequence number; no-op without S.
    #[inline]
    pub fn set_seq_number(&mut self, value: u32) {
        if self.seq_present() {
            let at = self.seq_offset();
            write_u32(self.buffer.as_mut(), at, value);
        }
    }

    /// Computes the checksum over the whole buffer (header and payload);
    /// no-op without C.
    #[inline]
    pub fn fill_checksum(&mut self) {
        if self.checksum_present() {
            self.set_checksum(0);
            let sum = checksum::data(self.buffer.as_ref());
            self.set_checksum(!sum);
        }
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for GrePacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of a GRE header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GreRepr {
    /// EtherType of the payload.
    pub protocol_type: EtherType,
    /// Whether a checksum is carried.
    pub checksum: bool,
    pub key: Option<u32>,
    pub seq_number: Option<u32>,
}

impl GreRepr {
    /// Reads a header; [`Error::BadChecksum`] when `checksum` is `Verify`
    /// and a carried checksum fails.
    pub fn parse<T: AsRef<[u8]>>(packet: &GrePacket<T>, checksum: ChecksumMode) -> Result<GreRepr> {
        packet.check_len()?;
        if checksum.verify() && !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        Ok(GreRepr {
            protocol_type: packet.protocol_type(),
            checksum: packet.checksum_present(),
            key: packet.key(),
            seq_number: packet.seq_number(),
        })
    }

    /// Header length: 4 + 4 per optional field.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        BASE_HEADER_LEN
            + 4 * (usize::from(self.checksum)
                + usize::from(self.key.is_some())
                + usize::from(self.seq_number.is_some()))
    }

    /// Writes the header, reserved bits and version zero. With a checksum,
    /// it is computed over the whole buffer, so the payload must be in
    /// place (as when encapsulating in the headroom in front of it).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut GrePacket<T>) -> Result<()> {
        if packet.buffer.as_ref().len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        let word = if self.checksum { flag::C } else { 0 }
            | if self.key.is_some() { flag::K } else { 0 }
            | if self.seq_number.is_some() { flag::S } else { 0 };
        packet.set_flags_version(word);
        packet.set_protocol_type(self.protocol_type);
        if let Some(key) = self.key {
            packet.set_key(key);
        }
        if let Some(seq) = self.seq_number {
            packet.set_seq_number(seq);
        }
        packet.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GRE with key 0x2a carrying an IPv4 header (first bytes).
    const WITH_KEY: [u8; 12] = [0x20, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x45, 0x00, 0x00, 0x14];

    /// GRE with checksum, key 1, sequence 7, carrying 4 bytes of IPv6.
    const ALL: [u8; 20] = [
        0xb0, 0x00, 0x86, 0xdd, 0x69, 0x19, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0x60, 0x00,
        0x00, 0x00,
    ];

    #[test]
    fn parse_with_key() {
        let p = GrePacket::new_checked(&WITH_KEY[..]).unwrap();
        assert!(p.key_present() && !p.checksum_present() && !p.seq_present());
        assert_eq!(p.header_len(), 8);
        assert_eq!(p.key(), Some(42));
        assert_eq!(p.checksum(), None);
        assert_eq!(p.seq_number(), None);
        assert_eq!(p.protocol_type(), EtherType::IPV4);
        assert_eq!(p.payload(), &[0x45, 0, 0, 0x14]);
        let repr = GreRepr::parse(&p, ChecksumMode::Verify).unwrap();
        assert_eq!(repr, GreRepr { protocol_type: EtherType::IPV4, checksum: false, key: Some(42), seq_number: None });
        let mut buf = [0xffu8; 12];
        buf[8..].copy_from_slice(&WITH_KEY[8..]);
        repr.emit(&mut GrePacket::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, WITH_KEY);
    }

    #[test]
    fn parse_with_everything() {
        let p = GrePacket::new_checked(&ALL[..]).unwrap();
        assert_eq!(p.header_len(), 16);
        assert_eq!((p.checksum(), p.key(), p.seq_number()), (Some(0x6919), Some(1), Some(7)));
        assert!(p.verify_checksum());
        let repr = GreRepr::parse(&p, ChecksumMode::Verify).unwrap();
        let mut buf = [0u8; 20];
        buf[16..].copy_from_slice(&ALL[16..]);
        repr.emit(&mut GrePacket::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, ALL);
        let mut bad = ALL;
        bad[19] = 1;
        assert_eq!(GreRepr::parse(&GrePacket::new_unchecked(&bad[..]), ChecksumMode::Verify), Err(Error::BadChecksum));
    }

    #[test]
    fn check_len_cases() {
        assert_eq!(GrePacket::new_checked(&WITH_KEY[..3]), Err(Error::Truncated));
        assert_eq!(GrePacket::new_checked(&WITH_KEY[..7]), Err(Error::Truncated));
        assert_eq!(GrePacket::new_checked(&ALL[..15]), Err(Error::Truncated));
        // Routing present (bit 1), strict source route (bit 4), recursion (bit 5).
        for bits in [0x40u8, 0x08, 0x04] {
            let mut b = WITH_KEY;
            b[0] |= bits;
            assert_eq!(GrePacket::new_checked(&b[..]), Err(Error::Malformed), "{bits:#x}");
        }
        // Version 1 (PPTP).
        let mut b = WITH_KEY;
        b[1] = 0x01;
        assert_eq!(GrePacket::new_checked(&b[..]), Err(Error::Unsupported));
        // Bits 6-12 are ignored.
        let mut b = WITH_KEY;
        b[0] |= 0x03;
        b[1] = 0xf8;
        let p = GrePacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.reserved0(), 0x03f8);
        assert_eq!(p.key(), Some(42));
    }

    #[test]
    fn minimal_header_and_setters() {
        let repr = GreRepr { protocol_type: PROTOCOL_TEB, checksum: false, key: None, seq_number: None };
        assert_eq!(repr.buffer_len(), 4);
        let mut buf = [0xffu8; 4];
        repr.emit(&mut GrePacket::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, [0, 0, 0x65, 0x58]);
        // Setters of absent fields do nothing.
        let mut p = GrePacket::new_unchecked(&mut buf[..]);
        p.set_key(1);
        p.set_seq_number(2);
        p.set_checksum(3);
        assert_eq!(buf, [0, 0, 0x65, 0x58]);
        let mut short = [0u8; 7];
        let keyed = GreRepr { key: Some(1), ..repr };
        assert_eq!(keyed.emit(&mut GrePacket::new_unchecked(&mut short[..])), Err(Error::Truncated));
    }
}
