//! Keyed hashes for the writer's tables of prefixes (the RIB's cells, the
//! trie's block directory). Their keys come from peers, so the hash takes
//! a per-table seed drawn from std's `RandomState`: a peer that knew an
//! unkeyed hash could announce prefixes sharing one probe run and make
//! every update walk it.

/// murmur3's 64-bit finaliser: every key bit moves every hash bit (the
/// tables take the low bits).
#[inline]
pub(crate) fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// A 64-bit key under `seed`.
#[inline]
pub(crate) fn hash64(k: u64, seed: u64) -> u64 {
    fmix64(k ^ seed)
}

/// A 128-bit key (`hi`, `lo`) with a small tag (a length or bit offset)
/// under `seed`. The high word goes through the finaliser with the seed
/// before the low word joins: had both words been xored together first,
/// keys with equal `hi ^ f(lo)` would share a home cell under every seed,
/// and such keys are easy to pick. Now keys that share `hi` differ in
/// `lo` (a bijection) or in the tag, and at most one key per tag value
/// meets any given value.
#[inline]
pub(crate) fn hash128(hi: u64, lo: u64, tag: u8, seed: u64) -> u64 {
    fmix64(fmix64(hi ^ seed) ^ lo.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(tag))
}

/// A seed for one table.
pub(crate) fn new_seed(domain: u64) -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(domain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_collided_under_every_seed_now_scatter() {
        // Under the old hash, fmix64(hi ^ seed ^ f(lo) ^ tag), these 64
        // keys shared one pre-image and so one home cell whatever the seed.
        let f = |lo: u64| lo.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let keys: Vec<(u64, u64)> = (1..=64u64).map(|lo| (0x2001_0db8_0000_0000 ^ f(lo), lo)).collect();
        let old = |(hi, lo): (u64, u64), seed: u64| fmix64(hi ^ seed ^ f(lo) ^ 128);
        let seed = new_seed(1);
        let mask = (1u64 << 16) - 1;
        let mut homes: Vec<u64> = keys.iter().map(|&k| old(k, seed) & mask).collect();
        homes.dedup();
        assert_eq!(homes.len(), 1, "the old hash puts them all in one cell");
        let mut homes: Vec<u64> = keys.iter().map(|&(hi, lo)| hash128(hi, lo, 128, seed) & mask).collect();
        homes.sort_unstable();
        homes.dedup();
        assert!(homes.len() > 56, "only {} distinct homes", homes.len());
    }

    #[test]
    fn seeds_differ_per_table() {
        assert_ne!(new_seed(7), new_seed(7));
    }
}
