//! One monotonic clock for the whole process, in nanoseconds, so that
//! timestamps taken by workers and by the control thread compare.

use std::sync::OnceLock;
use std::time::Instant;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds since the process's clock epoch (never 0 after the first call).
#[inline]
pub fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64 + 1
}
