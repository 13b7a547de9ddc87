//! Golden runs: frames and counters compared with committed expectations,
//! rewritten instead when `TERN_BLESS=1` is set.
//!
//! A case is a directory holding `config.toml` (memory interfaces and
//! static neighbours, so nothing depends on timing), `in-<iface>.pcap` per
//! interface that receives, and the expectations `out-<iface>.pcap` and
//! `counters.txt`. [`run_case`] starts a [`Router`] on the configuration,
//! injects each input in one burst (the output order is then reproducible
//! whatever the timing), waits until the worker took every frame, and
//! compares what each interface sent and the counters. Regenerate the
//! expectations only on purpose (`TERN_BLESS=1 cargo test ...`) and review
//! them (`tshark -r out-lan.pcap -V`) before committing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tern_control::router::Router;

use crate::pcap;

/// Whether this run rewrites the expectations (`TERN_BLESS` set, not `0`).
pub fn blessing() -> bool {
    std::env::var_os("TERN_BLESS").is_some_and(|v| v != "0")
}

/// Frame bytes as spaced hex, for a difference report.
pub fn hex(f: &[u8]) -> String {
    f.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

/// Collects the differences between results and expectations (or blesses
/// them) and fails once, listing all of them.
#[derive(Debug, Default)]
pub struct Check {
    problems: Vec<String>,
}

impl Check {
    pub fn new() -> Check {
        Check::default()
    }

    /// Compares `got` with the frames of the pcap at `path` (a missing
    /// file expects none), or writes them there when blessing.
    pub fn frames(&mut self, path: &Path, got: &[Vec<u8>]) {
        if blessing() {
            pcap::write(path, got).unwrap_or_else(|e| panic!("bless {e}"));
            return;
        }
        let want = pcap::read_or_empty(path);
        if got != want {
            let first = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(got.len().min(want.len()));
            self.problems.push(format!(
                "{}: {} frames, {} expected; first difference at frame {first}:\n  got  {}\n  want {}",
                path.display(),
                got.len(),
                want.len(),
                got.get(first).map_or("(none)".into(), |f| hex(f)),
                want.get(first).map_or("(none)".into(), |f| hex(f)),
            ));
        }
    }

    /// Compares `got` with the text file at `path`, or writes it when
    /// blessing.
    pub fn text(&mut self, path: &Path, got: &str) {
        if blessing() {
            std::fs::write(path, got).unwrap_or_else(|e| panic!("bless {}: {e}", path.display()));
            return;
        }
        let want = std::fs::read_to_string(path).unwrap_or_default();
        if got != want {
            self.problems.push(format!("{}: differs:\n--- got\n{got}--- want\n{want}", path.display()));
        }
    }

    /// Adds another check's differences to this one's.
    pub fn merge(&mut self, other: Check) {
        self.problems.extend(other.problems);
    }

    /// The differences found so far.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Panics listing every difference, if any.
    pub fn finish(self) {
        assert!(
            self.problems.is_empty(),
            "{}\n(re-bless with TERN_BLESS=1 only if the change is intended)",
            self.problems.join("\n\n")
        );
    }
}

/// The case directories (those holding a `config.toml`) under `root`,
/// sorted.
pub fn cases(root: &Path) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("config.toml").exists())
        .collect();
    cases.sort();
    cases
}

/// Drives the control loop until worker 0 received `rx` packets in total
/// and ran two more loops (every packet of a burst finishes in its loop).
pub fn settle(router: &mut Router, rx: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let w = &router.workers()[0];
    loop {
        let s = w.stats.snapshot();
        let got = s.ports.iter().map(|p| p.rx_packets).sum::<u64>();
        if got >= rx {
            let loops = s.loops;
            while w.stats.snapshot().loops < loops + 2 {
                assert!(Instant::now() < deadline, "worker stopped looping");
                router.poll();
                std::thread::yield_now();
            }
            return;
        }
        assert!(Instant::now() < deadline, "only {got} of {rx} frames received");
        router.poll();
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Which counters a case compares.
#[derive(Clone, Copy, Debug)]
pub enum Counters<'a> {
    /// Every non-zero error counter of the graph (`node/error n`).
    Errors,
    /// For each of these nodes, the packets it handled (`node packets n`)
    /// and its non-zero error counters: a golden run of one node inside the
    /// smallest graph that reaches it.
    Nodes(&'a [&'a str]),
}

/// The counters of worker 0, one per line, sorted.
pub fn counters(router: &Router, which: Counters<'_>) -> String {
    let w = &router.workers()[0];
    let s = w.stats.snapshot();
    let wanted = |node: &str| match which {
        Counters::Errors => true,
        Counters::Nodes(nodes) => nodes.contains(&node),
    };
    let mut lines: Vec<String> = w
        .graph
        .errors
        .iter()
        .zip(&s.errors)
        .filter(|(e, n)| **n > 0 && wanted(e.node))
        .map(|(e, n)| format!("{}/{} {n}", e.node, e.name))
        .collect();
    if let Counters::Nodes(nodes) = which {
        for node in nodes {
            let i = w.graph.nodes.iter().position(|d| d.name == *node);
            let i = i.unwrap_or_else(|| panic!("no node {node} in the graph"));
            lines.push(format!("{node} packets {}", s.nodes.get(i).map_or(0, |c| c[1])));
        }
    }
    lines.sort();
    lines.join("\n") + "\n"
}

/// Runs the case in `dir` (see the module documentation) and returns the
/// differences found (none when blessing).
pub fn run_case(dir: &Path, which: Counters<'_>) -> Check {
    let plan = tern_control::config::load(&dir.join("config.toml"))
        .unwrap_or_else(|e| panic!("{}: config: {e}", dir.display()));
    let names: Vec<String> = plan.ifaces.iter().filter(|i| i.mac.is_some()).map(|i| i.name.clone()).collect();
    let mut router = Router::start(plan).unwrap_or_else(|e| panic!("{}: router: {e}", dir.display()));
    let mut received = 0u64;
    for name in &names {
        let frames = pcap::read_or_empty(&dir.join(format!("in-{name}.pcap")));
        if frames.is_empty() {
            continue;
        }
        assert!(router.mem_ports(name).expect("memory port")[0].inject_all(&frames), "{name}: inject");
        received += frames.len() as u64;
        settle(&mut router, received);
    }
    let mut check = Check::new();
    for name in &names {
        let got = router.mem_ports(name).expect("memory port")[0].take_sent();
        check.frames(&dir.join(format!("out-{name}.pcap")), &got);
    }
    check.text(&dir.join("counters.txt"), &counters(&router, which));
    router.shutdown();
    check
}
