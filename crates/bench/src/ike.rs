//! `tern-bench ike`: an IKEv2 load generator on tern's own initiator
//! (issue 40's setup-rate figures), and a bare responder on tern's engine
//! to point it at.
//!
//! One [`tern_ike::Ike`] engine over two UDP sockets (ports 500 and 4500
//! of `--local`, the 4500 one with RFC 3948's non-ESP marker) sets up
//! `--tunnels` IKE SAs, each with its first child SA, with the responder
//! at `--responder`: one peer configuration initiated again and again, at
//! `--rate` new IKE SAs a second (0: as fast as `--window`, the IKE SAs in
//! flight at once, allows). A tunnel counts as set up when its child SA
//! comes out of the engine (`Output::InstallChild`; nothing is installed:
//! the generator has no data plane). Prints the setup rate (tunnels over
//! the time from the first initiation to the last tunnel), the
//! retransmissions (and their share of the IKE messages sent), the
//! failures by reason and the generator's own CPU time per tunnel.
//!
//! ```text
//! tern-bench ike --local 10.0.2.1 --responder 10.0.2.2 --tunnels 2000 [--rate 0] [--window 64]
//!     [--psk SECRET] [--proposal aes128gcm16-prfsha256-x25519] [--esp-proposal aes128gcm16]
//!     [--local-id bench.example] [--remote-id ID] [--timeout 120] [--json]
//! tern-bench ike --respond --local 10.0.2.2 [--seconds 60] [--psk ...] [--proposal ...]
//! ```
//! With `--respond` it is the responder: a template (`remote` any, any
//! identity the PSK proves) answering on ports 500 and 4500 of `--local`
//! for `--seconds`, then printing how many IKE SAs it set up.
//!
//! strongSwan as the responder needs a connection that takes any identity
//! and several IKE SAs from one address (`unique = never`);
//! `crates/bench/scripts/ike_setup_rate.sh` builds that rig and runs both.

use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};
use tern_ike::proposal::{Proposal, Protocol};
use tern_ike::{AuthConfig, Identity, Ike, Output, PeerConfig, Settings, TrafficSelector};
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
    /// IKE SAs in flight (initiated, neither up nor failed) at most.
    #[arg(long, default_value_t = 64)]
    pub window: u64,
    /// The pre-shared key.
    #[arg(long, default_value = "tern-bench-ike-psk")]
    pub psk: String,
    /// IKE proposal, strongSwan's syntax.
    #[arg(long, default_value = "aes128gcm16-prfsha256-x25519")]
    pub proposal: String,
    /// Child SA proposal.
    #[arg(long, default_value = "aes128gcm16")]
    pub esp_proposal: String,
    /// This side's identity.
    #[arg(long, default_value = "bench.example")]
    pub local_id: String,
    /// The identity the responder must prove (default: any).
    #[arg(long)]
    pub remote_id: Option<String>,
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

/// What a run measured.
#[derive(Debug, Default, Serialize)]
pub struct IkeReport {
    pub mode: &'static str,
    pub proposal: String,
    pub tunnels: u64,
    pub established: u64,
    pub failed: u64,
    pub failures: BTreeMap<String, u64>,
    /// From the first initiation to the last tunnel up.
    pub seconds: f64,
    pub setups_per_sec: f64,
    pub retransmits: u64,
    pub messages_sent: u64,
    /// Retransmissions over IKE messages sent, in percent.
    pub retransmit_pct: f64,
    /// This process's CPU time per tunnel set up, in microseconds.
    pub cpu_us_per_tunnel: f64,
}

impl std::fmt::Display for IkeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "ike mode={} proposal={} tunnels={} established={} failed={} seconds={:.3} setups_per_sec={:.1} \
             retransmits={} messages={} retransmit_pct={:.3} cpu_us_per_tunnel={:.1}",
            self.mode,
            self.proposal,
            self.tunnels,
            self.established,
            self.failed,
            self.seconds,
            self.setups_per_sec,
            self.retransmits,
            self.messages_sent,
            self.retransmit_pct,
            self.cpu_us_per_tunnel
        )?;
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

fn peer(a: &IkeArgs, remote: Option<IpAddr>) -> Result<PeerConfig, String> {
    let proposals = vec![Proposal::parse(&a.proposal, Protocol::Ike).map_err(|e| format!("--proposal: {e}"))?];
    let esp_proposals =
        vec![Proposal::parse(&a.esp_proposal, Protocol::Esp).map_err(|e| format!("--esp-proposal: {e}"))?];
    let remote_id = a.remote_id.as_deref().map(Identity::parse).transpose().map_err(|e| format!("--remote-id: {e}"))?;
    let v6 = a.local.is_ipv6();
    Ok(PeerConfig {
        name: if remote.is_some() { "bench".into() } else { "any".into() },
        local: a.local,
        remote,
        local_id: Identity::parse(&a.local_id).map_err(|e| format!("--local-id: {e}"))?,
        remote_id,
        auth: AuthConfig::Psk(Zeroizing::new(a.psk.as_bytes().to_vec())),
        proposals,
        esp_proposals,
        encap: false,
        tunnel: None,
        local_ts: vec![TrafficSelector::any(v6)],
        remote_ts: vec![TrafficSelector::any(v6)],
        pool: None,
        start: false,
        ike_rekey: None,
        child_rekey: None,
        dpd: None,
    })
}

/// The two sockets (ports 500 and 4500) and a channel their reader
/// threads feed: (the local address it came to, from, the IKE message
/// without the non-ESP marker).
struct Net {
    socks: [Arc<UdpSocket>; 2],
    /// The sockets' addresses (500, 4500), known without a system call.
    locals: [SocketAddr; 2],
    rx: mpsc::Receiver<(SocketAddr, SocketAddr, Vec<u8>)>,
    sent: u64,
}

impl Net {
    /// With `readers`, a thread per socket feeds `rx` (the initiator);
    /// without, the sockets are non-blocking and the caller reads them
    /// (the responder's loop, [`Net::receive`]).
    fn open(local: IpAddr, readers: bool) -> Result<Net, String> {
        let (tx, rx) = mpsc::channel();
        let mut socks = Vec::new();
        for port in [500u16, 4500] {
            let addr = SocketAddr::new(local, port);
            let s = Arc::new(UdpSocket::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?);
            if !readers {
                s.set_nonblocking(true).map_err(|e| format!("{addr}: {e}"))?;
                socks.push(s);
                continue;
            }
            let r = Arc::clone(&s);
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while let Ok((n, from)) = r.recv_from(&mut buf) {
                    let d = &buf[..n];
                    // Port 4500: IKE behind the non-ESP marker; ESP
                    // (anything else) is not ours.
                    let msg = if port == 4500 {
                        match d.strip_prefix(&[0u8; 4]) {
                            Some(m) => m,
                            None => continue,
                        }
                    } else {
                        d
                    };
                    if tx.send((addr, from, msg.to_vec())).is_err() {
                        return;
                    }
                }
            });
            socks.push(s);
        }
        let socks: [Arc<UdpSocket>; 2] = socks.try_into().map_err(|_| "two sockets".to_string())?;
        let locals = [SocketAddr::new(local, 500), SocketAddr::new(local, 4500)];
        Ok(Net { socks, locals, rx, sent: 0 })
    }

    /// The responder's receive: waits up to `wait` for either socket to
    /// be readable (poll(2)), then hands every datagram queued on both to
    /// `each` (local address, from, the IKE message). Datagrams not IKE
    /// (port 4500 without the non-ESP marker) are skipped.
    fn receive(&self, wait: Duration, buf: &mut [u8], mut each: impl FnMut(SocketAddr, SocketAddr, &[u8])) {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds = [PollFd::new(&*self.socks[0], PollFlags::IN), PollFd::new(&*self.socks[1], PollFlags::IN)];
        let timeout = Timespec { tv_sec: wait.as_secs() as _, tv_nsec: wait.subsec_nanos() as _ };
        if poll(&mut fds, Some(&timeout)).unwrap_or(0) == 0 {
            return;
        }
        // Only the readable ones: a read that would block is a wasted
        // system call.
        let ready = fds.map(|f| !f.revents().is_empty());
        for ((s, &local), _) in self.socks.iter().zip(&self.locals).zip(ready).filter(|(_, r)| *r) {
            while let Ok((n, from)) = s.recv_from(buf) {
                let Some(d) = buf.get(..n) else { continue };
                let msg = if local.port() == 4500 {
                    match d.strip_prefix(&[0u8; 4]) {
                        Some(m) => m,
                        None => continue,
                    }
                } else {
                    d
                };
                each(local, from, msg);
            }
        }
    }

    fn send(&mut self, local: SocketAddr, remote: SocketAddr, data: &[u8]) {
        self.sent += 1;
        let r = if local.port() == 4500 {
            let mut v = Vec::with_capacity(data.len() + 4);
            v.extend_from_slice(&[0u8; 4]);
            v.extend_from_slice(data);
            self.socks[1].send_to(&v, remote)
        } else {
            self.socks[0].send_to(data, remote)
        };
        // A refused send (ENOBUFS, ICMP errors) is a loss the engine's
        // retransmission covers.
        let _ = r;
    }
}

#[derive(Default)]
struct Tally {
    up: u64,
    failed: u64,
    failures: BTreeMap<String, u64>,
    last_up: Option<Instant>,
}

fn drain(ike: &mut Ike, net: &mut Net, t: &mut Tally) {
    let outs: Vec<Output> = ike.drain().collect();
    for o in outs {
        match o {
            Output::Send { local, remote, data } => net.send(local, remote, &data),
            Output::InstallChild(_) => {
                t.up += 1;
                t.last_up = Some(Instant::now());
            }
            Output::IkeSaDown { reason, .. } if !reason.contains("delete") => {
                t.failed += 1;
                *t.failures.entry(reason).or_default() += 1;
            }
            _ => {}
        }
    }
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

/// Runs the initiator: the report.
pub fn initiate(a: &IkeArgs) -> Result<IkeReport, String> {
    let responder = a.responder.ok_or("--responder missing (or --respond)")?;
    let mut ike = Ike::new(settings(a));
    let now = Instant::now();
    ike.set_peers(now, vec![peer(a, Some(responder))?]);
    let mut net = Net::open(a.local, true)?;
    let mut t = Tally::default();
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let give_up = t0 + Duration::from_secs_f64(a.timeout);
    let mut started = 0u64;
    while t.up + t.failed < a.tunnels && Instant::now() < give_up {
        let now = Instant::now();
        // Initiations due: by the rate and the window.
        let by_rate = if a.rate > 0.0 { ((now - t0).as_secs_f64() * a.rate) as u64 + 1 } else { u64::MAX };
        while started < a.tunnels && started < by_rate && started - t.up - t.failed < a.window.max(1) {
            ike.initiate(now, "bench")?;
            started += 1;
        }
        drain(&mut ike, &mut net, &mut t);
        let wait = ike.next_deadline().map_or(Duration::from_millis(5), |d| d.saturating_duration_since(now));
        let wait = wait.min(Duration::from_millis(if a.rate > 0.0 { 1 } else { 5 }));
        match net.rx.recv_timeout(wait) {
            Ok((local, from, msg)) => {
                ike.handle(Instant::now(), SystemTime::now(), local, from, &msg);
                // Take whatever else is queued before polling timers.
                while let Ok((local, from, msg)) = net.rx.try_recv() {
                    ike.handle(Instant::now(), SystemTime::now(), local, from, &msg);
                    drain(&mut ike, &mut net, &mut t);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err("the sockets' readers stopped".into()),
        }
        ike.poll(Instant::now());
        drain(&mut ike, &mut net, &mut t);
    }
    let cpu = cpu_time().saturating_sub(cpu0);
    let secs = t.last_up.map_or(0.0, |l| (l - t0).as_secs_f64());
    let st = ike.stats();
    if t.up + t.failed < a.tunnels {
        *t.failures.entry("timeout (the run's)".into()).or_default() += a.tunnels - t.up - t.failed;
        t.failed = a.tunnels - t.up;
    }
    Ok(IkeReport {
        mode: "initiator",
        proposal: a.proposal.clone(),
        tunnels: a.tunnels,
        established: t.up,
        failed: t.failed,
        failures: t.failures,
        seconds: secs,
        setups_per_sec: if secs > 0.0 { t.up as f64 / secs } else { 0.0 },
        retransmits: st.retransmits,
        messages_sent: net.sent,
        retransmit_pct: if net.sent > 0 { st.retransmits as f64 * 100.0 / net.sent as f64 } else { 0.0 },
        cpu_us_per_tunnel: if t.up > 0 { cpu.as_secs_f64() * 1e6 / t.up as f64 } else { 0.0 },
    })
}

/// Runs the responder for `--seconds`: the report (the time is from the
/// first to the last tunnel). One thread reads both sockets and answers:
/// a reader thread per socket handing datagrams over a channel cost about
/// 15 us of CPU per tunnel more (two thread switches per datagram).
pub fn respond(a: &IkeArgs) -> Result<IkeReport, String> {
    let mut ike = Ike::new(settings(a));
    ike.set_peers(Instant::now(), vec![peer(a, None)?]);
    let mut net = Net::open(a.local, false)?;
    let mut t = Tally::default();
    let cpu0 = cpu_time();
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    let mut first: Option<Instant> = None;
    let mut buf = vec![0u8; 65536];
    let mut batch: Vec<(SocketAddr, SocketAddr, Vec<u8>)> = Vec::new();
    while Instant::now() < end {
        net.receive(Duration::from_millis(10), &mut buf, |local, from, msg| batch.push((local, from, msg.to_vec())));
        for (local, from, msg) in batch.drain(..) {
            first.get_or_insert_with(Instant::now);
            ike.handle(Instant::now(), SystemTime::now(), local, from, &msg);
            drain(&mut ike, &mut net, &mut t);
        }
        ike.poll(Instant::now());
        drain(&mut ike, &mut net, &mut t);
    }
    let cpu = cpu_time().saturating_sub(cpu0);
    let secs = match (first, t.last_up) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    let st = ike.stats();
    Ok(IkeReport {
        mode: "responder",
        proposal: a.proposal.clone(),
        tunnels: t.up,
        established: t.up,
        failed: t.failed,
        failures: t.failures,
        seconds: secs,
        setups_per_sec: if secs > 0.0 { t.up as f64 / secs } else { 0.0 },
        retransmits: st.retransmits,
        messages_sent: net.sent,
        retransmit_pct: if net.sent > 0 { st.retransmits as f64 * 100.0 / net.sent as f64 } else { 0.0 },
        cpu_us_per_tunnel: if t.up > 0 { cpu.as_secs_f64() * 1e6 / t.up as f64 } else { 0.0 },
    })
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
mod tests {
    use super::*;

    fn args(local: &str) -> IkeArgs {
        IkeArgs {
            local: local.parse().expect("addr"),
            responder: None,
            respond: false,
            tunnels: 1,
            rate: 0.0,
            window: 1,
            psk: "a-long-enough-psk".into(),
            proposal: "aes128gcm16-prfsha256-x25519".into(),
            esp_proposal: "aes128gcm16".into(),
            local_id: "bench.example".into(),
            remote_id: None,
            timeout: 1.0,
            seconds: 1.0,
            retransmit_ms: 1000,
            json: false,
        }
    }

    #[test]
    fn bad_proposals_and_ids_are_errors_naming_the_option() {
        let mut a = args("127.0.0.1");
        a.proposal = "aes128-md5-modp768".into();
        let e = peer(&a, None).expect_err("refused");
        assert!(e.starts_with("--proposal"), "{e}");
        let mut a = args("127.0.0.1");
        a.esp_proposal = "nonsense".into();
        assert!(peer(&a, None).expect_err("refused").starts_with("--esp-proposal"));
        let p = peer(&args("127.0.0.1"), Some("127.0.0.2".parse().expect("addr"))).expect("fine");
        assert_eq!((p.name.as_str(), p.local_id.clone()), ("bench", Identity::Fqdn("bench.example".into())));
        assert!(initiate(&args("127.0.0.1")).expect_err("no responder").contains("--responder"));
    }
}
