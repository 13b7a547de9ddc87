//! RIB storage: compact per-family maps of prefixes to their routes.
//!
//! A full table is ~1M prefixes, so the layout matters: IPv4 keys are one
//! u64 and IPv6 keys 17 bytes (separate maps also size their power-of-two
//! tables separately), a prefix with a single route keeps it inline, and
//! route targets (a BGP table has a handful of next hops) are interned.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::prefix::Prefix;
use crate::types::{NH_NONE, NhId, RouteTarget, Source};

/// A strong, cheap hasher for integer keys (murmur3's finaliser). The
/// default Fx hash clusters badly on (address, length) keys.
#[derive(Clone, Copy, Default)]
pub(crate) struct KeyBuild;

pub(crate) struct KeyHasher(u64);

impl BuildHasher for KeyBuild {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(0x243f_6a88_85a3_08d3)
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(b));
        }
    }

    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x));
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut k = self.0;
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    }
}

/// Index of an interned [`RouteTarget`].
pub(crate) type TargetId = u32;

/// One route of one source.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RibEntry {
    pub(crate) source: Source,
    pub(crate) distance: u8,
    pub(crate) metric: u32,
    pub(crate) target: TargetId,
    /// The resolved next hop (holds one reference); NH_NONE = inactive.
    pub(crate) nh: NhId,
    /// The source's resync epoch when the route was last added.
    pub(crate) epoch: u32,
}

impl RibEntry {
    /// Best route: lowest (distance, metric), ties broken by source order.
    pub(crate) fn rank(&self) -> (u8, u32, Source) {
        (self.distance, self.metric, self.source)
    }
}

/// The routes of one prefix: one inline (the common case), or a vector.
#[derive(Clone, Debug)]
pub(crate) enum Entries {
    One(RibEntry),
    Many(Vec<RibEntry>),
}

impl Default for Entries {
    fn default() -> Self {
        Entries::Many(Vec::new())
    }
}

impl Entries {
    pub(crate) fn as_slice(&self) -> &[RibEntry] {
        match self {
            Entries::One(e) => std::slice::from_ref(e),
            Entries::Many(v) => v,
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [RibEntry] {
        match self {
            Entries::One(e) => std::slice::from_mut(e),
            Entries::Many(v) => v,
        }
    }

    pub(crate) fn push(&mut self, e: RibEntry) {
        match self {
            Entries::Many(v) if v.is_empty() => *self = Entries::One(e),
            Entries::Many(v) => v.push(e),
            Entries::One(x) => *self = Entries::Many(vec![*x, e]),
        }
    }

    /// Removes entry `i` (order not kept); `None` if out of range.
    pub(crate) fn remove(&mut self, i: usize) -> Option<RibEntry> {
        match self {
            Entries::One(x) if i == 0 => {
                let e = *x;
                *self = Entries::Many(Vec::new());
                Some(e)
            }
            Entries::One(_) => None,
            Entries::Many(v) if i < v.len() => {
                let e = v.swap_remove(i);
                if let [only] = v.as_slice() {
                    *self = Entries::One(*only);
                }
                Some(e)
            }
            Entries::Many(_) => None,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Entries::One(_) => 0,
            Entries::Many(v) => v.capacity() * std::mem::size_of::<RibEntry>(),
        }
    }
}

/// All routes of one prefix.
#[derive(Clone, Debug, Default)]
pub(crate) struct RibSlot {
    pub(crate) entries: Entries,
    /// What the FIB holds for this prefix (NH_NONE: not installed).
    pub(crate) installed: NhId,
    /// The interface if this prefix is a connected subnet (used to resolve
    /// gateways and to decide on neighbour host routes).
    pub(crate) connected: Option<u16>,
}

impl RibSlot {
    pub(crate) fn best_index(&self) -> Option<usize> {
        self.entries
            .as_slice()
            .iter()
            .enumerate()
            .filter(|(_, e)| e.nh != NH_NONE)
            .min_by_key(|(_, e)| e.rank())
            .map(|(i, _)| i)
    }

    pub(crate) fn find(&self, s: Source) -> Option<&RibEntry> {
        self.entries.as_slice().iter().find(|e| e.source == s)
    }

    pub(crate) fn find_mut(&mut self, s: Source) -> Option<&mut RibEntry> {
        self.entries.as_mut_slice().iter_mut().find(|e| e.source == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct K6 {
    hi: u64,
    lo: u64,
    len: u8,
}

fn k4(addr: Ipv4Addr, len: u8) -> u64 {
    (u64::from(u32::from(addr)) << 8) | u64::from(len)
}

fn k6(addr: Ipv6Addr, len: u8) -> K6 {
    let v = u128::from(addr);
    K6 { hi: (v >> 64) as u64, lo: v as u64, len }
}

/// Prefix -> routes, one map per family.
#[derive(Default)]
pub(crate) struct Rib {
    v4: HashMap<u64, RibSlot, KeyBuild>,
    v6: HashMap<K6, RibSlot, KeyBuild>,
}

impl Rib {
    pub(crate) fn get(&self, p: &Prefix) -> Option<&RibSlot> {
        match *p {
            Prefix::V4 { addr, len } => self.v4.get(&k4(addr, len)),
            Prefix::V6 { addr, len } => self.v6.get(&k6(addr, len)),
        }
    }

    pub(crate) fn get_mut(&mut self, p: &Prefix) -> Option<&mut RibSlot> {
        match *p {
            Prefix::V4 { addr, len } => self.v4.get_mut(&k4(addr, len)),
            Prefix::V6 { addr, len } => self.v6.get_mut(&k6(addr, len)),
        }
    }

    /// The slot of `p`, created empty if missing.
    pub(crate) fn slot(&mut self, p: &Prefix) -> &mut RibSlot {
        match *p {
            Prefix::V4 { addr, len } => self.v4.entry(k4(addr, len)).or_default(),
            Prefix::V6 { addr, len } => self.v6.entry(k6(addr, len)).or_default(),
        }
    }

    pub(crate) fn remove(&mut self, p: &Prefix) {
        match *p {
            Prefix::V4 { addr, len } => self.v4.remove(&k4(addr, len)),
            Prefix::V6 { addr, len } => self.v6.remove(&k6(addr, len)),
        };
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (Prefix, &RibSlot)> + '_ {
        let v4 = self.v4.iter().map(|(k, s)| (Prefix::V4 { addr: Ipv4Addr::from((k >> 8) as u32), len: *k as u8 }, s));
        let v6 = self.v6.iter().map(|(k, s)| {
            (Prefix::V6 { addr: Ipv6Addr::from((u128::from(k.hi) << 64) | u128::from(k.lo)), len: k.len }, s)
        });
        v4.chain(v6)
    }

    /// Estimated bytes (tables at their capacity, plus spilled entries).
    pub(crate) fn bytes(&self) -> usize {
        let b4 = std::mem::size_of::<(u64, RibSlot)>() + 1;
        let b6 = std::mem::size_of::<(K6, RibSlot)>() + 1;
        self.v4.capacity() * b4
            + self.v6.capacity() * b6
            + self.v4.values().chain(self.v6.values()).map(|s| s.entries.heap_bytes()).sum::<usize>()
    }
}

/// Interned route targets with reference counts, and for a target whose
/// next hop depends on nothing else (a gateway with its interface given,
/// what BGP routes over FPM and the kernel carry), that next hop, holding
/// one reference of its own: adding a route to a known target then takes a
/// reference on it without hashing the next hop's key again.
#[derive(Default)]
pub(crate) struct Targets {
    list: Vec<Option<Interned>>,
    index: HashMap<RouteTarget, TargetId, KeyBuild>,
    free: Vec<TargetId>,
}

struct Interned {
    target: RouteTarget,
    refs: u32,
    /// The resolved next hop, NH_NONE if not cached.
    nh: NhId,
}

impl Targets {
    /// The id of `t`, with one more reference.
    pub(crate) fn intern(&mut self, t: RouteTarget) -> TargetId {
        if let Some(&id) = self.index.get(&t) {
            if let Some(Some(x)) = self.list.get_mut(id as usize) {
                x.refs += 1;
            }
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.list.push(None);
                (self.list.len() - 1) as TargetId
            }
        };
        self.index.insert(t.clone(), id);
        if let Some(slot) = self.list.get_mut(id as usize) {
            *slot = Some(Interned { target: t, refs: 1, nh: NH_NONE });
        }
        id
    }

    pub(crate) fn get(&self, id: TargetId) -> Option<&RouteTarget> {
        self.list.get(id as usize).and_then(Option::as_ref).map(|x| &x.target)
    }

    /// The next hop cached for `id` (NH_NONE: none).
    pub(crate) fn cached_nh(&self, id: TargetId) -> NhId {
        self.list.get(id as usize).and_then(Option::as_ref).map_or(NH_NONE, |x| x.nh)
    }

    /// Caches `nh` for `id`; the caller gives the cache one reference.
    pub(crate) fn cache_nh(&mut self, id: TargetId, nh: NhId) {
        if let Some(Some(x)) = self.list.get_mut(id as usize) {
            x.nh = nh;
        }
    }

    /// Drops a reference; returns the cached next hop whose reference the
    /// caller must drop when this was the target's last one (else NH_NONE).
    #[must_use]
    pub(crate) fn release(&mut self, id: TargetId) -> NhId {
        let Some(slot) = self.list.get_mut(id as usize) else { return NH_NONE };
        let Some(x) = slot.as_mut() else { return NH_NONE };
        x.refs -= 1;
        if x.refs == 0
            && let Some(x) = slot.take()
        {
            self.index.remove(&x.target);
            self.free.push(id);
            return x.nh;
        }
        NH_NONE
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(source: Source) -> RibEntry {
        RibEntry { source, distance: 1, metric: 0, target: 0, nh: 1, epoch: 0 }
    }

    #[test]
    fn entries_inline_one_and_spill() {
        let mut x = Entries::default();
        assert!(x.is_empty());
        x.push(e(Source::Static));
        assert!(matches!(x, Entries::One(_)));
        x.push(e(Source::Kernel));
        x.push(e(Source::Fpm));
        assert_eq!(x.as_slice().len(), 3);
        assert_eq!(x.remove(0).map(|e| e.source), Some(Source::Static));
        assert_eq!(x.remove(5).map(|e| e.source), None);
        assert_eq!(x.remove(0).map(|e| e.source), Some(Source::Fpm));
        assert!(matches!(x, Entries::One(RibEntry { source: Source::Kernel, .. })));
        assert!(x.remove(0).is_some());
        assert!(x.is_empty());
    }

    #[test]
    fn rib_round_trips_prefixes_of_both_families() {
        let mut r = Rib::default();
        let ps: Vec<Prefix> =
            ["10.0.0.0/8", "10.0.0.0/9", "0.0.0.0/0", "2001:db8::/32", "2001:db8::/48", "::/0", "255.255.255.255/32"]
                .iter()
                .map(|s| s.parse().expect("prefix"))
                .collect();
        for (i, p) in ps.iter().enumerate() {
            r.slot(p).installed = i as NhId + 1;
        }
        for (i, p) in ps.iter().enumerate() {
            assert_eq!(r.get(p).map(|s| s.installed), Some(i as NhId + 1), "{p}");
        }
        let mut back: Vec<Prefix> = r.iter().map(|(p, _)| p).collect();
        back.sort();
        let mut want = ps.clone();
        want.sort();
        assert_eq!(back, want);
        r.remove(&ps[0]);
        assert!(r.get(&ps[0]).is_none());
        assert!(r.get(&ps[1]).is_some());
    }

    #[test]
    fn targets_are_shared_and_freed() {
        let mut t = Targets::default();
        let a = t.intern(RouteTarget::Blackhole);
        let b = t.intern(RouteTarget::Blackhole);
        let c = t.intern(RouteTarget::Prohibit);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(t.release(a), NH_NONE);
        assert_eq!(t.get(a), Some(&RouteTarget::Blackhole));
        t.cache_nh(a, 7);
        assert_eq!(t.cached_nh(b), 7);
        assert_eq!(t.release(b), 7, "the last reference hands back the cached next hop");
        assert_eq!(t.get(a), None);
        assert_eq!(t.len(), 1);
        let d = t.intern(RouteTarget::Unreachable);
        assert_eq!(d, a, "the freed id is reused");
    }
}
