//! Prints compile time, memory and shape of the classifier for synthetic
//! ClassBench-like rule sets: `cargo bench -p tern-bench --bench acl_stats -- [N...]`
//! (`ACL_BUDGET=entries` overrides the cross-product table budget).
use std::time::Instant;
use tern_acl::synth;
use tern_acl::{CompileOptions, compile_with, linear};

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![1, 50, 1000, 10000] } else { sizes };
    for v6 in [false, true] {
        for &n in &sizes {
            let set = synth::classbench(n, 42, v6);
            let t = Instant::now();
            let budget = std::env::var("ACL_BUDGET")
                .ok()
                .and_then(|b| b.parse().ok())
                .unwrap_or(CompileOptions::default().table_budget);
            let c = compile_with(&set, &synth::ifindex, &CompileOptions { table_budget: budget, ..Default::default() })
                .expect("compiles");
            let dt = t.elapsed();
            let keys = synth::packets(&set, 2000, 9);
            let mut rules_hit = std::collections::HashSet::new();
            let mut mismatches = 0;
            for k in &keys {
                let v = c.classify(k);
                rules_hit.insert(v.rule);
                let w = linear::evaluate(&set, &synth::ifindex, k);
                mismatches += usize::from((w.action, w.rule) != (v.action, v.rule));
            }
            let s = if v6 { c.stats().v6 } else { c.stats().v4 };
            println!(
                "{} rules={n:>5} compile={:>8.1} ms mem={:>7} KiB mode={} fields={:?} tables={:?} cand_mean={:.2} cand_max={} distinct_verdicts={} mismatches={mismatches}",
                if v6 { "v6" } else { "v4" },
                dt.as_secs_f64() * 1e3,
                s.memory_bytes / 1024,
                s.mode,
                s.fields,
                s.tables,
                s.candidates_mean_x100 as f64 / 100.0,
                s.candidates_max,
                rules_hit.len()
            );
        }
    }
}
