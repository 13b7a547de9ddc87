//! `ip4-reassembly`, `ip6-reassembly`: put IP fragments addressed to the
//! router back together (RFC 791/815; RFC 8200 4.5 with RFC 5722) before
//! local delivery: ESP and ESP in UDP to `esp-decrypt`, IKE to the IKE
//! service, ICMP and the rest to the router's own answers.
//!
//! `ip4-local`/`ip6-local` send fragments here: every fragment in
//! standalone mode; in Linux mode those of ESP and GRE (tern's: the
//! kernel has no ESP and does not own tern's tunnels), the rest being the
//! kernel's, which reassembles its own copy. Each fragment is copied into
//! the worker's [`table::Table`] and its buffer freed; the fragment that
//! completes a datagram carries it on, rewritten in place (header from
//! the first fragment, its length, fragment fields and checksum, or the
//! IPv6 payload length and the fragment header's next header, fixed), back
//! to `ip4-local`/`ip6-local` as if it had arrived whole.
//!
//! A datagram larger than a packet buffer (2 KiB frames: about 1,790
//! bytes of L3) cannot go on as a packet: IKE (UDP 500, or 4500 with the
//! non-ESP marker; certificates make IKE_AUTH that large) goes straight to
//! the IKE service's queue with tern's own IKE in standalone mode
//! (`ike-to-control`), anything else is dropped as `too-big-for-buffer`.
//!
//! Bounds (per worker and family, [`Params::reass`], `[reassembly]`;
//! [`table::Limits`] defaults): 1,024 datagrams at once, the oldest
//! evicted for a new one; 64 of them per source (IPv4 address or IPv6
//! /64); 16 KiB of payload; 64 fragments; 2 s from the first fragment to
//! the last (checked each batch and each worker loop while a datagram
//! waits). New bounds are taken at the next batch, the datagrams held
//! kept ([`Table::set_limits`]).
//!
//! With several workers each datagram has an owner ([`handoff`]): a
//! fragment that another worker receives is copied to the owner's queue
//! (`handed-off`) and freed; the owner takes it in its `poll`, into a
//! buffer of its own, and the datagram leaves from there.
//!
//! Every fragment ends in exactly one counter of the worker that owns its
//! datagram: `reassembled` (the fragments of datagrams passed on or handed
//! to IKE) or one of the drops; `handed-off` (info) counts it once more on
//! the worker that received it, `handoff-full` instead when it could not.
//!
//! Next nodes: `ip4-local`/`ip6-local`, `drop`. Counters:
//! [`ReassError::DESCS`].
//!
//! Config: `[reassembly]` `max_datagrams`, `max_per_source`, `max_size`,
//! `max_fragments`, `timeout_ms` (docs/CONFIG.md).
//!
//! Example: ESP from 10.0.2.2 to tern's 10.0.2.1 in two fragments (0..1480
//! with MF, 1480..1600): the first is held and freed; the second leaves
//! for `ip4-local` carrying the 1,620-byte datagram, counted as 2
//! `reassembled` and 1 `datagrams`; `ip4-local` sends it to `esp-decrypt`.
//!
//! Reference: one loop, `Table::add` per packet; there is no fast path.

#![deny(clippy::indexing_slicing)]

pub mod handoff;
pub mod table;

pub use handoff::Handoff;

use crate::state::{Doorbell, IkeDatagram, Params};
use crossbeam_queue::ArrayQueue;
use handoff::{HANDOFF_QUEUE, Handed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use table::{Datagram, Limits, REASONS, Reason, Table};
use tern_engine::{Cx, Emit, ErrorDesc, NEXT_TAKEN, Node};
use tern_packet::PktIdx;
use tern_rcu::Snapshot;

tern_engine::errors! {
    /// `ip4-reassembly`'s and `ip6-reassembly`'s counters (fragments,
    /// but `datagrams`).
    pub enum ReassError {
        Reassembled = info("reassembled", "fragments of datagrams reassembled (passed on, or handed to IKE)"),
        Datagrams = info("datagrams", "datagrams reassembled (their fragments are counted in reassembled)"),
        IkeToControl = info("ike-to-control", "datagrams larger than a buffer handed to the IKE service"),
        NotFragment = drop("bad-header", "no fragment header where one was expected, or a header cut short"),
        Bad = drop("bad-fragment", "empty, or not the last and not a multiple of 8 bytes"),
        Duplicate = drop("duplicate", "an exact copy of a fragment held"),
        Overlap = drop("overlap", "overlapping fragments: the whole datagram, and its later fragments (RFC 5722)"),
        Inconsistent = drop("inconsistent", "two last fragments, or data past the last one: the whole datagram"),
        TooBig = drop("too-big", "datagram larger than max_size: the whole datagram"),
        TooManyFrags = drop("too-many-fragments", "more than max_fragments: the whole datagram"),
        SourceLimit = drop("source-limit", "a new datagram from a source with max_per_source in reassembly"),
        Evicted = drop("evicted", "held by the oldest datagram, evicted for a new one (max_datagrams held)"),
        Timeout = drop("timeout", "held by a datagram not complete within timeout_ms"),
        NoBuffer = drop("too-big-for-buffer", "datagram larger than a packet buffer, and not IKE"),
        IkeFull = drop("ike-queue-full", "IKE larger than a buffer dropped: the IKE service's queue was full"),
        HandedOff = info("handed-off", "fragments handed to the worker that owns their datagram (counted again there)"),
        HandoffFull = drop("handoff-full", "a fragment for another worker, whose hand-off queue was full"),
        HandoffNoBuffer = drop("handoff-no-buffer", "fragments handed here and lost: no free buffer to take them in"),
    }
}

/// The counter of each [`Reason`], by its index.
const BY_REASON: [ReassError; REASONS] = [
    ReassError::Bad,
    ReassError::Duplicate,
    ReassError::Overlap,
    ReassError::Inconsistent,
    ReassError::TooBig,
    ReassError::TooManyFrags,
    ReassError::SourceLimit,
    ReassError::Evicted,
    ReassError::Timeout,
];

const _: () = {
    assert!(Reason::Timeout as usize == REASONS - 1);
    assert!(Reason::Bad as usize == 0);
};

tern_engine::edges! {
    /// `ip4-reassembly`'s next nodes.
    pub enum Reass4Next {
        Drop = "drop",
        Local = "ip4-local",
    }
}

tern_engine::edges! {
    /// `ip6-reassembly`'s next nodes.
    pub enum Reass6Next {
        Drop = "drop",
        Local = "ip6-local",
    }
}

/// Next index 1 of both nodes: local delivery.
const LOCAL: u16 = Reass4Next::Local as u16;
const _: () = assert!(Reass6Next::Local as u16 == LOCAL);

/// Where IKE too large for a buffer goes.
struct Ike {
    rx: Arc<ArrayQueue<IkeDatagram>>,
    bell: Arc<Doorbell>,
}

/// The `ip4-reassembly` or `ip6-reassembly` node (see the module).
pub struct Reassembly {
    v6: bool,
    table: Table,
    /// The limits (`[reassembly]`) and whether IKE is tern's (none in
    /// tests and the engine benchmark: the limits given stay).
    params: Option<Snapshot<Params>>,
    ike: Option<Ike>,
    handoff: Option<Arc<Handoff>>,
}

impl Reassembly {
    /// The node of one family, with the limits of `shared.params`.
    pub fn new(shared: &crate::state::Shared, v6: bool) -> Self {
        let params = shared.params.snapshot();
        let limits = params.current().reass;
        Reassembly {
            params: Some(params),
            ike: Some(Ike { rx: shared.ike_rx.clone(), bell: shared.ike_bell.clone() }),
            handoff: Some(shared.reass_handoff.clone()),
            ..Self::with_limits(v6, limits)
        }
    }

    /// Without an IKE service, parameters or other workers (tests, the
    /// engine benchmark).
    pub fn with_limits(v6: bool, limits: Limits) -> Self {
        Reassembly { v6, table: Table::new(limits, v6), params: None, ike: None, handoff: None }
    }

    /// With `handoff`'s workers (tests).
    pub fn with_handoff(mut self, handoff: Arc<Handoff>) -> Self {
        self.handoff = Some(handoff);
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.table.limits()
    }

    /// Picks up a new configuration (once per batch); whether IKE too
    /// large for a buffer goes to tern's IKE service.
    fn refresh(&mut self) -> bool {
        let Some(params) = self.params.as_mut() else { return false };
        params.refresh();
        let p = params.current();
        if p.reass != self.table.limits() {
            self.table.set_limits(p.reass);
        }
        p.ike_local && !p.linux_owns_local
    }

    fn flush_counts(&mut self, cx: &Cx<'_>) {
        for (n, e) in self.table.take_counts().into_iter().zip(BY_REASON) {
            if n != 0 {
                cx.count(e, n);
            }
        }
    }

    /// Takes in the fragment `p`: its next index (`NEXT_TAKEN` when held,
    /// handed to its owner or handed to IKE). `handoff`: the workers a
    /// fragment received here may go to (none for those handed here).
    fn one(&mut self, cx: &mut Cx<'_>, p: PktIdx, handoff: Option<&Handoff>, ike: bool, rang: &mut bool) -> u16 {
        let m = *cx.pool.meta(p);
        let l3off = usize::from(m.l3_off);
        let l3 = cx.pool.data(p).get(l3off..).unwrap_or_default();
        let frag = if self.v6 { table::parse_v6(l3) } else { table::parse_v4(l3) };
        let Some(frag) = frag else {
            return cx.drop(p, ReassError::NotFragment);
        };
        if let Some(h) = handoff
            && let Some(owner) = h.elsewhere(&frag.key, cx.worker)
        {
            let mut meta = m;
            meta.flags &= !tern_packet::flags::TRACED;
            let handed = Handed { meta, frame: cx.pool.data(p).to_vec() };
            if h.push(owner, self.v6, handed).is_err() {
                return cx.drop(p, ReassError::HandoffFull);
            }
            cx.count(ReassError::HandedOff, 1);
            cx.pool.free(p);
            return NEXT_TAKEN;
        }
        let Some(d) = self.table.add(&frag, cx.now_ns) else {
            cx.pool.free(p);
            return NEXT_TAKEN;
        };
        let ike = if ike { self.ike.as_ref() } else { None };
        let next = deliver(cx, p, l3off, &d, ike, rang);
        self.table.recycle(d);
        next
    }
}

impl Node for Reassembly {
    fn name(&self) -> &'static str {
        if self.v6 { "ip6-reassembly" } else { "ip4-reassembly" }
    }
    fn nexts(&self) -> &'static [&'static str] {
        if self.v6 { Reass6Next::NAMES } else { Reass4Next::NAMES }
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        ReassError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        let ike = self.refresh();
        let handoff = self.handoff.clone();
        let mut rang = false;
        for (o, &p) in next.iter_mut().zip(pkts) {
            *o = self.one(cx, p, handoff.as_deref(), ike, &mut rang);
        }
        if rang && let Some(k) = &self.ike {
            k.bell.ring();
        }
        self.flush_counts(cx);
    }
    fn wants_poll(&self) -> bool {
        true
    }
    fn poll(&mut self, cx: &mut Cx<'_>, emit: &mut Emit) {
        if let Some(h) = self.handoff.clone()
            && h.start(cx.worker, self.v6)
        {
            let ike = self.refresh();
            let mut rang = false;
            // At most a queue's worth: what comes meanwhile waits for the
            // next loop (the flag cleared above wakes it).
            for _ in 0..HANDOFF_QUEUE {
                let Some(f) = h.pop(cx.worker, self.v6) else { break };
                let Some(p) = cx.pool.alloc_from(&f.frame) else {
                    cx.count(ReassError::HandoffNoBuffer, 1);
                    continue;
                };
                let m = cx.pool.meta_mut(p);
                let (off, len) = (m.off, m.len);
                *m = tern_packet::Meta { off, len, ..f.meta };
                let next = self.one(cx, p, None, ike, &mut rang);
                emit.push(p, next);
            }
            if rang && let Some(k) = &self.ike {
                k.bell.ring();
            }
        }
        if self.table.next_deadline().is_some_and(|d| d <= cx.now_ns) {
            self.table.expire(cx.now_ns);
        }
        self.flush_counts(cx);
    }
    fn timers_pending(&self) -> bool {
        !self.table.is_empty()
    }
}

/// Writes the datagram `d` into `p` (its last fragment) at `l3off` and
/// sends it back to local delivery; or, too large for the buffer, hands
/// IKE to the IKE service and drops the rest.
fn deliver(cx: &mut Cx<'_>, p: PktIdx, l3off: usize, d: &Datagram, ike: Option<&Ike>, rang: &mut bool) -> u16 {
    let (hl, total) = (d.header.len(), d.header.len() + d.payload.len());
    let rx_if = cx.pool.meta(p).rx_if;
    if cx.pool.set_len(p, l3off + total)
        && let Some(l3) = cx.pool.data_mut(p).get_mut(l3off..l3off + total)
    {
        let (h, pl) = l3.split_at_mut(hl);
        h.copy_from_slice(&d.header);
        pl.copy_from_slice(&d.payload);
        cx.count(ReassError::Reassembled, u64::from(d.frags));
        cx.count(ReassError::Datagrams, 1);
        return LOCAL;
    }
    cx.pool.free(p);
    match ike.and_then(|k| ike_datagram(d, rx_if).map(|g| (k, g))) {
        Some((k, g)) => {
            if k.rx.push(g).is_err() {
                cx.count(ReassError::IkeFull, u64::from(d.frags));
            } else {
                *rang = true;
                cx.count(ReassError::Reassembled, u64::from(d.frags));
                cx.count(ReassError::Datagrams, 1);
                cx.count(ReassError::IkeToControl, 1);
            }
        }
        None => cx.count(ReassError::NoBuffer, u64::from(d.frags)),
    }
    NEXT_TAKEN
}

/// The IKE message in a reassembled UDP datagram to port 500, or to 4500
/// behind the non-ESP marker.
fn ike_datagram(d: &Datagram, ifindex: u16) -> Option<IkeDatagram> {
    let h = &d.header;
    let (v6, proto) = match h.first()? >> 4 {
        4 => (false, *h.get(9)?),
        _ => (true, 0),
    };
    let (local, remote): (IpAddr, IpAddr) = if v6 {
        let s: [u8; 16] = h.get(8..24)?.try_into().ok()?;
        let t: [u8; 16] = h.get(24..40)?.try_into().ok()?;
        (Ipv6Addr::from(t).into(), Ipv6Addr::from(s).into())
    } else {
        let s: [u8; 4] = h.get(12..16)?.try_into().ok()?;
        let t: [u8; 4] = h.get(16..20)?.try_into().ok()?;
        (Ipv4Addr::from(t).into(), Ipv4Addr::from(s).into())
    };
    // IPv6: the next header the fragment header named (no extension
    // headers are kept after the unfragmentable part's last).
    let proto = if v6 { last_next_header(h)? } else { proto };
    let udp = &d.payload;
    if proto != 17 {
        return None;
    }
    let dport = u16::from_be_bytes([*udp.get(2)?, *udp.get(3)?]);
    let skip = match dport {
        crate::ike::IKE_PORT => 0,
        4500 if udp.get(8..12) == Some(&[0, 0, 0, 0]) => 4,
        _ => return None,
    };
    crate::ike::datagram(local, remote, ifindex, udp, skip)
}

/// The next header at the end of an IPv6 header and its extension
/// headers (hop-by-hop, routing, destination options).
fn last_next_header(h: &[u8]) -> Option<u8> {
    let (mut nh, mut at) = (*h.get(6)?, 40);
    while at < h.len() {
        nh = *h.get(at)?;
        at += (usize::from(*h.get(at + 1)?) + 1) * 8;
    }
    Some(nh)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
#[path = "node_tests.rs"]
mod node_tests;

/// Test helpers shared by the nodes' tests.
#[cfg(test)]
#[allow(clippy::indexing_slicing)]
pub(crate) mod testing {
    /// The Ethernet frame `frame` (IPv4 or IPv6, no extension headers)
    /// cut into fragments at the payload offsets `cuts` (multiples of 8),
    /// with identification `id` (IPv6: in a fragment header).
    pub(crate) fn fragment(frame: &[u8], cuts: &[usize], id: u32) -> Vec<Vec<u8>> {
        let (l2, ip) = frame.split_at(14);
        let v6 = ip[0] >> 4 == 6;
        let (head, payload) = ip.split_at(if v6 { 40 } else { 20 });
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(payload.len());
        bounds
            .windows(2)
            .map(|w| {
                let (from, to) = (w[0], w[1]);
                let more = to < payload.len();
                let mut h = head.to_vec();
                let part = &payload[from..to];
                if v6 {
                    let nh = h[6];
                    h[6] = 44;
                    h[4..6].copy_from_slice(&((8 + part.len()) as u16).to_be_bytes());
                    let fo = from as u16 | u16::from(more);
                    let [a, b] = fo.to_be_bytes();
                    let [i0, i1, i2, i3] = id.to_be_bytes();
                    h.extend_from_slice(&[nh, 0, a, b, i0, i1, i2, i3]);
                } else {
                    h[2..4].copy_from_slice(&((20 + part.len()) as u16).to_be_bytes());
                    let fl = (from / 8) as u16 | if more { 0x2000 } else { 0 };
                    h[6..8].copy_from_slice(&fl.to_be_bytes());
                    h[4..6].copy_from_slice(&(id as u16).to_be_bytes());
                    h[10..12].fill(0);
                    let c = !tern_wire::checksum::data(&h);
                    h[10..12].copy_from_slice(&c.to_be_bytes());
                }
                [l2, &h, part].concat()
            })
            .collect()
    }
}
