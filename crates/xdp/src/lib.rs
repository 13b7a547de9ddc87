//! AF_XDP driver and the XDP programs tern attaches.
//!
//! - [`Umem`]: a worker's [`tern_packet::PacketPool`] registered as one
//!   AF_XDP UMEM, shared by all of that worker's ports, so packets are pool
//!   frame indices and forwarding between ports copies nothing.
//! - [`XskPort`]: one AF_XDP socket on one (device, queue), implementing
//!   [`tern_packet::Port`]; zero-copy where the driver allows, copy mode
//!   otherwise; need_wakeup; preferred busy polling ([`BusyPoll`]).
//! - [`SteeringProgram`]: the XDP program (`bpf/steer.c`) that sends transit
//!   packets to the XSK of their receive queue and passes packets for the
//!   router itself and control protocols to Linux.
//!
//! A worker opens one port per (device, queue) it owns:
//! ```no_run
//! # use tern_xdp::*; use tern_packet::*;
//! let mut pool = PacketPool::new(PoolConfig::default())?;
//! let umem = Umem::new(&pool)?;
//! let mut steer = SteeringProgram::attach("eth0", SteerOptions::default())?;
//! steer.add_local("192.0.2.1".parse()?)?;
//! let port = XskPort::open(&umem, &XskConfig::new("eth0", 0), &mut pool)?;
//! steer.register(&port)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//! An [`XdpError::Unavailable`] from any of these means AF_XDP cannot be
//! used here (permission, kernel, driver): fall back to AF_PACKET and log
//! the error's message.
//!
//! Unsafe code is confined to `sys.rs` (system calls) and `ring.rs` (ring
//! memory), each block with a `// SAFETY:` comment.
#![deny(unsafe_code)]

mod busy;
mod error;
pub mod lane;
mod netlink;
mod port;
mod ring;
mod steer;
mod sys;
mod umem;

pub use busy::{BusyPoll, BusyPollState, NapiTuning, PARK_AFTER, UNPARK_AFTER, tune_napi_for_busy_poll};
pub use error::{Unavailable, XdpError};
pub use netlink::AttachMode;
pub use port::{BindMode, CloseReport, XskConfig, XskPort};
pub use steer::{STEER_PROG_NAME, SteerOptions, SteeringProgram, Verdicts, attached, remove_stale, steer_object};
pub use sys::{XskKernelStats, enter_netns, pin_thread_to_cpu, thread_cpu_ns};
pub use umem::{Umem, XDP_PACKET_HEADROOM};

/// Receive queues of a device (for opening one port per queue), from
/// /sys/class/net/DEV/queues (run under `ip netns exec` for another
/// namespace).
pub fn rx_queue_count(ifname: &str) -> std::io::Result<u32> {
    let n = std::fs::read_dir(format!("/sys/class/net/{ifname}/queues"))?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("rx-")))
        .count();
    Ok(n as u32)
}

/// The receive queues worker `worker` of `workers` owns on a device with
/// `queues` queues: one socket per (device, queue), queues dealt round
/// robin, so that no queue is shared and no lock is needed on the fast path.
/// Each worker opens its ports on its own [`Umem`] (its own pool); the
/// device's [`SteeringProgram`] (one per device, owned by the control side)
/// registers every worker's ports.
pub fn worker_queues(queues: u32, workers: u32, worker: u32) -> Vec<u32> {
    if workers == 0 {
        return Vec::new();
    }
    (0..queues).filter(|q| q % workers == worker).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_are_dealt_round_robin_without_overlap() {
        assert_eq!(worker_queues(4, 2, 0), vec![0, 2]);
        assert_eq!(worker_queues(4, 2, 1), vec![1, 3]);
        assert_eq!(worker_queues(1, 2, 1), Vec::<u32>::new());
        assert!(worker_queues(4, 0, 0).is_empty());
        let all: Vec<u32> = (0..3).flat_map(|w| worker_queues(8, 3, w)).collect();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..8).collect::<Vec<_>>(), "every queue exactly once");
    }
}
