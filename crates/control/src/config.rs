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
//!
//! `schema` holds the serde types; `validate` checks them section by
//! section into a [`Plan`]; this module locates errors in the text and
//! holds the rules the live commands share (addresses, MTUs, subnets,
//! gateways).

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use tern_fib::Prefix;

mod ike;
mod ipsec;
mod schema;
mod validate;

pub use ike::*;
pub use ipsec::*;
pub use schema::*;
use validate::validate;
pub use validate::vrrp::VrrpGroup;

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
    /// A route-based ESP tunnel: what leaves is encrypted by SA `sa_out`,
    /// what arrives is decrypted by one of `sa_in` (SA ids).
    Ipsec { local: IpAddr, remote: IpAddr, sa_out: u32, sa_in: Vec<u32>, ttl: u8 },
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

/// A GRE tunnel's inner MTU: 68 up to what its outer packet can ride in,
/// the lanes' MTU ([`lane_mtu_limit`]) minus the outer IP header, GRE's
/// and the key's. The one check for the file, reload and the API.
pub fn check_tunnel_mtu(mtu: u16, outer_v6: bool, key: bool) -> Result<(), String> {
    let overhead = if outer_v6 { 40 } else { 20 } + 4 + if key { 4 } else { 0 };
    let most = lane_mtu_limit(false) - overhead;
    if !(68..=most).contains(&mtu) {
        return Err(format!(
            "MTU {mtu}: need 68..={most} (with its {overhead} bytes of outer headers the packet must fit the {} the lanes carry)",
            lane_mtu_limit(false)
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
    /// The `[[ipsec_sa]]` entries, in file order.
    pub sas: Vec<SaPlan>,
    /// `[ike_service]` and the `[[ike]]` peers.
    pub ike: IkePlan,
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
    // A full table takes a while to read: on a terminal, a count.
    let mut meter = crate::progress::Meter::new("routes", None);
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
        if out.len().is_multiple_of(PROGRESS_EVERY) {
            meter.set(out.len() as u64);
        }
    }
    meter.set(out.len() as u64);
    log::info!("{what}: {}", meter.finish("read"));
    Ok(out)
}

/// Routes read or installed between two looks at the clock for the
/// progress line.
pub(crate) const PROGRESS_EVERY: usize = 4096;

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

    const IPSEC: &str = r#"
[[interface]]
name = "wan0"
device = "veth1"
addresses = ["192.0.2.1/24"]

[[ipsec_sa]]
id = 10
spi = 0x1001
crypto = "aes-128-gcm"
key = "0x000102030405060708090a0b0c0d0e0f10111213"
esn = true

[[ipsec_sa]]
id = 20
spi = "0x2001"
crypto = "aes-128-cbc"
integ = "hmac-sha1-96"
key = "0x000102030405060708090a0b0c0d0e0f"
integ_key = "0x0001020304050607080910111213141516171819"
udp_encap = true
soft_packets = 100
hard_packets = 200

[[tunnel]]
name = "ipsec0"
type = "ipsec"
local = "192.0.2.1"
remote = "198.51.100.7"
sa_out = 10
sa_in = [20]
addresses = ["172.16.1.1/30"]
"#;

    #[test]
    fn ipsec_tunnel_and_sas() {
        let plan = parse(IPSEC, "t.toml", Path::new("/etc")).expect("valid");
        assert_eq!(plan.sas.len(), 2);
        assert_eq!((plan.sas[0].spi, plan.sas[1].spi), (0x1001, 0x2001));
        assert_eq!(plan.sas[0].key.bytes().len(), 20, "GCM key with its salt");
        assert_eq!(plan.sas[1].udp_encap, Some((4500, 4500)));
        assert_eq!(plan.sas[1].hard.packets, Some(200));
        assert_eq!(
            plan.ifaces[1].kind,
            IfacePlanKind::Ipsec {
                local: "192.0.2.1".parse().unwrap(),
                remote: "198.51.100.7".parse().unwrap(),
                sa_out: 10,
                sa_in: vec![20],
                ttl: 64
            }
        );
        // Keys never show: not in Debug, not in `config show`.
        let shown = toml::to_string(&plan.config.redacted()).expect("serializes");
        let debug = format!("{plan:?}");
        for secret in ["000102030405", "0x0001"] {
            assert!(!shown.contains(secret), "{shown}");
            assert!(!debug.contains(secret), "{debug}");
        }
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn ipsec_errors_name_the_key() {
        let cases: &[(&str, &str, &str, &str)] = &[
            ("spi = 0x1001", "spi = 0x10", "ipsec_sa[0].spi", "reserved"),
            ("spi = \"0x2001\"", "spi = \"0x1001\"", "ipsec_sa[1].spi", "also ipsec_sa[0]"),
            ("id = 20", "id = 10", "ipsec_sa[1].id", "also"),
            ("crypto = \"aes-128-gcm\"", "crypto = \"aes-128-ccm\"", "ipsec_sa[0].crypto", "aes-128-ccm"),
            ("0x000102030405060708090a0b0c0d0e0f10111213", "0x000102", "ipsec_sa[0].key", "20-byte key"),
            ("0x000102030405060708090a0b0c0d0e0f10111213", "0xzz", "ipsec_sa[0].key", "hex"),
            ("integ = \"hmac-sha1-96\"", "integ = \"none\"", "ipsec_sa[1].integ", "integrity"),
            ("integ_key = \"0x0001020304050607080910111213141516171819\"", "", "ipsec_sa[1]", "20-byte integ_key"),
            ("esn = true", "esn = true\ninteg = \"hmac-sha1-96\"", "ipsec_sa[0].integ", "\"none\""),
            ("esn = true", "replay_window = 100000", "ipsec_sa[0].replay_window", "0..="),
            ("soft_packets = 100", "soft_packets = 300", "ipsec_sa[1].soft_packets", "above the hard"),
            ("udp_encap = true", "udp_dst_port = 4501", "ipsec_sa[1].udp_dst_port", "udp_encap"),
            ("sa_out = 10", "sa_out = 11", "tunnel[0].sa_out", "no [[ipsec_sa]] with id 11"),
            ("sa_in = [20]", "sa_in = [20, 30]", "tunnel[0].sa_in[1]", "id 30"),
            ("sa_in = [20]", "sa_in = [10]", "tunnel[0].sa_in[0]", "already this tunnel's sa_out"),
            ("sa_in = [20]", "sa_in = []", "tunnel[0].type", "needs sa_in"),
            ("sa_out = 10", "", "tunnel[0].type", "needs sa_out"),
            ("remote = \"198.51.100.7\"", "remote = \"2001:db8::7\"", "tunnel[0].remote", "one address family"),
            ("type = \"ipsec\"", "type = \"ipsec\"\nkey = 5", "tunnel[0].key", "GRE's"),
            ("type = \"ipsec\"", "type = \"gre\"", "tunnel[0].sa_out", "ipsec"),
        ];
        for &(from, to, key, msg) in cases {
            let text = IPSEC.replacen(from, to, 1);
            let e = err(&text);
            assert_eq!(e.key.as_deref(), Some(key), "{from} -> {to}: {e}");
            assert!(e.message.contains(msg), "{from} -> {to}: {e}");
            assert!(e.line.is_some(), "{e}");
            // A key is never quoted in an error.
            assert!(!e.to_string().contains("0a0b0c"), "{e}");
        }
        // Two tunnels sending with one SA.
        let second = "\n[[tunnel]]\nname = \"ipsec1\"\ntype = \"ipsec\"\nlocal = \"192.0.2.1\"\nremote = \"198.51.100.8\"\nsa_out = 10\nsa_in = [30]\n";
        let e = err(&format!("{IPSEC}{second}"));
        assert_eq!(e.key.as_deref(), Some("tunnel[1].sa_out"), "{e}");
        assert!(e.message.contains("already tunnel[0]'s sa_out"), "{e}");
        // The MTU leaves room for ESP's overhead.
        let e = err(&IPSEC.replace("sa_in = [20]", "sa_in = [20]\nmtu = 1990"));
        assert_eq!(e.key.as_deref(), Some("tunnel[0].mtu"), "{e}");
        assert!(e.message.contains("ESP"), "{e}");
        parse(&IPSEC.replace("sa_in = [20]", "sa_in = [20]\nmtu = 1400"), "t", Path::new("/")).expect("1400 fits");
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
