//! Shared by the XDP lane tests: throwaway namespaces (prefix `tlane`,
//! with the process id and a counter, removed on drop, also when a test
//! fails) and the testkit's packet builders (frames exactly as given: no
//! padding, DF clear, UDP checksum 0).
#![allow(dead_code)]

pub mod diff;

#[path = "../common/mod.rs"]
mod common;
pub use common::sh;
pub use tern_testkit::netns::Netns;
#[allow(unused_imports)] // each test binary uses a different subset
pub use tern_testkit::packet::{csum, eth, eth_vlan, gre, ipv4, ipv6, tcp, udp, v4, v6};

/// True when the tests can create namespaces and load BPF (root). Tests
/// print why and return early otherwise.
pub fn privileged() -> bool {
    tern_testkit::netns::privileged("XDP lane test (BPF maps, namespaces)")
}

/// A namespace with `n` veth pairs `l0`/`p0` ... (all inside it, up).
pub fn with_veths(n: usize) -> Netns {
    let ns = Netns::unique("tlane");
    for i in 0..n {
        let (l, p) = (format!("l{i}"), format!("p{i}"));
        tern_testkit::netns::veth(&ns, &l, &ns, &p);
    }
    ns
}

/// Keeps the calling thread on CPU 0 from now on (`taskset` on its thread
/// id), so that the lane's per-CPU state (the ACL verdict cache and its
/// memo) sees every packet the thread runs through it, as one CPU's
/// traffic does: without it the tests' packets spread over the CPUs by
/// chance and a check of that state may pass without exercising it.
pub fn pin_to_cpu0() {
    let me = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    let tid = me.file_name().and_then(|t| t.to_str()).expect("thread id").to_string();
    sh(&["taskset", "-p", "-c", "0", &tid]);
}
