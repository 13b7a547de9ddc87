//! `Settings::dh_reuse`: the responder answers IKE_SA_INITs with one
//! Diffie-Hellman value for a bounded time and number of uses (RFC 7296
//! 2.12), and with a fresh one for every exchange when it is off.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};
use tern_ike::Ike;
use tern_ike::config::{Identity, PeerConfig, Settings};
use tern_ike::output::Output;
use tern_ike::proposal::{Proposal, Protocol};
use tern_ike::wire::{self, Message, Payload};

fn peer(name: &str, local: &str, remote: Option<&str>, id: &str) -> PeerConfig {
    PeerConfig {
        remote: remote.map(|r| r.parse().unwrap()),
        local_id: Identity::Fqdn(id.into()),
        proposals: vec![Proposal::parse("aes128gcm16-prfsha256-x25519", Protocol::Ike).unwrap()],
        esp_proposals: vec![Proposal::parse("aes128gcm16", Protocol::Esp).unwrap()],
        ..PeerConfig::with_psk(name, local.parse().unwrap(), b"a pre-shared key")
    }
}

fn sends(ike: &mut Ike) -> Vec<(SocketAddr, SocketAddr, Vec<u8>)> {
    ike.drain()
        .filter_map(|o| match o {
            Output::Send { local, remote, data } => Some((local, remote, data)),
            _ => None,
        })
        .collect()
}

/// A responder template and an initiator; `setup` runs one whole IKE SA
/// setup at `now` and returns the KE data of the responder's IKE_SA_INIT
/// answer.
struct Pair {
    i: Ike,
    r: Ike,
    wall: SystemTime,
}

impl Pair {
    fn new(settings: Settings, now: Instant) -> Pair {
        let mut i = Ike::new(Settings { max_half_open_per_peer: usize::MAX, ..Settings::default() });
        i.set_peers(now, vec![peer("gw", "10.0.0.1", Some("10.0.0.2"), "client.example")]);
        let mut r = Ike::new(settings);
        r.set_peers(now, vec![peer("any", "10.0.0.2", None, "gw.example")]);
        Pair { i, r, wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000) }
    }

    fn setup(&mut self, now: Instant) -> Vec<u8> {
        let before = self.r.stats().ike_sas;
        self.i.initiate(now, "gw").unwrap();
        let mut ke = None;
        loop {
            let to_r = sends(&mut self.i);
            if to_r.is_empty() {
                break;
            }
            for (src, dst, d) in &to_r {
                self.r.handle(now, self.wall, *dst, *src, d);
            }
            for (src, dst, d) in sends(&mut self.r) {
                let m = Message::decode(&d).unwrap();
                if m.header.exchange == wire::IKE_SA_INIT {
                    ke = m.payloads.iter().find_map(|p| match p {
                        Payload::Ke { data, .. } => Some(data.clone()),
                        _ => None,
                    });
                }
                self.i.handle(now, self.wall, dst, src, &d);
            }
        }
        assert_eq!(self.r.stats().ike_sas, before + 1, "the IKE SA is up: {:?}", self.r.stats());
        ke.expect("a KE payload in the IKE_SA_INIT answer")
    }
}

#[test]
fn off_by_default_a_fresh_value_every_time() {
    let now = Instant::now();
    let settings = Settings { max_half_open_per_peer: usize::MAX, ..Settings::default() };
    assert!(settings.dh_reuse.is_zero());
    let mut p = Pair::new(settings, now);
    let a = p.setup(now);
    let b = p.setup(now);
    assert_eq!(a.len(), 32);
    assert_ne!(a, b);
}

#[test]
fn reused_within_its_time_and_uses_then_replaced() {
    let t0 = Instant::now();
    let settings = Settings {
        max_half_open_per_peer: usize::MAX,
        dh_reuse: Duration::from_secs(10),
        dh_reuse_uses: 3,
        ..Settings::default()
    };
    let mut p = Pair::new(settings, t0);
    // Three uses of one value, the fourth setup gets another.
    let first = p.setup(t0);
    assert_eq!(p.setup(t0), first);
    assert_eq!(p.setup(t0 + Duration::from_secs(1)), first);
    let second = p.setup(t0 + Duration::from_secs(2));
    assert_ne!(second, first);
    // Its time is up at t0 + 12 s, uses left or not: a third value.
    let expiry = t0 + Duration::from_secs(12);
    p.r.poll(expiry);
    let third = p.setup(expiry);
    assert_ne!(third, second);
    assert_ne!(third, first);
    // It holds within its own 10 s.
    assert_eq!(p.setup(expiry + Duration::from_secs(9)), third);
}

#[test]
fn one_use_means_no_reuse() {
    let now = Instant::now();
    let settings = Settings {
        max_half_open_per_peer: usize::MAX,
        dh_reuse: Duration::from_secs(10),
        dh_reuse_uses: 1,
        ..Settings::default()
    };
    let mut p = Pair::new(settings, now);
    assert_ne!(p.setup(now), p.setup(now));
}
