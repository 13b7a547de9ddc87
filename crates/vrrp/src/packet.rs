//! The VRRPv3 advertisement (RFC 5798 section 5.2) for IPv4 and IPv6.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! |Version| Type  | Virtual Rtr ID|   Priority    |Count IPvX Addr|
//! |(rsvd) |     Max Adver Int     |          Checksum             |
//! |                       IPvX Address(es)                        |
//! ```
//!
//! The checksum covers the VRRP message and the IP pseudo-header (RFC 5798
//! 5.2.8: RFC 768's for IPv4, RFC 8200 8.1's for IPv6).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IP protocol number of VRRP.
pub const PROTO: u8 = 112;
/// The IPv4 group advertisements go to.
pub const GROUP_V4: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 18);
/// The IPv6 group advertisements go to.
pub const GROUP_V6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x12);
/// The TTL / hop limit every advertisement carries and must arrive with.
pub const TTL: u8 = 255;
/// The fixed part of an advertisement.
pub const HEADER_LEN: usize = 8;
/// The largest interval the 12-bit field holds, in centiseconds.
pub const MAX_INTERVAL_CS: u16 = 0x0fff;

/// The address family of a virtual router.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(a: &IpAddr) -> Family {
        if a.is_ipv4() { Family::V4 } else { Family::V6 }
    }
    /// Bytes of one address in an advertisement.
    pub fn addr_len(self) -> usize {
        match self {
            Family::V4 => 4,
            Family::V6 => 16,
        }
    }
    /// The group advertisements go to.
    pub fn group(self) -> IpAddr {
        match self {
            Family::V4 => IpAddr::V4(GROUP_V4),
            Family::V6 => IpAddr::V6(GROUP_V6),
        }
    }
    /// The Ethernet multicast address of [`Family::group`].
    pub fn group_mac(self) -> [u8; 6] {
        match self {
            Family::V4 => [0x01, 0x00, 0x5e, 0x00, 0x00, 0x12],
            Family::V6 => [0x33, 0x33, 0x00, 0x00, 0x00, 0x12],
        }
    }
}

/// The virtual router's MAC (RFC 5798 7.3): 00-00-5E-00-01-{VRID} for
/// IPv4, 00-00-5E-00-02-{VRID} for IPv6.
pub fn virtual_mac(family: Family, vrid: u8) -> [u8; 6] {
    let f = match family {
        Family::V4 => 1,
        Family::V6 => 2,
    };
    [0x00, 0x00, 0x5e, 0x00, f, vrid]
}

/// The link-local address derived (modified EUI-64, RFC 4291 appendix A)
/// from the IPv6 virtual MAC: the one to add when a group's addresses
/// start with no link-local one (RFC 5798 5.2.9 wants it first).
pub fn virtual_link_local(vrid: u8) -> Ipv6Addr {
    let m = virtual_mac(Family::V6, vrid);
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        u16::from_be_bytes([m[0] ^ 0x02, m[1]]),
        u16::from_be_bytes([m[2], 0xff]),
        u16::from_be_bytes([0xfe, m[3]]),
        u16::from_be_bytes([m[4], m[5]]),
    )
}

/// Why a received advertisement was discarded (RFC 5798 7.1), each with
/// the name counters and logs use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than the fixed header.
    TooShort,
    /// TTL or hop limit other than 255.
    BadTtl,
    /// Version other than 3.
    BadVersion,
    /// Type other than 1 (advertisement).
    BadType,
    /// Count IPvX Addr of 0 (the minimum is 1).
    NoAddresses,
    /// The length is not the header plus Count addresses.
    BadLength,
    /// The checksum (with the pseudo-header) does not verify.
    BadChecksum,
    /// Max Adver Int of 0.
    BadInterval,
    /// Source and destination of different families, or of a family the
    /// group is not.
    WrongFamily,
    /// Not to the VRRP group (224.0.0.18 / ff02::12).
    WrongDestination,
    /// A VRID this router has no group for.
    WrongVrid,
    /// The addresses differ from the group's and the sender is not the
    /// address owner (RFC 5798 7.1: MUST drop).
    AddressMismatch,
    /// Our own advertisement, looped back.
    OwnAdvert,
    /// The group is not running (Initialize).
    NotRunning,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 14] = [
        DropReason::TooShort,
        DropReason::BadTtl,
        DropReason::BadVersion,
        DropReason::BadType,
        DropReason::NoAddresses,
        DropReason::BadLength,
        DropReason::BadChecksum,
        DropReason::BadInterval,
        DropReason::WrongFamily,
        DropReason::WrongDestination,
        DropReason::WrongVrid,
        DropReason::AddressMismatch,
        DropReason::OwnAdvert,
        DropReason::NotRunning,
    ];

    /// The counter's name.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::TooShort => "too-short",
            DropReason::BadTtl => "bad-ttl",
            DropReason::BadVersion => "bad-version",
            DropReason::BadType => "bad-type",
            DropReason::NoAddresses => "no-addresses",
            DropReason::BadLength => "bad-length",
            DropReason::BadChecksum => "bad-checksum",
            DropReason::BadInterval => "bad-interval",
            DropReason::WrongFamily => "wrong-family",
            DropReason::WrongDestination => "wrong-destination",
            DropReason::WrongVrid => "wrong-vrid",
            DropReason::AddressMismatch => "address-mismatch",
            DropReason::OwnAdvert => "own-advert",
            DropReason::NotRunning => "not-running",
        }
    }

    /// Its index in [`DropReason::ALL`].
    pub fn index(self) -> usize {
        DropReason::ALL.iter().position(|&r| r == self).unwrap_or(0)
    }
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A VRRPv3 advertisement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advert {
    pub vrid: u8,
    pub priority: u8,
    /// Max Adver Int, centiseconds (12 bits).
    pub interval_cs: u16,
    /// All of one family.
    pub addrs: Vec<IpAddr>,
}

/// The RFC 1071 sum of `data`, not yet folded or complemented.
fn sum(data: &[u8], mut acc: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The pseudo-header's sum for a VRRP message of `len` bytes.
fn pseudo_sum(src: IpAddr, dst: IpAddr, len: usize) -> Option<u32> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let acc = sum(&s.octets(), sum(&d.octets(), 0));
            Some(acc + u32::from(PROTO) + len as u32)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let acc = sum(&s.octets(), sum(&d.octets(), 0));
            let l = len as u32;
            Some(acc + (l >> 16) + (l & 0xffff) + u32::from(PROTO))
        }
        _ => None,
    }
}

/// The checksum field's value for `msg` (its own checksum bytes read as
/// zero) sent from `src` to `dst`; `None` when they are of two families.
pub fn checksum(msg: &[u8], src: IpAddr, dst: IpAddr) -> Option<u16> {
    let acc = pseudo_sum(src, dst, msg.len())?;
    // The checksum field itself (bytes 6 and 7) counts as zero.
    let acc = sum(msg.get(..6).unwrap_or(msg), acc);
    let acc = sum(msg.get(8..).unwrap_or_default(), acc);
    Some(!fold(acc))
}

/// Why an advertisement cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncodeError {
    NoAddresses,
    TooManyAddresses,
    MixedFamilies,
    BadInterval,
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EncodeError::NoAddresses => "no addresses",
            EncodeError::TooManyAddresses => "more than 255 addresses",
            EncodeError::MixedFamilies => "addresses and IP header of more than one family",
            EncodeError::BadInterval => "interval outside 1..=4095 centiseconds",
        })
    }
}

impl std::error::Error for EncodeError {}

impl Advert {
    /// The family of its addresses (of the first; [`Advert::encode`]
    /// refuses a mix).
    pub fn family(&self) -> Option<Family> {
        self.addrs.first().map(Family::of)
    }

    /// The message, checksummed for `src` to `dst`.
    pub fn encode(&self, src: IpAddr, dst: IpAddr) -> Result<Vec<u8>, EncodeError> {
        let fam = self.family().ok_or(EncodeError::NoAddresses)?;
        if self.addrs.len() > 255 {
            return Err(EncodeError::TooManyAddresses);
        }
        if self.addrs.iter().any(|a| Family::of(a) != fam) || Family::of(&src) != fam || Family::of(&dst) != fam {
            return Err(EncodeError::MixedFamilies);
        }
        if self.interval_cs == 0 || self.interval_cs > MAX_INTERVAL_CS {
            return Err(EncodeError::BadInterval);
        }
        let mut b = Vec::with_capacity(HEADER_LEN + self.addrs.len() * fam.addr_len());
        b.push(0x31);
        b.push(self.vrid);
        b.push(self.priority);
        b.push(self.addrs.len() as u8);
        b.extend_from_slice(&self.interval_cs.to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        for a in &self.addrs {
            match a {
                IpAddr::V4(a) => b.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => b.extend_from_slice(&a.octets()),
            }
        }
        let c = checksum(&b, src, dst).ok_or(EncodeError::MixedFamilies)?;
        b[6..8].copy_from_slice(&c.to_be_bytes());
        Ok(b)
    }

    /// Decodes and validates a message received from `src` to `dst` with
    /// `ttl` (TTL or hop limit): RFC 5798 7.1's checks that need no
    /// group (the TTL, version, type, count against the length, the
    /// checksum, the destination group).
    pub fn decode(msg: &[u8], src: IpAddr, dst: IpAddr, ttl: u8) -> Result<Advert, DropReason> {
        let fam = Family::of(&src);
        if Family::of(&dst) != fam {
            return Err(DropReason::WrongFamily);
        }
        if dst != fam.group() {
            return Err(DropReason::WrongDestination);
        }
        if ttl != TTL {
            return Err(DropReason::BadTtl);
        }
        let Some(h) = msg.first_chunk::<HEADER_LEN>() else { return Err(DropReason::TooShort) };
        if h[0] >> 4 != 3 {
            return Err(DropReason::BadVersion);
        }
        if h[0] & 0x0f != 1 {
            return Err(DropReason::BadType);
        }
        let count = usize::from(h[3]);
        if count == 0 {
            return Err(DropReason::NoAddresses);
        }
        if msg.len() != HEADER_LEN + count * fam.addr_len() {
            return Err(DropReason::BadLength);
        }
        if checksum(msg, src, dst) != Some(u16::from_be_bytes([h[6], h[7]])) {
            return Err(DropReason::BadChecksum);
        }
        let interval_cs = u16::from_be_bytes([h[4], h[5]]) & MAX_INTERVAL_CS;
        if interval_cs == 0 {
            return Err(DropReason::BadInterval);
        }
        let body = msg.get(HEADER_LEN..).unwrap_or_default();
        let addrs = match fam {
            Family::V4 => body.chunks_exact(4).map(|c| IpAddr::V4(Ipv4Addr::new(c[0], c[1], c[2], c[3]))).collect(),
            Family::V6 => body
                .chunks_exact(16)
                .map(|c| {
                    let mut o = [0u8; 16];
                    o.copy_from_slice(c);
                    IpAddr::V6(Ipv6Addr::from(o))
                })
                .collect(),
        };
        Ok(Advert { vrid: h[1], priority: h[2], interval_cs, addrs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    fn v4() -> Advert {
        Advert { vrid: 10, priority: 200, interval_cs: 100, addrs: vec![ip("10.1.0.254")] }
    }

    #[test]
    fn encodes_the_rfc_layout() {
        let b = v4().encode(ip("10.1.0.1"), ip("224.0.0.18")).expect("encode");
        // Checked against scapy's VRRPv3 (tests/scapy_golden.rs too).
        assert_eq!(b, [0x31, 10, 200, 1, 0x00, 0x64, 0x11, 0x00, 10, 1, 0, 254]);
        let back = Advert::decode(&b, ip("10.1.0.1"), ip("224.0.0.18"), 255).expect("decode");
        assert_eq!(back, v4());
    }

    #[test]
    fn every_check_has_its_reason() {
        let (s, d) = (ip("10.1.0.1"), ip("224.0.0.18"));
        let good = v4().encode(s, d).expect("encode");
        let dec = |b: &[u8]| Advert::decode(b, s, d, 255);
        assert_eq!(Advert::decode(&good, s, d, 254), Err(DropReason::BadTtl));
        assert_eq!(Advert::decode(&good, s, ip("10.1.0.2"), 255), Err(DropReason::WrongDestination));
        assert_eq!(Advert::decode(&good, s, ip("ff02::12"), 255), Err(DropReason::WrongFamily));
        assert_eq!(dec(&good[..7]), Err(DropReason::TooShort));
        let mut b = good.clone();
        b[0] = 0x21;
        assert_eq!(dec(&b), Err(DropReason::BadVersion));
        b[0] = 0x32;
        assert_eq!(dec(&b), Err(DropReason::BadType));
        let mut b = good.clone();
        b[3] = 0;
        assert_eq!(dec(&b), Err(DropReason::NoAddresses));
        b[3] = 2;
        assert_eq!(dec(&b), Err(DropReason::BadLength));
        let mut b = good.clone();
        b.push(0);
        assert_eq!(dec(&b), Err(DropReason::BadLength));
        let mut b = good.clone();
        b[11] ^= 1;
        assert_eq!(dec(&b), Err(DropReason::BadChecksum));
        // The checksum covers the pseudo-header: another source fails.
        assert_eq!(Advert::decode(&good, ip("10.1.0.2"), d, 255), Err(DropReason::BadChecksum));
        let zero = Advert { interval_cs: 0, ..v4() };
        assert_eq!(zero.encode(s, d), Err(EncodeError::BadInterval));
        let mut b = good.clone();
        b[4] = 0xf0; // the reserved bits only: the interval reads 0
        b[5] = 0;
        let c = checksum(&b, s, d).expect("sum");
        b[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(dec(&b), Err(DropReason::BadInterval));
    }

    #[test]
    fn reserved_bits_are_ignored() {
        let (s, d) = (ip("10.1.0.1"), ip("224.0.0.18"));
        let mut b = v4().encode(s, d).expect("encode");
        b[4] |= 0xf0;
        let c = checksum(&b, s, d).expect("sum");
        b[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(Advert::decode(&b, s, d, 255).expect("decode").interval_cs, 100);
    }

    #[test]
    fn ipv6_round_trip_and_refusals() {
        let a = Advert {
            vrid: 10,
            priority: 200,
            interval_cs: 100,
            addrs: vec![IpAddr::V6(virtual_link_local(10)), ip("2001:db8::1")],
        };
        let (s, d) = (ip("fe80::1"), ip("ff02::12"));
        let b = a.encode(s, d).expect("encode");
        assert_eq!(b.len(), 8 + 32);
        assert_eq!(Advert::decode(&b, s, d, 255), Ok(a.clone()));
        let mixed = Advert { addrs: vec![ip("10.0.0.1"), ip("2001:db8::1")], ..a.clone() };
        assert_eq!(mixed.encode(s, d), Err(EncodeError::MixedFamilies));
        assert_eq!(a.encode(ip("10.0.0.1"), d), Err(EncodeError::MixedFamilies));
        assert_eq!(Advert { addrs: vec![], ..a }.encode(s, d), Err(EncodeError::NoAddresses));
    }

    #[test]
    fn virtual_macs_and_link_local() {
        assert_eq!(virtual_mac(Family::V4, 10), [0, 0, 0x5e, 0, 1, 10]);
        assert_eq!(virtual_mac(Family::V6, 255), [0, 0, 0x5e, 0, 2, 255]);
        assert_eq!(virtual_link_local(10), "fe80::200:5eff:fe00:20a".parse::<Ipv6Addr>().expect("a"));
    }

    #[test]
    fn reasons_have_distinct_names_and_indices() {
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DropReason::ALL.len());
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }
}
