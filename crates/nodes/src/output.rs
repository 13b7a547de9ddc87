//! `interface-output` and `control-inject`.

use crate::state::{IfTable, Inject};
use crossbeam_queue::ArrayQueue;
use std::sync::Arc;
use tern_engine::{Cx, Emit, ErrorDesc, NEXT_TAKEN, Node};
use tern_packet::{PktIdx, flags};
use tern_rcu::Snapshot;

/// `interface-output`: queues each packet on the port of its `tx_if` (for
/// a VLAN sub-interface, the parent's port); the worker transmits the
/// queues after the graph run.
///
/// Next nodes: `drop` only (packets are taken). Counters: [`OUTPUT_ERRORS`].
pub struct InterfaceOutput {
    ifs: Snapshot<IfTable>,
}

impl InterfaceOutput {
    pub fn new(ifs: Snapshot<IfTable>) -> Self {
        InterfaceOutput { ifs }
    }
}

pub const OUTPUT_ERRORS: &[ErrorDesc] = &[
    ErrorDesc::drop("no-interface", "transmit interface unknown"),
    ErrorDesc::drop("interface-down", "transmit interface down"),
    ErrorDesc::drop("no-port", "transmit interface has no port in this worker"),
];

impl Node for InterfaceOutput {
    fn name(&self) -> &'static str {
        "interface-output"
    }
    fn nexts(&self) -> &'static [&'static str] {
        &["drop"]
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        OUTPUT_ERRORS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        let ifs = self.ifs.current();
        // Runs of packets for one interface (most batches are one run):
        // the run is checked once and queued with one copy.
        let mut rest = pkts;
        let mut next = &mut next[..pkts.len()];
        while let Some(&first) = rest.first() {
            let tx_if = cx.pool.meta(first).tx_if;
            let len = 1 + rest[1..].iter().take_while(|&&p| cx.pool.meta(p).tx_if == tx_if).count();
            let (run, after) = rest.split_at(len);
            let (out, later) = std::mem::take(&mut next).split_at_mut(len);
            let err = match ifs.get(tx_if) {
                None => 0,
                Some(iface) if !iface.up => 1,
                Some(iface) => match cx.tx.get_mut(iface.port as usize) {
                    Some(q) => {
                        q.extend_from_slice(run);
                        out.fill(NEXT_TAKEN);
                        u16::MAX
                    }
                    None => 2,
                },
            };
            if err != u16::MAX {
                for (o, &p) in out.iter_mut().zip(run) {
                    *o = cx.drop(p, err);
                }
            }
            rest = after;
            next = later;
        }
    }
}

/// `control-inject`: frames the control thread asks this worker to send
/// (neighbour probes), taken from a lock-free queue every loop.
///
/// Next nodes: `interface-output`, `drop`. Counters: [`INJECT_ERRORS`].
pub struct ControlInject {
    queue: Arc<ArrayQueue<Inject>>,
}

impl ControlInject {
    pub fn new(queue: Arc<ArrayQueue<Inject>>) -> Self {
        ControlInject { queue }
    }
}

pub const INJECT_ERRORS: &[ErrorDesc] = &[
    ErrorDesc::info("injected", "frames sent for the control thread"),
    ErrorDesc::info("no-buffer", "no buffer for an injected frame"),
];

impl Node for ControlInject {
    fn name(&self) -> &'static str {
        "control-inject"
    }
    fn nexts(&self) -> &'static [&'static str] {
        &["drop", "interface-output"]
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        INJECT_ERRORS
    }
    fn wants_poll(&self) -> bool {
        true
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        for (i, &p) in pkts.iter().enumerate() {
            next[i] = cx.drop(p, 0);
        }
    }
    fn poll(&mut self, cx: &mut Cx<'_>, emit: &mut Emit) {
        while let Some(inj) = self.queue.pop() {
            match cx.pool.alloc_from(&inj.frame) {
                Some(p) => {
                    let m = cx.pool.meta_mut(p);
                    m.tx_if = inj.ifindex;
                    m.flags |= flags::LOCAL_ORIGIN;
                    cx.count(0, 1);
                    emit.push(p, 1);
                }
                None => cx.count(1, 1),
            }
        }
    }
}
