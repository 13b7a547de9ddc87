//! Loading and attaching the XDP steering program (`bpf/steer.c`) and
//! filling its maps.
//!
//! One [`SteeringProgram`] per device: its XSKMAP is indexed by receive
//! queue, so two devices cannot share one. The program is attached through
//! a bpf_link where the kernel has them (detached by the kernel when the
//! process dies) and by netlink otherwise; [`remove_stale`] clears what a
//! crashed netlink-attached loader (or another tool) left behind.

use crate::error::{Unavailable, XdpError};
use crate::netlink::{self, AttachMode};
use crate::port::XskPort;
use crate::sys;
use aya::maps::{Array, HashMap, MapData, PerCpuArray, XskMap};
use aya::programs::XdpMode;
use aya::{Ebpf, EbpfLoader};
use std::net::IpAddr;

static STEER_OBJ: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/steer.o"));

/// The compiled steering program (ELF), for tools that attach it themselves.
pub fn steer_object() -> &'static [u8] {
    STEER_OBJ
}

/// Name of the steering program in the kernel (what [`remove_stale`] looks
/// for).
pub const STEER_PROG_NAME: &str = "tern_steer";

const CFG_NEIGH_TO_TERN: u32 = 1 << 0;
const CFG_PASS_ALL: u32 = 1 << 1;
const CFG_IPSEC_TO_TERN: u32 = 1 << 2;

/// The program's verdict counters, summed over CPUs. Field order is the
/// `enum verdict` of `bpf/steer.c`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    /// Transit packets sent to the queue's XSK.
    pub redirect: u64,
    /// ARP/ND sent to tern (standalone mode).
    pub redirect_neigh: u64,
    /// Addressed to one of the router's addresses: passed to Linux.
    pub pass_local: u64,
    /// ARP/ND passed to Linux (Linux control-plane mode).
    pub pass_neigh: u64,
    /// Multicast or broadcast control traffic passed to Linux.
    pub pass_mcast: u64,
    /// No socket on the receive queue: passed to Linux.
    pub pass_no_xsk: u64,
    /// Not IP/ARP in Linux mode, or steering paused: passed to Linux.
    pub pass_other: u64,
    /// ESP or ESP in UDP 4500 for the router's addresses, sent to tern
    /// (it terminates IPsec; IKE stays Linux's).
    pub redirect_ipsec: u64,
    /// VRRP advertisements (224.0.0.18 / ff02::12) sent to tern
    /// (standalone mode: tern runs VRRP).
    pub redirect_vrrp: u64,
}

impl Verdicts {
    /// What the program passed to Linux, by reason, and the router's
    /// IPsec it sent to tern (`tern stats` names: node `xdp-steer`), with
    /// each reason's meaning.
    pub fn passes(&self) -> [(&'static str, &'static str, u64); 7] {
        [
            (
                "vrrp-to-tern",
                "VRRP advertisements (224.0.0.18, ff02::12): sent to tern's own VRRP (standalone mode), not Linux",
                self.redirect_vrrp,
            ),
            (
                "ipsec-to-tern",
                "ESP or ESP in UDP 4500 for the router's addresses: sent to tern (IPsec), not Linux",
                self.redirect_ipsec,
            ),
            ("pass-local", "for the router's addresses: passed to Linux", self.pass_local),
            ("pass-neighbor", "ARP/ND passed to Linux (Linux mode)", self.pass_neigh),
            ("pass-multicast", "IP multicast or broadcast: passed to Linux", self.pass_mcast),
            ("pass-no-xsk", "no tern socket on the receive queue: passed to Linux", self.pass_no_xsk),
            (
                "pass-non-ip",
                "EtherType tern does not handle (Linux mode) or steering paused: passed to Linux",
                self.pass_other,
            ),
        ]
    }
}

const N_VERDICTS: u32 = 9;

/// How to attach the steering program.
#[derive(Clone, Copy, Debug)]
pub struct SteerOptions {
    /// ARP and neighbour discovery go to tern (standalone mode) instead of
    /// Linux (Linux control-plane mode).
    pub neigh_to_tern: bool,
    /// Accept generic (skb) mode when the driver refuses native mode.
    pub allow_generic: bool,
}

impl Default for SteerOptions {
    fn default() -> Self {
        SteerOptions { neigh_to_tern: false, allow_generic: true }
    }
}

fn prog_err(what: &str, e: impl std::fmt::Display) -> XdpError {
    XdpError::Program(format!("{what}: {e}"))
}

/// Loads `obj`, attaches its program `prog` to `ifindex` natively or, if
/// allowed, in generic mode. Returns the object and the mode used.
fn load_and_attach(
    obj: &[u8],
    prog: &str,
    ifname: &str,
    ifindex: u32,
    allow_generic: bool,
) -> Result<(Ebpf, AttachMode), XdpError> {
    let mut ebpf = EbpfLoader::new().load(obj).map_err(|e| crate::error::object_load_error("", &e))?;
    let p = crate::error::xdp_program_mut(&mut ebpf, "", prog)?;
    p.load().map_err(|e| match &e {
        aya::programs::ProgramError::LoadError { io_error, .. } if io_error.raw_os_error() == Some(libc::EPERM) => {
            XdpError::Unavailable {
                why: Unavailable::NoPermission,
                detail: format!("loading {prog} needs CAP_BPF (or root)"),
                source: None,
            }
        }
        _ => prog_err("verifier", format!("{e:?}")),
    })?;
    match p.attach_to_if_index(ifindex, XdpMode::Driver) {
        Ok(_) => Ok((ebpf, AttachMode::Driver)),
        Err(e) if allow_generic => {
            log::warn!("{ifname}: native XDP refused ({e}); attaching {prog} in generic (skb) mode, which is slower");
            let p = crate::error::xdp_program_mut(&mut ebpf, "", prog)?;
            p.attach_to_if_index(ifindex, XdpMode::Skb).map_err(|e| XdpError::Unavailable {
                why: Unavailable::NoDriverSupport,
                detail: format!("{ifname}: cannot attach XDP in native or generic mode ({e}); if a stale program is attached, run `tern-xdp detach {ifname}`"),
                source: None,
            })?;
            Ok((ebpf, AttachMode::Skb))
        }
        Err(e) => Err(XdpError::Unavailable {
            why: Unavailable::NoDriverSupport,
            detail: format!("{ifname}: native XDP refused ({e})"),
            source: None,
        }),
    }
}

fn take<T: TryFrom<aya::maps::Map>>(ebpf: &mut Ebpf, name: &str) -> Result<T, XdpError>
where
    T::Error: std::fmt::Display,
{
    let m = ebpf.take_map(name).ok_or_else(|| prog_err("object", format!("no map {name}")))?;
    T::try_from(m).map_err(|e| prog_err(name, e))
}

fn ifindex_of(ifname: &str) -> Result<u32, XdpError> {
    sys::if_index(ifname).map_err(|e| XdpError::Unavailable {
        why: Unavailable::NoSuchInterface,
        detail: format!("interface {ifname}"),
        source: Some(e),
    })
}

/// The steering program attached to one device. Detached on drop.
pub struct SteeringProgram {
    xsks: XskMap<MapData>,
    local4: HashMap<MapData, u32, u8>,
    local6: HashMap<MapData, u128, u8>,
    config: Array<MapData, u32>,
    verdicts: PerCpuArray<MapData, u64>,
    cfg: u32,
    ifname: String,
    ifindex: u32,
    mode: AttachMode,
    // Last: dropping it detaches the program (after the maps are released).
    _ebpf: Ebpf,
}

impl SteeringProgram {
    /// Loads the program and attaches it to `ifname` (native mode, generic
    /// as a logged fallback if allowed).
    pub fn attach(ifname: &str, opts: SteerOptions) -> Result<SteeringProgram, XdpError> {
        let ifindex = ifindex_of(ifname)?;
        let (mut ebpf, mode) = load_and_attach(STEER_OBJ, STEER_PROG_NAME, ifname, ifindex, opts.allow_generic)?;
        let mut sp = SteeringProgram {
            xsks: take(&mut ebpf, "tern_xsks")?,
            local4: take(&mut ebpf, "tern_local4")?,
            local6: take(&mut ebpf, "tern_local6")?,
            config: take(&mut ebpf, "tern_config")?,
            verdicts: take(&mut ebpf, "tern_verdicts")?,
            cfg: 0,
            ifname: ifname.to_string(),
            ifindex,
            mode,
            _ebpf: ebpf,
        };
        sp.set_flag(CFG_NEIGH_TO_TERN, opts.neigh_to_tern)?;
        log::info!("{ifname}: XDP steering attached in {mode:?} mode");
        Ok(sp)
    }

    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    fn set_flag(&mut self, flag: u32, on: bool) -> Result<(), XdpError> {
        let cfg = if on { self.cfg | flag } else { self.cfg & !flag };
        self.config.set(0, cfg, 0).map_err(|e| prog_err("tern_config", e))?;
        self.cfg = cfg;
        Ok(())
    }

    /// ARP/ND to tern (standalone) or to Linux (control-plane mode).
    pub fn set_neigh_to_tern(&mut self, on: bool) -> Result<(), XdpError> {
        self.set_flag(CFG_NEIGH_TO_TERN, on)
    }

    /// tern terminates IPsec: ESP and ESP in UDP 4500 for the router's
    /// addresses go to tern, not Linux; IKE (UDP 500, UDP 4500 with the
    /// non-ESP marker, NAT keep-alives) stays Linux's.
    pub fn set_ipsec_to_tern(&mut self, on: bool) -> Result<(), XdpError> {
        self.set_flag(CFG_IPSEC_TO_TERN, on)
    }

    /// Pass everything to Linux (steering paused).
    pub fn set_pass_all(&mut self, on: bool) -> Result<(), XdpError> {
        self.set_flag(CFG_PASS_ALL, on)
    }

    /// Steers queue `port.queue()` of this device to `port`.
    pub fn register(&mut self, port: &XskPort) -> Result<(), XdpError> {
        if port.ifindex() != self.ifindex {
            return Err(XdpError::Config(format!("port {} is not on {}", port.name(), self.ifname)));
        }
        self.xsks.set(port.queue(), port.socket_fd(), 0).map_err(|e| prog_err("tern_xsks", e))
    }

    /// Stops steering queue `queue` (its packets then go to Linux).
    pub fn unregister(&mut self, queue: u32) -> Result<(), XdpError> {
        self.xsks.unset(queue).map_err(|e| prog_err("tern_xsks", e))
    }

    /// An address of the router: packets to it go to Linux. Add every
    /// address of the router, not only this device's.
    pub fn add_local(&mut self, addr: IpAddr) -> Result<(), XdpError> {
        match addr {
            IpAddr::V4(a) => self.local4.insert(u32::from_ne_bytes(a.octets()), 1, 0),
            IpAddr::V6(a) => self.local6.insert(u128::from_ne_bytes(a.octets()), 1, 0),
        }
        .map_err(|e| prog_err("local address maps", e))
    }

    pub fn remove_local(&mut self, addr: IpAddr) -> Result<(), XdpError> {
        match addr {
            IpAddr::V4(a) => self.local4.remove(&u32::from_ne_bytes(a.octets())),
            IpAddr::V6(a) => self.local6.remove(&u128::from_ne_bytes(a.octets())),
        }
        .map_err(|e| prog_err("local address maps", e))
    }

    /// Verdict counters summed over CPUs.
    pub fn verdicts(&self) -> Result<Verdicts, XdpError> {
        let mut v = [0u64; N_VERDICTS as usize];
        for (i, slot) in (0..N_VERDICTS).zip(v.iter_mut()) {
            let per_cpu = self.verdicts.get(&i, 0).map_err(|e| prog_err("tern_verdicts", e))?;
            *slot = per_cpu.iter().sum();
        }
        let [
            redirect,
            redirect_neigh,
            pass_local,
            pass_neigh,
            pass_mcast,
            pass_no_xsk,
            pass_other,
            redirect_ipsec,
            redirect_vrrp,
        ] = v;
        Ok(Verdicts {
            redirect,
            redirect_neigh,
            pass_local,
            pass_neigh,
            pass_mcast,
            pass_no_xsk,
            pass_other,
            redirect_ipsec,
            redirect_vrrp,
        })
    }
}

/// The XDP programs attached to `ifname`: (mode, program id, name).
pub fn attached(ifname: &str) -> Result<Vec<(AttachMode, u32, String)>, XdpError> {
    let ifindex = ifindex_of(ifname)?;
    let att = netlink::query(ifindex).map_err(|e| XdpError::from_errno(format!("{ifname}: RTM_GETLINK"), e))?;
    let names: Vec<(u32, String)> = aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .map(|p| (p.id(), p.name_as_str().unwrap_or("").to_string()))
        .collect();
    Ok(att
        .programs
        .into_iter()
        .map(|(mode, id)| {
            let name = names.iter().find(|(i, _)| *i == id).map(|(_, n)| n.clone()).unwrap_or_default();
            (mode, id, name)
        })
        .collect())
}

/// Detaches a stale tern program (the steering program or the XDP lane's)
/// from `ifname` (all XDP programs
/// with `force`). Returns the ids of the programs removed. Programs held by
/// a live bpf_link (a running tern) refuse with "busy".
pub fn remove_stale(ifname: &str, force: bool) -> Result<Vec<u32>, XdpError> {
    let ifindex = ifindex_of(ifname)?;
    let mut removed = Vec::new();
    for (mode, id, name) in attached(ifname)? {
        if !force && name != STEER_PROG_NAME && name != crate::lane::LANE_PROG_NAME {
            log::info!("{ifname}: leaving XDP program {id} ({name:?}) alone: not tern's");
            continue;
        }
        netlink::detach(ifindex, mode).map_err(|e| {
            let busy = if e.raw_os_error() == Some(libc::EBUSY) {
                " (held by a live bpf_link: is tern still running?)"
            } else {
                ""
            };
            XdpError::from_errno(format!("{ifname}: detaching XDP program {id}{busy}"), e)
        })?;
        log::info!("{ifname}: detached stale XDP program {id} ({name:?}, {mode:?} mode)");
        removed.push(id);
    }
    Ok(removed)
}
