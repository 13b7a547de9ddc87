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
    router.trace.clear();
    st.trace_started_ns = started_ns;
    st.trace_started_mono_ns = started_mono_ns;
    router.trace.arm(count);
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
    let (mut recs, in_flight, mut lost) = router.trace.peek_counted();
    recs.sort_by_key(|r| r.seq);
    let mut remaining = router.trace.remaining();
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

/// One packet as the XDP lane traced it: one step, its verdict, and for a
/// forwarded packet the rewrite (MACs, VLAN, TTL, GRE).
pub(super) fn lane_trace_entry(ifs: &IfTable, st: &OpsState, seq: u64, t: &tern_xdp::lane::LaneTrace) -> TraceEntry {
    use tern_xdp::lane::TraceVerdict;
    let port_name = |port: u16| {
        ifs.ifs
            .iter()
            .find(|f| f.port == port && matches!(f.kind, IfKind::Port))
            .map_or_else(|| format!("port {port}"), |f| f.name.clone())
    };
    let why = || t.reason_name().map_or_else(|| format!("counter {}", t.reason), |(n, e)| format!("{n}/{e}"));
    let (next, notes, fate) = match t.verdict {
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
    let mac = |o: usize| f.get(o..o + 6).map(|m| crate::neighbor::fmt_mac([m[0], m[1], m[2], m[3], m[4], m[5]]));
    let be16 = |o: usize| f.get(o..o + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let (Some(dst), Some(src), Some(mut et)) = (mac(0), mac(6), be16(12)) else {
        return format!("{} bytes (runt)", f.len());
    };
    let mut off = 14;
    let mut s = format!("{src} > {dst}");
    while et == 0x8100 || et == 0x88a8 {
        let (Some(tci), Some(inner)) = (be16(off), be16(off + 2)) else { return s };
        s.push_str(&format!(" vlan {}", tci & 0x0fff));
        et = inner;
        off += 4;
    }
    let l4 = |proto: u8, at: usize| -> String {
        match proto {
            6 | 17 => match (be16(at), be16(at + 2)) {
                (Some(a), Some(b)) => format!(" {} {a} > {b}", if proto == 6 { "tcp" } else { "udp" }),
                _ => String::new(),
            },
            1 | 58 => f.get(at..at + 2).map_or(String::new(), |t| {
                format!(" icmp{} type {} code {}", if proto == 58 { "6" } else { "" }, t[0], t[1])
            }),
            47 => " gre".into(),
            50 => " esp".into(),
            p => format!(" proto {p}"),
        }
    };
    match et {
        0x0800 => {
            let Some(h) = f.get(off..off + 20) else { return s + " ipv4 (truncated)" };
            let ihl = usize::from(h[0] & 15) * 4;
            let a = std::net::Ipv4Addr::new(h[12], h[13], h[14], h[15]);
            let b = std::net::Ipv4Addr::new(h[16], h[17], h[18], h[19]);
            format!("{s} ipv4 {a} > {b} ttl {}{}", h[8], l4(h[9], off + ihl))
        }
        0x86dd => {
            let Some(h) = f.get(off..off + 40) else { return s + " ipv6 (truncated)" };
            let mut a = [0u8; 16];
            let mut b = [0u8; 16];
            a.copy_from_slice(&h[8..24]);
            b.copy_from_slice(&h[24..40]);
            format!(
                "{s} ipv6 {} > {} hlim {}{}",
                std::net::Ipv6Addr::from(a),
                std::net::Ipv6Addr::from(b),
                h[7],
                l4(h[6], off + 40)
            )
        }
        0x0806 => {
            let Some(h) = f.get(off..off + 28) else { return s + " arp (truncated)" };
            let spa = std::net::Ipv4Addr::new(h[14], h[15], h[16], h[17]);
            let tpa = std::net::Ipv4Addr::new(h[24], h[25], h[26], h[27]);
            match h[7] {
                1 => format!("{s} arp who-has {tpa} tell {spa}"),
                2 => format!("{s} arp reply {spa} is-at {}", mac(off + 8).unwrap_or_default()),
                op => format!("{s} arp op {op}"),
            }
        }
        et => format!("{s} ethertype 0x{et:04x}"),
    }
}
