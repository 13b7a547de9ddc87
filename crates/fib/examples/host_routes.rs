//! Memory per remote-access client route: N host routes (/32, or /128
//! with `v6`) to one tunnel interface, from a pool of consecutive
//! addresses as IKE hands them out, counted by a global allocator (the
//! bytes asked of malloc: the RIB, the LPM blocks, the change log).
//!
//!     cargo run --release -p tern-fib --example host_routes [-- N [v6]]
//!
//! Then removes them all, timed too (clients leaving).
//!
//! Measured 2026-12-07 (loaded 2-vCPU VM): 112 bytes of heap per /32 at
//! 100K and 1M routes (151 at 300K: a hash table just grown). The time
//! to add them grew with the square of their number (100K: 6.0 s, 300K:
//! 43 s, 1M: over 5 min): each was an entry of the writer's connected
//! subnets, a Vec re-sorted on every change. With those in a hash map
//! (connected.rs), added / removed: 100K 0.04 / 0.02 s, 300K 0.21 /
//! 0.09 s, 1M 0.54 / 0.34 s; 1M /128 1.1 / 0.3 s.

use std::net::IpAddr;
use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteTarget, Source};

#[global_allocator]
static GLOBAL: tern_alloc_count::Counting = tern_alloc_count::Counting;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let v6 = args.next().as_deref() == Some("v6");
    let (mut w, r) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
    let tunnel = 7u16;
    let pool: Prefix = if v6 { "fd00:10::/96" } else { "10.128.0.0/9" }.parse().expect("prefix");
    w.add_route(Source::Connected, pool, RouteTarget::Connected { ifindex: tunnel }, RouteAttrs::default())
        .expect("pool route");
    // Changes are drained as the router does after each batch.
    let _ = w.take_changes();
    let base = tern_alloc_count::live();
    let t = std::time::Instant::now();
    let addr = |i: u32| -> IpAddr {
        if v6 {
            IpAddr::from(std::net::Ipv6Addr::from((0xfd00_0010u128 << 96) | u128::from(i + 1)))
        } else {
            IpAddr::from(std::net::Ipv4Addr::from(0x0a80_0000u32 + i + 1))
        }
    };
    for i in 0..n {
        if i % 100_000 == 0 {
            eprintln!("{i} routes, {:.1} s", t.elapsed().as_secs_f64());
        }
        w.add_route(
            Source::Static,
            Prefix::host(addr(i)),
            RouteTarget::Connected { ifindex: tunnel },
            RouteAttrs::default(),
        )
        .expect("host route");
        if i % 1000 == 999 {
            let _ = w.take_changes();
        }
    }
    let _ = w.take_changes();
    let added = t.elapsed().as_secs_f64();
    let heap = tern_alloc_count::live() - base;
    let probe = addr(n / 2);
    let nh = match probe {
        IpAddr::V4(a) => r.nexthop(r.lookup_v4(u32::from(a))),
        IpAddr::V6(a) => r.nexthop(r.lookup_v6(u128::from(a))),
    };
    assert_eq!(nh.ifindex, tunnel);
    let t = std::time::Instant::now();
    for i in 0..n {
        w.del_route(Source::Static, Prefix::host(addr(i))).expect("del host route");
        if i % 1000 == 999 {
            let _ = w.take_changes();
        }
    }
    let _ = w.take_changes();
    let removed = t.elapsed().as_secs_f64();
    println!(
        "{n} {} host routes: {:.1} bytes of heap per route ({:.1} MiB)",
        if v6 { "/128" } else { "/32" },
        heap as f64 / f64::from(n),
        heap as f64 / 1048576.0
    );
    println!("added in {added:.2} s, removed in {removed:.2} s");
}
