//! The SA database: the control side's one owner ([`SaDb`]) and what the
//! workers read ([`SaReader`] → [`SaTable`]).
//!
//! Changes (`add`, `add_batch`, `del`) are staged in the owner's maps and
//! become visible to workers all at once at [`SaDb::publish`], which
//! publishes a new immutable [`SaTable`] (two hash maps of `Arc<Sa>`:
//! by id for outbound, by SPI for inbound) through `tern_rcu::Published`;
//! a worker refreshes its snapshot once per batch with one atomic load. A
//! publish costs O(number of SAs) (the maps are cloned), so installing
//! many SAs is one `add_batch` and one `publish`: a million SAs then cost
//! one clone of a million entries, not a million.
//!
//! An SA removed is freed, and its AES-CBC key schedules zeroized, when
//! the last snapshot that held it is dropped.

use crate::config::{Cipher, Integ, Lifetime, SaConfig, SaError, UdpEncap};
use crate::sa::{F_EV_EXHAUSTED, F_EV_HARD, F_EV_SOFT, F_EXHAUSTED, F_HARD_PACKETS, Sa, SaCounters, SaState};
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

/// The SAs sharing one SPI (usually one; outbound SAs' SPIs are the
/// peers' choice and may collide).
#[derive(Clone)]
enum BySpi {
    One(Arc<Sa>),
    Many(Vec<Arc<Sa>>),
}

/// The SAs as workers see them (one published version).
#[derive(Clone, Default)]
pub struct SaTable {
    by_id: Map<Arc<Sa>>,
    by_spi: Map<BySpi>,
}

impl SaTable {
    /// The SA with this id.
    #[inline]
    pub fn get(&self, id: u32) -> Option<&Arc<Sa>> {
        self.by_id.get(&id)
    }

    /// The SAs with this SPI (inbound lookup; the caller picks the one its
    /// tunnel lists).
    #[inline]
    pub fn by_spi(&self, spi: u32) -> &[Arc<Sa>] {
        match self.by_spi.get(&spi) {
            Some(BySpi::One(sa)) => std::slice::from_ref(sa),
            Some(BySpi::Many(v)) => v,
            None => &[],
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
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

/// The control side's SA database (one owner).
pub struct SaDb {
    slots: usize,
    by_id: Map<Arc<Sa>>,
    by_spi: Map<BySpi>,
    published: Arc<Published<SaTable>>,
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
            by_id: Map::default(),
            by_spi: Map::default(),
            published: Arc::new(Published::new(SaTable::default())),
        }
    }

    /// What workers hold.
    pub fn reader(&self) -> SaReader {
        SaReader { published: self.published.clone() }
    }

    /// Number of SAs (published or not).
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Stages a new SA (visible to workers at the next [`publish`](Self::publish)).
    pub fn add(&mut self, cfg: SaConfig) -> Result<(), SaError> {
        if self.by_id.contains_key(&cfg.id) {
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
            if self.by_id.contains_key(&c.id) {
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
        self.by_id.reserve(built.len());
        self.by_spi.reserve(built.len());
        for sa in built {
            self.insert(sa);
        }
        Ok(())
    }

    fn insert(&mut self, sa: Arc<Sa>) {
        match self.by_spi.remove(&sa.spi) {
            None => {
                self.by_spi.insert(sa.spi, BySpi::One(sa.clone()));
            }
            Some(BySpi::One(o)) => {
                self.by_spi.insert(sa.spi, BySpi::Many(vec![o, sa.clone()]));
            }
            Some(BySpi::Many(mut v)) => {
                v.push(sa.clone());
                self.by_spi.insert(sa.spi, BySpi::Many(v));
            }
        }
        self.by_id.insert(sa.id, sa);
    }

    /// Stages the removal of an SA.
    pub fn del(&mut self, id: u32) -> Result<(), SaError> {
        let sa = self.by_id.remove(&id).ok_or(SaError::NotFound(id))?;
        match self.by_spi.remove(&sa.spi) {
            Some(BySpi::Many(mut v)) => {
                v.retain(|o| o.id != id);
                match v.len() {
                    0 => {}
                    1 => {
                        if let Some(o) = v.pop() {
                            self.by_spi.insert(sa.spi, BySpi::One(o));
                        }
                    }
                    _ => {
                        self.by_spi.insert(sa.spi, BySpi::Many(v));
                    }
                }
            }
            Some(BySpi::One(_)) | None => {}
        }
        Ok(())
    }

    /// Makes every change since the last publish visible to workers at
    /// once (O(number of SAs)).
    pub fn publish(&mut self) {
        self.published.publish(SaTable { by_id: self.by_id.clone(), by_spi: self.by_spi.clone() });
    }

    /// The SA's runtime object (published or staged).
    pub fn get(&self, id: u32) -> Option<&Arc<Sa>> {
        self.by_id.get(&id)
    }

    /// What `show` tells of one SA.
    pub fn info(&self, id: u32) -> Option<SaInfo> {
        self.by_id.get(&id).map(|sa| info(sa, Instant::now()))
    }

    /// Every SA, by id.
    pub fn list(&self) -> Vec<SaInfo> {
        let now = Instant::now();
        let mut v: Vec<SaInfo> = self.by_id.values().map(|sa| info(sa, now)).collect();
        v.sort_unstable_by_key(|i| i.id);
        v
    }

    /// Checks every SA's lifetimes at `now` (time counted from `add`),
    /// moves SAs to soft-expired/expired, and returns the events not
    /// reported before (each once). Call it periodically (once a second):
    /// byte and time limits, and inbound packet limits, take effect then;
    /// the outbound packet limit is exact (the sequence counter stops at it).
    pub fn poll_events(&mut self, now: Instant) -> Vec<SaEvent> {
        let mut ev = Vec::new();
        for sa in self.by_id.values() {
            let flags = sa.flags.load(Ordering::Relaxed);
            let c = sa.counters();
            let age = now.saturating_duration_since(sa.added).as_secs();
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
            let mut hard = passed(&sa.hard);
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
            } else if let Some(r) = passed(&sa.soft) {
                sa.set_state(SaState::SoftExpired);
                if flags & F_EV_SOFT == 0 {
                    sa.flags.fetch_or(F_EV_SOFT, Ordering::Relaxed);
                    ev.push(SaEvent { id: sa.id, kind: SaEventKind::SoftExpired(r) });
                }
            }
        }
        ev.sort_unstable_by_key(|e| e.id);
        ev
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
        soft: sa.soft,
        hard: sa.hard,
        counters: sa.counters(),
        state: sa.state(),
        seq_out: sa.seq_out(),
        seq_in: sa.seq_in(),
        age_secs: now.saturating_duration_since(sa.added).as_secs(),
    }
}
