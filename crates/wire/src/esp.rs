//! ESP (RFC 4303) headers, parse only: tern reads the SPI (to pick a
//! security association or steer a flow) and the sequence number; what
//! follows is ciphertext.
//!
//! ```text
//! +---------------------------------+
//! | Security Parameters Index (SPI) |
//! |         Sequence Number         |
//! +---------------------------------+
//! | IV, encrypted payload, padding, |
//! | pad length, next header, ICV    |
//! ```

use crate::field::{read_u32, write_u32};
use crate::{Error, Result};

/// Length of the ESP header (SPI + sequence number).
pub const HEADER_LEN: usize = 8;

/// A view of an ESP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EspPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EspPacket<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> EspPacket<T> {
        EspPacket { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<EspPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ensures the 8-byte header is present.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn spi(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 0)
    }

    /// Low 32 bits of the sequence number (RFC 4303 section 2.2).
    #[inline]
    pub fn seq_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }

    /// IV, ciphertext, trailer and ICV, opaque here.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EspPacket<T> {
    #[inline]
    pub fn set_spi(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), 0, value);
    }

    #[inline]
    pub fn set_seq_number(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), 4, value);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for EspPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The cleartext fields of an ESP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EspRepr {
    pub spi: u32,
    pub seq_number: u32,
}

impl EspRepr {
    /// Reads the header. [`Error::Malformed`] for SPI 0 (RFC 4303 section
    /// 2.1: reserved for local use and "MUST NOT be sent on the wire"; in
    /// UDP-encapsulated ESP it marks IKE, RFC 3948 section 2.2).
    pub fn parse<T: AsRef<[u8]>>(packet: &EspPacket<T>) -> Result<EspRepr> {
        packet.check_len()?;
        if packet.spi() == 0 {
            return Err(Error::Malformed);
        }
        Ok(EspRepr { spi: packet.spi(), seq_number: packet.seq_number() })
    }

    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes SPI and sequence number (for tests and traffic generation;
    /// tern does not encrypt here).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut EspPacket<T>) -> Result<()> {
        packet.check_len()?;
        if self.spi == 0 {
            return Err(Error::Malformed);
        }
        packet.set_spi(self.spi);
        packet.set_seq_number(self.seq_number);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPI 0x1000, sequence 1, then 8 bytes of IV.
    const ESP: [u8; 16] = [0, 0, 0x10, 0, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4];

    #[test]
    fn parse_and_emit() {
        let p = EspPacket::new_checked(&ESP[..]).unwrap();
        assert_eq!((p.spi(), p.seq_number()), (0x1000, 1));
        assert_eq!(p.payload().len(), 8);
        let repr = EspRepr::parse(&p).unwrap();
        assert_eq!(repr, EspRepr { spi: 0x1000, seq_number: 1 });
        let mut buf = ESP;
        buf[..8].fill(0);
        repr.emit(&mut EspPacket::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, ESP);
    }

    #[test]
    fn rejects() {
        assert_eq!(EspPacket::new_checked(&ESP[..7]), Err(Error::Truncated));
        let mut b = ESP;
        b[2] = 0;
        assert_eq!(EspRepr::parse(&EspPacket::new_unchecked(&b[..])), Err(Error::Malformed));
        let mut buf = [0u8; 8];
        let zero = EspRepr { spi: 0, seq_number: 1 };
        assert_eq!(zero.emit(&mut EspPacket::new_unchecked(&mut buf[..])), Err(Error::Malformed));
    }
}
