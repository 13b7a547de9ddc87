//! The IPsec service: the router's one owner of the SA database
//! (`tern_ipsec::SaDb`), which the ESP nodes read through `Shared::sas`.
//!
//! SAs come from two places: the configuration's `[[ipsec_sa]]` (a reload
//! diffs them against the running ones) and the API's `ipsec_sa_add` (the
//! IKE daemon's way in; a reload leaves those alone). Every change is
//! staged and published once, so workers see either the SAs before a
//! change or all of them after it.
//!
//! Lifetime events (soft and hard expiry, sequence numbers exhausted) are
//! polled on the control thread's tick, logged, and sent to every
//! subscriber ([`Ipsec::subscribe`]): the hook the IKE side rekeys on.

use crate::config::{IfacePlanKind, Plan, SaPlan};
use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};
use tern_fib::{FibReader, NhKind};
use tern_ipsec::{
    Key, Lifetime, SaConfig, SaCounters, SaDb, SaError, SaEvent, SaEventKind, SaInfo, SaReader, UdpEncap,
};
use tern_nodes::state::{IfKind, Iface};

/// How often lifetimes are checked (the byte and time limits, and the
/// inbound packet limit, act at this granularity).
pub const EVENT_POLL: Duration = Duration::from_secs(1);

/// SAs with series of their own in /metrics (the first by id); the totals
/// cover every SA. A million SAs would be 7 million series.
pub const METRICS_SA_SERIES: usize = 1000;

/// Up to this many SAs, a scrape walks them every time; above, at most
/// once per [`metrics_interval`].
const METRICS_AT_ONCE: usize = 1_000;

/// What /metrics tells of IPsec. A running router's carries `live`, the
/// workers' table, which the scrape reads itself ([`IpsecMetrics::current`]):
/// the control thread keeps only the count current and never walks the
/// SAs for metrics (its walk every second, totals and the first SAs, was
/// about 2 % of a whole `tern run`'s CPU while tunnels were set up, and
/// grew with the SAs).
#[derive(Clone, Debug, Default)]
pub struct IpsecMetrics {
    pub sas: usize,
    /// (id, SPI, counters) of the first [`METRICS_SA_SERIES`] SAs by id.
    pub per_sa: Vec<(u32, u32, SaCounters)>,
    /// Every SA's counters summed.
    pub totals: SaCounters,
    pub live: Option<LiveSas>,
}

impl IpsecMetrics {
    /// The figures to show now: walked from `live` (at most once per
    /// [`metrics_interval`] above [`METRICS_AT_ONCE`] SAs), else as stored.
    pub fn current(&self) -> IpsecMetrics {
        match &self.live {
            Some(l) => l.figures(),
            None => IpsecMetrics { live: None, ..self.clone() },
        }
    }
}

/// The SAs as the workers see them, for a scrape, with the last walk's
/// figures (shared by every clone).
#[derive(Clone)]
pub struct LiveSas {
    reader: SaReader,
    last: Arc<Mutex<Option<(Instant, IpsecMetrics)>>>,
}

impl std::fmt::Debug for LiveSas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSas").field("sas", &self.reader.load().len()).finish_non_exhaustive()
    }
}

impl LiveSas {
    pub fn new(reader: SaReader) -> LiveSas {
        LiveSas { reader, last: Arc::default() }
    }

    /// The count now; totals and the first SAs walked now, or as of the
    /// last walk when that was within [`metrics_interval`] and the table
    /// is large (a million SAs is a walk of tens of milliseconds).
    fn figures(&self) -> IpsecMetrics {
        let table = self.reader.load();
        let sas = table.len();
        let mut last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if sas > METRICS_AT_ONCE
            && let Some((at, m)) = &*last
            && at.elapsed() < metrics_interval(sas)
        {
            return IpsecMetrics { sas, ..m.clone() };
        }
        let m = IpsecMetrics { sas, totals: sum(table.iter()), per_sa: first(&table, METRICS_SA_SERIES), live: None };
        *last = Some((Instant::now(), m.clone()));
        m
    }
}

/// Every SA's counters summed.
fn sum<'a>(sas: impl Iterator<Item = &'a Arc<tern_ipsec::Sa>>) -> SaCounters {
    let mut t = SaCounters::default();
    for sa in sas {
        let c = sa.counters();
        t.packets = t.packets.wrapping_add(c.packets);
        t.bytes = t.bytes.wrapping_add(c.bytes);
        t.replay_drops = t.replay_drops.wrapping_add(c.replay_drops);
        t.integrity_failures = t.integrity_failures.wrapping_add(c.integrity_failures);
        t.seq_exhausted = t.seq_exhausted.wrapping_add(c.seq_exhausted);
        t.expired_drops = t.expired_drops.wrapping_add(c.expired_drops);
        t.decrypt_errors = t.decrypt_errors.wrapping_add(c.decrypt_errors);
    }
    t
}

/// The `k` SAs of lowest id, by id: (id, SPI, counters). A selection,
/// not a sort of every SA.
fn first(table: &tern_ipsec::SaTable, k: usize) -> Vec<(u32, u32, SaCounters)> {
    if k == 0 {
        return Vec::new();
    }
    let mut ids: Vec<u32> = table.iter().map(|sa| sa.id).collect();
    if ids.len() > k {
        ids.select_nth_unstable(k - 1);
        ids.truncate(k);
    }
    ids.sort_unstable();
    ids.into_iter().filter_map(|id| table.get(id).map(|sa| (id, sa.spi, sa.counters()))).collect()
}

pub struct Ipsec {
    db: SaDb,
    /// When the tunnels' derived MTUs were last checked against their
    /// outer routes ([`Ipsec::mtu_check_due`]).
    mtus_at: Option<Instant>,
    /// The ids the configuration installed.
    from_config: HashSet<u32>,
    subscribers: Vec<mpsc::Sender<SaEvent>>,
    last_poll: Option<Instant>,
    /// The count, and the live table when /metrics is served.
    metrics: IpsecMetrics,
    /// Whether a publication happened since the last [`Ipsec::poll`] (if
    /// not, the database's spare base is dropped: see `SaDb::drop_spare`).
    changed: bool,
}

/// How often /metrics' IPsec totals and first SAs are walked at most
/// (over [`METRICS_AT_ONCE`] SAs): once per [`EVENT_POLL`] up to 100,000
/// SAs, then once per this many seconds per 100,000 (a scraper asking
/// every second would otherwise keep a core walking a million SAs).
fn metrics_interval(sas: usize) -> Duration {
    EVENT_POLL * (sas / 100_000).max(1) as u32
}

/// An SA of the configuration (or of the API, checked the same way) as
/// tern-ipsec takes it.
pub fn sa_config(p: &SaPlan) -> Result<SaConfig, SaError> {
    let cipher = p.cipher.name.parse()?;
    let integ = p.integ.name.parse()?;
    let life = |l: &crate::config::LifetimePlan| Lifetime { packets: l.packets, bytes: l.bytes, secs: l.secs };
    Ok(SaConfig {
        id: p.id,
        spi: p.spi,
        cipher,
        integ,
        key: Key::new(p.key.bytes().to_vec()),
        integ_key: Key::new(p.integ_key.as_ref().map(|k| k.bytes().to_vec()).unwrap_or_default()),
        esn: p.esn,
        replay_window: p.replay_window,
        udp_encap: p.udp_encap.map(|(src_port, dst_port)| UdpEncap { src_port, dst_port }),
        soft: life(&p.soft),
        hard: life(&p.hard),
    })
}

/// How often the control loop looks at the tunnels' outer
/// routes (an interface's MTU change applies at once; a route that moves
/// a tunnel's remote to another interface within this).
pub const MTU_POLL: Duration = Duration::from_millis(500);

/// The inner MTU of an IPsec tunnel without a configured `mtu`: what the
/// outer packet's interface carries (`outer_mtu`, within the lanes'
/// limit), less the most ESP with the outbound SA adds (`overhead`: outer
/// IP header, UDP when encapsulated, ESP header and IV, padding, trailer,
/// ICV); at least IPv4's 68.
pub fn tunnel_mtu(outer_mtu: u16, overhead: usize) -> u16 {
    let outer = outer_mtu.min(crate::config::lane_mtu_limit(false));
    let overhead = u16::try_from(overhead).unwrap_or(u16::MAX);
    outer.saturating_sub(overhead).max(68)
}

/// The MTU of the interface a tunnel's outer packets leave by: the FIB's
/// route to `remote` (an ECMP route's first member), or for a multipoint
/// tunnel (whose remotes vary) the interface that holds `local`. `None`
/// when neither is known (no route yet, a route into a tunnel): the caller
/// keeps 1500. tern's routes carry no MTU of their own, so the interface's
/// is the route's.
pub fn outer_mtu(fib: &FibReader, ifs: &[Iface], local: IpAddr, remote: IpAddr) -> Option<u16> {
    if remote.is_unspecified() {
        let holds = |f: &&Iface| match local {
            IpAddr::V4(a) => f.v4.iter().any(|n| n.addr == a),
            IpAddr::V6(a) => f.v6.iter().any(|n| n.addr == a),
        };
        return ifs.iter().filter(|f| !f.is_tunnel()).find(holds).map(|f| f.mtu);
    }
    let id = match remote {
        IpAddr::V4(a) => fib.lookup_v4(u32::from(a)),
        IpAddr::V6(a) => fib.lookup_v6(u128::from(a)),
    };
    let nh = fib.nexthop(fib.ecmp_pick(id, 0));
    if !matches!(nh.kind, NhKind::Unicast | NhKind::Glean) {
        return None;
    }
    ifs.get(usize::from(nh.ifindex)).filter(|f| !f.is_tunnel()).map(|f| f.mtu)
}

/// Sets each IPsec tunnel's MTU in `ifs` (a table about to be published)
/// from its outer interface ([`outer_mtu`], through `fib`) and outbound SA
/// ([`esp_overhead`]), unless the configuration gives the tunnel an `mtu`.
/// Whether any changed.
pub(crate) fn derive_tunnel_mtus(plan: &Plan, ipsec: &Ipsec, fib: &FibReader, ifs: &mut [Iface]) -> bool {
    let derived: Vec<(usize, u16)> = ifs
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let p = plan.ifaces.get(i)?;
            let IfacePlanKind::Ipsec { local, remote, sa_out, .. } = &p.kind else { return None };
            if p.mtu.is_some() || !matches!(f.kind, IfKind::Ipsec(_)) {
                return None;
            }
            let outer = outer_mtu(fib, ifs, *local, *remote).unwrap_or(1500);
            Some((i, tunnel_mtu(outer, esp_overhead(plan, ipsec, *sa_out, remote.is_ipv6()))))
        })
        .collect();
    let mut changed = false;
    for (i, mtu) in derived {
        if let Some(f) = ifs.get_mut(i) {
            changed |= f.mtu != mtu;
            f.mtu = mtu;
        }
    }
    changed
}

/// The most ESP with SA `sa_out` adds over an IPv4/IPv6 outer header:
/// the configuration's SA, else the installed one (IKE's), else room for
/// any algorithm IKE may choose.
pub(crate) fn esp_overhead(plan: &Plan, ipsec: &Ipsec, sa_out: u32, outer_v6: bool) -> usize {
    if let Some(sa) = plan.sas.iter().find(|s| s.id == sa_out) {
        return crate::config::esp_overhead(outer_v6, sa);
    }
    match ipsec.db.get(sa_out) {
        Some(sa) => (if outer_v6 { 40 } else { 20 }) + if sa.udp_encap.is_some() { 8 } else { 0 } + sa.max_overhead(),
        None => crate::config::ike_esp_overhead(outer_v6),
    }
}

impl Ipsec {
    /// An empty database with a counter slot per worker.
    pub fn new(workers: usize) -> Ipsec {
        let db = SaDb::with_workers(workers);
        let metrics = IpsecMetrics { live: Some(LiveSas::new(db.reader())), ..IpsecMetrics::default() };
        Ipsec {
            db,
            mtus_at: None,
            from_config: HashSet::new(),
            subscribers: Vec::new(),
            last_poll: None,
            metrics,
            changed: false,
        }
    }

    /// Whether the tunnels' derived MTUs are due a look ([`MTU_POLL`]);
    /// if so, the next one is due a period from `now`.
    pub(crate) fn mtu_check_due(&mut self, now: Instant) -> bool {
        if self.mtus_at.is_some_and(|t| now.duration_since(t) < MTU_POLL) {
            return false;
        }
        self.mtus_at = Some(now);
        true
    }

    /// What the workers' shared state holds.
    pub fn reader(&self) -> SaReader {
        self.db.reader()
    }

    pub fn len(&self) -> usize {
        self.db.len()
    }

    pub fn is_empty(&self) -> bool {
        self.db.is_empty()
    }

    /// Takes the configuration's SAs from `old` to `new` in one
    /// publication: the SAs removed or changed go, the added or changed
    /// come. Everything is checked first; if installing still fails, the
    /// removed SAs are put back and nothing is published. Returns what
    /// changed, for the reload report.
    pub fn apply_config(&mut self, old: &[SaPlan], new: &[SaPlan]) -> Result<Vec<String>, String> {
        let gone: Vec<&SaPlan> = old.iter().filter(|o| !new.iter().any(|n| n == *o)).collect();
        let come: Vec<&SaPlan> = new.iter().filter(|n| !old.iter().any(|o| o == *n)).collect();
        if gone.is_empty() && come.is_empty() {
            return Ok(Vec::new());
        }
        let mut cfgs = Vec::with_capacity(come.len());
        for p in &come {
            let c = sa_config(p).map_err(|e| format!("ipsec_sa {}: {e}", p.id))?;
            c.validate().map_err(|e| format!("ipsec_sa {}: {e}", p.id))?;
            let replaced = gone.iter().any(|g| g.id == p.id);
            if !replaced && self.db.get(p.id).is_some() {
                return Err(format!("ipsec_sa {}: the API installed an SA with this id; delete it first", p.id));
            }
            cfgs.push(c);
        }
        let mut removed = Vec::new();
        for g in &gone {
            if self.db.del(g.id).is_ok() {
                removed.push(*g);
            }
        }
        if let Err(e) = self.db.add_batch(cfgs) {
            // Back as it was: the old SAs again (their counters restart).
            let back: Vec<SaConfig> = removed.iter().filter_map(|p| sa_config(p).ok()).collect();
            if let Err(e2) = self.db.add_batch(back) {
                log::error!("ipsec: restoring SAs after a failed reload: {e2}");
            }
            return Err(format!("ipsec_sa: {e}"));
        }
        self.published();
        let mut report = Vec::new();
        for g in &gone {
            self.from_config.remove(&g.id);
            if !come.iter().any(|c| c.id == g.id) {
                report.push(format!("ipsec SA {} removed", g.id));
            }
        }
        for c in &come {
            self.from_config.insert(c.id);
            let what = if gone.iter().any(|g| g.id == c.id) { "replaced" } else { "added" };
            report.push(format!("ipsec SA {} (SPI {:#x}) {what}", c.id, c.spi));
        }
        for line in &report {
            log::info!("{line}");
        }
        Ok(report)
    }

    /// Installs SAs all or nothing, published once (the API).
    pub fn add(&mut self, cfgs: Vec<SaConfig>) -> Result<usize, SaError> {
        let n = self.install(cfgs)?;
        log::info!("ipsec: {n} SA(s) added through the API ({} in all)", self.db.len());
        Ok(n)
    }

    /// [`Ipsec::add`] without its log line: IKE's batches of child SAs,
    /// which the IKE service logs itself (at debug: a line per batch was
    /// a write(2) every control round while tunnels are set up).
    pub fn install(&mut self, cfgs: Vec<SaConfig>) -> Result<usize, SaError> {
        let n = cfgs.len();
        for c in &cfgs {
            c.validate().map_err(|e| SaError::InBatch { id: c.id, source: Box::new(e) })?;
        }
        self.db.add_batch(cfgs)?;
        self.published();
        Ok(n)
    }

    /// Removes SAs (all must exist), published once. `in_use` says which
    /// tunnel uses an SA, if one does: such an SA is refused.
    pub fn del(&mut self, ids: &[u32], in_use: impl Fn(u32) -> Option<String>) -> Result<usize, String> {
        let n = self.remove(ids, in_use)?;
        log::info!("ipsec: {n} SA(s) deleted through the API");
        Ok(n)
    }

    /// [`Ipsec::del`] without its log line (IKE's deletes, see
    /// [`Ipsec::install`]).
    pub fn remove(&mut self, ids: &[u32], in_use: impl Fn(u32) -> Option<String>) -> Result<usize, String> {
        for &id in ids {
            if self.db.get(id).is_none() {
                return Err(SaError::NotFound(id).to_string());
            }
            if let Some(t) = in_use(id) {
                return Err(format!("SA {id} is tunnel {t}'s: change the configuration to remove it"));
            }
        }
        for &id in ids {
            self.db.del(id).map_err(|e| e.to_string())?;
            self.from_config.remove(&id);
        }
        self.published();
        Ok(ids.len())
    }

    pub fn info(&self, id: u32) -> Option<SaInfo> {
        self.db.info(id)
    }

    /// Whether SA `id` is installed (cheaper than [`Ipsec::info`]).
    pub fn contains(&self, id: u32) -> bool {
        self.db.get(id).is_some()
    }

    pub fn list(&self) -> Vec<SaInfo> {
        self.db.list()
    }

    /// Whether /metrics is served (the router says so at start): if so,
    /// [`Ipsec::metrics`] carries the live table.
    pub fn set_metrics_on(&mut self, on: bool) {
        self.metrics.live = on.then(|| LiveSas::new(self.db.reader()));
    }

    /// What /metrics shows: [`IpsecMetrics::current`] reads the SAs.
    pub fn metrics(&self) -> &IpsecMetrics {
        &self.metrics
    }

    /// After a publication: the count follows (the rest is read at the
    /// scrape, from the table just published).
    fn published(&mut self) {
        self.db.publish();
        self.changed = true;
        self.metrics.sas = self.db.len();
    }

    /// Walks the SAs into [`Ipsec::metrics`]'s stored figures now (what a
    /// scrape without the live table shows).
    pub fn refresh_metrics(&mut self) {
        let live = self.metrics.live.take();
        self.metrics = IpsecMetrics {
            sas: self.db.len(),
            totals: self.db.totals(),
            per_sa: self.db.first(METRICS_SA_SERIES),
            live,
        };
    }

    /// Whether SA `id` came from the configuration.
    pub fn from_config(&self, id: u32) -> bool {
        self.from_config.contains(&id)
    }

    /// A channel that receives every SA event from now on (IKE's hook: a
    /// soft expiry is the signal to rekey). A dropped receiver is
    /// forgotten.
    pub fn subscribe(&mut self) -> mpsc::Receiver<SaEvent> {
        let (tx, rx) = mpsc::channel();
        self.subscribers.push(tx);
        rx
    }

    /// The control loop's tick: at most once per [`EVENT_POLL`], checks
    /// lifetimes, logs each event and hands it to the subscribers.
    /// Returns the number of events.
    pub fn poll(&mut self, now: Instant) -> usize {
        if self.last_poll.is_some_and(|t| now.saturating_duration_since(t) < EVENT_POLL) {
            return 0;
        }
        self.last_poll = Some(now);
        // A second without changes: the spare copy of the SA indexes goes
        // (about 70 bytes an SA), the next change rebuilds it once.
        if !std::mem::take(&mut self.changed) {
            self.db.drop_spare();
        }
        if self.db.is_empty() {
            return 0;
        }
        let events = self.db.poll_events(now);
        for e in &events {
            match e.kind {
                SaEventKind::SoftExpired(r) => log::info!("ipsec SA {}: soft lifetime reached ({r:?}): rekey", e.id),
                SaEventKind::HardExpired(r) => {
                    log::warn!("ipsec SA {}: hard lifetime reached ({r:?}): the SA stops", e.id)
                }
                SaEventKind::SeqExhausted => {
                    log::warn!("ipsec SA {}: sequence numbers exhausted: the SA stops sending", e.id)
                }
            }
            self.subscribers.retain(|s| s.send(*e).is_ok());
        }
        events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{IpsecSaCfg, SecretHex, SpiValue, sa_plan};

    /// The tunnel MTU is the outer interface's (within what the lanes
    /// carry: an outer MTU of 9000 counts as 1778) less the SA's overhead,
    /// never below 68.
    #[test]
    fn tunnel_mtu_is_the_outer_mtu_less_esp() {
        let gcm = plan(1, None, None, "0x00112233445566778899aabbccddeeff01020304");
        // AES-GCM over IPv4: 20 + 8 + 8 + 3 + 2 + 16; over IPv6 20 more.
        assert_eq!(crate::config::esp_overhead(false, &gcm), 57);
        assert_eq!(tunnel_mtu(1400, 57), 1343);
        assert_eq!(tunnel_mtu(1500, 57), 1443);
        assert_eq!(tunnel_mtu(9000, 57), crate::config::lane_mtu_limit(false) - 57);
        assert_eq!(tunnel_mtu(9000, crate::config::esp_overhead(true, &gcm)), 1778 - 77);
        assert_eq!(tunnel_mtu(100, 57), 68);
        assert_eq!(tunnel_mtu(1400, usize::MAX), 68);
    }

    fn plan(id: u32, soft_secs: Option<u64>, hard_secs: Option<u64>, key: &str) -> SaPlan {
        let c = IpsecSaCfg {
            id,
            spi: SpiValue::Number(i64::from(0x1000 + id)),
            crypto: "aes-128-gcm".into(),
            integ: "none".into(),
            key: SecretHex(key.into()),
            integ_key: None,
            esn: false,
            replay_window: 64,
            udp_encap: false,
            udp_src_port: None,
            udp_dst_port: None,
            soft_packets: None,
            soft_bytes: None,
            soft_secs,
            hard_packets: None,
            hard_bytes: None,
            hard_secs,
        };
        sa_plan(&c).expect("valid")
    }

    const K1: &str = "0x000102030405060708090a0b0c0d0e0f10111213";
    const K2: &str = "0xff0102030405060708090a0b0c0d0e0f10111213";

    /// Soft then hard expiry by time reach every subscriber once each (a
    /// later `now` stands for the time passing), and a dropped subscriber
    /// is forgotten.
    #[test]
    fn lifetime_events_reach_subscribers_once() {
        let mut ip = Ipsec::new(1);
        ip.apply_config(&[], &[plan(1, Some(10), Some(20), K1)]).expect("apply");
        let rx = ip.subscribe();
        let gone = ip.subscribe();
        drop(gone);
        let t0 = Instant::now();
        assert_eq!(ip.poll(t0), 0, "nothing expired yet");
        assert_eq!(ip.poll(t0 + Duration::from_millis(10)), 0, "at most once per EVENT_POLL");
        assert_eq!(ip.poll(t0 + Duration::from_secs(11)), 1);
        let e = rx.try_recv().expect("soft event");
        assert_eq!((e.id, e.kind), (1, SaEventKind::SoftExpired(tern_ipsec::Reason::Time)));
        assert_eq!(ip.subscribers.len(), 1, "the dropped receiver is forgotten");
        assert_eq!(ip.poll(t0 + Duration::from_secs(13)), 0, "each event once");
        assert_eq!(ip.poll(t0 + Duration::from_secs(21)), 1);
        assert_eq!(rx.try_recv().expect("hard").kind, SaEventKind::HardExpired(tern_ipsec::Reason::Time));
        assert_eq!(ip.info(1).expect("sa").state, tern_ipsec::SaState::Expired);
    }

    /// /metrics reads the SAs at the scrape: an SA added and counted shows
    /// without a poll, the control thread stores no walk; above
    /// METRICS_AT_ONCE SAs a walk serves the scrapes of its interval (the
    /// count stays current).
    #[test]
    fn metrics_are_read_at_the_scrape() {
        let mut ip = Ipsec::new(1);
        assert_eq!(ip.metrics().current().sas, 0);
        ip.apply_config(&[], &[plan(1, None, None, K1), plan(2, None, None, K1)]).expect("apply");
        let sa = ip.reader().load().get(1).cloned().expect("SA 1");
        sa.count(0, &SaCounters { packets: 3, bytes: 300, ..Default::default() });
        let m = ip.metrics().current();
        assert_eq!((m.sas, m.totals.packets, m.totals.bytes), (2, 3, 300));
        let per: Vec<(u32, u64)> = m.per_sa.iter().map(|p| (p.0, p.2.packets)).collect();
        assert_eq!(per, [(1, 3), (2, 0)]);
        assert_eq!((ip.metrics().totals.packets, ip.metrics().per_sa.len()), (0, 0), "nothing walked");
        let many: Vec<SaConfig> =
            (0..METRICS_AT_ONCE as u32).map(|i| sa_config(&plan(100 + i, None, None, K1)).expect("cfg")).collect();
        ip.add(many).expect("add");
        let m = ip.metrics().current();
        assert_eq!((m.sas, m.totals.packets), (METRICS_AT_ONCE + 2, 3));
        sa.count(0, &SaCounters { packets: 4, ..Default::default() });
        assert_eq!(ip.metrics().current().totals.packets, 3, "the last walk, within its interval");
        ip.del(&[2], |_| None).expect("del");
        assert_eq!(ip.metrics().current().sas, METRICS_AT_ONCE + 1, "the count is current");
        ip.set_metrics_on(false);
        assert!(ip.metrics().current().per_sa.is_empty());
    }

    /// A configuration change is one publication: changed SAs replaced,
    /// removed ones gone, the workers' table all old or all new; an SA the
    /// API installed under a configured id refuses the change whole.
    #[test]
    fn config_changes_apply_whole_or_not_at_all() {
        let mut ip = Ipsec::new(1);
        let reader = ip.reader();
        let old = [plan(1, None, None, K1), plan(2, None, None, K1)];
        ip.apply_config(&[], &old).expect("apply");
        assert_eq!(reader.load().len(), 2);
        let new = [plan(1, None, None, K2), plan(3, None, None, K1)];
        let report = ip.apply_config(&old, &new).expect("apply");
        assert_eq!(report, ["ipsec SA 2 removed", "ipsec SA 1 (SPI 0x1001) replaced", "ipsec SA 3 (SPI 0x1003) added"]);
        let t = reader.load();
        assert!(t.get(1).is_some() && t.get(2).is_none() && t.get(3).is_some());
        // The API's SA 4, then a configuration that wants id 4 too.
        let api = sa_config(&plan(4, None, None, K1)).expect("cfg");
        ip.add(vec![api]).expect("api add");
        let clash = [plan(1, None, None, K2), plan(4, None, None, K2), plan(5, None, None, K1)];
        let e = ip.apply_config(&new, &clash).expect_err("refused");
        assert!(e.contains("ipsec_sa 4") && e.contains("API"), "{e}");
        assert!(reader.load().get(5).is_none(), "nothing of the refused change");
        assert!(ip.from_config(1) && !ip.from_config(4));
    }
}
