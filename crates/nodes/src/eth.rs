//! `ethernet-input`: the first node every received frame enters.
//!
//! Synopsis: drops group source MACs, checks the destination MAC against
//! the receiving interface (own unicast or one of its virtual MACs,
//! `Iface::vmacs`, broadcast, multicast), strips
//! 802.1Q tags into the sub-interface they belong to (a priority tag, VID
//! 0, leaves the frame on the port), and dispatches by EtherType.
//!
//! Next nodes: `ip4-input`, `ip6-input`, `arp-input`, `drop`.
//! Counters: see [`EthError`]. Config: interface MACs, VLAN sub-interfaces.
//! Example: a frame to 02:00:00:00:00:01 (tern's MAC) with EtherType
//! 0x0800 leaves for `ip4-input` with `l3_off = 14`.

use crate::state::{IfTable, NO_IF, Params};
use crate::util::*;
use tern_engine::{Cx, ErrorDesc, Node};
use tern_packet::{PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::{EthernetFrame, VlanTag};

tern_engine::edges! {
    /// `ethernet-input`'s next nodes.
    pub enum EthNext {
        Drop = "drop",
        Ip4 = "ip4-input",
        Ip6 = "ip6-input",
        Arp = "arp-input",
    }
}

tern_engine::errors! {
    /// `ethernet-input`'s counters.
    pub enum EthError {
        TooShort = drop("too-short", "frame shorter than its Ethernet header"),
        NoIf = drop("no-interface", "received on an interface tern does not know"),
        IfDown = drop("interface-down", "received on an administratively down interface"),
        NotForUs = drop("not-for-us", "unicast to another MAC address"),
        UnknownEthertype = drop("unknown-ethertype", "EtherType tern does not handle"),
        UnknownVlan = drop("unknown-vlan", "802.1Q tag with no matching sub-interface"),
        TaggedOnSub = drop("nested-vlan", "a second 802.1Q tag (QinQ is not configured)"),
        SrcMulticast = drop("multicast-source", "a group (multicast or broadcast) source MAC address"),
    }
}

pub struct EthernetInput {
    ifs: Snapshot<IfTable>,
    params: Snapshot<Params>,
}

impl EthernetInput {
    pub fn new(ifs: Snapshot<IfTable>, params: Snapshot<Params>) -> Self {
        EthernetInput { ifs, params }
    }
}

impl Node for EthernetInput {
    fn name(&self) -> &'static str {
        "ethernet-input"
    }
    fn nexts(&self) -> &'static [&'static str] {
        EthNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        EthError::DESCS
    }

    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        let ifs = self.ifs.current();
        self.params.refresh();
        if !self.params.current().fast_paths.direct {
            // The reference loop (`FastPaths::direct` off), beside the
            // fast one rather than a test in it.
            for (o, &p) in next.iter_mut().zip(pkts) {
                *o = classify(cx, ifs, p);
            }
            return;
        }
        // A batch that may hold a traced packet notes the direct path
        // taken; the others pay one test a batch for it.
        // Only with virtual MACs somewhere does a frame to another MAC
        // than the port's ask about them: without, the loop is the same
        // as before they existed.
        if ifs.any_vmacs {
            vmacs_batch(cx, ifs, pkts, next);
        } else if cx.tracing() {
            direct_batch::<true, false>(cx, ifs, pkts, next);
        } else {
            direct_batch::<false, false>(cx, ifs, pkts, next);
        }
    }
}

/// The batch with the direct path (`FastPaths::direct` on); with `TRACE`,
/// a traced packet that takes it gets the note "direct path"; with
/// `VMACS` (some interface has virtual MACs), a frame to another MAC than
/// the port's may be to one of the port's virtual MACs.
#[inline(always)]
fn direct_batch<const TRACE: bool, const VMACS: bool>(
    cx: &mut Cx<'_>,
    ifs: &IfTable,
    pkts: &[PktIdx],
    next: &mut [u16],
) {
    // The receiving interface of the last packet: its index, its MAC as
    // the low 48 bits of a word, and whether it is up.
    let mut cache: (u16, u64, bool) = (NO_IF, 0, false);
    for (o, &p) in next.iter_mut().zip(pkts) {
        let (m, d) = cx.pool.pkt(p);
        // The usual frame in one go: untagged IPv4 or IPv6 unicast to the
        // receiving interface's MAC, the interface up. The same steps as
        // `classify`, which takes every other frame.
        if let Some(h) = d.first_chunk::<14>() {
            if cache.0 != m.rx_if {
                cache = match ifs.get(m.rx_if) {
                    Some(f) => (m.rx_if, mac_word(&f.mac), f.up),
                    None => (NO_IF, 0, false),
                };
            }
            let dmac = h.first_chunk::<6>().unwrap_or(&[0; 6]);
            let dst = mac_word(dmac);
            let et = u16::from_be_bytes([h[12], h[13]]);
            // Another MAC than the port's: one of its virtual MACs (out of
            // line, and only asked with `VMACS`).
            if cache.2
                && cache.0 == m.rx_if
                && (dst == cache.1 || (VMACS && is_vmac(ifs, m.rx_if, dmac)))
                && h[6] & 1 == 0
            {
                if et == ETH_P_IPV4 {
                    m.l3_off = 14;
                    *o = EthNext::Ip4 as u16;
                    if TRACE {
                        cx.trace_note(p, || "direct path".into());
                    }
                    continue;
                }
                if et == ETH_P_IPV6 {
                    m.l3_off = 14;
                    m.flags |= flags::IPV6;
                    *o = EthNext::Ip6 as u16;
                    if TRACE {
                        cx.trace_note(p, || "direct path".into());
                    }
                    continue;
                }
            }
        }
        *o = classify(cx, ifs, p);
    }
}

/// [`direct_batch`] with virtual MACs somewhere, out of line: `process`
/// keeps the shape it has without them.
#[inline(never)]
fn vmacs_batch(cx: &mut Cx<'_>, ifs: &IfTable, pkts: &[PktIdx], next: &mut [u16]) {
    if cx.tracing() {
        direct_batch::<true, true>(cx, ifs, pkts, next);
    } else {
        direct_batch::<false, true>(cx, ifs, pkts, next);
    }
}

/// Whether `dst` is a virtual MAC of interface `rx_if` (the direct
/// path's question for a frame not to the interface's own MAC).
#[cold]
#[inline(never)]
fn is_vmac(ifs: &IfTable, rx_if: u16, dst: &[u8; 6]) -> bool {
    ifs.get(rx_if).is_some_and(|f| f.is_vmac(dst))
}

/// A MAC address as the low 48 bits of a word, for one compare.
#[inline(always)]
fn mac_word(mac: &[u8; 6]) -> u64 {
    u64::from(u32::from_le_bytes([mac[0], mac[1], mac[2], mac[3]]))
        | u64::from(u16::from_le_bytes([mac[4], mac[5]])) << 32
}

#[inline(never)]
fn classify(cx: &mut Cx<'_>, ifs: &IfTable, p: PktIdx) -> u16 {
    let (m, d) = cx.pool.pkt(p);
    let Some(h) = d.first_chunk::<14>() else { return cx.drop(p, EthError::TooShort) };
    let eth = EthernetFrame::new_unchecked(h);
    // An Ethernet source is never a group address (IEEE 802.3 3.2.3).
    if eth.src_addr().is_multicast() {
        return cx.drop(p, EthError::SrcMulticast);
    }
    let Some(iface) = ifs.get(m.rx_if) else { return cx.drop(p, EthError::NoIf) };
    let dst = eth.dst_addr();
    if dst.0 != iface.mac {
        if dst.is_multicast() {
            m.flags |= flags::L2_MULTI;
        } else if !iface.is_vmac(&dst.0) && !sub_vmac(ifs, iface.port, d, &dst.0) {
            return cx.drop(p, EthError::NotForUs);
        }
    }
    let mut et = eth.ethertype().0;
    let mut l3 = 14u16;
    let mut rx_if = m.rx_if;
    if et == ETH_P_8021Q || et == ETH_P_8021AD {
        let Some(tagged) = d.first_chunk::<18>() else { return cx.drop(p, EthError::TooShort) };
        let tag = VlanTag::new_unchecked(tagged.last_chunk::<4>().unwrap_or(&[0; 4]));
        let vid = tag.vid();
        et = tag.ethertype().0;
        if et == ETH_P_8021Q || et == ETH_P_8021AD {
            return cx.drop(p, EthError::TaggedOnSub);
        }
        l3 = 18;
        if vid != 0 {
            match ifs.vlan_if(iface.port, vid) {
                Some(sub) if sub != NO_IF => {
                    rx_if = sub;
                    m.vlan = vid;
                }
                _ => return cx.drop(p, EthError::UnknownVlan),
            }
        } else {
            // VID 0 is a priority tag (IEEE 802.1Q 9.6): the frame is the
            // port's, untagged, its priority ignored. The tag goes, so that
            // what answers in place (ARP, echo) or hands the frame to Linux
            // finds the untagged frame it expects.
            if let Some(h) = cx.pool.data_mut(p).first_chunk_mut::<16>() {
                h.copy_within(0..12, 4);
            }
            cx.pool.advance(p, 4);
            l3 = 14;
        }
    }
    let m = cx.pool.meta_mut(p);
    let up = if rx_if == m.rx_if { iface.up } else { ifs.get(rx_if).is_some_and(|s| s.up) && iface.up };
    if !up {
        return cx.drop(p, EthError::IfDown);
    }
    m.rx_if = rx_if;
    m.l3_off = l3;
    match et {
        ETH_P_IPV4 => EthNext::Ip4 as u16,
        ETH_P_IPV6 => {
            m.flags |= flags::IPV6;
            EthNext::Ip6 as u16
        }
        ETH_P_ARP => EthNext::Arp as u16,
        _ => cx.drop(p, EthError::UnknownEthertype),
    }
}

/// Whether frame `d`, received on `port` to unicast `dst` (not the port's
/// MAC nor one of its virtual MACs), carries an 802.1Q tag of a
/// sub-interface that has `dst` as a virtual MAC.
fn sub_vmac(ifs: &IfTable, port: u16, d: &[u8], dst: &[u8; 6]) -> bool {
    let Some(h) = d.first_chunk::<16>() else { return false };
    let et = u16::from_be_bytes([h[12], h[13]]);
    if et != ETH_P_8021Q && et != ETH_P_8021AD {
        return false;
    }
    let vid = u16::from_be_bytes([h[14], h[15]]) & 0x0fff;
    vid != 0 && ifs.vlan_if(port, vid).and_then(|s| ifs.get(s)).is_some_and(|s| s.is_vmac(dst))
}
