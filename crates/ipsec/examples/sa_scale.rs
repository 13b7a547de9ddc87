//! Installing many SAs: `SaDb::add_batch` + one `publish`, SAs per
//! second, and memory per SA (resident set before and after), then a
//! sample of the SAs looked up and used through the published table:
//!
//!     cargo run --release -p tern-ipsec --example sa_scale [-- COUNT]

use std::time::Instant;
use tern_ipsec::*;

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s.split_whitespace().nth(1).and_then(|x| x.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn main() {
    let count: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    for (cipher, integ) in [(Cipher::Aes128Gcm, Integ::None), (Cipher::Aes128Cbc, Integ::HmacSha1_96)] {
        let mut db = SaDb::with_workers(2);
        let reader = db.reader();
        let cfgs: Vec<SaConfig> = (0..count)
            .map(|i| SaConfig {
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
            })
            .collect();
        let before = rss_bytes();
        let t = Instant::now();
        db.add_batch(cfgs).expect("add_batch");
        let added = t.elapsed();
        db.publish();
        let total = t.elapsed();
        let after = rss_bytes();
        let table = reader.load();
        assert_eq!(table.len(), count as usize);
        // A sample used: every 1000th SA encrypts a packet.
        let mut buf = vec![0u8; 256];
        let mut used = 0;
        for id in (1..=count).step_by(1000) {
            let sa = table.get(id).expect("published");
            let r = sa.reserve_seq(1);
            sa.encrypt(&mut buf, 100, NH_IPV4, r.first).expect("encrypt");
            assert_eq!(table.by_spi(sa.spi).len(), 1);
            used += 1;
        }
        println!(
            "{cipher} {integ}: {count} SAs: add_batch {:.2} s, + publish {:.2} s = {:.0} SAs/s; {:.0} bytes per SA (RSS); {used} sampled SAs encrypt",
            added.as_secs_f64(),
            (total - added).as_secs_f64(),
            f64::from(count) / total.as_secs_f64(),
            after.saturating_sub(before) as f64 / f64::from(count),
        );
    }
}
