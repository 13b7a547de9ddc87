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

// The `[linux]` section is the configuration's (config depends on no
// subsystem); its old paths here stay.
pub use crate::config::{Exception, LinuxCfg, LinuxMode, tap_name};

/// rtm_protocol values FRR's zebra uses (`zebra/rt_netlink.h`): zebra
/// itself (static, kernel-installed by zebra), babel, and 186..=198 (BGP,
/// IS-IS, OSPF, RIP, RIPng, NHRP, EIGRP, LDP, SHARP, PBR, static,
/// OpenFabric, SR-TE).
pub const FRR_PROTOCOLS: [u8; 15] = [11, 42, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 198];

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

#[cfg(test)]
mod schema_tests {
    #[test]
    fn the_default_table_is_the_kernels_main_one() {
        assert_eq!(super::LinuxCfg::default().table, super::nl::RT_TABLE_MAIN);
    }
}
