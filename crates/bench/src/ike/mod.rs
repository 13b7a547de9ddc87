//! `tern-bench ike`: an IKEv2 load generator on tern's own initiator
//! (issue 40's setup-rate figures), and a bare responder on tern's engine
//! to point it at.
//!
//! One [`tern_ike::Ike`] engine over two UDP sockets (ports 500 and 4500
//! of `--local`, the 4500 one with RFC 3948's non-ESP marker) sets up
//! `--tunnels` IKE SAs, each with its first child SA, with the responder
//! at `--responder`: one peer configuration initiated again and again, at
//! `--rate` new IKE SAs a second (0: as fast as `--window`, the tunnels in
//! flight at once, allows). Authentication by PSK or, with `--auth
//! pubkey`, a certificate (`--cert`, `--key`, checked against `--ca`).
//! With `--vip` each IKE SA asks for a virtual IP (a configuration
//! payload), as a remote-access client does.
//!
//! Without `--verify` a tunnel counts when its child SA comes out of the
//! engine (`Output::InstallChild`). With `--verify` it counts only when a
//! packet went through it: an ICMP echo from its virtual IP (or
//! `--inner-src`) to `--inner-dst`, ESP-encrypted with the child SA's keys
//! by tern-ipsec (raw IP protocol 50, or UDP 4500 when the SA is
//! encapsulated), answered, and the answer decrypted (see [`verify`]).
//! `--verify-sample N` instead probes N tunnels picked at random after all
//! are up (a sample of a million).
//!
//! Prints the setup rate (tunnels over the time from the first initiation
//! to the last tunnel), the rate at each of `--milestones`, the
//! retransmissions (and their share of the IKE messages sent), the
//! failures by reason, the verify results and latency, and the
//! generator's own CPU time per tunnel. `--stop` ends the run at issue
//! 40's criterion: the first failure, or retransmissions above 0.1 % of
//! the messages sent.
//!
//! ```text
//! tern-bench ike --local 10.0.2.1 --responder 10.0.2.2 --tunnels 2000 [--rate 0] [--window 64]
//!     [--auth psk|pubkey] [--psk SECRET] [--cert F --key F --ca F]
//!     [--proposal aes128gcm16-prfsha256-x25519] [--esp-proposal aes128gcm16]
//!     [--local-id bench.example | --ids N] [--remote-id ID] [--vip] [--encap]
//!     [--verify | --verify-sample N] [--inner-dst 10.77.0.1] [--inner-src A]
//!     [--milestones 10000,40000] [--stop] [--timeout 120] [--json]
//! tern-bench ike --respond --local 10.0.2.2 [--seconds 60] [--pool A-B] [--verify] [--psk ...] [--proposal ...]
//! ```
//! With `--respond` it is the responder: a template (`remote` any, any
//! identity the PSK or a certificate from the CA proves) answering on
//! ports 500 and 4500 of `--local` for `--seconds`, then printing how many
//! IKE SAs it set up; with `--verify` it keeps the child SAs and answers
//! the echoes sent through them.
//!
//! strongSwan as the responder needs a connection that takes any identity
//! and several IKE SAs from one address (`unique = never`);
//! `crates/bench/scripts/ike_setup_rate.sh` builds that rig, and one with
//! a whole `tern run`, and runs them.

mod net;
pub mod verify;

use net::{Datagram, Net};
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tern_ike::proposal::{Proposal, Protocol};
use tern_ike::{AuthConfig, ChildSa, Identity, Ike, Output, PeerConfig, Settings, TrafficSelector};
use verify::{Answerer, Verifier};
use zeroize::Zeroizing;

/// `tern-bench ike`'s options.
#[derive(clap::Args, Debug, Clone)]
pub struct IkeArgs {
    /// This side's address (ports 500 and 4500 are bound on it).
    #[arg(long)]
    pub local: IpAddr,
    /// The responder's address (initiator mode).
    #[arg(long)]
    pub responder: Option<IpAddr>,
    /// Be the responder instead (tern's engine as a bare responder).
    #[arg(long)]
    pub respond: bool,
    /// Tunnels (IKE SAs with their first child SA) to set up.
    #[arg(long, default_value_t = 1000)]
    pub tunnels: u64,
    /// New IKE SAs a second (0: as fast as the window allows).
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Tunnels in flight (initiated, neither counted nor failed) at most.
    #[arg(long, default_value_t = 64)]
    pub window: u64,
    /// How this side proves itself: psk or pubkey (--cert, --key, --ca).
    #[arg(long, default_value = "psk")]
    pub auth: String,
    /// The pre-shared key.
    #[arg(long, default_value = "tern-bench-ike-psk")]
    pub psk: String,
    /// This side's certificate (PEM/DER; --auth pubkey).
    #[arg(long)]
    pub cert: Option<PathBuf>,
    /// Its private key (PKCS#8/SEC1 PEM).
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// A CA the peer's certificate must chain to (repeatable).
    #[arg(long)]
    pub ca: Vec<PathBuf>,
    /// IKE proposal, strongSwan's syntax.
    #[arg(long, default_value = "aes128gcm16-prfsha256-x25519")]
    pub proposal: String,
    /// Child SA proposal.
    #[arg(long, default_value = "aes128gcm16")]
    pub esp_proposal: String,
    /// This side's identity (default: bench.example with a PSK, the
    /// certificate's subject with pubkey).
    #[arg(long)]
    pub local_id: Option<String>,
    /// The identity the responder must prove (default: any).
    #[arg(long)]
    pub remote_id: Option<String>,
    /// Initiate as this many peers in turn, each with its own identity
    /// (bench0.example, bench1.example, ...; PSK only): responders that
    /// lease a virtual IP per identity (charon) then give each tunnel its
    /// own.
    #[arg(long, default_value_t = 1)]
    pub ids: u32,
    /// Ask for a virtual IP in each IKE SA (initiator).
    #[arg(long)]
    pub vip: bool,
    /// Virtual IPs to hand out, FIRST-LAST (responder).
    #[arg(long)]
    pub pool: Option<String>,
    /// Force UDP encapsulation (ESP in UDP 4500).
    #[arg(long)]
    pub encap: bool,
    /// Count a tunnel only when an echo through it is answered.
    #[arg(long)]
    pub verify: bool,
    /// After all tunnels are up, probe this many picked at random.
    #[arg(long, default_value_t = 0)]
    pub verify_sample: usize,
    /// The echo's destination: the responder's inner address.
    #[arg(long)]
    pub inner_dst: Option<Ipv4Addr>,
    /// The echo's source when the tunnel has no virtual IP.
    #[arg(long)]
    pub inner_src: Option<IpAddr>,
    /// Tunnel counts at which to report the rate so far (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub milestones: Vec<u64>,
    /// Stop at the first failure or at 0.1 % retransmissions.
    #[arg(long)]
    pub stop: bool,
    /// Give up after this many seconds (initiator).
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
    /// Answer for this long (responder).
    #[arg(long, default_value_t = 60.0)]
    pub seconds: f64,
    /// First retransmission after this many ms (doubled each time).
    #[arg(long, default_value_t = 1000)]
    pub retransmit_ms: u64,
    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// The run's state when the tunnel count reached a milestone.
#[derive(Debug, Default, Serialize, Clone)]
pub struct Milestone {
    pub tunnels: u64,
    /// Since the first initiation.
    pub seconds: f64,
    /// Over the segment since the previous milestone.
    pub segment_per_sec: f64,
    pub retransmits: u64,
    pub messages_sent: u64,
}

/// What `--verify` or `--verify-sample` measured.
#[derive(Debug, Default, Serialize)]
pub struct VerifyReport {
    pub probed: u64,
    pub verified: u64,
    pub failed: u64,
    pub latency_us_p50: u32,
    pub latency_us_p99: u32,
    pub latency_us_max: u32,
    /// ESP packets that matched no probe.
    pub stray: u64,
}

impl VerifyReport {
    fn of(v: &mut Verifier) -> VerifyReport {
        let (p50, p99, max) = v.latency();
        VerifyReport {
            probed: v.verified + v.failed,
            verified: v.verified,
            failed: v.failed,
            latency_us_p50: p50,
            latency_us_p99: p99,
            latency_us_max: max,
            stray: v.stray,
        }
    }
}

/// What a run measured.
#[derive(Debug, Default, Serialize)]
pub struct IkeReport {
    pub mode: &'static str,
    pub auth: String,
    pub proposal: String,
    pub tunnels: u64,
    /// Child SAs up (IKE SAs with their first child).
    pub established: u64,
    /// Tunnels that did not count: IKE failures, then verify failures.
    pub failed: u64,
    pub failures: BTreeMap<String, u64>,
    /// From the first initiation to the last tunnel counted.
    pub seconds: f64,
    /// Tunnels counted a second (with `--verify`: verified ones).
    pub setups_per_sec: f64,
    /// Child SAs up a second (until the last one), verified or not.
    pub ike_setups_per_sec: f64,
    pub retransmits: u64,
    pub messages_sent: u64,
    /// Retransmissions over IKE messages sent, in percent.
    pub retransmit_pct: f64,
    /// This process's CPU time per tunnel set up, in microseconds.
    pub cpu_us_per_tunnel: f64,
    pub milestones: Vec<Milestone>,
    /// Why `--stop` ended the run early, if it did.
    pub stopped_by: Option<String>,
    /// `--verify`: every tunnel as it came up.
    pub verify: Option<VerifyReport>,
    /// `--verify-sample`: the sample after all were up.
    pub sample: Option<VerifyReport>,
    /// Responder with `--verify`: echoes answered, ESP dropped.
    pub esp_answered: u64,
    pub esp_dropped: u64,
}

impl std::fmt::Display for IkeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "ike mode={} auth={} proposal={} tunnels={} established={} failed={} seconds={:.3} setups_per_sec={:.1} \
             ike_setups_per_sec={:.1} retransmits={} messages={} retransmit_pct={:.3} cpu_us_per_tunnel={:.1}",
            self.mode,
            self.auth,
            self.proposal,
            self.tunnels,
            self.established,
            self.failed,
            self.seconds,
            self.setups_per_sec,
            self.ike_setups_per_sec,
            self.retransmits,
            self.messages_sent,
            self.retransmit_pct,
            self.cpu_us_per_tunnel
        )?;
        for (name, v) in [("verify", &self.verify), ("sample", &self.sample)] {
            if let Some(v) = v {
                writeln!(
                    f,
                    "{name} probed={} verified={} verify_failed={} latency_us_p50={} latency_us_p99={} latency_us_max={} stray={}",
                    v.probed, v.verified, v.failed, v.latency_us_p50, v.latency_us_p99, v.latency_us_max, v.stray
                )?;
            }
        }
        for m in &self.milestones {
            writeln!(
                f,
                "milestone tunnels={} at_seconds={:.3} segment_per_sec={:.1} retransmits={} messages={}",
                m.tunnels, m.seconds, m.segment_per_sec, m.retransmits, m.messages_sent
            )?;
        }
        if let Some(why) = &self.stopped_by {
            writeln!(f, "stopped_by: {why}")?;
        }
        if self.mode == "responder" && (self.esp_answered + self.esp_dropped) > 0 {
            writeln!(f, "esp answered={} dropped={}", self.esp_answered, self.esp_dropped)?;
        }
        for (why, n) in &self.failures {
            writeln!(f, "  failure {why}: {n}")?;
        }
        Ok(())
    }
}

/// The process's CPU time so far.
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn parse_pool(s: &str) -> Result<(IpAddr, IpAddr), String> {
    let (a, b) = s.split_once('-').ok_or_else(|| format!("--pool {s}: FIRST-LAST"))?;
    let a: IpAddr = a.trim().parse().map_err(|e| format!("--pool {s}: {e}"))?;
    let b: IpAddr = b.trim().parse().map_err(|e| format!("--pool {s}: {e}"))?;
    if a.is_ipv4() != b.is_ipv4() || a > b {
        return Err(format!("--pool {s}: FIRST-LAST of one family, in order"));
    }
    Ok((a, b))
}

/// The authentication and the identity it implies.
fn auth(a: &IkeArgs) -> Result<(AuthConfig, Identity), String> {
    let id = |default: Identity| match &a.local_id {
        Some(s) => Identity::parse(s).map_err(|e| format!("--local-id: {e}")),
        None => Ok(default),
    };
    match a.auth.as_str() {
        "psk" => Ok((
            AuthConfig::Psk(Zeroizing::new(a.psk.as_bytes().to_vec())),
            id(Identity::Fqdn("bench.example".into()))?,
        )),
        "pubkey" => {
            let (Some(cert), Some(key)) = (&a.cert, &a.key) else {
                return Err("--auth pubkey needs --cert and --key".into());
            };
            if a.ca.is_empty() {
                return Err("--auth pubkey needs --ca".into());
            }
            let creds =
                tern_ike::auth::Credentials::load(cert, key, &a.ca).map_err(|e| format!("--auth pubkey: {e}"))?;
            let me = creds.identity();
            Ok((AuthConfig::Pubkey(Arc::new(creds)), id(me)?))
        }
        other => Err(format!("--auth {other}: psk or pubkey")),
    }
}

fn peer(a: &IkeArgs, remote: Option<IpAddr>) -> Result<PeerConfig, String> {
    let proposals = vec![Proposal::parse(&a.proposal, Protocol::Ike).map_err(|e| format!("--proposal: {e}"))?];
    let esp_proposals =
        vec![Proposal::parse(&a.esp_proposal, Protocol::Esp).map_err(|e| format!("--esp-proposal: {e}"))?];
    let remote_id = a.remote_id.as_deref().map(Identity::parse).transpose().map_err(|e| format!("--remote-id: {e}"))?;
    let (auth, local_id) = auth(a)?;
    let v6 = a.local.is_ipv6();
    Ok(PeerConfig {
        name: if remote.is_some() { "bench".into() } else { "any".into() },
        local: a.local,
        remote,
        local_id,
        remote_id,
        auth,
        proposals,
        esp_proposals,
        encap: a.encap,
        tunnel: None,
        local_ts: vec![TrafficSelector::any(v6)],
        remote_ts: vec![TrafficSelector::any(v6)],
        pool: a.pool.as_deref().map(parse_pool).transpose()?,
        start: false,
        ike_rekey: None,
        child_rekey: None,
        dpd: None,
    })
}

fn settings(a: &IkeArgs) -> Settings {
    Settings {
        retransmit_base: Duration::from_millis(a.retransmit_ms.max(1)),
        max_half_open: usize::MAX / 2,
        max_half_open_per_peer: usize::MAX / 2,
        cookie_threshold: usize::MAX / 2,
        ..Settings::default()
    }
}

/// A uniform sample of the child SAs (reservoir sampling, Algorithm R).
struct Reservoir {
    k: usize,
    seen: u64,
    rng: u64,
    kept: Vec<ChildSa>,
}

impl Reservoir {
    fn new(k: usize) -> Reservoir {
        let seed = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1;
        Reservoir { k, seen: 0, rng: seed, kept: Vec::new() }
    }

    /// xorshift64*.
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn offer(&mut self, c: Box<ChildSa>) {
        self.seen += 1;
        if self.kept.len() < self.k {
            self.kept.push(*c);
        } else if self.k > 0 {
            let j = self.next() % self.seen;
            if let Some(slot) = self.kept.get_mut(j as usize) {
                *slot = *c;
            }
        }
    }
}

/// The initiator's state.
struct Gen<'a> {
    a: &'a IkeArgs,
    ike: Ike,
    net: Net,
    up: u64,
    failed: u64,
    failures: BTreeMap<String, u64>,
    last_up: Option<Instant>,
    last_counted: Option<Instant>,
    /// `--verify`: every tunnel; then `--verify-sample`'s.
    each: Option<Verifier>,
    sample: Option<Verifier>,
    reservoir: Reservoir,
    last_verify_poll: Instant,
    /// What `net` reads into.
    buf: Vec<u8>,
}

impl Gen<'_> {
    /// Tunnels counted (verified with `--verify`) and failed (both ways).
    fn counted(&self) -> u64 {
        match &self.each {
            Some(v) => v.verified,
            None => self.up,
        }
    }

    fn done(&self) -> u64 {
        self.counted() + self.failed + self.each.as_ref().map_or(0, |v| v.failed)
    }

    fn drain(&mut self) {
        let outs: Vec<Output> = self.ike.drain().collect();
        for o in outs {
            match o {
                Output::Send { local, remote, data } => self.net.send(local, remote, data),
                Output::InstallChild(c) => {
                    self.up += 1;
                    let now = Instant::now();
                    self.last_up = Some(now);
                    match &mut self.each {
                        Some(v) => {
                            v.start(&mut self.net, &c, self.a.inner_src);
                        }
                        None => self.last_counted = Some(now),
                    }
                    if self.a.verify_sample > 0 {
                        self.reservoir.offer(c);
                    }
                }
                Output::IkeSaDown { reason, .. } if !reason.contains("delete") => {
                    self.failed += 1;
                    *self.failures.entry(reason).or_default() += 1;
                }
                _ => {}
            }
        }
    }

    fn datagram(&mut self, d: Datagram) {
        match d {
            Datagram::Ike { local, from, msg } => {
                self.ike.handle(Instant::now(), SystemTime::now(), local, from, msg);
                self.drain();
            }
            Datagram::Esp { esp, .. } => {
                let v = match (&mut self.sample, &mut self.each) {
                    (Some(v), _) | (None, Some(v)) => v,
                    (None, None) => return,
                };
                if v.answer(esp) && self.sample.is_none() {
                    self.last_counted = Some(Instant::now());
                }
            }
        }
    }

    /// One turn: send what is queued, wait up to `wait` for datagrams,
    /// take up to [`RECV_BATCH`] of them, run the timers.
    fn step(&mut self, wait: Duration) -> Result<(), String> {
        let mut buf = std::mem::take(&mut self.buf);
        if self.net.wait(wait) {
            for _ in 0..RECV_BATCH {
                let Some(d) = self.net.recv(&mut buf) else { break };
                self.datagram(d);
            }
        }
        self.buf = buf;
        let now = Instant::now();
        self.ike.poll(now);
        self.drain();
        if now.saturating_duration_since(self.last_verify_poll) >= Duration::from_millis(20) {
            self.last_verify_poll = now;
            for v in [&mut self.each, &mut self.sample].into_iter().flatten() {
                v.poll(&mut self.net, now);
            }
        }
        Ok(())
    }
}

/// The initiator's peer configurations' names (`--ids`).
fn peer_names(a: &IkeArgs) -> Result<Vec<String>, String> {
    match a.ids {
        0 => Err("--ids 0: one or more".into()),
        1 => Ok(vec!["bench".into()]),
        n if a.auth != "psk" => Err(format!("--ids {n}: PSK only (a certificate names one identity)")),
        n if a.local_id.is_some() => Err(format!("--ids {n} makes the identities: no --local-id")),
        n => Ok((0..n).map(|i| format!("bench{i}")).collect()),
    }
}

/// Issue 40's stop criterion: a failure, or retransmissions above 0.1 %
/// of the IKE messages sent (once there are enough to say).
fn stop_reason(failed: u64, retransmits: u64, sent: u64) -> Option<String> {
    if failed > 0 {
        return Some(format!("{failed} failed"));
    }
    if sent >= 1000 && retransmits * 1000 > sent {
        return Some(format!("retransmissions {retransmits} of {sent} messages (> 0.1 %)"));
    }
    None
}

/// Runs the initiator: the report.
pub fn initiate(a: &IkeArgs) -> Result<IkeReport, String> {
    let responder = a.responder.ok_or("--responder missing (or --respond)")?;
    let probing = a.verify || a.verify_sample > 0;
    let inner_dst = match (probing, a.inner_dst) {
        (true, None) => return Err("--verify and --verify-sample need --inner-dst".into()),
        (_, d) => d.unwrap_or(Ipv4Addr::UNSPECIFIED),
    };
    let names = peer_names(a)?;
    let mut ike = Ike::new(settings(a));
    let mut peers = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let mut p = peer(a, Some(responder))?;
        if names.len() > 1 {
            p.local_id = Identity::Fqdn(format!("bench{i}.example"));
        }
        p.name = name.clone();
        peers.push(p);
    }
    ike.set_peers(Instant::now(), peers);
    if a.vip {
        for name in &names {
            ike.request_virtual_ip(name, Some(false));
        }
    }
    let net = Net::open(a.local, probing && !a.encap)?;
    let mut milestones: Vec<u64> = a.milestones.iter().copied().filter(|&m| m > 0 && m <= a.tunnels).collect();
    milestones.sort_unstable();
    milestones.dedup();
    let mut g = Gen {
        a,
        ike,
        net,
        up: 0,
        failed: 0,
        failures: BTreeMap::new(),
        last_up: None,
        last_counted: None,
        each: a.verify.then(|| Verifier::new(inner_dst)),
        sample: None,
        reservoir: Reservoir::new(a.verify_sample),
        last_verify_poll: Instant::now(),
        buf: net::buffer(),
    };
    let mut marks = Vec::new();
    let mut stopped_by = None;
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let give_up = t0 + Duration::from_secs_f64(a.timeout);
    let mut started = 0u64;
    while g.done() < a.tunnels && Instant::now() < give_up {
        let now = Instant::now();
        if a.stop && stopped_by.is_none() {
            let failed = g.failed + g.each.as_ref().map_or(0, |v| v.failed);
            stopped_by = stop_reason(failed, g.ike.stats().retransmits, g.net.sent);
        }
        if stopped_by.is_some() && started == g.done() {
            break;
        }
        // Initiations due: by the rate and the window.
        let by_rate = if a.rate > 0.0 { ((now - t0).as_secs_f64() * a.rate) as u64 + 1 } else { u64::MAX };
        while stopped_by.is_none() && started < a.tunnels && started < by_rate && started - g.done() < a.window.max(1) {
            g.ike.initiate(now, &names[(started % names.len() as u64) as usize])?;
            started += 1;
        }
        g.drain();
        let wait = g.ike.next_deadline().map_or(Duration::from_millis(5), |d| d.saturating_duration_since(now));
        g.step(wait.min(Duration::from_millis(if a.rate > 0.0 { 1 } else { 5 })))?;
        while let Some(&m) = milestones.first() {
            if g.counted() < m {
                break;
            }
            milestones.remove(0);
            let secs = (Instant::now() - t0).as_secs_f64();
            let (prev_n, prev_s) = marks.last().map_or((0, 0.0), |p: &Milestone| (p.tunnels, p.seconds));
            let seg = secs - prev_s;
            marks.push(Milestone {
                tunnels: m,
                seconds: secs,
                segment_per_sec: if seg > 0.0 { (m - prev_n) as f64 / seg } else { 0.0 },
                retransmits: g.ike.stats().retransmits,
                messages_sent: g.net.sent,
            });
        }
    }
    let cpu = cpu_time().saturating_sub(cpu0);
    let st = g.ike.stats();
    // The sample: after all are up, through tunnels picked at random.
    if a.verify_sample > 0 {
        // At most a window of probes in flight, as the setups were: a
        // thousand at once overflowed receive buffers on either side and
        // showed as a second of latency.
        let kept = std::mem::take(&mut g.reservoir.kept);
        let mut next = kept.iter();
        g.sample = Some(Verifier::new(inner_dst));
        let end = Instant::now() + Duration::from_secs(10 + kept.len() as u64 / 100);
        while let Some(v) = g.sample.as_mut() {
            while v.in_flight() < usize::try_from(a.window).unwrap_or(usize::MAX).max(1) {
                let Some(c) = next.next() else { break };
                v.start(&mut g.net, c, a.inner_src);
            }
            if v.in_flight() == 0 {
                break;
            }
            if Instant::now() >= end {
                v.give_up(next.len());
                break;
            }
            g.step(Duration::from_millis(5))?;
        }
    }
    let secs = g.last_counted.map_or(0.0, |l| (l - t0).as_secs_f64());
    let ike_secs = g.last_up.map_or(0.0, |l| (l - t0).as_secs_f64());
    let counted = g.counted();
    let mut failures = std::mem::take(&mut g.failures);
    let mut failed = g.failed;
    let verify = g.each.as_mut().map(|v| {
        failed += v.failed;
        for (why, n) in &v.failures {
            *failures.entry(why.clone()).or_default() += n;
        }
        VerifyReport::of(v)
    });
    let sample = g.sample.as_mut().map(|v| {
        for (why, n) in &v.failures {
            *failures.entry(format!("sample {why}")).or_default() += n;
        }
        VerifyReport::of(v)
    });
    if stopped_by.is_none() && counted + failed < a.tunnels {
        *failures.entry("timeout (the run's)".into()).or_default() += a.tunnels - counted - failed;
        failed = a.tunnels - counted;
    }
    Ok(IkeReport {
        mode: "initiator",
        auth: a.auth.clone(),
        proposal: a.proposal.clone(),
        tunnels: a.tunnels,
        established: g.up,
        failed,
        failures,
        seconds: secs,
        setups_per_sec: if secs > 0.0 { counted as f64 / secs } else { 0.0 },
        ike_setups_per_sec: if ike_secs > 0.0 { g.up as f64 / ike_secs } else { 0.0 },
        retransmits: st.retransmits,
        messages_sent: g.net.sent,
        retransmit_pct: if g.net.sent > 0 { st.retransmits as f64 * 100.0 / g.net.sent as f64 } else { 0.0 },
        cpu_us_per_tunnel: if counted > 0 { cpu.as_secs_f64() * 1e6 / counted as f64 } else { 0.0 },
        milestones: marks,
        stopped_by,
        verify,
        sample,
        esp_answered: 0,
        esp_dropped: 0,
    })
}

/// Datagrams taken in one turn before the engine's timers run and its
/// answers go out.
const RECV_BATCH: usize = 64;

/// What the bare responder counted.
#[derive(Default)]
struct Responded {
    up: u64,
    failed: u64,
    failures: BTreeMap<String, u64>,
    first: Option<Instant>,
    last_up: Option<Instant>,
}

/// Runs the responder for `--seconds`: the report (the time is from the
/// first datagram to the last tunnel).
///
/// One thread: the sockets polled together ([`Net::wait`]) until one is
/// readable or the engine's next deadline, up to [`RECV_BATCH`] datagrams
/// handed to the engine, its timers run, its answers queued and sent
/// together at the next wait.
pub fn respond(a: &IkeArgs) -> Result<IkeReport, String> {
    let mut ike = Ike::new(settings(a));
    ike.set_peers(Instant::now(), vec![peer(a, None)?]);
    let mut net = Net::open(a.local, a.verify)?;
    let mut answerer = a.verify.then(Answerer::default);
    let mut buf = net::buffer();
    let mut r = Responded::default();
    let cpu0 = cpu_time();
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let wait = ike.next_deadline().map_or(Duration::from_millis(100), |d| d.saturating_duration_since(now));
        if net.wait(wait.min(end - now).min(Duration::from_millis(100))) {
            for _ in 0..RECV_BATCH {
                match net.recv(&mut buf) {
                    None => break,
                    Some(Datagram::Ike { local, from, msg }) => {
                        let now = Instant::now();
                        r.first.get_or_insert(now);
                        ike.handle(now, SystemTime::now(), local, from, msg);
                    }
                    Some(Datagram::Esp { esp, .. }) => {
                        if let Some(ans) = &mut answerer {
                            ans.answer(&mut net, esp);
                        }
                    }
                }
            }
        }
        ike.poll(Instant::now());
        for o in ike.drain() {
            responder_output(o, &mut net, &mut answerer, &mut r);
        }
    }
    net.flush();
    let cpu = cpu_time().saturating_sub(cpu0);
    let secs = match (r.first, r.last_up) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    let st = ike.stats();
    let (esp_answered, esp_dropped) = answerer.map_or((0, 0), |a| (a.answered, a.dropped));
    let up = r.up;
    Ok(IkeReport {
        mode: "responder",
        auth: a.auth.clone(),
        proposal: a.proposal.clone(),
        tunnels: up,
        established: up,
        failed: r.failed,
        failures: r.failures,
        seconds: secs,
        setups_per_sec: if secs > 0.0 { up as f64 / secs } else { 0.0 },
        ike_setups_per_sec: if secs > 0.0 { up as f64 / secs } else { 0.0 },
        retransmits: st.retransmits,
        messages_sent: net.sent,
        retransmit_pct: if net.sent > 0 { st.retransmits as f64 * 100.0 / net.sent as f64 } else { 0.0 },
        cpu_us_per_tunnel: if up > 0 { cpu.as_secs_f64() * 1e6 / up as f64 } else { 0.0 },
        esp_answered,
        esp_dropped,
        ..IkeReport::default()
    })
}

/// One of the responder engine's outputs.
fn responder_output(o: Output, net: &mut Net, answerer: &mut Option<Answerer>, r: &mut Responded) {
    match o {
        Output::Send { local, remote, data } => net.send(local, remote, data),
        Output::InstallChild(c) => {
            r.up += 1;
            r.last_up = Some(Instant::now());
            if let Some(ans) = answerer
                && let Err(e) = ans.install(&c)
            {
                *r.failures.entry(format!("install: {e}")).or_default() += 1;
            }
        }
        Output::DeleteChild { inbound_spi, .. } => {
            if let Some(ans) = answerer {
                ans.remove(inbound_spi);
            }
        }
        Output::IkeSaDown { reason, .. } if !reason.contains("delete") => {
            r.failed += 1;
            *r.failures.entry(reason).or_default() += 1;
        }
        _ => {}
    }
}

/// `tern-bench ike`: runs and prints.
pub fn run(a: &IkeArgs) -> Result<(), String> {
    let r = if a.respond { respond(a)? } else { initiate(a)? };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?);
    } else {
        print!("{r}");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
