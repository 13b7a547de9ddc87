//! Longest-prefix-match structures. Keys are left-aligned in a u128 (IPv4
//! in the top 32 bits) on the writer side, so one code path serves both
//! families.

pub mod naive;

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::reclaim::Garbage;
use crate::types::{FibError, NhId};
use naive::NaiveLpm;

/// Interim implementation: an immutable table swapped as a whole.
pub(crate) struct LpmReader {
    cur: ArcSwap<NaiveLpm>,
}

impl LpmReader {
    pub(crate) fn new() -> LpmReader {
        LpmReader {
            cur: ArcSwap::from_pointee(NaiveLpm::new()),
        }
    }

    #[inline]
    pub(crate) fn lookup(&self, key: u128) -> NhId {
        self.cur.load().lookup(key)
    }
}

pub(crate) struct LpmWriter {
    master: NaiveLpm,
    dirty: bool,
}

impl LpmWriter {
    pub(crate) fn new() -> LpmWriter {
        LpmWriter {
            master: NaiveLpm::new(),
            dirty: false,
        }
    }

    pub(crate) fn set(&mut self, bits: u128, len: u8, nh: NhId) {
        self.master.insert(bits, len, nh);
        self.dirty = true;
    }

    pub(crate) fn remove(&mut self, bits: u128, len: u8) {
        self.master.remove(bits, len);
        self.dirty = true;
    }

    /// Publishes every change since the last commit.
    pub(crate) fn commit(
        &mut self,
        r: &LpmReader,
        _garbage: &mut Vec<Garbage>,
    ) -> Result<(), FibError> {
        if self.dirty {
            r.cur.store(Arc::new(self.master.clone()));
            self.dirty = false;
        }
        Ok(())
    }

    pub(crate) fn reuse(&mut self, _g: Garbage) {}

    pub(crate) fn used_bytes(&self) -> usize {
        self.master.len() * 24
    }

    pub(crate) fn len(&self) -> usize {
        self.master.len()
    }
}
