//! The API server: a listener thread accepts connections on the unix
//! socket, one thread per connection reads and decodes request lines, and
//! decoded requests wait in a bounded queue until the control thread runs
//! them between rounds ([`ApiServer::poll`]). Decoding, slow peers and
//! malformed input never touch the control thread; a peer can only make
//! it run well-formed commands, one at a time.
//!
//! Connections are bounded ([`Slots`]): [`MAX_CONNECTIONS`] for everyone,
//! [`PER_UID`] per user (its peer credentials), and [`RESERVED`] more for
//! root and the socket's owner, who also close the oldest idle connection
//! when even those are taken, so the operator's CLI always gets in. A
//! connection is closed when it stays idle for the idle deadline, or when a
//! request line takes longer than [`REQUEST_DEADLINE`] to arrive; a refused
//! client is answered `busy`.

use super::proto::*;
use super::slots::{Policy, Slots};
use crate::commands::{self, OpsState};
use crate::router::{ControlBell, Router};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Connections served at once; more are answered `busy` and closed.
pub const MAX_CONNECTIONS: usize = 32;
/// Further connections only root and the socket's owner may open.
pub const RESERVED: usize = 4;
/// Connections one user (other than root and the owner) may hold.
pub const PER_UID: usize = 8;
/// How long a request line may take to arrive, from its first byte.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// How long writing one answer may take (a peer that reads it slowly
/// keeps its place no longer).
pub const ANSWER_WRITE_DEADLINE: Duration = Duration::from_secs(60);
/// An idle connection's deadline unless `[api] idle_timeout_ms` says otherwise.
pub const IDLE_DEADLINE: Duration = Duration::from_secs(60);
/// Requests waiting for the control thread; more are answered `busy`.
const QUEUE: usize = 256;
/// How long a connection waits for the control thread's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);
/// Requests the control thread runs per round before it forwards again.
const PER_ROUND: usize = 64;

struct Job {
    req: Request,
    reply: SyncSender<Response>,
}

/// Where connections hand their requests: the queue, and the bell that
/// wakes the control loop parked in [`ApiServer::wait`] (the same bell
/// the IKE service rings when it hands the loop child SAs to install).
#[derive(Clone)]
struct Submit {
    tx: SyncSender<Job>,
    bell: Arc<ControlBell>,
}

impl Submit {
    fn try_send(&self, job: Job) -> Result<(), TrySendError<()>> {
        self.tx.try_send(job).map_err(|e| match e {
            TrySendError::Full(_) => TrySendError::Full(()),
            TrySendError::Disconnected(_) => TrySendError::Disconnected(()),
        })?;
        self.bell.ring();
        Ok(())
    }
}

/// The daemon's end of the API socket.
pub struct ApiServer {
    path: PathBuf,
    jobs: Receiver<Job>,
    stop: Arc<AtomicBool>,
    slots: Arc<Slots<u32>>,
    /// The accepting thread's listener (a second descriptor of it): shut
    /// down to wake that thread, which works even when the socket's file
    /// is gone (a connect to the path would not).
    listener: UnixListener,
    thread: Option<JoinHandle<()>>,
    bell: Arc<ControlBell>,
}

/// Resolves a group name (or number) through /etc/group.
pub fn group_id(group: &str) -> io::Result<u32> {
    if let Ok(n) = group.parse::<u32>() {
        return Ok(n);
    }
    let text = std::fs::read_to_string("/etc/group")?;
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let gid = f.nth(1)?.parse::<u32>().ok()?;
            (name == group).then_some(gid)
        })
        .next()
        .ok_or_else(|| {
            let name: String = group.chars().take(32).collect();
            io::Error::new(io::ErrorKind::NotFound, format!("no group named {name:?} in /etc/group"))
        })
}

/// Who may connect and how long a connection may wait.
#[derive(Clone, Debug)]
pub struct SocketOptions {
    /// The socket's group (a name or number); None keeps tern's.
    pub group: Option<String>,
    /// The socket's permission bits; None: 0600, or 0660 with a group.
    pub mode: Option<u32>,
    /// An idle connection is closed after this long.
    pub idle: Duration,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions { group: None, mode: None, idle: IDLE_DEADLINE }
    }
}

/// Binds the socket: creates the directory, refuses to take over a socket
/// another process still answers on, replaces a stale one, and restricts
/// it to its owner (mode 0600), or owner and `group` (mode 0660), or the
/// mode given.
fn bind(path: &Path, group: Option<&str>, mode: Option<u32>) -> io::Result<UnixListener> {
    let what = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let gid = group.map(group_id).transpose()?;
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).map_err(what)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{}: another tern is listening there", path.display()),
                ));
            }
            std::fs::remove_file(path).map_err(what)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: exists and is not a socket", path.display()),
            ));
        }
        Err(_) => {}
    }
    // Until the mode is set below, the umask applies: connecting needs
    // write permission, which the usual umask (022) gives nobody but root.
    let l = UnixListener::bind(path).map_err(what)?;
    let mode = mode.unwrap_or(if gid.is_some() { 0o660 } else { 0o600 });
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(what)?;
    if let Some(g) = gid {
        std::os::unix::fs::chown(path, None, Some(g)).map_err(what)?;
    }
    Ok(l)
}

impl ApiServer {
    /// Listens on `path`.
    pub fn bind(path: impl Into<PathBuf>, opts: &SocketOptions) -> io::Result<ApiServer> {
        ApiServer::bind_waking(path, opts, Arc::default())
    }

    /// Listens on `path`; a request rings `bell` (the router's: its
    /// control loop parks on it in [`ApiServer::wait`]).
    pub fn bind_waking(
        path: impl Into<PathBuf>,
        opts: &SocketOptions,
        bell: Arc<ControlBell>,
    ) -> io::Result<ApiServer> {
        let path = path.into();
        let listener = bind(&path, opts.group.as_deref(), opts.mode)?;
        let owner = std::fs::metadata(&path)?.uid();
        let (tx, jobs) = mpsc::sync_channel::<Job>(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let slots = Arc::new(Slots::new(Policy {
            max: MAX_CONNECTIONS,
            reserved: RESERVED,
            per_client: PER_UID,
            evict_any: false,
        }));
        let tx = Submit { tx, bell: Arc::clone(&bell) };
        let a = Accept { tx, stop: Arc::clone(&stop), slots: Arc::clone(&slots), owner, idle: opts.idle };
        let waker = listener.try_clone()?;
        let thread = std::thread::Builder::new().name("tern-api".into()).spawn(move || a.run(listener))?;
        log::info!("API listening on {}", path.display());
        Ok(ApiServer { path, jobs, stop, slots, listener: waker, thread: Some(thread), bell })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs the requests that arrived (at most a round's worth). Returns
    /// true if it ran any.
    pub fn poll(&mut self, router: &mut Router, st: &mut OpsState) -> bool {
        let mut n = 0;
        while n < PER_ROUND {
            let Ok(job) = self.jobs.try_recv() else { break };
            Self::answer(router, st, job);
            n += 1;
        }
        n > 0
    }

    /// An idle control loop's pause: waits at most `timeout` for the bell
    /// (a request, or whatever else rings it: the IKE service's child SAs)
    /// and runs the requests that came at once (so a request does not
    /// wait out the pause). Returns true if it ran any. The bell's rings
    /// are forgotten when it returns: the caller's next round looks at
    /// what they announced.
    pub fn wait(&mut self, router: &mut Router, st: &mut OpsState, timeout: Duration) -> bool {
        self.bell.wait(timeout);
        self.bell.clear();
        self.poll(router, st)
    }

    fn answer(router: &mut Router, st: &mut OpsState, job: Job) {
        let out = commands::execute(router, st, job.req.cmd);
        // The connection may have gone: nothing to do then.
        let _ = job.reply.try_send(Response::new(job.req.id, out));
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept() so the thread sees the flag: Linux ends a
        // blocked (and every later) `accept` on a listener shut down for
        // reading with EINVAL. Connecting to the path instead would hang
        // the shutdown when something removed the socket's file.
        let _ = rustix::net::shutdown(&self.listener, rustix::net::Shutdown::Read);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.slots.close_all();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The accepting thread's state.
struct Accept {
    tx: Submit,
    stop: Arc<AtomicBool>,
    slots: Arc<Slots<u32>>,
    /// The socket's owner: as privileged as root.
    owner: u32,
    idle: Duration,
}

/// A line the server sends on its own (no request id) before it closes.
fn notice(stream: &mut UnixStream, code: ErrorCode, message: String) {
    let _ = stream.write_all(encode_response(&Response::new(None, Err(ApiError::new(code, message)))).as_bytes());
}

impl Accept {
    fn run(self, listener: UnixListener) {
        let Accept { tx, stop, slots, owner, idle } = self;
        for conn in listener.incoming() {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let Ok(mut stream) = conn else { continue };
            // Nothing this thread writes may block it.
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            // Unknown credentials: an ordinary user no one else shares.
            let uid = rustix::net::sockopt::socket_peercred(&stream).map_or(u32::MAX, |c| c.uid.as_raw());
            let privileged = uid == 0 || uid == owner;
            let closer = match stream.try_clone() {
                Ok(c) => c,
                Err(_) => continue,
            };
            let close = Box::new(move || {
                let why = ApiError::new(ErrorCode::Busy, "connection closed to make room for another client");
                // Never blocks the accepting thread: a peer with no room
                // for the line only misses it.
                let line = encode_response(&Response::new(None, Err(why)));
                let _ = rustix::net::send(&closer, line.as_bytes(), rustix::net::SendFlags::DONTWAIT);
                let _ = closer.shutdown(std::net::Shutdown::Both);
            });
            let id = match slots.admit(uid, privileged, close) {
                Ok(id) => id,
                Err(why) => {
                    log::debug!("API: uid {uid} refused: {why}");
                    notice(&mut stream, ErrorCode::Busy, format!("tern is busy: {why}; try again"));
                    continue;
                }
            };
            let (tx, slots2) = (tx.clone(), Arc::clone(&slots));
            let spawned = std::thread::Builder::new().name("tern-api-conn".into()).spawn(move || {
                let place = slots2.place(id);
                serve(stream, &tx, &place, idle);
            });
            if spawned.is_err() {
                // The closure (and with it the place) was dropped unrun.
                slots.place(id);
            }
        }
    }
}

/// Reads one line of at most `MAX_REQUEST_BYTES`; Ok(None) at end of
/// stream, Err(true) for an over-long line (the connection is closed: the
/// rest of the line cannot be trusted to be a request boundary).
/// Why reading a request stopped.
enum ReadEnd {
    /// The peer closed, or the connection failed.
    Closed,
    /// The line was longer than `MAX_REQUEST_BYTES`.
    TooLong,
    /// Nothing came within the idle deadline.
    Idle,
    /// A started line did not finish within [`REQUEST_DEADLINE`].
    Slow,
}

/// Reads one line of at most `MAX_REQUEST_BYTES`; Ok(None) at end of
/// stream. Waits at most `idle` for its first byte and
/// [`REQUEST_DEADLINE`] from there for the whole line.
fn read_line(r: &mut BufReader<UnixStream>, buf: &mut Vec<u8>, idle: Duration) -> Result<Option<()>, ReadEnd> {
    buf.clear();
    let start = Instant::now();
    let mut first: Option<Instant> = None;
    loop {
        let left = match first {
            None => idle.saturating_sub(start.elapsed()),
            Some(t) => REQUEST_DEADLINE.saturating_sub(t.elapsed()),
        };
        if left.is_zero() {
            return Err(if first.is_none() { ReadEnd::Idle } else { ReadEnd::Slow });
        }
        if r.buffer().is_empty() {
            let _ = r.get_ref().set_read_timeout(Some(left));
        }
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => continue,
            Err(_) => return Err(ReadEnd::Closed),
        };
        if !chunk.is_empty() && first.is_none() && !chunk.iter().all(u8::is_ascii_whitespace) {
            first = Some(Instant::now());
        }
        if chunk.is_empty() {
            return Ok(if buf.is_empty() { None } else { Some(()) });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        buf.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if buf.len() > MAX_REQUEST_BYTES + 1 {
            return Err(ReadEnd::TooLong);
        }
        if done {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Some(()));
        }
    }
}

fn serve(stream: UnixStream, tx: &Submit, place: &super::slots::Place<'_, u32>, idle: Duration) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let Ok(mut out) = stream.try_clone() else { return };
    let mut r = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        let resp = match read_line(&mut r, &mut line, idle) {
            Ok(None) | Err(ReadEnd::Closed) => return,
            Err(ReadEnd::TooLong) => {
                let e = ApiError::bad_request(format!("request longer than {MAX_REQUEST_BYTES} bytes; closing"));
                let _ = out.write_all(encode_response(&Response::new(None, Err(e))).as_bytes());
                return;
            }
            Err(ReadEnd::Idle) => {
                let m = format!("idle for {} ms; closing (connect again)", idle.as_millis());
                notice(&mut out, ErrorCode::Timeout, m);
                return;
            }
            Err(ReadEnd::Slow) => {
                let m = format!("request not complete within {} s; closing", REQUEST_DEADLINE.as_secs());
                notice(&mut out, ErrorCode::Timeout, m);
                return;
            }
            Ok(Some(())) if line.iter().all(u8::is_ascii_whitespace) => continue,
            // Closed to make room while the line came: it must not run.
            Ok(Some(())) if !place.working() => return,
            Ok(Some(())) => match decode_request(&line) {
                Err(e) => Response::new(peek_id(&line), Err(e)),
                Ok(req) => run(req, tx),
            },
        };
        let deadline = Instant::now() + ANSWER_WRITE_DEADLINE;
        let text = encode_response(&resp);
        if super::slots::write_by(&mut out, text.as_bytes(), deadline, |s, t| s.set_write_timeout(Some(t))).is_err() {
            return;
        }
        place.idle();
    }
}

/// Hands a request to the control thread and waits for its answer.
fn run(req: Request, tx: &Submit) -> Response {
    let id = req.id;
    let (rtx, rrx) = mpsc::sync_channel(1);
    match tx.try_send(Job { req, reply: rtx }) {
        Ok(()) => {}
        Err(TrySendError::Full(_)) => {
            return Response::new(id, Err(ApiError::new(ErrorCode::Busy, "too many requests queued; try again")));
        }
        Err(TrySendError::Disconnected(_)) => {
            return Response::new(id, Err(ApiError::internal("tern is shutting down")));
        }
    }
    rrx.recv_timeout(ANSWER_TIMEOUT).unwrap_or_else(|_| {
        Response::new(
            id,
            Err(ApiError::internal(format!("tern's control loop did not answer within {}s", ANSWER_TIMEOUT.as_secs()))),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tern-api-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn socket_is_private_and_replaces_only_stale_sockets() {
        let dir = scratch("bind");
        let path = dir.join("run/tern.sock");
        let l = bind(&path, None, None).expect("bind creates the directory");
        let mode = std::fs::metadata(&path).expect("socket").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "root only without a group");
        let e = bind(&path, None, None).expect_err("a live socket is not taken over");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        drop(l);
        let l = bind(&path, Some("0"), None).expect("a stale socket is replaced");
        assert_eq!(std::fs::metadata(&path).expect("socket").permissions().mode() & 0o777, 0o660);
        drop(l);
        let file = dir.join("plain");
        std::fs::write(&file, b"x").expect("file");
        assert_eq!(bind(&file, None, None).expect_err("not a socket").kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&file).expect("kept"), b"x", "a regular file is never removed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn stops_when_the_socket_file_is_gone() {
        // A temp-dir cleaner may remove the socket's file while tern runs;
        // stopping must still end the accepting thread (it used to be woken
        // by a connect to the path, which then failed, and the join hung).
        let dir = scratch("gone");
        let path = dir.join("tern.sock");
        let server = ApiServer::bind(&path, &SocketOptions::default()).expect("bind");
        std::fs::remove_file(&path).expect("remove the socket file");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            drop(server);
            let _ = tx.send(());
        });
        // A deadline on a hang, not a speed check.
        assert!(rx.recv_timeout(Duration::from_secs(30)).is_ok(), "dropping the server returned");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A request rings the control loop's bell once it is queued: the
    /// loop, parked on that bell (which the IKE service rings too), runs
    /// it without waiting out its pause.
    #[test]
    fn a_request_rings_the_control_bell() {
        let dir = scratch("bell");
        let path = dir.join("tern.sock");
        let bell = Arc::new(ControlBell::default());
        let server = ApiServer::bind_waking(&path, &SocketOptions::default(), Arc::clone(&bell)).expect("bind");
        let mut c = UnixStream::connect(&path).expect("connect");
        c.write_all(encode_request(Some(1), &Command::Status {}).as_bytes()).expect("send");
        // A deadline on a hang, not a speed check.
        let until = Instant::now() + Duration::from_secs(60);
        while !bell.is_rung() && Instant::now() < until {
            bell.wait(Duration::from_secs(1));
        }
        assert!(bell.is_rung(), "the request rang the bell");
        assert!(server.jobs.try_recv().is_ok(), "queued before the ring");
        bell.clear();
        assert!(!bell.is_rung());
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn groups_by_name_or_number() {
        assert_eq!(group_id("0").expect("number"), 0);
        assert_eq!(group_id("root").expect("root is in /etc/group"), 0);
        assert!(group_id("no-such-group-tern").is_err());
    }
}
