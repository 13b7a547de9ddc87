//! Longest-prefix-match structures. On the writer side keys are
//! left-aligned in a u128 (IPv4 in the top 32 bits) so one code path serves
//! both families.

pub mod multibit;
pub mod naive;
/// The measured alternative (see `multibit.rs` for why it is not used).
#[cfg(any(test, feature = "bench"))]
pub mod poptrie;

#[cfg(test)]
mod multibit_tests;
#[cfg(test)]
mod poptrie_tests;

use multibit::{MultibitArrays, MultibitWriter};

/// IPv4: 18 bits of direct index (1 MiB), then blocks of 64 entries.
pub const V4_TOP: u32 = 18;
pub const V4_STRIDE: u32 = 6;
/// IPv6: same shape.
pub const V6_TOP: u32 = 18;
pub const V6_STRIDE: u32 = 6;

pub(crate) type V4Arrays = MultibitArrays<V4_TOP, V4_STRIDE>;
pub(crate) type V4Writer = MultibitWriter<V4_TOP, V4_STRIDE>;
pub(crate) type V6Arrays = MultibitArrays<V6_TOP, V6_STRIDE>;
pub(crate) type V6Writer = MultibitWriter<V6_TOP, V6_STRIDE>;
