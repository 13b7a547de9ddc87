//! The Internet checksum (RFC 1071), pseudo-header sums, and the incremental
//! update of RFC 1624.
//!
//! Conventions (as in smoltcp): [`data`], [`pseudo_header_v4`],
//! [`pseudo_header_v6`] and [`combine`] return the one's complement *sum*
//! folded to 16 bits, not complemented. The value stored in a checksum field
//! is `!combine(&[...])`; a received header verifies when the sum over it,
//! checksum field included, is `0xffff`.

use crate::ip::IpProtocol;
use core::net::{Ipv4Addr, Ipv6Addr};

/// Adds with end-around carry (one's complement addition on 64 bits).
#[inline(always)]
fn add_carry(acc: u64, word: u64) -> u64 {
    let (sum, carry) = acc.overflowing_add(word);
    // No overflow: when `carry` is set, `sum` is at most 2^64 - 2.
    sum + carry as u64
}

/// Folds a 64-bit one's complement sum to 16 bits.
#[inline(always)]
fn fold(acc: u64) -> u16 {
    // Two halves added with the end-around carry, twice: the carry out
    // goes back in at the bottom, where it cannot carry again (a sum that
    // carried is at most 2^n - 2). The result is 0 only for acc == 0.
    let (s, c) = (acc as u32).overflowing_add((acc >> 32) as u32);
    let s = s + u32::from(c);
    let (t, c) = (s as u16).overflowing_add((s >> 16) as u16);
    t + u16::from(c)
}

/// One's complement sum of `data` taken as big-endian 16-bit words (an odd
/// trailing byte is padded with a zero byte, RFC 1071 section 4.1), folded
/// to 16 bits and not complemented.
///
/// Fast: it adds 64-bit words in native byte order with end-around carry,
/// on two independent accumulators, and swaps once at the end. This is
/// correct because the one's complement sum is independent of byte order
/// (RFC 1071 section 2(B)) and because 2^64 - 1 is a multiple of 2^16 - 1,
/// so the 64-bit sum folds to the same 16-bit sum (section 2(C)).
#[inline]
pub fn data(data: &[u8]) -> u16 {
    let (pairs, rest) = data.as_chunks::<16>();
    let (mut a, mut b) = (0u64, 0u64);
    for pair in pairs {
        let (lo, hi) = pair.split_at(8);
        a = add_carry(a, u64::from_ne_bytes(first8(lo)));
        b = add_carry(b, u64::from_ne_bytes(first8(hi)));
    }
    let mut acc = add_carry(a, b);
    let (words, rest) = rest.as_chunks::<8>();
    for word in words {
        acc = add_carry(acc, u64::from_ne_bytes(*word));
    }
    let (shorts, rest) = rest.as_chunks::<2>();
    for short in shorts {
        acc = add_carry(acc, u64::from(u16::from_ne_bytes(*short)));
    }
    if let Some(&last) = rest.first() {
        acc = add_carry(acc, u64::from(u16::from_ne_bytes([last, 0])));
    }
    // The native-order sum, laid out in memory, is the big-endian sum.
    u16::from_be_bytes(fold(acc).to_ne_bytes())
}

/// [`data`] for exactly 20 bytes, an IPv4 header without options: five
/// 32-bit native-order words summed in 64 bits, then folded. Same result as
/// `data(header)`, fewer branches on the forwarding path.
#[inline]
pub fn header20(header: &[u8; 20]) -> u16 {
    let (words, _) = header.as_chunks::<4>();
    let mut acc = 0u64;
    for word in words {
        acc += u64::from(u32::from_ne_bytes(*word));
    }
    u16::from_be_bytes(fold(acc).to_ne_bytes())
}

#[inline(always)]
fn first8(s: &[u8]) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[..8]);
    w
}

/// One's complement sum of already folded partial sums.
#[inline]
pub fn combine(sums: &[u16]) -> u16 {
    let mut acc = 0u64;
    for &s in sums {
        acc += u64::from(s);
    }
    fold(acc)
}

/// One's complement addition of two 16-bit values.
#[inline(always)]
pub fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// Sum of the IPv4 pseudo-header (RFC 768, RFC 9293 3.1): source, destination,
/// zero + protocol, upper-layer length.
#[inline]
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProtocol, length: u16) -> u16 {
    let s = u32::from(src);
    let d = u32::from(dst);
    let acc = u64::from(s >> 16)
        + u64::from(s & 0xffff)
        + u64::from(d >> 16)
        + u64::from(d & 0xffff)
        + u64::from(protocol.0)
        + u64::from(length);
    fold(acc)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 8.1): source, destination,
/// 32-bit upper-layer length, zero + next header.
#[inline]
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, protocol: IpProtocol, length: u32) -> u16 {
    let mut acc = u64::from(length >> 16) + u64::from(length & 0xffff) + u64::from(protocol.0);
    for addr in [u128::from(src), u128::from(dst)] {
        acc += (addr >> 96) as u64 & 0xffff_ffff;
        acc += (addr >> 64) as u64 & 0xffff_ffff;
        acc += (addr >> 32) as u64 & 0xffff_ffff;
        acc += addr as u64 & 0xffff_ffff;
    }
    fold(acc)
}

/// The addresses of the enclosing IP header that an upper-layer checksum
/// (UDP, TCP, ICMPv6) covers through its pseudo-header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpPair {
    V4 { src: Ipv4Addr, dst: Ipv4Addr },
    V6 { src: Ipv6Addr, dst: Ipv6Addr },
}

impl IpPair {
    /// Sum of the pseudo-header for `protocol` and an upper-layer packet of
    /// `length` bytes. For IPv4 the length field is 16 bits; a longer
    /// length cannot come from a valid IPv4 packet and is summed as if the
    /// field were 32 bits wide.
    #[inline]
    pub fn pseudo_header(&self, protocol: IpProtocol, length: u32) -> u16 {
        match *self {
            IpPair::V4 { src, dst } => {
                add(pseudo_header_v4(src, dst, protocol, (length & 0xffff) as u16), (length >> 16) as u16)
            }
            IpPair::V6 { src, dst } => pseudo_header_v6(src, dst, protocol, length),
        }
    }
}

/// RFC 1624 eqn. 3: the checksum after one 16-bit word of the covered data
/// changes from `old` to `new`, `HC' = ~(~HC + ~m + m')`, without touching
/// the rest of the data.
///
/// Given a checksum that was computed (not merely accepted), the result is
/// the value a full recomputation gives, with one exception: when the new
/// data are all zero it gives `0x0000` where a recomputation gives `0xffff`
/// (RFC 1624 section 3 discusses these two zeros; eqn. 2 of RFC 1141 got
/// the other cases wrong).
#[inline(always)]
pub fn update(checksum: u16, old: u16, new: u16) -> u16 {
    !add(add(!checksum, !old), new)
}

/// [`update`] for the one change every forwarded IPv4 packet gets: its TTL
/// (the high byte of the TTL/protocol word) down by one. The difference
/// is always -0x0100, so RFC 1624's eqn. 3 reduces to adding 0x0100 with
/// the end-around carry, where a sum of exactly 0xffff also carries into
/// 0x0000 (as Linux's `ip_decrease_ttl` does): the same result as
/// [`update`] for every checksum and TTL/protocol word, zeros included.
#[inline(always)]
pub fn ttl_decremented(checksum: u16) -> u16 {
    let s = u32::from(checksum) + 0x0100;
    (s + u32::from(s >= 0xffff)) as u16
}

/// [`update`] for a 32-bit field (an address, a sequence number) that sits
/// on a 16-bit boundary.
#[inline]
pub fn update_u32(checksum: u16, old: u32, new: u32) -> u16 {
    let c = update(checksum, (old >> 16) as u16, (new >> 16) as u16);
    update(c, old as u16, new as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 1071 as written: 16-bit big-endian words into a 32-bit
    /// accumulator, folded at the end.
    fn naive(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        let mut i = 0;
        while i + 1 < data.len() {
            acc += u32::from(u16::from_be_bytes([data[i], data[i + 1]]));
            i += 2;
        }
        if i < data.len() {
            acc += u32::from(data[i]) << 8;
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        assert_eq!(data(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0xddf2);
    }

    #[test]
    fn ipv4_header_checksum_of_a_real_header() {
        // 45 00 00 73 00 00 40 00 40 11 [b8 61] c0 a8 00 01 c0 a8 00 c7
        let mut hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(!data(&hdr), 0xb861);
        hdr[10] = 0xb8;
        hdr[11] = 0x61;
        assert_eq!(data(&hdr), 0xffff);
    }

    #[test]
    fn odd_lengths_and_empty() {
        assert_eq!(data(&[]), 0);
        assert_eq!(data(&[0xab]), 0xab00);
        assert_eq!(data(&[0xff; 33]), naive(&[0xff; 33]));
    }

    #[test]
    fn pseudo_headers_match_byte_sums() {
        let src = Ipv4Addr::new(192, 0, 2, 1);
        let dst = Ipv4Addr::new(198, 51, 100, 7);
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&src.octets());
        bytes.extend_from_slice(&dst.octets());
        bytes.extend_from_slice(&[0, 17, 0x01, 0x2c]);
        assert_eq!(pseudo_header_v4(src, dst, IpProtocol::UDP, 300), naive(&bytes));
        assert_eq!(IpPair::V4 { src, dst }.pseudo_header(IpProtocol::UDP, 300), naive(&bytes));

        let src6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let dst6: Ipv6Addr = "fe80::1234:5678:9abc:def0".parse().unwrap();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&src6.octets());
        bytes.extend_from_slice(&dst6.octets());
        bytes.extend_from_slice(&70_000u32.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 58]);
        assert_eq!(pseudo_header_v6(src6, dst6, IpProtocol::ICMPV6, 70_000), naive(&bytes));
    }

    /// Every checksum against RFC 1624's eqn. 3 for every TTL and common
    /// protocols (every TTL/protocol word, 4.3 G pairs, matched once by
    /// hand in a release build); the property below covers the rest.
    #[test]
    fn ttl_decremented_is_the_incremental_update() {
        for c in 0..=u16::MAX {
            let t = ttl_decremented(c);
            for ttl in 1..=u8::MAX {
                for proto in [1u8, 6, 17, 47, 50] {
                    let old = u16::from_be_bytes([ttl, proto]);
                    assert_eq!(t, update(c, old, old - 0x0100), "checksum {c:#06x}, word {old:#06x}");
                }
            }
        }
    }

    /// The fold as it was first written: four folds of halves.
    fn fold_by_halves(acc: u64) -> u16 {
        let mut s = (acc & 0xffff_ffff) + (acc >> 32);
        s = (s & 0xffff) + (s >> 16);
        s = (s & 0xffff) + (s >> 16);
        s = (s & 0xffff) + (s >> 16);
        s as u16
    }

    #[test]
    fn fold_edges() {
        for acc in [0, 1, 0xffff, 0x1_0000, 0xffff_ffff, 0x1_0000_0000, u64::MAX, u64::MAX - 1, 0xffff_0000_ffff] {
            assert_eq!(fold(acc), fold_by_halves(acc), "{acc:#x}");
        }
    }

    proptest! {
        #[test]
        fn fold_matches_folding_by_halves(acc in any::<u64>(), small in 0u64..0x3_0000) {
            prop_assert_eq!(fold(acc), fold_by_halves(acc));
            prop_assert_eq!(fold(small), fold_by_halves(small));
        }

        #[test]
        fn ttl_decremented_matches_update(c in any::<u16>(), old in 0x0100u16..) {
            prop_assert_eq!(ttl_decremented(c), update(c, old, old - 0x0100));
        }

        #[test]
        fn header20_matches_data(header in any::<[u8; 20]>()) {
            prop_assert_eq!(header20(&header), data(&header));
        }

        #[test]
        fn fast_sum_matches_naive(buf in proptest::collection::vec(any::<u8>(), 0..300), skip in 0usize..8) {
            // Also at unaligned starts.
            let s = &buf[skip.min(buf.len())..];
            prop_assert_eq!(data(s), naive(s));
        }

        /// RFC 1624 eqn. 3 against a full recomputation.
        #[test]
        fn incremental_update_matches_recompute(
            words in proptest::collection::vec(any::<u16>(), 2..40),
            at in any::<proptest::sample::Index>(),
            new in any::<u16>(),
        ) {
            // Word 0 is the checksum field.
            let mut buf: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
            buf[0] = 0;
            buf[1] = 0;
            let hc = !data(&buf);
            buf[..2].copy_from_slice(&hc.to_be_bytes());
            prop_assert_eq!(data(&buf), 0xffff);

            let i = 1 + at.index(words.len() - 1);
            let old = u16::from_be_bytes([buf[2 * i], buf[2 * i + 1]]);
            buf[2 * i..2 * i + 2].copy_from_slice(&new.to_be_bytes());
            let incremental = update(hc, old, new);

            buf[0] = 0;
            buf[1] = 0;
            let full = !data(&buf);
            if buf.iter().all(|&b| b == 0) {
                // -0 has two representations; both verify.
                prop_assert!(incremental == 0 || incremental == 0xffff);
            } else {
                prop_assert_eq!(incremental, full);
            }
            buf[..2].copy_from_slice(&incremental.to_be_bytes());
            prop_assert!(data(&buf) == 0xffff || incremental == 0);
        }

        #[test]
        fn incremental_u32_matches_recompute(
            head in any::<[u8; 10]>(),
            old in any::<u32>(),
            new in any::<u32>(),
        ) {
            let mut buf = head.to_vec();
            buf.extend_from_slice(&old.to_be_bytes());
            buf[0] = 0;
            buf[1] = 0x45; // keep the data non-zero so -0 is unique
            let hc = !data(&buf);
            buf[10..14].copy_from_slice(&new.to_be_bytes());
            prop_assert_eq!(update_u32(hc, old, new), !data(&buf));
        }
    }
}
