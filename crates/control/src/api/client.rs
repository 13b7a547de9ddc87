//! The API client the CLI uses: one connection, one request at a time.

use super::proto::*;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Why a call failed: the transport, or tern's answer.
#[derive(Debug)]
pub enum CallError {
    /// Could not reach tern or the connection broke.
    Io(String),
    /// tern answered with an error.
    Api(ApiError),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Io(s) => f.write_str(s),
            CallError::Api(e) => f.write_str(&e.message),
        }
    }
}

impl std::error::Error for CallError {}

pub struct Client {
    r: BufReader<UnixStream>,
    w: UnixStream,
    next_id: u64,
}

impl Client {
    /// Connects to a running tern's API socket.
    pub fn connect(path: &Path) -> Result<Client, CallError> {
        let s = UnixStream::connect(path).map_err(|e| {
            let hint = match e.kind() {
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                    " (is tern running? `tern run --config FILE` starts it; --socket names another socket)"
                }
                io::ErrorKind::PermissionDenied => " (the socket is for root and the [api] group)",
                _ => "",
            };
            CallError::Io(format!("cannot connect to {}: {e}{hint}", path.display()))
        })?;
        let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
        let w = s.try_clone().map_err(|e| CallError::Io(e.to_string()))?;
        Ok(Client { r: BufReader::new(s), w, next_id: 1 })
    }

    /// Sends a request and waits for its answer.
    pub fn call(&mut self, cmd: &Command) -> Result<Reply, CallError> {
        let id = self.next_id;
        self.next_id += 1;
        let line = encode_request(Some(id), cmd);
        if let Err(e) = self.w.write_all(line.as_bytes()) {
            // tern may have refused the connection (busy) and closed it
            // before the request went out: its answer is still there to read.
            return Err(self.refusal().unwrap_or_else(|| CallError::Io(format!("sending to tern: {e}"))));
        }
        let resp = self.read_response()?;
        if resp.id.is_some() && resp.id != Some(id) {
            return Err(CallError::Io(format!("answer for request {:?} while waiting for {id}", resp.id)));
        }
        resp.into_outcome().map_err(CallError::Api)
    }

    /// tern's answer already waiting on a connection it closed (a busy
    /// refusal, an idle or evicted connection's notice), if there is one.
    fn refusal(&mut self) -> Option<CallError> {
        let _ = self.r.get_ref().set_read_timeout(Some(Duration::from_millis(200)));
        let resp = self.read_response().ok()?;
        match resp.into_outcome() {
            Err(e) => Some(CallError::Api(e)),
            Ok(_) => None,
        }
    }

    /// Whether the connection can still carry a request: false once tern
    /// closed it (an idle connection past its deadline, or one closed to
    /// make room for another client). Reads nothing a request would need:
    /// between two calls tern sends nothing but such a notice.
    pub fn is_open(&mut self) -> bool {
        if !self.r.buffer().is_empty() {
            return false;
        }
        let mut b = [0u8; 1];
        use rustix::net::{RecvFlags, recv};
        matches!(recv(self.r.get_ref(), &mut b, RecvFlags::PEEK | RecvFlags::DONTWAIT), Err(rustix::io::Errno::AGAIN))
    }

    /// Sends raw bytes (tests of the server's robustness) and reads one answer.
    pub fn call_raw(&mut self, line: &[u8]) -> Result<Response, CallError> {
        self.w.write_all(line).map_err(|e| CallError::Io(e.to_string()))?;
        self.read_response()
    }

    fn read_response(&mut self) -> Result<Response, CallError> {
        let mut buf = String::new();
        let n = self.r.read_line(&mut buf).map_err(|e| CallError::Io(format!("reading tern's answer: {e}")))?;
        if n == 0 {
            return Err(CallError::Io("tern closed the connection".into()));
        }
        serde_json::from_str(buf.trim_end()).map_err(|e| CallError::Io(format!("unreadable answer from tern: {e}")))
    }
}
