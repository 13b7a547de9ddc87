//! Generation-checked publication of immutable snapshots.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A value the control thread replaces as a whole and workers read without
/// locks. Cloning a `Published` gives another handle to the same cell.
pub struct Published<T> {
    cell: Arc<Cell<T>>,
}

struct Cell<T> {
    generation: AtomicU64,
    current: Mutex<Arc<T>>,
}

impl<T> Clone for Published<T> {
    fn clone(&self) -> Self {
        Published { cell: Arc::clone(&self.cell) }
    }
}

impl<T> Published<T> {
    pub fn new(value: T) -> Self {
        Published { cell: Arc::new(Cell { generation: AtomicU64::new(1), current: Mutex::new(Arc::new(value)) }) }
    }

    /// Replaces the published value. Workers see it at their next refresh;
    /// the old value lives until the last snapshot of it is dropped.
    pub fn publish(&self, value: T) {
        self.publish_arc(Arc::new(value));
    }

    pub fn publish_arc(&self, value: Arc<T>) {
        let mut cur = self.cell.current.lock().unwrap_or_else(PoisonError::into_inner);
        *cur = value;
        // Release: a reader that sees the new generation also sees the new Arc
        // when it takes the lock; the lock orders it anyway, this keeps the
        // fast-path check meaningful.
        self.cell.generation.fetch_add(1, Ordering::Release);
    }

    /// The current value (takes the lock; for the control side).
    pub fn load(&self) -> Arc<T> {
        Arc::clone(&self.cell.current.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub fn generation(&self) -> u64 {
        self.cell.generation.load(Ordering::Acquire)
    }

    /// A worker-side cached view.
    pub fn snapshot(&self) -> Snapshot<T> {
        let generation = self.generation();
        Snapshot { cell: Arc::clone(&self.cell), generation, value: self.load() }
    }
}

/// A worker's cached copy of a [`Published`] value.
pub struct Snapshot<T> {
    cell: Arc<Cell<T>>,
    generation: u64,
    value: Arc<T>,
}

impl<T> Snapshot<T> {
    /// Picks up a newer published value if there is one. Costs one atomic
    /// load when nothing changed. Returns true if the value changed.
    #[inline]
    pub fn refresh(&mut self) -> bool {
        let g = self.cell.generation.load(Ordering::Acquire);
        if g == self.generation {
            return false;
        }
        self.value = Arc::clone(&self.cell.current.lock().unwrap_or_else(PoisonError::into_inner));
        self.generation = g;
        true
    }

    /// The cached value (also reachable through `Deref`).
    #[inline]
    pub fn current(&self) -> &T {
        &self.value
    }

    pub fn arc(&self) -> &Arc<T> {
        &self.value
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }
}

impl<T> std::ops::Deref for Snapshot<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_sees_new_value_only_after_refresh() {
        let p = Published::new(1u32);
        let mut s = p.snapshot();
        assert_eq!(*s, 1);
        p.publish(2);
        assert_eq!(*s, 1, "a snapshot is stable until refreshed");
        assert!(s.refresh());
        assert_eq!(*s, 2);
        assert!(!s.refresh());
    }

    #[test]
    fn old_value_freed_when_last_snapshot_refreshes() {
        let p = Published::new(vec![1u8; 10]);
        let mut s = p.snapshot();
        let weak = Arc::downgrade(s.arc());
        p.publish(vec![2u8; 10]);
        assert!(weak.upgrade().is_some());
        s.refresh();
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn concurrent_readers_never_see_torn_values() {
        let p = Published::new((0u64, 0u64));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let mut s = p.snapshot();
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        s.refresh();
                        let (a, b) = *s;
                        assert_eq!(a, b);
                        assert!(a >= seen, "generations never go backwards");
                        seen = a;
                    }
                })
            })
            .collect();
        for i in 1..2000u64 {
            p.publish((i, i));
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("reader thread");
        }
    }
}
