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

use crate::state::{Event, Heard, IfTable, Shared};
use crate::util::*;
use std::net::{IpAddr, Ipv4Addr};
use tern_engine::{Cx, ErrorDesc, Node};
use tern_packet::PktIdx;
use tern_rcu::Snapshot;

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
        for (i, &p) in pkts.iter().enumerate() {
            next[i] = arp_one(cx, self.ifs.current(), &self.shared, p, linux, punt);
        }
    }
}

fn arp_one(cx: &mut Cx<'_>, ifs: &IfTable, shared: &Shared, p: PktIdx, linux: bool, punt: bool) -> u16 {
    let (m, d) = cx.pool.pkt_mut(p);
    let l3off = m.l3_off as usize;
    let Some(iface) = ifs.get(m.rx_if) else { return cx.drop(p, ArpError::NoIf) };
    let Some(a) = d.get_mut(l3off..l3off + 28) else { return cx.drop(p, ArpError::Malformed) };
    if be16(a, 0) != 1 || be16(a, 2) != ETH_P_IPV4 || a[4] != 6 || a[5] != 4 {
        return cx.drop(p, ArpError::Malformed);
    }
    let op = be16(a, 6);
    if op != 1 && op != 2 {
        return cx.drop(p, ArpError::BadOp);
    }
    let mut sha = [0u8; 6];
    sha.copy_from_slice(&a[8..14]);
    if sha[0] & 1 != 0 {
        return cx.drop(p, ArpError::BadSender);
    }
    let spa = Ipv4Addr::new(a[14], a[15], a[16], a[17]);
    let tpa = Ipv4Addr::new(a[24], a[25], a[26], a[27]);
    let ours = iface.has_v4(tpa);
    let mut events_full = false;
    if !spa.is_unspecified() && iface.v4_on_link(spa) && !iface.has_v4(spa) {
        let how = if op == 2 {
            Heard::Advert { solicited: true, override_: true, router: false }
        } else {
            Heard::Sender { create: ours }
        };
        let ev = Event::Neighbor { ifindex: iface.index, ip: IpAddr::V4(spa), mac: Some(sha), how };
        events_full = shared.events.push(ev).is_err();
    }
    // (`punt` implies `linux`.)
    if op == 2 || !ours || linux {
        if events_full {
            cx.count(ArpError::EventsFull, 1);
        }
        if punt && ours {
            // TAP exception path: the kernel answers requests for its
            // addresses and waits for the replies to its own.
            return ArpNext::Punt as u16;
        }
        if op == 2 || !ours {
            return cx.drop(p, if op == 2 { ArpError::Reply as u16 } else { ArpError::NotOurs as u16 });
        }
        // Linux mode: the kernel saw the same request and answers it.
        return cx.drop(p, ArpError::Linux);
    }
    // Reply in place (RFC 826: swap, fill in our hardware address).
    put16(a, 6, 2);
    a[18..24].copy_from_slice(&sha);
    a[24..28].copy_from_slice(&spa.octets());
    a[8..14].copy_from_slice(&iface.mac);
    a[14..18].copy_from_slice(&tpa.octets());
    write_l2(d, sha, iface, ETH_P_ARP);
    m.tx_if = iface.index;
    if events_full {
        cx.count(ArpError::EventsFull, 1);
    }
    cx.count(ArpError::ReplySent, 1);
    ArpNext::Output as u16
}
