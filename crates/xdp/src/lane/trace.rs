//! Packet traces of the XDP lane: `struct lane_trace` (bpf/lane.h) as the
//! program writes it into its ring buffer, decoded.
//!
//! The program records a packet while a trace is armed and its budget
//! lasts: the first bytes as received, what it decided (forwarded,
//! dropped, punted to the userspace engine, passed to Linux, with the
//! counter that says why), the fast paths that decided it (the forwarding
//! memo, cached rule set verdicts) and, when it forwards, the rewrite it
//! decided (MACs, 802.1Q id, GRE outer addresses).

use super::counters::counters;
use super::layout::c::lane_trace;
use std::mem::{offset_of, size_of};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `LANE_TRACE_HEAD`: bytes of each frame kept.
pub const TRACE_HEAD: usize = 128;
/// `sizeof(struct lane_trace)`.
pub(crate) const RECORD_SIZE: usize = size_of::<lane_trace>();

const LTR_DECAP: u8 = 1 << 0;
const LTR_ENCAP: u8 = 1 << 1;
const LTR_OUTER_V6: u8 = 1 << 2;
const LTR_V6: u8 = 1 << 3;
const LTR_DEC_TTL: u8 = 1 << 4;
const LTR_FWD_MEMO: u8 = 1 << 5;
const LTR_ACL_IN_CACHED: u8 = 1 << 6;
const LTR_ACL_OUT_CACHED: u8 = 1 << 7;

/// What the lane did with a traced packet (`V_*` in lane.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceVerdict {
    Forwarded,
    Dropped,
    /// To tern's userspace engine (its AF_XDP socket).
    Punted,
    /// To Linux.
    Passed,
    Unknown(u8),
}

/// The rewrite of a forwarded packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRewrite {
    pub tx_port: u16,
    /// 802.1Q id pushed (0: untagged).
    pub tx_vid: u16,
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    /// The forwarded header is IPv6.
    pub v6: bool,
    /// TTL / hop limit decremented.
    pub dec_ttl: bool,
    /// GRE encapsulation: outer source and destination.
    pub gre: Option<(IpAddr, IpAddr)>,
}

/// One traced packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneTrace {
    /// CLOCK_MONOTONIC, ns.
    pub t_ns: u64,
    pub kifindex: u32,
    /// Frame length as received.
    pub len: u32,
    pub port: u16,
    /// tern interface after VLAN demux and decapsulation.
    pub rx_if: u16,
    pub cpu: u8,
    pub verdict: TraceVerdict,
    /// The XDP action returned (XDP_DROP 1, XDP_PASS 2, XDP_REDIRECT 4).
    pub action: u32,
    /// Counter id of a drop, punt or pass ([`counters`] index).
    pub reason: u32,
    /// A GRE packet was decapsulated on the way in.
    pub decap: bool,
    /// The forwarding memo decided it: an earlier packet of its flow's
    /// decision (rule sets, route, next hop, egress), taken whole.
    pub fwd_memo: bool,
    /// The input rule set's verdict came from the verdict cache (or its
    /// memo), not from the classifier.
    pub acl_in_cached: bool,
    /// The same for the output rule set.
    pub acl_out_cached: bool,
    pub rewrite: Option<TraceRewrite>,
    /// The frame's first bytes as received.
    pub head: Vec<u8>,
}

impl LaneTrace {
    /// Decodes one ring buffer record; None when it is not a whole record.
    pub fn decode(b: &[u8]) -> Option<LaneTrace> {
        // Offsets of `struct lane_trace`, from its mirror (checked against
        // the object's BTF at build time).
        macro_rules! at {
            ($f:ident) => {
                offset_of!(lane_trace, $f)
            };
        }
        if b.len() < RECORD_SIZE {
            return None;
        }
        let u16_at = |o: usize| u16::from_ne_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let mac_at = |o: usize| -> [u8; 6] { [b[o], b[o + 1], b[o + 2], b[o + 3], b[o + 4], b[o + 5]] };
        let mut t_ns = [0u8; 8];
        t_ns.copy_from_slice(&b[at!(t_ns)..at!(t_ns) + 8]);
        let flags = b[at!(flags)];
        let verdict = match b[at!(verdict)] {
            1 => TraceVerdict::Forwarded,
            2 => TraceVerdict::Dropped,
            3 => TraceVerdict::Punted,
            4 => TraceVerdict::Passed,
            v => TraceVerdict::Unknown(v),
        };
        let addr = |o: usize| -> IpAddr {
            if flags & LTR_OUTER_V6 != 0 {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[o..o + 16]);
                IpAddr::V6(Ipv6Addr::from(a))
            } else {
                IpAddr::V4(Ipv4Addr::new(b[o], b[o + 1], b[o + 2], b[o + 3]))
            }
        };
        let rewrite = (verdict == TraceVerdict::Forwarded).then(|| TraceRewrite {
            tx_port: u16_at(at!(tx_port)),
            tx_vid: u16_at(at!(tx_vid)),
            dst_mac: mac_at(at!(dmac)),
            src_mac: mac_at(at!(smac)),
            v6: flags & LTR_V6 != 0,
            dec_ttl: flags & LTR_DEC_TTL != 0,
            gre: (flags & LTR_ENCAP != 0).then(|| (addr(at!(o_src)), addr(at!(o_dst)))),
        });
        let cap = (u32_at(at!(cap)) as usize).min(TRACE_HEAD);
        Some(LaneTrace {
            t_ns: u64::from_ne_bytes(t_ns),
            kifindex: u32_at(at!(kifindex)),
            len: u32_at(at!(len)),
            reason: u32_at(at!(reason)),
            port: u16_at(at!(port)),
            rx_if: u16_at(at!(rx_if)),
            verdict,
            action: u32::from(b[at!(action)]),
            cpu: b[at!(cpu)],
            decap: flags & LTR_DECAP != 0,
            fwd_memo: flags & LTR_FWD_MEMO != 0,
            acl_in_cached: flags & LTR_ACL_IN_CACHED != 0,
            acl_out_cached: flags & LTR_ACL_OUT_CACHED != 0,
            rewrite,
            head: b[at!(head)..at!(head) + cap].to_vec(),
        })
    }

    /// The counter that says why it was dropped, punted or passed, as
    /// (node, error); None for a forwarded packet.
    pub fn reason_name(&self) -> Option<(&'static str, &'static str)> {
        if self.verdict == TraceVerdict::Forwarded {
            return None;
        }
        counters().get(self.reason as usize).map(|c| (c.node, c.error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(verdict: u8, flags: u8, reason: u32, cap: u32) -> Vec<u8> {
        let mut b = vec![0u8; RECORD_SIZE];
        b[0..8].copy_from_slice(&123_456_789u64.to_ne_bytes());
        b[8..12].copy_from_slice(&7u32.to_ne_bytes());
        b[12..16].copy_from_slice(&60u32.to_ne_bytes());
        b[16..20].copy_from_slice(&reason.to_ne_bytes());
        b[20..22].copy_from_slice(&1u16.to_ne_bytes());
        b[22..24].copy_from_slice(&3u16.to_ne_bytes());
        b[24..26].copy_from_slice(&2u16.to_ne_bytes());
        b[26..28].copy_from_slice(&100u16.to_ne_bytes());
        b[28] = verdict;
        b[29] = 4;
        b[30] = 1;
        b[31] = flags;
        b[32..38].copy_from_slice(&[2, 0, 0, 0, 0, 0x21]);
        b[38..44].copy_from_slice(&[2, 0, 0, 0, 0, 0x20]);
        b[44..48].copy_from_slice(&[10, 0, 0, 1]);
        b[60..64].copy_from_slice(&[10, 0, 0, 2]);
        b[76..80].copy_from_slice(&cap.to_ne_bytes());
        for (i, x) in b[80..].iter_mut().enumerate() {
            *x = i as u8;
        }
        b
    }

    #[test]
    fn a_forwarded_gre_record_decodes_with_its_rewrite() {
        let t = LaneTrace::decode(&record(1, LTR_ENCAP | LTR_DEC_TTL, 0, 60)).unwrap();
        assert_eq!((t.t_ns, t.kifindex, t.len, t.port, t.rx_if, t.cpu), (123_456_789, 7, 60, 1, 3, 1));
        assert_eq!(t.verdict, TraceVerdict::Forwarded);
        assert_eq!(t.head.len(), 60);
        assert_eq!(t.head[59], 59);
        assert_eq!(t.reason_name(), None);
        let r = t.rewrite.unwrap();
        assert_eq!((r.tx_port, r.tx_vid, r.v6, r.dec_ttl), (2, 100, false, true));
        assert_eq!(r.dst_mac, [2, 0, 0, 0, 0, 0x21]);
        assert_eq!(r.gre, Some(("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())));
        assert!(!t.fwd_memo && !t.acl_in_cached && !t.acl_out_cached, "no fast path flagged");
    }

    #[test]
    fn the_fast_paths_that_decided_a_packet_decode() {
        let t = LaneTrace::decode(&record(1, LTR_FWD_MEMO | LTR_DEC_TTL, 0, 60)).unwrap();
        assert!(t.fwd_memo && !t.acl_in_cached && !t.acl_out_cached);
        assert!(t.rewrite.unwrap().dec_ttl, "the other flags stay theirs");
        let t = LaneTrace::decode(&record(2, LTR_ACL_IN_CACHED, 0, 60)).unwrap();
        assert!(!t.fwd_memo && t.acl_in_cached && !t.acl_out_cached);
        let t = LaneTrace::decode(&record(1, LTR_ACL_OUT_CACHED, 0, 60)).unwrap();
        assert!(!t.fwd_memo && !t.acl_in_cached && t.acl_out_cached);
    }

    #[test]
    fn a_drop_names_its_counter_and_has_no_rewrite() {
        let id = counters().iter().position(|c| c.node == "ip4-acl-in" && c.error == "denied").unwrap();
        let t = LaneTrace::decode(&record(2, 0, id as u32, 500)).unwrap();
        assert_eq!(t.verdict, TraceVerdict::Dropped);
        assert_eq!(t.reason_name(), Some(("ip4-acl-in", "denied")));
        assert!(t.rewrite.is_none());
        assert_eq!(t.head.len(), TRACE_HEAD, "cap is clamped to the head");
    }

    proptest::proptest! {
        /// Any bytes the ring could hold: a record or None, never a panic,
        /// never more head than the record carries.
        #[test]
        fn any_bytes_decode_without_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            if let Some(t) = LaneTrace::decode(&b) {
                proptest::prop_assert!(b.len() >= RECORD_SIZE);
                proptest::prop_assert!(t.head.len() <= TRACE_HEAD);
                let _ = t.reason_name();
            } else {
                proptest::prop_assert!(b.len() < RECORD_SIZE);
            }
        }
    }

    #[test]
    fn short_or_odd_records_do_not_panic() {
        assert!(LaneTrace::decode(&[0u8; RECORD_SIZE - 1]).is_none());
        let t = LaneTrace::decode(&record(9, 0xff, u32::MAX, u32::MAX)).unwrap();
        assert_eq!(t.verdict, TraceVerdict::Unknown(9));
        assert_eq!(t.reason_name(), None);
    }
}
