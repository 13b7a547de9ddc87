//! The reference longest-prefix match: one hash map per prefix length,
//! probed from the longest length present. Obviously correct, slow; the fast
//! structures are tested against it.

use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

use crate::prefix::mask128;
use crate::types::{NH_NONE, NhId};

/// Keys are left-aligned in a u128 (IPv4 in the top 32 bits).
#[derive(Clone, Default)]
pub struct NaiveLpm {
    by_len: Vec<HashMap<u128, NhId, FxBuildHasher>>,
    /// Lengths with at least one prefix, longest first.
    lens: Vec<u8>,
}

impl NaiveLpm {
    pub fn new() -> NaiveLpm {
        NaiveLpm { by_len: (0..=128).map(|_| HashMap::default()).collect(), lens: Vec::new() }
    }

    pub fn insert(&mut self, bits: u128, len: u8, nh: NhId) {
        let Some(m) = self.by_len.get_mut(usize::from(len)) else {
            return;
        };
        m.insert(bits & mask128(len), nh);
        if !self.lens.contains(&len) {
            self.lens.push(len);
            self.lens.sort_unstable_by(|a, b| b.cmp(a));
        }
    }

    pub fn remove(&mut self, bits: u128, len: u8) -> Option<NhId> {
        let m = self.by_len.get_mut(usize::from(len))?;
        let r = m.remove(&(bits & mask128(len)));
        if m.is_empty() {
            self.lens.retain(|&l| l != len);
        }
        r
    }

    pub fn get(&self, bits: u128, len: u8) -> Option<NhId> {
        self.by_len.get(usize::from(len))?.get(&(bits & mask128(len))).copied()
    }

    /// The longest match: (length, next hop).
    pub fn lookup_len(&self, key: u128) -> Option<(u8, NhId)> {
        for &l in &self.lens {
            if let Some(nh) = self.by_len.get(usize::from(l)).and_then(|m| m.get(&(key & mask128(l)))) {
                return Some((l, *nh));
            }
        }
        None
    }

    pub fn lookup(&self, key: u128) -> NhId {
        self.lookup_len(key).map_or(NH_NONE, |(_, nh)| nh)
    }

    pub fn len(&self) -> usize {
        self.by_len.iter().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_wins_and_removal_falls_back() {
        let mut t = NaiveLpm::new();
        let k = |a: u32| u128::from(a) << 96;
        t.insert(k(0x0a00_0000), 8, 1);
        t.insert(k(0x0a01_0000), 16, 2);
        assert_eq!(t.lookup(k(0x0a01_0203)), 2);
        assert_eq!(t.lookup(k(0x0a02_0203)), 1);
        assert_eq!(t.lookup(k(0x0b00_0000)), NH_NONE);
        assert_eq!(t.remove(k(0x0a01_0000), 16), Some(2));
        assert_eq!(t.lookup(k(0x0a01_0203)), 1);
        assert_eq!(t.len(), 1);
    }
}
