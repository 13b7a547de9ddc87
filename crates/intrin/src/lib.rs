//! CPU intrinsics behind safe functions (TSC, prefetch, the SIMD
//! comparisons of [`Bytes16`]). This is the one place where tern calls
//! `core::arch`; every other crate uses these wrappers.
//!
//! On targets other than x86_64 the functions fall back to portable code
//! (a monotonic clock instead of the TSC, no prefetch).
#![deny(unsafe_code)]

#[cfg(feature = "alloc")]
pub mod alloc;
mod simd;

pub use simd::Bytes16;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Reads the time-stamp counter (cycles on an invariant-TSC machine).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    {
        // SAFETY: RDTSC has no memory effects and exists on every x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        fallback_epoch().elapsed().as_nanos() as u64
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn fallback_epoch() -> Instant {
    static E: OnceLock<Instant> = OnceLock::new();
    *E.get_or_init(Instant::now)
}

/// Hints the CPU to fetch the cache line holding `r` for reading.
#[inline(always)]
pub fn prefetch<T: ?Sized>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    {
        // SAFETY: PREFETCHT0 never faults and never changes memory; SSE is
        // part of the x86_64 baseline, so the target feature is present.
        unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>((r as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = r;
    }
}

/// Hints the CPU to fetch every cache line of `*r` (at most `max_lines`
/// of them): for an object larger than a line that the next step reads
/// whole, such as an expanded key schedule.
#[inline(always)]
pub fn prefetch_lines<T: ?Sized>(r: &T, max_lines: usize) {
    let start = (r as *const T).cast::<u8>();
    let first = start as usize & !63;
    let end = start as usize + core::mem::size_of_val(r);
    let lines = end.saturating_sub(first).div_ceil(64).min(max_lines);
    for i in 0..lines {
        // Pointer arithmetic without a dereference: no unsafe needed, and
        // the hint never faults even past the object.
        let line = start.wrapping_sub(start as usize - first).wrapping_add(i * 64);
        prefetch_ptr(line);
    }
}

#[inline(always)]
fn prefetch_ptr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    {
        // SAFETY: PREFETCHT0 never faults and never changes memory, whatever
        // the address; SSE is part of the x86_64 baseline.
        unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = p;
    }
}

/// Hints the CPU to fetch the line at `index` of `slice`, if it exists.
#[inline(always)]
pub fn prefetch_index<T>(slice: &[T], index: usize) {
    if let Some(r) = slice.get(index) {
        prefetch(r);
    }
}

/// TSC ticks per nanosecond, calibrated once against the monotonic clock.
pub fn tsc_per_ns() -> f64 {
    static F: OnceLock<f64> = OnceLock::new();
    *F.get_or_init(|| {
        let t0 = Instant::now();
        let c0 = rdtsc();
        std::thread::sleep(Duration::from_millis(20));
        let c1 = rdtsc();
        let ns = t0.elapsed().as_nanos() as f64;
        let f = (c1.wrapping_sub(c0)) as f64 / ns;
        if f.is_finite() && f > 0.0 { f } else { 1.0 }
    })
}

/// Converts TSC ticks to nanoseconds.
pub fn tsc_to_ns(ticks: u64) -> f64 {
    ticks as f64 / tsc_per_ns()
}

/// Asks the kernel to back the memory of `s` with transparent huge pages
/// (`madvise(MADV_HUGEPAGE)` on the 2 MiB-aligned part of it). Large lookup
/// tables (the FIB's 32 MiB IPv4 array) take a TLB miss on almost every
/// random lookup with 4 KiB pages. Call it before the memory is first
/// written. Returns false when the kernel refused (THP disabled); the
/// memory works the same either way.
pub fn advise_hugepages<T>(s: &[T]) -> bool {
    const HUGE: usize = 2 << 20;
    let start = s.as_ptr() as usize;
    let end = start + std::mem::size_of_val(s);
    let first = start.next_multiple_of(HUGE);
    let last = end / HUGE * HUGE;
    if last <= first {
        return false;
    }
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    {
        // SAFETY: [first, last) lies inside the allocation of `s` (rounded
        // inwards to huge-page boundaries). MADV_HUGEPAGE only changes how
        // the kernel backs those pages, never their contents or the
        // validity of any reference into them.
        unsafe { libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_HUGEPAGE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_advances_and_calibrates() {
        let a = rdtsc();
        let f = tsc_per_ns();
        let b = rdtsc();
        assert!(b > a);
        assert!(f > 0.01 && f < 100.0, "implausible TSC rate {f} ticks/ns");
    }

    #[test]
    fn hugepage_advice_is_harmless() {
        let v = vec![0u32; 4 << 20];
        let _ = advise_hugepages(&v);
        assert!(!advise_hugepages(&v[..10]), "too small to hold a huge page");
        assert!(v.iter().all(|&x| x == 0));
    }

    #[test]
    fn prefetch_out_of_range_is_harmless() {
        let v = [1u32, 2, 3];
        prefetch_index(&v, 1);
        prefetch_index(&v, 100);
        prefetch(&v[0]);
    }
}
