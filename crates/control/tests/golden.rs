//! Golden pcap tests: the whole graph runs on committed input pcaps and a
//! configuration; the frames each interface sends and the non-zero counters
//! must equal the committed expected files byte for byte.
//!
//! Layout: `tests/golden/<case>/config.toml` (memory interfaces, static
//! neighbours so nothing depends on timing), `in-<iface>.pcap` (made by
//! `make_inputs.py` with scapy), `out-<iface>.pcap` and `counters.txt`
//! (expected). Regenerate the expected files only on purpose:
//! `TERN_BLESS=1 cargo test -p tern-control --test golden`, then review them
//! (`tshark -r out-lan.pcap -V`) before committing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tern_control::router::Router;
use tern_io::{PcapReader, PcapWriter, TsPrecision};

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let Ok(mut r) = PcapReader::open(path) else { return Vec::new() };
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Ok(Some(_)) = r.next_record(&mut buf) {
        out.push(buf.clone());
    }
    out
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::create(path, TsPrecision::Micro).expect("create pcap");
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(Duration::from_secs(1_700_000_000 + i as u64), f).expect("write pcap");
    }
}

/// Drives the control loop until worker 0 received `rx` packets in total
/// and ran two more loops (every packet of a burst finishes in its loop).
fn settle(router: &mut Router, rx: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let w = &router.workers()[0];
    loop {
        let s = w.stats.snapshot();
        if s.ports.iter().map(|p| p.rx_packets).sum::<u64>() >= rx {
            let loops = s.loops;
            while w.stats.snapshot().loops < loops + 2 {
                assert!(Instant::now() < deadline, "worker stopped looping");
                router.poll();
                std::thread::yield_now();
            }
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {rx} frames received",
            s.ports.iter().map(|p| p.rx_packets).sum::<u64>()
        );
        router.poll();
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn counters(router: &Router) -> String {
    let w = &router.workers()[0];
    let s = w.stats.snapshot();
    let mut lines: Vec<String> = w
        .graph
        .errors
        .iter()
        .zip(&s.errors)
        .filter(|(_, n)| **n > 0)
        .map(|(e, n)| format!("{}/{} {n}", e.node, e.name))
        .collect();
    lines.sort();
    lines.join("\n") + "\n"
}

fn hex(f: &[u8]) -> String {
    f.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

fn run_case(dir: &Path) -> Vec<String> {
    let bless = std::env::var_os("TERN_BLESS").is_some();
    let plan = tern_control::config::load(&dir.join("config.toml")).expect("config");
    let names: Vec<String> = plan.ifaces.iter().filter(|i| i.mac.is_some()).map(|i| i.name.clone()).collect();
    let mut router = Router::start(plan).expect("router");
    let mut received = 0u64;
    for name in &names {
        let frames = read_pcap(&dir.join(format!("in-{name}.pcap")));
        // All at once, so the worker takes them in one burst whatever the
        // timing: the output order is then reproducible.
        assert!(router.mem_ports(name).expect("memory port")[0].inject_all(&frames));
        received += frames.len() as u64;
        settle(&mut router, received);
    }
    let mut problems = Vec::new();
    for name in &names {
        let got = router.mem_ports(name).expect("memory port")[0].take_sent();
        let path = dir.join(format!("out-{name}.pcap"));
        if bless {
            write_pcap(&path, &got);
            continue;
        }
        let want = read_pcap(&path);
        if got != want {
            let first = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(got.len().min(want.len()));
            problems.push(format!(
                "{}: {name}: {} frames sent, {} expected; first difference at frame {first}:\n  got  {}\n  want {}",
                dir.display(),
                got.len(),
                want.len(),
                got.get(first).map_or("(none)".into(), |f| hex(f)),
                want.get(first).map_or("(none)".into(), |f| hex(f)),
            ));
        }
    }
    let got = counters(&router);
    let path = dir.join("counters.txt");
    if bless {
        std::fs::write(&path, &got).expect("write counters");
    } else {
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if got != want {
            problems.push(format!("{}: counters differ:\n--- got\n{got}--- want\n{want}", dir.display()));
        }
    }
    router.shutdown();
    problems
}

#[test]
fn golden_pcaps() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("golden dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("config.toml").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 3, "golden cases missing");
    let problems: Vec<String> = cases.iter().flat_map(|c| run_case(c)).collect();
    assert!(
        problems.is_empty(),
        "{}\n(re-bless with TERN_BLESS=1 only if the change is intended)",
        problems.join("\n\n")
    );
}
