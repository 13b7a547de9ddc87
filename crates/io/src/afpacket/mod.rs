//! AF_PACKET: the universal driver for any Linux interface.
//!
//! Receive reads an mmap'd ring the kernel fills (TPACKET_V2: one slot per
//! frame; or TPACKET_V3: blocks of variable-size frames retired when full or
//! after a timeout) and copies each frame into a pool buffer, so the ring
//! slot goes back to the kernel at once and packets live in the worker's
//! pool like those of every other driver. Transmit hands pool buffers to
//! sendmmsg(2) (one system call per burst, the kernel copies) or copies them
//! into an mmap'd TX ring and kicks the kernel once per burst.
//!
//! Socket options, and why:
//! * `PACKET_QDISC_BYPASS`: transmit straight to the driver, skipping the
//!   qdisc layer (a router's output queue is its own, and it saves a lock).
//! * `PACKET_IGNORE_OUTGOING`: never receive frames leaving the interface
//!   (our own transmissions or the kernel's), which a router must not route
//!   again.
//! * `PACKET_FANOUT` (optional): several workers' sockets on one interface
//!   share its traffic by flow hash.
//! * promiscuous / all-multicast membership (optional): receive frames for
//!   other MACs and every multicast group (IPv6 neighbour discovery uses
//!   solicited-node groups). Memberships end with the socket.
//! * `PACKET_STATISTICS`: frames the kernel dropped because the ring was
//!   full are added to `PortStats::rx_dropped`.
//!
//! Frame fix-ups on receive, so the bytes a node sees are the bytes on the
//! wire:
//! * The kernel strips the 802.1Q tag before packet sockets see a frame and
//!   reports it beside the frame; the driver puts the tag back.
//! * Frames sent by a local stack through a veth or TAP arrive with the
//!   transport checksum unfinished (TP_STATUS_CSUMNOTREADY); the driver
//!   completes it (see `csum.rs`) so forwarding them emits valid packets.
//!
//! Frames longer than the ring slot or the pool buffer are dropped and
//! counted (`rx_dropped`, and `oversize` in [`AfPacketStats`]). Offloads
//! that build frames larger than the MTU (GRO/LRO on receive, TSO/GSO on a
//! veth peer) must be off on taken-over interfaces, as for any router.

mod rx;
mod tx;

use std::cell::Cell;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use tern_packet::{MAX_BATCH, PacketPool, PktIdx, Port, PortStats, TxOutcome};

use crate::error::{Context, Error, Result};
use crate::netdev;
use crate::sys::ring::MmapRing;
use crate::sys::socket::{self, MmsgScratch};

use rx::RxRing;
use tx::TxPath;

/// ETH_P_ALL: receive every protocol.
const ETH_P_ALL: u16 = 0x0003;

/// Ring format for receive.
///
/// V2 is the default: a frame is visible the moment the kernel wrote it,
/// while V3 holds it until its block fills or times out. Measured with
/// `examples/afpacket_rate.rs` (veth pair, 60-byte frames, Linux 6.18 on 2
/// vCPUs shared with other jobs):
/// * latency at 1000 frames/s, receiver sleeping in poll(2): V2 p50 21 us,
///   p99 53 us; V3 (1 ms block timeout) p50 638 us, p99 4.1 ms.
/// * receive CPU per packet at ~0.2 Mpps with a receiver that sleeps in
///   poll(2) when the ring is empty: V2 1.0-1.3 us (a wake-up every few
///   frames), V3 0.14-0.44 us (one wake-up per block). A busy worker that
///   spins does not pay the wake-ups.
///
/// Latency wins the default; V3 suits workers that mostly sleep at
/// moderate rates. V3 packs small frames densely, so a V2 ring needs more
/// memory for the same burst tolerance (hence 8 MiB by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TpacketVersion {
    /// Fixed-size slots, each handed back individually. A frame is visible
    /// as soon as the kernel wrote it.
    V2,
    /// Blocks of packed variable-size frames, handed back a block at a
    /// time. A block is visible when full or after `block_timeout_ms`.
    V3,
}

/// How frames are transmitted.
///
/// Sendmmsg is the default: the sender's CPU per packet was the same within
/// noise for both (1.8-2.0 us per 60-byte frame on the veth setup above,
/// including the kernel's delivery to the peer), and sendmmsg reports
/// exactly which frames the kernel took, where the ring only knows which
/// frames it queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxMode {
    /// sendmmsg(2) with one iovec per pool buffer: no copy in user space.
    Sendmmsg,
    /// Copy into an mmap'd TX ring, one send(2) per burst to kick it.
    Ring,
}

/// Distribution of traffic between the sockets of a fanout group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanoutMode {
    /// By flow hash: a flow stays on one worker (keeps packet order).
    Hash,
    /// Round robin.
    LoadBalance,
    /// By the CPU that received the frame.
    Cpu,
    /// By the NIC receive queue.
    QueueMapping,
}

/// Join a fanout group: every socket of the group (same `group` id on the
/// same interface, in one network namespace) gets a share of the traffic.
/// Group ids are per network namespace and a group is bound to one
/// interface, so use one id per interface (its ifindex, say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fanout {
    pub group: u16,
    pub mode: FanoutMode,
}

/// How to open an [`AfPacketPort`]. [`AfPacketConfig::new`] gives the
/// defaults.
#[derive(Clone, Debug)]
pub struct AfPacketConfig {
    /// Linux interface name.
    pub ifname: String,
    pub version: TpacketVersion,
    /// Bytes per ring block: a power of two, at least one page. Default 64 KiB.
    pub block_size: u32,
    /// Blocks in the receive ring. Default 128 (8 MiB with the default
    /// block: 4096 V2 slots, about 4 ms of traffic at 1 Mpps).
    pub block_count: u32,
    /// V2 slot size (and TX ring slot size): a power of two from 2048 up to
    /// `block_size`; a V2 slot holds frames up to this size minus 66 bytes.
    /// Default 2048.
    pub frame_size: u32,
    /// V3 only: how long a partly filled block waits before the kernel
    /// hands it over, in milliseconds (at least 1; the kernel rounds up to
    /// its timer tick).
    pub block_timeout_ms: u32,
    pub tx_mode: TxMode,
    /// Slots of the TX ring (`TxMode::Ring`). Default 4096.
    pub tx_ring_frames: u32,
    /// Socket send buffer in bytes for `TxMode::Sendmmsg` (frames in flight
    /// to the device count against it). Default 4 MiB; `None` leaves the
    /// system default.
    pub sndbuf: Option<u32>,
    pub qdisc_bypass: bool,
    pub ignore_outgoing: bool,
    pub fanout: Option<Fanout>,
    /// Receive frames for any destination MAC.
    pub promisc: bool,
    /// Receive every multicast frame.
    pub allmulti: bool,
    /// Complete unfinished transport checksums (see the module docs).
    pub complete_checksums: bool,
    /// Put stripped 802.1Q tags back into received frames.
    pub restore_vlan: bool,
}

impl AfPacketConfig {
    /// The defaults for `ifname`.
    pub fn new(ifname: impl Into<String>) -> AfPacketConfig {
        AfPacketConfig {
            ifname: ifname.into(),
            version: TpacketVersion::V2,
            block_size: 1 << 16,
            block_count: 128,
            frame_size: 2048,
            block_timeout_ms: 1,
            tx_mode: TxMode::Sendmmsg,
            tx_ring_frames: 4096,
            sndbuf: Some(4 << 20),
            qdisc_bypass: true,
            ignore_outgoing: true,
            fanout: None,
            promisc: false,
            allmulti: false,
            complete_checksums: true,
            restore_vlan: true,
        }
    }

    fn validate(&self) -> std::result::Result<(), String> {
        let page = 4096;
        if !self.block_size.is_power_of_two() || self.block_size < page {
            return Err(format!("block_size {} is not a power of two of at least {page}", self.block_size));
        }
        if !self.frame_size.is_power_of_two() || self.frame_size < 2048 || self.frame_size > self.block_size {
            return Err(format!("frame_size {} is not a power of two in 2048..=block_size", self.frame_size));
        }
        if self.block_count == 0 || u64::from(self.block_count) * u64::from(self.block_size) > 1 << 30 {
            return Err(format!("{} blocks of {} bytes: need 1 block up to 1 GiB", self.block_count, self.block_size));
        }
        if self.version == TpacketVersion::V3 && self.block_timeout_ms == 0 {
            return Err("block_timeout_ms must be at least 1 (0 lets the kernel pick one from the link speed)".into());
        }
        if self.tx_mode == TxMode::Ring {
            let per_block = self.block_size / self.frame_size;
            if self.tx_ring_frames < per_block
                || !self.tx_ring_frames.is_multiple_of(per_block)
                || self.tx_ring_frames > 1 << 20
            {
                return Err(format!(
                    "tx_ring_frames {} must be a multiple of {per_block} (frames per block) up to 1048576",
                    self.tx_ring_frames
                ));
            }
        }
        Ok(())
    }
}

/// Driver counters beyond [`PortStats`], for diagnosis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AfPacketStats {
    /// Frames the kernel dropped: ring full (PACKET_STATISTICS).
    pub kernel_drops: u64,
    /// Frames longer than a ring slot or a pool buffer.
    pub oversize: u64,
    /// Received frames whose transport checksum was completed.
    pub csum_completed: u64,
    /// Received frames flagged as unfinished that could not be completed
    /// (protocol not handled); delivered as they are.
    pub csum_unhandled: u64,
    /// Received frames whose 802.1Q tag was put back.
    pub vlan_restored: u64,
    /// Transmit attempts refused because the socket buffer was full (the
    /// rest of the burst was dropped).
    pub tx_eagain: u64,
    /// Frames the device queue refused (ENOBUFS).
    pub tx_enobufs: u64,
    /// Transmit bursts cut short by a full TX ring.
    pub tx_ring_full: u64,
    /// Errors the socket reported (ENETDOWN when the device went down or
    /// away), taken before each sleep.
    pub socket_errors: u64,
}

/// One AF_PACKET socket on one interface. See the module documentation.
pub struct AfPacketPort {
    name: String,
    ifindex: u32,
    mac: [u8; 6],
    // Field order matters for drop: unmap the ring before closing the fd.
    ring: MmapRing,
    rx: RxRing,
    tx: TxPath,
    fd: OwnedFd,
    complete_checksums: bool,
    restore_vlan: bool,
    stats: PortStats,
    detail: AfPacketStats,
    /// Kernel drop counts read so far (reading resets the kernel's counter,
    /// and `stats` takes `&self`).
    kernel_drops: Cell<u64>,
    service_calls: u32,
}

impl std::fmt::Debug for AfPacketPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacketPort").field("name", &self.name).field("ifindex", &self.ifindex).finish_non_exhaustive()
    }
}

fn sol(fd: BorrowedFd<'_>, name: libc::c_int, v: libc::c_int) -> std::io::Result<()> {
    socket::setsockopt(fd, libc::SOL_PACKET, name, &v)
}

impl AfPacketPort {
    /// Opens `ifname` with the default configuration.
    pub fn open(ifname: &str) -> Result<AfPacketPort> {
        AfPacketPort::open_with(&AfPacketConfig::new(ifname))
    }

    /// Opens a port as `cfg` says. Needs CAP_NET_RAW.
    pub fn open_with(cfg: &AfPacketConfig) -> Result<AfPacketPort> {
        let ifn = &cfg.ifname;
        let what = |op: &str| format!("AF_PACKET on {ifn}: {op}");
        cfg.validate().map_err(|e| Error::invalid(what("configuration"), e))?;
        let ifindex = netdev::ifindex(ifn)?;
        let (mac, hwtype) = crate::sys::ifreq::hwaddr(ifn).context(|| what("get link type"))?;
        if hwtype != netdev::ARPHRD_ETHER && hwtype != netdev::ARPHRD_LOOPBACK {
            return Err(Error::invalid(what("link type"), format!("ARPHRD {hwtype} is not Ethernet")));
        }

        // Protocol 0: the socket receives nothing until bound, so nothing
        // arrives before the ring exists.
        let fd = socket::packet_socket().context(|| what("socket"))?;
        let b = fd.as_fd();
        let version = match cfg.version {
            TpacketVersion::V2 => libc::tpacket_versions::TPACKET_V2 as libc::c_int,
            TpacketVersion::V3 => libc::tpacket_versions::TPACKET_V3 as libc::c_int,
        };
        sol(b, libc::PACKET_VERSION, version).context(|| what("PACKET_VERSION"))?;
        if cfg.qdisc_bypass {
            sol(b, libc::PACKET_QDISC_BYPASS, 1).context(|| what("PACKET_QDISC_BYPASS"))?;
        }
        if cfg.ignore_outgoing {
            sol(b, libc::PACKET_IGNORE_OUTGOING, 1).context(|| what("PACKET_IGNORE_OUTGOING (Linux 4.20+)"))?;
        }
        if cfg.tx_mode == TxMode::Ring {
            // Without PACKET_LOSS a frame the kernel finds malformed (longer
            // than the MTU) stays in the TX ring marked WRONG_FORMAT and
            // blocks every later one; with it, the kernel skips it. (Must be
            // set before the rings exist.)
            sol(b, libc::PACKET_LOSS, 1).context(|| what("PACKET_LOSS"))?;
        }
        let rx_frames = cfg.block_count * (cfg.block_size / cfg.frame_size);
        match cfg.version {
            TpacketVersion::V2 => {
                let req = libc::tpacket_req {
                    tp_block_size: cfg.block_size,
                    tp_block_nr: cfg.block_count,
                    tp_frame_size: cfg.frame_size,
                    tp_frame_nr: rx_frames,
                };
                socket::setsockopt(b, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
                    .context(|| what("PACKET_RX_RING"))?;
            }
            TpacketVersion::V3 => {
                let req = libc::tpacket_req3 {
                    tp_block_size: cfg.block_size,
                    tp_block_nr: cfg.block_count,
                    tp_frame_size: cfg.frame_size,
                    tp_frame_nr: rx_frames,
                    tp_retire_blk_tov: cfg.block_timeout_ms,
                    tp_sizeof_priv: 0,
                    tp_feature_req_word: 0,
                };
                socket::setsockopt(b, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
                    .context(|| what("PACKET_RX_RING"))?;
            }
        }
        let rx_bytes = cfg.block_count as usize * cfg.block_size as usize;
        let mut tx_bytes = 0;
        if cfg.tx_mode == TxMode::Ring {
            let blocks = cfg.tx_ring_frames / (cfg.block_size / cfg.frame_size);
            // The TX ring takes the same request format; V3 requires the
            // block-retire fields to be zero for it.
            let req = libc::tpacket_req3 {
                tp_block_size: cfg.block_size,
                tp_block_nr: blocks,
                tp_frame_size: cfg.frame_size,
                tp_frame_nr: cfg.tx_ring_frames,
                tp_retire_blk_tov: 0,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            let r = match cfg.version {
                TpacketVersion::V2 => {
                    let req2 = libc::tpacket_req {
                        tp_block_size: req.tp_block_size,
                        tp_block_nr: req.tp_block_nr,
                        tp_frame_size: req.tp_frame_size,
                        tp_frame_nr: req.tp_frame_nr,
                    };
                    socket::setsockopt(b, libc::SOL_PACKET, libc::PACKET_TX_RING, &req2)
                }
                TpacketVersion::V3 => socket::setsockopt(b, libc::SOL_PACKET, libc::PACKET_TX_RING, &req),
            };
            r.context(|| what("PACKET_TX_RING"))?;
            tx_bytes = blocks as usize * cfg.block_size as usize;
        } else if let Some(sz) = cfg.sndbuf {
            let sz = libc::c_int::try_from(sz).unwrap_or(libc::c_int::MAX);
            // SO_SNDBUFFORCE passes the rmem/wmem_max cap when privileged;
            // plain SO_SNDBUF is the unprivileged best effort.
            if socket::setsockopt(b, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &sz).is_err() {
                socket::setsockopt(b, libc::SOL_SOCKET, libc::SO_SNDBUF, &sz).context(|| what("SO_SNDBUF"))?;
            }
        }
        let ring = MmapRing::map(b, rx_bytes + tx_bytes).context(|| what("mmap ring"))?;
        socket::bind_packet(b, ifindex, ETH_P_ALL).context(|| what("bind"))?;

        let member = |kind: libc::c_int| {
            let mreq =
                libc::packet_mreq { mr_ifindex: ifindex as i32, mr_type: kind as u16, mr_alen: 0, mr_address: [0; 8] };
            socket::setsockopt(b, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
        };
        if cfg.promisc {
            member(libc::PACKET_MR_PROMISC).context(|| what("promiscuous membership"))?;
        }
        if cfg.allmulti {
            member(libc::PACKET_MR_ALLMULTI).context(|| what("all-multicast membership"))?;
        }
        if let Some(f) = cfg.fanout {
            let mode = match f.mode {
                FanoutMode::Hash => libc::PACKET_FANOUT_HASH,
                FanoutMode::LoadBalance => libc::PACKET_FANOUT_LB,
                FanoutMode::Cpu => libc::PACKET_FANOUT_CPU,
                FanoutMode::QueueMapping => libc::PACKET_FANOUT_QM,
            };
            // No PACKET_FANOUT_FLAG_DEFRAG: a router forwards fragments as
            // they are; it must not make the kernel reassemble them.
            let arg = (u32::from(f.group) | (mode << 16)) as libc::c_int;
            sol(b, libc::PACKET_FANOUT, arg).context(|| what(&format!("join fanout group {}", f.group)))?;
        }

        let rx = RxRing::new(cfg.version, cfg.block_size as usize, cfg.block_count as usize, cfg.frame_size as usize);
        let tx = match cfg.tx_mode {
            TxMode::Sendmmsg => TxPath::Mmsg(MmsgScratch::new(MAX_BATCH)),
            TxMode::Ring => TxPath::ring(cfg.version, rx_bytes, cfg.frame_size as usize, cfg.tx_ring_frames as usize),
        };
        Ok(AfPacketPort {
            name: ifn.clone(),
            ifindex,
            mac,
            ring,
            rx,
            tx,
            fd,
            complete_checksums: cfg.complete_checksums,
            restore_vlan: cfg.restore_vlan,
            stats: PortStats::default(),
            detail: AfPacketStats::default(),
            kernel_drops: Cell::new(0),
            service_calls: 0,
        })
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface's MAC address when the port was opened.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Driver-specific counters.
    pub fn detail_stats(&self) -> AfPacketStats {
        self.read_kernel_drops();
        AfPacketStats { kernel_drops: self.kernel_drops.get(), ..self.detail }
    }

    /// Takes the socket's pending error (SO_ERROR), e.g. ENETDOWN after the
    /// interface went down: a worker whose `wait_fd` keeps polling readable
    /// with nothing to receive should look here.
    pub fn take_error(&self) -> Option<std::io::Error> {
        match socket::getsockopt(self.fd.as_fd(), libc::SOL_SOCKET, libc::SO_ERROR, 0 as libc::c_int) {
            Ok(0) => None,
            Ok(e) => Some(std::io::Error::from_raw_os_error(e)),
            Err(e) => Some(e),
        }
    }

    /// Sends one frame directly (no pool): tests and rare slow paths.
    pub fn send_raw(&self, frame: &[u8]) -> Result<()> {
        socket::send(self.fd.as_fd(), frame).map(drop).context(|| format!("AF_PACKET on {}: send", self.name))
    }

    /// Adds the kernel's drop count since the last read (the read resets it).
    fn read_kernel_drops(&self) {
        let init = libc::tpacket_stats_v3 { tp_packets: 0, tp_drops: 0, tp_freeze_q_cnt: 0 };
        if let Ok(s) = socket::getsockopt(self.fd.as_fd(), libc::SOL_PACKET, libc::PACKET_STATISTICS, init) {
            self.kernel_drops.set(self.kernel_drops.get() + u64::from(s.tp_drops));
        }
    }
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, out: &mut Vec<PktIdx>, max: usize) -> usize {
        let opts = rx::Fixups { checksums: self.complete_checksums, vlan: self.restore_vlan };
        self.rx.burst(&self.ring, pool, out, max, opts, &mut self.stats, &mut self.detail)
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome {
        let o = self.tx.burst(self.fd.as_fd(), &self.ring, pool, pkts, &mut self.stats, &mut self.detail);
        pool.free_all(pkts);
        self.stats.tx_packets += o.sent as u64;
        self.stats.tx_dropped += o.dropped as u64;
        o
    }

    fn service(&mut self, _pool: &mut PacketPool) {
        self.tx.service(self.fd.as_fd(), &mut self.stats, &mut self.detail);
        // The kernel keeps 32-bit drop counters: read them well before they
        // could wrap, without a system call per loop.
        self.service_calls = self.service_calls.wrapping_add(1);
        if self.service_calls.is_multiple_of(1 << 16) {
            self.read_kernel_drops();
        }
    }

    /// Takes the socket's pending error when poll(2) reports one: the
    /// kernel sets ENETDOWN on the socket when the device goes down or is
    /// deleted, and until it is read poll(2) reports POLLERR at once, so
    /// the worker would wake, find nothing and poll again at 100 % CPU.
    /// (A getsockopt only then: one before every sleep was a cost of its
    /// own to a worker that sleeps between every few packets.)
    fn poll_error(&mut self) {
        if self.take_error().is_some() {
            self.detail.socket_errors += 1;
        }
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }

    /// Settled unless a failed transmit kick waits for a retry.
    fn settled(&self) -> bool {
        !self.tx.kick_pending()
    }

    fn stats(&self) -> PortStats {
        self.read_kernel_drops();
        PortStats { rx_dropped: self.stats.rx_dropped + self.kernel_drops.get(), ..self.stats }
    }
}
