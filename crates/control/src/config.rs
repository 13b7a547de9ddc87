//! tern's configuration file (TOML).
//!
//! Loading is all-or-nothing: the text is deserialized with unknown keys
//! refused, then validated as a whole (addresses parse, names are unique,
//! references resolve, VLAN ids and MTUs are in range). Every error names
//! the file, the line and the key, e.g.
//! `tern.toml:7:13: interface[1].addresses[0]: invalid address "10.0.0.300/24"`.
//! A configuration that fails validation starts nothing.
//!
//! The reference with a complete example is docs/CONFIG.md.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use tern_fib::Prefix;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub dataplane: Dataplane,
    #[serde(default)]
    pub neighbor: NeighborCfg,
    #[serde(default, rename = "interface")]
    pub interfaces: Vec<InterfaceCfg>,
    #[serde(default, rename = "tunnel")]
    pub tunnels: Vec<TunnelCfg>,
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
    pub linux: crate::linux::LinuxCfg,
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

/// A configuration error with its position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: Option<usize>,
    /// In characters from 1 (not bytes).
    pub column: Option<usize>,
    /// Dotted key path, e.g. `interface[1].addresses[0]`.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": ")?;
        if let Some(k) = &self.key {
            write!(f, "{k}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// One step of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

pub(crate) fn path_string(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                // A key the file made up may be of any length.
                match k.char_indices().nth(QUOTE_CHARS) {
                    None => s.push_str(k),
                    Some((cut, _)) => s.push_str(&format!("{}...", &k[..cut])),
                }
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// A validation problem at a key path.
struct Problem {
    path: Vec<Seg>,
    message: String,
}

impl Problem {
    /// The error a user sees: where in `text` (of `file`) the key is.
    fn located(self, text: &str, file: &str) -> ConfigError {
        let (line, column) = locate(text, &self.path).unzip();
        ConfigError {
            file: file.to_string(),
            line,
            column,
            key: Some(path_string(&self.path)),
            message: bounded(self.message),
        }
    }
}

fn k(s: &str) -> Seg {
    Seg::Key(s.to_string())
}

/// Finds the 1-based line and column of a key path in TOML text.
pub fn locate(text: &str, path: &[Seg]) -> Option<(usize, usize)> {
    enum At<'a> {
        Item(&'a toml_edit::Item),
        Table(&'a toml_edit::Table),
    }
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut at = At::Item(doc.as_item());
    let mut span = None;
    for seg in path {
        at = match (at, seg) {
            (At::Item(it), Seg::Key(key)) => {
                let (kk, v) = it.as_table_like()?.get_key_value(key)?;
                span = kk.span().or_else(|| v.span()).or(span);
                At::Item(v)
            }
            (At::Table(t), Seg::Key(key)) => {
                let (kk, v) = t.get_key_value(key)?;
                span = kk.span().or_else(|| v.span()).or(span);
                At::Item(v)
            }
            (At::Item(it), Seg::Index(i)) => {
                if let Some(aot) = it.as_array_of_tables() {
                    let t = aot.get(*i)?;
                    span = t.span().or(span);
                    At::Table(t)
                } else {
                    let v = it.as_array()?.get(*i)?;
                    span = v.span().or(span);
                    break;
                }
            }
            (At::Table(_), Seg::Index(_)) => break,
        };
    }
    span.map(|s| line_col(text, s.start))
}

/// The 1-based line and column (in characters, as editors count them) of
/// byte `offset` of `text` (a character boundary; otherwise the one before).
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |nl| nl + 1);
    (line, before[start..].chars().count() + 1)
}

/// An interface after validation.
#[derive(Clone, Debug, PartialEq)]
pub struct IfacePlan {
    pub name: String,
    pub kind: IfacePlanKind,
    pub v4: Vec<tern_nodes::state::V4Net>,
    pub v6: Vec<tern_nodes::state::V6Net>,
    pub mtu: Option<u16>,
    pub mac: Option<[u8; 6]>,
    pub up: bool,
    pub acl_in: Option<String>,
    pub acl_out: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum IfacePlanKind {
    /// A device driven through a port; the port number is the interface's
    /// position among physical interfaces.
    Port { device: Option<String>, driver: Driver },
    /// A VLAN sub-interface of the interface at `parent` (an index into the
    /// plan's interface list).
    Vlan { parent: usize, vid: u16 },
    /// A GRE tunnel.
    Gre { local: IpAddr, remote: IpAddr, key: Option<u32>, ttl: u8 },
    /// The index of a sub-interface or tunnel a reload removed (never
    /// produced by [`parse`]; see `crate::reload`). Its name is empty.
    Removed,
}

/// A route file to load, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteFilePlan {
    pub path: PathBuf,
    pub via: Option<IpAddr>,
    pub via6: Option<IpAddr>,
    pub ifindex: Option<u16>,
}

/// A static route, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct RoutePlan {
    pub prefix: Prefix,
    pub target: tern_fib::RouteTarget,
    pub attrs: tern_fib::RouteAttrs,
}

/// Largest IP MTU a lane carries: every lane (XDP, AF_XDP, AF_PACKET,
/// memory) holds a frame in one buffer of the workers' pool, whose frames
/// are `tern_packet::DEFAULT_FRAME_SIZE` bytes with
/// `tern_packet::DEFAULT_HEADROOM` in front, and a frame is the MTU plus
/// its Ethernet header (and 802.1Q tag on a VLAN sub-interface). Neither
/// jumbo frames nor XDP frags / AF_XDP multi-buffer are implemented, so
/// an MTU above this is refused rather than dropping every larger frame.
pub const fn lane_mtu_limit(vlan: bool) -> u16 {
    let room = tern_packet::DEFAULT_FRAME_SIZE as u16 - tern_packet::DEFAULT_HEADROOM;
    room - 14 - if vlan { 4 } else { 0 }
}

/// An interface MTU: 68..=9216, at least 1280 with IPv6 addresses, and
/// within what the lane carries ([`lane_mtu_limit`]). The one check for
/// the file, reload and the API.
pub fn check_mtu(mtu: u16, has_v6: bool, vlan: bool) -> Result<(), String> {
    if !(68..=9216).contains(&mtu) {
        return Err(format!("MTU {mtu}: need 68..=9216"));
    }
    if has_v6 && mtu < 1280 {
        return Err(format!("MTU {mtu} is below the IPv6 minimum of 1280"));
    }
    let limit = lane_mtu_limit(vlan);
    if mtu > limit {
        let what = if vlan { "a VLAN sub-interface" } else { "an interface" };
        return Err(format!(
            "MTU {mtu} is above the {limit} the lanes carry on {what} ({}-byte packet buffers with {} bytes of headroom; jumbo frames are not supported)",
            tern_packet::DEFAULT_FRAME_SIZE,
            tern_packet::DEFAULT_HEADROOM
        ));
    }
    Ok(())
}

/// A configuration that passed validation, in the form the router applies.
/// Physical interfaces come first (interface index = port number), then
/// VLAN sub-interfaces, then tunnels, each group in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub config: Config,
    pub ifaces: Vec<IfacePlan>,
    pub routes: Vec<RoutePlan>,
    pub route_files: Vec<RouteFilePlan>,
    pub acls: Vec<tern_acl::RuleSet>,
    /// Permanent neighbours: (interface index, address, MAC).
    pub static_neighbors: Vec<(u16, IpAddr, [u8; 6])>,
}

impl Plan {
    pub fn iface_index(&self, name: &str) -> Option<u16> {
        self.ifaces.iter().position(|i| i.name == name && i.kind != IfacePlanKind::Removed).map(|i| i as u16)
    }

    /// Interfaces the configuration names (not the indexes of removed
    /// ones).
    pub fn live_ifaces(&self) -> impl Iterator<Item = (u16, &IfacePlan)> {
        self.ifaces.iter().enumerate().filter(|(_, p)| p.kind != IfacePlanKind::Removed).map(|(i, p)| (i as u16, p))
    }

    pub fn ports(&self) -> usize {
        self.ifaces.iter().filter(|i| matches!(i.kind, IfacePlanKind::Port { .. })).count()
    }
}

/// Reads and validates a configuration file.
pub fn load(path: &Path) -> Result<Plan, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.display().to_string(),
        line: None,
        column: None,
        key: None,
        message: format!("cannot read: {e}"),
    })?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse(&text, &path.display().to_string(), &base)
}

/// Reads and validates a configuration file, then checks everything else
/// `tern run` will need before it touches a device ([`check_host`]):
/// `tern config check` and `tern run` both load through here, so a file
/// the check passes does not fail at start for a reason the check could
/// have seen.
pub fn load_for_run(path: &Path) -> Result<Plan, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: file.clone(),
        line: None,
        column: None,
        key: None,
        message: format!("cannot read: {e}"),
    })?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let plan = parse(&text, &file, &base)?;
    check_host(&plan, &text, &file)?;
    Ok(plan)
}

/// What a valid configuration needs from this host, checked without
/// changing anything: the CPUs it pins to exist (and tern may run on
/// them), its devices exist, every route file reads and each of its lines
/// is a valid route, and the API socket can be created. Errors name the
/// file, line and key like [`parse`]'s.
pub fn check_host(plan: &Plan, text: &str, file: &str) -> Result<(), ConfigError> {
    host_problem(plan).map_err(|p| p.located(text, file))
}

fn host_problem(plan: &Plan) -> Result<(), Problem> {
    let c = &plan.config;
    let d = &c.dataplane;
    if !d.cpus.is_empty() || !d.control_cpus.is_empty() {
        let set = rustix::thread::sched_getaffinity(None)
            .map_err(|e| bad(vec![k("dataplane")], format!("cannot read the CPUs tern may use: {e}")))?;
        let allowed: Vec<usize> = (0..MAX_CPU).filter(|&c| set.is_set(c)).collect();
        for (key, list) in [("cpus", &d.cpus), ("control_cpus", &d.control_cpus)] {
            if let Some((i, c)) = list.iter().enumerate().find(|(_, c)| !allowed.contains(c)) {
                return Err(bad(
                    vec![k("dataplane"), k(key), Seg::Index(i)],
                    format!("cpu {c}: not a CPU of this machine that tern may run on ({})", cpu_list(&allowed)),
                ));
            }
        }
    }
    for p in &plan.ifaces {
        if let IfacePlanKind::Port { device: Some(dev), driver } = &p.kind
            && *driver != Driver::Memory
            && !Path::new("/sys/class/net").join(dev).exists()
        {
            let i = c.interfaces.iter().position(|f| f.name == p.name).unwrap_or(0);
            return Err(bad(vec![k("interface"), Seg::Index(i), k("device")], format!("no device {}", quote(dev))));
        }
    }
    for (i, rf) in plan.route_files.iter().enumerate() {
        route_file_routes(rf, plan).map_err(|m| bad(vec![k("route_file"), Seg::Index(i), k("path")], m))?;
    }
    if let Some(g) = &c.api.group {
        crate::api::server::group_id(g).map_err(|e| bad(vec![k("api"), k("group")], e.to_string()))?;
    }
    socket_path_problem(Path::new(&c.api.socket)).map_err(|m| bad(vec![k("api"), k("socket")], m))
}

/// "0-3, 6" for a list of CPU numbers.
fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    if out.is_empty() { "none".into() } else { format!("cpus {}", out.join(", ")) }
}

/// Why the API socket could not be created at `path` (the checks the
/// server's bind makes, without binding): a path a unix socket can
/// have, not an existing non-socket, in a directory that exists or can be
/// created, and that tern may write.
fn socket_path_problem(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let shown = quote(&path.display().to_string());
    // sockaddr_un's sun_path holds 108 bytes with the terminating NUL.
    if path.as_os_str().len() > 107 {
        return Err(format!("{shown}: longer than a unix socket path may be (107 bytes)"));
    }
    // (A live tern on an existing socket is found when the socket is bound.)
    if let Ok(m) = std::fs::symlink_metadata(path)
        && !m.file_type().is_socket()
    {
        return Err(format!("{shown}: exists and is not a socket"));
    }
    let mut dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // The directory, or the nearest ancestor that exists (the rest is
    // created).
    loop {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => return Err(format!("{shown}: {} is not a directory", dir.display())),
            Err(_) => match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => dir = p,
                _ => break,
            },
        }
    }
    let cannot = |e: &dyn std::fmt::Display| format!("{shown}: cannot create it in {}: {e}", dir.display());
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK).map_err(|e| cannot(&e))?;
    // Root passes access(2) where the file system still refuses (/proc,
    // /sys): try what the server will do, under a name of our own, and
    // remove it again.
    let exists = path.parent().is_some_and(|p| p == dir || p.as_os_str().is_empty());
    let probe = dir.join(format!(".tern-check-{}", std::process::id()));
    if exists {
        let probe = probe.with_extension("sock");
        std::os::unix::net::UnixListener::bind(&probe).map_err(|e| cannot(&e))?;
        let _ = std::fs::remove_file(&probe);
    } else {
        std::fs::create_dir(&probe).map_err(|e| cannot(&e))?;
        let _ = std::fs::remove_dir(&probe);
    }
    Ok(())
}

/// The routes of a route file, each checked as a `[[route]]` is (next
/// hops by [`check_gateway`]). Errors name the file and, for a bad
/// line, its number.
pub fn route_file_routes(rf: &RouteFilePlan, plan: &Plan) -> Result<Vec<(Prefix, tern_fib::RouteTarget)>, String> {
    use std::io::BufRead;
    let what = rf.path.display().to_string();
    let mut r = tern_fib::routefile::open(&rf.path).map_err(|e| format!("{what}: cannot read: {e}"))?;
    let mut out = Vec::new();
    let mut buf = String::new();
    for line in 1.. {
        buf.clear();
        match r.read_line(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("{what}: line {line}: cannot read: {e}")),
        }
        let at = |m: String| bounded(format!("{what}: line {line}: {m}"));
        let Some((prefix, via)) =
            tern_fib::routefile::parse_line(&buf).map_err(|m| at(format!("{m}: {}", quote(buf.trim_end()))))?
        else {
            continue;
        };
        let v4 = prefix.is_v4();
        if let Some(gw) = via {
            check_gateway(&plan.ifaces, gw, rf.ifindex, plan.config.linux.kernel_enabled()).map_err(at)?;
        }
        let target = match (via.or(if v4 { rf.via } else { rf.via6 }), rf.ifindex) {
            (Some(gw), ifindex) => tern_fib::RouteTarget::Via { gw, ifindex },
            (None, Some(ifindex)) => tern_fib::RouteTarget::Connected { ifindex },
            (None, None) => {
                return Err(at(format!(
                    "{prefix} has no next hop and the route_file gives no {}",
                    if v4 { "via" } else { "via6" }
                )));
            }
        };
        out.push((prefix, target));
    }
    Ok(out)
}

/// Parses and validates configuration text. `file` names it in errors;
/// relative route-file paths are resolved against `base`.
pub fn parse(text: &str, file: &str, base: &Path) -> Result<Plan, ConfigError> {
    let config: Config = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map(|s| line_col(text, s.start)).unzip();
        // Some syntax errors come without a message (e.g. a control
        // character in a comment, or a value missing at the end of the file).
        let message = match e.message().trim() {
            "" => match e.span().and_then(|s| text.get(s.start..)).and_then(|t| t.chars().next()) {
                Some(c) => format!("invalid TOML: unexpected {c:?}"),
                None => "invalid TOML: unexpected end of file".to_string(),
            },
            // One line: the toml crate's messages may span several.
            m => m.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; "),
        };
        // A value of the wrong type or out of its type's range: the key
        // whose value the span points into.
        let key = e.span().and_then(|s| key_at(text, s.start)).filter(|p| !p.is_empty()).map(|p| path_string(&p));
        ConfigError { file: file.to_string(), line, column, key, message: bounded(message) }
    })?;
    validate(config, base).map_err(|p| p.located(text, file))
}

/// Characters of a value an error message quotes.
const QUOTE_CHARS: usize = 48;
/// Longest error message (beyond it, the middle is left out).
pub const MAX_MESSAGE: usize = 400;

/// A value quoted for an error message: at most [`QUOTE_CHARS`] of it,
/// and its length when it is longer (a 100 MB name must not make a 100 MB
/// error line).
pub fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_CHARS) {
        None => format!("{s:?}"),
        Some((cut, _)) => format!("{:?}... ({} bytes)", &s[..cut], s.len()),
    }
}

/// A message of at most about [`MAX_MESSAGE`] bytes: a longer one keeps its
/// beginning and end (messages the toml crate writes may quote a value).
pub fn bounded(m: String) -> String {
    if m.len() <= MAX_MESSAGE {
        return m;
    }
    let mut head = MAX_MESSAGE / 2;
    while !m.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = m.len() - MAX_MESSAGE / 4;
    while !m.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{} ...({} bytes left out)... {}", &m[..head], tail - head, &m[tail..])
}

/// The key path of the value at byte `offset` of `text`: the innermost
/// key or array element whose value covers it. None when the text does
/// not parse or the offset is outside every value.
pub fn key_at(text: &str, offset: usize) -> Option<Vec<Seg>> {
    fn item(it: &toml_edit::Item, offset: usize, path: &mut Vec<Seg>) {
        match it {
            toml_edit::Item::Table(t) => table(t, offset, path),
            toml_edit::Item::ArrayOfTables(a) => {
                for (i, t) in a.iter().enumerate() {
                    if t.span().is_some_and(|s| s.contains(&offset)) || t.iter().any(|(_, v)| covers(v, offset)) {
                        path.push(Seg::Index(i));
                        table(t, offset, path);
                        return;
                    }
                }
            }
            toml_edit::Item::Value(v) => value(v, offset, path),
            toml_edit::Item::None => {}
        }
    }
    fn covers(it: &toml_edit::Item, offset: usize) -> bool {
        match it {
            toml_edit::Item::Value(v) => v.span().is_some_and(|s| s.start <= offset && offset <= s.end),
            toml_edit::Item::Table(t) => {
                t.span().is_some_and(|s| s.contains(&offset)) || t.iter().any(|(_, v)| covers(v, offset))
            }
            toml_edit::Item::ArrayOfTables(a) => a
                .iter()
                .any(|t| t.span().is_some_and(|s| s.contains(&offset)) || t.iter().any(|(_, v)| covers(v, offset))),
            toml_edit::Item::None => false,
        }
    }
    fn table(t: &toml_edit::Table, offset: usize, path: &mut Vec<Seg>) {
        for (key, v) in t.iter() {
            let on_key = t.key(key).and_then(|k| k.span()).is_some_and(|s| s.contains(&offset));
            if on_key || covers(v, offset) {
                path.push(Seg::Key(key.to_string()));
                item(v, offset, path);
                return;
            }
        }
    }
    fn value(v: &toml_edit::Value, offset: usize, path: &mut Vec<Seg>) {
        match v {
            toml_edit::Value::Array(a) => {
                for (i, e) in a.iter().enumerate() {
                    if e.span().is_some_and(|s| s.start <= offset && offset <= s.end) {
                        path.push(Seg::Index(i));
                        value(e, offset, path);
                        return;
                    }
                }
            }
            toml_edit::Value::InlineTable(t) => {
                for (key, e) in t.iter() {
                    if e.span().is_some_and(|s| s.start <= offset && offset <= s.end) {
                        path.push(Seg::Key(key.to_string()));
                        value(e, offset, path);
                        return;
                    }
                }
            }
            _ => {}
        }
    }
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut path = Vec::new();
    item(doc.as_item(), offset, &mut path);
    Some(path)
}

fn bad(path: Vec<Seg>, message: impl Into<String>) -> Problem {
    Problem { path, message: message.into() }
}

/// Parses "address/len" for an interface address.
pub fn parse_if_addr(s: &str) -> Result<IpAddr, String> {
    let (a, _) = s.split_once('/').ok_or_else(|| format!("{} needs a prefix length (e.g. 10.0.0.1/24)", quote(s)))?;
    a.parse::<IpAddr>().map_err(|_| format!("invalid address {}", quote(s)))
}

/// "address/len" of an interface: the address and its prefix length, by
/// the rules the configuration and the API share.
pub(crate) fn if_addr(s: &str) -> Result<(IpAddr, u8), String> {
    let addr = parse_if_addr(s)?;
    let len_s = s.split_once('/').map(|(_, l)| l).unwrap_or_default();
    // Digits only, as tern_fib::Prefix reads them (u8's parser takes "+24").
    if len_s.is_empty() || len_s.len() > 3 || !len_s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("invalid prefix length in {}", quote(s)));
    }
    let len: u8 = len_s.parse().map_err(|_| format!("invalid prefix length in {}", quote(s)))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(format!("prefix length {len} too long for {addr}"));
    }
    if addr.is_unspecified() || addr.is_multicast() || addr.is_loopback() {
        return Err(format!("{addr} cannot be an interface address"));
    }
    Ok((addr, len))
}

pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!("invalid MAC address {}", quote(s)));
    }
    for (m, p) in mac.iter_mut().zip(&parts) {
        // One or two hex digits (from_str_radix takes "+2" and "002").
        if p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("invalid MAC address {}", quote(s)));
        }
        *m = u8::from_str_radix(p, 16).map_err(|_| format!("invalid MAC address {}", quote(s)))?;
    }
    if mac[0] & 1 != 0 || mac == [0; 6] {
        return Err(format!("{s} is not a unicast MAC address"));
    }
    Ok(mac)
}

/// Linux's rule for a device name (`dev_valid_name`): 1-15 bytes, not "."
/// or "..", without '/', ':' or white space (nor control characters).
fn linux_dev_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() < 16
        && s != "."
        && s != ".."
        && !s.contains(|c: char| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
}

/// An address a next hop or a neighbour can have: not unspecified,
/// loopback, multicast or the IPv4 broadcast.
fn host_address(a: IpAddr) -> bool {
    !(a.is_unspecified() || a.is_loopback() || a.is_multicast() || a == IpAddr::V4(std::net::Ipv4Addr::BROADCAST))
}

/// The connected subnet of `addr/len`.
fn subnet(addr: IpAddr, len: u8) -> Option<Prefix> {
    Prefix::new_truncated(addr, len)
}

/// The subnets of an interface's addresses.
fn subnets(p: &IfacePlan) -> impl Iterator<Item = Prefix> + '_ {
    p.v4.iter()
        .filter_map(|n| subnet(IpAddr::V4(n.addr), n.len))
        .chain(p.v6.iter().filter_map(|n| subnet(IpAddr::V6(n.addr), n.len)))
}

/// The rule for interface addresses that the file, a reload and the API
/// share: no subnet of interface `index` may overlap a subnet of another
/// interface (the longer one would take the other's hosts: their traffic
/// would leave by the wrong interface).
pub fn check_subnet(ifaces: &[IfacePlan], index: usize, addr: IpAddr, len: u8) -> Result<(), String> {
    let Some(mine) = subnet(addr, len) else { return Ok(()) };
    for (j, other) in ifaces.iter().enumerate() {
        if j == index || other.kind == IfacePlanKind::Removed {
            continue;
        }
        if let Some(theirs) = subnets(other).find(|t| t.covers(&mine) || mine.covers(t)) {
            return Err(format!(
                "subnet {mine} of {addr}/{len} overlaps {theirs} of interface {}: one interface's hosts would be reached through the other",
                other.name
            ));
        }
    }
    Ok(())
}

/// The rule for next hops that the file, a reload and the API share: a
/// host address, not one of tern's own (a route via the router itself is
/// a black hole), and, without an interface, inside a subnet of one of
/// `ifaces` (the only gateways the FIB resolves) unless `reached` (a
/// subnet learned elsewhere, e.g. from the kernel's addresses, has it).
pub fn check_gateway(ifaces: &[IfacePlan], gw: IpAddr, ifindex: Option<u16>, reached: bool) -> Result<(), String> {
    if !host_address(gw) {
        return Err(format!("{gw} cannot be a next hop"));
    }
    let live = || ifaces.iter().filter(|p| p.kind != IfacePlanKind::Removed);
    let own =
        |p: &&IfacePlan| p.v4.iter().any(|n| IpAddr::V4(n.addr) == gw) || p.v6.iter().any(|n| IpAddr::V6(n.addr) == gw);
    if let Some(p) = live().find(own) {
        return Err(format!("{gw} is tern's own address (on {}): a route via it would be a black hole", p.name));
    }
    if ifindex.is_none() && !reached && !live().any(|p| subnets(p).any(|s| s.contains(gw))) {
        return Err(format!(
            "gateway {gw} is in no interface's subnet: no interface reaches it (name the interface, or give one an address on its subnet)"
        ));
    }
    Ok(())
}

/// CPU numbers a configuration may name (a CPU set's size).
pub const MAX_CPU: usize = 1024;

fn validate(config: Config, base: &Path) -> Result<Plan, Problem> {
    let d = &config.dataplane;
    if d.workers == 0 || d.workers > 64 {
        return Err(bad(vec![k("dataplane"), k("workers")], format!("{} workers: need 1..=64", d.workers)));
    }
    if !(1024..=1 << 20).contains(&d.pool_frames) {
        return Err(bad(vec![k("dataplane"), k("pool_frames")], format!("{}: need 1024..=1048576", d.pool_frames)));
    }
    if !d.cpus.is_empty() && d.cpus.len() < usize::from(d.workers) {
        return Err(bad(vec![k("dataplane"), k("cpus")], "give one CPU per worker, or none"));
    }
    for (key, list) in [("cpus", &d.cpus), ("control_cpus", &d.control_cpus)] {
        if let Some((i, c)) = list.iter().enumerate().find(|&(_, &c)| c >= MAX_CPU) {
            return Err(bad(vec![k("dataplane"), k(key), Seg::Index(i)], format!("cpu {c}: need 0..{MAX_CPU}")));
        }
    }
    let n = &config.neighbor;
    if n.retry_ms == 0 || n.probes == 0 || n.queue_per_dest == 0 || n.queue_total == 0 || n.reachable_ms == 0 {
        return Err(bad(
            vec![k("neighbor")],
            "reachable_ms, retry_ms, probes, queue_per_dest and queue_total must be positive",
        ));
    }
    for (key, v) in [("reachable_ms", n.reachable_ms), ("delay_ms", n.delay_ms), ("retry_ms", n.retry_ms)] {
        if v > NEIGHBOR_MAX_MS {
            return Err(bad(vec![k("neighbor"), k(key)], format!("{v} is more than an hour ({NEIGHBOR_MAX_MS})")));
        }
    }
    if n.probes > NEIGHBOR_MAX_PROBES {
        return Err(bad(vec![k("neighbor"), k("probes")], format!("{} is more than {NEIGHBOR_MAX_PROBES}", n.probes)));
    }
    if n.queue_per_dest > n.queue_total {
        return Err(bad(
            vec![k("neighbor"), k("queue_per_dest")],
            format!("{} is more than queue_total ({})", n.queue_per_dest, n.queue_total),
        ));
    }
    if n.queue_total > d.pool_frames as usize {
        return Err(bad(
            vec![k("neighbor"), k("queue_total")],
            format!(
                "{} is more than the buffers a worker has (dataplane.pool_frames {})",
                n.queue_total, d.pool_frames
            ),
        ));
    }
    if !config.metrics.listen.is_empty() && config.metrics.listen.parse::<std::net::SocketAddr>().is_err() {
        return Err(bad(
            vec![k("metrics"), k("listen")],
            format!("{} is not address:port", quote(&config.metrics.listen)),
        ));
    }
    if config.api.socket.is_empty() {
        return Err(bad(vec![k("api"), k("socket")], "empty socket path"));
    }
    if let Err(e) = config.api.mode() {
        return Err(bad(vec![k("api"), k("socket_mode")], e));
    }
    // Whether the group exists is a question about the host: `load_for_run`
    // asks it (config check and run), not the parser.
    if config.api.idle_timeout_ms == 0 {
        return Err(bad(vec![k("api"), k("idle_timeout_ms")], "must be positive"));
    }
    // Before the sets' own checks, so the error names the second of two.
    for (i, s) in config.acl.iter().enumerate() {
        if config.acl[..i].iter().any(|o| o.name == s.name) {
            return Err(bad(
                vec![k("acl"), Seg::Index(i), k("name")],
                format!("another [[acl]] is named {}", quote(&s.name)),
            ));
        }
    }
    if let Err(e) = tern_acl::validate_all(&config.acl) {
        let i = config.acl.iter().position(|s| s.name == e.set).unwrap_or(0);
        let mut path = vec![k("acl"), Seg::Index(i)];
        if let Some(r) = e.rule {
            path.push(k("rule"));
            path.push(Seg::Index(r));
        }
        if let Some(key) = e.key {
            path.push(k(key));
        }
        return Err(bad(path, e.message));
    }
    let acl_names: HashSet<&str> = config.acl.iter().map(|s| s.name.as_str()).collect();
    if let Err((key, message)) = config.linux.validate() {
        return Err(bad(vec![k("linux"), k(key)], message));
    }
    let tap = config.linux.exception == crate::linux::Exception::Tap;
    if tap && !config.linux.linux_mode() {
        return Err(bad(
            vec![k("linux"), k("exception")],
            "exception = \"tap\" hands the router's own traffic to Linux: it needs mode = \"linux\"",
        ));
    }

    // Interface indexes are u16, and u16::MAX means "no interface".
    if config.interfaces.len() + config.tunnels.len() >= usize::from(tern_nodes::state::NO_IF) {
        let key = if config.tunnels.is_empty() { "interface" } else { "tunnel" };
        return Err(bad(vec![k(key)], format!("at most {} interfaces and tunnels", tern_nodes::state::NO_IF - 1)));
    }
    // Interfaces: physical first, then VLANs, keeping file order.
    let mut names = HashSet::new();
    let mut devices = HashSet::new();
    let mut order: Vec<usize> = Vec::new();
    for (i, c) in config.interfaces.iter().enumerate() {
        let p = |key: &str| vec![k("interface"), Seg::Index(i), k(key)];
        if c.name.is_empty() || c.name.len() > 32 || c.name.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(bad(p("name"), format!("{}: names are 1-32 characters without spaces", quote(&c.name))));
        }
        if !names.insert(c.name.as_str()) {
            return Err(bad(p("name"), format!("interface {} defined twice", quote(&c.name))));
        }
        match (&c.device, &c.parent, c.vlan) {
            (_, None, None) => {
                if let Some(dev) = &c.device
                    && !devices.insert(dev.as_str())
                {
                    return Err(bad(p("device"), format!("device {} used by two interfaces", quote(dev))));
                }
                if let Some(dev) = &c.device
                    && !linux_dev_name(dev)
                {
                    return Err(bad(p("device"), format!("{} is not a Linux device name", quote(dev))));
                }
                if c.device.is_none() && c.driver != Driver::Memory {
                    return Err(bad(p("device"), "a physical interface needs a device (or driver = \"memory\")"));
                }
                order.push(i);
            }
            (None, Some(_), Some(v)) => {
                if !(1..=4094).contains(&v) {
                    return Err(bad(p("vlan"), format!("VLAN id {v}: need 1..=4094")));
                }
            }
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(bad(p("device"), "an interface has either a device or a parent and vlan, not both"));
            }
            _ => return Err(bad(p("vlan"), "a VLAN sub-interface needs both parent and vlan")),
        }
    }
    let phys = order.len();
    for (i, c) in config.interfaces.iter().enumerate() {
        if c.parent.is_some() {
            order.push(i);
        }
    }
    let mut ifaces: Vec<IfacePlan> = Vec::new();
    let mut all_addrs: HashSet<IpAddr> = HashSet::new();
    let mut vlan_seen = HashSet::new();
    for (pos, &i) in order.iter().enumerate() {
        let c = &config.interfaces[i];
        let p = |key: &str| vec![k("interface"), Seg::Index(i), k(key)];
        let kind = if pos < phys {
            let driver = match (c.lane, c.driver) {
                (None, d) => d,
                (Some(l), Driver::Auto) => l.driver(),
                (Some(l), d) if l.driver() == d => d,
                (Some(_), _) => return Err(bad(p("lane"), "give either lane or driver, not both")),
            };
            if tap && matches!(driver, Driver::Afxdp | Driver::Xdp) {
                return Err(bad(
                    p(if c.lane.is_some() { "lane" } else { "driver" }),
                    "with [linux] exception = \"tap\" the XDP program would still pass the router's traffic to the device's own stack: use driver \"afpacket\", \"memory\" or \"auto\" (which then means afpacket)",
                ));
            }
            IfacePlanKind::Port { device: c.device.clone(), driver }
        } else {
            let parent_name = c.parent.as_deref().unwrap_or_default();
            let parent = order[..phys]
                .iter()
                .position(|&j| config.interfaces[j].name == parent_name)
                .ok_or_else(|| bad(p("parent"), format!("no physical interface named {}", quote(parent_name))))?;
            let vid = c.vlan.unwrap_or_default();
            if !vlan_seen.insert((parent, vid)) {
                return Err(bad(p("vlan"), format!("VLAN {vid} defined twice on {parent_name}")));
            }
            if c.mac.is_some() {
                return Err(bad(p("mac"), "a VLAN sub-interface uses its parent's MAC"));
            }
            IfacePlanKind::Vlan { parent, vid }
        };
        // Ports and VLAN sub-interfaces each get a TAP `tern-<name>`.
        let tap_dev = crate::linux::tap_name(&c.name);
        if tap && tap_dev.len() >= 16 {
            return Err(bad(
                p("name"),
                format!(
                    "the TAP device {tap_dev:?} would be longer than Linux's 15 characters: shorten the interface name to 10 characters"
                ),
            ));
        }
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (j, a) in c.addresses.iter().enumerate() {
            let ap = vec![k("interface"), Seg::Index(i), k("addresses"), Seg::Index(j)];
            let (addr, len) = if_addr(a).map_err(|m| bad(ap.clone(), m))?;
            if !all_addrs.insert(addr) {
                return Err(bad(ap, format!("address {addr} configured twice")));
            }
            match addr {
                IpAddr::V4(a) => v4.push(tern_nodes::state::V4Net { addr: a, len }),
                IpAddr::V6(a) => {
                    if tern_nodes::state::is_link_local(a) {
                        return Err(bad(ap, "link-local addresses are derived from the MAC; configure global ones"));
                    }
                    v6.push(tern_nodes::state::V6Net { addr: a, len })
                }
            }
        }
        if let Some(mtu) = c.mtu {
            check_mtu(mtu, !v6.is_empty(), c.parent.is_some()).map_err(|m| bad(p("mtu"), m))?;
        }
        let mac = match &c.mac {
            Some(m) => Some(parse_mac(m).map_err(|e| bad(p("mac"), e))?),
            None => None,
        };
        if c.driver == Driver::Memory && mac.is_none() && c.parent.is_none() {
            return Err(bad(p("mac"), "a memory interface needs a mac"));
        }
        for (key, acl) in [("acl_in", &c.acl_in), ("acl_out", &c.acl_out)] {
            if let Some(a) = acl
                && !acl_names.contains(a.as_str())
            {
                return Err(bad(p(key), format!("no [[acl]] named {}", quote(a))));
            }
        }
        ifaces.push(IfacePlan {
            name: c.name.clone(),
            kind,
            v4,
            v6,
            mtu: c.mtu,
            mac,
            up: c.up,
            acl_in: c.acl_in.clone(),
            acl_out: c.acl_out.clone(),
        });
    }
    // Where each interface is in the file, for errors found across them.
    let mut origin: Vec<(&str, usize)> = order.iter().map(|&i| ("interface", i)).collect();
    let if_addrs = all_addrs.clone();
    let mut endpoints = HashSet::new();
    for (i, t) in config.tunnels.iter().enumerate() {
        let p = |key: &str| vec![k("tunnel"), Seg::Index(i), k(key)];
        if t.name.is_empty() || t.name.len() > 32 || t.name.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(bad(p("name"), format!("{}: names are 1-32 characters without spaces", quote(&t.name))));
        }
        if !names.insert(t.name.as_str()) {
            return Err(bad(p("name"), format!("{} is already an interface name", quote(&t.name))));
        }
        let local =
            t.local.parse::<IpAddr>().map_err(|_| bad(p("local"), format!("invalid address {}", quote(&t.local))))?;
        let remote = t
            .remote
            .parse::<IpAddr>()
            .map_err(|_| bad(p("remote"), format!("invalid address {}", quote(&t.remote))))?;
        if local.is_ipv4() != remote.is_ipv4() {
            return Err(bad(p("remote"), "local and remote must be of one address family"));
        }
        for (key, a) in [("local", local), ("remote", remote)] {
            if a.is_unspecified() || a.is_multicast() || a.is_loopback() {
                return Err(bad(p(key), format!("{a} cannot be a tunnel endpoint")));
            }
        }
        if !if_addrs.contains(&local) {
            return Err(bad(
                p("local"),
                format!("{local} is not one of tern's addresses: the outer source must be an interface's address"),
            ));
        }
        if t.ttl == 0 {
            return Err(bad(p("ttl"), "TTL 0 would never leave the router"));
        }
        if !endpoints.insert((local, remote, t.key)) {
            return Err(bad(p("remote"), "two tunnels with the same local, remote and key"));
        }
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (j, a) in t.addresses.iter().enumerate() {
            let ap = vec![k("tunnel"), Seg::Index(i), k("addresses"), Seg::Index(j)];
            let (addr, len) = if_addr(a).map_err(|m| bad(ap.clone(), m))?;
            if !all_addrs.insert(addr) {
                return Err(bad(ap, format!("address {addr} configured twice")));
            }
            match addr {
                IpAddr::V4(a) => v4.push(tern_nodes::state::V4Net { addr: a, len }),
                IpAddr::V6(a) => v6.push(tern_nodes::state::V6Net { addr: a, len }),
            }
        }
        if let Some(mtu) = t.mtu
            && !(68..=9000).contains(&mtu)
        {
            return Err(bad(p("mtu"), format!("MTU {mtu}: need 68..=9000")));
        }
        for (key, acl) in [("acl_in", &t.acl_in), ("acl_out", &t.acl_out)] {
            if let Some(a) = acl
                && !acl_names.contains(a.as_str())
            {
                return Err(bad(p(key), format!("no [[acl]] named {}", quote(a))));
            }
        }
        ifaces.push(IfacePlan {
            name: t.name.clone(),
            kind: IfacePlanKind::Gre { local, remote, key: t.key, ttl: t.ttl },
            v4,
            v6,
            mtu: t.mtu,
            mac: None,
            up: t.up,
            acl_in: t.acl_in.clone(),
            acl_out: t.acl_out.clone(),
        });
        origin.push(("tunnel", i));
    }
    // No subnet on two interfaces (the second of two names the problem).
    for (x, f) in ifaces.iter().enumerate() {
        let (section, i) = origin[x];
        let addrs =
            f.v4.iter().map(|n| (IpAddr::V4(n.addr), n.len)).chain(f.v6.iter().map(|n| (IpAddr::V6(n.addr), n.len)));
        for (addr, len) in addrs {
            check_subnet(&ifaces[..x], usize::MAX, addr, len).map_err(|m| {
                let list =
                    if section == "tunnel" { &config.tunnels[i].addresses } else { &config.interfaces[i].addresses };
                let j = list.iter().position(|a| if_addr(a).is_ok_and(|(b, _)| b == addr)).unwrap_or(0);
                bad(vec![k(section), Seg::Index(i), k("addresses"), Seg::Index(j)], m)
            })?;
        }
    }
    // Fewer than NO_IF of them (checked above): every index fits a u16.
    let by_name: HashMap<&str, u16> = ifaces.iter().enumerate().map(|(i, f)| (f.name.as_str(), i as u16)).collect();
    let index_of = |name: &str| by_name.get(name).copied();

    // With the kernel mirror, Linux's addresses bring connected subnets too:
    // a gateway outside tern's own may still be reached.
    let kernel_addrs = config.linux.kernel_enabled();
    let mut routes = Vec::new();
    for (i, r) in config.routes.iter().enumerate() {
        let p = |key: &str| vec![k("route"), Seg::Index(i), k(key)];
        let prefix: Prefix = r.prefix.parse().map_err(|e| bad(p("prefix"), format!("{e}")))?;
        let via = match &r.via {
            Some(v) => Some(v.parse::<IpAddr>().map_err(|_| bad(p("via"), format!("invalid address {}", quote(v))))?),
            None => None,
        };
        if let Some(v) = via
            && v.is_ipv4() != matches!(prefix, Prefix::V4 { .. })
        {
            return Err(bad(p("via"), format!("next hop {v} is not of the prefix's address family")));
        }
        let ifindex = match &r.interface {
            Some(n) => {
                Some(index_of(n).ok_or_else(|| bad(p("interface"), format!("no interface named {}", quote(n))))?)
            }
            None => None,
        };
        if let Some(v) = via {
            check_gateway(&ifaces, v, ifindex, kernel_addrs).map_err(|m| bad(p("via"), m))?;
        }
        let target = match (r.kind, via, ifindex) {
            (RouteType::Unicast, Some(gw), ifindex) => tern_fib::RouteTarget::Via { gw, ifindex },
            (RouteType::Unicast, None, Some(ifindex)) => tern_fib::RouteTarget::Connected { ifindex },
            (RouteType::Unicast, None, None) => return Err(bad(p("via"), "a unicast route needs via or interface")),
            (t, None, None) => match t {
                RouteType::Blackhole => tern_fib::RouteTarget::Blackhole,
                RouteType::Unreachable => tern_fib::RouteTarget::Unreachable,
                _ => tern_fib::RouteTarget::Prohibit,
            },
            (_, _, _) => {
                return Err(bad(p("type"), "blackhole, unreachable and prohibit routes take no via or interface"));
            }
        };
        routes.push(RoutePlan {
            prefix,
            target,
            attrs: tern_fib::RouteAttrs { distance: r.distance, metric: r.metric },
        });
    }
    let mut route_files = Vec::new();
    for (i, f) in config.route_files.iter().enumerate() {
        let p = |key: &str| vec![k("route_file"), Seg::Index(i), k(key)];
        let ifindex = match &f.interface {
            Some(n) => {
                Some(index_of(n).ok_or_else(|| bad(p("interface"), format!("no interface named {}", quote(n))))?)
            }
            None => None,
        };
        let parse_via = |v: &Option<String>, key: &str, want_v4: bool| -> Result<Option<IpAddr>, Problem> {
            match v {
                None => Ok(None),
                Some(s) => {
                    let a = s.parse::<IpAddr>().map_err(|_| bad(p(key), format!("invalid address {}", quote(s))))?;
                    if a.is_ipv4() != want_v4 {
                        return Err(bad(p(key), format!("{a} is not an IPv{} address", if want_v4 { 4 } else { 6 })));
                    }
                    check_gateway(&ifaces, a, ifindex, kernel_addrs).map_err(|m| bad(p(key), m))?;
                    Ok(Some(a))
                }
            }
        };
        let via = parse_via(&f.via, "via", true)?;
        let via6 = parse_via(&f.via6, "via6", false)?;
        let path = PathBuf::from(&f.path);
        let path = if path.is_relative() { base.join(path) } else { path };
        route_files.push(RouteFilePlan { path, via, via6, ifindex });
    }
    let acls = config.acl.clone();
    let mut static_neighbors = Vec::new();
    for (i, n) in config.static_neighbors.iter().enumerate() {
        let p = |key: &str| vec![k("neighbor_entry"), Seg::Index(i), k(key)];
        let ifindex = index_of(&n.interface)
            .ok_or_else(|| bad(p("interface"), format!("no interface named {}", quote(&n.interface))))?;
        if matches!(ifaces[usize::from(ifindex)].kind, IfacePlanKind::Gre { .. }) {
            return Err(bad(p("interface"), format!("{} is a GRE tunnel: it has no neighbours", quote(&n.interface))));
        }
        let ip = n
            .address
            .parse::<IpAddr>()
            .map_err(|_| bad(p("address"), format!("invalid address {}", quote(&n.address))))?;
        if !host_address(ip) {
            return Err(bad(p("address"), format!("{ip} cannot be a neighbour")));
        }
        let mac = parse_mac(&n.mac).map_err(|e| bad(p("mac"), e))?;
        static_neighbors.push((ifindex, ip, mac));
    }
    Ok(Plan { config, ifaces, routes, route_files, acls, static_neighbors })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[dataplane]
workers = 1

[[interface]]
name = "lan0"
device = "veth0"
addresses = ["10.0.1.1/24", "2001:db8:1::1/64"]

[[interface]]
name = "lan0.100"
parent = "lan0"
vlan = 100
addresses = ["10.0.100.1/24"]

[[interface]]
name = "wan0"
device = "veth1"
addresses = ["10.0.2.1/24"]
mtu = 1400

[[route]]
prefix = "0.0.0.0/0"
via = "10.0.2.254"

[[route]]
prefix = "192.0.2.0/24"
type = "blackhole"
"#;

    fn err(text: &str) -> ConfigError {
        parse(text, "t.toml", Path::new("/etc/tern")).expect_err("must fail")
    }

    /// 1-based line of the first occurrence of `needle`.
    fn line_of(text: &str, needle: &str) -> usize {
        let at = text.find(needle).expect("needle in text");
        text[..at].matches('\n').count() + 1
    }

    #[test]
    fn good_config_orders_ports_before_vlans() {
        let plan = parse(GOOD, "t.toml", Path::new("/etc")).expect("valid");
        let names: Vec<_> = plan.ifaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["lan0", "wan0", "lan0.100"]);
        assert_eq!(plan.ports(), 2);
        assert_eq!(plan.ifaces[2].kind, IfacePlanKind::Vlan { parent: 0, vid: 100 });
        assert_eq!(plan.routes.len(), 2);
        assert_eq!(plan.routes[1].target, tern_fib::RouteTarget::Blackhole);
        assert_eq!(plan.ifaces[1].mtu, Some(1400));
    }

    #[test]
    fn bad_address_names_line_and_key() {
        let text = GOOD.replace("10.0.100.1/24", "10.0.100.300/24");
        let e = err(&text);
        assert_eq!(e.key.as_deref(), Some("interface[1].addresses[0]"));
        let line = line_of(&text, "10.0.100.300");
        assert_eq!(e.line, Some(line), "{e}");
        assert!(e.to_string().starts_with(&format!("t.toml:{line}:")), "{e}");
        assert!(e.message.contains("10.0.100.300"), "{e}");
    }

    #[test]
    fn cpu_numbers_are_checked() {
        let text = GOOD.replace("workers = 1", "workers = 1\ncpus = [1]\ncontrol_cpus = [0, 2]");
        let plan = parse(&text, "t.toml", Path::new("/etc")).expect("valid");
        assert_eq!(plan.config.dataplane.control_cpus, [0, 2]);
        let e = err(&GOOD.replace("workers = 1", "workers = 1\ncontrol_cpus = [4096]"));
        assert!(e.message.contains("cpu 4096"), "{e}");
        let e = err(&GOOD.replace("workers = 1", "workers = 1\ncpus = [1024]"));
        assert!(e.message.contains("cpu 1024"), "{e}");
    }

    #[test]
    fn unknown_key_is_refused_with_line() {
        let text = GOOD.replace("mtu = 1400", "mtuu = 1400");
        let e = err(&text);
        assert!(e.message.contains("mtuu"), "{e}");
        assert_eq!(e.line, Some(line_of(&text, "mtuu")), "{e}");
    }

    #[test]
    fn references_must_resolve() {
        assert!(err(&GOOD.replace("parent = \"lan0\"", "parent = \"lan9\"")).message.contains("lan9"));
        let text = format!("{GOOD}\n[[route]]\nprefix = \"10.9.0.0/16\"\ninterface = \"nope\"\n");
        let e = err(&text);
        assert_eq!(e.key.as_deref(), Some("route[2].interface"));
        assert_eq!(e.line, Some(line_of(&text, "interface = \"nope")), "{e}");
        assert!(err(&GOOD.replace("vlan = 100", "vlan = 4095")).message.contains("4095"));
    }

    #[test]
    fn semantic_errors() {
        let e = err(&GOOD.replace("10.0.2.254", "2001:db8::1"));
        assert_eq!(e.key.as_deref(), Some("route[0].via"));
        let e = err(&GOOD.replace("192.0.2.0/24", "192.0.2.1/24"));
        assert_eq!(e.key.as_deref(), Some("route[1].prefix"));
        let e = err(&GOOD.replace("\"10.0.2.1/24\"", "\"10.0.1.1/24\""));
        assert!(e.message.contains("twice"), "{e}");
        let e = err(&GOOD.replace("device = \"veth1\"", "device = \"veth0\""));
        assert!(e.message.contains("two interfaces"), "{e}");
        let e = err(&GOOD.replace("mtu = 1400", "mtu = 40"));
        assert_eq!(e.key.as_deref(), Some("interface[2].mtu"));
        let e = err(&GOOD.replace("workers = 1", "workers = 0"));
        assert_eq!(e.line, Some(line_of(GOOD, "workers")));
    }

    #[test]
    fn acl_errors_point_into_the_rule() {
        let text = format!(
            "{GOOD}\n[[acl]]\nname = \"F\"\ndefault = \"accept\"\n[[acl.rule]]\naction = \"drop\"\nsrc = \"1.1.1.1/32\"\n[[acl.rule]]\naction = \"drop\"\ndport = \"99999\"\n"
        );
        let e = err(&text);
        assert_eq!(e.line, Some(line_of(&text, "dport")), "{e}");
        assert!(e.message.contains("99999"), "{e}");
        let text = text.replace("dport = \"99999\"", "dport = \"80\"\nproto = \"icmp\"");
        let e = err(&text);
        assert!(e.key.as_deref().is_some_and(|k| k.starts_with("acl[0].rule[1]")), "{e}");
        let e = err(&GOOD.replace("addresses = [\"10.0.2.1/24\"]", "addresses = [\"10.0.2.1/24\"]\nacl_in = \"NOPE\""));
        assert_eq!(e.key.as_deref(), Some("interface[2].acl_in"));
    }

    #[test]
    fn tap_exception_combinations() {
        let tap = "\n[linux]\nmode = \"linux\"\nexception = \"tap\"\n";
        let plan = parse(&format!("{GOOD}{tap}"), "t.toml", Path::new("/etc")).expect("valid");
        assert!(plan.config.linux.tap_exception());
        let driven = crate::linux::driven(&plan);
        assert_eq!(driven[0].device, "tern-lan0", "the kernel's side is the TAP");
        assert_eq!(driven[2].device, "tern-lan0.100", "a VLAN sub-interface has its own TAP");
        let text = format!("{GOOD}\n[linux]\nexception = \"tap\"\n");
        let e = err(&text);
        assert_eq!(e.key.as_deref(), Some("linux.exception"), "{e}");
        assert_eq!(e.line, Some(line_of(&text, "exception")), "{e}");
        let text = format!("{}{tap}", GOOD.replace("device = \"veth1\"", "device = \"veth1\"\ndriver = \"afxdp\""));
        let e = err(&text);
        assert_eq!(e.key.as_deref(), Some("interface[2].driver"), "{e}");
        let e = err(&format!("{}{tap}", GOOD.replace("device = \"veth1\"", "device = \"veth1\"\nlane = \"xdp\"")));
        assert_eq!(e.key.as_deref(), Some("interface[2].lane"), "{e}");
        let e = err(&format!("{}{tap}", GOOD.replace("\"wan0\"", "\"wan0-uplink\"")));
        assert_eq!(e.key.as_deref(), Some("interface[2].name"), "{e}");
        assert!(e.message.contains("tern-wan0-uplink"), "{e}");
        let e = err(&format!("{}{tap}", GOOD.replace("\"lan0.100\"", "\"lan0.vlan100\"")));
        assert_eq!(e.key.as_deref(), Some("interface[1].name"), "{e}");
        assert!(e.message.contains("tern-lan0.vlan100") && e.message.contains("15 characters"), "{e}");
        let e = err(&format!("{GOOD}\n[linux]\nmode = \"linux\"\nexception = \"tun\"\n"));
        assert!(e.message.contains("tun"), "{e}");
    }

    #[test]
    fn garbage_never_panics() {
        for t in [
            "",
            "[[interface]]",
            "[dataplane]\nworkers = \"x\"",
            "[[route]]\nprefix=1",
            "\u{0}\u{1}",
            "[[interface]]\nname=\"a\"\nparent=\"a\"\nvlan=1",
        ] {
            let _ = parse(t, "t", Path::new("."));
        }
    }
}
