//! Following the devices under the router's ports (issue 36.4): link up
//! and down, removal and re-creation, from rtnetlink link notifications
//! (RTM_NEWLINK, RTM_DELLINK on RTMGRP_LINK).
//!
//! A port whose device is gone or administratively down stops forwarding:
//! its interface is published down (`interface show`, `tern_interface_up`),
//! so routes through it drop their packets as for `interface set NAME
//! down`, counted. Each change is logged and counted per interface
//! (`link_changes`, `tern_interface_link_changes_total`). A device that
//! comes back under the same name (a new ifindex) is taken over again
//! (settings recorded, link up, offloads off, kernel silenced) and what
//! tern had on it is attached again: on the AF_PACKET lane each worker's
//! socket; on the AF_XDP lane the steering program and each worker's
//! AF_XDP socket on its queue (joining the worker's UMEM); on the XDP lane
//! the lane program (its receive table and devmap entry follow the new
//! ifindex) and the workers' AF_XDP sockets that take its punts. If that
//! fails the interface stays down (`link: "detached"`), with a log line
//! saying why, and nothing of the attempt is left attached; the device's
//! next return tries again.
//!
//! A device's MTU change (`ip link set DEV mtu N`, the IFLA_MTU of a
//! notification) is applied to its interface as `interface set NAME mtu N`
//! would, logged and counted; one the lanes cannot carry is logged and
//! refused (issue 36.3).

use crate::config::{Driver, IfacePlanKind};
use crate::linux::nl::{self, Attrs, IFF_UP, IFLA_IFNAME, IFLA_MTU, NlMessages, RTM_DELLINK, RTM_NEWLINK, RTMGRP_LINK};
use crate::linux::socket::{NlSocket, Recv};
use crate::router::Router;

/// The state of one port's device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkState {
    /// The interface (port) index.
    pub port: u16,
    pub device: String,
    /// The device's ifindex; None while it is gone.
    pub ifindex: Option<u32>,
    /// Administratively up (IFF_UP).
    pub admin_up: bool,
    /// Carrier (IFF_LOWER_UP).
    pub carrier: bool,
    /// Changes seen (down, up, removed, re-created).
    pub changes: u64,
    /// The device returned, but its lane (AF_XDP, the XDP lane) could not
    /// be attached again: down until it returns again or tern restarts.
    pub detached: bool,
    /// The device's MTU as last reported (None: not known).
    pub mtu: Option<u32>,
}

impl LinkState {
    /// Whether the port can forward: the device exists and is up.
    pub fn usable(&self) -> bool {
        self.ifindex.is_some() && self.admin_up && !self.detached
    }

    /// "up", "no-carrier", "down", "absent" or "detached".
    pub fn describe(&self) -> &'static str {
        if self.detached && self.ifindex.is_some() {
            return "detached";
        }
        match (self.ifindex.is_some(), self.admin_up, self.carrier) {
            (false, _, _) => "absent",
            (true, false, _) => "down",
            (true, true, false) => "no-carrier",
            (true, true, true) => "up",
        }
    }
}

/// What changed on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkEvent {
    Down,
    Up,
    Removed,
    /// Back under the same name with a new ifindex.
    Recreated,
    /// The device's MTU changed (`ip link set DEV mtu N`) to this.
    Mtu(u32),
}

/// A link notification: (message type, ifindex, flags, name, MTU).
type LinkMsg = (u16, u32, u32, Option<String>, Option<u32>);

fn parse_link(ty: u16, payload: &[u8]) -> Option<LinkMsg> {
    // struct ifinfomsg: family u8, pad u8, type u16, index i32, flags u32,
    // change u32 (16 bytes), then attributes.
    let index = u32::from_ne_bytes(payload.get(4..8)?.try_into().ok()?);
    let flags = u32::from_ne_bytes(payload.get(8..12)?.try_into().ok()?);
    let mut name = None;
    let mut mtu = None;
    for a in Attrs::new(payload.get(16..)?) {
        let Ok((t, data)) = a else { break };
        if t == IFLA_IFNAME {
            let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
            name = std::str::from_utf8(&data[..end]).ok().map(str::to_string);
        } else if t == IFLA_MTU {
            mtu = data.get(..4).and_then(|b| b.try_into().ok()).map(u32::from_ne_bytes);
        }
    }
    Some((ty, index, flags, name, mtu))
}

/// Link notifications for the router's port devices.
pub struct LinkWatch {
    sock: Option<NlSocket>,
    links: Vec<LinkState>,
    buf: Vec<u8>,
}

impl LinkWatch {
    /// Watches `devices` ((port index, device name)); their state now is
    /// read with ioctls. Without a netlink socket (not permitted) nothing
    /// is followed, which is logged.
    pub fn new(devices: &[(u16, String)]) -> LinkWatch {
        let sock = if devices.is_empty() { Err(None) } else { NlSocket::open(RTMGRP_LINK, 1 << 20).map_err(Some) };
        let sock = match sock {
            Ok(s) => Some(s),
            Err(None) => None,
            Err(Some(e)) => {
                log::warn!("cannot follow link changes (netlink: {e}): a device removed under tern goes unnoticed");
                None
            }
        };
        let links = devices
            .iter()
            .map(|(port, dev)| {
                let mut l = LinkState {
                    port: *port,
                    device: dev.clone(),
                    ifindex: None,
                    admin_up: false,
                    carrier: false,
                    changes: 0,
                    detached: false,
                    mtu: None,
                };
                refresh(&mut l);
                l
            })
            .collect();
        LinkWatch { sock, links, buf: vec![0; 64 * 1024] }
    }

    /// The state of port `port`'s device, if it has one.
    pub fn get(&self, port: u16) -> Option<&LinkState> {
        self.links.iter().find(|l| l.port == port)
    }

    /// Whether interface `port` may forward as far as its device goes
    /// (true for interfaces without a device).
    pub fn usable(&self, port: u16) -> bool {
        self.get(port).is_none_or(LinkState::usable)
    }

    /// Reads pending notifications: the changes, in order.
    pub fn poll(&mut self) -> Vec<(usize, LinkEvent)> {
        let mut events = Vec::new();
        let Some(sock) = &self.sock else { return events };
        let mut resync = false;
        loop {
            match sock.recv(&mut self.buf) {
                Ok(Recv::Data(n)) => {
                    for m in NlMessages::new(&self.buf[..n]) {
                        let Ok(m) = m else { break };
                        if m.ty != RTM_NEWLINK && m.ty != RTM_DELLINK {
                            continue;
                        }
                        if let Some((ty, index, flags, name, mtu)) = parse_link(m.ty, m.payload) {
                            apply(&mut self.links, ty, index, flags, name.as_deref(), mtu, &mut events);
                        }
                    }
                }
                Ok(Recv::Empty) => break,
                Ok(Recv::Overrun) => resync = true,
                Err(e) => {
                    log::warn!("link notifications: {e}");
                    break;
                }
            }
        }
        if resync {
            // Notifications were lost: ask the kernel about each device.
            for (i, l) in self.links.iter_mut().enumerate() {
                let before = l.clone();
                refresh(l);
                if let Some(ev) = compare(&before, l) {
                    l.changes += 1;
                    events.push((i, ev));
                }
                if let (Some(a), Some(b)) = (before.mtu, l.mtu)
                    && a != b
                    && l.ifindex.is_some()
                {
                    l.changes += 1;
                    events.push((i, LinkEvent::Mtu(b)));
                }
            }
        }
        events
    }
}

/// Reads a device's state with ioctls.
fn refresh(l: &mut LinkState) {
    match (tern_io::netdev::ifindex(&l.device), tern_io::netdev::flags(&l.device)) {
        (Ok(i), Ok(f)) => {
            l.ifindex = Some(i);
            l.admin_up = f.up;
            l.carrier = f.running;
            l.mtu = tern_io::netdev::mtu(&l.device).ok();
        }
        _ => {
            l.ifindex = None;
            l.admin_up = false;
            l.carrier = false;
        }
    }
}

fn compare(before: &LinkState, after: &LinkState) -> Option<LinkEvent> {
    match (before.ifindex, after.ifindex) {
        (Some(_), None) => Some(LinkEvent::Removed),
        (None, Some(_)) => Some(LinkEvent::Recreated),
        (Some(a), Some(b)) if a != b => Some(LinkEvent::Recreated),
        _ if before.usable() && !after.usable() => Some(LinkEvent::Down),
        _ if !before.usable() && after.usable() => Some(LinkEvent::Up),
        _ => None,
    }
}

/// Applies one notification to the watched devices.
fn apply(
    links: &mut [LinkState],
    ty: u16,
    index: u32,
    flags: u32,
    name: Option<&str>,
    mtu: Option<u32>,
    events: &mut Vec<(usize, LinkEvent)>,
) {
    let by_index = links.iter().position(|l| l.ifindex == Some(index));
    let i = match (by_index, name) {
        (Some(i), _) => i,
        // A device of a watched name that tern does not hold: re-created.
        (None, Some(n)) if ty == RTM_NEWLINK => match links.iter().position(|l| l.device == n) {
            Some(i) => i,
            None => return,
        },
        _ => return,
    };
    let l = &mut links[i];
    let before = l.clone();
    if ty == RTM_DELLINK {
        l.ifindex = None;
        l.admin_up = false;
        l.carrier = false;
    } else {
        if name.is_some_and(|n| n != l.device) {
            // Renamed away: for tern the device of that name is gone.
            l.ifindex = None;
            l.admin_up = false;
            l.carrier = false;
        } else {
            l.ifindex = Some(index);
            l.admin_up = flags & IFF_UP != 0;
            l.carrier = flags & nl::IFF_LOWER_UP != 0;
        }
    }
    if let Some(ev) = compare(&before, l) {
        l.changes += 1;
        events.push((i, ev));
    }
    // The same device with another MTU (a re-created one is taken over
    // with whatever MTU it has, read then).
    if ty == RTM_NEWLINK
        && l.ifindex == Some(index)
        && before.ifindex == Some(index)
        && let Some(m) = mtu
        && l.mtu != Some(m)
    {
        let known = l.mtu.is_some();
        l.mtu = Some(m);
        if known {
            l.changes += 1;
            events.push((i, LinkEvent::Mtu(m)));
        }
    }
}

impl Router {
    /// Follows the ports' devices (see the module documentation). Returns
    /// true if something changed.
    pub(crate) fn poll_links(&mut self) -> bool {
        let events = self.interfaces.links_mut().poll();
        if events.is_empty() {
            return false;
        }
        let tap = self.plan.config.linux.tap_exception();
        for (i, ev) in events {
            let Some(l) = self.interfaces.links().links.get(i).cloned() else { continue };
            let name = self.plan.ifaces.get(usize::from(l.port)).map_or_else(String::new, |p| p.name.clone());
            if tap && !matches!(ev, LinkEvent::Mtu(_)) {
                self.follow_carrier(l.port, l.usable());
            }
            match ev {
                LinkEvent::Removed => {
                    log::warn!(
                        "interface {name}: device {} removed; the interface is down until a device of that name returns",
                        l.device
                    );
                    self.forget_neighbors(l.port);
                }
                LinkEvent::Down => {
                    // (Before a removal the kernel reports the device down;
                    // the removal's own line follows.)
                    if l.ifindex.is_some() {
                        log::warn!("interface {name}: device {} is down ({}); not forwarding", l.device, l.describe());
                    }
                    self.forget_neighbors(l.port);
                }
                LinkEvent::Up => log::info!("interface {name}: device {} is up again", l.device),
                LinkEvent::Mtu(m) => self.follow_mtu(l.port, &name, &l.device, m),
                LinkEvent::Recreated => {
                    log::info!(
                        "interface {name}: device {} is back (ifindex {}); taking it over again",
                        l.device,
                        l.ifindex.unwrap_or(0)
                    );
                    let attached = self.reattach(l.port, &l.device);
                    // Taking it over sets it up: read its state again.
                    if let Some(x) = self.interfaces.links_mut().links.get_mut(i) {
                        refresh(x);
                        x.detached = !attached;
                    }
                }
            }
        }
        self.publish_ifaces();
        true
    }

    /// The TAP exception path: the TAPs of port `port` and of its VLAN
    /// sub-interfaces have carrier while its device has a usable link,
    /// so that daemons on the TAPs (a VRRP daemon, FRR) see the link as
    /// they would see the device's.
    fn follow_carrier(&mut self, port: u16, on: bool) {
        for (i, p) in self.plan.ifaces.iter().enumerate() {
            let mine = i == usize::from(port)
                || matches!(p.kind, IfacePlanKind::Vlan { parent, .. } if parent == usize::from(port));
            if !mine || matches!(p.kind, IfacePlanKind::Removed) {
                continue;
            }
            let tap = crate::linux::tap_name(&p.name);
            if let Err(e) = crate::linux::host::set_tap_carrier(&tap, on) {
                log::warn!(
                    "interface {}: cannot set the carrier of TAP {tap} {}: {e}",
                    p.name,
                    if on { "on" } else { "off" }
                );
            }
        }
    }

    /// Forgets the neighbours learned on `port` and its VLANs: a device
    /// that returns may reach other hosts (or the same ones with new MACs).
    pub(crate) fn forget_neighbors(&mut self, port: u16) {
        let mut flushed = self.routes.flush_interface(port);
        let children: Vec<u16> = self
            .plan
            .ifaces
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.kind, IfacePlanKind::Vlan { parent, .. } if parent == usize::from(port)))
            .map(|(i, _)| i as u16)
            .collect();
        for c in children {
            flushed |= self.routes.flush_interface(c);
        }
        if flushed {
            self.shared.bump_neigh_gen();
        }
    }

    /// The device's MTU changed under tern: the interface takes it, as
    /// `interface set NAME mtu N` would (its TAP too), and its VLAN
    /// sub-interfaces without an MTU of their own follow. An MTU the lanes
    /// cannot carry (or that IPv6 refuses) is logged and left as it was
    /// (the change is counted in `link_changes` either way).
    fn follow_mtu(&mut self, port: u16, name: &str, dev: &str, mtu: u32) {
        let cur = self.shared.ifaces.load().ifs.get(usize::from(port)).map_or(0, |f| f.mtu);
        let m = u16::try_from(mtu).unwrap_or(u16::MAX);
        if let Err(e) = self.set_interface_mtu(port, m) {
            log::warn!(
                "interface {name}: device {dev} has a new MTU {mtu}, which tern refuses ({}); the interface keeps MTU {cur}",
                e.message
            );
            return;
        }
        self.interfaces.set_dev_mtu(port, m);
        let vlan_limit = crate::config::lane_mtu_limit(true);
        let old = self.shared.ifaces.load();
        let mut ifs = old.ifs.clone();
        for (i, f) in ifs.iter_mut().enumerate() {
            let follows = self.plan.ifaces.get(i).is_some_and(|c| {
                c.mtu.is_none() && matches!(c.kind, IfacePlanKind::Vlan { parent, .. } if parent == usize::from(port))
            });
            if follows && !f.is_removed() {
                f.mtu = m.min(vlan_limit);
            }
        }
        self.shared.ifaces.publish(tern_nodes::state::IfTable::new(ifs));
        log::info!("interface {name}: device {dev} has a new MTU {mtu} (was {cur}); the interface follows");
    }

    /// A device that returned may have another MAC: unless the
    /// configuration sets one, the interface (and its VLANs) takes the new
    /// device's, as at start.
    fn follow_mac(&mut self, port: u16, dev: &str) {
        let Some(p) = self.plan.ifaces.get(usize::from(port)) else { return };
        if p.mac.is_some() {
            return;
        }
        let Ok(mac) = tern_io::netdev::mac(dev) else { return };
        if !self.interfaces.set_dev_mac(port, mac) {
            return;
        }
        let old = self.shared.ifaces.load();
        let mut ifs = old.ifs.clone();
        for f in ifs.iter_mut().filter(|f| f.port == port && !f.is_removed()) {
            if matches!(f.kind, tern_nodes::state::IfKind::Port | tern_nodes::state::IfKind::Vlan { .. }) {
                f.mac = mac;
                f.v6_ll = tern_nodes::state::link_local_from_mac(mac);
            }
        }
        self.shared.ifaces.publish(tern_nodes::state::IfTable::new(ifs));
        log::info!("interface {}: device {dev} has a new MAC address {}", p.name, crate::neighbor::fmt_mac(mac));
    }

    /// Takes a device that came back over again and attaches its lane
    /// there again: each worker's AF_PACKET socket, or the XDP program
    /// and AF_XDP sockets ([`Router::reattach_xdp`]).
    /// Returns whether the port receives there again.
    fn reattach(&mut self, port: u16, dev: &str) -> bool {
        let Some(p) = self.plan.ifaces.get(usize::from(port)).cloned() else { return false };
        let IfacePlanKind::Port { driver, .. } = p.kind else { return false };
        if let Err(e) = self.interfaces.take_over_again(&self.plan, dev, p.up) {
            log::warn!("interface {}: device {dev}: {e}", p.name);
            return false;
        }
        self.follow_mac(port, dev);
        let on_lane = self.lanes.lane().is_some_and(|l| l.has_device(dev));
        // What the start opened there: AF_XDP sockets (also under the XDP
        // lane), or AF_PACKET ones (`afpacket`, or `auto` fallen back).
        let afxdp = driver != Driver::Afpacket
            && !self.lanes.xdp().fallback.contains_key(dev)
            && self.lanes.xdp().opened.get(dev).is_some_and(|o| o.starts_with("afxdp"));
        if on_lane || afxdp {
            return match self.reattach_xdp(port, dev, driver, on_lane) {
                Ok(what) => {
                    log::info!("interface {}: {what} on {dev} again", p.name);
                    true
                }
                Err(e) => {
                    log::warn!(
                        "interface {}: device {dev} returned, but {e}; the interface stays down (the device's next return, or a restart, attaches it again)",
                        p.name
                    );
                    false
                }
            };
        }
        let workers = self.lanes.len();
        let gen_ = self.interfaces.link(port).map_or(0, |l| l.changes);
        for (w, h) in self.lanes.iter().enumerate() {
            let mut cfg = tern_io::AfPacketConfig::new(dev.to_string());
            if workers > 1 {
                // A group of its own: the old sockets' group was bound to
                // the device that is gone.
                let group = (std::process::id() as u16)
                    .wrapping_mul(31)
                    .wrapping_add(port.wrapping_mul(97))
                    .wrapping_add(gen_ as u16)
                    | 0x8000;
                cfg.fanout = Some(tern_io::Fanout { group, mode: tern_io::FanoutMode::Hash });
            }
            cfg.allmulti = true;
            match tern_io::AfPacketPort::open_with(&cfg) {
                Ok(ap) => {
                    let b = tern_engine::PortBinding::new(Box::new(ap), port);
                    let change = tern_engine::PortChange::Open { slot: usize::from(port), binding: b };
                    if h.change_port(change).is_err() {
                        log::warn!("interface {}: worker {w}: no port slot {port}", p.name);
                    }
                }
                Err(e) => log::warn!("interface {}: worker {w}: device {dev}: {e}", p.name),
            }
        }
        log::info!("interface {}: AF_PACKET ports open again on {dev}", p.name);
        true
    }

    /// Attaches the XDP side of port `port` to its device `dev` again (a
    /// new ifindex): the old device's AF_XDP sockets are closed (a new
    /// socket joins its worker's UMEM through a bound one, and the
    /// workers give the old ones up first), the lane program or the
    /// steering program is attached to the new device, each worker's
    /// socket is opened on its queue ([`crate::afxdp::XdpDevices::reopen`],
    /// the start's code) and handed to the worker. On error whatever was
    /// attached is detached again and the port stays closed. Returns what
    /// it attached.
    fn reattach_xdp(&mut self, port: u16, dev: &str, driver: Driver, on_lane: bool) -> Result<String, String> {
        for w in self.lanes.iter() {
            if w.change_port(tern_engine::PortChange::Close { slot: usize::from(port) }).is_err() {
                return Err(format!("worker {} has no port {port}", w.id));
            }
        }
        self.wait_port_changes();
        let mode = match (on_lane, self.lanes.lane_mut()) {
            (true, Some(lane)) => {
                let m = lane.reattach(dev, port, driver == Driver::Xdp).map_err(|e| format!("the XDP lane: {e}"))?;
                Some(m)
            }
            (true, None) => return Err("the XDP lane is gone".into()),
            (false, _) => {
                // The old device's program went with it.
                self.lanes.xdp_mut().forget_steering(dev);
                None
            }
        };
        let workers = self.lanes.len() as u16;
        let idle = self.plan.config.dataplane.idle;
        let linux_mode = self.plan.config.linux.linux_mode();
        let mut ports = Vec::with_capacity(self.lanes.len());
        for w in 0..workers {
            match self.lanes.xdp_mut().reopen(dev, w, workers, idle, linux_mode) {
                Ok(x) => ports.push(x),
                Err(e) => {
                    // Nothing half-attached: the sockets opened so far
                    // close here (unfilled, they hold no frames), the
                    // program comes off the device.
                    drop(ports);
                    match self.lanes.lane_mut() {
                        Some(lane) if on_lane => lane.detach_port(port),
                        _ => self.lanes.xdp_mut().forget_steering(dev),
                    }
                    return Err(format!("worker {w}: AF_XDP: {e}"));
                }
            }
        }
        let what =
            ports.first().map_or("AF_XDP", |x| if x.is_zero_copy() { "AF_XDP zero-copy" } else { "AF_XDP copy-mode" });
        let what = match mode {
            Some(m) => format!("XDP lane ({m:?} mode) and {what} sockets"),
            None => format!("steering program and {what} sockets"),
        };
        for (h, x) in self.lanes.iter().zip(ports) {
            let b = tern_engine::PortBinding::new(Box::new(x), port);
            let change = tern_engine::PortChange::Open { slot: usize::from(port), binding: b };
            if h.change_port(change).is_err() {
                log::error!("worker {}: no port slot {port}", h.id);
            }
        }
        Ok(what)
    }

    /// Per interface: (name, link state, changes), for `interface show`
    /// and the metrics.
    pub fn link_states(&self) -> Vec<(String, &'static str, u64)> {
        self.interfaces
            .links()
            .links
            .iter()
            .filter_map(|l| {
                let p = self.plan.ifaces.get(usize::from(l.port))?;
                Some((p.name.clone(), l.describe(), l.changes))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(ifindex: Option<u32>, up: bool) -> LinkState {
        LinkState {
            port: 0,
            device: "wan0".into(),
            ifindex,
            admin_up: up,
            carrier: up,
            changes: 0,
            detached: false,
            mtu: Some(1500),
        }
    }

    #[test]
    fn notifications_follow_removal_recreation_and_admin_state() {
        let mut links = vec![state(Some(7), true)];
        let mut ev = Vec::new();
        // Another device: ignored.
        apply(&mut links, RTM_DELLINK, 8, 0, Some("lan0"), None, &mut ev);
        assert!(ev.is_empty());
        apply(&mut links, RTM_NEWLINK, 7, 0, Some("wan0"), None, &mut ev);
        assert_eq!(ev, vec![(0, LinkEvent::Down)]);
        assert_eq!(links[0].describe(), "down");
        apply(&mut links, RTM_NEWLINK, 7, IFF_UP | nl::IFF_LOWER_UP, Some("wan0"), None, &mut ev);
        apply(&mut links, RTM_DELLINK, 7, 0, Some("wan0"), None, &mut ev);
        assert_eq!(links[0].describe(), "absent");
        assert!(!links[0].usable());
        // A different device with the name tern wants: re-created.
        apply(&mut links, RTM_NEWLINK, 12, 0, Some("wan0"), None, &mut ev);
        assert_eq!(
            ev.iter().map(|e| e.1).collect::<Vec<_>>(),
            [LinkEvent::Down, LinkEvent::Up, LinkEvent::Removed, LinkEvent::Recreated]
        );
        assert_eq!(links[0].ifindex, Some(12));
        assert_eq!(links[0].changes, 4);
        // Renamed away: gone for tern.
        apply(&mut links, RTM_NEWLINK, 12, IFF_UP, Some("other"), None, &mut ev);
        assert_eq!(links[0].ifindex, None);
    }

    #[test]
    fn mtu_changes_are_noticed() {
        let mut links = vec![state(Some(7), true)];
        let mut ev = Vec::new();
        let up = IFF_UP | nl::IFF_LOWER_UP;
        apply(&mut links, RTM_NEWLINK, 7, up, Some("wan0"), Some(1500), &mut ev);
        assert!(ev.is_empty(), "same MTU: {ev:?}");
        apply(&mut links, RTM_NEWLINK, 7, up, Some("wan0"), Some(1400), &mut ev);
        assert_eq!(ev, vec![(0, LinkEvent::Mtu(1400))]);
        assert_eq!((links[0].mtu, links[0].changes), (Some(1400), 1));
        // Another device's MTU: not ours.
        apply(&mut links, RTM_NEWLINK, 8, up, Some("lan0"), Some(9000), &mut ev);
        assert_eq!(ev.len(), 1);
        // The MTU attribute of a real notification is read.
        let mut m = vec![0u8; 16];
        m[4..8].copy_from_slice(&7u32.to_ne_bytes());
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&IFLA_MTU.to_ne_bytes());
        m.extend_from_slice(&1280u32.to_ne_bytes());
        assert_eq!(parse_link(RTM_NEWLINK, &m).expect("parses").4, Some(1280));
    }

    #[test]
    fn short_or_garbled_messages_are_ignored() {
        assert!(parse_link(RTM_NEWLINK, &[0; 7]).is_none());
        let mut m = vec![0u8; 16];
        m[4..8].copy_from_slice(&5u32.to_ne_bytes());
        m.extend_from_slice(&[200, 0, 3, 0]); // attribute longer than the buffer
        let (_, idx, _, name, _) = parse_link(RTM_NEWLINK, &m).expect("header parses");
        assert_eq!((idx, name), (5, None));
    }
}
