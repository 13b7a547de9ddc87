//! Sixteen bytes compared at once: [`Bytes16`].
//!
//! On x86_64 a value lives in one SSE2 register (SSE2 is part of the
//! x86_64 baseline, so no runtime detection is needed); elsewhere in two
//! 64-bit words. The firewall compares a packet's metadata and header bytes
//! against its run's pattern with it (`crates/nodes/src/acl.rs`): three
//! 16-byte XOR/AND/OR chains and one test instead of five word chains.

#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::{
    __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x,
    _mm_setzero_si128, _mm_xor_si128,
};

/// Sixteen bytes; byte `i` of [`Bytes16::from_words`]`(lo, hi)` is byte
/// `i` of `lo` (little endian) for `i < 8`, of `hi` after.
#[derive(Clone, Copy, Debug)]
pub struct Bytes16(#[cfg(target_arch = "x86_64")] __m128i, #[cfg(not(target_arch = "x86_64"))] [u64; 2]);

impl Bytes16 {
    /// Sixteen zero bytes.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: an all-zero bit pattern is a valid __m128i (plain integer lanes).
    #[allow(unsafe_code)]
    pub const ZERO: Bytes16 = Bytes16(unsafe { core::mem::transmute::<[u64; 2], __m128i>([0, 0]) });
    #[cfg(not(target_arch = "x86_64"))]
    pub const ZERO: Bytes16 = Bytes16([0, 0]);

    /// The bytes of two little-endian words (adjacent loads of a packed
    /// struct's fields become one 16-byte load).
    #[inline(always)]
    pub fn from_words(lo: u64, hi: u64) -> Bytes16 {
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        {
            // SAFETY: a register operation; SSE2 is in the x86_64 baseline.
            Bytes16(unsafe { _mm_set_epi64x(hi as i64, lo as i64) })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Bytes16([lo, hi])
        }
    }

    /// Loads `b` (unaligned).
    #[inline(always)]
    pub fn load(b: &[u8; 16]) -> Bytes16 {
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        {
            // SAFETY: `b` is 16 readable bytes (a reference to an array of
            // 16); MOVDQU has no alignment requirement; SSE2 is baseline.
            Bytes16(unsafe { _mm_loadu_si128(b.as_ptr().cast::<__m128i>()) })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let (lo, hi) = b.split_at(8);
            let word = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or([0; 8]));
            Bytes16([word(lo), word(hi)])
        }
    }

    #[inline(always)]
    pub fn xor(self, o: Bytes16) -> Bytes16 {
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        {
            // SAFETY: a register operation; SSE2 is in the x86_64 baseline.
            Bytes16(unsafe { _mm_xor_si128(self.0, o.0) })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Bytes16([self.0[0] ^ o.0[0], self.0[1] ^ o.0[1]])
        }
    }

    #[inline(always)]
    pub fn and(self, o: Bytes16) -> Bytes16 {
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        {
            // SAFETY: a register operation; SSE2 is in the x86_64 baseline.
            Bytes16(unsafe { _mm_and_si128(self.0, o.0) })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Bytes16([self.0[0] & o.0[0], self.0[1] & o.0[1]])
        }
    }

    #[inline(always)]
    pub fn or(self, o: Bytes16) -> Bytes16 {
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        {
            // SAFETY: a register operation; SSE2 is in the x86_64 baseline.
            Bytes16(unsafe { _mm_or_si128(self.0, o.0) })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Bytes16([self.0[0] | o.0[0], self.0[1] | o.0[1]])
        }
    }

    /// Whether all sixteen bytes are zero.
    #[inline(always)]
    pub fn is_zero(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        {
            // SAFETY: register operations; SSE2 is in the x86_64 baseline.
            unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(self.0, _mm_setzero_si128())) == 0xffff }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.0[0] | self.0[1] == 0
        }
    }

    /// Byte by byte, all ones where `self` and `o` are equal, zero where
    /// they differ.
    #[inline(always)]
    pub fn eq(self, o: Bytes16) -> Bytes16 {
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        {
            // SAFETY: a register operation; SSE2 is in the x86_64 baseline.
            Bytes16(unsafe { _mm_cmpeq_epi8(self.0, o.0) })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let eq = |a: u64, b: u64| {
                let mut out = 0u64;
                for i in 0..8 {
                    if (a >> (8 * i)) as u8 == (b >> (8 * i)) as u8 {
                        out |= 0xff << (8 * i);
                    }
                }
                out
            };
            Bytes16([eq(self.0[0], o.0[0]), eq(self.0[1], o.0[1])])
        }
    }

    /// The top bit of each byte, byte `i` as bit `i` (so after
    /// [`Bytes16::eq`], the bytes that are equal).
    #[inline(always)]
    pub fn top_bits(self) -> u16 {
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        {
            // SAFETY: a register operation; SSE2 is in the x86_64 baseline.
            (unsafe { _mm_movemask_epi8(self.0) }) as u16
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let mut out = 0u16;
            for i in 0..16 {
                let w = self.0[i / 8];
                out |= u16::from((w >> (8 * (i % 8) + 7)) as u8 & 1) << i;
            }
            out
        }
    }

    /// Whether `(self ^ want) & mask` is zero: `self` equals `want` in
    /// every byte `mask` keeps.
    #[inline(always)]
    pub fn matches(self, want: Bytes16, mask: Bytes16) -> bool {
        self.xor(want).and(mask).is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(b: Bytes16) -> [u8; 16] {
        let mut out = [0u8; 16];
        for (i, o) in out.iter_mut().enumerate() {
            let mut one = [0u8; 16];
            one[i] = 0xff;
            // Byte i alone, tested for each of its bits.
            let lone = b.and(Bytes16::load(&one));
            for bit in 0..8 {
                let mut probe = [0u8; 16];
                probe[i] = 1 << bit;
                if !lone.and(Bytes16::load(&probe)).is_zero() {
                    *o |= 1 << bit;
                }
            }
        }
        out
    }

    #[test]
    fn words_are_little_endian_bytes() {
        let b = Bytes16::from_words(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        assert_eq!(bytes(b), core::array::from_fn(|i| i as u8));
        assert_eq!(
            bytes(Bytes16::load(&core::array::from_fn(|i| 0xf0 ^ i as u8))),
            core::array::from_fn(|i| 0xf0 ^ i as u8)
        );
    }

    #[test]
    fn operations_are_bytewise() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..1000 {
            let (a, b) = (core::array::from_fn::<u8, 16, _>(|_| rnd() as u8), core::array::from_fn(|_| rnd() as u8));
            let (va, vb) = (Bytes16::load(&a), Bytes16::load(&b));
            assert_eq!(bytes(va.xor(vb)), core::array::from_fn(|i| a[i] ^ b[i]));
            assert_eq!(bytes(va.and(vb)), core::array::from_fn(|i| a[i] & b[i]));
            assert_eq!(bytes(va.or(vb)), core::array::from_fn(|i| a[i] | b[i]));
            assert!(va.xor(va).is_zero());
            // One differing bit anywhere is seen, unless masked off.
            let (byte, bit) = (rnd() as usize % 16, rnd() % 8);
            let mut c = a;
            c[byte] ^= 1 << bit;
            let mut mask = [0xffu8; 16];
            assert!(!Bytes16::load(&c).matches(va, Bytes16::load(&mask)));
            mask[byte] &= !(1 << bit);
            assert!(Bytes16::load(&c).matches(va, Bytes16::load(&mask)));
            // Equality byte by byte; all ones only when every byte is equal.
            let mut d = a;
            d[byte] = b[byte];
            assert_eq!(bytes(va.eq(Bytes16::load(&d))), core::array::from_fn(|i| if a[i] == d[i] { 0xff } else { 0 }));
            let equal: u16 = (0..16).filter(|&i| a[i] == d[i]).map(|i| 1 << i).sum();
            assert_eq!(va.eq(Bytes16::load(&d)).top_bits(), equal);
            assert_eq!(va.eq(va).top_bits(), 0xffff);
            assert_eq!(va.top_bits(), (0..16).filter(|&i| a[i] & 0x80 != 0).map(|i| 1u16 << i).sum());
        }
    }
}
