//! The contract between the forwarding engine and packet I/O drivers.
//!
//! A driver (AF_XDP, AF_PACKET, pcap, memory ring, TAP) implements [`Port`]
//! for one device queue. A worker owns its ports and calls them from its
//! thread only.

use crate::{PacketPool, PktIdx};
use std::os::fd::BorrowedFd;

/// What a transmit call did with the packets it was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxOutcome {
    /// Packets handed to the device.
    pub sent: usize,
    /// Packets the device could not take (ring full, error); already freed.
    pub dropped: usize,
}

/// Driver-level counters of a port, cumulative since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Packets the driver saw but could not deliver (no buffer, truncated,
    /// kernel ring drops).
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Packets given to `tx_burst` that did not leave.
    pub tx_dropped: u64,
    /// System call or ring errors.
    pub errors: u64,
}

/// One device queue.
pub trait Port: Send {
    /// Human-readable name (device and queue), for logs.
    fn name(&self) -> &str;

    /// Receives up to `max` packets into buffers of `pool`, appending their
    /// indices to `out`, and returns how many it appended. Sets each packet's
    /// `off` and `len`; the caller sets `rx_if`. Never blocks.
    fn rx_burst(&mut self, pool: &mut PacketPool, out: &mut Vec<PktIdx>, max: usize) -> usize;

    /// Takes ownership of every packet in `pkts`: sends what it can and frees
    /// the rest, reporting both. Never blocks.
    fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome;

    /// Periodic housekeeping (reclaim completed transmissions, refill
    /// receive rings, wake the kernel). Called once per worker loop.
    fn service(&mut self, _pool: &mut PacketPool) {}

    /// The worker wants to sleep in poll(2) on [`Self::wait_fd`]: a port
    /// that busy-polls hands its queue back to interrupts here, or returns
    /// false while it would rather keep polling (the worker then spins on).
    fn prepare_sleep(&mut self) -> bool {
        true
    }

    /// poll(2) reported an error condition on [`Self::wait_fd`]: a socket
    /// takes its pending error here (until it is read, poll reports it at
    /// once, and the worker would wake and find nothing at 100 % CPU).
    fn poll_error(&mut self) {}

    /// A descriptor that becomes readable when packets arrive, for idle
    /// workers that sleep in poll(2). `None`: the worker must spin.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Nothing is left that only [`Self::service`] would finish: no
    /// transmission waits for a retried kick or a completion, the receive
    /// ring is stocked. Only then may an idle worker sleep for long on
    /// [`Self::wait_fd`] (a port that is not settled gets the worker's
    /// short timeout). The default is the careful answer.
    fn settled(&self) -> bool {
        false
    }

    /// Cumulative driver counters.
    fn stats(&self) -> PortStats;
}
