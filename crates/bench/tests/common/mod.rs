//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::net::{Ipv4Addr, Ipv6Addr};

use tern_bench::traffic::{FlowSpec, FrameSize, StreamSpec, TrafficProfile};

/// Whether the tests that load XDP programs and create namespaces can run
/// (root; prints why not otherwise).
pub fn privileged() -> bool {
    tern_testkit::netns::privileged("this test (CAP_NET_ADMIN and CAP_BPF)")
}

pub fn stream(label: &str, counted: bool, flows: FlowSpec) -> StreamSpec {
    StreamSpec {
        label: label.into(),
        counted,
        src4: Ipv4Addr::new(10, 10, 1, 2),
        dst4: Ipv4Addr::new(198, 18, 0, 1),
        src6: "2001:db8:10:1::2".parse().unwrap_or(Ipv6Addr::LOCALHOST),
        dst6: "2001:2::1".parse().unwrap_or(Ipv6Addr::LOCALHOST),
        flows,
    }
}

pub fn profile(streams: Vec<StreamSpec>, size: FrameSize, vlan: Option<u16>) -> TrafficProfile {
    TrafficProfile { streams, size, vlan, src_mac: [0x02, 0, 0, 0, 0, 0x01], dst_mac: [0x02, 0, 0, 0, 0, 0x02] }
}

/// A few flows: 3 sources (stride 256), 5 destinations, 2 x 3 ports.
pub const SOME_FLOWS: FlowSpec = FlowSpec {
    src_count: 3,
    src_stride: 256,
    dst_count: 5,
    dst_stride: 1,
    sport_base: 5000,
    sport_count: 2,
    dport_base: 7000,
    dport_count: 3,
    random: false,
};

/// Profiles covering IPv4/IPv6, VLAN, fixed sizes, IMIX and two streams.
pub fn profiles() -> Vec<(&'static str, TrafficProfile)> {
    use tern_bench::traffic::Imix;
    vec![
        ("v4-64", profile(vec![stream("a", true, FlowSpec::SINGLE)], FrameSize::Fixed { size: 64, ipv6: false }, None)),
        (
            "v4-1518-flows",
            profile(vec![stream("a", true, SOME_FLOWS)], FrameSize::Fixed { size: 1518, ipv6: false }, None),
        ),
        ("v6-78", profile(vec![stream("a", true, SOME_FLOWS)], FrameSize::Fixed { size: 78, ipv6: true }, None)),
        (
            "v4-64-vlan",
            profile(vec![stream("a", true, FlowSpec::SINGLE)], FrameSize::Fixed { size: 64, ipv6: false }, Some(101)),
        ),
        (
            "v6-1522-vlan",
            profile(vec![stream("a", true, FlowSpec::SINGLE)], FrameSize::Fixed { size: 1522, ipv6: true }, Some(4094)),
        ),
        ("imix1-vlan", profile(vec![stream("a", true, SOME_FLOWS)], FrameSize::Imix(Imix::Imix1), Some(7))),
        ("imix2", profile(vec![stream("a", true, SOME_FLOWS)], FrameSize::Imix(Imix::Imix2), None)),
        // 78-byte IPv6 frames have no room for a tag (checked in traffic.rs).
        ("imix3", profile(vec![stream("a", true, SOME_FLOWS)], FrameSize::Imix(Imix::Imix3), None)),
        (
            "two-streams",
            profile(
                vec![stream("a", true, FlowSpec::SINGLE), stream("b", false, SOME_FLOWS)],
                FrameSize::Fixed { size: 128, ipv6: false },
                None,
            ),
        ),
    ]
}
