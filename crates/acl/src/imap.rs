//! `IntervalMap`: maps a field value to the class of the elementary
//! interval containing it. A multibit trie (a direct root table, then 8-bit
//! strides) whose entries are a class, a child node, or a bucket of at most
//! [`BUCKET`] sorted boundaries scanned without branches. Nodes are only
//! made where more than [`BUCKET`] boundaries fall in one entry, so memory
//! stays proportional to the number of boundaries (a plain trie would spend
//! a 1 KiB node per /32 host below a /24), and identical nodes are shared.
//!
//! A bucket is fixed-size and cache-line aligned (7 `u32` boundaries and 8
//! classes fill one 64-byte line): unused boundaries are `T::MAX` and
//! unused classes repeat the last one, so the scan is a fixed, unrolled
//! count of `bound <= v` with no length to load.

use std::collections::HashMap;

/// Most boundaries a bucket holds before a node is made instead.
pub(crate) const BUCKET: usize = 7;

const TAG_SHIFT: u32 = 30;
const PAYLOAD: u32 = (1 << TAG_SHIFT) - 1;
const TAG_NODE: u32 = 0;
const TAG_BUCKET: u32 = 1;
const TAG_LEAF: u32 = 2;

/// An unsigned key type (`u32` for most fields, `u128` for IPv6 addresses).
pub(crate) trait Key: Copy + Ord + std::hash::Hash + std::fmt::Debug + Default {
    const MAX: Self;
    fn from_u128(v: u128) -> Self;
    /// `(self >> shift) & mask` as an index (`shift` is always below the
    /// width: the trie never descends past the last byte).
    fn chunk(self, shift: u32, mask: u32) -> usize;
}

impl Key for u32 {
    const MAX: Self = u32::MAX;
    #[inline(always)]
    fn from_u128(v: u128) -> Self {
        v as u32
    }
    #[inline(always)]
    fn chunk(self, shift: u32, mask: u32) -> usize {
        (self.wrapping_shr(shift) & mask) as usize
    }
}

impl Key for u128 {
    const MAX: Self = u128::MAX;
    #[inline(always)]
    fn from_u128(v: u128) -> Self {
        v
    }
    #[inline(always)]
    fn chunk(self, shift: u32, mask: u32) -> usize {
        (self.wrapping_shr(shift) as u32 & mask) as usize
    }
}

/// A bucket: boundaries (ascending, padded with `T::MAX`) and the class of
/// each gap (padded with the last class).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Bucket<T> {
    bounds: [T; BUCKET],
    classes: [u32; BUCKET + 1],
}

#[derive(Debug)]
pub(crate) struct IntervalMap<T> {
    root_shift: u32,
    root_mask: u32,
    root: Box<[u32]>,
    nodes: Box<[u32]>,
    buckets: Box<[Bucket<T>]>,
    /// Every root entry is a class (small fields): one load, no walk.
    flat: bool,
}

impl<T: Key> IntervalMap<T> {
    /// Builds the map of a domain of `bits` bits from the elementary
    /// intervals: `starts[i]` (ascending, `starts[0] == 0`) begins interval
    /// `i`, of class `cls[i]`.
    pub(crate) fn build(bits: u32, starts: &[u128], cls: &[u32]) -> Self {
        // Root stride: the whole domain for small fields, else a multiple of
        // 8 bits below it so children are 8-bit nodes.
        let root_bits = if bits <= 9 {
            bits
        } else if bits <= 17 {
            bits - 8
        } else if starts.len() <= 64 {
            8
        } else {
            16
        };
        let root_shift = bits - root_bits;
        let mut b = Builder { starts, cls, nodes: Vec::new(), dedup: HashMap::new(), buckets: Vec::new() };
        let span = |shift: u32| -> u128 { if shift >= 128 { u128::MAX } else { (1u128 << shift) - 1 } };
        let root: Box<[u32]> = (0..1u128 << root_bits)
            .map(|j| {
                let lo = if root_shift >= 128 { 0 } else { j << root_shift };
                b.entry(lo, lo | span(root_shift), root_shift)
            })
            .collect();
        let flat = b.nodes.is_empty() && b.buckets.is_empty();
        IntervalMap {
            root_shift,
            root_mask: (1u32 << root_bits) - 1,
            root,
            nodes: b.nodes.into(),
            buckets: b.buckets.into(),
            flat,
        }
    }

    /// The class of `v`.
    #[inline(always)]
    pub(crate) fn lookup(&self, v: T) -> u32 {
        let mut e = self.root.get(v.chunk(self.root_shift, self.root_mask)).copied().unwrap_or(TAG_LEAF << TAG_SHIFT);
        if self.flat {
            return e & PAYLOAD;
        }
        let mut shift = self.root_shift;
        loop {
            let payload = e & PAYLOAD;
            match e >> TAG_SHIFT {
                TAG_LEAF => return payload,
                TAG_NODE => {
                    shift = shift.saturating_sub(8);
                    e = self
                        .nodes
                        .get(payload as usize + v.chunk(shift, 0xff))
                        .copied()
                        .unwrap_or(TAG_LEAF << TAG_SHIFT);
                }
                _ => {
                    let Some(b) = self.buckets.get(payload as usize) else { return 0 };
                    // Branchless binary search: number of bounds <= v.
                    let bd = &b.bounds;
                    let mut c = ((v >= bd[3]) as usize) << 2;
                    c += ((v >= bd[c + 1]) as usize) << 1;
                    c += (v >= bd[c]) as usize;
                    return b.classes[c & BUCKET];
                }
            }
        }
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        (self.root.len() + self.nodes.len()) * 4 + self.buckets.len() * std::mem::size_of::<Bucket<T>>()
    }
}

struct Builder<'a, T> {
    starts: &'a [u128],
    cls: &'a [u32],
    nodes: Vec<u32>,
    dedup: HashMap<Vec<u32>, u32>,
    buckets: Vec<Bucket<T>>,
}

impl<T: Key> Builder<'_, T> {
    /// Index of the elementary interval containing `v`.
    fn find(&self, v: u128) -> usize {
        self.starts.partition_point(|&s| s <= v).saturating_sub(1)
    }

    fn entry(&mut self, lo: u128, hi: u128, shift: u32) -> u32 {
        let i = self.find(lo);
        let j = self.find(hi);
        let cls = |k: usize| self.cls.get(k).copied().unwrap_or(0);
        if i == j || shift == 0 {
            return TAG_LEAF << TAG_SHIFT | cls(i);
        }
        if j - i <= BUCKET && self.buckets.len() < PAYLOAD as usize {
            let mut b = Bucket { bounds: [T::MAX; BUCKET], classes: [cls(j); BUCKET + 1] };
            for (k, s) in self.starts[i + 1..=j].iter().enumerate() {
                b.bounds[k] = T::from_u128(*s);
            }
            for k in i..j {
                b.classes[k - i] = cls(k);
            }
            self.buckets.push(b);
            return TAG_BUCKET << TAG_SHIFT | (self.buckets.len() - 1) as u32;
        }
        let cshift = shift.saturating_sub(8);
        let step: u128 = 1u128 << cshift;
        let child: Vec<u32> =
            (0..256u128).map(|k| self.entry(lo + k * step, lo + (k + 1) * step - 1, cshift)).collect();
        if let Some(&off) = self.dedup.get(&child) {
            return TAG_NODE << TAG_SHIFT | off;
        }
        let off = self.nodes.len() as u32;
        self.nodes.extend_from_slice(&child);
        self.dedup.insert(child, off);
        TAG_NODE << TAG_SHIFT | off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(starts: &[u128], cls: &[u32], v: u128) -> u32 {
        cls[starts.partition_point(|&s| s <= v) - 1]
    }

    #[test]
    fn matches_binary_search_on_every_kind_of_entry() {
        // Dense cluster (forces nodes), sparse points (buckets), wide leaves.
        let mut starts = vec![0u128];
        for i in 0..40u128 {
            starts.push(0x0a00_0000 + i * 3);
        }
        starts.extend([0x0b00_0000, 0x0b00_0001, 0xc0a8_0100, 0xffff_ffff]);
        let cls: Vec<u32> = (0..starts.len() as u32).map(|i| i % 7).collect();
        let m = IntervalMap::<u32>::build(32, &starts, &cls);
        let mut probes = vec![0u128, u32::MAX as u128];
        for &s in &starts {
            probes.extend([s, s.saturating_sub(1), s + 1]);
        }
        for v in probes.into_iter().filter(|&v| v <= u32::MAX as u128) {
            assert_eq!(m.lookup(v as u32), reference(&starts, &cls, v), "value {v:#x}");
        }
    }

    #[test]
    fn wide_keys_and_small_domains() {
        let starts = vec![0u128, 1 << 100, (1 << 100) + 5, u128::MAX];
        let cls = vec![1, 2, 3, 4];
        let m = IntervalMap::<u128>::build(128, &starts, &cls);
        for v in [0, 1 << 100, (1 << 100) + 4, (1 << 100) + 5, u128::MAX - 1, u128::MAX] {
            assert_eq!(m.lookup(v), reference(&starts, &cls, v));
        }
        let starts: Vec<u128> = (0..300).map(|i| i * 200).collect();
        let cls: Vec<u32> = (0..300).collect();
        let m = IntervalMap::<u32>::build(17, &starts, &cls);
        for v in 0..(1u32 << 17) {
            assert_eq!(m.lookup(v), reference(&starts, &cls, v as u128));
        }
        let m = IntervalMap::<u32>::build(9, &[0, 256], &[5, 6]);
        assert_eq!((m.lookup(255), m.lookup(256)), (5, 6));
    }
}
