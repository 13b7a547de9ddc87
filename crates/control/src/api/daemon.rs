//! The daemon's control loop: each round it polls the router (neighbours,
//! sources), runs the API requests that arrived, moves captured frames,
//! publishes the facts the metrics endpoint shows, and applies a reload
//! when SIGHUP asked for one.

use super::server::ApiServer;
use crate::commands::{self, OpsState};
use crate::metrics::{ControlFacts, MetricsServer, MetricsSource};
use crate::router::Router;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use tern_rcu::Published;

/// How soon after a request the facts follow it (at most).
const FACTS_AFTER_REQUEST_NS: u64 = 50_000_000;

/// How the daemon runs beside the router.
#[derive(Clone, Debug, Default)]
pub struct DaemonOptions {
    /// The configuration file `config reload` and SIGHUP read.
    pub config_path: Option<PathBuf>,
    /// Override the configuration's `[api] socket` (tests).
    pub socket: Option<PathBuf>,
    /// Override the configuration's `[metrics] listen` ("" disables).
    pub metrics: Option<String>,
}

pub struct Daemon {
    api: ApiServer,
    metrics: Option<MetricsServer>,
    facts: Published<ControlFacts>,
    last_facts_ns: u64,
    /// A request came since the facts were last published.
    stale: bool,
    pub state: OpsState,
}

impl Daemon {
    /// Opens the API socket and the metrics endpoint of a started router.
    pub fn start(router: &Router, opts: DaemonOptions) -> Result<Daemon, String> {
        let cfg = &router.plan().config;
        let socket = opts.socket.unwrap_or_else(|| PathBuf::from(&cfg.api.socket));
        let sock_opts = super::server::SocketOptions {
            group: cfg.api.group.clone(),
            mode: cfg.api.mode().map_err(|e| format!("[api] socket_mode: {e}"))?,
            idle: std::time::Duration::from_millis(cfg.api.idle_timeout_ms),
        };
        let api = ApiServer::bind_waking(&socket, &sock_opts, router.bell()).map_err(|e| format!("API socket: {e}"))?;
        let facts = Published::new(ControlFacts::default());
        let listen = opts.metrics.unwrap_or_else(|| cfg.metrics.listen.clone());
        let metrics = if listen.is_empty() {
            None
        } else {
            let src = MetricsSource {
                workers: router.workers(),
                ifaces: router.shared().ifaces.clone(),
                facts: facts.clone(),
            };
            Some(MetricsServer::start(&listen, src).map_err(|e| e.to_string())?)
        };
        let mut d =
            Daemon { api, metrics, facts, last_facts_ns: 0, stale: false, state: OpsState::new(opts.config_path) };
        d.publish_facts(router);
        Ok(d)
    }

    pub fn socket(&self) -> &std::path::Path {
        self.api.path()
    }

    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::local_addr)
    }

    fn publish_facts(&mut self, router: &Router) {
        let st = &self.state;
        let acl_hits =
            router.plan().acls.iter().filter_map(|s| Some((s.name.clone(), router.acl_hits(&s.name)?))).collect();
        self.facts.publish(ControlFacts {
            fib: commands::route_summary(router),
            neighbors: router.neighbors().len(),
            api_requests: st.requests,
            api_errors: st.request_errors,
            reloads_ok: st.reloads_ok,
            reloads_failed: st.reloads_failed,
            uptime_ns: router.uptime_ns(),
            trace_remaining: router.trace().remaining(),
            acl_hits,
            lane: commands::lane_counts(router),
            links: router.link_states(),
            sources: router.route_sources(),
            vrrp: router.vrrp_show(),
            ipsec: router.ipsec().metrics().clone(),
            ike: router.ike().metrics(),
            kernel_esp: router.plan().config.linux.linux_mode().then(|| router.kernel_esp().stats()),
        });
        self.last_facts_ns = tern_engine::clock::now_ns();
        self.stale = false;
    }

    /// One round of the daemon's own work. Returns true if it did some.
    pub fn poll(&mut self, router: &mut Router) -> bool {
        let mut did = self.api.poll(router, &mut self.state);
        did |= self.state.poll(router);
        self.facts_due(router, did);
        did
    }

    /// Publishes the facts if they are due: every 200 ms, and within
    /// [`FACTS_AFTER_REQUEST_NS`] of a request. Not after every request:
    /// they once cost a walk of the RIB (about 10 ms with a full table;
    /// the FIB's figures are counters now), and a stream of route batches
    /// has no use for them between batches.
    fn facts_due(&mut self, router: &Router, requested: bool) {
        self.stale |= requested;
        let since = tern_engine::clock::now_ns().saturating_sub(self.last_facts_ns);
        if since >= 200_000_000 || (self.stale && since >= FACTS_AFTER_REQUEST_NS) {
            self.publish_facts(router);
        }
    }

    /// SIGHUP: reload the configuration file, logging the outcome.
    pub fn reload(&mut self, router: &mut Router) {
        match commands::config_reload(router, &mut self.state) {
            Ok(r) if r.changes.is_empty() => log::info!("SIGHUP: configuration unchanged"),
            Ok(r) => log::info!("SIGHUP: {} change(s) applied", r.changes.len()),
            Err(_) => {} // config_reload logged why
        }
        self.publish_facts(router);
    }

    /// Runs the control loop until `stop`; `hup` asks for a reload.
    pub fn run(&mut self, router: &mut Router, stop: &AtomicBool, hup: &AtomicBool) {
        let mut pause = crate::router::IdlePause::default();
        let bell = router.bell();
        while !stop.load(Ordering::Relaxed) {
            if hup.swap(false, Ordering::Relaxed) {
                self.reload(router);
            }
            // Rings from here on wake the pause below (the round may
            // miss what they announce).
            bell.clear();
            let busy = router.poll() | self.poll(router);
            // Idle: pause (2 ms, 20 ms once quiet), but wake for an API
            // request or for the IKE service's child SAs (the router's
            // bell, which both ring).
            let wait = router.bound_pause(pause.next(busy));
            if !busy && self.api.wait(router, &mut self.state, wait) {
                pause.reset();
                self.facts_due(router, true);
            }
        }
    }
}
