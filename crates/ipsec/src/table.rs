//! A hash map whose slot for a key is known before it is looked up:
//! [`Table`], open addressing with linear probing, the entries in one
//! array. The per-packet lookups over a million SAs and clients (the SA
//! database's indexes by id and SPI, the multipoint tunnels' client maps
//! in `tern-nodes`) miss the cache on nearly every packet; a node that
//! has a batch of keys calls [`Table::prefetch`] on all of them first and
//! [`Table::get`] after, so that the misses overlap (VPP's nodes do the
//! same with their bihash buckets). `std`'s map says nowhere where an
//! entry sits, so it cannot be prefetched.
//!
//! A key's home slot is its [`TableKey::hash64`] scaled to the number of
//! slots (the top 64 bits of hash x slots, so any number of slots will
//! do); a key sits at its home or after it (wrapping round), with no empty
//! slot between (deletion shifts the entries after the hole back, so
//! there are no tombstones). Past 3/4 full the table grows by a quarter
//! (doubling while small), so a large one is 60-75 % full: a lookup reads
//! 2-2.5 slots on average when it finds its key, 3-8.5 when it does not;
//! the entries of the maps here are 16-48 bytes, so that is one cache
//! line, rarely two. (It doubled, as `std`'s map does: a map split in 256
//! shards at 1M or 2M entries, the SA database's and the client maps',
//! had just doubled and was 48 % full, 16 bytes a slot: growing by a
//! quarter holds an index of 2M SAs in 44 MB instead of 67 MB,
//! `tests::sizes_at_a_million`.)
//!
//! Keys are chosen by tern's control plane (SA ids, inbound SPIs,
//! addresses from its pools), not by whoever sends packets, as for the
//! maps this replaces (`db::U32Hasher`).

use std::net::Ipv6Addr;

/// A key of a [`Table`]: its 64-bit hash, whose top bits pick the slot.
pub trait TableKey: Copy + Eq {
    fn hash64(&self) -> u64;
}

/// The slot hash: MurmurHash3's 64-bit finaliser, so that every bit of
/// the key moves the top bits. A single golden-ratio multiply (the first
/// version) put the keys of one shard of the client map by SA id into a
/// few runs of slots, as that map's shard is the top byte of a product by
/// the 32-bit golden ratio: the keys one shard holds had nearly the same
/// top bits here too (`esp-decrypt` over a million SAs ran 5x slower).
#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

impl TableKey for u32 {
    #[inline]
    fn hash64(&self) -> u64 {
        mix(u64::from(*self))
    }
}

impl TableKey for u64 {
    #[inline]
    fn hash64(&self) -> u64 {
        mix(*self)
    }
}

impl TableKey for (u16, Ipv6Addr) {
    #[inline]
    fn hash64(&self) -> u64 {
        let a = u128::from(self.1);
        mix((a as u64) ^ ((a >> 64) as u64).rotate_left(23) ^ (u64::from(self.0) << 48))
    }
}

/// The map (see the module).
#[derive(Clone, Debug)]
pub struct Table<K, V> {
    /// The slots (none while empty).
    slots: Box<[Option<(K, V)>]>,
    len: usize,
}

impl<K: TableKey, V> Default for Table<K, V> {
    fn default() -> Self {
        Table::new()
    }
}

impl<K: TableKey, V> Table<K, V> {
    pub fn new() -> Self {
        Table { slots: Box::new([]), len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots allocated (memory figures).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    fn home(&self, k: &K) -> usize {
        // Below the number of slots (0 with none): hash / 2^64 x slots.
        ((u128::from(k.hash64()) * self.slots.len() as u128) >> 64) as usize
    }

    /// The slot after `i`, wrapping round.
    #[inline]
    fn next(&self, i: usize) -> usize {
        let j = i + 1;
        if j >= self.slots.len() { 0 } else { j }
    }

    /// How many slots forward from `from` to `to` (wrapping round).
    #[inline]
    fn dist(&self, from: usize, to: usize) -> usize {
        if to >= from { to - from } else { to + self.slots.len() - from }
    }

    /// Hints the CPU to fetch the cache lines `get(k)` reads first (the
    /// home slot, and the next line when the slot straddles one).
    #[inline]
    pub fn prefetch(&self, k: &K) {
        if let Some(s) = self.slots.get(self.home(k)) {
            tern_intrin::prefetch_lines(s, 2);
        }
    }

    /// The slot holding `k`, if any.
    #[inline]
    fn find(&self, k: &K) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mut i = self.home(k);
        // The table is never full (at most 3/4): an empty slot ends the probe.
        for _ in 0..self.slots.len() {
            match self.slots.get(i)? {
                Some((key, _)) if key == k => return Some(i),
                Some(_) => i = self.next(i),
                None => return None,
            }
        }
        None
    }

    /// The value of `k`.
    #[inline]
    pub fn get(&self, k: &K) -> Option<&V> {
        let i = self.find(k)?;
        self.slots.get(i)?.as_ref().map(|(_, v)| v)
    }

    /// The value of `k`, to change in place.
    #[inline]
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        let i = self.find(k)?;
        self.slots.get_mut(i)?.as_mut().map(|(_, v)| v)
    }

    pub fn contains_key(&self, k: &K) -> bool {
        self.find(k).is_some()
    }

    /// Sets `k` to `v`; the value it replaces.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        if let Some(i) = self.find(&k) {
            let (_, old) = self.slots.get_mut(i)?.as_mut()?;
            return Some(std::mem::replace(old, v));
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mut i = self.home(&k);
        loop {
            let s = self.slots.get_mut(i)?;
            if s.is_none() {
                *s = Some((k, v));
                self.len += 1;
                return None;
            }
            i = self.next(i);
        }
    }

    /// Removes `k`; its value.
    pub fn remove(&mut self, k: &K) -> Option<V> {
        let mut hole = self.find(k)?;
        let (_, v) = self.slots.get_mut(hole)?.take()?;
        self.len -= 1;
        // Backward shift: each entry after the hole, up to the next empty
        // slot, moves into the hole if the hole lies between its home and
        // where it is (else a lookup from its home would stop at the hole).
        let mut j = hole;
        loop {
            j = self.next(j);
            let home = match self.slots.get(j) {
                Some(Some((key, _))) => self.home(key),
                _ => break,
            };
            if self.dist(home, j) >= self.dist(hole, j) {
                let moved = self.slots.get_mut(j).and_then(Option::take);
                if let Some(h) = self.slots.get_mut(hole) {
                    *h = moved;
                }
                hole = j;
            }
        }
        Some(v)
    }

    /// The mean distance of the entries from their home slots (tests and
    /// figures: a lookup that finds its key reads this many slots past
    /// its home).
    pub fn mean_displacement(&self) -> f64 {
        let total: usize = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|(k, _)| self.dist(self.home(k), i)))
            .sum();
        total as f64 / self.len.max(1) as f64
    }

    /// Every entry, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.slots.iter().flatten().map(|(k, v)| (k, v))
    }

    /// Every value, in slot order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.iter().flatten().map(|(_, v)| v)
    }

    /// The slots a table of `n` grows to: twice while small (8 at
    /// first), then a quarter more, so that a large table is never less
    /// than 60 % full (doubling left it at 37.5 % just after, and a
    /// million entries in 2^20 x 256 shards at 48 %).
    fn grown(n: usize) -> usize {
        if n < 64 { (n * 2).max(8) } else { n.saturating_add(n / 4) }
    }

    /// Room for `additional` more entries without growing on the way: the
    /// size incremental growth would reach, in one rehash (a bulk load,
    /// where growing by a quarter would place every entry about five
    /// times).
    pub fn reserve(&mut self, additional: usize) {
        let want = self.len.saturating_add(additional).saturating_mul(4);
        let mut n = self.slots.len();
        while want > n.saturating_mul(3) && n < usize::MAX / 4 {
            n = Self::grown(n);
        }
        if n != self.slots.len() {
            self.rehash(n);
        }
    }

    /// More slots ([`Table::grown`]), every entry placed again.
    fn grow(&mut self) {
        self.rehash(Self::grown(self.slots.len()));
    }

    /// `n` slots, every entry placed again.
    fn rehash(&mut self, n: usize) {
        let old = std::mem::replace(&mut self.slots, (0..n).map(|_| None).collect());
        for (k, v) in old.into_vec().into_iter().flatten() {
            let mut i = self.home(&k);
            while let Some(Some(_)) = self.slots.get(i) {
                i = self.next(i);
            }
            if let Some(s) = self.slots.get_mut(i) {
                *s = Some((k, v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A key whose home slot the test picks (its hash is itself, shifted
    /// to the top), to force collisions and wrap-around.
    #[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
    struct Home(u8, u16);

    impl TableKey for Home {
        fn hash64(&self) -> u64 {
            u64::from(self.0) << 56
        }
    }

    #[test]
    fn agrees_with_a_hash_map_under_random_changes() {
        let mut t: Table<u32, u32> = Table::new();
        let mut m = HashMap::new();
        let mut x = 12345u32;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let k = x % 5_000;
            if x & 3 == 0 {
                assert_eq!(t.remove(&k), m.remove(&k), "step {step}");
            } else {
                assert_eq!(t.insert(k, step), m.insert(k, step), "step {step}");
            }
            assert_eq!(t.len(), m.len());
        }
        for k in 0..5_000 {
            assert_eq!(t.get(&k), m.get(&k));
        }
        assert_eq!(t.iter().count(), m.len());
        assert!(t.len() * 4 <= t.capacity() * 3);
    }

    #[test]
    fn colliding_keys_survive_removals_and_wrap_around() {
        let mut t: Table<Home, u16> = Table::new();
        // 8 slots after the first insert; homes at the top bits: 0xe0 -> 7.
        for i in 0..5 {
            t.insert(Home(0xe0, i), i);
        }
        assert_eq!(t.capacity(), 8);
        t.insert(Home(0x00, 9), 9);
        // The run of 0xe0 keys wrapped to slots 0-3; 0x00's key after it.
        for i in 0..5 {
            assert_eq!(t.get(&Home(0xe0, i)), Some(&i));
        }
        assert_eq!(t.remove(&Home(0xe0, 1)), Some(1));
        assert_eq!(t.remove(&Home(0xe0, 3)), Some(3));
        for i in [0, 2, 4] {
            assert_eq!(t.get(&Home(0xe0, i)), Some(&i), "key {i} lost by a shift");
        }
        assert_eq!(t.get(&Home(0x00, 9)), Some(&9));
        assert_eq!(t.get(&Home(0xe0, 1)), None);
        assert_eq!(t.remove(&Home(0xe0, 1)), None);
        assert_eq!(t.len(), 4);
    }

    /// Keys that share the shard of a map split by another multiplicative
    /// hash (the client map by SA id: the top byte of id x 0x9e3779b1; the
    /// SA table: of id x 0x85ebca6b) spread over the slots: a lookup reads
    /// about one slot, not a long run.
    #[test]
    fn keys_of_one_shard_do_not_cluster() {
        for mul in [0x9e37_79b1u32, 0x85eb_ca6b] {
            let mut t: Table<u32, u32> = Table::new();
            let shard = |k: u32| (k.wrapping_mul(mul) >> 24) as usize % 256;
            for k in (0..1_000_000u32).filter(|&k| shard(k) == 7) {
                t.insert(k, k);
            }
            assert!(t.len() > 3_000, "{}", t.len());
            let d = t.mean_displacement();
            assert!(d < 2.0, "multiplier {mul:#x}: mean displacement {d}");
        }
        let mut t: Table<u64, ()> = Table::new();
        for a in 0..100_000u64 {
            t.insert(4 << 32 | (0x6440_0000 + a * 256), ());
        }
        assert!(t.mean_displacement() < 2.0, "{}", t.mean_displacement());
    }

    /// A table of slots that are not a power of two wraps round at its
    /// end and keeps its runs whole through removals there.
    #[test]
    fn wraps_round_a_table_that_is_not_a_power_of_two() {
        let mut t: Table<Home, u16> = Table::new();
        // Spread keys to grow it past 64 slots: 0x00-0x3f's homes.
        for i in 0..55u16 {
            t.insert(Home((i * 4) as u8, 1000 + i), i);
        }
        assert_eq!(t.capacity(), 80);
        // 0xff's home is the last slot (255 x 80 / 256 = 79): a run of
        // five wraps to the first slots, after the keys already there.
        for i in 0..5 {
            t.insert(Home(0xff, i), 100 + i);
        }
        assert_eq!(t.capacity(), 80);
        for i in 0..5 {
            assert_eq!(t.get(&Home(0xff, i)), Some(&(100 + i)));
        }
        assert_eq!(t.remove(&Home(0xff, 0)), Some(100));
        assert_eq!(t.remove(&Home(0x00, 1000)), Some(0));
        for i in 1..5 {
            assert_eq!(t.get(&Home(0xff, i)), Some(&(100 + i)), "key {i} lost by a shift");
        }
        for i in 1..55u16 {
            assert_eq!(t.get(&Home((i * 4) as u8, 1000 + i)), Some(&i));
        }
        assert_eq!(t.len(), 58);
    }

    /// The memory of the SA database's indexes at a million tunnels: 2M
    /// SAs in 256 shards (by `db::shard_of`'s hash), 16-byte slots. They
    /// grew by doubling to 16,384 slots a shard, 48 % full (67 MB an
    /// index); growing by a quarter, 60-75 % full.
    #[test]
    fn sizes_at_a_million() {
        let mut shards: Vec<Table<u32, u64>> = (0..256).map(|_| Table::new()).collect();
        let base = 1u32 << 31;
        for id in base..base + 2_000_000 {
            let s = usize::from((id.wrapping_mul(0x85eb_ca6b) >> 24) as u8);
            shards[s].insert(id, 0);
        }
        let slots: usize = shards.iter().map(Table::capacity).sum();
        let len: usize = shards.iter().map(Table::len).sum();
        assert_eq!(len, 2_000_000);
        let load = len as f64 / slots as f64;
        println!("2M keys in 256 shards: {slots} slots ({load:.3} full), {} bytes", slots * 16);
        assert!((0.6..=0.75).contains(&load), "{load}");
        assert_eq!(std::mem::size_of::<Option<(u32, std::sync::Arc<u8>)>>(), 16);
    }

    /// A reserve reaches the size growth would have, in one step, and
    /// holds what it reserved without growing again.
    #[test]
    fn reserve_sizes_as_growth_does() {
        let mut grown: Table<u32, u32> = Table::new();
        let mut reserved: Table<u32, u32> = Table::new();
        reserved.insert(0, 0);
        reserved.reserve(9_999);
        let cap = reserved.capacity();
        for k in 0..10_000 {
            grown.insert(k, k);
            reserved.insert(k, k);
        }
        assert_eq!(reserved.capacity(), cap, "no growth after the reserve");
        assert_eq!(grown.capacity(), cap);
        assert_eq!((0..10_000).filter(|k| reserved.get(k) == Some(k)).count(), 10_000);
        reserved.reserve(0);
        assert_eq!(reserved.capacity(), cap);
    }

    #[test]
    fn empty_table_answers_and_prefetches_nothing() {
        let t: Table<u64, u8> = Table::new();
        assert_eq!(t.get(&7), None);
        t.prefetch(&7);
        assert!(t.is_empty() && t.capacity() == 0);
        let v6: Table<(u16, Ipv6Addr), u8> = Table::new();
        assert!(!v6.contains_key(&(1, Ipv6Addr::LOCALHOST)));
    }

    #[test]
    fn replacing_keeps_one_entry() {
        let mut t = Table::new();
        assert_eq!(t.insert(5u64 << 32 | 9, 'a'), None);
        assert_eq!(t.insert(5u64 << 32 | 9, 'b'), Some('a'));
        assert_eq!(t.len(), 1);
        assert_eq!(t.get(&(5u64 << 32 | 9)), Some(&'b'));
        if let Some(v) = t.get_mut(&(5u64 << 32 | 9)) {
            *v = 'c';
        }
        assert_eq!(t.get(&(5u64 << 32 | 9)), Some(&'c'));
        assert_eq!(t.get_mut(&7), None);
    }
}
