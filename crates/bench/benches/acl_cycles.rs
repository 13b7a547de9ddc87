//! Cycle-accurate per-packet cost on a loaded machine: the minimum over
//! many repetitions (interference only ever adds time).
//! `cargo bench -p tern-bench --bench acl_cycles`
use std::hint::black_box;
use std::net::Ipv4Addr;
use tern_acl::synth;
use tern_acl::{Classifier, CompileOptions, PacketKey, Verdict, compile, compile_with};

fn min_ns(cls: &Classifier, keys: &[PacketKey], batch: bool) -> f64 {
    let mut out = vec![Verdict::default(); 256];
    let mut best = u64::MAX;
    for _ in 0..300 {
        let t0 = tern_intrin::rdtsc();
        if batch {
            for c in keys.chunks(256) {
                cls.classify_batch(black_box(c), &mut out);
                black_box(&out);
            }
        } else {
            for k in keys {
                black_box(cls.classify(black_box(k)));
            }
        }
        best = best.min(tern_intrin::rdtsc() - t0);
    }
    tern_intrin::tsc_to_ns(best) / keys.len() as f64
}

fn row(name: &str, cls: &Classifier, keys: &[PacketKey]) {
    println!(
        "{name:<28} single {:>6.2} ns/pkt   batch {:>6.2} ns/pkt",
        min_ns(cls, keys, false),
        min_ns(cls, keys, true)
    );
}

fn main() {
    let flow = PacketKey::v4(Ipv4Addr::new(16, 0, 0, 1), Ipv4Addr::new(48, 0, 0, 1), 17).with_ports(1024, 1024);
    let s50 = tern_acl::scenario_50_drop_rules();
    row("50fw single flow", &compile(&s50, &|_| None).unwrap(), &vec![flow; 1024]);
    let lin = compile_with(&s50, &|_| None, &CompileOptions { linear: true, ..Default::default() }).unwrap();
    row("50fw single flow (linear)", &lin, &vec![flow; 1024]);
    let mut rng = synth::Rng::new(5);
    let keys: Vec<PacketKey> =
        (0..1024).map(|_| PacketKey { src: 0x0101_0000 | rng.below(1 << 16) as u128, ..flow }).collect();
    row("50fw random src", &compile(&s50, &|_| None).unwrap(), &keys);
    let d = tern_acl::scenario_drop_test();
    let keys: Vec<PacketKey> =
        (0..1024).map(|_| flow.with_ports(rng.below(65536) as u16, rng.below(65536) as u16)).collect();
    row("drop test", &compile(&d, &|_| None).unwrap(), &keys);
    let only: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    for v6 in [false, true] {
        for n in [1usize, 50, 1000, 10_000] {
            if !only.is_empty() && !only.contains(&n) {
                continue;
            }
            let set = synth::classbench(n, 42, v6);
            let cls = compile(&set, &synth::ifindex).unwrap();
            let keys = synth::packets(&set, 1024, 9);
            row(&format!("classbench {} {n}", if v6 { "v6" } else { "v4" }), &cls, &keys);
            let keys = synth::random_packets(1024, 3, v6);
            row("  uniform random pkts", &cls, &keys);
        }
    }
}
