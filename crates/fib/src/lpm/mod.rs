//! Longest-prefix-match structures. On the writer side keys are
//! left-aligned in a u128 (IPv4 in the top 32 bits) so one code path serves
//! both families.

mod blockdir;
pub mod multibit;
pub mod naive;
/// The measured alternative (see `multibit.rs` for why it is not used).
#[cfg(any(test, feature = "bench"))]
pub mod poptrie;

#[cfg(test)]
mod multibit_tests;
#[cfg(test)]
mod poptrie_tests;

use std::sync::atomic::{AtomicU16, AtomicU32};

use multibit::{MultibitArrays, MultibitWriter};

/// IPv4: DIR-24-8, 24 bits of direct index (32 MiB of u16 entries), then blocks of 256
/// entries. Measured fastest by far on the full table: a /24 or shorter
/// (99.9% of the table) is one load whose child test is almost never taken,
/// so the CPU overlaps many lookups even without batching. (18-bit direct
/// index + 64-entry blocks: 17 MiB but an unpredictable branch per lookup.)
pub const V4_TOP: u32 = 24;
pub const V4_STRIDE: u32 = 8;
/// IPv6: 16 bits of direct index (256 KiB), then blocks of 256 entries: a
/// /48 is 4 blocks deep instead of 5 with 6-bit blocks (measured ~30%
/// faster on the full table, for 37 MiB instead of 18 MiB).
pub const V6_TOP: u32 = 16;
pub const V6_STRIDE: u32 = 8;

/// IPv4 entries are 16 bits (32 MiB of direct index instead of 64: half
/// the cache lines, measured 1.3x the lookups of `u32` entries on covered
/// addresses of the full table); next-hop ids and block numbers must then
/// fit 15 bits. IPv6 entries are 32 bits.
pub(crate) type V4Entry = AtomicU16;
pub(crate) type V6Entry = AtomicU32;
pub(crate) type V4Arrays = MultibitArrays<V4Entry, V4_TOP, V4_STRIDE>;
pub(crate) type V4Writer = MultibitWriter<V4Entry, V4_TOP, V4_STRIDE>;
pub(crate) type V6Arrays = MultibitArrays<V6Entry, V6_TOP, V6_STRIDE>;
pub(crate) type V6Writer = MultibitWriter<V6Entry, V6_TOP, V6_STRIDE>;
