//! Throwaway network namespaces and veth pairs for the AF_XDP tests.
//!
//! Every test builds its own namespaces (names carry the process id and a
//! counter, so parallel tests and leftover runs never collide) and removes
//! them on drop, also when the test fails. Work inside a namespace runs on a
//! thread that entered it ([`Netns::run`]), because setns(2) changes only
//! the calling thread.
#![allow(dead_code)]

use std::fs::File;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// True when the tests can create namespaces and load BPF (root). Tests
/// print why and return early otherwise.
pub fn privileged() -> bool {
    let root = is_root();
    if !root {
        eprintln!("skipped: AF_XDP netns tests need root");
    }
    root
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

pub fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

pub fn sh_ok(args: &[&str]) -> bool {
    Command::new(args[0]).args(&args[1..]).output().is_ok_and(|o| o.status.success())
}

/// A network namespace, deleted on drop.
pub struct Netns {
    pub name: String,
    file: File,
}

impl Netns {
    pub fn new(role: &str) -> Netns {
        let name = format!("txdp{}-{}{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed), role);
        sh(&["ip", "netns", "add", &name]);
        let file = File::open(format!("/var/run/netns/{name}")).expect("netns file");
        sh(&["ip", "-n", &name, "link", "set", "lo", "up"]);
        Netns { name, file }
    }

    /// Runs `f` on a new thread inside this namespace.
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

    /// Spawns `f` in this namespace on a scoped thread.
    pub fn spawn<'s, 'e: 's, T: Send + 's>(
        &'e self,
        s: &'s std::thread::Scope<'s, 'e>,
        f: impl FnOnce() -> T + Send + 's,
    ) -> std::thread::ScopedJoinHandle<'s, T> {
        s.spawn(move || {
            tern_xdp::enter_netns(&self.file).expect("setns");
            f()
        })
    }

    pub fn ip(&self, args: &[&str]) {
        let mut v = vec!["ip", "-n", &self.name];
        v.extend_from_slice(args);
        sh(&v);
    }

    pub fn exec(&self, args: &[&str]) -> bool {
        let mut v = vec!["ip", "netns", "exec", &self.name];
        v.extend_from_slice(args);
        sh_ok(&v)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

pub fn mac(last: u8) -> [u8; 6] {
    [0x02, 0x00, 0x00, 0x00, 0x00, last]
}

fn mac_str(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// A veth pair `a` (in `na`, MAC mac(ma)) <-> `b` (in `nb`, MAC mac(mb)),
/// both up, with `queues` queues each way and tx checksum offload off on
/// both (UDP from normal sockets crosses AF_XDP with bad checksums
/// otherwise).
pub fn veth(na: &Netns, a: &str, ma: u8, nb: &Netns, b: &str, mb: u8, queues: u32) {
    let q = queues.to_string();
    na.ip(&[
        "link",
        "add",
        a,
        "address",
        &mac_str(mac(ma)),
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
        "type",
        "veth",
        "peer",
        "name",
        b,
        "address",
        &mac_str(mac(mb)),
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
        "netns",
        &nb.name,
    ]);
    na.ip(&["link", "set", a, "up"]);
    nb.ip(&["link", "set", b, "up"]);
    na.exec(&["ethtool", "-K", a, "tx", "off"]);
    nb.exec(&["ethtool", "-K", b, "tx", "off"]);
}

/// gen (g0 10.77.1.2) <-> rtr (r0 10.77.1.1); gen routes 10.77.2.0/24 via
/// the router.
pub struct Rig2 {
    pub gen_ns: Netns,
    pub rtr: Netns,
}

pub const R0_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 1);
pub const G0_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 2);
pub const R1_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 1);
pub const S0_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 2);
pub const MAC_R0: u8 = 0x10;
pub const MAC_G0: u8 = 0x11;
pub const MAC_R1: u8 = 0x20;
pub const MAC_S0: u8 = 0x21;

impl Rig2 {
    pub fn new(queues: u32) -> Rig2 {
        let gen_ns = Netns::new("g");
        let rtr = Netns::new("r");
        veth(&rtr, "r0", MAC_R0, &gen_ns, "g0", MAC_G0, queues);
        rtr.ip(&["addr", "add", "10.77.1.1/24", "dev", "r0"]);
        gen_ns.ip(&["addr", "add", "10.77.1.2/24", "dev", "g0"]);
        gen_ns.ip(&["route", "add", "10.77.2.0/24", "via", "10.77.1.1"]);
        Rig2 { gen_ns, rtr }
    }
}

/// gen (g0) <-> (r0) rtr (r1) <-> (s0 10.77.2.2) sink.
pub struct Rig3 {
    pub gen_ns: Netns,
    pub rtr: Netns,
    pub sink: Netns,
}

impl Rig3 {
    pub fn new() -> Rig3 {
        let Rig2 { gen_ns, rtr } = Rig2::new(1);
        let sink = Netns::new("s");
        veth(&rtr, "r1", MAC_R1, &sink, "s0", MAC_S0, 1);
        rtr.ip(&["addr", "add", "10.77.2.1/24", "dev", "r1"]);
        sink.ip(&["addr", "add", "10.77.2.2/24", "dev", "s0"]);
        sink.ip(&["route", "add", "10.77.1.0/24", "via", "10.77.2.1"]);
        // The forwarder under test answers no ARP: give both ends static
        // neighbours for the router.
        sink.ip(&["neigh", "add", "10.77.2.1", "lladdr", &mac_str(mac(MAC_R1)), "dev", "s0"]);
        Rig3 { gen_ns, rtr, sink }
    }
}

/// Waits until `cond` holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::yield_now();
    }
}

/// The UDP payload of an Ethernet/IPv4/UDP frame, with the IPv4 source
/// and destination.
pub fn udp_payload(frame: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr, u16, &[u8])> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = frame.get(14..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    if *ip.get(9)? != 17 {
        return None;
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let udp = ip.get(ihl..)?;
    let dport = u16::from_be_bytes([*udp.get(2)?, *udp.get(3)?]);
    let ulen = usize::from(u16::from_be_bytes([*udp.get(4)?, *udp.get(5)?]));
    Some((src, dst, dport, udp.get(8..ulen)?))
}

/// An Ethernet/IPv4/UDP frame (UDP checksum 0: "not computed", RFC 768).
pub fn udp_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let mut sum: u32 = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}
