//! Packet I/O drivers for tern.
//!
//! Every driver implements [`tern_packet::Port`]: a worker owns a
//! [`PacketPool`](tern_packet::PacketPool), `rx_burst` fills pool buffers and
//! `tx_burst` takes ownership of the packets it is given. Nothing blocks and
//! nothing allocates per packet on the forwarding path.
//!
//! * [`MemPort`]: memory queues, connected pairs and a traffic generator
//!   (tests, the engine benchmark).
//!
//! Unsafe code lives only in `src/sys/` (system calls, the mmap'd rings,
//! ioctls); each block carries a `SAFETY:` comment. Everything else is safe
//! Rust over the small safe API that module exports.
#![deny(unsafe_code)]

#[allow(dead_code)] // the OS drivers that use all of it land next
mod error;
mod mem;

pub use error::{Error, Result};
pub use mem::{DEFAULT_QUEUE_FRAMES, MemHandle, MemPort};
