//! Runs the FIB benchmark without the tern binary:
//! `cargo bench -p tern-bench --bench fib_bench -- TABLE [--json] [--no-kernel]`
fn main() {
    let mut opts = tern_bench::fib::BenchOpts::default();
    let mut json = false;
    if let Some(i) = std::env::args().position(|a| a == "--width") {
        opts.table = std::env::args().nth(1).unwrap_or_default().into();
        opts.lookups = 20_000_000;
        let alternations = std::env::args().nth(i + 1).and_then(|x| x.parse().ok()).unwrap_or(4);
        match tern_bench::fib::width_experiment(&opts, alternations) {
            Ok(s) => print!("{s}"),
            Err(e) => eprintln!("fib bench: {e}"),
        }
        return;
    }
    if std::env::args().any(|a| a == "--micro") {
        micro(&std::env::args().nth(1).unwrap_or_default());
        return;
    }
    if let Some(i) = std::env::args().position(|a| a == "--updates") {
        let args: Vec<String> = std::env::args().collect();
        let fam = args.get(i + 1).map_or("v4", String::as_str);
        let n = args.get(i + 2).and_then(|x| x.parse().ok()).unwrap_or(100_000);
        updates(&args.get(1).cloned().unwrap_or_default(), fam == "v6", n);
        return;
    }
    if std::env::args().any(|a| a == "--load-only") {
        load_only(&std::env::args().nth(1).unwrap_or_default());
        return;
    }
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--json" => json = true,
            "--no-kernel" => opts.kernel = false,
            "--no-refs" => opts.references = false,
            "--quick" => {
                opts.lookups = 5_000_000;
                opts.churn = 20_000;
            }
            // What `cargo bench` appends to a harness-less bench's arguments.
            "--bench" => {}
            path => opts.table = path.into(),
        }
    }
    match tern_bench::fib::run(&opts) {
        Ok(r) if json => println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default()),
        Ok(r) => print!("{r}"),
        Err(e) => {
            eprintln!("fib bench: {e}");
            std::process::exit(1);
        }
    }
}

/// Loads the table once through the public API and prints the time (for
/// profiling the writer alone).
fn load_only(path: &str) {
    use tern_fib::{RouteAttrs, RouteOp, RouteTarget, Source};
    let Ok(routes) = tern_fib::routefile::load(path) else {
        eprintln!("cannot load {path}");
        return;
    };
    let (mut w, _r) = tern_fib::new(tern_fib::FibConfig::default(), tern_rcu::Domain::new());
    let gw4: std::net::IpAddr = "100.64.0.1".parse().unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    let gw6: std::net::IpAddr = "fd00::1".parse().unwrap_or(std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST));
    let ops: Vec<Vec<RouteOp>> = routes
        .chunks(10_000)
        .map(|c| {
            c.iter()
                .enumerate()
                .map(|(i, (p, _))| {
                    let gw = if p.is_v4() { gw4 } else { gw6 };
                    let gw = match gw {
                        std::net::IpAddr::V4(a) => std::net::IpAddr::V4((u32::from(a) + (i % 16) as u32).into()),
                        std::net::IpAddr::V6(a) => std::net::IpAddr::V6((u128::from(a) + (i % 16) as u128).into()),
                    };
                    RouteOp::Add(Source::Fpm, *p, RouteTarget::Via { gw, ifindex: Some(1) }, RouteAttrs::default())
                })
                .collect()
        })
        .collect();
    let cpu = || tern_bench::fib::thread_cpu().as_nanos() as u64;
    let (t, c) = (std::time::Instant::now(), cpu());
    for b in ops {
        w.apply(b);
    }
    let cpu_s = (cpu() - c) as f64 / 1e9;
    println!(
        "loaded {} routes in {:.3} s wall, {cpu_s:.3} s cpu: {:?}",
        routes.len(),
        t.elapsed().as_secs_f64(),
        w.stats()
    );
    // Single-call churn on 100K routes (each call publishes).
    let mut picks: Vec<_> = routes.iter().step_by(10).map(|(p, _)| *p).collect();
    shuffle(&mut picks);
    let (t, c) = (std::time::Instant::now(), cpu());
    for p in &picks {
        let _ = w.del_route(Source::Fpm, *p);
    }
    println!(
        "{} single deletes: {:.3} s wall, {:.3} s cpu",
        picks.len(),
        t.elapsed().as_secs_f64(),
        (cpu() - c) as f64 / 1e9
    );
    let (t, c) = (std::time::Instant::now(), cpu());
    for p in &picks {
        let gw = if p.is_v4() { gw4 } else { gw6 };
        let _ = w.add_route(Source::Fpm, *p, RouteTarget::Via { gw, ifindex: Some(1) }, RouteAttrs::default());
    }
    println!(
        "{} single adds: {:.3} s wall, {:.3} s cpu",
        picks.len(),
        t.elapsed().as_secs_f64(),
        (cpu() - c) as f64 / 1e9
    );
    let (t, c) = (std::time::Instant::now(), cpu());
    let ops: Vec<RouteOp> = routes.iter().map(|(p, _)| RouteOp::Del(Source::Fpm, *p)).collect();
    w.apply(ops);
    println!(
        "deleted in {:.3} s wall, {:.3} s cpu: {:?}",
        t.elapsed().as_secs_f64(),
        (cpu() - c) as f64 / 1e9,
        w.stats()
    );
}

/// One family's table loaded, then `n` random routes deleted one call
/// each, re-added one call each, then deleted and re-added in batches of
/// 1000 (500 + 500), as `tern-bench fib` measures updates. For callgrind:
/// the instructions of `n` minus those of `n = 0` are the updates' own.
fn updates(path: &str, v6: bool, n: usize) {
    use tern_fib::{Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
    let Ok(routes) = tern_fib::routefile::load(path) else {
        eprintln!("cannot load {path}");
        return;
    };
    let prefixes: Vec<Prefix> = routes.iter().map(|(p, _)| *p).filter(|p| p.is_v6() == v6).collect();
    let (mut w, _r) = tern_fib::new(tern_fib::FibConfig::default(), tern_rcu::Domain::new());
    let gw = |p: &Prefix| {
        // The gateway from a cheap hash of the prefix (as `tern-bench fib`).
        let b = match p.addr() {
            std::net::IpAddr::V4(a) => u128::from(u32::from(a)),
            std::net::IpAddr::V6(a) => u128::from(a),
        };
        let h = ((b >> 64) as u64 ^ b as u64 ^ u64::from(p.len())).wrapping_mul(0xff51_afd7_ed55_8ccd);
        let k = ((h >> 40) % 16) as u8 + 1;
        let gw = if v6 {
            std::net::IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(k)))
        } else {
            std::net::IpAddr::V4(std::net::Ipv4Addr::new(100, 64, 0, k))
        };
        RouteTarget::Via { gw, ifindex: Some(1) }
    };
    for c in prefixes.chunks(10_000) {
        w.apply(c.iter().map(|p| RouteOp::Add(Source::Fpm, *p, gw(p), RouteAttrs::default())));
    }
    let mut picks: Vec<Prefix> = prefixes.iter().step_by((prefixes.len() / n.max(1)).max(1)).copied().collect();
    picks.truncate(n);
    shuffle(&mut picks);
    let cpu = || tern_bench::fib::thread_cpu().as_nanos() as u64;
    let rate = |c0: u64| picks.len() as f64 / ((cpu() - c0) as f64 / 1e9).max(1e-9) / 1e6;
    let c = cpu();
    for p in &picks {
        let _ = w.del_route(Source::Fpm, *p);
    }
    let del = rate(c);
    let c = cpu();
    for p in &picks {
        let _ = w.add_route(Source::Fpm, *p, gw(p), RouteAttrs::default());
    }
    let add = rate(c);
    let c = cpu();
    for ch in picks.chunks(500) {
        let mut v: Vec<RouteOp> = ch.iter().map(|p| RouteOp::Del(Source::Fpm, *p)).collect();
        v.extend(ch.iter().map(|p| RouteOp::Add(Source::Fpm, *p, gw(p), RouteAttrs::default())));
        w.apply(v);
    }
    let batch = 2.0 * rate(c);
    println!(
        "{} {} routes, {} picks: {del:.2} M deletes/s, {add:.2} M inserts/s, {batch:.2} M ops/s batched (per CPU-second)",
        if v6 { "v6" } else { "v4" },
        prefixes.len(),
        picks.len()
    );
}

/// Lookup rates for hot (few prefixes) and cold (all prefixes) keys.
fn micro(path: &str) {
    use tern_fib::{RouteAttrs, RouteOp, RouteTarget, Source};
    let Ok(routes) = tern_fib::routefile::load(path) else { return };
    let (mut w, r) = tern_fib::new(tern_fib::FibConfig::default(), tern_rcu::Domain::new());
    let gw4: std::net::IpAddr = "100.64.0.1".parse().unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    let gw6: std::net::IpAddr = "fd00::1".parse().unwrap_or(std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST));
    w.apply(routes.iter().map(|(p, _)| {
        RouteOp::Add(
            Source::Fpm,
            *p,
            RouteTarget::Via { gw: if p.is_v4() { gw4 } else { gw6 }, ifindex: Some(1) },
            RouteAttrs::default(),
        )
    }));
    let cpu = || tern_bench::fib::thread_cpu().as_nanos() as u64;
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let v6: Vec<(u128, u8)> = routes
        .iter()
        .filter_map(|(p, _)| match p.addr() {
            std::net::IpAddr::V6(a) => Some((u128::from(a), p.len())),
            _ => None,
        })
        .collect();
    let v4: Vec<(u32, u8)> = routes
        .iter()
        .filter_map(|(p, _)| match p.addr() {
            std::net::IpAddr::V4(a) => Some((u32::from(a), p.len())),
            _ => None,
        })
        .collect();
    for hot in [64usize, 1 << 30] {
        let k6: Vec<u128> = (0..1 << 20)
            .map(|_| {
                let (a, l) = v6[(rnd() as usize % v6.len()) % hot.min(v6.len())];
                a | ((u128::from(rnd()) << 64 | u128::from(rnd())) & (u128::MAX.checked_shr(u32::from(l)).unwrap_or(0)))
            })
            .collect();
        let k4: Vec<u32> = (0..1 << 20)
            .map(|_| {
                let (a, l) = v4[(rnd() as usize % v4.len()) % hot.min(v4.len())];
                a | (rnd() as u32 & u32::MAX.checked_shr(u32::from(l)).unwrap_or(0))
            })
            .collect();
        let mut out = [0u32; 64];
        let mut acc = 0u32;
        for rep in 0..2 {
            let c = cpu();
            for _ in 0..10 {
                for &k in &k6 {
                    acc = acc.wrapping_add(r.lookup_v6(k));
                }
            }
            let s6 = (cpu() - c) as f64 / 1e9;
            let c = cpu();
            for _ in 0..10 {
                for ch in k6.chunks(64) {
                    r.lookup_v6_batch(ch, &mut out);
                    acc = acc.wrapping_add(out[5]);
                }
            }
            let b6 = (cpu() - c) as f64 / 1e9;
            let c = cpu();
            for _ in 0..10 {
                for &k in &k4 {
                    acc = acc.wrapping_add(r.lookup_v4(k));
                }
            }
            let s4 = (cpu() - c) as f64 / 1e9;
            let c = cpu();
            for _ in 0..10 {
                for ch in k4.chunks(64) {
                    r.lookup_v4_batch(ch, &mut out);
                    acc = acc.wrapping_add(out[5]);
                }
            }
            let b4 = (cpu() - c) as f64 / 1e9;
            let m = 10.0 * (1 << 20) as f64 / 1e6;
            println!(
                "hot={hot} rep={rep}: v6 single {:.1} M/s batch {:.1} M/s | v4 single {:.1} batch {:.1} ({acc})",
                m / s6,
                m / b6,
                m / s4,
                m / b4
            );
        }
    }
}

/// Fisher-Yates with a fixed xorshift: the same order in every run.
fn shuffle<T>(v: &mut [T]) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
}
