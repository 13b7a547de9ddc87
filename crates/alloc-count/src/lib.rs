//! A counting global allocator for the examples that measure memory
//! (tern-fib `host_routes`, tern-ipsec `sa_scale`, tern-ike `ike_setup`):
//! every allocation goes to the system allocator, and the bytes asked for
//! are added to one counter, so "what did building this cost" is the
//! difference of two [`live`] readings.
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: tern_alloc_count::Counting = tern_alloc_count::Counting;
//!
//! let before = tern_alloc_count::live();
//! let v: Vec<u64> = Vec::with_capacity(1000);
//! assert_eq!(tern_alloc_count::live() - before, 8000);
//! ```
//!
//! The counter sees the sizes asked for, not what malloc rounds them to
//! nor its headers (the gap to RSS is [`rss_bytes`] minus [`live`]).
//!
//! The one unsafe thing is the `GlobalAlloc` impl (an unsafe trait).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// The counting allocator: install it with `#[global_allocator]`.
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Bytes allocated and not yet freed (through [`Counting`]; 0 when it is
/// not the global allocator).
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// This process's resident set, in bytes (0 where /proc is not there).
pub fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Counts the live bytes of what `build` returns: the heap grown over the
/// call (the value stays alive until after the reading), with the value.
pub fn measure<T>(build: impl FnOnce() -> T) -> (T, isize) {
    let before = live();
    let v = build();
    (v, live() - before)
}

// A negative size never comes: Layout sizes are at most isize::MAX.
fn signed(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

// SAFETY: every call is forwarded to the system allocator with the same
// layout and pointer; the counter has no effect on the memory handed out.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(signed(layout.size()), Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(signed(layout.size()), Ordering::Relaxed);
        // SAFETY: as for alloc.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(signed(layout.size()), Ordering::Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(signed(new_size) - signed(layout.size()), Ordering::Relaxed);
        // SAFETY: as for dealloc; `new_size` is the caller's, unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
