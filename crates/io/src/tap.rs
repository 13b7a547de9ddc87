//! TAP devices: a Linux Ethernet interface whose other end is this port.
//!
//! tern hands exception traffic to the kernel through one (packets for the
//! router's own addresses that it does not answer itself, control-plane
//! protocols), and reads back what the kernel sends. Frames carry no
//! packet-information header (IFF_NO_PI) and the descriptor is
//! non-blocking: one read(2) or write(2) per frame, which is plenty for
//! exception traffic.

use std::fs::File;
use std::io::{self, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};

use tern_packet::{PacketPool, PktIdx, Port, PortStats, TxOutcome};

use crate::error::{Context, Result};
use crate::sys;

/// One TAP device.
#[derive(Debug)]
pub struct TapPort {
    name: String,
    file: File,
    stats: PortStats,
    /// Frames longer than a pool buffer (dropped).
    oversize: u64,
}

impl TapPort {
    /// Creates the TAP device `name` (or attaches to it if it exists and is
    /// persistent); `tern%d` lets the kernel pick a free number. The device
    /// lives as long as the port unless made persistent elsewhere. It is
    /// created down: see [`crate::netdev::set_up`].
    pub fn open(name: &str) -> Result<TapPort> {
        let (file, actual) = sys::tun::open_tap(name, false).context(|| format!("TAP {name}: open /dev/net/tun"))?;
        Ok(TapPort { name: actual, file, stats: PortStats::default(), oversize: 0 })
    }

    /// Opens one queue of the multi-queue TAP device `name`, creating the
    /// device with the first: each worker opens its own queue, writes the
    /// frames it hands to the kernel there, and reads the share of the
    /// kernel's frames the device spreads to it (by flow). Every queue of a
    /// device must be opened this way.
    pub fn open_queue(name: &str) -> Result<TapPort> {
        let (file, actual) =
            sys::tun::open_tap(name, true).context(|| format!("TAP {name}: open /dev/net/tun (multi-queue)"))?;
        Ok(TapPort { name: actual, file, stats: PortStats::default(), oversize: 0 })
    }

    /// The device's name (the kernel's, when a `%d` pattern was given).
    pub fn ifname(&self) -> &str {
        &self.name
    }

    /// Frames dropped because they were longer than a pool buffer.
    pub fn oversize(&self) -> u64 {
        self.oversize
    }
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, out: &mut Vec<PktIdx>, max: usize) -> usize {
        let head = usize::from(pool.headroom());
        let room = pool.frame_size() as usize - head;
        let mut n = 0;
        // A read returns one frame; a second buffer of one byte tells a
        // frame that exactly fills the pool buffer from a longer one (the
        // kernel truncates silently to the space given).
        let mut extra = [0u8; 1];
        while n < max {
            let Some(idx) = pool.alloc() else { break };
            let r = match pool.frame_mut(idx).get_mut(head..) {
                Some(buf) => self.file.read_vectored(&mut [IoSliceMut::new(buf), IoSliceMut::new(&mut extra)]),
                None => Err(io::Error::from(io::ErrorKind::InvalidInput)),
            };
            match r {
                Ok(len) if len > 0 && len <= room => {
                    pool.set_data(idx, head as u16, len as u16);
                    out.push(idx);
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += len as u64;
                    n += 1;
                }
                Ok(0) => {
                    pool.free(idx);
                    break;
                }
                Ok(_) => {
                    pool.free(idx);
                    self.oversize += 1;
                    self.stats.rx_dropped += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    pool.free(idx);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => pool.free(idx),
                Err(_) => {
                    pool.free(idx);
                    self.stats.errors += 1;
                    break;
                }
            }
        }
        n
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome {
        let mut sent = 0;
        for &p in pkts {
            let data = pool.data(p);
            match self.file.write(data) {
                Ok(w) if w == data.len() => {
                    self.stats.tx_bytes += w as u64;
                    sent += 1;
                }
                // EIO: the interface is down; EINVAL: a runt. Either way this
                // frame is dropped; WouldBlock (never seen on a TAP) too.
                Ok(_) | Err(_) => self.stats.errors += 1,
            }
        }
        pool.free_all(pkts);
        let dropped = pkts.len() - sent;
        self.stats.tx_packets += sent as u64;
        self.stats.tx_dropped += dropped as u64;
        TxOutcome { sent, dropped }
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.file.as_fd())
    }

    /// Writes are synchronous and reads wait on the descriptor.
    fn settled(&self) -> bool {
        true
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}
