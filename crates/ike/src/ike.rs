//! The engine: every IKE SA of one shard, by SPI; cookies and half-open
//! limits; timers; the entry points the control side calls.
//!
//! Timers are a binary heap of (deadline, SPI) with lazy deletion: an SA
//! remembers the deadline the heap holds for it (`IkeSa::scheduled`) and
//! an entry that no longer matches is skipped when it comes up, so a
//! million SAs with liveness checks cost one heap entry each, never a walk.

#![deny(clippy::indexing_slicing)]

use crate::config::{AuthConfig, PeerConfig, Settings};
use crate::crypto::{CryptoError, DhPrivate};
use crate::output::Output;
use crate::peers::Peers;
use crate::proposal::DhGroup;
use crate::sa::util::Pool;
use crate::sa::{IkeSa, Start, State};
use crate::wire::{self, FLAG_INITIATOR, FLAG_RESPONSE, Header};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tern_ipsec::table::Table;
use zeroize::Zeroizing;

/// Counters for /metrics (cumulative).
#[derive(Clone, Debug, Default)]
pub struct IkeStats {
    pub ike_sas: u64,
    pub half_open: u64,
    pub child_sas: u64,
    pub setups: u64,
    pub child_setups: u64,
    pub rekeys_ike: u64,
    pub rekeys_child: u64,
    pub retransmits: u64,
    pub cookies_sent: u64,
    pub dpd_sent: u64,
    pub dropped_invalid: u64,
    /// Peers behind a NAT seen at a new address or port (RFC 7296 2.23):
    /// their child SAs were rekeyed to follow.
    pub nat_moves: u64,
    /// Of those, the ones seen in authenticated ESP in UDP before any IKE
    /// message came from the new mapping ([`Ike::esp_moved`]).
    pub esp_moves: u64,
    /// (reason, count): "no-proposal-chosen", "authentication-failed",
    /// "ts-unacceptable", "timeout", "invalid-ke", "invalid-syntax",
    /// "half-open-limit", "decrypt-failed", "peer-unknown", ...
    pub failures: Vec<(&'static str, u64)>,
}

/// An IKE SA as `tern ike sa show` lists it.
#[derive(Clone, Debug)]
pub struct IkeSaInfo {
    pub id: u64,
    pub peer: String,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub spi_i: u64,
    pub spi_r: u64,
    pub initiator: bool,
    /// "connecting", "established", "rekeying", "deleting".
    pub state: &'static str,
    /// "aes128gcm16-prfsha256-x25519".
    pub proposal: String,
    pub remote_id: String,
    pub established_secs: u64,
    /// (child id, inbound SPI, outbound SPI, proposal).
    pub children: Vec<(u64, u32, u32, String)>,
    pub nat: bool,
    /// The virtual IP handed out to (or received from) the peer.
    pub virtual_ip: Option<IpAddr>,
}

/// The cookie secret (RFC 7296 2.6), rotated; the previous one is still
/// accepted so a cookie handed out just before a rotation works.
pub(crate) struct CookieSecret {
    pub current: Zeroizing<[u8; 32]>,
    pub previous: Zeroizing<[u8; 32]>,
    pub version: u8,
    pub rotate_at: Option<Instant>,
}

/// The responder's Diffie-Hellman value in reuse (`Settings::dh_reuse`).
pub(crate) struct ReusedDh {
    key: DhPrivate,
    public: Vec<u8>,
    until: Instant,
    uses_left: u32,
}

/// How often the cookie secret changes.
pub(crate) const COOKIE_ROTATION: Duration = Duration::from_secs(120);

/// One shard's IKE engine.
pub struct Ike {
    pub(crate) settings: Settings,
    pub(crate) peers: Peers,
    /// IKE SAs by the SPI this side chose (never 0). `Table`s, not `std`
    /// maps, for this and `child_index`: 60-75 % full once large, where a
    /// million SAs had just doubled hashbrown to 2^21 buckets, 48 % full
    /// (`tests::indexes_at_a_million`); the keys are ours, random.
    pub(crate) sas: Table<u64, Box<IkeSa>>,
    /// The same SAs by id -> our SPI, in id order: `ike sa show` pages
    /// (`crate::listing`) cost the page, not the table. Kept by
    /// `put_back`, `forget` and `reindex` (about 30 bytes an SA).
    pub(crate) by_id: BTreeMap<u64, u64>,
    /// Responder half-open SAs by (peer, initiator SPI): a retransmitted
    /// IKE_SA_INIT finds its SA.
    pub(crate) init_index: HashMap<(SocketAddr, u64), u64>,
    /// Child SAs' inbound SPIs -> the IKE SA's (our) SPI: never 0, so a
    /// slot is 16 bytes.
    pub(crate) child_index: Table<u32, NonZeroU64>,
    pub(crate) timers: BinaryHeap<Reverse<(Instant, u64)>>,
    pub(crate) out: Vec<Output>,
    pub(crate) stats: IkeStats,
    pub(crate) half_open: usize,
    /// IKE SAs established and not gone (a rekey moves the count along).
    pub(crate) established: usize,
    pub(crate) half_open_per_peer: HashMap<IpAddr, u32>,
    /// Established IKE SAs by peer address (`addr_counts`).
    pub(crate) established_per_peer: crate::addr_counts::AddrCounts,
    /// The listed IKE SAs by peer and state, kept as they change
    /// (`listing::recount`), so a summary costs the peers, not the SAs.
    pub(crate) listed: HashMap<String, crate::listing::StateCounts>,
    pub(crate) cookie: CookieSecret,
    /// Virtual IP pools by peer configuration name.
    pub(crate) pools: HashMap<String, Pool>,
    pub(crate) next_id: u64,
    pub(crate) rng: SystemRandom,
    /// Peers (by name) this side asks a virtual IP of when initiating:
    /// `true` for IPv6.
    pub(crate) vip_requests: HashMap<String, bool>,
    /// Peers with `start` to initiate again at a time (their IKE SA failed
    /// or died), by name.
    pub(crate) restarts: Vec<(Instant, String)>,
    /// The latest `now` the caller gave (for `ike_sas`'s ages).
    pub(crate) clock: Option<Instant>,
    /// IKE SAs (our SPI) the peer rekeyed while our own rekey of them was
    /// under way: the peer's new SA (our SPI) and its exchange's lowest
    /// nonce (RFC 7296 2.8.2).
    pub(crate) rekey_collisions: HashMap<u64, (u64, Box<[u8]>)>,
    /// Peers this engine has initiated an IKE SA with: only the first one
    /// carries INITIAL_CONTACT (RFC 7296 2.4), or a second SA to the same
    /// peer would make it drop the first.
    pub(crate) contacted: std::collections::HashSet<String>,
    /// At most one reused DH value per group (empty unless
    /// `Settings::dh_reuse`).
    pub(crate) reused_dh: Vec<ReusedDh>,
    /// IKE SAs up and down, logged one by one up to a rate, then summed.
    pub(crate) event_log: crate::eventlog::EventLog,
}

/// A `start` peer whose IKE SA failed or died is initiated again after this.
pub(crate) const RESTART_DELAY: Duration = Duration::from_secs(10);

impl Ike {
    pub fn new(settings: Settings) -> Ike {
        let rng = SystemRandom::new();
        let mut current = Zeroizing::new([0u8; 32]);
        let _ = rng.fill(&mut current[..]);
        let mut settings = settings;
        settings.shards = settings.shards.max(1);
        settings.shard %= settings.shards;
        Ike {
            settings,
            peers: Peers::default(),
            sas: Table::new(),
            by_id: BTreeMap::new(),
            init_index: HashMap::new(),
            child_index: Table::new(),
            timers: BinaryHeap::new(),
            out: Vec::new(),
            stats: IkeStats::default(),
            half_open: 0,
            established: 0,
            half_open_per_peer: HashMap::new(),
            established_per_peer: Default::default(),
            listed: HashMap::new(),
            cookie: CookieSecret { current, previous: Zeroizing::new([0u8; 32]), version: 0, rotate_at: None },
            pools: HashMap::new(),
            next_id: 1,
            rng,
            vip_requests: HashMap::new(),
            restarts: Vec::new(),
            clock: None,
            rekey_collisions: HashMap::new(),
            contacted: std::collections::HashSet::new(),
            reused_dh: Vec::new(),
            event_log: crate::eventlog::EventLog::default(),
        }
    }

    /// Applies new limits and responder settings to the running engine
    /// (a reload): what decides on the next IKE_SA_INIT or exchange changes,
    /// established and half-open SAs stay. The shard and shard count are
    /// kept (changing those moves SPIs: the control side restarts for it).
    /// A changed Diffie-Hellman reuse wipes the value held for reuse.
    pub fn set_settings(&mut self, settings: Settings) {
        let (shard, shards) = (self.settings.shard, self.settings.shards);
        if settings.dh_reuse != self.settings.dh_reuse || settings.dh_reuse_uses != self.settings.dh_reuse_uses {
            // Dropping a value wipes it.
            self.reused_dh.clear();
        }
        self.settings = Settings { shard, shards, ..settings };
    }

    /// Replaces the peer configurations. IKE SAs of peers that went or
    /// changed are deleted (announced with `Output`s), but not for new
    /// credentials alone (a PSK, certificate, key or CAs: new IKE SAs use
    /// them, established ones stay); new peers with `start` are initiated.
    pub fn set_peers(&mut self, now: Instant, peers: Vec<PeerConfig>) {
        let new: Vec<Arc<PeerConfig>> = peers.into_iter().map(Arc::new).collect();
        // Compared once per configuration object, not once per SA (a
        // template may have a million SAs).
        // and against the new peers of its name only (the name is part
        // of the configuration compared).
        let mut kept: HashMap<*const PeerConfig, bool> = HashMap::new();
        let mut stale = Vec::new();
        {
            let mut named: HashMap<&str, Vec<&PeerConfig>> = HashMap::with_capacity(new.len());
            for p in &new {
                named.entry(p.name.as_str()).or_default().push(p);
            }
            for (spi, sa) in self.sas.iter() {
                let keep = *kept.entry(Arc::as_ptr(&sa.peer)).or_insert_with(|| {
                    named.get(sa.peer.name.as_str()).is_some_and(|v| v.iter().any(|p| same_config(p, &sa.peer)))
                });
                if !keep {
                    stale.push(*spi);
                }
            }
        }
        for spi in stale {
            self.with_sa(spi, now, |ike, sa| ike.delete_ike(sa, now, "configuration changed"));
        }
        // Pools: keep the ones whose range did not change (addresses in use
        // stay taken).
        self.pools.retain(|name, pool| new.iter().any(|p| &p.name == name && p.pool == Some((pool.first, pool.last))));
        for p in &new {
            if let Some((first, last)) = p.pool {
                self.pools.entry(p.name.clone()).or_insert_with(|| Pool::new(first, last));
            }
        }
        self.peers = Peers::new(new);
        // One walk of the SAs, not one per peer to start.
        let running: std::collections::HashSet<&str> =
            self.sas.values().filter(|sa| sa.state != State::Deleting).map(|sa| sa.peer.name.as_str()).collect();
        let starts: Vec<String> = self
            .peers
            .iter()
            .filter(|p| p.start && p.remote.is_some() && !running.contains(p.name.as_str()))
            .map(|p| p.name.clone())
            .collect();
        for name in starts {
            if let Err(e) = self.initiate(now, &name) {
                log::warn!("ike: peer {name}: cannot initiate: {e}");
            }
        }
    }

    /// A datagram received on `local` from `remote` (for port 4500 the
    /// non-ESP marker already stripped). `wall` is the wall clock
    /// (certificates' validity).
    pub fn handle(&mut self, now: Instant, wall: SystemTime, local: SocketAddr, remote: SocketAddr, data: &[u8]) {
        self.clock = Some(now);
        let header = match Header::decode(data) {
            Ok(h) => h,
            Err(e) => {
                log::debug!("ike: from {remote}: undecodable header: {e}");
                self.drop_invalid("invalid-syntax");
                return;
            }
        };
        let response = header.flags & FLAG_RESPONSE != 0;
        if header.exchange == wire::IKE_SA_INIT && !response {
            if header.spi_r != 0 {
                self.drop_invalid("invalid-syntax");
                return;
            }
            if let Some(&spi) = self.init_index.get(&(remote, header.spi_i)) {
                self.with_sa(spi, now, |ike, sa| ike.resend_response(sa, header.message_id, None));
                return;
            }
            self.responder_init(now, local, remote, data);
            return;
        }
        let from_initiator = header.flags & FLAG_INITIATOR != 0;
        let ours = if from_initiator { header.spi_r } else { header.spi_i };
        let Some(sa) = self.sas.get(&ours) else {
            log::debug!("ike: from {remote}: no IKE SA with SPI {ours:#018x}");
            self.drop_invalid("unknown-spi");
            return;
        };
        // The sender's role must be the other one, and its SPI the one we
        // know (but an IKE_SA_INIT response tells it the first time).
        let theirs_ok = if sa.initiator {
            !from_initiator
                && (header.spi_r == sa.spi_r || (sa.state == State::InitSent && header.exchange == wire::IKE_SA_INIT))
        } else {
            from_initiator && header.spi_i == sa.spi_i
        };
        if !theirs_ok {
            self.drop_invalid("unknown-spi");
            return;
        }
        self.with_sa(ours, now, |ike, sa| ike.dispatch(sa, now, wall, local, remote, header, data));
    }

    /// Starts an IKE SA (and its first child SA) with the named peer.
    pub fn initiate(&mut self, now: Instant, peer: &str) -> Result<u64, String> {
        self.clock = Some(now);
        let cfg = self.peers.by_name(peer).cloned().ok_or_else(|| format!("no peer {peer:?}"))?;
        self.initiate_sa(now, cfg)
    }

    /// As a remote-access client: ask `peer` for a virtual IP (IPv6 if
    /// `v6`) in the IKE_AUTH of the next IKE SAs initiated with it
    /// (a configuration payload, RFC 7296 3.15); `None` stops asking. The
    /// child SA then carries the address in `ChildSa::virtual_ip` and its
    /// selectors are narrowed to it.
    pub fn request_virtual_ip(&mut self, peer: &str, v6: Option<bool>) {
        match v6 {
            Some(v6) => {
                self.vip_requests.insert(peer.to_string(), v6);
            }
            None => {
                self.vip_requests.remove(peer);
            }
        }
    }

    /// Deletes the peer's IKE SAs (INFORMATIONAL delete), or one by id.
    pub fn terminate(&mut self, now: Instant, peer: &str, id: Option<u64>) -> Result<usize, String> {
        let spis: Vec<u64> = self
            .sas
            .iter()
            .filter(|(_, sa)| sa.peer.name == peer && id.is_none_or(|id| sa.id == id) && sa.state != State::Deleting)
            .map(|(spi, _)| *spi)
            .collect();
        if spis.is_empty() {
            return Err(match id {
                Some(id) => format!("peer {peer:?} has no IKE SA {id}"),
                None => format!("peer {peer:?} has no IKE SA"),
            });
        }
        for spi in &spis {
            self.with_sa(*spi, now, |ike, sa| ike.delete_ike(sa, now, "terminated"));
        }
        Ok(spis.len())
    }

    /// The data plane says a child SA (by its inbound SPI) reached its soft
    /// (rekey) or hard (delete) lifetime.
    pub fn child_expired(&mut self, now: Instant, inbound_spi: u32, hard: bool) {
        let Some(spi) = self.child_index.get(&inbound_spi).map(|s| s.get()) else {
            log::debug!("ike: child SA {inbound_spi:#010x} expired but is unknown");
            return;
        };
        self.with_sa(spi, now, |ike, sa| {
            let Some(c) = sa.children.iter().find(|c| c.spi_in == inbound_spi) else { return };
            let id = c.id;
            if hard {
                ike.enqueue(sa, now, Start::DeleteChildren(vec![id]));
            } else if !c.rekeying && !c.replaced {
                ike.enqueue(sa, now, Start::RekeyChild(id));
            }
        });
    }

    /// Runs what is due (retransmissions, rekeys, liveness checks,
    /// half-open expiry).
    pub fn poll(&mut self, now: Instant) {
        self.clock = Some(now);
        self.event_log.flush(now);
        if self.restarts.iter().any(|(t, _)| *t <= now) {
            let (due, later): (Vec<_>, Vec<_>) =
                std::mem::take(&mut self.restarts).into_iter().partition(|(t, _)| *t <= now);
            self.restarts = later;
            // One walk of the SAs for every restart due.
            let running: std::collections::HashSet<String> =
                self.sas.values().filter(|sa| sa.state != State::Deleting).map(|sa| sa.peer.name.clone()).collect();
            for (_, name) in due {
                let wanted = self.peers.by_name(&name).is_some_and(|p| p.start);
                let running = running.contains(&name);
                if wanted
                    && !running
                    && let Err(e) = self.initiate(now, &name)
                {
                    log::warn!("ike: peer {name}: cannot initiate again: {e}");
                }
            }
        }
        if self.cookie.rotate_at.is_none_or(|t| t <= now) {
            self.rotate_cookie_secret(now);
        }
        // A reused DH value is wiped when its time is up, used or not.
        self.reused_dh.retain(|d| d.until > now);
        // Each entry due now is handled once per poll; one that comes due
        // again at once waits for the next poll (no loop can spin here).
        let mut budget = self.timers.len();
        while let Some(Reverse((t, spi))) = self.timers.peek().copied() {
            if t > now || budget == 0 {
                break;
            }
            budget -= 1;
            self.timers.pop();
            let Some(sa) = self.sas.get_mut(&spi) else { continue };
            if sa.scheduled != Some(t) {
                continue; // stale entry
            }
            sa.scheduled = None;
            self.with_sa(spi, now, |ike, sa| ike.sa_timers(sa, now));
        }
        // Lazy deletion leaves stale entries behind: rebuild when they
        // dominate.
        if self.timers.len() > 4 * self.sas.len() + 1024 {
            self.timers = self.sas.iter().filter_map(|(spi, sa)| sa.scheduled.map(|t| Reverse((t, *spi)))).collect();
        }
        // A burst of setups leaves the heap's room behind once their
        // entries are gone (an idle SA has none without DPD or rekeying):
        // 24 bytes an entry, doubled by growth, at a million tunnels tens
        // of MB held for nothing. Halved when a quarter is used, so the
        // cost stays amortized.
        if self.timers.capacity() > 4 * self.timers.len() + 1024 {
            self.timers.shrink_to(2 * self.timers.len());
        }
    }

    /// When [`Ike::poll`] next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let t = self.timers.peek().map(|Reverse((t, _))| *t);
        let dh = self.reused_dh.iter().map(|d| d.until).min();
        let log = self.event_log.deadline();
        [t, self.cookie.rotate_at, self.restarts.iter().map(|(t, _)| *t).min(), dh, log].into_iter().flatten().min()
    }

    /// What to do, in order; the caller drains it after every call.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Output> {
        self.out.drain(..)
    }

    /// Index sizes (SAs, half-open by initiator SPI, children, timer
    /// entries), for tests and `tern ike` diagnostics.
    pub fn table_sizes(&self) -> (usize, usize, usize, usize) {
        (self.sas.len(), self.init_index.len(), self.child_index.len(), self.timers.len())
    }

    pub fn stats(&self) -> IkeStats {
        let mut s = self.stats.clone();
        s.ike_sas = self.established as u64;
        s.half_open = self.half_open as u64;
        s.child_sas = self.child_index.len() as u64;
        s
    }

    /// Every IKE SA, by id (`crate::listing` pages them).
    pub fn ike_sas(&self) -> Vec<IkeSaInfo> {
        self.ike_sa_page(None, usize::MAX, &crate::listing::SaFilter::default())
    }

    /// Which shard owns a datagram: by the SPI the receiving side chose
    /// (the responder SPI of a message from the original initiator, else
    /// the initiator SPI), `spi % shards`. Returns `None` for a new
    /// IKE_SA_INIT request (any shard may take it: hash the source) and
    /// for a datagram too short to say.
    pub fn shard_of(data: &[u8], shards: u32) -> Option<u32> {
        let h = Header::decode(data).ok()?;
        let shards = u64::from(shards.max(1));
        let ours = if h.flags & FLAG_INITIATOR != 0 { h.spi_r } else { h.spi_i };
        if ours == 0 {
            return None;
        }
        u32::try_from(ours % shards).ok()
    }

    // ---- internals shared by the exchanges (crate::sa::*) ----

    /// Takes the SA out of the table, runs `f`, puts it back (or removes it
    /// for good when it died) and reschedules its timer.
    pub(crate) fn with_sa(&mut self, spi: u64, now: Instant, f: impl FnOnce(&mut Ike, &mut IkeSa)) {
        let Some(mut sa) = self.sas.remove(&spi) else { return };
        f(self, &mut sa);
        self.put_back(sa, now);
    }

    pub(crate) fn put_back(&mut self, mut sa: Box<IkeSa>, now: Instant) {
        if sa.state == State::Dead {
            self.forget(&mut sa);
            return;
        }
        // A request waiting behind none: start it.
        if sa.pending.is_none() && !sa.queue.is_empty() && sa.state == State::Established {
            let next = sa.queue.remove(0);
            self.start(&mut sa, now, next);
            if sa.state == State::Dead {
                self.forget(&mut sa);
                return;
            }
        }
        // One B-tree look-up per put-back (an id changes only when a
        // rekey hands it to the new SA, which then overwrites the entry).
        let spi = sa.our_spi();
        if self.by_id.get(&sa.id) != Some(&spi) {
            self.by_id.insert(sa.id, spi);
        }
        sa.trim();
        self.recount(&mut sa);
        let d = sa.deadline();
        if d != sa.scheduled {
            if let Some(t) = d {
                self.timers.push(Reverse((t, sa.our_spi())));
            }
            sa.scheduled = d;
        }
        self.sas.insert(sa.our_spi(), sa);
    }

    /// The SA in the table under `spi` took over id `id` from another
    /// (a lost rekey collision gives the old SA its handle back): `by_id`
    /// follows, and its previous id `prev`, given up, goes.
    pub(crate) fn reindex(&mut self, spi: u64, prev: u64) {
        let Some(id) = self.sas.get(&spi).map(|sa| sa.id) else { return };
        if prev != id && self.by_id.get(&prev) == Some(&spi) {
            self.by_id.remove(&prev);
        }
        self.by_id.insert(id, spi);
    }

    /// Removes every index entry and count of a dead SA.
    fn forget(&mut self, sa: &mut IkeSa) {
        if self.by_id.get(&sa.id) == Some(&sa.our_spi()) {
            self.by_id.remove(&sa.id);
        }
        self.rekey_collisions.remove(&sa.our_spi());
        self.unmark_half_open(sa);
        self.uncount(sa);
        if sa.counted_established {
            sa.counted_established = false;
            self.established = self.established.saturating_sub(1);
            self.established_per_peer.sub(sa.remote.ip());
        }
        for c in &sa.children {
            if self.child_index.get(&c.spi_in).map(|s| s.get()) == Some(sa.our_spi()) {
                self.child_index.remove(&c.spi_in);
            }
        }
        if let Some(vip) = sa.virtual_ip.take()
            && let Some(pool) = self.pools.get_mut(&sa.peer.name)
        {
            pool.free(vip);
        }
    }

    /// The peer's address changed (a NAT's new mapping): the per-address
    /// count follows it.
    pub(crate) fn moved(&mut self, sa: &mut IkeSa, remote: SocketAddr) {
        if sa.counted_established && sa.remote.ip() != remote.ip() {
            self.established_per_peer.sub(sa.remote.ip());
            self.established_per_peer.add(remote.ip());
        }
        sa.remote = remote;
    }

    pub(crate) fn mark_half_open(&mut self, sa: &mut IkeSa) {
        if !sa.counted_half_open {
            sa.counted_half_open = true;
            self.half_open += 1;
            *self.half_open_per_peer.entry(sa.remote.ip()).or_insert(0) += 1;
        }
    }

    pub(crate) fn unmark_half_open(&mut self, sa: &mut IkeSa) {
        if sa.counted_half_open {
            sa.counted_half_open = false;
            self.half_open = self.half_open.saturating_sub(1);
            let ip = sa.remote.ip();
            if let Some(n) = self.half_open_per_peer.get_mut(&ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.half_open_per_peer.remove(&ip);
                }
            }
            if !sa.initiator {
                self.init_index.remove(&(sa.remote, sa.spi_i));
            }
        }
    }

    pub(crate) fn fail(&mut self, reason: &'static str) {
        if let Some(e) = self.stats.failures.iter_mut().find(|(r, _)| *r == reason) {
            e.1 += 1;
        } else {
            self.stats.failures.push((reason, 1));
        }
    }

    pub(crate) fn drop_invalid(&mut self, reason: &'static str) {
        self.stats.dropped_invalid += 1;
        self.fail(reason);
    }

    pub(crate) fn random(&self, buf: &mut [u8]) {
        // aws-lc-rs's SystemRandom: AWS-LC's per-thread DRBG, seeded and
        // reseeded from the OS (no system call per nonce or SPI, as ring's
        // getrandom(2) was). It fails only if the OS has no randomness at
        // all: then zeroes would be a security hole, so abort loudly.
        if self.rng.fill(buf).is_err() {
            panic!("ike: the system's random number generator failed");
        }
    }

    pub(crate) fn nonce(&self) -> Vec<u8> {
        let mut n = vec![0u8; 32];
        self.random(&mut n);
        n
    }

    /// The responder's DH value for an IKE_SA_INIT and its public value:
    /// fresh, or with `Settings::dh_reuse` the group's current one while
    /// it has time and uses left (RFC 7296 2.12: "an implementation MAY
    /// reuse [its DH exponential] for several exchanges").
    pub(crate) fn responder_dh(&mut self, group: DhGroup, now: Instant) -> Result<(DhPrivate, Vec<u8>), CryptoError> {
        let uses = self.settings.dh_reuse_uses;
        if self.settings.dh_reuse.is_zero() || uses <= 1 {
            return DhPrivate::generate(group);
        }
        if let Some(d) = self.reused_dh.iter_mut().find(|d| d.key.group() == group)
            && d.until > now
            && d.uses_left > 0
        {
            d.uses_left -= 1;
            return Ok((d.key.share(), d.public.clone()));
        }
        // None yet, or this one is spent: dropping it wipes it.
        self.reused_dh.retain(|d| d.key.group() != group);
        let (key, public) = DhPrivate::generate(group)?;
        let until = now + self.settings.dh_reuse;
        self.reused_dh.push(ReusedDh { key: key.share(), public: public.clone(), until, uses_left: uses - 1 });
        Ok((key, public))
    }

    /// A fresh IKE SPI of this shard (`spi % shards == shard`), unused.
    pub(crate) fn alloc_ike_spi(&self) -> u64 {
        let shards = u64::from(self.settings.shards);
        loop {
            let mut b = [0u8; 8];
            self.random(&mut b);
            let r = u64::from_be_bytes(b);
            let spi = (r - r % shards).wrapping_add(u64::from(self.settings.shard));
            if spi != 0 && spi % shards == u64::from(self.settings.shard) && !self.sas.contains_key(&spi) {
                return spi;
            }
        }
    }

    /// A fresh inbound ESP SPI (>= 256, unused in this engine) of this
    /// shard (`spi % shards == shard`): engines of other threads never pick
    /// the same one, so the data plane never sees two inbound SAs of tern's
    /// own with one SPI.
    pub(crate) fn alloc_child_spi(&self) -> u32 {
        let shards = self.settings.shards.max(1);
        loop {
            let mut b = [0u8; 4];
            self.random(&mut b);
            let r = u32::from_be_bytes(b);
            let spi = (r - r % shards).wrapping_add(self.settings.shard % shards);
            if spi >= 256 && spi % shards == self.settings.shard % shards && !self.child_index.contains_key(&spi) {
                return spi;
            }
        }
    }

    /// Child SA `spi_in` (inbound) belongs to the IKE SA whose SPI (ours,
    /// never 0: `alloc_ike_spi`) is `ike_spi`.
    pub(crate) fn index_child(&mut self, spi_in: u32, ike_spi: u64) {
        if let Some(s) = NonZeroU64::new(ike_spi) {
            self.child_index.insert(spi_in, s);
        }
    }

    pub(crate) fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn rotate_cookie_secret(&mut self, now: Instant) {
        self.cookie.previous = self.cookie.current.clone();
        let mut fresh = Zeroizing::new([0u8; 32]);
        self.random(&mut fresh[..]);
        self.cookie.current = fresh;
        self.cookie.version = self.cookie.version.wrapping_add(1);
        self.cookie.rotate_at = Some(now + COOKIE_ROTATION);
    }

    /// Queues a request (sent now if none is outstanding).
    pub(crate) fn enqueue(&mut self, sa: &mut IkeSa, now: Instant, what: Start) {
        if sa.state != State::Established {
            if what == Start::DeleteIke {
                // Not up yet: just give up.
                self.sa_down(sa, "terminated", false);
            }
            return;
        }
        if sa.queue.contains(&what) {
            return;
        }
        // Children about to be deleted are neither rekeyed by us nor by
        // the peer any more.
        if let Start::DeleteChildren(ids) = &what {
            for c in sa.children.iter_mut().filter(|c| ids.contains(&c.id)) {
                c.replaced = true;
                c.rekey_at = None;
            }
        }
        if sa.pending.is_none() {
            self.start(sa, now, what);
        } else {
            sa.queue.push(what);
        }
    }

    fn start(&mut self, sa: &mut IkeSa, now: Instant, what: Start) {
        match what {
            Start::Dpd => self.send_dpd(sa, now),
            Start::DeleteIke => self.send_delete_ike(sa, now),
            Start::DeleteChildren(ids) => self.send_delete_children(sa, now, ids),
            Start::RekeyChild(id) => self.start_child_rekey(sa, now, id),
            Start::RekeyIke => self.start_ike_rekey(sa, now),
        }
    }

    /// The SA's due timers.
    fn sa_timers(&mut self, sa: &mut IkeSa, now: Instant) {
        if sa.last_resp.as_ref().and_then(|r| r.until).is_some_and(|t| t <= now) {
            sa.last_resp = None;
        }
        if let Some(r) = &sa.reassembly
            && r.deadline <= now
        {
            sa.reassembly = None;
            self.fail("fragment-timeout");
        }
        if let Some(t) = sa.expire_at
            && t <= now
        {
            sa.expire_at = None;
            match sa.state {
                State::InitDone | State::InitSent | State::AuthSent => {
                    log::warn!("ike: peer {}: half-open IKE SA expired", sa.who());
                    self.fail("half-open-timeout");
                    self.sa_down(sa, "timeout", false);
                    return;
                }
                State::Deleting => {
                    self.sa_down(sa, "deleted", false);
                    return;
                }
                _ => {}
            }
        }
        if let Some(p) = sa.pending.as_mut()
            && p.deadline <= now
        {
            if p.tries < self.settings.retransmit_tries {
                p.tries += 1;
                let wait = self.settings.retransmit_base.saturating_mul(1u32 << p.tries.min(16));
                p.deadline = now + wait;
                for d in &p.datagrams {
                    self.out.push(Output::Send { local: sa.local, remote: sa.remote, data: d.clone() });
                }
                self.stats.retransmits += 1;
            } else {
                self.exchange_timed_out(sa, now);
                return;
            }
        }
        if sa.state != State::Established {
            return;
        }
        if let Some(t) = sa.dpd_at
            && t <= now
        {
            let dpd = sa.peer.dpd.unwrap_or(Duration::from_secs(30));
            let idle_until = sa.last_rx + dpd;
            if idle_until <= now {
                sa.dpd_at = Some(now + dpd);
                if sa.pending.is_none() {
                    self.enqueue(sa, now, Start::Dpd);
                }
            } else {
                sa.dpd_at = Some(idle_until);
            }
        }
        if let Some(t) = sa.rekey_at
            && t <= now
        {
            sa.rekey_at = None;
            self.enqueue(sa, now, Start::RekeyIke);
        }
        let due: Vec<u64> = sa
            .children
            .iter()
            .filter(|c| c.rekey_at.is_some_and(|t| t <= now) && !c.rekeying && !c.replaced)
            .map(|c| c.id)
            .collect();
        for c in sa.children.iter_mut() {
            if c.rekey_at.is_some_and(|t| t <= now) {
                c.rekey_at = None;
            }
        }
        for id in due {
            self.enqueue(sa, now, Start::RekeyChild(id));
        }
    }

    /// Retransmissions exhausted.
    fn exchange_timed_out(&mut self, sa: &mut IkeSa, now: Instant) {
        let Some(p) = sa.pending.take() else { return };
        match p.req {
            crate::sa::Req::DeleteIke => {
                self.sa_down(sa, "deleted", false);
            }
            crate::sa::Req::Dpd => {
                log::warn!("ike: peer {}: no answer to liveness checks: peer dead", sa.who());
                self.fail("dead-peer");
                self.sa_down(sa, "dead peer", false);
            }
            _ => {
                log::warn!("ike: peer {}: no answer after {} retransmissions", sa.who(), p.tries);
                self.fail("timeout");
                self.sa_down(sa, "timeout", false);
            }
        }
        let _ = now;
    }

    /// The IKE SA goes: its children are announced deleted, then the SA
    /// down (if it was up or we initiated it). `send_delete`: tell the
    /// peer (without waiting for its answer).
    pub(crate) fn sa_down(&mut self, sa: &mut IkeSa, reason: &str, send_delete: bool) {
        if send_delete && sa.keys.is_some() && sa.state == State::Established {
            let mid = sa.send_mid;
            sa.send_mid = sa.send_mid.wrapping_add(1);
            let inner = [wire::Payload::Delete { protocol: 1, spis: Vec::new() }];
            if let Ok(ds) = self.seal(sa, wire::INFORMATIONAL, false, mid, &inner) {
                for d in ds {
                    self.out.push(Output::Send { local: sa.local, remote: sa.remote, data: d });
                }
            }
        }
        for c in std::mem::take(&mut sa.children) {
            self.child_index.remove(&c.spi_in);
            self.out.push(Output::DeleteChild {
                peer: sa.peer.name.clone(),
                id: c.id,
                inbound_spi: c.spi_in,
                outbound_spi: c.spi_out,
            });
        }
        // A `start` peer's SA that failed or died (not one deleted on
        // purpose) is initiated again, whichever side initiated it (a
        // rekey by the peer makes the peer the initiator).
        let deliberate = matches!(reason, "deleted" | "deleted by peer" | "terminated" | "configuration changed");
        if !sa.announced_down
            && (sa.initiator || sa.announced_up)
            && sa.peer.start
            && sa.peer.remote.is_some()
            && !deliberate
            && let Some(now) = self.clock
        {
            self.restarts.push((now + RESTART_DELAY, sa.peer.name.clone()));
        }
        if !sa.announced_down && (sa.announced_up || sa.initiator) {
            if sa.announced_up
                && log::log_enabled!(log::Level::Info)
                && self.event_log.allow(self.clock.unwrap_or_else(Instant::now), crate::eventlog::Routine::Down)
            {
                log::info!(
                    "ike: peer {}: IKE SA {} ({}) down: {reason}",
                    sa.who(),
                    sa.id,
                    sa.chosen.map(|c| c.to_string()).unwrap_or_default()
                );
            }
            self.out.push(Output::IkeSaDown { peer: sa.peer.name.clone(), ike_sa: sa.id, reason: reason.to_string() });
        }
        sa.announced_down = true;
        sa.pending = None;
        sa.queue.clear();
        sa.state = State::Dead;
    }

    /// Resends the cached response to a retransmitted request.
    pub(crate) fn resend_response(&mut self, sa: &mut IkeSa, mid: u32, fragment: Option<u16>) {
        if fragment.is_some_and(|n| n != 1) {
            return; // RFC 7383 2.6.1: answer the first fragment only
        }
        let Some(c) = sa.last_resp.as_ref() else { return };
        if c.mid != mid {
            self.drop_invalid("invalid-message-id");
            return;
        }
        for d in &c.datagrams {
            self.out.push(Output::Send { local: c.local, remote: c.remote, data: d.clone() });
        }
    }

    /// Whether `cookie` is what this engine would hand out now (or before
    /// the last rotation) for this initiator; compared in constant time.
    pub(crate) fn cookie_valid(&self, cookie: &[u8], ni: &[u8], ip: IpAddr, spi_i: u64) -> bool {
        use subtle::ConstantTimeEq;
        let Some((&v, _)) = cookie.split_first() else { return false };
        let secret = if v == self.cookie.version {
            &self.cookie.current
        } else if v == self.cookie.version.wrapping_sub(1) {
            &self.cookie.previous
        } else {
            return false;
        };
        let want = cookie_for(v, secret, ni, ip, spi_i);
        want.len() == cookie.len() && bool::from(want.ct_eq(cookie))
    }

    pub(crate) fn make_cookie(&self, ni: &[u8], ip: IpAddr, spi_i: u64) -> Vec<u8> {
        cookie_for(self.cookie.version, &self.cookie.current, ni, ip, spi_i)
    }
}

/// RFC 7296 2.6: Cookie = <VersionIDofSecret> | Hash(Ni | IPi | SPIi | <secret>).
fn cookie_for(version: u8, secret: &[u8; 32], ni: &[u8], ip: IpAddr, spi_i: u64) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(ni);
    match ip {
        IpAddr::V4(a) => h.update(a.octets()),
        IpAddr::V6(a) => h.update(a.octets()),
    }
    h.update(spi_i.to_be_bytes());
    h.update(secret);
    let mut c = Vec::with_capacity(33);
    c.push(version);
    c.extend_from_slice(&h.finalize());
    c
}

/// Whether a configuration's SAs may stay: everything but the credentials'
/// contents unchanged. New credentials (a PSK, certificate, key or CAs
/// replaced) are for new IKE SAs; the established ones stay (their
/// authentication is done; a rekey does not repeat it). The kind of
/// authentication changing, or an identity, takes them down.
fn same_config(a: &PeerConfig, b: &PeerConfig) -> bool {
    let kind_same = matches!(
        (&a.auth, &b.auth),
        (AuthConfig::Psk(_), AuthConfig::Psk(_)) | (AuthConfig::Pubkey(_), AuthConfig::Pubkey(_))
    );
    // (Debug shows the kind of `auth`, never its contents.)
    kind_same && format!("{a:?}") == format!("{b:?}")
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// The engine's two indexes a tunnel at a million (one IKE SA with one
    /// child each): 16-byte slots, 60-75 % full, against hashbrown's 2^21
    /// buckets of 16 bytes and a control byte each (48 % full).
    #[test]
    fn indexes_at_a_million() {
        assert_eq!(std::mem::size_of::<Option<(u64, Box<IkeSa>)>>(), 16);
        assert_eq!(std::mem::size_of::<Option<(u32, NonZeroU64)>>(), 16);
        let n = 1_000_000u64;
        let mut sas: Table<u64, NonZeroU64> = Table::new();
        let mut children: Table<u32, NonZeroU64> = Table::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 1..=n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let Some(spi) = NonZeroU64::new(x) else { continue };
            sas.insert(x, spi);
            children.insert(i as u32 * 2 + 256, spi);
        }
        let bytes = (sas.capacity() + children.capacity()) * 16;
        let per = bytes as f64 / n as f64;
        let hashbrown = (2 * (1usize << 21) * 17) as f64 / n as f64;
        println!("engine indexes at 1M: {per:.1} B a tunnel (hashbrown: {hashbrown:.1})");
        assert!(per <= 54.0 && hashbrown - per >= 17.0, "{per} vs {hashbrown}");
    }

    #[test]
    fn cookies_survive_one_rotation_only() {
        let mut ike = Ike::new(Settings::default());
        let t = Instant::now();
        ike.poll(t);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let ni = [7u8; 32];
        let c = ike.make_cookie(&ni, ip, 42);
        assert_eq!(c.len(), 33);
        assert!(ike.cookie_valid(&c, &ni, ip, 42));
        assert!(!ike.cookie_valid(&c, &ni, ip, 43));
        assert!(!ike.cookie_valid(&c, &ni, "192.0.2.8".parse().unwrap(), 42));
        assert!(!ike.cookie_valid(&c, &[8u8; 32], ip, 42));
        assert!(!ike.cookie_valid(&c[..32], &ni, ip, 42));
        assert!(!ike.cookie_valid(&[], &ni, ip, 42));
        ike.poll(t + COOKIE_ROTATION);
        assert!(ike.cookie_valid(&c, &ni, ip, 42), "the previous secret still counts");
        assert_ne!(ike.make_cookie(&ni, ip, 42), c);
        ike.poll(t + 2 * COOKIE_ROTATION);
        assert!(!ike.cookie_valid(&c, &ni, ip, 42), "two rotations later it does not");
    }

    #[test]
    fn the_engine_moves_to_its_thread() {
        fn send<T: Send>() {}
        send::<Ike>();
        send::<Output>();
    }

    #[test]
    fn spis_belong_to_their_shard() {
        let ike = Ike::new(Settings { shard: 2, shards: 5, ..Settings::default() });
        for _ in 0..1000 {
            let spi = ike.alloc_ike_spi();
            assert_ne!(spi, 0);
            assert_eq!(spi % 5, 2);
            let child = ike.alloc_child_spi();
            assert!(child >= 256);
            assert_eq!(child % 5, 2, "ESP SPIs too: two threads never install the same inbound SPI");
        }
    }

    #[test]
    fn nothing_due_without_sas_but_the_cookie_secret() {
        let mut ike = Ike::new(Settings::default());
        let t = Instant::now();
        ike.poll(t);
        assert_eq!(ike.next_deadline(), Some(t + COOKIE_ROTATION));
        assert_eq!(ike.drain().count(), 0);
        assert!(ike.initiate(t, "nobody").is_err());
        assert!(ike.terminate(t, "nobody", None).is_err());
        ike.child_expired(t, 1234, true);
        assert_eq!(ike.drain().count(), 0);
    }
}
