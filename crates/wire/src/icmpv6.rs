//! ICMP for IPv6 (RFC 4443): echo, destination unreachable, packet too big,
//! time exceeded, parameter problem; Neighbour Discovery messages (RFC 4861)
//! are read and written by [`crate::ndisc`].
//!
//! ```text
//! +--------+--------+-----------------+
//! |  type  |  code  |    checksum     |   checksum covers the IPv6
//! +--------+--------+-----------------+   pseudo-header (RFC 8200 8.1)
//! |  ident/seq, MTU, pointer, unused  |
//! +-----------------------------------+
//! |  data ... (ND: fixed fields, then options)
//! ```

use crate::checksum;
use crate::field::{read_u16, read_u32, write_u16, write_u32};
use crate::ip::IpProtocol;
use crate::ndisc::NdiscRepr;
use crate::{ChecksumMode, Error, Result};
use core::fmt;
use core::net::Ipv6Addr;

/// An ICMPv6 message type (IANA "ICMPv6 Parameters").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Icmpv6Type(pub u8);

impl Icmpv6Type {
    pub const DST_UNREACHABLE: Icmpv6Type = Icmpv6Type(1);
    pub const PACKET_TOO_BIG: Icmpv6Type = Icmpv6Type(2);
    pub const TIME_EXCEEDED: Icmpv6Type = Icmpv6Type(3);
    pub const PARAM_PROBLEM: Icmpv6Type = Icmpv6Type(4);
    pub const ECHO_REQUEST: Icmpv6Type = Icmpv6Type(128);
    pub const ECHO_REPLY: Icmpv6Type = Icmpv6Type(129);
    pub const MLD_QUERY: Icmpv6Type = Icmpv6Type(130);
    pub const MLD_REPORT: Icmpv6Type = Icmpv6Type(131);
    pub const MLD_DONE: Icmpv6Type = Icmpv6Type(132);
    pub const ROUTER_SOLICIT: Icmpv6Type = Icmpv6Type(133);
    pub const ROUTER_ADVERT: Icmpv6Type = Icmpv6Type(134);
    pub const NEIGHBOR_SOLICIT: Icmpv6Type = Icmpv6Type(135);
    pub const NEIGHBOR_ADVERT: Icmpv6Type = Icmpv6Type(136);
    pub const REDIRECT: Icmpv6Type = Icmpv6Type(137);
    pub const MLDV2_REPORT: Icmpv6Type = Icmpv6Type(143);

    /// Error messages have types 0..=127 (RFC 4443 section 2.1); they are
    /// never sent in answer to another error (section 2.4 (e)).
    #[inline]
    pub const fn is_error(self) -> bool {
        self.0 < 128
    }

    /// One of the five Neighbour Discovery messages (RFC 4861 section 4).
    #[inline]
    pub const fn is_ndisc(self) -> bool {
        matches!(self.0, 133..=137)
    }

    /// Length of the fixed part of a message of this type: 8 for most,
    /// more for router advertisements (16), neighbour solicitations and
    /// advertisements (24) and redirects (40).
    #[inline]
    pub const fn header_len(self) -> usize {
        match self.0 {
            134 => 16,
            135 | 136 => 24,
            137 => 40,
            _ => 8,
        }
    }
}

impl fmt::Display for Icmpv6Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match *self {
            Icmpv6Type::DST_UNREACHABLE => "destination-unreachable",
            Icmpv6Type::PACKET_TOO_BIG => "packet-too-big",
            Icmpv6Type::TIME_EXCEEDED => "time-exceeded",
            Icmpv6Type::PARAM_PROBLEM => "parameter-problem",
            Icmpv6Type::ECHO_REQUEST => "echo-request",
            Icmpv6Type::ECHO_REPLY => "echo-reply",
            Icmpv6Type::ROUTER_SOLICIT => "router-solicitation",
            Icmpv6Type::ROUTER_ADVERT => "router-advertisement",
            Icmpv6Type::NEIGHBOR_SOLICIT => "neighbor-solicitation",
            Icmpv6Type::NEIGHBOR_ADVERT => "neighbor-advertisement",
            Icmpv6Type::REDIRECT => "redirect",
            Icmpv6Type(t) => return write!(f, "type-{t}"),
        };
        f.write_str(name)
    }
}

/// Codes of [`Icmpv6Type::DST_UNREACHABLE`] (RFC 4443 section 3.1).
pub mod dst_unreachable {
    pub const NO_ROUTE: u8 = 0;
    pub const ADMIN_PROHIBITED: u8 = 1;
    pub const BEYOND_SCOPE: u8 = 2;
    pub const ADDRESS_UNREACHABLE: u8 = 3;
    pub const PORT_UNREACHABLE: u8 = 4;
    pub const FAILED_POLICY: u8 = 5;
    pub const REJECT_ROUTE: u8 = 6;
}

/// Codes of [`Icmpv6Type::TIME_EXCEEDED`] (RFC 4443 section 3.3).
pub mod time_exceeded {
    pub const HOP_LIMIT_EXCEEDED: u8 = 0;
    pub const REASSEMBLY: u8 = 1;
}

/// Codes of [`Icmpv6Type::PARAM_PROBLEM`] (RFC 4443 section 3.4).
pub mod param_problem {
    pub const ERRONEOUS_HEADER: u8 = 0;
    pub const UNRECOGNIZED_NEXT_HEADER: u8 = 1;
    pub const UNRECOGNIZED_OPTION: u8 = 2;
}

/// Most bytes of the offending packet an ICMPv6 error quotes: RFC 4443
/// section 2.4 (c), as much as fits without the error exceeding the
/// minimum IPv6 MTU (1280 - 40 IPv6 header - 8 ICMPv6 header).
pub const MAX_ERROR_QUOTE: usize = 1280 - 40 - HEADER_LEN;

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const REST: usize = 4;
    pub const ECHO_IDENT: usize = 4;
    pub const ECHO_SEQNO: usize = 6;
    pub const DATA: usize = 8;
}

/// Length of the common ICMPv6 header (type, code, checksum, 4 bytes).
pub const HEADER_LEN: usize = field::DATA;

/// A read/write view of an ICMPv6 message. The buffer should span exactly
/// the message (the upper-layer part of the IPv6 packet): the checksum
/// covers all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Icmpv6Packet<T> {
        Icmpv6Packet { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Icmpv6Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ensures the buffer holds the 8-byte header and the fixed part of the
    /// message type ([`Icmpv6Type::header_len`]), else [`Error::Truncated`].
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.msg_type().header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn msg_type(&self) -> Icmpv6Type {
        Icmpv6Type(self.buffer.as_ref()[field::TYPE])
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

    #[inline]
    pub fn echo_ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }

    /// MTU of a packet too big message (RFC 4443 section 3.2).
    #[inline]
    pub fn mtu(&self) -> u32 {
        self.rest_of_header()
    }

    /// Pointer of a parameter problem message: offset of the error in the
    /// quoted packet (RFC 4443 section 3.4).
    #[inline]
    pub fn pointer(&self) -> u32 {
        self.rest_of_header()
    }

    /// Everything after the 8-byte header.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..]
    }

    /// Whether the checksum over the IPv6 pseudo-header and the whole
    /// message verifies (RFC 4443 section 2.3).
    #[inline]
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let buf = self.buffer.as_ref();
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, buf.len() as u32);
        checksum::combine(&[ph, checksum::data(buf)]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    #[inline]
    pub fn set_msg_type(&mut self, value: Icmpv6Type) {
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

    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA..]
    }

    /// Recomputes the checksum over the pseudo-header and the whole buffer.
    #[inline]
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let buf = self.buffer.as_ref();
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, buf.len() as u32);
        let sum = checksum::combine(&[ph, checksum::data(buf)]);
        self.set_checksum(!sum);
    }

    pub(crate) fn buffer_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Icmpv6Packet<&'a T> {
    /// The whole buffer, with the lifetime of the borrowed bytes (so that
    /// reprs can borrow from it).
    pub(crate) fn buffer_ref(&self) -> &'a [u8] {
        self.buffer.as_ref()
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An ICMPv6 message, borrowing its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Icmpv6Repr<'a> {
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
    /// `data` is the quoted packet, as much as fits (see [`MAX_ERROR_QUOTE`]).
    DstUnreachable {
        code: u8,
        data: &'a [u8],
    },
    PacketTooBig {
        mtu: u32,
        data: &'a [u8],
    },
    TimeExceeded {
        code: u8,
        data: &'a [u8],
    },
    ParamProblem {
        code: u8,
        pointer: u32,
        data: &'a [u8],
    },
    Ndisc(NdiscRepr<'a>),
    /// Any other type (MLD, ...), or an echo with a non-zero code, kept raw.
    Other {
        msg_type: Icmpv6Type,
        code: u8,
        rest_of_header: u32,
        data: &'a [u8],
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Reads a message carried from `src` to `dst`.
    /// [`Error::BadChecksum`] when `checksum` is `Verify` and the checksum
    /// fails; ND messages are checked as [`NdiscRepr::parse`] says.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        checksum: ChecksumMode,
    ) -> Result<Icmpv6Repr<'a>> {
        packet.check_len()?;
        if checksum.verify() && !packet.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        let msg_type = packet.msg_type();
        if msg_type.is_ndisc() {
            return NdiscRepr::parse(packet).map(Icmpv6Repr::Ndisc);
        }
        let data = packet.buffer.as_ref().get(field::DATA..).ok_or(Error::Truncated)?;
        let code = packet.msg_code();
        Ok(match (msg_type, code) {
            (Icmpv6Type::ECHO_REQUEST, 0) => {
                Icmpv6Repr::EchoRequest { ident: packet.echo_ident(), seq_no: packet.echo_seq_no(), data }
            }
            (Icmpv6Type::ECHO_REPLY, 0) => {
                Icmpv6Repr::EchoReply { ident: packet.echo_ident(), seq_no: packet.echo_seq_no(), data }
            }
            (Icmpv6Type::DST_UNREACHABLE, _) => Icmpv6Repr::DstUnreachable { code, data },
            (Icmpv6Type::PACKET_TOO_BIG, _) => Icmpv6Repr::PacketTooBig { mtu: packet.mtu(), data },
            (Icmpv6Type::TIME_EXCEEDED, _) => Icmpv6Repr::TimeExceeded { code, data },
            (Icmpv6Type::PARAM_PROBLEM, _) => Icmpv6Repr::ParamProblem { code, pointer: packet.pointer(), data },
            _ => Icmpv6Repr::Other { msg_type, code, rest_of_header: packet.rest_of_header(), data },
        })
    }

    /// Length of the whole message.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::Ndisc(nd) => nd.buffer_len(),
            Icmpv6Repr::EchoRequest { data, .. }
            | Icmpv6Repr::EchoReply { data, .. }
            | Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PacketTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. }
            | Icmpv6Repr::ParamProblem { data, .. }
            | Icmpv6Repr::Other { data, .. } => HEADER_LEN + data.len(),
        }
    }

    /// Writes the message and its checksum for a packet from `src` to
    /// `dst`. The view should span exactly `buffer_len()` bytes (the
    /// checksum covers the whole buffer); [`Error::Truncated`] if shorter.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Icmpv6Packet<T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) -> Result<()> {
        if packet.buffer.as_ref().len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        let echo = |ident: u16, seq: u16| (u32::from(ident) << 16) | u32::from(seq);
        let (msg_type, code, rest, data) = match *self {
            Icmpv6Repr::Ndisc(ref nd) => {
                nd.emit(packet)?;
                packet.fill_checksum(src, dst);
                return Ok(());
            }
            Icmpv6Repr::EchoRequest { ident, seq_no, data } => (Icmpv6Type::ECHO_REQUEST, 0, echo(ident, seq_no), data),
            Icmpv6Repr::EchoReply { ident, seq_no, data } => (Icmpv6Type::ECHO_REPLY, 0, echo(ident, seq_no), data),
            Icmpv6Repr::DstUnreachable { code, data } => (Icmpv6Type::DST_UNREACHABLE, code, 0, data),
            Icmpv6Repr::PacketTooBig { mtu, data } => (Icmpv6Type::PACKET_TOO_BIG, 0, mtu, data),
            Icmpv6Repr::TimeExceeded { code, data } => (Icmpv6Type::TIME_EXCEEDED, code, 0, data),
            Icmpv6Repr::ParamProblem { code, pointer, data } => (Icmpv6Type::PARAM_PROBLEM, code, pointer, data),
            Icmpv6Repr::Other { msg_type, code, rest_of_header, data } => (msg_type, code, rest_of_header, data),
        };
        let Some(dst_data) = packet.buffer.as_mut().get_mut(field::DATA..HEADER_LEN + data.len()) else {
            return Err(Error::Truncated);
        };
        dst_data.copy_from_slice(data);
        packet.set_msg_type(msg_type);
        packet.set_msg_code(code);
        packet.set_rest_of_header(rest);
        packet.fill_checksum(src, dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// Echo request ident 0x77 seq 3 "ping", 2001:db8::1 -> 2001:db8::2.
    const ECHO: [u8; 12] = [0x80, 0x00, 0x44, 0xf9, 0x00, 0x77, 0x00, 0x03, 0x70, 0x69, 0x6e, 0x67];

    /// Packet too big (MTU 1280) from 2001:db8::fe to 2001:db8::1 quoting a
    /// UDP packet's header and 8 bytes.
    const PTB: [u8; 56] = [
        0x02, 0x00, 0x27, 0xf2, 0x00, 0x00, 0x05, 0x00, 0x60, 0x00, 0x00, 0x00, 0x05, 0x78, 0x11, 0x3f, 0x20, 0x01,
        0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8,
        0x00, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, 0x9c, 0x40, 0x00, 0x35, 0x05, 0x78,
        0x00, 0x00,
    ];

    #[test]
    fn parse_and_emit_echo() {
        let (src, dst) = (a("2001:db8::1"), a("2001:db8::2"));
        let p = Icmpv6Packet::new_checked(&ECHO[..]).unwrap();
        assert!(p.verify_checksum(src, dst));
        assert!(!p.verify_checksum(dst, a("2001:db8::3")));
        let repr = Icmpv6Repr::parse(&p, src, dst, ChecksumMode::Verify).unwrap();
        assert_eq!(repr, Icmpv6Repr::EchoRequest { ident: 0x77, seq_no: 3, data: b"ping" });
        let mut buf = [0u8; 12];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), src, dst).unwrap();
        assert_eq!(buf, ECHO);
    }

    #[test]
    fn parse_and_emit_packet_too_big() {
        let (src, dst) = (a("2001:db8::fe"), a("2001:db8::1"));
        let p = Icmpv6Packet::new_checked(&PTB[..]).unwrap();
        assert!(p.msg_type().is_error());
        assert_eq!(p.mtu(), 1280);
        let repr = Icmpv6Repr::parse(&p, src, dst, ChecksumMode::Verify).unwrap();
        assert_eq!(repr, Icmpv6Repr::PacketTooBig { mtu: 1280, data: &PTB[8..] });
        let mut buf = [0u8; 56];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), src, dst).unwrap();
        assert_eq!(buf, PTB);
    }

    #[test]
    fn errors_round_trip() {
        let (src, dst) = (a("fe80::1"), a("fe80::2"));
        for repr in [
            Icmpv6Repr::DstUnreachable { code: dst_unreachable::ADMIN_PROHIBITED, data: &[1, 2, 3] },
            Icmpv6Repr::TimeExceeded { code: time_exceeded::HOP_LIMIT_EXCEEDED, data: &[] },
            Icmpv6Repr::ParamProblem { code: param_problem::UNRECOGNIZED_NEXT_HEADER, pointer: 6, data: &[9; 40] },
            Icmpv6Repr::Other { msg_type: Icmpv6Type::MLD_QUERY, code: 0, rest_of_header: 0x1000_0000, data: &[0; 16] },
        ] {
            let mut buf = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), src, dst).unwrap();
            let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
            assert_eq!(Icmpv6Repr::parse(&p, src, dst, ChecksumMode::Verify), Ok(repr));
        }
    }

    #[test]
    fn checks() {
        let (src, dst) = (a("2001:db8::1"), a("2001:db8::2"));
        assert_eq!(Icmpv6Packet::new_checked(&ECHO[..7]), Err(Error::Truncated));
        // An NS shorter than its 24-byte fixed part.
        let mut ns = [0u8; 20];
        ns[0] = 135;
        assert_eq!(Icmpv6Packet::new_checked(&ns[..]), Err(Error::Truncated));
        let mut b = ECHO;
        b[8] = b'P';
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p, src, dst, ChecksumMode::Verify), Err(Error::BadChecksum));
        assert!(Icmpv6Repr::parse(&p, src, dst, ChecksumMode::Ignore).is_ok());
        let repr = Icmpv6Repr::EchoReply { ident: 1, seq_no: 2, data: &[0; 10] };
        let mut short = [0u8; 17];
        assert_eq!(repr.emit(&mut Icmpv6Packet::new_unchecked(&mut short[..]), src, dst), Err(Error::Truncated));
        assert_eq!(MAX_ERROR_QUOTE, 1232);
    }
}
