//! The child SAs installed for IKE, a million of them on a remote-access
//! responder: one record a child by (shard, child id), the SA ids it
//! reserved found again from either, and the children per peer as counts
//! kept as children come and go (`tern ike peer show` costs the peers,
//! not a walk of the children).
//!
//! Both maps are `tern_ipsec::table::Table`s (open addressing, 60-75 %
//! full once large) of small slots: the record's 48 bytes (an 8-byte key
//! packing shard and id, the 40-byte [`Child`]) and 16 for an SA id's
//! (the id, the packed key). They were `std` maps of a 16-byte
//! (shard, id) key: 56 + 24 bytes an entry with hashbrown's control
//! bytes, and a million children had just doubled them to 2^21 buckets,
//! 48 % full: 172 bytes a tunnel, now 88-107 (`tests::bytes_a_child_at_a_million`).

use super::Child;
use std::collections::HashMap;
use std::num::NonZeroU64;
use tern_ipsec::table::Table;

/// Shards are `[ike_service] threads`, 1..=64: six bits.
const SHARD_BITS: u32 = 6;

/// (shard, child id) as one key. A child id is its engine's counter from
/// 1, so the bits shifted out (ids past 2^58) are never set.
fn key(shard: u32, id: u64) -> u64 {
    (id << SHARD_BITS) | u64::from(shard & ((1 << SHARD_BITS) - 1))
}

fn parts(k: u64) -> (u32, u64) {
    ((k & ((1 << SHARD_BITS) - 1)) as u32, k >> SHARD_BITS)
}

/// The top bit, set on the keys kept by SA id, so that `Option` of a slot
/// needs no tag (16 bytes, not 24).
const TAGGED: NonZeroU64 = NonZeroU64::MIN.saturating_add((1 << 63) - 1);

/// The children (see the module).
#[derive(Default, Debug)]
pub(super) struct Children {
    by_key: Table<u64, Child>,
    /// A pair's inbound SA id (even; the outbound one is the next) -> its
    /// child's key, with [`TAGGED`]'s bit; reserved before the child is
    /// recorded (see `IkeService::install`).
    by_sa: Table<u32, NonZeroU64>,
    /// Children per peer name, kept as they come and go.
    per_peer: HashMap<Box<str>, usize>,
}

impl Children {
    pub(super) fn get(&self, k: &(u32, u64)) -> Option<&Child> {
        self.by_key.get(&key(k.0, k.1))
    }

    pub(super) fn contains_key(&self, k: &(u32, u64)) -> bool {
        self.by_key.contains_key(&key(k.0, k.1))
    }

    /// Records `c` (replacing any child of that key).
    pub(super) fn insert(&mut self, k: (u32, u64), c: Child) {
        self.count(&c.names.peer, 1);
        if let Some(old) = self.by_key.insert(key(k.0, k.1), c) {
            self.uncount(&old.names.peer);
        }
    }

    pub(super) fn remove(&mut self, k: &(u32, u64)) -> Option<Child> {
        let c = self.by_key.remove(&key(k.0, k.1))?;
        self.uncount(&c.names.peer);
        Some(c)
    }

    fn count(&mut self, peer: &str, n: usize) {
        match self.per_peer.get_mut(peer) {
            Some(c) => *c += n,
            None => {
                self.per_peer.insert(peer.into(), n);
            }
        }
    }

    fn uncount(&mut self, peer: &str) {
        if let Some(c) = self.per_peer.get_mut(peer) {
            *c = c.saturating_sub(1);
            if *c == 0 {
                self.per_peer.remove(peer);
            }
        }
    }

    /// Every child's key.
    pub(super) fn keys(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.by_key.iter().map(|(k, _)| parts(*k))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Child> {
        self.by_key.iter().map(|(_, c)| c)
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Reserves the SA pair `in_id`, `in_id + 1` for child `k`.
    pub(super) fn reserve_sa(&mut self, in_id: u32, k: (u32, u64)) {
        self.by_sa.insert(in_id, TAGGED | key(k.0, k.1));
    }

    pub(super) fn release_sa(&mut self, in_id: u32) {
        self.by_sa.remove(&in_id);
    }

    pub(super) fn sa_reserved(&self, in_id: u32) -> bool {
        self.by_sa.contains_key(&in_id)
    }

    /// The child that reserved the pair whose inbound SA id is `in_id`.
    pub(super) fn of_sa(&self, in_id: u32) -> Option<(u32, u64)> {
        self.by_sa.get(&in_id).map(|k| parts(k.get() & !TAGGED.get()))
    }

    #[cfg(test)]
    pub(super) fn sas_reserved(&self) -> usize {
        self.by_sa.len()
    }

    /// Children per peer (kept counts).
    pub(super) fn per_peer(&self) -> &HashMap<Box<str>, usize> {
        &self.per_peer
    }

    /// The same by a walk (tests check the kept counts against it).
    pub(super) fn per_peer_by_walk(&self) -> HashMap<Box<str>, usize> {
        let mut m: HashMap<Box<str>, usize> = HashMap::new();
        for c in self.values() {
            *m.entry(c.names.peer.clone()).or_default() += 1;
        }
        m
    }

    #[cfg(test)]
    /// Bytes the two tables hold (memory figures).
    pub(super) fn table_bytes(&self) -> usize {
        self.by_key.capacity() * std::mem::size_of::<Option<(u64, Child)>>()
            + self.by_sa.capacity() * std::mem::size_of::<Option<(u32, NonZeroU64)>>()
    }
}

#[cfg(test)]
impl std::ops::Index<&(u32, u64)> for Children {
    type Output = Child;

    fn index(&self, k: &(u32, u64)) -> &Child {
        self.get(k).expect("no such child")
    }
}

#[cfg(test)]
mod tests {
    use super::super::Names;
    use super::*;
    use std::sync::Arc;

    fn child(names: &Arc<Names>, in_id: u32) -> Child {
        Child { names: Arc::clone(names), in_id, in_spi: in_id ^ 0x5a5a, vip: None }
    }

    #[test]
    fn keys_pack_every_shard_and_come_apart() {
        for shard in 0..64 {
            for id in [1u64, 2, 77, 1 << 40, (1 << 58) - 1] {
                assert_eq!(parts(key(shard, id)), (shard, id));
            }
        }
        assert_eq!(TAGGED.get(), 1 << 63);
        assert_eq!(std::mem::size_of::<Option<(u32, NonZeroU64)>>(), 16);
        assert_eq!(std::mem::size_of::<Option<(u64, Child)>>(), 48);
    }

    /// The kept counts follow inserts, replacements and removals.
    #[test]
    fn counts_per_peer_follow_the_children() {
        let a = Arc::new(Names { peer: "a".into(), tunnel: None });
        let b = Arc::new(Names { peer: "b".into(), tunnel: Some("t".into()) });
        let mut m = Children::default();
        for id in 1..=10u64 {
            m.insert(((id % 3) as u32, id), child(if id % 2 == 0 { &a } else { &b }, 2 * id as u32));
            m.reserve_sa(2 * id as u32, ((id % 3) as u32, id));
        }
        assert_eq!(m.per_peer(), &m.per_peer_by_walk());
        assert_eq!(m.per_peer().get("a"), Some(&5));
        // A child of b replaced by one of a.
        m.insert((1, 1), child(&a, 2));
        assert_eq!(m.per_peer().get("a"), Some(&6));
        assert_eq!(m.per_peer().get("b"), Some(&4));
        for id in 1..=10u64 {
            assert_eq!(m.of_sa(2 * id as u32), Some(((id % 3) as u32, id)));
            if id % 2 == 1 {
                assert!(m.remove(&((id % 3) as u32, id)).is_some());
                m.release_sa(2 * id as u32);
            }
        }
        assert_eq!(m.per_peer(), &m.per_peer_by_walk());
        assert_eq!(m.per_peer().get("b"), None, "a peer with no child is gone");
        assert_eq!((m.len(), m.sas_reserved()), (5, 5));
        assert!(m.remove(&(1, 1)).is_none());
        assert_eq!(m.keys().count(), 5);
    }

    /// A million children (and their SA pairs) in the two tables: the
    /// bytes a tunnel, against the `std` maps they replace (hashbrown at
    /// 2^21 buckets: (56 + 1) + (24 + 1) bytes each).
    #[test]
    fn bytes_a_child_at_a_million() {
        let names = Arc::new(Names { peer: "ra".into(), tunnel: Some("ra0".into()) });
        let mut m = Children::default();
        let n = 1_000_000u32;
        for i in 0..n {
            let id = u64::from(i) / 2 + 1;
            let in_id = (1 << 31) + 2 * i;
            m.insert((i % 2, id), child(&names, in_id));
            m.reserve_sa(in_id, (i % 2, id));
        }
        let per = m.table_bytes() as f64 / f64::from(n);
        let std_maps = ((1usize << 21) * (57 + 25)) as f64 / f64::from(n);
        println!("children at 1M: {per:.1} B a tunnel (std maps: {std_maps:.1})");
        assert!(per <= 110.0, "{per}");
        assert!(std_maps - per >= 60.0, "{std_maps} vs {per}");
        assert_eq!(m.per_peer().get("ra"), Some(&(n as usize)));
    }
}
