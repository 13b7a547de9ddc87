//! Runs one classification workload in a loop, for `perf stat`:
//! `cargo bench -p tern-bench --bench acl_loop --no-run` names the binary, then
//! `perf stat -e instructions:u,cycles:u BINARY 50fw batch` (or `cargo bench -p tern-bench --bench acl_loop -- 50fw batch`)
//! Workloads: 50fw, drop, cb4-N, cb6-N (ClassBench-like, N rules); mode single|batch.
//! `ACL_BITMAP_RULES=0` turns bitmap mode off.
use std::hint::black_box;
use std::net::Ipv4Addr;
use tern_acl::{CompileOptions, PacketKey, Verdict, compile_with, synth};

fn main() {
    // `cargo bench` appends --bench to a harness-less bench's arguments.
    let args: Vec<String> = std::env::args().filter(|a| a != "--bench").collect();
    let work = args.get(1).map_or("50fw", String::as_str);
    let batch = args.get(2).is_none_or(|m| m == "batch");
    let iters: usize = args.get(3).and_then(|x| x.parse().ok()).unwrap_or(20_000);
    let flow = PacketKey::v4(Ipv4Addr::new(16, 0, 0, 1), Ipv4Addr::new(48, 0, 0, 1), 17).with_ports(1024, 1024);
    let mut rng = synth::Rng::new(5);
    let (set, keys) = match work {
        "50fw" => (tern_acl::scenario_50_drop_rules(), vec![flow; 256]),
        "drop" => (
            tern_acl::scenario_drop_test(),
            (0..256).map(|_| flow.with_ports(rng.below(65536) as u16, rng.below(65536) as u16)).collect(),
        ),
        w => {
            let v6 = w.starts_with("cb6");
            let n: usize = w[4..].parse().unwrap_or(50);
            let set = synth::classbench(n, 42, v6);
            let keys = synth::packets(&set, 256, 9);
            (set, keys)
        }
    };
    let mut opts = CompileOptions::default();
    if let Some(b) = std::env::var("ACL_BITMAP_RULES").ok().and_then(|b| b.parse().ok()) {
        opts.bitmap_rules = b;
    }
    let c = compile_with(&set, &synth::ifindex, &opts).expect("compiles");
    let mut out = vec![Verdict::default(); 256];
    let t = std::time::Instant::now();
    for _ in 0..iters {
        if batch {
            c.classify_batch(black_box(&keys), &mut out);
        } else {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = c.classify(black_box(k));
            }
        }
        black_box(&out);
    }
    let pk = (iters * keys.len()) as f64;
    eprintln!(
        "{work} {}: {:.2} ns/pkt (wall, machine load included)",
        if batch { "batch" } else { "single" },
        t.elapsed().as_nanos() as f64 / pk
    );
}
