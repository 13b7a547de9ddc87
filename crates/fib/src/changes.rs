//! Which parts of the reader arrays changed, for mirrors (the XDP lane
//! copies the arrays into BPF array maps and only wants what changed).

use std::ops::Range;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64};

/// One bit per array element written since the last `take`.
#[derive(Clone, Debug, Default)]
pub(crate) struct DirtyBits(Vec<u64>);

impl DirtyBits {
    #[inline]
    pub(crate) fn mark(&mut self, i: usize) {
        let w = i / 64;
        if w >= self.0.len() {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << (i % 64);
    }

    /// Starts loading the word of bit `i`.
    #[inline]
    pub(crate) fn prefetch(&self, i: usize) {
        tern_intrin::prefetch_index(&self.0, i / 64);
    }

    /// Marks `lo..hi` a word at a time (the writer rewrites runs of up to
    /// 2^24 top entries for one short prefix).
    pub(crate) fn mark_range(&mut self, lo: usize, hi: usize) {
        if lo >= hi {
            return;
        }
        let (wl, wh) = (lo / 64, (hi - 1) / 64);
        if wh >= self.0.len() {
            self.0.resize(wh + 1, 0);
        }
        let Some(words) = self.0.get_mut(wl..=wh) else { return };
        let last = words.len() - 1;
        for (k, word) in words.iter_mut().enumerate() {
            let from = if k == 0 { lo % 64 } else { 0 };
            let to = if k == last { (hi - 1) % 64 + 1 } else { 64 };
            *word |= (u64::MAX >> (64 - (to - from))) << from;
        }
    }

    /// The marked elements as sorted, merged half-open ranges; clears.
    pub(crate) fn take(&mut self) -> Vec<Range<u32>> {
        let mut out: Vec<Range<u32>> = Vec::new();
        for (w, word) in self.0.iter().enumerate() {
            let mut x = *word;
            while x != 0 {
                let i = (w * 64) as u32 + x.trailing_zeros();
                x &= x - 1;
                match out.last_mut() {
                    Some(r) if r.end == i => r.end = i + 1,
                    _ => out.push(i..i + 1),
                }
            }
        }
        self.0.clear();
        out
    }
}

/// What changed since the previous [`crate::FibWriter::take_changes`], as
/// index ranges into the arrays of [`RawFib`]. A mirror copies, in this
/// order, next hops and ECMP members, then trie blocks, then top entries,
/// so that what a mirrored entry points to is always there first (the
/// same order the writer publishes in).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FibChanges {
    pub nexthops: Vec<Range<u32>>,
    pub ecmp_members: Vec<Range<u32>>,
    /// Trie blocks (each `1 << stride` entries of `nodes`).
    pub v4_blocks: Vec<Range<u32>>,
    pub v4_top: Vec<Range<u32>>,
    pub v6_blocks: Vec<Range<u32>>,
    pub v6_top: Vec<Range<u32>>,
}

/// One family's trie as flat arrays of entries `E` (`AtomicU16` for both
/// families): see `lpm/multibit.rs` for the layout.
pub struct RawTrie<'a, E = AtomicU32> {
    /// `1 << top_bits` entries.
    pub top: &'a [E],
    /// Blocks of `1 << stride` entries.
    pub nodes: &'a [E],
    pub top_bits: u32,
    pub stride: u32,
    /// Entries from this value up point to block `entry - child_base`;
    /// those below are next-hop ids (2^15 for IPv4, a flag bit; 2^13 for
    /// IPv6).
    pub child_base: u32,
}

impl<E> Clone for RawTrie<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for RawTrie<'_, E> {}

/// Every array readers use, read-only.
#[derive(Clone, Copy)]
pub struct RawFib<'a> {
    pub v4: RawTrie<'a, AtomicU16>,
    pub v6: RawTrie<'a, AtomicU16>,
    /// Next hops: 4 words each (layout in `nexthop.rs`).
    pub nexthops: &'a [AtomicU64],
    pub ecmp_members: &'a [AtomicU32],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_clear() {
        let mut d = DirtyBits::default();
        for i in [5, 3, 4, 64, 65, 200] {
            d.mark(i);
        }
        assert_eq!(d.take(), vec![3..6, 64..66, 200..201]);
        assert_eq!(d.take(), vec![]);
    }

    #[test]
    fn mark_range_equals_marking_each() {
        let mut x = 0x9e37_79b9_u64;
        for _ in 0..500 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let lo = (x % 300) as usize;
            let hi = lo + (x >> 20) as usize % 200;
            let (mut a, mut b) = (DirtyBits::default(), DirtyBits::default());
            a.mark(7);
            b.mark(7);
            a.mark_range(lo, hi);
            for i in lo..hi {
                b.mark(i);
            }
            assert_eq!(a.take(), b.take(), "{lo}..{hi}");
        }
    }
}
