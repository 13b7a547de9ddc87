//! What the API answers with: plain data, independent of tern's internal
//! types so the protocol stays stable while the internals change.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusInfo {
    /// tern's version (Cargo package version).
    pub version: String,
    pub protocol: u32,
    pub uptime_ms: u64,
    pub workers: usize,
    pub interfaces: usize,
    pub neighbors: usize,
    /// The configuration file `config_reload` reads.
    pub config: Option<String>,
    pub fib: FibSummary,
    /// The control-plane sources (kernel mirror, FPM) and the routes they
    /// skipped, by reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<RouteSourceInfo>,
    /// What the operator should know about the lanes: rule sets the XDP
    /// lane could not compile (their packets go to the engine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Which of the nodes' fast paths are on (`[dataplane.fast_paths]`).
    #[serde(default)]
    pub fast_paths: crate::config::FastPathsCfg,
    /// The bounds of reassembly (`[reassembly]`, per worker and family).
    #[serde(default)]
    pub reassembly: crate::config::ReassemblyCfg,
}

/// What a netlink route source (kernel mirror, FPM server) did with the
/// route messages it decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSourceInfo {
    /// "kernel" or "fpm".
    pub name: String,
    /// Route messages decoded (new and delete).
    pub route_msgs: u64,
    /// Next-hop object messages decoded.
    pub nexthop_msgs: u64,
    /// Route adds and deletes handed to the RIB.
    pub adds: u64,
    pub dels: u64,
    /// Route messages not installed, by reason: "table", "type",
    /// "source_specific", "foreign_interface", "family",
    /// "unknown_nexthop", "protocol", "malformed" (every reason, zeros
    /// included, in this order).
    pub skipped: Vec<(String, u64)>,
}

impl RouteSourceInfo {
    pub fn new(name: &str, c: &crate::linux::sync::SyncCounters) -> Self {
        RouteSourceInfo {
            name: name.into(),
            route_msgs: c.route_msgs,
            nexthop_msgs: c.nexthop_msgs,
            adds: c.adds,
            dels: c.dels,
            skipped: c.skipped().iter().map(|(r, n)| ((*r).to_string(), *n)).collect(),
        }
    }
}

/// Counters of a port, summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Packets the driver refused to transmit (ring full...).
    pub tx_dropped: u64,
    /// Packets the driver could not deliver to tern (kernel ring drops...).
    pub driver_rx_dropped: u64,
    pub driver_errors: u64,
    /// Changes of the device under the port since start (down, up,
    /// removed, re-created; not reset by `stats clear`).
    #[serde(default)]
    pub link_changes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceInfo {
    pub index: u16,
    pub name: String,
    /// "port", "vlan" or "gre".
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    pub mac: String,
    pub mtu: u16,
    /// Configured state ("interface set NAME up/down").
    pub admin_up: bool,
    /// Forwarding state: admin up, the device present and up, and, for a
    /// VLAN, its parent up.
    pub up: bool,
    /// The device's link as netlink reports it: "up", "no-carrier",
    /// "down" or "absent" (ports on a device only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Link changes seen (down, up, removed, re-created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_changes: Option<u64>,
    /// "10.0.1.1/24", "2001:db8:1::1/64".
    pub addresses: Vec<String>,
    pub link_local: String,
    /// Virtual MACs it accepts as its own besides `mac` (VRRP's: a
    /// keepalived or vrrpd macvlan the kernel mirror follows, or tern's
    /// own VRRP), "00:00:5e:00:01:0a (kernel)".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virtual_macs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl_in: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl_out: Option<String>,
    /// Ports only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<PortCounters>,
    /// What may keep the interface from working as configured (a veth
    /// whose peer may offload checksums).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The lane that receives the interface's packets: "xdp native",
    /// "xdp generic", "afxdp copy", "afxdp zero-copy", "afpacket",
    /// "memory" (a VLAN: its parent's). None for GRE tunnels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// Why the lane is what it is, and what it leaves to the engine (a
    /// fallback, a device the XDP lane cannot send out of, a rule set it
    /// could not compile).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lane_notes: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressInfo {
    pub interface: String,
    pub address: String,
    /// "inet" or "inet6".
    pub family: String,
    /// "global" or "link".
    pub scope: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextHopInfo {
    /// "unicast", "glean" (connected: resolve the destination), "local",
    /// "blackhole", "unreachable", "prohibit", "ecmp", "none".
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// The neighbour's MAC once resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteInfo {
    pub prefix: String,
    pub source: String,
    pub distance: u8,
    pub metric: u32,
    /// "via", "connected", "local", "blackhole", "unreachable",
    /// "prohibit", "ecmp".
    pub kind: String,
    /// Gateways of a "via" or "ecmp" route.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// This entry is the one the FIB uses for its prefix.
    pub best: bool,
    /// The target resolved (an inactive route waits for its gateway).
    pub active: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nexthops: Vec<NextHopInfo>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteList {
    pub routes: Vec<RouteInfo>,
    /// Routes left out by the limit.
    pub truncated: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FibSummary {
    pub v4_routes: usize,
    pub v6_routes: usize,
    pub rib_entries: usize,
    pub nexthops: usize,
    pub ecmp_groups: usize,
    pub fib_bytes: usize,
    pub adds: u64,
    pub dels: u64,
    pub errors: u64,
    pub fib_updates: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighborEntry {
    pub interface: String,
    pub ip: String,
    pub mac: String,
    /// "reachable", "stale", "delay", "probe" or "permanent" (RFC 4861
    /// 7.3.2).
    pub state: String,
    pub age_ms: u64,
}

/// One node's line of `tern stats show` (VPP's `show runtime`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeStats {
    pub node: String,
    pub calls: u64,
    pub packets: u64,
    /// Packets per call: the batch size the node saw.
    pub packets_per_call: f64,
    pub cycles: u64,
    pub cycles_per_packet: f64,
    pub ns_per_packet: f64,
}

/// A drop reason or event counter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorStat {
    pub node: String,
    pub name: String,
    /// "drop" or "info"; the XDP programs' own: "forward", "punt", "pass".
    pub kind: String,
    pub help: String,
    pub count: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceCounters {
    pub interface: String,
    pub counters: PortCounters,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsReport {
    /// Counters since this many milliseconds (uptime, or since `stats clear`).
    pub interval_ms: u64,
    pub nodes: Vec<NodeStats>,
    pub errors: Vec<ErrorStat>,
    pub interfaces: Vec<InterfaceCounters>,
    /// What the XDP lane did itself (empty without the lane): every
    /// packet it sent, handed to the engine or to Linux, and its share of
    /// the drops and events `errors` sums over both lanes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<LaneStat>,
}

/// One counter of a lane other than the engine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneStat {
    /// "xdp".
    pub lane: String,
    /// `xdp-lane` for the lane's own counters, else the engine node whose
    /// drop or event the lane counted under the same name.
    pub node: String,
    pub name: String,
    /// "forward" (sent by the lane), "punt" (handed to the engine), "pass"
    /// (handed to Linux), "drop" or "info".
    pub kind: String,
    pub count: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchBucket {
    /// Packets per busy loop in [min, max].
    pub min: u64,
    pub max: u64,
    pub loops: u64,
}

/// One bucket of a worker's loop-gap histogram (`tern_engine::LoopGaps`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapBucket {
    /// Gaps below this many microseconds (None: the last bucket, 10 ms and
    /// more).
    pub below_us: Option<u64>,
    pub loops: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerInfo {
    pub id: u16,
    pub ports: Vec<String>,
    pub uptime_ms: u64,
    pub loops: u64,
    /// Loops that received at least one packet.
    pub busy_loops: u64,
    /// Time asleep in poll(2) waiting for packets.
    pub idle_ms: u64,
    /// Share of the time not asleep, in percent (a spinning worker is
    /// always 100: see `busy_loops_pct`).
    pub load_pct: f64,
    pub idle_pct: f64,
    /// Share of loops that found packets, in percent.
    pub busy_loops_pct: f64,
    pub rx_packets: u64,
    /// Packets per busy loop.
    pub avg_batch: f64,
    pub batch_hist: Vec<BatchBucket>,
    /// Time between two polls of the worker's ports, not counting sleep:
    /// how long a packet could wait (stalls).
    #[serde(default)]
    pub loop_gaps: Vec<GapBucket>,
    /// The longest such gap, in microseconds.
    #[serde(default)]
    pub max_loop_gap_us: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphNode {
    pub name: String,
    pub nexts: Vec<String>,
    /// Counters the node declares ("name" only).
    pub errors: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphView {
    pub nodes: Vec<GraphNode>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclRuleView {
    pub index: usize,
    pub action: String,
    /// The rule's match keys, as in the configuration.
    pub matches: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    pub packets: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclView {
    pub name: String,
    pub default: String,
    pub interfaces_in: Vec<String>,
    pub interfaces_out: Vec<String>,
    pub rules: Vec<AclRuleView>,
    /// Packets decided by the default policy.
    pub default_packets: u64,
    pub default_bytes: u64,
    /// False while the data plane has no firewall node to count hits.
    pub counting: bool,
    /// Which lane evaluates the set on each interface it is bound to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<AclLaneView>,
}

/// Which lane evaluates a bound rule set, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclLaneView {
    pub interface: String,
    /// "in" or "out".
    pub direction: String,
    /// "xdp" (the XDP lane, with the engine for what it punts), "engine",
    /// or "engine (IPv4), xdp (IPv6)"-like when the lane holds one family.
    pub lane: String,
    pub why: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceHopView {
    pub node: String,
    pub next: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceEntry {
    pub seq: u64,
    /// "engine" (the userspace engine) or "xdp" (the XDP lane).
    #[serde(default)]
    pub lane: String,
    /// The engine's worker, or the CPU the XDP lane ran on.
    pub worker: u16,
    pub interface: String,
    pub len: usize,
    /// Milliseconds since the trace was started.
    pub at_ms: f64,
    /// A one-line decode of the packet as it arrived.
    pub summary: String,
    /// The first bytes as they arrived, in hex.
    pub head: String,
    pub hops: Vec<TraceHopView>,
    /// "tx <port>", "drop: <node>/<reason>" or "held".
    pub fate: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceView {
    /// Packets still to be marked.
    pub remaining: u32,
    pub packets: Vec<TraceEntry>,
    /// Packets marked whose record is not listed yet: still in the
    /// router (held for a neighbour, queued).
    #[serde(default)]
    pub in_flight: u64,
    /// Packets marked whose record was lost (a full ring or list).
    #[serde(default)]
    pub lost: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturedFrameView {
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
    /// "rx" or "tx".
    pub dir: String,
    pub interface: String,
    pub orig_len: u32,
    /// The captured bytes in hex.
    pub data: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureBatch {
    pub id: u64,
    pub frames: Vec<CapturedFrameView>,
    /// The capture finished (count reached or stopped) and every frame
    /// has been read.
    pub done: bool,
    /// Frames delivered so far, this batch included.
    pub captured: u64,
    /// Copies lost because a queue was full (the packets were not).
    pub dropped: u64,
    /// Something the user should know about this capture (the first
    /// batch: the XDP lane hands the interface to the engine meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadReport {
    /// One line per applied change ("route 10.9.0.0/16 added").
    pub changes: Vec<String>,
}

/// `top_sample`: every raw counter `tern top` makes rates of, read in one
/// request (one consistent sample, one round trip). Totals since tern
/// started (`stats clear` does not move them); a client divides the
/// difference of two samples by the difference of their `uptime_ns`.
/// Never lists routes: as cheap with a full table as with none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TopSample {
    /// tern's version (Cargo package version).
    pub version: String,
    /// Nanoseconds since tern started, when the counters were read.
    pub uptime_ns: u64,
    /// TSC ticks per nanosecond: a node's `cycles` over this is time.
    pub tsc_per_ns: f64,
    /// Ports and TAPs, with their lane (`InterfaceInfo::lane`).
    pub interfaces: Vec<TopInterface>,
    /// The engine's nodes, summed over workers.
    pub nodes: Vec<TopNode>,
    /// Drop reasons and events of both lanes (as `stats_show` sums them),
    /// the non-zero ones only.
    pub errors: Vec<TopCounter>,
    /// What the XDP lane counted itself (empty without the lane).
    pub lane: Vec<LaneStat>,
    pub workers: Vec<TopWorker>,
    pub fib: FibSummary,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopInterface {
    pub name: String,
    /// "xdp native", "afxdp copy", "afpacket", "memory", "tap"...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    pub up: bool,
    pub counters: PortCounters,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopNode {
    pub node: String,
    pub calls: u64,
    pub packets: u64,
    /// TSC ticks spent in the node.
    pub cycles: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopCounter {
    pub node: String,
    pub name: String,
    /// As `ErrorStat::kind`.
    pub kind: String,
    pub count: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopWorker {
    pub id: u16,
    pub uptime_ns: u64,
    /// Time asleep in poll(2).
    pub idle_ns: u64,
    pub loops: u64,
    /// Loops that received at least one packet.
    pub busy_loops: u64,
    pub rx_packets: u64,
}

/// One SA as `ipsec_sa_show` tells it: its configuration without keys,
/// state, sequence numbers and counters (summed over workers).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpsecSaView {
    pub id: u32,
    pub spi: u32,
    pub crypto: String,
    pub integ: String,
    pub esn: bool,
    pub replay_window: u32,
    /// ESP in UDP: [source port, destination port].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_encap: Option<[u16; 2]>,
    /// "active", "soft-expired" or "expired".
    pub state: String,
    /// Next outbound sequence number to use / highest inbound accepted.
    pub seq_out: u64,
    pub seq_in: u64,
    pub age_secs: u64,
    /// "config" or "api".
    pub source: String,
    /// The tunnel that uses it, and how ("out" or "in").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<String>,
    pub soft: [Option<u64>; 3],
    pub hard: [Option<u64>; 3],
    pub packets: u64,
    pub bytes: u64,
    pub replay_drops: u64,
    pub integrity_failures: u64,
    pub seq_exhausted: u64,
    pub expired_drops: u64,
    pub decrypt_errors: u64,
}

/// `ipsec_sa_show`: the SAs asked for (all, or one), and how many there
/// are in all (a listing may be limited).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpsecSaList {
    pub total: usize,
    pub sas: Vec<IpsecSaView>,
}

/// One ipsec tunnel as `ipsec_tunnel_show` tells it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpsecTunnelView {
    pub name: String,
    pub index: u16,
    pub local: String,
    pub remote: String,
    pub sa_out: u32,
    pub sa_in: Vec<u32>,
    pub ttl: u8,
    pub mtu: u16,
    pub up: bool,
    /// The outbound SA's SPI and state, when it is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spi_out: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_out: Option<String>,
    /// Packets and bytes encrypted on `sa_out`, decrypted on `sa_in`.
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
}

/// One IKE SA as `ike_sa_show` tells it (no keys).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeSaView {
    /// Unique across the IKE threads; `ike_terminate` takes it.
    pub id: u64,
    pub peer: String,
    pub local: String,
    pub remote: String,
    /// SPIs in hex.
    pub spi_i: String,
    pub spi_r: String,
    pub initiator: bool,
    /// "connecting", "established", "rekeying", "deleting".
    pub state: String,
    pub proposal: String,
    pub remote_id: String,
    pub established_secs: u64,
    pub nat: bool,
    /// The virtual IP handed out to (or received from) the peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_ip: Option<String>,
    pub children: Vec<IkeChildView>,
}

/// IKE SAs counted by state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeSaCounts {
    pub total: u64,
    pub connecting: u64,
    pub established: u64,
    pub rekeying: u64,
    pub deleting: u64,
}

impl From<&tern_ike::StateCounts> for IkeSaCounts {
    fn from(c: &tern_ike::StateCounts) -> Self {
        IkeSaCounts {
            total: c.total(),
            connecting: c.connecting,
            established: c.established,
            rekeying: c.rekeying,
            deleting: c.deleting,
        }
    }
}

/// `ike_sa_summary`: every IKE SA counted by state, in all and per peer
/// (sorted by name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeSaSummaryView {
    #[serde(flatten)]
    pub all: IkeSaCounts,
    /// Counted by a walk of every SA (false: the threads' counters,
    /// `quick`).
    pub exact: bool,
    pub peers: Vec<IkePeerSaCounts>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkePeerSaCounts {
    pub peer: String,
    #[serde(flatten)]
    pub counts: IkeSaCounts,
}

/// A pubkey peer's cache of checked certificate chains
/// (`[ike_service] cert_cache_entries`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainCacheView {
    pub entries: u64,
    pub capacity: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

/// A child SA of an IKE SA.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeChildView {
    pub id: u64,
    pub spi_in: u32,
    pub spi_out: u32,
    pub proposal: String,
    /// The data plane's SA ids (`ipsec_sa_show`), when installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sa_in: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sa_out: Option<u32>,
    /// A remote-access client's virtual IP (a multipoint tunnel's child).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_ip: Option<String>,
}

/// One `[[ike]]` peer as `ike_peer_show` tells it: its configuration
/// (no key) and state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkePeerView {
    pub name: String,
    pub local: String,
    /// An address or "any".
    pub remote: String,
    pub local_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_id: Option<String>,
    /// "psk" or "pubkey".
    pub auth: String,
    pub proposals: Vec<String>,
    pub esp_proposals: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<String>,
    pub start: bool,
    pub encap: bool,
    /// IKE SAs established and connecting, child SAs installed.
    pub ike_sas: usize,
    pub connecting: usize,
    pub child_sas: usize,
    /// auth = "pubkey": the cache of the peers' checked chains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_cache: Option<ChainCacheView>,
}

/// Lowercase hex of bytes.
pub fn to_hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(D[usize::from(x >> 4)] as char);
        s.push(D[usize::from(x & 15)] as char);
    }
    s
}

/// Bytes of a hex string; None when it is not hex.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    let val = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    b.chunks(2).map(|p| Some(val(*p.first()?)? << 4 | val(*p.get(1)?)?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let b: Vec<u8> = (0..=255).collect();
        assert_eq!(from_hex(&to_hex(&b)), Some(b));
        assert_eq!(to_hex(&[0x0a, 0xff]), "0aff");
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }
}
