//! A worker's [`PacketPool`] registered as one AF_XDP UMEM, shared by all of
//! that worker's ports.
//!
//! The kernel ties a UMEM to the socket it was registered on, and a second
//! socket can only join it through a *bound* socket that already uses it
//! (`XDP_SHARED_UMEM` + `sxdp_shared_umem_fd`). So [`Umem`] keeps the
//! registration socket until the first port claims and binds it, then
//! remembers the live ports' sockets to offer one of them to the next port.
//! When every port has closed the kernel has dropped the registration; the
//! next open registers the same memory again. The lock is taken only while
//! opening and closing ports, never on the packet path.

use crate::error::XdpError;
use crate::sys;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tern_packet::PacketPool;

/// Space the kernel keeps in front of received data (XDP_PACKET_HEADROOM).
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// A pool's memory registered as an AF_XDP UMEM. Cheap to clone; every
/// clone names the same registration.
#[derive(Clone)]
pub struct Umem {
    shared: Arc<Shared>,
}

struct Shared {
    base: usize,
    len: usize,
    frame_size: u32,
    frames: u32,
    headroom: u32,
    sockets: Mutex<Sockets>,
    /// `Sockets::orphans` is not empty (one relaxed load per refill).
    orphans_pending: AtomicBool,
}

#[derive(Default)]
pub(crate) struct Sockets {
    /// The registration socket, not yet bound by a port.
    unclaimed: Option<OwnedFd>,
    /// Bound ports: (port id, socket).
    bound: Vec<(u64, RawFd)>,
    next_id: u64,
    /// Frames a copy-mode port still had lent when it was dropped without
    /// [`crate::XskPort::close`] (a worker replacing the port of a device
    /// that went away): the kernel let go of them with the socket; the
    /// next refill of a port on this UMEM, on the pool's thread, frees
    /// them into the pool.
    orphans: Vec<u32>,
}

/// How a port joins the UMEM.
pub(crate) enum Claim {
    /// This socket registered the UMEM: bind it plainly.
    Owner(OwnedFd),
    /// A new socket that must bind with XDP_SHARED_UMEM through `via`.
    Shared { fd: OwnedFd, via: RawFd },
}

impl Umem {
    /// Registers `pool`'s region. The pool must outlive every port opened on
    /// this UMEM and be the pool passed to their bursts (checked per burst).
    pub fn new(pool: &PacketPool) -> Result<Umem, XdpError> {
        let fs = pool.frame_size();
        if fs != 2048 && fs != 4096 {
            return Err(XdpError::Config(format!("AF_XDP needs 2048- or 4096-byte frames, the pool has {fs}")));
        }
        if pool.frame_stride() != fs {
            return Err(XdpError::Config(format!(
                "AF_XDP needs frames at multiples of their size; the pool's are {} bytes apart (padded)",
                pool.frame_stride()
            )));
        }
        let (base, len) = pool.raw_region();
        // The kernel puts data at XDP_PACKET_HEADROOM + UMEM headroom; ask for
        // the rest of the pool's headroom so that received data starts where
        // the pool expects it.
        let headroom = u32::from(pool.headroom()).saturating_sub(XDP_PACKET_HEADROOM);
        let umem = Umem {
            shared: Arc::new(Shared {
                base: base as usize,
                len,
                frame_size: fs,
                frames: pool.capacity(),
                headroom,
                sockets: Mutex::new(Sockets::default()),
                orphans_pending: AtomicBool::new(false),
            }),
        };
        let fd = umem.register()?;
        umem.lock().unclaimed = Some(fd);
        Ok(umem)
    }

    fn register(&self) -> Result<OwnedFd, XdpError> {
        let fd = sys::xsk_socket().map_err(|e| XdpError::from_errno("socket(AF_XDP)", e))?;
        let reg = sys::UmemReg {
            addr: self.shared.base as u64,
            len: self.shared.len as u64,
            chunk_size: self.shared.frame_size,
            headroom: self.shared.headroom,
            flags: 0,
            tx_metadata_len: 0,
        };
        sys::setsockopt_umem_reg(fd.as_raw_fd(), &reg).map_err(|e| XdpError::from_errno("XDP_UMEM_REG", e))?;
        Ok(fd)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Sockets> {
        // A panic while holding the lock leaves the lists consistent (every
        // update is a single push/remove), so a poisoned lock is usable.
        self.shared.sockets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Picks how the next port joins; the caller keeps `guard` until its
    /// bind is done so that the socket it joins through stays open.
    pub(crate) fn claim(&self, guard: &mut Sockets) -> Result<Claim, XdpError> {
        if let Some(fd) = guard.unclaimed.take() {
            return Ok(Claim::Owner(fd));
        }
        if let Some(&(_, via)) = guard.bound.first() {
            let fd = sys::xsk_socket().map_err(|e| XdpError::from_errno("socket(AF_XDP)", e))?;
            return Ok(Claim::Shared { fd, via });
        }
        // Every port closed: the kernel released the UMEM with the last one.
        Ok(Claim::Owner(self.register()?))
    }

    pub(crate) fn add_bound(guard: &mut Sockets, fd: RawFd) -> u64 {
        let id = guard.next_id;
        guard.next_id += 1;
        guard.bound.push((id, fd));
        id
    }

    pub(crate) fn remove_bound(&self, id: u64) {
        self.lock().bound.retain(|&(i, _)| i != id);
    }

    /// Hands the frames of a dropped copy-mode port to the next refill.
    pub(crate) fn orphan(&self, frames: impl IntoIterator<Item = u32>) {
        let mut g = self.lock();
        let before = g.orphans.len();
        g.orphans.extend(frames);
        if g.orphans.len() > before {
            self.shared.orphans_pending.store(true, Ordering::Release);
        }
    }

    /// Takes the orphaned frames, if any (a relaxed load when there are none).
    #[inline]
    pub(crate) fn take_orphans(&self) -> Option<Vec<u32>> {
        if !self.shared.orphans_pending.load(Ordering::Relaxed) {
            return None;
        }
        let mut g = self.lock();
        self.shared.orphans_pending.store(false, Ordering::Relaxed);
        Some(std::mem::take(&mut g.orphans))
    }

    /// Number of ports currently bound to this UMEM.
    pub fn ports(&self) -> usize {
        self.lock().bound.len()
    }

    /// True if both handles name the same registration.
    pub fn same_as(&self, other: &Umem) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// True if `pool` is the pool this UMEM was registered from.
    #[inline]
    pub fn matches(&self, pool: &PacketPool) -> bool {
        pool.raw_region().0 as usize == self.shared.base && pool.frame_size() == self.shared.frame_size
    }

    pub fn frame_size(&self) -> u32 {
        self.shared.frame_size
    }

    pub fn frames(&self) -> u32 {
        self.shared.frames
    }

    /// Offset of received data in a frame.
    pub fn rx_data_offset(&self) -> u32 {
        XDP_PACKET_HEADROOM + self.shared.headroom
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_packet::PoolConfig;

    /// A padded pool cannot be a UMEM: the refusal comes before any socket
    /// is made, with the reason.
    #[test]
    fn a_padded_pool_is_refused() {
        let pool = PacketPool::new(PoolConfig { frames: 64, pad_frames: true, ..PoolConfig::default() }).expect("pool");
        match Umem::new(&pool) {
            Err(XdpError::Config(m)) => assert!(m.contains("padded"), "{m}"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("a padded pool was taken as a UMEM"),
        }
    }
}
