//! The control API's wire protocol, version 1.
//!
//! One JSON object per line in each direction over a unix stream socket.
//! A request names its protocol version, an optional id the answer
//! repeats, an operation and its arguments:
//!
//! ```text
//! {"version":1,"id":7,"op":"route_add","args":{"prefix":"10.9.0.0/16","via":"10.0.2.2"}}
//! {"version":1,"id":7,"ok":true,"result":{"kind":"done","data":{"message":"added 10.9.0.0/16"}}}
//! {"version":1,"id":8,"ok":false,"error":{"code":"not_found","message":"no interface named \"lan9\""}}
//! ```
//!
//! Decoding never trusts the peer: a line longer than [`MAX_REQUEST_BYTES`],
//! malformed JSON, a missing or unknown version, an unknown operation,
//! unknown or mistyped arguments each get an error answer naming the
//! problem; nothing a peer sends can panic the daemon (fuzzed by
//! `crates/control/fuzz`, target `api_decode`).

use super::types::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// Longest request line accepted (the largest real request, a rule set
/// or a long batch of routes, is far smaller).
///
/// 8 MiB: an `ipsec_sa_add` of 10,000 SAs with 256-bit keys is about 3 MB.
pub const MAX_REQUEST_BYTES: usize = 8 << 20;

/// What went wrong, for programs; the message is for people.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request could not be decoded (JSON, envelope, operation, arguments).
    BadRequest,
    /// The request names a protocol version this daemon does not speak.
    UnsupportedVersion,
    /// The arguments decode but do not make sense (a bad address, a route
    /// of the wrong family...). Nothing was changed.
    Invalid,
    /// A named thing (interface, route, capture...) does not exist.
    NotFound,
    /// The change is valid but cannot be applied to a running router
    /// (e.g. a new worker count); nothing was changed.
    Refused,
    /// The daemon is overloaded (too many connections or queued requests).
    Busy,
    /// A deadline passed: the connection stayed idle too long, or a
    /// request line came too slowly. The connection is closed.
    Timeout,
    /// Something failed inside tern (a bug, or a resource exhausted).
    Internal,
}

/// An error answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError { code, message: message.into() }
    }
    pub fn bad_request(m: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::BadRequest, m)
    }
    pub fn invalid(m: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Invalid, m)
    }
    pub fn not_found(m: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::NotFound, m)
    }
    pub fn refused(m: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Refused, m)
    }
    pub fn internal(m: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Internal, m)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

/// Every operation, with its arguments. On the wire: `"op"` is the
/// variant name in snake_case and `"args"` the fields (may be omitted when
/// every field is optional).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", content = "args", rename_all = "snake_case")]
pub enum Command {
    /// Liveness check; answers `done` with the daemon's version.
    Ping {},
    /// Version, uptime, sizes.
    Status {},
    InterfaceList {},
    /// Administrative state and MTU of an interface.
    InterfaceSet(InterfaceSetArgs),
    AddressList(AddressListArgs),
    AddressAdd(AddressArgs),
    AddressDel(AddressArgs),
    RouteList(RouteListArgs),
    /// The route a packet to `address` takes.
    RouteGet(RouteGetArgs),
    RouteAdd(RouteAddArgs),
    RouteDel(RouteDelArgs),
    /// Removes and adds many api routes in one request, all or nothing:
    /// every one is checked first, and if one cannot be applied none is.
    RouteBatch(RouteBatchArgs),
    RouteSummary {},
    NeighborList {},
    /// tern's own VRRP groups (`[[vrrp]]`): state, priority, master,
    /// counters.
    VrrpShow {},
    /// Per node, per error, per interface counters (since the last
    /// `stats_clear` when `since_clear`).
    StatsShow(StatsShowArgs),
    /// Sets the baseline `stats_show` subtracts (metrics are not affected).
    StatsClear {},
    WorkerList {},
    GraphShow {},
    /// The graph in Graphviz dot syntax.
    GraphDot {},
    AclList(AclListArgs),
    /// Replaces (or adds) a rule set and recompiles, atomically.
    AclSet(AclSetArgs),
    /// Traces the next `count` packets (clearing earlier results).
    TraceStart(TraceStartArgs),
    TraceShow {},
    TraceClear {},
    TraceStop {},
    CaptureStart(CaptureStartArgs),
    /// Takes the frames captured so far.
    CaptureRead(CaptureIdArgs),
    CaptureStop(CaptureIdArgs),
    /// Re-reads the daemon's configuration file and applies the difference.
    ConfigReload {},
    /// The running configuration as TOML.
    ConfigShow {},
    /// Switches the nodes' fast paths on or off, all or one, live (the
    /// running configuration's `[dataplane.fast_paths]`; a reload sets
    /// them from the file again).
    FastPathsSet(FastPathsSetArgs),
    /// Every counter `tern top` makes rates of, in one answer (no routes
    /// listed: cheap with a full table).
    TopSample {},
    /// Installs SAs, all or nothing, published to the workers once (the
    /// IKE daemon's way in). Each SA has the keys of `[[ipsec_sa]]`.
    IpsecSaAdd(IpsecSaAddArgs),
    /// Removes SAs the API added (or the configuration's that no tunnel
    /// uses), all or nothing, published once.
    IpsecSaDel(IpsecSaDelArgs),
    /// The SAs (without keys), with state and counters.
    IpsecSaShow(IpsecSaShowArgs),
    /// The ipsec tunnels and their SAs.
    IpsecTunnelShow {},
    /// IKE SAs (every thread's) with their child SAs, by id; a page of
    /// them with `after` / `limit` (a page costs the page, not the SAs),
    /// filtered by `peer`, `remote`, `virtual_ip`.
    IkeSaShow(IkeSaShowArgs),
    /// Every IKE SA counted by state, in all and per peer (one walk of
    /// each thread's SAs), or, `quick`, the threads' published counters
    /// only (no walk: established and half-open).
    IkeSaSummary(IkeSaSummaryArgs),
    /// The `[[ike]]` peers: configuration (no keys) and state.
    IkePeerShow {},
    /// Starts an IKE SA with a peer.
    IkeInitiate(IkeInitiateArgs),
    /// Deletes a peer's IKE SAs (INFORMATIONAL delete), or one by id.
    IkeTerminate(IkeTerminateArgs),
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IkeInitiateArgs {
    pub peer: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IkeTerminateArgs {
    pub peer: String,
    /// One IKE SA (`ike_sa_show`'s id); all of the peer's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
}

/// `ipsec_sa_add`: the SAs, as `[[ipsec_sa]]` entries.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpsecSaAddArgs {
    pub sas: Vec<crate::config::IpsecSaCfg>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpsecSaDelArgs {
    pub ids: Vec<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IkeSaShowArgs {
    /// Only the IKE SAs with a larger id (the last id of the previous
    /// page); from the first when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// At most this many; all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only this `[[ike]]` peer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// Only those with this remote (peer) address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// Only the one that holds this virtual IP (remote access).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_ip: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IkeSaSummaryArgs {
    /// The engine threads' counters (refreshed at least every 200 ms) in
    /// place of a walk of every SA: `established` and `connecting` (half
    /// open) only, `exact` false, no `peers`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quick: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpsecSaShowArgs {
    /// One SA; all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    /// At most this many (the first by id); all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

impl Command {
    /// The operation's name on the wire.
    pub fn op(&self) -> String {
        // The route commands by name: they may carry thousands of routes,
        // which serializing the command to read its tag would copy.
        match self {
            Command::RouteAdd(_) => return "route_add".into(),
            Command::RouteDel(_) => return "route_del".into(),
            Command::RouteBatch(_) => return "route_batch".into(),
            // Carries keys and may carry thousands of SAs.
            Command::IpsecSaAdd(_) => return "ipsec_sa_add".into(),
            _ => {}
        }
        match serde_json::to_value(self) {
            Ok(Value::Object(m)) => m.get("op").and_then(Value::as_str).unwrap_or("?").to_string(),
            _ => "?".into(),
        }
    }

    /// Whether the command changes the router (for logs and counters).
    pub fn changes_state(&self) -> bool {
        matches!(
            self,
            Command::InterfaceSet(_)
                | Command::AddressAdd(_)
                | Command::AddressDel(_)
                | Command::RouteAdd(_)
                | Command::RouteDel(_)
                | Command::RouteBatch(_)
                | Command::AclSet(_)
                | Command::ConfigReload {}
                | Command::FastPathsSet(_)
                | Command::IpsecSaAdd(_)
                | Command::IpsecSaDel(_)
                | Command::IkeInitiate(_)
                | Command::IkeTerminate(_)
        )
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastPathsSetArgs {
    pub on: bool,
    /// One fast path (`direct`, `acl_shortcut`, `gre_direct`); all when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterfaceSetArgs {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddressListArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddressArgs {
    pub interface: String,
    /// "10.0.0.1/24" or "2001:db8::1/64".
    pub address: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteListArgs {
    /// Only routes inside this prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Only routes of this source ("static", "api", "connected"...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteGetArgs {
    pub address: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteAddArgs {
    pub prefix: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// "unicast" (default), "blackhole", "unreachable", "prohibit".
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteDelArgs {
    pub prefix: String,
    /// Whose route: "api" (default) or "static".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// `route_batch`: the deletes are applied first, then the adds (of
/// source api; a delete may name `"source": "api"` only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteBatchArgs {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<RouteAddArgs>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub del: Vec<RouteDelArgs>,
}

impl Command {
    /// Route operations the command carries (for the API's log summary).
    pub fn route_ops(&self) -> Option<usize> {
        match self {
            Command::RouteAdd(_) | Command::RouteDel(_) => Some(1),
            Command::RouteBatch(b) => Some(b.add.len() + b.del.len()),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatsShowArgs {
    /// Subtract the counters saved by the last `stats_clear`.
    #[serde(default)]
    pub since_clear: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclListArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclSetArgs {
    pub set: tern_acl::RuleSet,
    /// Interfaces to bind the set to as `acl_in`, in the same step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bind_in: Vec<String>,
    /// Interfaces to bind the set to as `acl_out`, in the same step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bind_out: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceStartArgs {
    pub count: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureStartArgs {
    /// An interface name (its port's frames) or a graph node name (the
    /// packets entering that node).
    pub target: String,
    /// "rx", "tx" or "both" (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// Stop after this many frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Bytes kept of each frame (default 65535).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snaplen: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureIdArgs {
    pub id: u64,
}

/// A decoded request.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: Option<u64>,
    pub cmd: Command,
}

/// Every answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum Reply {
    Done { message: String },
    Status(StatusInfo),
    Interfaces(Vec<InterfaceInfo>),
    Addresses(Vec<AddressInfo>),
    Routes(RouteList),
    Route(Option<RouteInfo>),
    FibSummary(FibSummary),
    Neighbors(Vec<NeighborEntry>),
    Vrrp(Vec<crate::router::vrrp::VrrpInfo>),
    Stats(StatsReport),
    Workers(Vec<WorkerInfo>),
    Graph(GraphView),
    Text { text: String },
    Acls(Vec<AclView>),
    Trace(TraceView),
    Capture(CaptureBatch),
    Reload(ReloadReport),
    TopSample(TopSample),
    IpsecSas(IpsecSaList),
    IpsecTunnels(Vec<IpsecTunnelView>),
    IkeSas(Vec<IkeSaView>),
    IkeSaSummary(IkeSaSummaryView),
    IkePeers(Vec<IkePeerView>),
}

impl Reply {
    pub fn done(m: impl Into<String>) -> Reply {
        Reply::Done { message: m.into() }
    }
}

/// An answer as it travels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Reply>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
}

impl Response {
    pub fn new(id: Option<u64>, outcome: Result<Reply, ApiError>) -> Response {
        match outcome {
            Ok(r) => Response { version: VERSION, id, ok: true, result: Some(r), error: None },
            Err(e) => Response { version: VERSION, id, ok: false, result: None, error: Some(e) },
        }
    }

    /// The outcome, checking the envelope is consistent.
    pub fn into_outcome(self) -> Result<Reply, ApiError> {
        match (self.ok, self.result, self.error) {
            (true, Some(r), _) => Ok(r),
            (false, _, Some(e)) => Err(e),
            _ => Err(ApiError::internal("malformed answer from tern (neither result nor error)")),
        }
    }
}

/// One line to send for a request.
pub fn encode_request(id: Option<u64>, cmd: &Command) -> String {
    // Straight to text: a batch of thousands of routes costs a tree of
    // JSON values otherwise.
    #[derive(Serialize)]
    struct Line<'a> {
        version: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
        #[serde(flatten)]
        cmd: &'a Command,
    }
    if let Ok(mut s) = serde_json::to_string(&Line { version: VERSION, id, cmd }) {
        s.push('\n');
        return s;
    }
    let mut m = match serde_json::to_value(cmd) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    m.insert("version".into(), Value::from(VERSION));
    if let Some(id) = id {
        m.insert("id".into(), Value::from(id));
    }
    let mut s = Value::Object(m).to_string();
    s.push('\n');
    s
}

/// One line to send for an answer.
pub fn encode_response(r: &Response) -> String {
    let mut s = serde_json::to_string(r).unwrap_or_else(|e| {
        // Only a non-string map key or a failing Serialize impl gets here;
        // the peer still gets a well-formed error line.
        format!(
            "{{\"version\":{VERSION},\"ok\":false,\"error\":{{\"code\":\"internal\",\"message\":{}}}}}",
            Value::from(format!("cannot encode the answer: {e}"))
        )
    });
    s.push('\n');
    s
}

/// The request id, if the line is an object carrying a usable one (so
/// that even a rejected request's error repeats its id).
pub fn peek_id(line: &[u8]) -> Option<u64> {
    let v: Value = serde_json::from_slice(line).ok()?;
    v.get("id")?.as_u64()
}

/// A request's envelope, its values left as text: the fast path of
/// [`decode_request`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    #[serde(borrow)]
    version: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    id: Option<&'a serde_json::value::RawValue>,
    op: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    args: Option<&'a serde_json::value::RawValue>,
}

/// Decodes a well-formed request without building a tree of JSON values
/// (a route batch of 5000 routes is 5000 small objects: the tree cost
/// more than the routes' own decoding). `None` for anything it does not
/// take as it is (a missing or other version, a non-integer id, args that
/// are not an object, any decoding error): [`decode_request`]'s full path
/// then decides, with its messages, so both paths accept the same
/// requests with the same meaning.
fn decode_fast(line: &[u8]) -> Option<Request> {
    // An object, not an array (which serde would also read into a struct).
    if line.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    let e: Envelope = serde_json::from_slice(line).ok()?;
    if e.version?.get().parse::<u32>().ok()? != VERSION {
        return None;
    }
    let id = match e.id.map(|v| v.get()) {
        None | Some("null") => None,
        Some(v) => Some(v.parse::<u64>().ok()?),
    };
    let op = e.op?;
    // (Missing args, and `null`, which serde reads as missing: the full path.)
    let args = e.args?.get();
    if !args.starts_with('{') {
        return None;
    }
    // [op, args]: the tag before the content (see below).
    let mut text = String::with_capacity(op.len() + args.len() + 8);
    text.push('[');
    text.push_str(&serde_json::to_string(op.as_ref()).ok()?);
    text.push(',');
    text.push_str(args);
    text.push(']');
    let cmd: Command = serde_json::from_str(&text).ok()?;
    Some(Request { id, cmd })
}

/// Decodes one request line (without its newline).
pub fn decode_request(line: &[u8]) -> Result<Request, ApiError> {
    if line.len() > MAX_REQUEST_BYTES {
        return Err(ApiError::bad_request(format!(
            "request of {} bytes is longer than the limit of {MAX_REQUEST_BYTES}",
            line.len()
        )));
    }
    if let Some(r) = decode_fast(line) {
        return Ok(r);
    }
    decode_full(line)
}

/// [`decode_request`] through a tree of JSON values: every request the
/// fast path leaves, and every error message.
fn decode_full(line: &[u8]) -> Result<Request, ApiError> {
    let v: Value = serde_json::from_slice(line).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    let Value::Object(mut m) = v else {
        return Err(ApiError::bad_request("a request is a JSON object"));
    };
    match m.remove("version") {
        None => {
            return Err(ApiError::new(
                ErrorCode::UnsupportedVersion,
                format!("the request has no \"version\" (this tern speaks protocol version {VERSION})"),
            ));
        }
        Some(v) if v.as_u64() == Some(u64::from(VERSION)) => {}
        Some(v) => {
            return Err(ApiError::new(
                ErrorCode::UnsupportedVersion,
                format!("protocol version {v} is not supported (this tern speaks version {VERSION})"),
            ));
        }
    }
    let id = match m.remove("id") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| ApiError::bad_request("\"id\" must be a non-negative integer"))?),
    };
    let op = match m.remove("op") {
        Some(Value::String(s)) => s,
        Some(_) => return Err(ApiError::bad_request("\"op\" must be a string")),
        None => return Err(ApiError::bad_request("the request has no \"op\"")),
    };
    let args = m.remove("args").unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(k) = m.keys().next() {
        return Err(ApiError::bad_request(format!(
            "unknown key {k:?} in the request (expected version, id, op, args)"
        )));
    }
    if !args.is_object() {
        return Err(ApiError::bad_request(format!("\"args\" of {op:?} must be an object")));
    }
    // [op, args]: the tag before the content, so serde reads the args
    // straight into their type (an object's keys come sorted, "args"
    // first, and would be buffered as a whole first).
    let cmd: Command = serde_json::from_value(Value::Array(vec![Value::String(op.clone()), args])).map_err(|e| {
        let msg = e.to_string();
        if msg.starts_with("unknown variant") {
            ApiError::bad_request(format!("unknown op {op:?}: {}", msg.trim_start_matches("unknown variant ")))
        } else {
            ApiError::bad_request(format!("{op}: {msg}"))
        }
    })?;
    Ok(Request { id, cmd })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Result<Request, ApiError> {
        decode_request(s.as_bytes())
    }

    /// `op()` names the route commands without serializing them: the same
    /// names as the wire's.
    #[test]
    fn route_ops_are_named_as_on_the_wire() {
        let add = RouteAddArgs { prefix: "10.0.0.0/8".into(), ..RouteAddArgs::default() };
        let del = RouteDelArgs { prefix: "10.0.0.0/8".into(), source: None };
        for c in [
            Command::RouteAdd(add.clone()),
            Command::RouteDel(del.clone()),
            Command::RouteBatch(RouteBatchArgs { add: vec![add], del: vec![del] }),
        ] {
            let wire = serde_json::to_value(&c).expect("json");
            assert_eq!(Some(c.op().as_str()), wire.get("op").and_then(Value::as_str));
        }
    }

    /// The fast path takes a request exactly as the full path does, or
    /// leaves it to it: never another meaning, never an accept the full
    /// path refuses.
    #[test]
    fn fast_decoding_agrees_with_the_full_path() {
        let lines = [
            r#"{"version":1,"id":7,"op":"route_add","args":{"prefix":"10.9.0.0/16","via":"10.0.2.2"}}"#,
            r#"  {"args":{"prefix":"10.9.0.0/16","via":"10.0.2.2"},"op":"route_add","version":1} "#,
            r#"{"version":1,"op":"route_batch","args":{"add":[{"prefix":"10.9.0.0/16","via":"10.0.2.2","distance":5}],"del":[{"prefix":"10.8.0.0/16"}]}}"#,
            r#"{"version":1,"id":null,"op":"status","args":{}}"#,
            r#"{"version":1,"op":"status"}"#,
            r#"{"version":1,"op":"status","args":null}"#,
            r#"{"version":1,"op":"status","args":[]}"#,
            r#"[1,7,"status",{}]"#,
            r#"{"version":"1","op":"status","args":{}}"#,
            r#"{"version":1.0,"op":"status","args":{}}"#,
            r#"{"version":2,"op":"status","args":{}}"#,
            r#"{"version":1,"id":-1,"op":"status","args":{}}"#,
            r#"{"version":1,"id":1.5,"op":"status","args":{}}"#,
            r#"{"version":1,"id":18446744073709551616,"op":"status","args":{}}"#,
            r#"{"version":1,"op":7,"args":{}}"#,
            r#"{"version":1,"op":"st\u0061tus","args":{}}"#,
            r#"{"version":1,"op":"status","args":{},"extra":1}"#,
            r#"{"version":1,"version":1,"op":"status","args":{}}"#,
            r#"{"version":1,"op":"route_add","args":{"prefix":"10.0.0.0/8","prefix":"10.1.0.0/16"}}"#,
            r#"{"version":1,"op":"route_add","args":{"prefix":"10.0.0.0/8","distance":300}}"#,
            r#"{"version":1,"op":"route_add","args":{"prefix":"10.0.0.0/8","distance":1.0}}"#,
            r#"{"version":1,"op":"route_add","args":{"prefix":"10.0.0.0/8","bogus":1}}"#,
            r#"{"version":1,"op":"no_such_op","args":{}}"#,
            r#"{"version":1,"op":"status","args":{}} trailing"#,
            r#"{"version":1,"op":"status","args":{}"#,
            "",
            "null",
        ];
        for line in lines {
            let full = decode_full(line.as_bytes());
            if let Some(fast) = decode_fast(line.as_bytes()) {
                assert_eq!(full.as_ref().ok(), Some(&fast), "{line}");
            }
        }
        // The common requests do take the fast path.
        for line in &lines[..4] {
            assert!(decode_fast(line.as_bytes()).is_some(), "{line}");
        }
        assert!(decode_fast(lines[5].as_bytes()).is_none(), "args null is the full path's to refuse");
        assert!(dec(lines[5]).is_err() && dec(lines[6]).is_err() && dec(lines[7]).is_err());
    }

    #[test]
    fn round_trip_of_every_kind_of_command() {
        let cmds = vec![
            Command::Ping {},
            Command::InterfaceSet(InterfaceSetArgs { name: "lan0".into(), up: Some(false), mtu: None }),
            Command::RouteAdd(RouteAddArgs {
                prefix: "10.9.0.0/16".into(),
                via: Some("10.0.2.2".into()),
                metric: Some(5),
                ..RouteAddArgs::default()
            }),
            Command::RouteBatch(RouteBatchArgs {
                add: vec![RouteAddArgs {
                    prefix: "10.8.0.0/16".into(),
                    kind: Some("blackhole".into()),
                    ..Default::default()
                }],
                del: vec![RouteDelArgs { prefix: "10.7.0.0/16".into(), source: None }],
            }),
            Command::TraceStart(TraceStartArgs { count: 10 }),
            Command::CaptureRead(CaptureIdArgs { id: 3 }),
            Command::ConfigReload {},
            Command::TopSample {},
        ];
        for (i, c) in cmds.into_iter().enumerate() {
            let line = encode_request(Some(i as u64), &c);
            assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'), "one line: {line}");
            let r = dec(line.trim_end()).expect("decodes");
            assert_eq!(r, Request { id: Some(i as u64), cmd: c });
        }
    }

    #[test]
    fn args_may_be_omitted_when_all_optional() {
        let r = dec(r#"{"version":1,"op":"route_list"}"#).expect("ok");
        assert_eq!(r.cmd, Command::RouteList(RouteListArgs::default()));
        assert_eq!(dec(r#"{"version":1,"op":"ping"}"#).expect("ok").cmd, Command::Ping {});
        assert_eq!(dec(r#"{"version":1,"op":"ping","args":{}}"#).expect("ok").cmd, Command::Ping {});
    }

    #[test]
    fn versions_are_checked() {
        let e = dec(r#"{"op":"ping"}"#).expect_err("no version");
        assert_eq!(e.code, ErrorCode::UnsupportedVersion);
        let e = dec(r#"{"version":2,"op":"ping"}"#).expect_err("v2");
        assert_eq!(e.code, ErrorCode::UnsupportedVersion);
        assert!(e.message.contains("version 2") && e.message.contains("version 1"), "{e}");
        assert_eq!(dec(r#"{"version":"1","op":"ping"}"#).expect_err("string").code, ErrorCode::UnsupportedVersion);
    }

    #[test]
    fn malformed_requests_get_clear_errors() {
        let cases = [
            ("", "malformed JSON"),
            ("{", "malformed JSON"),
            ("[1,2]", "JSON object"),
            (r#"{"version":1}"#, "no \"op\""),
            (r#"{"version":1,"op":7}"#, "must be a string"),
            (r#"{"version":1,"op":"fly"}"#, "unknown op \"fly\""),
            (r#"{"version":1,"op":"ping","extra":1}"#, "unknown key \"extra\""),
            (r#"{"version":1,"op":"route_get","args":[]}"#, "must be an object"),
            (r#"{"version":1,"op":"route_get","args":{}}"#, "missing field `address`"),
            (r#"{"version":1,"op":"route_get","args":{"address":"1.2.3.4","x":1}}"#, "unknown field `x`"),
            (r#"{"version":1,"op":"trace_start","args":{"count":-1}}"#, "trace_start"),
            (r#"{"version":1,"id":-3,"op":"ping"}"#, "\"id\""),
        ];
        for (text, want) in cases {
            let e = dec(text).expect_err(text);
            assert_eq!(e.code, ErrorCode::BadRequest, "{text}: {e}");
            assert!(e.message.contains(want), "{text}: {e:?} should mention {want:?}");
        }
        let long = vec![b' '; MAX_REQUEST_BYTES + 1];
        assert!(decode_request(&long).expect_err("long").message.contains("longer than"));
    }

    #[test]
    fn responses_round_trip_and_ids_are_kept() {
        let r = Response::new(Some(9), Err(ApiError::not_found("no interface named \"x\"")));
        let line = encode_response(&r);
        let back: Response = serde_json::from_str(line.trim_end()).expect("json");
        assert_eq!(back.id, Some(9));
        assert_eq!(back.into_outcome().expect_err("error").code, ErrorCode::NotFound);
        let r = Response::new(None, Ok(Reply::done("ok")));
        let back: Response = serde_json::from_str(encode_response(&r).trim_end()).expect("json");
        assert_eq!(back.into_outcome().expect("ok"), Reply::done("ok"));
        assert_eq!(peek_id(br#"{"id":5,"version":9}"#), Some(5));
        assert_eq!(peek_id(b"garbage"), None);
    }

    #[test]
    fn op_names() {
        assert_eq!(Command::RouteSummary {}.op(), "route_summary");
        assert_eq!(Command::AddressAdd(AddressArgs::default()).op(), "address_add");
    }
}
