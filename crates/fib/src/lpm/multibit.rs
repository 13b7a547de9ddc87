//! The lookup structure the workers use: a leaf-pushed multibit trie of
//! flat arrays of `u32` or `u16` entries ([`Entry`]), updated in place
//! (DIR-24-8 generalised; DPDK's rte_lpm update scheme).
//!
//! # Layout (what readers and a BPF mirror see)
//! * `top`: 2^`TOP` entries indexed by the first `TOP` address bits.
//! * `nodes`: blocks of 2^`STRIDE` entries; each block consumes `STRIDE`
//!   more address bits.
//!
//! An entry below `CHILD` ([`Entry::CHILD`]: 2^15 for IPv4's `u16`
//! entries, 2^13 for IPv6's `u16` entries, 2^31 for `u32` ones) is a leaf:
//! the next-hop id itself (NH_NONE = no route). An entry `e >= CHILD`
//! points to child block `e - CHILD` (entries `block << STRIDE ..`). A
//! lookup is one load per level:
//!
//! ```text
//! e = top[key >> (W - TOP)]; off = TOP
//! while e >= CHILD { e = nodes[(e - CHILD) << STRIDE | key bits off..off+STRIDE]; off += STRIDE }
//! return e
//! ```
//!
//! # Why this structure (measured, see `tern-bench fib` and docs/PERFORMANCE.md)
//! A poptrie (`crates/bench/src/poptrie.rs`, the measured alternative) is 3-4x
//! smaller but needs two dependent cache misses at its last level (node,
//! then leaf) and a popcount per level, which the baseline x86-64 target
//! (and BPF) lacks. This trie needs one load per level and updates without
//! copying: every change is a store of one entry. IPv4 uses it as
//! DIR-24-8 (one load for a /24 or shorter, 99.9% of the table) with
//! `u16` entries: 32 MiB of direct index, half the cache lines of `u32`
//! entries for the same lookups (measured 1.3x the rate on covered
//! addresses of the full table), at the price of next-hop ids and block
//! numbers below 2^15 (the writer refuses a wider next hop with an
//! error; `FibConfig`). Batches of IPv4 lookups prefetch each top entry
//! 32 lookups ahead (`lookup_batch_ahead`). IPv6 uses a 24-bit top of
//! `u16` entries too (one load fewer than a 16-bit top for a /32-/48,
//! measured 1.33x in batches; 50.6 MiB), whose values from 2^13 up point
//! to blocks: the full table needs ~38,100, more than 2^15.
//!
//! # Updates
//! The writer keeps, per slot, the length (+1) of the prefix that set it
//! (the "depth"), per node the prefixes that end inside it and the value
//! it inherits from its parent slot, and a directory of the blocks by
//! path (`blockdir.rs`: the block a prefix ends in in one probe, not one
//! miss per level). Adding a prefix overwrites the slots it covers whose
//! depth is not longer, recursing into child blocks; removing one puts
//! back the longest shorter prefix covering it. A new
//! child block is filled before the parent entry that points to it is
//! stored (release); a block no longer reachable is reused only after a
//! grace period. Each entry a reader loads is therefore either the old or
//! the new value for its address; no lookup ever sees a half-built block.

use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

use super::blockdir::BlockDir;
use crate::changes::DirtyBits;
use crate::reclaim::Garbage;
use crate::types::{FibError, NH_NONE, NhId};

/// The cell of an array: `AtomicU16` or `AtomicU32`, whose values are
/// handled as `u32` either way.
pub trait Cell: Sync + Send + bytemuck::Zeroable + 'static {
    /// The largest value a cell holds.
    const MAX: u32;
    fn get(&self, o: Ordering) -> u32;
    /// Stores `v`, which is at most `MAX` (callers check).
    fn put(&self, v: u32, o: Ordering);
}

impl Cell for AtomicU32 {
    const MAX: u32 = u32::MAX;
    #[inline(always)]
    fn get(&self, o: Ordering) -> u32 {
        self.load(o)
    }
    #[inline(always)]
    fn put(&self, v: u32, o: Ordering) {
        self.store(v, o)
    }
}

impl Cell for AtomicU16 {
    const MAX: u32 = u16::MAX as u32;
    #[inline(always)]
    fn get(&self, o: Ordering) -> u32 {
        u32::from(self.load(o))
    }
    #[inline(always)]
    fn put(&self, v: u32, o: Ordering) {
        self.store(v as u16, o)
    }
}

/// How a trie's entries are encoded: in which [`Cell`], and where the
/// values that point to child blocks start. An entry below `CHILD` is a
/// leaf, the next-hop id itself; an entry `e >= CHILD` points to block
/// `e - CHILD`. Next-hop ids must then be below `CHILD`, and block numbers
/// below `BLOCKS` (the writer refuses a wider next hop with an error).
pub trait Entry: Sync + Send + 'static {
    type Cell: Cell;
    const CHILD: u32;
    /// Blocks an entry can point to.
    const BLOCKS: u32 = Self::Cell::MAX - Self::CHILD + 1;
}

/// `u32` entries, children from 2^31 (the top bit: a flag); the measured
/// alternatives' entries.
pub struct Entry32;

impl Entry for Entry32 {
    type Cell = AtomicU32;
    const CHILD: u32 = 1 << 31;
}

/// `u16` entries, children from `CHILD` on: IPv4's 2^15 (a flag bit:
/// 32,768 next hops and blocks) or IPv6's 2^13 (8,192 next hops, 57,344
/// blocks).
pub struct Entry16<const CHILD: u32>;

impl<const C: u32> Entry for Entry16<C> {
    type Cell = AtomicU16;
    const CHILD: u32 = C;
}

/// How a key is cut. IPv4 keys are left-aligned in a u64, IPv6 keys are the
/// u128 itself.
pub trait Key: Copy {
    const BITS: u32;
    /// Batches walk level-synchronously (`lookup_batch_levels`: deep tries,
    /// IPv6) rather than through the pipeline (shallow tries: IPv4, where
    /// the plain loop measured fastest).
    const LEVELS: bool;
    fn top(self, bits: u32) -> usize;
    /// The key's bytes, most significant first (zero past its width).
    fn bytes(self) -> [u8; 16];
    /// `stride` bits at `off` (bits past the end of the key read as zero).
    fn chunk(self, off: u32, stride: u32) -> usize;
}

impl Key for u64 {
    const BITS: u32 = 32;
    // A batch is the loop of single lookups with the top entries
    // prefetched 32 keys ahead (`lookup_batch_ahead`). A branchless
    // two-level walk measured 10-28% slower than the plain loop on the
    // full table (2026-11-22), the level-synchronous walk of IPv6 no
    // faster. (A prefetch 16 ahead had measured 2-14% slower then, with
    // 4 KiB pages; with huge pages, 16 and 32 ahead measured 1.3x and
    // 1.5-1.7x the plain loop, 2026-11-23.)
    const LEVELS: bool = false;
    #[inline(always)]
    fn top(self, bits: u32) -> usize {
        (self >> (64 - bits)) as usize
    }
    #[inline(always)]
    fn bytes(self) -> [u8; 16] {
        (u128::from(self) << 64).to_be_bytes()
    }
    #[inline(always)]
    fn chunk(self, off: u32, stride: u32) -> usize {
        (self.wrapping_shl(off) >> (64 - stride)) as usize
    }
}

impl Key for u128 {
    const BITS: u32 = 128;
    const LEVELS: bool = true;
    #[inline(always)]
    fn top(self, bits: u32) -> usize {
        (self >> (128 - bits)) as usize
    }
    #[inline(always)]
    fn bytes(self) -> [u8; 16] {
        self.to_be_bytes()
    }
    #[inline(always)]
    fn chunk(self, off: u32, stride: u32) -> usize {
        (self.wrapping_shl(off) >> (128 - stride)) as usize
    }
}

/// The reader-visible arrays.
pub struct MultibitArrays<E: Entry, const TOP: u32, const STRIDE: u32> {
    top: Box<[E::Cell]>,
    nodes: Box<[E::Cell]>,
}

impl<E: Entry, const TOP: u32, const STRIDE: u32> MultibitArrays<E, TOP, STRIDE> {
    /// Room for `max_nodes` blocks (memory is touched only when used).
    pub fn new(max_nodes: u32) -> Self {
        // Removals mask next hops with `CHILD - 1`.
        const { assert!(E::CHILD.is_power_of_two()) };
        let top: Box<[E::Cell]> = bytemuck::allocation::zeroed_slice_box(1 << TOP);
        // Block numbers 0..E::BLOCKS fit an entry.
        let nodes: Box<[E::Cell]> =
            bytemuck::allocation::zeroed_slice_box((max_nodes.clamp(1, E::BLOCKS) as usize) << STRIDE);
        // Random lookups over 32-64 MiB miss the TLB on nearly every access
        // with 4 KiB pages; ask for huge pages before the memory is touched.
        tern_intrin::advise_hugepages(&top);
        tern_intrin::advise_hugepages(&nodes);
        // Readers read every top entry from the start, the writer writes
        // them later: left lazily allocated, a reader's first load maps
        // the shared zero page and the writer's first store then replaces
        // that mapping, which costs a TLB shootdown (an interrupt) on every
        // CPU running this process (see `touch_pages`). Writing every page
        // now, before any reader exists, spares that and the readers' page
        // faults (32 MiB for IPv4, resident anyway once a full table is
        // loaded). Blocks need no such care: readers only reach a block
        // after the writer filled it.
        for page in top.chunks(4096 / std::mem::size_of::<E::Cell>()) {
            if let Some(a) = page.first() {
                a.put(0, Ordering::Relaxed);
            }
        }
        MultibitArrays { top, nodes }
    }

    pub fn node_capacity(&self) -> u32 {
        (self.nodes.len() >> STRIDE) as u32
    }

    #[inline(always)]
    pub fn lookup<K: Key>(&self, key: K) -> NhId {
        let mut e = self.top.get(key.top(TOP)).map_or(NH_NONE, |a| a.get(Ordering::Acquire));
        let mut off = TOP;
        while e >= E::CHILD && off < K::BITS {
            let i = (((e - E::CHILD) as usize) << STRIDE) | key.chunk(off, STRIDE);
            e = self.nodes.get(i).map_or(NH_NONE, |a| a.get(Ordering::Acquire));
            off += STRIDE;
        }
        if e >= E::CHILD { NH_NONE } else { e }
    }

    /// Many lookups with their cache misses overlapped, by the method that
    /// measured best for the key's family (`Key::LEVELS`).
    #[inline]
    pub fn lookup_batch<K: Key>(&self, keys: &[K], out: &mut [NhId]) {
        if !K::LEVELS {
            self.lookup_batch_ahead(keys, |k| k, out)
        } else if keys.len() < 4 {
            self.lookup_batch_plain(keys, out)
        } else if keys.len() <= 64 {
            // Smaller per-call arrays to clear for the common small batch.
            self.lookup_batch_levels::<K, 64>(keys, out)
        } else {
            self.lookup_batch_levels::<K, 256>(keys, out)
        }
    }

    /// The loop of single lookups (their top loads are independent, so
    /// the CPU overlaps them by itself).
    #[inline]
    pub fn lookup_batch_plain<K: Key>(&self, keys: &[K], out: &mut [NhId]) {
        for (o, k) in out.iter_mut().zip(keys) {
            *o = self.lookup(*k);
        }
    }

    /// The loop of single lookups with each key's top entry prefetched
    /// `AHEAD` keys before it is looked up (`key` turns an element of
    /// `keys` into the trie's key). Without the prefetch the CPU has only
    /// the lookups in its reorder window in flight, a few misses to DRAM
    /// at a time; 32 keys ahead, each top entry has about 32 lookups' time
    /// to arrive.
    ///
    /// Measured on the full IPv4 table in batches of 256 (`cargo bench -p tern-bench --bench fib_bench -- TABLE
    /// --width`, same run, alternating, 2026-11-23, docs/PERFORMANCE.md):
    /// on covered addresses 1.5-1.7x the plain loop with `u32` entries and
    /// 1.6x with `u16` entries (2.1x the plain loop of `u32` entries it
    /// replaced); 16 ahead gave about two thirds of that gain, 64 ahead no
    /// more than 32.
    #[inline]
    pub fn lookup_batch_ahead<T: Copy, K: Key>(&self, keys: &[T], key: impl Fn(T) -> K, out: &mut [NhId]) {
        const AHEAD: usize = 32;
        for k in keys.iter().take(AHEAD) {
            tern_intrin::prefetch_index(&self.top, key(*k).top(TOP));
        }
        for (i, (o, k)) in out.iter_mut().zip(keys).enumerate() {
            if let Some(a) = keys.get(i + AHEAD) {
                tern_intrin::prefetch_index(&self.top, key(*a).top(TOP));
            }
            *o = self.lookup(key(*k));
        }
    }

    /// Lookups walked level-synchronously in groups of `G` (software
    /// pipelining across lookups): one pass per trie level over the
    /// lookups still in a child block loads the entry the previous pass
    /// prefetched, computes the index of the next one and prefetches it.
    /// All of a group's misses at one level are in flight together, and
    /// each has a whole pass to arrive before it is used; a lookup that
    /// reached a leaf drops out of the list without a branch.
    ///
    /// Measured on the full IPv6 table (`cargo bench -p tern-bench --bench fib_bench -- TABLE --no-kernel`,
    /// 2026-11-22, see docs/PERFORMANCE.md): about twice the rate of the
    /// AMAC lanes it replaced and 3x single lookups on covered and Zipf
    /// addresses; slower than single lookups only when every entry is
    /// already in L1 (64 hot prefixes), where the CPU overlaps single
    /// lookups by itself.
    #[inline]
    pub fn lookup_batch_levels<K: Key, const G: usize>(&self, keys: &[K], out: &mut [NhId]) {
        const { assert!(G.is_power_of_two() && G <= 256) };
        // Byte-aligned chunks (tern's 24/8 and 16/8 shapes) are read from
        // the key's bytes; other shapes shift the key.
        let bytewise = STRIDE == 8 && TOP.is_multiple_of(8);
        // Indices into the per-group arrays are masked with `G - 1` (they
        // are below G anyway), which spares the bounds checks.
        let g = G - 1;
        let levels = K::BITS.saturating_sub(TOP).div_ceil(STRIDE) as usize;
        let first = (TOP / 8) as usize;
        for (kc, oc) in keys.chunks(G).zip(out.chunks_mut(G)) {
            // Per lookup: its entry so far, and its key's bytes (the
            // chunk of level l, 0 = the first block, is byte TOP / 8 + l).
            let mut e = [0u32; G];
            let mut kb = [[0u8; 16]; G];
            // The lookups still in a child block: the index of the entry
            // each needs next, shifted left by 8, with its position.
            let mut pend = [0usize; G];
            let mut m = 0usize;
            for (i, k) in kc.iter().enumerate() {
                let x = self.top.get(k.top(TOP)).map_or(NH_NONE, |a| a.get(Ordering::Acquire));
                let c = if bytewise {
                    let b = k.bytes();
                    kb[i & g] = b;
                    usize::from(b[first & 15])
                } else {
                    k.chunk(TOP, STRIDE)
                };
                let child = u32::from(x >= E::CHILD);
                // A leaf gets index 0: a harmless, cached line.
                let ix = (((x.wrapping_sub(E::CHILD) as usize) << STRIDE) | c) & (child as usize).wrapping_neg();
                tern_intrin::prefetch_index(&self.nodes, ix);
                e[i & g] = x;
                pend[m & g] = ix << 8 | (i & g);
                m += child as usize;
            }
            let mut level = 1;
            while m > 0 && level <= levels {
                let byte = (first + level) & 15;
                let off = TOP + level as u32 * STRIDE;
                let mut m2 = 0usize;
                for j in 0..m {
                    let p = pend[j & g];
                    let i = p & g;
                    let x = self.nodes.get(p >> 8).map_or(NH_NONE, |a| a.get(Ordering::Acquire));
                    let c =
                        if bytewise { usize::from(kb[i][byte]) } else { kc.get(i).map_or(0, |k| k.chunk(off, STRIDE)) };
                    let child = u32::from(x >= E::CHILD);
                    let ix = (((x.wrapping_sub(E::CHILD) as usize) << STRIDE) | c) & (child as usize).wrapping_neg();
                    tern_intrin::prefetch_index(&self.nodes, ix);
                    e[i] = x;
                    pend[m2 & g] = ix << 8 | i;
                    m2 += child as usize;
                }
                m = m2;
                level += 1;
            }
            for (o, x) in oc.iter_mut().zip(&e) {
                *o = if *x >= E::CHILD { NH_NONE } else { *x };
            }
        }
    }

    /// The raw arrays (top, nodes), for mirroring into BPF array maps.
    pub fn raw(&self) -> (&[E::Cell], &[E::Cell]) {
        (&self.top, &self.nodes)
    }

    fn top_entry(&self, i: usize) -> u32 {
        self.top.get(i).map_or(0, |a| a.get(Ordering::Relaxed))
    }

    fn set_top(&self, i: usize, v: u32) {
        if let Some(a) = self.top.get(i) {
            a.put(v, Ordering::Release);
        }
    }

    fn entry(&self, node: u32, s: usize) -> u32 {
        self.nodes.get(((node as usize) << STRIDE) | s).map_or(0, |a| a.get(Ordering::Relaxed))
    }

    /// Sets every entry of an unpublished block (one pass over its slice,
    /// not a bounds check per entry: most of a new block's cost).
    fn fill_block(&self, node: u32, v: u32) {
        let base = (node as usize) << STRIDE;
        if let Some(block) = self.nodes.get(base..base + (1 << STRIDE)) {
            for a in block {
                a.put(v, Ordering::Relaxed);
            }
        }
    }

    fn set_entry(&self, node: u32, s: usize, v: u32, o: Ordering) {
        if let Some(a) = self.nodes.get(((node as usize) << STRIDE) | s) {
            a.put(v, o);
        }
    }
}

/// Writer-side facts about one block (its per-slot depths and its own
/// prefixes live in the writer's flat arrays, indexed by block number).
#[derive(Clone, Copy)]
struct NodeMeta {
    /// What the parent slot holds for this block's range, and its depth.
    inh: NhId,
    inh_depth: u8,
    /// Bit offset of this block's chunk.
    off: u8,
    /// Child blocks.
    kids: u16,
    /// Prefixes ending in this block.
    owns: u16,
}

/// The writer side of one family's trie.
///
/// Per block the writer keeps, in flat arrays indexed by the block number
/// (no allocation per block, one address computation instead of a pointer
/// to follow: an update touches a few cold blocks and each pointer chased
/// is another cache miss): `depth`, per slot the length + 1 of the prefix
/// that set it (0: none), and `own`, one bit per prefix ending inside the
/// block (own index `2^r - 2 + (c >> (STRIDE - r))` for relative length
/// r in 1..=STRIDE at chunk c). The next hops of those prefixes are not
/// kept: the caller holds every prefix anyway (the RIB) and supplies the
/// next hop of the one prefix a delete needs (`remove`'s `next_hop_of`).
pub struct MultibitWriter<E, const TOP: u32, const STRIDE: u32> {
    v6: bool,
    width: u32,
    top_depth: Vec<u8>,
    /// Which prefixes of length <= TOP exist, one bit each. A delete
    /// finds the length of the prefix that takes over by testing these,
    /// from its own length down (the caller supplies its next hop). The
    /// bits are grouped so that one 64-byte line holds the 510 prefixes of
    /// lengths 8b+1..=8b+8 under one prefix of length 8b ("band" b): the
    /// search touches one line per 8 lengths instead of one array per
    /// length (up to 24 lines for an IPv4 /24, 3 now).
    present: Vec<Vec<[u64; 8]>>,
    present0: bool,
    meta: Vec<Option<NodeMeta>>,
    /// `1 << STRIDE` depths per block.
    depth: Vec<u8>,
    /// `OWN_WORDS` words of own-prefix bits per block.
    own: Vec<u64>,
    free: Vec<u32>,
    /// Every block in use by its offset and path (`blockdir.rs`).
    dir: BlockDir,
    next: u32,
    cap: u32,
    count: usize,
    garbage: Vec<Garbage>,
    /// Scratch space, kept to spare an allocation per update: the blocks
    /// still to visit by `paint`/`replace`.
    stack: Vec<u32>,
    /// Change tracking for mirrors: one bit per top entry / per block.
    dirty_top: DirtyBits,
    dirty_nodes: DirtyBits,
    entry: std::marker::PhantomData<E>,
}

/// Where a walk ahead of an update (`MultibitWriter::walk_step`) is: at
/// the top entry (`off` 0), or at block `node` whose chunk starts at `off`.
#[derive(Clone, Copy, Default)]
pub struct Walk {
    node: u32,
    off: u32,
    done: bool,
}

impl Walk {
    /// The walk for a prefix of `len` bits: none (done) when the prefix
    /// ends in the top level (all of IPv4 up to /24).
    #[inline]
    pub fn new<const TOP4: u32, const TOP6: u32>(v4: bool, len: u8) -> Walk {
        let top = if v4 { TOP4 } else { TOP6 };
        Walk { node: 0, off: 0, done: u32::from(len) <= top }
    }

    #[inline]
    pub fn done(&self) -> bool {
        self.done
    }
}

/// Writes every 4 KiB page of a freshly zeroed allocation. The allocator
/// hands out large zeroed blocks as untouched pages, and the writer reads
/// its bookkeeping before writing it: that first read maps the shared zero
/// page, and the write after it replaces the mapping, which the kernel
/// follows with a TLB shootdown, an interrupt on every CPU running this
/// process, forwarding workers included (4,129 on the gap reader's CPU
/// during a full IPv4 load, for the 16 MiB of top depths; `tern-bench
/// fib`, 2026-11-23). Written first, the pages are allocated by ordinary
/// faults of the writer's own, which interrupt no one else.
fn touch_pages<T: Copy + Default>(v: &mut [T]) {
    let v = std::hint::black_box(v);
    for page in v.chunks_mut((4096 / std::mem::size_of::<T>().max(1)).max(1)) {
        if let Some(x) = page.first_mut() {
            *x = T::default();
        }
    }
}

/// The next hop of the prefix that set the entries of depth `d` among
/// `cells` (the whole range of that prefix; `depths` beside them), from
/// one of its leaves in the 64-byte line of entries around `at`. A removal
/// looks there before asking the RIB, whose cell for the covering prefix
/// is a dependent cache miss on a large table. `None` when the line holds
/// no leaf of that prefix (only longer prefixes, or its entries there lead
/// to child blocks: taking the next hop a block inherits instead found no
/// more on the full table, 2026-11-23).
#[inline]
fn leaf_near<E: Entry>(depths: &[u8], cells: &[E::Cell], at: usize, d: u8) -> Option<NhId> {
    const { assert!(std::mem::size_of::<E::Cell>() <= 64) };
    let line = 64 / std::mem::size_of::<E::Cell>();
    let lo = at & !(line - 1);
    let hi = (lo + line).min(cells.len());
    let (depths, cells) = (depths.get(lo..hi)?, cells.get(lo..hi)?);
    depths.iter().zip(cells).find_map(|(&x, cell)| {
        let e = cell.get(Ordering::Relaxed);
        (x == d && e < E::CHILD).then_some(e)
    })
}

/// The bits of `bits` (left-aligned) at `off`, `stride` wide.
#[inline]
fn chunk128(bits: u128, off: u32, stride: u32) -> usize {
    (bits.wrapping_shl(off) >> (128 - stride)) as usize
}

impl<E: Entry, const TOP: u32, const STRIDE: u32> MultibitWriter<E, TOP, STRIDE> {
    const SLOTS: usize = 1 << STRIDE;
    /// Words of own-prefix bits per block (2^(STRIDE+1) - 2 prefixes).
    const OWN_WORDS: usize = (2usize << STRIDE).div_ceil(64);

    pub fn new(v6: bool, arrays: &MultibitArrays<E, TOP, STRIDE>) -> Self {
        // Huge pages for the writer's large arrays too (16 MiB of IPv4 top
        // depths, 4 MiB of present bits: a random line of each per update),
        // asked for before `touch_pages` first writes them.
        let mut top_depth = vec![0; 1 << TOP];
        tern_intrin::advise_hugepages(&top_depth);
        touch_pages(&mut top_depth);
        let mut present: Vec<Vec<[u64; 8]>> =
            (0..TOP.div_ceil(8)).map(|b| vec![[0u64; 8]; 1usize << (8 * b)]).collect();
        for band in &mut present {
            tern_intrin::advise_hugepages(band);
            touch_pages(band);
        }
        MultibitWriter {
            v6,
            width: if v6 { 128 } else { 32 },
            top_depth,
            present,
            present0: false,
            meta: Vec::new(),
            depth: Vec::new(),
            own: Vec::new(),
            free: Vec::new(),
            dir: BlockDir::default(),
            next: 0,
            cap: arrays.node_capacity(),
            count: 0,
            garbage: Vec::new(),
            stack: Vec::new(),
            dirty_top: DirtyBits::default(),
            dirty_nodes: DirtyBits::default(),
            entry: std::marker::PhantomData,
        }
    }

    /// The offset of the block a prefix of `len > TOP` bits ends in.
    #[inline]
    fn last_off(len: u32) -> u32 {
        TOP + STRIDE * ((len - TOP - 1) / STRIDE)
    }

    /// Prefixes installed.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Blocks the directory holds (every block linked in the trie).
    #[cfg(test)]
    pub(crate) fn dir_len(&self) -> usize {
        self.dir.len()
    }

    /// Blocks in use (allocated, not on the free list).
    pub fn nodes_in_use(&self) -> u32 {
        self.next - self.free.len() as u32
    }

    /// Bytes of the reader arrays in use.
    pub fn used_bytes(&self) -> usize {
        std::mem::size_of::<E::Cell>() * ((1usize << TOP) + ((self.nodes_in_use() as usize) << STRIDE))
    }

    /// Bytes of the writer's bookkeeping.
    pub fn writer_bytes(&self) -> usize {
        self.meta.capacity() * std::mem::size_of::<Option<NodeMeta>>()
            + self.depth.capacity()
            + self.own.capacity() * 8
            + self.top_depth.len()
            + self.present.iter().map(|v| v.len() * 64).sum::<usize>()
            + self.dir.bytes()
    }

    /// Starts loading what an update of (`bits`, `len`) will touch first:
    /// the top entry and its depth and, for a prefix of length <= TOP, the
    /// lines of present bits a delete searches. The caller issues this
    /// before its own cache misses (the RIB's hash table), so that the
    /// trie's arrive meanwhile instead of after: on a full IPv4 table each
    /// is a miss of its own (32 MiB of IPv4 top entries, 16 MiB of depths).
    #[inline]
    pub fn prefetch(&self, a: &MultibitArrays<E, TOP, STRIDE>, bits: u128, len: u8) {
        let t = (bits >> (128 - TOP)) as usize;
        tern_intrin::prefetch_index(&a.top, t);
        tern_intrin::prefetch_index(&self.top_depth, t);
        self.dirty_top.prefetch(t);
        let len = u32::from(len);
        if len > TOP.min(self.width) {
            self.dir.prefetch(bits, Self::last_off(len.min(self.width)));
        }
        if (1..=TOP).contains(&len) {
            // TOP <= 64 (both families): the roots are in the key's top
            // 64 bits, so u64 shifts do (a u128 shift by a variable is a
            // dozen instructions).
            const { assert!(TOP <= 64) };
            let hi = (bits >> 64) as u64;
            for b in 1..=(len - 1) / 8 {
                if let Some(band) = self.present.get(b as usize) {
                    tern_intrin::prefetch_index(band, (hi >> (64 - 8 * b)) as usize);
                }
            }
        }
    }

    /// One step of a walk down the trie ahead of an update of (`bits`,
    /// `len`), which a batch (`FibWriter::apply`) takes for each operation
    /// in its window once per operation applied: reads the entry the
    /// previous step prefetched (the top entry: `prefetch`) and, if it
    /// leads to a child block, prefetches that block's entry on the path,
    /// its writer-side facts (meta, depths, and own-prefix bits when the
    /// prefix ends there). A deep IPv6 prefix (a /48 is four blocks down)
    /// thus has its blocks loaded one level per step, overlapped with the
    /// operations applied meanwhile, instead of one miss after another
    /// when it is applied. Only a hint: operations applied in between may
    /// change the path, and the update itself walks it again.
    #[inline]
    pub fn walk_step(&self, a: &MultibitArrays<E, TOP, STRIDE>, bits: u128, len: u8, w: &mut Walk) {
        let len = u32::from(len);
        let ends_here = if w.off == 0 { len <= TOP } else { len <= w.off + STRIDE };
        if w.done || ends_here {
            w.done = true;
            return;
        }
        if w.off == 0
            && let Some(n) = self.dir.find(bits, Self::last_off(len.min(self.width)))
        {
            // The block the prefix ends in, from the directory (its line
            // prefetched with the top entry): no walk down.
            let off = Self::last_off(len.min(self.width));
            let slot = ((n as usize) << STRIDE) | chunk128(bits, off, STRIDE);
            tern_intrin::prefetch_index(&a.nodes, slot);
            tern_intrin::prefetch_index(&self.meta, n as usize);
            tern_intrin::prefetch_index(&self.depth, slot);
            tern_intrin::prefetch_index(&self.own, n as usize * Self::OWN_WORDS);
            w.done = true;
            return;
        }
        let (e, off) = if w.off == 0 {
            (a.top_entry((bits >> (128 - TOP)) as usize), TOP)
        } else {
            (a.entry(w.node, chunk128(bits, w.off, STRIDE)), w.off + STRIDE)
        };
        if e < E::CHILD {
            w.done = true;
            return;
        }
        let n = e - E::CHILD;
        let slot = ((n as usize) << STRIDE) | chunk128(bits, off, STRIDE);
        tern_intrin::prefetch_index(&a.nodes, slot);
        tern_intrin::prefetch_index(&self.meta, n as usize);
        tern_intrin::prefetch_index(&self.depth, slot);
        if len <= off + STRIDE {
            tern_intrin::prefetch_index(&self.own, n as usize * Self::OWN_WORDS);
        }
        w.node = n;
        w.off = off;
    }

    /// Which parts of the arrays were written since the last call.
    /// (top entries, blocks) written since the last call.
    pub fn take_changes(&mut self) -> (Vec<std::ops::Range<u32>>, Vec<std::ops::Range<u32>>) {
        (self.dirty_top.take(), self.dirty_nodes.take())
    }

    /// Band, line and bit of the prefix (`bits`, `1 <= len <= TOP`).
    fn present_bit(bits: u128, len: u32) -> (usize, usize, usize) {
        let b = (len - 1) / 8;
        let k = len - 8 * b;
        let root = if b == 0 { 0 } else { (bits >> (128 - 8 * b)) as usize };
        let q = ((bits << (8 * b)) >> (128 - k)) as usize;
        let i = (1usize << k) - 2 + q;
        (b as usize, root, i)
    }

    /// The length of the longest present prefix shorter than `len` that
    /// covers `bits`: per band one line and one shift of the key, then a
    /// few bit tests.
    fn covering_len(&self, bits: u128, len: u32) -> Option<u32> {
        if len == 0 {
            return None;
        }
        for b in (0..=(len - 1) / 8).rev() {
            // Relative lengths 1..=kmax of band b are shorter than `len`.
            let kmax = (len - 1 - 8 * b).min(8);
            if kmax == 0 {
                continue;
            }
            let root = if b == 0 { 0 } else { (bits >> (128 - 8 * b)) as usize };
            let Some(line) = self.present.get(b as usize).and_then(|v| v.get(root)) else { continue };
            let x = ((bits << (8 * b)) >> 120) as usize;
            for k in (1..=kmax).rev() {
                let i = (1usize << k) - 2 + (x >> (8 - k));
                if line.get(i / 64).is_some_and(|w| (w >> (i % 64)) & 1 != 0) {
                    return Some(8 * b + k);
                }
            }
        }
        self.present0.then_some(0)
    }

    fn set_present(&mut self, bits: u128, len: u32, on: bool) {
        if len == 0 {
            self.present0 = on;
            return;
        }
        let (b, root, i) = Self::present_bit(bits, len);
        if let Some(w) = self.present.get_mut(b).and_then(|v| v.get_mut(root)).and_then(|l| l.get_mut(i / 64)) {
            if on {
                *w |= 1 << (i % 64);
            } else {
                *w &= !(1 << (i % 64));
            }
        }
    }

    fn is_present(&self, bits: u128, len: u32) -> bool {
        if len == 0 {
            return self.present0;
        }
        let (b, root, i) = Self::present_bit(bits, len);
        self.present
            .get(b)
            .and_then(|v| v.get(root))
            .and_then(|l| l.get(i / 64))
            .is_some_and(|w| (w >> (i % 64)) & 1 != 0)
    }

    /// The top entries of a prefix of length `len <= TOP` at `t`: each one
    /// whose depth passes `take` gets depth `d` and, if it is a leaf, the
    /// value `nh`; returns the child blocks met instead (the caller pushes
    /// the change into them). One pass over the two slices: a short prefix
    /// covers up to 2^TOP entries, and this loop is most of a full-table
    /// load. The dirty range is the span from the first to the last entry
    /// stored (it may include entries left as they were).
    fn write_top(
        &mut self,
        a: &MultibitArrays<E, TOP, STRIDE>,
        t: usize,
        len: u32,
        take: impl Fn(u8) -> bool,
        d: u8,
        nh: NhId,
    ) -> Vec<u32> {
        let span = 1usize << (TOP - len);
        let mut kids = Vec::new();
        let (Some(depths), Some(cells)) = (self.top_depth.get_mut(t..t + span), a.top.get(t..t + span)) else {
            return kids;
        };
        let (mut lo, mut hi) = (usize::MAX, 0);
        for (i, (depth, cell)) in depths.iter_mut().zip(cells).enumerate() {
            if take(*depth) {
                *depth = d;
                let e = cell.get(Ordering::Relaxed);
                if e >= E::CHILD {
                    kids.push(e - E::CHILD);
                } else if e != nh {
                    cell.put(nh, Ordering::Release);
                    lo = lo.min(i);
                    hi = i + 1;
                }
            }
        }
        if lo < hi {
            self.dirty_top.mark_range(t + lo, t + hi);
        }
        kids
    }

    fn own_index(rl: u32, c: usize) -> usize {
        (1usize << rl) - 2 + (c >> (STRIDE - rl))
    }

    fn own_bit(&self, n: u32, oi: usize) -> bool {
        self.own.get(n as usize * Self::OWN_WORDS + oi / 64).is_some_and(|w| (w >> (oi % 64)) & 1 != 0)
    }

    /// Sets or clears an own-prefix bit; returns whether it was set before.
    fn flip_own(&mut self, n: u32, oi: usize, on: bool) -> bool {
        let Some(w) = self.own.get_mut(n as usize * Self::OWN_WORDS + oi / 64) else { return false };
        let was = (*w >> (oi % 64)) & 1 != 0;
        if on {
            *w |= 1 << (oi % 64);
        } else {
            *w &= !(1 << (oi % 64));
        }
        was
    }

    fn m(&self, n: u32) -> Option<&NodeMeta> {
        self.meta.get(n as usize).and_then(Option::as_ref)
    }

    fn m_mut(&mut self, n: u32) -> Option<&mut NodeMeta> {
        self.meta.get_mut(n as usize).and_then(Option::as_mut)
    }

    /// The depths of block `n`'s slots.
    fn depths(&mut self, n: u32) -> &mut [u8] {
        let base = (n as usize) << STRIDE;
        self.depth.get_mut(base..base + Self::SLOTS).unwrap_or_default()
    }

    /// Blocks that can still be created.
    fn room(&self) -> u64 {
        u64::from(self.cap - self.next) + self.free.len() as u64
    }

    /// A new block under a slot holding (`inh`, `inh_depth`), filled with
    /// that value; the caller publishes it.
    fn new_block(
        &mut self,
        a: &MultibitArrays<E, TOP, STRIDE>,
        bits: u128,
        off: u32,
        inh: NhId,
        inh_depth: u8,
    ) -> Option<u32> {
        let n = match self.free.pop() {
            Some(n) => n,
            None if self.next < self.cap => {
                self.next += 1;
                self.next - 1
            }
            None => return None,
        };
        a.fill_block(n, inh);
        let i = n as usize;
        if self.meta.len() <= i {
            self.meta.resize(i + 1, None);
            self.depth.resize((i + 1) << STRIDE, 0);
            self.own.resize((i + 1) * Self::OWN_WORDS, 0);
        }
        self.meta[i] = Some(NodeMeta { inh, inh_depth, off: off as u8, kids: 0, owns: 0 });
        self.depths(n).fill(inh_depth);
        if let Some(w) = self.own.get_mut(i * Self::OWN_WORDS..(i + 1) * Self::OWN_WORDS) {
            w.fill(0);
        }
        self.dirty_nodes.mark(i);
        self.dir.insert(bits, off, n);
        Some(n)
    }

    /// Rewrites slots `c0..c1` of block `n`: each whose depth passes
    /// `take` gets depth `nd` and, if it is a leaf, the value `nh` (when
    /// `keep_same`, a leaf already holding `nh` is not stored again).
    /// Child blocks met instead are pushed on `self.stack`.
    #[allow(clippy::too_many_arguments)]
    fn write_slots(
        &mut self,
        a: &MultibitArrays<E, TOP, STRIDE>,
        n: u32,
        c0: usize,
        c1: usize,
        take: impl Fn(u8) -> bool,
        nd: u8,
        nh: NhId,
    ) {
        let base = (n as usize) << STRIDE;
        let (Some(depths), Some(cells)) = (self.depth.get_mut(base + c0..base + c1), a.nodes.get(base + c0..base + c1))
        else {
            return;
        };
        let mut touched = false;
        // Eight slots at a time where their depths are one value (a run
        // set by one prefix: under a changed short prefix nearly every
        // slot of a block inherits it): one test of the eight depths, a
        // run not taken skipped, a run of leaves taken rewritten without
        // a test per slot. Other runs go slot by slot.
        let mut d8 = depths.chunks_exact_mut(8);
        let mut c8 = cells.chunks_exact(8);
        for (ds, cs) in (&mut d8).zip(&mut c8) {
            let x = ds.first().copied().unwrap_or(0);
            // (Depths are at most 129: no run of 8 reads as all 0xff.)
            let w = <[u8; 8]>::try_from(&*ds).map_or(u64::MAX, u64::from_ne_bytes);
            if w == u64::from(x) * 0x0101_0101_0101_0101 {
                if !take(x) {
                    continue;
                }
                let (mut max, mut diff) = (0, 0);
                for c in cs {
                    let e = c.get(Ordering::Relaxed);
                    max = max.max(e);
                    diff |= e ^ nh;
                }
                if max < E::CHILD {
                    ds.fill(nd);
                    if diff != 0 {
                        for c in cs {
                            c.put(nh, Ordering::Release);
                        }
                        touched = true;
                    }
                    continue;
                }
            }
            touched |= Self::write_each(&mut self.stack, ds, cs, &take, nd, nh);
        }
        touched |= Self::write_each(&mut self.stack, d8.into_remainder(), c8.remainder(), &take, nd, nh);
        if touched {
            self.dirty_nodes.mark(n as usize);
        }
    }

    /// `write_slots` slot by slot; returns whether an entry was stored.
    fn write_each(
        stack: &mut Vec<u32>,
        depths: &mut [u8],
        cells: &[E::Cell],
        take: &impl Fn(u8) -> bool,
        nd: u8,
        nh: NhId,
    ) -> bool {
        let mut touched = false;
        for (depth, cell) in depths.iter_mut().zip(cells) {
            if take(*depth) {
                *depth = nd;
                let e = cell.get(Ordering::Relaxed);
                if e >= E::CHILD {
                    stack.push(e - E::CHILD);
                } else if e != nh {
                    cell.put(nh, Ordering::Release);
                    touched = true;
                }
            }
        }
        touched
    }

    /// Pushes (`nh`, `d`) into the blocks on `self.stack` (and their
    /// children) whose parent slots took it: every slot set by a prefix no
    /// longer than `d` takes it. The order blocks are visited in does not
    /// matter to readers: every store is of one entry's final value.
    fn paint(&mut self, a: &MultibitArrays<E, TOP, STRIDE>, nh: NhId, d: u8) {
        while let Some(n) = self.stack.pop() {
            let Some(m) = self.m_mut(n) else { continue };
            m.inh = nh;
            m.inh_depth = d;
            self.write_slots(a, n, 0, Self::SLOTS, |depth| depth <= d, d, nh);
        }
    }

    /// The blocks on `self.stack` lost, from their parent slots, the
    /// prefix of depth `d`, which now hold (`nh`, `nd`): the slots `d` had
    /// set take that.
    fn replace(&mut self, a: &MultibitArrays<E, TOP, STRIDE>, d: u8, nh: NhId, nd: u8) {
        while let Some(n) = self.stack.pop() {
            let Some(m) = self.m_mut(n) else { continue };
            m.inh = nh;
            m.inh_depth = nd;
            self.write_slots(a, n, 0, Self::SLOTS, |depth| depth == d, nd, nh);
        }
    }

    /// Installs or changes a prefix (`bits` left-aligned, host bits clear).
    /// Fails only when the blocks it needs do not fit; then nothing changed.
    pub fn set(&mut self, a: &MultibitArrays<E, TOP, STRIDE>, bits: u128, len: u8, nh: NhId) -> Result<(), FibError> {
        let len = u32::from(len).min(self.width);
        let d = (len + 1) as u8;
        // A next hop whose id does not fit an entry (IPv4's u16 entries:
        // ids from 2^15 up; IPv6's: from 2^13 up) is refused before
        // anything changes.
        if nh >= E::CHILD {
            return Err(FibError::Full(match (self.v6, E::CHILD) {
                (false, 0x8000) => "IPv4 next-hop id space (15 bits)",
                (true, 0x2000) => "IPv6 next-hop id space (13 bits)",
                (false, _) => "IPv4 next-hop id space",
                (true, _) => "IPv6 next-hop id space",
            }));
        }
        let t = (bits >> (128 - TOP)) as usize;
        self.stack.clear();
        if len <= TOP {
            if !self.is_present(bits, len) {
                self.count += 1;
                self.set_present(bits, len, true);
            }
            let kids = self.write_top(a, t, len, |depth| depth <= d, d, nh);
            self.stack.extend(kids);
            self.paint(a, nh, d);
            return Ok(());
        }
        // Enough room for every block on the way down, checked first so a
        // failure leaves nothing half-done.
        if self.room() < u64::from((len - TOP).div_ceil(STRIDE)) {
            return Err(FibError::Full(if self.v6 { "IPv6 trie" } else { "IPv4 trie" }));
        }
        // The block the prefix ends in, if it exists (one probe, no walk
        // down: its ancestors exist too); else the walk from the top,
        // which creates the blocks missing.
        let e = a.top_entry(t);
        let mut n = if let Some(n) = self.dir.find(bits, Self::last_off(len)) {
            n
        } else if e >= E::CHILD {
            e - E::CHILD
        } else {
            let c = self.new_block(a, bits, TOP, e, self.top_depth[t]).unwrap_or(0);
            a.set_top(t, E::CHILD + c);
            self.dirty_top.mark(t);
            c
        };
        loop {
            let Some(m) = self.m(n) else { return Ok(()) };
            let off = u32::from(m.off);
            let c = chunk128(bits, off, STRIDE);
            if len <= off + STRIDE {
                let rl = len - off;
                if !self.flip_own(n, Self::own_index(rl, c), true) {
                    self.count += 1;
                    if let Some(m) = self.m_mut(n) {
                        m.owns += 1;
                    }
                }
                self.write_slots(a, n, c, c + (1usize << (STRIDE - rl)), |depth| depth <= d, d, nh);
                self.paint(a, nh, d);
                return Ok(());
            }
            let e = a.entry(n, c);
            n = if e >= E::CHILD {
                e - E::CHILD
            } else {
                let slot_depth = self.depth.get(((n as usize) << STRIDE) | c).copied().unwrap_or(0);
                let k = self.new_block(a, bits, off + STRIDE, e, slot_depth).unwrap_or(0);
                a.set_entry(n, c, E::CHILD + k, Ordering::Release);
                self.dirty_nodes.mark(n as usize);
                if let Some(m) = self.m_mut(n) {
                    m.kids += 1;
                }
                k
            };
        }
    }

    /// Removes a prefix; the longest shorter prefix covering it takes over
    /// (`next_hop_of(bits, len)` gives the next hop of an installed
    /// prefix, which the trie does not keep). Blocks left without prefixes
    /// or children are unlinked and recycled after a grace period.
    pub fn remove(
        &mut self,
        a: &MultibitArrays<E, TOP, STRIDE>,
        bits: u128,
        len: u8,
        mut next_hop_of: impl FnMut(u128, u8) -> Option<NhId>,
    ) {
        let len = u32::from(len).min(self.width);
        let d = (len + 1) as u8;
        let t = (bits >> (128 - TOP)) as usize;
        self.stack.clear();
        if len <= TOP {
            if !self.is_present(bits, len) {
                return;
            }
            self.count -= 1;
            self.set_present(bits, len, false);
            // The prefix that takes over: its length from the present
            // bits, its next hop from a top entry it sets next to the
            // removed prefix's (lines the update loaded anyway), else from
            // the caller (the RIB: a cache miss of its own).
            let (fnh, fd) = self
                .covering_len(bits, len)
                .and_then(|l| {
                    let cd = (l + 1) as u8;
                    let span = 1usize << (TOP - l);
                    let c0 = t & !(span - 1);
                    let cells = a.top.get(c0..c0 + span).unwrap_or_default();
                    let depths = self.top_depth.get(c0..c0 + span).unwrap_or_default();
                    leaf_near::<E>(depths, cells, t - c0, cd)
                        .or_else(|| next_hop_of(bits & crate::prefix::mask128(l as u8), l as u8))
                        .map(|nh| (nh & (E::CHILD - 1), cd))
                })
                .unwrap_or((NH_NONE, 0));
            let kids = self.write_top(a, t, len, |depth| depth == d, fd, fnh);
            self.stack.extend(kids);
            self.replace(a, d, fnh, fd);
            return;
        }
        // The block the prefix ends in, from the directory: none, and the
        // prefix is not installed.
        let Some(n) = self.dir.find(bits, Self::last_off(len)) else { return };
        let Some(&m) = self.m(n) else { return };
        let off = u32::from(m.off);
        let c = chunk128(bits, off, STRIDE);
        let rl = len - off;
        if !self.flip_own(n, Self::own_index(rl, c), false) {
            return;
        }
        let (inh, inh_depth) = (m.inh, m.inh_depth);
        if let Some(m) = self.m_mut(n) {
            m.owns -= 1;
        }
        self.count -= 1;
        // The longest own prefix of this block covering the removed one,
        // else what the block inherits. Its next hop as above: from a slot
        // it sets next to the removed prefix's, else the caller's.
        let (fnh, fd) = (1..rl)
            .rev()
            .find_map(|r| {
                if !self.own_bit(n, Self::own_index(r, c)) {
                    return None;
                }
                let l = (off + r) as u8;
                let span = 1usize << (STRIDE - r);
                let c0 = ((n as usize) << STRIDE) | (c & !(span - 1));
                let cells = a.nodes.get(c0..c0 + span).unwrap_or_default();
                let depths = self.depth.get(c0..c0 + span).unwrap_or_default();
                leaf_near::<E>(depths, cells, c & (span - 1), l + 1)
                    .or_else(|| next_hop_of(bits & crate::prefix::mask128(l), l))
                    .map(|nh| (nh & (E::CHILD - 1), l + 1))
            })
            .unwrap_or((inh, inh_depth));
        self.write_slots(a, n, c, c + (1usize << (STRIDE - rl)), |depth| depth == d, fd, fnh);
        self.replace(a, d, fnh, fd);
        self.unlink_empty(a, t, bits, n);
    }

    /// Unlinks block `n` and then its ancestors while they hold neither
    /// prefixes nor children, bottom-up: the parent slot gets back the
    /// value the block inherited. Each parent is found in the directory
    /// (`bits` is a prefix below them all): no walk down from the top.
    fn unlink_empty(&mut self, a: &MultibitArrays<E, TOP, STRIDE>, t: usize, bits: u128, mut n: u32) {
        loop {
            let Some(m) = self.m(n) else { return };
            if m.owns > 0 || m.kids > 0 {
                return;
            }
            let (inh, off) = (m.inh, u32::from(m.off));
            self.dir.remove(bits, off);
            self.meta[n as usize] = None;
            self.garbage.push(Garbage::Nodes { v6: self.v6, base: n, count: 1 });
            if off <= TOP {
                a.set_top(t, inh);
                self.dirty_top.mark(t);
                return;
            }
            let Some(p) = self.dir.find(bits, off - STRIDE) else { return };
            let c = chunk128(bits, off - STRIDE, STRIDE);
            a.set_entry(p, c, inh, Ordering::Release);
            self.dirty_nodes.mark(p as usize);
            if let Some(pm) = self.m_mut(p) {
                pm.kids -= 1;
            }
            n = p;
        }
    }

    /// Hands the blocks unlinked since the last call to the reclaimer (the
    /// stores that unlinked them are already visible).
    pub(crate) fn commit(&mut self, garbage: &mut Vec<Garbage>) {
        garbage.append(&mut self.garbage);
    }

    /// A grace period has covered this block: it can be reused.
    pub(crate) fn reuse(&mut self, g: Garbage) {
        if let Garbage::Nodes { base, .. } = g {
            self.free.push(base);
        }
    }
}
