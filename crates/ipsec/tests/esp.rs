//! ESP round trips, known answers, tampering and the SA database.

use std::time::{Duration, Instant};
use tern_ipsec::*;

fn key(n: usize, seed: u8) -> Key {
    Key::new((0..n).map(|i| seed.wrapping_add(i as u8).wrapping_mul(31)).collect())
}

fn cfg(id: u32, cipher: Cipher, integ: Integ, esn: bool) -> SaConfig {
    SaConfig {
        id,
        spi: 0x1000 + id,
        cipher,
        integ,
        key: key(cipher.key_len(), id as u8),
        integ_key: key(integ.key_len(), 0x55 ^ id as u8),
        esn,
        replay_window: 64,
        udp_encap: None,
        soft: Lifetime::default(),
        hard: Lifetime::default(),
    }
}

/// Every valid algorithm pair.
fn algs() -> Vec<(Cipher, Integ)> {
    let mut v = vec![(Cipher::Aes128Gcm, Integ::None), (Cipher::Aes256Gcm, Integ::None)];
    for c in [Cipher::Aes128Cbc, Cipher::Aes256Cbc] {
        for i in [Integ::HmacSha1_96, Integ::HmacSha256_128, Integ::HmacSha512_256] {
            v.push((c, i));
        }
    }
    v
}

/// Encrypts `inner` with `sa` at `seq` into a fresh buffer: the ESP bytes.
fn seal(sa: &Sa, inner: &[u8], nh: u8, seq: u64) -> Vec<u8> {
    let h = sa.header_len();
    let mut buf = vec![0u8; h + inner.len() + sa.trailer_len(inner.len())];
    buf[h..h + inner.len()].copy_from_slice(inner);
    let n = sa.encrypt(&mut buf, inner.len(), nh, seq).expect("encrypt");
    assert_eq!(n, buf.len());
    buf
}

#[test]
fn round_trip_every_algorithm_size_and_esn() {
    let now = Instant::now();
    for (c, i) in algs() {
        for esn in [false, true] {
            let tx = Sa::new(cfg(1, c, i, esn), 1, now).expect("sa");
            let rx = Sa::new(cfg(1, c, i, esn), 1, now).expect("sa");
            for len in [0usize, 1, 13, 14, 15, 16, 17, 40, 64, 1418, 1500] {
                let inner: Vec<u8> = (0..len).map(|x| x as u8 ^ 0xa5).collect();
                let seq = if esn { (7u64 << 32) + len as u64 + 1 } else { len as u64 + 1 };
                let mut esp = seal(&tx, &inner, NH_IPV4, seq);
                assert_eq!((esp.len() - 8 - c.iv_len() - tx.icv_len()) % c.align(), 0);
                if len > 0 {
                    assert_ne!(&esp[tx.header_len()..][..len], &inner[..], "{c} {i}: encrypted");
                }
                let (spi, lo) = parse_header(&esp).expect("header");
                assert_eq!((spi, lo), (0x1001, seq as u32));
                let d = rx.decrypt(&mut esp, seq).expect("decrypt");
                assert_eq!(d.next_header, NH_IPV4);
                assert_eq!(&esp[d.inner.clone()], &inner[..], "{c} {i} esn {esn} len {len}");
            }
        }
    }
}

#[test]
fn tampering_and_wrong_esn_high_bits_fail_integrity() {
    let now = Instant::now();
    for (c, i) in algs() {
        let sa = Sa::new(cfg(2, c, i, true), 1, now).expect("sa");
        let seq = (3u64 << 32) | 9;
        let good = seal(&sa, &[0x45; 60], NH_IPV4, seq);
        for at in [0, 4, 8, 20, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 1;
            assert_eq!(sa.decrypt(&mut bad, seq), Err(EspError::Integrity), "{c} {i} byte {at}");
        }
        // The high bits are authenticated though not sent.
        assert_eq!(sa.decrypt(&mut good.clone(), seq + (1 << 32)), Err(EspError::Integrity), "{c} {i}");
        for cut in [0, 1, 8, 20, good.len() - 1] {
            let mut t = good[..cut].to_vec();
            assert!(sa.decrypt(&mut t, seq).is_err(), "{c} {i} cut {cut}");
        }
    }
}

#[test]
fn sequence_numbers_stop_and_never_wrap() {
    let now = Instant::now();
    let sa = Sa::new(cfg(3, Cipher::Aes128Gcm, Integ::None, false), 2, now).expect("sa");
    assert_eq!(sa.reserve_seq(4), SeqRange { first: 1, count: 4, exhausted: true });
    sa.set_seq_out(u64::from(u32::MAX) - 2);
    let r = sa.reserve_seq(5);
    assert_eq!((r.first, r.count), (u64::from(u32::MAX) - 1, 2));
    assert_eq!(sa.state(), SaState::Expired);
    assert_eq!(sa.reserve_seq(1).count, 0);
    assert_eq!(sa.seq_out(), u64::from(u32::MAX));
    let esn = Sa::new(cfg(4, Cipher::Aes128Gcm, Integ::None, true), 2, now).expect("sa");
    esn.set_seq_out(u64::from(u32::MAX) - 1);
    assert_eq!(esn.reserve_seq(3).count, 3, "ESN goes past 2^32");
    esn.set_seq_out(u64::MAX - 1);
    assert_eq!(esn.reserve_seq(3).count, 1);
    assert_eq!(esn.state(), SaState::Expired);
}

#[test]
fn db_publish_events_and_counters() {
    let mut db = SaDb::with_workers(2);
    let reader = db.reader();
    let mut snap = reader.snapshot();
    let mut c = cfg(10, Cipher::Aes128Gcm, Integ::None, false);
    c.soft.packets = Some(5);
    c.hard.packets = Some(8);
    db.add(c.clone()).expect("add");
    assert_eq!(db.add(c.clone()), Err(SaError::Exists(10)));
    assert!(snap.current().get(10).is_none());
    db.publish();
    snap.refresh();
    let sa = snap.current().get(10).expect("published").clone();
    assert_eq!(snap.current().by_spi(0x100a).len(), 1);
    sa.count(0, &SaCounters { packets: 3, bytes: 300, ..Default::default() });
    sa.count(1, &SaCounters { packets: 3, bytes: 300, replay_drops: 1, ..Default::default() });
    let info = db.info(10).expect("info");
    assert_eq!((info.counters.packets, info.counters.bytes, info.counters.replay_drops), (6, 600, 1));
    let t0 = Instant::now();
    assert_eq!(db.poll_events(t0), vec![SaEvent { id: 10, kind: SaEventKind::SoftExpired(Reason::Packets) }]);
    assert_eq!(db.poll_events(t0), vec![], "each event once");
    assert_eq!(sa.state(), SaState::SoftExpired);
    // The outbound hard packet limit is exact: numbers 1..=8 only.
    assert_eq!(sa.reserve_seq(10).count, 8);
    assert!(!sa.usable());
    assert_eq!(db.poll_events(t0), vec![SaEvent { id: 10, kind: SaEventKind::HardExpired(Reason::Packets) }]);
    // Time lifetimes count from add.
    let mut t = cfg(11, Cipher::Aes128Cbc, Integ::HmacSha1_96, false);
    t.hard.secs = Some(30);
    t.soft.secs = Some(20);
    db.add(t).expect("add");
    assert_eq!(db.poll_events(Instant::now()), vec![]);
    let later = Instant::now() + Duration::from_secs(25);
    assert_eq!(db.poll_events(later), vec![SaEvent { id: 11, kind: SaEventKind::SoftExpired(Reason::Time) }]);
    let later = Instant::now() + Duration::from_secs(31);
    assert_eq!(db.poll_events(later), vec![SaEvent { id: 11, kind: SaEventKind::HardExpired(Reason::Time) }]);
    // All or nothing.
    let bad =
        vec![cfg(20, Cipher::Aes128Gcm, Integ::None, false), cfg(21, Cipher::Aes128Gcm, Integ::HmacSha1_96, false)];
    assert!(matches!(db.add_batch(bad), Err(SaError::InBatch { id: 21, .. })));
    assert!(db.info(20).is_none());
    let twice = vec![cfg(20, Cipher::Aes128Gcm, Integ::None, false), cfg(20, Cipher::Aes128Gcm, Integ::None, false)];
    assert_eq!(db.add_batch(twice), Err(SaError::DuplicateInBatch(20)));
    db.del(10).expect("del");
    assert_eq!(db.del(10), Err(SaError::NotFound(10)));
    assert!(snap.current().get(10).is_some(), "until published");
    db.publish();
    snap.refresh();
    assert!(snap.current().get(10).is_none());
    assert_eq!(db.list().iter().map(|i| i.id).collect::<Vec<_>>(), [11]);
}

mod fuzzish {
    use super::*;
    use proptest::prelude::*;

    fn sas() -> Vec<Sa> {
        algs()
            .into_iter()
            .enumerate()
            .map(|(k, (c, i))| Sa::new(cfg(40 + k as u32, c, i, k % 2 == 0), 1, Instant::now()).expect("sa"))
            .collect()
    }

    proptest! {
        /// Random bytes into decapsulation: an error, never a panic, and
        /// never a "decrypted" packet (the ICV cannot verify by chance).
        #[test]
        fn random_bytes_never_decrypt(bytes in prop::collection::vec(any::<u8>(), 0..300), seq in any::<u64>()) {
            for sa in sas() {
                let mut b = bytes.clone();
                let _ = parse_header(&b);
                prop_assert!(sa.decrypt(&mut b, seq).is_err());
                let _ = sa.replay_check(seq as u32);
            }
        }

        /// A valid packet with one byte changed or cut short anywhere:
        /// refused, never panics; the intact packet still decrypts.
        #[test]
        fn mutated_packets_are_refused(len in 0usize..200, at in any::<prop::sample::Index>(), x in 1u8..=255, cut in any::<prop::sample::Index>()) {
            for sa in sas() {
                let inner: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let good = seal(&sa, &inner, NH_IPV6, 77);
                let mut bad = good.clone();
                let i = at.index(bad.len());
                bad[i] ^= x;
                prop_assert!(sa.decrypt(&mut bad, 77).is_err());
                let mut short = good[..cut.index(good.len())].to_vec();
                prop_assert!(sa.decrypt(&mut short, 77).is_err());
                let mut ok = good.clone();
                let d = sa.decrypt(&mut ok, 77).expect("intact");
                prop_assert_eq!(&ok[d.inner], &inner[..]);
            }
        }
    }
}

/// The issue's configuration keys parse into `SaConfig` (crypto as an
/// alias of cipher, udp_encap as a flag or ports), keys never print, and
/// the API's JSON round-trips.
#[test]
fn config_parses_validates_and_redacts() {
    #[derive(serde::Deserialize)]
    struct File {
        ipsec_sa: Vec<SaConfig>,
    }
    let text = r#"
        [[ipsec_sa]]
        id = 10
        spi = 0x1001
        crypto = "aes-128-gcm"
        integ = "none"
        key = "0x000102030405060708090a0b0c0d0e0f10111213"
        esn = true
        replay_window = 1024
        udp_encap = true

        [[ipsec_sa]]
        id = 20
        spi = 0x2001
        crypto = "aes-256-cbc"
        integ = "hmac-sha256-128"
        key = "0x0001020304050607080910111213141516171819202122232425262728293031"
        integ_key = "0x0001020304050607080910111213141516171819202122232425262728293031"
        udp_encap = { src_port = 4501, dst_port = 4500 }
        hard = { packets = 1000, secs = 3600 }
        soft = { packets = 900 }
    "#;
    let f: File = toml::from_str(text).expect("parses");
    let [a, b] = &f.ipsec_sa[..] else { panic!("two SAs") };
    assert_eq!(
        (a.cipher, a.integ, a.esn, a.udp_encap),
        (Cipher::Aes128Gcm, Integ::None, true, Some(UdpEncap::default()))
    );
    assert_eq!(b.udp_encap, Some(UdpEncap { src_port: 4501, dst_port: 4500 }));
    assert_eq!(
        (b.hard.packets, b.hard.secs, b.soft.packets, b.replay_window),
        (Some(1000), Some(3600), Some(900), 1024)
    );
    a.validate().expect("valid");
    b.validate().expect("valid");
    let dbg = format!("{a:?}");
    assert!(dbg.contains("<redacted>") && !dbg.contains("0x0001") && !dbg.contains("[0, 1, 2"), "{dbg}");
    let json = serde_json::to_string(b).expect("json");
    let back: SaConfig = serde_json::from_str(&json).expect("back");
    assert_eq!(&back, b);
    // Names both ways, and the errors say what is wrong.
    for c in Cipher::ALL {
        assert_eq!(c.to_string().parse::<Cipher>(), Ok(c));
    }
    for i in Integ::ALL {
        assert_eq!(i.to_string().parse::<Integ>(), Ok(i));
    }
    assert_eq!("aes-128-ccm".parse::<Cipher>(), Err(SaError::UnknownCipher("aes-128-ccm".into())));
    assert!(toml::from_str::<File>(&text.replace("aes-256-cbc", "des")).is_err());
    assert!(Key::from_hex("0x123").is_err() && Key::from_hex("0xzz").is_err());
    let mut bad = a.clone();
    bad.integ = Integ::HmacSha1_96;
    assert!(matches!(bad.validate(), Err(SaError::AeadWithInteg { .. })));
    let mut bad = b.clone();
    bad.integ = Integ::None;
    assert_eq!(bad.validate(), Err(SaError::CbcWithoutInteg(Cipher::Aes256Cbc)));
    let mut bad = a.clone();
    bad.key = Key::new(vec![0; 16]);
    assert_eq!(bad.validate(), Err(SaError::KeyLength { what: "aes-128-gcm", expected: 20, got: 16 }));
    let mut bad = a.clone();
    bad.spi = 255;
    assert_eq!(bad.validate(), Err(SaError::ReservedSpi(255)));
    let mut bad = a.clone();
    bad.replay_window = MAX_REPLAY_WINDOW + 1;
    assert_eq!(bad.validate(), Err(SaError::ReplayWindow(MAX_REPLAY_WINDOW + 1)));
    let mut bad = b.clone();
    bad.soft.packets = Some(2000);
    assert_eq!(bad.validate(), Err(SaError::SoftAfterHard("packets")));
    println!("{}", SaError::KeyLength { what: "aes-128-gcm", expected: 20, got: 16 });
}

/// The published table (a shared base and a delta over it) answers as the
/// database's own maps do after any sequence of adds, removals and
/// publications, across base rebuilds, and SPIs shared by several SAs.
mod two_levels {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Op {
        /// Add a batch of SAs: (id, spi) pairs (ids taken modulo a small
        /// range so that removals and re-adds meet).
        Add(Vec<(u32, u32)>),
        Del(Vec<u32>),
        Publish,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => proptest::collection::vec((0u32..6000, 256u32..300), 1..3000).prop_map(Op::Add),
            2 => proptest::collection::vec(0u32..6000, 1..3000).prop_map(Op::Del),
            2 => Just(Op::Publish),
        ]
    }

    fn sa(id: u32, spi: u32) -> SaConfig {
        let mut c = cfg(id, Cipher::Aes128Gcm, Integ::None, false);
        c.spi = spi;
        c
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn published_table_matches_the_model(ops in proptest::collection::vec(op(), 1..24)) {
            let mut db = SaDb::with_workers(1);
            let reader = db.reader();
            // What the last publication should show: id -> spi.
            let mut staged: BTreeMap<u32, u32> = BTreeMap::new();
            let mut published = staged.clone();
            for op in ops {
                match op {
                    Op::Add(v) => {
                        let mut seen = std::collections::BTreeSet::new();
                        let batch: Vec<SaConfig> = v
                            .into_iter()
                            .filter(|(id, _)| !staged.contains_key(id) && seen.insert(*id))
                            .map(|(id, spi)| sa(id, spi))
                            .collect();
                        for c in &batch {
                            staged.insert(c.id, c.spi);
                        }
                        db.add_batch(batch).expect("new ids");
                    }
                    Op::Del(v) => {
                        for id in v {
                            prop_assert_eq!(db.del(id).is_ok(), staged.remove(&id).is_some());
                        }
                    }
                    Op::Publish => {
                        db.publish();
                        published = staged.clone();
                    }
                }
                let t = reader.load();
                prop_assert_eq!(t.len(), published.len());
                for id in 0..6000u32 {
                    prop_assert_eq!(t.get(id).map(|s| s.spi), published.get(&id).copied(), "id {}", id);
                }
                for spi in 256u32..300 {
                    let mut want: Vec<u32> = published.iter().filter(|e| *e.1 == spi).map(|e| *e.0).collect();
                    let mut got: Vec<u32> = t.by_spi(spi).iter().map(|s| s.id).collect();
                    want.sort_unstable();
                    got.sort_unstable();
                    prop_assert_eq!(got, want, "spi {}", spi);
                }
            }
        }
    }
}

/// SAs without lifetimes are swept a slice per `poll_events` call: an SA
/// whose sequence numbers ran out among 100,000 is reported within two
/// calls, once.
#[test]
fn exhaustion_is_reported_in_a_large_table() {
    let mut db = SaDb::with_workers(1);
    let batch: Vec<SaConfig> = (1..=100_000).map(|id| cfg(id, Cipher::Aes128Gcm, Integ::None, false)).collect();
    db.add_batch(batch).expect("add");
    db.publish();
    let sa = db.get(77_777).expect("sa").clone();
    sa.set_seq_out(u64::from(u32::MAX) - 1);
    assert_eq!(sa.reserve_seq(5).count, 1, "the last number, then none");
    let now = Instant::now();
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.extend(db.poll_events(now));
    }
    assert_eq!(seen, vec![SaEvent { id: 77_777, kind: SaEventKind::SeqExhausted }]);
    assert_eq!(db.poll_events(now), vec![]);
    assert_eq!(db.poll_events(now), vec![], "each event once");
}
