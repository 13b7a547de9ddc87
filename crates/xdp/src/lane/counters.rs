//! The lane's counters, named from `bpf/lane.h` itself (its
//! `LANE_COUNTERS` list), so that the program and this crate cannot
//! disagree on an index.

use std::sync::OnceLock;

/// What a counter counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterKind {
    /// A packet the lane dropped (under the userspace node's name).
    Drop,
    /// Counted; the packet went on (e.g. `gre-encap/encapsulated`).
    Info,
    /// Handed to tern's userspace engine (the XSK of its queue).
    Punt,
    /// Handed to Linux (XDP_PASS).
    Pass,
    /// Sent by the lane.
    Forward,
}

/// One counter: its index in the program's counter map and its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CounterDesc {
    pub index: u32,
    /// The node: a userspace node's name (`ip4-input`) or `xdp-lane`.
    pub node: &'static str,
    pub error: &'static str,
    pub kind: CounterKind,
}

static HEADER: &str = include_str!("../../bpf/lane.h");

fn parse() -> Vec<CounterDesc> {
    let mut out = Vec::new();
    let Some(start) = HEADER.find("#define LANE_COUNTERS(X)") else { return out };
    for line in HEADER[start..].lines().skip(1) {
        let l = line.trim().trim_end_matches('\\').trim();
        let Some(args) = l.strip_prefix("X(").and_then(|a| a.strip_suffix(')')) else { break };
        let parts: Vec<&str> = args.split(',').map(str::trim).collect();
        let [_, node, error, kind] = parts.as_slice() else { continue };
        let kind = match *kind {
            "drop" => CounterKind::Drop,
            "info" => CounterKind::Info,
            "punt" => CounterKind::Punt,
            "pass" => CounterKind::Pass,
            _ => CounterKind::Forward,
        };
        out.push(CounterDesc {
            index: out.len() as u32,
            node: node.trim_matches('"'),
            error: error.trim_matches('"'),
            kind,
        });
    }
    out
}

impl CounterKind {
    /// The kind as `tern stats` and the metrics label it.
    pub fn label(self) -> &'static str {
        match self {
            CounterKind::Drop => "drop",
            CounterKind::Info => "info",
            CounterKind::Punt => "punt",
            CounterKind::Pass => "pass",
            CounterKind::Forward => "forward",
        }
    }
}

impl CounterDesc {
    /// What an `xdp-lane` counter means (the others are the userspace
    /// nodes' counters and carry their help there).
    pub fn help(&self) -> &'static str {
        match self.error {
            "forwarded" => "forwarded by the XDP lane",
            "punt-neighbor" => "ARP/ND handed to tern's engine",
            "punt-local" => "for the router: handed to tern's engine",
            "punt-ipsec" => {
                "ESP or UDP 500/4500 for the router (Linux mode: ESP and ESP in UDP only): handed to tern's engine (IPsec)"
            }
            "punt-icmp-route" => "no route (ICMP error): handed to tern's engine",
            "punt-ttl" => "TTL / hop limit expiring: handed to tern's engine",
            "punt-too-big" => "larger than the egress MTU: handed to tern's engine",
            "punt-scope" => "link-local source leaving its link: handed to tern's engine",
            "punt-unresolved" => "next hop not resolved: handed to tern's engine",
            "punt-options" => "IPv4 options or IPv6 extension headers: handed to tern's engine",
            "punt-fragment" => "fragmented GRE for the router: handed to tern's engine",
            "punt-gre" => "GRE the lane does not decapsulate: handed to tern's engine",
            "punt-acl" => "rule set the lane could not compile: handed to tern's engine",
            "punt-fib" => "FIB entry beyond the lane's maps: handed to tern's engine",
            "punt-egress" => "egress port not on the lane: handed to tern's engine",
            "punt-other" => "anything else the lane leaves to tern's engine",
            "punt-capture" => "a device `tern capture` watches: every frame handed to tern's engine",
            "pass-local" => "for the router's addresses (Linux mode): passed to Linux",
            "pass-neighbor" => "ARP/ND passed to Linux (Linux mode)",
            "pass-multicast" => "IP multicast or broadcast: passed to Linux",
            "pass-non-ip" => "EtherType tern does not handle (LLDP, ...): passed to Linux (Linux mode)",
            "pass-not-lane" => "lane paused or device not on the lane: passed to Linux",
            "pass-no-xsk" => "a punt with no tern socket on its queue: passed to Linux",
            "trace-lost" => "trace records the ring had no room for",
            "punt-shed-neighbor" => "ARP/ND for the router over its class's rate ([dataplane.punt]): dropped",
            "punt-shed-bgp" => "BGP for the router over its class's rate ([dataplane.punt]): dropped",
            "punt-shed-ospf" => "OSPF for the router over its class's rate ([dataplane.punt]): dropped",
            "punt-shed-vrrp" => "VRRP for the router over its class's rate ([dataplane.punt]): dropped",
            "punt-shed-ike" => "IKE for the router over its class's rate ([dataplane.punt]): dropped",
            "punt-shed-bfd" => "BFD for the router over its class's rate ([dataplane.punt]): dropped",
            "punt-shed-local" => {
                "other traffic for the router (ping, UDP, SSH) over its class's rate ([dataplane.punt]): dropped"
            }
            "fwd-memo" => {
                "decided by the forwarding memo (an earlier packet of the flow's decision), not the whole path"
            }
            "acl-cached" => {
                "rule set verdicts taken from the verdict cache, not the classifier (input and output sets count one each)"
            }
            _ => "",
        }
    }
}

/// Every counter, in index order.
pub fn counters() -> &'static [CounterDesc] {
    static LIST: OnceLock<Vec<CounterDesc>> = OnceLock::new();
    LIST.get_or_init(parse)
}

/// The counter named `node`/`error`.
pub fn counter(node: &str, error: &str) -> Option<&'static CounterDesc> {
    counters().iter().find(|c| c.node == node && c.error == error)
}

/// A counter's value summed over CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterValue {
    pub desc: &'static CounterDesc,
    pub value: u64,
}

/// Packets and bytes one port received and sent through the lane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LanePortStats {
    /// Received and kept by the lane (forwarded or dropped there); what it
    /// hands to userspace or Linux is counted there.
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Forwarded by the lane out of this port.
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_line_is_parsed_in_order() {
        let c = counters();
        let lines = HEADER.lines().filter(|l| l.trim_start().starts_with("X(")).count();
        assert_eq!(c.len(), lines);
        assert!(c.len() > 40);
        assert_eq!(c[0].node, "xdp-lane");
        assert_eq!(c[0].error, "forwarded");
        assert_eq!(c[0].kind, CounterKind::Forward);
        let bad = counter("ip4-input", "bad-checksum").expect("named");
        assert_eq!(bad.kind, CounterKind::Drop);
        assert_eq!(counters()[bad.index as usize], *bad);
        let enc = counter("gre-encap", "encapsulated").expect("named");
        assert_eq!(enc.kind, CounterKind::Info);
        for d in c.iter().filter(|d| d.node == "xdp-lane") {
            assert!(!d.help().is_empty(), "{} has a meaning", d.error);
        }
        let mut names: Vec<(&str, &str)> = c.iter().map(|d| (d.node, d.error)).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), c.len(), "no name twice");
    }
}
