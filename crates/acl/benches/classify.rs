//! ns/packet of the compiled classifier: 1, 50, 1,000 and 10,000
//! ClassBench-like rules, IPv4 and IPv6, one packet at a time and in
//! batches of 256, plus the 100GE scenarios and the linear reference for
//! comparison. Run: `cargo bench -p tern-acl --bench classify`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::net::Ipv4Addr;
use tern_acl::synth;
use tern_acl::{Classifier, CompileOptions, PacketKey, Verdict, compile, compile_with};

const BATCH: usize = 256;

fn run(c: &mut Criterion, group: &str, name: &str, cls: &Classifier, keys: &[PacketKey]) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function(BenchmarkId::new("single", name), |b| {
        b.iter(|| {
            for k in keys {
                black_box(cls.classify(black_box(k)));
            }
        })
    });
    let mut out = vec![Verdict::default(); BATCH];
    g.bench_function(BenchmarkId::new("batch", name), |b| {
        b.iter(|| {
            for chunk in keys.chunks(BATCH) {
                cls.classify_batch(black_box(chunk), &mut out);
                black_box(&out);
            }
        })
    });
    g.finish();
}

fn classbench(c: &mut Criterion) {
    for v6 in [false, true] {
        for n in [1usize, 50, 1000, 10_000] {
            let set = synth::classbench(n, 42, v6);
            let cls = compile(&set, &synth::ifindex).expect("compiles");
            let keys = synth::packets(&set, 4 * BATCH, 9);
            let fam = if v6 { "v6" } else { "v4" };
            run(c, &format!("classbench_{fam}"), &n.to_string(), &cls, &keys);
        }
    }
}

fn scenarios(c: &mut Criterion) {
    // single-flow-50fw: one flow, all 50 rules checked, verdict accept.
    let set = tern_acl::scenario_50_drop_rules();
    let cls = compile(&set, &|_| None).expect("compiles");
    let flow = PacketKey::v4(Ipv4Addr::new(16, 0, 0, 1), Ipv4Addr::new(48, 0, 0, 1), 17).with_ports(1024, 1024);
    run(c, "scenario", "50fw_single_flow", &cls, &vec![flow; 4 * BATCH]);
    let lin = compile_with(&set, &|_| None, &CompileOptions { linear: true, ..Default::default() }).expect("compiles");
    run(c, "scenario", "50fw_single_flow_linear", &lin, &vec![flow; 4 * BATCH]);
    // Random sources in 1.1.0.0/16 (some dropped) to defeat caching.
    let mut rng = synth::Rng::new(5);
    let keys: Vec<PacketKey> =
        (0..4 * BATCH).map(|_| PacketKey { src: 0x0101_0000 | rng.below(1 << 16) as u128, ..flow }).collect();
    run(c, "scenario", "50fw_random_src", &cls, &keys);
    // drop-test: random ports, half accepted.
    let set = tern_acl::scenario_drop_test();
    let cls = compile(&set, &|_| None).expect("compiles");
    let keys: Vec<PacketKey> =
        (0..4 * BATCH).map(|_| flow.with_ports(rng.below(65536) as u16, rng.below(65536) as u16)).collect();
    run(c, "scenario", "drop_test", &cls, &keys);
}

fn linear_reference(c: &mut Criterion) {
    for n in [50usize, 1000] {
        let set = synth::classbench(n, 42, false);
        let cls = compile_with(&set, &synth::ifindex, &CompileOptions { linear: true, ..Default::default() })
            .expect("compiles");
        let keys = synth::packets(&set, 4 * BATCH, 9);
        run(c, "linear_v4", &n.to_string(), &cls, &keys);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2)).sample_size(20);
    targets = scenarios, classbench, linear_reference
}
criterion_main!(benches);
