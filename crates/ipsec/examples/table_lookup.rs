//! Lookups in the SA database's index shape at a million tunnels: 2M
//! SA ids in 256 `Table` shards (as `db.rs`: shard by the top byte of
//! id x 0x85ebca6b), looked up in batches of 32 (each key prefetched
//! first, then got, as `esp-decrypt` does), keys all present, then all
//! absent, in random order. Prints ns per lookup (median of 5 rounds) and the
//! shards' load.
//!
//!     cargo run --release -p tern-ipsec --example table_lookup [-- KEYS]
//!
//! Measured 2026-12-08 (loaded 2-vCPU VM), 2M keys: doubling (48 % full)
//! 31 ns present, 41 absent; growing by a quarter (73 %) 42 and 83; at
//! 1.5M keys (both about 70 % full) 44 / 81 against 41 / 70
//! (docs/perf/results/ike/table-lookup-stop54.txt).

use std::time::Instant;
use tern_ipsec::table::Table;

fn shard_of(key: u32) -> usize {
    usize::from((key.wrapping_mul(0x85eb_ca6b) >> 24) as u8)
}

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2_000_000);
    let base = 1u32 << 31;
    let mut shards: Vec<Table<u32, u64>> = (0..256).map(|_| Table::new()).collect();
    for id in base..base + n {
        if let Some(t) = shards.get_mut(shard_of(id)) {
            t.insert(id, u64::from(id));
        }
    }
    let slots: usize = shards.iter().map(Table::capacity).sum();
    println!("{n} keys, {slots} slots ({:.3} full)", f64::from(n) / slots as f64);
    for (what, absent) in [("present", false), ("absent", true)] {
        run(&shards, n, base, what, absent);
    }
}

fn run(shards: &[Table<u32, u64>], n: u32, base: u32, what: &str, absent: bool) {
    // Random keys: all present, or all absent (ids past the last).
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut keys: Vec<u32> = Vec::with_capacity(1 << 22);
    for _ in 0..1 << 22 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = (x % u64::from(n)) as u32;
        keys.push(base.wrapping_add(if absent { n.wrapping_add(k) } else { k }));
    }
    let mut rounds = Vec::new();
    let mut found = 0u64;
    for _ in 0..5 {
        let t0 = Instant::now();
        for batch in keys.chunks(32) {
            for k in batch {
                if let Some(t) = shards.get(shard_of(*k)) {
                    t.prefetch(k);
                }
            }
            for k in batch {
                if let Some(v) = shards.get(shard_of(*k)).and_then(|t| t.get(k)) {
                    found = found.wrapping_add(*v);
                }
            }
        }
        rounds.push(t0.elapsed().as_secs_f64() * 1e9 / keys.len() as f64);
    }
    rounds.sort_by(f64::total_cmp);
    println!("lookup, keys {what} (prefetched batches of 32): {:.1} ns median of 5 {rounds:.1?} [{found}]", rounds[2]);
}
