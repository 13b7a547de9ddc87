//! Transmit: sendmmsg(2) over pool buffers, or an mmap'd TX ring.
//!
//! Accounting rule (the `Port` contract): every packet given is either sent
//! or dropped, and the two add up exactly, whatever the kernel answers. The
//! caller frees all the buffers afterwards (the kernel has copied what it
//! took).

use std::io;
use std::os::fd::BorrowedFd;

use tern_packet::{PacketPool, PktIdx, PortStats, TxOutcome};

use super::{AfPacketStats, TpacketVersion};
use crate::sys::ring::MmapRing;
use crate::sys::socket::{self, MmsgScratch};

pub(super) enum TxPath {
    Mmsg(MmsgScratch),
    Ring {
        /// Ring offset of slot 0 (the TX ring follows the RX ring).
        base: usize,
        frame_size: usize,
        frames: usize,
        cur: usize,
        /// Offset of the frame data in a slot: the header size minus the
        /// sockaddr_ll the kernel reserves only on receive (32 for V2, 48
        /// for V3).
        data_off: usize,
        /// Offset of `tp_len` in the slot header (4 for V2, 16 for V3).
        len_off: usize,
        /// Offset of `tp_status` (0 for V2, 20 for V3).
        status_off: usize,
        /// The last kick failed: frames may still wait in the ring.
        kick_pending: bool,
    },
}

impl TxPath {
    pub(super) fn ring(v: TpacketVersion, base: usize, frame_size: usize, frames: usize) -> TxPath {
        let (data_off, len_off, status_off) = match v {
            TpacketVersion::V2 => (32, 4, 0),
            TpacketVersion::V3 => (48, 16, 20),
        };
        TxPath::Ring { base, frame_size, frames, cur: 0, data_off, len_off, status_off, kick_pending: false }
    }

    /// A failed kick waits for [`Self::service`] to retry it.
    pub(super) fn kick_pending(&self) -> bool {
        matches!(self, TxPath::Ring { kick_pending: true, .. })
    }

    /// Retries a failed kick so frames do not wait for the next burst.
    pub(super) fn service(&mut self, fd: BorrowedFd<'_>, stats: &mut PortStats, detail: &mut AfPacketStats) {
        if let TxPath::Ring { kick_pending, .. } = self
            && *kick_pending
        {
            *kick_pending = kick(fd, stats, detail);
        }
    }

    pub(super) fn burst(
        &mut self,
        fd: BorrowedFd<'_>,
        ring: &MmapRing,
        pool: &PacketPool,
        pkts: &[PktIdx],
        stats: &mut PortStats,
        detail: &mut AfPacketStats,
    ) -> TxOutcome {
        match self {
            TxPath::Mmsg(scratch) => mmsg(scratch, fd, pool, pkts, stats, detail),
            TxPath::Ring { base, frame_size, frames, cur, data_off, len_off, status_off, kick_pending } => {
                let mut queued = 0;
                for &p in pkts {
                    let data = pool.data(p);
                    // Shorter than an Ethernet header or longer than a slot:
                    // the kernel would refuse it; drop it here.
                    if data.len() < 14 || data.len() + *data_off > *frame_size {
                        continue;
                    }
                    let slot = *base + *cur * *frame_size;
                    match ring.load_status(slot + *status_off) {
                        Some(libc::TP_STATUS_AVAILABLE) => {}
                        Some(libc::TP_STATUS_WRONG_FORMAT) => {
                            // The kernel refused the frame last sent from
                            // this slot (counted as sent then).
                            stats.errors += 1;
                        }
                        _ => {
                            detail.tx_ring_full += 1;
                            break;
                        }
                    }
                    let len = (data.len() as u32).to_ne_bytes();
                    // V3 requires tp_next_offset (offset 0) to be zero.
                    let ok = (*status_off == 0 || ring.write(slot, &[0; 4]))
                        && ring.write(slot + *len_off, &len)
                        && ring.write(slot + *data_off, data);
                    if !ok {
                        stats.errors += 1;
                        break;
                    }
                    ring.store_status(slot + *status_off, libc::TP_STATUS_SEND_REQUEST);
                    stats.tx_bytes += data.len() as u64;
                    *cur = if *cur + 1 == *frames { 0 } else { *cur + 1 };
                    queued += 1;
                }
                if queued > 0 || *kick_pending {
                    *kick_pending = kick(fd, stats, detail);
                }
                TxOutcome { sent: queued, dropped: pkts.len() - queued }
            }
        }
    }
}

/// Asks the kernel to send the frames marked in the TX ring. A frame the
/// device refuses for now (ENOBUFS, EAGAIN) is marked for sending again by
/// the kernel and goes with the next kick: returns true when such a retry
/// is worth it. Other errors (interface down or gone) are counted and not
/// retried until the next burst.
fn kick(fd: BorrowedFd<'_>, stats: &mut PortStats, detail: &mut AfPacketStats) -> bool {
    match socket::kick(fd) {
        Ok(_) => false,
        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
            detail.tx_enobufs += 1;
            true
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            detail.tx_eagain += 1;
            true
        }
        Err(_) => {
            stats.errors += 1;
            false
        }
    }
}

fn mmsg(
    scratch: &mut MmsgScratch,
    fd: BorrowedFd<'_>,
    pool: &PacketPool,
    pkts: &[PktIdx],
    stats: &mut PortStats,
    detail: &mut AfPacketStats,
) -> TxOutcome {
    let mut i = 0;
    let mut sent = 0;
    // Each iteration either advances `i` or ends the loop.
    while i < pkts.len() {
        let rest = &pkts[i..];
        match scratch.send(fd, rest.iter().map(|&p| pool.data(p))) {
            Ok(0) => {
                detail.tx_eagain += 1;
                break;
            }
            Ok(n) => {
                let n = n.min(rest.len());
                for &p in &rest[..n] {
                    stats.tx_bytes += u64::from(pool.meta(p).len);
                }
                sent += n;
                i += n;
            }
            // Socket buffer full: the kernel is still holding earlier
            // frames. Never block: the rest of the burst is dropped.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                detail.tx_eagain += 1;
                break;
            }
            Err(e) => {
                match e.raw_os_error() {
                    // The device queue refused this frame (it was freed).
                    Some(libc::ENOBUFS) => detail.tx_enobufs += 1,
                    // Interface gone or down: nothing else will go either.
                    Some(libc::ENETDOWN | libc::ENXIO | libc::ENODEV) => {
                        stats.errors += 1;
                        break;
                    }
                    // EMSGSIZE, EINVAL (runt): this frame only.
                    _ => stats.errors += 1,
                }
                i += 1;
            }
        }
    }
    TxOutcome { sent, dropped: pkts.len() - sent }
}
