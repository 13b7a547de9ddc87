//! Thin wrappers over the system calls the driver needs: AF_XDP sockets and
//! their options, UDP helper sockets, netlink sockets, poll and setns.
//!
//! Every unsafe block of the crate that is not about ring memory lives here.
//! Each function takes and returns plain Rust values, so the rest of the
//! crate stays safe.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub(crate) const AF_XDP: libc::c_int = 44;
pub(crate) const SOL_XDP: libc::c_int = 283;

pub(crate) const XDP_MMAP_OFFSETS: libc::c_int = 1;
pub(crate) const XDP_RX_RING: libc::c_int = 2;
pub(crate) const XDP_TX_RING: libc::c_int = 3;
pub(crate) const XDP_UMEM_REG: libc::c_int = 4;
pub(crate) const XDP_UMEM_FILL_RING: libc::c_int = 5;
pub(crate) const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
pub(crate) const XDP_STATISTICS: libc::c_int = 7;
pub(crate) const XDP_OPTIONS: libc::c_int = 8;
/// Linux 6.17: how many descriptors one copy-mode sendto may turn into skbs
/// (32 before, and when the option is missing).
pub(crate) const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

pub(crate) const XDP_SHARED_UMEM: u16 = 1 << 0;
pub(crate) const XDP_COPY: u16 = 1 << 1;
pub(crate) const XDP_ZEROCOPY: u16 = 1 << 2;
pub(crate) const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
pub(crate) const XDP_OPTIONS_ZEROCOPY: u32 = 1 << 0;

pub(crate) const XDP_PGOFF_RX_RING: i64 = 0;
pub(crate) const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
pub(crate) const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
pub(crate) const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;

pub(crate) const SO_BUSY_POLL: libc::c_int = 46;
pub(crate) const SO_INCOMING_NAPI_ID: libc::c_int = 56;
pub(crate) const SO_PREFER_BUSY_POLL: libc::c_int = 69;
pub(crate) const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// `struct xdp_umem_reg` as of Linux 6.8 (with `tx_metadata_len`, which we
/// leave 0). The kernel reads the trailing word of the 32-byte layout, so it
/// must be zero rather than padding.
#[repr(C)]
#[derive(Default)]
pub(crate) struct UmemReg {
    pub addr: u64,
    pub len: u64,
    pub chunk_size: u32,
    pub headroom: u32,
    pub flags: u32,
    pub tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RingOffset {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MmapOffsets {
    pub rx: RingOffset,
    pub tx: RingOffset,
    pub fr: RingOffset,
    pub cr: RingOffset,
}

/// Kernel-side counters of one XSK (`struct xdp_statistics`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskKernelStats {
    /// Dropped for other reasons (no fill buffer in copy mode, among others).
    pub rx_dropped: u64,
    /// Dropped because a fill descriptor was invalid.
    pub rx_invalid_descs: u64,
    /// Transmit descriptors the kernel refused.
    pub tx_invalid_descs: u64,
    /// Dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the tx ring empty when woken.
    pub tx_ring_empty_descs: u64,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

fn own(fd: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt(fd)?;
    // SAFETY: `fd` was just returned by a successful socket(2) call and is
    // owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new AF_XDP socket.
pub(crate) fn xsk_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers.
    own(unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
}

/// A new UDP socket (IPv4 or IPv6).
pub(crate) fn udp_socket(v6: bool) -> io::Result<OwnedFd> {
    let domain = if v6 { libc::AF_INET6 } else { libc::AF_INET };
    // SAFETY: socket(2) takes no pointers.
    own(unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) })
}

/// A new rtnetlink socket.
pub(crate) fn netlink_route_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers.
    own(unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) })
}

fn setsockopt_raw<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live, initialised T of exactly the length
    // passed; the kernel only reads it.
    cvt(unsafe { libc::setsockopt(fd, level, name, (val as *const T).cast(), size_of::<T>() as libc::socklen_t) })
        .map(drop)
}

pub(crate) fn setsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int, val: libc::c_int) -> io::Result<()> {
    setsockopt_raw(fd, level, name, &val)
}

pub(crate) fn setsockopt_umem_reg(fd: RawFd, reg: &UmemReg) -> io::Result<()> {
    setsockopt_raw(fd, SOL_XDP, XDP_UMEM_REG, reg)
}

pub(crate) fn setsockopt_bytes(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &[u8]) -> io::Result<()> {
    // SAFETY: the slice is live and its length is passed with it.
    cvt(unsafe { libc::setsockopt(fd, level, name, val.as_ptr().cast(), val.len() as libc::socklen_t) }).map(drop)
}

/// getsockopt into a `T` that is valid for any bit pattern (plain integers
/// and the repr(C) integer structs above). Returns the value and the length
/// the kernel wrote.
fn getsockopt_raw<T: Default>(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<(T, usize)> {
    let mut val = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is a live T of `len` bytes that the kernel may fill in;
    // every T used here is made of integers, so any bytes it writes are a
    // valid T.
    cvt(unsafe { libc::getsockopt(fd, level, name, (&mut val as *mut T).cast(), &mut len) })?;
    Ok((val, len as usize))
}

pub(crate) fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    getsockopt_raw::<libc::c_int>(fd, level, name).map(|(v, _)| v)
}

pub(crate) fn mmap_offsets(fd: RawFd) -> io::Result<MmapOffsets> {
    let (off, len) = getsockopt_raw::<MmapOffsets>(fd, SOL_XDP, XDP_MMAP_OFFSETS)?;
    if len != size_of::<MmapOffsets>() {
        // Kernels before 5.4 lack the flags word (and need_wakeup).
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "kernel too old: XDP_MMAP_OFFSETS has no ring flags (need Linux 5.4 or newer)",
        ));
    }
    Ok(off)
}

pub(crate) fn xdp_statistics(fd: RawFd) -> io::Result<XskKernelStats> {
    getsockopt_raw::<XskKernelStats>(fd, SOL_XDP, XDP_STATISTICS).map(|(s, _)| s)
}

pub(crate) fn xdp_options(fd: RawFd) -> io::Result<u32> {
    getsockopt_raw::<u32>(fd, SOL_XDP, XDP_OPTIONS).map(|(v, _)| v)
}

pub(crate) fn bind_xsk(
    fd: RawFd,
    ifindex: u32,
    queue: u32,
    flags: u16,
    shared_umem_fd: Option<RawFd>,
) -> io::Result<()> {
    // SAFETY: sockaddr_xdp is plain integers; all-zero is a valid value.
    let mut sa: libc::sockaddr_xdp = unsafe { zeroed() };
    sa.sxdp_family = AF_XDP as u16;
    sa.sxdp_flags = flags;
    sa.sxdp_ifindex = ifindex;
    sa.sxdp_queue_id = queue;
    sa.sxdp_shared_umem_fd = shared_umem_fd.map_or(0, |f| f as u32);
    // SAFETY: `sa` is a live sockaddr_xdp and its exact size is passed.
    cvt(unsafe {
        libc::bind(fd, (&sa as *const libc::sockaddr_xdp).cast(), size_of::<libc::sockaddr_xdp>() as libc::socklen_t)
    })
    .map(drop)
}

/// Maps `len` bytes of a socket's ring at page offset `pgoff`.
pub(crate) fn mmap_socket(fd: RawFd, len: usize, pgoff: i64) -> io::Result<*mut u8> {
    // SAFETY: a new shared mapping of the socket's ring with no address
    // hint; it touches no existing memory. MAP_FAILED is checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            pgoff,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// Wakes the kernel to receive (fill ring need_wakeup) or, with busy
/// polling set on the socket, runs one busy-poll round of its NAPI context.
/// Returns the errno on failure; EAGAIN/EWOULDBLOCK means "nothing to read",
/// which is the normal answer.
pub(crate) fn recv_dontwait(fd: RawFd, buf: &mut [u8]) -> Result<usize, i32> {
    // SAFETY: `buf` is a live writable slice of the given length (possibly
    // empty, for the XSK wake-up form recvfrom(fd, NULL, 0, ...)).
    let r = unsafe {
        libc::recvfrom(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if r < 0 { Err(io::Error::last_os_error().raw_os_error().unwrap_or(0)) } else { Ok(r as usize) }
}

/// Kicks the kernel to transmit what is in the XSK tx ring.
pub(crate) fn send_kick(fd: RawFd) -> Result<(), i32> {
    // SAFETY: a zero-length send with no buffer and no address: the kernel
    // reads nothing from userspace memory.
    let r = unsafe { libc::sendto(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    if r < 0 { Err(io::Error::last_os_error().raw_os_error().unwrap_or(0)) } else { Ok(()) }
}

/// Sends one datagram on a connected-less socket bound elsewhere (netlink).
pub(crate) fn send_bytes(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live slice of the given length; read only.
    let r = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), 0) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r as usize) }
}

/// Blocking receive of one datagram (netlink replies).
pub(crate) fn recv_bytes(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live writable slice of the given length.
    let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r as usize) }
}

/// Binds a UDP socket to the wildcard address and `port`.
pub(crate) fn bind_udp_any(fd: RawFd, v6: bool, port: u16) -> io::Result<()> {
    if v6 {
        // SAFETY: sockaddr_in6 is plain integers; all-zero is in6addr_any.
        let mut sa: libc::sockaddr_in6 = unsafe { zeroed() };
        sa.sin6_family = libc::AF_INET6 as u16;
        sa.sin6_port = port.to_be();
        // SAFETY: `sa` is live and its exact size is passed.
        cvt(unsafe {
            libc::bind(
                fd,
                (&sa as *const libc::sockaddr_in6).cast(),
                size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        })
        .map(drop)
    } else {
        // SAFETY: sockaddr_in is plain integers; all-zero is INADDR_ANY.
        let mut sa: libc::sockaddr_in = unsafe { zeroed() };
        sa.sin_family = libc::AF_INET as u16;
        sa.sin_port = port.to_be();
        // SAFETY: `sa` is live and its exact size is passed.
        cvt(unsafe {
            libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as libc::socklen_t)
        })
        .map(drop)
    }
}

/// Interface index of `name` in the calling thread's network namespace.
pub(crate) fn if_index(name: &str) -> io::Result<u32> {
    let c =
        CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 { Err(io::Error::last_os_error()) } else { Ok(idx) }
}

/// Waits up to `timeout_ms` for `fd` to become readable. True if it did.
pub(crate) fn poll_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one live pollfd, count 1.
    let n = cvt(unsafe { libc::poll(&mut pfd, 1, timeout_ms) })?;
    Ok(n > 0)
}

/// Moves the calling thread into the network namespace `fd` refers to
/// (tests and tools that drive several namespaces from one process).
pub fn enter_netns(fd: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: setns(2) takes a descriptor and a flag, no pointers; it only
    // changes the calling thread's namespace.
    cvt(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// The calling thread's CPU time in nanoseconds (getrusage(RUSAGE_THREAD)),
/// for measurements of CPU cost per packet.
pub fn thread_cpu_ns() -> u64 {
    // SAFETY: rusage is plain integers; all-zero is valid.
    let mut ru: libc::rusage = unsafe { zeroed() };
    // SAFETY: `ru` is a live rusage the kernel fills in.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return 0;
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Pins the calling thread to `cpu` (measurements).
pub fn pin_thread_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("cpu {cpu} out of range")));
    }
    // SAFETY: cpu < CPU_SETSIZE, checked above; `set` is a live cpu_set_t.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live cpu_set_t of the size passed; pid 0 is the
    // calling thread.
    cvt(unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) }).map(drop)
}

/// Hardware address of interface `name` in the calling thread's network
/// namespace (SIOCGIFHWADDR).
pub(crate) fn if_hwaddr(name: &str) -> io::Result<[u8; 6]> {
    let fd = udp_socket(false)?;
    // SAFETY: ifreq is plain integers and arrays; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= ifr.ifr_name.len() || bytes.contains(&0) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad interface name {name:?}")));
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: `ifr` is a live ifreq with a NUL-terminated name (checked
    // above); SIOCGIFHWADDR writes only inside it.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut ifr) })?;
    // SAFETY: SIOCGIFHWADDR filled the ifru_hwaddr member of the union.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(mac)
}
