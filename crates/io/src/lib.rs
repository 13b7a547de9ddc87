//! Packet I/O drivers for tern.
//!
//! Every driver implements [`tern_packet::Port`]: a worker owns a
//! [`PacketPool`](tern_packet::PacketPool), `rx_burst` fills pool buffers and
//! `tx_burst` takes ownership of the packets it is given. Nothing blocks and
//! nothing allocates per packet on the forwarding path.
//!
//! * [`AfPacketPort`]: any Linux interface, through mmap'd TPACKET rings.
//! * [`PcapRxPort`] / [`PcapTxPort`]: replay and record capture files;
//!   [`PcapWriter`] / [`PcapReader`] for captures without a pool;
//!   [`CapturePort`] records what any other port receives and sends.
//! * [`TapPort`]: a TAP device, to hand exception traffic to Linux.
//! * [`MemPort`]: memory queues, connected pairs and a traffic generator
//!   (tests, the engine benchmark).
//! * [`netdev`]: interface facts and settings (index, MAC, MTU, flags,
//!   sysctls, addresses) for taking an interface over.
//!
//! Unsafe code lives only in `src/sys/` (system calls, the mmap'd rings,
//! ioctls); each block carries a `SAFETY:` comment. Everything else is safe
//! Rust over the small safe API that module exports.
#![deny(unsafe_code)]

mod afpacket;
mod capture;
mod csum;
mod error;
mod mem;
pub mod netdev;
mod pcap;
mod sys;
mod tap;

pub use afpacket::{AfPacketConfig, AfPacketPort, AfPacketStats, Fanout, FanoutMode, TpacketVersion, TxMode};
pub use capture::{CaptureDir, CapturePort};
pub use error::{Error, Result};
pub use mem::{DEFAULT_QUEUE_FRAMES, MemHandle, MemPort};
pub use pcap::{
    LINKTYPE_ETHERNET, MAX_RECORD_LEN, PcapError, PcapHeader, PcapReader, PcapRxPort, PcapTxPort, PcapWriter,
    RecordHeader, Timestamps, TsPrecision,
};
pub use tap::TapPort;

use std::os::fd::BorrowedFd;

/// Waits until one of `fds` is readable or `timeout_ms` milliseconds pass
/// (negative: no limit), for idle workers (see `Port::wait_fd`) and tests.
/// Returns the positions in `fds` of the readable ones (empty on timeout).
pub fn poll_readable(fds: &[BorrowedFd<'_>], timeout_ms: i32) -> Result<Vec<usize>> {
    use error::Context;
    sys::poll::poll_readable(fds, timeout_ms).context(|| "poll")
}
