//! The buffer pool: frames, their metadata and a free list.

use crate::meta::Meta;
use crate::region::Region;
use crate::{DEFAULT_FRAME_SIZE, DEFAULT_HEADROOM, PktIdx};
use std::fmt;

/// How to build a pool.
#[derive(Clone, Copy, Debug)]
pub struct PoolConfig {
    /// Number of frames.
    pub frames: u32,
    /// Bytes per frame (power of two, 2048 or 4096 for AF_XDP).
    pub frame_size: u32,
    /// Bytes reserved in front of received data for encapsulations.
    pub headroom: u16,
    /// Back the pool with huge pages (falls back to normal pages if refused).
    pub hugepages: bool,
    /// Put frames one cache line more than `frame_size` apart. With frames
    /// at multiples of 2048 bytes every packet's headers fall into the same
    /// two sets of the L1 data cache (address bits 6-11), so a node walking a
    /// batch of 256 headers misses on each one (callgrind's cache model:
    /// 5.3 L1 misses per packet of plain forwarding, 0.56 with the padding).
    /// An AF_XDP UMEM needs frames at multiples of their size (aligned
    /// chunks), so a pool shared with AF_XDP sockets must leave this off.
    pub pad_frames: bool,
}

/// The padding of [`PoolConfig::pad_frames`]: one cache line.
pub const FRAME_PAD: u32 = 64;

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            frames: 8192,
            frame_size: DEFAULT_FRAME_SIZE,
            headroom: DEFAULT_HEADROOM,
            hugepages: false,
            pad_frames: false,
        }
    }
}

#[derive(Debug)]
pub enum PoolError {
    BadConfig(String),
    Io(std::io::Error),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::BadConfig(s) => write!(f, "bad packet pool configuration: {s}"),
            PoolError::Io(e) => write!(f, "cannot map packet pool: {e}"),
        }
    }
}

impl std::error::Error for PoolError {}

/// A worker's packet buffers.
pub struct PacketPool {
    region: Region,
    frame_size: u32,
    headroom: u16,
    free: Vec<PktIdx>,
    /// Debug builds track which frames are free to catch double frees.
    #[cfg(debug_assertions)]
    is_free: Vec<bool>,
}

impl PacketPool {
    pub fn new(cfg: PoolConfig) -> Result<PacketPool, PoolError> {
        if !cfg.frame_size.is_power_of_two() || !(1024..=65536).contains(&cfg.frame_size) {
            return Err(PoolError::BadConfig(format!(
                "frame size {} is not a power of two in 1024..=65536",
                cfg.frame_size
            )));
        }
        if u32::from(cfg.headroom) + 256 > cfg.frame_size {
            return Err(PoolError::BadConfig(format!(
                "headroom {} leaves less than 256 data bytes in a {}-byte frame",
                cfg.headroom, cfg.frame_size
            )));
        }
        if cfg.frames == 0 || cfg.frames > (1 << 24) {
            return Err(PoolError::BadConfig(format!("{} frames: need 1..=16777216", cfg.frames)));
        }
        let stride = cfg.frame_size as usize + if cfg.pad_frames { FRAME_PAD as usize } else { 0 };
        let region = match Region::new(cfg.frames as usize, cfg.frame_size as usize, stride, cfg.hugepages) {
            Ok(r) => r,
            Err(_) if cfg.hugepages => {
                Region::new(cfg.frames as usize, cfg.frame_size as usize, stride, false).map_err(PoolError::Io)?
            }
            Err(e) => return Err(PoolError::Io(e)),
        };
        let n = region.frames();
        // Hand out low indices first: they are touched first and stay warm.
        let free: Vec<PktIdx> = (0..n as u32).rev().collect();
        Ok(PacketPool {
            region,
            frame_size: cfg.frame_size,
            headroom: cfg.headroom,
            free,
            #[cfg(debug_assertions)]
            is_free: vec![true; n],
        })
    }

    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }
    pub fn headroom(&self) -> u16 {
        self.headroom
    }
    pub fn capacity(&self) -> u32 {
        self.region.frames() as u32
    }
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Base address and length of the region (AF_XDP UMEM registration).
    pub fn raw_region(&self) -> (*mut u8, usize) {
        self.region.raw()
    }

    /// Bytes from one frame's start to the next: the frame size, plus
    /// [`FRAME_PAD`] in a padded pool (which cannot be an AF_XDP UMEM).
    pub fn frame_stride(&self) -> u32 {
        self.region.stride() as u32
    }

    /// Byte offset of a frame in the region (its AF_XDP address).
    #[inline]
    pub fn frame_addr(&self, idx: PktIdx) -> u64 {
        u64::from(idx) * self.region.stride() as u64
    }

    /// Splits a region byte offset into (frame index, offset in frame);
    /// None past the last frame or in a padded pool's gap between frames.
    #[inline]
    pub fn split_addr(&self, addr: u64) -> Option<(PktIdx, u16)> {
        let stride = self.region.stride() as u64;
        let idx = addr / stride;
        let off = addr % stride;
        (idx < u64::from(self.capacity()) && off < u64::from(self.frame_size)).then_some((idx as u32, off as u16))
    }

    /// Takes a buffer. Its metadata is reset and its data is empty, starting
    /// after the headroom.
    #[inline]
    pub fn alloc(&mut self) -> Option<PktIdx> {
        let idx = self.free.pop()?;
        #[cfg(debug_assertions)]
        {
            debug_assert!(self.is_free[idx as usize], "allocating frame {idx} that is not free");
            self.is_free[idx as usize] = false;
        }
        self.region.metas_mut()[idx as usize] = Meta { off: self.headroom, ..Meta::default() };
        Some(idx)
    }

    /// Takes a buffer whose data is `len` bytes after the headroom, for a
    /// driver about to fill them (they hold whatever the frame held). Its
    /// metadata is reset in one write. `None` when no buffer is free or
    /// `len` bytes do not fit after the headroom.
    #[inline]
    pub fn alloc_len(&mut self, len: usize) -> Option<PktIdx> {
        if usize::from(self.headroom) + len > self.frame_size as usize {
            return None;
        }
        let idx = self.free.pop()?;
        #[cfg(debug_assertions)]
        {
            debug_assert!(self.is_free[idx as usize], "allocating frame {idx} that is not free");
            self.is_free[idx as usize] = false;
        }
        self.region.metas_mut()[idx as usize] = Meta { off: self.headroom, len: len as u16, ..Meta::default() };
        Some(idx)
    }

    /// Takes up to `n` buffers, appending their indices to `out`. Returns how
    /// many it took.
    pub fn alloc_into(&mut self, out: &mut Vec<PktIdx>, n: usize) -> usize {
        let mut got = 0;
        while got < n {
            match self.alloc() {
                Some(i) => out.push(i),
                None => break,
            }
            got += 1;
        }
        got
    }

    /// Takes a buffer without resetting its metadata (drivers that fill the
    /// metadata themselves, AF_XDP fill rings).
    #[inline]
    pub fn alloc_raw(&mut self) -> Option<PktIdx> {
        let idx = self.free.pop()?;
        #[cfg(debug_assertions)]
        {
            debug_assert!(self.is_free[idx as usize], "allocating frame {idx} that is not free");
            self.is_free[idx as usize] = false;
        }
        Some(idx)
    }

    /// Returns a buffer to the pool.
    #[inline]
    pub fn free(&mut self, idx: PktIdx) {
        debug_assert!((idx as usize) < self.region.frames());
        #[cfg(debug_assertions)]
        {
            assert!(!self.is_free[idx as usize], "double free of frame {idx}");
            self.is_free[idx as usize] = true;
        }
        self.free.push(idx);
    }

    pub fn free_all(&mut self, idxs: &[PktIdx]) {
        for &i in idxs {
            self.free(i);
        }
    }

    #[inline]
    pub fn meta(&self, idx: PktIdx) -> &Meta {
        &self.region.metas()[idx as usize]
    }

    #[inline]
    pub fn meta_mut(&mut self, idx: PktIdx) -> &mut Meta {
        &mut self.region.metas_mut()[idx as usize]
    }

    /// The packet's data bytes.
    #[inline]
    pub fn data(&self, idx: PktIdx) -> &[u8] {
        let (m, f) = self.region.meta_frame(idx as usize);
        let (off, len) = (m.off as usize, m.len as usize);
        &f[off..off + len]
    }

    /// The packet's data bytes, writable.
    #[inline]
    pub fn data_mut(&mut self, idx: PktIdx) -> &mut [u8] {
        let (m, f) = self.region.meta_frame_mut(idx as usize);
        let (off, len) = (m.off as usize, m.len as usize);
        &mut f[off..off + len]
    }

    /// Metadata and data together, both writable.
    #[inline]
    pub fn pkt_mut(&mut self, idx: PktIdx) -> (&mut Meta, &mut [u8]) {
        let (m, f) = self.region.meta_frame_mut(idx as usize);
        let (off, len) = (m.off as usize, m.len as usize);
        (m, &mut f[off..off + len])
    }

    /// Metadata writable, data read-only.
    #[inline]
    pub fn pkt(&mut self, idx: PktIdx) -> (&mut Meta, &[u8]) {
        let (m, f) = self.region.meta_mut_frame(idx as usize);
        let (off, len) = (m.off as usize, m.len as usize);
        (m, &f[off..off + len])
    }

    /// Metadata and the whole frame (headroom included), both writable: for
    /// a node that writes headers in front of the data and then moves the
    /// data's start itself (`Meta::off`, `Meta::len`), with one index check.
    #[inline]
    pub fn meta_frame_mut(&mut self, idx: PktIdx) -> (&mut Meta, &mut [u8]) {
        self.region.meta_frame_mut(idx as usize)
    }

    /// The whole frame (headroom included), for drivers.
    #[inline]
    pub fn frame_mut(&mut self, idx: PktIdx) -> &mut [u8] {
        self.region.frame_mut(idx as usize)
    }

    #[inline]
    pub fn frame(&self, idx: PktIdx) -> &[u8] {
        self.region.frame(idx as usize)
    }

    /// Grows the data by `n` bytes at the front (into the headroom) and
    /// returns the new data. `None` (and no change) when the headroom is too
    /// small.
    #[inline]
    pub fn prepend(&mut self, idx: PktIdx, n: usize) -> Option<&mut [u8]> {
        let (m, f) = self.region.meta_frame_mut(idx as usize);
        let off = (m.off as usize).checked_sub(n)?;
        let len = m.len as usize + n;
        m.off = off as u16;
        m.len = len as u16;
        Some(&mut f[off..off + len])
    }

    /// Removes `n` bytes from the front of the data. False (and no change)
    /// if the packet is shorter than `n`.
    #[inline]
    pub fn advance(&mut self, idx: PktIdx, n: usize) -> bool {
        let m = &mut self.region.metas_mut()[idx as usize];
        if n > m.len as usize {
            return false;
        }
        m.off += n as u16;
        m.len -= n as u16;
        true
    }

    /// Sets the data length (truncate, or grow into the tailroom). False
    /// (and no change) if the frame cannot hold it.
    #[inline]
    pub fn set_len(&mut self, idx: PktIdx, len: usize) -> bool {
        let m = &mut self.region.metas_mut()[idx as usize];
        if m.off as usize + len > self.frame_size as usize {
            return false;
        }
        m.len = len as u16;
        true
    }

    /// Sets where the data starts and how long it is (drivers).
    #[inline]
    pub fn set_data(&mut self, idx: PktIdx, off: u16, len: u16) -> bool {
        if off as usize + len as usize > self.frame_size as usize {
            return false;
        }
        let m = &mut self.region.metas_mut()[idx as usize];
        m.off = off;
        m.len = len;
        true
    }

    /// Copies `bytes` into a new buffer (after the headroom).
    pub fn alloc_from(&mut self, bytes: &[u8]) -> Option<PktIdx> {
        if bytes.len() + self.headroom as usize > self.frame_size as usize {
            return None;
        }
        let idx = self.alloc()?;
        let off = self.headroom as usize;
        self.region.frame_mut(idx as usize)[off..off + bytes.len()].copy_from_slice(bytes);
        self.region.metas_mut()[idx as usize].len = bytes.len() as u16;
        Some(idx)
    }

    /// Duplicates a packet (data and metadata) into a new buffer.
    pub fn clone_pkt(&mut self, src: PktIdx) -> Option<PktIdx> {
        let dst = self.alloc_raw()?;
        let m = self.region.metas()[src as usize];
        let (s, d) = self.region.frame_pair_mut(src as usize, dst as usize);
        let r = m.off as usize..m.off as usize + m.len as usize;
        d[r.clone()].copy_from_slice(&s[r]);
        self.region.metas_mut()[dst as usize] = m;
        Some(dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A padded pool's frames are `frame_size + FRAME_PAD` apart, each one
    /// whole and separate: filling every frame to its last byte leaves the
    /// others intact, addresses split back to (frame, offset), and an
    /// address in the gap between frames is nobody's.
    #[test]
    fn padded_frames_are_a_cache_line_apart_and_separate() {
        for pad in [false, true] {
            let mut p =
                PacketPool::new(PoolConfig { frames: 16, pad_frames: pad, ..PoolConfig::default() }).expect("pool");
            let fs = p.frame_size();
            let stride = fs + if pad { FRAME_PAD } else { 0 };
            assert_eq!(p.frame_stride(), stride);
            assert_eq!(p.raw_region().1, 16 * stride as usize);
            let idx: Vec<PktIdx> = (0..16).map(|_| p.alloc().expect("frame")).collect();
            for &i in &idx {
                p.frame_mut(i).fill(i as u8 + 1);
            }
            for &i in &idx {
                let f = p.frame(i);
                assert_eq!(f.len(), fs as usize);
                assert!(f.iter().all(|&b| b == i as u8 + 1), "frame {i} overwritten (pad {pad})");
                assert_eq!(p.frame_addr(i), u64::from(i) * u64::from(stride));
                assert_eq!(p.split_addr(p.frame_addr(i) + 300), Some((i, 300)));
                assert_eq!(p.split_addr(p.frame_addr(i) + u64::from(fs) - 1), Some((i, fs as u16 - 1)));
            }
            let gap = p.frame_addr(3) + u64::from(fs);
            assert_eq!(p.split_addr(gap), if pad { None } else { Some((4, 0)) });
            assert_eq!(p.split_addr(16 * u64::from(stride)), None);
            p.free(idx[15]);
            p.meta_mut(idx[2]).len = 100;
            let c = p.clone_pkt(idx[2]).expect("clone");
            assert_eq!(p.data(c), &[3u8; 100][..]);
        }
    }

    fn pool(frames: u32) -> PacketPool {
        PacketPool::new(PoolConfig { frames, ..PoolConfig::default() }).expect("pool")
    }

    #[test]
    fn alloc_until_empty_then_free() {
        let mut p = pool(4);
        let a: Vec<_> = (0..4).map(|_| p.alloc().expect("frame")).collect();
        assert!(p.alloc().is_none());
        assert_eq!(p.available(), 0);
        p.free_all(&a);
        assert_eq!(p.available(), 4);
    }

    #[test]
    fn prepend_uses_headroom_and_refuses_beyond() {
        let mut p = pool(2);
        let i = p.alloc_from(&[1, 2, 3]).expect("buf");
        let d = p.prepend(i, 4).expect("room");
        assert_eq!(d.len(), 7);
        d[..4].copy_from_slice(&[9, 9, 9, 9]);
        assert_eq!(p.data(i), &[9, 9, 9, 9, 1, 2, 3]);
        assert!(p.prepend(i, DEFAULT_HEADROOM as usize).is_none());
        assert_eq!(p.data(i).len(), 7, "a refused prepend changes nothing");
        assert!(p.advance(i, 4));
        assert_eq!(p.data(i), &[1, 2, 3]);
        assert!(!p.advance(i, 4));
    }

    #[test]
    fn meta_frame_writes_in_front_and_moves_the_start() {
        let mut p = pool(2);
        let i = p.alloc_from(&[1, 2, 3]).expect("buf");
        let (m, f) = p.meta_frame_mut(i);
        assert_eq!(f.len(), DEFAULT_FRAME_SIZE as usize, "the whole frame");
        let off = usize::from(m.off);
        f[off - 2..off].copy_from_slice(&[7, 8]);
        m.off -= 2;
        m.len += 2;
        assert_eq!(p.data(i), &[7, 8, 1, 2, 3]);
    }

    #[test]
    fn set_len_bounded_by_frame() {
        let mut p = pool(1);
        let i = p.alloc().expect("buf");
        assert!(p.set_len(i, 100));
        assert!(!p.set_len(i, DEFAULT_FRAME_SIZE as usize));
        assert_eq!(p.data(i).len(), 100);
    }

    #[test]
    fn clone_copies_data_and_meta() {
        let mut p = pool(2);
        let a = p.alloc_from(b"hello").expect("buf");
        p.meta_mut(a).rx_if = 7;
        let b = p.clone_pkt(a).expect("clone");
        assert_ne!(a, b);
        assert_eq!(p.data(b), b"hello");
        assert_eq!(p.meta(b).rx_if, 7);
    }

    #[test]
    fn addresses_round_trip() {
        let p = pool(8);
        let addr = p.frame_addr(5) + 300;
        assert_eq!(p.split_addr(addr), Some((5, 300)));
        assert_eq!(p.split_addr(p.frame_addr(8)), None);
    }

    #[test]
    fn bad_configs_are_refused() {
        assert!(PacketPool::new(PoolConfig { frame_size: 3000, ..PoolConfig::default() }).is_err());
        assert!(PacketPool::new(PoolConfig { frames: 0, ..PoolConfig::default() }).is_err());
        assert!(PacketPool::new(PoolConfig { headroom: 2000, ..PoolConfig::default() }).is_err());
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "double free")]
    fn double_free_caught_in_debug() {
        let mut p = pool(2);
        let a = p.alloc().expect("buf");
        p.free(a);
        p.free(a);
    }
}
