//! The next-hop table: a flat array of fixed-size entries shared by routes.
//!
//! A BGP table has ~900K routes but a handful of next hops, so routes hold a
//! [`NhId`] into this table, deduplicated by (kind, ifindex, gateway) and
//! reference-counted by the writer. Each entry is four `AtomicU64` words:
//!
//! | word | contents |
//! |------|----------|
//! | 0 | kind (8 bits) \| ifindex << 8 \| is-v6 << 24 \| ECMP member count << 32 |
//! | 1 | MAC (48 bits) \| valid << 48; for an ECMP group: index of its first member |
//! | 2, 3 | gateway, high and low 64 bits (IPv4 in the low 32 bits of word 3) |
//!
//! The MAC lives alone in word 1 so that ARP/ND updates it in place with a
//! single store, and readers never see half a MAC. The other words of an
//! entry only change while the entry is unreachable (freed, then reused
//! after a grace period), so a reader sees a consistent entry. ECMP members
//! are a second flat array of `AtomicU32` ids.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use rustc_hash::FxBuildHasher;

use crate::changes::DirtyBits;
use crate::lpm::multibit::Entry;
use crate::lpm::{V4Entry, V6Entry};
use crate::reclaim::Garbage;
use crate::rib::KeyBuild;
use crate::types::{FibError, NH_NONE, NextHop, NhId, NhKind};

const WORDS: usize = 4;
const MAC_VALID: u64 = 1 << 48;

/// The reader-visible part: fixed-capacity arrays, read with plain loads.
pub(crate) struct NhTable {
    words: Box<[AtomicU64]>,
    members: Box<[AtomicU32]>,
}

fn pack_mac(mac: Option<[u8; 6]>) -> u64 {
    match mac {
        Some(m) => {
            let mut b = [0u8; 8];
            b[..6].copy_from_slice(&m);
            u64::from_le_bytes(b) | MAC_VALID
        }
        None => 0,
    }
}

fn unpack_mac(w: u64) -> Option<[u8; 6]> {
    if w & MAC_VALID == 0 {
        return None;
    }
    let b = w.to_le_bytes();
    Some([b[0], b[1], b[2], b[3], b[4], b[5]])
}

impl NhTable {
    pub(crate) fn new(max_nexthops: u32, max_members: u32) -> NhTable {
        NhTable {
            words: bytemuck::allocation::zeroed_slice_box(max_nexthops as usize * WORDS),
            members: bytemuck::allocation::zeroed_slice_box(max_members as usize),
        }
    }

    pub(crate) fn capacity(&self) -> u32 {
        (self.words.len() / WORDS) as u32
    }

    #[inline]
    fn word(&self, id: NhId, w: usize) -> u64 {
        self.words.get(id as usize * WORDS + w).map_or(0, |a| a.load(Ordering::Acquire))
    }

    /// Any id: unknown or free ids read as kind `None`.
    #[inline]
    pub(crate) fn get(&self, id: NhId) -> NextHop {
        let meta = self.word(id, 0);
        let kind = NhKind::from_u8(meta as u8);
        if kind == NhKind::None {
            return NextHop::NONE;
        }
        let ifindex = (meta >> 8) as u16;
        let hi = self.word(id, 2);
        let lo = self.word(id, 3);
        let gw = if meta & (1 << 24) != 0 {
            IpAddr::V6(Ipv6Addr::from((u128::from(hi) << 64) | u128::from(lo)))
        } else {
            IpAddr::V4(Ipv4Addr::from(lo as u32))
        };
        let mac = if kind == NhKind::Unicast { unpack_mac(self.word(id, 1)) } else { None };
        NextHop { kind, ifindex, gw, mac }
    }

    /// The member of an ECMP group for a flow hash; the id itself otherwise.
    #[inline]
    pub(crate) fn ecmp_pick(&self, id: NhId, hash: u32) -> NhId {
        let meta = self.word(id, 0);
        if meta as u8 != NhKind::Ecmp.to_u8() {
            return id;
        }
        let count = meta >> 32;
        let base = self.word(id, 1);
        // Multiply-shift maps the hash onto 0..count without a division.
        let i = base + ((u64::from(hash) * count) >> 32);
        self.members.get(i as usize).map_or(NH_NONE, |m| m.load(Ordering::Acquire))
    }

    fn write(&self, id: NhId, words: [u64; WORDS]) {
        for (i, w) in words.into_iter().enumerate() {
            if let Some(a) = self.words.get(id as usize * WORDS + i) {
                a.store(w, Ordering::Release);
            }
        }
    }

    fn set_mac(&self, id: NhId, mac: Option<[u8; 6]>) {
        if let Some(a) = self.words.get(id as usize * WORDS + 1) {
            a.store(pack_mac(mac), Ordering::Release);
        }
    }

    /// The raw entries (4 words each), for mirroring into a BPF array map.
    pub(crate) fn raw_words(&self) -> &[AtomicU64] {
        &self.words
    }

    pub(crate) fn raw_members(&self) -> &[AtomicU32] {
        &self.members
    }
}

/// What makes two next hops the same one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NhKey {
    Single {
        kind: NhKind,
        ifindex: u16,
        gw: IpAddr,
    },
    /// Sorted member ids (repeats weight a member).
    Group(Box<[NhId]>),
}

#[derive(Default)]
struct Slot {
    refs: u32,
    key: Option<NhKey>,
    /// (first member index, member count) for groups.
    members: (u32, u32),
}

/// Next-hop ids IPv6 routes can install (the IPv6 trie's leaves).
const V6_IDS: u32 = <V6Entry as Entry>::CHILD;
/// Next-hop ids IPv4 routes can install.
const V4_IDS: u32 = <V4Entry as Entry>::CHILD;
const _: () = assert!(V6_IDS < V4_IDS);

/// A range of next-hop ids, handed out lowest first.
struct IdRange {
    /// Ids freed (after their grace period).
    free: BinaryHeap<Reverse<NhId>>,
    /// The lowest id never handed out.
    next: u32,
    end: u32,
}

impl IdRange {
    fn new(start: u32, end: u32) -> IdRange {
        IdRange { free: BinaryHeap::new(), next: start, end }
    }

    /// The lowest free id below both the range's end and `cap`.
    fn take(&mut self, cap: u32) -> Option<NhId> {
        if let Some(Reverse(id)) = self.free.pop() {
            return Some(id);
        }
        let id = self.next;
        if id >= self.end.min(cap) {
            return None;
        }
        self.next += 1;
        Some(id)
    }
}

/// The writer side: dedupe, reference counts, free lists.
pub(crate) struct NhAlloc {
    /// KeyBuild, not Fx: Fx clusters next hops that differ only in the
    /// low bits of an IPv6 gateway (one find probed ~270 instructions'
    /// worth of groups on the full IPv6 table; callgrind, 2026-11-22).
    index: HashMap<NhKey, NhId, KeyBuild>,
    slots: Vec<Slot>,
    /// Ids by range (`IdRange`): the tries' 16-bit entries take next-hop
    /// ids below 2^13 (IPv6) and 2^15 (IPv4), so IPv6 next hops take ids
    /// from `low` and IPv4 ones from `mid` first: many IPv4 neighbours
    /// (one next hop each for their host routes) do not use up the ids
    /// IPv6 routes can install. `high` (up to the table's capacity) is
    /// handed out only when a family's ranges are full; a route on such an
    /// id is refused by its trie with an error, as before.
    low: IdRange,
    mid: IdRange,
    high: IdRange,
    members_free: HashMap<u32, Vec<u32>, FxBuildHasher>,
    members_next: u32,
    /// Resolved neighbours, so a next hop created later starts resolved.
    neighbors: HashMap<(u16, IpAddr), [u8; 6], FxBuildHasher>,
    live: usize,
    groups: usize,
    dirty_ids: DirtyBits,
    dirty_members: DirtyBits,
}

impl NhAlloc {
    pub(crate) fn new() -> NhAlloc {
        NhAlloc {
            index: HashMap::default(),
            slots: vec![Slot::default()],
            low: IdRange::new(1, V6_IDS),
            mid: IdRange::new(V6_IDS, V4_IDS),
            high: IdRange::new(V4_IDS, u32::MAX),
            members_free: HashMap::default(),
            members_next: 0,
            neighbors: HashMap::default(),
            live: 0,
            groups: 0,
            dirty_ids: DirtyBits::default(),
            dirty_members: DirtyBits::default(),
        }
    }

    /// A free id for a next hop of IPv4 routes only (`v4`) or possibly of
    /// IPv6 ones: from the family's own range first, lowest first (freed
    /// ids, after their grace period, before new ones).
    fn alloc_id(&mut self, table: &NhTable, v4: bool) -> Result<NhId, FibError> {
        let cap = table.capacity();
        let order = if v4 {
            [&mut self.mid, &mut self.low, &mut self.high]
        } else {
            [&mut self.low, &mut self.high, &mut self.mid]
        };
        let id = order.into_iter().find_map(|r| r.take(cap)).ok_or(FibError::Full("next-hop table"))?;
        if self.slots.len() <= id as usize {
            self.slots.resize_with(id as usize + 1, Slot::default);
        }
        Ok(id)
    }

    /// Whether the single next hop `id` serves IPv4 routes only: its
    /// gateway (the unspecified address for glean, local and discard next
    /// hops) is IPv4.
    fn is_v4(&self, id: NhId) -> bool {
        matches!(self.slots.get(id as usize).and_then(|s| s.key.as_ref()), Some(NhKey::Single { gw, .. }) if gw.is_ipv4())
    }

    /// Takes a reference on the single next hop (kind, ifindex, gw),
    /// creating it if needed.
    pub(crate) fn acquire(
        &mut self,
        table: &NhTable,
        kind: NhKind,
        ifindex: u16,
        gw: IpAddr,
    ) -> Result<NhId, FibError> {
        let key = NhKey::Single { kind, ifindex, gw };
        if let Some(&id) = self.index.get(&key) {
            self.slot_mut(id).refs += 1;
            return Ok(id);
        }
        let id = self.alloc_id(table, gw.is_ipv4())?;
        let (v6, hi, lo) = match gw {
            IpAddr::V4(a) => (0u64, 0u64, u64::from(u32::from(a))),
            IpAddr::V6(a) => {
                let v = u128::from(a);
                (1, (v >> 64) as u64, v as u64)
            }
        };
        let mac = if kind == NhKind::Unicast { self.neighbors.get(&(ifindex, gw)).copied() } else { None };
        table.write(id, [u64::from(kind.to_u8()) | (u64::from(ifindex) << 8) | (v6 << 24), pack_mac(mac), hi, lo]);
        self.dirty_ids.mark(id as usize);
        let slot = self.slot_mut(id);
        slot.refs = 1;
        slot.key = Some(key.clone());
        self.index.insert(key, id);
        self.live += 1;
        Ok(id)
    }

    /// Takes a reference on the ECMP group of `members`. The caller passes
    /// one reference per member; the group keeps them (or gives them back if
    /// the group already exists).
    pub(crate) fn acquire_group(
        &mut self,
        table: &NhTable,
        mut members: Vec<NhId>,
        garbage: &mut Vec<Garbage>,
    ) -> Result<NhId, FibError> {
        members.sort_unstable();
        let key = NhKey::Group(members.clone().into_boxed_slice());
        if let Some(&id) = self.index.get(&key) {
            self.slot_mut(id).refs += 1;
            for m in members {
                self.release(m, garbage);
            }
            return Ok(id);
        }
        let count = members.len() as u32;
        let base = match self.members_free.get_mut(&count).and_then(Vec::pop) {
            Some(b) => b,
            None => {
                let b = self.members_next;
                if u64::from(b) + u64::from(count) > table.members.len() as u64 {
                    for m in members {
                        self.release(m, garbage);
                    }
                    return Err(FibError::Full("ECMP member table"));
                }
                self.members_next += count;
                b
            }
        };
        let v4 = members.iter().all(|&m| self.is_v4(m));
        let id = match self.alloc_id(table, v4) {
            Ok(id) => id,
            Err(e) => {
                self.members_free.entry(count).or_default().push(base);
                for m in members {
                    self.release(m, garbage);
                }
                return Err(e);
            }
        };
        for (i, &m) in members.iter().enumerate() {
            if let Some(a) = table.members.get(base as usize + i) {
                a.store(m, Ordering::Release);
                self.dirty_members.mark(base as usize + i);
            }
        }
        table.write(id, [u64::from(NhKind::Ecmp.to_u8()) | (u64::from(count) << 32), u64::from(base), 0, 0]);
        // A mirror (the XDP lane's maps) copies the ids marked here: without
        // it a group made after the mirror's full copy reads as no route.
        self.dirty_ids.mark(id as usize);
        let slot = self.slot_mut(id);
        slot.refs = 1;
        slot.key = Some(key.clone());
        slot.members = (base, count);
        self.index.insert(key, id);
        self.live += 1;
        self.groups += 1;
        Ok(id)
    }

    fn slot_mut(&mut self, id: NhId) -> &mut Slot {
        // Ids handed out always have a slot; index 0 is a permanent dummy.
        let i = (id as usize).min(self.slots.len() - 1);
        &mut self.slots[i]
    }

    /// Takes one more reference on a live next hop (one the caller already
    /// holds a reference on).
    pub(crate) fn add_ref(&mut self, id: NhId) {
        if id != NH_NONE && (id as usize) < self.slots.len() {
            self.slot_mut(id).refs += 1;
        }
    }

    /// Drops a reference. The last one unlinks the entry; its slot (and a
    /// group's member block) go to `garbage`, to be reused after a grace
    /// period.
    pub(crate) fn release(&mut self, id: NhId, garbage: &mut Vec<Garbage>) {
        if id == NH_NONE || id as usize >= self.slots.len() {
            return;
        }
        let slot = self.slot_mut(id);
        if slot.refs == 0 {
            return;
        }
        slot.refs -= 1;
        if slot.refs > 0 {
            return;
        }
        let key = slot.key.take();
        let (base, count) = std::mem::take(&mut slot.members);
        self.live -= 1;
        if let Some(key) = key {
            self.index.remove(&key);
            if let NhKey::Group(members) = key {
                self.groups -= 1;
                garbage.push(Garbage::Members { base, count });
                for m in members.iter() {
                    self.release(*m, garbage);
                }
            }
        }
        garbage.push(Garbage::Nh(id));
    }

    /// Called once a grace period covered these.
    pub(crate) fn reuse_id(&mut self, id: NhId) {
        if id == NH_NONE {
            return;
        }
        let r = if id < V6_IDS {
            &mut self.low
        } else if id < V4_IDS {
            &mut self.mid
        } else {
            &mut self.high
        };
        r.free.push(Reverse(id));
    }

    pub(crate) fn reuse_members(&mut self, base: u32, count: u32) {
        self.members_free.entry(count).or_default().push(base);
    }

    /// Records (or forgets) a neighbour's MAC and updates the Unicast next
    /// hop (ifindex, ip) in place if it exists.
    pub(crate) fn set_neighbor(&mut self, table: &NhTable, ifindex: u16, ip: IpAddr, mac: Option<[u8; 6]>) {
        match mac {
            Some(m) => {
                self.neighbors.insert((ifindex, ip), m);
            }
            None => {
                self.neighbors.remove(&(ifindex, ip));
            }
        }
        let key = NhKey::Single { kind: NhKind::Unicast, ifindex, gw: ip };
        if let Some(&id) = self.index.get(&key) {
            table.set_mac(id, mac);
            self.dirty_ids.mark(id as usize);
        }
    }

    pub(crate) fn neighbors(&self) -> impl Iterator<Item = (u16, IpAddr)> + '_ {
        self.neighbors.keys().copied()
    }

    /// True if the neighbour (ifindex, ip) has a MAC recorded.
    pub(crate) fn has_neighbor(&self, ifindex: u16, ip: IpAddr) -> bool {
        self.neighbors.contains_key(&(ifindex, ip))
    }

    /// The member ids of a group (empty for a single next hop).
    pub(crate) fn members(&self, id: NhId) -> &[NhId] {
        match self.slots.get(id as usize).and_then(|s| s.key.as_ref()) {
            Some(NhKey::Group(m)) => m,
            _ => &[],
        }
    }

    /// (next-hop ids, ECMP member slots) written since the last call.
    pub(crate) fn take_changes(&mut self) -> (Vec<std::ops::Range<u32>>, Vec<std::ops::Range<u32>>) {
        (self.dirty_ids.take(), self.dirty_members.take())
    }

    pub(crate) fn live(&self) -> usize {
        self.live
    }

    pub(crate) fn groups(&self) -> usize {
        self.groups
    }

    /// Bytes of the reader table in use (high-water marks).
    pub(crate) fn used_bytes(&self) -> usize {
        self.slots.len() * WORDS * 8 + self.members_next as usize * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn dedupes_and_refcounts() {
        let t = NhTable::new(16, 16);
        let mut a = NhAlloc::new();
        let mut g = Vec::new();
        let x = a.acquire(&t, NhKind::Unicast, 3, v4("10.0.0.1")).expect("x");
        let y = a.acquire(&t, NhKind::Unicast, 3, v4("10.0.0.1")).expect("y");
        let z = a.acquire(&t, NhKind::Unicast, 4, v4("10.0.0.1")).expect("z");
        assert_eq!(x, y);
        assert_ne!(x, z);
        assert_ne!(x, NH_NONE);
        assert_eq!(t.get(x), NextHop { kind: NhKind::Unicast, ifindex: 3, gw: v4("10.0.0.1"), mac: None });
        a.release(x, &mut g);
        assert!(g.is_empty(), "one reference left");
        a.release(y, &mut g);
        assert_eq!(g, vec![Garbage::Nh(x)]);
        // The entry still reads as before for readers inside the grace period.
        assert_eq!(t.get(x).kind, NhKind::Unicast);
        assert_eq!(a.live(), 1);
    }

    #[test]
    fn mac_updates_in_place_and_survives_recreation() {
        let t = NhTable::new(16, 16);
        let mut a = NhAlloc::new();
        let gw: IpAddr = "2001:db8::1".parse().expect("gw");
        let x = a.acquire(&t, NhKind::Unicast, 1, gw).expect("x");
        a.set_neighbor(&t, 1, gw, Some([1, 2, 3, 4, 5, 6]));
        assert_eq!(t.get(x).mac, Some([1, 2, 3, 4, 5, 6]));
        assert_eq!(t.get(x).gw, gw);
        a.set_neighbor(&t, 1, gw, None);
        assert_eq!(t.get(x).mac, None);
        a.set_neighbor(&t, 2, gw, Some([9; 6]));
        let y = a.acquire(&t, NhKind::Unicast, 2, gw).expect("y");
        assert_eq!(t.get(y).mac, Some([9; 6]), "a next hop created after ARP starts resolved");
    }

    #[test]
    fn freed_ids_are_reused_lowest_first() {
        let t = NhTable::new(16, 16);
        let mut a = NhAlloc::new();
        let mut g = Vec::new();
        let ids: Vec<NhId> = (1..=5).map(|i| a.acquire(&t, NhKind::Unicast, i, v4("10.0.0.1")).expect("id")).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5]);
        for id in [2, 4, 1] {
            a.release(id, &mut g);
        }
        for x in g.drain(..) {
            if let Garbage::Nh(id) = x {
                a.reuse_id(id);
            }
        }
        let again: Vec<NhId> =
            (6..=9).map(|i| a.acquire(&t, NhKind::Unicast, i, v4("10.0.0.1")).expect("id")).collect();
        assert_eq!(again, vec![1, 2, 4, 6], "the lowest free id first, then a new one");
    }

    #[test]
    fn unknown_ids_read_as_none_and_capacity_is_enforced() {
        let t = NhTable::new(3, 4);
        let mut a = NhAlloc::new();
        assert_eq!(t.get(0), NextHop::NONE);
        assert_eq!(t.get(u32::MAX), NextHop::NONE);
        assert_eq!(t.ecmp_pick(u32::MAX, 7), u32::MAX);
        a.acquire(&t, NhKind::Blackhole, 0, v4("0.0.0.0")).expect("1");
        a.acquire(&t, NhKind::Local, 0, v4("0.0.0.0")).expect("2");
        assert_eq!(a.acquire(&t, NhKind::Glean, 0, v4("0.0.0.0")), Err(FibError::Full("next-hop table")));
    }

    #[test]
    fn ecmp_groups_spread_and_dedupe() {
        let t = NhTable::new(16, 16);
        let mut a = NhAlloc::new();
        let mut g = Vec::new();
        let m: Vec<NhId> =
            (1..=4).map(|i| a.acquire(&t, NhKind::Unicast, i, v4("10.0.0.1")).expect("member")).collect();
        let grp = a.acquire_group(&t, m.clone(), &mut g).expect("group");
        assert_eq!(t.get(grp).kind, NhKind::Ecmp);
        let mut hits = [0u32; 4];
        for h in 0..4000u32 {
            let p = t.ecmp_pick(grp, h.wrapping_mul(2_654_435_761));
            let i = m.iter().position(|&x| x == p).expect("a member");
            hits[i] += 1;
        }
        assert!(hits.iter().all(|&c| c > 800), "spread {hits:?}");
        assert_eq!(t.ecmp_pick(m[0], 5), m[0], "identity for non-ECMP");
        let again: Vec<NhId> = m
            .iter()
            .rev()
            .map(|&x| {
                a.slot_mut(x).refs += 1;
                x
            })
            .collect();
        assert_eq!(a.acquire_group(&t, again, &mut g).expect("same"), grp);
        assert_eq!(a.groups(), 1);
        a.release(grp, &mut g);
        a.release(grp, &mut g);
        assert!(g.contains(&Garbage::Nh(grp)));
        assert!(g.iter().any(|x| matches!(x, Garbage::Members { count: 4, .. })));
        assert_eq!(a.live(), 0, "members freed with their group");
    }
}
