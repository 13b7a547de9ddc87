//! Ethernet II frames (IEEE 802.3 with an EtherType, RFC 894).
//!
//! ```text
//!  0                   6                   12      14
//! +-------------------+-------------------+-------+-------------
//! | destination       | source            | type  | payload ...
//! +-------------------+-------------------+-------+-------------
//! ```
//! The frame check sequence is not part of the view: drivers strip it.

use crate::field::{Field, read_array, read_u16, write_u16};
use crate::{Error, Result};
use core::fmt;
use core::str::FromStr;

/// An EtherType (IEEE 802 numbers), as found in an Ethernet II header or
/// after a VLAN tag. A newtype so that reading it is a plain load; match on
/// the constants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EtherType(pub u16);

impl EtherType {
    pub const IPV4: EtherType = EtherType(0x0800);
    pub const ARP: EtherType = EtherType(0x0806);
    /// IEEE 802.1Q customer VLAN tag (C-tag).
    pub const VLAN: EtherType = EtherType(0x8100);
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// IEEE 802.1ad service VLAN tag (S-tag, "QinQ" outer tag).
    pub const QINQ: EtherType = EtherType(0x88a8);

    /// Whether this value introduces a VLAN tag (802.1Q or 802.1ad).
    #[inline]
    pub const fn is_vlan_tpid(self) -> bool {
        self.0 == 0x8100 || self.0 == 0x88a8
    }

    /// Values below 0x0600 are 802.3 length fields, not EtherTypes
    /// (IEEE 802.3 clause 3.2.6); tern does not forward LLC frames.
    #[inline]
    pub const fn is_length(self) -> bool {
        self.0 < 0x0600
    }
}

impl From<u16> for EtherType {
    #[inline]
    fn from(value: u16) -> Self {
        EtherType(value)
    }
}

impl From<EtherType> for u16 {
    #[inline]
    fn from(value: EtherType) -> Self {
        value.0
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EtherType::IPV4 => f.write_str("ipv4"),
            EtherType::ARP => f.write_str("arp"),
            EtherType::VLAN => f.write_str("802.1q"),
            EtherType::IPV6 => f.write_str("ipv6"),
            EtherType::QINQ => f.write_str("802.1ad"),
            EtherType(other) => write!(f, "0x{other:04x}"),
        }
    }
}

/// A 48-bit IEEE MAC address.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);
    pub const ZERO: EthernetAddress = EthernetAddress([0; 6]);

    /// The address in `bytes[..6]`, or `None` if `bytes` is shorter.
    pub fn from_bytes(bytes: &[u8]) -> Option<EthernetAddress> {
        crate::field::get_array(bytes, 0).map(EthernetAddress)
    }

    #[inline]
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    #[inline]
    pub const fn is_broadcast(&self) -> bool {
        let b = self.0;
        b[0] & b[1] & b[2] & b[3] & b[4] & b[5] == 0xff
    }

    /// Group bit (I/G, the least significant bit of the first octet) set;
    /// broadcast is a multicast address.
    #[inline]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    #[inline]
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Locally administered (U/L bit set).
    #[inline]
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }

    /// The IPv6 multicast MAC address for `addr` (RFC 2464 section 7):
    /// 33:33 followed by the last four octets.
    pub const fn ipv6_multicast(addr: core::net::Ipv6Addr) -> EthernetAddress {
        let o = addr.octets();
        EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
    }

    /// The IPv4 multicast MAC address for `addr` (RFC 1112 section 6.4):
    /// 01:00:5e followed by the low 23 bits.
    pub const fn ipv4_multicast(addr: core::net::Ipv4Addr) -> EthernetAddress {
        let o = addr.octets();
        EthernetAddress([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Error from parsing an [`EthernetAddress`] out of a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseEthernetAddressError;

impl fmt::Display for ParseEthernetAddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid MAC address (expected six hex octets like aa:bb:cc:dd:ee:ff)")
    }
}

impl std::error::Error for ParseEthernetAddressError {}

impl FromStr for EthernetAddress {
    type Err = ParseEthernetAddressError;

    /// Accepts six octets of one or two hex digits separated by `:` or
    /// `-` (one separator style throughout), as `ip link` and Windows print.
    fn from_str(s: &str) -> core::result::Result<Self, Self::Err> {
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for byte in &mut out {
            let part = parts.next().ok_or(ParseEthernetAddressError)?;
            if part.is_empty() || part.len() > 2 || !part.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(ParseEthernetAddressError);
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| ParseEthernetAddressError)?;
        }
        if parts.next().is_some() {
            return Err(ParseEthernetAddressError);
        }
        Ok(EthernetAddress(out))
    }
}

mod field {
    use super::Field;
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: usize = 14;
}

/// Length of an Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A read/write view of an Ethernet II frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking it; getters panic if it is shorter
    /// than [`HEADER_LEN`].
    #[inline]
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Ensures the buffer holds the 14-byte header, so no getter panics.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN { Err(Error::Truncated) } else { Ok(()) }
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    #[inline]
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress(read_array(self.buffer.as_ref(), field::DESTINATION.start))
    }

    #[inline]
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress(read_array(self.buffer.as_ref(), field::SOURCE.start))
    }

    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(read_u16(self.buffer.as_ref(), field::ETHERTYPE))
    }

    /// Everything after the 14-byte header (VLAN tags included, if any).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    #[inline]
    pub fn set_dst_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&value.0);
    }

    #[inline]
    pub fn set_src_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&value.0);
    }

    #[inline]
    pub fn set_ethertype(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, value.0);
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for EthernetFrame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of an Ethernet II header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    pub src_addr: EthernetAddress,
    pub dst_addr: EthernetAddress,
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header of a frame. Any EtherType is accepted, 802.3 length
    /// values included: the caller decides what it forwards.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr { src_addr: frame.src_addr(), dst_addr: frame.dst_addr(), ethertype: frame.ethertype() })
    }

    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the payload is left as it is.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) -> Result<()> {
        frame.check_len()?;
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet header of an ARP request (broadcast) from 52:54:00:12:34:56.
    const FRAME: [u8; 16] =
        [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06, 0xaa, 0xbb];

    #[test]
    fn parse_header() {
        let frame = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(frame.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(frame.src_addr(), EthernetAddress([0x52, 0x54, 0, 0x12, 0x34, 0x56]));
        assert_eq!(frame.ethertype(), EtherType::ARP);
        assert_eq!(frame.payload(), &[0xaa, 0xbb]);
    }

    #[test]
    fn truncated() {
        assert_eq!(EthernetFrame::new_checked(&FRAME[..13]).unwrap_err(), Error::Truncated);
        assert!(EthernetFrame::new_checked(&FRAME[..14]).unwrap().payload().is_empty());
    }

    #[test]
    fn repr_round_trip() {
        let repr = EthernetRepr::parse(&EthernetFrame::new_unchecked(&FRAME[..])).unwrap();
        let mut buf = [0u8; 16];
        let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
        repr.emit(&mut frame).unwrap();
        frame.payload_mut().copy_from_slice(&[0xaa, 0xbb]);
        assert_eq!(buf, FRAME);
        let mut short = [0u8; 10];
        assert_eq!(repr.emit(&mut EthernetFrame::new_unchecked(&mut short[..])), Err(Error::Truncated));
    }

    #[test]
    fn address_classes() {
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert!(EthernetAddress::BROADCAST.is_multicast());
        let mc = EthernetAddress([0x01, 0x00, 0x5e, 0, 0, 1]);
        assert!(mc.is_multicast() && !mc.is_broadcast() && !mc.is_unicast());
        let uc = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
        assert!(uc.is_unicast() && uc.is_local());
        assert_eq!(
            EthernetAddress::ipv6_multicast("ff02::1:ff00:1".parse().unwrap()),
            EthernetAddress([0x33, 0x33, 0xff, 0, 0, 1])
        );
        assert_eq!(
            EthernetAddress::ipv4_multicast(core::net::Ipv4Addr::new(239, 129, 2, 3)),
            EthernetAddress([0x01, 0x00, 0x5e, 0x01, 2, 3])
        );
    }

    #[test]
    fn address_display_and_parse() {
        let a = EthernetAddress([0xaa, 0xbb, 0x0c, 0xdd, 0xee, 0x0f]);
        assert_eq!(a.to_string(), "aa:bb:0c:dd:ee:0f");
        assert_eq!("aa:bb:0c:dd:ee:0f".parse::<EthernetAddress>(), Ok(a));
        assert_eq!("AA-BB-C-DD-EE-F".parse::<EthernetAddress>(), Ok(a));
        for bad in [
            "",
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:00",
            "aa:bb:cc:dd:ee:fg",
            "aaa:bb:cc:dd:ee:ff",
            "aa:bb:cc:dd::ff",
            "aa:bb-cc:dd:ee:ff",
            "+a:bb:cc:dd:ee:ff",
        ] {
            assert!(bad.parse::<EthernetAddress>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ethertype_display() {
        assert_eq!(EtherType::IPV6.to_string(), "ipv6");
        assert_eq!(EtherType(0x88cc).to_string(), "0x88cc");
        assert!(EtherType(0x05dc).is_length());
        assert!(EtherType::QINQ.is_vlan_tpid() && EtherType::VLAN.is_vlan_tpid());
    }
}
