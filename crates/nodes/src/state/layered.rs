//! A map the control side changes one entry at a time and publishes to
//! workers after each batch (the clients of multipoint IPsec tunnels),
//! built so that neither a change nor a publication copies a part of the
//! map that grows with it.
//!
//! As `tern_ipsec::SaDb`'s tables: a shared, immutable *base* (an `Arc`,
//! the same for many publications) and a *delta* of the keys changed
//! since it was built (a removal is an entry saying "none"), asked first.
//! A publication (`clone`) copies the delta only. Once the delta holds
//! [`FOLD_AT`] keys, it is folded into the previous base (the *spare*,
//! which the owner keeps with what the current base has over it) in place,
//! if no published copy holds that base any more (`Arc::get_mut`: the
//! workers moved on); the spare becomes the base with an empty delta, the
//! base the spare. Each change is thus applied twice whatever the size of
//! the map, and a publication copies fewer than [`FOLD_AT`] entries. (The
//! map this replaces, 4,096 shards under `Arc`s in 64 groups, copied the
//! shard a change fell in, about 250 entries at a million, and 64 shard
//! pointers, for each change.)
//!
//! When the spare is still held (a worker whose node did not run kept an
//! old copy), the delta grows on to [`rebuild_at`] keys and the base is
//! rebuilt (a copy of the whole map; the old base becomes the spare). The
//! spare is a second copy of the map while it changes: [`Layered::settle`]
//! drops it after a second without changes, and the next burst of changes
//! starts with one rebuild.
//!
//! The base is [`SHARDS`] hash maps, by a hash of the key the caller
//! gives ([`ShardKey`]): each grows on its own, so a rehash moves
//! 1/256th of the map, not a million entries at once on the control
//! thread. They are `tern_ipsec::table::Table`s, whose slot for a key is
//! known before the lookup: a node with a batch of keys prefetches them
//! all ([`Layered::prefetch`]) and looks them up after.

use super::ClientHasher;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tern_ipsec::table::{Table, TableKey};

type Map<K, V> = HashMap<K, V, BuildHasherDefault<ClientHasher>>;

/// How many maps the base is split in.
pub(crate) const SHARDS: usize = 256;

/// How many keys the delta holds before it is folded into the spare.
/// A publication copies the delta (half of this on average): IKE publishes
/// every few installs, so 64 keeps a publication's copy near the size of a
/// change's (each change is applied twice to the bases).
pub(crate) const FOLD_AT: usize = 64;

/// How long without changes before [`Layered::settle`] drops the spare.
const SPARE_IDLE: Duration = Duration::from_secs(1);

/// How many keys the delta over a map of `n` may hold, when the spare
/// cannot be used, before the base is rebuilt: a rebuild copies `n`
/// entries, each publication about half the delta, so sqrt(8 n) (four
/// changes a publication) balances them.
pub(crate) fn rebuild_at(n: usize) -> usize {
    n.saturating_mul(8).isqrt().max(4 * FOLD_AT)
}

/// A key that says which of the base's maps holds it.
pub(crate) trait ShardKey: TableKey + Hash {
    fn shard(&self) -> usize;
}

/// The base: [`SHARDS`] maps.
#[derive(Clone, Debug)]
struct Base<K, V> {
    maps: Box<[Table<K, V>]>,
}

impl<K: ShardKey, V: Clone> Base<K, V> {
    fn new() -> Self {
        Base { maps: (0..SHARDS).map(|_| Table::new()).collect() }
    }

    #[inline]
    fn get(&self, k: &K) -> Option<&V> {
        self.maps.get(k.shard() % SHARDS)?.get(k)
    }

    #[inline]
    fn prefetch(&self, k: &K) {
        if let Some(m) = self.maps.get(k.shard() % SHARDS) {
            m.prefetch(k);
        }
    }

    /// Applies changes (each key's current entry) in place.
    fn apply<'a>(&mut self, changes: impl Iterator<Item = (&'a K, &'a Option<V>)>)
    where
        K: 'a,
        V: 'a,
    {
        for (k, e) in changes {
            let Some(m) = self.maps.get_mut(k.shard() % SHARDS) else { continue };
            match e {
                Some(v) => m.insert(*k, v.clone()),
                None => m.remove(k),
            };
        }
    }
}

/// A base no longer current, and what the current one has over it.
#[derive(Debug)]
struct Spare<K, V> {
    base: Arc<Base<K, V>>,
    behind: Map<K, Option<V>>,
}

/// The map (see the module). A clone is what workers get: the base
/// shared, the delta copied, no spare.
#[derive(Debug)]
pub(crate) struct Layered<K, V> {
    base: Arc<Base<K, V>>,
    delta: Map<K, Option<V>>,
    len: usize,
    /// The owner's only.
    spare: Option<Spare<K, V>>,
    /// Changed since the last [`Layered::settle`], and when `settle` last
    /// saw a change.
    changed: bool,
    quiet_since: Option<Instant>,
}

impl<K: ShardKey, V: Clone> Clone for Layered<K, V> {
    fn clone(&self) -> Self {
        Layered {
            base: Arc::clone(&self.base),
            delta: self.delta.clone(),
            len: self.len,
            spare: None,
            changed: false,
            quiet_since: None,
        }
    }
}

impl<K: ShardKey, V: Clone> Layered<K, V> {
    pub(crate) fn new() -> Self {
        Layered {
            base: Arc::new(Base::new()),
            delta: Map::default(),
            len: 0,
            spare: None,
            changed: false,
            quiet_since: None,
        }
    }

    /// The entry of `k`: the delta's if it has one, else the base's.
    #[inline]
    pub(crate) fn get(&self, k: &K) -> Option<&V> {
        if !self.delta.is_empty()
            && let Some(e) = self.delta.get(k)
        {
            return e.as_ref();
        }
        self.base.get(k)
    }

    /// Hints the CPU to fetch where [`Layered::get`]`(k)` looks in the
    /// base (the delta is small and warm).
    #[inline]
    pub(crate) fn prefetch(&self, k: &K) {
        self.base.prefetch(k);
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the base's slots (memory figures).
    #[cfg(test)]
    pub(crate) fn base_bytes(&self) -> usize {
        self.base.maps.iter().map(Table::capacity).sum::<usize>() * std::mem::size_of::<Option<(K, V)>>()
    }

    /// Sets `k` to `v`; the entry it replaces.
    pub(crate) fn insert(&mut self, k: K, v: V) -> Option<V> {
        let old = self.get(&k).cloned();
        self.delta.insert(k, Some(v));
        self.len += usize::from(old.is_none());
        self.after_change();
        old
    }

    /// Removes `k`; the entry it held.
    pub(crate) fn remove(&mut self, k: K) -> Option<V> {
        let old = self.get(&k).cloned()?;
        self.delta.insert(k, None);
        self.len -= 1;
        self.after_change();
        Some(old)
    }

    /// After a change: folds the delta into the spare once it holds
    /// [`FOLD_AT`] keys and the spare is free, else rebuilds the base at
    /// [`rebuild_at`].
    fn after_change(&mut self) {
        self.changed = true;
        let d = self.delta.len();
        if d < FOLD_AT || self.swap() || d < rebuild_at(self.len) {
            return;
        }
        let mut base = (*self.base).clone();
        base.apply(self.delta.iter());
        let old = std::mem::replace(&mut self.base, Arc::new(base));
        self.spare = Some(Spare { base: old, behind: std::mem::take(&mut self.delta) });
    }

    /// Folds the delta into the spare if no published copy holds it: it
    /// becomes the base (the delta empties), the base the spare. Whether
    /// it did.
    fn swap(&mut self) -> bool {
        let Some(mut spare) = self.spare.take() else { return false };
        let Some(level) = Arc::get_mut(&mut spare.base) else {
            self.spare = Some(spare);
            return false;
        };
        level.apply(spare.behind.iter());
        level.apply(self.delta.iter());
        // The new base is the old one plus the delta: the delta is what
        // it has over the old base, the new spare; the old `behind`,
        // emptied, is the new delta (its capacity kept).
        let old = std::mem::replace(&mut self.base, spare.base);
        let mut empty = spare.behind;
        empty.clear();
        let behind = std::mem::replace(&mut self.delta, empty);
        self.spare = Some(Spare { base: old, behind });
        true
    }

    /// The control side's tick: drops the spare (a second copy of the map)
    /// once no change came for [`SPARE_IDLE`]. Whether it did.
    pub(crate) fn settle(&mut self, now: Instant) -> bool {
        if std::mem::take(&mut self.changed) || self.quiet_since.is_none() {
            self.quiet_since = Some(now);
            return false;
        }
        if self.spare.is_some() && self.quiet_since.is_some_and(|t| now.saturating_duration_since(t) >= SPARE_IDLE) {
            self.spare = None;
            return true;
        }
        false
    }

    /// Whether a spare base is held (tests, memory figures).
    pub(crate) fn has_spare(&self) -> bool {
        self.spare.is_some()
    }

    /// How many keys the delta holds (what a publication copies).
    pub(crate) fn delta_len(&self) -> usize {
        self.delta.len()
    }

    /// Whether `other` shares this one's base (tests).
    #[cfg(test)]
    pub(crate) fn same_base(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.base, &other.base)
    }
}
