//! IKE's datagrams in standalone mode: what `ip4-local`, `ip6-local` and
//! `esp-decrypt` hand to the IKE service, and `ip-inject`, which sends
//! what it answers.
//!
//! Receiving ([`Params::ike_local`](crate::state::Params::ike_local) on,
//! standalone mode): UDP to port 500 and UDP to port 4500 starting with
//! the non-ESP marker (RFC 3948 2.2) addressed to the router become
//! [`IkeDatagram`]s on [`Shared::ike_rx`](crate::state::Shared::ike_rx),
//! the marker stripped; the node that queues them rings
//! [`Shared::ike_bell`](crate::state::Shared::ike_bell) once per batch.
//! Off, and in Linux mode, nothing changes: UDP 500 is answered with
//! ICMP port unreachable (or left to Linux), IKE on 4500 is dropped (or
//! left to Linux).
//!
//! `ip-inject`: IPv4/IPv6 packets the control side built whole
//! ([`udp_packet`]; IKE's datagrams) taken from
//! [`Shared::ip_inject`](crate::state::Shared::ip_inject) by every worker
//! each loop, sent to `ip4-lookup`/`ip6-lookup` as packets tern
//! originates, so routing and neighbour resolution apply.
//!
//! Next nodes (`ip-inject`): `ip4-lookup`, `ip6-lookup`, `drop`.
//! Counters: [`IpInjectError::DESCS`].
//!
//! Example: `EngineUdp::send(10.0.1.1:500, 10.0.1.2:500, msg)` queues a
//! 28-byte-header packet; a worker's `ip-inject` emits it to `ip4-lookup`
//! (`injected`), which routes it out of `lan` after ARP.

use crate::state::{IkeDatagram, InjectQueue};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tern_engine::{Cx, Emit, ErrorDesc, Node};
use tern_packet::{PktIdx, flags};
use tern_wire::{IpProtocol, checksum};

/// IKE's UDP port (RFC 7296 2).
pub const IKE_PORT: u16 = 500;
/// UDP 4500: IKE and ESP with NAT traversal (RFC 3948).
pub const NAT_T_PORT: u16 = 4500;
/// The non-ESP marker that precedes IKE messages on port 4500.
pub const NON_ESP_MARKER: [u8; 4] = [0; 4];

/// What a UDP datagram for the router is to IKE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IkeKind {
    /// An IKE message, starting `skip` bytes into the UDP payload (4 on
    /// port 4500: the non-ESP marker).
    Message { skip: usize },
    /// A NAT keep-alive: one 0xff byte on port 4500 (RFC 3948 2.3).
    Keepalive,
}

/// What the UDP datagram `udp` (header and payload, trimmed to the IP
/// packet) is to IKE: `None` for ESP in UDP and anything not IKE's.
#[inline]
pub fn classify(udp: &[u8]) -> Option<IkeKind> {
    let dport = u16::from_be_bytes(*udp.get(2..4)?.first_chunk::<2>()?);
    let payload = udp.get(8..)?;
    match dport {
        IKE_PORT => Some(IkeKind::Message { skip: 0 }),
        NAT_T_PORT if payload == [0xff] => Some(IkeKind::Keepalive),
        NAT_T_PORT if payload.first_chunk::<4>() == Some(&NON_ESP_MARKER) => Some(IkeKind::Message { skip: 4 }),
        _ => None,
    }
}

/// The datagram for [`Shared::ike_rx`](crate::state::Shared::ike_rx):
/// `udp` as [`classify`] read it (its length field bounds the payload),
/// from `remote` to `local`.
pub fn datagram(local: IpAddr, remote: IpAddr, ifindex: u16, udp: &[u8], skip: usize) -> Option<IkeDatagram> {
    let h = udp.first_chunk::<8>()?;
    let sport = u16::from_be_bytes([h[0], h[1]]);
    let dport = u16::from_be_bytes([h[2], h[3]]);
    let ulen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let end = if (8..=udp.len()).contains(&ulen) { ulen } else { udp.len() };
    let message = udp.get(8 + skip..end)?.to_vec();
    Some(IkeDatagram { local: SocketAddr::new(local, dport), remote: SocketAddr::new(remote, sport), ifindex, message })
}

/// An IPv4 or IPv6 packet carrying `payload` in UDP from `local` to
/// `remote`: TTL / hop limit 64, IPv4 identification `id`, checksums
/// computed. `None` when the families differ or it would exceed 65535
/// bytes.
pub fn udp_packet(local: SocketAddr, remote: SocketAddr, payload: &[u8], id: u16) -> Option<Vec<u8>> {
    let ulen = u16::try_from(8 + payload.len()).ok()?;
    let mut udp = Vec::with_capacity(usize::from(ulen));
    udp.extend_from_slice(&local.port().to_be_bytes());
    udp.extend_from_slice(&remote.port().to_be_bytes());
    udp.extend_from_slice(&ulen.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let (mut pkt, pseudo) = match (local.ip(), remote.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = ulen.checked_add(20)?;
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[4..6].copy_from_slice(&id.to_be_bytes());
            h[8] = 64;
            h[9] = IpProtocol::UDP.0;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let c = !checksum::header20(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            (h.to_vec(), checksum::pseudo_header_v4(s, d, IpProtocol::UDP, ulen))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut h = [0u8; 40];
            h[0] = 0x60;
            h[4..6].copy_from_slice(&ulen.to_be_bytes());
            h[6] = IpProtocol::UDP.0;
            h[7] = 64;
            h[8..24].copy_from_slice(&s.octets());
            h[24..40].copy_from_slice(&d.octets());
            (h.to_vec(), checksum::pseudo_header_v6(s, d, IpProtocol::UDP, u32::from(ulen)))
        }
        _ => return None,
    };
    let mut c = !checksum::add(pseudo, checksum::data(&udp));
    if c == 0 {
        c = 0xffff;
    }
    if let Some(w) = udp.get_mut(6..8) {
        w.copy_from_slice(&c.to_be_bytes());
    }
    pkt.extend_from_slice(&udp);
    Some(pkt)
}

/// The `ip-inject` node (see the module).
pub struct IpInject {
    queue: Arc<InjectQueue>,
}

impl IpInject {
    pub fn new(queue: Arc<InjectQueue>) -> Self {
        IpInject { queue }
    }
}

tern_engine::edges! {
    /// `ip-inject`'s next nodes.
    pub enum IpInjectNext {
        Drop = "drop",
        Ip4 = "ip4-lookup",
        Ip6 = "ip6-lookup",
    }
}

tern_engine::errors! {
    /// `ip-inject`'s counters.
    pub enum IpInjectError {
        Injected = info("injected", "IP packets tern originated (IKE) sent to the lookups"),
        NoBuffer = drop("no-buffer", "no buffer (or one too small) for an originated packet"),
        Bad = drop("bad-packet", "originated packet neither IPv4 nor IPv6"),
    }
}

/// Packets `ip-inject` takes per loop at most: the rest waits for the
/// next loop (the worker's receive rings keep their buffers).
const INJECT_BUDGET: usize = 1024;

impl Node for IpInject {
    fn name(&self) -> &'static str {
        "ip-inject"
    }
    fn nexts(&self) -> &'static [&'static str] {
        IpInjectNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        IpInjectError::DESCS
    }
    fn wants_poll(&self) -> bool {
        true
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        // Nothing enters `ip-inject` but from its own poll.
        for (o, &p) in next.iter_mut().zip(pkts) {
            *o = cx.drop(p, IpInjectError::Bad);
        }
    }
    fn poll(&mut self, cx: &mut Cx<'_>, emit: &mut Emit) {
        self.queue.start();
        let mut n = 0;
        while n < INJECT_BUDGET
            && let Some(pkt) = self.queue.pop()
        {
            n += 1;
            let next = match pkt.first().map(|b| b >> 4) {
                Some(4) => IpInjectNext::Ip4,
                Some(6) => IpInjectNext::Ip6,
                _ => {
                    cx.count(IpInjectError::Bad, 1);
                    continue;
                }
            };
            let Some(p) = cx.pool.alloc_from(&pkt) else {
                cx.count(IpInjectError::NoBuffer, 1);
                continue;
            };
            let m = cx.pool.meta_mut(p);
            m.l3_off = 0;
            m.vlan = 0;
            m.rx_if = crate::state::NO_IF;
            m.flags |= flags::LOCAL_ORIGIN;
            if next == IpInjectNext::Ip6 {
                m.flags |= flags::IPV6;
            }
            cx.count(IpInjectError::Injected, 1);
            emit.push(p, next as u16);
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("socket address")
    }

    #[test]
    fn udp_packet_v4_checksums_verify() {
        let pkt = udp_packet(sa("10.0.1.1:500"), sa("10.0.1.2:4501"), b"hello ike", 7).expect("v4");
        assert_eq!(pkt.len(), 20 + 8 + 9);
        let ip = tern_wire::Ipv4Packet::new_checked(&pkt[..]).expect("valid header");
        assert!(ip.verify_checksum());
        assert_eq!(ip.ident(), 7);
        assert_eq!(ip.ttl(), 64);
        let udp = &pkt[20..];
        assert_eq!(&udp[..4], &[0x01, 0xf4, 0x11, 0x95]);
        let ph = checksum::pseudo_header_v4(
            "10.0.1.1".parse().expect("a"),
            "10.0.1.2".parse().expect("a"),
            IpProtocol::UDP,
            17,
        );
        assert_eq!(checksum::add(ph, checksum::data(udp)), 0xffff);
        assert_eq!(&udp[8..], b"hello ike");
    }

    #[test]
    fn udp_packet_v6_checksums_verify() {
        let pkt = udp_packet(sa("[2001:db8::1]:4500"), sa("[2001:db8::2]:4500"), &[0, 0, 0, 0, 1], 0).expect("v6");
        assert_eq!(pkt.len(), 40 + 8 + 5);
        assert_eq!(pkt[6], 17);
        assert_eq!(u16::from_be_bytes([pkt[4], pkt[5]]), 13);
        let ph = checksum::pseudo_header_v6(
            "2001:db8::1".parse().expect("a"),
            "2001:db8::2".parse().expect("a"),
            IpProtocol::UDP,
            13,
        );
        assert_eq!(checksum::add(ph, checksum::data(&pkt[40..])), 0xffff);
    }

    #[test]
    fn udp_packet_refuses_mixed_families_and_giants() {
        assert!(udp_packet(sa("10.0.1.1:500"), sa("[2001:db8::2]:500"), b"x", 0).is_none());
        assert!(udp_packet(sa("10.0.1.1:500"), sa("10.0.1.2:500"), &vec![0; 65_520], 0).is_none());
    }

    #[test]
    fn classify_ports_marker_and_keepalive() {
        let udp = |dport: u16, payload: &[u8]| {
            let mut u = vec![0x11, 0x94];
            u.extend_from_slice(&dport.to_be_bytes());
            u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            u.extend_from_slice(&[0, 0]);
            u.extend_from_slice(payload);
            u
        };
        assert_eq!(classify(&udp(500, b"ike")), Some(IkeKind::Message { skip: 0 }));
        assert_eq!(classify(&udp(500, b"")), Some(IkeKind::Message { skip: 0 }));
        assert_eq!(classify(&udp(4500, &[0, 0, 0, 0, 9])), Some(IkeKind::Message { skip: 4 }));
        assert_eq!(classify(&udp(4500, &[0xff])), Some(IkeKind::Keepalive));
        assert_eq!(classify(&udp(4500, &[0, 0, 1, 0, 0, 0, 0, 1])), None, "ESP in UDP");
        assert_eq!(classify(&udp(4500, &[0, 0])), None, "too short for the marker");
        assert_eq!(classify(&udp(53, b"dns")), None);
        assert_eq!(classify(&[0, 1, 2]), None, "truncated header");
        let d = datagram(
            "10.0.1.1".parse().expect("a"),
            "10.0.1.2".parse().expect("a"),
            3,
            &udp(4500, &[0, 0, 0, 0, 7, 8]),
            4,
        )
        .expect("datagram");
        assert_eq!(d.local, sa("10.0.1.1:4500"));
        assert_eq!(d.remote, sa("10.0.1.2:4500"));
        assert_eq!(d.ifindex, 3);
        assert_eq!(d.message, vec![7, 8]);
        // Ethernet padding after the datagram is no part of it.
        let mut padded = udp(500, b"ab");
        padded.extend_from_slice(&[0; 6]);
        let d = datagram("10.0.1.1".parse().expect("a"), "10.0.1.2".parse().expect("a"), 0, &padded, 0).expect("d");
        assert_eq!(d.message, b"ab".to_vec());
    }
}
