//! Shared by the XDP lane tests: throwaway namespaces (prefix `tlane`,
//! with the process id and a counter, removed on drop, also when a test
//! fails) and packet builders.
#![allow(dead_code)]

pub mod diff;

use std::fs::File;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

#[path = "../common/mod.rs"]
mod common;
pub use common::sh;

/// True when the tests can create namespaces and load BPF (root). Tests
/// print why and return early otherwise.
pub fn privileged() -> bool {
    let root = common::is_root();
    if !root {
        eprintln!("skipped: XDP lane tests need root (BPF maps, namespaces)");
    }
    root
}

/// A network namespace with `n` veth pairs `l0`/`p0` ... (all inside it,
/// up), deleted on drop.
pub struct Netns {
    pub name: String,
    file: File,
}

impl Netns {
    pub fn with_veths(n: usize) -> Netns {
        let name = format!("tlane{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        sh(&["ip", "netns", "add", &name]);
        let file = File::open(format!("/var/run/netns/{name}")).expect("netns file");
        let ns = Netns { name, file };
        ns.ip(&["link", "set", "lo", "up"]);
        for i in 0..n {
            let (l, p) = (format!("l{i}"), format!("p{i}"));
            ns.ip(&["link", "add", &l, "type", "veth", "peer", "name", &p]);
            ns.ip(&["link", "set", &l, "up"]);
            ns.ip(&["link", "set", &p, "up"]);
        }
        ns
    }

    pub fn ip(&self, args: &[&str]) {
        let mut v = vec!["ip", "-n", &self.name];
        v.extend_from_slice(args);
        sh(&v);
    }

    /// Runs `f` on a thread inside this namespace.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                tern_xdp::enter_netns(&self.file).expect("setns");
                f()
            })
            .join()
            .expect("thread in netns panicked")
        })
    }
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

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

// ------------------------------------------------------------- packets

/// RFC 1071 checksum (complemented, ready to store).
pub fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

pub fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

pub fn eth_vlan(dst: [u8; 6], src: [u8; 6], vid: u16, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(18 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x8100u16.to_be_bytes());
    f.extend_from_slice(&vid.to_be_bytes());
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv4 header (no options, DF clear) with a valid checksum + payload.
pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
    let tot = (20 + payload.len()) as u16;
    let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0, 0, ttl, proto, 0, 0];
    h[2..4].copy_from_slice(&tot.to_be_bytes());
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

/// UDP header (checksum 0: not checked by a router) + data.
pub fn udp(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + data.len());
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    u
}

/// A 20-byte TCP header with `flags`.
pub fn tcp(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[12] = 0x50;
    t[13] = flags;
    t
}

pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.push(next);
    h.push(hop);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(payload);
    h
}

/// A GRE header (RFC 2784/2890) with an optional key, then the payload.
pub fn gre(key: Option<u32>, proto: u16, payload: &[u8]) -> Vec<u8> {
    let mut g = Vec::new();
    g.extend_from_slice(&(if key.is_some() { 0x2000u16 } else { 0 }).to_be_bytes());
    g.extend_from_slice(&proto.to_be_bytes());
    if let Some(k) = key {
        g.extend_from_slice(&k.to_be_bytes());
    }
    g.extend_from_slice(payload);
    g
}

pub fn v4(s: &str) -> Ipv4Addr {
    s.parse().expect("ipv4")
}

pub fn v6(s: &str) -> Ipv6Addr {
    s.parse().expect("ipv6")
}
