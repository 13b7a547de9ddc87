//! Linux as the control plane (issue 8): the kernel mirror (netlink), the
//! FPM server for FRR's zebra, and the Linux mode in which the kernel
//! keeps the router's own traffic while tern carries the transit.
//!
//! ```toml
//! [linux]
//! mode = "linux"              # or "standalone" (the default)
//! fpm_listen = "127.0.0.1:2620"
//! ```
//!
//! * [`kernel`]: links, addresses, neighbours, routes and next-hop objects
//!   of the devices tern drives, mirrored from rtnetlink (source `kernel`).
//! * [`fpm`]: zebra's `dplane_fpm_nl` stream (source `fpm`).
//! * [`host`]: what Linux mode changes on the taken-over devices;
//!   [`saved`]: every device setting tern changes, kept in a state file
//!   so a crash can be undone.
//! * [`nl`]: the rtnetlink wire format both use; [`sync`]: route messages
//!   to RIB operations.
//!
//! The operator's guide is docs/LINUX.md.

pub mod fpm;
pub mod host;
pub mod kernel;
pub mod nl;
pub mod saved;
pub mod socket;
pub mod sync;

use crate::config::{Driver, IfacePlanKind, Plan};
use crate::source::ControlSource;
use serde::{Deserialize, Serialize};

/// Who answers for the router's own addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinuxMode {
    /// tern owns the devices: it answers ARP/ND and ping for its
    /// addresses, and the kernel is silenced on them.
    #[default]
    Standalone,
    /// Linux owns the router's own traffic (BGP, OSPF, SSH, ping, ARP/ND
    /// for its addresses) and keeps its addresses on the devices; tern
    /// forwards transit traffic and mirrors the kernel.
    Linux,
}

/// How the router's own traffic reaches Linux in Linux mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exception {
    /// The kernel sees the devices' frames itself: AF_PACKET taps every
    /// frame, the AF_XDP steering program passes the router's (XDP_PASS).
    /// The kernel keeps its addresses on the devices.
    #[default]
    Kernel,
    /// tern owns the devices (the kernel is silenced on them as in
    /// standalone mode); each port gets a TAP device `tern-<interface>`
    /// with the interface's MAC, where the kernel keeps the addresses.
    /// What Linux owns is punted into the TAP, and what Linux writes to it
    /// leaves the interface unchanged.
    Tap,
}

/// The kernel name of the TAP device of tern interface `name`.
pub fn tap_name(name: &str) -> String {
    format!("tern-{name}")
}

/// `[linux]` configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinuxCfg {
    pub mode: LinuxMode,
    /// How the router's own traffic reaches Linux (Linux mode): "kernel"
    /// (the kernel sees the devices' frames) or "tap".
    pub exception: Exception,
    /// Mirror the kernel (routes, addresses, neighbours of the driven
    /// devices). Default: on in Linux mode, off in standalone mode.
    pub kernel: Option<bool>,
    /// Routing table mirrored from the kernel and taken from FPM.
    pub table: u32,
    /// Where the FPM server listens for zebra ("" = no FPM server). FRR's
    /// default is 127.0.0.1:2620.
    pub fpm_listen: String,
    /// After zebra (re)connects: quiet time after which routes it did not
    /// resend are removed.
    pub fpm_resync_quiet_ms: u64,
    /// ... but not sooner than this after the connection (a restarted
    /// zebra hears from bgpd and ospfd again only seconds later).
    pub fpm_resync_hold_ms: u64,
    /// Routes of a disconnected zebra are kept this long.
    pub fpm_stale_ms: u64,
    /// Kernel routes of these protocol numbers are ignored by the mirror.
    /// Default: FRR's protocols when the FPM server is on (they arrive over
    /// FPM), none otherwise.
    pub kernel_skip_protocols: Option<Vec<u8>>,
    /// Netlink socket receive buffer (bytes).
    pub netlink_rcvbuf: usize,
    /// Control-loop time each source may use per round (microseconds).
    pub poll_budget_us: u64,
    /// The TAP exception path's policer: packets per second each worker
    /// hands to one interface's TAP (0: unlimited), and its burst. The
    /// excess is dropped as `linux-punt/policed`. Live on reload.
    pub punt_rate: u32,
    pub punt_burst: u32,
}

impl Default for LinuxCfg {
    fn default() -> Self {
        LinuxCfg {
            mode: LinuxMode::Standalone,
            exception: Exception::Kernel,
            kernel: None,
            table: nl::RT_TABLE_MAIN,
            fpm_listen: String::new(),
            fpm_resync_quiet_ms: 1000,
            fpm_resync_hold_ms: 10_000,
            fpm_stale_ms: 120_000,
            kernel_skip_protocols: None,
            netlink_rcvbuf: 64 << 20,
            poll_budget_us: 5000,
            punt_rate: tern_nodes::state::DEFAULT_PUNT_RATE,
            punt_burst: tern_nodes::state::DEFAULT_PUNT_BURST,
        }
    }
}

/// rtm_protocol values FRR's zebra uses (`zebra/rt_netlink.h`): zebra
/// itself (static, kernel-installed by zebra), babel, and 186..=198 (BGP,
/// IS-IS, OSPF, RIP, RIPng, NHRP, EIGRP, LDP, SHARP, PBR, static,
/// OpenFabric, SR-TE).
pub const FRR_PROTOCOLS: [u8; 15] = [11, 42, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 198];

impl LinuxCfg {
    pub fn linux_mode(&self) -> bool {
        self.mode == LinuxMode::Linux
    }
    /// Linux mode with the TAP exception path.
    pub fn tap_exception(&self) -> bool {
        self.linux_mode() && self.exception == Exception::Tap
    }
    /// The settings a reload may change live (the policer), as they are
    /// in `other`, the rest as here.
    pub fn with_live_of(&self, other: &LinuxCfg) -> LinuxCfg {
        LinuxCfg { punt_rate: other.punt_rate, punt_burst: other.punt_burst, ..self.clone() }
    }
    pub fn kernel_enabled(&self) -> bool {
        self.kernel.unwrap_or(self.linux_mode())
    }
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !self.fpm_listen.is_empty() && self.fpm_listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(("fpm_listen", format!("{:?} is not address:port", self.fpm_listen)));
        }
        if self.poll_budget_us == 0 || self.poll_budget_us > 1_000_000 {
            return Err(("poll_budget_us", format!("{}: need 1..=1000000", self.poll_budget_us)));
        }
        if self.fpm_resync_quiet_ms == 0 {
            return Err(("fpm_resync_quiet_ms", "must be positive".into()));
        }
        Ok(())
    }
}

/// The tern interfaces backed by a kernel device, with that device's
/// name: ports by their `device`, VLAN sub-interfaces by their tern name
/// (a kernel VLAN device of the same name); with the TAP exception path
/// both by their TAP, where the kernel keeps the interface's addresses.
pub fn driven(plan: &Plan) -> Vec<kernel::Driven> {
    let tap = plan.config.linux.tap_exception();
    plan.ifaces
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let device = match &p.kind {
                IfacePlanKind::Port { .. } | IfacePlanKind::Vlan { .. } if tap => tap_name(&p.name),
                IfacePlanKind::Port { device: Some(d), driver } if *driver != Driver::Memory => d.clone(),
                IfacePlanKind::Vlan { .. } => p.name.clone(),
                _ => return None,
            };
            Some(kernel::Driven { tern: i as u16, device, v4: p.v4.clone(), v6: p.v6.clone() })
        })
        .collect()
}

/// The current kernel index of each driven device (missing ones left out).
pub fn resolve_if_map(driven: &[kernel::Driven]) -> sync::IfMap {
    let mut m = sync::IfMap::default();
    for d in driven {
        if let Ok(k) = tern_io::netdev::ifindex(&d.device) {
            m.insert(k, d.tern);
        }
    }
    m
}

/// The sources the configuration asks for.
pub fn sources(plan: &Plan) -> Result<Vec<Box<dyn ControlSource>>, String> {
    let cfg = &plan.config.linux;
    cfg.validate().map_err(|(k, m)| format!("[linux] {k}: {m}"))?;
    let budget_ns = cfg.poll_budget_us * 1000;
    let mut v: Vec<Box<dyn ControlSource>> = Vec::new();
    let devices = driven(plan);
    if cfg.kernel_enabled() {
        let skip = match &cfg.kernel_skip_protocols {
            Some(p) => p.clone(),
            None if !cfg.fpm_listen.is_empty() => FRR_PROTOCOLS.to_vec(),
            None => Vec::new(),
        };
        let kcfg = kernel::KernelConfig {
            linux_mode: cfg.linux_mode(),
            table: cfg.table,
            skip_protocols: skip,
            rcvbuf: cfg.netlink_rcvbuf,
            budget_ns,
            batch: 8192,
        };
        let m =
            kernel::KernelMirror::open(kcfg, devices.clone()).map_err(|e| format!("kernel mirror: netlink: {e}"))?;
        v.push(Box::new(m));
    }
    if !cfg.fpm_listen.is_empty() {
        let listen = cfg.fpm_listen.parse().map_err(|_| format!("[linux] fpm_listen: {:?}", cfg.fpm_listen))?;
        let fcfg = fpm::FpmConfig {
            listen,
            table: cfg.table,
            resync_quiet_ns: cfg.fpm_resync_quiet_ms * 1_000_000,
            resync_hold_ns: cfg.fpm_resync_hold_ms * 1_000_000,
            stale_ns: cfg.fpm_stale_ms * 1_000_000,
            budget_ns,
            batch: 8192,
        };
        let mut s = fpm::FpmServer::bind(fcfg, resolve_if_map(&devices))
            .map_err(|e| format!("fpm: listen on {}: {e}", cfg.fpm_listen))?;
        s.set_resolver(Box::new(move || resolve_if_map(&devices)));
        log::info!("fpm: listening on {listen}");
        v.push(Box::new(s));
    }
    Ok(v)
}
