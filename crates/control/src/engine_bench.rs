//! `tern bench engine`: the full forwarding graph on memory ports, one
//! worker on one core, to measure the engine itself (no kernel, no NIC).
//!
//! The receive port cycles through prebuilt frames (one per flow), copying
//! each into a fresh buffer as a NIC's DMA would; the transmit port counts
//! and frees. Everything between is the production graph: ethernet-input,
//! ip4-input (checksum verified), ip4-lookup (the real FIB), ip4-rewrite
//! (TTL, RFC 1624 checksum update, MACs), interface-output.

use serde::Serialize;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tern_engine::{IdlePolicy, PortBinding, TraceShared, Worker, WorkerConfig};
use tern_fib::{FibConfig, Prefix, RouteAttrs, RouteOp, RouteTarget, Source};
use tern_io::MemPort;
use tern_nodes::state::{IfKind, IfTable, Iface, Shared, V4Net, link_local_from_mac};
use tern_packet::{PacketPool, PoolConfig};

#[derive(Clone, Debug)]
pub struct EngineBenchOpts {
    /// Measured seconds (after one second of warm-up).
    pub seconds: f64,
    /// Distinct flows (destination addresses) cycled through.
    pub flows: u32,
    /// Ethernet frame size without FCS (60 = a 64-byte frame on the wire).
    pub frame_len: usize,
    /// Load this route table (one prefix per line) and send to random
    /// destinations inside its IPv4 prefixes.
    pub routes: Option<PathBuf>,
    /// Pin the measuring thread to this CPU.
    pub cpu: Option<usize>,
}

impl Default for EngineBenchOpts {
    fn default() -> Self {
        EngineBenchOpts { seconds: 5.0, flows: 1, frame_len: 60, routes: None, cpu: None }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct NodeRow {
    pub name: String,
    pub calls: u64,
    pub packets: u64,
    pub packets_per_call: f64,
    pub clocks_per_packet: f64,
    pub ns_per_packet: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct EngineBenchReport {
    pub command: String,
    pub frame_len: usize,
    pub flows: u32,
    pub routes_v4: usize,
    pub cpu: Option<usize>,
    pub seconds: f64,
    pub packets: u64,
    pub mpps: f64,
    pub ns_per_packet: f64,
    pub tsc_ghz: f64,
    pub nodes: Vec<NodeRow>,
    /// Non-zero drop counters (a correct run has none).
    pub drops: Vec<(String, u64)>,
}

impl fmt::Display for EngineBenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "engine: {:.2} Mpps, {:.1} ns/packet ({} packets in {:.2} s; {}-byte frames, {} flow(s), {} IPv4 routes, 1 worker{})",
            self.mpps,
            self.ns_per_packet,
            self.packets,
            self.seconds,
            self.frame_len + 4,
            self.flows,
            self.routes_v4,
            self.cpu.map(|c| format!(" on cpu {c}")).unwrap_or_default()
        )?;
        writeln!(
            f,
            "{:<18} {:>12} {:>14} {:>10} {:>12} {:>10}",
            "node", "calls", "packets", "pkts/call", "clocks/pkt", "ns/pkt"
        )?;
        for n in &self.nodes {
            writeln!(
                f,
                "{:<18} {:>12} {:>14} {:>10.1} {:>12.1} {:>10.2}",
                n.name, n.calls, n.packets, n.packets_per_call, n.clocks_per_packet, n.ns_per_packet
            )?;
        }
        for (name, n) in &self.drops {
            writeln!(f, "DROP {name}: {n}")?;
        }
        Ok(())
    }
}

const MAC_IN: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const MAC_OUT: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
const MAC_GW: [u8; 6] = [0x02, 0, 0, 0, 0, 3];

fn iface(index: u16, name: &str, mac: [u8; 6], addr: Ipv4Addr) -> Iface {
    Iface {
        index,
        name: name.into(),
        kind: IfKind::Port,
        port: index,
        mac,
        mtu: 1500,
        up: true,
        v4: vec![V4Net { addr, len: 24 }],
        v6: vec![],
        v6_ll: link_local_from_mac(mac),
        acl_in: None,
        acl_out: None,
    }
}

/// A UDP/IPv4 frame of `len` bytes (without FCS) to `dst`.
pub fn udp_frame(dst_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let len = len.max(42);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x10]);
    f[12..14].copy_from_slice(&[8, 0]);
    let ip_len = (len - 14) as u16;
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = !tern_wire::checksum::data(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut ip[20..];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// A small deterministic generator (xorshift64*), for reproducible flows.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

pub fn run(opts: &EngineBenchOpts) -> Result<EngineBenchReport, String> {
    if opts.flows == 0 || !(42..=1514).contains(&opts.frame_len) || opts.seconds <= 0.0 {
        return Err("need flows >= 1, frame length 42..=1514 (without FCS) and seconds > 0".into());
    }
    if let Some(cpu) = opts.cpu {
        let mut set = rustix_cpuset(cpu);
        pin(&mut set)?;
    }
    let domain = tern_rcu::Domain::new();
    let (mut fib, reader) = tern_fib::new(FibConfig::default(), domain.clone());
    let gw: IpAddr = "10.0.2.2".parse().map_err(|_| "gw")?;
    let mut ops = vec![
        RouteOp::Add(
            Source::Connected,
            "10.0.1.0/24".parse().map_err(|_| "p")?,
            RouteTarget::Connected { ifindex: 0 },
            RouteAttrs::default(),
        ),
        RouteOp::Add(
            Source::Connected,
            "10.0.2.0/24".parse().map_err(|_| "p")?,
            RouteTarget::Connected { ifindex: 1 },
            RouteAttrs::default(),
        ),
        RouteOp::Add(
            Source::Static,
            "198.18.0.0/15".parse().map_err(|_| "p")?,
            RouteTarget::Via { gw, ifindex: None },
            RouteAttrs::default(),
        ),
    ];
    let mut v4_prefixes: Vec<(u32, u8)> = Vec::new();
    if let Some(path) = &opts.routes {
        let entries = tern_fib::routefile::load(path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (p, _) in entries {
            if let Prefix::V4 { addr, len } = p {
                // Keep the test networks reachable through their own routes.
                v4_prefixes.push((u32::from(addr), len));
                ops.push(RouteOp::Add(
                    Source::Config,
                    p,
                    RouteTarget::Via { gw, ifindex: None },
                    RouteAttrs::default(),
                ));
            }
        }
    }
    let report = fib.apply(ops);
    if report.failed > 0 {
        return Err(format!("{} routes failed to load: {:?}", report.failed, report.errors.first()));
    }
    fib.set_neighbor(1, gw, Some(MAC_GW));

    let ifs = IfTable::new(vec![
        iface(0, "in0", MAC_IN, "10.0.1.1".parse().map_err(|_| "a")?),
        iface(1, "out0", MAC_OUT, "10.0.2.1".parse().map_err(|_| "a")?),
    ]);
    let shared = Shared::new(ifs, reader.clone());

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let frames: Vec<Vec<u8>> = (0..opts.flows)
        .map(|i| {
            let dst = if v4_prefixes.is_empty() {
                Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 1)) + (i % 131_000))
            } else {
                // A random address inside a random prefix of the table,
                // avoiding the local test networks.
                loop {
                    let (a, len) = v4_prefixes[(rng.next() % v4_prefixes.len() as u64) as usize];
                    let host = if len >= 32 { 0 } else { (rng.next() as u32) & (u32::MAX >> len) };
                    let d = Ipv4Addr::from(a | host);
                    if d.octets()[0] != 10 && !d.is_multicast() && d.octets()[0] != 127 && d.octets()[0] != 0 {
                        break d;
                    }
                }
            };
            udp_frame(MAC_IN, Ipv4Addr::new(10, 0, 1, 2), dst, 1024 + (i % 50000) as u16, 5001, opts.frame_len)
        })
        .collect();
    let source = MemPort::generator("gen", &frames, None).ok_or("no templates")?;
    let mut sink = MemPort::new("sink");
    sink.count_tx_only();

    let inject = Arc::new(crossbeam_queue::ArrayQueue::new(16));
    let built = tern_nodes::build_graph(&shared, inject).map_err(|e| e.to_string())?;
    let pool = PacketPool::new(PoolConfig { frames: 8192, ..PoolConfig::default() }).map_err(|e| e.to_string())?;
    let mut worker = Worker::new(
        WorkerConfig { id: 0, cpu: None, idle: IdlePolicy::Spin, input_node: built.input },
        built.graph,
        pool,
        vec![PortBinding { port: Box::new(source), ifindex: 0 }, PortBinding { port: Box::new(sink), ifindex: 1 }],
        TraceShared::new(),
        Some(domain.register()),
    )
    .map_err(|e| e.to_string())?;

    let shared_w = Arc::clone(worker.shared());
    let tsc = tern_intrin::tsc_per_ns();
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs(1) {
        for _ in 0..64 {
            worker.run_once();
        }
    }
    let before = shared_w.stats.snapshot();
    let t0 = Instant::now();
    let limit = Duration::from_secs_f64(opts.seconds);
    while t0.elapsed() < limit {
        for _ in 0..256 {
            worker.run_once();
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let after = shared_w.stats.snapshot();
    let packets = after.ports[1].tx_packets - before.ports[1].tx_packets;
    let info = &shared_w.graph;
    let mut nodes = Vec::new();
    for (i, n) in info.nodes.iter().enumerate() {
        let calls = after.nodes[i][0] - before.nodes[i][0];
        let pk = after.nodes[i][1] - before.nodes[i][1];
        let clocks = after.nodes[i][2] - before.nodes[i][2];
        if pk == 0 {
            continue;
        }
        nodes.push(NodeRow {
            name: n.name.to_string(),
            calls,
            packets: pk,
            packets_per_call: pk as f64 / calls.max(1) as f64,
            clocks_per_packet: clocks as f64 / pk as f64,
            ns_per_packet: clocks as f64 / tsc / pk as f64,
        });
    }
    let drops = info
        .errors
        .iter()
        .zip(after.errors.iter().zip(&before.errors))
        .filter(|(e, (a, b))| e.kind == tern_engine::ErrorKind::Drop && *a > *b)
        .map(|(e, (a, b))| (format!("{}/{}", e.node, e.name), a - b))
        .collect();
    Ok(EngineBenchReport {
        command: String::new(),
        frame_len: opts.frame_len,
        flows: opts.flows,
        routes_v4: v4_prefixes.len() + 3,
        cpu: opts.cpu,
        seconds: secs,
        packets,
        mpps: packets as f64 / secs / 1e6,
        ns_per_packet: secs * 1e9 / packets.max(1) as f64,
        tsc_ghz: tsc,
        nodes,
        drops,
    })
}

fn rustix_cpuset(cpu: usize) -> rustix::thread::CpuSet {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    set
}

fn pin(set: &mut rustix::thread::CpuSet) -> Result<(), String> {
    rustix::thread::sched_setaffinity(None, set).map_err(|e| format!("cannot pin to the CPU: {e}"))
}
