//! Shared fixtures of the integration tests: a throwaway network namespace
//! holding a veth pair, and frame builders.
#![allow(dead_code)] // each test binary uses a different subset

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use tern_io::netdev;
use tern_packet::{PacketPool, PktIdx, PoolConfig, Port};

/// Ethertype of the test frames (IEEE 802 local experimental), so stray
/// kernel traffic is never mistaken for them.
pub const TEST_ETHERTYPE: u16 = 0x88b5;

/// A network namespace `tio-<pid>-<n>` (the testkit's) with a veth pair
/// `va` <-> `vb`, both up, IPv6 off (no stray neighbour discovery).
/// Deleted on drop.
pub struct Netns(tern_testkit::netns::Netns);

impl std::ops::Deref for Netns {
    type Target = tern_testkit::netns::Netns;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Netns {
    /// `None` (with the reason printed) when this machine cannot run
    /// namespace tests: not root, or no `ip` command.
    pub fn new() -> Option<Netns> {
        if !tern_testkit::netns::privileged("namespace test") {
            return None;
        }
        if !tern_testkit::netns::have("ip", "-V") {
            eprintln!("SKIP: the `ip` command (iproute2) is not installed");
            return None;
        }
        let ns = Netns(tern_testkit::netns::Netns::unique("tio-"));
        tern_testkit::netns::Veth::new(&ns, "va", &ns, "vb").down().create();
        ns.run(|| {
            for k in ["ipv6/conf/all/disable_ipv6", "ipv6/conf/default/disable_ipv6"] {
                let _ = netdev::sysctl_write(k, "1");
            }
            for i in ["va", "vb"] {
                let _ = netdev::sysctl_write(&format!("ipv6/conf/{i}/disable_ipv6"), "1");
            }
        });
        ns.ip(&["link", "set", "va", "up"]);
        ns.ip(&["link", "set", "vb", "up"]);
        Some(ns)
    }

    /// Runs `f` on a thread inside the namespace: sockets it creates (ports
    /// it opens) stay in the namespace wherever they are used afterwards.
    pub fn in_ns<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        self.run(f)
    }
}

pub fn pool() -> PacketPool {
    PacketPool::new(PoolConfig { frames: 4096, ..PoolConfig::default() }).expect("pool")
}

/// A pool of 8 KiB buffers, for sending jumbo frames.
pub fn big_pool() -> PacketPool {
    PacketPool::new(PoolConfig { frames: 256, frame_size: 8192, ..PoolConfig::default() }).expect("pool")
}

/// A test frame of `len` bytes (at least 20): destination `dst`, source
/// 02:..:01, TEST_ETHERTYPE, then `id` (4 bytes) and a pattern.
pub fn test_frame(dst: [u8; 6], id: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    let mut x = id.wrapping_mul(2_654_435_761);
    while f.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        f.push((x >> 16) as u8);
    }
    f
}

pub fn is_test_frame(f: &[u8]) -> bool {
    f.get(12..14) == Some(&TEST_ETHERTYPE.to_be_bytes()[..])
}

pub fn frame_id(f: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(f.get(14..18)?.try_into().ok()?))
}

/// Copies frames into pool buffers and transmits them in bursts of 256;
/// returns how many were sent.
pub fn send_all(port: &mut dyn Port, pool: &mut PacketPool, frames: &[Vec<u8>]) -> usize {
    let mut sent = 0;
    for chunk in frames.chunks(256) {
        let pkts: Vec<PktIdx> = chunk.iter().map(|f| pool.alloc_from(f).expect("buffer")).collect();
        let o = port.tx_burst(pool, &pkts);
        assert_eq!(o.sent + o.dropped, pkts.len(), "every packet is sent or dropped");
        sent += o.sent;
    }
    sent
}

/// Receives until `want` frames accepted by `keep` arrived or `timeout`
/// passed, sleeping in poll(2) on the port's descriptor between bursts.
/// Returns the kept frames' bytes; buffers are freed.
pub fn recv_until(
    port: &mut dyn Port,
    pool: &mut PacketPool,
    want: usize,
    timeout: Duration,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut buf = Vec::new();
    while got.len() < want {
        buf.clear();
        port.rx_burst(pool, &mut buf, 256);
        for &p in &buf {
            if keep(pool.data(p)) {
                got.push(pool.data(p).to_vec());
            }
        }
        pool.free_all(&buf);
        if got.len() >= want || !buf.is_empty() {
            continue;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let fd: Option<BorrowedFd<'_>> = port.wait_fd();
        match fd {
            Some(fd) => {
                tern_io::poll_readable(&[fd], left.as_millis().min(50) as i32).expect("poll");
            }
            None => std::thread::yield_now(),
        }
    }
    got
}

/// Drains whatever is ready now (no waiting); returns the kept frames.
pub fn drain(port: &mut dyn Port, pool: &mut PacketPool, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if port.rx_burst(pool, &mut buf, 256) == 0 {
            return got;
        }
        for &p in &buf {
            if keep(pool.data(p)) {
                got.push(pool.data(p).to_vec());
            }
        }
        pool.free_all(&buf);
    }
}

/// Waits (polling with a deadline) until `cond` holds; returns whether it did.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
