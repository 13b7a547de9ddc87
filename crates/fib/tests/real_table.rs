//! The FIB against the naive reference on the real full table
//! (../shared/data/full-table-2025.txt.gz, or $TERN_FULL_TABLE): millions of
//! random addresses, then churn. Ignored in debug builds (it takes minutes
//! there); run with `cargo test -p tern-fib --release --test real_table`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use tern_fib::{FibConfig, NaiveLpm, NhKind, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};

fn table_path() -> Option<PathBuf> {
    let p = std::env::var_os("TERN_FULL_TABLE").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/full-table-2025.txt.gz")
    });
    if p.exists() {
        Some(p)
    } else {
        eprintln!("real_table: {} not found, set TERN_FULL_TABLE; skipping", p.display());
        None
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn u128(&mut self) -> u128 {
        (u128::from(self.next()) << 64) | u128::from(self.next())
    }
}

/// Gateway number (1..=16) of a prefix: a stable hash.
fn gw_index(p: &Prefix) -> u32 {
    let b = match p.addr() {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    let x = ((b >> 64) as u64 ^ b as u64 ^ u64::from(p.len())).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 60) as u32 + 1
}

fn gw(p: &Prefix, i: u32) -> IpAddr {
    if p.is_v4() {
        IpAddr::V4(Ipv4Addr::new(100, 64, 0, i as u8))
    } else {
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i as u16))
    }
}

fn bits(p: &Prefix) -> u128 {
    match p.addr() {
        IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Checks `n` addresses of each family: the gateway the FIB gives must be
/// the gateway of the reference's longest match.
fn check(r: &tern_fib::FibReader, naive: &[NaiveLpm; 2], prefixes: &[Prefix], rng: &mut Rng, n: usize) {
    let mut keys4 = Vec::with_capacity(n);
    let mut keys6 = Vec::with_capacity(n);
    for i in 0..n {
        let p = prefixes[(rng.next() % prefixes.len() as u64) as usize];
        let width = if p.is_v4() { 32 } else { 128 };
        let host = if p.len() == width { 0 } else { (u128::MAX >> p.len()) & (u128::MAX << (128 - width)) };
        // Half inside a table prefix, half anywhere.
        let k = if i % 2 == 0 { bits(&p) | (rng.u128() & host) } else { rng.u128() & (u128::MAX << (128 - width)) };
        if p.is_v4() { keys4.push((k >> 96) as u32) } else { keys6.push(k) }
    }
    let mut out4 = vec![0; keys4.len()];
    r.lookup_v4_batch(&keys4, &mut out4);
    for (k, got) in keys4.iter().zip(&out4) {
        let want = naive[0].lookup(u128::from(*k) << 96);
        let single = r.lookup_v4(*k);
        assert_eq!(single, *got, "batch and single differ for {}", Ipv4Addr::from(*k));
        let nh = r.nexthop(single);
        if want == 0 {
            assert_eq!(nh.kind, NhKind::None, "{} has no route", Ipv4Addr::from(*k));
        } else {
            assert_eq!(nh.gw, IpAddr::V4(Ipv4Addr::new(100, 64, 0, want as u8)), "{}", Ipv4Addr::from(*k));
        }
    }
    let mut out6 = vec![0; keys6.len()];
    r.lookup_v6_batch(&keys6, &mut out6);
    for (k, got) in keys6.iter().zip(&out6) {
        let want = naive[1].lookup(*k);
        let single = r.lookup_v6(*k);
        assert_eq!(single, *got, "batch and single differ for {}", Ipv6Addr::from(*k));
        let nh = r.nexthop(single);
        if want == 0 {
            assert_eq!(nh.kind, NhKind::None, "{} has no route", Ipv6Addr::from(*k));
        } else {
            assert_eq!(
                nh.gw,
                IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, want as u16)),
                "{}",
                Ipv6Addr::from(*k)
            );
        }
    }
}

#[test]
#[cfg_attr(debug_assertions, ignore = "minutes in debug builds; run with --release")]
fn full_table_matches_the_reference_and_survives_churn() {
    let Some(path) = table_path() else { return };
    let routes = tern_fib::routefile::load(&path).expect("the shared table parses");
    let prefixes: Vec<Prefix> = routes.iter().map(|(p, _)| *p).collect();
    assert!(prefixes.len() > 1_000_000, "the full table has 1.06M prefixes");
    let (mut w, r) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
    // One reference per family: both use left-aligned keys.
    let mut naive = [NaiveLpm::new(), NaiveLpm::new()];
    let ops: Vec<RouteOp> = prefixes
        .iter()
        .map(|p| {
            let i = gw_index(p);
            naive[usize::from(p.is_v6())].insert(bits(p), p.len(), i);
            RouteOp::Add(Source::Fpm, *p, RouteTarget::Via { gw: gw(p, i), ifindex: Some(1) }, RouteAttrs::default())
        })
        .collect();
    let rep = w.apply(ops);
    assert_eq!(rep.failed, 0, "{:?}", rep.errors.first());
    let st = w.stats();
    assert_eq!((st.v4_routes, st.v6_routes), (901_899, 160_147));
    assert_eq!(st.nexthops, 32, "16 gateways per family");
    assert!(st.fib_bytes < 128 << 20, "FIB {} bytes", st.fib_bytes);
    let mut rng = Rng(0x5eed_1234_5678_9abc);
    check(&r, &naive, &prefixes, &mut rng, 2_000_000);

    // Churn: delete a tenth, check, change the gateway of others, re-add.
    let gone: Vec<Prefix> = prefixes.iter().copied().filter(|_| rng.next().is_multiple_of(10)).collect();
    let rep = w.apply(gone.iter().map(|p| RouteOp::Del(Source::Fpm, *p)));
    assert_eq!(rep.failed, 0);
    for p in &gone {
        naive[usize::from(p.is_v6())].remove(bits(p), p.len());
    }
    check(&r, &naive, &prefixes, &mut rng, 500_000);
    for p in prefixes.iter().filter(|_| rng.next().is_multiple_of(20)) {
        let f = usize::from(p.is_v6());
        if naive[f].get(bits(p), p.len()).is_some() {
            let i = gw_index(p) % 16 + 1;
            naive[f].insert(bits(p), p.len(), i);
            w.add_route(Source::Fpm, *p, RouteTarget::Via { gw: gw(p, i), ifindex: Some(1) }, RouteAttrs::default())
                .expect("change");
        }
    }
    check(&r, &naive, &prefixes, &mut rng, 500_000);
    for p in &gone {
        let i = gw_index(p);
        naive[usize::from(p.is_v6())].insert(bits(p), p.len(), i);
        w.add_route(Source::Fpm, *p, RouteTarget::Via { gw: gw(p, i), ifindex: Some(1) }, RouteAttrs::default())
            .expect("re-add");
    }
    check(&r, &naive, &prefixes, &mut rng, 1_000_000);
    let st = w.stats();
    assert_eq!((st.v4_routes, st.v6_routes), (901_899, 160_147));
}
