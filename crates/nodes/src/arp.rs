//! `arp-input`: ARP (RFC 826) for tern's own IPv4 addresses.
//!
//! Answers requests for our addresses in place, and reports every sender
//! worth learning to the control thread (which owns the neighbour table):
//! a reply confirms the neighbour (as a solicited NA does in IPv6), a
//! request addressed to us creates an entry whose reachability is not yet
//! known, and a gratuitous announcement only updates one (RFC 826 "merge"
//! rule).
//!
//! In Linux mode (`Params::linux_owns_local`) the kernel answers requests
//! for the router's addresses (it sees every frame); tern only learns.
//! With the TAP exception path (`Params::punt_to_tap`) the kernel sees
//! nothing by itself: requests for the router's addresses and replies to
//! them (answers to the kernel's own requests) go to `linux-punt`.
//!
//! Next nodes: `interface-output` (replies), `linux-punt`, `drop`.
//! Counters: [`ArpError::DESCS`].

#![deny(clippy::indexing_slicing)]

use crate::state::{Event, Heard, IfTable, Shared};
use crate::util::*;
use std::net::IpAddr;
use tern_engine::{Cx, ErrorDesc, Node};
use tern_packet::PktIdx;
use tern_rcu::Snapshot;
use tern_wire::{ArpOperation, ArpPacket, EthernetAddress};

pub struct ArpInput {
    ifs: Snapshot<IfTable>,
    params: Snapshot<crate::state::Params>,
    shared: Shared,
}

impl ArpInput {
    pub fn new(shared: &Shared) -> Self {
        ArpInput { ifs: shared.ifaces.snapshot(), params: shared.params.snapshot(), shared: shared.clone() }
    }
}

tern_engine::edges! {
    /// `arp-input`'s next nodes.
    pub enum ArpNext {
        Drop = "drop",
        Output = "interface-output",
        Punt = "linux-punt",
    }
}

tern_engine::errors! {
    /// `arp-input`'s counters.
    pub enum ArpError {
        Malformed = drop("malformed", "not Ethernet/IPv4 ARP, or truncated"),
        BadSender = drop("bad-sender", "sender hardware address is multicast/broadcast"),
        NotOurs = drop("request-not-ours", "request for an address that is not ours"),
        Reply = drop("reply-received", "replies consumed (learned)"),
        ReplySent = info("reply-sent", "requests for our addresses answered"),
        NoIf = drop("no-interface", "received on an unknown interface"),
        EventsFull = info("event-queue-full", "a learned neighbour could not be reported"),
        BadOp = drop("bad-operation", "ARP operation other than request or reply"),
        Linux = drop("left-to-linux", "request for our address in Linux mode: the kernel answers it"),
    }
}

impl Node for ArpInput {
    fn name(&self) -> &'static str {
        "arp-input"
    }
    fn nexts(&self) -> &'static [&'static str] {
        ArpNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        ArpError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        self.params.refresh();
        let params = self.params.current();
        let (linux, punt) = (params.linux_owns_local, params.punt_to_tap());
        for (o, &p) in next.iter_mut().zip(pkts) {
            *o = arp_one(cx, self.ifs.current(), &self.shared, p, linux, punt, params);
        }
    }
}

fn arp_one(
    cx: &mut Cx<'_>,
    ifs: &IfTable,
    shared: &Shared,
    p: PktIdx,
    linux: bool,
    punt: bool,
    params: &crate::state::Params,
) -> u16 {
    let (m, d) = cx.pool.pkt_mut(p);
    let l3off = m.l3_off as usize;
    let Some(iface) = ifs.get(m.rx_if) else { return cx.drop(p, ArpError::NoIf) };
    let Some(a) = d.get_mut(l3off..l3off + 28) else { return cx.drop(p, ArpError::Malformed) };
    // 28 bytes: the view's reads are in bounds.
    let mut a = ArpPacket::new_unchecked(a);
    if !a.is_ethernet_ipv4() {
        return cx.drop(p, ArpError::Malformed);
    }
    let op = a.operation();
    if op != ArpOperation::REQUEST && op != ArpOperation::REPLY {
        return cx.drop(p, ArpError::BadOp);
    }
    let sha = a.source_hardware_addr();
    if sha.is_multicast() {
        return cx.drop(p, ArpError::BadSender);
    }
    let sha = sha.0;
    let (spa, tpa) = (a.source_protocol_addr(), a.target_protocol_addr());
    // A VRRP virtual address while master is answered with its virtual
    // MAC (RFC 5798 6.4.3).
    let vmac = params.virtual_mac(iface.index, IpAddr::V4(tpa));
    let ours = iface.has_v4(tpa) || vmac.is_some();
    let mut events_full = false;
    if !spa.is_unspecified() && iface.v4_on_link(spa) && !iface.has_v4(spa) {
        let how = if op == ArpOperation::REPLY {
            Heard::Advert { solicited: true, override_: true, router: false }
        } else {
            Heard::Sender { create: ours }
        };
        let ev = Event::Neighbor { ifindex: iface.index, ip: IpAddr::V4(spa), mac: Some(sha), how };
        events_full = shared.events.push(ev).is_err();
    }
    // (`punt` implies `linux`.)
    if op == ArpOperation::REPLY || !ours || linux {
        if events_full {
            cx.count(ArpError::EventsFull, 1);
        }
        if punt && ours {
            // TAP exception path: the kernel answers requests for its
            // addresses and waits for the replies to its own.
            return ArpNext::Punt as u16;
        }
        if op == ArpOperation::REPLY || !ours {
            return cx
                .drop(p, if op == ArpOperation::REPLY { ArpError::Reply as u16 } else { ArpError::NotOurs as u16 });
        }
        // Linux mode: the kernel saw the same request and answers it.
        return cx.drop(p, ArpError::Linux);
    }
    // Reply in place (RFC 826: swap, fill in our hardware address).
    a.set_operation(ArpOperation::REPLY);
    a.set_target_hardware_addr(EthernetAddress(sha));
    a.set_target_protocol_addr(spa);
    a.set_source_hardware_addr(EthernetAddress(vmac.unwrap_or(iface.mac)));
    a.set_source_protocol_addr(tpa);
    write_l2(d, sha, iface, ETH_P_ARP);
    if let (Some(mac), Some(src)) = (vmac, d.get_mut(6..12)) {
        src.copy_from_slice(&mac);
    }
    m.tx_if = iface.index;
    if events_full {
        cx.count(ArpError::EventsFull, 1);
    }
    cx.count(ArpError::ReplySent, 1);
    ArpNext::Output as u16
}
