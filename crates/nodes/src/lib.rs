//! tern's forwarding nodes and the graph they form.
//!
//! ```text
//!  control-inject ─────────────────────────────────────────────┐
//!  rx ─> ethernet-input ─┬─> arp-input ──────────────────────────┤
//!                        ├─> ip4-input ─> ip4-lookup ─┬─> ip4-rewrite ─┬─> interface-output ─> tx
//!                        │                            ├─> ip4-local    ├─> ip4-glean (ARP)
//!                        │                            └─> ip4-icmp-error <┘
//!                        └─> ip6-input ─> ip6-lookup ─┬─> ip6-rewrite ─┬─> interface-output
//!                                  └─> ip6-local (ND) ├─> ...          └─> ip6-glean (NS)
//!                                                     └─> ip6-icmp-error
//!  Linux mode, TAP exception path: arp-input, ip4/ip6-input (multicast,
//!  through ip4/ip6-punt-acl with an input rule set), ip4/ip6-local
//!  ─> linux-punt ─> the interface's TAP;
//!  TAP rx ─> tap-input ─> interface-output
//! ```
//!  Fragments for the router: ip4/ip6-local ─> ip4/ip6-reassembly ─> ip4/ip6-local
//!  IPsec: ip4/ip6-rewrite ─> gre-encap ─> esp-encrypt ─> ip4/ip6-lookup;
//!         ip4/ip6-local (ESP, UDP 4500) ─> esp-decrypt ─> ip4/ip6-input;
//!         Linux mode: esp-from-kernel (Shared::esp_from_kernel, ESP in UDP
//!         the kernel reassembled) ─> esp-decrypt
//!  IKE (standalone): ip4/ip6-local, esp-decrypt ─> Shared::ike_rx;
//!         ip-inject (Shared::ip_inject) ─> ip4/ip6-lookup
//! Every node documents itself (synopsis, next nodes, counters) in its
//! module. Nodes read shared state through [`state::Shared`]: the interface
//! table and parameters (snapshots refreshed once per batch) and the FIB
//! (lock-free reader); they report learned neighbours through a queue.
#![forbid(unsafe_code)]
// No index into packet bytes (or anything else) that can panic: read
// through tern-wire views after one length check, or get(). The files
// not converted yet allow it themselves and say how many sites are left;
// tests may index.
#![deny(clippy::indexing_slicing)]

pub mod acl;
pub mod arp;
pub mod eth;
pub mod gre;
pub mod icmp;
pub mod ike;
pub mod ip4;
pub mod ip6;
pub mod ipsec;
pub mod linux;
pub mod neighbor;
pub mod output;
pub mod reass;
mod shortcut;
pub mod state;
pub mod util;

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod direct_tests;
#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod ike_tests;
#[cfg(test)]
mod wire_tests;

use crossbeam_queue::ArrayQueue;
use state::{Inject, Shared};
use std::sync::Arc;
use tern_engine::{Graph, GraphBuilder, GraphError, NodeId};

/// A worker's graph and the node its received packets enter.
pub struct BuiltGraph {
    pub graph: Graph,
    pub input: NodeId,
}

/// Builds the forwarding graph of one worker.
pub fn build_graph(shared: &Shared, inject: Arc<ArrayQueue<Inject>>) -> Result<BuiltGraph, GraphError> {
    let ifs = || shared.ifaces.snapshot();
    let mut b = GraphBuilder::new();
    b.add(output::ControlInject::new(inject));
    b.add(ike::IpInject::new(Arc::clone(&shared.ip_inject)));
    b.add(ipsec::EspFromKernel::new(Arc::clone(&shared.esp_from_kernel)));
    b.add(linux::TapInput::new(ifs()));
    b.add(eth::EthernetInput::new(ifs(), shared.params.snapshot()));
    b.add(arp::ArpInput::new(shared));
    b.add(ip4::Ip4Input::new(shared));
    b.add(ip6::Ip6Input::new(shared));
    b.add(acl::AclNode::new(ifs(), shared.acls.snapshot(), false, false));
    b.add(acl::AclNode::new(ifs(), shared.acls.snapshot(), true, false));
    b.add(ip4::Ip4Local::new(shared));
    b.add(ip6::Ip6Local::new(shared));
    b.add(reass::Reassembly::new(shared, false));
    b.add(reass::Reassembly::new(shared, true));
    b.add(gre::GreInput::new(ifs()));
    b.add(ip4::Ip4Lookup::new(shared.fib.clone(), shared.params.snapshot()));
    b.add(ip6::Ip6Lookup::new(shared.fib.clone(), shared.params.snapshot()));
    b.add(ip4::Ip4Rewrite::new(shared.fib.clone(), ifs(), shared.acls.snapshot(), shared.params.snapshot()));
    b.add(ip6::Ip6Rewrite::new(shared.fib.clone(), ifs(), shared.acls.snapshot(), shared.params.snapshot()));
    b.add(gre::GreEncap::new(ifs(), shared.fib.clone(), shared.params.snapshot()));
    b.add(ipsec::EspEncrypt::new(
        ifs(),
        shared.fib.clone(),
        shared.params.snapshot(),
        &shared.sas,
        shared.ipsec_clients.snapshot(),
    ));
    b.add(ipsec::EspDecrypt::new(ifs(), &shared.sas, shared.ipsec_clients.snapshot()).with_ike(shared));
    b.add(acl::AclNode::new(ifs(), shared.acls.snapshot(), false, true));
    b.add(acl::AclNode::new(ifs(), shared.acls.snapshot(), true, true));
    b.add(icmp::Ip4IcmpError::new(ifs(), shared.params.snapshot()));
    b.add(icmp::Ip6IcmpError::new(ifs(), shared.params.snapshot()));
    b.add(neighbor::Glean::new(shared, false));
    b.add(neighbor::Glean::new(shared, true));
    b.add(linux::PuntAcl::new(shared, false));
    b.add(linux::PuntAcl::new(shared, true));
    b.add(linux::LinuxPunt::new(shared));
    b.add(output::InterfaceOutput::new(ifs()));
    let graph = b.build()?;
    let input =
        graph.node_id("ethernet-input").ok_or(GraphError::UnknownNext { node: "rx", next: "ethernet-input" })?;
    Ok(BuiltGraph { graph, input })
}
