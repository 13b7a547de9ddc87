//! The FPM server: FRR zebra's `dplane_fpm_nl` module connects here over
//! TCP and streams the routes zebra selected, netlink-encoded, each frame
//! behind a 4-byte FPM header (version 1, type 1 = netlink, total length
//! in network order; FRR `zebra/dplane_fpm_nl.c`). A frame holds one or
//! more netlink messages: `RTM_NEWROUTE`, `RTM_DELROUTE` (an update is a
//! delete followed by the new route in the same frame) and, with
//! `fpm use-next-hop-groups`, `RTM_NEWNEXTHOP`/`RTM_DELNEXTHOP`.
//!
//! Routes are installed as source `fpm`. One frame's messages always land
//! in the same RIB batch, so an update never shows readers a missing
//! route.
//!
//! Restarts: on every new connection zebra resends everything it has. The
//! server then marks every `fpm` route (`begin_resync`), takes what zebra
//! sends, and once the connection has been quiet for `fpm_resync_quiet_ms`
//! removes whatever zebra did not resend (`end_resync`), but never sooner
//! than `fpm_resync_hold_ms` after the connection (a restarted zebra
//! connects at once, while bgpd and ospfd reconnect to zebra and resend
//! their routes seconds later): no stale route survives a zebra restart,
//! and none disappears while zebra is merely reconnecting. If zebra stays
//! away for `fpm_stale_ms`, its routes go.
//!
//! Acknowledgements: the server sends nothing back. zebra's
//! `dplane_fpm_nl` reports success for what it queued, not for what the
//! forwarder installed; tern never claims an installation it did not make
//! (no RTM_F_OFFLOAD notifications).
//!
//! Bad input: a frame whose header is not FPM version 1 means the stream
//! lost its framing: the connection is closed (zebra reconnects and
//! resyncs). A malformed netlink message inside a good frame is counted
//! and skipped. Nothing a peer sends can panic the server.

use super::nl::{self, NlMessages};
use super::sync::{IfMap, RouteSync, SyncCounters};
use crate::source::{ControlSource, SourceCx};
use serde::Serialize;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use tern_fib::{FibError, RouteOp, Source};

pub const FPM_HEADER_LEN: usize = 4;
pub const FPM_VERSION: u8 = 1;
pub const FPM_MSG_NETLINK: u8 = 1;

/// Wraps netlink bytes in one FPM frame (tests, benchmarks, fuzz seeds).
pub fn frame(netlink: &[u8]) -> Vec<u8> {
    let len = u16::try_from(netlink.len() + FPM_HEADER_LEN).unwrap_or(u16::MAX);
    let mut v = Vec::with_capacity(netlink.len() + FPM_HEADER_LEN);
    v.extend_from_slice(&[FPM_VERSION, FPM_MSG_NETLINK]);
    v.extend_from_slice(&len.to_be_bytes());
    v.extend_from_slice(netlink);
    v
}

/// The complete FPM frames at the start of a buffer: (message type, body).
/// A header that is not FPM version 1, or shorter than itself, ends the
/// iteration with an error (the stream cannot be re-synchronised); an
/// incomplete last frame ends it quietly ([`Frames::used`] tells how many
/// bytes the complete ones took).
pub struct Frames<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Frames<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Frames { buf, at: 0 }
    }
    /// Bytes consumed by the frames returned so far.
    pub fn used(&self) -> usize {
        self.at
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<(u8, &'a [u8]), [u8; 4]>;
    fn next(&mut self) -> Option<Self::Item> {
        let h = self.buf.get(self.at..self.at + FPM_HEADER_LEN)?;
        let hdr = [h[0], h[1], h[2], h[3]];
        let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        if h[0] != FPM_VERSION || len < FPM_HEADER_LEN {
            self.buf = &[];
            return Some(Err(hdr));
        }
        let body = self.buf.get(self.at + FPM_HEADER_LEN..self.at + len)?;
        self.at += len;
        Some(Ok((hdr[1], body)))
    }
}

/// Knobs of the server.
#[derive(Clone, Debug)]
pub struct FpmConfig {
    pub listen: SocketAddr,
    pub table: u32,
    pub resync_quiet_ns: u64,
    /// A resync never ends sooner than this after the connection: a
    /// restarted zebra connects first and hears from bgpd/ospfd later.
    pub resync_hold_ns: u64,
    pub stale_ns: u64,
    /// Work per `poll` before yielding to the control loop.
    pub budget_ns: u64,
    /// Operations per RIB batch.
    pub batch: usize,
}

/// What the server has seen, for `tern` status and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FpmCounters {
    pub connections: u64,
    pub disconnects: u64,
    pub frames: u64,
    pub bytes: u64,
    /// Frames of a type other than netlink (protobuf): skipped.
    pub frames_other_type: u64,
    /// Framing errors (the connection was closed).
    pub framing_errors: u64,
    /// Netlink messages of types the server does not handle.
    pub other_messages: u64,
    /// Resyncs completed, and routes they removed.
    pub resyncs: u64,
    pub swept: u64,
    /// Deletes of routes the RIB did not have (updates to routes that were
    /// ignored when added).
    pub del_unknown: u64,
    /// Operations the RIB refused (full tables, bad ECMP).
    pub fib_errors: u64,
    /// Nanoseconds of the last resync, from the connection to the sweep.
    pub last_resync_ns: u64,
    pub connected: bool,
}

/// Everything the server reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FpmStatus {
    pub listen: String,
    pub fpm: FpmCounters,
    pub routes: SyncCounters,
}

struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    /// Bytes of `buf` holding data.
    filled: usize,
}

/// The FPM server as a control-plane source.
pub struct FpmServer {
    cfg: FpmConfig,
    listener: TcpListener,
    conn: Option<Conn>,
    sync: RouteSync,
    ifs: IfMap,
    /// Refreshes `ifs` from device names (None: a fixed map, tests).
    resolver: Option<Box<dyn FnMut() -> IfMap + Send>>,
    last_resolve_ns: u64,
    /// A resync in progress: (connected at, last message at).
    resync: Option<(u64, u64)>,
    /// When the last connection was lost (routes are kept until
    /// `stale_ns` later).
    lost_at: Option<u64>,
    ops: Vec<RouteOp>,
    counters: FpmCounters,
}

const READ_CHUNK: usize = 1 << 20;

impl FpmServer {
    /// Listens on `cfg.listen` (port 0 picks one: see [`FpmServer::local_addr`]).
    pub fn bind(cfg: FpmConfig, ifs: IfMap) -> std::io::Result<FpmServer> {
        let listener = TcpListener::bind(cfg.listen)?;
        listener.set_nonblocking(true)?;
        let sync = RouteSync::new(Source::Fpm, cfg.table, false);
        Ok(FpmServer {
            cfg,
            listener,
            conn: None,
            sync,
            ifs,
            resolver: None,
            last_resolve_ns: 0,
            resync: None,
            lost_at: None,
            ops: Vec::new(),
            counters: FpmCounters::default(),
        })
    }

    /// Re-reads the interface map with `f` when a route names an unknown
    /// kernel interface (a device recreated under a new index), at most
    /// once a second.
    pub fn set_resolver(&mut self, f: Box<dyn FnMut() -> IfMap + Send>) {
        self.resolver = Some(f);
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn status(&self) -> FpmStatus {
        FpmStatus {
            listen: self.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            fpm: FpmCounters { connected: self.conn.is_some(), ..self.counters.clone() },
            routes: self.sync.counters.clone(),
        }
    }

    /// True while a resync waits for zebra to finish resending.
    pub fn resyncing(&self) -> bool {
        self.resync.is_some()
    }

    fn accept(&mut self, cx: &mut SourceCx<'_>) -> bool {
        let mut did = false;
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    did = true;
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    if let Some(old) = self.conn.take() {
                        log::warn!("fpm: {} replaces the connection from {}", peer, old.peer);
                        self.counters.disconnects += 1;
                    }
                    log::info!("fpm: zebra connected from {peer}; resynchronising");
                    self.counters.connections += 1;
                    self.conn = Some(Conn { stream, peer, buf: vec![0; 4 * READ_CHUNK], filled: 0 });
                    self.flush(cx);
                    cx.fib.begin_resync(Source::Fpm);
                    self.sync.clear();
                    self.resync = Some((cx.now_ns, cx.now_ns));
                    self.lost_at = None;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return did,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    log::warn!("fpm: accept: {e}");
                    return did;
                }
            }
        }
    }

    fn disconnect(&mut self, why: &str, now: u64) {
        if let Some(c) = self.conn.take() {
            log::warn!("fpm: connection from {} closed: {why}; keeping its routes until it returns", c.peer);
            self.counters.disconnects += 1;
            self.lost_at = Some(now);
        }
    }

    /// Reads what is available and turns complete frames into operations,
    /// within the time budget. Returns true if it consumed anything.
    fn read(&mut self, cx: &mut SourceCx<'_>) -> bool {
        let Some(mut conn) = self.conn.take() else { return false };
        let start = cx.now_ns;
        let mut did = false;
        let mut closed: Option<String> = None;
        loop {
            if conn.buf.len() - conn.filled < READ_CHUNK {
                let n = conn.buf.len();
                conn.buf.resize(n * 2, 0);
            }
            let free = &mut conn.buf[conn.filled..];
            match conn.stream.read(free) {
                Ok(0) => {
                    closed = Some("end of stream".into());
                    break;
                }
                Ok(n) => {
                    did = true;
                    conn.filled += n;
                    self.counters.bytes += n as u64;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    closed = Some(e.to_string());
                    break;
                }
            }
            let used = self.frames(&conn.buf[..conn.filled], cx);
            match used {
                Ok(used) => {
                    conn.buf.copy_within(used..conn.filled, 0);
                    conn.filled -= used;
                }
                Err(e) => {
                    closed = Some(e);
                    break;
                }
            }
            if tern_engine::clock::now_ns().saturating_sub(start) > self.cfg.budget_ns {
                break;
            }
        }
        if closed.is_none() {
            // Frames completed by the last read.
            match self.frames(&conn.buf[..conn.filled], cx) {
                Ok(used) => {
                    conn.buf.copy_within(used..conn.filled, 0);
                    conn.filled -= used;
                }
                Err(e) => closed = Some(e),
            }
        }
        // Shrink a buffer a full-table burst grew.
        if conn.filled == 0 && conn.buf.len() > 16 * READ_CHUNK {
            conn.buf = vec![0; 4 * READ_CHUNK];
        }
        if did && let Some(r) = &mut self.resync {
            r.1 = tern_engine::clock::now_ns();
        }
        self.flush(cx);
        match closed {
            Some(why) => {
                self.conn = Some(conn);
                self.disconnect(&why, cx.now_ns);
            }
            None => self.conn = Some(conn),
        }
        did
    }

    /// Decodes the complete frames at the start of `buf`; returns how many
    /// bytes they took, or why the stream cannot be trusted any more.
    fn frames(&mut self, buf: &[u8], cx: &mut SourceCx<'_>) -> Result<usize, String> {
        let mut frames = Frames::new(buf);
        for f in frames.by_ref() {
            match f {
                Ok((FPM_MSG_NETLINK, body)) => {
                    self.counters.frames += 1;
                    self.netlink(body, cx);
                }
                Ok(_) => {
                    self.counters.frames += 1;
                    self.counters.frames_other_type += 1;
                }
                Err(h) => {
                    self.counters.framing_errors += 1;
                    return Err(format!("bad FPM header {h:02x?} near byte {}", self.counters.bytes));
                }
            }
        }
        Ok(frames.used())
    }

    fn netlink(&mut self, body: &[u8], cx: &mut SourceCx<'_>) {
        for m in NlMessages::new(body) {
            let Ok(m) = m else {
                self.sync.counters.malformed += 1;
                break;
            };
            match m.ty {
                nl::RTM_NEWROUTE | nl::RTM_DELROUTE => {
                    let before = self.sync.counters.ignored_foreign_if;
                    self.sync.route(m.ty == nl::RTM_NEWROUTE, m.payload, &self.ifs, &mut self.ops);
                    if self.sync.counters.ignored_foreign_if != before {
                        self.maybe_resolve(cx.now_ns);
                    }
                }
                nl::RTM_NEWNEXTHOP | nl::RTM_DELNEXTHOP => {
                    self.sync.nexthop(m.ty == nl::RTM_NEWNEXTHOP, m.payload, &self.ifs, &mut self.ops)
                }
                _ => self.counters.other_messages += 1,
            }
        }
        // A frame is one transaction (delete + add of an update): batch
        // boundaries fall between frames only.
        if self.ops.len() >= self.cfg.batch {
            self.flush(cx);
        }
    }

    fn maybe_resolve(&mut self, now: u64) {
        if now.saturating_sub(self.last_resolve_ns) < 1_000_000_000 {
            return;
        }
        self.last_resolve_ns = now;
        if let Some(f) = &mut self.resolver {
            let m = f();
            if m != self.ifs {
                log::info!("fpm: interface map changed ({} driven devices)", m.len());
                self.ifs = m;
            }
        }
    }

    /// Hands the pending operations to the RIB.
    fn flush(&mut self, cx: &mut SourceCx<'_>) {
        if self.ops.is_empty() {
            return;
        }
        let ops = std::mem::take(&mut self.ops);
        let n = ops.len();
        let dels: Vec<bool> = ops.iter().map(|o| matches!(o, RouteOp::Del(..))).collect();
        let rep = cx.fib.apply(ops);
        for (i, e) in &rep.errors {
            if matches!(e, FibError::NotFound { .. }) && dels.get(*i).copied().unwrap_or(false) {
                self.counters.del_unknown += 1;
                continue;
            }
            self.counters.fib_errors += 1;
            if self.counters.fib_errors <= 10 || self.counters.fib_errors.is_power_of_two() {
                log::warn!("fpm: route {} of a batch of {n} refused: {e} ({} so far)", i + 1, self.counters.fib_errors);
            }
        }
        self.ops = Vec::with_capacity(n);
    }
}

impl ControlSource for FpmServer {
    fn name(&self) -> &str {
        "fpm"
    }

    fn poll(&mut self, cx: &mut SourceCx<'_>) -> bool {
        let mut did = self.accept(cx);
        did |= self.read(cx);
        let now = cx.now_ns;
        if let Some((t0, last)) = self.resync
            && now.saturating_sub(last) >= self.cfg.resync_quiet_ns
            && now.saturating_sub(t0) >= self.cfg.resync_hold_ns
            && self.conn.is_some()
        {
            self.flush(cx);
            let swept = cx.fib.end_resync(Source::Fpm);
            self.resync = None;
            self.counters.resyncs += 1;
            self.counters.swept += swept as u64;
            self.counters.last_resync_ns = last.saturating_sub(t0);
            log::info!("fpm: resync done: {} routes, {swept} stale removed", self.sync.counters.adds);
            did = true;
        }
        if let Some(lost) = self.lost_at
            && self.conn.is_none()
            && now.saturating_sub(lost) >= self.cfg.stale_ns
        {
            cx.fib.begin_resync(Source::Fpm);
            let swept = cx.fib.end_resync(Source::Fpm);
            self.sync.clear();
            self.resync = None;
            self.lost_at = None;
            self.counters.swept += swept as u64;
            log::warn!("fpm: zebra did not come back; removed its {swept} routes");
            did = true;
        }
        did
    }

    fn status(&self) -> serde_json::Value {
        serde_json::to_value(self.status()).unwrap_or_default()
    }

    fn route_counters(&self) -> Option<SyncCounters> {
        Some(self.sync.counters.clone())
    }

    /// Maps the devices a reload added or removed at once (routes zebra
    /// sends for them from now on map; a removed device's routes were
    /// withdrawn by the router).
    fn set_driven(&mut self, driven: Vec<super::kernel::Driven>) {
        self.ifs = super::resolve_if_map(&driven);
        self.resolver = Some(Box::new(move || super::resolve_if_map(&driven)));
    }
}

/// Runs any bytes through everything a peer can reach: FPM framing, the
/// netlink messages inside (or the bytes as one raw netlink datagram, as
/// the kernel socket delivers them), route and next-hop translation for
/// both sources, and the RIB. Returns how many RIB operations it produced.
/// For the `fpm_decode` fuzz target and its tests: nothing here may panic.
pub fn decode_any(data: &[u8]) -> usize {
    use super::nl::{AddrMsg, LinkMsg, NeighMsg, RouteMsg};
    let mut ifs = IfMap::default();
    ifs.insert(7, 0);
    ifs.insert(8, 1);
    let mut fpm = RouteSync::new(Source::Fpm, nl::RT_TABLE_MAIN, false);
    let mut kernel = RouteSync::new(Source::Kernel, nl::RT_TABLE_MAIN, true);
    let mut ops = Vec::new();
    let mut bodies: Vec<&[u8]> = Frames::new(data).filter_map(Result::ok).map(|(_, b)| b).collect();
    bodies.push(data);
    for body in bodies {
        for m in NlMessages::new(body).flatten() {
            let _ = m.error_code();
            match m.ty {
                nl::RTM_NEWROUTE | nl::RTM_DELROUTE => {
                    if let Ok(r) = RouteMsg::parse(m.payload) {
                        let _ = r.paths().count();
                    }
                    fpm.route(m.ty == nl::RTM_NEWROUTE, m.payload, &ifs, &mut ops);
                    kernel.route(m.ty == nl::RTM_NEWROUTE, m.payload, &ifs, &mut ops);
                }
                nl::RTM_NEWNEXTHOP | nl::RTM_DELNEXTHOP => {
                    fpm.nexthop(m.ty == nl::RTM_NEWNEXTHOP, m.payload, &ifs, &mut ops);
                    kernel.nexthop(m.ty == nl::RTM_NEWNEXTHOP, m.payload, &ifs, &mut ops);
                }
                nl::RTM_NEWLINK | nl::RTM_DELLINK => drop(LinkMsg::parse(m.payload)),
                nl::RTM_NEWADDR | nl::RTM_DELADDR => drop(AddrMsg::parse(m.payload)),
                nl::RTM_NEWNEIGH | nl::RTM_DELNEIGH => drop(NeighMsg::parse(m.payload)),
                _ => {}
            }
        }
    }
    let n = ops.len();
    if n > 0 {
        let cfg = tern_fib::FibConfig {
            max_nexthops: 1 << 10,
            max_ecmp_members: 1 << 10,
            v4_nodes: 1 << 12,
            v4_leaves: 1 << 14,
            v6_nodes: 1 << 12,
            v6_leaves: 1 << 14,
            ..tern_fib::FibConfig::default()
        };
        let (mut fib, _reader) = tern_fib::new(cfg, tern_rcu::Domain::new());
        let _ = fib.apply(ops);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::nl::{NexthopSpec, NlBuilder, RTM_NEWNEXTHOP, RTM_NEWROUTE, RouteSpec};

    /// The seed corpus of the fuzz target: valid streams of each kind.
    pub(crate) fn seeds() -> Vec<(&'static str, Vec<u8>)> {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().expect("ip");
        let mut b = NlBuilder::new();
        b.route(RTM_NEWROUTE, 1, &RouteSpec::unicast(ip("203.0.113.0"), 24, vec![(Some(ip("10.0.0.2")), 7)]));
        let single = frame(&b.buf);
        let mut b = NlBuilder::new();
        b.nexthop(
            RTM_NEWNEXTHOP,
            1,
            &NexthopSpec { id: 1, gateway: Some(ip("10.0.0.2")), oif: Some(7), ..Default::default() },
        );
        b.nexthop(
            RTM_NEWNEXTHOP,
            2,
            &NexthopSpec { id: 2, gateway: Some(ip("10.0.1.2")), oif: Some(8), ..Default::default() },
        );
        b.nexthop(RTM_NEWNEXTHOP, 3, &NexthopSpec { id: 3, group: vec![(1, 1), (2, 2)], ..Default::default() });
        let mut r = RouteSpec::unicast(ip("198.51.100.0"), 24, vec![]);
        r.nh_id = Some(3);
        b.route(RTM_NEWROUTE, 4, &r);
        let group = frame(&b.buf);
        let mut b = NlBuilder::new();
        b.route(
            RTM_NEWROUTE,
            1,
            &RouteSpec::unicast(ip("2001:db8::"), 32, vec![(Some(ip("fe80::1")), 7), (Some(ip("fe80::2")), 8)]),
        );
        b.route(nl::RTM_DELROUTE, 2, &RouteSpec::unicast(ip("2001:db8::"), 32, vec![]));
        let multipath = frame(&b.buf);
        let mut b = NlBuilder::new();
        b.link(nl::RTM_NEWLINK, 1, 7, "eth0", nl::IFF_UP | nl::IFF_LOWER_UP, [2, 0, 0, 0, 0, 1]);
        b.address(nl::RTM_NEWADDR, 2, 7, ip("10.0.0.1"), 24);
        b.neigh(nl::RTM_NEWNEIGH, 3, 7, ip("10.0.0.2"), nl::NUD_REACHABLE, Some([2, 0, 0, 0, 0, 2]));
        let kernel = b.buf.clone();
        vec![
            ("single_route", single),
            ("nexthop_group", group),
            ("multipath_v6", multipath),
            ("kernel_objects", kernel),
        ]
    }

    #[test]
    fn seeds_decode_and_garbage_does_not_panic() {
        let seeds = seeds();
        assert!(decode_any(&seeds[0].1) >= 1);
        assert!(decode_any(&seeds[1].1) >= 2, "the grouped route, for both sources");
        for (_, s) in &seeds {
            for cut in 0..s.len() {
                decode_any(&s[..cut]);
                let mut bad = s.clone();
                bad[cut] = bad[cut].wrapping_add(0x41);
                decode_any(&bad);
            }
        }
    }

    /// Writes the seed corpus: `TERN_WRITE_SEEDS=1 cargo test -p
    /// tern-control fpm::tests::write_seed_corpus`.
    #[test]
    fn write_seed_corpus() {
        if std::env::var_os("TERN_WRITE_SEEDS").is_none() {
            return;
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/fpm_decode");
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (name, bytes) in seeds() {
            std::fs::write(dir.join(name), bytes).expect("seed");
        }
    }
}
