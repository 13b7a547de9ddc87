//! The configuration file's schema: what serde reads, with the defaults
//! of every key (docs/CONFIG.md is the reference). Checking what the
//! values mean is `super::validate`'s.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub dataplane: Dataplane,
    #[serde(default)]
    pub neighbor: NeighborCfg,
    /// The bounds of each worker's reassembly of fragments addressed to
    /// the router.
    #[serde(default)]
    pub reassembly: ReassemblyCfg,
    #[serde(default, rename = "interface")]
    pub interfaces: Vec<InterfaceCfg>,
    #[serde(default, rename = "tunnel")]
    pub tunnels: Vec<TunnelCfg>,
    /// IPsec security associations (`[[ipsec_sa]]`), bound to `type =
    /// "ipsec"` tunnels by id.
    #[serde(default, rename = "ipsec_sa", skip_serializing_if = "Vec::is_empty")]
    pub ipsec_sas: Vec<IpsecSaCfg>,
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteCfg>,
    #[serde(default, rename = "route_file")]
    pub route_files: Vec<RouteFileCfg>,
    /// Static (permanent) neighbours: never probed, never aged.
    #[serde(default, rename = "neighbor_entry")]
    pub static_neighbors: Vec<StaticNeighborCfg>,
    #[serde(default)]
    pub acl: Vec<tern_acl::RuleSet>,
    #[serde(default)]
    pub api: ApiCfg,
    #[serde(default)]
    pub metrics: MetricsCfg,
    /// Linux as the control plane (kernel mirror, FPM for FRR).
    #[serde(default)]
    pub linux: LinuxCfg,
    /// tern's own VRRPv3 groups (standalone mode, RFC 5798).
    #[serde(default)]
    pub vrrp: Vec<VrrpCfg>,
    /// IKEv2 peers (`[[ike]]`, `config/ike.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ike: Vec<super::IkeCfg>,
    /// The IKE engine's threads and limits.
    #[serde(default, skip_serializing_if = "super::IkeServiceCfg::is_default")]
    pub ike_service: super::IkeServiceCfg,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Dataplane {
    /// Forwarding worker threads.
    pub workers: u16,
    /// CPUs to pin workers to (worker i on cpus[i]).
    pub cpus: Vec<usize>,
    /// CPUs for tern's other threads (control loop, API, metrics). Empty:
    /// every CPU the process may use but the workers' (`cpus`), or all of
    /// them when that leaves none.
    pub control_cpus: Vec<usize>,
    /// Packet buffers per worker.
    pub pool_frames: u32,
    /// "sleep" (poll(2) when idle) or "spin" (busy polling).
    pub idle: IdleMode,
    /// ICMP errors per second per worker, and burst.
    pub icmp_rate: u32,
    pub icmp_burst: u32,
    /// The nodes' fast paths, each switchable (`[dataplane.fast_paths]`).
    pub fast_paths: FastPathsCfg,
    /// Control traffic first: the policers of traffic for the router, per
    /// class (`[dataplane.punt]`).
    pub punt: PuntCfg,
}

/// One class's policer in `[dataplane.punt]`: packets per second (0: not
/// policed) and burst (packets), per worker and per CPU of the XDP lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PuntRate {
    pub rate: u32,
    pub burst: u32,
}

/// `[dataplane.punt]`: a policer per class of traffic for the router
/// (`tern_nodes::linux::class::PuntClass`), in `linux-punt` and in the XDP
/// lane, so a flood of one class cannot starve the others; the excess is
/// counted as `linux-punt/shed-<class>` and `xdp-lane/punt-shed-<class>`.
/// Defaults: `tern_nodes::state::DEFAULT_PUNT_CLASSES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PuntCfg {
    pub neighbor: PuntRate,
    pub bgp: PuntRate,
    pub ospf: PuntRate,
    pub vrrp: PuntRate,
    pub ike: PuntRate,
    pub bfd: PuntRate,
    pub local: PuntRate,
}

impl PuntCfg {
    /// The classes' names, in `PuntClass` order.
    pub const NAMES: [&'static str; 7] = ["neighbor", "bgp", "ospf", "vrrp", "ike", "bfd", "local"];

    /// (rate, burst) per class, in `PuntClass` order.
    pub fn rates(&self) -> [(u32, u32); 7] {
        [self.neighbor, self.bgp, self.ospf, self.vrrp, self.ike, self.bfd, self.local].map(|r| (r.rate, r.burst))
    }
}

impl Default for PuntCfg {
    fn default() -> Self {
        let [neighbor, bgp, ospf, vrrp, ike, bfd, local] =
            tern_nodes::state::DEFAULT_PUNT_CLASSES.map(|(rate, burst)| PuntRate { rate, burst });
        PuntCfg { neighbor, bgp, ospf, vrrp, ike, bfd, local }
    }
}

/// `[dataplane.fast_paths]`: which fast paths the forwarding nodes take
/// (`tern_nodes::state::FastPaths`). All on by default; an operator turns
/// one off to bisect a suspected fast-path bug (the reference paths give
/// the same forwarding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FastPathsCfg {
    pub direct: bool,
    pub acl_shortcut: bool,
    pub gre_direct: bool,
}

impl Default for FastPathsCfg {
    fn default() -> Self {
        FastPathsCfg { direct: true, acl_shortcut: true, gre_direct: true }
    }
}

impl Default for Dataplane {
    fn default() -> Self {
        Dataplane {
            workers: 1,
            cpus: Vec::new(),
            control_cpus: Vec::new(),
            pool_frames: 16384,
            idle: IdleMode::Sleep,
            icmp_rate: 1000,
            icmp_burst: 100,
            fast_paths: FastPathsCfg::default(),
            punt: PuntCfg::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdleMode {
    Sleep,
    Spin,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NeighborCfg {
    /// How long a confirmed neighbour stays REACHABLE (ms; RFC 4861
    /// ReachableTime).
    pub reachable_ms: u64,
    /// How long a STALE neighbour in use waits for a confirmation before
    /// it is probed (ms; RFC 4861 DELAY_FIRST_PROBE_TIME).
    pub delay_ms: u64,
    /// Interval between probes and between resolution requests (ms; RFC
    /// 4861 RetransTimer).
    pub retry_ms: u64,
    /// Unanswered probes/requests before giving up (RFC 4861
    /// MAX_UNICAST_SOLICIT and MAX_MULTICAST_SOLICIT).
    pub probes: u32,
    /// Packets held per unresolved neighbour, and in total per worker.
    pub queue_per_dest: usize,
    pub queue_total: usize,
}

/// `[reassembly]`: the bounds of each worker's reassembly tables (one
/// per family), for fragments addressed to the router (ESP, ESP in UDP,
/// IKE with certificates, ICMP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReassemblyCfg {
    /// Datagrams in reassembly at once, per worker and family: a new one
    /// past that evicts the oldest.
    pub max_datagrams: usize,
    /// Of those, from one source (an IPv4 address, an IPv6 /64).
    pub max_per_source: usize,
    /// Bytes of one reassembled datagram's payload (at most 65535).
    pub max_size: usize,
    /// Fragments of one datagram.
    pub max_fragments: usize,
    /// From a datagram's first fragment to its last (ms).
    pub timeout_ms: u64,
}

/// The most datagrams `max_datagrams` allows (per worker and family; at
/// `max_size` each, 1M x 16 KiB would be 16 GiB of buffers).
pub const REASS_MAX_DATAGRAMS: usize = 1 << 20;
/// The most fragments of one datagram (65535 bytes in 8-byte pieces).
pub const REASS_MAX_FRAGMENTS: usize = 8192;
/// The longest `timeout_ms` (RFC 791 suggests 15 s for its timer, RFC
/// 8200 60 s: a minute).
pub const REASS_MAX_TIMEOUT_MS: u64 = 60_000;

impl Default for ReassemblyCfg {
    fn default() -> Self {
        ReassemblyCfg { max_datagrams: 1024, max_per_source: 64, max_size: 16384, max_fragments: 64, timeout_ms: 2000 }
    }
}

/// The largest `reachable_ms`, `delay_ms` and `retry_ms` (RFC 4861 6.2.1
/// bounds ReachableTime by an hour).
pub const NEIGHBOR_MAX_MS: u64 = 3_600_000;
/// The most unanswered probes/requests `probes` allows.
pub const NEIGHBOR_MAX_PROBES: u32 = 100;

impl Default for NeighborCfg {
    fn default() -> Self {
        NeighborCfg {
            reachable_ms: 30_000,
            delay_ms: 5000,
            retry_ms: 1000,
            probes: 3,
            queue_per_dest: 16,
            queue_total: 1024,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// The fastest driver that works on the device: the XDP lane where its
    /// program attaches natively, else AF_XDP, else AF_PACKET.
    #[default]
    Auto,
    Afpacket,
    Afxdp,
    /// The XDP lane (crates/control/src/xdplane.rs): the common case is
    /// forwarded in the driver's XDP hook, the rest by the workers over
    /// AF_XDP on the same device.
    Xdp,
    /// In-memory port (tests and demos; no Linux device).
    Memory,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct InterfaceCfg {
    /// tern's name for the interface.
    pub name: String,
    /// The Linux device tern drives (physical interfaces).
    #[serde(default)]
    pub device: Option<String>,
    /// For a VLAN sub-interface: the parent interface and the VLAN id.
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub vlan: Option<u16>,
    /// Addresses with prefix length, IPv4 and IPv6.
    #[serde(default)]
    pub addresses: Vec<String>,
    /// IP MTU (default: the device's).
    #[serde(default)]
    pub mtu: Option<u16>,
    /// MAC address override (default: the device's).
    #[serde(default)]
    pub mac: Option<String>,
    #[serde(default)]
    pub driver: Driver,
    /// The lane that forwards this interface's traffic: "xdp" (in the
    /// kernel's XDP hook, exceptions to the workers), "afxdp" or
    /// "afpacket" (the workers). The same as `driver`; give one of them.
    #[serde(default)]
    pub lane: Option<Lane>,
    #[serde(default = "yes")]
    pub up: bool,
    /// Rule set names applied to packets received / sent here.
    #[serde(default)]
    pub acl_in: Option<String>,
    #[serde(default)]
    pub acl_out: Option<String>,
}

/// `lane = "xdp" | "afxdp" | "afpacket"` of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    Xdp,
    Afxdp,
    Afpacket,
}

impl Lane {
    pub fn driver(self) -> Driver {
        match self {
            Lane::Xdp => Driver::Xdp,
            Lane::Afxdp => Driver::Afxdp,
            Lane::Afpacket => Driver::Afpacket,
        }
    }
}

fn yes() -> bool {
    true
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TunnelType {
    #[default]
    Gre,
    /// A route-based ESP tunnel (tunnel mode), its SAs named by
    /// `sa_out` / `sa_in`.
    Ipsec,
}

/// A tunnel interface (`[[tunnel]]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunnelCfg {
    pub name: String,
    #[serde(default, rename = "type")]
    pub kind: TunnelType,
    /// Outer source: one of the router's addresses.
    pub local: String,
    /// Outer destination: the far end.
    pub remote: String,
    /// GRE key (RFC 2890); both ends must agree.
    #[serde(default)]
    pub key: Option<u32>,
    /// IPsec: the SA (`[[ipsec_sa]]` id) that encrypts what leaves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sa_out: Option<u32>,
    /// IPsec: the SAs that may decrypt what arrives (several while a
    /// rekey overlaps the old and the new).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sa_in: Vec<u32>,
    /// Outer TTL / hop limit.
    #[serde(default = "default_ttl")]
    pub ttl: u8,
    /// Inner MTU (default: 1500 minus the encapsulation overhead).
    #[serde(default)]
    pub mtu: Option<u16>,
    #[serde(default)]
    pub addresses: Vec<String>,
    #[serde(default = "yes")]
    pub up: bool,
    #[serde(default)]
    pub acl_in: Option<String>,
    #[serde(default)]
    pub acl_out: Option<String>,
}

fn default_ttl() -> u8 {
    64
}

/// An SPI as the file writes it: a number (`spi = 0x1001` is TOML's hex
/// integer) or a string, "0x1001" or "4097".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SpiValue {
    Number(i64),
    Text(String),
}

impl SpiValue {
    /// The SPI, or why it is not one (RFC 4303 2.1: 1-255 are reserved,
    /// 0 is never sent).
    pub fn value(&self) -> Result<u32, String> {
        let n: Option<u64> = match self {
            SpiValue::Number(n) => u64::try_from(*n).ok(),
            SpiValue::Text(t) => {
                let t = t.trim();
                match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
                        u64::from_str_radix(h, 16).ok()
                    }
                    None if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => t.parse().ok(),
                    _ => None,
                }
            }
        };
        let shown = match self {
            SpiValue::Number(n) => n.to_string(),
            SpiValue::Text(t) => super::quote(t),
        };
        let n = n.and_then(|n| u32::try_from(n).ok()).ok_or_else(|| format!("{shown} is not a 32-bit SPI"))?;
        if n < 256 {
            return Err(format!("SPI {n}: 0-255 are reserved (RFC 4303 2.1); need 256..=0xffffffff"));
        }
        Ok(n)
    }
}

/// Key material as the file (or the API's `ipsec_sa_add`) writes it ("0x"
/// and hex digits). `Debug` prints "<redacted>"; serialized as it is (the
/// API client sends it), so `tern config show` prints
/// [`Config::redacted`].
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretHex(pub String);

impl std::fmt::Debug for SecretHex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// What shows in place of a key.
pub const REDACTED: &str = "<redacted>";

impl Config {
    /// The configuration with every key replaced by "<redacted>": what
    /// `tern config show` prints.
    pub fn redacted(&self) -> Config {
        let mut c = self.clone();
        for sa in &mut c.ipsec_sas {
            sa.key = SecretHex(REDACTED.into());
            if let Some(k) = &mut sa.integ_key {
                *k = SecretHex(REDACTED.into());
            }
        }
        c
    }
}

/// An IPsec security association (`[[ipsec_sa]]`), one direction of a
/// tunnel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpsecSaCfg {
    /// The SA's id, which tunnels name in `sa_out` / `sa_in`.
    pub id: u32,
    pub spi: SpiValue,
    /// aes-128-gcm | aes-256-gcm | aes-128-cbc | aes-256-cbc
    pub crypto: String,
    /// none (with GCM) | hmac-sha1-96 | hmac-sha256-128 | hmac-sha512-256
    #[serde(default = "integ_none")]
    pub integ: String,
    /// Cipher key; for GCM followed by its 4-byte salt (RFC 4106).
    pub key: SecretHex,
    /// The HMAC's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integ_key: Option<SecretHex>,
    /// Extended (64-bit) sequence numbers (RFC 4303 2.2.1).
    #[serde(default)]
    pub esn: bool,
    /// Anti-replay window in packets; 0 switches anti-replay off.
    #[serde(default = "default_replay_window")]
    pub replay_window: u32,
    /// ESP in UDP (RFC 3948), ports 4500/4500 unless given.
    #[serde(default)]
    pub udp_encap: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_src_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_dst_port: Option<u16>,
    /// Lifetimes: the soft limit raises an event (the IKE side rekeys),
    /// the hard one stops the SA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_packets: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_packets: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_secs: Option<u64>,
}

fn integ_none() -> String {
    "none".into()
}

/// The anti-replay window an SA has unless it says otherwise.
pub const DEFAULT_REPLAY_WINDOW: u32 = 1024;

fn default_replay_window() -> u32 {
    DEFAULT_REPLAY_WINDOW
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RouteType {
    #[default]
    Unicast,
    Blackhole,
    Unreachable,
    Prohibit,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteCfg {
    pub prefix: String,
    #[serde(default)]
    pub via: Option<String>,
    #[serde(default)]
    pub interface: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: RouteType,
    #[serde(default)]
    pub distance: Option<u8>,
    #[serde(default)]
    pub metric: u32,
}

/// A permanent neighbour (`[[neighbor_entry]]`), like `ip neigh add ... permanent`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticNeighborCfg {
    pub interface: String,
    pub address: String,
    pub mac: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteFileCfg {
    /// A file of "prefix [via]" lines (.gz accepted); relative paths are
    /// relative to the configuration file.
    pub path: String,
    /// Next hop for lines without one.
    #[serde(default)]
    pub via: Option<String>,
    #[serde(default)]
    pub via6: Option<String>,
    #[serde(default)]
    pub interface: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiCfg {
    pub socket: String,
    /// Unix group allowed to use the socket (mode 0660); root only if unset.
    #[serde(alias = "socket_group")]
    pub group: Option<String>,
    /// The socket's permission bits, octal ("0660"); by default 0600, or
    /// 0660 with a group.
    pub socket_mode: Option<String>,
    /// An API connection idle this long is closed.
    pub idle_timeout_ms: u64,
}

impl ApiCfg {
    /// `socket_mode` as bits (validated at load: octal, at most 0777, and
    /// the owner may read and write).
    pub fn mode(&self) -> Result<Option<u32>, String> {
        let Some(m) = &self.socket_mode else { return Ok(None) };
        let digits = m.strip_prefix("0o").unwrap_or(m);
        let bits = u32::from_str_radix(digits, 8).ok().filter(|&b| b <= 0o777).ok_or_else(|| {
            format!("{:?} is not an octal mode such as \"0660\"", m.chars().take(16).collect::<String>())
        })?;
        if bits & 0o600 != 0o600 {
            return Err(format!("{m:?} must let the owner read and write (0o600)"));
        }
        Ok(Some(bits))
    }
}

/// Where tern's API listens unless `[api] socket` says otherwise, and where
/// the `tern` commands look when given no `--socket`.
pub const DEFAULT_SOCKET: &str = "/run/tern/tern.sock";

impl Default for ApiCfg {
    fn default() -> Self {
        ApiCfg { socket: DEFAULT_SOCKET.into(), group: None, socket_mode: None, idle_timeout_ms: 60_000 }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsCfg {
    /// Address of the Prometheus endpoint; empty disables it.
    pub listen: String,
}

impl Default for MetricsCfg {
    fn default() -> Self {
        MetricsCfg { listen: "127.0.0.1:9456".into() }
    }
}

/// The kernel's main routing table (`RT_TABLE_MAIN`): `[linux] table`'s
/// default.
pub const MAIN_TABLE: u32 = 254;

/// Who answers for the router's own addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinuxMode {
    /// tern owns the devices: it answers ARP/ND and ping for its
    /// addresses, and the kernel is silenced on them.
    #[default]
    Standalone,
    /// Linux owns the router's own traffic (BGP, OSPF, SSH, ping, ARP/ND
    /// for its addresses) and keeps its addresses on the devices; tern
    /// forwards transit traffic and mirrors the kernel.
    Linux,
}

/// How the router's own traffic reaches Linux in Linux mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exception {
    /// The kernel sees the devices' frames itself: AF_PACKET taps every
    /// frame, the AF_XDP steering program passes the router's (XDP_PASS).
    /// The kernel keeps its addresses on the devices.
    #[default]
    Kernel,
    /// tern owns the devices (the kernel is silenced on them as in
    /// standalone mode); each port gets a TAP device `tern-<interface>`
    /// with the interface's MAC, where the kernel keeps the addresses.
    /// What Linux owns is punted into the TAP, and what Linux writes to it
    /// leaves the interface unchanged.
    Tap,
}

/// The kernel name of the TAP device of tern interface `name`.
pub fn tap_name(name: &str) -> String {
    format!("tern-{name}")
}

/// `[linux]` configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinuxCfg {
    pub mode: LinuxMode,
    /// How the router's own traffic reaches Linux (Linux mode): "kernel"
    /// (the kernel sees the devices' frames) or "tap".
    pub exception: Exception,
    /// Mirror the kernel (routes, addresses, neighbours of the driven
    /// devices). Default: on in Linux mode, off in standalone mode.
    pub kernel: Option<bool>,
    /// Routing table mirrored from the kernel and taken from FPM.
    pub table: u32,
    /// Where the FPM server listens for zebra ("" = no FPM server). FRR's
    /// default is 127.0.0.1:2620.
    pub fpm_listen: String,
    /// After zebra (re)connects: quiet time after which routes it did not
    /// resend are removed.
    pub fpm_resync_quiet_ms: u64,
    /// ... but not sooner than this after the connection (a restarted
    /// zebra hears from bgpd and ospfd again only seconds later).
    pub fpm_resync_hold_ms: u64,
    /// Routes of a disconnected zebra are kept this long.
    pub fpm_stale_ms: u64,
    /// Kernel routes of these protocol numbers are ignored by the mirror.
    /// Default: FRR's protocols when the FPM server is on (they arrive over
    /// FPM), none otherwise.
    pub kernel_skip_protocols: Option<Vec<u8>>,
    /// Netlink socket receive buffer (bytes).
    pub netlink_rcvbuf: usize,
    /// Control-loop time each source may use per round (microseconds).
    pub poll_budget_us: u64,
    /// The TAP exception path's policer: packets per second each worker
    /// hands to one interface's TAP (0: unlimited), and its burst. The
    /// excess is dropped as `linux-punt/policed`. Live on reload.
    pub punt_rate: u32,
    pub punt_burst: u32,
}

impl Default for LinuxCfg {
    fn default() -> Self {
        LinuxCfg {
            mode: LinuxMode::Standalone,
            exception: Exception::Kernel,
            kernel: None,
            table: MAIN_TABLE,
            fpm_listen: String::new(),
            fpm_resync_quiet_ms: 1000,
            fpm_resync_hold_ms: 10_000,
            fpm_stale_ms: 120_000,
            kernel_skip_protocols: None,
            netlink_rcvbuf: 64 << 20,
            poll_budget_us: 5000,
            punt_rate: tern_nodes::state::DEFAULT_PUNT_RATE,
            punt_burst: tern_nodes::state::DEFAULT_PUNT_BURST,
        }
    }
}

impl LinuxCfg {
    pub fn linux_mode(&self) -> bool {
        self.mode == LinuxMode::Linux
    }
    /// Linux mode with the TAP exception path.
    pub fn tap_exception(&self) -> bool {
        self.linux_mode() && self.exception == Exception::Tap
    }
    /// The settings a reload may change live (the policer), as they are
    /// in `other`, the rest as here.
    pub fn with_live_of(&self, other: &LinuxCfg) -> LinuxCfg {
        LinuxCfg { punt_rate: other.punt_rate, punt_burst: other.punt_burst, ..self.clone() }
    }
    pub fn kernel_enabled(&self) -> bool {
        self.kernel.unwrap_or(self.linux_mode())
    }
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !self.fpm_listen.is_empty() && self.fpm_listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(("fpm_listen", format!("{:?} is not address:port", self.fpm_listen)));
        }
        if self.poll_budget_us == 0 || self.poll_budget_us > 1_000_000 {
            return Err(("poll_budget_us", format!("{}: need 1..=1000000", self.poll_budget_us)));
        }
        if self.fpm_resync_quiet_ms == 0 {
            return Err(("fpm_resync_quiet_ms", "must be positive".into()));
        }
        Ok(())
    }
}

/// A VRRPv3 virtual router (`[[vrrp]]`, RFC 5798), run by tern itself in
/// standalone mode (`crates/control/src/vrrp.rs`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VrrpCfg {
    /// The interface the group runs on (a port or a VLAN sub-interface).
    pub interface: String,
    /// Virtual router id, 1..=255.
    pub vrid: u8,
    /// 1..=254, or 255 for the owner of the addresses (the interface's
    /// own addresses).
    #[serde(default = "default_vrrp_priority")]
    pub priority: u8,
    /// Advertisement interval: 10..=40950 ms in steps of 10 (the
    /// protocol's centiseconds).
    #[serde(default = "default_vrrp_interval")]
    pub interval_ms: u32,
    /// The virtual addresses, all IPv4 or all IPv6 (one family per group;
    /// an IPv6 group's first is link-local, or fe80::200:5eff:fe00:2XX is
    /// added in front).
    pub addresses: Vec<String>,
    /// Take over from a lower-priority master.
    #[serde(default = "yes")]
    pub preempt: bool,
    /// How long after hearing a lower-priority master to preempt it.
    #[serde(default)]
    pub preempt_delay_ms: u32,
    /// Accept packets to the virtual addresses while master when not
    /// their owner (RFC 5798 6.1 Accept_Mode).
    #[serde(default)]
    pub accept_mode: bool,
    /// Interfaces whose loss (down) lowers the priority by
    /// `track_decrement` each.
    #[serde(default)]
    pub track_interfaces: Vec<String>,
    /// Prefixes whose route's loss lowers the priority by
    /// `track_decrement` each.
    #[serde(default)]
    pub track_routes: Vec<String>,
    #[serde(default = "default_track_decrement")]
    pub track_decrement: u8,
    /// A command run on every transition, with the group, the old and
    /// the new state as arguments (`sh -c "CMD" - IFACE VRID FAMILY FROM TO`).
    #[serde(default)]
    pub notify: Option<String>,
}

fn default_vrrp_priority() -> u8 {
    100
}

fn default_vrrp_interval() -> u32 {
    1000
}

fn default_track_decrement() -> u8 {
    50
}
