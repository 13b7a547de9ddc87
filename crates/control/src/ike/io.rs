//! How IKE's datagrams come and go: kernel UDP sockets on 500 and 4500
//! of each `[[ike]]` local address (Linux mode, where the kernel owns the
//! router's addresses), or the engine's queues (`crate::ike_local`,
//! standalone mode). Either is read by the shards themselves
//! ([`super::shard`]): `read` takes what waits without blocking (IKE
//! messages, the non-ESP marker stripped), and either is a [`Transport`],
//! whose `send` adds the marker on 4500.
//!
//! ESP in UDP reaching a kernel socket on 4500 (Linux mode: fragmented on
//! the wire, so the kernel, not the steering program, had it) goes to
//! [`crate::esp_kernel::KernelEsp`], which hands it to the engine unless
//! it is the kernel's copy of frames tern received itself (AF_PACKET).

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// IKE's two ports (RFC 7296 2, RFC 3948).
pub const IKE_PORT: u16 = 500;
pub const NAT_T_PORT: u16 = 4500;

/// What the I/O counted (all threads together).
#[derive(Default, Debug)]
pub struct IoCounters {
    pub received: AtomicU64,
    pub sent: AtomicU64,
    /// Sends that failed (no socket for the local address, a full queue,
    /// the kernel's error).
    pub send_failed: AtomicU64,
    /// UDP 4500 without the non-ESP marker: ESP, which the engine's
    /// `esp-decrypt` takes; dropped here when it is the kernel's copy of
    /// frames tern received itself (AF_PACKET), or the engine's queue is
    /// full (what is handed over is counted by `crate::esp_kernel`).
    pub esp_dropped: AtomicU64,
    /// NAT keep-alives (one 0xff byte, RFC 3948 2.3): nothing to do.
    pub keepalives: AtomicU64,
    /// Shorter than an IKE header.
    pub runts: AtomicU64,
    /// Datagrams a shard read for another (handed over through its inbox).
    pub forwarded: AtomicU64,
}

/// One received IKE message.
pub type Datagram = (SocketAddr, SocketAddr, Vec<u8>);

/// Sends IKE messages (the shards share one).
pub trait Transport: Send + Sync {
    /// Sends `data` (an IKE message) from `local` to `remote`; on port
    /// 4500 with the non-ESP marker in front. False if it could not.
    fn send(&self, local: SocketAddr, remote: SocketAddr, data: &[u8]) -> bool;

    /// What `send` queued goes out now: the sender calls it once its
    /// batch of sends is done (the engine's queues wake a worker once for
    /// the batch; kernel sockets sent each at once).
    fn flush(&self) {}
}

/// What a datagram received on `local_port` is: the IKE message in it, or
/// `None` (counted) for ESP on 4500, a NAT keep-alive or a runt.
pub fn ike_payload(local_port: u16, d: &[u8], c: &IoCounters) -> Option<std::ops::Range<usize>> {
    let start = if local_port == NAT_T_PORT {
        if d == [0xff] {
            c.keepalives.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if d.len() < 4 || d[..4] != [0, 0, 0, 0] {
            c.esp_dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        4
    } else {
        0
    };
    if d.len() < start + tern_ike::wire::HEADER_LEN {
        c.runts.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    Some(start..d.len())
}

/// Kernel sockets: one per (address, port), read by every shard (one
/// poll(2) on all of them and the shard's eventfd, then `MSG_DONTWAIT`
/// reads).
pub struct KernelUdp {
    sockets: HashMap<SocketAddr, Arc<UdpSocket>>,
    /// The same, in a fixed order, for poll(2).
    order: Vec<(SocketAddr, Arc<UdpSocket>)>,
    counters: Arc<IoCounters>,
    /// Where ESP on 4500 goes (None: dropped, counted `esp_dropped`).
    esp: Option<Arc<crate::esp_kernel::KernelEsp>>,
}

impl KernelUdp {
    /// Binds 500 and 4500 of every address in `locals`. IP_FREEBIND lets
    /// a socket bind an address the kernel does not have yet (Linux mode:
    /// it may come with the interface later). ESP on 4500 goes to `esp`.
    pub fn bind(
        locals: &[std::net::IpAddr],
        counters: Arc<IoCounters>,
        esp: Option<Arc<crate::esp_kernel::KernelEsp>>,
    ) -> Result<KernelUdp, String> {
        let mut sockets = HashMap::new();
        let mut order = Vec::new();
        for &ip in locals {
            for port in [IKE_PORT, NAT_T_PORT] {
                let at = SocketAddr::new(ip, port);
                if sockets.contains_key(&at) {
                    continue;
                }
                let s = Arc::new(bind_one(at).map_err(|e| format!("IKE: cannot bind UDP {at}: {e}"))?);
                order.push((at, Arc::clone(&s)));
                sockets.insert(at, s);
            }
        }
        Ok(KernelUdp { sockets, order, counters, esp })
    }

    /// Parks until a socket or `event` is readable, or `timeout`.
    pub fn wait(&self, event: Option<&OwnedFd>, timeout: Duration) {
        use rustix::event::{PollFd, PollFlags};
        let mut fds: Vec<PollFd<'_>> = self.order.iter().map(|(_, s)| PollFd::new(&**s, PollFlags::IN)).collect();
        if let Some(e) = event {
            fds.push(PollFd::new(e, PollFlags::IN));
        }
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        // EINTR: the caller's loop comes round again.
        let _ = rustix::event::poll(&mut fds, Some(&ts));
    }

    /// Appends the IKE messages waiting on the sockets, up to `max`,
    /// without blocking, read through `buf` (64 KiB holds any); the rest
    /// is counted ([`ike_payload`]).
    pub fn read(&self, out: &mut Vec<Datagram>, max: usize, buf: &mut [u8]) {
        let start = out.len();
        for (local, sock) in &self.order {
            while out.len() - start < max {
                let Some(rx) = crate::esp_kernel::recv_info(sock, local.ip(), &mut *buf) else { break };
                let remote = rx.remote;
                let d = &buf[..rx.len.min(buf.len())];
                if local.port() == NAT_T_PORT
                    && let Some(esp) = &self.esp
                    && is_esp(d)
                {
                    if !esp.take(*local, remote, rx.ifindex, d) {
                        self.counters.esp_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                }
                if let Some(r) = ike_payload(local.port(), d, &self.counters) {
                    self.counters.received.fetch_add(1, Ordering::Relaxed);
                    out.push((*local, remote, d[r].to_vec()));
                }
            }
        }
    }
}

/// ESP on port 4500: neither a keep-alive nor marked IKE, and as long as
/// ESP's SPI and sequence number.
fn is_esp(d: &[u8]) -> bool {
    d.len() >= 8 && d.get(..4) != Some(&[0, 0, 0, 0][..])
}

fn bind_one(at: SocketAddr) -> std::io::Result<UdpSocket> {
    use rustix::net::{AddressFamily, SocketType, ipproto, socket};
    let family = if at.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let fd = socket(family, SocketType::DGRAM, Some(ipproto::UDP))?;
    rustix::net::sockopt::set_socket_reuseaddr(&fd, true)?;
    if at.is_ipv4() {
        rustix::net::sockopt::set_ip_freebind(&fd, true)?;
    } else {
        rustix::net::sockopt::set_ipv6_v6only(&fd, true)?;
        rustix::net::sockopt::set_ipv6_freebind(&fd, true)?;
    }
    crate::esp_kernel::want_pktinfo(&fd, at.is_ipv6())?;
    rustix::net::bind(&fd, &at)?;
    Ok(UdpSocket::from(fd))
}

impl Transport for KernelUdp {
    fn send(&self, local: SocketAddr, remote: SocketAddr, data: &[u8]) -> bool {
        let Some(sock) = self.sockets.get(&local) else {
            self.counters.send_failed.fetch_add(1, Ordering::Relaxed);
            log::debug!("IKE: no socket on {local} to send to {remote}");
            return false;
        };
        let r = if local.port() == NAT_T_PORT {
            let mut m = Vec::with_capacity(4 + data.len());
            m.extend_from_slice(&[0, 0, 0, 0]);
            m.extend_from_slice(data);
            sock.send_to(&m, remote)
        } else {
            sock.send_to(data, remote)
        };
        match r {
            Ok(_) => {
                self.counters.sent.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(e) => {
                let n = self.counters.send_failed.fetch_add(1, Ordering::Relaxed) + 1;
                // Said once and then at every power of two: a peer the
                // kernel has no route to (Linux mode: these sockets follow
                // the kernel's table, not `[[route]]`) fails every send.
                if n.is_power_of_two() {
                    log::warn!("IKE: cannot send {local} -> {remote}: {e} ({n} send(s) failed so far)");
                } else {
                    log::debug!("IKE: send {local} -> {remote}: {e}");
                }
                false
            }
        }
    }
}

/// The engine's queues (standalone mode): `crate::ike_local::EngineUdp`.
pub struct EngineTransport {
    pub udp: crate::ike_local::EngineUdp,
    pub counters: Arc<IoCounters>,
}

impl Transport for EngineTransport {
    fn send(&self, local: SocketAddr, remote: SocketAddr, data: &[u8]) -> bool {
        let ok = self.udp.send_deferred(local, remote, data);
        let c = if ok { &self.counters.sent } else { &self.counters.send_failed };
        c.fetch_add(1, Ordering::Relaxed);
        ok
    }

    fn flush(&self) {
        self.udp.kick();
    }
}

impl EngineTransport {
    /// Whether a datagram waits in the engine's queue.
    pub fn pending(&self) -> bool {
        self.udp.pending()
    }

    /// Appends what the engine queued, up to `max`, without blocking;
    /// runts counted and dropped.
    pub fn read(&self, out: &mut Vec<Datagram>, max: usize) {
        let start = out.len();
        self.udp.recv_up_to(out, max);
        let c = &self.counters;
        let mut k = start;
        for i in start..out.len() {
            if out[i].2.len() < tern_ike::wire::HEADER_LEN {
                c.runts.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            out.swap(k, i);
            k += 1;
        }
        out.truncate(k);
        c.received.fetch_add((k - start) as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_4500_takes_only_marked_ike() {
        let c = IoCounters::default();
        let ike = [0u8; 28];
        assert_eq!(ike_payload(500, &ike, &c), Some(0..28));
        let mut marked = vec![0, 0, 0, 0];
        marked.extend_from_slice(&ike);
        assert_eq!(ike_payload(4500, &marked, &c), Some(4..32));
        assert_eq!(ike_payload(4500, &[0xff], &c), None);
        assert_eq!(ike_payload(4500, &[0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9], &c), None, "ESP");
        assert_eq!(ike_payload(500, &[1, 2, 3], &c), None, "runt");
        assert_eq!(ike_payload(4500, &[0, 0, 0, 0, 1], &c), None, "a marked runt");
        assert_eq!(c.keepalives.load(Ordering::Relaxed), 1);
        assert_eq!(c.esp_dropped.load(Ordering::Relaxed), 1);
        assert_eq!(c.runts.load(Ordering::Relaxed), 2);
    }
}
