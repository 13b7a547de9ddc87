//! Runs the FIB benchmark without the tern binary:
//! `cargo run --release -p tern-fib --features bench --example fib_bench -- TABLE [--json] [--no-kernel]`
fn main() {
    let mut opts = tern_fib::bench::BenchOpts::default();
    let mut json = false;
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
            path => opts.table = path.into(),
        }
    }
    match tern_fib::bench::run(&opts) {
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
    let cpu = || {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse::<u64>().ok()))
            .unwrap_or(0)
    };
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
