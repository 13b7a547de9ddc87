//! AF_PACKET sockets: creation, options, binding, batched sends.

use super::cvt;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Plain-data socket option values: `repr(C)` structs of integers with no
/// padding, so passing their bytes to the kernel reads no uninitialised
/// memory and any bytes the kernel writes back form a valid value.
pub(crate) trait SockOpt: Copy {}
impl SockOpt for libc::c_int {}
impl SockOpt for libc::tpacket_req {}
impl SockOpt for libc::tpacket_req3 {}
impl SockOpt for libc::packet_mreq {}
impl SockOpt for libc::tpacket_stats_v3 {}

/// A raw AF_PACKET socket that receives nothing until bound (protocol 0),
/// non-blocking, close-on-exec.
pub(crate) fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; the result is checked.
    let fd =
        cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a descriptor socket(2) just created; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A datagram socket used only as a handle for interface ioctls.
pub(crate) fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; the result is checked.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) }).or_else(|_| {
        // SAFETY: as above; a kernel without IPv4 still has AF_PACKET.
        cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })
    })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn setsockopt<T: SockOpt>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    val: &T,
) -> io::Result<()> {
    // SAFETY: `val` points to size_of::<T>() readable bytes of plain data
    // (SockOpt); the kernel only reads them during the call.
    cvt(unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, name, (val as *const T).cast(), size_of::<T>() as libc::socklen_t)
    })
    .map(drop)
}

/// Reads an option; the kernel may fill fewer bytes than `T` (the rest stay
/// as in `init`).
pub(crate) fn getsockopt<T: SockOpt>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    init: T,
) -> io::Result<T> {
    let mut val = init;
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is a valid, writable T of `len` bytes; any byte pattern
    // is a valid T (SockOpt), and the kernel writes at most `len` bytes.
    cvt(unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, (&mut val as *mut T).cast(), &mut len) })?;
    Ok(val)
}

/// Binds a packet socket to an interface and an ethertype (host order).
pub(crate) fn bind_packet(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain integers; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a valid sockaddr_ll and the length passed is its size.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Sends nothing: asks the kernel to transmit the frames marked in the TX
/// ring. Returns the bytes the kernel reports as queued.
pub(crate) fn kick(fd: BorrowedFd<'_>) -> io::Result<usize> {
    // SAFETY: a zero-length send with a null buffer reads no memory.
    let r = unsafe { libc::send(fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r as usize) }
}

/// Sends one frame (no ring, no batching); used by tests and slow paths.
pub(crate) fn send(fd: BorrowedFd<'_>, frame: &[u8]) -> io::Result<usize> {
    // SAFETY: `frame` is readable for its length during the call.
    let r = unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), libc::MSG_DONTWAIT) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r as usize) }
}

/// Reusable message headers for sendmmsg(2). Pointers in them are rebuilt
/// on each call from the slices given to [`MmsgScratch::send`] and are never
/// read after it returns.
pub(crate) struct MmsgScratch {
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
    cap: usize,
}

// SAFETY: the raw pointers inside are scratch values written and consumed
// within one `send` call; between calls they dangle harmlessly and are
// never dereferenced, so moving the scratch to another thread is sound.
unsafe impl Send for MmsgScratch {}

impl MmsgScratch {
    pub(crate) fn new(cap: usize) -> MmsgScratch {
        MmsgScratch { iov: Vec::with_capacity(cap), hdr: Vec::with_capacity(cap), cap }
    }

    /// Sends up to `cap` frames from `frames` with one sendmmsg(2), without
    /// blocking. Returns how many the kernel took (it stops at the first
    /// frame it refuses; the error of a refusal after the first frame is
    /// only seen on the next call, starting at that frame).
    pub(crate) fn send<'a>(&mut self, fd: BorrowedFd<'_>, frames: impl Iterator<Item = &'a [u8]>) -> io::Result<usize> {
        self.iov.clear();
        self.hdr.clear();
        for f in frames.take(self.cap) {
            self.iov.push(libc::iovec { iov_base: f.as_ptr() as *mut libc::c_void, iov_len: f.len() });
        }
        if self.iov.is_empty() {
            return Ok(0);
        }
        // `iov` is complete and is not pushed to again below, so pointers
        // into it stay valid for the call.
        for iov in self.iov.iter_mut() {
            // SAFETY: msghdr/mmsghdr are plain C structs; zero is valid.
            let mut h: libc::mmsghdr = unsafe { zeroed() };
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            self.hdr.push(h);
        }
        // SAFETY: `hdr` holds iov.len() initialised headers, each pointing to
        // one iovec that points to a frame slice borrowed for 'a, which
        // outlives this call; the kernel only reads the frames and writes
        // each header's msg_len.
        let r = unsafe {
            libc::sendmmsg(fd.as_raw_fd(), self.hdr.as_mut_ptr(), self.hdr.len() as libc::c_uint, libc::MSG_DONTWAIT)
        };
        if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r as usize) }
    }
}
