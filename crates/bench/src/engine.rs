//! `tern-bench engine`: the full forwarding graph on memory ports, one
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
use tern_nodes::state::{AclSet, AclTable, GreTunnel, IfKind, IfTable, Iface, Shared, V4Net};
use tern_packet::{PacketPool, PoolConfig};

/// A named setup from SCENARIOS.md (the 100GE comparison), measured next
/// to plain forwarding in the same run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// One flow, no firewall, a handful of routes.
    Plain,
    /// Plain forwarding's IPv6 counterpart: one UDP/IPv6 flow (frames of
    /// at least 62 bytes) to 2001:db8:18::1 through a resolved gateway.
    Plain6,
    /// One destination, one port pair; 50 drop rules (src 1.1.N.1), default accept.
    #[serde(rename = "single-flow-50fw")]
    SingleFlow50fw,
    /// single-flow-50fw's rules as the transmitting interface's output
    /// rule set instead of the input's: what an egress firewall costs.
    #[serde(rename = "single-flow-50fw-out")]
    SingleFlow50fwOut,
    /// plain6's flow with [`tern_acl::scenario_50_drop_rules_v6`] on the
    /// receiving interface: the IPv6 firewall against plain6.
    #[serde(rename = "single-flow6-50fw")]
    SingleFlow6_50fw,
    /// single-flow6-50fw's rules as the transmitting interface's output
    /// rule set: the IPv6 egress firewall against plain6.
    #[serde(rename = "single-flow6-50fw-out")]
    SingleFlow6_50fwOut,
    /// single-flow6-50fw's rules and destination with random ports: 1024
    /// flows, each packet's key its own.
    #[serde(rename = "multi-flow6-50fw")]
    MultiFlow6_50fw,
    /// Random destinations in one /24, many ports; 50 rules; every packet
    /// GRE-encapsulated to a static tunnel remote.
    GreMultiFlow,
    /// Plain forwarding's one flow, no firewall, routed into the GRE
    /// tunnel: the cost of encapsulation alone against plain.
    Gre,
    /// 254 destinations inside the full table's prefixes, random ports;
    /// 50 rules; the full table loaded.
    #[serde(rename = "900k-routes-50fw")]
    Routes900k50fw,
    /// One destination, random ports; default deny, 50 rules accepting half.
    DropTest,
    /// Like single-flow-50fw with 10,000 synthetic ClassBench-like rules
    /// that the traffic does not match.
    #[serde(rename = "acl-10k")]
    Acl10k,
    /// Plain forwarding's one flow routed into an IPsec tunnel: ESP
    /// encryption with AES-128-GCM (`--frame-len` is the inner frame's
    /// size: 1432 for the seed's 1418-byte payload).
    IpsecEncryptGcm,
    /// The same with AES-128-CBC + HMAC-SHA1-96.
    IpsecEncryptCbc,
    /// ESP to the router (AES-128-GCM), prebuilt with tern-ipsec, decrypted
    /// and the inner packet forwarded (anti-replay off: the generator
    /// sends the same sequence numbers again and again).
    IpsecDecryptGcm,
    /// The same with AES-128-CBC + HMAC-SHA1-96.
    IpsecDecryptCbc,
}

impl Scenario {
    pub const ALL: [Scenario; 16] = [
        Scenario::Plain,
        Scenario::Plain6,
        Scenario::SingleFlow50fw,
        Scenario::SingleFlow50fwOut,
        Scenario::SingleFlow6_50fw,
        Scenario::SingleFlow6_50fwOut,
        Scenario::MultiFlow6_50fw,
        Scenario::Gre,
        Scenario::GreMultiFlow,
        Scenario::Routes900k50fw,
        Scenario::DropTest,
        Scenario::Acl10k,
        Scenario::IpsecEncryptGcm,
        Scenario::IpsecEncryptCbc,
        Scenario::IpsecDecryptGcm,
        Scenario::IpsecDecryptCbc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Plain => "plain",
            Scenario::Plain6 => "plain6",
            Scenario::SingleFlow50fw => "single-flow-50fw",
            Scenario::SingleFlow50fwOut => "single-flow-50fw-out",
            Scenario::SingleFlow6_50fw => "single-flow6-50fw",
            Scenario::SingleFlow6_50fwOut => "single-flow6-50fw-out",
            Scenario::MultiFlow6_50fw => "multi-flow6-50fw",
            Scenario::GreMultiFlow => "gre-multi-flow",
            Scenario::Gre => "gre",
            Scenario::Routes900k50fw => "900k-routes-50fw",
            Scenario::DropTest => "drop-test",
            Scenario::Acl10k => "acl-10k",
            Scenario::IpsecEncryptGcm => "ipsec-encrypt-gcm",
            Scenario::IpsecEncryptCbc => "ipsec-encrypt-cbc",
            Scenario::IpsecDecryptGcm => "ipsec-decrypt-gcm",
            Scenario::IpsecDecryptCbc => "ipsec-decrypt-cbc",
        }
    }

    pub fn parse(s: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|x| x.name() == s)
    }
}

#[derive(Clone, Debug)]
pub struct EngineBenchOpts {
    /// Measured seconds per setup (after one second of warm-up).
    pub seconds: f64,
    /// Distinct flows for the plain setup.
    pub flows: u32,
    /// Ethernet frame size without FCS (60 = a 64-byte frame on the wire).
    pub frame_len: usize,
    /// Route table for `--routes` and the 900k scenario.
    pub routes: Option<PathBuf>,
    /// Pin the measuring thread to this CPU.
    pub cpu: Option<usize>,
    /// Scenarios to measure after the plain baseline (empty: plain only).
    pub scenarios: Vec<Scenario>,
    /// Measure a fixed number of packets instead of `seconds` (for
    /// instruction counts under callgrind: `--packets 1000000`).
    pub packets: Option<u64>,
    /// Workers, each on its own CPU with its own memory ports, sharing
    /// the tables (1: the classic one-core figure).
    pub workers: usize,
    /// Pad the pool's frames by a cache line (the router's layout where no
    /// AF_XDP socket shares the pool); false: frames at 2048-byte strides,
    /// the AF_XDP UMEM layout.
    pub pad_frames: bool,
    /// The IPsec scenarios install this many more SAs beside theirs
    /// (distinct SPIs and keys, bound to no tunnel): the SA tables at the
    /// scale of a million tunnels, the packets still on SAs 1 and 2.
    pub extra_sas: u32,
    /// The IPsec scenarios spread their packets over this many SAs (0: the
    /// one tunnel's SA 1 or 2): one frame per SA in a shuffled order, each
    /// the traffic of one remote-access client of a multipoint tunnel
    /// (virtual IPs from 100.64.0.0/10; `esp-encrypt` picks each packet's
    /// SA by inner destination, `esp-decrypt` by SPI and checks the inner
    /// source), so every packet's SA lookup, key schedule and counters are
    /// likely cold at large spreads. Every one of the `extra_sas` (raised
    /// to at least `spread`) is a client of that tunnel, in its client map,
    /// and the `spread` SAs carrying traffic are a sample spaced evenly over
    /// them: `--extra-sas 0` against `--extra-sas 1000000` with the same
    /// `--spread K` compares K SAs' traffic with only those K installed and
    /// with a million.
    pub spread: u32,
    /// IPsec spread: frames in a row on each SA before the next (a
    /// tunnel's burst; 1: every packet on another SA, the worst case).
    pub burst: u32,
}

impl Default for EngineBenchOpts {
    fn default() -> Self {
        EngineBenchOpts {
            seconds: 5.0,
            flows: 1,
            frame_len: 60,
            routes: None,
            cpu: None,
            scenarios: Vec::new(),
            packets: None,
            workers: 1,
            pad_frames: true,
            extra_sas: 0,
            spread: 0,
            burst: 1,
        }
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

/// One measured setup.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub scenario: Scenario,
    pub flows: usize,
    pub routes_v4: usize,
    pub acl_rules: usize,
    /// Workers that measured together; the packet counts are their sum.
    pub workers: usize,
    /// Each worker's own rate (Mpps).
    pub per_worker_mpps: Vec<f64>,
    pub seconds: f64,
    /// Packets received and processed (forwarded or dropped by design).
    pub packets: u64,
    pub forwarded: u64,
    pub mpps: f64,
    /// Packets per second of the workers' own CPU time (Mpps): what a core
    /// of their own would do, when other processes share the machine.
    pub mpps_per_cpu: f64,
    /// CPU time per packet: wall time x workers / packets.
    pub ns_per_packet: f64,
    /// This setup's ns/packet over plain forwarding's, same run.
    pub cost_vs_plain: f64,
    pub nodes: Vec<NodeRow>,
    /// Packets the rule set's counters decided (every rule and the
    /// default, warm-up included; 0 without a rule set).
    pub rule_hits: u64,
    /// Drop counters other than the firewall's intended ones.
    pub drops: Vec<(String, u64)>,
    /// IPsec scenarios: the SAs installed, those the traffic was spread
    /// over (0: the tunnel's one SA) and how many of those counted at
    /// least one packet (every one, when the run covered the frames once).
    pub sas_installed: usize,
    pub spread: u32,
    /// IPsec spread: frames in a row on each SA.
    pub burst: u32,
    pub spread_sas_used: u32,
    /// The process's memory on transparent huge pages after the run
    /// (`AnonHugePages`; None where /proc does not say): the heap that
    /// holds the SAs is on them when the allocator advised it and the
    /// kernel found the pages (`tern_intrin::alloc`).
    pub huge_page_bytes: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EngineBenchReport {
    pub command: String,
    pub frame_len: usize,
    pub cpu: Option<usize>,
    pub workers: usize,
    pub tsc_ghz: f64,
    pub runs: Vec<Run>,
}

impl fmt::Display for EngineBenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "tern-bench engine: {}-byte frames, {} worker{}{}, memory ports (rx copies each frame into a buffer)",
            self.frame_len + 4,
            self.workers,
            if self.workers == 1 { "" } else { "s" },
            self.cpu.map(|c| format!(" from cpu {c}")).unwrap_or_default()
        )?;
        writeln!(
            f,
            "{:<18} {:>7} {:>9} {:>6} {:>9} {:>8} {:>10} {:>10}",
            "scenario", "flows", "routes", "rules", "Mpps", "ns/pkt", "vs plain", "Mpps/cpu"
        )?;
        for r in &self.runs {
            writeln!(
                f,
                "{:<18} {:>7} {:>9} {:>6} {:>9.2} {:>8.1} {:>9.2}x {:>10.2}",
                r.scenario.name(),
                r.flows,
                r.routes_v4,
                r.acl_rules,
                r.mpps,
                r.ns_per_packet,
                r.cost_vs_plain,
                r.mpps_per_cpu
            )?;
        }
        for r in self.runs.iter().filter(|r| r.spread > 0) {
            writeln!(
                f,
                "{:<18} spread over {} SAs of {} installed (clients of a multipoint tunnel), {} packet{} a burst: {} of them carried packets; {} on huge pages",
                r.scenario.name(),
                r.spread,
                r.sas_installed,
                r.burst,
                if r.burst == 1 { "" } else { "s" },
                r.spread_sas_used,
                r.huge_page_bytes.map_or_else(|| "unknown".to_owned(), |b| format!("{} MiB", b >> 20))
            )?;
        }
        if self.workers > 1 {
            for r in &self.runs {
                let each: Vec<String> = r.per_worker_mpps.iter().map(|m| format!("{m:.2}")).collect();
                writeln!(f, "{:<18} Mpps per worker: {}", r.scenario.name(), each.join(", "))?;
            }
        }
        for r in &self.runs {
            writeln!(f)?;
            writeln!(f, "{}: per node", r.scenario.name())?;
            writeln!(
                f,
                "  {:<18} {:>12} {:>14} {:>10} {:>12} {:>10}",
                "node", "calls", "packets", "pkts/call", "clocks/pkt", "ns/pkt"
            )?;
            for n in &r.nodes {
                writeln!(
                    f,
                    "  {:<18} {:>12} {:>14} {:>10.1} {:>12.1} {:>10.2}",
                    n.name, n.calls, n.packets, n.packets_per_call, n.clocks_per_packet, n.ns_per_packet
                )?;
            }
            for (name, n) in &r.drops {
                writeln!(f, "  DROP {name}: {n}")?;
            }
        }
        Ok(())
    }
}

const MAC_IN: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const MAC_OUT: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
const MAC_GW: [u8; 6] = [0x02, 0, 0, 0, 0, 3];

fn iface(index: u16, name: &str, mac: [u8; 6], addr: Ipv4Addr) -> Iface {
    Iface { v4: vec![V4Net { addr, len: 24 }], ..Iface::new(index, name, IfKind::Port, index, mac) }
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

/// A UDP/IPv6 frame of `len` bytes (without FCS, at least 62) from
/// 2001:db8:1::2 to `dst`.
pub fn udp6_frame(dst_mac: [u8; 6], dst: std::net::Ipv6Addr, sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let len = len.max(62);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x10]);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let payload = (len - 14 - 40) as u16;
    let ip = &mut f[14..];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&payload.to_be_bytes());
    ip[6] = 17;
    ip[7] = 64;
    ip[8..24].copy_from_slice(&std::net::Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2).octets());
    ip[24..40].copy_from_slice(&dst.octets());
    let udp = &mut ip[40..];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&payload.to_be_bytes());
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

/// What one setup needs.
struct Setup {
    scenario: Scenario,
    frames: Vec<Vec<u8>>,
    routes: Vec<(u32, u8)>,
    acl: Option<tern_acl::RuleSet>,
    gre: bool,
    /// An IPsec tunnel (interface 2, SA 1 out, SA 2 in): (CBC + HMAC-SHA1
    /// rather than GCM, traffic to decrypt rather than to encrypt).
    ipsec: Option<(bool, bool)>,
    /// IPsec: the multipoint tunnel's clients the frames are spread over
    /// (0: the point-to-point tunnel), see [`EngineBenchOpts::spread`].
    spread: u32,
}

/// The benchmark's SAs: id 1 encrypts, id 2 decrypts (anti-replay off).
fn bench_sa(id: u32, cbc: bool) -> Result<tern_ipsec::SaConfig, String> {
    let (cipher, integ, key, integ_key) = if cbc {
        ("aes-128-cbc", "hmac-sha1-96", vec![0x11u8; 16], vec![0x22u8; 20])
    } else {
        ("aes-128-gcm", "none", vec![0x33u8; 20], Vec::new())
    };
    Ok(tern_ipsec::SaConfig {
        id,
        spi: 0x1000 + id,
        cipher: cipher.parse().map_err(|e| format!("{e}"))?,
        integ: integ.parse().map_err(|e| format!("{e}"))?,
        key: tern_ipsec::Key::new(key),
        integ_key: tern_ipsec::Key::new(integ_key),
        esn: false,
        replay_window: 0,
        udp_encap: None,
        soft: tern_ipsec::Lifetime::default(),
        hard: tern_ipsec::Lifetime::default(),
    })
}

/// SA `id` beyond the first two (`--extra-sas`): its own SPI and key.
fn extra_sa(id: u32, cbc: bool) -> Result<tern_ipsec::SaConfig, String> {
    let mut c = bench_sa(id, cbc)?;
    c.key = tern_ipsec::Key::new(id.to_be_bytes().iter().cycle().take(c.key.len()).copied().collect());
    Ok(c)
}

/// The first spread SA's id (the extra SAs start after SAs 1 and 2).
const SPREAD_FIRST_SA: u32 = 3;

/// Spread client `i`'s virtual IP (100.64.0.0/10: room for 4M clients).
fn spread_vip(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 0, 0)) + (i & 0x3f_ffff))
}

/// `0..n` shuffled (Fisher-Yates): the spread frames' order, so that
/// consecutive packets' SAs are not neighbours in memory.
fn shuffled(n: u32, rng: &mut Rng) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n).collect();
    for i in (1..v.len()).rev() {
        v.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    v
}

/// The multipoint tunnel's clients under `--spread`: every extra SA.
fn spread_client_count(opts: &EngineBenchOpts) -> u32 {
    opts.extra_sas.max(opts.spread)
}

/// The clients carrying traffic: `opts.spread` of [`spread_client_count`],
/// spaced evenly (client `j * clients / spread`), in a shuffled order, each
/// `opts.burst` times in a row.
fn spread_sample(opts: &EngineBenchOpts, rng: &mut Rng) -> Vec<u32> {
    let (n, k) = (u64::from(spread_client_count(opts)), u64::from(opts.spread.max(1)));
    let burst = opts.burst.max(1) as usize;
    shuffled(opts.spread, rng)
        .into_iter()
        .flat_map(|j| std::iter::repeat_n((u64::from(j) * n / k) as u32, burst))
        .collect()
}

/// ESP from the tunnel's remote (10.0.2.2) to 10.0.2.1 carrying `inner`
/// (an IPv4 packet), encrypted on SA 2 with sequence number `seq`.
fn esp_frame(cbc: bool, inner: &[u8], seq: u64) -> Result<Vec<u8>, String> {
    esp_frame_on(bench_sa(2, cbc)?, inner, seq)
}

/// ESP from 10.0.2.2 to 10.0.2.1 carrying `inner` on the SA of `cfg`.
fn esp_frame_on(cfg: tern_ipsec::SaConfig, inner: &[u8], seq: u64) -> Result<Vec<u8>, String> {
    let sa = tern_ipsec::Sa::new(cfg, 1, Instant::now()).map_err(|e| e.to_string())?;
    let h = sa.header_len();
    let mut esp = vec![0u8; h + inner.len() + sa.trailer_len(inner.len())];
    esp.get_mut(h..h + inner.len()).ok_or("room")?.copy_from_slice(inner);
    let n = sa.encrypt(&mut esp, inner.len(), 4, seq).map_err(|e| e.to_string())?;
    esp.truncate(n);
    let mut f = vec![0u8; 14 + 20];
    f[0..6].copy_from_slice(&MAC_IN);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x10]);
    f[12..14].copy_from_slice(&[8, 0]);
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + n) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 50;
    ip[12..16].copy_from_slice(&[10, 0, 2, 2]);
    ip[16..20].copy_from_slice(&[10, 0, 2, 1]);
    let c = !tern_wire::checksum::data(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&esp);
    Ok(f)
}

fn load_v4_routes(path: &std::path::Path) -> Result<Vec<(u32, u8)>, String> {
    let entries = tern_fib::routefile::load(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(entries
        .into_iter()
        .filter_map(|(p, _)| match p {
            Prefix::V4 { addr, len } => Some((u32::from(addr), len)),
            Prefix::V6 { .. } => None,
        })
        .collect())
}

/// Random addresses inside random prefixes of `routes`, avoiding the
/// bench's own networks and special ranges.
fn covered_destinations(routes: &[(u32, u8)], n: usize, rng: &mut Rng) -> Vec<Ipv4Addr> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n && !routes.is_empty() {
        let (a, len) = routes[(rng.next() % routes.len() as u64) as usize];
        let host = if len >= 32 { 0 } else { (rng.next() as u32) & (u32::MAX >> len) };
        let d = Ipv4Addr::from(a | host);
        let o = d.octets()[0];
        if o != 10 && o != 127 && o != 0 && !d.is_multicast() && !d.is_broadcast() && o < 224 {
            out.push(d);
        }
    }
    out
}

fn setup(sc: Scenario, opts: &EngineBenchOpts, table: &mut Option<Vec<(u32, u8)>>) -> Result<Setup, String> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let src = Ipv4Addr::new(10, 0, 1, 2);
    let len = opts.frame_len;
    let frame = |dst: Ipv4Addr, sport: u16, dport: u16| udp_frame(MAC_IN, src, dst, sport, dport, len);
    let fifty = Some(tern_acl::scenario_50_drop_rules());
    Ok(match sc {
        Scenario::Plain => {
            let routes = match &opts.routes {
                Some(p) => load_v4_routes(p)?,
                None => Vec::new(),
            };
            let frames = if routes.is_empty() {
                (0..opts.flows)
                    .map(|i| {
                        frame(
                            Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 1)) + (i % 131_000)),
                            1024 + (i % 50000) as u16,
                            5001,
                        )
                    })
                    .collect()
            } else {
                covered_destinations(&routes, opts.flows as usize, &mut rng)
                    .into_iter()
                    .enumerate()
                    .map(|(i, d)| frame(d, 1024 + (i % 50000) as u16, 5001))
                    .collect()
            };
            Setup { scenario: sc, frames, routes, acl: None, gre: false, ipsec: None, spread: 0 }
        }
        Scenario::Plain6 | Scenario::SingleFlow6_50fw | Scenario::SingleFlow6_50fwOut => Setup {
            scenario: sc,
            frames: vec![udp6_frame(
                MAC_IN,
                std::net::Ipv6Addr::new(0x2001, 0xdb8, 0x18, 0, 0, 0, 0, 1),
                1024,
                5001,
                len,
            )],
            routes: Vec::new(),
            acl: if sc == Scenario::Plain6 { None } else { Some(tern_acl::scenario_50_drop_rules_v6()) },
            gre: false,
            ipsec: None,
            spread: 0,
        },
        Scenario::MultiFlow6_50fw => Setup {
            scenario: sc,
            frames: (0..1024)
                .map(|_| {
                    udp6_frame(
                        MAC_IN,
                        std::net::Ipv6Addr::new(0x2001, 0xdb8, 0x18, 0, 0, 0, 0, 1),
                        (rng.next() % 60000 + 1024) as u16,
                        (rng.next() % 60000 + 1024) as u16,
                        len,
                    )
                })
                .collect(),
            routes: Vec::new(),
            acl: Some(tern_acl::scenario_50_drop_rules_v6()),
            gre: false,
            ipsec: None,
            spread: 0,
        },
        Scenario::SingleFlow50fw | Scenario::SingleFlow50fwOut => Setup {
            scenario: sc,
            frames: vec![frame(Ipv4Addr::new(198, 18, 0, 1), 1024, 5001)],
            routes: Vec::new(),
            acl: fifty,
            gre: false,
            ipsec: None,
            spread: 0,
        },
        Scenario::GreMultiFlow => Setup {
            scenario: sc,
            frames: (0..1024)
                .map(|_| {
                    frame(
                        Ipv4Addr::new(198, 18, 5, (rng.next() % 254 + 1) as u8),
                        (rng.next() % 60000 + 1024) as u16,
                        (rng.next() % 60000 + 1024) as u16,
                    )
                })
                .collect(),
            routes: Vec::new(),
            acl: fifty,
            gre: true,
            ipsec: None,
            spread: 0,
        },
        Scenario::Gre => Setup {
            scenario: sc,
            frames: vec![frame(Ipv4Addr::new(198, 18, 0, 1), 1024, 5001)],
            routes: Vec::new(),
            acl: None,
            gre: true,
            ipsec: None,
            spread: 0,
        },
        Scenario::IpsecEncryptGcm | Scenario::IpsecEncryptCbc => Setup {
            scenario: sc,
            frames: if opts.spread == 0 {
                vec![frame(Ipv4Addr::new(198, 18, 0, 1), 1024, 5001)]
            } else {
                // Frames to each sampled client's virtual IP.
                spread_sample(opts, &mut rng).into_iter().map(|i| frame(spread_vip(i), 1024, 5001)).collect()
            },
            routes: Vec::new(),
            acl: None,
            gre: false,
            ipsec: Some((sc == Scenario::IpsecEncryptCbc, false)),
            spread: opts.spread,
        },
        Scenario::IpsecDecryptGcm | Scenario::IpsecDecryptCbc => {
            let cbc = sc == Scenario::IpsecDecryptCbc;
            // The inner packet from the far side to the bench network.
            let inner_from = |src| udp_frame(MAC_IN, src, Ipv4Addr::new(198, 18, 0, 1), 1024, 5001, len);
            let frames = if opts.spread == 0 {
                vec![esp_frame(cbc, inner_from(Ipv4Addr::new(10, 9, 0, 5)).get(14..).ok_or("frame")?, 1)?]
            } else {
                // Frames on each sampled client's inbound SA, from its
                // virtual IP (a burst: the same frame again, anti-replay
                // is off).
                let mut frames: Vec<Vec<u8>> = Vec::new();
                let mut last = None;
                for i in spread_sample(opts, &mut rng) {
                    let f = match frames.last() {
                        Some(f) if last == Some(i) => f.clone(),
                        _ => {
                            let inner = inner_from(spread_vip(i));
                            esp_frame_on(extra_sa(SPREAD_FIRST_SA + i, cbc)?, inner.get(14..).ok_or("frame")?, 1)?
                        }
                    };
                    frames.push(f);
                    last = Some(i);
                }
                frames
            };
            Setup {
                scenario: sc,
                frames,
                routes: Vec::new(),
                acl: None,
                gre: false,
                ipsec: Some((cbc, true)),
                spread: opts.spread,
            }
        }
        Scenario::Routes900k50fw => {
            if table.is_none() {
                let p = opts.routes.clone().unwrap_or_else(|| PathBuf::from("../shared/data/full-table-2025.txt.gz"));
                *table = Some(load_v4_routes(&p)?);
            }
            let routes = table.clone().unwrap_or_default();
            let dsts = covered_destinations(&routes, 254, &mut rng);
            let frames = (0..1024)
                .map(|i| {
                    frame(
                        dsts[i % dsts.len().max(1)],
                        (rng.next() % 60000 + 1024) as u16,
                        (rng.next() % 60000 + 1024) as u16,
                    )
                })
                .collect();
            Setup { scenario: sc, frames, routes, acl: fifty, gre: false, ipsec: None, spread: 0 }
        }
        Scenario::DropTest => Setup {
            scenario: sc,
            frames: (0..1024)
                .map(|_| frame(Ipv4Addr::new(198, 18, 0, 1), 1024, (rng.next() & 0xffff) as u16))
                .collect(),
            routes: Vec::new(),
            acl: Some(tern_acl::scenario_drop_test()),
            gre: false,
            ipsec: None,
            spread: 0,
        },
        Scenario::Acl10k => {
            let mut set = tern_acl::synth::classbench(10_000, 7, false);
            set.default = tern_acl::Action::Accept;
            // The bench traffic must pass: refuse rules that would drop it.
            let probe =
                tern_acl::PacketKey::v4(src, Ipv4Addr::new(198, 18, 0, 1), 17).with_ports(1024, 5001).with_ifs(0, 0);
            let first = tern_acl::linear::evaluate(&set, &tern_acl::synth::ifindex, &probe);
            if first.action == tern_acl::Action::Drop {
                set.rules.retain(|r| r.action != tern_acl::RuleAction::Drop);
            }
            Setup {
                scenario: sc,
                frames: vec![frame(Ipv4Addr::new(198, 18, 0, 1), 1024, 5001)],
                routes: Vec::new(),
                acl: Some(set),
                gre: false,
                ipsec: None,
                spread: 0,
            }
        }
    })
}

fn measure(su: &Setup, opts: &EngineBenchOpts) -> Result<Run, String> {
    let domain = tern_rcu::Domain::new();
    let (mut fib, reader) = tern_fib::new(FibConfig::default(), domain.clone());
    let gw: IpAddr = "10.0.2.2".parse().map_err(|_| "gw")?;
    let gw6: IpAddr = "2001:db8:2::2".parse().map_err(|_| "gw6")?;
    let p = |s: &str| s.parse::<Prefix>().map_err(|e| e.to_string());
    let into_tunnel = su.gre || su.ipsec.is_some_and(|(_, decrypt)| !decrypt);
    let bench_net =
        if into_tunnel { RouteTarget::Connected { ifindex: 2 } } else { RouteTarget::Via { gw, ifindex: None } };
    let mut ops = vec![
        RouteOp::Add(
            Source::Connected,
            p("10.0.1.0/24")?,
            RouteTarget::Connected { ifindex: 0 },
            RouteAttrs::default(),
        ),
        RouteOp::Add(
            Source::Connected,
            p("10.0.2.0/24")?,
            RouteTarget::Connected { ifindex: 1 },
            RouteAttrs::default(),
        ),
        RouteOp::Add(Source::Local, p("10.0.2.1/32")?, RouteTarget::Local { ifindex: 1 }, RouteAttrs::default()),
        RouteOp::Add(Source::Static, p("198.18.0.0/15")?, bench_net, RouteAttrs::default()),
        // The spread clients' virtual IPs: into the (multipoint) tunnel.
        RouteOp::Add(Source::Static, p("100.64.0.0/10")?, RouteTarget::Connected { ifindex: 2 }, RouteAttrs::default()),
        RouteOp::Add(
            Source::Connected,
            p("2001:db8:2::/64")?,
            RouteTarget::Connected { ifindex: 1 },
            RouteAttrs::default(),
        ),
        RouteOp::Add(
            Source::Static,
            p("2001:db8:18::/48")?,
            RouteTarget::Via { gw: gw6, ifindex: None },
            RouteAttrs::default(),
        ),
    ];
    for &(a, len) in &su.routes {
        let prefix = Prefix::V4 { addr: Ipv4Addr::from(a), len };
        ops.push(RouteOp::Add(Source::Config, prefix, RouteTarget::Via { gw, ifindex: None }, RouteAttrs::default()));
    }
    let report = fib.apply(ops);
    if report.failed > 0 {
        return Err(format!("{} routes failed to load: {:?}", report.failed, report.errors.first()));
    }
    fib.set_neighbor(1, gw, Some(MAC_GW));
    fib.set_neighbor(1, gw6, Some(MAC_GW));

    let mut in0 = iface(0, "in0", MAC_IN, "10.0.1.1".parse().map_err(|_| "a")?);
    let mut out0 = iface(1, "out0", MAC_OUT, "10.0.2.1".parse().map_err(|_| "a")?);
    let mut ifs = vec![];
    let mut acl_table = AclTable::default();
    let mut acl_rules = 0;
    if let Some(set) = &su.acl {
        let names = |n: &str| match n {
            "in0" => Some(0),
            "out0" => Some(1),
            other => tern_acl::synth::ifindex(other),
        };
        let classifier = tern_acl::compile(set, &names).map_err(|e| e.to_string())?;
        acl_rules = classifier.rule_count();
        let counters = vec![tern_acl::RuleCounters::for_classifier(&classifier)];
        acl_table.sets.push(AclSet { name: set.name.clone(), classifier, counters });
        if matches!(su.scenario, Scenario::SingleFlow50fwOut | Scenario::SingleFlow6_50fwOut) {
            out0.acl_out = Some(0);
        } else {
            in0.acl_in = Some(0);
        }
    }
    ifs.push(in0);
    ifs.push(out0);
    if su.gre {
        let t = GreTunnel { local: "10.0.2.1".parse().map_err(|_| "a")?, remote: gw, key: None, ttl: 64 };
        let mut g = iface(2, "gre0", [2, 0x67, 0x72, 0x65, 0, 2], "192.168.255.1".parse().map_err(|_| "a")?);
        g.kind = IfKind::Gre(t);
        g.port = tern_nodes::state::NO_IF;
        g.mtu = 1476;
        ifs.push(g);
        // As the router does: the FIB stacks the tunnel on its remote.
        fib.tunnel_set(2, gw);
    }
    // The SA database lives as long as the run (the workers read it).
    let mut sadb = tern_ipsec::SaDb::with_workers(opts.workers.max(1));
    let mut spread_clients = None;
    if let Some((cbc, _)) = su.ipsec {
        sadb.add_batch(vec![bench_sa(1, cbc)?, bench_sa(2, cbc)?]).map_err(|e| e.to_string())?;
        sadb.publish();
        // The rest of a large table, 100,000 a publication (as the API).
        let mut next = SPREAD_FIRST_SA;
        let end = SPREAD_FIRST_SA.saturating_add(opts.extra_sas.max(su.spread));
        while next < end {
            let upto = end.min(next.saturating_add(100_000));
            let batch = (next..upto).map(|id| extra_sa(id, cbc)).collect::<Result<Vec<_>, String>>()?;
            sadb.add_batch(batch).map_err(|e| e.to_string())?;
            sadb.publish();
            next = upto;
        }
        // Spread: a multipoint tunnel whose client i has virtual IP
        // spread_vip(i), outer address the gateway, SA 3 + i both ways
        // (each run uses one direction); every extra SA is a client.
        if su.spread > 0 {
            let mut clients = tern_nodes::state::IpsecClients::default();
            for i in 0..spread_client_count(opts) {
                let (vip, sa) = (IpAddr::V4(spread_vip(i)), SPREAD_FIRST_SA + i);
                clients.insert_client(2, vip, tern_nodes::state::IpsecClient { sa_out: sa, remote: gw });
                clients.insert_sa(sa, 2, vip);
            }
            spread_clients = Some(clients);
        }
        let t = tern_nodes::state::IpsecTunnel {
            local: "10.0.2.1".parse().map_err(|_| "a")?,
            remote: if su.spread > 0 { IpAddr::V4(Ipv4Addr::UNSPECIFIED) } else { gw },
            sa_out: 1,
            sa_in: vec![2],
            ttl: 64,
        };
        let mut g = iface(2, "ipsec0", [2, 0x65, 0x73, 0x70, 0, 2], "192.168.254.1".parse().map_err(|_| "a")?);
        g.kind = IfKind::Ipsec(t);
        g.port = tern_nodes::state::NO_IF;
        g.mtu = 1438;
        ifs.push(g);
        fib.tunnel_set(2, gw);
    }
    let mut shared = Shared::new(IfTable::new(ifs), reader);
    shared.sas = sadb.reader();
    if let Some(c) = spread_clients {
        shared.ipsec_clients.publish(c);
    }
    shared.acls.publish(acl_table);

    let workers = opts.workers.max(1);
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let first_cpu = opts.cpu.unwrap_or(0);
    let start = std::sync::Barrier::new(workers);
    // One worker per thread, each with its own memory ports, packet pool
    // and graph, sharing the tables (interfaces, ACLs, FIB) as the
    // router's workers do. Worker 0 runs on the calling thread (already
    // pinned by `run`), the others on CPUs after it.
    let outcome: Vec<Result<WorkerOutcome, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..workers)
            .map(|i| {
                let (shared, domain, start) = (&shared, &domain, &start);
                scope.spawn(move || {
                    let mut set = rustix_cpuset((first_cpu + i) % ncpu);
                    pin(&mut set)?;
                    run_worker(su, opts, shared, domain, start)
                })
            })
            .collect();
        let mut all = vec![run_worker(su, opts, &shared, &domain, &start)];
        all.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("worker thread panicked".into()))));
        all
    });
    let outcome = outcome.into_iter().collect::<Result<Vec<_>, _>>()?;
    let secs = outcome.iter().map(|o| o.secs).fold(0.0, f64::max);
    let packets: u64 = outcome.iter().map(|o| o.packets).sum();
    let forwarded: u64 = outcome.iter().map(|o| o.forwarded).sum();
    let per_worker_mpps = outcome.iter().map(|o| o.packets as f64 / o.secs / 1e6).collect();
    let cpu_secs: f64 = outcome.iter().map(|o| o.cpu_secs).sum();
    let (nodes, drops) = (outcome[0].nodes.clone(), outcome[0].drops.clone());
    let rule_hits = shared
        .acls
        .load()
        .sets
        .iter()
        .flat_map(|set| set.counters.iter().flat_map(|c| c.snapshot()))
        .map(|h| h.packets)
        .sum();
    Ok(Run {
        scenario: su.scenario,
        flows: su.frames.len(),
        routes_v4: su.routes.len() + 4,
        acl_rules,
        workers,
        per_worker_mpps,
        seconds: secs,
        packets,
        forwarded,
        mpps: packets as f64 / secs / 1e6,
        mpps_per_cpu: if cpu_secs > 0.0 { packets as f64 / cpu_secs / 1e6 } else { 0.0 },
        ns_per_packet: secs * 1e9 * workers as f64 / packets.max(1) as f64,
        cost_vs_plain: 1.0,
        nodes,
        rule_hits,
        drops,
        sas_installed: sadb.len(),
        spread: su.spread,
        burst: if su.spread > 0 { opts.burst.max(1) } else { 1 },
        spread_sas_used: {
            let (n, k) = (u64::from(spread_client_count(opts)), u64::from(su.spread.max(1)));
            (0..u64::from(su.spread))
                .map(|j| SPREAD_FIRST_SA.saturating_add((j * n / k) as u32))
                .filter(|&id| sadb.get(id).is_some_and(|sa| sa.counters().packets > 0))
                .count() as u32
        },
        huge_page_bytes: tern_intrin::alloc::huge_page_bytes(),
    })
}

/// What one worker measured.
struct WorkerOutcome {
    secs: f64,
    /// The worker thread's own CPU time over `secs` (less than `secs` when
    /// other processes took the core).
    cpu_secs: f64,
    packets: u64,
    forwarded: u64,
    nodes: Vec<NodeRow>,
    drops: Vec<(String, u64)>,
}

/// Builds a worker on the calling thread over its own memory ports, waits
/// for the others at `start`, warms up and measures.
fn run_worker(
    su: &Setup,
    opts: &EngineBenchOpts,
    shared: &Shared,
    domain: &tern_rcu::Domain,
    start: &std::sync::Barrier,
) -> Result<WorkerOutcome, String> {
    let built = (|| {
        let source = MemPort::generator("gen", &su.frames, None).ok_or("no templates")?;
        let mut sink = MemPort::new("sink");
        sink.count_tx_only();
        let inject = Arc::new(crossbeam_queue::ArrayQueue::new(16));
        let built = tern_nodes::build_graph(shared, inject).map_err(|e| e.to_string())?;
        let pool = PacketPool::new(PoolConfig { frames: 8192, pad_frames: opts.pad_frames, ..PoolConfig::default() })
            .map_err(|e| e.to_string())?;
        Worker::new(
            WorkerConfig { id: 0, cpu: None, idle: IdlePolicy::Spin, input_node: built.input },
            built.graph,
            pool,
            vec![PortBinding::new(Box::new(source), 0), PortBinding::new(Box::new(sink), 1)],
            TraceShared::new(),
            Some(domain.register()),
        )
        .map_err(|e| e.to_string())
    })();
    // Every worker reaches the barrier, built or not, so none waits forever.
    start.wait();
    let mut worker = built?;
    let shared_w = Arc::clone(worker.shared());
    let tsc = tern_intrin::tsc_per_ns();
    let warm = Instant::now();
    let warm_for = if opts.packets.is_some() { Duration::ZERO } else { Duration::from_secs(1) };
    while warm.elapsed() < warm_for {
        for _ in 0..64 {
            worker.run_once();
        }
    }
    let before = shared_w.stats.snapshot();
    let t0 = Instant::now();
    let cpu0 = thread_cpu_secs();
    match opts.packets {
        Some(n) => {
            let start = before.ports[0].rx_packets;
            while shared_w.stats.ports[0].rx_packets.get() - start < n {
                worker.run_once();
            }
        }
        None => {
            let limit = Duration::from_secs_f64(opts.seconds);
            while t0.elapsed() < limit {
                for _ in 0..256 {
                    worker.run_once();
                }
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu_secs = thread_cpu_secs() - cpu0;
    let after = shared_w.stats.snapshot();
    let packets = after.ports[0].rx_packets - before.ports[0].rx_packets;
    let forwarded = after.ports[1].tx_packets - before.ports[1].tx_packets;
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
        .filter(|(e, (a, b))| {
            e.kind == tern_engine::ErrorKind::Drop && *a > *b && !(e.node.contains("acl") && e.name == "denied")
        })
        .map(|(e, (a, b))| (format!("{}/{}", e.node, e.name), a - b))
        .collect();
    Ok(WorkerOutcome { secs, cpu_secs, packets, forwarded, nodes, drops })
}

pub fn run(opts: &EngineBenchOpts) -> Result<EngineBenchReport, String> {
    if opts.flows == 0 || !(42..=1514).contains(&opts.frame_len) || opts.seconds <= 0.0 {
        return Err("need flows >= 1, frame length 42..=1514 (without FCS) and seconds > 0".into());
    }
    if let Some(cpu) = opts.cpu {
        let mut set = rustix_cpuset(cpu);
        pin(&mut set)?;
    }
    let mut table = None;
    let mut runs = Vec::new();
    let plain = measure(&setup(Scenario::Plain, opts, &mut table)?, opts)?;
    let base = plain.ns_per_packet;
    runs.push(plain);
    for &sc in &opts.scenarios {
        if sc == Scenario::Plain {
            continue;
        }
        let mut r = measure(&setup(sc, opts, &mut table)?, opts)?;
        r.cost_vs_plain = r.ns_per_packet / base;
        runs.push(r);
    }
    Ok(EngineBenchReport {
        command: String::new(),
        frame_len: opts.frame_len,
        cpu: opts.cpu,
        workers: opts.workers.max(1),
        tsc_ghz: tern_intrin::tsc_per_ns(),
        runs,
    })
}

/// The calling thread's CPU time (user + system), in seconds. Through
/// libc (nix), not rustix: rustix reads the vDSO itself, which valgrind
/// does not map, and `valgrind --tool=callgrind tern-bench engine` died
/// of SIGSEGV in rustix's auxv check (rustix issue 1559).
fn thread_cpu_secs() -> f64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 / 1e9)
}

fn rustix_cpuset(cpu: usize) -> rustix::thread::CpuSet {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    set
}

fn pin(set: &mut rustix::thread::CpuSet) -> Result<(), String> {
    rustix::thread::sched_setaffinity(None, set).map_err(|e| format!("cannot pin to the CPU: {e}"))
}

#[cfg(test)]
mod tests {
    use super::{EngineBenchOpts, Scenario, measure, setup};

    /// The JSON report names scenarios as the command line does.
    #[test]
    fn json_names_are_the_command_line_names() {
        for s in Scenario::ALL {
            assert_eq!(serde_json::to_value(s).expect("json"), serde_json::Value::String(s.name().into()));
        }
    }

    /// Plain forwarding and the tunnel scenarios forward every packet they
    /// receive (nothing dropped on the way), and the tunnel scenarios
    /// encapsulate each of them once.
    #[test]
    fn scenarios_forward_every_packet() {
        let opts = EngineBenchOpts { packets: Some(5000), ..EngineBenchOpts::default() };
        for sc in [Scenario::Plain, Scenario::Plain6, Scenario::Gre, Scenario::GreMultiFlow] {
            let run = measure(&setup(sc, &opts, &mut None).expect("setup"), &opts).expect("run");
            assert!(run.packets >= 5000, "{}: {} packets", sc.name(), run.packets);
            assert_eq!(run.forwarded, run.packets, "{}: all forwarded", sc.name());
            assert!(run.drops.is_empty(), "{}: drops {:?}", sc.name(), run.drops);
            let encapsulated = run.nodes.iter().find(|n| n.name == "gre-encap").map_or(0, |n| n.packets);
            let want = if matches!(sc, Scenario::Plain | Scenario::Plain6) { 0 } else { run.packets };
            assert_eq!(encapsulated, want, "{}: encapsulated", sc.name());
        }
        assert_eq!(setup(Scenario::Gre, &opts, &mut None).expect("setup").frames.len(), 1, "one flow");
        let v6 = measure(&setup(Scenario::Plain6, &opts, &mut None).expect("setup"), &opts).expect("run");
        let rewritten = v6.nodes.iter().find(|n| n.name == "ip6-rewrite").map_or(0, |n| n.packets);
        assert_eq!(rewritten, v6.packets, "plain6: every packet through ip6-rewrite");
    }

    /// The IPsec scenarios forward every packet, each encrypted or
    /// decrypted once by its ESP node, at both frame sizes.
    #[test]
    fn ipsec_scenarios_encrypt_or_decrypt_every_packet() {
        for len in [60, 1432] {
            let opts = EngineBenchOpts { packets: Some(2000), frame_len: len, ..EngineBenchOpts::default() };
            for (sc, node) in [
                (Scenario::IpsecEncryptGcm, "esp-encrypt"),
                (Scenario::IpsecEncryptCbc, "esp-encrypt"),
                (Scenario::IpsecDecryptGcm, "esp-decrypt"),
                (Scenario::IpsecDecryptCbc, "esp-decrypt"),
            ] {
                let run = measure(&setup(sc, &opts, &mut None).expect("setup"), &opts).expect("run");
                assert!(run.packets >= 2000, "{} {len}: {} packets", sc.name(), run.packets);
                assert_eq!(run.forwarded, run.packets, "{} {len}: all forwarded ({:?})", sc.name(), run.drops);
                assert!(run.drops.is_empty(), "{} {len}: drops {:?}", sc.name(), run.drops);
                let n = run.nodes.iter().find(|n| n.name == node).map_or(0, |n| n.packets);
                assert_eq!(n, run.packets, "{} {len}: every packet through {node}", sc.name());
            }
        }
    }

    /// With thousands of other SAs installed (`--extra-sas`), the packets
    /// still find theirs: none is dropped, every one is encrypted or
    /// decrypted.
    #[test]
    fn ipsec_scenarios_with_many_other_sas_still_pass_every_packet() {
        let opts = EngineBenchOpts { packets: Some(2000), extra_sas: 250_000, ..EngineBenchOpts::default() };
        for (sc, node) in [(Scenario::IpsecEncryptGcm, "esp-encrypt"), (Scenario::IpsecDecryptGcm, "esp-decrypt")] {
            let run = measure(&setup(sc, &opts, &mut None).expect("setup"), &opts).expect("run");
            assert_eq!(run.forwarded, run.packets, "{}: all forwarded ({:?})", sc.name(), run.drops);
            let n = run.nodes.iter().find(|n| n.name == node).map_or(0, |n| n.packets);
            assert_eq!(n, run.packets, "{}: every packet through {node}", sc.name());
        }
    }

    /// Spread over 5,000 SAs of a multipoint tunnel (`--spread`) among
    /// 20,000 installed: every packet is encrypted or decrypted (none is
    /// dropped as no-client, no-sa, unknown-spi or client-spoofed) and each
    /// of the 5,000 SAs counted packets, so each frame found its own SA.
    #[test]
    fn ipsec_scenarios_spread_over_many_sas_find_every_sa() {
        let opts = EngineBenchOpts { packets: Some(12_000), extra_sas: 20_000, spread: 5000, ..Default::default() };
        for (sc, node) in [
            (Scenario::IpsecEncryptGcm, "esp-encrypt"),
            (Scenario::IpsecEncryptCbc, "esp-encrypt"),
            (Scenario::IpsecDecryptGcm, "esp-decrypt"),
            (Scenario::IpsecDecryptCbc, "esp-decrypt"),
        ] {
            let su = setup(sc, &opts, &mut None).expect("setup");
            assert_eq!(su.frames.len(), 5000, "{}: a frame per SA", sc.name());
            let run = measure(&su, &opts).expect("run");
            assert!(run.packets >= 12_000, "{}: {} packets", sc.name(), run.packets);
            assert!(run.drops.is_empty(), "{}: drops {:?}", sc.name(), run.drops);
            assert_eq!(run.forwarded, run.packets, "{}: all forwarded", sc.name());
            let n = run.nodes.iter().find(|n| n.name == node).map_or(0, |n| n.packets);
            assert_eq!(n, run.packets, "{}: every packet through {node}", sc.name());
            assert_eq!(run.sas_installed, 20_002, "{}", sc.name());
            assert_eq!(run.spread_sas_used, 5000, "{}: every spread SA carried packets", sc.name());
            assert!(run.mpps_per_cpu > 0.0, "{}: the worker's CPU time was read", sc.name());
        }
    }

    /// `--burst` sends each sampled SA's frame several times in a row, and
    /// the sample is spaced over every installed client (4 of 1,000: SAs
    /// 3, 253, 503 and 753 carry the traffic, each counted).
    #[test]
    fn ipsec_spread_sample_is_spaced_over_the_clients_in_bursts() {
        let opts =
            EngineBenchOpts { packets: Some(600), extra_sas: 1000, spread: 4, burst: 3, ..EngineBenchOpts::default() };
        for (sc, node) in [(Scenario::IpsecEncryptGcm, "esp-encrypt"), (Scenario::IpsecDecryptGcm, "esp-decrypt")] {
            let su = setup(sc, &opts, &mut None).expect("setup");
            assert_eq!(su.frames.len(), 12, "{}: 4 SAs, 3 frames each", sc.name());
            let bursts: Vec<&[Vec<u8>]> = su.frames.chunks(3).collect();
            for (i, b) in bursts.iter().enumerate() {
                assert!(b.iter().all(|f| *f == b[0]), "{}: burst {i} is one SA's frame", sc.name());
                assert!(bursts.iter().skip(i + 1).all(|o| o[0] != b[0]), "{}: burst {i} is its own SA", sc.name());
            }
            let run = measure(&su, &opts).expect("run");
            assert!(run.drops.is_empty(), "{}: drops {:?}", sc.name(), run.drops);
            let n = run.nodes.iter().find(|n| n.name == node).map_or(0, |n| n.packets);
            assert_eq!(n, run.packets, "{}: every packet through {node}", sc.name());
            assert_eq!((run.sas_installed, run.burst, run.spread_sas_used), (1002, 3, 4), "{}", sc.name());
        }
    }

    /// The firewall scenarios pass every packet through all their rules:
    /// each is accepted by the default and forwarded, and the rule set is
    /// asked about every packet (by its node or the node's shortcut).
    #[test]
    fn firewall_scenarios_accept_every_packet_by_default() {
        let opts = EngineBenchOpts { packets: Some(5000), ..EngineBenchOpts::default() };
        for (sc, node) in [
            (Scenario::SingleFlow50fw, "ip4-acl-in"),
            (Scenario::SingleFlow50fwOut, "ip4-acl-out"),
            (Scenario::SingleFlow6_50fw, "ip6-acl-in"),
            (Scenario::SingleFlow6_50fwOut, "ip6-acl-out"),
            (Scenario::MultiFlow6_50fw, "ip6-acl-in"),
        ] {
            let su = setup(sc, &opts, &mut None).expect("setup");
            assert_eq!(su.acl.as_ref().map(|s| s.rules.len()), Some(50), "{}: 50 rules", sc.name());
            let run = measure(&su, &opts).expect("run");
            assert_eq!(run.acl_rules, 50, "{}", sc.name());
            assert_eq!(run.forwarded, run.packets, "{}: all forwarded", sc.name());
            assert!(run.drops.is_empty(), "{}: drops {:?}", sc.name(), run.drops);
            assert_eq!(run.rule_hits, run.packets, "{}: every packet counted once by the rules", sc.name());
            assert!(run.nodes.iter().any(|n| n.name == node), "{}: {node} ran", sc.name());
        }
    }

    /// Two workers share the tables and each forwards every packet of its
    /// own ports; the report sums them and keeps each worker's rate.
    #[test]
    fn two_workers_each_forward_their_packets() {
        let opts = EngineBenchOpts { packets: Some(3000), workers: 2, ..EngineBenchOpts::default() };
        for sc in [Scenario::Plain, Scenario::SingleFlow50fw] {
            let run = measure(&setup(sc, &opts, &mut None).expect("setup"), &opts).expect("run");
            assert_eq!(run.workers, 2);
            assert_eq!(run.per_worker_mpps.len(), 2);
            assert!(run.per_worker_mpps.iter().all(|&m| m > 0.0), "{:?}", run.per_worker_mpps);
            assert!(run.packets >= 6000, "{}: {} packets", sc.name(), run.packets);
            assert_eq!(run.forwarded, run.packets, "{}: all forwarded", sc.name());
            assert!(run.drops.is_empty(), "{}: drops {:?}", sc.name(), run.drops);
        }
    }
}
