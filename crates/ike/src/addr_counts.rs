//! IKE SAs established per peer address (`[ike_service]
//! max_sas_per_peer`): on a remote-access responder, a million clients
//! from a million addresses are a million entries. A `std` map of
//! `IpAddr -> u32` took 24 bytes an entry and a control byte, at 2^21
//! buckets for a million (hashbrown holds 7/8: 48 % full), 52 bytes a
//! client; here a `tern_ipsec::table::Table` of 24-byte slots (the
//! address as (family, IPv6 or IPv4-mapped), a count that is never 0),
//! 60-75 % full: about 35 bytes (`tests::bytes_a_client_at_a_million`).
//! The addresses are those of authenticated peers only (the half-open
//! counts, before authentication, stay in a keyed `std` map).

use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use tern_ipsec::table::Table;

fn key(a: IpAddr) -> (u16, Ipv6Addr) {
    match a {
        IpAddr::V4(v4) => (4, v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => (6, v6),
    }
}

/// Counts by address (see the module).
#[derive(Default, Debug)]
pub(crate) struct AddrCounts {
    map: Table<(u16, Ipv6Addr), NonZeroU32>,
}

impl AddrCounts {
    pub(crate) fn get(&self, a: IpAddr) -> u32 {
        self.map.get(&key(a)).map_or(0, |n| n.get())
    }

    pub(crate) fn add(&mut self, a: IpAddr) {
        let k = key(a);
        match self.map.get_mut(&k) {
            Some(n) => *n = n.saturating_add(1),
            None => {
                self.map.insert(k, NonZeroU32::MIN);
            }
        }
    }

    /// One fewer for `a`; the address goes at 0.
    pub(crate) fn sub(&mut self, a: IpAddr) {
        let k = key(a);
        let Some(n) = self.map.get_mut(&k) else { return };
        match NonZeroU32::new(n.get() - 1) {
            Some(less) => *n = less,
            None => {
                self.map.remove(&k);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn counts_per_address_and_family() {
        let mut c = AddrCounts::default();
        let v4 = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
        let mapped = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 7).to_ipv6_mapped());
        c.add(v4);
        c.add(v4);
        c.add(mapped);
        assert_eq!((c.get(v4), c.get(mapped)), (2, 1), "an IPv4 peer is not its mapped IPv6 address");
        c.sub(v4);
        c.sub(mapped);
        assert_eq!((c.get(v4), c.get(mapped), c.len()), (1, 0, 1));
        c.sub(v4);
        c.sub(v4);
        assert_eq!((c.get(v4), c.len()), (0, 0));
    }

    #[test]
    fn bytes_a_client_at_a_million() {
        assert_eq!(std::mem::size_of::<Option<((u16, Ipv6Addr), NonZeroU32)>>(), 24);
        let mut c = AddrCounts::default();
        let n = 1_000_000u32;
        for i in 0..n {
            c.add(IpAddr::V4(Ipv4Addr::from(0x6440_0000 + i)));
        }
        let per = (c.map.capacity() * 24) as f64 / f64::from(n);
        let std_map = ((1usize << 21) * 25) as f64 / f64::from(n);
        println!("established per address at 1M: {per:.1} B a client (std map: {std_map:.1})");
        assert!(per <= 40.0 && std_map - per >= 12.0, "{per} vs {std_map}");
        assert_eq!(c.get(IpAddr::V4(Ipv4Addr::from(0x6440_0000 + 77))), 1);
    }
}
