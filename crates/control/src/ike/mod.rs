//! The IKE service: tern's IKEv2 (`tern_ike`, sans-IO) run in threads of
//! the control side, its child SAs installed in the ESP data plane.
//!
//! - **Threads.** `[ike_service] threads` engines (`tern_ike::Ike`, one
//!   per thread, shard `i` of `n`: the SPIs an engine picks are `i` mod
//!   `n`), each reading the datagrams itself and taking commands from an
//!   inbox ([`shard`]). A datagram goes to the shard `Ike::shard_of`
//!   names, a new IKE_SA_INIT to one chosen by a hash of its source (the
//!   shard that read it hands it over when it is another's). A peer with
//!   `start` is initiated by one shard (by a hash of its name), the
//!   others know it as a responder.
//! - **Datagrams** ([`io`]): in Linux mode kernel UDP sockets on 500 and
//!   4500 of each `[[ike]]` local address (the non-ESP marker stripped
//!   and added on 4500; ESP there is the engine's, the kernel's copy is
//!   dropped and counted; NAT keep-alives ignored); in standalone mode
//!   the engine's queues (`crate::ike_local::EngineUdp`).
//! - **SAs.** A shard's `InstallChild` / `DeleteChild` reach the control
//!   thread through a channel drained on its loop ([`poll`]): every child
//!   SA drained in one round is installed with ONE `Ipsec::install` (one
//!   publication), both directions, with SA ids from
//!   [`crate::config::IKE_SA_ID_BASE`] up; the peer's tunnel is then
//!   bound (sa_out the new outbound SA, sa_in the current ones and the new
//!   inbound) in one interface-table publication. The engine logs each IKE
//!   SA up and down at info (peer, id, proposal, identity, reason); what
//!   was installed or removed for it, and the id unique across shards, is
//!   at debug here (a log line is a write(2) to stderr, and three a tunnel
//!   cost more than a tenth of a setup at a thousand tunnels a second;
//!   nor does a batch of installs log at info). A delete unbinds, then
//!   removes. When the peer rekeyed (`ChildSa::replaces`), sa_out stays
//!   on the old SA (the peer takes the new inbound SA only once it has
//!   our answer; a packet on it before that is lost) until the peer
//!   deletes it, sends on the new SA, or [`HOLD_OUT_MAX`] passes,
//!   whichever comes first, then moves to the new one. Soft and hard lifetime events
//!   from `Ipsec::subscribe` go back to the owning shard
//!   (`Ike::child_expired`): a soft one rekeys.
//! - **Remote access.** A child SA of a multipoint tunnel (`remote =
//!   "any"`) is a client: its virtual IP (or its one-address remote
//!   selector) -> (outbound SA, outer address) goes into the tunnel's
//!   client map (`Shared::ipsec_clients`, one publication per drained
//!   batch, copying only the shards it changed), its inbound SA as that address's, and a
//!   host route (vip/32 or /128, source `ike`, connected to the tunnel)
//!   into the FIB. A rekey moves the client to the new SAs (the route
//!   stays); deleting the child that holds the client removes it and the
//!   route.
//! - **Configuration.** Each round compares the running plan's
//!   [`crate::config::IkePlan`] with the one applied; a change (start,
//!   reload) is `Ike::set_peers` on every shard, which tears down the SAs
//!   of peers that went or changed and initiates new ones. The thread
//!   count or the set of local addresses changing restarts the service;
//!   other `[ike_service]` keys are `Ike::set_settings` on every shard.

mod children;
pub mod io;
pub mod paging;
pub mod shard;

use crate::config::{IKE_SA_ID_BASE, IfacePlanKind, IkePlan};
use crate::router::Router;
use io::{IoCounters, Transport};
use shard::{Cmd, Event, Inbox, Input, Shard, Waker};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tern_ike::{ChildSa, IkeSaInfo, IkeStats, Output};
use tern_ipsec::{Lifetime, SaConfig, SaEvent, SaEventKind, UdpEncap};

/// How long a peer's rekey may keep tern encrypting on the old child SA
/// when the peer neither deletes it nor sends on the new one: the peer
/// installed the new inbound SA when our answer reached it, within a
/// round trip (its retransmissions of the request, answered from the
/// cache, take longer only when our answer is lost; then the old SA
/// still works). A peer that never deletes the old SA (a lost delete, a
/// peer that waits for our delete) would otherwise keep us on it until
/// its hard lifetime.
pub const HOLD_OUT_MAX: Duration = Duration::from_secs(3);

/// A new child SA from a rekey by the peer, its outbound SA held back.
#[derive(Clone, Copy, Debug)]
struct Held {
    new: u64,
    out: u32,
    since: std::time::Instant,
}

/// A child SA the data plane holds for IKE: one per tunnel, a million of
/// them on a remote-access responder, so kept small (40 bytes): the names
/// are shared by every child of the peer, and the outbound SA id is the
/// inbound one's successor (ids are handed out in pairs).
#[derive(Clone, Debug)]
struct Child {
    names: Arc<Names>,
    /// The inbound SA's id (even); the outbound SA's is `in_id + 1`.
    in_id: u32,
    in_spi: u32,
    /// A remote-access client: (multipoint tunnel, virtual IP).
    vip: Option<(u16, IpAddr)>,
}

impl Child {
    fn out_id(&self) -> u32 {
        self.in_id + 1
    }
}

/// The peer and tunnel a child SA belongs to, one allocation per peer
/// (not two Strings per child).
#[derive(Debug)]
struct Names {
    peer: Box<str>,
    tunnel: Option<Box<str>>,
}

struct Running {
    shards: Arc<Vec<Arc<Inbox>>>,
    stats: Vec<Arc<Mutex<IkeStats>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    events: Receiver<Event>,
    threads_n: u32,
    locals: Vec<IpAddr>,
    linux: bool,
    /// Where the datagrams a shard held back behind a child SA go once the
    /// SA is installed.
    transport: Arc<dyn Transport>,
}

impl Running {
    fn stop(self) {
        drop(self);
    }
}

/// The threads end with the service, also when the router is dropped
/// without `shutdown`.
impl Drop for Running {
    fn drop(&mut self) {
        for s in self.shards.iter() {
            s.send(Cmd::Stop);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// What /metrics shows of IKE.
#[derive(Clone, Debug, Default)]
pub struct IkeMetrics {
    pub running: bool,
    /// Every shard's counters summed.
    pub stats: IkeStats,
    pub esp_dropped: u64,
    pub keepalives: u64,
    pub send_failed: u64,
    pub install_failed: u64,
    /// The pubkey peers' chain caches summed (`paging`).
    pub chain_cache: tern_ike::auth::ChainCacheStats,
}

/// The service (see the module). Idle without `[[ike]]`.
#[derive(Default)]
pub struct IkeService {
    running: Option<Running>,
    /// The plan last given to the shards.
    applied: Option<IkePlan>,
    /// (shard, child id) -> the SAs installed for it; a pair's inbound SA
    /// id (even; the outbound one is the next) -> (shard, child id); the
    /// children per peer.
    children: children::Children,
    /// The children's names by peer (see [`Names`]), and the size at
    /// which those no child holds are next forgotten.
    names: HashMap<Box<str>, Arc<Names>>,
    names_prune_at: usize,
    /// Rekeys by the peer: (shard, old child id) -> the new child, whose
    /// outbound SA takes over encrypting when the old one goes, the first
    /// packet arrives on the new inbound SA, or [`HOLD_OUT_MAX`] passes.
    held_out: HashMap<(u32, u64), Held>,
    next_id: u32,
    sa_events: Option<Receiver<SaEvent>>,
    counters: Arc<IoCounters>,
    install_failed: u64,
    /// The multipoint tunnels' clients as last published.
    /// Made at the first client: `poll` moves the service out of the
    /// router and back each round, leaving a default in its place, and an
    /// empty map is 2,048 shard allocations (they, made and freed every
    /// round, were half of the control thread's CPU while setting up
    /// tunnels).
    clients: Option<tern_nodes::state::IpsecClients>,
    /// Inbound SA id -> the new source of its authenticated ESP last
    /// handed to its shard (each worker reports a move once).
    moved: HashMap<u32, std::net::SocketAddr>,
}

fn hash_of(x: impl Hash) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    x.hash(&mut h);
    h.finish()
}

/// The shard that initiates `peer`.
fn owner(peer: &str, n: u32) -> u32 {
    (hash_of(peer) % u64::from(n.max(1))) as u32
}

/// One round on the control thread: the configuration applied, the
/// shards' SAs installed or removed, lifetime events handed back.
/// Returns whether it did something.
pub fn poll(router: &mut Router) -> bool {
    let mut svc = std::mem::take(router.ike_service_mut());
    let did = svc.round(router);
    *router.ike_service_mut() = svc;
    did
}

impl IkeService {
    fn round(&mut self, router: &mut Router) -> bool {
        let mut did = self.reconcile(router);
        did |= self.drain(router);
        did |= self.expiries();
        let now = std::time::Instant::now();
        did |= self.release_held(router, now);
        // The client maps' spare copy goes a second after their last change.
        if let Some(c) = &mut self.clients {
            c.settle(now);
        }
        did
    }

    /// The running plan's `[[ike]]` to the shards.
    fn reconcile(&mut self, router: &mut Router) -> bool {
        let plan = &router.plan().ike;
        if self.applied.as_ref() == Some(plan) {
            return false;
        }
        let plan = plan.clone();
        let linux = router.plan().config.linux.linux_mode();
        let mut locals: Vec<IpAddr> = plan.peers.iter().map(|p| p.peer.local).collect();
        locals.sort();
        locals.dedup();
        let restart = self
            .running
            .as_ref()
            .is_some_and(|r| r.threads_n != plan.service.threads || r.locals != locals || r.linux != linux);
        if restart {
            log::info!("ike: threads or local addresses changed: restarting the IKE service");
            self.stop(router);
        }
        if self.running.is_none() && !plan.peers.is_empty() {
            match self.start(router, &plan, locals, linux) {
                Ok(r) => self.running = Some(r),
                Err(e) => {
                    // Applied all the same: retried on the next change.
                    log::error!("ike: {e}");
                    self.applied = Some(plan);
                    return true;
                }
            }
        }
        if let Some(r) = &self.running {
            let n = r.threads_n;
            // Limits and DH reuse changed by a reload reach the running
            // engines (a new thread count restarted them above).
            if !restart && self.applied.as_ref().is_some_and(|old| old.service != plan.service) {
                for (i, s) in r.shards.iter().enumerate() {
                    s.send(Cmd::SetSettings(plan.service.settings(i as u32)));
                }
                log::info!("ike: [ike_service] limits applied to {n} thread(s)");
            }
            for (i, s) in r.shards.iter().enumerate() {
                let peers = plan
                    .peers
                    .iter()
                    .map(|p| {
                        let mut c = p.peer.clone();
                        c.start &= owner(&c.name, n) == i as u32;
                        c
                    })
                    .collect();
                s.send(Cmd::SetPeers(peers));
            }
            log::info!("ike: {} peer(s) configured on {n} thread(s)", plan.peers.len());
        }
        // The first plan without peers leaves the engine's switch alone
        // (off unless someone who drives `EngineUdp` directly set it).
        if !linux && (self.applied.is_some() || !plan.peers.is_empty()) {
            router.set_ike_local(!plan.peers.is_empty());
        }
        if let Some(old) = &self.applied {
            paging::flush_replaced_chains(old, &plan);
        }
        self.applied = Some(plan);
        true
    }

    fn start(
        &mut self,
        router: &mut Router,
        plan: &IkePlan,
        locals: Vec<IpAddr>,
        linux: bool,
    ) -> Result<Running, String> {
        let n = plan.service.threads.max(1);
        let (ev_tx, ev_rx) = mpsc::channel();
        // Where the shards read and what wakes them: the kernel's sockets
        // and an eventfd each, or the engine's queue and its doorbell.
        // ESP in UDP the kernel reassembled goes to the engine.
        let esp = Some(Arc::clone(router.kernel_esp()));
        let kernel =
            if linux { Some(Arc::new(io::KernelUdp::bind(&locals, Arc::clone(&self.counters), esp)?)) } else { None };
        let engine = io::EngineTransport { udp: router.engine_udp(), counters: Arc::clone(&self.counters) };
        let mut events_fds = Vec::new();
        let mut inboxes = Vec::new();
        for _ in 0..n {
            let waker = if linux {
                let fd = rustix::event::eventfd(
                    0,
                    rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
                )
                .map_err(|e| format!("IKE: eventfd: {e}"))?;
                let fd = Arc::new(fd);
                events_fds.push(Arc::clone(&fd));
                Waker::EventFd(fd)
            } else {
                Waker::Bell(Arc::clone(engine.udp.bell()))
            };
            inboxes.push(Arc::new(Inbox::new(waker)));
        }
        let inboxes = Arc::new(inboxes);
        let transport: Arc<dyn Transport> = match &kernel {
            Some(k) => Arc::clone(k) as Arc<dyn Transport>,
            None => Arc::new(io::EngineTransport { udp: engine.udp.clone(), counters: Arc::clone(&self.counters) }),
        };
        let mut threads = Vec::new();
        let mut stats = Vec::new();
        for i in 0..n {
            let st = Arc::new(Mutex::new(IkeStats::default()));
            stats.push(Arc::clone(&st));
            let input = match &kernel {
                Some(k) => Input::Kernel { udp: Arc::clone(k), event: Arc::clone(&events_fds[i as usize]) },
                None => {
                    Input::Engine(io::EngineTransport { udp: engine.udp.clone(), counters: Arc::clone(&self.counters) })
                }
            };
            let s = Shard {
                id: i,
                ike: tern_ike::Ike::new(plan.service.settings(i)),
                input,
                inboxes: Arc::clone(&inboxes),
                events: ev_tx.clone(),
                transport: Arc::clone(&transport),
                counters: Arc::clone(&self.counters),
                stats: st,
                wake: {
                    let bell = router.bell();
                    Arc::new(move || bell.ring())
                },
                buf: Vec::new(),
                told: false,
            };
            let t = std::thread::Builder::new()
                .name(format!("ike-{i}"))
                .spawn(move || s.run())
                .map_err(|e| format!("cannot start a thread: {e}"))?;
            threads.push(t);
        }
        if self.sa_events.is_none() {
            self.sa_events = Some(router.ipsec_mut().subscribe());
        }
        if self.next_id < IKE_SA_ID_BASE {
            self.next_id = IKE_SA_ID_BASE;
        }
        let how = if linux { "kernel sockets" } else { "the engine" };
        log::info!("ike: started, {n} thread(s), UDP 500/4500 of {locals:?} through {how}");
        Ok(Running { shards: inboxes, stats, threads, events: ev_rx, threads_n: n, locals, linux, transport })
    }

    /// Stops the threads and removes every SA they installed.
    fn stop(&mut self, router: &mut Router) {
        if let Some(r) = self.running.take() {
            r.stop();
        }
        let keys: Vec<(u32, u64)> = self.children.keys().collect();
        self.delete(router, &keys);
    }

    /// At shutdown: the threads stop (the SAs go with the router).
    pub fn shutdown(&mut self) {
        if let Some(r) = self.running.take() {
            r.stop();
        }
    }

    /// The shards' outputs, in order; installs batched.
    fn drain(&mut self, router: &mut Router) -> bool {
        let Some(r) = &self.running else { return false };
        let n = r.threads_n;
        let events: Vec<Event> = r.events.try_iter().collect();
        if events.is_empty() {
            return false;
        }
        let mut installs: Vec<(u32, Box<ChildSa>)> = Vec::new();
        let mut held = Vec::new();
        for (shard, o) in events {
            match o {
                Output::InstallChild(c) => installs.push((shard, c)),
                Output::DeleteChild { peer, id, .. } => {
                    if installs.iter().any(|(s, c)| *s == shard && c.id == id) {
                        self.install(router, std::mem::take(&mut installs));
                    }
                    if !self.children.contains_key(&(shard, id)) {
                        log::debug!("ike {peer}: child SA {id} to delete was not installed");
                    }
                    self.delete(router, &[(shard, id)]);
                }
                // The engine logs each at info already (with the
                // proposal and the peer's identity); here the id unique
                // across shards, at debug: one line an IKE SA, not two.
                Output::IkeSaUp { peer, ike_sa, remote } => {
                    log::debug!(
                        "ike {peer}: IKE SA {} (shard {shard}) established with {remote}",
                        global_id(ike_sa, shard, n)
                    );
                }
                Output::IkeSaDown { peer, ike_sa, reason } => {
                    log::debug!("ike {peer}: IKE SA {} (shard {shard}) down: {reason}", global_id(ike_sa, shard, n));
                }
                // Held back by the shard behind a child SA of the same
                // drain (see `shard::Shard::flush`): sent once it is in.
                Output::Send { local, remote, data } => held.push((local, remote, data)),
            }
        }
        self.install(router, installs);
        if let Some(r) = &self.running {
            for (local, remote, data) in held {
                r.transport.send(local, remote, &data);
            }
            r.transport.flush();
        }
        true
    }

    /// Two free SA ids, `id` (even: inbound) and `id + 1` (outbound).
    fn alloc_pair(&mut self, router: &Router) -> u32 {
        loop {
            let id = self.next_id & !1;
            self.next_id = id.checked_add(2).filter(|&n| n < u32::MAX).unwrap_or(IKE_SA_ID_BASE);
            if !self.children.sa_reserved(id) && !router.ipsec().contains(id) && !router.ipsec().contains(id + 1) {
                return id;
            }
        }
    }

    /// The (shard, child id) whose SAs `sa` is one of.
    fn child_of_sa(&self, sa: u32) -> Option<(u32, u64)> {
        self.children.of_sa(sa & !1)
    }

    /// The shared names of `c`'s peer and tunnel.
    fn names(&mut self, c: &ChildSa) -> Arc<Names> {
        match self.names.get(c.peer.as_str()) {
            Some(n) if n.tunnel.as_deref() == c.tunnel.as_deref() => Arc::clone(n),
            _ => {
                // Peers whose children are all gone are forgotten (when
                // the map doubled: O(1) a new peer).
                if self.names.len() >= self.names_prune_at {
                    self.names.retain(|_, n| Arc::strong_count(n) > 1);
                    self.names_prune_at = (2 * self.names.len()).max(64);
                }
                let n = Arc::new(Names { peer: c.peer.as_str().into(), tunnel: c.tunnel.as_deref().map(Into::into) });
                self.names.insert(c.peer.as_str().into(), Arc::clone(&n));
                n
            }
        }
    }

    /// Installs child SAs: one `Ipsec::add` for all of them, then the
    /// tunnels' bindings in one publication.
    fn install(&mut self, router: &mut Router, batch: Vec<(u32, Box<ChildSa>)>) {
        if batch.is_empty() {
            return;
        }
        let mut cfgs = Vec::with_capacity(2 * batch.len());
        let mut made = Vec::with_capacity(batch.len());
        for (shard, c) in batch {
            let in_id = self.alloc_pair(router);
            let out_id = in_id + 1;
            // Reserved until installed (alloc_pair skips them).
            self.children.reserve_sa(in_id, (shard, c.id));
            let (i, o) = sa_configs(&c, in_id, out_id);
            cfgs.push(i);
            cfgs.push(o);
            made.push((shard, c, in_id, out_id));
        }
        if let Err(e) = router.ipsec_mut().install(cfgs) {
            // One bad SA (an SPI taken) must not cost the others theirs:
            // one by one, each pair in its own publication.
            log::warn!("ike: installing {} child SA(s) at once failed ({e}); one by one", made.len());
            let mut ok = Vec::new();
            for (shard, c, in_id, out_id) in made {
                let (i, o) = sa_configs(&c, in_id, out_id);
                match router.ipsec_mut().install(vec![i, o]) {
                    Ok(_) => ok.push((shard, c, in_id, out_id)),
                    Err(e) => {
                        self.install_failed += 1;
                        self.children.release_sa(in_id);
                        log::error!(
                            "ike {}: child SA {} (SPIs in {:#x}, out {:#x}) not installed: {e}",
                            c.peer,
                            c.id,
                            c.inbound.spi,
                            c.outbound.spi
                        );
                    }
                }
            }
            made = ok;
        }
        let mut bindings: Vec<(u16, u32, Vec<u32>)> = Vec::new();
        let mut clients_changed = false;
        for (shard, c, in_id, out_id) in made {
            let mut vip = None;
            if let Some(t) = &c.tunnel {
                match router.plan().iface_index(t) {
                    Some(index) if is_multipoint(router, index) => {
                        let hold = self.hold_out(shard, &c, out_id);
                        vip = self.add_client(router, &c, index, in_id, out_id, hold);
                        clients_changed = true;
                    }
                    Some(index) => {
                        let cur = bindings.iter().position(|b| b.0 == index);
                        let (_, sa_out, sa_in) = match cur {
                            Some(k) => bindings[k].clone(),
                            None => match &router.plan().ifaces[usize::from(index)].kind {
                                IfacePlanKind::Ipsec { sa_out, sa_in, .. } => (index, *sa_out, sa_in.clone()),
                                _ => (index, 0, Vec::new()),
                            },
                        };
                        let mut sa_in: Vec<u32> = sa_in.into_iter().filter(|&s| s != 0).collect();
                        sa_in.push(in_id);
                        let out = match self.hold_out(shard, &c, out_id) {
                            Some(old_out) if old_out == sa_out => sa_out,
                            _ => out_id,
                        };
                        let b = (index, out, sa_in);
                        match cur {
                            Some(k) => bindings[k] = b,
                            None => bindings.push(b),
                        }
                        // The peer is where IKE last saw it (behind a NAT
                        // whose mapping changed, elsewhere than the file
                        // says): the tunnel's outer destination follows.
                        if let IfacePlanKind::Ipsec { remote, .. } = router.plan().ifaces[usize::from(index)].kind
                            && remote != c.remote
                        {
                            if router.set_ipsec_remote(index, c.remote) {
                                log::info!(
                                    "ike {}: tunnel {t}'s remote {remote} -> {} (the peer moved)",
                                    c.peer,
                                    c.remote
                                );
                            } else {
                                log::warn!(
                                    "ike {}: the peer is at {} but tunnel {t}'s remote is {remote}: its ESP will not match the tunnel",
                                    c.peer,
                                    c.remote
                                );
                            }
                        }
                    }
                    None => {
                        log::warn!("ike {}: tunnel {t} is not configured: child SA {} installed unbound", c.peer, c.id)
                    }
                }
            }
            log::debug!(
                "ike {}: child SA {} installed as SAs {in_id} (in, SPI {:#x}) and {out_id} (out, SPI {:#x}){}",
                c.peer,
                c.id,
                c.inbound.spi,
                c.outbound.spi,
                c.tunnel.as_deref().map(|t| format!(" on {t}")).unwrap_or_default()
            );
            let names = self.names(&c);
            self.children.insert((shard, c.id), Child { names, in_id, in_spi: c.inbound.spi, vip });
        }
        if !bindings.is_empty() {
            router.set_ipsec_bindings(bindings);
        }
        if clients_changed {
            router.set_ipsec_clients(self.clients().clone());
        }
    }

    /// The clients of the multipoint tunnels (made at the first use).
    fn clients(&mut self) -> &mut tern_nodes::state::IpsecClients {
        self.clients.get_or_insert_with(Default::default)
    }

    /// A rekey by the peer whose old child SA is still installed: records
    /// that `out_id` takes over when the old one goes; the old outbound SA
    /// (what stays in use until then).
    fn hold_out(&mut self, shard: u32, c: &ChildSa, out_id: u32) -> Option<u32> {
        let old = c.replaces?;
        let old_out = self.children.get(&(shard, old))?.out_id();
        self.held_out.insert((shard, old), Held { new: c.id, out: out_id, since: std::time::Instant::now() });
        Some(old_out)
    }

    /// Held outbound SAs (see [`Held`]) switched to the new one when the
    /// peer sends on its new inbound SA (so it has our answer and decrypts
    /// the new SA) or after [`HOLD_OUT_MAX`], whichever comes first: a
    /// peer that never deletes the old child no longer keeps us on it.
    /// Whether something changed.
    fn release_held(&mut self, router: &mut Router, now: std::time::Instant) -> bool {
        if self.held_out.is_empty() {
            return false;
        }
        let used = |new: &Child| router.ipsec().info(new.in_id).is_some_and(|i| i.counters.packets > 0);
        let due: Vec<((u32, u64), bool)> = self
            .held_out
            .iter()
            .filter_map(|(&(shard, old), h)| {
                let used = self.children.get(&(shard, h.new)).is_some_and(used);
                (used || now.saturating_duration_since(h.since) >= HOLD_OUT_MAX).then_some(((shard, old), used))
            })
            .collect();
        let mut bindings: Vec<(u16, u32, Vec<u32>)> = Vec::new();
        let mut clients_changed = false;
        for (key, used) in &due {
            let (Some(h), Some(old)) = (self.held_out.remove(key), self.children.get(key).cloned()) else { continue };
            let why = if *used {
                "the peer sends on the new SA".to_string()
            } else {
                format!("the peer kept the old one {} s", HOLD_OUT_MAX.as_secs())
            };
            log::info!("ike {}: child SA {} takes over encrypting (SA {}): {why}", old.names.peer, h.new, h.out);
            if let Some((index, ip)) = old.vip {
                if let Some(k) = self.clients().client(index, ip).filter(|k| k.sa_out == old.out_id()).cloned() {
                    let client = tern_nodes::state::IpsecClient { sa_out: h.out, remote: k.remote };
                    self.clients().insert_client(index, ip, client);
                    clients_changed = true;
                }
                continue;
            }
            let Some(index) = old.names.tunnel.as_deref().and_then(|t| router.plan().iface_index(t)) else { continue };
            let IfacePlanKind::Ipsec { sa_out, sa_in, .. } = &router.plan().ifaces[usize::from(index)].kind else {
                continue;
            };
            if *sa_out == old.out_id() {
                bindings.push((index, h.out, sa_in.clone()));
            }
        }
        if !bindings.is_empty() {
            router.set_ipsec_bindings(bindings);
        }
        if clients_changed {
            router.set_ipsec_clients(self.clients().clone());
        }
        !due.is_empty()
    }

    /// A remote-access client on multipoint tunnel `index`: its virtual
    /// IP (or its one-address remote selector) to the new SAs, and its
    /// host route unless a rekey's earlier SAs hold it already.
    fn add_client(
        &mut self,
        router: &mut Router,
        c: &ChildSa,
        index: u16,
        in_id: u32,
        out_id: u32,
        hold: Option<u32>,
    ) -> Option<(u16, IpAddr)> {
        let single = c.remote_ts.iter().find(|ts| ts.start == ts.end).map(|ts| ts.start);
        let Some(ip) = c.virtual_ip.or(single) else {
            log::warn!(
                "ike {}: child SA {} on multipoint tunnel {} has no virtual IP nor one-address selector: no traffic is routed to it",
                c.peer,
                c.id,
                c.tunnel.as_deref().unwrap_or_default()
            );
            return None;
        };
        self.clients().insert_sa(in_id, index, ip);
        // A rekey by the client: it keeps the old outbound SA for now.
        if hold.is_some() && self.clients().client(index, ip).is_some_and(|k| Some(k.sa_out) == hold) {
            return Some((index, ip));
        }
        let client = tern_nodes::state::IpsecClient { sa_out: out_id, remote: c.remote };
        let moved = self.clients().insert_client(index, ip, client).is_some();
        if !moved {
            let len = if ip.is_ipv4() { 32 } else { 128 };
            let target = tern_fib::RouteTarget::Connected { ifindex: index };
            if let Err(e) = router.add_route(
                tern_fib::Source::Ike,
                tern_fib::Prefix::host(ip),
                target,
                tern_fib::RouteAttrs::default(),
            ) {
                log::error!("ike {}: host route to {ip}/{len}: {}", c.peer, e.message);
            }
        }
        log::debug!(
            "ike {}: client {ip} at {} on {}{}",
            c.peer,
            c.remote,
            c.tunnel.as_deref().unwrap_or_default(),
            if moved { " (rekeyed)" } else { "" }
        );
        Some((index, ip))
    }

    /// A child SA of a remote-access client goes: its inbound SA from the
    /// map, and the client with its host route when this child held it
    /// (not when a rekey moved it on). Whether the map changed.
    fn remove_client(&mut self, router: &mut Router, c: &Child, next_out: Option<u32>) -> bool {
        let Some((index, ip)) = c.vip else { return false };
        self.clients().remove_sa(c.in_id);
        let holder = self.clients().client(index, ip).filter(|k| k.sa_out == c.out_id()).cloned();
        if let (Some(k), Some(out)) = (&holder, next_out) {
            // The peer's rekey is complete: the client moves to its SA.
            self.clients().insert_client(index, ip, tern_nodes::state::IpsecClient { sa_out: out, remote: k.remote });
            return true;
        }
        if holder.is_some() {
            self.clients().remove_client(index, ip);
            let len = if ip.is_ipv4() { 32 } else { 128 };
            if let Err(e) = router.del_route(tern_fib::Source::Ike, tern_fib::Prefix::host(ip)) {
                log::warn!("ike {}: host route to {ip}/{len}: {}", c.names.peer, e.message);
            }
            log::debug!("ike {}: client {ip} gone", c.names.peer);
        }
        true
    }

    /// Unbinds and removes child SAs (one publication each).
    fn delete(&mut self, router: &mut Router, keys: &[(u32, u64)]) {
        let gone: Vec<((u32, u64), Child)> =
            keys.iter().filter_map(|k| self.children.remove(k).map(|c| (*k, c))).collect();
        if gone.is_empty() {
            return;
        }
        let mut bindings: Vec<(u16, u32, Vec<u32>)> = Vec::new();
        let mut clients_changed = false;
        for (key, c) in &gone {
            // The old child of a rekey by the peer: its successor's
            // outbound SA takes over. A successor deleted itself (a lost
            // simultaneous rekey) takes over nothing.
            let next_out = self.held_out.remove(key).map(|h| h.out);
            self.held_out.retain(|(shard, _), h| !(*shard == key.0 && h.new == key.1));
            if c.vip.is_some() {
                clients_changed |= self.remove_client(router, c, next_out);
                continue;
            }
            let Some(index) = c.names.tunnel.as_deref().and_then(|t| router.plan().iface_index(t)) else { continue };
            let cur = bindings.iter().position(|b| b.0 == index);
            let (sa_out, sa_in) = match cur {
                Some(k) => (bindings[k].1, bindings[k].2.clone()),
                None => match &router.plan().ifaces[usize::from(index)].kind {
                    IfacePlanKind::Ipsec { sa_out, sa_in, .. } => (*sa_out, sa_in.clone()),
                    _ => continue,
                },
            };
            let sa_out = if sa_out == c.out_id() { next_out.unwrap_or(0) } else { sa_out };
            let sa_in: Vec<u32> = sa_in.into_iter().filter(|&s| s != c.in_id).collect();
            match cur {
                Some(k) => bindings[k] = (index, sa_out, sa_in),
                None => bindings.push((index, sa_out, sa_in)),
            }
        }
        if !bindings.is_empty() {
            router.set_ipsec_bindings(bindings);
        }
        if clients_changed {
            router.set_ipsec_clients(self.clients().clone());
        }
        let ids: Vec<u32> = gone
            .iter()
            .flat_map(|(_, c)| [c.in_id, c.out_id()])
            .filter(|&id| router.ipsec().info(id).is_some())
            .collect();
        for (_, c) in &gone {
            self.moved.remove(&c.in_id);
            self.children.release_sa(c.in_id);
            log::debug!("ike {}: child SA removed (SAs {} and {})", c.names.peer, c.in_id, c.out_id());
        }
        if !ids.is_empty()
            && let Err(e) = router.ipsec_mut().remove(&ids, |_| None)
        {
            log::error!("ike: removing SAs {ids:?}: {e}");
        }
    }

    /// The data plane saw authenticated ESP in UDP on inbound SA `sa` from
    /// `remote`, not where its tunnel or client has the peer
    /// (`Event::EspMoved`): handed to the shard of its IKE SA, which
    /// follows a peer behind a NAT (`tern_ike::Ike::esp_moved`).
    pub fn esp_moved(&mut self, sa: u32, remote: std::net::SocketAddr) {
        let Some(r) = &self.running else { return };
        let Some((shard, id)) = self.children.of_sa(sa) else { return };
        let Some(c) = self.children.get(&(shard, id)).filter(|c| c.in_id == sa) else { return };
        if self.moved.get(&sa) == Some(&remote) {
            return;
        }
        self.moved.insert(sa, remote);
        log::info!(
            "ike {}: authenticated ESP on child SA {id} (SA {sa}) from {remote}: a new NAT mapping?",
            c.names.peer
        );
        if let Some(s) = r.shards.get(shard as usize) {
            s.send(Cmd::EspMoved { inbound_spi: c.in_spi, remote });
        }
    }

    /// Lifetime events of IKE's SAs back to their shards.
    fn expiries(&mut self) -> bool {
        let (Some(rx), Some(r)) = (&self.sa_events, &self.running) else { return false };
        let mut did = false;
        for e in rx.try_iter() {
            let Some((shard, id)) = self.child_of_sa(e.id) else { continue };
            let Some(c) = self.children.get(&(shard, id)) else { continue };
            let hard = match e.kind {
                SaEventKind::SoftExpired(_) => false,
                SaEventKind::HardExpired(_) | SaEventKind::SeqExhausted => true,
            };
            if let Some(s) = r.shards.get(shard as usize) {
                s.send(Cmd::ChildExpired { inbound_spi: c.in_spi, hard });
                did = true;
            }
        }
        did
    }

    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Every shard's IKE SAs (ids made unique across shards), by id.
    pub fn sas(&self) -> Vec<IkeSaInfo> {
        let Some(r) = &self.running else { return Vec::new() };
        let mut waits = Vec::new();
        for s in r.shards.iter() {
            let (tx, rx) = mpsc::channel();
            s.send(Cmd::Show(tx));
            waits.push(rx);
        }
        let mut out = Vec::new();
        for (shard, rx) in waits.into_iter().enumerate() {
            if let Ok(list) = rx.recv_timeout(Duration::from_secs(2)) {
                out.extend(list.into_iter().map(|mut i| {
                    i.id = global_id(i.id, shard as u32, r.threads_n);
                    i
                }));
            }
        }
        out.sort_by_key(|i| i.id);
        out
    }

    /// Initiates an IKE SA with `peer` (on the shard that owns it).
    pub fn initiate(&self, peer: &str) -> Result<u64, String> {
        let r = self.running.as_ref().ok_or("IKE is not running (no [[ike]] peers)")?;
        let shard = owner(peer, r.threads_n);
        let (tx, rx) = mpsc::channel();
        r.shards.get(shard as usize).ok_or("no such IKE thread")?.send(Cmd::Initiate(peer.to_string(), tx));
        let id = rx.recv_timeout(Duration::from_secs(5)).map_err(|_| "the IKE thread did not answer")??;
        Ok(global_id(id, shard, r.threads_n))
    }

    /// Deletes `peer`'s IKE SAs, or the one with (global) id `id`.
    pub fn terminate(&self, peer: &str, id: Option<u64>) -> Result<usize, String> {
        let r = self.running.as_ref().ok_or("IKE is not running (no [[ike]] peers)")?;
        let n = u64::from(r.threads_n);
        let mut total = 0;
        let mut last_err = None;
        for (i, s) in r.shards.iter().enumerate() {
            let local = match id {
                Some(g) if g % n != i as u64 => continue,
                Some(g) => Some(g / n),
                None => None,
            };
            let (tx, rx) = mpsc::channel();
            s.send(Cmd::Terminate(peer.to_string(), local, tx));
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Ok(k)) => total += k,
                Ok(Err(e)) => last_err = Some(e),
                Err(_) => last_err = Some("the IKE thread did not answer".into()),
            }
        }
        if total == 0 {
            return Err(last_err.unwrap_or_else(|| format!("peer {peer:?} has no IKE SA")));
        }
        Ok(total)
    }

    /// The counters for /metrics.
    pub fn metrics(&self) -> IkeMetrics {
        let mut m = IkeMetrics {
            running: self.running.is_some(),
            esp_dropped: self.counters.esp_dropped.load(Ordering::Relaxed),
            keepalives: self.counters.keepalives.load(Ordering::Relaxed),
            send_failed: self.counters.send_failed.load(Ordering::Relaxed),
            install_failed: self.install_failed,
            chain_cache: self.chain_cache_stats(),
            ..IkeMetrics::default()
        };
        if let Some(r) = &self.running {
            for st in &r.stats {
                if let Ok(s) = st.lock() {
                    add_stats(&mut m.stats, &s);
                }
            }
        }
        m
    }

    /// The data plane's (inbound, outbound) SA ids of `peer`'s child SA
    /// with inbound SPI `in_spi`.
    pub fn sa_ids(&self, peer: &str, in_spi: u32) -> Option<(u32, u32)> {
        self.children.values().find(|c| c.in_spi == in_spi && *c.names.peer == *peer).map(|c| (c.in_id, c.out_id()))
    }

    /// The virtual IP of `peer`'s child SA with inbound SPI `in_spi`, when
    /// it is a remote-access client's.
    pub fn virtual_ip(&self, peer: &str, in_spi: u32) -> Option<IpAddr> {
        self.children.values().find(|c| c.in_spi == in_spi && *c.names.peer == *peer).and_then(|c| c.vip).map(|v| v.1)
    }

    /// Every installed child SA by (peer, inbound SPI): (inbound SA id,
    /// outbound SA id, virtual IP). One walk, for `ike_sa_show` (a
    /// [`IkeService::sa_ids`] per child was a walk per child).
    pub fn child_index(&self) -> HashMap<(&str, u32), (u32, u32, Option<IpAddr>)> {
        self.children
            .values()
            .map(|c| ((&*c.names.peer, c.in_spi), (c.in_id, c.out_id(), c.vip.map(|v| v.1))))
            .collect()
    }

    /// The child SAs installed: (peer, tunnel, inbound SA id, outbound SA id).
    pub fn children(&self) -> Vec<(String, Option<String>, u32, u32)> {
        let mut v: Vec<_> = self
            .children
            .values()
            .map(|c| (c.names.peer.to_string(), c.names.tunnel.as_deref().map(String::from), c.in_id, c.out_id()))
            .collect();
        v.sort_by_key(|c| c.2);
        v
    }
}

/// Whether interface `index` is a multipoint ipsec tunnel (remote access).
fn is_multipoint(router: &Router, index: u16) -> bool {
    matches!(router.plan().ifaces.get(usize::from(index)).map(|p| &p.kind),
        Some(IfacePlanKind::Ipsec { remote, .. }) if remote.is_unspecified())
}

/// An IKE SA id unique across shards (the engines count from 1 each).
fn global_id(id: u64, shard: u32, n: u32) -> u64 {
    id * u64::from(n.max(1)) + u64::from(shard)
}

fn add_stats(to: &mut IkeStats, s: &IkeStats) {
    to.ike_sas += s.ike_sas;
    to.half_open += s.half_open;
    to.child_sas += s.child_sas;
    to.setups += s.setups;
    to.child_setups += s.child_setups;
    to.rekeys_ike += s.rekeys_ike;
    to.rekeys_child += s.rekeys_child;
    to.retransmits += s.retransmits;
    to.cookies_sent += s.cookies_sent;
    to.dpd_sent += s.dpd_sent;
    to.dropped_invalid += s.dropped_invalid;
    to.nat_moves += s.nat_moves;
    to.esp_moves += s.esp_moves;
    for (reason, n) in &s.failures {
        match to.failures.iter_mut().find(|(r, _)| r == reason) {
            Some(f) => f.1 += n,
            None => to.failures.push((reason, *n)),
        }
    }
}

/// A child SA's two directions as the ESP data plane takes them.
fn sa_configs(c: &ChildSa, in_id: u32, out_id: u32) -> (SaConfig, SaConfig) {
    let life = Lifetime { packets: None, bytes: None, secs: None };
    let soft = Lifetime { secs: c.soft_secs, ..life };
    let hard = Lifetime { secs: c.hard_secs, ..life };
    let encap = c.udp_encap.map(|(local, remote)| UdpEncap { src_port: local, dst_port: remote });
    let one = |id: u32, k: &tern_ike::EspKeys| SaConfig {
        id,
        spi: k.spi,
        cipher: k.cipher,
        integ: k.integ,
        key: k.key.clone(),
        integ_key: k.integ_key.clone(),
        esn: c.esn,
        replay_window: crate::config::DEFAULT_REPLAY_WINDOW,
        udp_encap: encap,
        soft,
        hard,
    };
    (one(in_id, &c.inbound), one(out_id, &c.outbound))
}

/// Reload: an IKE-keyed tunnel keeps the SAs IKE bound to it (the file
/// has none for it); the IKE service changes them when the peer's SAs
/// change. Its remote too, when IKE moved it (a NAT's new mapping) and
/// the peer's configuration is unchanged (so are its SAs).
pub(crate) fn keep_bindings(old: &crate::config::Plan, new: &mut crate::config::Plan) {
    for (i, n) in new.ifaces.iter_mut().enumerate() {
        let (Some(np), Some(op)) = (new.ike.peer_of_tunnel(&n.name), old.ike.peer_of_tunnel(&n.name)) else {
            continue;
        };
        let same_peer = np == op;
        let Some(o) = old.ifaces.get(i).filter(|o| o.name == n.name) else { continue };
        if let (
            IfacePlanKind::Ipsec { local: l1, remote: r1, sa_out: o1, sa_in: i1, .. },
            IfacePlanKind::Ipsec { local: l2, remote: r2, sa_out: o2, sa_in: i2, .. },
        ) = (&o.kind, &mut n.kind)
            && l1 == l2
            && (r1 == r2 || (same_peer && !r2.is_unspecified() && r1.is_ipv4() == r2.is_ipv4()))
        {
            *r2 = *r1;
            *o2 = *o1;
            *i2 = i1.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_fib::{Prefix, Source};
    use tern_ipsec::{Cipher, Integ, Key};

    const ROUTER: &str = r#"
[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["192.0.2.1/24"]

[[tunnel]]
name = "ipsec0"
type = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.7"
addresses = ["172.16.1.1/30"]

[[tunnel]]
name = "ra0"
type = "ipsec"
local = "192.0.2.1"
remote = "any"
addresses = ["10.3.0.1/24"]

[[route]]
prefix = "10.3.0.7/32"
interface = "ra0"

[[ike]]
name = "site"
local = "192.0.2.1"
remote = "192.0.2.7"
psk = "0123456789abcdef"
tunnel = "ipsec0"

[[ike]]
name = "ra"
local = "192.0.2.1"
remote = "any"
psk = "0123456789abcdef"
pool = "10.3.0.5-10.3.0.9"
tunnel = "ra0"
"#;

    fn keys(spi: u32) -> tern_ike::EspKeys {
        tern_ike::EspKeys {
            spi,
            cipher: Cipher::Aes128Gcm,
            integ: Integ::None,
            key: Key::new(vec![spi as u8; 20]),
            integ_key: Key::new(Vec::new()),
        }
    }

    fn child(peer: &str, tunnel: &str, id: u64, remote: &str, encap: Option<(u16, u16)>, vip: Option<&str>) -> ChildSa {
        ChildSa {
            peer: peer.into(),
            tunnel: Some(tunnel.into()),
            ike_sa: 1,
            id,
            inbound: keys(0x1000 + id as u32),
            outbound: keys(0x2000 + id as u32),
            esn: false,
            local: "192.0.2.1".parse().unwrap(),
            remote: remote.parse().unwrap(),
            udp_encap: encap,
            local_ts: vec![],
            remote_ts: vec![],
            virtual_ip: vip.map(|v| v.parse().unwrap()),
            soft_secs: None,
            hard_secs: None,
            replaces: None,
        }
    }

    fn router(dir: &std::path::Path) -> (Router, std::path::PathBuf) {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join("tern.toml");
        std::fs::write(&path, ROUTER).unwrap();
        let plan = crate::config::load(&path).expect("config");
        (Router::start(plan).expect("router"), path)
    }

    fn remote_of(r: &Router, name: &str) -> (IpAddr, u32) {
        let i = r.plan().iface_index(name).unwrap();
        let IfacePlanKind::Ipsec { remote, sa_out, .. } = r.plan().ifaces[usize::from(i)].kind else { panic!() };
        let live = r.shared().ifaces.load();
        let tern_nodes::state::IfKind::Ipsec(t) = &live.ifs[usize::from(i)].kind else { panic!() };
        assert_eq!((t.remote, t.sa_out), (remote, sa_out), "published as planned");
        (remote, sa_out)
    }

    /// A site-to-site peer behind a NAT moved: the child SA that follows it
    /// (the engine rekeys it, see tern-ike) takes the tunnel's outer
    /// destination along, in the same publication as its binding; a
    /// reload of the unchanged file keeps both.
    #[test]
    fn a_moved_peer_takes_its_tunnel_along() {
        let dir = std::env::temp_dir().join(format!("tern-ike-moved-{}", std::process::id()));
        let (mut r, path) = router(&dir);
        let mut svc = IkeService { next_id: IKE_SA_ID_BASE, ..IkeService::default() };
        svc.install(&mut r, vec![(0, Box::new(child("site", "ipsec0", 1, "192.0.2.7", None, None)))]);
        let (remote, first_out) = remote_of(&r, "ipsec0");
        assert_eq!(remote, "192.0.2.7".parse::<IpAddr>().unwrap());
        // The NAT's new mapping: a new address and port.
        let moved = child("site", "ipsec0", 2, "198.51.100.9", Some((4500, 24500)), None);
        svc.install(&mut r, vec![(0, Box::new(moved))]);
        let (remote, out) = remote_of(&r, "ipsec0");
        assert_eq!(remote, "198.51.100.9".parse::<IpAddr>().unwrap());
        assert_ne!(out, first_out);
        let sa = r.ipsec().info(out).expect("the new outbound SA");
        assert_eq!(sa.udp_encap.map(|u| (u.src_port, u.dst_port)), Some((4500, 24500)));
        svc.delete(&mut r, &[(0, 1)]);
        assert!(r.ipsec().info(first_out).is_none());
        assert_eq!(remote_of(&r, "ipsec0"), (remote, out));
        // The file still says 192.0.2.7: a reload neither refuses (the
        // endpoint "changed") nor takes the tunnel back there.
        crate::reload::reload(&mut r, &path).expect("reload");
        assert_eq!(remote_of(&r, "ipsec0"), (remote, out));
        r.shutdown();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Remote-access clients' host routes are the FIB's `ike` source: a
    /// configured static route to a client's address is neither replaced
    /// nor removed when the client leaves.
    #[test]
    fn client_routes_are_ikes_own() {
        let dir = std::env::temp_dir().join(format!("tern-ike-routes-{}", std::process::id()));
        let (mut r, _) = router(&dir);
        let mut svc = IkeService { next_id: IKE_SA_ID_BASE, ..IkeService::default() };
        let (five, seven) = (Prefix::host("10.3.0.5".parse().unwrap()), Prefix::host("10.3.0.7".parse().unwrap()));
        assert!(r.fib().has_route(Source::Static, seven));
        let c5 = child("ra", "ra0", 5, "192.0.2.50", None, Some("10.3.0.5"));
        let c7 = child("ra", "ra0", 7, "192.0.2.70", None, Some("10.3.0.7"));
        svc.install(&mut r, vec![(0, Box::new(c5)), (0, Box::new(c7))]);
        for p in [five, seven] {
            assert!(r.fib().has_route(Source::Ike, p), "{p}");
        }
        assert!(!r.fib().has_route(Source::Static, five));
        assert!(r.fib().has_route(Source::Static, seven), "the configured route stays beside");
        // As `tern route show` / the API list them.
        let args = crate::api::RouteListArgs { source: Some("ike".into()), ..Default::default() };
        let shown = crate::commands::route_list(&r, &args).expect("route list");
        let ike: Vec<(&str, &str)> = shown.routes.iter().map(|i| (i.prefix.as_str(), i.source.as_str())).collect();
        assert_eq!(ike, [("10.3.0.5/32", "ike"), ("10.3.0.7/32", "ike")]);
        svc.delete(&mut r, &[(0, 5), (0, 7)]);
        assert!(!r.fib().has_route(Source::Ike, five) && !r.fib().has_route(Source::Ike, seven));
        assert!(r.fib().has_route(Source::Static, seven), "a client leaving keeps the configured route");
        r.shutdown();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A child's record is small: its two SA ids are a pair (inbound
    /// even, outbound the next), found again from either; its names are
    /// shared with the peer's other children; an id taken by someone else
    /// is skipped, and the ids wrap to IKE's base at the top.
    #[test]
    fn child_records_are_compact_pairs_with_shared_names() {
        assert!(std::mem::size_of::<Child>() <= 40, "{}", std::mem::size_of::<Child>());
        let dir = std::env::temp_dir().join(format!("tern-ike-pairs-{}", std::process::id()));
        let (mut r, _) = router(&dir);
        let mut svc = IkeService { next_id: IKE_SA_ID_BASE, ..IkeService::default() };
        let c5 = child("ra", "ra0", 5, "192.0.2.50", None, Some("10.3.0.5"));
        let c7 = child("ra", "ra0", 7, "192.0.2.70", None, Some("10.3.0.7"));
        svc.install(&mut r, vec![(0, Box::new(c5)), (1, Box::new(c7))]);
        // `ike peer show`'s children per peer: counts kept as children
        // come and go, equal to a walk.
        assert_eq!(svc.child_counts().get("ra"), Some(&2));
        assert_eq!(svc.child_counts(), &svc.child_counts_by_walk());
        let (a, b) = (&svc.children[&(0, 5)], &svc.children[&(1, 7)]);
        assert_eq!((a.in_id, b.in_id), (IKE_SA_ID_BASE, IKE_SA_ID_BASE + 2));
        assert!(Arc::ptr_eq(&a.names, &b.names), "one allocation for the peer's names");
        assert_eq!((&*a.names.peer, a.names.tunnel.as_deref()), ("ra", Some("ra0")));
        for (sa, child) in [(0, (0, 5)), (1, (0, 5)), (2, (1, 7)), (3, (1, 7))] {
            assert_eq!(svc.child_of_sa(IKE_SA_ID_BASE + sa), Some(child), "SA {sa}");
            assert!(r.ipsec().contains(IKE_SA_ID_BASE + sa));
        }
        assert_eq!(svc.child_of_sa(IKE_SA_ID_BASE + 4), None);
        assert_eq!(svc.sa_ids("ra", 0x1000 + 7), Some((IKE_SA_ID_BASE + 2, IKE_SA_ID_BASE + 3)));
        // Taken ids are skipped: the next pair after 0 and 2 (in use) is 4.
        svc.next_id = IKE_SA_ID_BASE;
        assert_eq!(svc.alloc_pair(&r), IKE_SA_ID_BASE + 4);
        // The last pair, then back to the base's first free one.
        svc.next_id = u32::MAX - 1;
        assert_eq!(svc.alloc_pair(&r), u32::MAX - 1);
        assert_eq!(svc.alloc_pair(&r), IKE_SA_ID_BASE + 4);
        svc.delete(&mut r, &[(0, 5), (1, 7)]);
        assert!(svc.children.sas_reserved() == 0 && svc.children.is_empty());
        assert!(svc.child_counts().is_empty() && svc.child_counts_by_walk().is_empty());
        assert!(!r.ipsec().contains(IKE_SA_ID_BASE) && !r.ipsec().contains(IKE_SA_ID_BASE + 3));
        r.shutdown();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A rekey by the peer: child 2 replaces child 1; sa_out stays on
    /// child 1's outbound SA (the site-to-site tunnel's binding, or the
    /// remote-access client's entry).
    fn held(r: &mut Router, svc: &mut IkeService, site: bool) -> (u32, u32, u32) {
        let (peer, t, vip) = if site { ("site", "ipsec0", None) } else { ("ra", "ra0", Some("10.3.0.5")) };
        svc.install(r, vec![(0, Box::new(child(peer, t, 1, "192.0.2.7", None, vip)))]);
        let mut new = child(peer, t, 2, "192.0.2.7", None, vip);
        new.replaces = Some(1);
        svc.install(r, vec![(0, Box::new(new))]);
        let (old, new) = (svc.children[&(0, 1)].clone(), svc.children[&(0, 2)].clone());
        assert_eq!(out_of(r, site), old.out_id(), "held on the old SA");
        (old.out_id(), new.out_id(), new.in_id)
    }

    /// The SA encrypting for the site tunnel, or for client 10.3.0.5.
    fn out_of(r: &Router, site: bool) -> u32 {
        if site {
            return remote_of(r, "ipsec0").1;
        }
        let ra = r.plan().iface_index("ra0").unwrap();
        let live = r.shared().ipsec_clients.load();
        live.client(ra, "10.3.0.5".parse().unwrap()).expect("client").sa_out
    }

    /// A held outbound SA moves to the new one at the first packet on the
    /// new inbound SA (the peer has our answer), before any timer.
    #[test]
    fn a_held_outbound_sa_moves_at_the_first_packet_on_the_new_one() {
        for site in [true, false] {
            let dir = std::env::temp_dir().join(format!("tern-ike-held-pkt-{}-{site}", std::process::id()));
            let (mut r, _) = router(&dir);
            let mut svc = IkeService { next_id: IKE_SA_ID_BASE, ..IkeService::default() };
            let (old_out, new_out, new_in) = held(&mut r, &mut svc, site);
            let now = std::time::Instant::now();
            assert!(!svc.release_held(&mut r, now), "nothing on the new SA yet");
            assert_eq!(out_of(&r, site), old_out);
            // The data plane decrypts one packet on the new inbound SA.
            let sa = r.ipsec().reader().load().get(new_in).cloned().expect("new inbound SA");
            sa.count(0, &tern_ipsec::SaCounters { packets: 1, bytes: 84, ..Default::default() });
            assert!(svc.release_held(&mut r, now));
            assert_eq!(out_of(&r, site), new_out, "site {site}");
            assert!(svc.held_out.is_empty());
            assert_eq!(svc.child_counts().values().sum::<usize>(), 2);
            // The peer's delete of the old child later changes nothing.
            svc.delete(&mut r, &[(0, 1)]);
            assert_eq!(svc.child_counts(), &svc.child_counts_by_walk());
            assert_eq!(svc.child_counts().values().sum::<usize>(), 1);
            assert_eq!(out_of(&r, site), new_out);
            r.shutdown();
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// A peer that neither deletes the old child nor sends on the new one:
    /// the held outbound SA moves after HOLD_OUT_MAX.
    #[test]
    fn a_held_outbound_sa_moves_after_its_timer() {
        for site in [true, false] {
            let dir = std::env::temp_dir().join(format!("tern-ike-held-timer-{}-{site}", std::process::id()));
            let (mut r, _) = router(&dir);
            let mut svc = IkeService { next_id: IKE_SA_ID_BASE, ..IkeService::default() };
            let (old_out, new_out, _) = held(&mut r, &mut svc, site);
            let since = svc.held_out[&(0, 1)].since;
            assert!(!svc.release_held(&mut r, since + HOLD_OUT_MAX - Duration::from_millis(1)));
            assert_eq!(out_of(&r, site), old_out, "still held just before the timer");
            assert!(svc.release_held(&mut r, since + HOLD_OUT_MAX));
            assert_eq!(out_of(&r, site), new_out, "site {site}");
            // Both SAs stay installed until the peer deletes the old one.
            assert!(r.ipsec().info(old_out).is_some());
            svc.delete(&mut r, &[(0, 1)]);
            assert_eq!(out_of(&r, site), new_out);
            assert!(r.ipsec().info(old_out).is_none());
            r.shutdown();
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn ids_are_unique_across_shards_and_owners_spread() {
        let mut seen = std::collections::HashSet::new();
        for shard in 0..4 {
            for id in 1..100 {
                assert!(seen.insert(global_id(id, shard, 4)), "{id} on {shard}");
                let g = global_id(id, shard, 4);
                assert_eq!((g % 4, g / 4), (u64::from(shard), id), "terminate finds it again");
            }
        }
        assert_eq!(global_id(7, 0, 1), 7, "one thread: the engine's own ids");
        let owners: std::collections::HashSet<u32> = (0..64).map(|i| owner(&format!("peer{i}"), 4)).collect();
        assert_eq!(owners.len(), 4, "peers spread over the shards");
    }
}
