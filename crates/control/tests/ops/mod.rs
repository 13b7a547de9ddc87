//! Shared by the ops_* tests: a router on memory ports with its daemon
//! loop on a thread, driven through the API socket like `tern run`.
#![allow(dead_code)]

use crate::common::pkt::*;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tern_control::api::client::Client;
use tern_control::api::daemon::{Daemon, DaemonOptions};
use tern_control::config;
use tern_control::router::Router;
use tern_io::MemHandle;

pub const TERN_LAN: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
pub const TERN_WAN: [u8; 6] = [0x02, 0, 0, 0, 2, 1];
pub const HOST_A: [u8; 6] = [0x02, 0, 0, 0, 1, 0xaa];
pub const HOST_B: [u8; 6] = [0x02, 0, 0, 0, 2, 0xbb];

pub const CONFIG_TEXT: &str = r#"
[dataplane]
icmp_rate = 100000
icmp_burst = 1000

[[interface]]
name = "lan"
driver = "memory"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24"]

[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24"]

[[route]]
prefix = "198.18.0.0/15"
via = "10.0.2.2"
"#;

pub fn a4(s: &str) -> Ipv4Addr {
    s.parse().expect("ipv4")
}

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "tern-ops-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).expect("scratch dir");
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A router with its daemon loop on a thread.
pub struct Running {
    pub lan: MemHandle,
    pub wan: MemHandle,
    pub socket: PathBuf,
    pub metrics: Option<std::net::SocketAddr>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    dir: Scratch,
}

impl Running {
    pub fn start(config_text: &str, metrics: bool) -> Running {
        let dir = Scratch::new("api");
        let cfg_path = dir.0.join("tern.toml");
        std::fs::write(&cfg_path, config_text).expect("write config");
        let plan = config::load(&cfg_path).expect("config");
        let router = Router::start(plan).expect("router");
        let lan = router.mem_ports("lan").expect("lan")[0].clone();
        let wan = router.mem_ports("wan").expect("wan")[0].clone();
        let socket = dir.0.join("api.sock");
        let opts = DaemonOptions {
            config_path: Some(cfg_path),
            socket: Some(socket.clone()),
            metrics: Some(if metrics { "127.0.0.1:0".into() } else { String::new() }),
        };
        let daemon = Daemon::start(&router, opts).expect("daemon");
        let metrics = daemon.metrics_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let (mut router, mut daemon) = (router, daemon);
            daemon.run(&mut router, &stop2, &AtomicBool::new(false));
            drop(daemon);
            router.shutdown();
        });
        Running { lan, wan, socket, metrics, stop, thread: Some(thread), dir }
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.socket).expect("connect")
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.0.join("tern.toml")
    }

    /// Frames `h` sent, waiting until at least `n` came.
    pub fn recv(h: &MemHandle, n: usize) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        while got.len() < n {
            got.extend(h.take_sent());
            assert!(Instant::now() < deadline, "only {} of {n} frames", got.len());
            std::thread::sleep(Duration::from_millis(1));
        }
        got
    }

    /// Lets tern resolve 10.0.2.2 (host B) after traffic towards it.
    pub fn answer_arp_for_b(&self) {
        let req = Running::recv(&self.wan, 1);
        assert_eq!(parse_arp(&req[0]).map(|a| a.operation), Some(ArpOperation::REQUEST), "an ARP request first");
        assert!(self.wan.inject(&eth(
            TERN_WAN,
            HOST_B,
            0x0806,
            &arp(2, HOST_B, a4("10.0.2.2"), TERN_WAN, a4("10.0.2.1"))
        )));
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn udp_to(dst: &str) -> Vec<u8> {
    let ip = ipv4(a4("10.0.1.2"), a4(dst), 17, 64, &udp4(a4("10.0.1.2"), a4(dst), 1234, 5678, b"payload"));
    eth(TERN_LAN, HOST_A, 0x0800, &ip)
}
