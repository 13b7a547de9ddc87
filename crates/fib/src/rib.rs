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
    /// The source's resync epoch when the route was last added. 16 bits
    /// keep the entry at 16 bytes and a RIB cell at 32 (see
    /// [`PrefixMap`]); a route outlives its source's resync by one
    /// `end_resync` at most, so the epochs compared are never 2^16 apart.
    pub(crate) epoch: u16,
}

impl RibEntry {
    /// Best route: lowest (distance, metric), ties broken by source order.
    pub(crate) fn rank(&self) -> (u8, u32, Source) {
        (self.distance, self.metric, self.source)
    }
}

/// The routes of one prefix: one inline (the common case), or a boxed
/// vector (a thin pointer, so that the whole is 16 bytes).
#[derive(Clone, Debug, Default)]
pub(crate) enum Entries {
    /// No route (a new slot, or one whose last route went; no allocation).
    #[default]
    None,
    One(RibEntry),
    /// Two or more. Boxed: a thin pointer beside the inline entry keeps
    /// the enum at 16 bytes (a `Vec` would make it 24, a boxed slice too).
    #[allow(clippy::box_collection)]
    Many(Box<Vec<RibEntry>>),
}

impl Entries {
    pub(crate) fn as_slice(&self) -> &[RibEntry] {
        match self {
            Entries::None => &[],
            Entries::One(e) => std::slice::from_ref(e),
            Entries::Many(v) => v,
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [RibEntry] {
        match self {
            Entries::None => &mut [],
            Entries::One(e) => std::slice::from_mut(e),
            Entries::Many(v) => v,
        }
    }

    pub(crate) fn push(&mut self, e: RibEntry) {
        match self {
            Entries::None => *self = Entries::One(e),
            Entries::Many(v) => v.push(e),
            Entries::One(x) => *self = Entries::Many(Box::new(vec![*x, e])),
        }
    }

    /// Removes entry `i` (order not kept); `None` if out of range.
    pub(crate) fn remove(&mut self, i: usize) -> Option<RibEntry> {
        match self {
            Entries::One(x) if i == 0 => {
                let e = *x;
                *self = Entries::None;
                Some(e)
            }
            Entries::Many(v) if i < v.len() => {
                let e = v.swap_remove(i);
                if let [only] = v.as_slice() {
                    *self = Entries::One(*only);
                }
                Some(e)
            }
            _ => None,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Entries::None | Entries::One(_) => 0,
            Entries::Many(v) => std::mem::size_of::<Vec<RibEntry>>() + v.capacity() * std::mem::size_of::<RibEntry>(),
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

/// A RIB key: one cell of [`PrefixMap`] holds it with its slot.
pub(crate) trait CellKey: Copy + Eq {
    /// The key of an empty cell (a length no prefix has).
    const EMPTY: Self;
    /// The key's hash under the table's `seed`.
    fn hash(&self, seed: u64) -> u64;
}

/// An IPv4 key: address << 8 | length.
type K4 = u64;

impl CellKey for K4 {
    const EMPTY: K4 = u64::MAX;
    #[inline]
    fn hash(&self, seed: u64) -> u64 {
        crate::keyhash::hash64(*self, seed)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct K6 {
    hi: u64,
    lo: u64,
    len: u8,
}

impl CellKey for K6 {
    const EMPTY: K6 = K6 { hi: u64::MAX, lo: u64::MAX, len: u8::MAX };
    #[inline]
    fn hash(&self, seed: u64) -> u64 {
        crate::keyhash::hash128(self.hi, self.lo, self.len, seed)
    }
}

fn k4(addr: Ipv4Addr, len: u8) -> u64 {
    (u64::from(u32::from(addr)) << 8) | u64::from(len)
}

fn k6(addr: Ipv6Addr, len: u8) -> K6 {
    let v = u128::from(addr);
    K6 { hi: (v >> 64) as u64, lo: v as u64, len }
}

/// 32 bytes for IPv4 (a 16-byte entry inline), aligned so that no cell
/// spans two cache lines; 64 for IPv6 (48 bytes of key and slot), one line
/// when the table is 64-byte aligned, which the allocator gave for every
/// table of 2^16 cells or more (checked 2026-11-23; 32 is all the type
/// asks, so a smaller table may have IPv6 cells across two lines).
#[derive(Clone)]
#[repr(align(32))]
struct Cell<K> {
    key: K,
    slot: RibSlot,
}

const _: () = assert!(std::mem::size_of::<Cell<K4>>() == 32 && std::mem::size_of::<Cell<K6>>() == 64);

/// Prefix -> slot, open addressing with linear probing and the slots
/// inline in the cells (backward-shift deletion, no tombstones).
///
/// Why not `std::collections::HashMap`: a SwissTable lookup loads a
/// control group and then, at an index found in it, the bucket: two
/// dependent cache misses per update on a full table (~1M prefixes, far
/// beyond the caches). Here the first cell probed follows from the hash
/// alone, so one miss (the cell's one or two lines, fetched together)
/// finds the key and its routes, and the address can be prefetched before
/// the update needs it (`prefetch`). The price is memory: the table is kept
/// at most half full, so that the runs a lookup, an insert or a delete
/// walks stay short (a full IPv4 table: 2^21 cells of 32 bytes, 64 MiB,
/// against hashbrown's 2^20 buckets of 41, 41 MiB; IPv6 2^19 cells of 64
/// bytes, 32 MiB, against 2^18 of 57, 14.6 MiB).
///
/// The hash is keyed with a seed drawn per table (from std's `RandomState`,
/// which the OS seeds): prefixes come from peers, and a BGP peer that knew
/// the hash could announce prefixes that all land in one run and make every
/// update walk it.
pub(crate) struct PrefixMap<K> {
    cells: Vec<Cell<K>>,
    len: usize,
    seed: u64,
}

impl<K: CellKey> Default for PrefixMap<K> {
    fn default() -> Self {
        PrefixMap { cells: Vec::new(), len: 0, seed: crate::keyhash::new_seed(0x7465_726e) }
    }
}

impl<K: CellKey> PrefixMap<K> {
    #[inline]
    fn mask(&self) -> usize {
        self.cells.len().wrapping_sub(1)
    }

    /// The cell holding `k`, if any.
    #[inline]
    fn find(&self, k: &K) -> Option<usize> {
        let mask = self.mask();
        if self.cells.is_empty() {
            return None;
        }
        let mut i = k.hash(self.seed) as usize & mask;
        loop {
            let c = self.cells.get(i)?;
            if c.key == *k {
                return Some(i);
            }
            if c.key == K::EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Starts loading the lines a lookup of `k` reads first, and the cell
    /// after it: a lookup that finds the key one cell on (the table is up
    /// to half full), an insert past an occupied home and a delete's
    /// backward shift read it next.
    #[inline]
    pub(crate) fn prefetch(&self, k: &K) {
        let mask = self.mask();
        let i = k.hash(self.seed) as usize & mask;
        tern_intrin::prefetch_index(&self.cells, i);
        tern_intrin::prefetch_index(&self.cells, (i + 1) & mask);
    }

    pub(crate) fn get(&self, k: &K) -> Option<&RibSlot> {
        let i = self.find(k)?;
        self.cells.get(i).map(|c| &c.slot)
    }

    pub(crate) fn get_mut(&mut self, k: &K) -> Option<&mut RibSlot> {
        let i = self.find(k)?;
        self.cells.get_mut(i).map(|c| &mut c.slot)
    }

    /// The slot of `k`, created empty if missing.
    pub(crate) fn entry(&mut self, k: K) -> &mut RibSlot {
        if (self.len + 1) * 2 > self.cells.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = k.hash(self.seed) as usize & mask;
        while let Some(key) = self.cells.get(i).map(|c| c.key) {
            if key == k {
                break;
            }
            if key == K::EMPTY {
                if let Some(c) = self.cells.get_mut(i) {
                    c.key = k;
                }
                self.len += 1;
                break;
            }
            i = (i + 1) & mask;
        }
        // `i` is in range: the loop only stops at a cell it read (the
        // table is never full, so it stops).
        let n = self.cells.len();
        &mut self.cells[i & (n - 1)].slot
    }

    pub(crate) fn remove(&mut self, k: &K) {
        let Some(mut hole) = self.find(k) else { return };
        let mask = self.mask();
        if let Some(c) = self.cells.get_mut(hole) {
            c.key = K::EMPTY;
            c.slot = RibSlot::default();
        }
        self.len -= 1;
        // Backward shift: a later cell of the run moves into the hole when
        // the hole lies on its probe path (its home is not after the hole).
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let Some(key) = self.cells.get(j).map(|c| c.key) else { return };
            if key == K::EMPTY {
                return;
            }
            let home = key.hash(self.seed) as usize & mask;
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.cells.swap(hole, j);
                hole = j;
            }
        }
    }

    fn grow(&mut self) {
        let n = (self.cells.len() * 2).max(16);
        let empty = Cell { key: K::EMPTY, slot: RibSlot::default() };
        // Every update touches a random cell of a table of tens of MiB:
        // with 4 KiB pages, a TLB miss each time. Huge pages are asked for
        // before the cells are first written (the allocation is untouched
        // until then), as for the trie's arrays.
        let mut cells = Vec::with_capacity(n);
        tern_intrin::advise_hugepages(cells.spare_capacity_mut());
        cells.resize(n, empty);
        let old = std::mem::replace(&mut self.cells, cells);
        let mask = n - 1;
        for c in old.into_iter().filter(|c| c.key != K::EMPTY) {
            let mut i = c.key.hash(self.seed) as usize & mask;
            while self.cells.get(i).is_some_and(|x| x.key != K::EMPTY) {
                i = (i + 1) & mask;
            }
            if let Some(x) = self.cells.get_mut(i) {
                *x = c;
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&K, &RibSlot)> + '_ {
        self.cells.iter().filter(|c| c.key != K::EMPTY).map(|c| (&c.key, &c.slot))
    }

    fn capacity(&self) -> usize {
        self.cells.len()
    }
}

/// Prefix -> routes, one map per family.
#[derive(Default)]
pub(crate) struct Rib {
    v4: PrefixMap<K4>,
    v6: PrefixMap<K6>,
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

    /// Starts loading the cell of `p` (see [`PrefixMap`]).
    #[inline]
    pub(crate) fn prefetch(&self, p: &Prefix) {
        match *p {
            Prefix::V4 { addr, len } => self.v4.prefetch(&k4(addr, len)),
            Prefix::V6 { addr, len } => self.v6.prefetch(&k6(addr, len)),
        }
    }

    /// The slot of `p`, created empty if missing.
    pub(crate) fn slot(&mut self, p: &Prefix) -> &mut RibSlot {
        match *p {
            Prefix::V4 { addr, len } => self.v4.entry(k4(addr, len)),
            Prefix::V6 { addr, len } => self.v6.entry(k6(addr, len)),
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

    /// Bytes of the tables at their capacity (spilled entry lists are
    /// not included: the writer counts them as they change).
    pub(crate) fn table_bytes(&self) -> usize {
        self.v4.capacity() * std::mem::size_of::<Cell<K4>>() + self.v6.capacity() * std::mem::size_of::<Cell<K6>>()
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
        assert!(matches!(x, Entries::None));
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

    proptest::proptest! {
        /// The open-addressed map against std's: inserts and removes of a
        /// few keys (long probe runs, runs wrapping past the table's end,
        /// backward shifts across them), every key looked up after each.
        #[test]
        fn prefix_map_matches_a_hash_map(ops in proptest::collection::vec((0u64..96, proptest::bool::ANY), 1..600)) {
            let mut m: PrefixMap<K4> = PrefixMap::default();
            let mut want: HashMap<u64, NhId> = HashMap::new();
            for (i, (k, add)) in ops.iter().enumerate() {
                let k = *k << 8 | 24;
                if *add {
                    m.entry(k).installed = i as NhId + 1;
                    want.insert(k, i as NhId + 1);
                } else {
                    m.remove(&k);
                    want.remove(&k);
                }
                proptest::prop_assert_eq!(m.len, want.len());
                for j in 0u64..96 {
                    let k = j << 8 | 24;
                    proptest::prop_assert_eq!(m.get(&k).map(|s| s.installed), want.get(&k).copied(), "key {}", j);
                }
            }
            let mut seen: Vec<(u64, NhId)> = m.iter().map(|(k, s)| (*k, s.installed)).collect();
            let mut all: Vec<(u64, NhId)> = want.into_iter().collect();
            seen.sort_unstable();
            all.sort_unstable();
            proptest::prop_assert_eq!(seen, all);
        }
    }

    #[test]
    fn prefix_maps_hash_with_their_own_seeds() {
        // Keys chosen to share one home cell under one table's seed (what a
        // peer that knew an unkeyed hash could announce) scatter in another.
        let a: PrefixMap<K4> = PrefixMap::default();
        let b: PrefixMap<K4> = PrefixMap::default();
        assert_ne!(a.seed, b.seed);
        let mask = (1usize << 16) - 1;
        let home = |m: &PrefixMap<K4>, k: u64| k.hash(m.seed) as usize & mask;
        let target = home(&a, 24);
        let chosen: Vec<u64> = (0..u64::MAX).map(|i| i << 8 | 24).filter(|k| home(&a, *k) == target).take(64).collect();
        assert_eq!(chosen.len(), 64);
        let mut homes: Vec<usize> = chosen.iter().map(|k| home(&b, *k)).collect();
        homes.sort_unstable();
        homes.dedup();
        assert!(homes.len() > 56, "only {} distinct homes under the other seed", homes.len());
    }

    #[test]
    fn prefix_map_shifts_back_across_the_end() {
        // Keys whose home is the table's last cell: their run wraps to the
        // start, and removing the first must pull the others back.
        let mut m: PrefixMap<K4> = PrefixMap::default();
        m.entry(0).installed = 1;
        let last = m.mask();
        let keys: Vec<u64> = (1..100_000u64).filter(|k| k.hash(m.seed) as usize & last == last).take(3).collect();
        assert_eq!(keys.len(), 3);
        for (i, k) in keys.iter().enumerate() {
            m.entry(*k).installed = i as NhId + 10;
        }
        assert_eq!(m.cells.len(), 16, "no growth in between");
        m.remove(&keys[0]);
        assert_eq!(m.get(&keys[1]).map(|s| s.installed), Some(11));
        assert_eq!(m.get(&keys[2]).map(|s| s.installed), Some(12));
        assert_eq!(m.get(&0).map(|s| s.installed), Some(1));
        m.remove(&keys[1]);
        m.remove(&keys[2]);
        assert_eq!(m.len, 1);
        assert!(m.get(&keys[2]).is_none());
        assert_eq!(m.cells.iter().filter(|c| c.key != K4::EMPTY).count(), 1);
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
