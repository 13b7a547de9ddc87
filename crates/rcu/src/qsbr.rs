//! Quiescent-state-based reclamation.
//!
//! Each reader owns a counter. Bit 0 says whether the reader is online (may
//! hold references into shared structures); the rest counts quiescent states.
//! A grace period has elapsed for a token when every reader that was online
//! when the token was taken has since changed its counter.

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

const ONLINE: u64 = 1;

#[derive(Default)]
struct Slot {
    state: AtomicU64,
}

/// The set of readers of some shared structures.
#[derive(Clone, Default)]
pub struct Domain {
    readers: Arc<Mutex<Vec<Weak<Slot>>>>,
}

/// One reader (a worker thread). Dropping it removes it from the domain.
pub struct Reader {
    slot: Arc<Slot>,
}

/// A snapshot of reader states taken after the writer unlinked something.
pub struct GraceToken {
    waits: Vec<(Weak<Slot>, u64)>,
}

impl Domain {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a reader; it starts online.
    pub fn register(&self) -> Reader {
        let slot = Arc::new(Slot { state: AtomicU64::new(ONLINE) });
        let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        readers.retain(|w| w.strong_count() > 0);
        readers.push(Arc::downgrade(&slot));
        drop(readers);
        fence(Ordering::SeqCst);
        Reader { slot }
    }

    /// Starts a grace period. Call it after the writer made the old memory
    /// unreachable for new lookups.
    pub fn start_grace(&self) -> GraceToken {
        // Order the writer's unlinking stores before reading reader states.
        fence(Ordering::SeqCst);
        let readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        let waits = readers
            .iter()
            .filter_map(|w| {
                let slot = w.upgrade()?;
                let s = slot.state.load(Ordering::Acquire);
                (s & ONLINE != 0).then(|| (w.clone(), s))
            })
            .collect();
        GraceToken { waits }
    }

    /// Blocks until a grace period has elapsed.
    pub fn synchronize(&self) {
        let mut token = self.start_grace();
        let mut spins = 0u32;
        while !token.elapsed() {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else if spins < 256 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    pub fn reader_count(&self) -> usize {
        let readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        readers.iter().filter(|w| w.strong_count() > 0).count()
    }
}

impl GraceToken {
    /// True once every reader online at `start_grace` has passed a quiescent
    /// state, gone offline or gone away.
    pub fn elapsed(&mut self) -> bool {
        self.waits.retain(|(w, seen)| match w.upgrade() {
            Some(slot) => slot.state.load(Ordering::Acquire) == *seen,
            None => false,
        });
        self.waits.is_empty()
    }
}

impl Reader {
    /// Announces that this reader holds no references into shared
    /// structures. Workers call it between batches. Costs a load and a store.
    #[inline]
    pub fn quiescent(&self) {
        let s = self.slot.state.load(Ordering::Relaxed);
        self.slot.state.store(s.wrapping_add(2) | ONLINE, Ordering::Release);
    }

    /// Announces a long quiescent period (a worker about to sleep in poll).
    pub fn offline(&self) {
        let s = self.slot.state.load(Ordering::Relaxed);
        self.slot.state.store(s.wrapping_add(2) & !ONLINE, Ordering::Release);
    }

    /// Comes back from [`Reader::offline`]. Must be called before touching
    /// shared structures again.
    pub fn online(&self) {
        let s = self.slot.state.load(Ordering::Relaxed);
        self.slot.state.store(s.wrapping_add(2) | ONLINE, Ordering::Relaxed);
        // The writer must see us online before we read any shared pointer.
        fence(Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_waits_for_online_readers_only() {
        let d = Domain::new();
        let a = d.register();
        let b = d.register();
        b.offline();
        let mut t = d.start_grace();
        assert!(!t.elapsed(), "reader a is online and has not been quiescent");
        a.quiescent();
        assert!(t.elapsed());
    }

    #[test]
    fn dropped_reader_does_not_block() {
        let d = Domain::new();
        let a = d.register();
        let mut t = d.start_grace();
        drop(a);
        assert!(t.elapsed());
        assert_eq!(d.reader_count(), 0);
    }

    #[test]
    fn synchronize_returns_while_reader_thread_runs() {
        let d = Domain::new();
        let r = d.register();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = Arc::clone(&stop);
        let h = std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                r.quiescent();
                std::hint::spin_loop();
            }
        });
        for _ in 0..100 {
            d.synchronize();
        }
        stop.store(true, Ordering::Relaxed);
        h.join().expect("reader");
    }
}
