//! What an SA holds before and after its first packets (keys expanded
//! once, lazily; replay window only inbound; counters allocated on first
//! count, still summed right), and the database's single index kept right
//! across base rebuilds.

use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;
use tern_ipsec::*;

/// `key_builds` is process-wide and any packet or count may expand an SA's
/// keys, so every test here takes its turn: one that counts expansions
/// counts only its own.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cfg(id: u32, cipher: Cipher, integ: Integ) -> SaConfig {
    SaConfig {
        id,
        spi: 0x1000 + id,
        cipher,
        integ,
        key: Key::new((0..cipher.key_len()).map(|i| (i as u8).wrapping_mul(7) ^ id as u8).collect()),
        integ_key: Key::new(vec![0x5a ^ id as u8; integ.key_len()]),
        esn: false,
        replay_window: 64,
        udp_encap: None,
        soft: Lifetime::default(),
        hard: Lifetime::default(),
    }
}

fn seal(sa: &Sa, inner: &[u8], seq: u64) -> Vec<u8> {
    let h = sa.header_len();
    let mut buf = vec![0u8; h + inner.len() + sa.trailer_len(inner.len())];
    buf[h..h + inner.len()].copy_from_slice(inner);
    let n = sa.encrypt(&mut buf, inner.len(), NH_IPV4, seq).expect("encrypt");
    buf.truncate(n);
    buf
}

/// Two workers send the first packets of a fresh SA at the same moment:
/// the keys are expanded once, both packets are sealed with them (the
/// receiver opens both), and the raw key bytes are gone afterwards.
#[test]
fn first_packets_from_two_workers_expand_the_keys_once() {
    let _g = serial();
    for (cipher, integ) in [(Cipher::Aes128Gcm, Integ::None), (Cipher::Aes256Cbc, Integ::HmacSha256_128)] {
        for _ in 0..20 {
            let now = Instant::now();
            let tx = Arc::new(Sa::new(cfg(1, cipher, integ), 2, now).expect("sa"));
            let rx = Sa::new(cfg(1, cipher, integ), 2, now).expect("sa");
            assert!(!tx.keys_built() && tx.raw_keys_held(), "nothing expanded before a packet");
            let before = key_builds();
            let go = Arc::new(Barrier::new(2));
            let workers: Vec<_> = (0..2u16)
                .map(|w| {
                    let (tx, go) = (tx.clone(), go.clone());
                    std::thread::spawn(move || {
                        let r = tx.reserve_seq(1);
                        let inner = [w as u8 + 1; 40];
                        go.wait();
                        let p = seal(&tx, &inner, r.first);
                        tx.count(w, &SaCounters { packets: 1, bytes: 40, ..SaCounters::default() });
                        (r.first, inner, p)
                    })
                })
                .collect();
            let sent: Vec<_> = workers.into_iter().map(|h| h.join().expect("worker")).collect();
            assert_eq!(key_builds() - before, 1, "{cipher}: one expansion for two first packets");
            assert!(tx.keys_built() && !tx.raw_keys_held(), "raw key bytes dropped (zeroized) once expanded");
            for (seq, inner, mut p) in sent {
                let s = rx.replay_check(seq as u32).expect("fresh");
                let d = rx.decrypt(&mut p, s).expect("the receiver opens what either worker sealed");
                assert_eq!(&p[d.inner], &inner[..]);
                rx.replay_update(s).expect("update");
            }
            assert_eq!(key_builds() - before, 2, "the receiver's own expansion, once for both packets");
            assert_eq!(tx.counters().packets, 2);
            assert_eq!(rx.seq_in(), 2);
        }
    }
}

/// An outbound SA never gets a replay window, an inbound one gets it at
/// its first check; neither holds counter slots until it counts, nor
/// expanded keys until a packet; a refused packet still expands the keys
/// once (it was checked with them) and is counted as the caller says.
#[test]
fn direction_state_is_made_by_use() {
    let _g = serial();
    let now = Instant::now();
    let out = Sa::new(cfg(2, Cipher::Aes128Gcm, Integ::None), 4, now).expect("sa");
    let inb = Sa::new(cfg(2, Cipher::Aes128Gcm, Integ::None), 4, now).expect("sa");
    for sa in [&out, &inb] {
        assert!(!sa.has_replay_window() && !sa.has_counters() && !sa.keys_built());
        assert_eq!(sa.counters(), SaCounters::default());
        assert_eq!((sa.seq_in(), sa.seq_out()), (0, 0));
    }
    let r = out.reserve_seq(3);
    let mut pkts: Vec<Vec<u8>> = (0..3).map(|i| seal(&out, &[9; 20], r.first + i)).collect();
    assert!(out.keys_built() && !out.has_replay_window(), "sending makes no replay window");
    assert_eq!(out.seq_out(), 3);
    // Counting nothing allocates nothing.
    out.count(0, &SaCounters::default());
    assert!(!out.has_counters());
    // Inbound: a forged packet is refused, and the window made by the
    // check does not move.
    let mut forged = pkts[2].clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    let s = inb.replay_check(3).expect("check");
    assert!(inb.has_replay_window());
    assert_eq!(inb.decrypt(&mut forged, s), Err(EspError::Integrity));
    assert_eq!(inb.seq_in(), 0);
    for (i, p) in pkts.iter_mut().enumerate() {
        let s = inb.replay_check(i as u32 + 1).expect("check");
        inb.decrypt(p, s).expect("decrypt");
        inb.replay_update(s).expect("update");
    }
    assert_eq!(inb.seq_in(), 3);
    assert_eq!(inb.replay_check(2), Err(ReplayError::Duplicate));
    assert_eq!(inb.seq_out(), 0, "receiving uses no sequence number");
    assert!(!inb.has_counters());
}

/// Counter slots come with the first count; workers beyond the slots
/// share them; the sums are right whatever the order.
#[test]
fn counters_allocated_on_first_count_sum_right() {
    let _g = serial();
    let sa = Arc::new(Sa::new(cfg(3, Cipher::Aes128Gcm, Integ::None), 2, Instant::now()).expect("sa"));
    assert!(!sa.has_counters());
    let threads: Vec<_> = (0..5u16)
        .map(|w| {
            let sa = sa.clone();
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    sa.count(
                        w,
                        &SaCounters { packets: 2, bytes: 3 * u64::from(w + 1), replay_drops: 1, ..Default::default() },
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker");
    }
    assert!(sa.has_counters());
    let c = sa.counters();
    assert_eq!(c.packets, 5 * 2000);
    assert_eq!(c.bytes, 3000 * (1 + 2 + 3 + 4 + 5));
    assert_eq!(c.replay_drops, 5000);
    assert_eq!(c.integrity_failures, 0);
}

/// Lifetimes are kept only when set, and read back as given.
#[test]
fn lifetimes_read_back() {
    let _g = serial();
    let now = Instant::now();
    let plain = Sa::new(cfg(4, Cipher::Aes128Gcm, Integ::None), 1, now).expect("sa");
    assert_eq!((plain.soft(), plain.hard()), (Lifetime::default(), Lifetime::default()));
    let mut c = cfg(5, Cipher::Aes128Gcm, Integ::None);
    c.soft.bytes = Some(1000);
    c.hard.secs = Some(60);
    let timed = Sa::new(c, 1, now).expect("sa");
    assert_eq!(timed.soft(), Lifetime { bytes: Some(1000), ..Lifetime::default() });
    assert_eq!(timed.hard(), Lifetime { secs: Some(60), ..Lifetime::default() });
    // Seconds only (IKE's child SAs: held inline), at the edges of u32.
    for (soft, hard) in
        [(Some(3600), Some(3960)), (None, Some(60)), (Some(0), None), (Some(u64::from(u32::MAX) - 1), Some(1 << 40))]
    {
        let mut c = cfg(6, Cipher::Aes128Gcm, Integ::None);
        c.soft.secs = soft;
        c.hard.secs = hard;
        let sa = Sa::new(c, 1, now).expect("sa");
        assert_eq!((sa.soft().secs, sa.hard().secs), (soft, hard));
        assert_eq!((sa.soft().packets, sa.hard().bytes), (None, None));
    }
}

/// Key lengths are still refused when the SA is made, not at the first
/// packet.
#[test]
fn bad_keys_refused_at_once() {
    let _g = serial();
    let mut c = cfg(6, Cipher::Aes128Gcm, Integ::None);
    c.key = Key::new(vec![1; 16]);
    assert!(matches!(Sa::new(c, 1, Instant::now()), Err(SaError::KeyLength { .. })));
    let mut c = cfg(7, Cipher::Aes128Cbc, Integ::HmacSha1_96);
    c.integ_key = Key::new(vec![1; 19]);
    assert!(matches!(Sa::new(c, 1, Instant::now()), Err(SaError::KeyLength { .. })));
}

/// The owner's view (no copy of its own: base + staged changes) and the
/// workers' table agree with a model across base rebuilds, with SPIs of
/// one SA (the first index) and shared ones (the side map), removals and
/// re-adds.
#[test]
fn one_index_across_rebuilds() {
    let _g = serial();
    let mut db = SaDb::with_workers(1);
    let reader = db.reader();
    let mut model = std::collections::BTreeMap::new();
    let mut next = 1u32;
    for round in 0..6u32 {
        // 6,000 adds (past the 4,096 changes that rebuild a small base),
        // every tenth on a shared SPI.
        let batch: Vec<SaConfig> = (0..6000)
            .map(|i| {
                let id = next + i;
                let mut c = cfg(id, Cipher::Aes128Gcm, Integ::None);
                c.spi = if id.is_multiple_of(10) { 0x100 + id % 7 } else { 0x10_0000 + id };
                c
            })
            .collect();
        for c in &batch {
            model.insert(c.id, c.spi);
        }
        next += 6000;
        db.add_batch(batch).expect("add");
        // Remove a third of what is there (some published, some staged).
        let gone: Vec<u32> = model.keys().copied().filter(|id| (id + round) % 3 == 0).collect();
        for id in gone {
            db.del(id).expect("del");
            model.remove(&id);
        }
        assert_eq!(db.len(), model.len());
        db.publish();
        let t = reader.load();
        assert_eq!(t.len(), model.len());
        for id in (1..next).step_by(7) {
            assert_eq!(db.get(id).map(|s| s.spi), model.get(&id).copied(), "owner: id {id}");
            assert_eq!(t.get(id).map(|s| s.spi), model.get(&id).copied(), "table: id {id}");
            let spi = if id.is_multiple_of(10) { 0x100 + id % 7 } else { 0x10_0000 + id };
            let got = t.by_spi(spi).iter().any(|s| s.id == id);
            assert_eq!(got, model.contains_key(&id), "spi {spi:#x} of id {id}");
        }
        for s in 0..7 {
            let mut want: Vec<u32> = model.iter().filter(|e| *e.1 == 0x100 + s).map(|e| *e.0).collect();
            let mut got: Vec<u32> = t.by_spi(0x100 + s).iter().map(|s| s.id).collect();
            want.sort_unstable();
            got.sort_unstable();
            assert_eq!(got, want);
        }
        assert_eq!(db.list().iter().map(|i| i.id).collect::<Vec<_>>(), model.keys().copied().collect::<Vec<_>>());
    }
}

/// Double-buffered bases: with no old table held, small publications
/// fold into the spare base in place, so the delta each publication copies
/// stays small whatever the number of SAs, and the workers' table agrees
/// with a model after every swap (shared SPIs, removals). A table a
/// reader keeps holds its base: the delta then grows until the base is
/// rebuilt, and swaps resume once it is let go. Dropping the spare (the
/// idle tick) changes nothing anyone sees.
#[test]
fn the_spare_base_takes_changes_in_place() {
    let _g = serial();
    let mut db = SaDb::with_workers(1);
    let reader = db.reader();
    let mut model = std::collections::BTreeMap::new();
    let spi_of = |id: u32| if id.is_multiple_of(7) { 0x7777 } else { 0x10_0000 + id };
    let agree = |t: &SaTable, model: &std::collections::BTreeMap<u32, u32>, upto: u32| {
        assert_eq!(t.len(), model.len());
        for id in 1..=upto {
            assert_eq!(t.get(id).map(|s| s.spi), model.get(&id).copied(), "table: id {id}");
            assert_eq!(t.by_spi(spi_of(id)).iter().any(|s| s.id == id), model.contains_key(&id), "spi of id {id}");
        }
    };
    let mut most_delta = 0;
    for id in 1..=6000u32 {
        let mut c = cfg(id, Cipher::Aes128Gcm, Integ::None);
        c.spi = spi_of(id);
        db.add(c).expect("add");
        model.insert(id, spi_of(id));
        if id % 3 == 0 {
            db.del(id - 2).expect("del");
            model.remove(&(id - 2));
        }
        db.publish();
        let t = reader.load();
        if id > 1000 {
            most_delta = most_delta.max(t.delta_len());
        }
        if id % 1000 == 0 {
            agree(&t, &model, id);
        }
    }
    assert!(db.has_spare());
    // About 1.7 changes a publication: folded at 64, never near the
    // rebuild bound (sqrt(2 n b), over 100 here).
    assert!(most_delta <= 70, "the delta reached {most_delta}");
    // A reader keeps a table: its base cannot be written.
    let held = reader.load();
    let mut grew = 0;
    for id in 6001..=7000u32 {
        let mut c = cfg(id, Cipher::Aes128Gcm, Integ::None);
        c.spi = spi_of(id);
        db.add(c).expect("add");
        model.insert(id, spi_of(id));
        db.publish();
        grew = grew.max(reader.load().delta_len());
    }
    assert!(grew > 70, "the delta grew to a rebuild ({grew})");
    agree(&reader.load(), &model, 7000);
    agree(&held, &model.iter().filter(|e| *e.0 <= 6000).map(|(k, v)| (*k, *v)).collect(), 6000);
    drop(held);
    db.drop_spare();
    assert!(!db.has_spare());
    agree(&reader.load(), &model, 7000);
    for id in 7001..=9000u32 {
        let mut c = cfg(id, Cipher::Aes128Gcm, Integ::None);
        c.spi = spi_of(id);
        db.add(c).expect("add");
        model.insert(id, spi_of(id));
        db.publish();
    }
    assert!(db.has_spare(), "built again by one rebuild");
    assert!(reader.load().delta_len() <= 70);
    agree(&reader.load(), &model, 9000);
    assert_eq!(db.list().iter().map(|i| i.id).collect::<Vec<_>>(), model.keys().copied().collect::<Vec<_>>());
}

/// An IKE daemon's pattern: one or two changes a publication (the base is
/// then rebuilt at a bound that follows the publication size), and the
/// views /metrics takes (the totals, the first SAs by id) agree with a
/// model.
#[test]
fn small_publications_and_the_metrics_views() {
    let _g = serial();
    let db_workers = 2;
    let mut db = SaDb::with_workers(db_workers);
    let reader = db.reader();
    let mut model = std::collections::BTreeMap::new();
    for id in 1..=3000u32 {
        db.add(cfg(id, Cipher::Aes128Gcm, Integ::None)).expect("add");
        model.insert(id, 0x1000 + id);
        if id % 5 == 0 {
            db.del(id - 3).expect("del");
            model.remove(&(id - 3));
        }
        db.publish();
    }
    let t = reader.load();
    assert_eq!(t.len(), model.len());
    for id in 1..=3000u32 {
        assert_eq!(t.get(id).map(|s| s.spi), model.get(&id).copied(), "table: id {id}");
        let by_spi = t.by_spi(0x1000 + id).iter().any(|s| s.id == id);
        assert_eq!(by_spi, model.contains_key(&id), "spi of id {id}");
    }
    // Counters on some SAs, from both workers.
    let mut want = SaCounters::default();
    for (i, id) in model.keys().copied().enumerate().filter(|(i, _)| i % 7 == 0) {
        let c = SaCounters { packets: 1 + i as u64, bytes: 100 * id as u64, replay_drops: 1, ..SaCounters::default() };
        db.get(id).expect("sa").count((i % 2) as u16, &c);
        want.packets += c.packets;
        want.bytes += c.bytes;
        want.replay_drops += 1;
    }
    assert_eq!(db.totals(), want);
    let first: Vec<(u32, u32, SaCounters)> = db.first(5);
    let ids: Vec<u32> = model.keys().copied().take(5).collect();
    assert_eq!(first.iter().map(|f| f.0).collect::<Vec<_>>(), ids);
    for (id, spi, c) in &first {
        assert_eq!(*spi, model[id]);
        assert_eq!(*c, db.get(*id).expect("sa").counters());
    }
    assert!(db.first(0).is_empty());
    assert_eq!(db.first(usize::MAX).len(), model.len());
    assert_eq!(db.first(usize::MAX).iter().map(|f| f.0).collect::<Vec<_>>(), model.keys().copied().collect::<Vec<_>>());
}

/// Time lifetimes come due from a heap of deadlines: each SA's events at
/// its own time, none for an SA deleted before, and an id used again
/// keeps only the new SA's lifetimes.
#[test]
fn time_lifetimes_come_due_in_order() {
    let _g = serial();
    use std::time::Duration;
    let mut db = SaDb::with_workers(1);
    let t0 = Instant::now();
    for id in 1..=200u32 {
        let mut c = cfg(id, Cipher::Aes128Gcm, Integ::None);
        c.soft.secs = Some(u64::from(id));
        c.hard.secs = Some(1000 + u64::from(id));
        db.add(c).expect("add");
    }
    db.del(50).expect("del");
    // Id 60 again, with a longer life than the first one had.
    db.del(60).expect("del");
    let mut c = cfg(60, Cipher::Aes128Gcm, Integ::None);
    c.soft.secs = Some(500);
    db.add(c).expect("add");
    db.publish();
    let soft = |ev: Vec<SaEvent>| -> Vec<u32> {
        ev.iter().filter(|e| matches!(e.kind, SaEventKind::SoftExpired(Reason::Time))).map(|e| e.id).collect()
    };
    assert_eq!(soft(db.poll_events(t0)), Vec::<u32>::new());
    let got = soft(db.poll_events(t0 + Duration::from_secs(100) + Duration::from_millis(500)));
    let want: Vec<u32> = (1..=100).filter(|&i| i != 50 && i != 60).collect();
    assert_eq!(got, want, "the first hundred, less the deleted and the replaced");
    assert_eq!(
        soft(db.poll_events(t0 + Duration::from_secs(150) + Duration::from_millis(500))),
        (101..=150).collect::<Vec<u32>>()
    );
    assert_eq!(soft(db.poll_events(t0 + Duration::from_secs(600))), {
        let mut v: Vec<u32> = (151..=200).collect();
        v.insert(0, 60);
        v
    });
    let hard: Vec<u32> = db
        .poll_events(t0 + Duration::from_secs(1300))
        .iter()
        .filter(|e| matches!(e.kind, SaEventKind::HardExpired(Reason::Time)))
        .map(|e| e.id)
        .collect();
    assert_eq!(hard, (1..=200).filter(|&i| i != 50 && i != 60).collect::<Vec<u32>>());
}

/// An idle SA is one 128-byte allocation with its `Arc` counts (a
/// size class of mimalloc and of glibc alike), and `added` reads back the
/// instant given, before or after the process's first SA.
#[test]
fn an_idle_sa_fits_128_bytes_with_its_arc() {
    let _g = serial();
    assert!(std::mem::size_of::<Sa>() + 16 <= 128, "Sa is {} bytes", std::mem::size_of::<Sa>());
    let t = Instant::now();
    let later = Sa::new(cfg(5, Cipher::Aes128Gcm, Integ::None), 2, t).expect("sa");
    assert_eq!(later.added(), t);
    let earlier_t = t.checked_sub(std::time::Duration::from_millis(1500)).unwrap_or(t);
    let earlier = Sa::new(cfg(6, Cipher::Aes128Gcm, Integ::None), 2, earlier_t).expect("sa");
    assert_eq!(earlier.added(), earlier_t);
}
