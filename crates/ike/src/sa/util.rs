//! Small pieces the exchanges share: DH group numbers, NAT detection
//! hashes (RFC 7296 2.23), traffic selector narrowing (2.9), address pools.

use crate::config::TrafficSelector;
use crate::proposal::{DhGroup, Proposal};
use sha1::{Digest, Sha1};
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

/// The most addresses a pool hands out (its first ones): 2^24, a bitmap of
/// at most 2 MiB. A larger range (an IPv6 /64) is more than a responder
/// holds tunnels.
pub const POOL_MAX: u64 = 1 << 24;

/// A virtual IP pool (first..=last): the addresses handed out, one bit
/// each by their offset from `first`, and a cursor that goes round the
/// range so an address just freed is not handed out again at once.
///
/// The bitmap grows with the highest offset handed out (past its end all
/// are free): a million clients of a /10 cost 128 KiB, where a set of
/// addresses cost 36 bytes each.
#[derive(Debug)]
pub struct Pool {
    pub first: IpAddr,
    pub last: IpAddr,
    used: Vec<u64>,
    /// Addresses handed out and not freed.
    in_use: u64,
    /// The next offset to try (below `size`).
    cursor: u64,
    /// Addresses it hands out (0: an unusable range).
    size: u64,
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
        let (f, l) = (to_u128(first), to_u128(last));
        let size = if l < f || first.is_ipv6() != last.is_ipv6() {
            0
        } else {
            u64::try_from(l - f).map_or(POOL_MAX, |d| d.saturating_add(1).min(POOL_MAX))
        };
        Pool { first, last, used: Vec::new(), in_use: 0, cursor: 0, size }
    }

    pub fn v6(&self) -> bool {
        self.first.is_ipv6()
    }

    fn word(&self, off: u64) -> u64 {
        usize::try_from(off / 64).ok().and_then(|w| self.used.get(w)).copied().unwrap_or(0)
    }

    /// Sets or clears one offset's bit (below `size`, so its word index
    /// fits: at most 2^18).
    fn set(&mut self, off: u64, on: bool) {
        let Ok(w) = usize::try_from(off / 64) else { return };
        if self.used.len() <= w {
            if !on {
                return;
            }
            self.used.resize(w + 1, 0);
        }
        if let Some(word) = self.used.get_mut(w) {
            let bit = 1u64 << (off % 64);
            if on { *word |= bit } else { *word &= !bit }
        }
    }

    /// A free address, or `None` when all are taken.
    pub fn allocate(&mut self) -> Option<IpAddr> {
        if self.in_use >= self.size {
            return None;
        }
        // A free offset exists: from the cursor to the end of the range,
        // then from 0, each word looked at once (the loop's bound).
        let words = self.size.div_ceil(64);
        let mut off = self.cursor;
        for _ in 0..=words + 1 {
            // The bits below `off` in its word count as taken.
            let below = (1u64 << (off % 64)) - 1;
            let free = !(self.word(off) | below);
            if free != 0 {
                let at = off - off % 64 + u64::from(free.trailing_zeros());
                if at < self.size {
                    self.set(at, true);
                    self.in_use += 1;
                    self.cursor = (at + 1) % self.size;
                    return Some(from_u128(self.v6(), to_u128(self.first) + u128::from(at)));
                }
            }
            off = off - off % 64 + 64;
            if off >= self.size {
                off = 0;
            }
        }
        None
    }

    /// Gives an address back (one not handed out, or not of this pool, is
    /// ignored).
    pub fn free(&mut self, a: IpAddr) {
        if a.is_ipv6() != self.v6() {
            return;
        }
        let Some(off) = to_u128(a).checked_sub(to_u128(self.first)).and_then(|d| u64::try_from(d).ok()) else {
            return;
        };
        if off < self.size && self.word(off) & (1u64 << (off % 64)) != 0 {
            self.set(off, false);
            self.in_use -= 1;
        }
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

    /// Every address once, in order, across bitmap words; none when all
    /// are taken; a freed one comes back only after the cursor went round;
    /// what is not the pool's is ignored.
    #[test]
    fn pool_bitmap_hands_out_each_address_once() {
        let mut p = Pool::new("10.9.0.0".parse().unwrap(), "10.9.0.199".parse().unwrap());
        let got: Vec<IpAddr> = std::iter::from_fn(|| p.allocate()).collect();
        assert_eq!(got.len(), 200);
        assert_eq!(got.first(), Some(&"10.9.0.0".parse().unwrap()));
        assert_eq!(got.last(), Some(&"10.9.0.199".parse().unwrap()));
        let set: std::collections::HashSet<IpAddr> = got.iter().copied().collect();
        assert_eq!(set.len(), 200);
        assert_eq!(p.in_use, 200);
        p.free("10.9.0.130".parse().unwrap());
        p.free("10.9.0.130".parse().unwrap());
        p.free("10.9.1.0".parse().unwrap());
        p.free("::1".parse().unwrap());
        assert_eq!(p.in_use, 199);
        assert_eq!(p.allocate(), Some("10.9.0.130".parse().unwrap()));
        assert_eq!(p.allocate(), None);
        // Round robin: with room, the cursor goes on before reusing.
        p.free("10.9.0.5".parse().unwrap());
        p.free("10.9.0.150".parse().unwrap());
        assert_eq!(p.allocate(), Some("10.9.0.150".parse().unwrap()));
        assert_eq!(p.allocate(), Some("10.9.0.5".parse().unwrap()));
    }

    /// An IPv6 /64 is capped, its bitmap grows with what is handed out, and
    /// unusable ranges hand out nothing.
    #[test]
    fn pool_bitmap_large_and_unusable_ranges() {
        let mut p = Pool::new("fd00::1".parse().unwrap(), "fd00::ffff:ffff:ffff:ffff".parse().unwrap());
        for _ in 0..1000 {
            assert!(p.allocate().is_some_and(|a| a.is_ipv6()));
        }
        assert_eq!(p.allocate(), Some("fd00::3e9".parse().unwrap()));
        assert!(p.used.len() <= 16, "{} words for 1,001 addresses", p.used.len());
        assert_eq!(p.size, POOL_MAX);
        assert_eq!(Pool::new("10.0.0.2".parse().unwrap(), "10.0.0.1".parse().unwrap()).allocate(), None);
        assert_eq!(Pool::new("10.0.0.1".parse().unwrap(), "::2".parse().unwrap()).allocate(), None);
        let mut one = Pool::new("10.0.0.1".parse().unwrap(), "10.0.0.1".parse().unwrap());
        assert_eq!(one.allocate(), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(one.allocate(), None);
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
