//! The two system facilities the FIB mirror needs beyond aya: BPF array
//! maps mapped into this process (`BPF_F_MMAPABLE`), so that entries are
//! written with single atomic stores exactly as tern-fib writes its own
//! arrays, and a kernel RCU grace period (`membarrier(2)`
//! `MEMBARRIER_CMD_GLOBAL`), after which no XDP program still runs with a
//! value it read before.
//!
//! Also the generic netlink socket the XDP-feature query uses. All unsafe
//! code of the lane is in this file, each block with its `// SAFETY:`
//! comment.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64};

/// A BPF array map mapped read-write into this process. The kernel and
/// every XDP program using the map see the same memory.
pub(crate) struct MappedArray {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; access
// goes through atomics only (`u16s`, `u32s`, `u64s`), so sharing or sending it
// between threads cannot cause a data race.
unsafe impl Send for MappedArray {}
// SAFETY: as above: only atomic accesses are handed out.
unsafe impl Sync for MappedArray {}

impl MappedArray {
    /// Maps the first `len` bytes of the mmapable array map `fd`.
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize) -> io::Result<MappedArray> {
        if len == 0 || !len.is_multiple_of(8) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "mapped length must be a non-zero multiple of 8"));
        }
        // SAFETY: a fresh shared mapping of a file descriptor we borrow for
        // the duration of the call; the kernel validates the length against
        // the map (EINVAL beyond it) and keeps the map alive as long as the
        // mapping exists, whatever happens to the descriptor.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(MappedArray { ptr, len })
    }

    /// The mapping as 16-bit words (the IPv4 FIB's entries).
    pub(crate) fn u16s(&self) -> &[AtomicU16] {
        // SAFETY: as for `u32s`: AtomicU16 has the size and alignment of
        // u16, every bit pattern is valid, the mapping is page-aligned.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<AtomicU16>(), self.len / 2) }
    }

    /// The mapping as 32-bit words.
    pub(crate) fn u32s(&self) -> &[AtomicU32] {
        // SAFETY: the mapping is page-aligned, `len` bytes long and lives
        // as long as `self`; AtomicU32 has the size and alignment of u32
        // and every bit pattern is valid; all accesses (ours and the BPF
        // program's) are single aligned loads and stores.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<AtomicU32>(), self.len / 4) }
    }

    /// The mapping as 64-bit words.
    pub(crate) fn u64s(&self) -> &[AtomicU64] {
        // SAFETY: as for `u32s`; `len` is a multiple of 8 (checked in `map`)
        // and the mapping is page-aligned.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<AtomicU64>(), self.len / 8) }
    }
}

impl Drop for MappedArray {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region `map` created; no reference into
        // it outlives `self` (slices borrow `self`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// A generic netlink socket (the `netdev` family's XDP features).
pub(crate) fn genl_socket() -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_GENERIC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by a successful socket(2) call and is
    // owned by nobody else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
const MEMBARRIER_CMD_GLOBAL: libc::c_long = 1;

/// Waits for a kernel RCU grace period: every XDP program that was running
/// when this was called has finished (XDP runs inside an RCU read-side
/// section; `MEMBARRIER_CMD_GLOBAL` is `synchronize_rcu()`).
pub(crate) fn kernel_grace_period() -> io::Result<()> {
    // SAFETY: membarrier(2) takes two integers and touches no memory of
    // ours.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0 as libc::c_long) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Whether [`kernel_grace_period`] works here (not on nohz_full kernels).
pub(crate) fn grace_period_available() -> bool {
    // SAFETY: as above.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_QUERY, 0 as libc::c_long) };
    r >= 0 && (r & MEMBARRIER_CMD_GLOBAL) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_period_returns() {
        if grace_period_available() {
            kernel_grace_period().expect("membarrier");
        }
    }
}
