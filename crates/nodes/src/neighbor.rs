//! `ip4-glean` and `ip6-glean`: packets whose next hop has no link-layer
//! address yet.
//!
//! A packet waits in a bounded per-destination queue while the node sends
//! ARP requests (RFC 826) or neighbour solicitations (RFC 4861 7.2.2) at
//! most once per retry interval. The control thread owns the neighbour
//! table: when an answer arrives it installs the MAC and bumps a generation
//! counter; this node then sends everything it holds back to the lookup.
//! After `neigh_max_tries` unanswered requests the waiting packets are
//! dropped and counted, and the destination is left alone for one retry
//! interval.
//!
//! Next nodes: `ip4-lookup` / `ip6-lookup` (released packets), `drop`.
//! Counters: [`GleanError::DESCS`].

use crate::state::{IfTable, Iface, Params, Shared};
use crate::util::*;
use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tern_engine::{Cx, Emit, ErrorDesc, NEXT_TAKEN, Node};
use tern_fib::{FibReader, NhKind};
use tern_packet::PktIdx;
use tern_rcu::Snapshot;
use tern_wire::arp::HTYPE_ETHERNET;
use tern_wire::{ArpOperation, ArpPacket, EtherType, EthernetAddress, IpProtocol, checksum};

tern_engine::errors! {
    /// The counters of `ip4-glean` and `ip6-glean`.
    pub enum GleanError {
        QueueFull = drop("queue-full", "too many packets waiting for address resolution"),
        Timeout = drop("resolution-timeout", "neighbour did not answer; waiting packets dropped"),
        Failed = drop("resolution-failed", "neighbour recently failed to answer"),
        Request = info("request-sent", "ARP requests / neighbour solicitations sent"),
        NoBuffer = info("no-buffer", "no buffer to build a request"),
        NoSource = info("no-source-address", "no address on the interface to ask from"),
        BadNh = drop("bad-nexthop", "next hop is not resolvable"),
        Released = info("released", "packets sent on after resolution"),
    }
}

tern_engine::edges! {
    /// The next nodes of `ip4-glean` (table 0) and `ip6-glean` (table 1).
    pub enum GleanNext {
        Drop = ["drop", "drop"],
        Lookup = ["ip4-lookup", "ip6-lookup"],
    }
}

/// How often held packets are checked for timeouts.
const SWEEP_NS: u64 = 50_000_000;

type Key = (u16, u128);

struct Request {
    last_ns: u64,
    tries: u32,
}

/// The glean node of one address family.
pub struct Glean {
    v6: bool,
    fib: FibReader,
    ifs: Snapshot<IfTable>,
    params: Snapshot<Params>,
    neigh_gen: Arc<AtomicU64>,
    seen_gen: u64,
    waiting: HashMap<Key, VecDeque<PktIdx>>,
    total: usize,
    requests: HashMap<Key, Request>,
    last_sweep_ns: u64,
}

impl Glean {
    pub fn new(shared: &Shared, v6: bool) -> Self {
        Glean {
            v6,
            fib: shared.fib.clone(),
            ifs: shared.ifaces.snapshot(),
            params: shared.params.snapshot(),
            neigh_gen: Arc::clone(&shared.neigh_gen),
            seen_gen: shared.neigh_gen.load(Ordering::Acquire),
            waiting: HashMap::new(),
            total: 0,
            requests: HashMap::new(),
            last_sweep_ns: 0,
        }
    }

    /// Number of packets held.
    pub fn held(&self) -> usize {
        self.total
    }

    fn target(&self, cx: &Cx<'_>, p: PktIdx) -> Option<Key> {
        let nh = self.fib.nexthop(cx.pool.meta(p).nh);
        let ip = match nh.kind {
            NhKind::Unicast => match nh.gw {
                std::net::IpAddr::V4(a) => u128::from(u32::from(a)),
                std::net::IpAddr::V6(a) => u128::from(a),
            },
            NhKind::Glean => {
                let m = cx.pool.meta(p);
                let d = cx.pool.data(p);
                let l3 = m.l3_off as usize;
                if self.v6 { be128(d, l3 + 24) } else { u128::from(be32(d, l3 + 16)) }
            }
            _ => return None,
        };
        Some((nh.ifindex, ip))
    }

    fn send_request(&self, cx: &mut Cx<'_>, key: Key) {
        let Some(iface) = self.ifs.current().get(key.0) else { return };
        let frame: Option<Vec<u8>> = if self.v6 {
            ns_frame(iface, Ipv6Addr::from(key.1))
        } else {
            let target = Ipv4Addr::from(key.1 as u32);
            iface.v4_source_for(target).map(|src| arp_request_frame(iface, src, target))
        };
        let Some(frame) = frame else {
            cx.count(GleanError::NoSource, 1);
            return;
        };
        let Some(p) = cx.pool.alloc_from(&frame) else {
            cx.count(GleanError::NoBuffer, 1);
            return;
        };
        match cx.tx.get_mut(iface.port as usize) {
            Some(q) => {
                q.push(p);
                cx.count(GleanError::Request, 1);
            }
            None => cx.pool.free(p),
        }
    }
}

impl Node for Glean {
    fn name(&self) -> &'static str {
        if self.v6 { "ip6-glean" } else { "ip4-glean" }
    }
    fn nexts(&self) -> &'static [&'static str] {
        GleanNext::names(usize::from(self.v6))
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        GleanError::DESCS
    }
    fn wants_poll(&self) -> bool {
        true
    }

    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        self.params.refresh();
        let now = cx.now_ns;
        let (retry, per_dest, total_max, max_tries) = (
            self.params.neigh_retry_ns,
            self.params.neigh_queue_per_dest,
            self.params.neigh_queue_total,
            self.params.neigh_max_tries,
        );
        for (o, &p) in next.iter_mut().zip(pkts) {
            let Some(key) = self.target(cx, p) else {
                *o = cx.drop(p, GleanError::BadNh);
                continue;
            };
            let req = self.requests.entry(key).or_insert(Request { last_ns: 0, tries: 0 });
            if req.tries >= max_tries {
                if now.saturating_sub(req.last_ns) < retry {
                    *o = cx.drop(p, GleanError::Failed);
                    continue;
                }
                req.tries = 0;
            }
            let q = self.waiting.entry(key).or_default();
            if q.len() >= per_dest || self.total >= total_max {
                *o = cx.drop(p, GleanError::QueueFull);
                continue;
            }
            q.push_back(p);
            self.total += 1;
            *o = NEXT_TAKEN;
            let send = req.last_ns == 0 || now.saturating_sub(req.last_ns) >= retry;
            if send {
                req.last_ns = now;
                req.tries += 1;
            }
            cx.trace_note(p, || format!("waiting for {} on interface {}", fmt_ip(self.v6, key.1), key.0));
            if send {
                self.send_request(cx, key);
            }
        }
    }

    /// Packets waiting for an answer are retried and timed out by `poll`.
    fn timers_pending(&self) -> bool {
        !self.waiting.is_empty()
    }

    fn poll(&mut self, cx: &mut Cx<'_>, emit: &mut Emit) {
        let g = self.neigh_gen.load(Ordering::Acquire);
        if g != self.seen_gen {
            self.seen_gen = g;
            let mut released = 0;
            for (_, q) in self.waiting.drain() {
                for p in q {
                    emit.push(p, GleanNext::Lookup as u16);
                    released += 1;
                }
            }
            self.total = 0;
            cx.count(GleanError::Released, released);
        }
        let now = cx.now_ns;
        if now.saturating_sub(self.last_sweep_ns) < SWEEP_NS {
            return;
        }
        self.last_sweep_ns = now;
        self.ifs.refresh();
        self.params.refresh();
        let (retry, max_tries) = (self.params.neigh_retry_ns, self.params.neigh_max_tries);
        let keys: Vec<Key> = self.waiting.keys().copied().collect();
        for key in keys {
            let Some(req) = self.requests.get_mut(&key) else { continue };
            if now.saturating_sub(req.last_ns) < retry {
                continue;
            }
            if req.tries >= max_tries {
                req.last_ns = now;
                if let Some(q) = self.waiting.remove(&key) {
                    self.total -= q.len();
                    for p in q {
                        emit.push(p, cx.drop(p, GleanError::Timeout));
                    }
                }
            } else {
                req.last_ns = now;
                req.tries += 1;
                self.send_request(cx, key);
            }
        }
        self.waiting.retain(|_, q| !q.is_empty());
        // Forget old request state so the map stays small.
        let waiting = &self.waiting;
        self.requests.retain(|k, r| waiting.contains_key(k) || now.saturating_sub(r.last_ns) < 10 * retry);
    }
}

fn fmt_ip(v6: bool, ip: u128) -> String {
    if v6 { Ipv6Addr::from(ip).to_string() } else { Ipv4Addr::from(ip as u32).to_string() }
}

/// A broadcast ARP request for `target` (RFC 826), padded to 60 bytes.
pub fn arp_request_frame(iface: &Iface, src: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let l2 = iface.l2_len();
    let mut f = vec![0u8; (l2 + 28).max(60)];
    write_l2(&mut f, BROADCAST_MAC, iface, ETH_P_ARP);
    if let Some(a) = f.get_mut(l2..l2 + 28) {
        // 28 bytes: the view's writes are in bounds.
        let mut a = ArpPacket::new_unchecked(a);
        a.set_hardware_type(HTYPE_ETHERNET);
        a.set_protocol_type(EtherType::IPV4);
        a.set_hardware_len(6);
        a.set_protocol_len(4);
        a.set_operation(ArpOperation::REQUEST);
        a.set_source_hardware_addr(EthernetAddress(iface.mac));
        a.set_source_protocol_addr(src);
        a.set_target_protocol_addr(target);
    }
    f
}

/// A unicast ARP request (a probe that refreshes a known neighbour).
pub fn arp_probe_frame(iface: &Iface, src: Ipv4Addr, target: Ipv4Addr, mac: [u8; 6]) -> Vec<u8> {
    let mut f = arp_request_frame(iface, src, target);
    if let Some(dst) = f.first_chunk_mut::<6>() {
        *dst = mac;
    }
    f
}

/// A neighbour solicitation for `target` (RFC 4861 4.3, 7.2.2): to its
/// solicited-node group, hop limit 255, with our link-layer address.
/// `None` when the interface has no usable source address.
pub fn ns_frame(iface: &Iface, target: Ipv6Addr) -> Option<Vec<u8>> {
    ns_frame_to(iface, target, None)
}

/// A neighbour solicitation sent to `mac`/`target` directly (unicast probe)
/// or, with `None`, to the solicited-node group.
pub fn ns_frame_to(iface: &Iface, target: Ipv6Addr, unicast: Option<[u8; 6]>) -> Option<Vec<u8>> {
    let src = iface.v6_source_for(target);
    if src.is_unspecified() {
        return None;
    }
    let t = target.octets();
    let (dst_ip, dst_mac) = match unicast {
        Some(mac) => (target, mac),
        None => (
            Ipv6Addr::from([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, t[13], t[14], t[15]]),
            [0x33, 0x33, 0xff, t[13], t[14], t[15]],
        ),
    };
    let l2 = iface.l2_len();
    let mut f = vec![0u8; l2 + 40 + 32];
    write_l2(&mut f, dst_mac, iface, ETH_P_IPV6);
    let (l3, icmp) = f.get_mut(l2..)?.split_first_chunk_mut::<40>()?;
    let icmp = icmp.first_chunk_mut::<32>()?;
    l3[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 32, 58, 255]);
    l3[8..24].copy_from_slice(&src.octets());
    l3[24..40].copy_from_slice(&dst_ip.octets());
    icmp[0] = 135;
    icmp[8..24].copy_from_slice(&t);
    icmp[24] = 1;
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&iface.mac);
    let c = !checksum::add(checksum::pseudo_header_v6(src, dst_ip, IpProtocol::ICMPV6, 32), checksum::data(icmp));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    Some(f)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::state::IfKind;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    /// The ARP request and its unicast probe, byte for byte (RFC 826).
    #[test]
    fn arp_request_and_probe_frames() {
        let iface = Iface::new(0, "lan", IfKind::Port, 0, MAC);
        let f = arp_request_frame(&iface, Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 1, 2));
        let mut want = vec![0xff; 6];
        want.extend(MAC);
        want.extend([0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
        want.extend(MAC);
        want.extend([10, 0, 1, 1, 0, 0, 0, 0, 0, 0, 10, 0, 1, 2]);
        want.resize(60, 0);
        assert_eq!(f, want);
        let peer = [2, 0, 0, 0, 0, 9];
        let probe = arp_probe_frame(&iface, Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 1, 2), peer);
        assert_eq!(probe[..6], peer);
        assert_eq!(probe[6..], want[6..]);
    }

    /// A neighbour solicitation to the solicited-node group: addresses,
    /// hop limit 255, the target and our link-layer address option, and a
    /// checksum that verifies over the pseudo-header.
    #[test]
    fn ns_frame_to_the_solicited_node_group() {
        let mut iface = Iface::new(0, "lan", IfKind::Port, 0, MAC);
        iface.v6_ll = crate::state::link_local_from_mac(MAC);
        let target: Ipv6Addr = "fe80::1:2:3".parse().expect("addr");
        let f = ns_frame(&iface, target).expect("a source address");
        assert_eq!(f.len(), 14 + 40 + 32);
        assert_eq!(f[..6], [0x33, 0x33, 0xff, 0x02, 0x00, 0x03]);
        assert_eq!(f[14..22], [0x60, 0, 0, 0, 0, 32, 58, 255]);
        let src = Ipv6Addr::from(<[u8; 16]>::try_from(&f[22..38]).expect("16"));
        let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&f[38..54]).expect("16"));
        assert_eq!(src, iface.v6_ll);
        assert_eq!(dst, "ff02::1:ff02:3".parse::<Ipv6Addr>().expect("addr"));
        let icmp = &f[54..];
        assert_eq!((icmp[0], icmp[1]), (135, 0));
        assert_eq!(icmp[8..24], target.octets());
        assert_eq!(icmp[24..32], [1, 1, 2, 0, 0, 0, 0, 1]);
        let sum = checksum::add(checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, 32), checksum::data(icmp));
        assert_eq!(sum, 0xffff);
    }
}
