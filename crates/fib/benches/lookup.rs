//! Criterion benchmark of the lookups on the real table (or, without it, on
//! a random table of the same size): `cargo bench -p tern-fib --bench lookup`.
//! `tern-bench fib` (crates/bench) gives the full report with the
//! references; this one tracks lookup regressions, and what the daemon's
//! periodic `FibWriter::stats()` costs with the table loaded (counters,
//! no walk of the RIB: `cargo bench -p tern-fib --bench lookup stats`).

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tern_fib::{FibConfig, FibReader, FibWriter, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn prefixes(rng: &mut Rng) -> Vec<Prefix> {
    let path = std::env::var_os("TERN_FULL_TABLE").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/full-table-2025.txt.gz")
    });
    if let Ok(r) = tern_fib::routefile::load(&path) {
        return r.into_iter().map(|(p, _)| p).collect();
    }
    eprintln!("{} not found: a random table instead", path.display());
    let mut v: Vec<Prefix> = (0..900_000)
        .filter_map(|_| {
            let x = rng.next();
            Prefix::new_truncated(IpAddr::V4(Ipv4Addr::from(x as u32)), 16 + (x >> 32) as u8 % 9)
        })
        .collect();
    v.extend((0..160_000).filter_map(|_| {
        let x = rng.next();
        let a = (0x2000u128 << 112) | (u128::from(x) << 60);
        Prefix::new_truncated(IpAddr::V6(Ipv6Addr::from(a)), 29 + (x >> 40) as u8 % 20)
    }));
    v
}

fn load(ps: &[Prefix]) -> (FibWriter, FibReader) {
    let (mut w, r) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
    w.apply(ps.iter().enumerate().map(|(i, p)| {
        let gw = if p.is_v4() {
            IpAddr::V4(Ipv4Addr::new(100, 64, 0, (i % 16) as u8 + 1))
        } else {
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, (i % 16) as u16 + 1))
        };
        RouteOp::Add(Source::Fpm, *p, RouteTarget::Via { gw, ifindex: Some(1) }, RouteAttrs::default())
    }));
    (w, r)
}

/// Addresses inside random table prefixes.
fn covered(ps: &[Prefix], v6: bool, n: usize, rng: &mut Rng) -> Vec<u128> {
    let fam: Vec<&Prefix> = ps.iter().filter(|p| p.is_v6() == v6).collect();
    (0..n)
        .map(|_| {
            let p = fam[(rng.next() % fam.len() as u64) as usize];
            let (base, width) = match p.addr() {
                IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
                IpAddr::V6(a) => (u128::from(a), 128),
            };
            let host = if p.len() >= width { 0 } else { u128::MAX >> (128 - u32::from(width - p.len())) };
            base | ((u128::from(rng.next()) << 64 | u128::from(rng.next())) & host)
        })
        .collect()
}

fn lookups(c: &mut Criterion) {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let ps = prefixes(&mut rng);
    let (_w, r) = load(&ps);
    let k4: Vec<u32> = covered(&ps, false, 1 << 16, &mut rng).into_iter().map(|k| k as u32).collect();
    let k6 = covered(&ps, true, 1 << 16, &mut rng);
    let mut g = c.benchmark_group("fib");
    g.throughput(Throughput::Elements(k4.len() as u64));
    g.bench_function("v4_single", |b| {
        b.iter(|| k4.iter().fold(0u32, |a, &k| a.wrapping_add(r.lookup_v4(black_box(k)))))
    });
    g.bench_function("v4_batch64", |b| {
        let mut out = [0u32; 64];
        b.iter(|| {
            for c in k4.chunks(64) {
                r.lookup_v4_batch(black_box(c), &mut out);
            }
            out[0]
        })
    });
    g.throughput(Throughput::Elements(k6.len() as u64));
    g.bench_function("v6_single", |b| {
        b.iter(|| k6.iter().fold(0u32, |a, &k| a.wrapping_add(r.lookup_v6(black_box(k)))))
    });
    g.bench_function("v6_batch64", |b| {
        let mut out = [0u32; 64];
        b.iter(|| {
            for c in k6.chunks(64) {
                r.lookup_v6_batch(black_box(c), &mut out);
            }
            out[0]
        })
    });
    g.finish();
}

fn stats(c: &mut Criterion) {
    let mut rng = Rng(0x0bad_cafe_f00d_d00d);
    let ps = prefixes(&mut rng);
    let (w, _r) = load(&ps);
    c.bench_function("stats, table loaded", |b| b.iter(|| black_box(w.stats())));
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = lookups, stats
}
criterion_main!(benches);
