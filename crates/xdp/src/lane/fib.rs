//! The FIB mirror: tern-fib's reader arrays copied into the lane's array
//! maps, entry by entry, with the same single-store updates the userspace
//! FIB makes, so that the program's lookups see the old or the new entry
//! and never a mix, exactly as a worker's do.
//!
//! # Layout
//! The maps hold [`BLOCK`] entries per element and are mapped into this
//! process, so each is the same flat array as tern-fib's: `top` (2^24
//! 16-bit entries for each family), `nodes` (blocks of 256 entries of the
//! same width), the ECMP members (u32), and the next
//! hops (words 0 and 1 of each 4-word entry: kind, interface, member
//! count; MAC or first member).
//!
//! # Order and reuse
//! Changes are copied in tern-fib's publication order (next hops and
//! members, then blocks, then top entries: what an entry points to is
//! always there first). A block or next hop tern-fib unlinks is reused
//! only after a grace period of its RCU domain; the mirror registers there
//! as a reader and reports a quiescent state only after everything it
//! unlinked in the maps has been followed by a kernel RCU grace period (no
//! XDP program still holds the old entry), so the maps never show a reused
//! block under an old pointer.
//!
//! # Capacity
//! Blocks, next hops and members beyond the maps' capacity are not copied;
//! an entry pointing to one makes the program's lookup fail and the packet
//! goes to userspace, which has the whole table.

use super::layout::BLOCK;
use super::shm::{MappedArray, kernel_grace_period};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tern_fib::{FibChanges, RawFib};

/// What the lane's FIB maps hold, in tern-fib's units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FibCapacity {
    /// IPv4 blocks of 256 entries (beyond the 2^24 direct entries).
    pub v4_blocks: u32,
    /// IPv6 blocks of 256 entries.
    pub v6_blocks: u32,
    pub nexthops: u32,
    pub ecmp_members: u32,
}

impl Default for FibCapacity {
    /// Room for the full Internet table (about 450 IPv4 and 38,100 IPv6
    /// blocks) with margin: 32 MiB + 2 MiB (IPv4), 32 MiB + 28 MiB (IPv6:
    /// 57,344 blocks, all that IPv6 entries can number).
    fn default() -> Self {
        FibCapacity { v4_blocks: 1 << 12, v6_blocks: (1 << 16) - (1 << 13), nexthops: 1 << 16, ecmp_members: 1 << 16 }
    }
}

impl FibCapacity {
    /// The default trie room, with next-hop and ECMP-member maps as large
    /// as the FIB's own tables (`raw`, sized by its config): every id the
    /// FIB can hand out has its slot in the lane, so a config that raises
    /// `max_nexthops` does not leave the lane punting the routes of the ids
    /// past its map's end.
    pub fn for_fib(raw: &RawFib<'_>) -> Self {
        FibCapacity {
            // 4 words per next hop (as `copy_nexthops` reads them).
            nexthops: (raw.nexthops.len() / 4) as u32,
            ecmp_members: raw.ecmp_members.len() as u32,
            ..FibCapacity::default()
        }
    }
}

/// Counters of the mirror, for `tern` and the metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MirrorStats {
    /// Entries written (next-hop words, members, trie entries).
    pub entries: u64,
    /// Changed entries not copied because they lie beyond the maps'
    /// capacity (packets needing them go to userspace).
    pub beyond_capacity: u64,
    /// Kernel grace periods waited for.
    pub grace_periods: u64,
}

pub(crate) struct FibMaps {
    pub v4_top: MappedArray,
    pub v4_nodes: MappedArray,
    pub v6_top: MappedArray,
    pub v6_nodes: MappedArray,
    pub nh: MappedArray,
    pub ecmp: MappedArray,
}

/// Copies tern-fib's arrays into the lane's maps.
pub struct FibMirror {
    maps: FibMaps,
    reader: Option<tern_rcu::Reader>,
    /// Entries written since the last kernel grace period.
    pending: bool,
    last_grace: Instant,
    /// Shortest interval between two grace periods (each one blocks the
    /// caller for a few milliseconds); until the next, tern-fib waits to
    /// reuse what it freed.
    pub min_grace_interval: Duration,
    stats: MirrorStats,
}

/// An entry of the FIB's arrays and of the lane's maps (trie entries are
/// 16 bits, the rest 32).
trait Word {
    fn copy_from(&self, src: &Self);
    fn is_set(&self) -> bool;
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            fn copy_from(&self, src: &Self) {
                self.store(src.load(Ordering::Acquire), Ordering::Release);
            }
            fn is_set(&self) -> bool {
                self.load(Ordering::Relaxed) != 0
            }
        }
    )*};
}
word!(std::sync::atomic::AtomicU16, std::sync::atomic::AtomicU32);

/// Copies entries `from..to` of a FIB array into the lane's map, counting
/// them, and those set past the map's capacity.
fn copy<W: Word>(dst: &[W], src: &[W], from: usize, to: usize, st: &mut MirrorStats) {
    for i in from..to {
        match (dst.get(i), src.get(i)) {
            (Some(d), Some(s)) => {
                d.copy_from(s);
                st.entries += 1;
            }
            (None, Some(s)) if s.is_set() => st.beyond_capacity += 1,
            _ => {}
        }
    }
}

impl FibMirror {
    /// A mirror over the lane's maps; `reader` is registered in the FIB's
    /// RCU domain (`FibReader::domain().register()`).
    pub(crate) fn new(maps: FibMaps, reader: Option<tern_rcu::Reader>) -> FibMirror {
        FibMirror {
            maps,
            reader,
            pending: false,
            last_grace: Instant::now(),
            min_grace_interval: Duration::from_millis(20),
            stats: MirrorStats::default(),
        }
    }

    /// Checks that tern-fib's layout is the one the program walks.
    pub(crate) fn check_layout(raw: &RawFib<'_>) -> Result<(), String> {
        let ok = raw.v4.top_bits == 24
            && raw.v4.stride == 8
            && raw.v6.top_bits == 24
            && raw.v6.stride == 8
            && raw.v4.child_base == 1 << 15
            && raw.v6.child_base == 1 << 13;
        if ok {
            Ok(())
        } else {
            Err(format!(
                "tern-fib's trie layout (IPv4 {}/{}, children from {:#x}; IPv6 {}/{}, children from {:#x}) is not the \
                 one the XDP lane walks (24/8, 0x8000; 24/8, 0x2000)",
                raw.v4.top_bits, raw.v4.stride, raw.v4.child_base, raw.v6.top_bits, raw.v6.stride, raw.v6.child_base
            ))
        }
    }

    pub fn stats(&self) -> MirrorStats {
        self.stats
    }

    /// Copies every array (at start, or after the mirror lost track).
    pub fn full_sync(&mut self, raw: &RawFib<'_>) {
        let st = &mut self.stats;
        let m = &self.maps;
        // tern-fib reserves far more than it uses; copy what fits (a
        // trie entry pointing beyond the maps makes the program punt).
        let fit = |d: usize, s: usize| d.min(s);
        copy_nexthops(m, raw, 0, fit(m.nh.u64s().len() / 2, raw.nexthops.len() / 4), st);
        copy(m.ecmp.u32s(), raw.ecmp_members, 0, fit(m.ecmp.u32s().len(), raw.ecmp_members.len()), st);
        copy(m.v4_nodes.u16s(), raw.v4.nodes, 0, fit(m.v4_nodes.u16s().len(), raw.v4.nodes.len()), st);
        copy(m.v6_nodes.u16s(), raw.v6.nodes, 0, fit(m.v6_nodes.u16s().len(), raw.v6.nodes.len()), st);
        copy(m.v4_top.u16s(), raw.v4.top, 0, raw.v4.top.len(), st);
        copy(m.v6_top.u16s(), raw.v6.top, 0, raw.v6.top.len(), st);
        self.pending = true;
        self.quiesce(true);
    }

    /// Copies what changed (from `FibWriter::take_changes`), in tern-fib's
    /// publication order, then reports a quiescent state if it may.
    pub fn sync(&mut self, raw: &RawFib<'_>, ch: &FibChanges) {
        let before = self.stats.entries;
        let st = &mut self.stats;
        let m = &self.maps;
        for r in &ch.nexthops {
            copy_nexthops(m, raw, r.start as usize, r.end as usize, st);
        }
        for r in &ch.ecmp_members {
            copy(m.ecmp.u32s(), raw.ecmp_members, r.start as usize, r.end as usize, st);
        }
        let b = |r: &std::ops::Range<u32>| (r.start as usize * BLOCK, r.end as usize * BLOCK);
        for r in &ch.v4_blocks {
            let (from, to) = b(r);
            copy(m.v4_nodes.u16s(), raw.v4.nodes, from, to, st);
        }
        for r in &ch.v6_blocks {
            let (from, to) = b(r);
            copy(m.v6_nodes.u16s(), raw.v6.nodes, from, to, st);
        }
        for r in &ch.v4_top {
            copy(m.v4_top.u16s(), raw.v4.top, r.start as usize, r.end as usize, st);
        }
        for r in &ch.v6_top {
            copy(m.v6_top.u16s(), raw.v6.top, r.start as usize, r.end as usize, st);
        }
        if self.stats.entries != before {
            self.pending = true;
        }
        self.quiesce(false);
    }

    /// Reports a quiescent state to tern-fib's domain once everything
    /// written has been followed by a kernel grace period (waiting for one
    /// if `force` or if the last is old enough).
    pub fn quiesce(&mut self, force: bool) {
        if self.pending && (force || self.last_grace.elapsed() >= self.min_grace_interval) {
            if let Err(e) = kernel_grace_period() {
                // Without it, hold reclamation: tern-fib allocates fresh
                // memory instead of reusing, which is safe.
                log::warn!("XDP lane: no kernel grace period ({e}); FIB memory is not reused");
                return;
            }
            self.stats.grace_periods += 1;
            self.pending = false;
            self.last_grace = Instant::now();
        }
        if !self.pending
            && let Some(r) = &self.reader
        {
            r.quiescent();
        }
    }
}

fn copy_nexthops(m: &FibMaps, raw: &RawFib<'_>, from: usize, to: usize, st: &mut MirrorStats) {
    let dst = m.nh.u64s();
    for id in from..to {
        let (Some(w0), Some(w1)) = (raw.nexthops.get(id * 4), raw.nexthops.get(id * 4 + 1)) else { continue };
        match (dst.get(id * 2), dst.get(id * 2 + 1)) {
            (Some(d0), Some(d1)) => {
                d1.store(w1.load(Ordering::Acquire), Ordering::Release);
                d0.store(w0.load(Ordering::Acquire), Ordering::Release);
                st.entries += 2;
            }
            _ => {
                if w0.load(Ordering::Relaxed) != 0 {
                    st.beyond_capacity += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FibCapacity;
    use tern_fib::FibConfig;

    #[test]
    fn the_lane_has_a_slot_for_every_next_hop_the_fib_can_hand_out() {
        let capacity = |cfg: FibConfig| {
            let (_w, r) = tern_fib::new(cfg, tern_rcu::Domain::new());
            FibCapacity::for_fib(&r.raw())
        };
        assert_eq!(capacity(FibConfig::default()), FibCapacity::default());
        let cfg = FibConfig { max_nexthops: 1 << 18, max_ecmp_members: 1 << 17, ..FibConfig::default() };
        let c = capacity(cfg);
        assert_eq!((c.nexthops, c.ecmp_members), (1 << 18, 1 << 17));
        assert_eq!((c.v4_blocks, c.v6_blocks), (FibCapacity::default().v4_blocks, FibCapacity::default().v6_blocks));
    }
}
