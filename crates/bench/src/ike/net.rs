//! The generator's and the bare responder's sockets: UDP 500 and 4500 of
//! one address for IKE (4500 with RFC 3948's non-ESP marker), and, for
//! `--verify`, ESP: in UDP on 4500 (no marker) when the child SA is
//! encapsulated, else a raw IP protocol 50 socket.
//!
//! One thread does everything: [`Net::wait`] sends what is queued and
//! parks in one poll(2) on every socket until one is readable or the
//! caller's deadline (the engine's next timer) comes; [`Net::recv`] then
//! hands over what waits, one datagram at a time, from the sockets poll
//! said were readable (`MSG_DONTWAIT`, so an empty socket costs one
//! EAGAIN, not a sleep). Outgoing IKE messages are queued by
//! [`Net::send`] and go out together, one sendmmsg(2) per socket, with
//! the non-ESP marker as its own iovec (no copy). No reader threads, no
//! channel, no copy of a received datagram: the thread hop and the
//! futex wake-up per datagram of the former reader threads cost more
//! than the IKE engine itself did.

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{AddressFamily, MMsgHdr, RecvFlags, SendAncillaryBuffer, SendFlags, SocketType, ipproto};
use std::io::IoSlice;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

/// What [`Net::recv`] hands over, borrowed from the caller's buffer.
#[derive(Debug)]
pub enum Datagram<'a> {
    /// An IKE message (without the non-ESP marker): the local address it
    /// came to, where from.
    Ike { local: SocketAddr, from: SocketAddr, msg: &'a [u8] },
    /// An ESP packet from the SPI on (outer IP and UDP headers removed).
    Esp { from: IpAddr, esp: &'a mut [u8] },
}

/// A buffer that holds any datagram.
pub fn buffer() -> Vec<u8> {
    vec![0u8; 65536]
}

/// Datagrams `sendmmsg` is given at once.
const SEND_BATCH: usize = 64;

/// RFC 3948 2.2's non-ESP marker.
const MARKER: [u8; 4] = [0; 4];

pub struct Net {
    /// Ports 500 and 4500.
    socks: [UdpSocket; 2],
    raw: Option<OwnedFd>,
    local: IpAddr,
    /// Sockets poll(2) said were readable and not yet drained (bit 0: 500,
    /// 1: 4500, 2: raw ESP).
    ready: u8,
    /// The socket [`Net::recv`] tries first (turns go round, so a busy
    /// one does not starve the others).
    turn: usize,
    /// IKE messages queued per socket: (destination, message).
    queued: [Vec<(SocketAddr, Vec<u8>)>; 2],
    /// IKE datagrams sent (queued).
    pub sent: u64,
    /// IKE datagrams the kernel refused (the engine's retransmission
    /// covers them).
    pub send_errors: u64,
    /// poll(2) and sendmmsg(2) calls, for the report's per-setup figures.
    pub polls: u64,
    pub sendmmsgs: u64,
    /// ESP packets sent, and those the kernel refused.
    pub esp_sent: u64,
    pub esp_send_errors: u64,
}

/// The payload of a raw IPv4 socket's datagram: its range past the IP
/// header.
fn ipv4_payload(d: &[u8]) -> Option<std::ops::Range<usize>> {
    let ihl = usize::from(d.first()? & 0x0f) * 4;
    if ihl < 20 || ihl > d.len() {
        return None;
    }
    Some(ihl..d.len())
}

/// What a UDP datagram of `n` bytes received on `port` is: an IKE message
/// (its range past the non-ESP marker on 4500), ESP in UDP (true), or
/// nothing (a NAT keep-alive, RFC 3948 2.3).
fn classify(port: u16, d: &[u8]) -> Option<(std::ops::Range<usize>, bool)> {
    if port != 4500 {
        return Some((0..d.len(), false));
    }
    match d.strip_prefix(&MARKER) {
        Some(_) => Some((4..d.len(), false)),
        None if d.len() <= 1 => None,
        None => Some((0..d.len(), true)),
    }
}

/// A receive buffer for bursts: a window of answers, or a sample's probes
/// answered at once (about 270 small datagrams fit the default 208 KiB:
/// the rest were dropped and each cost its probe a 1 s retry).
fn big_receive_buffer(fd: impl rustix::fd::AsFd) {
    const BYTES: usize = 8 << 20;
    if rustix::net::sockopt::set_socket_recv_buffer_size_force(&fd, BYTES).is_err() {
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&fd, BYTES);
    }
}

impl Net {
    /// Binds 500 and 4500 on `local`; with `esp`, also a raw ESP socket.
    pub fn open(local: IpAddr, esp: bool) -> Result<Net, String> {
        let bind = |port: u16| {
            let addr = SocketAddr::new(local, port);
            UdpSocket::bind(addr).map_err(|e| format!("bind {addr}: {e}"))
        };
        let socks = [bind(500)?, bind(4500)?];
        for s in &socks {
            big_receive_buffer(s);
        }
        let raw = if esp {
            let af = if local.is_ipv6() { AddressFamily::INET6 } else { AddressFamily::INET };
            let fd = rustix::net::socket(af, SocketType::RAW, Some(ipproto::ESP))
                .map_err(|e| format!("a raw ESP socket (root needed): {e}"))?;
            // Bound: only ESP to this address (another generator or
            // responder in the namespace keeps its own).
            rustix::net::bind(&fd, &SocketAddr::new(local, 0)).map_err(|e| format!("bind ESP on {local}: {e}"))?;
            big_receive_buffer(&fd);
            Some(fd)
        } else {
            None
        };
        Ok(Net {
            socks,
            raw,
            local,
            ready: 0,
            turn: 0,
            queued: [Vec::new(), Vec::new()],
            sent: 0,
            send_errors: 0,
            polls: 0,
            sendmmsgs: 0,
            esp_sent: 0,
            esp_send_errors: 0,
        })
    }

    /// Sends what is queued, then, unless a socket is still known to hold
    /// datagrams, waits up to `timeout` for one to be readable. Returns
    /// whether one is (or may be).
    pub fn wait(&mut self, timeout: Duration) -> bool {
        self.flush();
        if self.ready != 0 {
            return true;
        }
        let mut fds = Vec::with_capacity(3);
        fds.push(PollFd::new(&self.socks[0], PollFlags::IN));
        fds.push(PollFd::new(&self.socks[1], PollFlags::IN));
        if let Some(raw) = &self.raw {
            fds.push(PollFd::new(raw, PollFlags::IN));
        }
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        self.polls += 1;
        // EINTR and the like: nothing ready this time round.
        if rustix::event::poll(&mut fds, Some(&ts)).is_err() {
            return false;
        }
        let mut ready = 0u8;
        for (i, fd) in fds.iter().enumerate() {
            // An error or hang-up is read (and ends in an error) too:
            // never a busy loop on a socket poll keeps naming.
            if !fd.revents().is_empty() {
                ready |= 1 << i;
            }
        }
        self.ready = ready;
        ready != 0
    }

    /// The next datagram waiting on a socket [`Net::wait`] found readable,
    /// read into `buf`; `None` once all of them are drained.
    pub fn recv<'b>(&mut self, buf: &'b mut [u8]) -> Option<Datagram<'b>> {
        while self.ready != 0 {
            let i = self.turn % 3;
            self.turn = self.turn.wrapping_add(1);
            if self.ready & (1 << i) == 0 {
                continue;
            }
            match self.recv_on(i, buf) {
                Ok(Some((range, kind))) => {
                    return Some(match kind {
                        Kind::Ike(local, from) => Datagram::Ike { local, from, msg: &buf[range] },
                        Kind::Esp(from) => Datagram::Esp { from, esp: &mut buf[range] },
                    });
                }
                // Read, but nothing for the caller (a keep-alive, a runt):
                // the same socket again on the next turn.
                Ok(None) => {}
                Err(_) => self.ready &= !(1 << i),
            }
        }
        None
    }

    /// One datagram from socket `i`: its range in `buf` and what it is,
    /// `Ok(None)` for one to skip, an error once the socket is empty (or
    /// failing).
    fn recv_on(&mut self, i: usize, buf: &mut [u8]) -> Result<Option<(std::ops::Range<usize>, Kind)>, Errno> {
        if i == 2 {
            let Some(raw) = &self.raw else { return Err(Errno::BADF) };
            let (n, _, from) = rustix::net::recvfrom(raw, &mut *buf, RecvFlags::DONTWAIT)?;
            let Some(from) = from.and_then(|a| SocketAddr::try_from(a).ok()) else { return Ok(None) };
            // Only IPv4 raw sockets hand over the IP header.
            let d = &buf[..n.min(buf.len())];
            let range = if self.local.is_ipv4() { ipv4_payload(d) } else { Some(0..d.len()) };
            return Ok(range.map(|r| (r, Kind::Esp(from.ip()))));
        }
        let sock = &self.socks[i];
        let (n, _, from) = rustix::net::recvfrom(sock, &mut *buf, RecvFlags::DONTWAIT)?;
        let Some(from) = from.and_then(|a| SocketAddr::try_from(a).ok()) else { return Ok(None) };
        let port = if i == 0 { 500 } else { 4500 };
        let Some((range, esp)) = classify(port, &buf[..n.min(buf.len())]) else { return Ok(None) };
        Ok(Some((range, if esp { Kind::Esp(from.ip()) } else { Kind::Ike(SocketAddr::new(self.local, port), from) })))
    }

    /// Queues an IKE message (sent at the next [`Net::wait`] or
    /// [`Net::flush`]).
    pub fn send(&mut self, local: SocketAddr, remote: SocketAddr, data: Vec<u8>) {
        self.sent += 1;
        self.queued[usize::from(local.port() == 4500)].push((remote, data));
    }

    /// Sends the queued IKE messages: sendmmsg(2) per socket, up to
    /// [`SEND_BATCH`] at a time.
    pub fn flush(&mut self) {
        for i in 0..2 {
            if self.queued[i].is_empty() {
                continue;
            }
            let queued = std::mem::take(&mut self.queued[i]);
            for chunk in queued.chunks(SEND_BATCH) {
                let (calls, refused) = send_batch(self.socks[i].as_fd(), i == 1, chunk);
                self.sendmmsgs += calls;
                self.send_errors += refused;
            }
            // The allocation is kept for the next turn.
            let mut v = queued;
            v.clear();
            self.queued[i] = v;
        }
    }

    /// Sends an ESP packet to `remote` now: in UDP from port 4500 to
    /// `encap`'s remote port, or as IP protocol 50.
    pub fn send_esp(&mut self, remote: IpAddr, encap: Option<(u16, u16)>, esp: &[u8]) {
        self.esp_sent += 1;
        let ok = match (encap, &self.raw) {
            (Some((_, port)), _) => self.socks[1].send_to(esp, SocketAddr::new(remote, port)).is_ok(),
            (None, Some(raw)) => rustix::net::sendto(raw, esp, SendFlags::empty(), &SocketAddr::new(remote, 0)).is_ok(),
            (None, None) => false,
        };
        if !ok {
            self.esp_send_errors += 1;
        }
    }
}

enum Kind {
    Ike(SocketAddr, SocketAddr),
    Esp(IpAddr),
}

/// Sends `msgs` on `sock` with sendmmsg(2), the non-ESP marker in front of
/// each when `marked`. Returns (calls made, messages the kernel refused):
/// a refused one (an ICMP error queued on the socket, no buffer) is
/// skipped, as a lost datagram the engine retransmits.
fn send_batch(sock: std::os::fd::BorrowedFd<'_>, marked: bool, msgs: &[(SocketAddr, Vec<u8>)]) -> (u64, u64) {
    let addrs: Vec<rustix::net::SocketAddrAny> = msgs.iter().map(|(a, _)| (*a).into()).collect();
    let iovs: Vec<[IoSlice<'_>; 2]> = msgs.iter().map(|(_, d)| [IoSlice::new(&MARKER), IoSlice::new(d)]).collect();
    let mut controls: Vec<SendAncillaryBuffer<'_, '_, '_>> =
        msgs.iter().map(|_| SendAncillaryBuffer::default()).collect();
    let mut hdrs: Vec<MMsgHdr<'_>> = addrs
        .iter()
        .zip(&iovs)
        .zip(controls.iter_mut())
        .map(|((a, iov), c)| MMsgHdr::new_with_addr(a, if marked { &iov[..] } else { &iov[1..] }, c))
        .collect();
    let (mut at, mut calls, mut refused) = (0usize, 0u64, 0u64);
    while at < hdrs.len() {
        calls += 1;
        match rustix::net::sendmmsg(sock, &mut hdrs[at..], SendFlags::empty()) {
            Ok(0) => {
                refused += (hdrs.len() - at) as u64;
                break;
            }
            Ok(k) => at += k,
            Err(Errno::INTR) => {}
            // The first one was refused: skip it, send the rest.
            Err(_) => {
                refused += 1;
                at += 1;
            }
        }
    }
    (calls, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_ipv4_payload_starts_past_the_header() {
        let mut d = vec![0x46u8; 24];
        d.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(ipv4_payload(&d), Some(24..28));
        assert_eq!(ipv4_payload(&[0x44, 0, 0]), None, "an IHL below 5 is no header");
        assert_eq!(ipv4_payload(&[]), None);
        assert_eq!(ipv4_payload(&[0x4f, 0, 0]), None, "shorter than its IHL");
    }

    #[test]
    fn port_4500_splits_ike_esp_and_keepalives() {
        assert_eq!(classify(500, &[1, 2, 3]), Some((0..3, false)), "500 is all IKE");
        assert_eq!(classify(4500, &[0, 0, 0, 0, 9, 9]), Some((4..6, false)), "marked: IKE past the marker");
        assert_eq!(classify(4500, &[0, 0, 0, 1, 9, 9]), Some((0..6, true)), "an SPI: ESP");
        assert_eq!(classify(4500, &[0xff]), None, "a NAT keep-alive");
    }

    /// A `Net` on 127.`k`.x.y, x.y from the process id (ports 500 and
    /// 4500 need root and an address no other test or run holds).
    fn loopback(k: u8) -> Option<Net> {
        let pid = std::process::id();
        let ip = IpAddr::from([127, k, (pid >> 8) as u8, pid as u8 | 1]);
        Net::open(ip, false).ok()
    }

    /// A burst queued to one socket leaves in one sendmmsg and comes back
    /// through one poll, every datagram whole and in order, the marker
    /// added on 4500 and removed again.
    #[test]
    fn a_burst_goes_out_in_one_call_and_is_read_back_in_order() {
        let Some(mut a) = loopback(77) else {
            eprintln!("skipped: cannot bind 500/4500 on 127.77.x.x (not root?)");
            return;
        };
        let ip = a.local;
        let (to500, to4500) = (SocketAddr::new(ip, 500), SocketAddr::new(ip, 4500));
        for k in 0..40u8 {
            a.send(to500, to500, vec![k; 30 + usize::from(k)]);
        }
        a.send(to4500, to4500, vec![7; 28]);
        assert!(a.wait(Duration::from_secs(30)), "the burst is readable");
        assert_eq!(a.sendmmsgs, 2, "one call per socket");
        assert_eq!(a.send_errors, 0);
        let mut buf = buffer();
        let mut got = Vec::new();
        let mut polls = 0;
        while got.len() < 41 && polls < 100 {
            while let Some(d) = a.recv(&mut buf) {
                match d {
                    Datagram::Ike { local, from, msg } => got.push((local.port(), from.port(), msg.to_vec())),
                    Datagram::Esp { .. } => panic!("no ESP was sent"),
                }
            }
            polls += 1;
            a.wait(Duration::from_secs(30));
        }
        let on500: Vec<Vec<u8>> = got.iter().filter(|g| g.0 == 500).map(|g| g.2.clone()).collect();
        let expect: Vec<Vec<u8>> = (0..40u8).map(|k| vec![k; 30 + usize::from(k)]).collect();
        assert_eq!(on500, expect, "whole and in order");
        let on4500: Vec<&(u16, u16, Vec<u8>)> = got.iter().filter(|g| g.0 == 4500).collect();
        assert_eq!(on4500.len(), 1);
        assert_eq!((on4500[0].1, &on4500[0].2), (4500, &vec![7u8; 28]), "the marker is gone");
    }

    /// With nothing to read, `wait` returns at its timeout, and `recv`
    /// then has nothing.
    #[test]
    fn an_idle_wait_ends_at_its_timeout() {
        let Some(mut a) = loopback(78) else {
            eprintln!("skipped: cannot bind 500/4500 on 127.78.x.x (not root?)");
            return;
        };
        assert!(!a.wait(Duration::from_millis(1)));
        assert!(a.recv(&mut buffer()).is_none());
        assert_eq!(a.polls, 1);
    }
}
