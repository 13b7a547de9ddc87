//! Longest-prefix-match structures. On the writer side keys are
//! left-aligned in a u128 (IPv4 in the top 32 bits) so one code path serves
//! both families.

mod blockdir;
pub mod multibit;
pub mod naive;

#[cfg(test)]
mod multibit_tests;

use multibit::{Entry16, MultibitArrays, MultibitWriter};

/// IPv4: DIR-24-8, 24 bits of direct index (32 MiB of u16 entries), then blocks of 256
/// entries. Measured fastest by far on the full table: a /24 or shorter
/// (99.9% of the table) is one load whose child test is almost never taken,
/// so the CPU overlaps many lookups even without batching. (18-bit direct
/// index + 64-entry blocks: 17 MiB but an unpredictable branch per lookup.)
pub const V4_TOP: u32 = 24;
pub const V4_STRIDE: u32 = 8;
/// IPv6: 24 bits of direct index (32 MiB of u16 entries), then blocks of
/// 256 entries: a /32 is one block deep, a /48 three (16 bits of direct
/// index: two and four). Measured on covered addresses of the full table
/// against the 16-bit top of `u32` entries (37.5 MiB), medians of 4
/// alternating runs (2026-11-23, docs/PERFORMANCE.md "fib6"): 1.33x in
/// batches of 256, 1.34x single lookups, for 50.6 MiB. (16 bits of direct index with 6-bit blocks had been measured
/// ~30% slower than with 8-bit ones, for 18 MiB instead of 37 MiB.)
pub const V6_TOP: u32 = 24;
pub const V6_STRIDE: u32 = 8;

/// IPv4 entries are 16 bits (32 MiB of direct index instead of 64: half
/// the cache lines, measured 1.3x the lookups of `u32` entries on covered
/// addresses of the full table); next-hop ids and block numbers must then
/// fit 15 bits. IPv6 entries are 16 bits too (a 24-bit top of `u32`
/// entries would be 64 MiB, over the memory goal with IPv4's 32), split
/// differently: the full table needs ~38,100 blocks, more than 2^15, so
/// entries from 2^13 up point to blocks (57,344 of them) and next-hop ids
/// must be below 2^13.
pub(crate) type V4Entry = Entry16<{ 1 << 15 }>;
pub(crate) type V6Entry = Entry16<{ 1 << 13 }>;
pub(crate) type V4Arrays = MultibitArrays<V4Entry, V4_TOP, V4_STRIDE>;
pub(crate) type V4Writer = MultibitWriter<V4Entry, V4_TOP, V4_STRIDE>;
pub(crate) type V6Arrays = MultibitArrays<V6Entry, V6_TOP, V6_STRIDE>;
pub(crate) type V6Writer = MultibitWriter<V6Entry, V6_TOP, V6_STRIDE>;
