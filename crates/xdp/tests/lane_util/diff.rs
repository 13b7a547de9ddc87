//! The differential harness: one frame through tern's userspace engine
//! (the forwarding graph of `tern-nodes` on a `Worker` with memory ports,
//! run synchronously) and through the XDP lane program
//! (BPF_PROG_TEST_RUN), on the same FIB, interfaces and rule sets; the
//! outcomes must agree.
//!
//! What "agree" means, for each verdict of the lane:
//! - forwarded out of port p: userspace sent exactly one frame, out of p,
//!   byte for byte the same (the outer IPv4 identification of a GRE packet
//!   is a per-worker / per-CPU sequence on each side and is compared after
//!   zeroing it and fixing the header checksum); counters and rule hits
//!   moved the same way;
//! - dropped: userspace sent nothing and counted the same drop (and the
//!   same other counters and rule hits);
//! - handed to userspace or to Linux: the frame is untouched and the lane
//!   counted nothing that userspace would count again.
#![allow(dead_code)]

use crossbeam_queue::ArrayQueue;
use std::collections::BTreeMap;
use std::sync::Arc;
use tern_acl::RuleSet;
use tern_engine::{IdlePolicy, PortBinding, TraceShared, Worker, WorkerConfig};
use tern_io::{MemHandle, MemPort};
use tern_nodes::state::{AclSet, AclTable, IfTable, Params, Shared};
use tern_packet::{PacketPool, PoolConfig};
use tern_xdp::lane::{ACL_CACHE_BUCKETS, CounterKind, FWD_BUCKETS, FibCapacity, LaneConfig, LaneProgram, counters};

pub const XDP_ABORTED: u32 = 0;
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_REDIRECT: u32 = 4;

/// Hit counters of one rule set: (packets, bytes) per rule, then the default.
pub type Hits = Vec<(u64, u64)>;

/// Where a packet went.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Forward(u16),
    Drop(String),
    Punt(String),
    Pass(String),
}

impl Verdict {
    pub fn kind(&self) -> &'static str {
        match self {
            Verdict::Forward(_) => "forward",
            Verdict::Drop(_) => "drop",
            Verdict::Punt(_) => "punt",
            Verdict::Pass(_) => "pass",
        }
    }
}

pub struct Diff {
    pub worker: Worker,
    pub mem: Vec<MemHandle>,
    pub shared: Shared,
    pub lane: LaneProgram,
    pub kif: Vec<u32>,
    pub sets: usize,
    /// Verdicts seen, for the tests' coverage checks.
    pub seen: BTreeMap<Verdict, usize>,
}

/// Builds both lanes over `ifs` (ports 0..ports, on kernel devices
/// `l0`, `l1`, ... of the current namespace), the FIB behind `fib`, and
/// `acls`. `linux_mode` as tern's `[linux]` section.
pub fn build(ifs: IfTable, ports: u16, fib: &tern_fib::FibReader, acls: &[RuleSet], linux_mode: bool) -> Diff {
    build_with_memos(ifs, ports, fib, acls, linux_mode, ACL_CACHE_BUCKETS, FWD_BUCKETS)
}

/// [`build`] with an ACL verdict cache of `buckets` buckets (0: none) and
/// a forwarding memo of `fwd_buckets` buckets per CPU (0: off).
pub fn build_with_memos(
    ifs: IfTable,
    ports: u16,
    fib: &tern_fib::FibReader,
    acls: &[RuleSet],
    linux_mode: bool,
    buckets: u32,
    fwd_buckets: u32,
) -> Diff {
    let table = engine_acls(&ifs, acls);
    let shared = Shared::new(ifs, fib.clone());
    shared.acls.publish(table);
    from_shared_with(shared, ports, acls, linux_mode, buckets, fwd_buckets)
}

/// The rule sets compiled for the engine (counters for worker 0).
fn engine_acls(ifs: &IfTable, acls: &[RuleSet]) -> AclTable {
    let mut sets = Vec::new();
    for s in acls {
        let c = tern_acl::compile(s, &|n| ifs.by_name(n).map(|i| i.index)).expect("rule set compiles");
        let counters = vec![tern_acl::RuleCounters::for_classifier(&c)];
        sets.push(AclSet { name: s.name.clone(), classifier: c, counters });
    }
    AclTable { sets }
}

/// Both lanes over tables a router (or the caller) already built: the
/// engine runs the graph on `shared` on this thread (worker id 0, whose
/// rule counters it uses), the lane gets the same FIB, interfaces and
/// rule sets.
pub fn from_shared(shared: Shared, ports: u16, acls: &[RuleSet], linux_mode: bool) -> Diff {
    from_shared_with_cache(shared, ports, acls, linux_mode, ACL_CACHE_BUCKETS)
}

fn from_shared_with_cache(shared: Shared, ports: u16, acls: &[RuleSet], linux_mode: bool, buckets: u32) -> Diff {
    from_shared_with(shared, ports, acls, linux_mode, buckets, FWD_BUCKETS)
}

fn from_shared_with(
    shared: Shared,
    ports: u16,
    acls: &[RuleSet],
    linux_mode: bool,
    buckets: u32,
    fwd_buckets: u32,
) -> Diff {
    shared.params.publish(Params {
        icmp_rate: 1_000_000,
        icmp_burst: 1_000_000,
        linux_owns_local: linux_mode,
        // No neighbour retries: a probe sent later would look like output
        // of whatever frame is being compared then.
        neigh_retry_ns: u64::MAX / 4,
        ..Params::default()
    });
    let built = tern_nodes::build_graph(&shared, Arc::new(ArrayQueue::new(64))).expect("graph");
    let pool = PacketPool::new(PoolConfig { frames: 4096, ..PoolConfig::default() }).expect("pool");
    let mut mem = Vec::new();
    let mut bindings = Vec::new();
    for p in 0..ports {
        let mp = MemPort::new(format!("m{p}"));
        mem.push(mp.handle());
        bindings.push(PortBinding::new(Box::new(mp), p));
    }
    let cfg = WorkerConfig { id: 0, cpu: None, idle: IdlePolicy::default(), input_node: built.input };
    let worker = Worker::new(cfg, built.graph, pool, bindings, TraceShared::new(), None).expect("worker");

    let lcfg = LaneConfig {
        // Next hops: as many as the FIB's default table (FibConfig), whose
        // IPv4 next hops take ids from 2^13 up.
        fib: FibCapacity { v4_blocks: 1 << 10, v6_blocks: 1 << 12, nexthops: 1 << 16, ecmp_members: 1 << 10 },
        neigh_to_tern: !linux_mode,
        linux_mode,
        acl_cache_buckets: buckets,
        fwd_memo: fwd_buckets > 0,
        fwd_buckets: fwd_buckets.max(1),
        ..LaneConfig::default()
    };
    let mut lane = LaneProgram::load(&lcfg).expect("lane loads (root, kernel with BPF)");
    lane.attach_fib(&shared.fib.raw(), None).expect("fib mirror");
    let ifs = shared.ifaces.load();
    let tables = tern_control::xdplane::lane_tables(&ifs, acls, &|p| p < ports);
    lane.publish(&tables).expect("publish");
    let mut kif = Vec::new();
    for p in 0..ports {
        let k = tern_xdp::lane::device_ifindex(&format!("l{p}")).expect("veth");
        lane.add_port(p, p, k).expect("port");
        kif.push(k);
    }
    Diff { worker, mem, shared, lane, kif, sets: acls.len(), seen: BTreeMap::new() }
}

/// Counter deltas by "node/error".
fn deltas(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, &v)| {
            let d = v - before.get(k).copied().unwrap_or(0);
            (d != 0).then(|| (k.clone(), d))
        })
        .collect()
}

/// Zeroes the outer IPv4 identification of a GRE frame and recomputes its
/// header checksum (each side numbers its own GRE packets).
pub fn normalize_gre_ident(f: &mut [u8]) {
    if f.len() < 14 {
        return;
    }
    let (et, l3) = if f[12..14] == [0x81, 0x00] && f.len() >= 18 { ([f[16], f[17]], 18) } else { ([f[12], f[13]], 14) };
    if et != [0x08, 0x00] || f.len() < l3 + 20 {
        return;
    }
    let h = &mut f[l3..l3 + 20];
    if h[0] != 0x45 || h[9] != 47 {
        return;
    }
    h[4] = 0;
    h[5] = 0;
    h[10] = 0;
    h[11] = 0;
    let c = super::csum(h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
}

impl Diff {
    /// Replaces the interfaces and rule sets on both sides (as the router
    /// publishes a configuration change): the engine's next batch and the
    /// lane's next packet use the new ones.
    pub fn republish(&mut self, ifs: IfTable, acls: &[RuleSet]) {
        assert_eq!(acls.len(), self.sets, "the harness compares a fixed number of rule sets");
        self.shared.acls.publish(engine_acls(&ifs, acls));
        let ports = self.mem.len() as u16;
        let tables = tern_control::xdplane::lane_tables(&ifs, acls, &|p| p < ports);
        self.shared.ifaces.publish(ifs);
        self.lane.publish(&tables).expect("publish");
    }

    /// Rule hits of set `set` in the lane and in the engine (per rule, then
    /// the default), as counted since the rule set was last replaced.
    pub fn hits(&self, set: usize) -> (Hits, Hits) {
        let engine = self.engine_hits().get(set).cloned().unwrap_or_default();
        (self.lane.acl_hits(set).expect("hits"), engine)
    }

    fn engine_counters(&self) -> BTreeMap<String, u64> {
        let sh = self.worker.shared();
        let s = sh.stats.snapshot();
        sh.graph.errors.iter().zip(&s.errors).map(|(e, n)| (format!("{}/{}", e.node, e.name), *n)).collect()
    }

    fn lane_counters(&self) -> BTreeMap<String, u64> {
        self.lane
            .counters()
            .expect("counters")
            .into_iter()
            .map(|c| (format!("{}/{}", c.desc.node, c.desc.error), c.value))
            .collect()
    }

    fn engine_hits(&self) -> Vec<Vec<(u64, u64)>> {
        let acls = self.shared.acls.load();
        acls.sets.iter().map(|s| s.counters[0].snapshot().into_iter().map(|h| (h.packets, h.bytes)).collect()).collect()
    }

    fn lane_hits(&self) -> Vec<Vec<(u64, u64)>> {
        (0..self.sets).map(|i| self.lane.acl_hits(i).expect("hits")).collect()
    }

    /// Runs `frame`, received on `port`, through both lanes and checks
    /// that they agree. Returns the lane's verdict.
    pub fn run(&mut self, port: u16, frame: &[u8]) -> Verdict {
        // Drivers drop runts; XDP (and BPF_PROG_TEST_RUN) never sees a
        // frame shorter than an Ethernet header.
        if frame.len() < 14 {
            return Verdict::Pass("runt".into());
        }
        let lc0 = self.lane_counters();
        let lh0 = self.lane_hits();
        let tx0: Vec<u64> =
            (0..self.mem.len() as u16).map(|p| self.lane.port_stats(p).expect("stats").tx_packets).collect();
        let (act, out) = self.lane.test_run(frame, self.kif[usize::from(port)], 0).expect("test run");
        let lc = deltas(&lc0, &self.lane_counters());
        let lh1 = self.lane_hits();

        let ec0 = self.engine_counters();
        let eh0 = self.engine_hits();
        assert!(self.mem[usize::from(port)].inject(frame));
        for _ in 0..4 {
            self.worker.run_once();
        }
        let sent: Vec<(u16, Vec<u8>)> = self
            .mem
            .iter()
            .enumerate()
            .flat_map(|(p, h)| h.take_sent().into_iter().map(move |f| (p as u16, f)))
            .collect();
        // The input and rewrite nodes' `acl-shortcut` say which of the
        // engine's two paths through an input or output rule set a packet
        // took (the verdict and rule hits are compared below); the lane has
        // one path.
        let mut ec = deltas(&ec0, &self.engine_counters());
        for node in ["ip4-input", "ip6-input", "ip4-rewrite", "ip6-rewrite"] {
            ec.remove(&format!("{node}/acl-shortcut"));
        }
        let eh1 = self.engine_hits();

        let hex = |f: &[u8]| f.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let ctx = || {
            format!(
                "\nframe on port {port}: {}\nlane action {act}, lane counters {lc:?}\nengine counters {ec:?}\nengine sent {:?}",
                hex(frame),
                sent.iter().map(|(p, f)| (p, hex(f))).collect::<Vec<_>>()
            )
        };
        let named = |kind: CounterKind| -> Vec<String> {
            lc.keys()
                .filter(|k| counters().iter().any(|c| format!("{}/{}", c.node, c.error) == **k && c.kind == kind))
                .cloned()
                .collect()
        };
        let userspace_named: BTreeMap<String, u64> =
            lc.iter().filter(|(k, _)| !k.starts_with("xdp-lane/")).map(|(k, v)| (k.clone(), *v)).collect();
        let hits_delta = |a: &Vec<Vec<(u64, u64)>>, b: &Vec<Vec<(u64, u64)>>| -> Vec<Vec<(u64, u64)>> {
            a.iter().zip(b).map(|(x, y)| x.iter().zip(y).map(|(p, q)| (q.0 - p.0, q.1 - p.1)).collect()).collect()
        };
        let lane_hits = hits_delta(&lh0, &lh1);
        let engine_hits = hits_delta(&eh0, &eh1);

        let verdict = if act == XDP_REDIRECT && lc.contains_key("xdp-lane/forwarded") {
            let tx: Vec<u16> = (0..self.mem.len() as u16)
                .filter(|&p| self.lane.port_stats(p).expect("stats").tx_packets > tx0[usize::from(p)])
                .collect();
            assert_eq!(tx.len(), 1, "one egress port{}", ctx());
            Verdict::Forward(tx[0])
        } else if act == XDP_DROP {
            let d = named(CounterKind::Drop);
            assert_eq!(d.len(), 1, "a drop counts one reason{}", ctx());
            Verdict::Drop(d[0].clone())
        } else {
            let p = named(CounterKind::Punt);
            let pass = named(CounterKind::Pass);
            assert!(act == XDP_PASS, "punts and passes return XDP_PASS here (no XSK){}", ctx());
            // A punt without a socket also counts pass-no-xsk.
            let v = match (p.first(), pass.iter().find(|k| *k != "xdp-lane/pass-no-xsk")) {
                (Some(r), None) => Verdict::Punt(r.clone()),
                (None, Some(r)) => Verdict::Pass(r.clone()),
                _ => panic!("a punt or a pass with one reason{}", ctx()),
            };
            assert_eq!(out, frame, "{} leaves the frame untouched{}", v.kind(), ctx());
            assert!(userspace_named.is_empty(), "the lane counts nothing userspace will count{}", ctx());
            assert!(lane_hits.iter().flatten().all(|h| *h == (0, 0)), "no rule hits on a {}{}", v.kind(), ctx());
            *self.seen.entry(v.clone()).or_default() += 1;
            return v;
        };
        match &verdict {
            Verdict::Forward(p) => {
                assert_eq!(sent.len(), 1, "userspace forwarded exactly one frame{}", ctx());
                assert_eq!(sent[0].0, *p, "same egress port{}", ctx());
                let (mut a, mut b) = (out.clone(), sent[0].1.clone());
                normalize_gre_ident(&mut a);
                normalize_gre_ident(&mut b);
                assert_eq!(hex(&a), hex(&b), "identical frames{}", ctx());
            }
            Verdict::Drop(_) => {
                assert!(sent.is_empty(), "userspace dropped it too{}", ctx());
            }
            _ => {}
        }
        assert_eq!(userspace_named, ec, "same counters{}", ctx());
        assert_eq!(lane_hits, engine_hits, "same rule hits{}", ctx());
        *self.seen.entry(verdict.clone()).or_default() += 1;
        verdict
    }
}
