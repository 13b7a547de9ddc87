//! Walking the receive ring (TPACKET_V2 slots or TPACKET_V3 blocks).
//!
//! Header layouts (linux/if_packet.h), offsets in bytes:
//! * `tpacket2_hdr`: status 0, len 4, snaplen 8, mac 12, net 14, sec 16,
//!   nsec 20, vlan_tci 24, vlan_tpid 26 (32 bytes).
//! * `tpacket_block_desc`: version 0, offset_to_priv 4, then
//!   `tpacket_hdr_v1`: block_status 8, num_pkts 12, offset_to_first_pkt 16,
//!   blk_len 20, seq_num 24, ...
//! * `tpacket3_hdr`: next_offset 0, sec 4, nsec 8, snaplen 12, len 16,
//!   status 20, mac 24, net 26, rxhash 28, vlan_tci 32, vlan_tpid 36
//!   (48 bytes).
//!
//! Every offset the kernel writes (mac, next_offset) is checked against the
//! slot or block it belongs to before it is used.

use tern_packet::{PacketPool, PktIdx, PortStats};

use super::{AfPacketStats, TpacketVersion};
use crate::csum;
use crate::sys::ring::MmapRing;

const TP_STATUS_KERNEL: u32 = libc::TP_STATUS_KERNEL;
const TP_STATUS_USER: u32 = libc::TP_STATUS_USER;

/// Which receive fix-ups to apply.
#[derive(Clone, Copy)]
pub(super) struct Fixups {
    pub checksums: bool,
    pub vlan: bool,
}

/// One received frame as the ring describes it.
struct Frame {
    /// Ring offset of the first byte of the Ethernet header.
    data: usize,
    /// End of the slot/block holding the frame (bound for `data + snaplen`).
    limit: usize,
    snaplen: usize,
    len: usize,
    status: u32,
    vlan_tci: u16,
    vlan_tpid: u16,
}

enum Take {
    Delivered,
    Dropped,
    /// The pool is empty: leave the frame in the ring for the next call.
    NoBuffer,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2).map_or(0, |s| u16::from_ne_bytes([s[0], s[1]]))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).map_or(0, |s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

/// Copies a frame into a new pool buffer, restoring its VLAN tag and
/// completing its checksum as configured.
fn take(
    ring: &MmapRing,
    f: &Frame,
    pool: &mut PacketPool,
    out: &mut Vec<PktIdx>,
    fix: Fixups,
    stats: &mut PortStats,
    detail: &mut AfPacketStats,
) -> Take {
    if f.snaplen < f.len {
        // The ring slot could not hold the whole frame.
        detail.oversize += 1;
        stats.rx_dropped += 1;
        return Take::Dropped;
    }
    if f.data.checked_add(f.snaplen).is_none_or(|end| end > f.limit) {
        stats.errors += 1;
        stats.rx_dropped += 1;
        return Take::Dropped;
    }
    let tagged = fix.vlan && f.status & libc::TP_STATUS_VLAN_VALID != 0 && f.snaplen >= 12;
    let total = f.snaplen + if tagged { 4 } else { 0 };
    let head = usize::from(pool.headroom());
    if head + total > pool.frame_size() as usize || total > usize::from(u16::MAX) {
        detail.oversize += 1;
        stats.rx_dropped += 1;
        return Take::Dropped;
    }
    let Some(idx) = pool.alloc() else {
        return Take::NoBuffer;
    };
    let copied = match pool.frame_mut(idx).get_mut(head..head + total) {
        Some(buf) if tagged => {
            let tpid =
                if f.status & libc::TP_STATUS_VLAN_TPID_VALID != 0 && f.vlan_tpid != 0 { f.vlan_tpid } else { 0x8100 };
            let (macs, rest) = buf.split_at_mut(12);
            let (tag, payload) = rest.split_at_mut(4);
            tag[..2].copy_from_slice(&tpid.to_be_bytes());
            tag[2..].copy_from_slice(&f.vlan_tci.to_be_bytes());
            ring.read(f.data, macs) && ring.read(f.data + 12, payload)
        }
        Some(buf) => ring.read(f.data, buf),
        None => false,
    };
    if !copied || !pool.set_data(idx, head as u16, total as u16) {
        pool.free(idx);
        stats.errors += 1;
        stats.rx_dropped += 1;
        return Take::Dropped;
    }
    if tagged {
        detail.vlan_restored += 1;
    }
    if fix.checksums && f.status & libc::TP_STATUS_CSUMNOTREADY != 0 {
        if csum::complete(pool.data_mut(idx)) {
            detail.csum_completed += 1;
        } else {
            detail.csum_unhandled += 1;
        }
    }
    out.push(idx);
    stats.rx_packets += 1;
    stats.rx_bytes += total as u64;
    Take::Delivered
}

pub(super) enum RxRing {
    V2 {
        frame_size: usize,
        frames: usize,
        cur: usize,
    },
    V3 {
        block_size: usize,
        blocks: usize,
        cur: usize,
        /// Packets of the current block not yet taken (valid when `open`).
        left: u32,
        /// Offset of the next packet header within the current block.
        next: usize,
        /// The current block's descriptor has been read.
        open: bool,
    },
}

impl RxRing {
    pub(super) fn new(v: TpacketVersion, block_size: usize, blocks: usize, frame_size: usize) -> RxRing {
        match v {
            TpacketVersion::V2 => RxRing::V2 { frame_size, frames: blocks * (block_size / frame_size), cur: 0 },
            TpacketVersion::V3 => RxRing::V3 { block_size, blocks, cur: 0, left: 0, next: 0, open: false },
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn burst(
        &mut self,
        ring: &MmapRing,
        pool: &mut PacketPool,
        out: &mut Vec<PktIdx>,
        max: usize,
        fix: Fixups,
        stats: &mut PortStats,
        detail: &mut AfPacketStats,
    ) -> usize {
        match self {
            RxRing::V2 { frame_size, frames, cur } => {
                let (fs, nf) = (*frame_size, *frames);
                let mut n = 0;
                // At most one lap per call, however many frames are dropped.
                for _ in 0..nf {
                    if n >= max {
                        break;
                    }
                    let off = *cur * fs;
                    match ring.load_status(off) {
                        Some(s) if s & TP_STATUS_USER != 0 => {}
                        _ => break,
                    }
                    let mut h = [0u8; 32];
                    ring.read(off, &mut h);
                    let f = Frame {
                        data: off + usize::from(u16_at(&h, 12)),
                        limit: off + fs,
                        snaplen: u32_at(&h, 8) as usize,
                        len: u32_at(&h, 4) as usize,
                        status: u32_at(&h, 0),
                        vlan_tci: u16_at(&h, 24),
                        vlan_tpid: u16_at(&h, 26),
                    };
                    match take(ring, &f, pool, out, fix, stats, detail) {
                        Take::NoBuffer => break,
                        Take::Delivered => n += 1,
                        Take::Dropped => {}
                    }
                    ring.store_status(off, TP_STATUS_KERNEL);
                    *cur = if *cur + 1 == nf { 0 } else { *cur + 1 };
                }
                n
            }
            RxRing::V3 { block_size, blocks, cur, left, next, open } => {
                let (bs, nb) = (*block_size, *blocks);
                let mut n = 0;
                let mut released = 0;
                while n < max && released < nb {
                    let boff = *cur * bs;
                    match ring.load_status(boff + 8) {
                        Some(s) if s & TP_STATUS_USER != 0 => {}
                        _ => break,
                    }
                    if !*open {
                        let mut d = [0u8; 12];
                        ring.read(boff + 8, &mut d);
                        *left = u32_at(&d, 4);
                        *next = u32_at(&d, 8) as usize;
                        *open = true;
                    }
                    while n < max && *left > 0 {
                        let poff = boff + *next;
                        let mut h = [0u8; 48];
                        if *next + 48 > bs || !ring.read(poff, &mut h) {
                            stats.errors += 1;
                            *left = 0;
                            break;
                        }
                        let f = Frame {
                            data: poff + usize::from(u16_at(&h, 24)),
                            limit: boff + bs,
                            snaplen: u32_at(&h, 12) as usize,
                            len: u32_at(&h, 16) as usize,
                            status: u32_at(&h, 20),
                            vlan_tci: u32_at(&h, 32) as u16,
                            vlan_tpid: u16_at(&h, 36),
                        };
                        match take(ring, &f, pool, out, fix, stats, detail) {
                            Take::NoBuffer => return n,
                            Take::Delivered => n += 1,
                            Take::Dropped => {}
                        }
                        *left -= 1;
                        let step = u32_at(&h, 0) as usize;
                        if *left > 0 && step == 0 {
                            stats.errors += 1;
                            *left = 0;
                        }
                        *next += step;
                    }
                    if *left == 0 {
                        ring.store_status(boff + 8, TP_STATUS_KERNEL);
                        *cur = if *cur + 1 == nb { 0 } else { *cur + 1 };
                        *open = false;
                        released += 1;
                    }
                }
                n
            }
        }
    }
}
