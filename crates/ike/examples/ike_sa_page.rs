//! What a page of `tern ike sa show` costs one engine thread, against the
//! whole list it cost before (every SA gathered, then cut): a responder
//! engine holds N half-open IKE SAs (one IKE_SA_INIT replayed from N
//! spoofed sources, the responder reusing its DH value so that building
//! the table is quick), then, in this thread's CPU time (schedstat),
//! medians of 5 runs:
//! - `ike_sas()`: the whole list, by id (what each page cost before);
//! - `ike_sa_page(after the middle id, 100)`, repeated 1000 times;
//! - the same with a filter that matches every SA (by peer);
//! - `ike_sa_summary()`: counts by state and peer, kept as SAs change,
//!   repeated a million times; and `ike_sa_summary_by_walk()`, the walk it
//!   replaced (both must agree);
//!
//! and the heap the id index costs per SA (a B-tree of N entries built
//! apart, counted by the global allocator).
//!
//! `cargo run --release -p tern-ike --example ike_sa_page -- [N]` (default
//! 200000).
//!
//! Measured 2026-12-07 on the 2-vCPU development VM (loaded by other
//! builds), 200,000 SAs: the whole list 230.6 ms, a page of 100 after the
//! middle id 42.0 us (5,500 times less), filtered by peer 41.3 us, the
//! summary 79.5 ms; the id index 18.2 bytes of heap per SA
//! (docs/perf/results/ike/sa-page-stop52.txt). With the summary's counts
//! kept as SAs change: 41 ns, against 76 ms for the walk
//! (sa-page-stop53.txt).

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime};
use tern_alloc_count::live;
use tern_ike::config::{Identity, PeerConfig, Settings};
use tern_ike::proposal::{Proposal, Protocol};
use tern_ike::{Ike, Output, SaFilter};

#[global_allocator]
static GLOBAL: tern_alloc_count::Counting = tern_alloc_count::Counting;

/// This thread's CPU time (schedstat's first field, ns on a CPU).
fn cpu() -> Duration {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    Duration::from_nanos(s.split_whitespace().next().and_then(|x| x.parse().ok()).unwrap_or(0))
}

fn peer(name: &str, local: &str, remote: Option<&str>) -> PeerConfig {
    PeerConfig {
        remote: remote.map(|r| r.parse().unwrap()),
        local_id: Identity::Fqdn(format!("{name}.example")),
        proposals: vec![Proposal::parse("aes128gcm16-prfsha256-x25519", Protocol::Ike).unwrap()],
        esp_proposals: vec![Proposal::parse("aes128gcm16", Protocol::Esp).unwrap()],
        ..PeerConfig::with_psk(name, local.parse().unwrap(), b"0123456789abcdef")
    }
}

/// The median CPU time of `runs` runs of `f`, divided by `per`.
fn median(runs: usize, per: u32, mut f: impl FnMut()) -> Duration {
    let mut v: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = cpu();
            f();
            (cpu() - t) / per
        })
        .collect();
    v.sort();
    v[runs / 2]
}

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let now = Instant::now();
    let wall = SystemTime::now();
    let settings = Settings {
        cookie_threshold: usize::MAX,
        max_half_open: usize::MAX,
        max_half_open_per_peer: usize::MAX,
        half_open_timeout: Duration::from_secs(3600),
        dh_reuse: Duration::from_secs(3600),
        dh_reuse_uses: u32::MAX,
        ..Settings::default()
    };
    let mut r = Ike::new(settings);
    r.set_peers(now, vec![peer("any", "10.0.0.2", None)]);
    let mut i = Ike::new(Settings::default());
    i.set_peers(now, vec![peer("hq", "10.0.0.1", Some("10.0.0.2"))]);
    i.initiate(now, "hq").unwrap();
    let (to, init) = i
        .drain()
        .find_map(|o| match o {
            Output::Send { remote, data, .. } => Some((remote, data)),
            _ => None,
        })
        .expect("an IKE_SA_INIT");
    for k in 0..n {
        let from = SocketAddr::new(IpAddr::V4((0x0a01_0000u32 + k).into()), 500);
        r.handle(now, wall, to, from, &init);
        r.drain().for_each(drop);
    }
    let all = r.ike_sas();
    assert_eq!(all.len(), n as usize, "one half-open SA per source");
    let mid = all[all.len() / 2].id;
    drop(all);
    let list = median(5, 1, || {
        std::hint::black_box(r.ike_sas());
    });
    let any = SaFilter::default();
    let page = median(5, 1000, || {
        for _ in 0..1000 {
            std::hint::black_box(r.ike_sa_page(Some(mid), 100, &any));
        }
    });
    let by_peer = SaFilter { peer: Some("any".into()), ..SaFilter::default() };
    let filtered = median(5, 1000, || {
        for _ in 0..1000 {
            std::hint::black_box(r.ike_sa_page(Some(mid), 100, &by_peer));
        }
    });
    assert_eq!(r.ike_sa_summary(), r.ike_sa_summary_by_walk(), "kept counts and a walk agree");
    let summary = median(5, 1_000_000, || {
        for _ in 0..1_000_000 {
            std::hint::black_box(r.ike_sa_summary());
        }
    });
    let walk = median(5, 1, || {
        std::hint::black_box(r.ike_sa_summary_by_walk());
    });
    let base = live();
    let index: std::collections::BTreeMap<u64, u64> = (0..u64::from(n)).map(|k| (k + 1, k * 7919)).collect();
    let per_sa = (live() - base) as f64 / f64::from(n);
    drop(index);
    println!("{n} IKE SAs in one engine, its thread's CPU time, medians of 5:");
    println!("  whole list (each page before):     {:>10.3} ms", list.as_secs_f64() * 1e3);
    println!("  a page of 100 after the middle id: {:>10.3} us", page.as_secs_f64() * 1e6);
    println!("  the same, filtered by peer:        {:>10.3} us", filtered.as_secs_f64() * 1e6);
    println!("  summary by state and peer, kept:   {:>10.3} us", summary.as_secs_f64() * 1e6);
    // (schedstat's CPU time moves at scheduling events: a million calls
    // make the window long enough to read.)
    println!("  the same by a walk of the SAs:     {:>10.3} ms", walk.as_secs_f64() * 1e3);
    println!("  id index: {per_sa:.1} bytes of heap per SA");
}
