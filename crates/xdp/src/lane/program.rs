//! Loading the lane program (`bpf/lane.c`), attaching it to devices, and
//! writing its tables.
//!
//! One [`LaneProgram`] serves every device on the lane: the maps are
//! shared, so a packet received on one device can be redirected out of any
//! other (the devmap is keyed by tern port, the XSK map by port and
//! queue).
//!
//! Tables other than the FIB are double-buffered: [`LaneProgram::publish`]
//! writes the half the program does not read, flips `lane_cfg.gen` with one
//! store, and waits for a kernel RCU grace period before that half may be
//! written again, so that a packet sees one generation of interfaces,
//! VLANs, tunnels and rule sets, never a mix. `lane_cfg.gen` is a
//! publication sequence (bit 0 names the live half) and tags the entries of
//! the program's ACL verdict cache, so the same store retires every cached
//! verdict: a packet reads `gen` once and can only take a cached verdict
//! computed on the tables it uses.
//!
//! The caches are switchable at run time ([`LaneProgram::set_fast_paths`]:
//! `lane_cfg.flags`), so that an operator can bisect a suspected fast-path
//! bug on the lane as on the workers.

use super::acl::LaneAcl;
use super::counters::{CounterValue, LanePortStats, counters};
use super::fib::{FibCapacity, FibMaps, FibMirror};
use super::layout::c::lane_fwd_flow;
use super::layout::*;
use super::shm::{MappedArray, grace_period_available, kernel_grace_period};
use super::trace::{LaneTrace, RECORD_SIZE};
use crate::error::{Unavailable, XdpError};
use crate::netlink::AttachMode;
use aya::maps::{Array, DevMap, HashMap, MapData, PerCpuArray, PerCpuValues, RingBuf, XskMap};
use aya::programs::{Xdp, XdpMode, xdp::XdpLinkId};
use aya::{Ebpf, EbpfLoader};
use std::collections::HashMap as StdMap;
use std::mem::offset_of;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd};

static LANE_OBJ: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/lane.o"));

/// Name of the lane program in the kernel.
pub const LANE_PROG_NAME: &str = "tern_lane";

/// The compiled lane program (ELF), for tools that load it themselves.
pub fn lane_object() -> &'static [u8] {
    LANE_OBJ
}

/// How to load the lane.
#[derive(Clone, Copy, Debug)]
pub struct LaneConfig {
    pub fib: FibCapacity,
    /// ARP and ND go to tern's XSK (standalone) instead of Linux.
    pub neigh_to_tern: bool,
    /// Linux owns the router's addresses (their traffic goes to Linux).
    pub linux_mode: bool,
    /// Buckets (2 entries each, per CPU) of the ACL verdict cache, rounded
    /// up to a power of two; 0 starts with the cache off (1 bucket if
    /// [`LaneProgram::set_fast_paths`] turns it on).
    pub acl_cache_buckets: u32,
    /// The forwarding memo: a flow a CPU forwarded before skips the rule
    /// sets, the FIB and the egress interface (`bpf/lane.h`
    /// `lane_fwd_flows`); false starts with it off.
    pub fwd_memo: bool,
    /// Buckets (2 flows each, per CPU) of the forwarding memo's flow
    /// table, rounded up to a power of two (at least 1).
    pub fwd_buckets: u32,
    /// The punt policers (`bpf/lib/punt.h`), one `(packets per second,
    /// burst)` per class in [`PUNT_CLASSES`] order, per CPU; a rate of 0
    /// does not police the class (the default: the library polices
    /// nothing unless told; tern's `[dataplane.punt]` tells it).
    pub punt: [(u32, u32); PUNT_CLASSES.len()],
}

/// The classes of frames for the router itself that the lane polices
/// apart (`bpf/lane.h` PC_*, in order; their drops are counted as
/// `xdp-lane/punt-shed-<class>`).
pub const PUNT_CLASSES: [&str; 7] = ["neighbor", "bgp", "ospf", "vrrp", "ike", "bfd", "local"];

/// `lane_punt_rate`'s words for `punt`: per class the cost of a packet and
/// the burst tolerance, in nanoseconds (0: not policed).
pub(crate) fn punt_words(punt: &[(u32, u32)]) -> Vec<u64> {
    let mut w = Vec::with_capacity(punt.len() * 2);
    for &(rate, burst) in punt {
        let cost = if rate == 0 { 0 } else { (1_000_000_000 / u64::from(rate)).max(1) };
        w.push(cost);
        w.push(cost.saturating_mul(u64::from(burst.max(1))));
    }
    w
}

impl Default for LaneConfig {
    fn default() -> Self {
        LaneConfig {
            fib: FibCapacity::default(),
            neigh_to_tern: true,
            linux_mode: false,
            acl_cache_buckets: ACL_CACHE_BUCKETS,
            fwd_memo: true,
            fwd_buckets: FWD_BUCKETS,
            punt: [(0, 0); PUNT_CLASSES.len()],
        }
    }
}

/// Everything except the FIB, as one generation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaneTables {
    /// Interfaces by tern index (sparse is fine).
    pub ifs: Vec<LaneIf>,
    /// (port, VLAN id) -> sub-interface index.
    pub vlans: Vec<(u16, u16, u16)>,
    /// Rule sets, indexed as the interfaces' `acl_in`/`acl_out`.
    pub acls: Vec<LaneAcl>,
    /// (tern interface, MAC): the virtual MACs the interfaces accept as
    /// their own (`lane_vmacs`; at most [`MAX_VMACS`]).
    pub vmacs: Vec<(u16, [u8; 6])>,
}

/// What one half of the double buffer holds (to clear it before reuse).
#[derive(Default)]
struct Half {
    ifs: Vec<u16>,
    vlans: Vec<u32>,
    tunnels: Vec<[u8; TUN_KEY_SIZE]>,
    sets: usize,
}

/// ACL hit counters: the program counts per (half, set, family, bit); a
/// rule set's totals survive flips that do not change it.
#[derive(Default)]
struct HitAccount {
    /// Per set: per family, per slot (bit; the last is the default).
    acc: Vec<[Vec<[u64; 2]>; 2]>,
    /// Values of each half's slots when the half became live.
    baseline: [Vec<[Vec<[u64; 2]>; 2]>; 2],
}

const SLOTS: usize = ACL_RULES + 1;

struct Attached {
    ifname: String,
    link: Option<XdpLinkId>,
    mode: Option<AttachMode>,
}

/// One flow of a CPU's forwarding memo, for tests: (publication sequence,
/// FIB sequence, the key's destination address word (the low one for
/// IPv6), egress port; None for a memoised input rule set drop,
/// [`FWD_MEMO_LOCAL`] for GRE to one of the router's addresses).
#[doc(hidden)]
pub type FwdMemoEntry = (u32, u32, u64, Option<u16>);

/// The egress port of a [`FwdMemoEntry`] whose packets go on to gre-input
/// (bpf/lane.h LANE_FM_LOCAL_PORT).
#[doc(hidden)]
pub const FWD_MEMO_LOCAL: u16 = 0xffff;

/// `lane_cfg`, as the loaded build declares it.
enum CfgMap {
    Full(Array<MapData, [u8; CFG_SIZE]>),
    /// Builds before the forwarding memo (no `fib_gen`), which `load_object`
    /// may load.
    Short(Array<MapData, [u8; 8]>),
}

impl CfgMap {
    fn take(ebpf: &mut Ebpf) -> Result<CfgMap, XdpError> {
        let m = ebpf.take_map("lane_cfg").ok_or_else(|| prog_err("object", "no map lane_cfg"))?;
        let aya::maps::Map::Array(data) = m else { return Err(prog_err("lane_cfg", "not an array map")) };
        let size = data.info().map_err(|e| prog_err("lane_cfg", e))?.value_size();
        let m = aya::maps::Map::Array(data);
        Ok(if size == 8 {
            CfgMap::Short(Array::try_from(m).map_err(|e| prog_err("lane_cfg", e))?)
        } else {
            CfgMap::Full(Array::try_from(m).map_err(|e| prog_err("lane_cfg", e))?)
        })
    }

    fn set(&mut self, v: [u8; CFG_SIZE]) -> Result<(), XdpError> {
        match self {
            CfgMap::Full(a) => a.set(0, v, 0),
            CfgMap::Short(a) => {
                let mut short = [0u8; 8];
                short.copy_from_slice(&v[..8]);
                a.set(0, short, 0)
            }
        }
        .map_err(|e| prog_err("lane_cfg", e))
    }
}

/// The lane program, its maps and the devices it is attached to.
/// Detached from every device on drop.
pub struct LaneProgram {
    cfg_map: CfgMap,
    rx: Array<MapData, [u8; 8]>,
    ifs: Array<MapData, [u8; IF_SIZE]>,
    vlans: Array<MapData, u16>,
    tunnels: HashMap<MapData, [u8; TUN_KEY_SIZE], u16>,
    local4: HashMap<MapData, u32, u8>,
    local6: HashMap<MapData, u128, u8>,
    /// `lane_encap_ports` and what it holds ([`LaneProgram::set_encap_ports`]).
    encap_ports: HashMap<MapData, u16, u8>,
    encap_set: Vec<u16>,
    /// `lane_vmacs` (absent from builds before virtual MACs).
    vmacs: Option<HashMap<MapData, [u8; VMAC_KEY_SIZE], u8>>,
    /// The addresses in `local4` / `local6` (LCFG_LOCAL4/6 say whether
    /// there are any, so that the program skips the lookup otherwise).
    locals: std::collections::HashSet<IpAddr>,
    acl_sets: Array<MapData, [u8; ACL_SET_SIZE]>,
    acl_fields: Array<MapData, [u8; ACL_FIELD_SIZE]>,
    acl_hits: PerCpuArray<MapData, [u64; 2]>,
    acl_cache: Array<MapData, [u8; ACL_CBUCKET_SIZE]>,
    /// The cache's per-CPU memo of the last classification (one entry;
    /// absent from builds of the program older than it, which
    /// `load_object` may load).
    acl_memo: Option<PerCpuArray<MapData, [u8; ACL_CENTRY_SIZE]>>,
    /// Buckets of `acl_cache` (per CPU times the possible CPUs: the map's size).
    acl_cache_buckets: u32,
    /// The forwarding memo's flow table, `fwd_buckets` buckets per CPU
    /// (absent from older builds).
    fwd_memo: Option<Array<MapData, [u8; FWD_FBUCKET_SIZE]>>,
    fwd_buckets: u32,
    ctr: PerCpuArray<MapData, u64>,
    /// Packet traces: the ring buffer the program records into and its
    /// budget (None in builds before traces), and the records still wanted.
    trace_ring: Option<RingBuf<MapData>>,
    trace_budget: Option<Array<MapData, i64>>,
    trace_want: u32,
    port_stats: PerCpuArray<MapData, [u64; 4]>,
    /// The punt policers' rates and per-CPU state (absent from builds
    /// before them), and the rates last written.
    punt_rate: Option<Array<MapData, u64>>,
    punt_tat: Option<PerCpuArray<MapData, u64>>,
    punt_words: Vec<u64>,
    tx: DevMap<MapData>,
    xsks: XskMap<MapData>,
    mirror: Option<FibMirror>,
    fib_maps: Option<FibMaps>,
    /// Publications so far (`lane_cfg.gen`); the live half is `seq & 1`.
    seq: u32,
    /// FIB mirror syncs that wrote entries (`lane_cfg.fib_gen`).
    fib_seq: u32,
    gen_: u32,
    flags: u32,
    halves: [Half; 2],
    hits: HitAccount,
    tables: LaneTables,
    /// By tern port.
    ports: StdMap<u16, Attached>,
    // Last: dropping it detaches the program (after the maps are released).
    ebpf: Ebpf,
}

fn prog_err(what: &str, e: impl std::fmt::Display) -> XdpError {
    XdpError::Program(format!("XDP lane: {what}: {e}"))
}

fn take<T: TryFrom<aya::maps::Map>>(ebpf: &mut Ebpf, name: &str) -> Result<T, XdpError>
where
    T::Error: std::fmt::Display,
{
    let m = ebpf.take_map(name).ok_or_else(|| prog_err("object", format!("no map {name}")))?;
    T::try_from(m).map_err(|e| prog_err(name, e))
}

/// [`take`] for a map that older builds of the program lack: None there.
fn take_opt<T: TryFrom<aya::maps::Map>>(ebpf: &mut Ebpf, name: &str) -> Result<Option<T>, XdpError>
where
    T::Error: std::fmt::Display,
{
    ebpf.take_map(name).map(|m| T::try_from(m).map_err(|e| prog_err(name, e))).transpose()
}

/// The `lane_cfg.flags` bit saying the family's local address map is in use.
fn local_flag(addr: IpAddr) -> u32 {
    if addr.is_ipv4() { LCFG_LOCAL4 } else { LCFG_LOCAL6 }
}

fn take_mapped(ebpf: &mut Ebpf, name: &str, len: usize) -> Result<(MappedArray, MapData), XdpError> {
    let m = ebpf.take_map(name).ok_or_else(|| prog_err("object", format!("no map {name}")))?;
    let aya::maps::Map::Array(data) = m else { return Err(prog_err(name, "not an array map")) };
    let mapped = MappedArray::map(data.fd().as_fd(), len).map_err(|e| prog_err(&format!("mmap {name}"), e))?;
    Ok((mapped, data))
}

impl LaneProgram {
    /// Loads the program and creates its maps (nothing is attached yet).
    /// Fails with [`XdpError::Unavailable`] when this kernel or process
    /// cannot run it.
    pub fn load(cfg: &LaneConfig) -> Result<LaneProgram, XdpError> {
        Self::load_object(cfg, LANE_OBJ)
    }

    /// [`LaneProgram::load`] with another build of `bpf/lane.c` (an ELF
    /// object with the same maps and layouts): for benchmarks that time
    /// variants of the program side by side (`tern-bench lane
    /// --object`).
    #[doc(hidden)]
    pub fn load_object(cfg: &LaneConfig, object: &[u8]) -> Result<LaneProgram, XdpError> {
        if !grace_period_available() {
            return Err(XdpError::Unavailable {
                why: Unavailable::KernelTooOld,
                detail: "membarrier(MEMBARRIER_CMD_GLOBAL) is unavailable (nohz_full kernel?): the XDP lane cannot \
                         update its FIB safely"
                    .into(),
                source: None,
            });
        }
        let c = cfg.fib;
        // IPv4 entries hold block numbers below 2^15, IPv6 entries below
        // 2^16 - 2^13 (tern-fib's V4Entry, V6Entry).
        let v4_blocks = c.v4_blocks.clamp(1, 1 << 15);
        let v6_blocks = c.v6_blocks.clamp(1, (1 << 16) - (1 << 13));
        let members = c.ecmp_members.div_ceil(BLOCK as u32).max(1);
        let per_cpu = cfg.acl_cache_buckets.clamp(1, 1 << 20).next_power_of_two();
        let cache_mask = per_cpu - 1;
        // One slice of buckets per possible CPU (the program indexes its own).
        let cpus = aya::util::nr_cpus().map_err(|(what, e)| prog_err(what, e))?;
        let cache_buckets = u32::try_from(cpus)
            .ok()
            .and_then(|c| c.checked_mul(per_cpu))
            .filter(|&n| n.checked_mul(ACL_CBUCKET_SIZE as u32).is_some())
            .ok_or_else(|| prog_err("lane_acl_cache", format!("{per_cpu} buckets x {cpus} CPUs is too large")))?;
        let fwd_per_cpu = cfg.fwd_buckets.clamp(1, 1 << 20).next_power_of_two();
        let fwd_mask = fwd_per_cpu - 1;
        let fwd_buckets = u32::try_from(cpus)
            .ok()
            .and_then(|c| c.checked_mul(fwd_per_cpu))
            .filter(|&n| n.checked_mul(FWD_FBUCKET_SIZE as u32).is_some())
            .ok_or_else(|| prog_err("lane_fwd_flows", format!("{fwd_per_cpu} buckets x {cpus} CPUs is too large")))?;
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("lane_acl_cache", cache_buckets)
            .map_max_entries("lane_fwd_flows", fwd_buckets)
            .override_global("lane_fwd_flows_mask", &fwd_mask, false)
            .override_global("lane_acl_cache_mask", &cache_mask, true)
            .map_max_entries("lane_v4_nodes", v4_blocks)
            .map_max_entries("lane_v6_nodes", v6_blocks)
            .map_max_entries("lane_nh", c.nexthops.max(2))
            .map_max_entries("lane_ecmp", members)
            .load(object)
            .map_err(|e| crate::error::object_load_error("XDP lane: ", &e))?;
        let p: &mut Xdp = crate::error::xdp_program_mut(&mut ebpf, "XDP lane: ", LANE_PROG_NAME)?;
        p.load().map_err(|e| match &e {
            aya::programs::ProgramError::LoadError { io_error, .. } if io_error.raw_os_error() == Some(libc::EPERM) => {
                XdpError::Unavailable {
                    why: Unavailable::NoPermission,
                    detail: "loading the XDP lane needs CAP_BPF (or root)".into(),
                    source: None,
                }
            }
            _ => XdpError::Unavailable {
                why: Unavailable::KernelTooOld,
                detail: format!("the kernel refused the XDP lane program: {e:?}"),
                source: None,
            },
        })?;
        let blk = BLOCK * 4;
        // Trie entries are 16 bits (`struct lane_block16`).
        let blk16 = BLOCK * 2;
        let (v4_top, _) = take_mapped(&mut ebpf, "lane_v4_top", (1 << 16) * blk16)?;
        let (v4_nodes, _) = take_mapped(&mut ebpf, "lane_v4_nodes", v4_blocks as usize * blk16)?;
        let (v6_top, _) = take_mapped(&mut ebpf, "lane_v6_top", (1 << 16) * blk16)?;
        let (v6_nodes, _) = take_mapped(&mut ebpf, "lane_v6_nodes", v6_blocks as usize * blk16)?;
        let (nh, _) = take_mapped(&mut ebpf, "lane_nh", c.nexthops.max(2) as usize * 16)?;
        let (ecmp, _) = take_mapped(&mut ebpf, "lane_ecmp", members as usize * blk)?;
        let mut lp = LaneProgram {
            cfg_map: CfgMap::take(&mut ebpf)?,
            rx: take(&mut ebpf, "lane_rx")?,
            ifs: take(&mut ebpf, "lane_ifs")?,
            vlans: take(&mut ebpf, "lane_vlans")?,
            tunnels: take(&mut ebpf, "lane_tunnels")?,
            local4: take(&mut ebpf, "lane_local4")?,
            local6: take(&mut ebpf, "lane_local6")?,
            encap_ports: take(&mut ebpf, "lane_encap_ports")?,
            encap_set: Vec::new(),
            vmacs: take_opt(&mut ebpf, "lane_vmacs")?,
            locals: Default::default(),
            acl_sets: take(&mut ebpf, "lane_acl_sets")?,
            acl_fields: take(&mut ebpf, "lane_acl_fields")?,
            acl_hits: take(&mut ebpf, "lane_acl_hits")?,
            acl_cache: take(&mut ebpf, "lane_acl_cache")?,
            acl_cache_buckets: cache_buckets,
            acl_memo: take_opt(&mut ebpf, "lane_acl_memo")?,
            fwd_memo: take_opt(&mut ebpf, "lane_fwd_flows")?,
            fwd_buckets,
            ctr: take(&mut ebpf, "lane_ctr")?,
            trace_ring: take_opt(&mut ebpf, "lane_trace")?,
            trace_budget: take_opt(&mut ebpf, "lane_trace_budget")?,
            trace_want: 0,
            port_stats: take(&mut ebpf, "lane_port_stats")?,
            punt_rate: take_opt(&mut ebpf, "lane_punt_rate")?,
            punt_tat: take_opt(&mut ebpf, "lane_punt_tat")?,
            punt_words: Vec::new(),
            tx: take(&mut ebpf, "lane_tx")?,
            xsks: take(&mut ebpf, "lane_xsks")?,
            mirror: None,
            fib_maps: Some(FibMaps { v4_top, v4_nodes, v6_top, v6_nodes, nh, ecmp }),
            seq: 0,
            fib_seq: 0,
            gen_: 0,
            flags: 0,
            halves: Default::default(),
            hits: HitAccount::default(),
            tables: LaneTables::default(),
            ports: StdMap::new(),
            ebpf,
        };
        let mut flags = 0;
        if cfg.neigh_to_tern {
            flags |= LCFG_NEIGH_TO_TERN;
        }
        if cfg.linux_mode {
            flags |= LCFG_LINUX_MODE;
        }
        if cfg.acl_cache_buckets == 0 {
            flags |= LCFG_NO_ACL_CACHE;
        }
        if !cfg.fwd_memo {
            flags |= LCFG_NO_FWD_MEMO;
        }
        lp.flags = flags;
        lp.write_cfg()?;
        lp.set_punt_rates(&cfg.punt)?;
        Ok(lp)
    }

    /// Sets the punt policers (see [`LaneConfig::punt`]); the next packet
    /// of a class uses its new rate. New rates start with a full burst on
    /// every CPU; the same rates again change nothing. Builds of the
    /// program before the policers ignore it.
    pub fn set_punt_rates(&mut self, punt: &[(u32, u32)]) -> Result<(), XdpError> {
        let words = punt_words(punt);
        if words == self.punt_words {
            return Ok(());
        }
        let Some(m) = self.punt_rate.as_mut() else { return Ok(()) };
        for (i, &w) in words.iter().enumerate() {
            m.set(i as u32, w, 0).map_err(|e| prog_err("lane_punt_rate", e))?;
        }
        if let Some(t) = self.punt_tat.as_mut() {
            let cpus = aya::util::nr_cpus().map_err(|(what, e)| prog_err(what, e))?;
            for c in 0..punt.len() as u32 {
                let zero = PerCpuValues::try_from(vec![0u64; cpus]).map_err(|e| prog_err("lane_punt_tat", e))?;
                t.set(c, zero, 0).map_err(|e| prog_err("lane_punt_tat", e))?;
            }
        }
        self.punt_words = words;
        Ok(())
    }

    fn write_cfg(&mut self) -> Result<(), XdpError> {
        self.cfg_map.set(encode_cfg(self.seq, self.flags, self.fib_seq))
    }

    fn set_flag(&mut self, flag: u32, on: bool) -> Result<(), XdpError> {
        self.flags = if on { self.flags | flag } else { self.flags & !flag };
        self.write_cfg()
    }

    /// Traces the next `n` packets the lane decides (0: stops): each
    /// comes back from [`LaneProgram::trace_take`] with the verdict. Records
    /// of an earlier trace not yet taken are discarded.
    pub fn trace_arm(&mut self, n: u32) -> Result<(), XdpError> {
        if self.trace_ring.is_none() || self.trace_budget.is_none() {
            return Err(prog_err("lane_trace", "this build of the lane program records no traces"));
        }
        // Stopping clears the flag first; arming sets the budget first:
        // the program never records under a stale budget.
        self.trace_want = 0;
        self.set_flag(LCFG_TRACE, false)?;
        if let Some(b) = self.trace_budget.as_mut() {
            b.set(0, i64::from(n), 0).map_err(|e| prog_err("lane_trace_budget", e))?;
        }
        if let Some(r) = self.trace_ring.as_mut() {
            while r.next().is_some() {}
        }
        if n > 0 {
            self.trace_want = n;
            self.set_flag(LCFG_TRACE, true)?;
        }
        Ok(())
    }

    /// Packets the armed trace still wants.
    pub fn trace_remaining(&self) -> u32 {
        self.trace_want
    }

    /// The records the program wrote since the last call, at most the
    /// packets the trace still wants (the program's budget is shared by
    /// all CPUs without a fetching atomic and may overshoot by one per
    /// CPU); the trace stops once it has them all.
    pub fn trace_take(&mut self) -> Vec<LaneTrace> {
        let mut out = Vec::new();
        let Some(ring) = self.trace_ring.as_mut() else { return out };
        while let Some(item) = ring.next() {
            if self.trace_want == 0 {
                continue;
            }
            if let Some(t) = LaneTrace::decode(&item[..item.len().min(RECORD_SIZE)]) {
                out.push(t);
                self.trace_want -= 1;
            }
        }
        if self.trace_want == 0 && self.flags & LCFG_TRACE != 0 {
            // Best effort: a failed store leaves the flag on with a budget
            // of zero, which records nothing.
            let _ = self.set_flag(LCFG_TRACE, false);
        }
        out
    }

    /// Switches the lane's fast paths at run time (`lane_cfg.flags`, which
    /// every packet reads once): the ACL verdict cache with its memo
    /// (`acl_cache`; off, every rule set verdict comes from the classifier,
    /// and the forwarding memo holds no flow a rule set decides) and the
    /// forwarding memo (`fwd_memo`; off, every packet takes the whole
    /// path). The next packet sees the switch; nothing is re-attached or
    /// reloaded. A change bumps the FIB sequence after the flags, which
    /// retires every memoised flow (one a packet in flight filled under the
    /// old switches included): the memo starts again under the new ones.
    pub fn set_fast_paths(&mut self, acl_cache: bool, fwd_memo: bool) -> Result<(), XdpError> {
        let mut flags = self.flags & !(LCFG_NO_ACL_CACHE | LCFG_NO_FWD_MEMO);
        if !acl_cache {
            flags |= LCFG_NO_ACL_CACHE;
        }
        if !fwd_memo {
            flags |= LCFG_NO_FWD_MEMO;
        }
        if flags == self.flags {
            return Ok(());
        }
        self.flags = flags;
        self.write_cfg()?;
        self.bump_fib_seq()
    }

    /// The lane's fast paths as they are: (ACL verdict cache, forwarding
    /// memo).
    pub fn fast_paths(&self) -> (bool, bool) {
        (self.flags & LCFG_NO_ACL_CACHE == 0, self.flags & LCFG_NO_FWD_MEMO == 0)
    }

    /// ARP/ND to tern (standalone) or to Linux (Linux mode).
    pub fn set_neigh_to_tern(&mut self, on: bool) -> Result<(), XdpError> {
        self.set_flag(LCFG_NEIGH_TO_TERN, on)
    }

    /// tern terminates IPsec: in Linux mode, ESP and UDP to ports 500 and
    /// 4500 for the router's addresses go to tern's engine, not Linux
    /// (`xdp-lane/punt-ipsec`).
    pub fn set_ipsec(&mut self, on: bool) -> Result<(), XdpError> {
        self.set_flag(LCFG_IPSEC, on)
    }

    /// Pass everything to Linux (the lane paused).
    pub fn set_pass_all(&mut self, on: bool) -> Result<(), XdpError> {
        self.set_flag(LCFG_PASS_ALL, on)
    }

    /// Starts mirroring a FIB: copies all of it now; later changes go
    /// through [`LaneProgram::sync_fib`]. `reader` is registered in the
    /// FIB's RCU domain (see [`FibMirror`]).
    pub fn attach_fib(&mut self, raw: &tern_fib::RawFib<'_>, reader: Option<tern_rcu::Reader>) -> Result<(), XdpError> {
        FibMirror::check_layout(raw).map_err(XdpError::Config)?;
        let maps = self.fib_maps.take().ok_or_else(|| XdpError::Config("the lane mirrors one FIB".into()))?;
        let mut m = FibMirror::new(maps, reader);
        m.full_sync(raw);
        self.mirror = Some(m);
        self.bump_fib_seq()
    }

    /// Copies FIB changes (from `FibWriter::take_changes`). When any entry
    /// was written, bumps `lane_cfg.fib_gen` after the entries, which
    /// retires every CPU's forwarding memo: the next packet of a memoised
    /// flow takes the whole path again, on the new routes and neighbours.
    pub fn sync_fib(&mut self, raw: &tern_fib::RawFib<'_>, changes: &tern_fib::FibChanges) {
        let Some(m) = &mut self.mirror else { return };
        let before = m.stats().entries;
        m.sync(raw, changes);
        if m.stats().entries != before
            && let Err(e) = self.bump_fib_seq()
        {
            // Retire the memos another way: zeroed, they match nothing.
            log::warn!("XDP lane: FIB sequence not bumped ({e}); clearing the forwarding memo");
            if let Err(e) = self.clear_fwd_memo() {
                log::error!("XDP lane: forwarding memo not cleared ({e}): memoised flows may use old routes");
            }
        }
    }

    /// The FIB sequence, after new entries were written: one store (after
    /// them: the map update is a system call) retires every forwarding
    /// memo. When it wraps, every CPU's memo is zeroed first, since an
    /// entry could carry the coming value from 2^32 syncs ago.
    fn bump_fib_seq(&mut self) -> Result<(), XdpError> {
        let next = self.fib_seq.wrapping_add(1);
        if next == 0 {
            self.clear_fwd_memo()?;
        }
        self.fib_seq = next;
        self.write_cfg()
    }

    /// The FIB mirror (statistics, grace-period tuning).
    pub fn fib_mirror(&mut self) -> Option<&mut FibMirror> {
        self.mirror.as_mut()
    }

    /// Declares tern port `port` (tern interface `ifindex`) on kernel device
    /// `kifindex`: packets it receives are the lane's, and the lane may send
    /// out of it. Does not attach the program (see [`LaneProgram::attach`]).
    pub fn add_port(&mut self, port: u16, ifindex: u16, kifindex: u32) -> Result<(), XdpError> {
        if port >= MAX_PORTS {
            return Err(XdpError::Config(format!("port {port}: the XDP lane has {MAX_PORTS} ports")));
        }
        self.rx.set(kifindex & 0xffff, encode_rx(kifindex, ifindex, port), 0).map_err(|e| prog_err("lane_rx", e))?;
        self.tx.set(u32::from(port), kifindex, None, 0).map_err(|e| prog_err("lane_tx", e))?;
        self.ports.entry(port).or_insert(Attached { ifname: String::new(), link: None, mode: None });
        Ok(())
    }

    /// Forgets port `port` on kernel device `kifindex` (its packets pass to
    /// Linux untouched).
    pub fn remove_port(&mut self, port: u16, kifindex: u32) {
        let _ = self.rx.set(kifindex & 0xffff, [0u8; 8], 0);
        self.ports.remove(&port);
    }

    /// Attaches the program to `ifname` (tern port `port`, which
    /// [`LaneProgram::add_port`] declared) in native mode, or in generic
    /// mode if `allow_generic` and the driver refuses.
    pub fn attach(&mut self, ifname: &str, port: u16, allow_generic: bool) -> Result<AttachMode, XdpError> {
        let kifindex = crate::sys::if_index(ifname).map_err(|e| XdpError::Unavailable {
            why: Unavailable::NoSuchInterface,
            detail: format!("interface {ifname}"),
            source: Some(e),
        })?;
        let p = crate::error::xdp_program_mut(&mut self.ebpf, "XDP lane: ", LANE_PROG_NAME)?;
        let (link, mode) = match p.attach_to_if_index(kifindex, XdpMode::Driver) {
            Ok(l) => (l, AttachMode::Driver),
            Err(e) if allow_generic => {
                log::warn!("{ifname}: native XDP refused ({e}); XDP lane in generic (skb) mode, which is slower");
                let l = p.attach_to_if_index(kifindex, XdpMode::Skb).map_err(|e| XdpError::Unavailable {
                    why: Unavailable::NoDriverSupport,
                    detail: format!("{ifname}: cannot attach XDP in native or generic mode ({e})"),
                    source: None,
                })?;
                (l, AttachMode::Skb)
            }
            Err(e) => {
                return Err(XdpError::Unavailable {
                    why: Unavailable::NoDriverSupport,
                    detail: format!("{ifname}: native XDP refused ({e})"),
                    source: None,
                });
            }
        };
        let a = self.ports.entry(port).or_insert(Attached { ifname: String::new(), link: None, mode: None });
        a.ifname = ifname.to_string();
        a.link = Some(link);
        a.mode = Some(mode);
        log::info!("{ifname}: XDP lane attached in {mode:?} mode (port {port})");
        Ok(mode)
    }

    /// Detaches the program from port `port`'s device.
    pub fn detach(&mut self, port: u16) -> Result<(), XdpError> {
        let Some(a) = self.ports.get_mut(&port) else { return Ok(()) };
        let Some(link) = a.link.take() else { return Ok(()) };
        let p = crate::error::xdp_program_mut(&mut self.ebpf, "XDP lane: ", LANE_PROG_NAME)?;
        p.detach(link).map_err(|e| prog_err("detach", e))?;
        log::info!("{}: XDP lane detached", a.ifname);
        Ok(())
    }

    /// The attach mode of port `port`, if attached.
    pub fn attach_mode(&self, port: u16) -> Option<AttachMode> {
        self.ports.get(&port).and_then(|a| a.mode)
    }

    /// Punts of port `port`'s receive queue `queue` go to the AF_XDP socket
    /// `fd` (tern's userspace engine).
    pub fn register_xsk(&mut self, port: u16, queue: u32, fd: impl AsRawFd) -> Result<(), XdpError> {
        if port >= MAX_PORTS || queue >= MAX_QUEUES {
            return Err(XdpError::Config(format!("port {port} queue {queue} beyond the XDP lane's XSK map")));
        }
        self.xsks.set(u32::from(port) * MAX_QUEUES + queue, fd, 0).map_err(|e| prog_err("lane_xsks", e))
    }

    /// An address of the router whose traffic Linux keeps (Linux mode).
    pub fn add_local(&mut self, addr: IpAddr) -> Result<(), XdpError> {
        // The flag first: a packet that sees it before the address only
        // looks up and misses, as it would without the flag.
        self.set_flag(local_flag(addr), true)?;
        match addr {
            IpAddr::V4(a) => self.local4.insert(u32::from_ne_bytes(a.octets()), 1, 0),
            IpAddr::V6(a) => self.local6.insert(u128::from_ne_bytes(a.octets()), 1, 0),
        }
        .map_err(|e| prog_err("local address maps", e))?;
        self.locals.insert(addr);
        Ok(())
    }

    /// The local UDP ports of ESP in UDP other than 4500 (the SAs'
    /// `udp_encap` source ports; 500 and 4500 are ignored): UDP to them
    /// for the router's addresses is IPsec (punted to the engine as
    /// `punt-ipsec`; in Linux mode only with [`LaneProgram::set_ipsec`])
    /// whatever it carries. The map follows `ports` (at most 256).
    pub fn set_encap_ports(&mut self, ports: &[u16]) -> Result<(), XdpError> {
        let map = &mut self.encap_ports;
        let r = crate::steer::sync_port_set(&mut self.encap_set, ports, |p, on| {
            let key = u16::from_ne_bytes(p.to_be_bytes());
            if on { map.insert(key, 1, 0) } else { map.remove(&key) }.map_err(|e| prog_err("lane_encap_ports", e))
        });
        // The flag follows what the map holds (packets look ports up only
        // while it is set).
        self.set_flag(LCFG_ENCAP_PORTS, !self.encap_set.is_empty())?;
        r
    }

    pub fn remove_local(&mut self, addr: IpAddr) -> Result<(), XdpError> {
        match addr {
            IpAddr::V4(a) => self.local4.remove(&u32::from_ne_bytes(a.octets())),
            IpAddr::V6(a) => self.local6.remove(&u128::from_ne_bytes(a.octets())),
        }
        .map_err(|e| prog_err("local address maps", e))?;
        self.locals.remove(&addr);
        // The flag last, once the family's map is empty.
        if !self.locals.iter().any(|l| l.is_ipv4() == addr.is_ipv4()) {
            self.set_flag(local_flag(addr), false)?;
        }
        Ok(())
    }

    /// The tables the program reads now.
    pub fn tables(&self) -> &LaneTables {
        &self.tables
    }

    /// Makes `t` the program's tables: writes the idle half, flips, and
    /// waits until no packet can still be reading the old half.
    pub fn publish(&mut self, t: &LaneTables) -> Result<(), XdpError> {
        let seq = self.seq.wrapping_add(1);
        let g = seq & 1;
        self.write_half(g, t)?;
        // Virtual MACs are not double-buffered: the new ones before the
        // flip, the old ones go after it.
        self.add_vmacs(&t.vmacs)?;
        // Hit counters of the half about to go live, as they stand.
        let nsets = t.acls.len().min(MAX_SETS);
        let base_new = self.read_hits(g, nsets)?;
        let acl_changed = self.tables.acls != t.acls;
        if seq == 0 {
            // The sequence wrapped: the cache may hold entries tagged with
            // the coming value 2^32 publications ago. Packets running now
            // carry the current value and cannot match what they write.
            self.clear_acl_cache()?;
        }
        // One store: the new half and the new cache epoch together.
        self.seq = seq;
        self.gen_ = g;
        self.write_cfg()?;
        kernel_grace_period().map_err(|e| XdpError::Io { what: "membarrier".into(), source: e })?;
        // The old half is idle now: fold its counts into the totals.
        let old = 1 - g;
        let prev_sets = self.tables.acls.len().min(MAX_SETS);
        let now_old = self.read_hits(old, prev_sets)?;
        if acl_changed {
            // New rule sets: counters restart, as userspace's do.
            self.hits.acc = vec![Default::default(); nsets];
        } else {
            fold(&mut self.hits.acc, &now_old, &self.hits.baseline[old as usize]);
        }
        self.hits.baseline[g as usize] = base_new;
        self.remove_vmacs(&t.vmacs)?;
        self.tables = t.clone();
        Ok(())
    }

    /// Adds the virtual MACs of `want` the lane lacks (beyond
    /// [`MAX_VMACS`]: refused, logged).
    fn add_vmacs(&mut self, want: &[(u16, [u8; 6])]) -> Result<(), XdpError> {
        let have = &self.tables.vmacs;
        let new: Vec<_> = want.iter().filter(|v| !have.contains(v)).copied().collect();
        if new.is_empty() {
            return Ok(());
        }
        let Some(m) = self.vmacs.as_mut() else {
            log::warn!("XDP lane: this build of the lane program has no virtual MACs; frames to them are dropped");
            return Ok(());
        };
        for (i, (ifindex, mac)) in new.into_iter().enumerate() {
            if have.len() + i >= MAX_VMACS {
                log::warn!("XDP lane: more than {MAX_VMACS} virtual MACs; interface {ifindex} does not get another");
                break;
            }
            m.insert(vmac_key(ifindex, mac), 1, 0).map_err(|e| prog_err("lane_vmacs", e))?;
        }
        Ok(())
    }

    /// Removes the virtual MACs the lane has that `want` lacks.
    fn remove_vmacs(&mut self, want: &[(u16, [u8; 6])]) -> Result<(), XdpError> {
        let Some(m) = self.vmacs.as_mut() else { return Ok(()) };
        for &(ifindex, mac) in self.tables.vmacs.iter().filter(|v| !want.contains(v)) {
            // One refused at the capacity was never there (ENOENT).
            if let Err(e) = m.remove(&vmac_key(ifindex, mac))
                && !matches!(&e, aya::maps::MapError::SyscallError(s) if s.io_error.raw_os_error() == Some(libc::ENOENT))
            {
                return Err(prog_err("lane_vmacs", e));
            }
        }
        Ok(())
    }

    /// Zeroes every ACL verdict cache entry and every CPU's memo (a zeroed
    /// entry matches no key).
    fn clear_acl_cache(&mut self) -> Result<(), XdpError> {
        for i in 0..self.acl_cache_buckets {
            self.acl_cache.set(i, [0u8; ACL_CBUCKET_SIZE], 0).map_err(|e| prog_err("lane_acl_cache", e))?;
        }
        if let Some(memo) = &mut self.acl_memo {
            let cpus = aya::util::nr_cpus().map_err(|(what, e)| prog_err(what, e))?;
            // One entry per direction (input, output rule sets).
            for dir in 0..2 {
                let zero = PerCpuValues::try_from(vec![[0u8; ACL_CENTRY_SIZE]; cpus])
                    .map_err(|e| prog_err("lane_acl_memo", e))?;
                memo.set(dir, zero, 0).map_err(|e| prog_err("lane_acl_memo", e))?;
            }
        }
        // Tagged with the publication sequence too.
        self.clear_fwd_memo()
    }

    /// Zeroes every CPU's forwarding memo (a zeroed entry matches no
    /// packet: its key has a zero source address, a martian).
    fn clear_fwd_memo(&mut self) -> Result<(), XdpError> {
        if let Some(memo) = &mut self.fwd_memo {
            for i in 0..self.fwd_buckets {
                memo.set(i, [0u8; FWD_FBUCKET_SIZE], 0).map_err(|e| prog_err("lane_fwd_flows", e))?;
            }
        }
        Ok(())
    }

    /// Test hook: the FIB sequence continues from `seq` (to exercise its
    /// wrap without 2^32 syncs).
    #[doc(hidden)]
    pub fn set_fib_seq(&mut self, seq: u32) -> Result<(), XdpError> {
        self.fib_seq = seq;
        self.write_cfg()
    }

    /// Test hook: the publication and FIB sequences (`lane_cfg.gen`,
    /// `lane_cfg.fib_gen`).
    #[doc(hidden)]
    pub fn sequences(&self) -> (u32, u32) {
        (self.seq, self.fib_seq)
    }

    /// Test hook: each CPU's forwarding memo, every flow of its table
    /// (see [`FwdMemoEntry`]; zeroed ones too), bucket by bucket.
    #[doc(hidden)]
    pub fn fwd_memo_entries(&self) -> Result<Vec<Vec<FwdMemoEntry>>, XdpError> {
        let Some(memo) = &self.fwd_memo else { return Ok(Vec::new()) };
        let cpus = aya::util::nr_cpus().map_err(|(what, e)| prog_err(what, e))?;
        let per_cpu = self.fwd_buckets / (cpus as u32).max(1);
        let u32_at = |b: &[u8], at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let mut all = Vec::new();
        for cpu in 0..cpus as u32 {
            let mut flows = Vec::new();
            for i in 0..per_cpu {
                let bucket = memo.get(&(cpu * per_cpu + i), 0).map_err(|e| prog_err("lane_fwd_flows", e))?;
                for b in bucket.chunks_exact(FWD_FLOW_SIZE) {
                    // `struct lane_fwd_flow`'s fields, from its checked
                    // mirror; lo[1] is the destination's low word.
                    let lo1 = offset_of!(lane_fwd_flow, lo) + 8;
                    let mut dst = [0u8; 8];
                    dst.copy_from_slice(&b[lo1..lo1 + 8]);
                    let tx = offset_of!(lane_fwd_flow, tx_port);
                    let port = u16::from_ne_bytes([b[tx], b[tx + 1]]);
                    flows.push((
                        u32_at(b, offset_of!(lane_fwd_flow, epoch)),
                        u32_at(b, offset_of!(lane_fwd_flow, fib_gen)),
                        u64::from_ne_bytes(dst),
                        (b[offset_of!(lane_fwd_flow, l2len)] != 0).then_some(port),
                    ));
                }
            }
            all.push(flows);
        }
        Ok(all)
    }

    /// Test hook: the publication sequence continues from `seq` (to exercise
    /// its wrap without 2^32 publications).
    #[doc(hidden)]
    pub fn set_publish_seq(&mut self, seq: u32) -> Result<(), XdpError> {
        if seq & 1 != self.gen_ {
            return Err(XdpError::Config("the sequence must keep the live half".into()));
        }
        self.seq = seq;
        self.write_cfg()
    }

    fn write_half(&mut self, g: u32, t: &LaneTables) -> Result<(), XdpError> {
        let half = std::mem::take(&mut self.halves[g as usize]);
        let base_if = g * u32::from(MAX_IFS);
        let mut written = Vec::new();
        for f in &t.ifs {
            if f.index >= MAX_IFS {
                continue;
            }
            self.ifs.set(base_if + u32::from(f.index), f.encode(), 0).map_err(|e| prog_err("lane_ifs", e))?;
            written.push(f.index);
        }
        for i in half.ifs.iter().filter(|i| !written.contains(i)) {
            self.ifs.set(base_if + u32::from(*i), [0u8; IF_SIZE], 0).map_err(|e| prog_err("lane_ifs", e))?;
        }
        let base_vlan = g * u32::from(MAX_PORTS) * 4096;
        for k in &half.vlans {
            self.vlans.set(*k, 0, 0).map_err(|e| prog_err("lane_vlans", e))?;
        }
        let mut vlans = Vec::new();
        for &(port, vid, sub) in &t.vlans {
            if port >= MAX_PORTS || vid > 4095 {
                continue;
            }
            let k = base_vlan + u32::from(port) * 4096 + u32::from(vid);
            if sub >= MAX_IFS {
                continue;
            }
            // Stored + 1: a fresh map's zeroes mean "no sub-interface".
            self.vlans.set(k, sub + 1, 0).map_err(|e| prog_err("lane_vlans", e))?;
            vlans.push(k);
        }
        for k in &half.tunnels {
            let _ = self.tunnels.remove(k);
        }
        let mut tunnels = Vec::new();
        for f in &t.ifs {
            if let LaneIfKind::Gre(gre) = f.kind {
                let k = encode_tun_key(g, &gre);
                // userspace takes the first matching tunnel
                if tunnels.contains(&k) {
                    continue;
                }
                self.tunnels.insert(k, f.index, 0).map_err(|e| prog_err("lane_tunnels", e))?;
                tunnels.push(k);
            }
        }
        let nsets = t.acls.len().min(MAX_SETS);
        for (i, a) in t.acls.iter().take(MAX_SETS).enumerate() {
            for (v6, fam) in [(false, &a.v4), (true, &a.v6)] {
                let base = acl_base(g, i, v6);
                for ft in &fam.fields {
                    self.acl_fields
                        .set(base * NF as u32 + ft.field as u32, encode_acl_field(&ft.starts, &ft.bits), 0)
                        .map_err(|e| prog_err("lane_acl_fields", e))?;
                }
                self.acl_sets.set(base, fam.hdr.encode(), 0).map_err(|e| prog_err("lane_acl_sets", e))?;
            }
        }
        for i in nsets..half.sets {
            for v6 in [false, true] {
                self.acl_sets
                    .set(acl_base(g, i, v6), AclSetHdr::default().encode(), 0)
                    .map_err(|e| prog_err("lane_acl_sets", e))?;
            }
        }
        self.halves[g as usize] = Half { ifs: written, vlans, tunnels, sets: nsets };
        Ok(())
    }

    /// Per set (first `nsets`), per family, per slot: packets and bytes
    /// summed over CPUs, in half `g`.
    fn read_hits(&self, g: u32, nsets: usize) -> Result<Vec<[Vec<[u64; 2]>; 2]>, XdpError> {
        let mut out = Vec::with_capacity(nsets);
        for set in 0..nsets {
            let mut fams: [Vec<[u64; 2]>; 2] = Default::default();
            for (v6, slots) in fams.iter_mut().enumerate() {
                let base = acl_base(g, set, v6 == 1) as usize * SLOTS;
                for s in 0..SLOTS {
                    let v: PerCpuValues<[u64; 2]> =
                        self.acl_hits.get(&((base + s) as u32), 0).map_err(|e| prog_err("lane_acl_hits", e))?;
                    slots.push(v.iter().fold([0u64; 2], |a, x| [a[0].wrapping_add(x[0]), a[1].wrapping_add(x[1])]));
                }
            }
            out.push(fams);
        }
        Ok(out)
    }

    /// Hits of rule set `set` counted by the lane: one (packets, bytes) per
    /// rule, then the default policy's, as `tern_acl::RuleCounters`
    /// snapshots them.
    pub fn acl_hits(&self, set: usize) -> Result<Vec<(u64, u64)>, XdpError> {
        let Some(acl) = self.tables.acls.get(set).filter(|_| set < MAX_SETS) else { return Ok(Vec::new()) };
        let now = self.read_hits(self.gen_, set + 1)?;
        let mut total = vec![(0u64, 0u64); acl.rule_count + 1];
        for (v6, fam) in [(false, &acl.v4), (true, &acl.v6)] {
            let f = usize::from(v6);
            for s in 0..SLOTS {
                let cur = now.get(set).map_or([0; 2], |x| x[f].get(s).copied().unwrap_or([0; 2]));
                let base = self.hits.baseline[self.gen_ as usize]
                    .get(set)
                    .map_or([0; 2], |x| x[f].get(s).copied().unwrap_or([0; 2]));
                let acc = self.hits.acc.get(set).map_or([0; 2], |x| x[f].get(s).copied().unwrap_or([0; 2]));
                let p = acc[0].wrapping_add(cur[0].wrapping_sub(base[0]));
                let b = acc[1].wrapping_add(cur[1].wrapping_sub(base[1]));
                if p == 0 && b == 0 {
                    continue;
                }
                let i = if s == ACL_RULES {
                    acl.rule_count
                } else {
                    fam.slot_rule(s).map_or(acl.rule_count, |r| r as usize)
                };
                if let Some(t) = total.get_mut(i) {
                    t.0 = t.0.wrapping_add(p);
                    t.1 = t.1.wrapping_add(b);
                }
            }
        }
        Ok(total)
    }

    /// Every counter, summed over CPUs (0 for one that the loaded build
    /// of the program does not have: older builds have fewer).
    pub fn counters(&self) -> Result<Vec<CounterValue>, XdpError> {
        let mut out = Vec::new();
        let have = self.ctr.len();
        for d in counters() {
            let value = if d.index < have {
                let v: PerCpuValues<u64> = self.ctr.get(&d.index, 0).map_err(|e| prog_err("lane_ctr", e))?;
                v.iter().sum()
            } else {
                0
            };
            out.push(CounterValue { desc: d, value });
        }
        Ok(out)
    }

    /// One counter by name (0 if unknown).
    pub fn counter(&self, node: &str, error: &str) -> u64 {
        let Some(d) = super::counters::counter(node, error) else { return 0 };
        self.ctr.get(&d.index, 0).map(|v| v.iter().sum()).unwrap_or(0)
    }

    /// Packets the lane received and sent on tern port `port`.
    pub fn port_stats(&self, port: u16) -> Result<LanePortStats, XdpError> {
        if port >= MAX_PORTS {
            return Ok(LanePortStats::default());
        }
        let v: PerCpuValues<[u64; 4]> =
            self.port_stats.get(&u32::from(port), 0).map_err(|e| prog_err("lane_port_stats", e))?;
        let sum = |w: usize| v.iter().fold(0u64, |a, c| a.wrapping_add(c[w]));
        Ok(LanePortStats { rx_packets: sum(0), rx_bytes: sum(1), tx_packets: sum(2), tx_bytes: sum(3) })
    }

    /// The loaded lane program.
    fn xdp_program(&self) -> Result<&Xdp, XdpError> {
        self.ebpf
            .program(LANE_PROG_NAME)
            .ok_or_else(|| prog_err("object", "no program tern_lane"))?
            .try_into()
            .map_err(|e| prog_err("program type", e))
    }

    /// Runs the program once on `frame` as received on kernel device
    /// `kifindex`, queue `queue` (BPF_PROG_TEST_RUN; nothing is sent).
    /// Returns the XDP action and the frame as the program left it.
    pub fn test_run(&self, frame: &[u8], kifindex: u32, queue: u32) -> Result<(u32, Vec<u8>), XdpError> {
        use aya::programs::{TestRun, TestRunOptions};
        let p = self.xdp_program()?;
        let ctx = xdp_md(frame.len(), kifindex, queue);
        let mut out = vec![0u8; frame.len() + 256];
        let mut ctx_out = [0u8; 24];
        let r = p
            .test_run(TestRunOptions {
                data_in: Some(frame),
                data_out: Some(&mut out),
                ctx_in: Some(&ctx),
                ctx_out: Some(&mut ctx_out),
                ..TestRunOptions::default()
            })
            .map_err(|e| prog_err("BPF_PROG_TEST_RUN", format!("{e:?}")))?;
        out.truncate(r.data_size_out as usize);
        Ok((r.return_value, out))
    }

    /// Runs the program `repeat` times on `frame` (BPF_PROG_TEST_RUN: the
    /// kernel times the loop) and returns the last action and the average
    /// time of one run. The runs share the buffer: the frame a run leaves
    /// is the next run's input.
    pub fn test_run_timed(
        &self,
        frame: &[u8],
        kifindex: u32,
        repeat: u32,
    ) -> Result<(u32, std::time::Duration), XdpError> {
        use aya::programs::{TestRun, TestRunOptions};
        let p = self.xdp_program()?;
        let ctx = xdp_md(frame.len(), kifindex, 0);
        let r = p
            .test_run(TestRunOptions { data_in: Some(frame), ctx_in: Some(&ctx), repeat, ..TestRunOptions::default() })
            .map_err(|e| prog_err("BPF_PROG_TEST_RUN", format!("{e:?}")))?;
        Ok((r.return_value, r.duration))
    }

    /// The program's file descriptor (e.g. for `bpftool`).
    pub fn program_fd(&self) -> Option<std::os::fd::RawFd> {
        let p: &Xdp = self.ebpf.program(LANE_PROG_NAME)?.try_into().ok()?;
        p.fd().ok().map(|f| f.as_fd().as_raw_fd())
    }
}

fn fold(acc: &mut Vec<[Vec<[u64; 2]>; 2]>, now: &[[Vec<[u64; 2]>; 2]], base: &[[Vec<[u64; 2]>; 2]]) {
    if acc.len() < now.len() {
        acc.resize(now.len(), Default::default());
    }
    for (set, fams) in now.iter().enumerate() {
        for f in 0..2 {
            let Some(a) = acc.get_mut(set) else { continue };
            if a[f].len() < SLOTS {
                a[f].resize(SLOTS, [0; 2]);
            }
            for s in 0..SLOTS {
                let cur = fams[f].get(s).copied().unwrap_or([0; 2]);
                let b = base.get(set).and_then(|x| x[f].get(s)).copied().unwrap_or([0; 2]);
                if let Some(slot) = a[f].get_mut(s) {
                    slot[0] = slot[0].wrapping_add(cur[0].wrapping_sub(b[0]));
                    slot[1] = slot[1].wrapping_add(cur[1].wrapping_sub(b[1]));
                }
            }
        }
    }
}

impl Drop for LaneProgram {
    fn drop(&mut self) {
        let ports: Vec<u16> = self.ports.keys().copied().collect();
        for p in ports {
            if let Err(e) = self.detach(p) {
                log::warn!("XDP lane: {e}");
            }
        }
    }
}

/// A `struct xdp_md` for BPF_PROG_TEST_RUN (data, data_end, data_meta,
/// ingress_ifindex, rx_queue_index, egress_ifindex): a frame of `len`
/// bytes received on kernel device `kifindex`, queue `queue`.
pub(crate) fn xdp_md(len: usize, kifindex: u32, queue: u32) -> [u8; 24] {
    let mut ctx = [0u8; 24];
    ctx[4..8].copy_from_slice(&(len as u32).to_ne_bytes());
    ctx[12..16].copy_from_slice(&kifindex.to_ne_bytes());
    ctx[16..20].copy_from_slice(&queue.to_ne_bytes());
    ctx
}
