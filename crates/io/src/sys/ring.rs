//! Memory shared with the kernel through a packet socket's mmap'd rings.
//!
//! The kernel and this process hand slots (V2 frames, V3 blocks) back and
//! forth through a 32-bit status word in each slot: the side that does not
//! own a slot never touches its other bytes. So the protocol is: load the
//! status with `Acquire` (the kernel's writes to the slot are then visible),
//! copy what we need out of (or into) the slot, store the new status with
//! `Release`. All accesses go through offsets that are checked against the
//! mapping; the only Rust references into ring memory are `&AtomicU32` to
//! status words (interior mutability), so the kernel's concurrent writes to
//! slots it owns never alias a plain reference.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) struct MmapRing {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value and only accessed through it;
// the kernel side is synchronised by the status-word protocol, not by the
// thread that happens to own the value.
unsafe impl Send for MmapRing {}

impl MmapRing {
    /// Maps `len` bytes of the rings configured on `fd` (RX ring first, then
    /// TX ring, as the kernel lays them out).
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize) -> io::Result<MmapRing> {
        // SAFETY: a fresh shared mapping of the socket's ring; no existing
        // memory is affected and the result is checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(MmapRing { base, len })
    }

    fn atomic(&self, off: usize) -> Option<&AtomicU32> {
        if !off.is_multiple_of(4) || off.checked_add(4)? > self.len {
            return None;
        }
        // SAFETY: `off` is 4-aligned (the mapping is page-aligned) and the 4
        // bytes lie inside the mapping, which lives as long as `self`. The
        // word is a slot status the kernel also accesses with barriers
        // (smp_wmb/READ_ONCE); we only ever access it atomically.
        Some(unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off).cast::<u32>()) })
    }

    /// Loads a status word (Acquire). `None` for an offset outside the ring.
    #[inline]
    pub(crate) fn load_status(&self, off: usize) -> Option<u32> {
        self.atomic(off).map(|a| a.load(Ordering::Acquire))
    }

    /// Stores a status word (Release): gives the slot back to the kernel
    /// after every read of it has completed. False when out of range.
    #[inline]
    pub(crate) fn store_status(&self, off: usize, v: u32) -> bool {
        self.atomic(off).map(|a| a.store(v, Ordering::Release)).is_some()
    }

    /// Copies `dst.len()` bytes at `off` out of the ring. False (and nothing
    /// copied) when the range is outside the ring.
    #[inline]
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> bool {
        if off.checked_add(dst.len()).is_none_or(|end| end > self.len) {
            return false;
        }
        // SAFETY: the source range is inside the mapping; `dst` is a distinct
        // Rust buffer. Callers only read slots whose status they loaded as
        // user-owned, so the kernel is not writing them concurrently.
        unsafe { std::ptr::copy_nonoverlapping(self.base.as_ptr().add(off), dst.as_mut_ptr(), dst.len()) };
        true
    }

    /// Copies `src` into the ring at `off`. False when out of range.
    #[inline]
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> bool {
        if off.checked_add(src.len()).is_none_or(|end| end > self.len) {
            return false;
        }
        // SAFETY: the destination range is inside the mapping; callers only
        // write slots they own (status says so), and the status store that
        // hands the slot to the kernel comes after (Release).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.as_ptr().add(off), src.len()) };
        true
    }
}

impl Drop for MmapRing {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly the mapping created in `map`, and no
        // pointer into it outlives `self`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}
