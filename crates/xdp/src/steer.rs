//! Loading and attaching the XDP steering program (`bpf/steer.c`) and
//! filling its maps.
//!
//! One [`SteeringProgram`] per device: its XSKMAP is indexed by receive
//! queue, so two devices cannot share one. The program is attached through
//! a bpf_link where the kernel has them (detached by the kernel when the
//! process dies) and by netlink otherwise; [`remove_stale`] clears what a
//! crashed netlink-attached loader (or another tool) left behind.

use crate::error::{Unavailable, XdpError};
use crate::lane::PUNT_CLASSES;
use crate::lane::program::{punt_words, xdp_md};
use crate::netlink::{self, AttachMode};
use crate::port::XskPort;
use crate::sys;
use aya::maps::{Array, HashMap, MapData, PerCpuArray, PerCpuValues, XskMap};
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
    /// ESP or ESP in UDP (4500, an SA's own port) for the router's addresses, sent to tern
    /// (it terminates IPsec; IKE stays Linux's).
    pub redirect_ipsec: u64,
    /// VRRP advertisements (224.0.0.18 / ff02::12) sent to tern
    /// (standalone mode: tern runs VRRP).
    pub redirect_vrrp: u64,
    /// For the router's addresses, sent to tern (standalone mode, where
    /// [`SteeringProgram::add_local`] names tern's own addresses): policed.
    pub redirect_local: u64,
    /// Frames for the router shed by their class's policer, per class in
    /// [`PUNT_CLASSES`] order ([`SteeringProgram::set_punt_rates`]).
    pub shed: [u64; PUNT_CLASSES.len()],
}

/// `tern stats` names of the steering program's shed counters, in
/// [`PUNT_CLASSES`] order (as the XDP lane's `punt-shed-CLASS`).
const SHED_NAMES: [(&str, &str); PUNT_CLASSES.len()] = [
    ("punt-shed-neighbor", "ARP/ND for the router over its class's rate: dropped"),
    ("punt-shed-bgp", "BGP (TCP port 179) for the router over its class's rate: dropped"),
    ("punt-shed-ospf", "OSPF for the router over its class's rate: dropped"),
    ("punt-shed-vrrp", "VRRP advertisements over their class's rate: dropped"),
    ("punt-shed-ike", "IKE for the router over its class's rate: dropped"),
    ("punt-shed-bfd", "BFD for the router over its class's rate: dropped"),
    ("punt-shed-local", "other traffic for the router (ping, UDP to a closed port...) over its class's rate: dropped"),
];

impl Verdicts {
    /// What the program passed to Linux, by reason, and the router's
    /// IPsec it sent to tern (`tern stats` names: node `xdp-steer`), with
    /// each reason's meaning.
    /// Then what the class policers shed, by class.
    pub fn passes(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut v = vec![
            (
                "vrrp-to-tern",
                "VRRP advertisements (224.0.0.18, ff02::12): sent to tern's own VRRP (standalone mode), not Linux",
                self.redirect_vrrp,
            ),
            (
                "ipsec-to-tern",
                "ESP or ESP in UDP (4500, an SA's own port) for the router's addresses: sent to tern (IPsec), not Linux",
                self.redirect_ipsec,
            ),
            (
                "local-to-tern",
                "for the router's addresses: sent to tern (standalone mode), policed per class",
                self.redirect_local,
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
        ];
        v.extend(SHED_NAMES.iter().zip(self.shed).map(|(&(name, help), n)| (name, help, n)));
        v
    }
}

/// The program's `enum verdict`: the ten verdicts, then one shed counter
/// per class.
const N_VERDICTS: u32 = 10 + PUNT_CLASSES.len() as u32;

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
    encap_ports: HashMap<MapData, u16, u8>,
    /// What `encap_ports` holds ([`SteeringProgram::set_encap_ports`]).
    encap_set: Vec<u16>,
    config: Array<MapData, u32>,
    verdicts: PerCpuArray<MapData, u64>,
    punt_rate: Array<MapData, u64>,
    punt_tat: PerCpuArray<MapData, u64>,
    punt_words: Vec<u64>,
    cfg: u32,
    ifname: String,
    ifindex: u32,
    mode: AttachMode,
    // Last: dropping it detaches the program (after the maps are released).
    ebpf: Ebpf,
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
            encap_ports: take(&mut ebpf, "tern_encap_ports")?,
            encap_set: Vec::new(),
            config: take(&mut ebpf, "tern_config")?,
            verdicts: take(&mut ebpf, "tern_verdicts")?,
            punt_rate: take(&mut ebpf, "tern_punt_rate")?,
            punt_tat: take(&mut ebpf, "tern_punt_tat")?,
            punt_words: Vec::new(),
            cfg: 0,
            ifname: ifname.to_string(),
            ifindex,
            mode,
            ebpf,
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

    /// Control traffic first: the policers of what the program hands to
    /// Linux or to tern for the router itself (pass-local, pass-neighbor,
    /// pass-multicast, ARP/ND, VRRP and IKE to tern), `(packets per
    /// second, burst)` per class in [`PUNT_CLASSES`] order, per CPU, as
    /// the XDP lane's ([`crate::lane::LaneProgram::set_punt_rates`]); a
    /// rate of 0 polices nothing (the default). New rates start with a
    /// full burst on every CPU; the same rates again change nothing.
    pub fn set_punt_rates(&mut self, punt: &[(u32, u32)]) -> Result<(), XdpError> {
        if punt.len() > PUNT_CLASSES.len() {
            return Err(XdpError::Config(format!(
                "{} punt classes, the program has {}",
                punt.len(),
                PUNT_CLASSES.len()
            )));
        }
        let words = punt_words(punt);
        if words == self.punt_words {
            return Ok(());
        }
        for (i, &w) in words.iter().enumerate() {
            self.punt_rate.set(i as u32, w, 0).map_err(|e| prog_err("tern_punt_rate", e))?;
        }
        let cpus = aya::util::nr_cpus().map_err(|(what, e)| prog_err(what, e))?;
        for c in 0..punt.len() as u32 {
            let zero = PerCpuValues::try_from(vec![0u64; cpus]).map_err(|e| prog_err("tern_punt_tat", e))?;
            self.punt_tat.set(c, zero, 0).map_err(|e| prog_err("tern_punt_tat", e))?;
        }
        self.punt_words = words;
        Ok(())
    }

    /// Runs the program once on `frame` as received on this device's
    /// queue `queue` (BPF_PROG_TEST_RUN; nothing is sent, counters and
    /// policers count it). Returns the XDP action.
    pub fn test_run(&self, frame: &[u8], queue: u32) -> Result<u32, XdpError> {
        use aya::programs::{TestRun, TestRunOptions, Xdp};
        let p: &Xdp = self
            .ebpf
            .program(STEER_PROG_NAME)
            .ok_or_else(|| prog_err("object", "no program tern_steer"))?
            .try_into()
            .map_err(|e| prog_err("program type", e))?;
        let ctx = xdp_md(frame.len(), self.ifindex, queue);
        let r = p
            .test_run(TestRunOptions { data_in: Some(frame), ctx_in: Some(&ctx), ..TestRunOptions::default() })
            .map_err(|e| prog_err("BPF_PROG_TEST_RUN", format!("{e:?}")))?;
        Ok(r.return_value)
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

    /// An address of the router: packets to it go to Linux (Linux mode),
    /// or to tern, policed per class (standalone mode, `local-to-tern`;
    /// without it they go with the transit, unpoliced). Add every address
    /// of the router, not only this device's.
    pub fn add_local(&mut self, addr: IpAddr) -> Result<(), XdpError> {
        match addr {
            IpAddr::V4(a) => self.local4.insert(u32::from_ne_bytes(a.octets()), 1, 0),
            IpAddr::V6(a) => self.local6.insert(u128::from_ne_bytes(a.octets()), 1, 0),
        }
        .map_err(|e| prog_err("local address maps", e))
    }

    /// The local UDP ports of ESP in UDP other than 4500 (the SAs'
    /// `udp_encap` source ports; 500 and 4500 are ignored, keeping their
    /// meaning): with IPsec to tern, UDP to them for the router's
    /// addresses goes to tern whatever it carries. The map follows
    /// `ports` (at most 256 of them; the rest are left out, an error).
    pub fn set_encap_ports(&mut self, ports: &[u16]) -> Result<(), XdpError> {
        let map = &mut self.encap_ports;
        sync_port_set(&mut self.encap_set, ports, |p, on| {
            let key = u16::from_ne_bytes(p.to_be_bytes());
            if on { map.insert(key, 1, 0) } else { map.remove(&key) }.map_err(|e| prog_err("tern_encap_ports", e))
        })
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
            redirect_local,
            shed @ ..,
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
            redirect_local,
            shed,
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

/// Brings a BPF map of ports that `held` mirrors to `want` (500 and 4500
/// left out: they keep their own meaning), one `set(port, on)` per port
/// that comes or goes, at most `MAX_ENCAP_PORTS`. The first error stops
/// it: `held` stays what the map holds.
pub(crate) fn sync_port_set(
    held: &mut Vec<u16>,
    want: &[u16],
    mut set: impl FnMut(u16, bool) -> Result<(), XdpError>,
) -> Result<(), XdpError> {
    let mut want: Vec<u16> = want.iter().copied().filter(|&p| p != 500 && p != 4500).collect();
    want.sort_unstable();
    want.dedup();
    let over = want.len() > MAX_ENCAP_PORTS;
    want.truncate(MAX_ENCAP_PORTS);
    let gone: Vec<u16> = held.iter().copied().filter(|p| want.binary_search(p).is_err()).collect();
    for p in gone {
        set(p, false)?;
        held.retain(|&h| h != p);
    }
    for &p in &want {
        if let Err(i) = held.binary_search(&p) {
            set(p, true)?;
            held.insert(i, p);
        }
    }
    if over {
        return Err(prog_err(
            "encap ports",
            format!("more than {MAX_ENCAP_PORTS} ESP-in-UDP ports; the rest are Linux's"),
        ));
    }
    Ok(())
}

/// The ports `tern_encap_ports`/`lane_encap_ports` hold at most.
pub const MAX_ENCAP_PORTS: usize = 256;

#[cfg(test)]
mod port_set_tests {
    use super::*;

    /// The map follows the list: each port added or removed once, 500 and
    /// 4500 never, duplicates once; an error leaves `held` as the map is.
    #[test]
    fn sync_port_set_adds_and_removes_what_changed() {
        let mut map = std::collections::BTreeSet::new();
        let mut calls = Vec::new();
        let mut held = Vec::new();
        let mut apply = |held: &mut Vec<u16>, want: &[u16], calls: &mut Vec<(u16, bool)>, fail: Option<u16>| {
            sync_port_set(held, want, |p, on| {
                if Some(p) == fail {
                    return Err(prog_err("test", "refused"));
                }
                calls.push((p, on));
                if on {
                    map.insert(p)
                } else {
                    map.remove(&p)
                };
                Ok(())
            })
        };
        apply(&mut held, &[4600, 4500, 500, 4601, 4600], &mut calls, None).expect("sync");
        assert_eq!(held, [4600, 4601]);
        assert_eq!(calls, [(4600, true), (4601, true)]);
        calls.clear();
        apply(&mut held, &[4601, 4700], &mut calls, None).expect("sync");
        assert_eq!(held, [4601, 4700]);
        assert_eq!(calls, [(4600, false), (4700, true)]);
        calls.clear();
        assert!(apply(&mut held, &[4601, 4700, 4800], &mut calls, Some(4800)).is_err());
        assert_eq!(held, [4601, 4700], "what the map holds");
        let many: Vec<u16> = (5000..5000 + MAX_ENCAP_PORTS as u16 + 3).collect();
        assert!(apply(&mut held, &many, &mut calls, None).is_err(), "over the map's size");
        assert_eq!(held.len(), MAX_ENCAP_PORTS);
    }
}
