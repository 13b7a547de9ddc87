//! A poptrie (Asai & Ohara, SIGCOMM 2015) updated in place for concurrent
//! readers; one implementation for IPv4 and IPv6.
//!
//! # Layout (what readers and a BPF mirror see)
//! Three flat arrays of fixed-size entries:
//! * `top`: 2^`TOP_BITS` `u32` entries indexed by the first 18 address bits.
//!   Bit 31 clear: a leaf, the next-hop id itself. Bit 31 set: the index of
//!   a node (direct pointing, poptrie's "s = 18").
//! * `nodes`: 4 `u64` words per node (32 bytes, two per cache line):
//!   `vector` (bit i set: child i of the 64 is a node), `leafvec` (bit i
//!   set: a run of equal leaves starts at child i), `base0 | base1 << 32`
//!   (first leaf, first child node), and a spare word. Each node consumes
//!   6 more address bits; the children of a node are contiguous, so child i
//!   is `base1 + popcount(vector & mask(i)) - 1`.
//! * `leaves`: `u32` next-hop ids; the leaf of child i is
//!   `base0 + popcount(leafvec & mask(i)) - 1`.
//!
//! # Updates
//! The writer keeps a shadow of every node (the 64 leaf-pushed slots with
//! the length of the prefix that set each, DPDK DIR-24-8 style, plus the
//! node's own prefixes) and applies a prefix change to the shadow in
//! O(slots covered). At commit it re-encodes only the nodes it touched,
//! bottom-up, writing new leaf and child blocks into free space and then
//! publishing them with one atomic store: the `base0|base1` word of the
//! node when `vector` and `leafvec` did not change (the common case), or a
//! copy of the node in a new child block of its parent otherwise, up to
//! the `top` entry. A reader therefore follows either the old blocks or
//! the new ones, never a mix; replaced blocks are recycled after a grace
//! period.

#![allow(dead_code)] // a measured alternative: `tern-bench fib` uses part of its API

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use rustc_hash::FxBuildHasher;

use tern_fib::{FibError, NH_NONE, NhId};

/// A block to give back once no reader can see it (tern-fib's reclaimer
/// frees them after a grace period; the benchmark never reuses them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Garbage {
    /// A block of trie nodes (family 4 or 6, first node, count).
    Nodes { v6: bool, base: u32, count: u32 },
    /// A block of trie leaves.
    Leaves { v6: bool, base: u32, count: u32 },
}

/// The mask of the `len` leading bits of a 128-bit word (len 0..=128).
#[inline]
pub(crate) fn mask128(len: u8) -> u128 {
    if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) }
}

/// Address bits resolved by the `top` array.
pub const TOP_BITS: u32 = 18;
/// Address bits per node.
pub const STRIDE: u32 = 6;
/// Words per node in the `nodes` array.
pub const NODE_WORDS: usize = 4;
/// Flag of a `top` entry that points to a node.
pub const NODE_FLAG: u32 = 1 << 31;
/// Next-hop ids must stay below this (the writer packs them with a depth).
pub const MAX_NH: u32 = 1 << 24;

const NO_CHILD: u32 = u32::MAX;

/// How a key is cut into the top index and 6-bit chunks. IPv4 keys are
/// left-aligned in a u64, IPv6 keys are the u128 itself.
pub trait Key: Copy {
    const BITS: u32;
    fn top(self) -> usize;
    /// The 6 bits at `off` (bits past the end of the key read as zero).
    fn chunk(self, off: u32) -> u32;
}

impl Key for u64 {
    const BITS: u32 = 32;
    #[inline(always)]
    fn top(self) -> usize {
        (self >> (64 - TOP_BITS)) as usize
    }
    #[inline(always)]
    fn chunk(self, off: u32) -> u32 {
        (self.wrapping_shl(off) >> (64 - STRIDE)) as u32
    }
}

impl Key for u128 {
    const BITS: u32 = 128;
    #[inline(always)]
    fn top(self) -> usize {
        (self >> (128 - TOP_BITS)) as usize
    }
    #[inline(always)]
    fn chunk(self, off: u32) -> u32 {
        (self.wrapping_shl(off) >> (128 - STRIDE)) as u32
    }
}

/// Bits 0..=i.
#[inline(always)]
fn upto(i: u32) -> u64 {
    u64::MAX >> (63 - (i & 63))
}

/// The reader-visible arrays.
pub(crate) struct TrieArrays {
    top: Box<[AtomicU32]>,
    nodes: Box<[AtomicU64]>,
    /// Words skipped at the start of `nodes` so nodes are 32-byte aligned.
    node_off: usize,
    leaves: Box<[AtomicU32]>,
}

impl TrieArrays {
    pub(crate) fn new(max_nodes: u32, max_leaves: u32) -> TrieArrays {
        let nodes: Box<[AtomicU64]> =
            bytemuck::allocation::zeroed_slice_box(max_nodes.max(1) as usize * NODE_WORDS + NODE_WORDS);
        let addr = nodes.as_ptr() as usize;
        let node_off = ((32 - addr % 32) % 32) / 8;
        TrieArrays {
            top: bytemuck::allocation::zeroed_slice_box(1 << TOP_BITS),
            nodes,
            node_off,
            leaves: bytemuck::allocation::zeroed_slice_box(max_leaves.max(1) as usize),
        }
    }

    pub(crate) fn node_capacity(&self) -> u32 {
        ((self.nodes.len() - self.node_off) / NODE_WORDS - 1) as u32
    }

    pub(crate) fn leaf_capacity(&self) -> u32 {
        self.leaves.len() as u32
    }

    /// The three words of node `n`.
    #[inline(always)]
    fn node(&self, n: u32) -> Option<&[AtomicU64]> {
        let w = self.node_off + n as usize * NODE_WORDS;
        self.nodes.get(w..w + 3)
    }

    #[inline(always)]
    pub(crate) fn lookup<K: Key>(&self, key: K) -> NhId {
        let Some(e) = self.top.get(key.top()) else { return NH_NONE };
        let e = e.load(Ordering::Acquire);
        if e & NODE_FLAG == 0 {
            return e;
        }
        self.walk(key, e & !NODE_FLAG, TOP_BITS)
    }

    /// Continues a lookup at node `n`, offset `off`.
    #[inline(always)]
    fn walk<K: Key>(&self, key: K, mut n: u32, mut off: u32) -> NhId {
        loop {
            let Some(w) = self.node(n) else { return NH_NONE };
            let i = key.chunk(off);
            let vector = w[0].load(Ordering::Acquire);
            let m = upto(i);
            if (vector >> i) & 1 != 0 {
                let base1 = (w[2].load(Ordering::Acquire) >> 32) as u32;
                n = base1.wrapping_add((vector & m).count_ones()).wrapping_sub(1);
                off += STRIDE;
                if off >= K::BITS {
                    return NH_NONE;
                }
                continue;
            }
            let leafvec = w[1].load(Ordering::Acquire);
            let base0 = w[2].load(Ordering::Acquire) as u32;
            let li = base0.wrapping_add((leafvec & m).count_ones()).wrapping_sub(1);
            return self.leaves.get(li as usize).map_or(NH_NONE, |l| l.load(Ordering::Acquire));
        }
    }

    /// Lookups with the first two levels of the next keys prefetched.
    #[inline]
    pub(crate) fn lookup_batch<K: Key>(&self, keys: &[K], out: &mut [NhId]) {
        const G: usize = 16;
        let n = keys.len().min(out.len());
        let (keys, out) = (&keys[..n], &mut out[..n]);
        for (kc, oc) in keys.chunks(G).zip(out.chunks_mut(G)) {
            let mut tops = [0u32; G];
            for k in kc {
                tern_intrin::prefetch_index(&self.top, k.top());
            }
            for (t, k) in tops.iter_mut().zip(kc) {
                *t = self.top.get(k.top()).map_or(0, |e| e.load(Ordering::Acquire));
                if *t & NODE_FLAG != 0 {
                    tern_intrin::prefetch_index(&self.nodes, self.node_off + (*t & !NODE_FLAG) as usize * NODE_WORDS);
                }
            }
            for ((o, k), t) in oc.iter_mut().zip(kc).zip(tops) {
                *o = if t & NODE_FLAG == 0 { t } else { self.walk(*k, t & !NODE_FLAG, TOP_BITS) };
            }
        }
    }

    pub(crate) fn raw(&self) -> (&[AtomicU32], &[AtomicU64], &[AtomicU32]) {
        (&self.top, &self.nodes[self.node_off..], &self.leaves)
    }

    fn word(&self, n: u32, k: usize) -> u64 {
        self.nodes.get(self.node_off + n as usize * NODE_WORDS + k).map_or(0, |a| a.load(Ordering::Relaxed))
    }

    fn set_word(&self, n: u32, k: usize, v: u64, o: Ordering) {
        if let Some(a) = self.nodes.get(self.node_off + n as usize * NODE_WORDS + k) {
            a.store(v, o);
        }
    }

    fn write_node(&self, n: u32, enc: [u64; 3]) {
        for (k, v) in enc.into_iter().enumerate() {
            self.set_word(n, k, v, Ordering::Relaxed);
        }
    }

    fn leaf(&self, i: u32) -> u32 {
        self.leaves.get(i as usize).map_or(0, |a| a.load(Ordering::Relaxed))
    }

    fn set_leaf(&self, i: u32, v: u32) {
        if let Some(a) = self.leaves.get(i as usize) {
            a.store(v, Ordering::Relaxed);
        }
    }

    fn top_entry(&self, t: usize) -> u32 {
        self.top.get(t).map_or(0, |a| a.load(Ordering::Relaxed))
    }

    fn set_top(&self, t: usize, v: u32) {
        if let Some(a) = self.top.get(t) {
            a.store(v, Ordering::Release);
        }
    }
}

/// Exact-size free lists over a bump region of one array.
struct BlockAlloc {
    cap: u32,
    next: u32,
    free: Vec<Vec<u32>>,
    free_slots: u64,
}

impl BlockAlloc {
    fn new(cap: u32) -> BlockAlloc {
        BlockAlloc { cap, next: 0, free: (0..=64).map(|_| Vec::new()).collect(), free_slots: 0 }
    }

    fn alloc(&mut self, size: u32) -> Option<u32> {
        if let Some(b) = self.free.get_mut(size as usize).and_then(Vec::pop) {
            self.free_slots -= u64::from(size);
            return Some(b);
        }
        let b = self.next;
        if u64::from(b) + u64::from(size) > u64::from(self.cap) {
            return None;
        }
        self.next += size;
        Some(b)
    }

    fn release(&mut self, base: u32, size: u32) {
        if let Some(l) = self.free.get_mut(size as usize) {
            l.push(base);
            self.free_slots += u64::from(size);
        }
    }

    fn room(&self) -> u32 {
        self.cap - self.next
    }

    fn live(&self) -> u64 {
        u64::from(self.next) - self.free_slots
    }
}

/// Slot value: next hop << 8 | depth, depth = prefix length + 1 (0 = none).
#[inline]
fn pack(nh: NhId, depth: u32) -> u32 {
    (nh << 8) | depth
}

#[inline]
fn depth(v: u32) -> u32 {
    v & 0xff
}

#[inline]
fn nh_of(v: u32) -> NhId {
    v >> 8
}

/// Index of an own prefix of relative length `rl` (1..=6) at chunk `c`.
#[inline]
fn own_index(rl: u32, c: u32) -> u8 {
    ((1u32 << rl) - 2 + (c >> (STRIDE - rl))) as u8
}

/// The writer's shadow of one node.
struct SNode {
    /// Leaf-pushed value of each of the 64 children (packed).
    slot: [u32; 64],
    /// Children that are nodes (shadow truth).
    vector: u64,
    /// Shadow indices of the child nodes, in child order.
    kids: Vec<u32>,
    /// Prefixes ending in this node: (own_index, next hop), sorted.
    own: Vec<(u8, NhId)>,
    /// Bit offset of this node's 6 bits.
    off: u32,
    dirty: bool,
    /// The encoding published at this node's location ([0; 3]: none yet).
    pub_enc: [u64; 3],
    kids_blk: u32,
    kids_cnt: u32,
    leaves_blk: u32,
    leaves_cnt: u32,
}

impl SNode {
    fn kid(&self, c: u32) -> Option<u32> {
        if (self.vector >> c) & 1 == 0 {
            return None;
        }
        self.kids.get((self.vector & upto(c)).count_ones() as usize - 1).copied()
    }
}

/// The writer side of one family's trie.
pub(crate) struct TrieWriter {
    v6: bool,
    /// Key width (32 or 128); keys are left-aligned u128 here.
    width: u32,
    top_val: Vec<u32>,
    top_child: Vec<u32>,
    /// Prefixes of length <= TOP_BITS: (len << 32 | top bits) -> next hop.
    top_own: HashMap<u64, NhId, FxBuildHasher>,
    snodes: Vec<SNode>,
    sfree: Vec<u32>,
    dirty_top: Vec<u32>,
    dirty_bits: Vec<u64>,
    nodes: BlockAlloc,
    leaves: BlockAlloc,
    count: usize,
    /// Reusable buffer for encoding.
    scratch: Vec<u32>,
    /// Blocks of freed shadow nodes, for limbo at the next commit.
    garbage: Vec<Garbage>,
}

#[inline]
fn chunk128(bits: u128, off: u32) -> u32 {
    (bits.wrapping_shl(off) >> (128 - STRIDE)) as u32
}

impl TrieWriter {
    pub(crate) fn new(v6: bool, arrays: &TrieArrays) -> TrieWriter {
        TrieWriter {
            v6,
            width: if v6 { 128 } else { 32 },
            top_val: vec![0; 1 << TOP_BITS],
            top_child: vec![NO_CHILD; 1 << TOP_BITS],
            top_own: HashMap::default(),
            snodes: Vec::new(),
            sfree: Vec::new(),
            dirty_top: Vec::new(),
            dirty_bits: vec![0; (1 << TOP_BITS) / 64],
            nodes: BlockAlloc::new(arrays.node_capacity()),
            leaves: BlockAlloc::new(arrays.leaf_capacity()),
            count: 0,
            scratch: Vec::with_capacity(64),
            garbage: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Bytes of the reader arrays in use.
    pub(crate) fn used_bytes(&self) -> usize {
        (1usize << TOP_BITS) * 4 + self.nodes.live() as usize * NODE_WORDS * 8 + self.leaves.live() as usize * 4
    }

    /// (nodes in use, leaves in use).
    pub(crate) fn usage(&self) -> (u64, u64) {
        (self.nodes.live(), self.leaves.live())
    }

    /// Bytes of the writer's shadow.
    pub(crate) fn shadow_bytes(&self) -> usize {
        let per = std::mem::size_of::<SNode>();
        self.snodes.len() * per
            + self.snodes.iter().map(|n| n.kids.capacity() * 4 + n.own.capacity() * 8).sum::<usize>()
            + self.top_val.len() * 8
            + self.top_own.capacity() * 16
    }

    fn mark_top(&mut self, t: usize) {
        let (w, b) = (t / 64, t % 64);
        if let Some(word) = self.dirty_bits.get_mut(w)
            && *word & (1 << b) == 0
        {
            *word |= 1 << b;
            self.dirty_top.push(t as u32);
        }
    }

    fn new_node(&mut self, off: u32, inherit: u32) -> u32 {
        let n = SNode {
            slot: [inherit; 64],
            vector: 0,
            kids: Vec::new(),
            own: Vec::new(),
            off,
            dirty: true,
            pub_enc: [0; 3],
            kids_blk: 0,
            kids_cnt: 0,
            leaves_blk: 0,
            leaves_cnt: 0,
        };
        match self.sfree.pop() {
            Some(i) => {
                self.snodes[i as usize] = n;
                i
            }
            None => {
                self.snodes.push(n);
                (self.snodes.len() - 1) as u32
            }
        }
    }

    /// The child node at chunk `c` of `n`, created (inheriting the slot) if
    /// missing.
    fn ensure_kid(&mut self, n: u32, c: u32) -> u32 {
        let node = &self.snodes[n as usize];
        if let Some(k) = node.kid(c) {
            return k;
        }
        let (off, inherit) = (node.off + STRIDE, node.slot[c as usize]);
        let k = self.new_node(off, inherit);
        let node = &mut self.snodes[n as usize];
        let rank = (node.vector & (upto(c) >> 1)).count_ones() as usize;
        node.vector |= 1 << c;
        node.kids.insert(rank, k);
        node.dirty = true;
        k
    }

    /// Pushes a new value down: every slot whose value came from a prefix
    /// no longer than `d` takes `v`.
    fn paint(&mut self, n: u32, v: u32, d: u32) {
        let node = &mut self.snodes[n as usize];
        node.dirty = true;
        let mut kids = Vec::new();
        for c in 0..64u32 {
            let s = &mut node.slot[c as usize];
            if depth(*s) <= d && *s != v {
                *s = v;
                if let Some(k) = node.kid(c) {
                    kids.push(k);
                }
            }
        }
        for k in kids {
            self.paint(k, v, d);
        }
    }

    /// Replaces the value of a removed prefix (depth `d`) by `v`.
    fn replace(&mut self, n: u32, d: u32, v: u32) {
        let node = &mut self.snodes[n as usize];
        node.dirty = true;
        let mut kids = Vec::new();
        for c in 0..64u32 {
            let s = &mut node.slot[c as usize];
            if depth(*s) == d {
                *s = v;
                if let Some(k) = node.kid(c) {
                    kids.push(k);
                }
            }
        }
        for k in kids {
            self.replace(k, d, v);
        }
    }

    fn top_key(bits: u128, len: u32) -> u64 {
        (u64::from(len) << 32) | if len == 0 { 0 } else { (bits >> (128 - len)) as u64 }
    }

    /// Installs or changes a prefix. `bits` is left-aligned, host bits clear.
    pub(crate) fn set(&mut self, bits: u128, len: u8, nh: NhId) {
        let len = u32::from(len).min(self.width);
        let d = len + 1;
        let v = pack(nh & (MAX_NH - 1), d);
        let t = (bits >> (128 - TOP_BITS)) as usize;
        if len <= TOP_BITS {
            if self.top_own.insert(Self::top_key(bits, len), nh).is_none() {
                self.count += 1;
            }
            let span = 1usize << (TOP_BITS - len);
            for i in t..t + span {
                let cur = self.top_val[i];
                if depth(cur) <= d && cur != v {
                    self.top_val[i] = v;
                    if self.top_child[i] != NO_CHILD {
                        self.paint(self.top_child[i], v, d);
                    }
                    self.mark_top(i);
                }
            }
            return;
        }
        self.mark_top(t);
        let mut n = self.top_child[t];
        if n == NO_CHILD {
            n = self.new_node(TOP_BITS, self.top_val[t]);
            self.top_child[t] = n;
        }
        loop {
            let off = self.snodes[n as usize].off;
            self.snodes[n as usize].dirty = true;
            let c = chunk128(bits, off);
            if len <= off + STRIDE {
                let rl = len - off;
                let oi = own_index(rl, c);
                let node = &mut self.snodes[n as usize];
                match node.own.binary_search_by_key(&oi, |x| x.0) {
                    Ok(p) => node.own[p].1 = nh,
                    Err(p) => {
                        node.own.insert(p, (oi, nh));
                        self.count += 1;
                    }
                }
                let span = 1u32 << (STRIDE - rl);
                let mut kids = Vec::new();
                let node = &mut self.snodes[n as usize];
                for s in c..c + span {
                    let cur = node.slot[s as usize];
                    if depth(cur) <= d && cur != v {
                        node.slot[s as usize] = v;
                        if let Some(k) = node.kid(s) {
                            kids.push(k);
                        }
                    }
                }
                for k in kids {
                    self.paint(k, v, d);
                }
                return;
            }
            n = self.ensure_kid(n, c);
        }
    }

    /// Removes a prefix; the longest shorter prefix covering it takes over.
    pub(crate) fn remove(&mut self, bits: u128, len: u8) {
        let len = u32::from(len).min(self.width);
        let d = len + 1;
        let t = (bits >> (128 - TOP_BITS)) as usize;
        if len <= TOP_BITS {
            if self.top_own.remove(&Self::top_key(bits, len)).is_none() {
                return;
            }
            self.count -= 1;
            let fb = (0..len)
                .rev()
                .find_map(|l| self.top_own.get(&Self::top_key(bits & mask128(l as u8), l)).map(|&nh| pack(nh, l + 1)))
                .unwrap_or(0);
            let span = 1usize << (TOP_BITS - len);
            for i in t..t + span {
                if depth(self.top_val[i]) == d {
                    self.top_val[i] = fb;
                    if self.top_child[i] != NO_CHILD {
                        self.replace(self.top_child[i], d, fb);
                    }
                    self.mark_top(i);
                }
            }
            return;
        }
        let mut n = self.top_child[t];
        if n == NO_CHILD {
            return;
        }
        let mut inherited = self.top_val[t];
        let mut path: Vec<(u32, u32)> = Vec::with_capacity(8);
        loop {
            let node = &self.snodes[n as usize];
            let off = node.off;
            let c = chunk128(bits, off);
            if len <= off + STRIDE {
                let rl = len - off;
                let oi = own_index(rl, c);
                let node = &mut self.snodes[n as usize];
                let Ok(p) = node.own.binary_search_by_key(&oi, |x| x.0) else { return };
                node.own.remove(p);
                self.count -= 1;
                // The longest own prefix of this node covering the removed
                // one, else what the node inherits.
                let fb = (1..rl)
                    .rev()
                    .find_map(|r| {
                        let oi = own_index(r, c);
                        node.own.binary_search_by_key(&oi, |x| x.0).ok().map(|p| pack(node.own[p].1, off + r + 1))
                    })
                    .unwrap_or(inherited);
                let span = 1u32 << (STRIDE - rl);
                node.dirty = true;
                let mut kids = Vec::new();
                for s in c..c + span {
                    if depth(node.slot[s as usize]) == d {
                        node.slot[s as usize] = fb;
                        if let Some(k) = node.kid(s) {
                            kids.push(k);
                        }
                    }
                }
                for k in kids {
                    self.replace(k, d, fb);
                }
                break;
            }
            let Some(k) = node.kid(c) else { return };
            inherited = node.slot[c as usize];
            path.push((n, c));
            n = k;
        }
        self.mark_top(t);
        for (p, _) in &path {
            self.snodes[*p as usize].dirty = true;
        }
        // Drop nodes left without own prefixes and children, bottom-up.
        let mut child = n;
        loop {
            let node = &self.snodes[child as usize];
            if !(node.own.is_empty() && node.vector == 0) {
                break;
            }
            self.free_node(child);
            match path.pop() {
                Some((p, c)) => {
                    let pn = &mut self.snodes[p as usize];
                    let rank = (pn.vector & upto(c)).count_ones() as usize - 1;
                    pn.kids.remove(rank);
                    pn.vector &= !(1 << c);
                    child = p;
                }
                None => {
                    self.top_child[t] = NO_CHILD;
                    break;
                }
            }
        }
    }

    /// Frees a shadow node; the reader blocks it owned go to limbo at the
    /// next commit (its own copy lives in its parent's child block, which
    /// the parent replaces).
    fn free_node(&mut self, n: u32) {
        let node = &self.snodes[n as usize];
        if node.leaves_cnt > 0 {
            self.garbage.push(Garbage::Leaves { v6: self.v6, base: node.leaves_blk, count: node.leaves_cnt });
        }
        if node.kids_cnt > 0 {
            self.garbage.push(Garbage::Nodes { v6: self.v6, base: node.kids_blk, count: node.kids_cnt });
        }
        self.sfree.push(n);
    }

    /// Gives back a block a grace period has covered.
    pub(crate) fn reuse(&mut self, g: Garbage) {
        match g {
            Garbage::Nodes { base, count, .. } => self.nodes.release(base, count),
            Garbage::Leaves { base, count, .. } => self.leaves.release(base, count),
        }
    }

    /// Upper bounds of the (nodes, leaves) the commit of a subtree may
    /// allocate.
    fn need(&self, n: u32) -> (u64, u64) {
        let node = &self.snodes[n as usize];
        if !node.dirty {
            return (0, 0);
        }
        let mut r = (node.kids.len() as u64, u64::from(64 - node.vector.count_ones()));
        for &k in &node.kids {
            let (a, b) = self.need(k);
            r = (r.0 + a, r.1 + b);
        }
        r
    }

    /// Publishes every change since the last commit, one `top` entry at a
    /// time. An entry whose blocks do not fit stays unpublished (readers
    /// keep its previous, consistent state) and is retried next time.
    pub(crate) fn commit(&mut self, a: &TrieArrays, garbage: &mut Vec<Garbage>) -> Result<(), FibError> {
        garbage.append(&mut self.garbage);
        let dirty = std::mem::take(&mut self.dirty_top);
        let mut result = Ok(());
        let mut retry = Vec::new();
        for t in dirty {
            let t = t as usize;
            if let Some(w) = self.dirty_bits.get_mut(t / 64) {
                *w &= !(1 << (t % 64));
            }
            let old = a.top_entry(t);
            let root = self.top_child[t];
            if root == NO_CHILD {
                let new = nh_of(self.top_val[t]);
                if old != new {
                    a.set_top(t, new);
                    if old & NODE_FLAG != 0 {
                        garbage.push(Garbage::Nodes { v6: self.v6, base: old & !NODE_FLAG, count: 1 });
                    }
                }
                continue;
            }
            let (nn, nl) = self.need(root);
            if nn + 1 > u64::from(self.nodes.room()) || nl > u64::from(self.leaves.room()) {
                retry.push(t);
                result = Err(FibError::Full(if self.v6 { "IPv6 trie" } else { "IPv4 trie" }));
                continue;
            }
            let pe = self.snodes[root as usize].pub_enc;
            let new = self.encode(root, a, garbage);
            if old & NODE_FLAG != 0 && pe != [0; 3] && pe[0] == new[0] && pe[1] == new[1] {
                if pe[2] != new[2] {
                    a.set_word(old & !NODE_FLAG, 2, new[2], Ordering::Release);
                }
            } else if let Some(b) = self.nodes.alloc(1) {
                a.write_node(b, new);
                a.set_top(t, NODE_FLAG | b);
                if old & NODE_FLAG != 0 {
                    garbage.push(Garbage::Nodes { v6: self.v6, base: old & !NODE_FLAG, count: 1 });
                }
            }
            self.snodes[root as usize].pub_enc = new;
        }
        for t in retry {
            self.mark_top(t);
        }
        result
    }

    /// Writes the blocks of a dirty node (children first) and returns its
    /// new encoding; the caller publishes it.
    fn encode(&mut self, n: u32, a: &TrieArrays, garbage: &mut Vec<Garbage>) -> [u64; 3] {
        let ni = n as usize;
        if !self.snodes[ni].dirty {
            return self.snodes[ni].pub_enc;
        }
        self.snodes[ni].dirty = false;
        let kids = std::mem::take(&mut self.snodes[ni].kids);
        let mut encs: Vec<([u64; 3], [u64; 3])> = Vec::with_capacity(kids.len());
        let node = &self.snodes[ni];
        let mut fresh = node.kids_cnt as usize != kids.len() || node.pub_enc[0] != node.vector;
        for &k in &kids {
            let old = self.snodes[k as usize].pub_enc;
            let new = self.encode(k, a, garbage);
            fresh |= old == [0; 3] || old[0] != new[0] || old[1] != new[1];
            encs.push((old, new));
        }
        let (kblk, kcnt) = (self.snodes[ni].kids_blk, self.snodes[ni].kids_cnt);
        let base1 = if kids.is_empty() {
            if kcnt > 0 {
                garbage.push(Garbage::Nodes { v6: self.v6, base: kblk, count: kcnt });
            }
            self.snodes[ni].kids_cnt = 0;
            self.snodes[ni].kids_blk = 0;
            0
        } else if fresh {
            // Checked by `need` before the commit started.
            let b = self.nodes.alloc(kids.len() as u32).unwrap_or(u32::MAX);
            for (r, (_, new)) in encs.iter().enumerate() {
                a.write_node(b.wrapping_add(r as u32), *new);
            }
            if kcnt > 0 {
                garbage.push(Garbage::Nodes { v6: self.v6, base: kblk, count: kcnt });
            }
            self.snodes[ni].kids_blk = b;
            self.snodes[ni].kids_cnt = kids.len() as u32;
            b
        } else {
            // Same children, same shapes: each changed child is switched
            // to its new blocks with one store.
            for (r, (old, new)) in encs.iter().enumerate() {
                if old[2] != new[2] {
                    a.set_word(kblk + r as u32, 2, new[2], Ordering::Release);
                }
            }
            kblk
        };
        for (&k, (_, new)) in kids.iter().zip(&encs) {
            self.snodes[k as usize].pub_enc = *new;
        }
        self.snodes[ni].kids = kids;
        // Leaves: one per run of equal values among the non-node children.
        let node = &self.snodes[ni];
        let mut values = std::mem::take(&mut self.scratch);
        values.clear();
        let mut leafvec = 0u64;
        let mut prev = None;
        for c in 0..64u32 {
            if (node.vector >> c) & 1 != 0 {
                continue;
            }
            let v = nh_of(node.slot[c as usize]);
            if prev != Some(v) {
                leafvec |= 1 << c;
                values.push(v);
                prev = Some(v);
            }
        }
        let (lblk, lcnt) = (node.leaves_blk, node.leaves_cnt);
        let same = lcnt as usize == values.len()
            && node.pub_enc[1] == leafvec
            && values.iter().enumerate().all(|(i, &v)| a.leaf(lblk + i as u32) == v);
        let base0 = if same {
            lblk
        } else if values.is_empty() {
            if lcnt > 0 {
                garbage.push(Garbage::Leaves { v6: self.v6, base: lblk, count: lcnt });
            }
            self.snodes[ni].leaves_blk = 0;
            self.snodes[ni].leaves_cnt = 0;
            0
        } else {
            let b = self.leaves.alloc(values.len() as u32).unwrap_or(u32::MAX);
            for (i, &v) in values.iter().enumerate() {
                a.set_leaf(b.wrapping_add(i as u32), v);
            }
            if lcnt > 0 {
                garbage.push(Garbage::Leaves { v6: self.v6, base: lblk, count: lcnt });
            }
            self.snodes[ni].leaves_blk = b;
            self.snodes[ni].leaves_cnt = values.len() as u32;
            b
        };
        self.scratch = values;
        let node = &self.snodes[ni];
        [node.vector, leafvec, u64::from(base0) | (u64::from(base1) << 32)]
    }
}
