//! TCP headers (RFC 9293 section 3.1): ports, sequence numbers, flags, data
//! offset, options. tern forwards TCP; it reads ports and flags (ACLs,
//! flow hashing) and may clamp the MSS option of SYNs entering a tunnel.
//!
//! ```text
//! +-----------------+-----------------+
//! |   source port   | destination port|
//! +-----------------+-----------------+
//! |          sequence number          |
//! |       acknowledgment number       |
//! +----+----+-------+-----------------+
//! |off |rsvd| flags |     window      |
//! +----+----+-------+-----------------+
//! |    checksum     | urgent pointer  |
//! +-----------------+-----------------+
//! |  options (off > 5) ... | payload  |
//! ```

use crate::checksum::{self, IpPair};
use crate::field::{read_u16, read_u32, write_u16, write_u32};
use crate::ip::IpProtocol;
use crate::{ChecksumMode, Error, Result};
use core::fmt;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ_NUM: usize = 4;
    pub const ACK_NUM: usize = 8;
    pub const OFF_FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
    pub const OPTIONS: usize = 20;
}

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = field::OPTIONS;
/// Length of a TCP header with the most options (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;

/// The TCP control bits (RFC 9293 section 3.1, RFC 3168 for ECE/CWR).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: TcpFlags = TcpFlags(0x01);
    pub const SYN: TcpFlags = TcpFlags(0x02);
    pub const RST: TcpFlags = TcpFlags(0x04);
    pub const PSH: TcpFlags = TcpFlags(0x08);
    pub const ACK: TcpFlags = TcpFlags(0x10);
    pub const URG: TcpFlags = TcpFlags(0x20);
    pub const ECE: TcpFlags = TcpFlags(0x40);
    pub const CWR: TcpFlags = TcpFlags(0x80);

    /// Whether every bit of `other` is set.
    #[inline]
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// tcpdump style: `S`, `S.`, `F.`, `R`, `P.`, plus `U`, `E`, `W`.
impl fmt::Display for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (bit, c) in [
            (TcpFlags::SYN, 'S'),
            (TcpFlags::FIN, 'F'),
            (TcpFlags::RST, 'R'),
            (TcpFlags::PSH, 'P'),
            (TcpFlags::URG, 'U'),
            (TcpFlags::ECE, 'E'),
            (TcpFlags::CWR, 'W'),
            (TcpFlags::ACK, '.'),
        ] {
            if self.contains(bit) {
                write!(f, "{c}")?;
            }
        }
        if self.0 == 0 {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// A read/write view of a TCP segment. The buffer should span exactly the
/// segment (the IP payload): TCP has no length field of its own and the
/// checksum covers the whole buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> TcpPacket<T> {
        TcpPacket { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<TcpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Validates the data offset against the buffer: 20 bytes
    /// ([`Error::Truncated`]), a data offset of at least 5
    /// ([`Error::Malformed`]) and no more than the buffer
    /// ([`Error::Truncated`]).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if header_len > len {
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

    #[inline]
    pub fn seq_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::SEQ_NUM)
    }

    #[inline]
    pub fn ack_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::ACK_NUM)
    }

    /// Header length in bytes (data offset * 4).
    #[inline]
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::OFF_FLAGS] >> 4) * 4
    }

    /// Length of the options area (header length minus 20). Saturates at
    /// 0 on an unchecked view with a data offset below 5.
    #[inline]
    pub fn options_len(&self) -> usize {
        usize::from(self.header_len()).saturating_sub(HEADER_LEN)
    }

    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[field::OFF_FLAGS + 1])
    }

    #[inline]
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    #[inline]
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    #[inline]
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    #[inline]
    pub fn psh(&self) -> bool {
        self.flags().contains(TcpFlags::PSH)
    }

    #[inline]
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    #[inline]
    pub fn urg(&self) -> bool {
        self.flags().contains(TcpFlags::URG)
    }

    #[inline]
    pub fn ece(&self) -> bool {
        self.flags().contains(TcpFlags::ECE)
    }

    #[inline]
    pub fn cwr(&self) -> bool {
        self.flags().contains(TcpFlags::CWR)
    }

    #[inline]
    pub fn window_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::WINDOW)
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    #[inline]
    pub fn urgent_at(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::URGENT)
    }

    /// The options area (between the fixed header and the data offset).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..usize::from(self.header_len())]
    }

    /// The segment data after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[usize::from(self.header_len())..]
    }

    /// Whether the checksum verifies over the pseudo-header of `ip` and the
    /// whole buffer (RFC 9293 section 3.1).
    #[inline]
    pub fn verify_checksum(&self, ip: &IpPair) -> bool {
        let buf = self.buffer.as_ref();
        let ph = ip.pseudo_header(IpProtocol::TCP, buf.len() as u32);
        checksum::combine(&[ph, checksum::data(buf)]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    #[inline]
    pub fn set_src_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, value);
    }

    #[inline]
    pub fn set_dst_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, value);
    }

    #[inline]
    pub fn set_seq_number(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::SEQ_NUM, value);
    }

    #[inline]
    pub fn set_ack_number(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::ACK_NUM, value);
    }

    /// Sets the header length in bytes (rounded down to a multiple of 4),
    /// clearing the reserved bits.
    #[inline]
    pub fn set_header_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::OFF_FLAGS] = (value / 4) << 4;
    }

    #[inline]
    pub fn set_flags(&mut self, value: TcpFlags) {
        self.buffer.as_mut()[field::OFF_FLAGS + 1] = value.0;
    }

    #[inline]
    pub fn set_window_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::WINDOW, value);
    }

    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    #[inline]
    pub fn set_urgent_at(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::URGENT, value);
    }

    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.header_len());
        &mut self.buffer.as_mut()[field::OPTIONS..end]
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = usize::from(self.header_len());
        &mut self.buffer.as_mut()[start..]
    }

    /// Computes the checksum over the pseudo-header of `ip` and the whole
    /// buffer.
    #[inline]
    pub fn fill_checksum(&mut self, ip: &IpPair) {
        self.set_checksum(0);
        let buf = self.buffer.as_ref();
        let ph = ip.pseudo_header(IpProtocol::TCP, buf.len() as u32);
        let sum = checksum::combine(&[ph, checksum::data(buf)]);
        self.set_checksum(!sum);
    }

    /// Lowers the MSS option of a SYN to `max` if it is larger, patching the
    /// checksum incrementally (RFC 1624), as a router does for traffic that
    /// enters a tunnel with a smaller MTU. Returns whether it changed
    /// anything. Segments without SYN, without an MSS option or with
    /// malformed options are left alone. Never panics on a view whose
    /// header length is within the buffer.
    pub fn clamp_mss(&mut self, max: u16) -> bool {
        if !self.syn() {
            return false;
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN || header_len > self.buffer.as_ref().len() {
            return false;
        }
        let mut at = None;
        let mut walk = TcpOptions::new(self.options());
        while let Some(Ok(option)) = walk.next() {
            if let TcpOption::MaxSegmentSize(mss) = option {
                if mss > max {
                    // The value ends where the walker now stands.
                    at = Some(header_len - walk.data.len() - 2);
                }
                break;
            }
        }
        let Some(at) = at else {
            return false;
        };
        // Patch the 16-bit words of the checksummed data that the two
        // value bytes fall in: one when aligned, two otherwise.
        let first = at & !1;
        let last = (at + 2).next_multiple_of(2);
        let buf = self.buffer.as_ref();
        let Some(window) = buf.get(first..last) else {
            return false;
        };
        let mut old = [0u8; 4];
        old[..window.len()].copy_from_slice(window);
        let mut new = old;
        new[at - first..at - first + 2].copy_from_slice(&max.to_be_bytes());
        let mut c = self.checksum();
        for i in (0..window.len()).step_by(2) {
            c = checksum::update(c, u16::from_be_bytes([old[i], old[i + 1]]), u16::from_be_bytes([new[i], new[i + 1]]));
        }
        write_u16(self.buffer.as_mut(), at, max);
        self.set_checksum(c);
        true
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for TcpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// Option kinds (RFC 9293 section 3.2, IANA "TCP Option Kind Numbers").
pub mod option_kind {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMPS: u8 = 8;
}

/// One TCP option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcpOption<'a> {
    /// End of option list; what follows is padding.
    EndOfList,
    NoOperation,
    MaxSegmentSize(u16),
    WindowScale(u8),
    SackPermitted,
    /// SACK blocks, raw (pairs of 32-bit edges).
    Sack(&'a [u8]),
    Timestamps {
        value: u32,
        echo_reply: u32,
    },
    /// Any other kind; `data` excludes kind and length.
    Unknown {
        kind: u8,
        data: &'a [u8],
    },
}

/// Iterator over a TCP options area. Stops after `EndOfList`; yields
/// `Err(Malformed)` for a length below 2 or a known option with the wrong
/// length, `Err(Truncated)` for an option that runs past the end, then
/// nothing more. Bounded by the area (at most 40 bytes).
#[derive(Clone, Debug)]
pub struct TcpOptions<'a> {
    data: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    pub fn new(data: &'a [u8]) -> TcpOptions<'a> {
        TcpOptions { data }
    }

    fn fail(&mut self, e: Error) -> Option<Result<TcpOption<'a>>> {
        self.data = &[];
        Some(Err(e))
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, rest) = self.data.split_first()?;
        match kind {
            option_kind::END => {
                self.data = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            option_kind::NOP => {
                self.data = rest;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let Some(&len) = rest.first() else {
            return self.fail(Error::Truncated);
        };
        if len < 2 {
            return self.fail(Error::Malformed);
        }
        let Some((option, rest)) = self.data.split_at_checked(usize::from(len)) else {
            return self.fail(Error::Truncated);
        };
        self.data = rest;
        let value = &option[2..];
        Some(Ok(match (kind, value) {
            (option_kind::MSS, &[a, b]) => TcpOption::MaxSegmentSize(u16::from_be_bytes([a, b])),
            (option_kind::WINDOW_SCALE, &[s]) => TcpOption::WindowScale(s),
            (option_kind::SACK_PERMITTED, &[]) => TcpOption::SackPermitted,
            (option_kind::SACK, blocks) if !blocks.is_empty() && blocks.len() % 8 == 0 => TcpOption::Sack(blocks),
            (option_kind::TIMESTAMPS, &[a, b, c, d, e, f, g, h]) => TcpOption::Timestamps {
                value: u32::from_be_bytes([a, b, c, d]),
                echo_reply: u32::from_be_bytes([e, f, g, h]),
            },
            (
                option_kind::MSS
                | option_kind::WINDOW_SCALE
                | option_kind::SACK_PERMITTED
                | option_kind::SACK
                | option_kind::TIMESTAMPS,
                _,
            ) => return self.fail(Error::Malformed),
            (kind, data) => TcpOption::Unknown { kind, data },
        }))
    }
}

/// The fields of a TCP header, borrowing the options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpRepr<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq_number: u32,
    pub ack_number: u32,
    pub flags: TcpFlags,
    pub window_len: u16,
    pub urgent_at: u16,
    /// The options area, raw. `emit` pads it with zeros (end of list) to a
    /// multiple of 4; `parse` returns it padding included.
    pub options: &'a [u8],
    /// Bytes of data after the header.
    pub payload_len: usize,
}

impl<'a> TcpRepr<'a> {
    /// Reads the header of a segment carried between the addresses of `ip`.
    /// [`Error::Malformed`] for a zero port (IANA reserved) or a bad option
    /// ([`TcpOptions`]); [`Error::BadChecksum`] when `checksum` is `Verify`
    /// and the checksum fails.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &TcpPacket<&'a T>,
        ip: &IpPair,
        checksum: ChecksumMode,
    ) -> Result<TcpRepr<'a>> {
        packet.check_len()?;
        if packet.src_port() == 0 || packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        if checksum.verify() && !packet.verify_checksum(ip) {
            return Err(Error::BadChecksum);
        }
        let buf: &'a [u8] = packet.buffer.as_ref();
        let header_len = usize::from(packet.header_len());
        let options = buf.get(field::OPTIONS..header_len).ok_or(Error::Truncated)?;
        for option in TcpOptions::new(options) {
            option?;
        }
        Ok(TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            urgent_at: packet.urgent_at(),
            options,
            payload_len: buf.len() - header_len,
        })
    }

    /// Header length `emit` writes: 20 + options rounded up to 4.
    #[inline]
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len().next_multiple_of(4)
    }

    /// Length of header and payload.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Writes the header and the checksum over the whole buffer (the
    /// payload must be in place; the view should span exactly
    /// `buffer_len()` bytes). [`Error::Malformed`] if the options exceed 40
    /// bytes, [`Error::Truncated`] if the buffer is short.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut TcpPacket<T>, ip: &IpPair) -> Result<()> {
        let header_len = self.header_len();
        if header_len > MAX_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if packet.buffer.as_ref().len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        packet.set_header_len(header_len as u8);
        packet.set_flags(self.flags);
        packet.set_window_len(self.window_len);
        packet.set_urgent_at(self.urgent_at);
        let area = packet.options_mut();
        area.fill(0);
        area[..self.options.len()].copy_from_slice(self.options);
        packet.fill_checksum(ip);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    /// SYN 192.168.1.10.54321 -> 93.184.216.34.443 with MSS 1460, SACK
    /// permitted, timestamps, NOP, window scale 7 (what Linux sends).
    const SYN: [u8; 40] = [
        0xd4, 0x31, 0x01, 0xbb, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0, 0x34, 0xa7,
        0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x01, 0xe2, 0x40, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x03, 0x03, 0x07,
    ];

    fn ip() -> IpPair {
        IpPair::V4 { src: Ipv4Addr::new(192, 168, 1, 10), dst: Ipv4Addr::new(93, 184, 216, 34) }
    }

    fn syn() -> Vec<u8> {
        SYN.to_vec()
    }

    #[test]
    fn fill_checksum_matches_capture() {
        let mut b = SYN;
        b[16] = 0;
        b[17] = 0;
        TcpPacket::new_unchecked(&mut b[..]).fill_checksum(&ip());
        assert_eq!(b, SYN);
    }

    #[test]
    fn parse_syn_with_options() {
        let b = syn();
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (54321, 443));
        assert_eq!(p.seq_number(), 0x1234_5678);
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.options_len(), 20);
        assert!(p.syn() && !p.ack() && !p.fin() && !p.rst());
        assert_eq!(p.flags().to_string(), "S");
        assert_eq!(p.window_len(), 64240);
        assert!(p.verify_checksum(&ip()));
        assert!(p.payload().is_empty());
        let opts: Vec<_> = TcpOptions::new(p.options()).collect();
        assert_eq!(
            opts,
            vec![
                Ok(TcpOption::MaxSegmentSize(1460)),
                Ok(TcpOption::SackPermitted),
                Ok(TcpOption::Timestamps { value: 123_456, echo_reply: 0 }),
                Ok(TcpOption::NoOperation),
                Ok(TcpOption::WindowScale(7)),
            ]
        );
        let repr = TcpRepr::parse(&p, &ip(), ChecksumMode::Verify).unwrap();
        assert_eq!(repr.options, &SYN[20..]);
        assert_eq!(repr.payload_len, 0);
        let mut out = [0u8; 40];
        repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]), &ip()).unwrap();
        assert_eq!(&out[..], &b[..]);
    }

    #[test]
    fn check_len_cases() {
        assert_eq!(TcpPacket::new_checked(&SYN[..19]), Err(Error::Truncated));
        assert_eq!(TcpPacket::new_checked(&SYN[..39]), Err(Error::Truncated));
        let mut b = SYN;
        b[12] = 0x40;
        assert_eq!(TcpPacket::new_checked(&b[..]), Err(Error::Malformed));
    }

    #[test]
    fn repr_errors() {
        let mut b = syn();
        b[30] ^= 1;
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p, &ip(), ChecksumMode::Verify), Err(Error::BadChecksum));
        // A bad option length.
        let mut b = SYN;
        b[21] = 3;
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p, &ip(), ChecksumMode::Ignore), Err(Error::Malformed));
        let mut b = SYN;
        b[0] = 0;
        b[1] = 0;
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p, &ip(), ChecksumMode::Ignore), Err(Error::Malformed));
        let too_long = TcpRepr {
            options: &[1; 41],
            ..TcpRepr::parse(&TcpPacket::new_unchecked(&SYN[..]), &ip(), ChecksumMode::Ignore).unwrap()
        };
        let mut out = [0u8; 80];
        assert_eq!(too_long.emit(&mut TcpPacket::new_unchecked(&mut out[..]), &ip()), Err(Error::Malformed));
    }

    #[test]
    fn options_iterator_edges() {
        let all: Vec<_> = TcpOptions::new(&[1, 0, 9, 9]).collect();
        assert_eq!(all, vec![Ok(TcpOption::NoOperation), Ok(TcpOption::EndOfList)]);
        let all: Vec<_> = TcpOptions::new(&[2, 4, 5]).collect();
        assert_eq!(all, vec![Err(Error::Truncated)]);
        let all: Vec<_> = TcpOptions::new(&[99, 1, 1]).collect();
        assert_eq!(all, vec![Err(Error::Malformed)]);
        let all: Vec<_> = TcpOptions::new(&[99, 3, 7, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2]).collect();
        assert_eq!(
            all,
            vec![Ok(TcpOption::Unknown { kind: 99, data: &[7] }), Ok(TcpOption::Sack(&[0, 0, 0, 1, 0, 0, 0, 2])),]
        );
        assert_eq!(TcpOptions::new(&[2]).next(), Some(Err(Error::Truncated)));
    }

    #[test]
    fn clamp_mss_aligned_and_unaligned() {
        let mut b = syn();
        let mut p = TcpPacket::new_unchecked(&mut b[..]);
        assert!(p.clamp_mss(1400));
        assert!(p.verify_checksum(&ip()));
        assert_eq!(TcpOptions::new(p.options()).next(), Some(Ok(TcpOption::MaxSegmentSize(1400))));
        assert!(!p.clamp_mss(1400), "already small enough");

        // MSS at an odd offset: NOP, MSS, NOP, NOP, NOP.
        let mut b = SYN[..20].to_vec();
        b[12] = 0x80;
        b.extend_from_slice(&[1, 2, 4, 0x05, 0xb4, 1, 1, 1, 1, 1, 1, 1]);
        b.extend_from_slice(b"data");
        let mut p = TcpPacket::new_unchecked(&mut b[..]);
        p.fill_checksum(&ip());
        assert!(p.clamp_mss(1360));
        assert!(p.verify_checksum(&ip()));
        let mut opts = TcpOptions::new(p.options());
        opts.next();
        assert_eq!(opts.next(), Some(Ok(TcpOption::MaxSegmentSize(1360))));
        let mut fresh = b.clone();
        TcpPacket::new_unchecked(&mut fresh[..]).fill_checksum(&ip());
        assert_eq!(b, fresh);

        // Not a SYN.
        let mut b = syn();
        b[13] = TcpFlags::ACK.0;
        assert!(!TcpPacket::new_unchecked(&mut b[..]).clamp_mss(536));
    }
}
