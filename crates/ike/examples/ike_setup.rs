//! IKE SA setup rate and memory, in memory: an initiator engine and a
//! responder engine pass each other's datagrams (X25519, PSK,
//! aes128gcm16-prfsha256 for IKE, aes128gcm16 for ESP). The responder's
//! calls are timed apart from the initiator's (thread CPU time), so "setups/s" is what one
//! responder core does; the heap is counted by a global allocator and the
//! initiator dropped before the responder's live bytes are read.
//!
//! `cargo run --release -p tern-ike --example ike_setup -- [N] [batch] [psk|ecdsa|rsa|ed25519] [dh-reuse]`
//! (N IKE SAs, default 100000; `batch` IKE SAs in flight at once, default
//! 1000; `ecdsa` (or `pubkey`): certificates, ECDSA P-256, from
//! tests/certs, instead of the pre-shared key; `rsa`: RSA-2048 (PKCS#1
//! v1.5), `ed25519`: Ed25519, each below an intermediate; one certificate
//! for every client; `dh-reuse`: the responder reuses its DH value for
//! up to 1000 setups or 10 s, `Settings::dh_reuse`).
//!
//! Measured 2026-12-07 on the 2-vCPU AMD EPYC development VM (shared with
//! other builds; thread CPU time, so waiting for a CPU does not count),
//! `ike_setup 1000000`: 12,781 / 11,907 / 11,871 / 11,798 / 11,946
//! setups/s over 0-10k / 10k-40k / 40k-100k / 100k-400k / 400k-1M SAs
//! (84 us of responder CPU each, about 70 % of the whole in X25519);
//! 1,344 bytes of heap per established responder SA with its child SA
//! (3,074 for both engines while the IKE_AUTH answers are cached; 1,263
//! and 2,902 at 100k SAs once the codec encoded into one buffer);
//! `ike_setup 10000 1000 ecdsa`: 6,229 setups/s (one certificate for every
//! client, so its chain check is cached: the AUTH signature and its check
//! remain).
//!
//! Later the same day, X25519 from aws-lc-rs (33 us a key pair and shared
//! secret, ring's 60), `ike_setup 20000`: 18,312 setups/s (54.6 us), and
//! 21,678 (46.1 us) with `dh-reuse`; medians of 3. Of the 55 us, 33 are
//! X25519 (perf); the rest is SHA-256 (PSK AUTH over both IKE_SA_INIT
//! messages, SKEYSEED, prf+), malloc/free and copies, AES-GCM.
//!
//! After the SA's lists lost their spare capacity and its keys became boxed
//! slices (2026-12-07, same machine, loaded): 976 bytes per established
//! responder SA at 1M (967 at 100K), 2,338 for both engines while the
//! answers are cached; IkeSa 528 bytes, IkeKeys 152; 11,461 setups/s.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};
use tern_alloc_count::{live, rss_bytes as rss};
use tern_ike::Ike;
use tern_ike::config::{AuthConfig, Identity, PeerConfig, Settings};
use tern_ike::output::Output;
use tern_ike::proposal::{Proposal, Protocol};
use zeroize::Zeroizing;

#[global_allocator]
static GLOBAL: tern_alloc_count::Counting = tern_alloc_count::Counting;

/// This thread's CPU time (the first field of schedstat: ns on a CPU), so
/// time the thread waited for a CPU shared with other work is not counted.
fn cpu() -> Duration {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    Duration::from_nanos(s.split_whitespace().next().and_then(|x| x.parse().ok()).unwrap_or(0))
}

/// A certificate of tests/certs (the file as sent, its key, the identity
/// it names).
type Cert = (&'static str, &'static str, &'static str);

fn peer(
    name: &str,
    local: &str,
    remote: Option<&str>,
    id: &str,
    remote_id: Option<&str>,
    cert: Option<Cert>,
) -> PeerConfig {
    let auth = if let Some((pem, key, _)) = cert {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/certs");
        let c = tern_ike::auth::Credentials::load(&dir.join(pem), &dir.join(key), &[dir.join("ca.pem")])
            .expect("a certificate of tests/certs");
        AuthConfig::Pubkey(std::sync::Arc::new(c))
    } else {
        AuthConfig::Psk(Zeroizing::new(b"a pre-shared key of some length".to_vec()))
    };
    PeerConfig {
        remote: remote.map(|r| r.parse().unwrap()),
        local_id: Identity::Fqdn(id.into()),
        remote_id: remote_id.map(|r| Identity::Fqdn(r.into())),
        auth,
        proposals: vec![Proposal::parse("aes128gcm16-prfsha256-x25519", Protocol::Ike).unwrap()],
        esp_proposals: vec![Proposal::parse("aes128gcm16", Protocol::Esp).unwrap()],
        ..PeerConfig::with_psk(name, local.parse().unwrap(), b"")
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let batch: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000).max(1);
    let (cert, auth): (Option<Cert>, &str) = match args.next().as_deref() {
        Some("ecdsa" | "pubkey") => (Some(("moon.pem", "moon.key", "moon.tern.test")), "ECDSA P-256 certificates"),
        Some("rsa") => (Some(("venus-chain.pem", "venus.key", "venus.tern.test")), "RSA-2048 certificates"),
        Some("ed25519") => (Some(("pluto-chain.pem", "pluto.key", "pluto.tern.test")), "Ed25519 certificates"),
        _ => (None, "PSK"),
    };
    let dh_reuse = args.next().as_deref() == Some("dh-reuse");
    let id = cert.map_or("client.example", |c| c.2);
    let gw_id = cert.map_or("gw.example", |c| c.2);
    let now = Instant::now();
    // Inside the test certificates' validity (as tests/pubkey.rs).
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let settings = Settings {
        cookie_threshold: usize::MAX,
        max_half_open: usize::MAX,
        max_half_open_per_peer: usize::MAX,
        ..Settings::default()
    };
    let mut i = Ike::new(settings.clone());
    i.set_peers(now, vec![peer("gw", "10.0.0.1", Some("10.0.0.2"), id, None, cert)]);
    let mut r = Ike::new(if dh_reuse {
        Settings { dh_reuse: Duration::from_secs(10), dh_reuse_uses: 1000, ..settings }
    } else {
        settings
    });
    // A template: every client is one more IKE SA of it.
    r.set_peers(now, vec![peer("clients", "10.0.0.2", None, gw_id, None, cert)]);
    // Warm up (lazy statics, the first allocations of every table).
    i.initiate(now, "gw").unwrap();
    let (mut w1, mut w2) = (Duration::ZERO, Duration::ZERO);
    shuttle(&mut i, &mut r, now, wall, &mut w1, &mut w2);
    let base = live();
    let base_rss = rss();

    let mut r_time = Duration::ZERO;
    let mut i_time = Duration::ZERO;
    let mut done = 0usize;
    let mut marks = vec![10_000usize, 40_000, 100_000, 400_000, 1_000_000];
    marks.retain(|&m| m <= n);
    let mut last = (0usize, Duration::ZERO);
    let reuse = if dh_reuse { ", the responder's DH value reused (10 s, 1000 uses)" } else { "" };
    println!("IKE SA setups, x25519 + {auth} + aes128gcm16-prfsha256, responder CPU only, batches of {batch}{reuse}");
    while done < n {
        let k = batch.min(n - done);
        let t = cpu();
        for _ in 0..k {
            i.initiate(now, "gw").unwrap();
        }
        i_time += cpu() - t;
        shuttle(&mut i, &mut r, now, wall, &mut r_time, &mut i_time);
        done += k;
        if marks.first().is_some_and(|&m| done >= m) {
            marks.remove(0);
            let (d0, t0) = last;
            let rate = (done - d0) as f64 / (r_time - t0).as_secs_f64();
            println!("  {done:>8} SAs: {rate:>9.0} setups/s (since {d0})");
            last = (done, r_time);
        }
    }
    let st = r.stats();
    assert_eq!(st.ike_sas as usize, n + 1, "every SA up: {st:?}");
    assert_eq!(st.child_sas as usize, n + 1);
    println!(
        "responder: {n} setups in {:.3} s of its CPU: {:.0} setups/s ({:.1} us each); initiator {:.3} s",
        r_time.as_secs_f64(),
        n as f64 / r_time.as_secs_f64(),
        r_time.as_secs_f64() * 1e6 / n as f64,
        i_time.as_secs_f64()
    );
    let just_up = live();
    // Cached responses go once the peer's retransmissions would be over.
    let later = now + Duration::from_secs(120);
    r.poll(later);
    i.poll(later);
    let with_both = live();
    let both_rss = rss();
    drop(i);
    let responder_only = live();
    println!(
        "heap just after setup, both engines: {:.0} bytes per SA (the IKE_AUTH answers still cached)",
        (just_up - base) as f64 / n as f64
    );
    println!(
        "heap: responder {:.0} bytes per established IKE SA (with its child SA); initiator {:.0}",
        (responder_only - base) as f64 / n as f64,
        (with_both - responder_only) as f64 / n as f64,
    );
    println!(
        "RSS: {:.0} bytes per SA for both engines together (the peak, with the cached answers; malloc overhead included)",
        both_rss.saturating_sub(base_rss) as f64 / n as f64
    );
    println!(
        "sizes: IkeSa {} bytes, Child {} bytes, IkeKeys {} bytes, SkCipher {} bytes",
        std::mem::size_of::<tern_ike::sa::IkeSa>(),
        std::mem::size_of::<tern_ike::sa::Child>(),
        std::mem::size_of::<tern_ike::crypto::IkeKeys>(),
        std::mem::size_of::<tern_ike::crypto::SkCipher>(),
    );
}

/// Carries datagrams between the two until both are quiet, timing each
/// side's calls apart.
fn shuttle(i: &mut Ike, r: &mut Ike, now: Instant, wall: SystemTime, r_time: &mut Duration, i_time: &mut Duration) {
    loop {
        let to_r: Vec<(SocketAddr, SocketAddr, Vec<u8>)> = i
            .drain()
            .filter_map(|o| match o {
                Output::Send { local, remote, data } => Some((local, remote, data)),
                _ => None,
            })
            .collect();
        if to_r.is_empty() {
            return;
        }
        let t = cpu();
        let to_i = responder_turn(r, now, wall, &to_r);
        *r_time += cpu() - t;
        let t = cpu();
        for (src, dst, data) in &to_i {
            i.handle(now, wall, *dst, *src, data);
        }
        *i_time += cpu() - t;
    }
}

/// The responder's share of a turn: what it is given, and its answers.
/// Not inlined, so a profiler can count it apart from the initiator
/// (`valgrind --tool=callgrind --toggle-collect='*responder_turn*'`).
#[inline(never)]
fn responder_turn(
    r: &mut Ike,
    now: Instant,
    wall: SystemTime,
    to_r: &[(SocketAddr, SocketAddr, Vec<u8>)],
) -> Vec<(SocketAddr, SocketAddr, Vec<u8>)> {
    for (src, dst, data) in to_r {
        r.handle(now, wall, *dst, *src, data);
    }
    r.drain()
        .filter_map(|o| match o {
            Output::Send { local, remote, data } => Some((local, remote, data)),
            _ => None,
        })
        .collect()
}
