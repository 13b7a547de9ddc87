//! The four AF_XDP rings (fill, completion, rx, tx): single-producer,
//! single-consumer queues of descriptors shared with the kernel through an
//! mmap of the socket.
//!
//! The protocol follows libxdp's `xsk.h`: each side keeps cached copies of
//! both indices and touches the shared ones only when its cache runs dry;
//! the other side's index is read with Acquire and ours published with
//! Release, so descriptor contents written before a Release store are seen
//! by the kernel after its matching load (and the other way round).
//! Indices are free-running u32 counters; `idx & mask` is the slot.
//!
//! All unsafe code touching ring memory lives in this file.
#![allow(unsafe_code)]

use crate::sys::{self, RingOffset};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

/// One AF_XDP descriptor (`struct xdp_desc`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// A mapped ring area; unmapped on drop.
struct Mapping {
    base: *mut u8,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly the mapping made in `Ring::map`, and
        // the owning Ring (the only user of the pointers into it) is being
        // dropped.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// Ring memory and our cached view of its indices. `T` is `u64` (fill and
/// completion: frame addresses) or [`XdpDesc`] (rx and tx).
pub(crate) struct Ring<T: Copy> {
    _map: Mapping,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    mask: u32,
    size: u32,
    /// Our copy of the producer index.
    cached_prod: u32,
    /// Our copy of the consumer index (plus `size` on producer rings, so
    /// that `cached_cons - cached_prod` is the free space).
    cached_cons: u32,
}

// SAFETY: the ring is owned by exactly one port; moving it to another thread
// moves that ownership. The kernel side synchronises through the atomics.
unsafe impl<T: Copy> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps the ring of `size` entries that the kernel created for `fd` at
    /// page offset `pgoff`, laid out as `off` says.
    pub(crate) fn map(fd: RawFd, off: &RingOffset, size: u32, pgoff: i64, producer_side: bool) -> io::Result<Ring<T>> {
        if !size.is_power_of_two() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("ring size {size} is not a power of two")));
        }
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        for o in [off.producer, off.consumer, off.flags] {
            if o as usize + 4 > off.desc as usize || !o.is_multiple_of(4) {
                return Err(io::Error::other(format!("kernel reported an unexpected ring layout {off:?}")));
            }
        }
        let base = sys::mmap_socket(fd, len, pgoff)?;
        let map = Mapping { base, len };
        // SAFETY: every offset was checked above to lie inside the mapping
        // (before `desc`, 4-byte aligned) and the mapping is page aligned;
        // the descriptor array starts at `desc` and holds `size` entries,
        // which is how `len` was computed.
        let (producer, consumer, flags, descs) = unsafe {
            (
                base.add(off.producer as usize) as *const AtomicU32,
                base.add(off.consumer as usize) as *const AtomicU32,
                base.add(off.flags as usize) as *const AtomicU32,
                base.add(off.desc as usize) as *mut T,
            )
        };
        let mut ring =
            Ring { _map: map, producer, consumer, flags, descs, mask: size - 1, size, cached_prod: 0, cached_cons: 0 };
        ring.cached_prod = ring.prod().load(Ordering::Relaxed);
        ring.cached_cons = ring.cons().load(Ordering::Relaxed);
        if producer_side {
            ring.cached_cons = ring.cached_cons.wrapping_add(size);
        }
        Ok(ring)
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping owned by self (see `map`);
        // AtomicU32 has the layout of the kernel's u32 index.
        unsafe { &*self.producer }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as in `prod`.
        unsafe { &*self.consumer }
    }

    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// The kernel asks to be woken up (XDP_RING_NEED_WAKEUP).
    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: as in `prod`.
        let flags = unsafe { &*self.flags };
        flags.load(Ordering::Relaxed) & 1 != 0
    }

    // ---- producer side (fill, tx) ----

    /// Free slots, at least `want` if possible (refreshes the cache only
    /// when it shows fewer).
    #[inline]
    pub(crate) fn prod_free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        self.cached_cons = self.cons().load(Ordering::Acquire).wrapping_add(self.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Writes entry `i` (0-based) past the reserved producer position.
    /// The caller made sure `i < prod_free()`.
    #[inline]
    pub(crate) fn prod_write(&mut self, i: u32, v: T) {
        let slot = self.cached_prod.wrapping_add(i) & self.mask;
        // SAFETY: slot <= mask < size, inside the descriptor array; the
        // slot is free (between the consumer and the producer + free space),
        // so the kernel does not read it until we publish it.
        unsafe { self.descs.add(slot as usize).write_volatile(v) }
    }

    /// Publishes `n` written entries to the kernel.
    #[inline]
    pub(crate) fn prod_submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.prod().store(self.cached_prod, Ordering::Release);
    }

    /// Entries published but not yet consumed by the kernel.
    pub(crate) fn prod_outstanding(&self) -> u32 {
        self.cached_prod.wrapping_sub(self.cons().load(Ordering::Acquire))
    }

    // ---- consumer side (rx, completion) ----

    /// Entries ready to read, at most `max`.
    #[inline]
    pub(crate) fn cons_avail(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            self.cached_prod = self.prod().load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(max)
    }

    /// Reads entry `i` past the consumer position; `i < cons_avail()`.
    #[inline]
    pub(crate) fn cons_read(&self, i: u32) -> T {
        let slot = self.cached_cons.wrapping_add(i) & self.mask;
        // SAFETY: slot < size, inside the descriptor array; the kernel
        // published it (Acquire load in `cons_avail`) and will not reuse it
        // until we release it.
        unsafe { self.descs.add(slot as usize).read_volatile() }
    }

    /// Gives `n` read entries back to the kernel.
    #[inline]
    pub(crate) fn cons_release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.cons().store(self.cached_cons, Ordering::Release);
    }
}
