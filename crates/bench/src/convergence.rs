//! `tern-bench convergence`: the full table (or a slice) from BIRD through
//! FRR's zebra into tern over FPM, in the lab of `scripts/frr/lab.sh`, and
//! the convergence test of the 6WIND report: BIRD i1 (primary) and i2
//! (secondary, AS path prepended) announce the same prefixes; i1's session
//! goes down, then up; timed until every prefix has the new next hop in
//! tern's FIB, and in the router namespace's kernel FIB (Linux forwarding
//! with the same FRR, the same run). Then tern restarts and zebra resends
//! the table. Prints the figures docs/PERFORMANCE.md's control-plane table
//! cites. Needs root, frr and bird2; run the release build:
//!
//! ```text
//! tern-bench convergence                    # the whole table
//! tern-bench convergence --v4 100000 --v6 100
//! ```

use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tern_control::router::Router;
use tern_testkit::frr::{self, FrrLab, gw, thread_cpu, until, while_polling};

/// What `tern-bench convergence` measures with.
#[derive(Debug, Clone, clap::Args)]
pub struct ConvergenceArgs {
    /// IPv4 prefixes of the real table the injectors announce (0: all).
    #[arg(long, default_value_t = 0)]
    pub v4: usize,
    /// IPv6 prefixes (0: all).
    #[arg(long, default_value_t = 0)]
    pub v6: usize,
    /// tern's driver on the router's devices.
    #[arg(long, default_value = "auto")]
    pub driver: String,
}

/// Polls the router until every address in `addrs` resolves to gateway
/// `gw` in the FIB; the addresses already there are dropped from the
/// list as it goes, so each is looked up about once.
/// Returns the time it took and the CPU the checks themselves used.
fn until_all_on(
    r: &mut Router,
    addrs: &[u32],
    gw: &str,
    secs: u64,
    mut each: impl FnMut(&Router),
) -> Result<(Duration, Duration), String> {
    let gw: IpAddr = gw.parse().map_err(|e| format!("{gw}: {e}"))?;
    let mut left: Vec<u32> = addrs.to_vec();
    let t0 = Instant::now();
    let mut check_cpu = Duration::ZERO;
    let mut last_check = Instant::now() - Duration::from_secs(1);
    loop {
        let mut idle = false;
        for _ in 0..50 {
            let did = r.poll();
            each(r);
            if !did {
                idle = true;
                break;
            }
        }
        if last_check.elapsed() < Duration::from_millis(100) {
            if idle {
                std::thread::sleep(Duration::from_millis(1));
            }
            continue;
        }
        last_check = Instant::now();
        let c0 = thread_cpu();
        let fib = r.shared().fib.clone();
        left.retain(|&a| fib.nexthop(fib.lookup_v4(a)).gw != gw);
        check_cpu += thread_cpu().saturating_sub(c0);
        if left.is_empty() {
            return Ok((t0.elapsed(), check_cpu));
        }
        if t0.elapsed() > Duration::from_secs(secs) {
            return Err(format!("{} of {} prefixes not on {gw} after {secs} s", left.len(), addrs.len()));
        }
    }
}

/// Runs the measurement (see the module); the figures go to stdout.
pub fn run(a: &ConvergenceArgs) -> Result<(), String> {
    let Some(lab) = FrrLab::new("tbc", "kernel") else {
        return Err("the FRR lab cannot run here (see the message above)".into());
    };
    let (n4, n6) = (a.v4.to_string(), a.v6.to_string());
    let (n4, n6) = (n4.as_str(), n6.as_str());
    lab.sh(&["net"]);
    println!("{}", lab.sh(&["routes", n4, n6]).trim());
    let v4 = lab.announced_v4();
    let text6 = std::fs::read_to_string(lab.dir().join("routes6.conf")).unwrap_or_default();
    let want = (v4.len() + text6.lines().count()) as u64;

    tern_io::netdev::enter_netns(&lab.ns("r")).map_err(|e| format!("entering the router namespace: {e}"))?;
    let plan = tern_control::config::parse(&lab.linux_config(&a.driver), "convergence.toml", Path::new("/tmp"))
        .map_err(|e| e.to_string())?;
    let mut r = Router::start(plan.clone()).map_err(|e| e.0)?;
    let t_start = Instant::now();
    lab.sh(&["daemons"]);

    // First BGP route to the last prefix in tern, with a ping stream
    // through tern meanwhile (stalls show as RTT outliers or loss).
    let first = until(&mut r, 600, "the first BGP route", |r| frr::fpm_counter(r, "/routes/adds") > 0);
    let t_first = Instant::now();
    let cpu0 = thread_cpu();
    until(&mut r, 600, "the probe's route", |r| gw(r, "203.0.113.1").is_some());
    let ping = Command::new("ip")
        .args(["netns", "exec", &lab.ns("src"), "ping", "-q", "-i", "0.002", "-w", "600", "203.0.113.1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("ping");
    until(&mut r, 1200, "every prefix", |r| frr::fpm_counter(r, "/routes/adds") >= want);
    let all = t_first.elapsed();
    let cpu = thread_cpu().saturating_sub(cpu0);
    let _ = Command::new("kill").args(["-INT", &ping.id().to_string()]).status();
    let out = ping.wait_with_output().expect("ping output");
    let pings = String::from_utf8_lossy(&out.stdout);
    println!(
        "{want} prefixes: first in tern {first:.2?} after the daemons started, the last {all:.2?} after the first ({:.0} routes/s); tern control thread CPU {cpu:.2?} meanwhile",
        want as f64 / all.as_secs_f64()
    );
    println!("ping through tern during the ingest: {}", pings.lines().rev().take(2).collect::<Vec<_>>().join(" | "));
    println!("sources: {:?}", r.source_status());

    // 6WIND's method: withdraw on the primary, traffic moves to the
    // secondary; re-advertise, time until all traffic is back. Also when
    // FPM messages started and stopped arriving, and tern's CPU: what of
    // the time is tern's.
    for (what, cmd, to) in [
        ("withdrawal on the primary: all on the secondary", "disable up4", "10.3.0.2"),
        ("re-advertisement: all back on the primary", "enable up4", "10.2.0.2"),
    ] {
        let frames0 = frr::fpm_counter(&r, "/fpm/frames");
        let cpu0 = thread_cpu();
        let t0 = Instant::now();
        // Linux forwarding with the same FRR in the same run: the kernel's
        // FIB is the table zebra installs; watch it converge (a dump of
        // the BGP routes at a time, so to within one dump's time).
        let kernel = {
            let ns = lab.ns("r");
            let (n, via) = (v4.len(), format!("via {to} "));
            std::thread::spawn(move || {
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_secs(900) {
                    let d0 = Instant::now();
                    let out = Command::new("ip")
                        .args(["netns", "exec", &ns, "ip", "-4", "route", "show", "proto", "bgp"])
                        .output()
                        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                        .unwrap_or_default();
                    let on = out.lines().filter(|l| l.contains(&via)).count();
                    if on >= n {
                        return Some((t0.elapsed(), d0.elapsed()));
                    }
                }
                None
            })
        };
        lab.sh(&["birdc", "i1", cmd]);
        let mut first_msg = None;
        let mut last = (frames0, Duration::ZERO);
        let (took, check_cpu) = until_all_on(&mut r, &v4, to, 900, |r| {
            let f = frr::fpm_counter(r, "/fpm/frames");
            if f != last.0 {
                last = (f, t0.elapsed());
                first_msg.get_or_insert(last.1);
            }
        })?;
        let cpu = thread_cpu().saturating_sub(cpu0).saturating_sub(check_cpu);
        println!(
            "{what}: {} IPv4 prefixes after {took:.2?}; FPM messages from {:.2?} to {:.2?} ({} frames); tern control thread CPU {cpu:.2?} (the FIB checks' {check_cpu:.2?} taken out)",
            v4.len(),
            first_msg.unwrap_or_default(),
            last.1,
            frr::fpm_counter(&r, "/fpm/frames") - frames0
        );
        match while_polling(&mut r, || kernel.join().expect("kernel watcher")) {
            Some((k, dump)) => println!(
                "  Linux forwarding (r's kernel FIB, same FRR, same run): all {} on {to} after {k:.2?} (to within one dump: {dump:.2?})",
                v4.len()
            ),
            None => println!("  Linux forwarding: r's kernel never had all {} on {to}", v4.len()),
        }
    }

    // The same ping with the table settled, for comparison.
    let (_, out) =
        while_polling(&mut r, || lab.exec("src", &["ping", "-q", "-i", "0.002", "-c", "1000", "203.0.113.1"]));
    println!("ping through tern, table settled: {}", out.lines().rev().take(2).collect::<Vec<_>>().join(" | "));

    // zebra already has the table: restart tern, zebra reconnects and
    // resends it all.
    r.shutdown();
    let mut r = Router::start(plan).map_err(|e| e.0)?;
    let cpu0 = thread_cpu();
    until(&mut r, 600, "the resync", |r| {
        r.source_status()
            .iter()
            .find(|(n, _)| n == "fpm")
            .and_then(|(_, s)| s.pointer("/fpm/resyncs").and_then(serde_json::Value::as_u64))
            .unwrap_or(0)
            >= 1
    });
    let cpu = thread_cpu().saturating_sub(cpu0);
    let fpm = r.source_status();
    let ns = fpm
        .iter()
        .find(|(n, _)| n == "fpm")
        .and_then(|(_, s)| s.pointer("/fpm/last_resync_ns").and_then(serde_json::Value::as_u64))
        .unwrap_or(0);
    println!(
        "zebra to tern after a tern restart: {} routes from the FPM connection to the last route in {:.2} s ({:.2} M routes/s); tern control thread CPU {cpu:.2?} (includes start and the kernel dump)",
        frr::fpm_counter(&r, "/routes/adds"),
        ns as f64 / 1e9,
        frr::fpm_counter(&r, "/routes/adds") as f64 / (ns as f64 / 1e9).max(1e-9) / 1e6,
    );
    println!("total {:.2?}", t_start.elapsed());
    r.shutdown();
    Ok(())
}
