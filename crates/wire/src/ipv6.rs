//! IPv6 fixed headers (RFC 8200 section 3). Extension headers are walked by
//! [`crate::ipv6ext`].
//!
//! ```text
//!  0               1               2               3
//! +-------+---------------+---------------------------------------+
//! |version| traffic class |              flow label               |
//! +-------+-------+-------+-------+---------------+---------------+
//! |        payload length         |  next header  |   hop limit   |
//! +-------------------------------+---------------+---------------+
//! |                    source address (16 bytes)                  |
//! |                 destination address (16 bytes)                |
//! +---------------------------------------------------------------+
//! ```

use crate::field::{read_array, read_u16, read_u32, write_u16, write_u32};
use crate::ip::IpProtocol;
use crate::ipv6ext::{self, Ipv6ExtWalk};
use crate::{Error, Result};
use core::net::Ipv6Addr;

mod field {
    pub const VER_TC_FLOW: usize = 0;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: usize = 8;
    pub const DST_ADDR: usize = 24;
    pub const PAYLOAD: usize = 40;
}

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// The minimum link MTU every IPv6 link supports (RFC 8200 section 5).
pub const MIN_MTU: usize = 1280;

/// A read/write view of an IPv6 header and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it. Getters panic if it is shorter
    /// than 40 bytes; `payload` if shorter than the payload length says.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Ipv6Packet<T> {
        Ipv6Packet { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Validates against the buffer: 40 bytes of fixed header, then the
    /// payload length ([`Error::Truncated`] otherwise). Trailing bytes
    /// (padding) are allowed. A payload length of 0 with a Jumbo Payload
    /// option (RFC 2675) is read as an empty payload: tern does not carry
    /// jumbograms.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < HEADER_LEN + usize::from(self.payload_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW] >> 4
    }

    #[inline]
    pub fn traffic_class(&self) -> u8 {
        ((read_u16(self.buffer.as_ref(), field::VER_TC_FLOW) >> 4) & 0xff) as u8
    }

    /// Differentiated services codepoint (upper 6 bits of the traffic class).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// ECN field (low 2 bits of the traffic class, RFC 3168).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }

    #[inline]
    pub fn flow_label(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    /// Length of everything after the fixed header, extension headers
    /// included.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NXT_HDR])
    }

    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(read_array::<16>(self.buffer.as_ref(), field::SRC_ADDR))
    }

    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(read_array::<16>(self.buffer.as_ref(), field::DST_ADDR))
    }

    /// The destination address as a host-order `u128`, the form LPM
    /// lookups take.
    #[inline]
    pub fn dst_addr_u128(&self) -> u128 {
        u128::from_be_bytes(read_array::<16>(self.buffer.as_ref(), field::DST_ADDR))
    }

    /// Everything after the fixed header up to the payload length
    /// (extension headers included, padding excluded).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..field::PAYLOAD + usize::from(self.payload_len())]
    }

    /// Walks the extension headers of a checked packet; offsets in the
    /// result count from the start of the IPv6 header. See
    /// [`ipv6ext::walk`].
    #[inline]
    pub fn walk_ext_headers(&self) -> Result<Ipv6ExtWalk> {
        let payload = self
            .buffer
            .as_ref()
            .get(field::PAYLOAD..field::PAYLOAD + usize::from(self.payload_len()))
            .ok_or(Error::Truncated)?;
        let mut walk = ipv6ext::walk(self.next_header(), payload)?;
        walk.rebase(HEADER_LEN);
        Ok(walk)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    #[inline]
    pub fn set_version(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_TC_FLOW];
        *b = (*b & 0x0f) | (value << 4);
    }

    #[inline]
    pub fn set_traffic_class(&mut self, value: u8) {
        let w = read_u16(self.buffer.as_ref(), field::VER_TC_FLOW) & 0xf00f;
        write_u16(self.buffer.as_mut(), field::VER_TC_FLOW, w | (u16::from(value) << 4));
    }

    /// Sets the flow label (the low 20 bits of `value`).
    #[inline]
    pub fn set_flow_label(&mut self, value: u32) {
        let w = read_u32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0xfff0_0000;
        write_u32(self.buffer.as_mut(), field::VER_TC_FLOW, w | (value & 0x000f_ffff));
    }

    #[inline]
    pub fn set_payload_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    #[inline]
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = value.0;
    }

    #[inline]
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Decrements the hop limit (RFC 8200 section 3: "decremented by 1 by
    /// each node that forwards the packet"); IPv6 has no header checksum.
    /// Returns the new value; 0 is left alone (the caller sends ICMPv6
    /// time exceeded instead of forwarding).
    #[inline]
    pub fn decrement_hop_limit(&mut self) -> u8 {
        let h = self.hop_limit().saturating_sub(1);
        self.set_hop_limit(h);
        h
    }

    #[inline]
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR..field::SRC_ADDR + 16].copy_from_slice(&value.octets());
    }

    #[inline]
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR..field::DST_ADDR + 16].copy_from_slice(&value.octets());
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = field::PAYLOAD + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[field::PAYLOAD..end]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of an IPv6 fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
    /// Next header of the fixed header (an extension header or the upper
    /// layer).
    pub next_header: IpProtocol,
    /// Payload length in bytes (extension headers included).
    pub payload_len: u16,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// Flow label, 20 bits.
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Reads the fixed header; [`Error::Malformed`] if the version is not 6.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: packet.payload_len(),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// Length of the header `emit` writes (40 bytes).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header; the payload is not touched.
    /// [`Error::Malformed`] if the flow label does not fit 20 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) -> Result<()> {
        if packet.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.flow_label > 0x000f_ffff {
            return Err(Error::Malformed);
        }
        write_u32(
            packet.buffer.as_mut(),
            field::VER_TC_FLOW,
            (6 << 28) | (u32::from(self.traffic_class) << 20) | self.flow_label,
        );
        packet.set_payload_len(self.payload_len);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// UDP 2001:db8::1.40000 -> 2001:db8::2.53, "query".
    const UDP6: [u8; 53] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x0d, 0x11, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x02, 0x9c, 0x40, 0x00, 0x35, 0x00, 0x0d, 0xb8, 0x01, 0x71, 0x75, 0x65, 0x72, 0x79,
    ];

    fn repr() -> Ipv6Repr {
        Ipv6Repr {
            src_addr: "2001:db8::1".parse().unwrap(),
            dst_addr: "2001:db8::2".parse().unwrap(),
            next_header: IpProtocol::UDP,
            payload_len: 13,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        }
    }

    #[test]
    fn parse_udp6() {
        let p = Ipv6Packet::new_checked(&UDP6[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.payload_len(), 13);
        assert_eq!(p.next_header(), IpProtocol::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.payload(), &UDP6[40..]);
        assert_eq!(p.dst_addr_u128(), 0x2001_0db8_0000_0000_0000_0000_0000_0002);
        assert_eq!(Ipv6Repr::parse(&p), Ok(repr()));
        let w = p.walk_ext_headers().unwrap();
        assert_eq!((w.upper_protocol, w.upper_offset), (IpProtocol::UDP, 40));
    }

    #[test]
    fn emit_udp6_header() {
        let mut buf = UDP6;
        buf[..40].fill(0xee);
        repr().emit(&mut Ipv6Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, UDP6);
    }

    #[test]
    fn traffic_class_and_flow_label() {
        let mut p = Ipv6Packet::new_unchecked(UDP6);
        p.set_traffic_class(0xb9);
        p.set_flow_label(0x12345);
        assert_eq!(&p.as_ref()[..4], &[0x6b, 0x91, 0x23, 0x45]);
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb9);
        assert_eq!((p.dscp(), p.ecn()), (0x2e, 1));
        assert_eq!(p.flow_label(), 0x12345);
        p.set_flow_label(0xfff_ffff);
        assert_eq!(p.traffic_class(), 0xb9);
        let r = Ipv6Repr { flow_label: 1 << 20, ..repr() };
        assert_eq!(r.emit(&mut p), Err(Error::Malformed));
    }

    #[test]
    fn check_len_cases() {
        assert_eq!(Ipv6Packet::new_checked(&UDP6[..39]), Err(Error::Truncated));
        assert_eq!(Ipv6Packet::new_checked(&UDP6[..52]), Err(Error::Truncated));
        let mut padded = UDP6.to_vec();
        padded.push(0);
        assert_eq!(Ipv6Packet::new_checked(&padded[..]).unwrap().payload().len(), 13);
    }

    #[test]
    fn version_checked_by_repr() {
        let mut b = UDP6;
        b[0] = 0x40;
        assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&b[..])), Err(Error::Malformed));
    }

    #[test]
    fn hop_limit_decrement() {
        let mut p = Ipv6Packet::new_unchecked(UDP6);
        p.set_hop_limit(1);
        assert_eq!(p.decrement_hop_limit(), 0);
        assert_eq!(p.decrement_hop_limit(), 0);
    }
}
