//! Inbound anti-replay (RFC 4303 section 3.4.3 and Appendix A).
//!
//! The window remembers which of the last `size` sequence numbers up to
//! the highest authenticated one (`top`) were received, as a ring of bits
//! indexed by the sequence number modulo a power of two >= `size`: moving
//! the window forward clears only the bits it passes, no shifting.
//!
//! The order RFC 4303 asks for, which the callers follow: [`ReplayWindow::check`]
//! BEFORE the integrity check (cheap rejection of duplicates and stale
//! packets, and, with ESN, the inference of the high 32 bits that the ICV
//! covers), [`ReplayWindow::update`] AFTER the ICV verified (so forged
//! packets cannot move the window). `update` checks again: two copies of
//! one packet may both pass `check` in the same batch, only the first
//! updates.
//!
//! With the window off (`size` 0) nothing is rejected, but `top` is still
//! tracked for the ESN inference (over a window of 2^31, RFC 4303
//! Appendix A2.2's "no anti-replay" case) and for `show`.

use serde::Serialize;

/// Why a sequence number was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum ReplayError {
    /// Already received.
    #[error("duplicate sequence number")]
    Duplicate,
    /// Left of the window.
    #[error("sequence number older than the window")]
    TooOld,
    /// Sequence number 0 (never sent: the first is 1).
    #[error("sequence number 0")]
    Zero,
}

/// One SA's inbound window.
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    /// Window size in packets; 0: off.
    size: u32,
    /// Highest authenticated sequence number (64 bits, ESN or not); 0:
    /// none yet.
    top: u64,
    /// Ring of `bits.len() * 64` bits (a power of two >= size).
    bits: Vec<u64>,
    esn: bool,
}

impl ReplayWindow {
    /// A window of `size` packets (0: off) for 32-bit or extended
    /// sequence numbers.
    pub fn new(size: u32, esn: bool) -> ReplayWindow {
        let words = if size == 0 { 0 } else { (size as usize).next_power_of_two().div_ceil(64) };
        ReplayWindow { size, top: 0, bits: vec![0; words], esn }
    }

    /// The highest authenticated sequence number.
    pub fn top(&self) -> u64 {
        self.top
    }

    /// The window size (0: off).
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The full sequence number of a packet carrying `lo` (its low 32
    /// bits; with ESN the high bits are inferred from the window, RFC 4303
    /// Appendix A2.2), or why it is refused. Changes nothing.
    pub fn check(&self, lo: u32) -> Result<u64, ReplayError> {
        let seq = self.infer(lo);
        if seq == 0 {
            return Err(ReplayError::Zero);
        }
        if self.size == 0 || seq > self.top {
            return Ok(seq);
        }
        if self.top - seq >= u64::from(self.size) {
            return Err(ReplayError::TooOld);
        }
        if self.bit(seq) { Err(ReplayError::Duplicate) } else { Ok(seq) }
    }

    /// Records `seq` (a value [`check`](Self::check) returned) as received
    /// after its ICV verified; refuses it if another packet recorded it or
    /// pushed the window past it since the check.
    pub fn update(&mut self, seq: u64) -> Result<(), ReplayError> {
        if seq == 0 {
            return Err(ReplayError::Zero);
        }
        if seq > self.top {
            if self.size != 0 {
                let nbits = self.bits.len() as u64 * 64;
                let diff = seq - self.top;
                if diff >= nbits {
                    self.bits.fill(0);
                } else {
                    for s in self.top + 1..seq {
                        self.set(s, false);
                    }
                }
                self.set(seq, true);
            }
            self.top = seq;
            return Ok(());
        }
        if self.size == 0 {
            return Ok(());
        }
        if self.top - seq >= u64::from(self.size) {
            return Err(ReplayError::TooOld);
        }
        if self.bit(seq) {
            return Err(ReplayError::Duplicate);
        }
        self.set(seq, true);
        Ok(())
    }

    /// RFC 4303 Appendix A2.2: the high 32 bits that put `lo` nearest the
    /// window (without ESN, 0).
    fn infer(&self, lo: u32) -> u64 {
        if !self.esn {
            return u64::from(lo);
        }
        let w = if self.size == 0 { 1u64 << 31 } else { u64::from(self.size) };
        let (th, tl) = (self.top >> 32, self.top & 0xffff_ffff);
        let lo64 = u64::from(lo);
        let hi = if tl + 1 >= w {
            // Case A: the window lies within one 2^32 block.
            if lo64 >= tl + 1 - w { th } else { th + 1 }
        } else {
            // Case B: the window spans the block below.
            let bottom = (tl + (1 << 32) + 1 - w) & 0xffff_ffff;
            if lo64 >= bottom {
                // Saturating: at th == 0 there is no block below; the
                // number is then simply old (or 0) and refused.
                match th.checked_sub(1) {
                    Some(h) => h,
                    None => return if lo64 > tl { lo64 } else { 0 },
                }
            } else {
                th
            }
        };
        // Past 2^64 there is nothing to infer: such a number was never sent.
        hi.checked_mul(1 << 32).map_or(0, |h| h | lo64)
    }

    fn bit(&self, seq: u64) -> bool {
        let nbits = self.bits.len() as u64 * 64;
        if nbits == 0 {
            return false;
        }
        let i = seq & (nbits - 1);
        self.bits.get((i / 64) as usize).is_some_and(|w| w >> (i % 64) & 1 != 0)
    }

    fn set(&mut self, seq: u64, on: bool) {
        let nbits = self.bits.len() as u64 * 64;
        if nbits == 0 {
            return;
        }
        let i = seq & (nbits - 1);
        if let Some(w) = self.bits.get_mut((i / 64) as usize) {
            if on {
                *w |= 1 << (i % 64);
            } else {
                *w &= !(1 << (i % 64));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn accept(w: &mut ReplayWindow, lo: u32) -> Result<u64, ReplayError> {
        let s = w.check(lo)?;
        w.update(s)?;
        Ok(s)
    }

    #[test]
    fn reorder_within_the_window_accepted_once() {
        let mut w = ReplayWindow::new(64, false);
        for s in [5, 3, 4, 1, 2, 70, 7, 8] {
            assert_eq!(accept(&mut w, s), Ok(u64::from(s)), "{s}");
        }
        // The window is now 7..=70.
        for s in [70, 8, 7] {
            assert_eq!(w.check(s), Err(ReplayError::Duplicate), "{s}");
        }
        for s in [6, 5, 3, 1] {
            assert_eq!(w.check(s), Err(ReplayError::TooOld), "{s}");
        }
        assert_eq!(accept(&mut w, 9), Ok(9));
        assert_eq!(w.check(0), Err(ReplayError::Zero));
    }

    #[test]
    fn big_jumps_clear_the_window() {
        let mut w = ReplayWindow::new(1024, false);
        assert_eq!(accept(&mut w, 1), Ok(1));
        assert_eq!(accept(&mut w, 1_000_000), Ok(1_000_000));
        assert_eq!(w.check(1), Err(ReplayError::TooOld));
        assert_eq!(accept(&mut w, 1_000_000 - 1023), Ok(1_000_000 - 1023));
        assert_eq!(w.check(1_000_000 - 1024), Err(ReplayError::TooOld));
        // The bits the big jump passed were cleared: all new.
        for s in 1_000_000 - 1022..1_000_000 {
            assert_eq!(w.check(s), Ok(u64::from(s)));
        }
        assert_eq!(accept(&mut w, u32::MAX), Ok(u64::from(u32::MAX)));
    }

    #[test]
    fn update_rechecks() {
        let mut w = ReplayWindow::new(32, false);
        let a = w.check(10).expect("new");
        let b = w.check(10).expect("new too: not recorded yet");
        assert_eq!(w.update(a), Ok(()));
        assert_eq!(w.update(b), Err(ReplayError::Duplicate));
        let old = w.check(11).expect("new");
        assert_eq!(w.update(100), Ok(()));
        assert_eq!(w.update(old), Err(ReplayError::TooOld));
    }

    #[test]
    fn esn_wraps_the_low_32_bits() {
        let mut w = ReplayWindow::new(128, true);
        let near = u32::MAX - 2;
        assert_eq!(accept(&mut w, near), Ok(u64::from(near)));
        assert_eq!(accept(&mut w, u32::MAX), Ok(u64::from(u32::MAX)));
        // Low bits 0, 1, 2 after the wrap belong to the next block.
        assert_eq!(accept(&mut w, 0), Ok(1 << 32));
        assert_eq!(accept(&mut w, 2), Ok((1 << 32) + 2));
        // Late packets from below the wrap still in the window.
        assert_eq!(accept(&mut w, u32::MAX - 1), Ok(u64::from(u32::MAX - 1)));
        assert_eq!(w.check(u32::MAX), Err(ReplayError::Duplicate));
        // Far below the window, the low bits read as the NEXT block (RFC
        // 4303 A2.2): such a packet then fails its ICV, never moves the window.
        assert_eq!(w.check(u32::MAX - 200), Ok((1 << 32) + u64::from(u32::MAX - 200)));
        assert_eq!(accept(&mut w, 1), Ok((1 << 32) + 1));
        assert_eq!(w.top(), (1 << 32) + 2);
        // Without ESN the same number is just old.
        let mut plain = ReplayWindow::new(128, false);
        assert_eq!(accept(&mut plain, u32::MAX), Ok(u64::from(u32::MAX)));
        assert_eq!(plain.check(0), Err(ReplayError::Zero));
        assert_eq!(plain.check(2), Err(ReplayError::TooOld));
    }

    #[test]
    fn window_off_accepts_everything_but_zero() {
        let mut w = ReplayWindow::new(0, false);
        for s in [5, 5, 1, 100, 1] {
            assert_eq!(accept(&mut w, s), Ok(u64::from(s)));
        }
        assert_eq!(w.top(), 100);
        let mut e = ReplayWindow::new(0, true);
        assert_eq!(accept(&mut e, u32::MAX), Ok(u64::from(u32::MAX)));
        assert_eq!(accept(&mut e, 3), Ok((1 << 32) + 3));
    }

    /// What a window should answer, by a set of the numbers accepted.
    struct Model {
        seen: std::collections::BTreeSet<u64>,
        top: u64,
        size: u64,
    }

    impl Model {
        fn in_window_or_new(&self, s: u64) -> bool {
            s > self.top || self.top - s < self.size
        }
        fn accept(&mut self, s: u64) -> bool {
            let ok = s != 0 && !self.seen.contains(&s) && self.in_window_or_new(s);
            if ok {
                self.seen.insert(s);
                self.top = self.top.max(s);
            }
            ok
        }
    }

    proptest! {
        /// 32-bit numbers: check + update accept exactly the numbers new
        /// and inside the window, once.
        #[test]
        fn matches_a_model(size in prop::sample::select(vec![1u32, 32, 64, 100, 1024]),
                           seqs in prop::collection::vec(0u32..3000, 1..400)) {
            let mut w = ReplayWindow::new(size, false);
            let mut m = Model { seen: Default::default(), top: 0, size: u64::from(size) };
            for s in seqs {
                prop_assert_eq!(accept(&mut w, s).is_ok(), m.accept(u64::from(s)), "seq {}", s);
                prop_assert_eq!(w.top(), m.top);
            }
        }

        /// ESN across the 2^32 boundary: numbers in or ahead of the window
        /// are inferred exactly and accepted once; older ones never
        /// accepted as themselves.
        #[test]
        fn esn_matches_a_model(size in prop::sample::select(vec![32u32, 64, 1024, 4096]),
                               offs in prop::collection::vec(0u64..6000, 1..400)) {
            let base = (1u64 << 32) - 3000;
            let mut w = ReplayWindow::new(size, true);
            let mut m = Model { seen: Default::default(), top: 0, size: u64::from(size) };
            for off in offs {
                let s = base + off;
                if m.top == 0 || m.in_window_or_new(s) {
                    if m.top == 0 {
                        // Start the window at the first number.
                        w.update(s).expect("first");
                        m.accept(s);
                        continue;
                    }
                    prop_assert_eq!(accept(&mut w, s as u32).is_ok(), m.accept(s), "seq {:#x}", s);
                } else {
                    prop_assert_ne!(w.check(s as u32), Ok(s));
                }
                prop_assert_eq!(w.top(), m.top);
            }
        }
    }
}
