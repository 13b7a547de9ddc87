//! A non-blocking rtnetlink socket (through rustix, so this crate stays
//! free of unsafe code).

use rustix::fd::OwnedFd;
use rustix::io::Errno;
use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use std::io;

pub struct NlSocket {
    fd: OwnedFd,
}

/// What one receive gave.
pub enum Recv {
    /// Bytes at the start of the buffer.
    Data(usize),
    /// Nothing waiting.
    Empty,
    /// The kernel dropped notifications (ENOBUFS): state must be dumped
    /// again.
    Overrun,
}

fn io_err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

impl NlSocket {
    /// Opens a NETLINK_ROUTE socket subscribed to `groups` (RTMGRP_* bits)
    /// with a receive buffer of `rcvbuf` bytes (SO_RCVBUFFORCE as root,
    /// else as much as `net.core.rmem_max` allows).
    pub fn open(groups: u32, rcvbuf: usize) -> io::Result<NlSocket> {
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None, // NETLINK_ROUTE is protocol 0
        )
        .map_err(io_err)?;
        if rcvbuf > 0 && rustix::net::sockopt::set_socket_recv_buffer_size_force(&fd, rcvbuf).is_err() {
            let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&fd, rcvbuf);
        }
        rustix::net::bind(&fd, &SocketAddrNetlink::new(0, groups)).map_err(io_err)?;
        Ok(NlSocket { fd })
    }

    /// Sends one or more requests to the kernel.
    pub fn send(&self, buf: &[u8]) -> io::Result<()> {
        loop {
            match rustix::net::send(&self.fd, buf, SendFlags::empty()) {
                Ok(_) => return Ok(()),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(io_err(e)),
            }
        }
    }

    /// Receives one datagram (one or more netlink messages) into `buf`.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Recv> {
        loop {
            match rustix::net::recv(&self.fd, &mut *buf, RecvFlags::empty()) {
                Ok((n, _)) => return Ok(Recv::Data(n)),
                Err(Errno::AGAIN) => return Ok(Recv::Empty),
                Err(Errno::INTR) => continue,
                Err(Errno::NOBUFS) => return Ok(Recv::Overrun),
                Err(e) => return Err(io_err(e)),
            }
        }
    }

    pub fn recv_buffer_size(&self) -> usize {
        rustix::net::sockopt::socket_recv_buffer_size(&self.fd).unwrap_or(0)
    }
}
