//! `tap-input`: frames Linux sent through an interface's TAP, sent out of
//! that interface unchanged.
//!
//! Next nodes: `interface-output`, `drop`. Counters:
//! [`TapInputError::DESCS`].
//!
//! Config: the interfaces (a sub-interface's VLAN).
//!
//! Example: a frame Linux writes to `wan.7`'s TAP leaves `wan` with the
//! 802.1Q tag of VLAN 7, counted as `from-linux`.
//!
//! Reference: one loop per packet; there is no fast path.

#![deny(clippy::indexing_slicing)]

use super::*;
use crate::util::ETH_P_8021Q;

/// The `tap-input` node (see the module).
pub struct TapInput {
    ifs: Snapshot<IfTable>,
}

impl TapInput {
    pub fn new(ifs: Snapshot<IfTable>) -> Self {
        TapInput { ifs }
    }
}

tern_engine::errors! {
    /// `tap-input`'s counters.
    pub enum TapInputError {
        FromLinux = info("from-linux", "frames Linux sent through a TAP, passed to the interface"),
        TooShort = drop("too-short", "frame shorter than an Ethernet header"),
        NoIf = drop("no-interface", "the TAP's interface is unknown"),
        NoHeadroom = drop("no-headroom", "no room in front of the frame for the sub-interface's 802.1Q tag"),
    }
}

tern_engine::edges! {
    /// `tap-input`'s next nodes.
    pub enum TapInputNext {
        Drop = "drop",
        Output = "interface-output",
    }
}

impl Node for TapInput {
    fn name(&self) -> &'static str {
        "tap-input"
    }
    fn nexts(&self) -> &'static [&'static str] {
        TapInputNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        TapInputError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        let ifs = self.ifs.current();
        let mut passed = 0;
        for (o, &p) in next.iter_mut().zip(pkts) {
            let (m, d) = cx.pool.pkt_mut(p);
            if d.len() < 14 {
                *o = cx.drop(p, TapInputError::TooShort);
                continue;
            }
            let Some(iface) = ifs.get(m.rx_if) else {
                *o = cx.drop(p, TapInputError::NoIf);
                continue;
            };
            if let IfKind::Vlan { vid, .. } = iface.kind
                && !push_tag(cx.pool, p, vid)
            {
                *o = cx.drop(p, TapInputError::NoHeadroom);
                continue;
            }
            let m = cx.pool.meta_mut(p);
            m.tx_if = m.rx_if;
            m.flags |= flags::LOCAL_ORIGIN;
            passed += 1;
            *o = TapInputNext::Output as u16;
        }
        if passed > 0 {
            cx.count(TapInputError::FromLinux, passed);
        }
    }
}

/// Puts the 802.1Q header of VLAN `vid` into a frame Linux sent untagged
/// through a sub-interface's TAP. False (nothing changed) without the
/// headroom.
fn push_tag(pool: &mut tern_packet::PacketPool, p: PktIdx, vid: u16) -> bool {
    let Some(d) = pool.prepend(p, 4) else { return false };
    // The frame had its 14-byte header: 18 bytes now.
    let Some(h) = d.first_chunk_mut::<16>() else { return false };
    h.copy_within(4..16, 0);
    h[12..14].copy_from_slice(&ETH_P_8021Q.to_be_bytes());
    h[14..16].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
    true
}
