//! One engine thread: a `tern_ike::Ike` shard that reads its datagrams
//! itself and takes commands from an [`Inbox`], polled at its next
//! deadline. What it outputs goes to the transport (datagrams) or to the
//! control thread (child SAs to install or delete, IKE SAs up and down).
//!
//! **Where the datagrams come from** ([`Input`]): the engine's queue in
//! standalone mode, the kernel's sockets in Linux mode. Every shard reads
//! the same source; a datagram another shard owns (`Ike::shard_of`) is
//! handed to that shard's inbox, one it owns is handled at once. With one
//! thread (the default) a datagram thus goes from the worker (or the
//! kernel) straight to the thread that answers it: no reader thread in
//! between, no channel, no copy. (A reader thread per socket feeding the
//! shards over channels cost a thread wake-up and a hop per datagram:
//! that, more than the engine, was the IKE thread's CPU per setup.)
//!
//! **How a shard sleeps**: in standalone mode on the engine's doorbell
//! (`Shared::ike_bell`, rung by the workers once per batch that queued
//! IKE), in Linux mode in one poll(2) on the sockets and the shard's
//! eventfd. A command pushed to an [`Inbox`] rings the same bell or
//! eventfd.

use super::io::{Datagram, EngineTransport, IoCounters, KernelUdp, Transport};
use crossbeam_queue::SegQueue;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tern_ike::{Ike, IkeSaInfo, IkeStats, Output, PeerConfig};
use tern_nodes::state::Doorbell;

/// What a shard is asked to do.
pub enum Cmd {
    Datagram(SocketAddr, SocketAddr, Vec<u8>),
    SetPeers(Vec<PeerConfig>),
    /// `[ike_service]` limits changed by a reload (`Ike::set_settings`).
    SetSettings(tern_ike::Settings),
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
    /// A page of the shard's IKE SAs (`super::paging`): at most `limit`
    /// after the shard's own id `after` that `filter` matches.
    Page {
        after: Option<u64>,
        limit: usize,
        filter: tern_ike::SaFilter,
        reply: Sender<Vec<IkeSaInfo>>,
    },
    /// The shard's IKE SAs counted by state and peer.
    Summary(Sender<tern_ike::SaSummary>),
    Stop,
}

/// What a shard tells the control thread: (shard, output).
pub type Event = (u32, Output);

/// The longest a shard sleeps (its stats are published at least this
/// often).
const MAX_WAIT: Duration = Duration::from_millis(200);
/// Commands or datagrams handled before the engine's timers run and its
/// outputs go out.
const BATCH: usize = 256;

/// What wakes a parked shard.
#[derive(Clone)]
pub enum Waker {
    /// The engine's doorbell (standalone mode).
    Bell(Arc<Doorbell>),
    /// The shard's eventfd (Linux mode), polled with the sockets.
    EventFd(Arc<OwnedFd>),
    /// Nothing (tests that drive a shard by hand).
    None,
}

impl Waker {
    fn wake(&self) {
        match self {
            Waker::Bell(b) => b.ring(),
            Waker::EventFd(fd) => {
                // A full counter (2^64 - 2 wake-ups unread) still wakes.
                let _ = rustix::io::write(&**fd, &1u64.to_ne_bytes());
            }
            Waker::None => {}
        }
    }
}

/// A shard's commands (and the datagrams another shard read for it).
pub struct Inbox {
    queue: SegQueue<Cmd>,
    waker: Waker,
}

impl Inbox {
    pub fn new(waker: Waker) -> Inbox {
        Inbox { queue: SegQueue::new(), waker }
    }

    /// Queues `c` and wakes the shard.
    pub fn send(&self, c: Cmd) {
        self.queue.push(c);
        self.waker.wake();
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    fn pop(&self) -> Option<Cmd> {
        self.queue.pop()
    }
}

/// Where a shard's datagrams come from (see the module).
pub enum Input {
    Engine(EngineTransport),
    Kernel { udp: Arc<KernelUdp>, event: Arc<OwnedFd> },
}

pub struct Shard {
    pub id: u32,
    pub ike: Ike,
    pub input: Input,
    /// Every shard's inbox, this one's at `id`.
    pub inboxes: Arc<Vec<Arc<Inbox>>>,
    pub events: Sender<Event>,
    pub transport: Arc<dyn Transport>,
    pub counters: Arc<IoCounters>,
    pub stats: Arc<Mutex<IkeStats>>,
    /// Rung after events were sent (wakes the control thread), once per
    /// turn of the loop: the control thread then installs the turn's
    /// child SAs in one publication (a ring per child SA woke it, on a
    /// shared CPU, for each).
    pub wake: Arc<dyn Fn() + Send + Sync>,
    /// What kernel sockets are read into (allocated at the first read).
    pub buf: Vec<u8>,
    /// Events went to the control thread since it was last woken.
    pub told: bool,
}

impl Shard {
    pub fn run(mut self) {
        let mut stats_at = Instant::now();
        let mut received: Vec<Datagram> = Vec::new();
        loop {
            let now = Instant::now();
            let wait = self.ike.next_deadline().map_or(MAX_WAIT, |d| d.saturating_duration_since(now).min(MAX_WAIT));
            self.park(wait);
            let mut stop = false;
            for _ in 0..BATCH {
                let Some(c) = self.inbox().pop() else { break };
                stop |= self.handle(c);
            }
            self.read(&mut received);
            for d in received.drain(..) {
                self.datagram(d);
            }
            self.ike.poll(Instant::now());
            self.flush();
            // The turn's answers go out together (one worker wake-up).
            self.transport.flush();
            if std::mem::take(&mut self.told) {
                (self.wake)();
            }
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

    fn inbox(&self) -> &Inbox {
        &self.inboxes[self.id as usize]
    }

    /// Sleeps until a datagram or a command may wait, or `wait`.
    fn park(&self, wait: Duration) {
        match &self.input {
            Input::Engine(t) => {
                let inbox = self.inbox();
                if inbox.is_empty() && !t.pending() {
                    t.udp.bell().wait(wait, || !inbox.is_empty() || t.pending());
                }
            }
            Input::Kernel { udp, event } => {
                if self.inbox().is_empty() {
                    udp.wait(Some(event), wait);
                    // Reset the eventfd: the inbox is read next anyway.
                    let mut b = [0u8; 8];
                    let _ = rustix::io::read(&**event, &mut b);
                }
            }
        }
    }

    /// What the source holds now, up to [`BATCH`] datagrams, without
    /// waiting.
    fn read(&mut self, out: &mut Vec<Datagram>) {
        match &self.input {
            Input::Engine(t) => t.read(out, BATCH),
            Input::Kernel { udp, .. } => {
                if self.buf.is_empty() {
                    self.buf = vec![0u8; 65536];
                }
                udp.read(out, BATCH, &mut self.buf);
            }
        }
    }

    /// A datagram read: handled here, or handed to the shard that owns it.
    fn datagram(&mut self, (local, remote, data): Datagram) {
        let n = self.inboxes.len() as u32;
        let owner = route(&data, remote, n);
        if owner != self.id
            && let Some(inbox) = self.inboxes.get(owner as usize)
        {
            self.counters.forwarded.fetch_add(1, Ordering::Relaxed);
            inbox.send(Cmd::Datagram(local, remote, data));
            return;
        }
        self.ike.handle(Instant::now(), SystemTime::now(), local, remote, &data);
        self.flush();
    }

    /// Returns true for [`Cmd::Stop`].
    fn handle(&mut self, c: Cmd) -> bool {
        let now = Instant::now();
        match c {
            Cmd::Datagram(local, remote, data) => self.ike.handle(now, SystemTime::now(), local, remote, &data),
            Cmd::SetPeers(p) => self.ike.set_peers(now, p),
            Cmd::SetSettings(st) => self.ike.set_settings(st),
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
            Cmd::Page { after, limit, filter, reply } => {
                let _ = reply.send(self.ike.ike_sa_page(after, limit, &filter));
            }
            Cmd::Summary(reply) => {
                let _ = reply.send(self.ike.ike_sa_summary());
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
        for o in self.ike.drain() {
            match o {
                Output::Send { local, remote, data } if !behind_child => {
                    self.transport.send(local, remote, &data);
                }
                Output::InstallChild(c) => {
                    behind_child = true;
                    told = true;
                    if self.events.send((self.id, Output::InstallChild(c))).is_err() {
                        break;
                    }
                }
                other => {
                    told = true;
                    if self.events.send((self.id, other)).is_err() {
                        break;
                    }
                }
            }
        }
        self.told |= told;
    }
}

/// The shard that handles a datagram from `remote`: the one whose SPIs it
/// names, a new IKE_SA_INIT's by a hash of its source.
pub fn route(data: &[u8], remote: SocketAddr, n: u32) -> u32 {
    tern_ike::Ike::shard_of(data, n).unwrap_or_else(|| (super::hash_of(remote) % u64::from(n.max(1))) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_nodes::state::{IkeDatagram, Shared};

    fn shared() -> Shared {
        let (_fib, reader) = tern_fib::new(tern_fib::FibConfig::default(), tern_rcu::Domain::new());
        Shared::new(tern_nodes::state::IfTable::default(), reader)
    }

    /// An IKE header from an original initiator naming responder SPI
    /// `spi_r` (an INFORMATIONAL request of an SA the engine does not
    /// know: dropped by it, harmless).
    fn message(spi_r: u64) -> Vec<u8> {
        let mut h = vec![0u8; 28];
        h[..8].copy_from_slice(&7u64.to_be_bytes());
        h[8..16].copy_from_slice(&spi_r.to_be_bytes());
        h[17] = 0x20;
        h[18] = 37;
        h[19] = 0x08;
        h[24..28].copy_from_slice(&28u32.to_be_bytes());
        h
    }

    /// Shard 0 of 2 on the engine's queue, running in its own thread.
    fn start(sh: &Shared) -> (Arc<Vec<Arc<Inbox>>>, Arc<IoCounters>, std::thread::JoinHandle<()>) {
        let counters = Arc::new(IoCounters::default());
        let udp = crate::ike_local::EngineUdp::new(sh, None);
        let inboxes: Arc<Vec<Arc<Inbox>>> =
            Arc::new((0..2).map(|_| Arc::new(Inbox::new(Waker::Bell(Arc::clone(udp.bell()))))).collect());
        let (events, _) = std::sync::mpsc::channel();
        let transport = Arc::new(EngineTransport { udp: udp.clone(), counters: Arc::clone(&counters) });
        let s = Shard {
            id: 0,
            ike: Ike::new(tern_ike::Settings::default()),
            input: Input::Engine(EngineTransport { udp, counters: Arc::clone(&counters) }),
            inboxes: Arc::clone(&inboxes),
            events,
            transport,
            counters: Arc::clone(&counters),
            stats: Arc::default(),
            wake: Arc::new(|| {}),
            buf: Vec::new(),
            told: false,
        };
        (inboxes, counters, std::thread::spawn(move || s.run()))
    }

    /// Two round trips through shard 0's inbox: once it answers both, it
    /// has handled every command queued before (datagrams it reads in the
    /// same turn may still be in hand: await their counters first).
    fn barrier(inboxes: &[Arc<Inbox>]) {
        for _ in 0..2 {
            let (tx, rx) = std::sync::mpsc::channel();
            inboxes[0].send(Cmd::Show(tx));
            rx.recv_timeout(Duration::from_secs(60)).expect("the shard answers");
        }
    }

    /// A parked shard is woken by a command and by the workers' doorbell;
    /// it reads the engine's queue itself, keeps what it owns and hands
    /// the rest to the owner's inbox.
    #[test]
    fn a_shard_reads_the_queue_itself_and_hands_over_the_rest() {
        let sh = shared();
        let (inboxes, counters, t) = start(&sh);
        barrier(&inboxes);
        let at = |s: &str| -> SocketAddr { s.parse().expect("address") };
        for spi in [2u64, 3, 5] {
            let d = IkeDatagram {
                local: at("10.0.0.1:500"),
                remote: at("10.0.0.2:500"),
                ifindex: 0,
                message: message(spi),
            };
            assert!(sh.ike_rx.push(d).is_ok());
        }
        // A runt: counted, never handed to an engine.
        let runt =
            IkeDatagram { local: at("10.0.0.1:500"), remote: at("10.0.0.2:500"), ifindex: 0, message: vec![1; 5] };
        assert!(sh.ike_rx.push(runt).is_ok());
        sh.ike_bell.ring();
        // Until the shard has read all four (a barrier alone can be
        // answered twice in one turn, before that turn reads the queue).
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while counters.received.load(Ordering::Relaxed) + counters.runts.load(Ordering::Relaxed) < 4
            && std::time::Instant::now() < until
        {
            std::thread::yield_now();
        }
        barrier(&inboxes);
        assert_eq!(counters.received.load(Ordering::Relaxed), 3);
        assert_eq!(counters.runts.load(Ordering::Relaxed), 1);
        assert_eq!(counters.forwarded.load(Ordering::Relaxed), 2, "SPIs 3 and 5 are shard 1's");
        let mut handed = Vec::new();
        while let Some(c) = inboxes[1].pop() {
            match c {
                Cmd::Datagram(_, remote, data) => handed.push((remote, data)),
                _ => panic!("only datagrams go to shard 1"),
            }
        }
        assert_eq!(handed, vec![(at("10.0.0.2:500"), message(3)), (at("10.0.0.2:500"), message(5))]);
        assert!(sh.ike_rx.is_empty());
        inboxes[0].send(Cmd::Stop);
        t.join().expect("the shard stops");
    }

    #[test]
    fn a_new_exchange_goes_by_its_source_an_sa_by_its_spi() {
        let init = message(0);
        let a: SocketAddr = "10.0.0.2:500".parse().expect("address");
        assert_eq!(route(&init, a, 4), route(&init, a, 4), "the same source, the same shard");
        let spread: std::collections::HashSet<u32> =
            (0..64u16).map(|p| route(&init, SocketAddr::new(a.ip(), 1000 + p), 4)).collect();
        assert_eq!(spread.len(), 4, "sources spread over the shards");
        assert_eq!(route(&message(6), a, 4), 2);
        assert_eq!(route(&message(6), a, 1), 0);
    }

    /// A command to a shard parked in poll(2) (Linux mode) rings its
    /// eventfd.
    #[test]
    fn an_eventfd_waker_makes_the_fd_readable() {
        let fd = Arc::new(rustix::event::eventfd(0, rustix::event::EventfdFlags::NONBLOCK).expect("eventfd"));
        let inbox = Inbox::new(Waker::EventFd(Arc::clone(&fd)));
        let mut b = [0u8; 8];
        assert!(rustix::io::read(&*fd, &mut b).is_err(), "nothing yet");
        inbox.send(Cmd::Stop);
        inbox.send(Cmd::Stop);
        assert_eq!(rustix::io::read(&*fd, &mut b), Ok(8));
        assert_eq!(u64::from_ne_bytes(b), 2, "one count per command");
        assert!(matches!(inbox.pop(), Some(Cmd::Stop)));
    }
}
