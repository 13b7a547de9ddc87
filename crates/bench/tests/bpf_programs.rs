//! The XDP programs checked against their Rust references: the generator
//! must emit exactly `TrafficProfile::frame` (the frames tshark approves
//! in pcap_tshark.rs), and the sink must count crafted sequences exactly
//! like `RxStream::record`. Both run through BPF_PROG_TEST_RUN without a
//! device. The `xdp-fwd` DUT's router runs the same way as if frames came
//! in on the DUT's ingress veth of a real chain (its routing lookup needs
//! the namespace's routes and neighbours). Needs root.

mod common;

use tern_bench::account::RxStream;
use tern_bench::bpf::{FwAction, FwRule, Generator, Sink, XDP_DROP, XDP_PASS, XDP_REDIRECT, XDP_TX, XdpFwd};
use tern_bench::traffic::{FlowSpec, FrameSize, Signature, checksum};
use tern_testkit::packet::{self, Frame};

fn anchored_generator() -> Generator {
    let mut g = Generator::load().expect("load generator");
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    g.anchor(&format!("tbt{}-{n}-anchor", std::process::id())).expect("anchor");
    g
}

#[test]
fn generator_matches_the_reference_frames() {
    if !common::privileged() {
        return;
    }
    let mut g = anchored_generator();
    for (name, p) in common::profiles() {
        let slots = p.slots().expect("slots");
        let flows: Vec<_> = p.streams.iter().map(|s| s.flows).collect();
        g.configure(&slots, &flows).expect("configure");
        let buf = vec![0u8; p.max_frame_len()];
        let n = (2 * slots.len()).min(60) as u64;
        for i in 0..n {
            let (verdict, out) = g.build_one(&buf).expect("run");
            assert_eq!(verdict, XDP_TX, "{name} frame {i}");
            let l4 = if p.vlan.is_some() { 18 } else { 14 }
                + if out.get(if p.vlan.is_some() { 18 } else { 14 }).is_some_and(|b| b >> 4 == 6) { 40 } else { 20 };
            let sig = Signature::parse(&out[l4 + 8..]).expect("signature");
            let want = p.frame(i, sig.timestamp).expect("reference");
            assert_eq!(out, want, "{name} frame {i} differs from the reference");
        }
        let c = g.counters().expect("counters");
        assert_eq!(c.sent, n, "{name}: frames counted");
        assert_eq!(c.per_stream.iter().sum::<u64>(), n, "{name}: per stream");
    }
}

/// Paced, the program sends a frame only when one is due at the rate
/// since its first run, never more than the trial's total, and skips the
/// frames due beyond the bucket's depth when it was held up.
#[test]
fn generator_paces_its_frames() {
    if !common::privileged() {
        return;
    }
    let mut g = anchored_generator();
    let (_, p) = common::profiles().into_iter().next().expect("a profile");
    let slots = p.slots().expect("slots");
    let flows: Vec<_> = p.streams.iter().map(|s| s.flows).collect();
    g.configure(&slots, &flows).expect("configure");
    let buf = vec![0u8; p.max_frame_len()];
    let ms = std::time::Duration::from_millis(1);

    // 1000 frames/s, 3 in all: frame k is not sent before k ms have passed.
    g.pace(1000.0, 3, 1).expect("pace");
    let t0 = std::time::Instant::now();
    let mut sent_at = Vec::new();
    while sent_at.len() < 3 && t0.elapsed() < std::time::Duration::from_secs(5) {
        let (verdict, _) = g.build_one(&buf).expect("run");
        match verdict {
            XDP_TX => sent_at.push(t0.elapsed()),
            XDP_DROP => {}
            v => panic!("verdict {v}"),
        }
    }
    assert_eq!(sent_at.len(), 3, "three frames within 5 s");
    for (k, at) in sent_at.iter().enumerate() {
        assert!(*at >= ms * k as u32, "frame {k} sent after {at:?}");
    }
    std::thread::sleep(5 * ms);
    assert_eq!(g.build_one(&buf).expect("run").0, XDP_DROP, "nothing past the total");
    let pr = g.pace_progress().expect("progress");
    assert_eq!(pr.sent, 3);
    assert!(pr.start_ns > 0 && pr.last_ns >= pr.start_ns + 2_000_000, "{pr:?}");
    assert_eq!(g.counters().expect("counters").sent, 3);

    // Held up for 30 ms with a bucket of 4: the frames due beyond 4 are
    // skipped, the 4 are sent at once, then nothing until the next is due.
    g.reset().expect("reset");
    g.pace(1000.0, 1000, 4).expect("pace");
    assert_eq!(g.build_one(&buf).expect("run").0, XDP_TX, "the first frame is due at once");
    std::thread::sleep(30 * ms);
    for i in 0..4 {
        assert_eq!(g.build_one(&buf).expect("run").0, XDP_TX, "catch-up frame {i}");
    }
    let pr = g.pace_progress().expect("progress");
    assert_eq!(pr.sent, 5);
    assert!(pr.skipped >= 26, "at least 31 due, 1 sent before, 4 owed: {pr:?}");

    // Unpaced, every run sends.
    g.unpace().expect("unpace");
    for _ in 0..10 {
        assert_eq!(g.build_one(&buf).expect("run").0, XDP_TX);
    }
}

#[test]
fn generator_random_flows_stay_in_range_with_valid_checksums() {
    if !common::privileged() {
        return;
    }
    let mut g = anchored_generator();
    let flows = FlowSpec { random: true, ..common::SOME_FLOWS };
    let p = common::profile(vec![common::stream("a", true, flows)], FrameSize::Fixed { size: 64, ipv6: false }, None);
    g.configure(&p.slots().expect("slots"), &[flows]).expect("configure");
    let buf = vec![0u8; p.max_frame_len()];
    let mut dsts = std::collections::BTreeSet::new();
    for i in 0..200u32 {
        let (_, f) = g.build_one(&buf).expect("run");
        assert_eq!(f.len(), 60);
        let ip = &f[14..34];
        assert_eq!(checksum(&[ip]), 0, "frame {i}: IPv4 header checksum");
        let udp = &f[34..];
        let mut pseudo = ip[12..20].to_vec();
        pseudo.extend_from_slice(&[0, 17, 0, udp.len() as u8]);
        assert_eq!(checksum(&[&pseudo, udp]), 0, "frame {i}: UDP checksum");
        let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        let base_src = u32::from(std::net::Ipv4Addr::new(10, 10, 1, 2));
        assert!((src - base_src) % 256 == 0 && (src - base_src) / 256 < 3, "frame {i}: src");
        let base_dst = u32::from(std::net::Ipv4Addr::new(198, 18, 0, 1));
        assert!(dst - base_dst < 5, "frame {i}: dst");
        dsts.insert(dst);
        let sport = u16::from_be_bytes([udp[0], udp[1]]);
        let dport = u16::from_be_bytes([udp[2], udp[3]]);
        assert!((5000..5002).contains(&sport) && (7000..7003).contains(&dport));
        let sig = Signature::parse(&udp[8..]).expect("signature");
        assert_eq!(sig.seq, i);
    }
    // 200 random draws over 5 destinations: all seen (fails with p < 1e-18).
    assert_eq!(dsts.len(), 5);
}

fn frame_with_seq(seq: u32) -> Vec<u8> {
    let p = common::profile(
        vec![common::stream("a", true, FlowSpec::SINGLE)],
        FrameSize::Fixed { size: 64, ipv6: false },
        None,
    );
    let mut f = p.frame(0, 0).expect("frame");
    f[42 + 4..42 + 8].copy_from_slice(&seq.to_be_bytes());
    f
}

/// `inner_frame`'s IPv4 packet in GRE (RFC 2784: no flags) from 10.10.2.1
/// to 10.10.2.2, between the same MACs.
fn gre_wrap(inner_frame: &[u8]) -> Vec<u8> {
    let dst: [u8; 6] = inner_frame[..6].try_into().expect("MAC");
    let src: [u8; 6] = inner_frame[6..12].try_into().expect("MAC");
    Frame::eth(src, dst)
        .ipv4([10, 10, 2, 1], [10, 10, 2, 2])
        .gre(None)
        .ethertype(0x0800)
        .payload(&inner_frame[14..])
        .build()
}

#[test]
fn sink_counts_like_the_reference() {
    if !common::privileged() {
        return;
    }
    let mut sink = Sink::load().expect("load sink");
    let sequences: Vec<(&str, Vec<u32>)> = vec![
        ("in order", (0..300).collect()),
        ("gaps", (0..300).filter(|q| q % 7 != 0).collect()),
        ("swaps", (0..300).map(|q| if q % 2 == 0 { q + 1 } else { q - 1 }).collect()),
        ("dups", vec![0, 1, 1, 2, 3, 2, 3, 3, 4, 9, 5, 9]),
        ("late", (1..1500).chain([0, 1000, 1400, 1499]).collect()),
        ("jump", (0..100).chain([1124, 1100, 1123, 50]).collect()),
        ("wrap", (0..200u32).map(|i| (u32::MAX - 99).wrapping_add(i)).collect()),
    ];
    for (name, seqs) in sequences {
        sink.reset().expect("reset");
        let mut want = RxStream::default();
        for (k, &q) in seqs.iter().enumerate() {
            let f = frame_with_seq(q);
            // Every third frame arrives inside GRE (the tunnel scenario).
            let f = if k % 3 == 2 { gre_wrap(&f) } else { f };
            assert_eq!(sink.feed(&f).expect("feed"), XDP_DROP, "{name}: counted frames are dropped");
            want.record(q, 0, f.len() as u64);
        }
        let got = &sink.streams(1).expect("read")[0];
        assert_eq!(got.received, want.received, "{name}: received");
        assert_eq!(got.bytes, want.bytes, "{name}: bytes");
        assert_eq!(got.dup, want.dup, "{name}: duplicates");
        assert_eq!(got.reordered, want.reordered, "{name}: reordered");
        assert_eq!(got.late, want.late, "{name}: late");
        assert_eq!(got.max_seq, want.max_seq, "{name}: highest sequence");
        assert_eq!(got.window, want.window, "{name}: window");
        assert_eq!(got.hist.iter().sum::<u64>(), got.received, "{name}: histogram total");
        let gre = (0..seqs.len()).filter(|k| k % 3 == 2).count() as u64;
        assert_eq!(sink.misc().expect("misc").in_gre, gre, "{name}: frames inside GRE");
        assert!(got.lat_min <= got.lat_max);
    }
}

#[test]
fn sink_passes_foreign_frames_and_counts_bad_streams() {
    if !common::privileged() {
        return;
    }
    let mut sink = Sink::load().expect("load sink");
    sink.reset().expect("reset");
    // An ARP request: the kernel must see it.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    assert_eq!(sink.feed(&arp).expect("feed"), XDP_PASS);
    // A UDP frame whose magic is wrong.
    let mut f = frame_with_seq(1);
    f[42] = b'x';
    assert_eq!(sink.feed(&f).expect("feed"), XDP_PASS);
    // A truncated frame.
    assert_eq!(sink.feed(&frame_with_seq(1)[..40]).expect("feed"), XDP_PASS);
    // Stream id out of range: dropped and counted apart.
    let mut f = frame_with_seq(1);
    f[42 + 2] = 200;
    assert_eq!(sink.feed(&f).expect("feed"), XDP_DROP);
    let misc = sink.misc().expect("misc");
    assert_eq!(misc.passed, 3);
    assert_eq!(misc.bad_stream, 1);
    assert_eq!(misc.in_gre, 0);
    assert!(sink.streams(16).expect("read").iter().all(|s| s.received == 0));
}

#[test]
fn hole_watch_ticks_on_its_cpu_and_logs_nothing_it_cannot_prove() {
    use std::time::{Duration, Instant};
    if !common::privileged() {
        return;
    }
    use tern_bench::bpf::HoleWatch;
    let period = Duration::from_micros(200);
    let w = HoleWatch::start(0, period, Duration::from_micros(100)).expect("arm the watch on cpu 0");
    assert_eq!(w.cpu(), 0);
    // The timer re-arms itself: its ticks keep coming.
    let start = Instant::now();
    let mut ticks = w.ticks().expect("ticks");
    while ticks < 100 {
        assert!(start.elapsed() < Duration::from_secs(10), "the watch's timer does not tick ({ticks} ticks)");
        std::thread::yield_now();
        ticks = w.ticks().expect("ticks");
    }
    let log = w.log().expect("log");
    assert!(!log.wrapped);
    // Every hole logged is at least the minimum late, and ended inside the run.
    let now = log.holes.iter().map(|h| h.end_ns).max().unwrap_or(0);
    for h in &log.holes {
        assert!(h.len_ns >= 100_000, "a hole of {} ns is under the minimum", h.len_ns);
        assert!(h.end_ns <= now);
    }
    // Late ticks, holes or not, are fewer than all ticks, and those marked
    // busy are the ones counted busy (none came after the log was read).
    let late = log.holes.len() as u64;
    assert!(late < w.ticks().expect("ticks"), "{late} late ticks");
    let busy = log.holes.iter().filter(|h| h.busy).count() as u64;
    assert!(busy <= w.busy_late().expect("busy_late"));
    // A window before the watch started holds no hole.
    assert_eq!(log.stats_between(0, 1).count, 0);
}

#[test]
fn sink_logs_every_gap_in_a_sequence() {
    if !common::privileged() {
        return;
    }
    let mut sink = Sink::load().expect("load sink");
    sink.reset().expect("reset");
    // 0 1 | 5 6 | 10, then 8 late (reordered: no new gap) and 11 (none).
    for seq in [0u32, 1, 5, 6, 10, 8, 11] {
        assert_eq!(sink.feed(&frame_with_seq(seq)).expect("feed"), XDP_DROP);
    }
    let log = sink.gaps().expect("gaps");
    assert!(!log.wrapped);
    let got: Vec<(u32, u32)> = log.gaps.iter().map(|g| (g.stream, g.missing)).collect();
    assert_eq!(got, vec![(0, 3), (0, 3)]);
    assert!(log.gaps[0].at_ns <= log.gaps[1].at_ns);
    sink.reset().expect("reset");
    assert!(sink.gaps().expect("gaps").gaps.is_empty(), "reset clears the log");
}

/// A 64-byte IPv4 (or 78-byte IPv6) test frame to 198.18.0.1 (2001:2::1).
fn fwd_frame(ipv6: bool) -> Vec<u8> {
    let size = if ipv6 { 78 } else { 64 };
    let p = common::profile(vec![common::stream("a", true, FlowSpec::SINGLE)], FrameSize::Fixed { size, ipv6 }, None);
    p.frame(0, 0).expect("frame")
}

/// `f` from another IPv4 source with TTL `ttl`, the header checksum redone.
fn from_src(f: &[u8], src: std::net::Ipv4Addr, ttl: u8) -> Vec<u8> {
    let mut f = f.to_vec();
    f[14 + 12..14 + 16].copy_from_slice(&src.octets());
    f[14 + 8] = ttl;
    f[14 + 10..14 + 12].copy_from_slice(&[0, 0]);
    let c = checksum(&[&f[14..34]]);
    f[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
    f
}

/// The xdp-fwd program on the ingress veth of a real DUT namespace, set up
/// as the `linux` DUT is (addresses, routes via the sink, its permanent
/// neighbour entries, forwarding on): the firewall's rules in order, first
/// match wins, then the default; forwarded frames carry the lookup's MACs,
/// one less TTL with a valid checksum (every TTL and many sources), one
/// less hop limit; ARP, expiring TTLs and unroutable destinations go to
/// the kernel; every verdict lands in its counter.
#[test]
fn xdpfwd_filters_and_forwards() {
    use std::net::Ipv4Addr;
    use tern_bench::dut::{Firewall, xdp_firewall};
    use tern_bench::topology::{Chain, DUT_IN, DUT_OUT, SINK_V4, SINK_V6, TEST_NET_V4, TEST_NET_V6};
    if !common::privileged() {
        return;
    }
    let chain = Chain::build(&format!("tbt{}-xf", std::process::id()), true).expect("chain");
    chain.address_dut().expect("addresses");
    let dut = chain.dut.as_ref().expect("dut namespace");
    dut.sysctl("net.ipv4.ip_forward", "1").expect("sysctl");
    dut.sysctl("net.ipv6.conf.all.forwarding", "1").expect("sysctl");
    let sink_mac = tern_bench::netns::fmt_mac(&chain.sink_link.mac);
    dut.ip(&["route", "add", TEST_NET_V4, "via", &SINK_V4.to_string()]).expect("route");
    dut.ip(&["-6", "route", "add", TEST_NET_V6, "via", &SINK_V6.to_string()]).expect("route");
    dut.ip(&["neigh", "replace", &SINK_V4.to_string(), "lladdr", &sink_mac, "dev", DUT_OUT, "nud", "permanent"])
        .expect("neigh");
    let v6 = SINK_V6.to_string();
    dut.ip(&["-6", "neigh", "replace", &v6, "lladdr", &sink_mac, "dev", DUT_OUT, "nud", "permanent"]).expect("neigh");
    let out_mac = dut.link_info(DUT_OUT).expect("tb-out").mac;
    let in_idx = chain.first_hop.ifindex;

    let mut x = XdpFwd::load().expect("load xdp-fwd");
    let (rules, default) = xdp_firewall(Firewall::Drop50DefaultDeny);
    x.set_firewall(&rules, default).expect("firewall");
    // Redirect targets, but not attached: the veths' own traffic (the
    // peers' MLD and router solicitations) would land in the counters.
    x.add_ports(dut, &[DUT_IN, DUT_OUT]).expect("device map");
    let v4 = fwd_frame(false);

    // The generator's frame: forwarded, rewritten as a router does.
    let (verdict, out) = x.feed(dut, in_idx, &v4).expect("run");
    assert_eq!(verdict, XDP_REDIRECT, "a legitimate frame is forwarded");
    assert_eq!(out.len(), v4.len());
    assert_eq!(out[0..6], chain.sink_link.mac, "destination MAC: the sink's, from the neighbour table");
    assert_eq!(out[6..12], out_mac, "source MAC: the egress device's");
    assert_eq!(out[14 + 8], v4[14 + 8] - 1, "TTL");
    assert_eq!(checksum(&[&out[14..34]]), 0, "IPv4 header checksum after the TTL update");
    assert_eq!(out[12..14 + 8], v4[12..14 + 8]);
    assert_eq!(out[14 + 9], v4[14 + 9]);
    assert_eq!(out[34..], v4[34..], "payload untouched");
    let mut want = tern_bench::bpf::XdpFwdCounters { forwarded: 1, ..Default::default() };
    assert_eq!(x.counters().expect("counters"), want);

    // The 50 blocked sources: dropped by their rule.
    for n in [1u8, 7, 50] {
        let f = from_src(&v4, Ipv4Addr::new(1, 1, n, 1), 64);
        assert_eq!(x.feed(dut, in_idx, &f).expect("run").0, XDP_DROP, "1.1.{n}.1 is blocked");
    }
    want.dropped_by_rule += 3;
    // Neither a rule's source nor the generator's subnet: default drop.
    for src in [Ipv4Addr::new(1, 1, 51, 1), Ipv4Addr::new(1, 1, 7, 2), Ipv4Addr::new(10, 10, 2, 9)] {
        let f = from_src(&v4, src, 64);
        assert_eq!(x.feed(dut, in_idx, &f).expect("run").0, XDP_DROP, "{src}: default drop");
    }
    want.dropped_by_default += 3;
    // IPv6 under a default-deny firewall of IPv4 rules: dropped.
    assert_eq!(x.feed(dut, in_idx, &fwd_frame(true)).expect("run").0, XDP_DROP, "IPv6, default drop");
    want.dropped_by_default += 1;
    assert_eq!(x.counters().expect("counters"), want);
    // ... but not an MLD report (to ff02::16 behind a hop-by-hop header):
    // the kernel's, and not forwarded (a multicast destination).
    let mut mld = fwd_frame(true);
    mld[14 + 6] = 0;
    mld[14 + 24..14 + 40].copy_from_slice(&"ff02::16".parse::<std::net::Ipv6Addr>().expect("addr").octets());
    assert_eq!(x.feed(dut, in_idx, &mld).expect("run").0, XDP_PASS, "MLD");
    want.passed += 1;

    // To the kernel: ARP, a TTL about to expire, a destination without a route.
    let (dst, src) = (v4[..6].try_into().expect("MAC"), v4[6..12].try_into().expect("MAC"));
    let who_has = packet::arp(1, src, packet::v4("10.10.1.2"), [0; 6], packet::v4("10.10.1.1"));
    let arp = packet::eth_padded(dst, src, 0x0806, &who_has);
    assert_eq!(x.feed(dut, in_idx, &arp).expect("run").0, XDP_PASS, "ARP");
    assert_eq!(x.feed(dut, in_idx, &from_src(&v4, Ipv4Addr::new(10, 10, 1, 2), 1)).expect("run").0, XDP_PASS, "TTL 1");
    let mut unroutable = v4.clone();
    unroutable[14 + 16..14 + 20].copy_from_slice(&[203, 0, 113, 1]);
    let unroutable = from_src(&unroutable, Ipv4Addr::new(10, 10, 1, 2), 64);
    assert_eq!(x.feed(dut, in_idx, &unroutable).expect("run").0, XDP_PASS, "no route");
    want.passed += 3;
    assert_eq!(x.counters().expect("counters"), want);

    // First match wins: the same two rules in both orders.
    let drop_host = FwRule { src: Ipv4Addr::new(1, 1, 7, 1), prefix_len: 32, action: FwAction::Drop };
    let accept_net = FwRule { src: Ipv4Addr::new(1, 1, 0, 0), prefix_len: 16, action: FwAction::Accept };
    let host = from_src(&v4, Ipv4Addr::new(1, 1, 7, 1), 64);
    let neighbour = from_src(&v4, Ipv4Addr::new(1, 1, 8, 1), 64);
    x.set_firewall(&[drop_host, accept_net], FwAction::Drop).expect("firewall");
    assert_eq!(x.feed(dut, in_idx, &host).expect("run").0, XDP_DROP, "drop rule first");
    assert_eq!(x.feed(dut, in_idx, &neighbour).expect("run").0, XDP_REDIRECT, "the /16 accepts the rest");
    x.set_firewall(&[accept_net, drop_host], FwAction::Drop).expect("firewall");
    assert_eq!(x.feed(dut, in_idx, &host).expect("run").0, XDP_REDIRECT, "accept rule first");
    want.dropped_by_rule += 1;
    want.forwarded += 2;

    // No firewall: every TTL and many checksums survive the incremental
    // update; IPv6 is forwarded with one less hop.
    x.set_firewall(&[], FwAction::Accept).expect("firewall");
    for ttl in 2..=255u8 {
        let src = Ipv4Addr::new(10, 10, 1, ttl);
        let f = from_src(&v4, src, ttl);
        let (verdict, out) = x.feed(dut, in_idx, &f).expect("run");
        assert_eq!(verdict, XDP_REDIRECT, "ttl {ttl}");
        assert_eq!(out[14 + 8], ttl - 1);
        assert_eq!(checksum(&[&out[14..34]]), 0, "checksum after ttl {ttl} from {src}");
    }
    want.forwarded += 254;
    let v6f = fwd_frame(true);
    let (verdict, out) = x.feed(dut, in_idx, &v6f).expect("run");
    assert_eq!(verdict, XDP_REDIRECT, "IPv6 forwarded");
    assert_eq!(out[0..6], chain.sink_link.mac);
    assert_eq!(out[6..12], out_mac);
    assert_eq!(out[14 + 7], v6f[14 + 7] - 1, "hop limit");
    assert_eq!(out[12..14 + 7], v6f[12..14 + 7]);
    assert_eq!(out[14 + 8..], v6f[14 + 8..]);
    want.forwarded += 1;
    assert_eq!(x.counters().expect("counters"), want);
    x.attach(dut, &[DUT_IN, DUT_OUT]).expect("attach");
    assert!(dut.ip(&["-j", "link", "show", "dev", DUT_IN]).expect("link").contains("\"xdp\""), "attached");
    x.detach().expect("detach");
    assert!(!dut.ip(&["-j", "link", "show", "dev", DUT_IN]).expect("link").contains("\"xdp\""), "detached");
}
