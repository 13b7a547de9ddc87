//! Installing many SAs, and what each costs in memory: `SaDb::add_batch` +
//! `publish` in batches of PER_PUBLISH (default: all at once), SAs per
//! second; then the heap (counted by a global allocator: the bytes asked
//! of malloc, not its overhead) per SA idle (never a packet), with its
//! database entries (the owner's indexes and the published table), and
//! after every SA encrypted one packet (outbound state and keys built) and
//! decrypted it (inbound state too); RSS beside it (malloc's overhead
//! included). Finally a sample of the SAs looked up through the published
//! table and used.
//!
//!     cargo run --release -p tern-ipsec --example sa_scale [-- COUNT [PER_PUBLISH [WORKERS [nospare]]]]
//!
//! Measured 2026-12-07 (1,000,000 SAs, 2 workers' slots, AES-128-GCM):
//! 259 bytes per idle SA with its database entries (152 the struct, 20 its
//! key bytes, 71 the indexes, 16 Arc's counts), against 1,383 before the
//! SA's state was made by use (832 the struct with GCM's expanded key
//! inline, 256 counter slots and replay window, 279 two copies of the
//! indexes); +668 once it encrypted (expanded key ~540, counter slots
//! 128), +176 once it received (replay window of 1024). CBC + HMAC-SHA1:
//! 275 idle, +1,948 once expanded.
//!
//! The spare base (2026-12-07, same VM under a load of ~25 from other
//! builds; a fast release build: no LTO, 16 codegen units),
//! `sa_scale 500000 4 2` against `sa_scale 500000 4 2 nospare` (the base
//! rebuilt at sqrt(2 n b) changes, as before): publish 1.58 s against
//! 46.57 s for 500,000 AES-GCM SAs published 4 at a time (CBC: 0.85 s
//! against 48.35 s), 5.3 s of user CPU in all against 39.7 s; idle, 339 B
//! per SA with the spare held (indexes 143 B, twice 72) and 268 B without
//! (the struct is 160 B now: lifetimes in seconds inline, 8 B more for
//! every SA, 112 B of heap less for IKE's, which all have them).
//!
//! 2026-12-07, later (`sa_scale 1000000 4 2`, a debug build: the bytes
//! asked do not depend on the profile): 291 B per idle SA with the spare
//! held, the struct 112 B, 48 less than before (keys, counter slots and replay
//! window behind one `OnceLock` pointer, the install time in 8 bytes), so
//! 128 with the `Arc`'s counts, a mimalloc size class, where 160 + 16 was
//! rounded to 192; the key bytes 20, the indexes 143 (two copies of 72).

use std::time::Instant;
use tern_ipsec::*;

#[global_allocator]
static GLOBAL: tern_alloc_count::Counting = tern_alloc_count::Counting;

use tern_alloc_count::{live, rss_bytes};

fn config(i: u32, cipher: Cipher, integ: Integ) -> SaConfig {
    SaConfig {
        id: i + 1,
        spi: 0x1000 + i,
        cipher,
        integ,
        key: Key::new((0..cipher.key_len()).map(|k| (i as usize + k) as u8).collect()),
        integ_key: Key::new(vec![(i % 251) as u8; integ.key_len()]),
        esn: true,
        replay_window: 1024,
        udp_encap: None,
        soft: Lifetime::default(),
        hard: Lifetime::default(),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let per: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(count as usize).max(1);
    let workers: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(2).max(1);
    // `nospare`: the spare base dropped after every publication, so the
    // delta is folded by rebuilding the base (the way before the spare).
    let nospare = args.next().as_deref() == Some("nospare");
    let n = f64::from(count);
    println!(
        "{count} SAs, {per} per publish, {workers} workers' counter slots{}; heap per SA (bytes asked of malloc)",
        if nospare { ", no spare base (rebuilds)" } else { "" }
    );
    for (cipher, integ) in [(Cipher::Aes128Gcm, Integ::None), (Cipher::Aes128Cbc, Integ::HmacSha1_96)] {
        // The SAs alone, outside a database.
        let l0 = live();
        let now = Instant::now();
        let alone: Vec<Sa> =
            (0..count.min(100_000)).map(|i| Sa::new(config(i, cipher, integ), workers, now).expect("sa")).collect();
        let sa_alone = (live() - l0) as f64 / alone.len() as f64 - std::mem::size_of::<Sa>() as f64;
        drop(alone);

        let mut db = SaDb::with_workers(workers);
        let reader = db.reader();
        let heap0 = live();
        let cfgs: Vec<SaConfig> = (0..count).map(|i| config(i, cipher, integ)).collect();
        let before = rss_bytes();
        let t = Instant::now();
        let mut added = std::time::Duration::ZERO;
        let mut it = cfgs.into_iter().peekable();
        while it.peek().is_some() {
            let batch: Vec<SaConfig> = it.by_ref().take(per).collect();
            let a = Instant::now();
            db.add_batch(batch).expect("add_batch");
            added += a.elapsed();
            db.publish();
            if nospare {
                db.drop_spare();
            }
        }
        drop(it);
        let total = t.elapsed();
        let after = rss_bytes();
        // What the database holds (the configurations are all freed).
        let idle = (live() - heap0) as f64 / n;
        let table = reader.load();
        assert_eq!(table.len(), count as usize);
        println!(
            "{cipher} {integ}: add_batch {:.2} s, + publish {:.2} s = {:.0} SAs/s",
            added.as_secs_f64(),
            (total - added).as_secs_f64(),
            n / total.as_secs_f64(),
        );
        println!(
            "  idle: {idle:.0} B per SA with its database entries (Sa struct {} B + its heap {:.0} B (alone, Arc's 16 B not counted) + indexes {:.0} B); RSS {:.0} B per SA",
            std::mem::size_of::<Sa>(),
            sa_alone,
            idle - sa_alone - std::mem::size_of::<Sa>() as f64 - 16.0,
            after.saturating_sub(before) as f64 / n,
        );
        // Every SA sends one packet: its outbound state and keys are built.
        let mut buf = vec![0u8; 256];
        let mut pkts = Vec::with_capacity(count as usize);
        let l = live();
        for id in 1..=count {
            let sa = table.get(id).expect("published");
            let r = sa.reserve_seq(1);
            let len = sa.encrypt(&mut buf, 100, NH_IPV4, r.first).expect("encrypt");
            sa.count(0, &SaCounters { packets: 1, bytes: 100, ..SaCounters::default() });
            if id % 1000 == 1 {
                pkts.push((id, buf[..len].to_vec()));
            }
        }
        let out_active = (live() - l) as f64 / n;
        // And receives one: its inbound state too (the same SA, as a test).
        let l = live();
        for id in 1..=count {
            let sa = table.get(id).expect("published");
            let seq = sa.replay_check(1).expect("fresh");
            sa.replay_update(seq).expect("update");
            sa.count(1, &SaCounters { packets: 1, bytes: 100, ..SaCounters::default() });
        }
        let in_active = (live() - l) as f64 / n;
        println!(
            "  active: +{out_active:.0} B per SA once it encrypted a packet (keys, counters), +{in_active:.0} B more once it received one (replay window, counters): {:.0} B; RSS {:.0} B per SA",
            idle + out_active + in_active,
            rss_bytes().saturating_sub(before) as f64 / n,
        );
        // A sample checked end to end: every 1000th SA decrypts its packet.
        let mut used = 0;
        for (id, mut p) in pkts {
            let sa = table.get(id).expect("published");
            assert_eq!(table.by_spi(sa.spi).len(), 1);
            let d = sa.decrypt(&mut p, 1).expect("decrypt");
            assert_eq!(d.inner.len(), 100);
            assert_eq!(sa.counters().packets, 2);
            used += 1;
        }
        println!("  {used} sampled SAs decrypt their packet");
    }
}
