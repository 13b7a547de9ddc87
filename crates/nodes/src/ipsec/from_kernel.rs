//! `esp-from-kernel`: ESP in UDP that the kernel received on a UDP 4500
//! socket, or on one of the SAs' other local ESP-in-UDP ports (Linux
//! mode), handed to `esp-decrypt` as received on that port.
//!
//! In Linux mode the kernel reassembles fragments for the router before
//! tern could tell ESP in UDP from any other UDP (only the first fragment
//! carries the ports, and the AF_XDP steering program decides frame by
//! frame, before reassembly), so fragmented ESP in UDP reaches a kernel
//! socket on port 4500 whole: the IKE service's (`[[ike]]` local
//! addresses) or the IPsec service's own (the other addresses, and every
//! other port an SA's `udp_encap` uses locally). Where the
//! kernel saw the frames only because tern passed them (AF_XDP steering,
//! the XDP lane, the TAP exception path), the control side rebuilds the
//! datagram as an IPv4/IPv6 + UDP packet (the addresses and ports it was
//! sent between, checksums computed) and queues it on
//! [`Shared::esp_from_kernel`](crate::state::Shared::esp_from_kernel);
//! every worker polls that queue here and sends each packet to
//! `esp-decrypt`, which decides it as any ESP in UDP (SPI, tunnel, replay
//! window, ICV). Where the kernel has its own copy of every frame
//! (AF_PACKET), tern received the frames itself and the kernel's datagram
//! never comes here.
//!
//! Next nodes: `esp-decrypt`, `drop`. Counters: [`EspFromKernelError::DESCS`]
//! (`from-kernel`: each datagram taken; a datagram over a buffer,
//! `too-big-for-buffer`).
//!
//! Example: the kernel reassembles three fragments of UDP 10.0.2.2:4500 ->
//! 10.0.2.1:4500 carrying ESP of SA 11 and the IPsec service's socket
//! reads it; a worker's `esp-from-kernel` emits the rebuilt 1,200-byte
//! packet to `esp-decrypt` (`from-kernel`), whose inner packet enters
//! `ip4-input` as received on the SA's tunnel.

use crate::state::InjectQueue;
use std::sync::Arc;
use tern_engine::{Cx, Emit, ErrorDesc, Node};
use tern_packet::{PktIdx, flags};

/// The `esp-from-kernel` node (see the module).
pub struct EspFromKernel {
    queue: Arc<InjectQueue>,
}

impl EspFromKernel {
    pub fn new(queue: Arc<InjectQueue>) -> Self {
        EspFromKernel { queue }
    }
}

tern_engine::edges! {
    /// `esp-from-kernel`'s next nodes.
    pub enum EspFromKernelNext {
        Drop = "drop",
        Decrypt = "esp-decrypt",
    }
}

tern_engine::errors! {
    /// `esp-from-kernel`'s counters.
    pub enum EspFromKernelError {
        FromKernel = info("from-kernel", "ESP in UDP the kernel reassembled and received on UDP 4500 or an SA's other port (Linux mode), sent to esp-decrypt"),
        TooBig = drop("too-big-for-buffer", "ESP in UDP from the kernel's socket larger than a buffer (or no buffer free)"),
        Bad = drop("bad-packet", "queued packet neither IPv4 nor IPv6"),
    }
}

/// Packets taken per loop at most; the rest waits for the next loop.
const BUDGET: usize = 256;

impl Node for EspFromKernel {
    fn name(&self) -> &'static str {
        "esp-from-kernel"
    }
    fn nexts(&self) -> &'static [&'static str] {
        EspFromKernelNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        EspFromKernelError::DESCS
    }
    fn wants_poll(&self) -> bool {
        true
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        // Nothing enters but from its own poll.
        for (o, &p) in next.iter_mut().zip(pkts) {
            *o = cx.drop(p, EspFromKernelError::Bad);
        }
    }
    fn poll(&mut self, cx: &mut Cx<'_>, emit: &mut Emit) {
        if self.queue.is_empty() {
            return;
        }
        self.queue.start();
        let mut n = 0;
        while n < BUDGET
            && let Some(pkt) = self.queue.pop()
        {
            n += 1;
            let v6 = match pkt.first().map(|b| b >> 4) {
                Some(4) => false,
                Some(6) => true,
                _ => {
                    cx.count(EspFromKernelError::Bad, 1);
                    continue;
                }
            };
            let Some(p) = cx.pool.alloc_from(&pkt) else {
                cx.count(EspFromKernelError::TooBig, 1);
                continue;
            };
            let m = cx.pool.meta_mut(p);
            m.l3_off = 0;
            m.vlan = 0;
            m.rx_if = crate::state::NO_IF;
            if v6 {
                m.flags |= flags::IPV6;
            }
            cx.count(EspFromKernelError::FromKernel, 1);
            emit.push(p, EspFromKernelNext::Decrypt as u16);
        }
    }
}
