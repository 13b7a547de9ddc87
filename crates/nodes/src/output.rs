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
/// Next nodes: `drop` only (packets are taken). Counters: [`OutputError::DESCS`].
pub struct InterfaceOutput {
    ifs: Snapshot<IfTable>,
}

impl InterfaceOutput {
    pub fn new(ifs: Snapshot<IfTable>) -> Self {
        InterfaceOutput { ifs }
    }
}

tern_engine::edges! {
    /// `interface-output`'s next nodes: the link, or `drop`.
    pub enum OutputNext {
        Drop = "drop",
    }
}

tern_engine::errors! {
    /// `interface-output`'s counters.
    pub enum OutputError {
        NoInterface = drop("no-interface", "transmit interface unknown"),
        InterfaceDown = drop("interface-down", "transmit interface down"),
        NoPort = drop("no-port", "transmit interface has no port in this worker"),
    }
}

impl Node for InterfaceOutput {
    fn name(&self) -> &'static str {
        "interface-output"
    }
    fn nexts(&self) -> &'static [&'static str] {
        OutputNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        OutputError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        let ifs = self.ifs.current();
        // Runs of packets for one interface (most batches are one run):
        // the run is checked once and queued with one copy.
        let mut rest = pkts;
        let mut next = next;
        while let Some((&first, tail)) = rest.split_first() {
            let tx_if = cx.pool.meta(first).tx_if;
            let len = 1 + tail.iter().take_while(|&&p| cx.pool.meta(p).tx_if == tx_if).count();
            // `len` is at most `rest.len()`; `next` has a slot per packet
            // (the engine's contract), a shorter one ends the run early.
            let Some((run, after)) = rest.split_at_checked(len) else { break };
            let Some((out, later)) = std::mem::take(&mut next).split_at_mut_checked(len) else { break };
            let err = match ifs.get(tx_if) {
                None => Some(OutputError::NoInterface),
                Some(iface) if !iface.up => Some(OutputError::InterfaceDown),
                Some(iface) => match cx.tx.get_mut(iface.port as usize) {
                    Some(q) => {
                        q.extend_from_slice(run);
                        out.fill(NEXT_TAKEN);
                        None
                    }
                    None => Some(OutputError::NoPort),
                },
            };
            if let Some(err) = err {
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
/// Next nodes: `interface-output`, `drop`. Counters: [`InjectError::DESCS`].
pub struct ControlInject {
    queue: Arc<ArrayQueue<Inject>>,
}

impl ControlInject {
    pub fn new(queue: Arc<ArrayQueue<Inject>>) -> Self {
        ControlInject { queue }
    }
}

tern_engine::edges! {
    /// `control-inject`'s next nodes.
    pub enum InjectNext {
        Drop = "drop",
        InterfaceOutput = "interface-output",
    }
}

tern_engine::errors! {
    /// `control-inject`'s counters.
    pub enum InjectError {
        Injected = info("injected", "frames sent for the control thread"),
        NoBuffer = info("no-buffer", "no buffer for an injected frame"),
    }
}

impl Node for ControlInject {
    fn name(&self) -> &'static str {
        "control-inject"
    }
    fn nexts(&self) -> &'static [&'static str] {
        InjectNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        InjectError::DESCS
    }
    fn wants_poll(&self) -> bool {
        true
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        for (o, &p) in next.iter_mut().zip(pkts) {
            *o = cx.drop(p, InjectError::Injected);
        }
    }
    fn poll(&mut self, cx: &mut Cx<'_>, emit: &mut Emit) {
        while let Some(inj) = self.queue.pop() {
            match cx.pool.alloc_from(&inj.frame) {
                Some(p) => {
                    let m = cx.pool.meta_mut(p);
                    m.tx_if = inj.ifindex;
                    m.flags |= flags::LOCAL_ORIGIN;
                    cx.count(InjectError::Injected, 1);
                    emit.push(p, InjectNext::InterfaceOutput as u16);
                }
                None => cx.count(InjectError::NoBuffer, 1),
            }
        }
    }
}
