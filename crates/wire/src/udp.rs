//! UDP (RFC 768), with the IPv4/IPv6 pseudo-header checksum.
//!
//! ```text
//! +-----------------+-----------------+
//! |   source port   | destination port|
//! +-----------------+-----------------+
//! |     length      |    checksum     |
//! +-----------------+-----------------+
//! |  payload ...                      |
//! ```

use crate::checksum::{self, IpPair};
use crate::field::{read_u16, write_u16};
use crate::ip::IpProtocol;
use crate::{ChecksumMode, Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
    pub const PAYLOAD: usize = 8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A read/write view of a UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Validates the length field against the buffer: 8 header bytes
    /// ([`Error::Truncated`]), a length of at least 8
    /// ([`Error::Malformed`]; a zero length, as in RFC 2675 jumbograms, is
    /// not supported) and no more than the buffer ([`Error::Truncated`]).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let buf_len = self.buffer.as_ref().len();
        if buf_len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len > buf_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    #[inline]
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length of header and payload, from the length field.
    #[inline]
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Whether the length field announces no payload.
    #[inline]
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The payload, up to the length field (trailing bytes excluded).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..usize::from(self.len())]
    }

    /// Whether the checksum verifies over the pseudo-header of `ip` and the
    /// datagram (as long as its length field says).
    ///
    /// Over IPv4 a zero checksum means "not computed" (RFC 768) and passes;
    /// over IPv6 it fails (RFC 8200 section 8.1: "IPv6 receivers MUST
    /// discard UDP packets containing a zero checksum").
    #[inline]
    pub fn verify_checksum(&self, ip: &IpPair) -> bool {
        if self.checksum() == 0 {
            return matches!(ip, IpPair::V4 { .. });
        }
        let len = self.len();
        let data = &self.buffer.as_ref()[..usize::from(len)];
        let ph = ip.pseudo_header(IpProtocol::UDP, u32::from(len));
        checksum::combine(&[ph, checksum::data(data)]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    #[inline]
    pub fn set_src_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, value);
    }

    #[inline]
    pub fn set_dst_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, value);
    }

    #[inline]
    pub fn set_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[field::PAYLOAD..end]
    }

    /// Computes the checksum over the pseudo-header of `ip` and the
    /// datagram (as long as its length field says). A computed zero is
    /// sent as `0xffff` (RFC 768: zero means "no checksum").
    #[inline]
    pub fn fill_checksum(&mut self, ip: &IpPair) {
        self.set_checksum(0);
        let len = self.len();
        let data = &self.buffer.as_ref()[..usize::from(len)];
        let ph = ip.pseudo_header(IpProtocol::UDP, u32::from(len));
        let c = !checksum::combine(&[ph, checksum::data(data)]);
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for UdpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of a UDP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Payload length in bytes (length field minus 8).
    pub payload_len: u16,
}

impl UdpRepr {
    /// Reads the header of a datagram carried between the addresses of
    /// `ip`. [`Error::Malformed`] for a zero destination port (RFC 768
    /// leaves it unassigned; IANA reserves it);
    /// [`Error::BadChecksum`] as [`UdpPacket::verify_checksum`] says when
    /// `checksum` is `Verify`.
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>, ip: &IpPair, checksum: ChecksumMode) -> Result<UdpRepr> {
        packet.check_len()?;
        if packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        if checksum.verify() && !packet.verify_checksum(ip) {
            return Err(Error::BadChecksum);
        }
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: packet.len() - HEADER_LEN as u16,
        })
    }

    /// Length of header and payload.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len as usize
    }

    /// Writes ports and length and clears the checksum: for callers that
    /// write the payload afterwards and then call
    /// [`UdpPacket::fill_checksum`]. Only the 8 header bytes must fit.
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>) -> Result<()> {
        if packet.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.payload_len > u16::MAX - HEADER_LEN as u16 {
            return Err(Error::Malformed);
        }
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(self.payload_len + HEADER_LEN as u16);
        packet.set_checksum(0);
        Ok(())
    }

    /// Writes the header and the checksum over the payload already in the
    /// buffer (as when encapsulating). [`Error::Truncated`] if the buffer
    /// is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>, ip: &IpPair) -> Result<()> {
        if packet.buffer.as_ref().len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        self.emit_header(packet)?;
        packet.fill_checksum(ip);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    /// 2001:db8::1.40000 -> 2001:db8::2.53, "query".
    const UDP6: [u8; 13] = [0x9c, 0x40, 0x00, 0x35, 0x00, 0x0d, 0xb8, 0x01, 0x71, 0x75, 0x65, 0x72, 0x79];
    /// 10.0.0.1.5353 -> 10.0.0.2.53, "hi".
    const UDP4: [u8; 10] = [0x14, 0xe9, 0x00, 0x35, 0x00, 0x0a, 0x6e, 0x50, 0x68, 0x69];

    fn v6() -> IpPair {
        IpPair::V6 { src: "2001:db8::1".parse::<Ipv6Addr>().unwrap(), dst: "2001:db8::2".parse::<Ipv6Addr>().unwrap() }
    }

    fn v4() -> IpPair {
        IpPair::V4 { src: Ipv4Addr::new(10, 0, 0, 1), dst: Ipv4Addr::new(10, 0, 0, 2) }
    }

    #[test]
    fn parse_v6_and_v4() {
        let p = UdpPacket::new_checked(&UDP6[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (40000, 53, 13));
        assert_eq!(p.payload(), b"query");
        assert!(p.verify_checksum(&v6()));
        assert_eq!(
            UdpRepr::parse(&p, &v6(), ChecksumMode::Verify),
            Ok(UdpRepr { src_port: 40000, dst_port: 53, payload_len: 5 })
        );
        let p = UdpPacket::new_checked(&UDP4[..]).unwrap();
        assert!(p.verify_checksum(&v4()));
        assert!(!p.verify_checksum(&v6()));
    }

    #[test]
    fn emit_matches_capture() {
        let repr = UdpRepr { src_port: 40000, dst_port: 53, payload_len: 5 };
        let mut buf = [0u8; 13];
        buf[8..].copy_from_slice(b"query");
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), &v6()).unwrap();
        assert_eq!(buf, UDP6);
        let mut short = [0u8; 12];
        assert_eq!(repr.emit(&mut UdpPacket::new_unchecked(&mut short[..]), &v6()), Err(Error::Truncated));
    }

    #[test]
    fn zero_checksum_rules() {
        let mut b = UDP4;
        b[6] = 0;
        b[7] = 0;
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum(&v4()), "IPv4: zero means no checksum");
        assert!(!p.verify_checksum(&v6()), "IPv6: zero checksum is invalid");
        assert_eq!(UdpRepr::parse(&p, &v6(), ChecksumMode::Verify), Err(Error::BadChecksum));
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Choose the payload so that the sum is 0xffff and the checksum 0.
        let ip = v4();
        let mut buf = [0u8; 10];
        let repr = UdpRepr { src_port: 1, dst_port: 2, payload_len: 2 };
        repr.emit_header(&mut UdpPacket::new_unchecked(&mut buf[..])).unwrap();
        let partial = checksum::combine(&[ip.pseudo_header(IpProtocol::UDP, 10), checksum::data(&buf)]);
        buf[8..10].copy_from_slice(&(!partial).to_be_bytes());
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        p.fill_checksum(&ip);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum(&ip));
    }

    #[test]
    fn check_len_cases() {
        assert_eq!(UdpPacket::new_checked(&UDP4[..7]), Err(Error::Truncated));
        assert_eq!(UdpPacket::new_checked(&UDP4[..9]), Err(Error::Truncated));
        let mut b = UDP4;
        b[5] = 7;
        assert_eq!(UdpPacket::new_checked(&b[..]), Err(Error::Malformed));
        let mut padded = UDP4.to_vec();
        padded.push(0xee);
        assert_eq!(UdpPacket::new_checked(&padded[..]).unwrap().payload(), b"hi");
        let mut b = UDP4;
        b[2] = 0;
        b[3] = 0;
        assert_eq!(
            UdpRepr::parse(&UdpPacket::new_unchecked(&b[..]), &v4(), ChecksumMode::Ignore),
            Err(Error::Malformed)
        );
    }
}
