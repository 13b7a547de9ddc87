//! What one change to the SA database costs with few or many SAs held:
//! the database is filled to each SIZE, then CHANGES more SAs are added
//! PER_PUBLISH at a time, each batch published and the published table
//! taken as a worker would (so the spare base comes free), with
//! `poll_events` called every 15,000 changes (an IKE daemon setting up
//! 7,500 tunnels a second adds 15,000 SAs a second, and the control side
//! polls once a second). The SAs are an IKE daemon's: a pair per tunnel,
//! soft and hard lifetimes in seconds. Per SIZE: the thread's CPU time
//! per change (its schedstat: other work shares the machine), the
//! slowest publication's after the first thousand changes (a hash
//! table's rehash shows there), and
//! `poll_events`' per call.
//!
//!     cargo run --release -p tern-ipsec --example sadb_churn [-- SIZES [PER_PUBLISH [CHANGES]]]
//!
//! SIZES is a comma-separated list (default 10000,1000000), PER_PUBLISH 4
//! (two tunnels), CHANGES 200000.

use std::time::{Duration, Instant};
use tern_ipsec::*;

fn config(i: u32) -> SaConfig {
    let cipher = Cipher::Aes128Gcm;
    SaConfig {
        id: i + 1,
        // Inbound SPIs are ours (spread), outbound ones the peers'.
        spi: i.wrapping_mul(0x9e37_79b1) | 0x100,
        cipher,
        integ: Integ::None,
        key: Key::new(vec![i as u8; cipher.key_len()]),
        integ_key: Key::new(Vec::new()),
        esn: true,
        replay_window: 1024,
        udp_encap: None,
        soft: Lifetime { secs: Some(3000 + u64::from(i % 300)), ..Lifetime::default() },
        hard: Lifetime { secs: Some(3600), ..Lifetime::default() },
    }
}

/// The calling thread's time on a CPU (the first field of its
/// schedstat, in nanoseconds); zero where the kernel has none.
fn thread_cpu() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse::<u64>().ok()))
        .map_or(Duration::ZERO, Duration::from_nanos)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let sizes: Vec<u32> = args
        .next()
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 1_000_000]);
    let per: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(4).max(1);
    let changes: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    println!("{changes} adds, {per} per publication, after SIZE SAs");
    println!("size\tcpu_ns_per_change\tmax_publish_cpu_us\tpoll_cpu_us_per_call\tpolls");
    for &size in &sizes {
        let mut db = SaDb::with_workers(2);
        let reader = db.reader();
        let mut next = 0u32;
        // The fill: large batches (not measured).
        while next < size {
            let n = (size - next).min(50_000);
            db.add_batch((next..next + n).map(config).collect()).expect("fill");
            db.publish();
            next += n;
        }
        let mut held = reader.load();
        let (mut cpu, mut max_publish, mut poll_cpu, mut polls) =
            (Duration::ZERO, Duration::ZERO, Duration::ZERO, 0u32);
        let end = next + changes;
        let mut since_poll = 0;
        while next < end {
            let n = (end - next).min(per);
            let t = thread_cpu();
            db.add_batch((next..next + n).map(config).collect()).expect("add");
            db.publish();
            // The worker moves to the new table (and lets go of the old).
            held = reader.load();
            let took = thread_cpu().saturating_sub(t);
            cpu += took;
            // Not the first publications: the fill's last batch is
            // folded into the spare there.
            if next >= size + 1000 {
                max_publish = max_publish.max(took);
            }
            next += n;
            since_poll += n;
            if since_poll >= 15_000 {
                since_poll = 0;
                let p = thread_cpu();
                let ev = db.poll_events(Instant::now());
                poll_cpu += thread_cpu().saturating_sub(p);
                polls += 1;
                assert!(ev.is_empty(), "no lifetime passes in this run");
            }
        }
        assert_eq!(held.len(), end as usize);
        assert!(held.get(end).is_some(), "the last SA published");
        println!(
            "{size}\t{:.0}\t{:.0}\t{:.0}\t{polls}",
            cpu.as_nanos() as f64 / f64::from(changes),
            max_publish.as_secs_f64() * 1e6,
            poll_cpu.as_secs_f64() * 1e6 / f64::from(polls.max(1)),
        );
    }
}
