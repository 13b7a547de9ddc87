//! The prefetch table's own memory (`tern_ipsec::table::Table`), by the
//! counting allocator: bytes per entry for a million keys, and on either
//! side of a growth threshold (the table doubles past 3/4 full), with the
//! SA maps' entry shape (a u32 key and one pointer: `Option<(u32, Box<()>)>`
//! is 16 bytes, as `Option<(u32, Arc<Sa>)>`), in one table and in the SA
//! database's 256 shards (`db::Sharded`, keys spread by their own product).
//!
//! ```text
//! cargo run --release -p tern-ipsec --example table_mem
//! ```

#[global_allocator]
static GLOBAL: tern_alloc_count::Counting = tern_alloc_count::Counting;

use tern_ipsec::table::Table;

/// Keys as IKE gives SA ids and SPIs: spread over u32 (a multiplicative
/// sequence, distinct).
fn key(i: u32) -> u32 {
    i.wrapping_mul(0x9e37_79b9) ^ 0x5a5a_5a5a
}

fn one(n: u32) -> (usize, isize) {
    let (t, bytes) = tern_alloc_count::measure(|| {
        let mut t: Table<u32, Box<()>> = Table::new();
        for i in 0..n {
            t.insert(key(i), Box::new(()));
        }
        t
    });
    assert_eq!(t.len(), n as usize);
    (t.capacity(), bytes)
}

fn sharded(n: u32) -> (usize, isize) {
    let (maps, bytes) = tern_alloc_count::measure(|| {
        let mut maps: Vec<Table<u32, Box<()>>> = (0..256).map(|_| Table::new()).collect();
        for i in 0..n {
            let k = key(i);
            let s = usize::from((k.wrapping_mul(0x85eb_ca6b) >> 24) as u8);
            maps[s].insert(k, Box::new(()));
        }
        maps
    });
    (maps.iter().map(Table::capacity).sum(), bytes)
}

fn main() {
    println!("entry {} bytes", std::mem::size_of::<Option<(u32, Box<()>)>>());
    println!("{:>10} {:>8} {:>10} {:>12} {:>10}", "keys", "layout", "slots", "bytes", "B/key");
    let threshold = 3 * (1u32 << 20) / 4;
    for n in [threshold, threshold + 1, 1_000_000, 1 << 20] {
        for (layout, (slots, bytes)) in [("one", one(n)), ("256", sharded(n))] {
            println!("{n:>10} {layout:>8} {slots:>10} {bytes:>12} {:>10.1}", bytes as f64 / f64::from(n));
        }
    }
}
