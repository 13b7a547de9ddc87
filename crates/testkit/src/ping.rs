//! ICMP echo that counts exactly: `n` requests, each answer awaited.
//!
//! iputils `ping -c N -i I -W S` waits for the last answer only
//! max(2 x the slowest round trip so far, I) after its last request (`-W`
//! counts only while nothing has been answered), so on a loaded machine an
//! answer that is merely late is reported lost; `-w` waits, but sends more
//! requests than `-c` while answers are late, which a test counting the
//! packets of a tunnel cannot have. [`ping4`] sends exactly `count`
//! requests, one every `interval`, and then waits for each answer until a
//! deadline: lost means lost.

use crate::netns::Netns;
use rustix::net::{AddressFamily, SocketType, ipproto, sendto, sockopt};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// What [`ping4`] saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pings {
    /// Requests sent.
    pub sent: u16,
    /// The sequence numbers (1 to `sent`) answered, each once, in the order
    /// the answers came.
    pub answered: Vec<u16>,
}

impl Pings {
    /// How many were answered.
    pub fn received(&self) -> u16 {
        self.answered.len() as u16
    }

    /// Whether every request was answered.
    pub fn all(&self) -> bool {
        self.received() == self.sent
    }
}

static IDENT: AtomicU16 = AtomicU16::new(0);

/// The Internet checksum (RFC 1071).
fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An echo request: identifier `ident`, sequence `seq`, 56 bytes of data.
fn echo_request(ident: u16, seq: u16) -> Vec<u8> {
    let mut p = vec![8, 0, 0, 0];
    p.extend_from_slice(&ident.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend((0..56u8).map(|i| i.wrapping_add(0x10)));
    let c = checksum(&p);
    p[2..4].copy_from_slice(&c.to_be_bytes());
    p
}

/// The sequence number of an echo reply from `from` with identifier
/// `ident` in raw IPv4 datagram `d` (what a raw ICMP socket reads), if it
/// is one.
fn reply_seq(d: &[u8], from: Ipv4Addr, ident: u16) -> Option<u16> {
    let ihl = usize::from(*d.first()? & 0x0f) * 4;
    let src = Ipv4Addr::new(*d.get(12)?, *d.get(13)?, *d.get(14)?, *d.get(15)?);
    let icmp = d.get(ihl..)?;
    if src != from || icmp.len() < 8 || icmp[0] != 0 || icmp[1] != 0 || checksum(icmp) != 0 {
        return None;
    }
    (u16::from_be_bytes([icmp[4], icmp[5]]) == ident).then(|| u16::from_be_bytes([icmp[6], icmp[7]]))
}

/// From namespace `ns`, sends `count` ICMP echo requests to `dst`, one
/// every `interval`, and waits for their answers until each has come or
/// `wait` has passed since the last request (a raw socket: needs root).
pub fn ping4(ns: &Netns, dst: Ipv4Addr, count: u16, interval: Duration, wait: Duration) -> std::io::Result<Pings> {
    ping4_from(ns, None, dst, count, interval, wait)
}

/// [`ping4`] from source address `src` (ping's `-I ADDRESS`) when given.
pub fn ping4_from(
    ns: &Netns,
    src: Option<Ipv4Addr>,
    dst: Ipv4Addr,
    count: u16,
    interval: Duration,
    wait: Duration,
) -> std::io::Result<Pings> {
    ns.run(|| {
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::RAW, Some(ipproto::ICMP))?;
        if let Some(src) = src {
            rustix::net::bind(&fd, &SocketAddrV4::new(src, 0))?;
        }
        // Tests in one process ping at once; the kernel hands every raw
        // socket every echo reply.
        let ident = (std::process::id() as u16) ^ IDENT.fetch_add(0x9e37, Ordering::Relaxed);
        let to = SocketAddrV4::new(dst, 0);
        let mut answered = Vec::new();
        let mut sent = 0u16;
        let mut next = Instant::now();
        let mut buf = [0u8; 2048];
        loop {
            let now = Instant::now();
            if sent < count && now >= next {
                sent += 1;
                sendto(&fd, &echo_request(ident, sent), rustix::net::SendFlags::empty(), &to)?;
                next = now + interval;
                continue;
            }
            if answered.len() == usize::from(count) {
                break;
            }
            let until = if sent < count { next } else { next - interval + wait };
            let Some(left) = until.checked_duration_since(now).filter(|d| !d.is_zero()) else {
                if sent < count {
                    continue;
                }
                break;
            };
            sockopt::set_socket_timeout(&fd, sockopt::Timeout::Recv, Some(left))?;
            match rustix::io::read(&fd, &mut buf) {
                Ok(n) => {
                    if let Some(seq) = reply_seq(&buf[..n], dst, ident)
                        && (1..=sent).contains(&seq)
                        && !answered.contains(&seq)
                    {
                        answered.push(seq);
                    }
                }
                Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::INTR => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Pings { sent, answered })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_checksums_to_zero_and_a_reply_is_read() {
        let req = echo_request(0x1234, 7);
        assert_eq!(checksum(&req), 0);
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
        let mut reply = req.clone();
        reply[0] = 0;
        reply[2..4].copy_from_slice(&[0, 0]);
        let c = checksum(&reply);
        reply[2..4].copy_from_slice(&c.to_be_bytes());
        ip.extend_from_slice(&reply);
        let from = Ipv4Addr::new(10, 0, 0, 2);
        assert_eq!(reply_seq(&ip, from, 0x1234), Some(7));
        assert_eq!(reply_seq(&ip, from, 0x1235), None, "another pinger's");
        assert_eq!(reply_seq(&ip, Ipv4Addr::new(10, 0, 0, 3), 0x1234), None, "another host's");
        assert_eq!(reply_seq(&ip[..ip.len() - 1], from, 0x1234), None, "cut short: a bad checksum");
        assert_eq!(reply_seq(&ip[..22], from, 0x1234), None);
        assert_eq!(reply_seq(&[], from, 0x1234), None);
        let mut req_ip = ip[..20].to_vec();
        req_ip.extend_from_slice(&req);
        assert_eq!(reply_seq(&req_ip, from, 0x1234), None, "a request is no reply");
    }

    /// Answers echo requests in `ns` (whose kernel must not) from a raw
    /// socket, sequence `late` after `delay`; until `stop`.
    fn slow_responder(ns: &Netns, late: u16, delay: Duration, stop: &std::sync::atomic::AtomicBool) {
        ns.enter();
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::RAW, Some(ipproto::ICMP)).expect("raw");
        sockopt::set_socket_timeout(&fd, sockopt::Timeout::Recv, Some(Duration::from_millis(50))).expect("timeout");
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            let Ok(n) = rustix::io::read(&fd, &mut buf) else { continue };
            let d = &buf[..n];
            let ihl = usize::from(d[0] & 0x0f) * 4;
            let icmp = &d[ihl..];
            if icmp.len() < 8 || icmp[0] != 8 {
                continue;
            }
            if u16::from_be_bytes([icmp[6], icmp[7]]) == late {
                // A peer that is slow to answer, not a condition to await.
                std::thread::sleep(delay);
            }
            let mut reply = icmp.to_vec();
            reply[0] = 0;
            reply[2..4].copy_from_slice(&[0, 0]);
            let c = checksum(&reply);
            reply[2..4].copy_from_slice(&c.to_be_bytes());
            let from = Ipv4Addr::new(d[12], d[13], d[14], d[15]);
            sendto(&fd, &reply, rustix::net::SendFlags::empty(), &SocketAddrV4::new(from, 0)).expect("reply");
        }
    }

    #[test]
    fn a_late_answer_is_awaited_and_a_lost_one_is_not_invented() {
        if !crate::netns::privileged("ping4") {
            return;
        }
        let a = Netns::unique("tkpinga");
        let b = Netns::unique("tkpingb");
        crate::netns::Veth::new(&a, "p0", &b, "p1").create();
        a.ip(&["addr", "add", "192.0.2.1/24", "dev", "p0"]);
        b.ip(&["addr", "add", "192.0.2.2/24", "dev", "p1"]);
        b.sysctl("net.ipv4.icmp_echo_ignore_all", "1");
        let stop = std::sync::atomic::AtomicBool::new(false);
        let got = std::thread::scope(|s| {
            s.spawn(|| slow_responder(&b, 5, Duration::from_millis(400), &stop));
            // iputils' ping -c 5 -i 0.02 -W 2 reports the fifth lost here.
            let got = ping4(&a, Ipv4Addr::new(192, 0, 2, 2), 5, Duration::from_millis(20), Duration::from_secs(10));
            stop.store(true, Ordering::Relaxed);
            got.expect("ping4")
        });
        assert_eq!(got.sent, 5);
        assert!(got.all(), "{got:?}");
        assert_eq!(got.answered.last(), Some(&5), "the late one came last: {got:?}");
        let mut seqs = got.answered.clone();
        seqs.sort_unstable();
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
        // Nobody answers: nothing is made up, and the wait ends.
        let none = ping4(&a, Ipv4Addr::new(192, 0, 2, 9), 2, Duration::from_millis(20), Duration::from_millis(300))
            .expect("ping4");
        assert_eq!((none.sent, none.received()), (2, 0));
    }
}
