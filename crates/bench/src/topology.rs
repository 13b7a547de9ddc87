//! The test chain: `gen ns -- veth -- dut ns -- veth -- sink ns`, or
//! `gen ns -- veth -- sink ns` for the generator-to-sink ceiling.
//!
//! Addresses (RFC 2544 appendix C uses 198.18.0.0/15 for test traffic;
//! RFC 5180 uses 2001:2::/48 for IPv6):
//!
//! | where | device | IPv4 | IPv6 |
//! |---|---|---|---|
//! | gen | `tb-gen` | 10.10.1.2/24 | 2001:db8:10:1::2/64 |
//! | dut | `tb-in` | 10.10.1.1/24 | 2001:db8:10:1::1/64 |
//! | dut | `tb-out` | 10.10.2.1/24 | 2001:db8:10:2::1/64 |
//! | sink | `tb-sink` | 10.10.2.2/24 | 2001:db8:10:2::2/64 |
//!
//! Test traffic goes to 198.18.0.0/15 and 2001:2::/48, routed by the DUT
//! to the sink (10.10.2.2), which is also the GRE tunnel's remote end.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::Result;
use crate::netns::{LinkInfo, Netns, veth_pair};

/// Generator device name.
pub const GEN_DEV: &str = "tb-gen";
/// DUT ingress device name.
pub const DUT_IN: &str = "tb-in";
/// DUT egress device name.
pub const DUT_OUT: &str = "tb-out";
/// Sink device name.
pub const SINK_DEV: &str = "tb-sink";

/// Generator address (the legitimate traffic's source).
pub const GEN_V4: Ipv4Addr = Ipv4Addr::new(10, 10, 1, 2);
/// DUT ingress address.
pub const DUT_IN_V4: Ipv4Addr = Ipv4Addr::new(10, 10, 1, 1);
/// DUT egress address.
pub const DUT_OUT_V4: Ipv4Addr = Ipv4Addr::new(10, 10, 2, 1);
/// Sink address: next hop of the test routes and GRE remote.
pub const SINK_V4: Ipv4Addr = Ipv4Addr::new(10, 10, 2, 2);
/// Generator IPv6 address.
pub const GEN_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x10, 1, 0, 0, 0, 2);
/// DUT ingress IPv6 address.
pub const DUT_IN_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x10, 1, 0, 0, 0, 1);
/// DUT egress IPv6 address.
pub const DUT_OUT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x10, 2, 0, 0, 0, 1);
/// Sink IPv6 address.
pub const SINK_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x10, 2, 0, 0, 0, 2);
/// IPv4 test destinations (RFC 2544 appendix C).
pub const TEST_NET_V4: &str = "198.18.0.0/15";
/// IPv6 test destinations (RFC 5180).
pub const TEST_NET_V6: &str = "2001:2::/48";

/// One chain of namespaces, torn down on drop (namespaces delete their
/// veths).
#[derive(Debug)]
pub struct Chain {
    /// Generator namespace.
    pub gen_ns: Netns,
    /// DUT namespace; `None` for the direct (ceiling) chain.
    pub dut: Option<Netns>,
    /// Sink namespace.
    pub sink: Netns,
    /// The generator's device.
    pub gen_link: LinkInfo,
    /// The sink's device.
    pub sink_link: LinkInfo,
    /// Where the generator's frames go first: the DUT's ingress (or the sink).
    pub first_hop: LinkInfo,
}

impl Chain {
    /// Builds a chain with namespaces named `{prefix}-gen`, `-dut`, `-sink`.
    /// The DUT namespace gets its devices and addresses; forwarding is the
    /// DUT's business.
    pub fn build(prefix: &str, with_dut: bool) -> Result<Chain> {
        let gen_ns = Netns::create(&format!("{prefix}-gen"))?;
        let sink = Netns::create(&format!("{prefix}-sink"))?;
        let dut = if with_dut {
            let dut = Netns::create(&format!("{prefix}-dut"))?;
            veth_pair(&gen_ns, GEN_DEV, &dut, DUT_IN)?;
            veth_pair(&dut, DUT_OUT, &sink, SINK_DEV)?;
            Some(dut)
        } else {
            veth_pair(&gen_ns, GEN_DEV, &sink, SINK_DEV)?;
            None
        };
        addr(&gen_ns, GEN_DEV, &GEN_V4.to_string(), &GEN_V6.to_string())?;
        addr(&sink, SINK_DEV, &SINK_V4.to_string(), &SINK_V6.to_string())?;
        // The sink answers ARP/ND for its address (its XDP program passes
        // them) and needs a way back for them.
        sink.ip(&["route", "add", "10.10.1.0/24", "via", &DUT_OUT_V4.to_string()]).ok();
        let gen_link = gen_ns.link_info(GEN_DEV)?;
        let sink_link = sink.link_info(SINK_DEV)?;
        let first_hop = match &dut {
            Some(d) => d.link_info(DUT_IN)?,
            None => sink_link,
        };
        Ok(Chain { gen_ns, dut, sink, gen_link, sink_link, first_hop })
    }

    /// Gives the DUT's devices their addresses (for the kernel DUTs; tern
    /// takes the devices over and configures its own addresses).
    pub fn address_dut(&self) -> Result<()> {
        if let Some(d) = &self.dut {
            addr(d, DUT_IN, &DUT_IN_V4.to_string(), &DUT_IN_V6.to_string())?;
            addr(d, DUT_OUT, &DUT_OUT_V4.to_string(), &DUT_OUT_V6.to_string())?;
        }
        Ok(())
    }
}

fn addr(ns: &Netns, dev: &str, v4: &str, v6: &str) -> Result<()> {
    ns.ip(&["addr", "add", &format!("{v4}/24"), "dev", dev])?;
    // nodad: the address is usable at once instead of after DAD.
    ns.ip(&["addr", "add", &format!("{v6}/64"), "dev", dev, "nodad"])?;
    Ok(())
}
