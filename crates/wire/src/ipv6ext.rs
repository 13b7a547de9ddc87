//! IPv6 extension headers (RFC 8200 section 4) and a bounded walker that
//! finds the upper-layer header behind them.
//!
//! Hop-by-hop, routing and destination options headers share one layout
//! (next header, length in 8-octet units not counting the first 8, data);
//! the fragment header is 8 bytes; AH (RFC 4302) counts its length in
//! 4-octet units minus 2. ESP (RFC 4303) encrypts what follows, so the walk
//! stops there, as it does at "No Next Header" (59) and any other value.
//!
//! ```text
//! generic:  | next hdr | hdr ext len |  data ... ((len + 1) * 8 bytes in all)
//! fragment: | next hdr | reserved | offset (13b) |res|M| identification (32b) |
//! AH:       | next hdr | payload len | reserved | SPI | sequence | ICV ... ((len + 2) * 4)
//! ```

use crate::field::{read_u16, read_u32, write_u16, write_u32};
use crate::ip::IpProtocol;
use crate::{Error, Result};

/// Most extension headers [`walk`] steps over before giving up with
/// [`Error::Unsupported`]. RFC 8200 section 4.1 recommends each header
/// appear at most once (destination options twice), so a legitimate chain
/// has at most 6 (hop-by-hop, destination options, routing, fragment, AH,
/// destination options); 8 leaves room and bounds the work per packet.
pub const MAX_EXT_HEADERS: usize = 8;

/// What a walk over the extension headers found.
///
/// Offsets count from the start of the buffer the walk was given
/// ([`walk`]) or from the start of the IPv6 header
/// ([`crate::Ipv6Packet::walk_ext_headers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6ExtWalk {
    /// The first header that is not a walked extension header: TCP, UDP,
    /// ICMPv6, ESP, No Next Header, or anything else. For a non-first
    /// fragment, the fragment header's next header.
    pub upper_protocol: IpProtocol,
    /// Offset of that header.
    pub upper_offset: usize,
    /// Number of extension headers walked.
    pub header_count: u8,
    /// A hop-by-hop options header was present (always first).
    pub hop_by_hop: bool,
    /// Offset of the (first) routing header, if any.
    pub routing_offset: Option<usize>,
    /// Offset of the (first) fragment header, if any.
    pub fragment_offset: Option<usize>,
    /// The packet is a fragment with a non-zero offset: what follows the
    /// fragment header is the middle of the original payload, not an
    /// upper-layer header, so ports must not be read from it.
    pub later_fragment: bool,
}

impl Ipv6ExtWalk {
    pub(crate) fn rebase(&mut self, by: usize) {
        self.upper_offset += by;
        if let Some(o) = self.routing_offset.as_mut() {
            *o += by;
        }
        if let Some(o) = self.fragment_offset.as_mut() {
            *o += by;
        }
    }

    /// Whether the upper-layer header starts at `upper_offset` (not a later
    /// fragment, not ESP, not "no next header").
    #[inline]
    pub fn has_upper_header(&self) -> bool {
        !self.later_fragment
            && self.upper_protocol != IpProtocol::ESP
            && self.upper_protocol != IpProtocol::IPV6_NO_NEXT
    }
}

/// Walks the extension headers at the start of `data` (an IPv6 payload),
/// the first of which is announced by `next_header` (the fixed header's
/// next header).
///
/// Steps over hop-by-hop, routing, fragment, destination options and AH;
/// stops at anything else. Stops early at a fragment header whose offset is
/// not zero (see [`Ipv6ExtWalk::later_fragment`]).
///
/// Errors: [`Error::Truncated`] if a header runs past `data` (RFC 8200
/// section 4.5 and RFC 7112 require the first fragment to hold the whole
/// chain); [`Error::Malformed`] for a hop-by-hop header anywhere but first
/// (RFC 8200 section 4.1, answered with a Parameter Problem code 1 by
/// hosts) or an AH whose length is below 12 or not a multiple of 8 (RFC
/// 4302 section 2.2); [`Error::Unsupported`] after [`MAX_EXT_HEADERS`].
pub fn walk(next_header: IpProtocol, data: &[u8]) -> Result<Ipv6ExtWalk> {
    let mut walk = Ipv6ExtWalk {
        upper_protocol: next_header,
        upper_offset: 0,
        header_count: 0,
        hop_by_hop: false,
        routing_offset: None,
        fragment_offset: None,
        later_fragment: false,
    };
    let mut nh = next_header;
    let mut off = 0usize;
    loop {
        if !nh.is_ipv6_ext_header() {
            break;
        }
        if usize::from(walk.header_count) >= MAX_EXT_HEADERS {
            return Err(Error::Unsupported);
        }
        let rest = data.get(off..).ok_or(Error::Truncated)?;
        let len = match nh {
            IpProtocol::IPV6_FRAG => {
                let frag = Ipv6FragmentHeader::new_checked(rest)?;
                // A second fragment header is odd (RFC 8200 section 4.1:
                // each header "should occur at most once"); report the
                // first, which is the one reassembly starts from.
                walk.fragment_offset.get_or_insert(off);
                if frag.frag_offset() != 0 {
                    walk.header_count += 1;
                    walk.later_fragment = true;
                    walk.upper_protocol = frag.next_header();
                    walk.upper_offset = off + FRAGMENT_HEADER_LEN;
                    return Ok(walk);
                }
                nh = frag.next_header();
                FRAGMENT_HEADER_LEN
            }
            IpProtocol::AH => {
                let ah = AuthHeader::new_checked(rest)?;
                if !ah.header_len().is_multiple_of(8) {
                    return Err(Error::Malformed);
                }
                nh = ah.next_header();
                ah.header_len()
            }
            _ => {
                if nh == IpProtocol::HOP_BY_HOP {
                    if walk.header_count != 0 {
                        return Err(Error::Malformed);
                    }
                    walk.hop_by_hop = true;
                } else if nh == IpProtocol::IPV6_ROUTE {
                    walk.routing_offset.get_or_insert(off);
                }
                let ext = Ipv6ExtHeader::new_checked(rest)?;
                nh = ext.next_header();
                ext.header_len()
            }
        };
        walk.header_count += 1;
        off += len;
    }
    walk.upper_protocol = nh;
    walk.upper_offset = off;
    Ok(walk)
}

// ---------------------------------------------------------------------------
// Generic (hop-by-hop, routing, destination options) header.

/// A read/write view of a hop-by-hop, routing or destination options
/// header: next header, length, then data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6ExtHeader<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Ipv6ExtHeader<T> {
        Ipv6ExtHeader { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Ipv6ExtHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Ensures the buffer holds the whole header as its length field
    /// announces (at least 8 bytes).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        if buf.len() < 2 || buf.len() < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// Length of the whole header in bytes: `(hdr ext len + 1) * 8`.
    #[inline]
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[1]) + 1) * 8
    }

    /// The bytes after next header and length, up to the header's end:
    /// options for hop-by-hop and destination options headers, routing
    /// type, segments left and type-specific data for a routing header.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[2..self.header_len()]
    }

    /// Routing type (routing headers only; RFC 8200 section 4.4).
    #[inline]
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[2]
    }

    /// Segments left (routing headers only). RFC 8200 section 4.4: a
    /// transit router does not examine it; the destination does.
    #[inline]
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[3]
    }

    /// The options of a hop-by-hop or destination options header.
    #[inline]
    pub fn options(&self) -> Ipv6Options<'_> {
        Ipv6Options::new(self.data())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6ExtHeader<T> {
    #[inline]
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[0] = value.0;
    }

    /// Sets the length field so the header is `len` bytes long (`len` must
    /// be a non-zero multiple of 8 up to 2048; other values are rounded).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[1] = (len / 8).saturating_sub(1).min(255) as u8;
    }

    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[2..end]
    }
}

/// One option of a hop-by-hop or destination options header
/// (RFC 8200 section 4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ipv6Option<'a> {
    Pad1,
    PadN(u8),
    /// Router Alert (RFC 2711): the value says which protocol wants it.
    RouterAlert(u16),
    /// Jumbo Payload (RFC 2675).
    Jumbo(u32),
    Unknown {
        option_type: u8,
        data: &'a [u8],
    },
}

impl Ipv6Option<'_> {
    /// What a node that does not recognise the option must do with the
    /// packet: the two high-order bits of the type (RFC 8200 section 4.2):
    /// 0 skip, 1 discard, 2 discard + ICMP, 3 discard + ICMP unless multicast.
    pub fn unrecognized_action(option_type: u8) -> u8 {
        option_type >> 6
    }
}

/// Iterator over the options of a hop-by-hop or destination options header.
/// Yields `Err(Truncated)` once and stops if an option runs past the end;
/// bounded by the data length (at most 2046 bytes).
#[derive(Clone, Debug)]
pub struct Ipv6Options<'a> {
    data: &'a [u8],
}

impl<'a> Ipv6Options<'a> {
    pub fn new(data: &'a [u8]) -> Ipv6Options<'a> {
        Ipv6Options { data }
    }
}

impl<'a> Iterator for Ipv6Options<'a> {
    type Item = Result<Ipv6Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&option_type, rest) = self.data.split_first()?;
        if option_type == 0 {
            self.data = rest;
            return Some(Ok(Ipv6Option::Pad1));
        }
        let Some((&len, rest)) = rest.split_first() else {
            self.data = &[];
            return Some(Err(Error::Truncated));
        };
        let Some(value) = rest.get(..usize::from(len)) else {
            self.data = &[];
            return Some(Err(Error::Truncated));
        };
        self.data = &rest[usize::from(len)..];
        Some(Ok(match (option_type, value) {
            (1, _) => Ipv6Option::PadN(len),
            (5, &[a, b]) => Ipv6Option::RouterAlert(u16::from_be_bytes([a, b])),
            (0xc2, &[a, b, c, d]) => Ipv6Option::Jumbo(u32::from_be_bytes([a, b, c, d])),
            _ => Ipv6Option::Unknown { option_type, data: value },
        }))
    }
}

// ---------------------------------------------------------------------------
// Fragment header.

/// Length of the IPv6 fragment header.
pub const FRAGMENT_HEADER_LEN: usize = 8;

/// A read/write view of an IPv6 fragment header (RFC 8200 section 4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6FragmentHeader<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Ipv6FragmentHeader<T> {
        Ipv6FragmentHeader { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Ipv6FragmentHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2) & 0xfff8
    }

    #[inline]
    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), 2) & 1 != 0
    }

    #[inline]
    pub fn ident(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }

    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[FRAGMENT_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6FragmentHeader<T> {
    #[inline]
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[0] = value.0;
        self.buffer.as_mut()[1] = 0;
    }

    /// Sets the offset in bytes (rounded down to a multiple of 8), keeping M.
    #[inline]
    pub fn set_frag_offset(&mut self, value: u16) {
        let w = read_u16(self.buffer.as_ref(), 2) & 1;
        write_u16(self.buffer.as_mut(), 2, w | (value & 0xfff8));
    }

    #[inline]
    pub fn set_more_frags(&mut self, value: bool) {
        let w = read_u16(self.buffer.as_ref(), 2) & 0xfff8;
        write_u16(self.buffer.as_mut(), 2, w | u16::from(value));
    }

    #[inline]
    pub fn set_ident(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), 4, value);
    }
}

/// The fields of an IPv6 fragment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6FragmentRepr {
    pub next_header: IpProtocol,
    /// Offset in bytes, a multiple of 8.
    pub frag_offset: u16,
    pub more_frags: bool,
    pub ident: u32,
}

impl Ipv6FragmentRepr {
    pub fn parse<T: AsRef<[u8]>>(header: &Ipv6FragmentHeader<T>) -> Result<Ipv6FragmentRepr> {
        header.check_len()?;
        Ok(Ipv6FragmentRepr {
            next_header: header.next_header(),
            frag_offset: header.frag_offset(),
            more_frags: header.more_frags(),
            ident: header.ident(),
        })
    }

    #[inline]
    pub const fn buffer_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    /// Writes the header; [`Error::Malformed`] if the offset is not a
    /// multiple of 8.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut Ipv6FragmentHeader<T>) -> Result<()> {
        header.check_len()?;
        if !self.frag_offset.is_multiple_of(8) {
            return Err(Error::Malformed);
        }
        header.set_next_header(self.next_header);
        write_u16(header.buffer.as_mut(), 2, self.frag_offset | u16::from(self.more_frags));
        header.set_ident(self.ident);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Authentication header.

/// Smallest AH: next header, length, reserved, SPI, sequence (no ICV).
pub const AH_MIN_LEN: usize = 12;

/// A read-only view of an IP Authentication Header (RFC 4302 section 2).
/// tern does not verify AH; the view exists so the IPv6 walk can step over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AuthHeader<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> AuthHeader<T> {
        AuthHeader { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<AuthHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// [`Error::Truncated`] if the buffer is shorter than 12 bytes or than
    /// the length field says; [`Error::Malformed`] if the length field
    /// announces fewer than 12 bytes.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < 2 {
            return Err(Error::Truncated);
        }
        if self.header_len() < AH_MIN_LEN {
            return Err(Error::Malformed);
        }
        if len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// Length of the whole header in bytes: `(payload len + 2) * 4`.
    #[inline]
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[1]) + 2) * 4
    }

    #[inline]
    pub fn spi(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 4)
    }

    #[inline]
    pub fn seq_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 8)
    }

    /// Integrity check value.
    #[inline]
    pub fn icv(&self) -> &[u8] {
        &self.buffer.as_ref()[AH_MIN_LEN..self.header_len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::Ipv6Packet;

    /// UDP to ff02::16 with hop-by-hop (router alert) + fragment (offset 0, M)
    /// headers.
    const HBH_FRAG: [u8; 72] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x16, 0x2c, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00, 0x11, 0x00, 0x00, 0x01, 0xde, 0xad,
        0xbe, 0xef, 0x00, 0x01, 0x00, 0x02, 0x00, 0x10, 0xf1, 0x16, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
    ];

    #[test]
    fn walk_hop_by_hop_and_fragment() {
        let p = Ipv6Packet::new_checked(&HBH_FRAG[..]).unwrap();
        let w = p.walk_ext_headers().unwrap();
        assert_eq!(w.upper_protocol, IpProtocol::UDP);
        assert_eq!(w.upper_offset, 56);
        assert_eq!(w.header_count, 2);
        assert!(w.hop_by_hop);
        assert_eq!(w.fragment_offset, Some(48));
        assert_eq!(w.routing_offset, None);
        assert!(!w.later_fragment && w.has_upper_header());

        let hbh = Ipv6ExtHeader::new_checked(&HBH_FRAG[40..]).unwrap();
        assert_eq!(hbh.header_len(), 8);
        let opts: Vec<_> = hbh.options().collect();
        assert_eq!(opts, vec![Ok(Ipv6Option::RouterAlert(0)), Ok(Ipv6Option::PadN(0))]);

        let frag = Ipv6FragmentHeader::new_checked(&HBH_FRAG[48..]).unwrap();
        let repr = Ipv6FragmentRepr::parse(&frag).unwrap();
        assert_eq!(
            repr,
            Ipv6FragmentRepr { next_header: IpProtocol::UDP, frag_offset: 0, more_frags: true, ident: 0xdead_beef }
        );
        let mut buf = [0xffu8; 8];
        repr.emit(&mut Ipv6FragmentHeader::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, HBH_FRAG[48..56]);
    }

    #[test]
    fn later_fragment_stops_the_walk() {
        let mut b = HBH_FRAG;
        // Offset 1480 bytes (185 units), M = 0.
        b[50..52].copy_from_slice(&(185u16 << 3).to_be_bytes());
        let w = Ipv6Packet::new_unchecked(&b[..]).walk_ext_headers().unwrap();
        assert!(w.later_fragment && !w.has_upper_header());
        assert_eq!(w.upper_protocol, IpProtocol::UDP);
        assert_eq!(w.upper_offset, 56);
        let frag = Ipv6FragmentHeader::new_unchecked(&b[48..]);
        assert_eq!((frag.frag_offset(), frag.more_frags()), (1480, false));
    }

    fn generic(next: u8, len_units: u8) -> Vec<u8> {
        let mut h = vec![0u8; (usize::from(len_units) + 1) * 8];
        h[0] = next;
        h[1] = len_units;
        h
    }

    #[test]
    fn walk_routing_destopts_ah_to_tcp() {
        let mut data = generic(43, 0); // dest opts -> routing
        let mut rh = generic(51, 2); // routing -> AH
        rh[2] = 4; // SRH
        rh[3] = 1;
        data.extend_from_slice(&rh);
        let mut ah = vec![0u8; 24]; // AH -> TCP, 96-bit ICV: len 4 -> 24 bytes
        ah[0] = 6;
        ah[1] = 4;
        ah[4..8].copy_from_slice(&0x1234u32.to_be_bytes());
        data.extend_from_slice(&ah);
        data.extend_from_slice(&[0u8; 20]);
        let w = walk(IpProtocol::IPV6_DEST_OPTS, &data).unwrap();
        assert_eq!(w.upper_protocol, IpProtocol::TCP);
        assert_eq!(w.upper_offset, 8 + 24 + 24);
        assert_eq!(w.routing_offset, Some(8));
        assert_eq!(w.header_count, 3);
        assert!(!w.hop_by_hop);
        let r = Ipv6ExtHeader::new_checked(&data[8..]).unwrap();
        assert_eq!((r.routing_type(), r.segments_left()), (4, 1));
        let a = AuthHeader::new_checked(&data[32..]).unwrap();
        assert_eq!((a.spi(), a.header_len(), a.icv().len()), (0x1234, 24, 12));
    }

    #[test]
    fn walk_stops_at_esp_and_no_next_header() {
        let data = generic(50, 0);
        let w = walk(IpProtocol::IPV6_DEST_OPTS, &data).unwrap();
        assert_eq!((w.upper_protocol, w.upper_offset), (IpProtocol::ESP, 8));
        assert!(!w.has_upper_header());
        let w = walk(IpProtocol::IPV6_NO_NEXT, &[]).unwrap();
        assert_eq!((w.upper_protocol, w.upper_offset, w.header_count), (IpProtocol::IPV6_NO_NEXT, 0, 0));
        assert!(!w.has_upper_header());
    }

    #[test]
    fn walk_errors() {
        // Truncated generic header, and one whose length runs past the data.
        assert_eq!(walk(IpProtocol::HOP_BY_HOP, &[17]), Err(Error::Truncated));
        assert_eq!(walk(IpProtocol::HOP_BY_HOP, &generic(17, 1)[..12]), Err(Error::Truncated));
        // Chain ends exactly at the end of the data with an ext header due.
        assert_eq!(walk(IpProtocol::HOP_BY_HOP, &generic(60, 0)), Err(Error::Truncated));
        // Truncated fragment header.
        assert_eq!(walk(IpProtocol::IPV6_FRAG, &[17, 0, 0, 0]), Err(Error::Truncated));
        // Hop-by-hop after another header.
        let mut data = generic(0, 0);
        data.extend_from_slice(&generic(17, 0));
        assert_eq!(walk(IpProtocol::IPV6_DEST_OPTS, &data), Err(Error::Malformed));
        // AH too short, and AH not a multiple of 8 bytes (len 1 -> 12 bytes).
        let mut ah = vec![6u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(walk(IpProtocol::AH, &ah), Err(Error::Malformed));
        ah[1] = 1;
        assert_eq!(walk(IpProtocol::AH, &ah), Err(Error::Malformed));
        // Too many headers.
        let mut data = Vec::new();
        for _ in 0..MAX_EXT_HEADERS {
            data.extend_from_slice(&generic(60, 0));
        }
        assert_eq!(walk(IpProtocol::IPV6_DEST_OPTS, &data), Err(Error::Unsupported));
        // Exactly the bound is fine.
        let last = data.len() - 8;
        data[last] = 17;
        let w = walk(IpProtocol::IPV6_DEST_OPTS, &data).unwrap();
        assert_eq!(usize::from(w.header_count), MAX_EXT_HEADERS);
        assert_eq!(w.upper_protocol, IpProtocol::UDP);
    }

    #[test]
    fn options_iterator() {
        let data = [0u8, 1, 2, 0, 0, 0xc2, 4, 0, 1, 0, 0, 0x3e, 1, 9, 0x05, 2, 0];
        let opts: Vec<_> = Ipv6Options::new(&data).collect();
        assert_eq!(
            opts,
            vec![
                Ok(Ipv6Option::Pad1),
                Ok(Ipv6Option::PadN(2)),
                Ok(Ipv6Option::Jumbo(65536)),
                Ok(Ipv6Option::Unknown { option_type: 0x3e, data: &[9] }),
                Err(Error::Truncated),
            ]
        );
        assert_eq!(Ipv6Option::unrecognized_action(0xc2), 3);
    }

    #[test]
    fn ext_header_setters() {
        let mut buf = [0u8; 16];
        let mut h = Ipv6ExtHeader::new_unchecked(&mut buf[..]);
        h.set_next_header(IpProtocol::TCP);
        h.set_header_len(16);
        assert_eq!(h.header_len(), 16);
        assert_eq!(h.data_mut().len(), 14);
        assert_eq!(buf[..2], [6, 1]);
    }
}
