//! Named scenarios: the traffic and DUT configuration of each test of
//! SCENARIOS.md (the 100GE comparison and the 6WIND validation).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use clap::ValueEnum;
use serde::Serialize;

use crate::dut::{DutNeeds, Firewall};
use crate::topology::{GEN_V4, GEN_V6};
use crate::traffic::{FlowSpec, FrameSize, Imix, StreamSpec};

/// Where the full routing table is read from by default.
pub const DEFAULT_ROUTE_FILE: &str = "/work/shared/data/full-table-2025.txt.gz";

/// The scenario presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioName {
    /// One flow, 50 firewall drop rules (source 1.1.N.1), default accept.
    #[value(name = "single-flow-50fw")]
    SingleFlow50fw,
    /// Random destinations in one /24, many ports, 50 rules, every packet
    /// GRE-encapsulated by the DUT to the sink.
    #[value(name = "gre-multi-flow")]
    GreMultiFlow,
    /// 254 destinations, random ports, 50 rules, the full Internet table.
    #[value(name = "900k-routes-50fw")]
    Routes900k50fw,
    /// Half the traffic from blocked sources; 50 rules, default deny; loss
    /// counted on the legitimate half only.
    #[value(name = "drop-test")]
    DropTest,
    /// RFC 2544 frame sizes 64..1518, plain L3 forwarding, 254 flows.
    #[value(name = "frame-sizes")]
    FrameSizes,
    /// IMIX1, IMIX2, IMIX3, plain L3 forwarding, 254 flows.
    #[value(name = "imix")]
    Imix,
}

/// A scenario expanded: streams, sizes and what the DUT must do.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    /// Preset it came from.
    pub name: ScenarioName,
    /// One line for reports.
    pub description: String,
    /// Streams (MACs are filled in per chain).
    pub streams: Vec<StreamSpec>,
    /// Frame sizes, each measured in turn.
    pub sizes: Vec<FrameSize>,
    /// DUT configuration.
    pub needs: DutNeeds,
}

const DST4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);

fn stream(label: &str, counted: bool, flows: FlowSpec) -> StreamSpec {
    StreamSpec { label: label.into(), counted, src4: GEN_V4, dst4: DST4, src6: GEN_V6, dst6: DST6, flows }
}

/// Random ports over 1024..=65023 (the 100GE test's "random ports").
const RANDOM_PORTS: FlowSpec = FlowSpec {
    src_count: 1,
    src_stride: 1,
    dst_count: 1,
    dst_stride: 1,
    sport_base: 1024,
    sport_count: 64000,
    dport_base: 1024,
    dport_count: 64000,
    random: true,
};

impl ScenarioName {
    /// Expands the preset.
    pub fn expand(self, route_file: Option<PathBuf>) -> Scenario {
        let v4_64 = vec![FrameSize::Fixed { size: 64, ipv6: false }];
        let plain = DutNeeds { firewall: Firewall::None, route_file: None, gre: false, vlan: None };
        let fw50 = DutNeeds { firewall: Firewall::Drop50, ..plain.clone() };
        let dsts254 = FlowSpec { dst_count: 254, ..FlowSpec::SINGLE };
        match self {
            ScenarioName::SingleFlow50fw => Scenario {
                name: self,
                description: "single flow (one source, destination and port pair), \
                              50 firewall rules `drop src 1.1.N.1`, default accept"
                    .into(),
                streams: vec![stream("legit", true, FlowSpec::SINGLE)],
                sizes: v4_64,
                needs: fw50,
            },
            ScenarioName::GreMultiFlow => Scenario {
                name: self,
                description: "random destinations in 198.18.0.0/24 and random ports, 50 firewall \
                              rules, every packet GRE-encapsulated to 10.10.2.2"
                    .into(),
                streams: vec![stream("legit", true, FlowSpec { dst_count: 254, ..RANDOM_PORTS })],
                sizes: v4_64,
                needs: DutNeeds { gre: true, ..fw50 },
            },
            ScenarioName::Routes900k50fw => Scenario {
                name: self,
                description: "254 destinations, random ports, 50 firewall rules, the full \
                              Internet table loaded (901,899 IPv4 + 160,147 IPv6 prefixes)"
                    .into(),
                streams: vec![stream("legit", true, FlowSpec { dst_count: 254, ..RANDOM_PORTS })],
                sizes: v4_64,
                needs: DutNeeds { route_file: Some(route_file.unwrap_or_else(|| DEFAULT_ROUTE_FILE.into())), ..fw50 },
            },
            ScenarioName::DropTest => Scenario {
                name: self,
                description: "one destination, random ports; half the frames come from the 50 \
                              blocked sources 1.1.N.1 and must be dropped (50 rules, default deny); \
                              loss counted on the legitimate half only"
                    .into(),
                streams: vec![
                    stream("legit", true, RANDOM_PORTS),
                    StreamSpec {
                        src4: Ipv4Addr::new(1, 1, 1, 1),
                        ..stream("blocked", false, FlowSpec { src_count: 50, src_stride: 256, ..RANDOM_PORTS })
                    },
                ],
                sizes: v4_64,
                needs: DutNeeds { firewall: Firewall::Drop50DefaultDeny, ..plain },
            },
            ScenarioName::FrameSizes => Scenario {
                name: self,
                description: "RFC 2544 frame sizes, IPv4 UDP, 254 destinations, L3 forwarding \
                              without rules"
                    .into(),
                streams: vec![stream("legit", true, dsts254)],
                sizes: [64u16, 128, 256, 512, 1024, 1280, 1518]
                    .into_iter()
                    .map(|size| FrameSize::Fixed { size, ipv6: false })
                    .collect(),
                needs: plain,
            },
            ScenarioName::Imix => Scenario {
                name: self,
                description: "IMIX1 (IPv4), IMIX2 (half IMIX1, half IMIX3), IMIX3 (IPv6), \
                              254 destinations, L3 forwarding without rules"
                    .into(),
                streams: vec![stream("legit", true, dsts254)],
                sizes: vec![FrameSize::Imix(Imix::Imix1), FrameSize::Imix(Imix::Imix2), FrameSize::Imix(Imix::Imix3)],
                needs: plain,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::TrafficProfile;

    #[test]
    fn every_preset_builds_its_slots() {
        for name in ScenarioName::value_variants() {
            let s = name.expand(None);
            for size in &s.sizes {
                let p = TrafficProfile {
                    streams: s.streams.clone(),
                    size: *size,
                    vlan: None,
                    src_mac: [2, 0, 0, 0, 0, 1],
                    dst_mac: [2, 0, 0, 0, 0, 2],
                };
                let slots = p.slots().expect("slots");
                assert!(!slots.is_empty());
            }
        }
    }

    #[test]
    fn drop_test_blocks_exactly_half() {
        let s = ScenarioName::DropTest.expand(None);
        assert_eq!(s.streams.len(), 2);
        assert_eq!(s.streams.iter().filter(|s| s.counted).count(), 1);
        let blocked = &s.streams[1];
        // 1.1.1.1 + 49 * 256 = 1.1.50.1: exactly the 50 rule sources.
        let last = u32::from(blocked.src4) + 49 * blocked.flows.src_stride;
        assert_eq!(Ipv4Addr::from(last), Ipv4Addr::new(1, 1, 50, 1));
    }
}
