//! Opening AF_XDP ports for the router, with the automatic fallback to
//! AF_PACKET.
//!
//! For a device on `driver = "auto"` or `"afxdp"` the router attaches
//! tern's XDP steering program once, then opens one AF_XDP socket per
//! worker on receive queue `worker` (each worker's pool is its UMEM). When
//! AF_XDP cannot be used (no permission, kernel or driver support, fewer
//! queues than workers) an `auto` device falls back to AF_PACKET with a log
//! line saying why; an `afxdp` device fails the start instead.

use crate::config::{Driver, IdleMode};
use std::collections::HashMap;
use tern_packet::PacketPool;
use tern_xdp::{BusyPoll, SteerOptions, SteeringProgram, Umem, XskConfig, XskPort};

/// The XDP programs the router attached, by device (detached on drop).
#[derive(Default)]
pub struct XdpDevices {
    progs: HashMap<String, SteeringProgram>,
    /// Devices that fell back to AF_PACKET, with the reason.
    pub fallback: HashMap<String, String>,
    /// The userspace port each device opened: "afxdp zero-copy",
    /// "afxdp copy" or "afpacket" (`tern interface show`).
    pub opened: HashMap<String, &'static str>,
    /// `auto` devices the XDP lane did not take, with the reason.
    pub not_on_lane: HashMap<String, String>,
    /// The XDP lane, when devices run it (crates/control/src/xdplane.rs):
    /// those get no steering program; their worker sockets take the
    /// lane's punts.
    pub lane: Option<crate::xdplane::XdpLane>,
    /// Each worker's UMEM (its pool), by worker, once the start opened
    /// its ports: a device that returns gets its sockets on the same one
    /// ([`XdpDevices::reopen`]).
    pub umems: Vec<Option<Umem>>,
    /// The addresses given to [`XdpDevices::add_local`], for a steering
    /// program attached later (a device that returned).
    locals: Vec<std::net::IpAddr>,
    /// tern terminates IPsec: ESP and ESP in UDP 4500 for the router's
    /// addresses go to tern in Linux mode ([`XdpDevices::set_ipsec_to_tern`]).
    ipsec: bool,
    /// The SAs' local ESP-in-UDP ports ([`XdpDevices::set_encap_ports`]).
    encap_ports: Vec<u16>,
    /// The steering programs' punt policers, per class
    /// ([`XdpDevices::set_punt_rates`]); none set: nothing policed.
    punt: Option<[(u32, u32); 7]>,
}

/// What to open for one device in one worker.
pub enum Choice {
    AfXdp(Box<XskPort>),
    AfPacket,
}

impl XdpDevices {
    /// Opens the AF_XDP port of worker `w` on `dev`, or says to use
    /// AF_PACKET. `umem` is created on first use for the worker's pool.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        &mut self,
        dev: &str,
        driver: Driver,
        w: u16,
        workers: u16,
        idle: IdleMode,
        linux_mode: bool,
        pool: &mut PacketPool,
        umem: &mut Option<Umem>,
    ) -> Result<Choice, String> {
        if driver == Driver::Afpacket || self.fallback.contains_key(dev) {
            self.opened.insert(dev.to_string(), "afpacket");
            return Ok(Choice::AfPacket);
        }
        match self.try_open(dev, w, workers, idle, linux_mode, Some(pool), umem) {
            Ok(port) => {
                self.opened.insert(dev.to_string(), if port.is_zero_copy() { "afxdp zero-copy" } else { "afxdp copy" });
                Ok(Choice::AfXdp(Box::new(port)))
            }
            Err((why, unavailable)) => {
                if driver == Driver::Afxdp || !unavailable {
                    return Err(format!("device {dev}: AF_XDP: {why}"));
                }
                log::warn!("device {dev}: AF_XDP unavailable ({why}); using AF_PACKET");
                self.progs.remove(dev);
                self.fallback.insert(dev.to_string(), why);
                self.opened.insert(dev.to_string(), "afpacket");
                Ok(Choice::AfPacket)
            }
        }
    }

    /// Opens worker `w`'s AF_XDP socket on `dev` again, from the control
    /// thread, after the device was removed and created again: the steering
    /// program is attached to the new device unless it is on the XDP lane
    /// (whose caller attached the lane again), and the socket joins the
    /// worker's UMEM unfilled (the worker fills it from its pool once it
    /// holds the port). The old device's sockets must be closed first: a
    /// socket joins its UMEM through a bound one. Errors say why.
    pub fn reopen(
        &mut self,
        dev: &str,
        w: u16,
        workers: u16,
        idle: IdleMode,
        linux_mode: bool,
    ) -> Result<XskPort, String> {
        let mut umem = self.umems.get(usize::from(w)).cloned().flatten();
        if umem.is_none() {
            return Err(format!("worker {w} has no AF_XDP UMEM"));
        }
        let port = self.try_open(dev, w, workers, idle, linux_mode, None, &mut umem).map_err(|(why, _)| why)?;
        self.opened.insert(dev.to_string(), if port.is_zero_copy() { "afxdp zero-copy" } else { "afxdp copy" });
        Ok(port)
    }

    /// Forgets `dev`'s steering program (detached: its device is gone, or
    /// re-attaching failed).
    pub fn forget_steering(&mut self, dev: &str) {
        self.progs.remove(dev);
    }

    /// `pool`: the worker's pool, at start; None from the control thread,
    /// where `umem` must be the worker's and the port starts unfilled.
    #[allow(clippy::too_many_arguments)]
    fn try_open(
        &mut self,
        dev: &str,
        w: u16,
        workers: u16,
        idle: IdleMode,
        linux_mode: bool,
        pool: Option<&mut PacketPool>,
        umem: &mut Option<Umem>,
    ) -> Result<XskPort, (String, bool)> {
        // sysfs shows the namespace it was mounted in; a thread that entered
        // another namespace with setns(2) (tern lab) cannot count there and
        // assumes one queue (binding to a queue that does not exist fails
        // and falls back cleanly).
        let queues = tern_xdp::rx_queue_count(dev).unwrap_or(1);
        if queues < u32::from(workers) {
            return Err((format!("{queues} receive queue(s) for {workers} workers"), true));
        }
        if queues > u32::from(workers) {
            log::warn!("device {dev}: {queues} queues, {workers} worker(s): queues above {workers} are not served");
        }
        let lane_port = self.lane.as_ref().and_then(|l| l.device_port(dev));
        if lane_port.is_none() && !self.progs.contains_key(dev) {
            let opts = SteerOptions { neigh_to_tern: !linux_mode, allow_generic: true };
            let mut prog = SteeringProgram::attach(dev, opts).map_err(|e| (e.to_string(), e.is_unavailable()))?;
            // Attached after the start (a device that returned): the
            // addresses Linux keeps, as the others have them.
            for a in &self.locals {
                prog.add_local(*a).map_err(|e| (format!("passing {a} to Linux: {e}"), false))?;
            }
            if self.ipsec {
                prog.set_ipsec_to_tern(true).map_err(|e| (format!("IPsec steering: {e}"), false))?;
            }
            if !self.encap_ports.is_empty() {
                prog.set_encap_ports(&self.encap_ports).map_err(|e| (format!("ESP-in-UDP ports: {e}"), false))?;
            }
            if let Some(punt) = &self.punt {
                prog.set_punt_rates(punt).map_err(|e| (format!("punt policers: {e}"), false))?;
            }
            self.progs.insert(dev.to_string(), prog);
        }
        if umem.is_none()
            && let Some(pool) = pool.as_deref()
        {
            *umem = Some(Umem::new(pool).map_err(|e| (e.to_string(), e.is_unavailable()))?);
        }
        let Some(u) = umem.as_ref() else { return Err(("no UMEM".into(), false)) };
        let mut cfg = XskConfig::new(dev, u32::from(w));
        let spin = idle == IdleMode::Spin;
        // Busy polling wherever it engages: always for a spinning worker,
        // while traffic flows for one that sleeps when idle.
        cfg.busy_poll = if spin { BusyPoll::On } else { BusyPoll::Adaptive };
        let port = match pool {
            Some(pool) => XskPort::open(u, &cfg, pool),
            None => XskPort::open_unfilled(u, &cfg),
        }
        .map_err(|e| (e.to_string(), e.is_unavailable()))?;
        if let Some(prog) = self.progs.get_mut(dev) {
            prog.register(&port).map_err(|e| (e.to_string(), false))?;
        }
        if let (Some(lp), Some(lane)) = (lane_port, self.lane.as_mut()) {
            lane.register_xsk(lp, &port).map_err(|e| (e.to_string(), false))?;
        }
        log::info!(
            "device {dev}: worker {w} on AF_XDP queue {w} ({}{})",
            if port.is_zero_copy() { "zero-copy" } else { "copy mode" },
            if spin { ", busy polling" } else { ", busy polling while traffic flows" }
        );
        Ok(port)
    }

    /// Adds an address the kernel must keep receiving (Linux mode).
    pub fn add_local(&mut self, addr: std::net::IpAddr) {
        if !self.locals.contains(&addr) {
            self.locals.push(addr);
        }
        for (dev, p) in &mut self.progs {
            if let Err(e) = p.add_local(addr) {
                log::warn!("device {dev}: cannot steer {addr} to Linux: {e}");
            }
        }
        if let Some(l) = &mut self.lane
            && let Err(e) = l.add_local(addr)
        {
            log::warn!("XDP lane: cannot pass {addr} to Linux: {e}");
        }
    }

    /// Standalone mode: an address of tern's own, which the steering
    /// programs send to tern policed per class (`local-to-tern`) instead
    /// of with the transit. Not the XDP lane's: it polices its own punts.
    pub fn add_tern_local(&mut self, addr: std::net::IpAddr) {
        if !self.locals.contains(&addr) {
            self.locals.push(addr);
        }
        for (dev, p) in &mut self.progs {
            if let Err(e) = p.add_local(addr) {
                log::warn!("device {dev}: cannot police traffic for {addr}: {e}");
            }
        }
    }

    /// tern terminates IPsec (an ipsec tunnel is configured): the steering
    /// programs and the lane send ESP and ESP in UDP 4500 for the
    /// router's addresses to tern instead of Linux (Linux mode: IKE, UDP
    /// 500 and 4500 with the non-ESP marker, stays the kernel's, whose
    /// sockets the IKE service binds; in standalone mode all of it is
    /// tern's anyway).
    pub fn set_ipsec_to_tern(&mut self, on: bool) {
        self.ipsec = on;
        for (dev, p) in &mut self.progs {
            if let Err(e) = p.set_ipsec_to_tern(on) {
                log::warn!("device {dev}: IPsec steering: {e}");
            }
        }
        if let Some(l) = &mut self.lane
            && let Err(e) = l.set_ipsec(on)
        {
            log::warn!("XDP lane: IPsec steering: {e}");
        }
    }

    /// The local ports of ESP in UDP besides 4500 (the SAs' `udp_encap`
    /// source ports, `tern_ipsec::SaTable::encap_ports`): the steering
    /// programs and the lane treat UDP to them for the router's addresses
    /// as ESP in UDP (to tern with IPsec on; no IKE there). Also for
    /// programs attached later.
    pub fn set_encap_ports(&mut self, ports: &[u16]) {
        self.encap_ports = ports.to_vec();
        for (dev, p) in &mut self.progs {
            if let Err(e) = p.set_encap_ports(ports) {
                log::warn!("device {dev}: ESP-in-UDP ports: {e}");
            }
        }
        if let Some(l) = &mut self.lane
            && let Err(e) = l.set_encap_ports(ports)
        {
            log::warn!("XDP lane: ESP-in-UDP ports: {e}");
        }
    }

    /// Control traffic first on the AF_XDP lane: the policers, per class
    /// (`[dataplane.punt]`, as the XDP lane's), of what the steering
    /// programs hand to Linux or to tern for the router itself; also for
    /// programs attached later.
    pub fn set_punt_rates(&mut self, punt: &[(u32, u32); 7]) {
        self.punt = Some(*punt);
        for (dev, p) in &mut self.progs {
            if let Err(e) = p.set_punt_rates(punt) {
                log::warn!("device {dev}: punt policers not set: {e}");
            }
        }
    }

    /// Whether any device has a steering program (AF_XDP ports).
    pub fn has_steering(&self) -> bool {
        !self.progs.is_empty()
    }

    /// Whether a steering program is attached to `dev` (AF_XDP ports).
    pub fn has(&self, dev: &str) -> bool {
        self.progs.contains_key(dev)
    }

    /// What the steering programs passed to Linux, by reason, summed over
    /// devices (the AF_XDP lane's share of "every frame counted").
    pub fn steer_passes(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out: Vec<(&'static str, &'static str, u64)> = Vec::new();
        for p in self.progs.values() {
            let Ok(v) = p.verdicts() else { continue };
            for (i, (name, help, n)) in v.passes().into_iter().enumerate() {
                match out.get_mut(i) {
                    Some(o) => o.2 += n,
                    None => out.push((name, help, n)),
                }
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.progs.is_empty() && self.lane.is_none()
    }
}
