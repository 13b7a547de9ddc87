//! Small pieces the exchanges share: DH group numbers, NAT detection
//! hashes (RFC 7296 2.23), traffic selector narrowing (2.9), address pools.

use crate::config::TrafficSelector;
use crate::proposal::{DhGroup, Proposal};
use sha1::{Digest, Sha1};
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// IANA transform ID of a DH group.
pub fn group_id(g: DhGroup) -> u16 {
    match g {
        DhGroup::Modp2048 => 14,
        DhGroup::Modp3072 => 15,
        DhGroup::Modp4096 => 16,
        DhGroup::Ecp256 => 19,
        DhGroup::Ecp384 => 20,
        DhGroup::Curve25519 => 31,
    }
}

pub fn group_from_id(id: u16) -> Option<DhGroup> {
    Some(match id {
        14 => DhGroup::Modp2048,
        15 => DhGroup::Modp3072,
        16 => DhGroup::Modp4096,
        19 => DhGroup::Ecp256,
        20 => DhGroup::Ecp384,
        31 => DhGroup::Curve25519,
        _ => return None,
    })
}

/// Whether one of `proposals` lists `g`.
pub fn offers_group(proposals: &[Proposal], g: DhGroup) -> bool {
    proposals.iter().any(|p| p.dh.contains(&g))
}

/// The group a first KE uses: the first of the first proposal.
pub fn first_group(proposals: &[Proposal]) -> Option<DhGroup> {
    proposals.iter().find_map(|p| p.dh.first().copied())
}

/// ESP proposals as IKE_AUTH carries them: no DH (its KE is the IKE SA's).
pub fn without_dh(proposals: &[Proposal]) -> Vec<Proposal> {
    proposals.iter().map(|p| Proposal { dh: Vec::new(), ..p.clone() }).collect()
}

/// NAT_DETECTION_*_IP data: SHA-1(SPIi | SPIr | IP | port).
pub fn nat_hash(spi_i: u64, spi_r: u64, addr: SocketAddr) -> Vec<u8> {
    let mut h = Sha1::new();
    h.update(spi_i.to_be_bytes());
    h.update(spi_r.to_be_bytes());
    match addr.ip() {
        IpAddr::V4(a) => h.update(a.octets()),
        IpAddr::V6(a) => h.update(a.octets()),
    }
    h.update(addr.port().to_be_bytes());
    h.finalize().to_vec()
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

/// The intersection of two selectors, if any.
pub fn intersect(a: &TrafficSelector, b: &TrafficSelector) -> Option<TrafficSelector> {
    if !same_family(a.start, b.start) || !same_family(a.end, b.end) || !same_family(a.start, a.end) {
        return None;
    }
    let protocol = match (a.protocol, b.protocol) {
        (0, p) | (p, 0) => p,
        (p, q) if p == q => p,
        _ => return None,
    };
    let start = a.start.max(b.start);
    let end = a.end.min(b.end);
    let start_port = a.start_port.max(b.start_port);
    let end_port = a.end_port.min(b.end_port);
    if start > end || start_port > end_port {
        return None;
    }
    Some(TrafficSelector { start, end, protocol, start_port, end_port })
}

/// Narrows the peer's selectors to ours (RFC 7296 2.9): every non-empty
/// intersection, in the peer's order; empty means TS_UNACCEPTABLE.
pub fn narrow(theirs: &[TrafficSelector], ours: &[TrafficSelector]) -> Vec<TrafficSelector> {
    let mut out = Vec::new();
    for t in theirs {
        for o in ours {
            if let Some(i) = intersect(t, o)
                && !out.contains(&i)
            {
                out.push(i);
            }
        }
    }
    out
}

/// The configured selectors, or "any" of both families when none are.
pub fn or_any(ts: &[TrafficSelector]) -> Vec<TrafficSelector> {
    if ts.is_empty() { vec![TrafficSelector::any(false), TrafficSelector::any(true)] } else { ts.to_vec() }
}

/// A virtual IP pool (first..=last): addresses handed out, a cursor.
#[derive(Debug)]
pub struct Pool {
    pub first: IpAddr,
    pub last: IpAddr,
    pub used: HashSet<IpAddr>,
    cursor: u128,
}

fn to_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn from_u128(v6: bool, v: u128) -> IpAddr {
    if v6 { IpAddr::V6(Ipv6Addr::from(v)) } else { IpAddr::V4(Ipv4Addr::from(u32::try_from(v).unwrap_or(u32::MAX))) }
}

impl Pool {
    pub fn new(first: IpAddr, last: IpAddr) -> Pool {
        Pool { first, last, used: HashSet::new(), cursor: 0 }
    }

    pub fn v6(&self) -> bool {
        self.first.is_ipv6()
    }

    /// A free address, or `None` when all are taken.
    pub fn allocate(&mut self) -> Option<IpAddr> {
        let (f, l) = (to_u128(self.first), to_u128(self.last));
        if l < f || self.first.is_ipv6() != self.last.is_ipv6() {
            return None;
        }
        let size = l - f + 1;
        // Bounded: a full pool is found out after `used.len()` probes.
        for _ in 0..=self.used.len().min(usize::try_from(size).unwrap_or(usize::MAX)) {
            let a = from_u128(self.v6(), f + self.cursor % size);
            self.cursor = (self.cursor + 1) % size;
            if self.used.insert(a) {
                return Some(a);
            }
        }
        None
    }

    pub fn free(&mut self, a: IpAddr) {
        self.used.remove(&a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(a: &str, b: &str) -> TrafficSelector {
        TrafficSelector {
            start: a.parse().unwrap(),
            end: b.parse().unwrap(),
            protocol: 0,
            start_port: 0,
            end_port: 65535,
        }
    }

    #[test]
    fn narrowing() {
        let theirs = [TrafficSelector::any(false), TrafficSelector::any(true)];
        let ours = [ts("10.0.0.0", "10.0.0.255")];
        assert_eq!(narrow(&theirs, &ours), vec![ts("10.0.0.0", "10.0.0.255")]);
        assert!(narrow(&[ts("10.1.0.0", "10.1.0.255")], &ours).is_empty());
        let mut tcp = ts("10.0.0.5", "10.0.0.5");
        tcp.protocol = 6;
        assert_eq!(narrow(&[tcp], &ours), vec![tcp]);
        let mut udp = ours[0];
        udp.protocol = 17;
        assert!(narrow(&[tcp], &[udp]).is_empty());
    }

    #[test]
    fn pool_allocates_and_frees() {
        let mut p = Pool::new("10.9.0.1".parse().unwrap(), "10.9.0.2".parse().unwrap());
        let a = p.allocate().unwrap();
        let b = p.allocate().unwrap();
        assert_ne!(a, b);
        assert_eq!(p.allocate(), None);
        p.free(a);
        assert_eq!(p.allocate(), Some(a));
    }

    #[test]
    fn nat_hash_depends_on_every_field() {
        let a: SocketAddr = "192.0.2.1:500".parse().unwrap();
        let h = nat_hash(1, 2, a);
        assert_eq!(h.len(), 20);
        assert_ne!(h, nat_hash(1, 3, a));
        assert_ne!(h, nat_hash(1, 2, "192.0.2.1:4500".parse().unwrap()));
        assert_ne!(h, nat_hash(1, 2, "192.0.2.2:500".parse().unwrap()));
    }
}
