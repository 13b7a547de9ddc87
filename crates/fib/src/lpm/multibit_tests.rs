//! The multibit trie against the naive reference: random tables, interleaved
//! inserts and deletes, both families, with commits at random points.

use proptest::prelude::*;

use super::multibit::{Entry, Entry32, Key, MultibitArrays, MultibitWriter};
use super::naive::NaiveLpm;
use super::{V4Entry, V6Entry};
use crate::prefix::mask128;
use crate::reclaim::Garbage;
use crate::types::{FibError, NhId};

struct Harness<E: Entry, const T: u32, const S: u32> {
    a: MultibitArrays<E, T, S>,
    w: MultibitWriter<E, T, S>,
    naive: NaiveLpm,
    v6: bool,
    /// Next hops of covering prefixes the writer asked for.
    asked: usize,
}

type H = Harness<Entry32, 18, 6>;
/// IPv6's shape before 2026-11-23 (16/8, `u32` entries).
type H8 = Harness<Entry32, 16, 8>;
/// IPv4's shape and entries (used for IPv6 keys too).
type H24 = Harness<V4Entry, 24, 8>;
/// IPv6's shape and entries (children from 2^13).
type H6 = Harness<V6Entry, 24, 8>;

impl<E: Entry, const T: u32, const S: u32> Harness<E, T, S> {
    fn new(v6: bool) -> Self {
        let a = MultibitArrays::new(1 << 14);
        let w = MultibitWriter::new(v6, &a);
        Harness { a, w, naive: NaiveLpm::new(), v6, asked: 0 }
    }

    fn width(&self) -> u8 {
        if self.v6 { 128 } else { 32 }
    }

    fn set(&mut self, bits: u128, len: u8, nh: NhId) {
        let bits = bits & mask128(len);
        self.w.set(&self.a, bits, len, nh).expect("room");
        self.naive.insert(bits, len, nh);
    }

    fn remove(&mut self, bits: u128, len: u8) {
        let bits = bits & mask128(len);
        self.naive.remove(bits, len);
        let naive = &self.naive;
        let mut asked = 0;
        self.w.remove(&self.a, bits, len, |b, l| {
            asked += 1;
            naive.get(b, l)
        });
        self.asked += asked;
    }

    /// Commits and recycles garbage at once (no reader is registered).
    fn commit(&mut self) {
        let mut g: Vec<Garbage> = Vec::new();
        self.w.commit(&mut g);
        for x in g {
            self.w.reuse(x);
        }
        // Every block in use is in the directory, and nothing else.
        assert_eq!(self.w.dir_len(), self.w.nodes_in_use() as usize);
    }

    fn lookup(&self, key: u128) -> NhId {
        if self.v6 { self.a.lookup(key) } else { self.a.lookup((key >> 64) as u64) }
    }

    fn check(&self, key: u128) {
        let key = key & mask128(self.width());
        let want = self.naive.lookup(key);
        let got = self.lookup(key);
        assert_eq!(got, want, "key {key:#034x}");
        let mut out = [0; 3];
        if self.v6 {
            self.a.lookup_batch(&[key, key, key], &mut out);
        } else {
            let k = (key >> 64) as u64;
            self.a.lookup_batch(&[k, k, k], &mut out);
        }
        assert_eq!(out, [want; 3]);
    }

    /// Checks the edges and some inside points of every prefix given.
    fn check_around(&self, prefixes: &[(u128, u8)], rng: &mut u64) {
        for &(bits, len) in prefixes {
            let bits = bits & mask128(len);
            let host = !mask128(len) & mask128(self.width());
            self.check(bits);
            self.check(bits | host);
            self.check(bits.wrapping_sub(1u128 << (128 - u32::from(self.width()))));
            self.check((bits | host).wrapping_add(1u128 << (128 - u32::from(self.width()))));
            self.check(bits | (u128::from(next(rng)) << 64 | u128::from(next(rng))) & host);
        }
    }
}

impl<E: Entry, const T: u32, const S: u32> Harness<E, T, S> {
    /// Batched lookups of keys at every depth (inside, at and next to the
    /// prefixes, plus random ones), in batches of odd sizes that span
    /// several groups, through every batched path (the dispatching one,
    /// the level-synchronous walk with groups of 16, 64 and 256, the plain
    /// loop): each result equals the reference.
    fn check_batch(&self, prefixes: &[(u128, u8)], rng: &mut u64) {
        let width = u32::from(self.width());
        let mut keys: Vec<u128> = Vec::new();
        for &(bits, len) in prefixes {
            let host = !mask128(len) & mask128(self.width());
            keys.push(bits | (u128::from(next(rng)) << 64 | u128::from(next(rng))) & host);
            keys.push(bits.wrapping_sub(1u128 << (128 - width)) & mask128(self.width()));
            keys.push(u128::from(next(rng)) << 64 & mask128(self.width()));
            keys.push(bits | host);
        }
        for size in [1usize, 3, 4, 5, 16, 63, 64, 65, 200, 255, 256, 257, 700, keys.len().max(1)] {
            for chunk in keys.chunks(size) {
                let want: Vec<NhId> = chunk.iter().map(|&k| self.naive.lookup(k)).collect();
                if self.v6 {
                    self.check_paths(chunk, &want, size);
                } else {
                    let k: Vec<u64> = chunk.iter().map(|&k| (k >> 64) as u64).collect();
                    self.check_paths(&k, &want, size);
                }
            }
        }
        // A result slice shorter than the keys bounds the work; an empty
        // batch does nothing.
        if let Some(first) = keys.first() {
            let k = [*first; 70];
            let mut got = [u32::MAX; 66];
            if self.v6 {
                self.a.lookup_batch(&k, &mut got);
            } else {
                self.a.lookup_batch(&k.map(|k| (k >> 64) as u64), &mut got);
            }
            assert!(got.iter().all(|&g| g == self.naive.lookup(*first)));
        }
        self.a.lookup_batch::<u128>(&[], &mut []);
        self.a.lookup_batch::<u64>(&[], &mut [0; 4]);
    }

    fn check_paths<K: Key>(&self, keys: &[K], want: &[NhId], size: usize) {
        type Path<'a, K> = (&'static str, &'a dyn Fn(&[K], &mut [NhId]));
        let paths: [Path<'_, K>; 6] = [
            ("dispatch", &|k, o| self.a.lookup_batch(k, o)),
            ("ahead", &|k, o| self.a.lookup_batch_ahead(k, |k| k, o)),
            ("levels/16", &|k, o| self.a.lookup_batch_levels::<K, 16>(k, o)),
            ("levels/64", &|k, o| self.a.lookup_batch_levels::<K, 64>(k, o)),
            ("levels/256", &|k, o| self.a.lookup_batch_levels::<K, 256>(k, o)),
            ("plain", &|k, o| self.a.lookup_batch_plain(k, o)),
        ];
        for (name, f) in paths {
            let mut got = vec![u32::MAX; keys.len()];
            f(keys, &mut got);
            assert_eq!(got, want, "{name}, batch of {size} (shape {T}/{S})");
        }
    }
}

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Prefixes clustered in a few regions so they nest deeply.
fn random_prefix(rng: &mut u64, v6: bool) -> (u128, u8) {
    let r = next(rng);
    let base: u128 = match r % 4 {
        0 => 0x0a00_0000_0000_0000_0000_0000_0000_0000,
        1 => 0x2001_0db8_0000_0000_0000_0000_0000_0000,
        2 => 0xc0a8_0100_0000_0000_0000_0000_0000_0000,
        _ => u128::from(next(rng)) << 64 | u128::from(next(rng)),
    };
    let width = if v6 { 128 } else { 32 };
    let len = match (r >> 8) % 8 {
        0 => (r >> 16) as u8 % 19,
        1..=4 => 16 + (r >> 16) as u8 % 10,
        _ => (r >> 16) as u8 % (width + 1),
    };
    // Debug builds skip the shortest prefixes: with a 24-bit direct index
    // each one rewrites millions of entries, which takes seconds unoptimised
    // (`default_route_and_host_routes` still covers /0 and /1, and release
    // builds cover every length).
    let len = len.max(if cfg!(debug_assertions) { 9 } else { 0 }).min(width);
    let noise = (u128::from(next(rng)) << 64 | u128::from(next(rng))) >> ((r >> 24) % 40 + 8);
    ((base ^ noise) & mask128(len), len)
}

fn random_table<E: Entry, const T: u32, const S: u32>(v6: bool, seed: u64, n: usize, commit_every: usize) {
    let mut rng = seed | 1;
    let mut h = Harness::<E, T, S>::new(v6);
    let mut ps = Vec::new();
    for i in 0..n {
        let (b, l) = random_prefix(&mut rng, v6);
        h.set(b, l, (next(&mut rng) % 1000) as NhId + 1);
        ps.push((b, l));
        if i % commit_every == 0 {
            h.commit();
            h.check_around(&ps[ps.len().saturating_sub(commit_every)..], &mut rng);
        }
    }
    h.commit();
    h.check_around(&ps, &mut rng);
    for _ in 0..20_000 {
        let k = u128::from(next(&mut rng)) << 64 | u128::from(next(&mut rng));
        h.check(k);
    }
    h.check_batch(&ps, &mut rng);
    // Delete half, check, delete the rest: everything is recycled.
    for (i, &(b, l)) in ps.iter().enumerate() {
        if i % 2 == 0 {
            h.remove(b, l);
        }
    }
    h.commit();
    h.check_around(&ps, &mut rng);
    h.check_batch(&ps, &mut rng);
    for &(b, l) in &ps {
        h.remove(b, l);
    }
    h.commit();
    h.check_around(&ps, &mut rng);
    // The empty table: every batched path says "no route".
    h.check_batch(&ps, &mut rng);
    assert_eq!(h.w.len(), 0);
    assert_eq!(h.w.nodes_in_use(), 0, "every block back on the free list");
}

#[test]
fn random_v4_tables_match_the_reference() {
    for seed in 1..if cfg!(debug_assertions) { 2 } else { 6 } {
        random_table::<Entry32, 18, 6>(false, seed * 7919, 3000, 97);
        random_table::<V4Entry, 24, 8>(false, seed * 7919, 3000, 97);
    }
}

#[test]
fn random_v6_tables_match_the_reference() {
    for seed in 1..if cfg!(debug_assertions) { 2 } else { 6 } {
        random_table::<Entry32, 18, 6>(true, seed * 104_729, 3000, 89);
        random_table::<Entry32, 16, 8>(true, seed * 104_729, 3000, 89);
        random_table::<V6Entry, 24, 8>(true, seed * 104_729, 3000, 89);
    }
}

#[test]
fn default_route_and_host_routes() {
    for v6 in [false, true] {
        let mut h = H::new(v6);
        let w = h.width();
        h.set(0, 0, 1);
        h.commit();
        h.check(0);
        h.check(u128::MAX);
        h.set(u128::MAX, w, 2);
        h.set(0, w, 3);
        h.set(1u128 << 127, 1, 4);
        h.commit();
        for k in [0, 1u128 << 96, u128::MAX, u128::MAX << 1, 1u128 << 127, (1u128 << 127) - 1] {
            h.check(k);
        }
        h.remove(0, 0);
        h.commit();
        for k in [0, 1u128 << 100, u128::MAX, 1u128 << 127] {
            h.check(k);
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Set(usize, NhId),
    Del(usize),
    Commit,
}

fn ops() -> impl Strategy<Value = (bool, u64, Vec<Op>)> {
    let op = prop_oneof![
        4 => (0usize..40, 1u32..6).prop_map(|(i, nh)| Op::Set(i, nh)),
        3 => (0usize..40).prop_map(Op::Del),
        1 => Just(Op::Commit),
    ];
    (any::<bool>(), any::<u64>(), proptest::collection::vec(op, 1..120))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(debug_assertions) { 64 } else { 256 }, ..ProptestConfig::default() })]

    /// A small pool of overlapping prefixes, set and removed in any order;
    /// after every operation both trie shapes answer like the reference.
    #[test]
    fn interleaved_updates_match_the_reference((v6, seed, ops) in ops()) {
        let mut rng = seed | 1;
        let pool: Vec<(u128, u8)> = (0..40).map(|_| random_prefix(&mut rng, v6)).collect();
        let mut h = H::new(v6);
        let mut h8 = H8::new(v6);
        let mut h24 = H24::new(v6);
        let mut h6 = H6::new(v6);
        for op in ops {
            match op {
                Op::Set(i, nh) => {
                    h.set(pool[i].0, pool[i].1, nh);
                    h8.set(pool[i].0, pool[i].1, nh);
                    h24.set(pool[i].0, pool[i].1, nh);
                    h6.set(pool[i].0, pool[i].1, nh);
                }
                Op::Del(i) => {
                    h.remove(pool[i].0, pool[i].1);
                    h8.remove(pool[i].0, pool[i].1);
                    h24.remove(pool[i].0, pool[i].1);
                    h6.remove(pool[i].0, pool[i].1);
                }
                Op::Commit => {
                    h.commit();
                    h8.commit();
                    h24.commit();
                    h6.commit();
                }
            }
            // Updates are visible at once, no commit needed.
            h.check_around(&pool, &mut rng);
            h8.check_around(&pool, &mut rng);
            h24.check_around(&pool, &mut rng);
            h6.check_around(&pool, &mut rng);
        }
        h.commit();
        h.check_around(&pool, &mut rng);
        h8.check_around(&pool, &mut rng);
    }
}

/// IPv6 prefixes of every length 0..=128 nested under one another, looked
/// up one by one and in batches, then removed in a scrambled order.
#[test]
fn v6_every_length_single_and_batched() {
    let mut rng = 0x5eed_u64;
    let mut h = H8::new(true);
    let base = u128::from(next(&mut rng)) << 64 | u128::from(next(&mut rng));
    let ps: Vec<(u128, u8)> = (0..=128u8).map(|l| (base & mask128(l), l)).collect();
    for (i, &(b, l)) in ps.iter().enumerate() {
        h.set(b, l, i as NhId + 1);
    }
    h.commit();
    h.check_around(&ps, &mut rng);
    h.check_batch(&ps, &mut rng);
    let mut order: Vec<usize> = (0..ps.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, (next(&mut rng) % (i as u64 + 1)) as usize);
    }
    for (n, &i) in order.iter().enumerate() {
        h.remove(ps[i].0, ps[i].1);
        if n % 16 == 0 {
            h.commit();
            h.check_around(&ps, &mut rng);
            h.check_batch(&ps, &mut rng);
        }
    }
    h.commit();
    h.check_batch(&ps, &mut rng);
    assert_eq!(h.w.nodes_in_use(), 0);
}

/// tern's own shapes (24/8 for IPv4, 16/8 for IPv6), every batched path:
/// the empty table, the default route, host routes at both ends of the
/// address space, a /1, and deletes between batches.
#[test]
fn edges_batched_on_tern_shapes() {
    fn run<E: Entry, const T: u32, const S: u32>(v6: bool) {
        let mut rng = 0xed9e_u64;
        let mut h = Harness::<E, T, S>::new(v6);
        let w = h.width();
        let ps: Vec<(u128, u8)> = vec![(0, 0), (mask128(w), w), (0, w), (1u128 << 127, 1), (0x2001_0db8u128 << 96, 32)];
        h.check_batch(&ps, &mut rng);
        h.set(0, 0, 1);
        h.check_batch(&ps, &mut rng);
        for (i, &(b, l)) in ps.iter().enumerate().skip(1) {
            h.set(b, l, i as NhId + 1);
            h.check_batch(&ps, &mut rng);
        }
        for &(b, l) in &ps {
            h.remove(b, l);
            h.commit();
            h.check_batch(&ps, &mut rng);
        }
        assert_eq!(h.w.nodes_in_use(), 0);
    }
    run::<V4Entry, 24, 8>(false);
    run::<Entry32, 16, 8>(true);
    run::<V6Entry, 24, 8>(true);
}

/// A removal finds the next hop of the prefix that takes over in the
/// trie's own entries next to the removed prefix (top level and inside a
/// block) and asks the caller only when none of them is a leaf it set;
/// the result is the reference's either way.
#[test]
fn removal_takes_the_covering_next_hop_from_the_trie() {
    // Sets the four prefixes, removes the second and the fourth (each
    // under the one before it): the trie answers, the caller is not asked.
    fn remove_under_covers<E: Entry, const T: u32, const S: u32>(mut h: Harness<E, T, S>, ps: [(u128, u8); 4]) {
        for (i, &(b, l)) in ps.iter().enumerate() {
            h.set(b, l, i as NhId + 1);
        }
        h.remove(ps[1].0, ps[1].1);
        h.remove(ps[3].0, ps[3].1);
        assert_eq!(h.asked, 0);
        h.check_around(&ps, &mut 1);
    }
    // IPv4 shape 24/8: a /16 over a /24 (top level), a /26 over a /30 (in
    // a block).
    remove_under_covers(
        H24::new(false),
        [(0x0a01_0000u128 << 96, 16), (0x0a01_0500 << 96, 24), (0x0a01_0640 << 96, 26), (0x0a01_0650 << 96, 30)],
    );
    // IPv6 shape 16/8: a /8 over a /16, a /20 over a /24.
    remove_under_covers(
        H8::new(true),
        [(0x2000u128 << 120, 8), (0x2001 << 112, 16), (0x2001_0000 << 96, 20), (0x2001_0b00 << 96, 24)],
    );
    // IPv6 shape 24/8 (u16 entries, children from 2^13): a /16 over a
    // /24 (top level), a /36 over a /40 (in a block).
    remove_under_covers(
        H6::new(true),
        [(0x2001u128 << 112, 16), (0x2001_0d00 << 96, 24), (0x2001_0db8_3000 << 80, 36), (0x2001_0db8_3100 << 80, 40)],
    );
    // Every entry the covering /20 sets in the line of the removed /24
    // leads to a block: the caller is asked.
    let mut h = H24::new(false);
    let base = 0x0a01_0000u128 << 96;
    h.set(base, 20, 3);
    for i in 0..16u128 {
        h.set(base | (i << 104) | (1 << 96), 32, 4);
    }
    h.set(base | (5 << 104), 24, 5);
    h.remove(base | (5 << 104), 24);
    assert_eq!(h.asked, 1);
    h.check_around(&[(base, 20), (base | (5 << 104), 24), (base | (6 << 104) | (1 << 96), 32)], &mut 1);
    // The line of the removed /24 is all longer prefixes but its own: the
    // caller is asked.
    let mut h = H24::new(false);
    h.set(base, 20, 3);
    for i in 0..16u128 {
        h.set(base | (i << 104), 24, 10 + i as NhId);
    }
    h.remove(base | (5 << 104), 24);
    assert_eq!(h.asked, 1);
    h.check_around(&[(base, 20), (base | (5 << 104), 24), (base | (6 << 104), 24)], &mut 1);
}

/// Changes of a short prefix rewrite the blocks under it eight slots at a
/// time where the eight share a depth: runs of leaves, runs holding a
/// child block, runs split between prefixes, and runs of a longer prefix
/// (skipped) each end up as the reference says, through sets, next-hop
/// changes and removals of the covering prefixes in either order.
#[test]
fn rewrites_of_runs_under_a_short_prefix() {
    let mut h = H8::new(true);
    let top = 0x2001_0db8u128 << 96;
    // Under the /32 block (off 32): a /40 with a child block (a /48 in
    // slot 3), a /37 covering slots 8..16, a /36 over slots 16..32 with a
    // /38 inside it, and single /40s at slots 33 and 37 (runs split).
    let inner = [
        (top | 3 << 88 | 5 << 80, 48),
        (top | 8 << 88, 37),
        (top | 16 << 88, 36),
        (top | 20 << 88, 38),
        (top | 33 << 88, 40),
        (top | 37 << 88, 40),
        (top | 200 << 88 | 7 << 80, 56),
    ];
    for (i, &(b, l)) in inner.iter().enumerate() {
        h.set(b, l, 100 + i as NhId);
    }
    let mut all: Vec<(u128, u8)> = inner.to_vec();
    all.extend([(top, 32), (top, 24), (top & mask128(16), 16)]);
    let mut rng = 7;
    let mut check = |h: &H8| {
        for s in 0..256u128 {
            h.check(top | s << 88);
            h.check(top | s << 88 | 5 << 80);
            h.check(top | s << 88 | 7 << 80 | 0xff);
        }
        h.check_around(&all, &mut rng);
    };
    for (cover, len) in [(top, 32u8), (top, 24), (top & mask128(16), 16)] {
        h.set(cover, len, 1);
        check(&h);
        h.set(cover, len, 2);
        check(&h);
    }
    h.remove(top, 24);
    check(&h);
    h.remove(top, 32);
    check(&h);
    h.set(top, 32, 3);
    h.remove(top & mask128(16), 16);
    check(&h);
    h.remove(top | 16 << 88, 36);
    h.remove(top, 32);
    check(&h);
}

/// 16-bit entries: a next-hop id of 2^15 or more is refused before anything
/// changes, and block numbers stop at 2^15.
#[test]
fn u16_entries_refuse_wide_next_hops_and_cap_blocks() {
    let mut h = H24::new(false);
    h.set(10u128 << 120, 8, 5);
    h.set(10u128 << 120 | 1u128 << 100, 28, 6);
    let (a, w) = (&h.a, &mut h.w);
    let before = w.len();
    for (bits, len) in [(10u128 << 120 | 1u128 << 110, 16), (10u128 << 120 | 1u128 << 100, 28), (11u128 << 120, 30)] {
        assert_eq!(w.set(a, bits, len, 1 << 15), Err(FibError::Full("IPv4 next-hop id space (15 bits)")));
    }
    assert_eq!(w.set(a, 12u128 << 120, 8, (1 << 15) - 1), Ok(()), "the largest id that fits");
    assert_eq!(w.len(), before + 1);
    h.naive.insert(12u128 << 120, 8, (1 << 15) - 1);
    h.commit();
    let mut rng = 9;
    h.check_around(
        &[(10u128 << 120, 8), (10u128 << 120 | 1u128 << 100, 28), (11u128 << 120, 30), (12u128 << 120, 8)],
        &mut rng,
    );
    assert_eq!(MultibitArrays::<V4Entry, 24, 8>::new(1 << 16).node_capacity(), 1 << 15);
    assert_eq!(MultibitArrays::<Entry32, 16, 8>::new(1 << 16).node_capacity(), 1 << 16);
}

/// IPv6's 16-bit entries point to blocks from 2^13 up: a next-hop id of
/// 2^13 or more is refused before anything changes, block numbers go past
/// 2^15 (the full table needs ~38,100 blocks: a flag bit would allow
/// 32,768) up to 57,344, and lookups through blocks numbered above 2^15
/// (entries with the top bit set) find the reference's next hops.
#[test]
fn ipv6_entries_point_to_blocks_past_2_15() {
    assert_eq!(MultibitArrays::<V6Entry, 24, 8>::new(1 << 18).node_capacity(), (1 << 16) - (1 << 13));
    let a = MultibitArrays::<V6Entry, 24, 8>::new(1 << 18);
    let mut h = H6 { w: MultibitWriter::new(true, &a), a, naive: NaiveLpm::new(), v6: true, asked: 0 };
    let (a, w) = (&h.a, &mut h.w);
    for (bits, len) in [(0x2001u128 << 112, 16), (0x2001_0db8u128 << 96, 32), (0x2001_0db8_0100u128 << 80, 40)] {
        assert_eq!(w.set(a, bits, len, 1 << 13), Err(FibError::Full("IPv6 next-hop id space (13 bits)")));
    }
    assert_eq!((w.len(), w.nodes_in_use()), (0, 0), "nothing changed");
    // 17,000 /40s, each in a /24 of its own: a block at bit 24 and one at
    // bit 32 for each, 34,000 blocks.
    let n = 17_000u128;
    let ps: Vec<(u128, u8)> = (0..n).map(|i| ((0x2000_0000 + (i << 8) + 0x12) << 96 | 0x34u128 << 88, 40)).collect();
    for (i, &(b, l)) in ps.iter().enumerate() {
        h.set(b, l, (i as NhId % ((1 << 13) - 1)) + 1);
    }
    assert_eq!(h.w.nodes_in_use(), 34_000);
    h.set(0x2000u128 << 112, 16, (1 << 13) - 1);
    let mut rng = 17;
    h.check_around(&ps[ps.len() - 200..], &mut rng);
    h.check_batch(&ps[ps.len() - 50..], &mut rng);
    for &(b, l) in ps.iter().rev().take(1000) {
        h.remove(b, l);
    }
    h.commit();
    assert_eq!(h.w.nodes_in_use(), 32_000);
    h.check_around(&ps[ps.len() - 1100..], &mut rng);
}
