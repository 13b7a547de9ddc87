//! One engine thread: a `tern_ike::Ike` shard fed by a channel (datagrams,
//! commands from the control thread), polled at its next deadline. What it
//! outputs goes to the transport (datagrams) or to the control thread
//! (child SAs to install or delete, IKE SAs up and down).

use super::io::Transport;
use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tern_ike::{Ike, IkeSaInfo, IkeStats, Output, PeerConfig};

/// What a shard is asked to do.
pub enum Cmd {
    Datagram(SocketAddr, SocketAddr, Vec<u8>),
    SetPeers(Vec<PeerConfig>),
    Initiate(String, Sender<Result<u64, String>>),
    Terminate(String, Option<u64>, Sender<Result<usize, String>>),
    ChildExpired {
        inbound_spi: u32,
        hard: bool,
    },
    /// Authenticated ESP in UDP on a child SA from a new address or port
    /// (`Ike::esp_moved`).
    EspMoved {
        inbound_spi: u32,
        remote: SocketAddr,
    },
    Show(Sender<Vec<IkeSaInfo>>),
    Stop,
}

/// What a shard tells the control thread: (shard, output).
pub type Event = (u32, Output);

/// The longest a shard sleeps (its stats are published at least this
/// often).
const MAX_WAIT: Duration = Duration::from_millis(200);
/// Commands handled before the engine is polled and drained.
const BATCH: usize = 256;

pub struct Shard {
    pub id: u32,
    pub ike: Ike,
    pub rx: Receiver<Cmd>,
    pub events: Sender<Event>,
    pub transport: Arc<dyn Transport>,
    pub stats: Arc<Mutex<IkeStats>>,
    /// Rung after events were sent (wakes the control thread).
    pub wake: Arc<dyn Fn() + Send + Sync>,
}

impl Shard {
    pub fn run(mut self) {
        let mut stats_at = Instant::now();
        loop {
            let now = Instant::now();
            let wait = self.ike.next_deadline().map_or(MAX_WAIT, |d| d.saturating_duration_since(now).min(MAX_WAIT));
            let first = match self.rx.recv_timeout(wait) {
                Ok(c) => Some(c),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let mut stop = false;
            if let Some(c) = first {
                stop |= self.handle(c);
                for _ in 0..BATCH {
                    match self.rx.try_recv() {
                        Ok(c) => stop |= self.handle(c),
                        Err(_) => break,
                    }
                }
            }
            self.ike.poll(Instant::now());
            self.flush();
            let now = Instant::now();
            if now.saturating_duration_since(stats_at) >= Duration::from_millis(100) || stop {
                stats_at = now;
                if let Ok(mut s) = self.stats.lock() {
                    *s = self.ike.stats();
                }
            }
            if stop {
                return;
            }
        }
    }

    /// Returns true for [`Cmd::Stop`].
    fn handle(&mut self, c: Cmd) -> bool {
        let now = Instant::now();
        match c {
            Cmd::Datagram(local, remote, data) => self.ike.handle(now, SystemTime::now(), local, remote, &data),
            Cmd::SetPeers(p) => self.ike.set_peers(now, p),
            Cmd::Initiate(peer, reply) => {
                let _ = reply.send(self.ike.initiate(now, &peer));
            }
            Cmd::Terminate(peer, id, reply) => {
                let _ = reply.send(self.ike.terminate(now, &peer, id));
            }
            Cmd::ChildExpired { inbound_spi, hard } => self.ike.child_expired(now, inbound_spi, hard),
            Cmd::EspMoved { inbound_spi, remote } => {
                self.ike.esp_moved(now, inbound_spi, remote);
            }
            Cmd::Show(reply) => {
                let _ = reply.send(self.ike.ike_sas());
            }
            Cmd::Stop => return true,
        }
        // Datagrams go out in order with what produced them.
        self.flush();
        false
    }

    /// Sends the engine's datagrams and hands the rest to the control
    /// thread, in order. A datagram that follows a new child SA (the
    /// responder's IKE_AUTH or CREATE_CHILD_SA answer) goes through the
    /// control thread too, which sends it once the SA is installed: the
    /// peer starts sending on the SA when it has the answer, and the data
    /// plane must know the SA by then (else its first packets are dropped
    /// as `unknown-spi`).
    fn flush(&mut self) {
        let mut told = false;
        let mut behind_child = false;
        let outs: Vec<Output> = self.ike.drain().collect();
        for o in outs {
            match o {
                Output::Send { local, remote, data } if !behind_child => {
                    self.transport.send(local, remote, &data);
                }
                Output::InstallChild(c) => {
                    behind_child = true;
                    told = true;
                    if self.events.send((self.id, Output::InstallChild(c))).is_err() {
                        return;
                    }
                }
                other => {
                    told = true;
                    if self.events.send((self.id, other)).is_err() {
                        return;
                    }
                }
            }
        }
        if told {
            (self.wake)();
        }
    }
}
