//! `trace` commands: packet traces of the workers and the XDP lane.

use super::*;

pub fn trace_start(router: &mut Router, st: &mut OpsState, count: u32) -> Result<String, ApiError> {
    if count == 0 || count > 10_000 {
        return Err(ApiError::invalid(format!("trace {count} packets: need 1..=10000")));
    }
    let started_ns = tern_engine::clock::now_ns();
    let started_mono_ns = monotonic_ns();
    // The lane first: if it refuses, nothing has changed.
    let lane = match router.xdp_lane_mut() {
        Some(lane) => {
            lane.trace_arm(count).map_err(|e| ApiError::internal(format!("cannot arm the XDP lane's trace: {e}")))?;
            st.trace_lane_lost_at_start = lane.counter("xdp-lane", "trace-lost");
            " of each lane (the XDP lane's and the engine's)"
        }
        None => "",
    };
    router.trace().clear();
    st.trace_started_ns = started_ns;
    st.trace_started_mono_ns = started_mono_ns;
    router.trace().arm(count);
    Ok(format!("tracing the next {count} packets{lane}; `tern trace show` prints them"))
}

pub(super) fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// Packets traced by both lanes, in the order they arrived. A packet the
/// XDP lane punts appears twice: as the lane saw it, and as the engine
/// traced it (while the engine's budget lasts). Every packet a lane marked
/// is listed, or counted as still in flight or as lost.
pub fn trace_show(router: &mut Router, st: &OpsState) -> TraceView {
    let ifs = router.iftable();
    let (mut recs, in_flight, mut lost) = router.trace().peek_counted();
    recs.sort_by_key(|r| r.seq);
    let mut remaining = router.trace().remaining();
    let mut packets: Vec<TraceEntry> = recs
        .into_iter()
        .map(|r| TraceEntry {
            seq: r.seq,
            lane: "engine".into(),
            worker: r.worker,
            interface: ifname(&ifs, r.rx_if),
            len: r.len,
            at_ms: r.t_ns.saturating_sub(st.trace_started_ns) as f64 / 1e6,
            summary: summarize(&r.head),
            head: to_hex(&r.head),
            hops: r
                .hops
                .into_iter()
                .map(|h| TraceHopView { node: h.node.into(), next: h.next.into(), notes: h.notes })
                .collect(),
            fate: r.fate,
        })
        .collect();
    if let Some(lane) = router.xdp_lane_mut() {
        let traced = lane.traces();
        packets.extend(traced.iter().enumerate().map(|(i, t)| lane_trace_entry(&ifs, st, i as u64, t)));
        remaining += lane.trace_remaining();
        // Records the program could not write (its ring was full).
        lost += lane.counter("xdp-lane", "trace-lost").saturating_sub(st.trace_lane_lost_at_start);
    }
    packets.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    TraceView { remaining, packets, in_flight, lost }
}

/// One packet as the XDP lane traced it: one step, its verdict, the fast
/// paths that decided it (forwarding memo, cached rule set verdicts), and
/// for a forwarded packet the rewrite (MACs, VLAN, TTL, GRE).
pub(super) fn lane_trace_entry(ifs: &IfTable, st: &OpsState, seq: u64, t: &tern_xdp::lane::LaneTrace) -> TraceEntry {
    use tern_xdp::lane::TraceVerdict;
    let port_name = |port: u16| {
        ifs.ifs
            .iter()
            .find(|f| f.port == port && matches!(f.kind, IfKind::Port))
            .map_or_else(|| format!("port {port}"), |f| f.name.clone())
    };
    let why = || t.reason_name().map_or_else(|| format!("counter {}", t.reason), |(n, e)| format!("{n}/{e}"));
    // The fast paths that decided it, first, as the engine's notes say
    // theirs ("direct path", "acl NAME: cached verdict, rule N").
    let mut path = Vec::new();
    if t.fwd_memo {
        path.push("forwarding memo: the decision of an earlier packet of the flow".to_string());
    }
    if t.acl_in_cached {
        path.push("acl in: cached verdict".to_string());
    }
    if t.acl_out_cached {
        path.push("acl out: cached verdict".to_string());
    }
    let (next, mut notes, fate) = match t.verdict {
        TraceVerdict::Forwarded => {
            let mut notes = Vec::new();
            let mut out = String::from("?");
            if let Some(rw) = &t.rewrite {
                out = port_name(rw.tx_port);
                notes.push(format!(
                    "rewrite {} > {}",
                    crate::neighbor::fmt_mac(rw.src_mac),
                    crate::neighbor::fmt_mac(rw.dst_mac)
                ));
                if rw.dec_ttl {
                    notes.push(format!("{} - 1", if rw.v6 { "hop limit" } else { "ttl" }));
                }
                if rw.tx_vid != 0 {
                    notes.push(format!("vlan {} pushed", rw.tx_vid));
                }
                if let Some((src, dst)) = rw.gre {
                    notes.push(format!("gre {src} > {dst}"));
                }
            }
            if t.decap {
                notes.insert(0, "gre decapsulated".into());
            }
            ("tx", notes, format!("tx {out}"))
        }
        TraceVerdict::Dropped => ("drop", Vec::new(), format!("drop: {}", why())),
        TraceVerdict::Punted => ("engine", vec![why()], format!("to the engine: {}", why())),
        TraceVerdict::Passed => ("linux", vec![why()], format!("to Linux: {}", why())),
        TraceVerdict::Unknown(v) => ("?", Vec::new(), format!("verdict {v}")),
    };
    notes.splice(0..0, path);
    TraceEntry {
        seq,
        lane: "xdp".into(),
        worker: u16::from(t.cpu),
        interface: ifname(ifs, t.rx_if),
        len: t.len as usize,
        at_ms: t.t_ns.saturating_sub(st.trace_started_mono_ns) as f64 / 1e6,
        summary: summarize(&t.head),
        head: to_hex(&t.head),
        hops: vec![TraceHopView { node: "xdp-lane".into(), next: next.into(), notes }],
        fate,
    }
}

/// A one-line decode of a frame's first bytes (Ethernet, 802.1Q, ARP,
/// IPv4, IPv6 and the transport ports), for trace listings.
pub fn summarize(f: &[u8]) -> String {
    tern_wire::pretty::summary(f).to_string()
}
