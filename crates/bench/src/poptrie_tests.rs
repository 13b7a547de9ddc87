//! The trie against the naive reference: random tables, interleaved
//! inserts and deletes, both families, with commits at random points.

use proptest::prelude::*;

use crate::poptrie::{Garbage, TrieArrays, TrieWriter, mask128};
use tern_fib::{NaiveLpm, NhId};

struct Harness {
    a: TrieArrays,
    w: TrieWriter,
    naive: NaiveLpm,
    v6: bool,
}

impl Harness {
    fn new(v6: bool) -> Harness {
        let a = TrieArrays::new(1 << 16, 1 << 20);
        let w = TrieWriter::new(v6, &a);
        Harness { a, w, naive: NaiveLpm::new(), v6 }
    }

    fn width(&self) -> u8 {
        if self.v6 { 128 } else { 32 }
    }

    fn set(&mut self, bits: u128, len: u8, nh: NhId) {
        let bits = bits & mask128(len);
        self.w.set(bits, len, nh);
        self.naive.insert(bits, len, nh);
    }

    fn remove(&mut self, bits: u128, len: u8) {
        let bits = bits & mask128(len);
        self.w.remove(bits, len);
        self.naive.remove(bits, len);
    }

    /// Commits and recycles garbage at once (no reader is registered).
    fn commit(&mut self) {
        let mut g: Vec<Garbage> = Vec::new();
        self.w.commit(&self.a, &mut g).expect("capacity");
        for x in g {
            self.w.reuse(x);
        }
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
    let noise = (u128::from(next(rng)) << 64 | u128::from(next(rng))) >> ((r >> 24) % 40 + 8);
    ((base ^ noise) & mask128(len), len.min(width))
}

fn random_table(v6: bool, seed: u64, n: usize, commit_every: usize) {
    let mut rng = seed | 1;
    let mut h = Harness::new(v6);
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
    // Delete half, check, delete the rest: everything is recycled.
    for (i, &(b, l)) in ps.iter().enumerate() {
        if i % 2 == 0 {
            h.remove(b, l);
        }
    }
    h.commit();
    h.check_around(&ps, &mut rng);
    for &(b, l) in &ps {
        h.remove(b, l);
    }
    h.commit();
    h.check_around(&ps, &mut rng);
    assert_eq!(h.w.len(), 0);
    assert_eq!(h.w.usage(), (0, 0), "all nodes and leaves back on the free lists");
}

#[test]
fn random_v4_tables_match_the_reference() {
    for seed in 1..if cfg!(debug_assertions) { 2 } else { 6 } {
        random_table(false, seed * 7919, 3000, 97);
    }
}

#[test]
fn random_v6_tables_match_the_reference() {
    for seed in 1..if cfg!(debug_assertions) { 2 } else { 6 } {
        random_table(true, seed * 104_729, 3000, 89);
    }
}

#[test]
fn default_route_and_host_routes() {
    for v6 in [false, true] {
        let mut h = Harness::new(v6);
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
    #![proptest_config(ProptestConfig { cases: if cfg!(debug_assertions) { 32 } else { 200 }, ..ProptestConfig::default() })]

    /// A small pool of overlapping prefixes, set and removed in any order;
    /// after every commit the trie answers like the reference.
    #[test]
    fn interleaved_updates_match_the_reference((v6, seed, ops) in ops()) {
        let mut rng = seed | 1;
        let pool: Vec<(u128, u8)> = (0..40).map(|_| random_prefix(&mut rng, v6)).collect();
        let mut h = Harness::new(v6);
        for op in ops {
            match op {
                Op::Set(i, nh) => h.set(pool[i].0, pool[i].1, nh),
                Op::Del(i) => h.remove(pool[i].0, pool[i].1),
                Op::Commit => {
                    h.commit();
                    h.check_around(&pool, &mut rng);
                }
            }
        }
        h.commit();
        h.check_around(&pool, &mut rng);
    }
}
