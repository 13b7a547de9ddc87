//! A security association as the workers use it: prepared keys, the
//! outbound sequence counter, the inbound replay window, per-worker
//! counters and the SA's state.
//!
//! ## Outbound sequence numbers: one atomic per SA
//!
//! Every packet sent on an SA needs a sequence number used once and never
//! wrapped. VPP binds each SA to one worker and hands other workers'
//! packets to it through a queue; here the owner is one atomic counter per
//! SA (`seq_out`) from which a worker reserves the
//! numbers of all of its batch's packets for that SA with one
//! compare-and-swap ([`Sa::reserve_seq`]). Why: no queue, no second pass
//! through another worker's graph, no reordering between workers beyond
//! what RSS already does, and the cost is one atomic per SA per batch,
//! uncontended unless several workers send on one SA at once (then one
//! cache line bounces once per batch, still cheaper than a handoff; the
//! counter is not padded to a line of its own: an inbound SA never writes
//! it, and an outbound one used by several workers bounces its line
//! anyway). The
//! counter saturates at its limit (2^32 - 1 without ESN, 2^64 - 1 with,
//! or the hard packet lifetime if lower): a batch that would pass it gets
//! only the numbers left, the rest of its packets are dropped and counted
//! (`seq_exhausted` or `expired_drops`), and the SA stops (state
//! [`SaState::Expired`], an event from [`crate::SaDb::poll_events`]).
//!
//! ## Inbound anti-replay: a window behind a mutex
//!
//! Several workers may receive on one SA (RSS spreads by outer flow, and
//! one tunnel is one flow, so usually one worker). The window
//! ([`ReplayWindow`]) sits behind a `Mutex` taken twice per packet at most
//! (check, update), never held across crypto; uncontended that is two
//! atomic operations.
//!
//! ## Counters
//!
//! One cache-line slot of counters per worker index (`worker % slots`),
//! added to with relaxed atomics once per batch by the worker that owns
//! the slot and summed by [`crate::SaDb::info`]/`list`. The slots are
//! allocated when the SA first counts something: an idle SA (a million
//! tunnels, most of them quiet) holds a pointer, not a cache line per
//! worker.
//!
//! ## Memory: what an idle SA holds
//!
//! An SA is built for a million of them, most idle: the state each
//! direction needs is made when the first packet needs it, behind one
//! pointer (`Live`: the expanded keys, then the counter slots at the
//! first count and the replay window at the first inbound check; an
//! outbound SA never has one); the sequence counter is one inline atomic
//! (an inbound SA never writes it); lifetimes in seconds only (what IKE
//! sets) inline, others boxed, and only when set; the install time as
//! nanoseconds from the first SA's (8 bytes, an `Instant` takes 16). The
//! struct is 112 bytes, 128 with the `Arc`'s counts (a size class of
//! mimalloc's; it was 160 + 16, which mimalloc rounds to 192: the
//! expanded keys, counter slots and replay window each had their own
//! `OnceLock`), plus the key bytes until the first packet.
//!
//! ## Keys
//!
//! The configured key bytes ([`crate::Key`]) are kept, zeroizing, until
//! the first use of the SA expands them (ring's AES-GCM key with its
//! GHASH table is ~0.5 KB, CBC's AES schedules and HMAC states more): the
//! first worker to need them builds them once ([`std::sync::OnceLock`];
//! another worker arriving meanwhile waits for that build), the raw bytes
//! are then zeroized and dropped, and [`key_builds`] counts the builds.
//! The AES-CBC key schedules (RustCrypto, `zeroize` feature) are zeroized
//! when the SA is dropped. ring's AES-GCM key and the HMAC states offer
//! no zeroization hook: their memory is freed, not wiped (said in the
//! crate's docs as a known limit).

use crate::config::{Cipher, Integ, Lifetime, SaConfig, SaError, UdpEncap};
use crate::esp::Crypto;
use crate::replay::{ReplayError, ReplayWindow};
use serde::Serialize;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;
use zeroize::Zeroizing;

/// Key expansions done by the data path (one per SA that saw a packet),
/// process-wide.
static KEY_BUILDS: AtomicU64 = AtomicU64::new(0);

/// How many SAs' keys were expanded (each once, on its first packet),
/// in this process.
pub fn key_builds() -> u64 {
    KEY_BUILDS.load(Ordering::Relaxed)
}

/// What an SA's counters say (summed over workers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SaCounters {
    /// Packets encrypted or decrypted (and authenticated).
    pub packets: u64,
    /// Their bytes: the inner packets.
    pub bytes: u64,
    /// Inbound: refused by the anti-replay window.
    pub replay_drops: u64,
    /// Inbound: the ICV did not verify.
    pub integrity_failures: u64,
    /// Outbound: dropped because the sequence numbers ran out.
    pub seq_exhausted: u64,
    /// Dropped because the SA expired (hard lifetime).
    pub expired_drops: u64,
    /// Inbound: authenticated but malformed (padding, length).
    pub decrypt_errors: u64,
}

const NCOUNTERS: usize = 7;

impl SaCounters {
    fn to_array(self) -> [u64; NCOUNTERS] {
        [
            self.packets,
            self.bytes,
            self.replay_drops,
            self.integrity_failures,
            self.seq_exhausted,
            self.expired_drops,
            self.decrypt_errors,
        ]
    }

    fn from_array(a: [u64; NCOUNTERS]) -> SaCounters {
        let [packets, bytes, replay_drops, integrity_failures, seq_exhausted, expired_drops, decrypt_errors] = a;
        SaCounters { packets, bytes, replay_drops, integrity_failures, seq_exhausted, expired_drops, decrypt_errors }
    }

    /// Nothing counted.
    pub fn is_zero(&self) -> bool {
        self.to_array() == [0; NCOUNTERS]
    }
}

/// One worker's counters of one SA, alone on its cache line.
#[repr(align(64))]
#[derive(Default)]
struct Slot([AtomicU64; NCOUNTERS]);

/// An SA's state as the data path sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SaState {
    Active,
    /// A soft lifetime passed: still used, the IKE side should rekey.
    SoftExpired,
    /// A hard lifetime passed or the sequence numbers ran out: every
    /// packet on it is dropped.
    Expired,
}

const ST_ACTIVE: u8 = 0;
const ST_SOFT: u8 = 1;
const ST_EXPIRED: u8 = 2;

/// Flags of why the SA stopped (set by the data path) and which events
/// were reported (set by the control side).
pub(crate) const F_EXHAUSTED: u8 = 1;
pub(crate) const F_HARD_PACKETS: u8 = 2;
pub(crate) const F_EV_SOFT: u8 = 4;
pub(crate) const F_EV_HARD: u8 = 8;
pub(crate) const F_EV_EXHAUSTED: u8 = 16;

/// SAs (of every database in the process) whose sequence numbers ran out,
/// each counted once when the data path finds it: `SaDb::poll_events`
/// looks for their event only when this moved, instead of walking a slice
/// of every SA at every call.
static EXHAUSTIONS: AtomicU64 = AtomicU64::new(0);

/// See [`EXHAUSTIONS`].
pub(crate) fn exhaustions() -> u64 {
    EXHAUSTIONS.load(Ordering::Acquire)
}

/// What an SA makes at its first use (any packet, or a count): the
/// expanded keys, and beside them, each made when first needed, the
/// counter slots and the replay window. One pointer in the SA for the
/// three (an idle SA of a million pays 16 bytes, not 56).
struct Live {
    crypto: Crypto,
    slots: OnceLock<Box<[Slot]>>,
    /// Made by the first inbound check (an outbound SA has none).
    replay: OnceLock<Box<Mutex<ReplayWindow>>>,
}

/// The cipher key then the integrity key, held until the first use
/// expands them; taken (and zeroized) by the build.
type RawKeys = Mutex<Option<Zeroizing<Box<[u8]>>>>;

/// Where [`Sa::added`] counts from (the first SA made).
static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

/// `t` as signed nanoseconds from [`EPOCH`] (8 bytes where an `Instant`
/// takes 16; 292 years either way).
fn to_nanos(t: Instant) -> i64 {
    let e = *EPOCH;
    match t.checked_duration_since(e) {
        Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        None => i64::try_from(e.saturating_duration_since(t).as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

fn from_nanos(n: i64) -> Instant {
    let e = *EPOCH;
    let d = std::time::Duration::from_nanos(n.unsigned_abs());
    let t = if n >= 0 { e.checked_add(d) } else { e.checked_sub(d) };
    t.unwrap_or(e)
}

/// Sequence numbers reserved for a batch: `first..first + count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqRange {
    pub first: u64,
    pub count: usize,
    /// Packets beyond `count` must be dropped: `true` when for want of
    /// sequence numbers (`seq_exhausted`), `false` for the hard packet
    /// lifetime (`expired_drops`).
    pub exhausted: bool,
}

/// A security association (see the module).
pub struct Sa {
    pub id: u32,
    pub spi: u32,
    pub cipher: Cipher,
    pub integ: Integ,
    pub esn: bool,
    state: AtomicU8,
    pub(crate) flags: AtomicU8,
    pub replay_window: u32,
    pub udp_encap: Option<UdpEncap>,
    /// Counter slots (workers), allocated on first count.
    nslots: u16,
    /// The last outbound number used.
    seq_out: AtomicU64,
    /// The highest outbound number allowed.
    seq_cap: u64,
    /// Until the first use.
    raw: RawKeys,
    /// Made by the first use.
    live: OnceLock<Box<Live>>,
    /// Soft and hard, when either limits something.
    lifetimes: Lifetimes,
    /// When it was installed: nanoseconds from [`EPOCH`].
    added: i64,
}

/// An SA's soft and hard lifetimes, as small as they can be held: none;
/// seconds only, each under 2^32 - 1 (IKE's child SAs: inline, 8 bytes);
/// else boxed.
enum Lifetimes {
    None,
    /// Soft and hard seconds, `u32::MAX` for none.
    Secs(u32, u32),
    Boxed(Box<[Lifetime; 2]>),
}

impl Lifetimes {
    fn of(soft: Lifetime, hard: Lifetime) -> Lifetimes {
        let secs = |l: &Lifetime| match (l.packets, l.bytes, l.secs) {
            (None, None, None) => Some(u32::MAX),
            (None, None, Some(s)) => u32::try_from(s).ok().filter(|&s| s != u32::MAX),
            _ => None,
        };
        match (secs(&soft), secs(&hard)) {
            (Some(s), Some(h)) => Lifetimes::Secs(s, h),
            _ => Lifetimes::Boxed(Box::new([soft, hard])),
        }
    }

    fn get(&self) -> [Lifetime; 2] {
        let secs = |s: u32| Lifetime { secs: (s != u32::MAX).then_some(u64::from(s)), ..Lifetime::default() };
        match self {
            Lifetimes::None => [Lifetime::default(); 2],
            Lifetimes::Secs(s, h) => [secs(*s), secs(*h)],
            Lifetimes::Boxed(b) => **b,
        }
    }
}

impl std::fmt::Debug for Sa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sa")
            .field("id", &self.id)
            .field("spi", &format_args!("{:#x}", self.spi))
            .field("cipher", &self.cipher)
            .field("integ", &self.integ)
            .field("esn", &self.esn)
            .finish_non_exhaustive()
    }
}

impl Sa {
    /// Builds an SA from a configuration (validated here), with `slots`
    /// counter slots (workers), installed at `now`. The configuration's
    /// keys are consumed and zeroized.
    ///
    /// Nothing is expanded yet: the keys are checked (lengths, pairs) and
    /// kept as bytes until the first packet (see the module).
    pub fn new(cfg: SaConfig, slots: usize, now: Instant) -> Result<Sa, SaError> {
        cfg.validate()?;
        Crypto::check(cfg.cipher, cfg.integ, &cfg.key, &cfg.integ_key)?;
        let seq_max = if cfg.esn { u64::MAX } else { u64::from(u32::MAX) };
        let seq_cap = cfg.hard.packets.map_or(seq_max, |p| p.min(seq_max));
        let timed = [&cfg.soft, &cfg.hard].iter().any(|l| l.packets.is_some() || l.bytes.is_some() || l.secs.is_some());
        Ok(Sa {
            id: cfg.id,
            spi: cfg.spi,
            cipher: cfg.cipher,
            integ: cfg.integ,
            esn: cfg.esn,
            state: AtomicU8::new(ST_ACTIVE),
            flags: AtomicU8::new(0),
            replay_window: cfg.replay_window,
            udp_encap: cfg.udp_encap,
            nslots: slots.clamp(1, usize::from(u16::MAX)) as u16,
            seq_out: AtomicU64::new(0),
            seq_cap,
            raw: Mutex::new(Some(Zeroizing::new([cfg.key.as_bytes(), cfg.integ_key.as_bytes()].concat().into()))),
            live: OnceLock::new(),
            lifetimes: if timed { Lifetimes::of(cfg.soft, cfg.hard) } else { Lifetimes::None },
            added: to_nanos(now),
        })
    }

    /// The soft lifetime (rekey).
    pub fn soft(&self) -> Lifetime {
        self.lifetimes.get()[0]
    }

    /// The hard lifetime (the SA stops).
    pub fn hard(&self) -> Lifetime {
        self.lifetimes.get()[1]
    }

    /// Hints the CPU to fetch the SA itself (its few lines), for the first
    /// pass over a batch whose packets are on many SAs: the lookups of the
    /// whole batch first, each SA prefetched, then
    /// [`Sa::prefetch_state`], then the packets (see `tern_nodes::ipsec`).
    #[inline]
    pub fn prefetch(&self) {
        tern_intrin::prefetch_lines(self, 4);
    }

    /// Hints the CPU to fetch the first lines of the SA's live part (what
    /// [`Sa::prefetch_state`] reads to find the keys, counters and window),
    /// for a pass between [`Sa::prefetch`] and `prefetch_state`. Reads the
    /// SA.
    #[inline]
    pub fn prefetch_live(&self) {
        if let Some(live) = self.live.get() {
            tern_intrin::prefetch(&live.crypto);
            tern_intrin::prefetch(&live.slots);
            tern_intrin::prefetch(&live.replay);
        }
    }

    /// Hints the CPU to fetch what a packet on the SA reads beyond the SA:
    /// the expanded keys (once built), worker `worker`'s counter slot and
    /// the replay window (once made). Reads the SA (see [`Sa::prefetch`]).
    #[inline]
    pub fn prefetch_state(&self, worker: u16) {
        let Some(live) = self.live.get() else { return };
        live.crypto.prefetch();
        if let Some(s) = live.slots.get()
            && let Some(slot) = s.get(usize::from(worker) % s.len().max(1))
        {
            tern_intrin::prefetch(slot);
        }
        if let Some(w) = live.replay.get() {
            tern_intrin::prefetch(&**w);
        }
    }

    /// The expanded keys, built by the first caller (see the module).
    #[inline]
    pub(crate) fn crypto(&self) -> Option<&Crypto> {
        match self.live().crypto {
            Crypto::Unusable => None,
            ref c => Some(c),
        }
    }

    /// What the first use makes (keys expanded; see [`Live`]).
    #[inline]
    fn live(&self) -> &Live {
        match self.live.get() {
            Some(l) => l,
            None => self.live_cold(),
        }
    }

    #[cold]
    fn live_cold(&self) -> &Live {
        self.live.get_or_init(|| {
            // Only one caller runs this; the others wait for it.
            let raw = self.raw().take();
            let built = raw.as_ref().and_then(|r| {
                let (k, ik) = r.split_at(self.cipher.key_len().min(r.len()));
                Crypto::new(self.cipher, self.integ, k, ik).ok()
            });
            KEY_BUILDS.fetch_add(1, Ordering::Relaxed);
            // `raw` (zeroizing) is dropped here, the key bytes wiped.
            Box::new(Live {
                crypto: built.unwrap_or(Crypto::Unusable),
                slots: OnceLock::new(),
                replay: OnceLock::new(),
            })
        })
    }

    fn raw(&self) -> std::sync::MutexGuard<'_, Option<Zeroizing<Box<[u8]>>>> {
        // Nothing done under the lock can panic half-way.
        self.raw.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The keys are expanded (the SA saw a packet).
    pub fn keys_built(&self) -> bool {
        self.live.get().is_some()
    }

    /// The raw key bytes are still held (not yet expanded; for tests).
    pub fn raw_keys_held(&self) -> bool {
        self.raw().is_some()
    }

    /// When the SA was installed (the `now` given to [`Sa::new`]).
    pub fn added(&self) -> Instant {
        from_nanos(self.added)
    }

    /// The state (one relaxed load: read once per batch).
    #[inline]
    pub fn state(&self) -> SaState {
        match self.state.load(Ordering::Relaxed) {
            ST_ACTIVE => SaState::Active,
            ST_SOFT => SaState::SoftExpired,
            _ => SaState::Expired,
        }
    }

    /// Packets may use the SA (not hard-expired, numbers left).
    #[inline]
    pub fn usable(&self) -> bool {
        self.state.load(Ordering::Relaxed) != ST_EXPIRED
    }

    pub(crate) fn set_state(&self, s: SaState) {
        let v = match s {
            SaState::Active => ST_ACTIVE,
            SaState::SoftExpired => ST_SOFT,
            SaState::Expired => ST_EXPIRED,
        };
        // Never back from Expired.
        let _ = self.state.fetch_max(v, Ordering::Relaxed);
    }

    /// Reserves the sequence numbers of `n` outbound packets (see the
    /// module): one atomic operation; fewer than `n` (possibly none) once
    /// the numbers run out, and the SA then stops.
    #[inline]
    pub fn reserve_seq(&self, n: usize) -> SeqRange {
        let n64 = n as u64;
        let cap = self.seq_cap;
        let prev = match self.seq_out.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
            (cur < cap).then(|| cur.saturating_add(n64).min(cap))
        }) {
            Ok(prev) => prev,
            Err(cur) => cur,
        };
        let count = cap.saturating_sub(prev).min(n64) as usize;
        let exhausted = cap == if self.esn { u64::MAX } else { u64::from(u32::MAX) };
        if count < n {
            let was = self.flags.fetch_or(if exhausted { F_EXHAUSTED } else { F_HARD_PACKETS }, Ordering::Relaxed);
            if exhausted && was & F_EXHAUSTED == 0 {
                // Release: a `poll_events` that sees the count sees the flag.
                EXHAUSTIONS.fetch_add(1, Ordering::Release);
            }
            self.set_state(SaState::Expired);
        }
        SeqRange { first: prev + 1, count, exhausted }
    }

    /// The last outbound sequence number used.
    pub fn seq_out(&self) -> u64 {
        self.seq_out.load(Ordering::Relaxed)
    }

    /// Sets the last outbound sequence number used (tests of exhaustion;
    /// restoring an SA's position).
    pub fn set_seq_out(&self, seq: u64) {
        self.seq_out.store(seq.min(self.seq_cap), Ordering::Relaxed);
    }

    /// The highest inbound sequence number authenticated.
    pub fn seq_in(&self) -> u64 {
        self.live.get().and_then(|l| l.replay.get()).map_or(0, |w| lock(w).top())
    }

    /// The window, made on first use (an SA that never receives has none).
    #[inline]
    fn window(&self) -> std::sync::MutexGuard<'_, ReplayWindow> {
        lock(self.live().replay.get_or_init(|| Box::new(Mutex::new(ReplayWindow::new(self.replay_window, self.esn)))))
    }

    /// The replay window exists (the SA was checked inbound; for tests
    /// and memory accounting).
    pub fn has_replay_window(&self) -> bool {
        self.live.get().is_some_and(|l| l.replay.get().is_some())
    }

    /// Anti-replay before decryption: the full sequence number of a packet
    /// carrying `lo` (ESN: high bits inferred), or why it is refused.
    #[inline]
    pub fn replay_check(&self, lo: u32) -> Result<u64, ReplayError> {
        self.window().check(lo)
    }

    /// Anti-replay after the ICV verified: records `seq`, refusing it if
    /// it was recorded since the check.
    #[inline]
    pub fn replay_update(&self, seq: u64) -> Result<(), ReplayError> {
        self.window().update(seq)
    }

    /// Runs `f` with the window locked (several packets' checks or updates
    /// under one lock).
    pub fn with_replay<R>(&self, f: impl FnOnce(&mut ReplayWindow) -> R) -> R {
        f(&mut self.window())
    }

    /// Adds `delta` to worker `worker`'s counters (once per batch).
    #[inline]
    pub fn count(&self, worker: u16, delta: &SaCounters) {
        if delta.is_zero() {
            return;
        }
        let slots = self.live().slots.get_or_init(|| (0..self.nslots.max(1)).map(|_| Slot::default()).collect());
        let Some(slot) = slots.get(usize::from(worker) % slots.len()) else { return };
        for (c, d) in slot.0.iter().zip(delta.to_array()) {
            if d != 0 {
                c.fetch_add(d, Ordering::Relaxed);
            }
        }
    }

    /// The counters summed over workers.
    pub fn counters(&self) -> SaCounters {
        let mut a = [0u64; NCOUNTERS];
        for s in self.live.get().and_then(|l| l.slots.get()).map_or(&[][..], |s| &s[..]) {
            for (t, c) in a.iter_mut().zip(s.0.iter()) {
                *t = t.wrapping_add(c.load(Ordering::Relaxed));
            }
        }
        SaCounters::from_array(a)
    }

    /// Bytes of ESP header and IV in front of the inner packet (not the
    /// outer IP or UDP header).
    #[inline]
    pub fn header_len(&self) -> usize {
        crate::esp::HEADER_LEN + self.cipher.iv_len()
    }

    /// Bytes after an inner packet of `inner_len` bytes: padding, pad
    /// length, next header, ICV.
    #[inline]
    pub fn trailer_len(&self, inner_len: usize) -> usize {
        let a = self.cipher.align();
        (inner_len + 2).next_multiple_of(a) - inner_len + self.icv_len()
    }

    /// The ICV length.
    #[inline]
    pub fn icv_len(&self) -> usize {
        if self.cipher.is_aead() { 16 } else { self.integ.icv_len() }
    }

    /// Counter slots allocated (the SA counted something).
    pub fn has_counters(&self) -> bool {
        self.live.get().is_some_and(|l| l.slots.get().is_some())
    }

    /// The most an encapsulation adds to an inner packet (ESP header, IV,
    /// padding, trailer, ICV; not the outer IP/UDP header): for the tunnel
    /// MTU.
    pub fn max_overhead(&self) -> usize {
        self.header_len() + self.cipher.align() - 1 + 2 + self.icv_len()
    }
}

fn lock(w: &Mutex<ReplayWindow>) -> std::sync::MutexGuard<'_, ReplayWindow> {
    // A worker that panicked while holding it left a consistent window
    // (no operation on it can panic half-way): keep using it.
    w.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
