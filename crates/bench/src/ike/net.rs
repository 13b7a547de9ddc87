//! The generator's and the bare responder's sockets: UDP 500 and 4500 of
//! one address for IKE (4500 with RFC 3948's non-ESP marker), and, for
//! `--verify`, ESP: in UDP on 4500 (no marker) when the child SA is
//! encapsulated, else a raw IP protocol 50 socket. One reader thread per
//! socket feeds one channel.

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketType, ipproto};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::mpsc;

/// What a reader thread hands over.
pub enum Datagram {
    /// An IKE message (without the non-ESP marker): the local address it
    /// came to, where from.
    Ike { local: SocketAddr, from: SocketAddr, msg: Vec<u8> },
    /// An ESP packet from the SPI on (outer IP and UDP headers removed).
    Esp { from: IpAddr, esp: Vec<u8> },
}

pub struct Net {
    socks: [Arc<UdpSocket>; 2],
    raw: Option<Arc<OwnedFd>>,
    pub rx: mpsc::Receiver<Datagram>,
    /// IKE datagrams sent.
    pub sent: u64,
    /// ESP packets sent, and those the kernel refused.
    pub esp_sent: u64,
    pub esp_send_errors: u64,
}

/// The payload of a raw IPv4 socket's datagram: past the IP header.
fn strip_ipv4(d: &[u8]) -> Option<&[u8]> {
    let ihl = usize::from(d.first()? & 0x0f) * 4;
    if ihl < 20 {
        return None;
    }
    d.get(ihl..)
}

impl Net {
    /// Binds 500 and 4500 on `local`; with `esp`, also a raw ESP socket.
    pub fn open(local: IpAddr, esp: bool) -> Result<Net, String> {
        let (tx, rx) = mpsc::channel();
        let mut socks = Vec::new();
        for port in [500u16, 4500] {
            let addr = SocketAddr::new(local, port);
            let s = Arc::new(UdpSocket::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?);
            let r = Arc::clone(&s);
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while let Ok((n, from)) = r.recv_from(&mut buf) {
                    let d = &buf[..n];
                    let dg = match (port, d.strip_prefix(&[0u8; 4])) {
                        (500, _) => Datagram::Ike { local: addr, from, msg: d.to_vec() },
                        (_, Some(m)) => Datagram::Ike { local: addr, from, msg: m.to_vec() },
                        // RFC 3948 2.2: a one-byte 0xff is a NAT keepalive.
                        (_, None) if n <= 1 => continue,
                        (_, None) => Datagram::Esp { from: from.ip(), esp: d.to_vec() },
                    };
                    if tx.send(dg).is_err() {
                        return;
                    }
                }
            });
            socks.push(s);
        }
        let socks: [Arc<UdpSocket>; 2] = socks.try_into().map_err(|_| "two sockets".to_string())?;
        let raw = if esp {
            let af = if local.is_ipv6() { AddressFamily::INET6 } else { AddressFamily::INET };
            let fd = rustix::net::socket(af, SocketType::RAW, Some(ipproto::ESP))
                .map_err(|e| format!("a raw ESP socket (root needed): {e}"))?;
            // Bound: only ESP to this address (another generator or
            // responder in the namespace keeps its own).
            rustix::net::bind(&fd, &SocketAddr::new(local, 0)).map_err(|e| format!("bind ESP on {local}: {e}"))?;
            let fd = Arc::new(fd);
            let r = Arc::clone(&fd);
            let v4 = local.is_ipv4();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while let Ok((n, _, from)) = rustix::net::recvfrom(&*r, &mut buf[..], RecvFlags::empty()) {
                    let Some(from) = from.and_then(|a| SocketAddr::try_from(a).ok()) else { continue };
                    // Only IPv4 raw sockets hand over the IP header.
                    let esp = if v4 { strip_ipv4(&buf[..n]) } else { buf.get(..n) };
                    let Some(esp) = esp else { continue };
                    if tx.send(Datagram::Esp { from: from.ip(), esp: esp.to_vec() }).is_err() {
                        return;
                    }
                }
            });
            Some(fd)
        } else {
            None
        };
        Ok(Net { socks, raw, rx, sent: 0, esp_sent: 0, esp_send_errors: 0 })
    }

    /// Sends an IKE message.
    pub fn send(&mut self, local: SocketAddr, remote: SocketAddr, data: &[u8]) {
        self.sent += 1;
        let r = if local.port() == 4500 {
            let mut v = Vec::with_capacity(data.len() + 4);
            v.extend_from_slice(&[0u8; 4]);
            v.extend_from_slice(data);
            self.socks[1].send_to(&v, remote)
        } else {
            self.socks[0].send_to(data, remote)
        };
        // A refused send (ENOBUFS, ICMP errors) is a loss the engine's
        // retransmission covers.
        let _ = r;
    }

    /// Sends an ESP packet to `remote`: in UDP from port 4500 to
    /// `encap`'s remote port, or as IP protocol 50.
    pub fn send_esp(&mut self, remote: IpAddr, encap: Option<(u16, u16)>, esp: &[u8]) {
        self.esp_sent += 1;
        let ok = match (encap, &self.raw) {
            (Some((_, port)), _) => self.socks[1].send_to(esp, SocketAddr::new(remote, port)).is_ok(),
            (None, Some(raw)) => {
                rustix::net::sendto(&**raw, esp, SendFlags::empty(), &SocketAddr::new(remote, 0)).is_ok()
            }
            (None, None) => false,
        };
        if !ok {
            self.esp_send_errors += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_ipv4_payload_starts_past_the_header() {
        let mut d = vec![0x46u8; 24];
        d.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(strip_ipv4(&d), Some(&[1u8, 2, 3, 4][..]));
        assert_eq!(strip_ipv4(&[0x44, 0, 0]), None, "an IHL below 5 is no header");
        assert_eq!(strip_ipv4(&[]), None);
        assert_eq!(strip_ipv4(&[0x4f, 0, 0]), None, "shorter than its IHL");
    }
}
