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
//! removes whatever zebra did not resend (`end_resync`): no stale route
//! survives a zebra restart, and none disappears while zebra is merely
//! reconnecting. If zebra stays away for `fpm_stale_ms`, its routes go.
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

/// Knobs of the server.
#[derive(Clone, Debug)]
pub struct FpmConfig {
    pub listen: SocketAddr,
    pub table: u32,
    pub resync_quiet_ns: u64,
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
        let mut at = 0;
        while let Some(h) = buf.get(at..at + FPM_HEADER_LEN) {
            let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            if h[0] != FPM_VERSION || len < FPM_HEADER_LEN {
                self.counters.framing_errors += 1;
                return Err(format!("bad FPM header {:02x?} at byte {}", h, self.counters.bytes));
            }
            let Some(body) = buf.get(at + FPM_HEADER_LEN..at + len) else { break };
            self.counters.frames += 1;
            if h[1] == FPM_MSG_NETLINK {
                self.netlink(body, cx);
            } else {
                self.counters.frames_other_type += 1;
            }
            at += len;
        }
        Ok(at)
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
}
