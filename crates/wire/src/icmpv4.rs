//! ICMP for IPv4 (RFC 792), with the "fragmentation needed" next-hop MTU of
//! RFC 1191 and the error quoting rules of RFC 1812 section 4.3.2.3.
//!
//! ```text
//! +--------+--------+-----------------+
//! |  type  |  code  |    checksum     |
//! +--------+--------+-----------------+
//! |  rest of header (ident/seq, MTU,  |
//! |  pointer, gateway, or unused)     |
//! +-----------------------------------+
//! |  data ...                         |
//! ```

use crate::checksum;
use crate::field::{read_u16, read_u32, write_u16, write_u32};
use crate::{ChecksumMode, Error, Result};
use core::fmt;

/// An ICMPv4 message type (IANA "ICMP Type Numbers").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Icmpv4Type(pub u8);

impl Icmpv4Type {
    pub const ECHO_REPLY: Icmpv4Type = Icmpv4Type(0);
    pub const DST_UNREACHABLE: Icmpv4Type = Icmpv4Type(3);
    pub const REDIRECT: Icmpv4Type = Icmpv4Type(5);
    pub const ECHO_REQUEST: Icmpv4Type = Icmpv4Type(8);
    pub const ROUTER_ADVERT: Icmpv4Type = Icmpv4Type(9);
    pub const ROUTER_SOLICIT: Icmpv4Type = Icmpv4Type(10);
    pub const TIME_EXCEEDED: Icmpv4Type = Icmpv4Type(11);
    pub const PARAM_PROBLEM: Icmpv4Type = Icmpv4Type(12);
    pub const TIMESTAMP: Icmpv4Type = Icmpv4Type(13);
    pub const TIMESTAMP_REPLY: Icmpv4Type = Icmpv4Type(14);

    /// Whether this is an error message, which must never be sent in
    /// answer to another error (RFC 1812 section 4.3.2.7).
    #[inline]
    pub const fn is_error(self) -> bool {
        matches!(self.0, 3 | 4 | 5 | 11 | 12)
    }
}

impl fmt::Display for Icmpv4Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Icmpv4Type::ECHO_REPLY => f.write_str("echo-reply"),
            Icmpv4Type::DST_UNREACHABLE => f.write_str("destination-unreachable"),
            Icmpv4Type::REDIRECT => f.write_str("redirect"),
            Icmpv4Type::ECHO_REQUEST => f.write_str("echo-request"),
            Icmpv4Type::TIME_EXCEEDED => f.write_str("time-exceeded"),
            Icmpv4Type::PARAM_PROBLEM => f.write_str("parameter-problem"),
            Icmpv4Type(t) => write!(f, "type-{t}"),
        }
    }
}

/// Codes of [`Icmpv4Type::DST_UNREACHABLE`] (RFC 792, RFC 1812 5.2.7.1).
pub mod dst_unreachable {
    pub const NET_UNREACHABLE: u8 = 0;
    pub const HOST_UNREACHABLE: u8 = 1;
    pub const PROTOCOL_UNREACHABLE: u8 = 2;
    pub const PORT_UNREACHABLE: u8 = 3;
    /// Fragmentation needed and DF set; carries the next-hop MTU (RFC 1191).
    pub const FRAG_NEEDED: u8 = 4;
    pub const SOURCE_ROUTE_FAILED: u8 = 5;
    pub const NET_UNKNOWN: u8 = 6;
    pub const HOST_UNKNOWN: u8 = 7;
    pub const NET_PROHIBITED: u8 = 9;
    pub const HOST_PROHIBITED: u8 = 10;
    /// Communication administratively prohibited (RFC 1812), what a
    /// filtering router sends.
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// Codes of [`Icmpv4Type::TIME_EXCEEDED`].
pub mod time_exceeded {
    pub const TTL_EXCEEDED: u8 = 0;
    pub const REASSEMBLY: u8 = 1;
}

/// Most bytes of the offending datagram an ICMPv4 error quotes: RFC 1812
/// section 4.3.2.3 has a router quote as much as fits in a 576-byte
/// datagram (576 - 20 IP header - 8 ICMP header).
pub const MAX_ERROR_QUOTE: usize = 576 - 20 - HEADER_LEN;

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const REST: usize = 4;
    pub const ECHO_IDENT: usize = 4;
    pub const ECHO_SEQNO: usize = 6;
    pub const UNUSED: usize = 4;
    pub const MTU: usize = 6;
    pub const DATA: usize = 8;
}

/// Length of the ICMPv4 header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = field::DATA;

/// A read/write view of an ICMPv4 message. The buffer should span exactly
/// the message (the IPv4 payload): the checksum covers all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Icmpv4Packet<T> {
        Icmpv4Packet { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Icmpv4Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ensures the 8-byte header is present (every message type has it).
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
    pub fn msg_type(&self) -> Icmpv4Type {
        Icmpv4Type(self.buffer.as_ref()[field::TYPE])
    }

    #[inline]
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Bytes 4..8 as one word, whatever the type.
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::REST)
    }

    /// Identifier of an echo request/reply.
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Sequence number of an echo request/reply.
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }

    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191 section
    /// 4); 0 from routers that predate RFC 1191.
    #[inline]
    pub fn next_hop_mtu(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::MTU)
    }

    /// Pointer of a parameter problem message (RFC 792).
    #[inline]
    pub fn pointer(&self) -> u8 {
        self.buffer.as_ref()[field::REST]
    }

    /// Everything after the 8-byte header: echo data, or the quoted
    /// datagram of an error.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..]
    }

    /// Whether the checksum over the whole message verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    #[inline]
    pub fn set_msg_type(&mut self, value: Icmpv4Type) {
        self.buffer.as_mut()[field::TYPE] = value.0;
    }

    #[inline]
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    #[inline]
    pub fn set_rest_of_header(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::REST, value);
    }

    #[inline]
    pub fn set_echo_ident(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::ECHO_IDENT, value);
    }

    #[inline]
    pub fn set_echo_seq_no(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::ECHO_SEQNO, value);
    }

    /// Sets the next-hop MTU and clears the unused word before it.
    #[inline]
    pub fn set_next_hop_mtu(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::UNUSED, 0);
        write_u16(self.buffer.as_mut(), field::MTU, value);
    }

    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA..]
    }

    /// Recomputes the checksum over the whole buffer.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(self.buffer.as_ref());
        self.set_checksum(!sum);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An ICMPv4 message, borrowing its data from the packet it was parsed
/// from (or from the caller, to emit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Icmpv4Repr<'a> {
    EchoRequest {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    EchoReply {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    /// `data` is the quoted datagram (its IP header and at least 8 bytes).
    /// `next_hop_mtu` is meaningful for [`dst_unreachable::FRAG_NEEDED`]
    /// and 0 otherwise.
    DstUnreachable {
        code: u8,
        next_hop_mtu: u16,
        data: &'a [u8],
    },
    TimeExceeded {
        code: u8,
        data: &'a [u8],
    },
    /// Any other type, or an echo with a non-zero code, kept raw.
    Other {
        msg_type: Icmpv4Type,
        code: u8,
        rest_of_header: u32,
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Reads a message. [`Error::BadChecksum`] when `checksum` is `Verify`
    /// and the checksum over the whole buffer fails.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv4Packet<&'a T>,
        checksum: ChecksumMode,
    ) -> Result<Icmpv4Repr<'a>> {
        packet.check_len()?;
        if checksum.verify() && !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let data = packet.buffer.as_ref().get(field::DATA..).ok_or(Error::Truncated)?;
        let code = packet.msg_code();
        Ok(match (packet.msg_type(), code) {
            (Icmpv4Type::ECHO_REQUEST, 0) => {
                Icmpv4Repr::EchoRequest { ident: packet.echo_ident(), seq_no: packet.echo_seq_no(), data }
            }
            (Icmpv4Type::ECHO_REPLY, 0) => {
                Icmpv4Repr::EchoReply { ident: packet.echo_ident(), seq_no: packet.echo_seq_no(), data }
            }
            (Icmpv4Type::DST_UNREACHABLE, _) => {
                Icmpv4Repr::DstUnreachable { code, next_hop_mtu: packet.next_hop_mtu(), data }
            }
            (Icmpv4Type::TIME_EXCEEDED, _) => Icmpv4Repr::TimeExceeded { code, data },
            (msg_type, _) => Icmpv4Repr::Other { msg_type, code, rest_of_header: packet.rest_of_header(), data },
        })
    }

    fn data(&self) -> &'a [u8] {
        match *self {
            Icmpv4Repr::EchoRequest { data, .. }
            | Icmpv4Repr::EchoReply { data, .. }
            | Icmpv4Repr::DstUnreachable { data, .. }
            | Icmpv4Repr::TimeExceeded { data, .. }
            | Icmpv4Repr::Other { data, .. } => data,
        }
    }

    /// Length of the whole message: 8 + data.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data().len()
    }

    /// Writes the message and its checksum. The view should span exactly
    /// `buffer_len()` bytes (the checksum covers the whole buffer);
    /// [`Error::Truncated`] if it is shorter.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv4Packet<T>) -> Result<()> {
        let data = self.data();
        let end = HEADER_LEN + data.len();
        let Some(dst) = packet.buffer.as_mut().get_mut(field::DATA..end) else {
            return Err(Error::Truncated);
        };
        dst.copy_from_slice(data);
        let (msg_type, code, rest) = match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, .. } => {
                (Icmpv4Type::ECHO_REQUEST, 0, (u32::from(ident) << 16) | u32::from(seq_no))
            }
            Icmpv4Repr::EchoReply { ident, seq_no, .. } => {
                (Icmpv4Type::ECHO_REPLY, 0, (u32::from(ident) << 16) | u32::from(seq_no))
            }
            Icmpv4Repr::DstUnreachable { code, next_hop_mtu, .. } => {
                (Icmpv4Type::DST_UNREACHABLE, code, u32::from(next_hop_mtu))
            }
            Icmpv4Repr::TimeExceeded { code, .. } => (Icmpv4Type::TIME_EXCEEDED, code, 0),
            Icmpv4Repr::Other { msg_type, code, rest_of_header, .. } => (msg_type, code, rest_of_header),
        };
        packet.set_msg_type(msg_type);
        packet.set_msg_code(code);
        packet.set_rest_of_header(rest);
        packet.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Echo request ident 0x1234 seq 1, data "abcdefgh".
    const ECHO: [u8; 16] =
        [0x08, 0x00, 0x54, 0x35, 0x12, 0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68];

    /// Fragmentation needed (MTU 1400) quoting a UDP datagram's IP header
    /// and first 8 bytes.
    const FRAG_NEEDED: [u8; 36] = [
        0x03, 0x04, 0xbb, 0xd0, 0x00, 0x00, 0x05, 0x78, 0x45, 0x00, 0x05, 0xdc, 0x00, 0x01, 0x40, 0x00, 0x3f, 0x11,
        0x12, 0x34, 0x0a, 0x00, 0x00, 0x01, 0xcb, 0x00, 0x71, 0x09, 0x13, 0x88, 0x00, 0x35, 0x05, 0xc8, 0x00, 0x00,
    ];

    #[test]
    fn parse_echo() {
        let p = Icmpv4Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.msg_type(), Icmpv4Type::ECHO_REQUEST);
        assert!(p.verify_checksum());
        assert_eq!((p.echo_ident(), p.echo_seq_no()), (0x1234, 1));
        assert_eq!(
            Icmpv4Repr::parse(&p, ChecksumMode::Verify),
            Ok(Icmpv4Repr::EchoRequest { ident: 0x1234, seq_no: 1, data: b"abcdefgh" })
        );
    }

    #[test]
    fn emit_echo() {
        let repr = Icmpv4Repr::EchoRequest { ident: 0x1234, seq_no: 1, data: b"abcdefgh" };
        assert_eq!(repr.buffer_len(), 16);
        let mut buf = [0u8; 16];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, ECHO);
        let mut short = [0u8; 15];
        assert_eq!(repr.emit(&mut Icmpv4Packet::new_unchecked(&mut short[..])), Err(Error::Truncated));
    }

    #[test]
    fn parse_frag_needed() {
        let p = Icmpv4Packet::new_checked(&FRAG_NEEDED[..]).unwrap();
        assert!(p.verify_checksum());
        assert!(p.msg_type().is_error());
        assert_eq!(p.next_hop_mtu(), 1400);
        let repr = Icmpv4Repr::parse(&p, ChecksumMode::Verify).unwrap();
        assert_eq!(
            repr,
            Icmpv4Repr::DstUnreachable {
                code: dst_unreachable::FRAG_NEEDED,
                next_hop_mtu: 1400,
                data: &FRAG_NEEDED[8..]
            }
        );
        let mut buf = [0u8; 36];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, FRAG_NEEDED);
    }

    #[test]
    fn bad_checksum_and_truncation() {
        let mut b = ECHO;
        b[9] ^= 0x20;
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, ChecksumMode::Verify), Err(Error::BadChecksum));
        assert!(Icmpv4Repr::parse(&p, ChecksumMode::Ignore).is_ok());
        assert_eq!(Icmpv4Packet::new_checked(&ECHO[..7]), Err(Error::Truncated));
    }

    #[test]
    fn other_types_are_raw() {
        let mut buf = [0u8; 12];
        let repr = Icmpv4Repr::Other {
            msg_type: Icmpv4Type::REDIRECT,
            code: 1,
            rest_of_header: u32::from(core::net::Ipv4Addr::new(10, 0, 0, 1)),
            data: &[1, 2, 3, 4],
        };
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..])).unwrap();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, ChecksumMode::Verify), Ok(repr));
        // An echo with a non-zero code is not an echo.
        let mut b = ECHO;
        b[1] = 1;
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert!(matches!(Icmpv4Repr::parse(&p, ChecksumMode::Ignore), Ok(Icmpv4Repr::Other { code: 1, .. })));
    }

    #[test]
    fn time_exceeded_round_trip() {
        let quote = &FRAG_NEEDED[8..];
        let repr = Icmpv4Repr::TimeExceeded { code: time_exceeded::TTL_EXCEEDED, data: quote };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf[..8], [11, 0, buf[2], buf[3], 0, 0, 0, 0]);
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, ChecksumMode::Verify), Ok(repr));
        assert_eq!(MAX_ERROR_QUOTE, 548);
    }
}
