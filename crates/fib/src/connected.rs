//! The connected subnets (prefix -> interface) the writer resolves
//! gateways and neighbours against.
//!
//! A prefix whose best connected route names an interface is one entry.
//! Host routes to a tunnel (a remote-access client's /32 or /128,
//! `RouteTarget::Connected`) are entries too, one per client, so this must
//! not cost per change what the number of entries is: it was a `Vec`
//! kept sorted longest first, retained and re-sorted on every change,
//! which made adding N such routes O(N^2) (100K: 5 s, 1M: over 5 min).
//! Now a hash map by prefix and a count of entries per (family, length):
//! a change is O(1), a lookup tries each length present, longest first
//! (at most 33 or 129 probes, in practice a handful).

use std::collections::HashMap;
use std::net::IpAddr;

use rustc_hash::FxBuildHasher;

use crate::prefix::Prefix;

#[derive(Default)]
pub(crate) struct Connected {
    map: HashMap<Prefix, u16, FxBuildHasher>,
    /// Entries per prefix length, IPv4 (0..=32).
    v4_lens: Lens<33>,
    /// Entries per prefix length, IPv6 (0..=128).
    v6_lens: Lens<129>,
}

/// How many entries there are of each length, and which lengths have any.
struct Lens<const N: usize> {
    count: [u32; N],
    /// Bit `len` set when `count[len] > 0` (three words: lengths to 191).
    present: [u64; 3],
}

impl<const N: usize> Default for Lens<N> {
    fn default() -> Self {
        Lens { count: [0; N], present: [0; 3] }
    }
}

impl<const N: usize> Lens<N> {
    fn add(&mut self, len: u8) {
        let l = usize::from(len);
        if let Some(c) = self.count.get_mut(l) {
            *c += 1;
            self.present[l / 64] |= 1 << (l % 64);
        }
    }

    fn sub(&mut self, len: u8) {
        let l = usize::from(len);
        if let Some(c) = self.count.get_mut(l) {
            *c = c.saturating_sub(1);
            if *c == 0 {
                self.present[l / 64] &= !(1 << (l % 64));
            }
        }
    }

    /// The lengths that have entries, longest first.
    fn longest_first(&self) -> impl Iterator<Item = u8> + '_ {
        (0..3usize).rev().flat_map(move |w| {
            let mut bits = self.present[w];
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = 63 - bits.leading_zeros();
                bits &= !(1u64 << b);
                // At most 2 * 64 + 63 = 191: fits a u8.
                u8::try_from(w * 64 + b as usize).ok()
            })
        })
    }
}

impl Connected {
    /// Makes `p` connected to `ifindex`, or not connected (`None`).
    pub(crate) fn set(&mut self, p: Prefix, ifindex: Option<u16>) {
        let had = match ifindex {
            Some(i) => self.map.insert(p, i).is_some(),
            None => self.map.remove(&p).is_some(),
        };
        let len = p.len();
        match (had, ifindex.is_some(), p.is_v4()) {
            (false, true, true) => self.v4_lens.add(len),
            (false, true, false) => self.v6_lens.add(len),
            (true, false, true) => self.v4_lens.sub(len),
            (true, false, false) => self.v6_lens.sub(len),
            _ => {}
        }
    }

    /// The connected subnets holding `addr`, longest first.
    fn containing(&self, addr: IpAddr) -> impl Iterator<Item = u16> + '_ {
        let lens: Box<dyn Iterator<Item = u8> + '_> = match addr {
            IpAddr::V4(_) => Box::new(self.v4_lens.longest_first()),
            IpAddr::V6(_) => Box::new(self.v6_lens.longest_first()),
        };
        lens.filter_map(move |len| self.map.get(&Prefix::new_truncated(addr, len)?).copied())
    }

    /// The interface of the longest connected subnet holding `addr`.
    pub(crate) fn lookup(&self, addr: IpAddr) -> Option<u16> {
        self.containing(addr).next()
    }

    /// True if some connected subnet of `ifindex` holds `addr`.
    pub(crate) fn on_interface(&self, addr: IpAddr, ifindex: u16) -> bool {
        self.containing(addr).any(|i| i == ifindex)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The old representation: every entry scanned, longest first.
    fn model_lookup(m: &[(Prefix, u16)], a: IpAddr) -> Option<u16> {
        m.iter().filter(|(p, _)| p.contains(a)).max_by_key(|(p, _)| p.len()).map(|(_, i)| *i)
    }

    fn pfx(v6: bool, bits: u32, len: u8) -> Prefix {
        let a = if v6 {
            IpAddr::from(std::net::Ipv6Addr::from(u128::from(bits) << 96))
        } else {
            IpAddr::from(std::net::Ipv4Addr::from(bits))
        };
        // Lengths past the family's maximum clamp to it.
        Prefix::new_truncated(a, if v6 { len } else { len.min(32) }).expect("length in range")
    }

    #[test]
    fn lengths_longest_first() {
        let mut l = Lens::<129>::default();
        for len in [0u8, 5, 63, 64, 127, 128, 5] {
            l.add(len);
        }
        assert_eq!(l.longest_first().collect::<Vec<_>>(), vec![128, 127, 64, 63, 5, 0]);
        l.sub(5);
        assert_eq!(l.longest_first().collect::<Vec<_>>(), vec![128, 127, 64, 63, 5, 0]);
        l.sub(5);
        l.sub(128);
        l.sub(128); // more removes than adds: no underflow
        assert_eq!(l.longest_first().collect::<Vec<_>>(), vec![127, 64, 63, 0]);
    }

    proptest! {
        /// Random sets and clears against a Vec model; lookups of
        /// addresses near the prefixes (in both families).
        #[test]
        fn matches_model(ops in prop::collection::vec((any::<bool>(), 0u32..16, 0u8..=40, prop::option::of(1u16..4)), 1..80),
                         probes in prop::collection::vec((any::<bool>(), 0u32..16, any::<u32>()), 1..40)) {
            let mut c = Connected::default();
            let mut m: Vec<(Prefix, u16)> = Vec::new();
            for (v6, hi, len, ifi) in ops {
                let p = pfx(v6, hi << 28 | 0x0a00_0000 >> 4, len);
                c.set(p, ifi);
                m.retain(|(q, _)| *q != p);
                if let Some(i) = ifi {
                    m.push((p, i));
                }
            }
            prop_assert_eq!(c.len(), m.len());
            let near = probes.iter().map(|&(v6, hi, lo)| pfx(v6, hi << 28 | (lo >> 4) | 0x0a00_0000 >> 4, 40).addr());
            let exact: Vec<IpAddr> = m.iter().map(|(p, _)| p.addr()).collect();
            for a in near.chain(exact) {
                prop_assert_eq!(c.lookup(a), model_lookup(&m, a));
                for i in 1u16..4 {
                    let want = m.iter().any(|(p, j)| *j == i && p.contains(a));
                    prop_assert_eq!(c.on_interface(a, i), want);
                }
            }
        }
    }
}
