//! ARP for IPv4 over Ethernet (RFC 826).
//!
//! ```text
//!  0       2       4   5   6       8             14      18            24      28
//! +-------+-------+---+---+-------+-------------+-------+-------------+-------+
//! | htype | ptype |hln|pln|  op   | sender MAC  | sender| target MAC  | target|
//! |   1   | 0x0800| 6 | 4 |       |             |  IPv4 |             |  IPv4 |
//! +-------+-------+---+---+-------+-------------+-------+-------------+-------+
//! ```
//! The view reads the Ethernet/IPv4 layout at fixed offsets; [`ArpRepr::parse`]
//! rejects packets for other hardware or protocol types. Bytes past the 28th
//! are Ethernet padding (a frame carries at least 46 bytes of payload).

use crate::ethernet::{EtherType, EthernetAddress};
use crate::field::{read_array, read_u16, write_u16};
use crate::{Error, Result};
use core::fmt;
use core::net::Ipv4Addr;

/// An ARP operation code (RFC 826; IANA "ARP Parameters").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ArpOperation(pub u16);

impl ArpOperation {
    pub const REQUEST: ArpOperation = ArpOperation(1);
    pub const REPLY: ArpOperation = ArpOperation(2);
}

impl fmt::Display for ArpOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ArpOperation::REQUEST => f.write_str("request"),
            ArpOperation::REPLY => f.write_str("reply"),
            ArpOperation(other) => write!(f, "op-{other}"),
        }
    }
}

/// ARP hardware type for Ethernet (RFC 826, IANA).
pub const HTYPE_ETHERNET: u16 = 1;

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: usize = 8;
    pub const SPA: usize = 14;
    pub const THA: usize = 18;
    pub const TPA: usize = 24;
    pub const END: usize = 28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = field::END;

/// A read/write view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> ArpPacket<T> {
        ArpPacket { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<ArpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ensures the buffer holds the 8-byte fixed part and the addresses
    /// its length fields announce, and at least the 28 bytes of the
    /// Ethernet/IPv4 layout the getters read.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        if buf.len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        let announced = 8 + 2 * (usize::from(buf[field::HLEN]) + usize::from(buf[field::PLEN]));
        if buf.len() < announced {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn hardware_type(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::HTYPE)
    }

    #[inline]
    pub fn protocol_type(&self) -> EtherType {
        EtherType(read_u16(self.buffer.as_ref(), field::PTYPE))
    }

    #[inline]
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    #[inline]
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    #[inline]
    pub fn operation(&self) -> ArpOperation {
        ArpOperation(read_u16(self.buffer.as_ref(), field::OPER))
    }

    /// Whether the packet announces the Ethernet/IPv4 layout the address
    /// getters assume.
    #[inline]
    pub fn is_ethernet_ipv4(&self) -> bool {
        self.hardware_type() == HTYPE_ETHERNET
            && self.protocol_type() == EtherType::IPV4
            && self.hardware_len() == 6
            && self.protocol_len() == 4
    }

    #[inline]
    pub fn source_hardware_addr(&self) -> EthernetAddress {
        EthernetAddress(read_array(self.buffer.as_ref(), field::SHA))
    }

    #[inline]
    pub fn source_protocol_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_array::<4>(self.buffer.as_ref(), field::SPA))
    }

    #[inline]
    pub fn target_hardware_addr(&self) -> EthernetAddress {
        EthernetAddress(read_array(self.buffer.as_ref(), field::THA))
    }

    #[inline]
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_array::<4>(self.buffer.as_ref(), field::TPA))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    #[inline]
    pub fn set_hardware_type(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::HTYPE, value);
    }

    #[inline]
    pub fn set_protocol_type(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), field::PTYPE, value.0);
    }

    #[inline]
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    #[inline]
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    #[inline]
    pub fn set_operation(&mut self, value: ArpOperation) {
        write_u16(self.buffer.as_mut(), field::OPER, value.0);
    }

    #[inline]
    pub fn set_source_hardware_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::SHA..field::SHA + 6].copy_from_slice(&value.0);
    }

    #[inline]
    pub fn set_source_protocol_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA..field::SPA + 4].copy_from_slice(&value.octets());
    }

    #[inline]
    pub fn set_target_hardware_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::THA..field::THA + 6].copy_from_slice(&value.0);
    }

    #[inline]
    pub fn set_target_protocol_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA..field::TPA + 4].copy_from_slice(&value.octets());
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for ArpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An Ethernet/IPv4 ARP message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Any operation code is carried; the ARP node handles
    /// [`ArpOperation::REQUEST`] and [`ArpOperation::REPLY`] and counts the rest.
    pub operation: ArpOperation,
    pub source_hardware_addr: EthernetAddress,
    pub source_protocol_addr: Ipv4Addr,
    pub target_hardware_addr: EthernetAddress,
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Reads an ARP packet; [`Error::Unsupported`] unless it is
    /// Ethernet (1) / IPv4 (0x0800) with lengths 6 and 4.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<ArpRepr> {
        packet.check_len()?;
        if !packet.is_ethernet_ipv4() {
            return Err(Error::Unsupported);
        }
        Ok(ArpRepr {
            operation: packet.operation(),
            source_hardware_addr: packet.source_hardware_addr(),
            source_protocol_addr: packet.source_protocol_addr(),
            target_hardware_addr: packet.target_hardware_addr(),
            target_protocol_addr: packet.target_protocol_addr(),
        })
    }

    #[inline]
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) -> Result<()> {
        if packet.buffer.as_ref().len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        packet.set_hardware_type(HTYPE_ETHERNET);
        packet.set_protocol_type(EtherType::IPV4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(self.source_hardware_addr);
        packet.set_source_protocol_addr(self.source_protocol_addr);
        packet.set_target_hardware_addr(self.target_hardware_addr);
        packet.set_target_protocol_addr(self.target_protocol_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// who-has 192.168.1.1 tell 192.168.1.10 (52:54:00:12:34:56).
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0xc0, 0xa8, 0x01, 0x0a,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01,
    ];

    fn request_repr() -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::REQUEST,
            source_hardware_addr: EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            source_protocol_addr: Ipv4Addr::new(192, 168, 1, 10),
            target_hardware_addr: EthernetAddress::ZERO,
            target_protocol_addr: Ipv4Addr::new(192, 168, 1, 1),
        }
    }

    #[test]
    fn parse_request() {
        let p = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert!(p.is_ethernet_ipv4());
        assert_eq!(p.operation(), ArpOperation::REQUEST);
        assert_eq!(ArpRepr::parse(&p), Ok(request_repr()));
    }

    #[test]
    fn emit_request() {
        let mut buf = [0xaau8; 28];
        request_repr().emit(&mut ArpPacket::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, REQUEST);
        let mut short = [0u8; 27];
        assert_eq!(request_repr().emit(&mut ArpPacket::new_unchecked(&mut short[..])), Err(Error::Truncated));
    }

    #[test]
    fn padded_frame_is_accepted() {
        let mut buf = REQUEST.to_vec();
        buf.resize(46, 0);
        assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()), Ok(request_repr()));
    }

    #[test]
    fn truncated() {
        assert_eq!(ArpPacket::new_checked(&REQUEST[..27]), Err(Error::Truncated));
        // Lengths that announce more than the buffer holds.
        let mut buf = REQUEST;
        buf[4] = 16;
        assert_eq!(ArpPacket::new_checked(&buf[..]), Err(Error::Truncated));
    }

    #[test]
    fn other_layouts_unsupported() {
        for (at, value) in [(1, 6u8), (2, 0x86), (4, 8), (5, 16)] {
            let mut buf = [0u8; 64];
            buf[..28].copy_from_slice(&REQUEST);
            buf[at] = value;
            let p = ArpPacket::new_checked(&buf[..]).unwrap();
            assert_eq!(ArpRepr::parse(&p), Err(Error::Unsupported), "byte {at}");
        }
    }
}
