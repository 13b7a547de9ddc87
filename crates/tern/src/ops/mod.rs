//! The operator's CLI: `tern <noun> <verb>` one-shot, the interactive
//! shell and batch files, all over the running daemon's API socket.

pub mod capture;
pub mod cli;
pub mod render;
pub mod shell;
pub mod top;

use cli::*;
use std::path::PathBuf;
use tern_control::api::client::{CallError, Client};
use tern_control::api::*;

/// Where and how to talk to tern.
pub struct Ctx {
    pub socket: PathBuf,
    pub json: bool,
    client: Option<Client>,
    /// The code of the last error tern answered (for `--json` errors).
    last_code: Option<ErrorCode>,
}

impl Ctx {
    pub fn new(socket: PathBuf, json: bool) -> Ctx {
        Ctx { socket, json, client: None, last_code: None }
    }

    /// The code of the error tern last answered, if it did.
    pub fn last_code(&self) -> Option<ErrorCode> {
        self.last_code
    }

    /// Calls tern, connecting on first use (and again after a broken
    /// connection, e.g. a restarted daemon).
    pub fn call(&mut self, cmd: &Command) -> Result<Reply, String> {
        self.last_code = None;
        // A connection tern closed while it sat idle (its idle deadline,
        // or room made for another client) is replaced before the
        // request: tern never saw the request on it.
        if self.client.as_mut().is_some_and(|c| !c.is_open()) {
            self.client = None;
        }
        if self.client.is_none() {
            self.client = Some(Client::connect(&self.socket).map_err(|e| e.to_string())?);
        }
        let Some(c) = self.client.as_mut() else { return Err("not connected".into()) };
        match c.call(cmd) {
            Ok(r) => Ok(r),
            Err(CallError::Api(e)) => {
                self.last_code = Some(e.code);
                if e.code == ErrorCode::Busy {
                    // tern closes a connection it refused.
                    self.client = None;
                }
                Err(e.message)
            }
            Err(e @ CallError::Io(_)) => {
                self.client = None;
                Err(e.to_string())
            }
        }
    }
}

/// Words after a keyword: `dev lan0` -> Some("lan0").
fn keyword<'a>(words: &'a [String], key: &str) -> Result<Option<&'a str>, String> {
    match words.iter().position(|w| w == key) {
        None => Ok(None),
        Some(i) => words.get(i + 1).map(|s| Some(s.as_str())).ok_or_else(|| format!("`{key}` needs a value")),
    }
}

/// `ADDRESS/LEN dev IFACE` (or `IFACE ADDRESS/LEN`).
fn address_args(words: &[String]) -> Result<AddressArgs, String> {
    if let Some(dev) = keyword(words, "dev")? {
        let addr = words.iter().find(|w| w.contains(['.', ':'])).ok_or("give the address, e.g. 10.0.9.1/24")?;
        let known = |w: &String| w == "dev" || w == dev || w == addr;
        if let Some(x) = words.iter().find(|w| !known(w)) {
            return Err(format!("unexpected {x:?}"));
        }
        return Ok(AddressArgs { interface: dev.into(), address: addr.clone() });
    }
    match words {
        [a, b] if b.contains(['.', ':']) => Ok(AddressArgs { interface: a.clone(), address: b.clone() }),
        _ => Err("usage: ADDRESS/LEN dev IFACE".into()),
    }
}

/// `PREFIX via GW [dev IFACE] [distance N] [metric N]` and friends.
pub fn route_add_args(words: &[String]) -> Result<RouteAddArgs, String> {
    let mut it = words.iter();
    let prefix = it.next().ok_or("give the prefix")?.clone();
    let mut a = RouteAddArgs { prefix, ..RouteAddArgs::default() };
    while let Some(w) = it.next() {
        let mut val = || it.next().cloned().ok_or_else(|| format!("`{w}` needs a value"));
        match w.as_str() {
            "via" => a.via = Some(val()?),
            "dev" => a.interface = Some(val()?),
            "distance" => a.distance = Some(val()?.parse().map_err(|_| "distance: 0..=255")?),
            "metric" => a.metric = Some(val()?.parse().map_err(|_| "metric: a number")?),
            "blackhole" | "unreachable" | "prohibit" | "unicast" => a.kind = Some(w.clone()),
            _ => {
                return Err(format!("unexpected {w:?} (via, dev, distance, metric, blackhole, unreachable, prohibit)"));
            }
        }
    }
    Ok(a)
}

/// The API request of a command line (None: handled locally).
pub fn request(cmd: &OpCmd) -> Result<Option<Command>, String> {
    Ok(Some(match cmd {
        OpCmd::Status => Command::Status {},
        OpCmd::Interface(n) => match &n.verb {
            None | Some(InterfaceCmd::Show { name: None }) => Command::InterfaceList {},
            Some(InterfaceCmd::Show { name: Some(_) }) => Command::InterfaceList {},
            Some(InterfaceCmd::Set { name, settings }) => {
                let mut a = InterfaceSetArgs { name: name.clone(), ..InterfaceSetArgs::default() };
                let mut it = settings.iter();
                while let Some(s) = it.next() {
                    match s.as_str() {
                        "up" => a.up = Some(true),
                        "down" => a.up = Some(false),
                        "mtu" => {
                            let v = it.next().ok_or("`mtu` needs a value")?;
                            a.mtu = Some(v.parse().map_err(|_| format!("mtu {v:?}: a number 68..=9216"))?);
                        }
                        x => return Err(format!("unexpected {x:?} (up, down, mtu N)")),
                    }
                }
                Command::InterfaceSet(a)
            }
        },
        OpCmd::Address(n) => match &n.verb {
            None => Command::AddressList(AddressListArgs::default()),
            Some(AddressCmd::Show { interface }) => {
                Command::AddressList(AddressListArgs { interface: interface.clone() })
            }
            Some(AddressCmd::Add { words }) => Command::AddressAdd(address_args(words)?),
            Some(AddressCmd::Del { words }) => Command::AddressDel(address_args(words)?),
        },
        OpCmd::Route(n) => match &n.verb {
            None => Command::RouteList(RouteListArgs::default()),
            Some(RouteCmd::Show { prefix, source, limit }) => {
                Command::RouteList(RouteListArgs { prefix: prefix.clone(), source: source.clone(), limit: *limit })
            }
            Some(RouteCmd::Get { address }) => Command::RouteGet(RouteGetArgs { address: address.clone() }),
            Some(RouteCmd::Add { file: Some(_), .. } | RouteCmd::Del { file: Some(_), .. }) => return Ok(None),
            Some(RouteCmd::Add { words, .. }) => Command::RouteAdd(route_add_args(words)?),
            Some(RouteCmd::Del { prefix, words, .. }) => {
                let source = keyword(words, "source")?.map(String::from);
                if words.len() != if source.is_some() { 2 } else { 0 } {
                    return Err("usage: route del PREFIX [source api|static]".into());
                }
                let prefix = prefix.clone().ok_or("usage: route del PREFIX [source api|static]")?;
                Command::RouteDel(RouteDelArgs { prefix, source })
            }
            Some(RouteCmd::Summary) => Command::RouteSummary {},
        },
        OpCmd::Neighbor(_) => Command::NeighborList {},
        OpCmd::Vrrp(_) => Command::VrrpShow {},
        OpCmd::Stats(n) => match &n.verb {
            Some(StatsCmd::Clear) => Command::StatsClear {},
            _ => Command::StatsShow(StatsShowArgs { since_clear: true }),
        },
        OpCmd::Worker(_) => Command::WorkerList {},
        OpCmd::Graph(n) => match &n.verb {
            Some(GraphCmd::Dot) => Command::GraphDot {},
            _ => Command::GraphShow {},
        },
        OpCmd::Acl(n) => match &n.verb {
            Some(AclCmd::Show { name }) => Command::AclList(AclListArgs { name: name.clone() }),
            Some(AclCmd::Load { .. } | AclCmd::ImportNft { .. }) => return Ok(None),
            None => Command::AclList(AclListArgs::default()),
        },
        OpCmd::Trace(n) => match &n.verb {
            Some(TraceCmd::Start { count }) => Command::TraceStart(TraceStartArgs { count: *count }),
            None | Some(TraceCmd::Show) => Command::TraceShow {},
            Some(TraceCmd::Clear) => Command::TraceClear {},
            Some(TraceCmd::Stop) => Command::TraceStop {},
        },
        OpCmd::Config(n) => match &n.verb {
            Some(ConfigCmd::Reload) => Command::ConfigReload {},
            None | Some(ConfigCmd::Show) => Command::ConfigShow {},
            Some(ConfigCmd::Check { .. }) => return Ok(None),
        },
        OpCmd::Dataplane(n) => match &n.verb {
            Some(DataplaneCmd::Fastpaths { state, name }) => {
                Command::FastPathsSet(FastPathsSetArgs { on: matches!(state, OnOff::On), name: name.clone() })
            }
            None => Command::Status {},
        },
        OpCmd::Ipsec(n) => match &n.verb {
            None | Some(IpsecCmd::Sa(NounArgs { verb: None })) => Command::IpsecSaShow(IpsecSaShowArgs::default()),
            Some(IpsecCmd::Sa(NounArgs { verb: Some(IpsecSaCmd::Show { id, limit }) })) => {
                Command::IpsecSaShow(IpsecSaShowArgs { id: *id, limit: *limit })
            }
            Some(IpsecCmd::Sa(NounArgs { verb: Some(IpsecSaCmd::Add { file: Some(_), .. }) })) => return Ok(None),
            Some(IpsecCmd::Sa(NounArgs { verb: Some(IpsecSaCmd::Add { words, .. }) })) => {
                Command::IpsecSaAdd(IpsecSaAddArgs { sas: vec![sa_words(words)?] })
            }
            Some(IpsecCmd::Sa(NounArgs { verb: Some(IpsecSaCmd::Del { ids }) })) => {
                Command::IpsecSaDel(IpsecSaDelArgs { ids: ids.clone() })
            }
            Some(IpsecCmd::Tunnel(_)) => Command::IpsecTunnelShow {},
        },
        OpCmd::Ike(n) => match &n.verb {
            None | Some(IkeCmd::Sa(NounArgs { verb: None })) => {
                Command::IkeSaShow(ike_sa_args(&IkeSaShowOpts { limit: IKE_SA_PAGE, ..Default::default() }))
            }
            Some(IkeCmd::Sa(NounArgs { verb: Some(IkeSaCmd::Show(o)) })) => Command::IkeSaShow(ike_sa_args(o)),
            Some(IkeCmd::Sa(NounArgs { verb: Some(IkeSaCmd::Summary) })) => {
                Command::IkeSaSummary(IkeSaSummaryArgs::default())
            }
            Some(IkeCmd::Peer(_)) => Command::IkePeerShow {},
            Some(IkeCmd::Initiate { peer }) => Command::IkeInitiate(IkeInitiateArgs { peer: peer.clone() }),
            Some(IkeCmd::Terminate { peer, id }) => {
                Command::IkeTerminate(IkeTerminateArgs { peer: peer.clone(), id: *id })
            }
        },
        OpCmd::Capture(_) | OpCmd::Shell => return Ok(None),
    }))
}

/// One SA from words: `[[ipsec_sa]]`'s keys (`-` or `_`) each followed
/// by its value, `esn` and `udp_encap` alone.
pub fn sa_words(words: &[String]) -> Result<tern_control::config::IpsecSaCfg, String> {
    const NUMBERS: [&str; 10] = [
        "id",
        "replay_window",
        "udp_src_port",
        "udp_dst_port",
        "soft_packets",
        "soft_bytes",
        "soft_secs",
        "hard_packets",
        "hard_bytes",
        "hard_secs",
    ];
    const TEXTS: [&str; 5] = ["spi", "crypto", "integ", "key", "integ_key"];
    const USAGE: &str = "usage: ipsec sa add id N spi X crypto C [integ I] key 0x.. [integ_key 0x..] [esn] [replay_window N] [udp_encap] [udp_src_port P] [udp_dst_port P] [soft_packets|soft_bytes|soft_secs|hard_packets|hard_bytes|hard_secs N]";
    let mut m = serde_json::Map::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let k = w.replace('-', "_");
        if k == "esn" || k == "udp_encap" {
            m.insert(k, serde_json::Value::Bool(true));
            continue;
        }
        let is_num = NUMBERS.contains(&k.as_str());
        if !is_num && !TEXTS.contains(&k.as_str()) {
            return Err(format!("unexpected {w:?}; {USAGE}"));
        }
        let v = it.next().ok_or_else(|| format!("`{w}` needs a value"))?;
        let value = if is_num {
            serde_json::Value::from(v.parse::<u64>().map_err(|_| format!("{w} {v:?}: not a number"))?)
        } else {
            serde_json::Value::from(v.clone())
        };
        if m.insert(k, value).is_some() {
            return Err(format!("`{w}` given twice"));
        }
    }
    for need in ["id", "spi", "crypto", "key"] {
        if !m.contains_key(need) {
            return Err(format!("`{need}` is missing; {USAGE}"));
        }
    }
    // (serde's message never quotes a key: the values it can reject are
    // numbers, checked above.)
    serde_json::from_value(serde_json::Value::Object(m)).map_err(|e| format!("{e}; {USAGE}"))
}

/// `ipsec sa add --file F`: the file's `[[ipsec_sa]]` entries in one
/// request (all or nothing).
fn ipsec_sa_file(ctx: &mut Ctx, file: &std::path::Path) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SaFile {
        #[serde(default)]
        ipsec_sa: Vec<tern_control::config::IpsecSaCfg>,
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let f: SaFile = toml::from_str(&text).map_err(|e| format!("{}: {}", file.display(), e.message()))?;
    if f.ipsec_sa.is_empty() {
        return Err(format!("{}: no [[ipsec_sa]] entries", file.display()));
    }
    match ctx.call(&Command::IpsecSaAdd(IpsecSaAddArgs { sas: f.ipsec_sa }))? {
        Reply::Done { message } => Ok(format!("{message}\n")),
        other => Err(format!("unexpected answer: {other:?}")),
    }
}

/// A failed command as `--json` prints it: the API's error shape,
/// `{"ok": false, "error": {"code": CODE, "message": TEXT}}`, where CODE is
/// tern's error code or `cli` for a failure on the CLI's side (bad words,
/// an unreadable file, no daemon to talk to).
pub fn json_error(code: Option<ErrorCode>, message: &str) -> String {
    let code = code.map_or(serde_json::Value::from("cli"), |c| serde_json::to_value(c).unwrap_or_default());
    let v = serde_json::json!({ "ok": false, "error": { "code": code, "message": message } });
    format!("{v}\n")
}

/// A JSON value as `--json` prints it.
fn json_text(v: &serde_json::Value) -> Result<String, String> {
    let mut s = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    s.push('\n');
    Ok(s)
}

/// Runs one operator command and returns what to print.
pub fn execute(ctx: &mut Ctx, cmd: &OpCmd, json: bool) -> Result<String, String> {
    let json = json || ctx.json;
    match cmd {
        OpCmd::Config(NounArgs { verb: Some(ConfigCmd::Check { file }) }) => return config_check(file, json),
        OpCmd::Capture(a) => return capture::run(ctx, a, json),
        OpCmd::Acl(NounArgs { verb: Some(AclCmd::Load { file, bind_in, bind_out }) }) => {
            return acl_load(ctx, file, bind_in, bind_out);
        }
        OpCmd::Acl(NounArgs { verb: Some(AclCmd::ImportNft { file, ct }) }) => return acl_import_nft(file, *ct, json),
        OpCmd::Route(NounArgs { verb: Some(RouteCmd::Add { file: Some(f), .. }) }) => return route_file(ctx, f, true),
        OpCmd::Route(NounArgs { verb: Some(RouteCmd::Del { file: Some(f), .. }) }) => return route_file(ctx, f, false),
        OpCmd::Ipsec(NounArgs {
            verb: Some(IpsecCmd::Sa(NounArgs { verb: Some(IpsecSaCmd::Add { file: Some(f), .. }) })),
        }) => return ipsec_sa_file(ctx, f),
        OpCmd::Shell => return Err("already in the shell".into()),
        OpCmd::Ike(NounArgs { verb: None | Some(IkeCmd::Sa(NounArgs { verb: None })) }) => {
            return ike_sa_show(ctx, &IkeSaShowOpts { limit: IKE_SA_PAGE, ..Default::default() }, json);
        }
        OpCmd::Ike(NounArgs { verb: Some(IkeCmd::Sa(NounArgs { verb: Some(IkeSaCmd::Show(o)) })) }) => {
            return ike_sa_show(ctx, o, json);
        }
        _ => {}
    }
    let Some(req) = request(cmd)? else { return Ok(String::new()) };
    let reply = ctx.call(&req)?;
    if json {
        return render::json(&reply);
    }
    Ok(render::human(cmd, &reply))
}

/// The API's `ike_sa_show` arguments of `ike sa show`'s options.
fn ike_sa_args(o: &IkeSaShowOpts) -> IkeSaShowArgs {
    IkeSaShowArgs {
        after: o.after,
        limit: (o.limit > 0).then_some(o.limit),
        peer: o.peer.clone(),
        remote: o.remote.clone(),
        virtual_ip: o.vip.clone(),
    }
}

/// `ike sa show`: the engine threads' counters (`ike_sa_summary` quick:
/// no walk of the SAs, so a page costs the page), then a page
/// (one more SA asked than shown, to know whether there is a next page),
/// then how to get the next page.
fn ike_sa_show(ctx: &mut Ctx, o: &IkeSaShowOpts, json: bool) -> Result<String, String> {
    let summary = match ctx.call(&Command::IkeSaSummary(IkeSaSummaryArgs { quick: true }))? {
        Reply::IkeSaSummary(s) => s,
        other => return Err(format!("unexpected answer {other:?}")),
    };
    let mut args = ike_sa_args(o);
    args.limit = args.limit.map(|l| l.saturating_add(1));
    let mut sas = match ctx.call(&Command::IkeSaShow(args))? {
        Reply::IkeSas(v) => v,
        other => return Err(format!("unexpected answer {other:?}")),
    };
    let more = o.limit > 0 && sas.len() > o.limit;
    sas.truncate(if o.limit > 0 { o.limit } else { sas.len() });
    let next_after = if more { sas.last().map(|s| s.id) } else { None };
    if json {
        let v = serde_json::json!({ "summary": summary, "sas": sas, "next_after": next_after });
        return json_text(&v);
    }
    let mut out = render::ike_sa_summary_line(&summary);
    out.push_str(&render::human(&OpCmd::Status, &Reply::IkeSas(sas)));
    if let Some(last) = next_after {
        let mut next = format!("tern ike sa show --after {last} --limit {}", o.limit);
        for (flag, v) in [("--peer", &o.peer), ("--remote", &o.remote), ("--vip", &o.vip)] {
            if let Some(v) = v {
                next.push_str(&format!(" {flag} {v}"));
            }
        }
        out.push_str(&format!("more: {next}\n"));
    }
    Ok(out)
}

/// Routes per `route_batch` request from a file, at most: each request
/// costs round trips and wake-ups on top of its routes' own work, which
/// at 5000 was a good part of the time.
const ROUTE_BATCH: usize = 20_000;

/// Bytes of routes per request, at most (as JSON, counted by [`json_len`]):
/// the API's limit ([`tern_control::api::MAX_REQUEST_BYTES`]) less room
/// for the envelope.
const BATCH_BYTES: usize = tern_control::api::MAX_REQUEST_BYTES - 16 * 1024;

/// The length of `s` as a JSON string, at most (quotes, and an escape of
/// six bytes for each byte that may need one).
fn json_len(s: &str) -> usize {
    s.len() + 2 + 5 * s.bytes().filter(|&b| b < 0x20 || b == b'"' || b == b'\\').count()
}

/// The length of a route's JSON object in a batch, at most: the fields
/// present (the absent ones are left out of the request), their keys, and
/// the punctuation.
fn add_len(a: &RouteAddArgs) -> usize {
    // {"prefix":"..."},  ,"via":"..."  ,"interface":"..."  ,"type":"..."
    let text = [(7, &a.via), (13, &a.interface), (8, &a.kind)];
    12 + json_len(&a.prefix)
        + text.iter().filter_map(|(k, v)| v.as_deref().map(|v| k + json_len(v))).sum::<usize>()
        + a.distance.map_or(0, |_| 15)   // ,"distance":255
        + a.metric.map_or(0, |_| 20) // ,"metric":4294967295
}

/// `tern route add|del --file FILE`: every line is checked here first
/// (nothing is sent if one is malformed), then the routes go in
/// `route_batch` requests of [`ROUTE_BATCH`], each applied all or nothing;
/// a refused batch stops the rest, and the error names the line.
fn route_file(ctx: &mut Ctx, file: &std::path::Path, add: bool) -> Result<String, String> {
    let name = file.display().to_string();
    let text = if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| format!("stdin: {e}"))?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("{name}: {e}"))?
    };
    let mut adds = Vec::new();
    let mut dels = Vec::new();
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let body = line.split_once('#').map_or(line, |(b, _)| b);
        let words: Vec<String> = body.split_whitespace().map(String::from).collect();
        if words.is_empty() {
            continue;
        }
        let at = |e: String| format!("{name}:{}: {e}", i + 1);
        if add {
            adds.push(route_add_args(&words).map_err(at)?);
        } else {
            match &words[..] {
                [p] => dels.push(RouteDelArgs { prefix: p.clone(), source: None }),
                _ => return Err(at("one PREFIX per line".into())),
            }
        }
        lines.push(i + 1);
    }
    let total = lines.len();
    if total == 0 {
        return Err(format!("{name}: no routes"));
    }
    let t0 = std::time::Instant::now();
    let mut done = 0;
    let mut requests = 0;
    // On a terminal, the count as the batches go (the summary below is
    // the answer, on a terminal or not).
    let mut meter = tern_control::progress::Meter::new("routes", Some(total as u64));
    while done < total {
        // As many routes as fit in ROUTE_BATCH and BATCH_BYTES.
        let mut bytes = 0;
        let mut fits = |len: usize| {
            bytes += len;
            bytes <= BATCH_BYTES
        };
        let n = if add {
            adds.iter().take(ROUTE_BATCH).map(add_len).take_while(|&l| fits(l)).count()
        } else {
            dels.iter().take(ROUTE_BATCH).map(|d| 20 + json_len(&d.prefix)).take_while(|&l| fits(l)).count()
        }
        .max(1);
        requests += 1;
        let batch = if add {
            RouteBatchArgs { add: adds.drain(..n).collect(), del: Vec::new() }
        } else {
            RouteBatchArgs { add: Vec::new(), del: dels.drain(..n).collect() }
        };
        if let Err(e) = ctx.call(&Command::RouteBatch(batch)) {
            // "add[17]: ..." names the operation in the batch: say the line.
            let line = e
                .split_once("]: ")
                .and_then(|(h, _)| h.split_once('[')?.1.parse::<usize>().ok())
                .and_then(|j| lines.get(done + j));
            let at = line.map_or_else(
                || format!("{name}: lines {}-{}", lines[done], lines[done + n - 1]),
                |l| format!("{name}:{l}"),
            );
            return Err(format!(
                "{at}: {e}; that batch of {n} changed nothing{}",
                if done > 0 { format!(", the {done} route(s) before it stay") } else { String::new() }
            ));
        }
        done += n;
        meter.set(done as u64);
    }
    drop(meter);
    let secs = t0.elapsed().as_secs_f64();
    Ok(format!(
        "{total} route(s) {} from {name} in {} request(s), {secs:.2} s ({:.0} routes/s)\n",
        if add { "added" } else { "removed" },
        requests,
        total as f64 / secs.max(1e-9)
    ))
}

/// Sends each rule set of a TOML file (`[[acl]]` tables) to tern, with
/// the interfaces `--in`/`--out` bind it to (`IFACE=SET`).
fn acl_load(ctx: &mut Ctx, file: &std::path::Path, bind_in: &[String], bind_out: &[String]) -> Result<String, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let sets = tern_acl::parse_toml(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    if sets.is_empty() {
        return Err(format!("{}: no [[acl]] rule sets", file.display()));
    }
    let bindings = |list: &[String], opt: &str| -> Result<Vec<(String, String)>, String> {
        list.iter()
            .map(|b| {
                let (iface, set) = b
                    .split_once('=')
                    .filter(|(i, s)| !i.is_empty() && !s.is_empty())
                    .ok_or_else(|| format!("--{opt} {b:?}: expected IFACE=SET"))?;
                if !sets.iter().any(|s| s.name == set) {
                    let names: Vec<&str> = sets.iter().map(|s| s.name.as_str()).collect();
                    return Err(format!("--{opt} {b}: {} has no rule set {set:?} (it has {names:?})", file.display()));
                }
                Ok((iface.to_string(), set.to_string()))
            })
            .collect()
    };
    let (ins, outs) = (bindings(bind_in, "in")?, bindings(bind_out, "out")?);
    let pick = |l: &[(String, String)], set: &str| -> Vec<String> {
        l.iter().filter(|(_, s)| s == set).map(|(i, _)| i.clone()).collect()
    };
    let mut out = String::new();
    for set in sets {
        let (bind_in, bind_out) = (pick(&ins, &set.name), pick(&outs, &set.name));
        match ctx.call(&Command::AclSet(AclSetArgs { set, bind_in, bind_out }))? {
            Reply::Done { message } => {
                out.push_str(&message);
                out.push('\n');
            }
            other => return Err(format!("unexpected answer {other:?}")),
        }
    }
    Ok(out)
}

/// `tern acl import-nft FILE`: nftables JSON to tern TOML, locally; with
/// `--json`, the chains and their rule sets, the notes and the TOML text.
fn acl_import_nft(file: &std::path::Path, ct: tern_acl::nft::CtMode, json: bool) -> Result<String, String> {
    let text = if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| format!("stdin: {e}"))?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?
    };
    let opts = tern_acl::nft::ImportOptions { ct };
    let import = tern_acl::nft::import_with(&text, &opts).map_err(|e| format!("{}: {e}", file.display()))?;
    if json {
        let sets: Vec<_> = import
            .sets
            .iter()
            .map(|c| {
                serde_json::json!({
                    "family": c.family, "table": c.table, "chain": c.chain, "hook": c.hook,
                    "priority": c.priority, "handles": c.handles, "set": c.set,
                })
            })
            .collect();
        return json_text(&serde_json::json!({ "sets": sets, "notes": import.notes, "toml": import.to_string() }));
    }
    Ok(import.to_string())
}

fn config_check(file: &std::path::Path, json: bool) -> Result<String, String> {
    let plan = tern_control::config::load_for_run(file).map_err(|e| e.to_string())?;
    if json {
        return json_text(&serde_json::json!({
            "file": file.display().to_string(),
            "ok": true,
            "interfaces": plan.ifaces.len(),
            "static_routes": plan.routes.len(),
            "route_files": plan.route_files.len(),
            "acl_sets": plan.acls.len(),
            "workers": plan.config.dataplane.workers,
        }));
    }
    Ok(format!(
        "{}: ok: {} interface(s), {} static route(s), {} route file(s), {} ACL rule set(s), {} worker(s)\n",
        file.display(),
        plan.ifaces.len(),
        plan.routes.len(),
        plan.route_files.len(),
        plan.acls.len(),
        plan.config.dataplane.workers
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request of routes sized by `add_len` stays under the API's limit:
    /// the estimate is never below a route's JSON (odd text included).
    #[test]
    fn route_length_estimate_is_an_upper_bound() {
        let odd = "a\"b\\c\u{1}d\u{7f}\u{e9}\n".to_string();
        let all = RouteAddArgs {
            prefix: odd.clone(),
            via: Some(odd.clone()),
            interface: Some(odd.clone()),
            kind: Some(odd.clone()),
            distance: Some(255),
            metric: Some(u32::MAX),
        };
        let cases = [
            RouteAddArgs { prefix: "11.0.1.0/24".into(), via: Some("10.0.1.2".into()), ..RouteAddArgs::default() },
            RouteAddArgs {
                prefix: "2001:db8:ffff:ffff::/64".into(),
                interface: Some("lan".into()),
                ..RouteAddArgs::default()
            },
            RouteAddArgs { prefix: odd.clone(), ..RouteAddArgs::default() },
            all,
        ];
        for a in &cases {
            let json = serde_json::to_string(a).expect("json").len() + 1;
            assert!(add_len(a) >= json, "{a:?}: {} < {json}", add_len(a));
        }
        // Not far above it either, for the common route (requests stay big).
        let json = serde_json::to_string(&cases[0]).expect("json").len() + 1;
        assert_eq!(add_len(&cases[0]), json);
        let d = RouteDelArgs { prefix: odd, source: None };
        assert!(20 + json_len(&d.prefix) > serde_json::to_string(&d).expect("json").len());
    }

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn route_words() {
        let a = route_add_args(&w("10.9.0.0/16 via 10.0.2.2 dev wan0 metric 5")).expect("ok");
        assert_eq!(a.via.as_deref(), Some("10.0.2.2"));
        assert_eq!(a.interface.as_deref(), Some("wan0"));
        assert_eq!(a.metric, Some(5));
        assert_eq!(route_add_args(&w("192.0.2.0/24 blackhole")).expect("ok").kind.as_deref(), Some("blackhole"));
        assert!(route_add_args(&w("10.0.0.0/8 via")).is_err());
        assert!(route_add_args(&w("10.0.0.0/8 gateway 1.2.3.4")).is_err());
    }

    #[test]
    fn address_words() {
        let a = address_args(&w("10.0.9.1/24 dev lan0")).expect("ok");
        assert_eq!((a.interface.as_str(), a.address.as_str()), ("lan0", "10.0.9.1/24"));
        let a = address_args(&w("lan0 2001:db8::1/64")).expect("ok");
        assert_eq!(a.interface, "lan0");
        assert!(address_args(&w("10.0.9.1/24 dev")).is_err());
        assert!(address_args(&w("10.0.9.1/24 on lan0")).is_err());
    }

    #[test]
    fn every_noun_alone_means_show() {
        use clap::Parser;
        for noun in ["interface", "address", "route", "neighbor", "stats", "worker", "graph", "acl", "trace", "config"]
        {
            let l = Line::try_parse_from([noun]).expect(noun);
            assert!(request(&l.cmd).expect("request").is_some(), "{noun}");
        }
        let l = Line::try_parse_from(["interface", "set", "lan0", "down", "mtu", "1400"]).expect("parse");
        match request(&l.cmd).expect("ok") {
            Some(Command::InterfaceSet(a)) => assert_eq!((a.up, a.mtu), (Some(false), Some(1400))),
            other => panic!("{other:?}"),
        }
    }
}
