//! Packet buffers.
//!
//! A [`PacketPool`] is one contiguous memory region cut into fixed-size
//! frames (2 KiB by default), so it can double as an AF_XDP UMEM. A packet is
//! named by its frame index (`u32`); its metadata ([`Meta`]) lives in a
//! separate array so that nodes that only look at metadata stay in a few cache
//! lines. Every frame starts its data after a headroom (256 bytes by default)
//! so that encapsulations (802.1Q, GRE, later ESP) prepend headers without
//! copying the payload.
//!
//! A pool belongs to one worker: nothing here is shared between threads and
//! nothing allocates per packet.
//!
//! Unsafe code in this crate is confined to `region.rs` (the memory mapping
//! and the per-frame slices).
#![deny(unsafe_code)]

mod meta;
mod pool;
mod port;
mod region;

pub use meta::{Meta, flags};
pub use pool::{FRAME_PAD, PacketPool, PoolConfig, PoolError};
pub use port::{Port, PortStats, TxOutcome};

/// Largest number of packets a node processes in one call.
pub const MAX_BATCH: usize = 256;
/// Default frame size: fits a 1518-byte frame plus headroom.
pub const DEFAULT_FRAME_SIZE: u32 = 2048;
/// Default headroom in front of received data. AF_XDP places its own
/// XDP_PACKET_HEADROOM (256) there as well.
pub const DEFAULT_HEADROOM: u16 = 256;

/// Index of a packet buffer (frame) in its pool.
pub type PktIdx = u32;
