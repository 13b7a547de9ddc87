//! The memory region behind a pool. All unsafe code of this crate is here.
#![allow(unsafe_code)]

use crate::meta::Meta;
use std::io;
use std::ptr::NonNull;

/// An anonymous, page-aligned, zero-filled memory mapping of `frames`
/// frames of `frame_size` bytes each, `stride` bytes apart (`frame_size`,
/// or more to spread frames over the cache's sets), and the frames'
/// metadata, one entry per frame: indexing the metadata checks the frame
/// index too, so a packet's metadata and frame cost one check.
pub(crate) struct Region {
    base: NonNull<u8>,
    len: usize,
    frame_size: usize,
    stride: usize,
    /// One entry per frame, never resized: `meta.len()` is the number of
    /// frames, which the unsafe blocks below rely on.
    meta: Box<[Meta]>,
}

// SAFETY: the region is plain memory owned by this value; moving it to
// another thread moves ownership (the pool is used by one worker at a time).
unsafe impl Send for Region {}

impl Region {
    pub(crate) fn new(frames: usize, frame_size: usize, stride: usize, hugepages: bool) -> io::Result<Region> {
        if stride < frame_size {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "frame stride below the frame size"));
        }
        let len = frames
            .checked_mul(stride)
            .filter(|l| *l > 0)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty or oversized pool"))?;
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        if hugepages {
            flags |= libc::MAP_HUGETLB;
        }
        // SAFETY: an anonymous mapping with no address hint touches no
        // existing memory; the result is checked for MAP_FAILED below.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Region { base, len, frame_size, stride, meta: vec![Meta::default(); frames].into_boxed_slice() })
    }

    pub(crate) fn frames(&self) -> usize {
        self.meta.len()
    }

    /// Every frame's metadata (a slice: its length cannot change).
    #[inline]
    pub(crate) fn metas(&self) -> &[Meta] {
        &self.meta
    }

    #[inline]
    pub(crate) fn metas_mut(&mut self) -> &mut [Meta] {
        &mut self.meta
    }

    /// Frame `idx`'s metadata and the whole frame, with one index check.
    #[inline]
    pub(crate) fn meta_frame(&self, idx: usize) -> (&Meta, &[u8]) {
        let m = &self.meta[idx];
        // SAFETY: indexing `meta` checked idx < meta.len(), the number of
        // frames (see `frame`); shared access through &self.
        (m, unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(idx * self.stride), self.frame_size) })
    }

    /// Frame `idx`'s metadata writable and the whole frame read-only.
    #[inline]
    pub(crate) fn meta_mut_frame(&mut self, idx: usize) -> (&mut Meta, &[u8]) {
        let m = &mut self.meta[idx];
        // SAFETY: as in `meta_frame`; the frame bytes and the metadata are
        // separate memory, and &mut self excludes every other borrow.
        (m, unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(idx * self.stride), self.frame_size) })
    }

    /// Frame `idx`'s metadata and the whole frame, both writable.
    #[inline]
    pub(crate) fn meta_frame_mut(&mut self, idx: usize) -> (&mut Meta, &mut [u8]) {
        let m = &mut self.meta[idx];
        // SAFETY: as in `meta_mut_frame`.
        (m, unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(idx * self.stride), self.frame_size) })
    }

    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    /// Base address and length, for registering the region as an AF_XDP UMEM.
    pub(crate) fn raw(&self) -> (*mut u8, usize) {
        (self.base.as_ptr(), self.len)
    }

    /// The whole frame `idx`.
    #[inline]
    pub(crate) fn frame(&self, idx: usize) -> &[u8] {
        assert!(idx < self.meta.len(), "frame index {idx} out of range");
        // SAFETY: idx < frames (meta.len()) and frame_size <= stride, so
        // [idx*stride, idx*stride + frame_size) lies inside the mapping, which lives as long as `self`. Shared access
        // through &self cannot alias a &mut handed out by `frame_mut`.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(idx * self.stride), self.frame_size) }
    }

    /// The whole frame `idx`, writable.
    #[inline]
    pub(crate) fn frame_mut(&mut self, idx: usize) -> &mut [u8] {
        assert!(idx < self.meta.len(), "frame index {idx} out of range");
        // SAFETY: as in `frame`; &mut self guarantees no other slice of the
        // region is alive.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(idx * self.stride), self.frame_size) }
    }

    /// Two different frames at once (copying between packets).
    pub(crate) fn frame_pair_mut(&mut self, a: usize, b: usize) -> (&mut [u8], &mut [u8]) {
        let frames = self.meta.len();
        assert!(a < frames && b < frames && a != b, "bad frame pair {a},{b}");
        let (fs, st) = (self.frame_size, self.stride);
        let base = self.base.as_ptr();
        // SAFETY: a != b, both are in range and fs <= st, so the two
        // slices are disjoint parts of the mapping; &mut self excludes other borrows.
        unsafe {
            (std::slice::from_raw_parts_mut(base.add(a * st), fs), std::slice::from_raw_parts_mut(base.add(b * st), fs))
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: base/len describe exactly the mapping created in `new`,
        // and no slice into it outlives `self`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}
