//! The SA database: the control side's one owner ([`SaDb`]) and what the
//! workers read ([`SaReader`] → [`SaTable`]).
//!
//! Changes (`add`, `add_batch`, `del`) are staged in the owner's maps and
//! become visible to workers all at once at [`SaDb::publish`], which
//! publishes a new immutable [`SaTable`] (hash maps of `Arc<Sa>`: by id
//! for outbound, by SPI for inbound) through `tern_rcu::Published`; a
//! worker refreshes its snapshot once per batch with one atomic load.
//!
//! A published table has two levels, as a log-structured store does: a
//! shared *base* (an `Arc`, the same for many publications) and a *delta*
//! of the ids and SPIs changed since the base was built (a removal is an
//! entry saying "none"), asked first. A publish copies only the delta, so
//! it costs O(changes since the base), not O(SAs).
//!
//! The delta is folded into a base by double buffering: the owner keeps
//! the previous base (the *spare*) with the changes the current one has
//! over it. Once the delta passes [`swap_at`] entries and no published
//! table holds the spare any more (the workers moved on: `Arc::get_mut`),
//! both sets of changes are applied to the spare in place, which becomes
//! the base of the next publication with an empty delta; the old base is
//! the new spare. Each change is thus applied twice, whatever the number
//! of SAs: a million SAs cost what a thousand do (a rebuild of the whole
//! base at a bound of sqrt(2 x SAs x changes a publication) cost an IKE
//! daemon about a thousand entry copies a change at a million SAs, and its
//! setup rate fell with the tunnels held). The spare costs a second copy
//! of the indexes (about 70 bytes an SA) while SAs change; it is dropped
//! when they stop ([`SaDb::drop_spare`], the control side's idle tick),
//! and built again by one rebuild (O(SAs)) when they start again, or when
//! a worker that did not refresh its snapshot still holds it (the delta
//! then grows to the old bound, `rebuild_at`, and the base is rebuilt).
//!
//! The owner keeps no copy of its own: its view is the base and the
//! changes staged since (what the next delta publishes), so a million SAs
//! are indexed once, not twice (a rebuild holds two bases until readers
//! move to the new one). The base's SPI index holds one SA per SPI (16
//! bytes an entry); SPIs shared by several SAs sit in a side map, looked
//! at only when an SPI is not in the first.
//!
//! An SA removed is freed, and its AES-CBC key schedules zeroized, when
//! the last snapshot that held it is dropped.
//!
//! Each table also carries the local UDP ports of ESP in UDP
//! ([`SaTable::encap_ports`]: every SA's `udp_encap` source port, ours on
//! the wire both ways), sorted: `ip4-local`/`ip6-local` send UDP to them
//! to `esp-decrypt`, and the control side mirrors them into the XDP
//! programs and Linux mode's sockets. The owner counts the SAs per port
//! and builds a new list only when a port comes or goes.

use crate::config::{Cipher, Integ, Lifetime, SaConfig, SaError, UdpEncap};
use crate::sa::{F_EV_EXHAUSTED, F_EV_HARD, F_EV_SOFT, F_EXHAUSTED, F_HARD_PACKETS, Sa, SaCounters, SaState};
use crate::table::Table;
use serde::Serialize;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tern_rcu::{Published, Snapshot};

/// A fast hasher for u32 keys chosen by the control plane (ids, and SPIs
/// of inbound SAs, which the local side picks): a multiply and a fold.
#[derive(Default, Clone, Copy)]
pub struct U32Hasher(u64);

impl Hasher for U32Hasher {
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^ (h >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).rotate_left(5);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = self.0.rotate_left(32) ^ u64::from(n);
    }
}

type Map<V> = HashMap<u32, V, BuildHasherDefault<U32Hasher>>;

/// How many maps a base's indexes are split in, by a hash of the key.
/// Each grows on its own: a doubling rehashes 1/256th of the SAs (one
/// map of a million SAs doubling at once stopped the owner for tens of
/// milliseconds, while workers and peers waited for the next
/// publication), and `poll_events` sweeps whole shards from where it
/// stopped instead of skipping an iterator to its place (a walk of every
/// SA a second at a million).
const SHARDS: usize = 256;

/// The shard of a key: the high byte of a product whose factor is not
/// [`U32Hasher`]'s (the map's control bytes come from the top of that
/// product: the same factor would give every key in a shard the same
/// ones).
#[inline]
fn shard_of(key: u32) -> usize {
    usize::from((key.wrapping_mul(0x85eb_ca6b) >> 24) as u8)
}

/// A map split in [`SHARDS`] maps: [`Table`]s, whose slot for a key a
/// batch of lookups can prefetch ([`SaTable::prefetch`]).
#[derive(Clone)]
struct Sharded<V> {
    maps: Box<[Table<u32, V>; SHARDS]>,
}

impl<V> Default for Sharded<V> {
    fn default() -> Self {
        Sharded { maps: Box::new(std::array::from_fn(|_| Table::new())) }
    }
}

impl<V> Sharded<V> {
    #[inline]
    fn get(&self, key: u32) -> Option<&V> {
        self.maps[shard_of(key)].get(&key)
    }

    #[inline]
    fn prefetch(&self, key: u32) {
        self.maps[shard_of(key)].prefetch(&key);
    }

    fn insert(&mut self, key: u32, v: V) -> Option<V> {
        self.maps[shard_of(key)].insert(key, v)
    }

    fn remove(&mut self, key: u32) -> Option<V> {
        self.maps[shard_of(key)].remove(&key)
    }

    fn len(&self) -> usize {
        self.maps.iter().map(|m| m.len()).sum()
    }

    fn iter(&self) -> impl Iterator<Item = (&u32, &V)> {
        self.maps.iter().flat_map(|m| m.iter())
    }
}

/// How many changes the delta over a base of `n` SAs may hold before the
/// base is rebuilt, when publications carry `b` changes on average. Each
/// publication copies the delta (T/2 entries on average) and each rebuild
/// copies the table (n) once per T changes, so a change costs about
/// T/2b + n/T copies: T = sqrt(2 n b) is best. An IKE daemon publishes
/// every few setups (b of 1-10: the answer that lets a peer use a child SA
/// waits for its publication), the API in calls of thousands: with a fixed
/// T tuned for the API (64 sqrt(n)), a million SAs cost 16,000 copies a
/// change at b = 2 (tern-bench ike's `ternrun` at 400K tunnels spent 15 %
/// of tern's CPU in publish); with T from b, about 1,000. Small tables: at
/// least 256.
fn rebuild_at(n: usize, b: usize) -> usize {
    (2 * n).saturating_mul(b.max(1)).isqrt().max(256)
}

/// How many changes the delta holds before it is folded into the spare
/// (when the spare is free): each publication copies the delta (T/2 on
/// average, b changes each), each change is applied twice to the bases, so
/// T of about 8 b keeps the copies near 4 a change; at least 64.
fn swap_at(b: usize) -> usize {
    b.saturating_mul(8).clamp(64, 1 << 16)
}

/// The SAs sharing one SPI (usually one; outbound SAs' SPIs are the
/// peers' choice and may collide).
#[derive(Clone)]
enum BySpi {
    One(Arc<Sa>),
    Many(Vec<Arc<Sa>>),
}

impl BySpi {
    fn of(mut v: Vec<Arc<Sa>>) -> Option<BySpi> {
        match v.len() {
            0 => None,
            1 => v.pop().map(BySpi::One),
            _ => Some(BySpi::Many(v)),
        }
    }

    fn as_slice(&self) -> &[Arc<Sa>] {
        match self {
            BySpi::One(sa) => std::slice::from_ref(sa),
            BySpi::Many(v) => v,
        }
    }
}

/// The base of published tables.
#[derive(Clone, Default)]
struct Level {
    by_id: Sharded<Arc<Sa>>,
    /// SPIs of one SA (almost all).
    by_spi: Sharded<Arc<Sa>>,
    /// SPIs several SAs share.
    shared_spi: Map<Vec<Arc<Sa>>>,
}

impl Level {
    /// Applies changes (each id's and SPI's current entry) in place.
    fn apply(
        &mut self,
        ids: impl Iterator<Item = (u32, Option<Arc<Sa>>)>,
        spis: impl Iterator<Item = (u32, Option<BySpi>)>,
    ) {
        for (id, e) in ids {
            match e {
                Some(sa) => self.by_id.insert(id, sa),
                None => self.by_id.remove(id),
            };
        }
        for (spi, e) in spis {
            match e {
                Some(BySpi::One(sa)) => {
                    if !self.shared_spi.is_empty() {
                        self.shared_spi.remove(&spi);
                    }
                    self.by_spi.insert(spi, sa);
                }
                Some(BySpi::Many(v)) => {
                    self.by_spi.remove(spi);
                    self.shared_spi.insert(spi, v);
                }
                None => {
                    self.by_spi.remove(spi);
                    if !self.shared_spi.is_empty() {
                        self.shared_spi.remove(&spi);
                    }
                }
            }
        }
    }

    /// Room in each shard for what `ids` and `spis` may add: a rebuild
    /// applies up to all the SAs at once, and tables that grow by a
    /// quarter would otherwise place each entry about five times.
    fn reserve_for(&mut self, ids: &Map<Option<Arc<Sa>>>, spis: &Map<Option<BySpi>>) {
        let mut by_id = [0usize; SHARDS];
        let mut by_spi = [0usize; SHARDS];
        for (id, e) in ids {
            if e.is_some()
                && let Some(n) = by_id.get_mut(shard_of(*id))
            {
                *n += 1;
            }
        }
        for (spi, e) in spis {
            if matches!(e, Some(BySpi::One(_)))
                && let Some(n) = by_spi.get_mut(shard_of(*spi))
            {
                *n += 1;
            }
        }
        for (m, n) in self.by_id.maps.iter_mut().zip(by_id) {
            m.reserve(n);
        }
        for (m, n) in self.by_spi.maps.iter_mut().zip(by_spi) {
            m.reserve(n);
        }
    }

    fn spi(&self, spi: u32) -> &[Arc<Sa>] {
        if let Some(sa) = self.by_spi.get(spi) {
            return std::slice::from_ref(sa);
        }
        if !self.shared_spi.is_empty()
            && let Some(v) = self.shared_spi.get(&spi)
        {
            return v;
        }
        &[]
    }
}

/// The ids and SPIs changed since the base: the current entry, or `None`
/// for one removed.
#[derive(Clone, Default)]
struct Delta {
    by_id: Map<Option<Arc<Sa>>>,
    by_spi: Map<Option<BySpi>>,
}

/// The SAs as workers see them (one published version): the shared base
/// and the delta over it (see the module doc).
#[derive(Clone, Default)]
pub struct SaTable {
    base: Arc<Level>,
    delta: Delta,
    len: usize,
    encap_ports: Arc<[u16]>,
}

impl SaTable {
    /// The SA with this id.
    #[inline]
    pub fn get(&self, id: u32) -> Option<&Arc<Sa>> {
        if !self.delta.by_id.is_empty()
            && let Some(e) = self.delta.by_id.get(&id)
        {
            return e.as_ref();
        }
        self.base.by_id.get(id)
    }

    /// Hints the CPU to fetch where [`SaTable::get`]`(id)` looks in the
    /// base (the delta is small and warm): a node with a batch of ids
    /// prefetches them all, then looks them up, so that the misses of a
    /// million-SA table overlap.
    #[inline]
    pub fn prefetch(&self, id: u32) {
        self.base.by_id.prefetch(id);
    }

    /// The same for [`SaTable::by_spi`]`(spi)`.
    #[inline]
    pub fn prefetch_spi(&self, spi: u32) {
        self.base.by_spi.prefetch(spi);
    }

    /// The SAs with this SPI (inbound lookup; the caller picks the one its
    /// tunnel lists).
    #[inline]
    pub fn by_spi(&self, spi: u32) -> &[Arc<Sa>] {
        if !self.delta.by_spi.is_empty()
            && let Some(e) = self.delta.by_spi.get(&spi)
        {
            return e.as_ref().map_or(&[], BySpi::as_slice);
        }
        self.base.spi(spi)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every SA of this version (the base's the delta does not shadow,
    /// then the delta's): a scrape of /metrics walks it off the control
    /// thread.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Sa>> {
        let base = self.base.by_id.iter().filter(|(id, _)| !self.delta.by_id.contains_key(id)).map(|(_, sa)| sa);
        base.chain(self.delta.by_id.values().flatten())
    }

    /// How many ids and SPIs the delta holds (what a publication copied).
    pub fn delta_len(&self) -> usize {
        self.delta.by_id.len().max(self.delta.by_spi.len())
    }

    /// The local UDP ports of the SAs with `udp_encap` (their
    /// `src_port`), sorted, each once (see the module). The same `Arc`
    /// from one publication to the next while the ports do not change.
    pub fn encap_ports(&self) -> &Arc<[u16]> {
        &self.encap_ports
    }

    /// Whether an SA uses `port` as its local ESP-in-UDP port.
    #[inline]
    pub fn is_encap_port(&self, port: u16) -> bool {
        !self.encap_ports.is_empty() && self.encap_ports.binary_search(&port).is_ok()
    }
}

/// What workers hold: the published table. Clone + Send + Sync.
#[derive(Clone)]
pub struct SaReader {
    published: Arc<Published<SaTable>>,
}

impl SaReader {
    /// A worker's snapshot (refresh it once per batch).
    pub fn snapshot(&self) -> Snapshot<SaTable> {
        self.published.snapshot()
    }

    /// The current table.
    pub fn load(&self) -> Arc<SaTable> {
        self.published.load()
    }

    /// A reader of an empty table that never changes (graphs without
    /// IPsec, tests).
    pub fn empty() -> SaReader {
        SaReader { published: Arc::new(Published::new(SaTable::default())) }
    }
}

/// An SA as `show` tells it: the configuration without keys, counters,
/// state and sequence numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SaInfo {
    pub id: u32,
    pub spi: u32,
    pub cipher: Cipher,
    pub integ: Integ,
    pub esn: bool,
    pub replay_window: u32,
    pub udp_encap: Option<UdpEncap>,
    pub soft: Lifetime,
    pub hard: Lifetime,
    pub counters: SaCounters,
    pub state: SaState,
    /// The last outbound sequence number used.
    pub seq_out: u64,
    /// The highest inbound sequence number authenticated.
    pub seq_in: u64,
    /// Seconds since the SA was installed.
    pub age_secs: u64,
}

/// Which limit a lifetime event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Reason {
    Packets,
    Bytes,
    Time,
}

/// What happened to an SA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SaEventKind {
    /// A soft lifetime passed (rekey now).
    SoftExpired(Reason),
    /// A hard lifetime passed: the SA drops every packet.
    HardExpired(Reason),
    /// The outbound sequence numbers ran out: the SA drops every packet.
    SeqExhausted,
}

/// An event for the IKE side, each reported once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SaEvent {
    pub id: u32,
    pub kind: SaEventKind,
}

/// A base no longer published, and what the current base changed over it.
struct Spare {
    level: Arc<Level>,
    ids: Map<Option<Arc<Sa>>>,
    spis: Map<Option<BySpi>>,
}

/// The control side's SA database (one owner).
pub struct SaDb {
    slots: usize,
    /// The base of the tables published since it was built, and the ids
    /// and SPIs changed since with what they hold now (what a
    /// publication's delta holds): together, the owner's view.
    base: Arc<Level>,
    ids: Map<Option<Arc<Sa>>>,
    spis: Map<Option<BySpi>>,
    /// The previous base and the changes `base` has over it (see the
    /// module doc).
    spare: Option<Spare>,
    len: usize,
    /// SAs with a packet or byte lifetime, which `poll_events` checks on
    /// every call.
    timed: Map<()>,
    /// When an SA's time lifetimes (soft, hard) pass: checked as they
    /// come due, not by walking every SA with a lifetime at every call
    /// (IKE's child SAs all have one: a million of them cost 15 % of the
    /// control thread). Entries of SAs deleted since are dropped as they
    /// come up. One entry an SA, its next deadline (the soft one's check
    /// pushes the hard one): (milliseconds from `epoch`, rounded up, in
    /// two halves; SA id), 12 bytes (two entries of 16, one for each
    /// lifetime, were 32 bytes an IKE child SA, 64 a tunnel).
    deadlines: std::collections::BinaryHeap<std::cmp::Reverse<Deadline>>,
    epoch: Instant,
    /// The next shard of the base `poll_events` sweeps.
    sweep: usize,
    /// `sa::exhaustions()` when `poll_events` last looked, and the shards
    /// of the base left to sweep for the events of SAs that ran out since
    /// (none to sweep while no SA runs out).
    exhaustions_seen: u64,
    sweep_left: usize,
    published: Arc<Published<SaTable>>,
    /// SAs per local ESP-in-UDP port (see the module), and the list the
    /// next publication carries (rebuilt when a port came or went).
    ports: std::collections::BTreeMap<u16, u32>,
    encap_ports: Arc<[u16]>,
    ports_changed: bool,
    /// Changes staged since the last publication, and the average per
    /// publication (scaled by 16, a moving average): `rebuild_at`'s b.
    staged: usize,
    per_publish16: usize,
}

impl Default for SaDb {
    fn default() -> Self {
        SaDb::new()
    }
}

impl SaDb {
    /// A database with one counter slot per CPU (at most 64).
    pub fn new() -> SaDb {
        SaDb::with_workers(std::thread::available_parallelism().map_or(1, |n| n.get()).min(64))
    }

    /// A database with `workers` counter slots per SA (a worker with a
    /// larger index shares slot `index % workers`, still counted right).
    pub fn with_workers(workers: usize) -> SaDb {
        SaDb {
            slots: workers.max(1),
            base: Arc::default(),
            ids: Map::default(),
            spis: Map::default(),
            spare: None,
            len: 0,
            timed: Map::default(),
            deadlines: std::collections::BinaryHeap::new(),
            epoch: Instant::now(),
            sweep: 0,
            exhaustions_seen: 0,
            sweep_left: 0,
            published: Arc::new(Published::new(SaTable::default())),
            ports: std::collections::BTreeMap::new(),
            encap_ports: Arc::from(Vec::new()),
            ports_changed: false,
            staged: 0,
            per_publish16: 16,
        }
    }

    /// What workers hold.
    pub fn reader(&self) -> SaReader {
        SaReader { published: self.published.clone() }
    }

    /// Number of SAs (published or not).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The SAs with this SPI now (staged or published).
    fn spi_now(&self, spi: u32) -> Vec<Arc<Sa>> {
        match self.spis.get(&spi) {
            Some(e) => e.as_ref().map_or(&[][..], BySpi::as_slice).to_vec(),
            None => self.base.spi(spi).to_vec(),
        }
    }

    /// Every SA (staged or published).
    fn iter(&self) -> impl Iterator<Item = &Arc<Sa>> {
        let base = self.base.by_id.iter().filter(|(id, _)| !self.ids.contains_key(id)).map(|(_, sa)| sa);
        base.chain(self.ids.values().flatten())
    }

    /// Stages a new SA (visible to workers at the next [`publish`](Self::publish)).
    pub fn add(&mut self, cfg: SaConfig) -> Result<(), SaError> {
        if self.get(cfg.id).is_some() {
            return Err(SaError::Exists(cfg.id));
        }
        let sa = Arc::new(Sa::new(cfg, self.slots, Instant::now())?);
        self.insert(sa);
        Ok(())
    }

    /// Stages SAs all or nothing: the first that fails (validation, an id
    /// that exists or is given twice) leaves the database as it was.
    pub fn add_batch(&mut self, cfgs: Vec<SaConfig>) -> Result<(), SaError> {
        let now = Instant::now();
        let mut ids = Map::<()>::default();
        ids.reserve(cfgs.len());
        for c in &cfgs {
            if self.get(c.id).is_some() {
                return Err(SaError::Exists(c.id));
            }
            if ids.insert(c.id, ()).is_some() {
                return Err(SaError::DuplicateInBatch(c.id));
            }
        }
        let mut built = Vec::with_capacity(cfgs.len());
        for c in cfgs {
            let id = c.id;
            built
                .push(Arc::new(Sa::new(c, self.slots, now).map_err(|e| SaError::InBatch { id, source: Box::new(e) })?));
        }
        self.ids.reserve(built.len());
        self.spis.reserve(built.len());
        for sa in built {
            self.insert(sa);
        }
        Ok(())
    }

    fn insert(&mut self, sa: Arc<Sa>) {
        if counts_life(&sa.soft()) || counts_life(&sa.hard()) {
            self.timed.insert(sa.id, ());
        }
        if let Some(at) = next_deadline(&sa, self.epoch, None) {
            self.deadlines.push(std::cmp::Reverse(deadline(at, sa.id)));
        }
        if let Some(e) = sa.udp_encap {
            let n = self.ports.entry(e.src_port).or_insert(0);
            self.ports_changed |= *n == 0;
            *n += 1;
        }
        let mut v = self.spi_now(sa.spi);
        v.push(sa.clone());
        self.spis.insert(sa.spi, BySpi::of(v));
        self.ids.insert(sa.id, Some(sa));
        self.len += 1;
        self.staged += 1;
    }

    /// Stages the removal of an SA.
    pub fn del(&mut self, id: u32) -> Result<(), SaError> {
        let sa = self.get(id).ok_or(SaError::NotFound(id))?;
        let (spi, encap) = (sa.spi, sa.udp_encap);
        if let Some(e) = encap
            && let std::collections::btree_map::Entry::Occupied(mut n) = self.ports.entry(e.src_port)
        {
            *n.get_mut() -= 1;
            if *n.get() == 0 {
                n.remove();
                self.ports_changed = true;
            }
        }
        self.timed.remove(&id);
        self.ids.insert(id, None);
        let mut v = self.spi_now(spi);
        v.retain(|o| o.id != id);
        self.spis.insert(spi, BySpi::of(v));
        self.len -= 1;
        self.staged += 1;
        Ok(())
    }

    /// Makes every change since the last publish visible to workers at
    /// once. Costs O(changes since the base); folds them into the spare
    /// base (O(changes)) when it is free, else rebuilds the base (O(SAs))
    /// when they pass `rebuild_at` (see the module doc).
    pub fn publish(&mut self) {
        // b: a moving average over about 16 publications.
        self.per_publish16 = self.per_publish16 - self.per_publish16 / 16 + self.staged;
        self.staged = 0;
        let b = self.per_publish16 / 16;
        let changed = self.ids.len().max(self.spis.len());
        if changed > swap_at(b) && !self.swap() && changed > rebuild_at(self.base.by_id.len(), b) {
            let level = Arc::new(self.merged());
            let old = std::mem::replace(&mut self.base, level);
            // The old base is the spare, behind by what was staged.
            let (ids, spis) = (std::mem::take(&mut self.ids), std::mem::take(&mut self.spis));
            self.spare = Some(Spare { level: old, ids, spis });
        }
        let delta = Delta { by_id: self.ids.clone(), by_spi: self.spis.clone() };
        if std::mem::take(&mut self.ports_changed) {
            self.encap_ports = self.ports.keys().copied().collect();
        }
        let encap_ports = Arc::clone(&self.encap_ports);
        self.published.publish(SaTable { base: Arc::clone(&self.base), delta, len: self.len, encap_ports });
    }

    /// Folds the staged changes into the spare base if no table holds it
    /// any more: it becomes the base (the delta empties), the base the
    /// spare. Whether it did.
    fn swap(&mut self) -> bool {
        let Some(mut spare) = self.spare.take() else { return false };
        let Some(level) = Arc::get_mut(&mut spare.level) else {
            self.spare = Some(spare);
            return false;
        };
        // What the base has over the spare, then what was staged since.
        level.apply(spare.ids.into_iter(), spare.spis.into_iter());
        level
            .apply(self.ids.iter().map(|(id, e)| (*id, e.clone())), self.spis.iter().map(|(spi, e)| (*spi, e.clone())));
        let old = std::mem::replace(&mut self.base, spare.level);
        let (ids, spis) = (std::mem::take(&mut self.ids), std::mem::take(&mut self.spis));
        self.spare = Some(Spare { level: old, ids, spis });
        true
    }

    /// Drops the spare base (a second copy of the indexes) while the SAs
    /// do not change: the control side calls it when idle. The next burst
    /// of changes starts with one rebuild.
    pub fn drop_spare(&mut self) {
        self.spare = None;
    }

    /// Whether a spare base is held (tests, memory figures).
    pub fn has_spare(&self) -> bool {
        self.spare.is_some()
    }

    /// The base with the staged changes applied (a new base).
    fn merged(&self) -> Level {
        let mut l = (*self.base).clone();
        l.reserve_for(&self.ids, &self.spis);
        l.apply(self.ids.iter().map(|(id, e)| (*id, e.clone())), self.spis.iter().map(|(spi, e)| (*spi, e.clone())));
        l
    }

    /// The SA's runtime object (published or staged).
    pub fn get(&self, id: u32) -> Option<&Arc<Sa>> {
        match self.ids.get(&id) {
            Some(e) => e.as_ref(),
            None => self.base.by_id.get(id),
        }
    }

    /// What `show` tells of one SA.
    pub fn info(&self, id: u32) -> Option<SaInfo> {
        self.get(id).map(|sa| info(sa, Instant::now()))
    }

    /// Every SA, by id.
    pub fn list(&self) -> Vec<SaInfo> {
        let now = Instant::now();
        let mut v: Vec<SaInfo> = self.iter().map(|sa| info(sa, now)).collect();
        v.sort_unstable_by_key(|i| i.id);
        v
    }

    /// The counters summed over every SA (what /metrics totals: no list
    /// and no sort of a million SAs).
    pub fn totals(&self) -> SaCounters {
        let mut t = [0u64; 7];
        for sa in self.iter() {
            let c = sa.counters();
            for (x, v) in t.iter_mut().zip([
                c.packets,
                c.bytes,
                c.replay_drops,
                c.integrity_failures,
                c.seq_exhausted,
                c.expired_drops,
                c.decrypt_errors,
            ]) {
                *x = x.wrapping_add(v);
            }
        }
        let [packets, bytes, replay_drops, integrity_failures, seq_exhausted, expired_drops, decrypt_errors] = t;
        SaCounters { packets, bytes, replay_drops, integrity_failures, seq_exhausted, expired_drops, decrypt_errors }
    }

    /// The `k` SAs of lowest id, by id: (id, SPI, counters). A selection,
    /// not a sort of every SA.
    pub fn first(&self, k: usize) -> Vec<(u32, u32, SaCounters)> {
        let mut ids: Vec<u32> = self.iter().map(|sa| sa.id).collect();
        if ids.len() > k {
            if k == 0 {
                return Vec::new();
            }
            ids.select_nth_unstable(k - 1);
            ids.truncate(k);
        }
        ids.sort_unstable();
        ids.into_iter().filter_map(|id| self.get(id).map(|sa| (id, sa.spi, sa.counters()))).collect()
    }

    /// Checks the lifetimes at `now` (time counted from `add`), moves SAs
    /// to soft-expired/expired, and returns the events not reported before
    /// (each once). Call it periodically (once a second): byte and time
    /// limits, and inbound packet limits, take effect then; the outbound
    /// packet limit is exact (the sequence counter stops at it). SAs with
    /// packet or byte lifetimes are looked at every call, time lifetimes
    /// as they come due (a heap of deadlines), and, once the data path
    /// has found an SA out of sequence numbers (`sa::exhaustions`), every
    /// SA without a packet or byte lifetime, 65,536 a call, for that event
    /// (the SA itself stops at once; only the event may come that many
    /// calls later). Without one, nothing is swept.
    pub fn poll_events(&mut self, now: Instant) -> Vec<SaEvent> {
        let mut ev = Vec::new();
        // SAs with packet or byte lifetimes: every call.
        for id in self.timed.keys() {
            if let Some(sa) = self.get(*id) {
                check(sa, now, &mut ev);
            }
        }
        // Time lifetimes come due in order.
        let now_ms = u64::try_from(now.saturating_duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX);
        while let Some(std::cmp::Reverse((hi, lo, id))) = self.deadlines.peek().copied()
            && ms_of(hi, lo) <= now_ms
        {
            self.deadlines.pop();
            if let Some(sa) = self.get(id) {
                check(sa, now, &mut ev);
                // The hard lifetime after the soft one.
                if let Some(next) = next_deadline(sa, self.epoch, Some(ms_of(hi, lo))) {
                    self.deadlines.push(std::cmp::Reverse(deadline(next, id)));
                }
            }
        }
        // The others can only run out of sequence numbers (at 2^32 or
        // 2^64 packets): a slice of them per call, whole shards of the
        // base from where the last call stopped, so that a million SAs do
        // not cost a walk of a million every second (small tables are
        // walked whole each call); the SAs staged since the base, few,
        // every call.
        // Only after an SA ran out: a whole sweep from then (a new one if
        // another runs out meanwhile).
        let exhaustions = crate::sa::exhaustions();
        if exhaustions != self.exhaustions_seen {
            self.exhaustions_seen = exhaustions;
            self.sweep_left = SHARDS;
        }
        let mut looked = 0;
        let sweeping = self.sweep_left > 0;
        while self.sweep_left > 0 && looked < SWEEP {
            let shard = &self.base.by_id.maps[self.sweep % SHARDS];
            self.sweep = (self.sweep + 1) % SHARDS;
            self.sweep_left -= 1;
            looked += shard.len();
            for (id, sa) in shard.iter() {
                if !self.timed.contains_key(id) && !self.ids.contains_key(id) {
                    check(sa, now, &mut ev);
                }
            }
        }
        if sweeping {
            for sa in self.ids.values().flatten() {
                if !self.timed.contains_key(&sa.id) {
                    check(sa, now, &mut ev);
                }
            }
        }
        ev.sort_unstable_by_key(|e| e.id);
        ev.dedup();
        ev
    }
}

/// A deadline in the heap: milliseconds (high and low halves: 12 bytes
/// with the id where a u64 would make 16), SA id.
type Deadline = (u32, u32, u32);

fn deadline(ms: u64, id: u32) -> Deadline {
    ((ms >> 32) as u32, ms as u32, id)
}

fn ms_of(hi: u32, lo: u32) -> u64 {
    u64::from(hi) << 32 | u64::from(lo)
}

/// The first of `sa`'s time lifetimes (soft, hard) to pass (after
/// `after` milliseconds from `epoch`, if given): when, in milliseconds from `epoch`, rounded
/// up. A lifetime past what u64 milliseconds hold never comes.
fn next_deadline(sa: &Sa, epoch: Instant, after: Option<u64>) -> Option<u64> {
    let added = sa.added().saturating_duration_since(epoch);
    [sa.soft().secs, sa.hard().secs]
        .into_iter()
        .flatten()
        .filter_map(|secs| {
            let d = added.checked_add(std::time::Duration::from_secs(secs))?;
            u64::try_from(d.as_millis()).ok()?.checked_add(u64::from(d.subsec_nanos() % 1_000_000 > 0))
        })
        .filter(|&at| after.is_none_or(|a| at > a))
        .min()
}

/// A lifetime in packets or bytes (looked at every call: the counters
/// move without telling).
fn counts_life(l: &Lifetime) -> bool {
    l.packets.is_some() || l.bytes.is_some()
}

/// How many SAs without lifetimes `poll_events` looks at per call.
const SWEEP: usize = 65_536;

/// Moves `sa` to soft-expired/expired if a lifetime passed, and adds the
/// events not reported before (each once).
fn check(sa: &Sa, now: Instant, ev: &mut Vec<SaEvent>) {
    let flags = sa.flags.load(Ordering::Relaxed);
    let c = sa.counters();
    let age = now.saturating_duration_since(sa.added()).as_secs();
    let passed = |l: &Lifetime| {
        if l.packets.is_some_and(|p| c.packets >= p) {
            Some(Reason::Packets)
        } else if l.bytes.is_some_and(|b| c.bytes >= b) {
            Some(Reason::Bytes)
        } else if l.secs.is_some_and(|s| age >= s) {
            Some(Reason::Time)
        } else {
            None
        }
    };
    let mut hard = passed(&sa.hard());
    if hard.is_none() && flags & F_HARD_PACKETS != 0 {
        hard = Some(Reason::Packets);
    }
    if flags & F_EXHAUSTED != 0 && flags & F_EV_EXHAUSTED == 0 {
        sa.flags.fetch_or(F_EV_EXHAUSTED, Ordering::Relaxed);
        ev.push(SaEvent { id: sa.id, kind: SaEventKind::SeqExhausted });
    }
    if let Some(r) = hard {
        sa.set_state(SaState::Expired);
        if flags & F_EV_HARD == 0 {
            sa.flags.fetch_or(F_EV_HARD, Ordering::Relaxed);
            ev.push(SaEvent { id: sa.id, kind: SaEventKind::HardExpired(r) });
        }
    } else if let Some(r) = passed(&sa.soft()) {
        sa.set_state(SaState::SoftExpired);
        if flags & F_EV_SOFT == 0 {
            sa.flags.fetch_or(F_EV_SOFT, Ordering::Relaxed);
            ev.push(SaEvent { id: sa.id, kind: SaEventKind::SoftExpired(r) });
        }
    }
}

fn info(sa: &Sa, now: Instant) -> SaInfo {
    SaInfo {
        id: sa.id,
        spi: sa.spi,
        cipher: sa.cipher,
        integ: sa.integ,
        esn: sa.esn,
        replay_window: sa.replay_window,
        udp_encap: sa.udp_encap,
        soft: sa.soft(),
        hard: sa.hard(),
        counters: sa.counters(),
        state: sa.state(),
        seq_out: sa.seq_out(),
        seq_in: sa.seq_in(),
        age_secs: now.saturating_duration_since(sa.added()).as_secs(),
    }
}

#[cfg(test)]
mod encap_port_tests {
    use super::*;
    use crate::config::Key;

    fn sa(id: u32, ports: Option<(u16, u16)>) -> SaConfig {
        SaConfig {
            id,
            spi: 0x1000 + id,
            cipher: Cipher::Aes128Gcm,
            integ: Integ::None,
            key: Key::new(vec![id as u8; 20]),
            integ_key: Key::new(Vec::new()),
            esn: false,
            replay_window: 64,
            udp_encap: ports.map(|(src_port, dst_port)| UdpEncap { src_port, dst_port }),
            soft: Lifetime::default(),
            hard: Lifetime::default(),
        }
    }

    /// The published ports follow the SAs: sorted, each once, a port
    /// gone with the last SA that used it, the same list (one `Arc`)
    /// while no port comes or goes.
    #[test]
    fn encap_ports_follow_the_sas() {
        let mut db = SaDb::with_workers(1);
        let r = db.reader();
        assert!(r.load().encap_ports().is_empty());
        db.add(sa(1, Some((4600, 4500)))).expect("add");
        db.add(sa(2, Some((4500, 4500)))).expect("add");
        db.add(sa(3, None)).expect("add");
        db.add(sa(4, Some((4600, 4601)))).expect("add");
        assert!(r.load().encap_ports().is_empty(), "staged only");
        db.publish();
        let t = r.load();
        assert_eq!(&t.encap_ports()[..], &[4500, 4600]);
        assert!(t.is_encap_port(4600) && t.is_encap_port(4500) && !t.is_encap_port(4601));
        db.del(3).expect("del");
        db.publish();
        assert!(Arc::ptr_eq(r.load().encap_ports(), t.encap_ports()), "no port changed: the same list");
        db.del(1).expect("del");
        db.publish();
        assert_eq!(&r.load().encap_ports()[..], &[4500, 4600], "SA 4 still uses 4600");
        db.del(4).expect("del");
        db.publish();
        assert_eq!(&r.load().encap_ports()[..], &[4500]);
        assert!(!r.load().is_encap_port(4600));
        db.del(2).expect("del");
        db.publish();
        assert!(r.load().encap_ports().is_empty());
    }
}
