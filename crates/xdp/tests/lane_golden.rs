//! The golden pcaps of the userspace engine (crates/control/tests/golden:
//! VLANs with a firewall, GRE with a key, IPv4 and IPv6 basics) replayed
//! through the XDP lane and the engine side by side, on the router built
//! from each case's configuration: every frame the lane decides must come
//! out as the engine's, with the same counters (see lane_util/diff.rs).
//! Needs root; prints "skipped" otherwise.

mod lane_util;

use lane_util::diff::{Verdict, from_shared};
use lane_util::{privileged, with_veths};
use std::path::{Path, PathBuf};
use tern_control::config;
use tern_control::router::Router;
use tern_io::PcapReader;

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let Ok(mut r) = PcapReader::open(path) else { return Vec::new() };
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Ok(Some(_)) = r.next_record(&mut buf) {
        out.push(buf.clone());
    }
    out
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../control/tests/golden")
}

#[test]
fn golden_pcaps_agree_between_the_lanes() {
    if !privileged() {
        return;
    }
    let mut cases: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .expect("golden cases")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("config.toml").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() >= 3, "golden cases found: {cases:?}");
    let mut decided = 0;
    for dir in cases {
        let text = std::fs::read_to_string(dir.join("config.toml")).expect("config");
        let plan = config::parse(&text, "config.toml", &dir).expect("valid config");
        let ports = plan.ports() as u16;
        let ns = with_veths(usize::from(ports));
        let seen = ns.run(|| {
            let router = Router::start(plan.clone()).expect("router");
            let mut d = from_shared(router.shared().clone(), ports, &plan.acls, plan.config.linux.linux_mode());
            for (i, iface) in plan.ifaces.iter().enumerate().take(usize::from(ports)) {
                for f in read_pcap(&dir.join(format!("in-{}.pcap", iface.name))) {
                    d.run(i as u16, &f);
                }
            }
            router.shutdown();
            d.seen
        });
        eprintln!("{}: {seen:?}", dir.display());
        decided += seen
            .iter()
            .filter(|(v, _)| matches!(v, Verdict::Forward(_) | Verdict::Drop(_)))
            .map(|(_, n)| n)
            .sum::<usize>();
    }
    assert!(decided > 10, "the lane decided frames of the golden inputs itself: {decided}");
}
