//! A security association as the workers use it: prepared keys, the
//! outbound sequence counter, the inbound replay window, per-worker
//! counters and the SA's state.
//!
//! ## Outbound sequence numbers: one atomic per SA
//!
//! Every packet sent on an SA needs a sequence number used once and never
//! wrapped. VPP binds each SA to one worker and hands other workers'
//! packets to it through a queue; here the owner is one atomic counter per
//! SA (`seq_out`, on its own cache line) from which a worker reserves the
//! numbers of all of its batch's packets for that SA with one
//! compare-and-swap ([`Sa::reserve_seq`]). Why: no queue, no second pass
//! through another worker's graph, no reordering between workers beyond
//! what RSS already does, and the cost is one atomic per SA per batch,
//! uncontended unless several workers send on one SA at once (then one
//! cache line bounces once per batch, still cheaper than a handoff). The
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
//! the slot and summed by [`crate::SaDb::info`]/`list`.
//!
//! ## Keys
//!
//! The configured key bytes ([`crate::Key`]) are zeroized as soon as the
//! SA's contexts are built from them; the AES-CBC key schedules (RustCrypto,
//! `zeroize` feature) are zeroized when the SA is dropped. ring's
//! AES-GCM key and the HMAC states offer no zeroization hook: their memory
//! is freed, not wiped (said in the crate's docs as a known limit).

use crate::config::{Cipher, Integ, Lifetime, SaConfig, SaError, UdpEncap};
use crate::esp::Crypto;
use crate::replay::{ReplayError, ReplayWindow};
use serde::Serialize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Instant;

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

/// The outbound counter on its own cache line.
#[repr(align(64))]
struct SeqOut(AtomicU64);

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
    pub replay_window: u32,
    pub udp_encap: Option<UdpEncap>,
    pub soft: Lifetime,
    pub hard: Lifetime,
    pub(crate) crypto: Crypto,
    seq_out: SeqOut,
    /// The highest outbound number allowed.
    seq_cap: u64,
    replay: Mutex<ReplayWindow>,
    state: AtomicU8,
    pub(crate) flags: AtomicU8,
    pub(crate) added: Instant,
    slots: Box<[Slot]>,
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
    pub fn new(cfg: SaConfig, slots: usize, now: Instant) -> Result<Sa, SaError> {
        cfg.validate()?;
        let crypto = Crypto::new(cfg.cipher, cfg.integ, &cfg.key, &cfg.integ_key)?;
        let seq_max = if cfg.esn { u64::MAX } else { u64::from(u32::MAX) };
        let seq_cap = cfg.hard.packets.map_or(seq_max, |p| p.min(seq_max));
        Ok(Sa {
            id: cfg.id,
            spi: cfg.spi,
            cipher: cfg.cipher,
            integ: cfg.integ,
            esn: cfg.esn,
            replay_window: cfg.replay_window,
            udp_encap: cfg.udp_encap,
            soft: cfg.soft,
            hard: cfg.hard,
            crypto,
            seq_out: SeqOut(AtomicU64::new(0)),
            seq_cap,
            replay: Mutex::new(ReplayWindow::new(cfg.replay_window, cfg.esn)),
            state: AtomicU8::new(ST_ACTIVE),
            flags: AtomicU8::new(0),
            added: now,
            slots: (0..slots.max(1)).map(|_| Slot::default()).collect(),
        })
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
        let prev = match self.seq_out.0.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
            (cur < cap).then(|| cur.saturating_add(n64).min(cap))
        }) {
            Ok(prev) => prev,
            Err(cur) => cur,
        };
        let count = cap.saturating_sub(prev).min(n64) as usize;
        let exhausted = cap == if self.esn { u64::MAX } else { u64::from(u32::MAX) };
        if count < n {
            let _ = self.flags.fetch_or(if exhausted { F_EXHAUSTED } else { F_HARD_PACKETS }, Ordering::Relaxed);
            self.set_state(SaState::Expired);
        }
        SeqRange { first: prev + 1, count, exhausted }
    }

    /// The last outbound sequence number used.
    pub fn seq_out(&self) -> u64 {
        self.seq_out.0.load(Ordering::Relaxed)
    }

    /// Sets the last outbound sequence number used (tests of exhaustion;
    /// restoring an SA's position).
    pub fn set_seq_out(&self, seq: u64) {
        self.seq_out.0.store(seq.min(self.seq_cap), Ordering::Relaxed);
    }

    /// The highest inbound sequence number authenticated.
    pub fn seq_in(&self) -> u64 {
        self.window().top()
    }

    fn window(&self) -> std::sync::MutexGuard<'_, ReplayWindow> {
        // A worker that panicked while holding it left a consistent window
        // (no operation on it can panic half-way): keep using it.
        self.replay.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
        let Some(slot) = self.slots.get(usize::from(worker) % self.slots.len()) else { return };
        for (c, d) in slot.0.iter().zip(delta.to_array()) {
            if d != 0 {
                c.fetch_add(d, Ordering::Relaxed);
            }
        }
    }

    /// The counters summed over workers.
    pub fn counters(&self) -> SaCounters {
        let mut a = [0u64; NCOUNTERS];
        for s in self.slots.iter() {
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

    /// The most an encapsulation adds to an inner packet (ESP header, IV,
    /// padding, trailer, ICV; not the outer IP/UDP header): for the tunnel
    /// MTU.
    pub fn max_overhead(&self) -> usize {
        self.header_len() + self.cipher.align() - 1 + 2 + self.icv_len()
    }
}
