//! The interfaces' devices, as one service of the [`Router`]: each
//! port's device facts (MAC, MTU), the watch on the devices' links
//! (crates/control/src/links.rs), and what the router changed on the host
//! to take the devices over (kernel silenced or Linux mode's settings,
//! TAPs' guards, the saved originals), undone on shutdown.
//!
//! [`Router`]: crate::router::Router

use crate::config::{Driver, IfacePlan, IfacePlanKind, Plan};
use crate::links::{LinkState, LinkWatch};
use crate::router::StartError;
use tern_io::TapPort;
use tern_nodes::state::IfTable;
use tern_rcu::Published;

fn err(s: impl Into<String>) -> StartError {
    StartError(s.into())
}

pub struct Interfaces {
    /// Each port's device MAC and MTU (a sub-interface added by a reload
    /// takes its parent's).
    devs: Vec<DeviceInfo>,
    /// The ports' devices as netlink reports them.
    links: LinkWatch,
    host: HostState,
}

impl Interfaces {
    pub(crate) fn new(devs: Vec<DeviceInfo>, links: LinkWatch, host: HostState) -> Interfaces {
        Interfaces { devs, links, host }
    }

    /// The ports' device facts, by port index.
    pub(crate) fn devs(&self) -> &[DeviceInfo] {
        &self.devs
    }

    /// Port `port`'s device has a new MTU.
    pub(crate) fn set_dev_mtu(&mut self, port: u16, mtu: u16) {
        if let Some(d) = self.devs.get_mut(usize::from(port)) {
            d.mtu = mtu;
        }
    }

    /// Port `port`'s device has MAC `mac`; false when it had it already
    /// (or is no port).
    pub(crate) fn set_dev_mac(&mut self, port: u16, mac: [u8; 6]) -> bool {
        let Some(d) = self.devs.get_mut(usize::from(port)) else { return false };
        if d.mac == mac {
            return false;
        }
        d.mac = mac;
        true
    }

    /// Makes `macs` the virtual MACs `owner` has on interface `ifindex`
    /// (a port or VLAN sub-interface; the other owner's stay, see
    /// [`tern_nodes::state::Iface::set_vmacs`]) and publishes the
    /// interface table if that changed anything: `ethernet-input` takes
    /// frames to them as frames to the interface's own MAC from its next
    /// batch, the XDP lane from its next sync (the control loop's next
    /// round). Returns whether anything changed. Sending from a virtual
    /// MAC needs nothing here: a frame given to `control-inject`
    /// ([`tern_nodes::state::Inject`]) leaves as built, its source MAC
    /// included.
    pub fn set_vmacs(
        &mut self,
        ifaces: &Published<IfTable>,
        ifindex: u16,
        owner: tern_nodes::state::VmacOwner,
        macs: &[[u8; 6]],
    ) -> bool {
        let mut t = (*ifaces.load()).clone();
        if !t.set_vmacs(ifindex, owner, macs) {
            return false;
        }
        ifaces.publish(t);
        true
    }

    /// The state of port `port`'s device, if it has one.
    pub fn link(&self, port: u16) -> Option<&LinkState> {
        self.links.get(port)
    }

    /// Whether interface `port` may forward as far as its device goes.
    pub fn usable(&self, port: u16) -> bool {
        self.links.usable(port)
    }

    pub fn links(&self) -> &LinkWatch {
        &self.links
    }

    pub(crate) fn links_mut(&mut self) -> &mut LinkWatch {
        &mut self.links
    }

    /// Creates the TAP of interface `i` of `plan` ([`open_tap`]).
    pub(crate) fn open_tap(&mut self, plan: &Plan, i: usize, workers: u16) -> Result<Option<Vec<TapPort>>, StartError> {
        open_tap(plan, i, &self.devs, workers, &mut self.host)
    }

    /// Drops the Linux-mode settings guard of a TAP that goes away.
    pub(crate) fn forget_tap_guard(&mut self, tap: &str) {
        self.host.linux.retain(|g| g.dev.as_deref() != Some(tap));
    }

    /// Linux mode with AF_XDP: the router's addresses (also those `ip
    /// addr` adds later) pass the steering programs of `xdp` to the kernel.
    pub(crate) fn sync_steering(&mut self, ifaces: &Published<IfTable>, xdp: &mut crate::afxdp::XdpDevices) {
        self.host.steer.sync(ifaces, |a| xdp.add_local(a));
    }

    /// Standalone mode with AF_XDP: the router's addresses go to the
    /// steering programs, which police tern's own traffic per class.
    pub(crate) fn sync_tern_steering(&mut self, ifaces: &Published<IfTable>, xdp: &mut crate::afxdp::XdpDevices) {
        self.host.steer.sync(ifaces, |a| xdp.add_tern_local(a));
    }

    /// Puts back the kernel settings of the devices tern silenced.
    pub(crate) fn restore_kernel(&mut self) {
        for q in self.host.quiet.drain(..) {
            let name = q.ifname().to_string();
            if let Err(e) = q.restore() {
                log::warn!("restoring kernel settings of {name}: {e}");
            }
        }
    }
}

/// What the router changes on the host and must undo on shutdown.
#[derive(Default)]
pub(crate) struct HostState {
    quiet: Vec<tern_io::netdev::KernelQuiet>,
    /// Linux mode's device settings (restored when dropped).
    linux: Vec<crate::linux::host::SysctlGuard>,
    /// Linux mode with AF_XDP: addresses the steering program passes up.
    steer: crate::linux::host::LocalSteering,
    /// The devices' original settings, in a state file that survives a
    /// crash; dropped last, it puts back what the guards above do not
    /// (offloads, link, NAPI settings).
    saved: Option<crate::linux::saved::SavedHost>,
}

impl HostState {
    /// Takes over the device of port `p` with lane `driver` (see
    /// [`take_over`]), its original settings recorded first. `tap`: the
    /// TAP exception path, where the kernel's side is the TAP and the
    /// device delivers nothing locally.
    pub(crate) fn take_over_port(
        &mut self,
        dev: &str,
        driver: &Driver,
        up: bool,
        tap: bool,
        linux_mode: bool,
    ) -> Result<(), StartError> {
        // The originals on disk before the first change (and what a
        // crashed tern left here put back first).
        if self.saved.is_none() {
            let dir = crate::linux::saved::state_dir();
            self.saved = Some(crate::linux::saved::SavedHost::open(&dir).map_err(err)?);
        }
        if let Some(s) = self.saved.as_mut() {
            s.record(dev).map_err(|e| err(format!("device {dev}: {e}")))?;
        }
        take_over(dev, driver, up, self, linux_mode && !tap)?;
        if tap {
            self.linux.push(crate::linux::host::no_local_delivery(dev).map_err(err)?);
        }
        Ok(())
    }

    /// Linux mode: IPv6 forwarding off where tern took devices over, so
    /// the kernel answers ND there as a router's host side.
    pub(crate) fn ipv6_forwarding_off(&mut self) -> Result<(), StartError> {
        if !self.linux.is_empty() {
            let all = crate::linux::host::ipv6_forwarding_off(&self.linux).map_err(err)?;
            self.linux.push(all);
        }
        Ok(())
    }
}

/// Device facts the router needs for a port interface.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceInfo {
    pub(crate) mac: [u8; 6],
    pub(crate) mtu: u16,
}

pub(crate) fn device_info(plan: &IfacePlan) -> Result<DeviceInfo, StartError> {
    let IfacePlanKind::Port { device, driver } = &plan.kind else {
        return Err(err(format!("interface {}: not a port", plan.name)));
    };
    if *driver == Driver::Memory {
        let mac = plan.mac.ok_or_else(|| err(format!("interface {}: memory interfaces need a mac", plan.name)))?;
        return Ok(DeviceInfo { mac, mtu: plan.mtu.unwrap_or(1500) });
    }
    let dev = device.as_deref().unwrap_or_default();
    let what = |e: tern_io::Error| err(format!("interface {}: device {dev}: {e}", plan.name));
    let mac = match plan.mac {
        Some(m) => m,
        None => tern_io::netdev::mac(dev).map_err(what)?,
    };
    // The device's MTU bounds what it receives: above what a lane's buffer
    // holds, larger frames would be lost in the kernel (AF_XDP, the XDP
    // lane) whatever the interface's `mtu` says.
    let dev_mtu = tern_io::netdev::mtu(dev).map_err(what)?;
    let limit = crate::config::lane_mtu_limit(false);
    if dev_mtu > u32::from(limit) {
        return Err(err(format!(
            "interface {}: device {dev} has MTU {dev_mtu}, above the {limit} the lanes carry (no jumbo frames): lower the device's MTU (ip link set {dev} mtu {limit})",
            plan.name
        )));
    }
    let mtu = plan.mtu.unwrap_or(u16::try_from(dev_mtu).unwrap_or(limit));
    Ok(DeviceInfo { mac, mtu })
}

/// Creates the TAP device of each port and VLAN sub-interface
/// ([`open_tap`]). Returns the queues by interface index.
pub(crate) fn open_taps(
    plan: &Plan,
    devs: &[DeviceInfo],
    workers: u16,
    host: &mut HostState,
) -> Result<Vec<(u16, Vec<TapPort>)>, StartError> {
    let mut out = Vec::new();
    for i in 0..plan.ifaces.len() {
        let Some(queues) = open_tap(plan, i, devs, workers, host)? else { continue };
        out.push((i as u16, queues));
    }
    Ok(out)
}

/// Creates the TAP device of port or VLAN sub-interface `i` of `plan`
/// (`tern-<interface>`, one queue per worker) with the interface's MAC
/// and MTU, up as the interface is, and prepares it for Linux mode
/// (`crate::linux::host::take_over`, whose guard goes to `host`). None for
/// interfaces without a TAP (tunnels). The device goes away when its
/// queues are closed.
pub(crate) fn open_tap(
    plan: &Plan,
    i: usize,
    devs: &[DeviceInfo],
    workers: u16,
    host: &mut HostState,
) -> Result<Option<Vec<TapPort>>, StartError> {
    let Some(p) = plan.ifaces.get(i) else { return Ok(None) };
    let (dev, up) = match p.kind {
        IfacePlanKind::Port { .. } => (devs.get(i), p.up),
        IfacePlanKind::Vlan { parent, .. } => {
            (devs.get(parent), p.up && plan.ifaces.get(parent).is_some_and(|pp| pp.up))
        }
        IfacePlanKind::Gre { .. } | IfacePlanKind::Ipsec { .. } | IfacePlanKind::Removed => return Ok(None),
    };
    let d = dev.ok_or_else(|| err(format!("interface {}: no device facts", p.name)))?;
    let name = crate::linux::tap_name(&p.name);
    let what = |e: tern_io::Error| err(format!("interface {}: TAP {name}: {e}", p.name));
    let queues = (0..workers).map(|_| TapPort::open_queue(&name).map_err(what)).collect::<Result<Vec<_>, _>>()?;
    tern_io::netdev::set_mac(&name, d.mac).map_err(what)?;
    tern_io::netdev::set_mtu(&name, u32::from(p.mtu.unwrap_or(d.mtu))).map_err(what)?;
    host.linux.push(crate::linux::host::take_over(&name).map_err(|e| err(format!("TAP {name}: {e}")))?);
    tern_io::netdev::set_up(&name, up).map_err(what)?;
    log::info!("interface {}: exceptions to Linux through TAP {name}", p.name);
    Ok(Some(queues))
}

/// Prepares a Linux device for tern: link up, no large-frame offloads (so
/// AF_PACKET sees wire-sized frames), and the kernel told not to forward
/// or answer on it (standalone mode), or not forward while Linux keeps
/// its addresses and answers for them (Linux mode, `crate::linux::host`).
fn take_over(dev: &str, driver: &Driver, up: bool, host: &mut HostState, linux_mode: bool) -> Result<(), StartError> {
    let what = |e: tern_io::Error| err(format!("device {dev}: {e}"));
    tern_io::netdev::ifindex(dev).map_err(what)?;
    if up {
        tern_io::netdev::set_up(dev, true).map_err(what)?;
    }
    if let Err(e) = tern_io::netdev::disable_large_frame_offloads(dev) {
        log::warn!("device {dev}: cannot turn off offloads: {e}");
    }
    if let Some(w) = crate::router::veth_warning(dev, driver) {
        log::warn!("{w}");
    }
    if linux_mode {
        host.linux.push(crate::linux::host::take_over(dev).map_err(|e| err(format!("device {dev}: {e}")))?);
        return Ok(());
    }
    host.quiet.push(tern_io::netdev::quiet_kernel(dev).map_err(what)?);
    match tern_io::netdev::addresses(dev) {
        Ok(a) if !a.is_empty() => {
            log::warn!("device {dev}: the kernel still holds addresses on it; tern owns forwarding there now")
        }
        _ => {}
    }
    Ok(())
}

impl Interfaces {
    /// Takes over a device that was removed and created again under the
    /// same name: its settings recorded (a new ifindex: new originals),
    /// the old device's guards forgotten, then as at start.
    pub(crate) fn take_over_again(&mut self, plan: &Plan, dev: &str, up: bool) -> Result<(), StartError> {
        if let Some(s) = self.host.saved.as_mut() {
            s.record(dev).map_err(|e| err(format!("device {dev}: {e}")))?;
        }
        let (old, keep): (Vec<_>, Vec<_>) = self.host.quiet.drain(..).partition(|q| q.ifname() == dev);
        self.host.quiet = keep;
        old.into_iter().for_each(tern_io::netdev::KernelQuiet::keep);
        let (old, keep): (Vec<_>, Vec<_>) = self.host.linux.drain(..).partition(|g| g.dev.as_deref() == Some(dev));
        self.host.linux = keep;
        old.into_iter().for_each(crate::linux::host::SysctlGuard::keep);
        let tap = plan.config.linux.tap_exception();
        let linux_mode = plan.config.linux.linux_mode() && !tap;
        let before = self.host.linux.len();
        let driver = plan
            .ifaces
            .iter()
            .find_map(|i| match &i.kind {
                IfacePlanKind::Port { device: Some(d), driver } if d == dev => Some(*driver),
                _ => None,
            })
            .unwrap_or(Driver::Auto);
        let driver = if tap && driver == Driver::Auto { Driver::Afpacket } else { driver };
        take_over(dev, &driver, up, &mut self.host, linux_mode)?;
        if tap {
            self.host.linux.push(crate::linux::host::no_local_delivery(dev).map_err(err)?);
        } else if linux_mode && self.host.linux.len() > before {
            // A router interface for ND again, as at start.
            let g = crate::linux::host::ipv6_forwarding_off(&self.host.linux[before..]).map_err(err)?;
            self.host.linux.push(g);
        }
        Ok(())
    }
}
