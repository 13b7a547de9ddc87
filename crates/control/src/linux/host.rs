//! What Linux mode changes on a device tern takes over, and undoes.
//!
//! In standalone mode tern silences the kernel on its devices
//! (`tern_io::netdev::quiet_kernel`: no forwarding, no ARP answers, IPv6
//! off). In Linux mode the kernel keeps its addresses and answers for them
//! (ARP, ND, ping, BGP, OSPF, SSH): with AF_PACKET it sees every frame
//! anyway, so tern stays silent for local traffic (the nodes' `Params::
//! linux_owns_local`). What the kernel must not do is forward: transit
//! frames reach it too (they carry the device's MAC), and a second copy
//! would leave. So:
//!
//! * `ipv4/conf/DEV/forwarding = 0`: no IPv4 routing of what arrives there
//!   (and no ICMP errors for it).
//! * `ipv6/conf/DEV/disable_ipv6 = 0`: IPv6 stays on for ND, OSPFv3, BGP.
//! * `ipv6/conf/DEV/accept_ra = 0`: a router does not configure itself
//!   from router advertisements.
//! * `ipv6/conf/all/forwarding = 0` when it is 1: IPv6 forwarding is not a
//!   per-device switch in Linux (the `all` value decides for every input
//!   device; since Linux 6.17 `force_forwarding` can enable single devices
//!   again). This changes every device of the namespace; it is logged, and
//!   restored on exit.
//!
//! Every value is restored, in reverse order, when the guard is dropped.

use tern_io::netdev::{sysctl_read, sysctl_write};

/// Saved sysctl values, restored on drop.
#[derive(Debug, Default)]
pub struct SysctlGuard {
    pub what: String,
    saved: Vec<(String, String)>,
}

impl SysctlGuard {
    fn set(&mut self, rel: &str, val: &str) -> Result<(), String> {
        let old = match sysctl_read(rel) {
            Ok(v) => v,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && rel.starts_with("ipv6/") => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        if old != val {
            sysctl_write(rel, val).map_err(|e| e.to_string())?;
            self.saved.push((rel.to_string(), old));
        }
        Ok(())
    }

    /// Leaves the settings in place.
    pub fn keep(mut self) {
        self.saved.clear();
    }

    /// How many settings this guard changed.
    pub fn changed(&self) -> usize {
        self.saved.len()
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        while let Some((rel, old)) = self.saved.pop() {
            if let Err(e) = sysctl_write(&rel, &old) {
                log::warn!("{}: restoring {rel} = {old}: {e}", self.what);
            }
        }
    }
}

/// Prepares `dev` for Linux mode (see the module documentation).
pub fn take_over(dev: &str) -> Result<SysctlGuard, String> {
    let mut g = SysctlGuard { what: format!("device {dev}"), saved: Vec::new() };
    g.set(&format!("ipv4/conf/{dev}/forwarding"), "0")?;
    g.set(&format!("ipv6/conf/{dev}/disable_ipv6"), "0")?;
    g.set(&format!("ipv6/conf/{dev}/accept_ra"), "0")?;
    Ok(g)
}

/// Stops kernel IPv6 forwarding in this namespace if it is on.
pub fn ipv6_forwarding_off() -> Result<SysctlGuard, String> {
    let mut g = SysctlGuard { what: "ipv6/conf/all".into(), saved: Vec::new() };
    if sysctl_read("ipv6/conf/all/forwarding").is_ok_and(|v| v == "1") {
        log::warn!(
            "linux mode: turning kernel IPv6 forwarding off in this namespace (net.ipv6.conf.all.forwarding=0) so transit IPv6 is forwarded once, by tern; restored on exit"
        );
        g.set("ipv6/conf/all/forwarding", "0")?;
    }
    Ok(g)
}
