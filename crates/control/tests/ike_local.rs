//! IKE's datagrams through the engine in standalone mode, end to end: a
//! tern in its own network namespace (AF_PACKET, or the XDP lane, on a
//! veth) answers its own addresses; a Linux host in another namespace
//! sends IKE to UDP 500 and 4500 (with the non-ESP marker) of tern's
//! address, IPv4 and IPv6, and `EngineUdp::recv` sees each message with
//! its addresses; what `EngineUdp::send` answers reaches the host's
//! socket, through ARP / neighbour discovery of the host by tern.
//!
//! Needs root; skipped (with a message) otherwise.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};
use tern_control::config;
use tern_control::ike_local::EngineUdp;
use tern_control::router::Router;
use tern_testkit::netns::{Netns, Veth, privileged};

const T4: &str = "10.77.1.1";
const H4: &str = "10.77.1.2";
const T6: &str = "2001:db8:77::1";
const H6: &str = "2001:db8:77::2";

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

fn config(driver: &str) -> String {
    format!(
        r#"
[[interface]]
name = "ik0"
device = "ik0"
driver = "{driver}"
addresses = ["{T4}/24", "{T6}/64"]
"#
    )
}

/// Every non-zero counter, for failure messages.
fn diagnosis(router: &Router) -> String {
    let c: Vec<String> = tern_control::stats::error_stats(&router.workers(), None)
        .into_iter()
        .filter(|e| e.count > 0)
        .map(|e| format!("{}/{} {}", e.node, e.name, e.count))
        .collect();
    c.join(", ")
}

fn counter(router: &Router, node: &str, name: &str) -> u64 {
    tern_control::stats::error_stats(&router.workers(), None)
        .into_iter()
        .filter(|e| e.node == node && e.name == name)
        .map(|e| e.count)
        .sum()
}

/// Runs the router's control loop until `udp` received `n` datagrams.
fn recv_n(router: &mut Router, udp: &EngineUdp, n: usize) -> Vec<(SocketAddr, SocketAddr, Vec<u8>)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    while out.len() < n {
        router.poll();
        udp.recv_timeout(&mut out, Duration::from_millis(5));
        assert!(Instant::now() < deadline, "got {out:?}, want {n}; {}", diagnosis(router));
    }
    out
}

/// Runs the router's control loop until the host's `sock` receives a
/// datagram (tern resolves the host meanwhile); what and from where.
fn host_recv(router: &mut Router, sock: &UdpSocket) -> (Vec<u8>, SocketAddr) {
    sock.set_nonblocking(true).expect("nonblocking");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 2048];
    loop {
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => return (buf[..n].to_vec(), from),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("recv: {e}"),
        }
        if !router.poll() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(Instant::now() < deadline, "the host got nothing; {}", diagnosis(router));
    }
}

fn ike_through_the_engine(driver: &str, tag: &str) {
    if !privileged("IKE through the engine") {
        return;
    }
    let tern_ns = Netns::unique(&format!("ikelocal{tag}t"));
    let host = Netns::unique(&format!("ikelocal{tag}h"));
    Veth::new(&tern_ns, "ik0", &host, "ikh0").tx_offload_off().create();
    host.ip(&["addr", "add", &format!("{H4}/24"), "dev", "ikh0"]);
    host.ip(&["addr", "add", &format!("{H6}/64"), "dev", "ikh0", "nodad"]);
    // The host's sockets, bound in its namespace (they stay there).
    let (h500, h4500, h6) = host.run(|| {
        (
            UdpSocket::bind(sa(&format!("{H4}:500"))).expect("bind 500"),
            UdpSocket::bind(sa(&format!("{H4}:4500"))).expect("bind 4500"),
            UdpSocket::bind(sa(&format!("[{H6}]:500"))).expect("bind v6 500"),
        )
    });
    tern_ns.enter();
    let plan = config::parse(&config(driver), "ike.toml", Path::new(".")).expect("config");
    let mut router = Router::start(plan).expect("router");
    router.set_ike_local(true);
    let udp = router.engine_udp();

    // IKE on 500, IPv4: ARP for tern, then the datagram.
    let init = b"\x01\x02\x03\x04\x05\x06\x07\x08 IKE_SA_INIT request";
    h500.send_to(init, sa(&format!("{T4}:500"))).expect("send");
    let got = recv_n(&mut router, &udp, 1);
    assert_eq!(got, vec![(sa(&format!("{T4}:500")), sa(&format!("{H4}:500")), init.to_vec())]);
    assert!(udp.send(sa(&format!("{T4}:500")), sa(&format!("{H4}:500")), b"IKE_SA_INIT response"));
    let (msg, from) = host_recv(&mut router, &h500);
    assert_eq!((msg.as_slice(), from), (&b"IKE_SA_INIT response"[..], sa(&format!("{T4}:500"))));

    // IKE on 4500: the marker is stripped on the way in, added on the way
    // out; a NAT keep-alive is counted and dropped.
    h4500.send_to(&[0xff], sa(&format!("{T4}:4500"))).expect("send");
    h4500.send_to(b"\0\0\0\0IKE_AUTH request", sa(&format!("{T4}:4500"))).expect("send");
    let got = recv_n(&mut router, &udp, 1);
    assert_eq!(got, vec![(sa(&format!("{T4}:4500")), sa(&format!("{H4}:4500")), b"IKE_AUTH request".to_vec())]);
    assert!(udp.send(sa(&format!("{T4}:4500")), sa(&format!("{H4}:4500")), b"IKE_AUTH response"));
    let (msg, from) = host_recv(&mut router, &h4500);
    assert_eq!((msg.as_slice(), from), (&b"\0\0\0\0IKE_AUTH response"[..], sa(&format!("{T4}:4500"))));
    assert_eq!(counter(&router, "esp-decrypt", "nat-keepalive"), 1, "{}", diagnosis(&router));

    // IPv6: neighbour discovery both ways.
    h6.send_to(b"v6 request", sa(&format!("[{T6}]:500"))).expect("send");
    let got = recv_n(&mut router, &udp, 1);
    assert_eq!(got, vec![(sa(&format!("[{T6}]:500")), sa(&format!("[{H6}]:500")), b"v6 request".to_vec())]);
    assert!(udp.send(sa(&format!("[{T6}]:500")), sa(&format!("[{H6}]:500")), b"v6 response"));
    let (msg, from) = host_recv(&mut router, &h6);
    assert_eq!((msg.as_slice(), from), (&b"v6 response"[..], sa(&format!("[{T6}]:500"))));

    assert_eq!(counter(&router, "ip4-local", "ike-to-control"), 1, "{}", diagnosis(&router));
    assert_eq!(counter(&router, "ip6-local", "ike-to-control"), 1);
    assert_eq!(counter(&router, "esp-decrypt", "ike-to-control"), 1);
    assert_eq!(counter(&router, "ip-inject", "injected"), 3);
    if driver == "xdp" {
        let lane = router.lanes().lane().expect("the XDP lane runs on the veth");
        // IKE on 500 and 4500 (keep-alive included), v4 and v6, and the
        // late datagram below is not sent yet.
        assert_eq!(lane.counter("xdp-lane", "punt-ipsec"), 4, "the lane punts IKE");
    }
    let s = udp.stats();
    assert_eq!((s.sent, s.refused, s.received), (3, 0, 3));

    // IKE off again: UDP 500 is answered with port unreachable.
    router.set_ike_local(false);
    h500.send_to(b"late", sa(&format!("{T4}:500"))).expect("send");
    let deadline = Instant::now() + Duration::from_secs(20);
    while counter(&router, "ip4-local", "udp-port-unreachable") == 0 {
        router.poll();
        assert!(Instant::now() < deadline, "{}", diagnosis(&router));
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut none = Vec::new();
    udp.recv(&mut none);
    assert!(none.is_empty());
    router.shutdown();
}

#[test]
fn ike_through_the_engine_on_af_packet() {
    ike_through_the_engine("afpacket", "p");
}

#[test]
fn ike_through_the_engine_on_the_xdp_lane() {
    ike_through_the_engine("xdp", "x");
}

/// Linux mode with an ipsec tunnel (so the XDP programs send IPsec for
/// the router to tern): IKE stays the kernel's, whose sockets the IKE
/// service binds there (UDP 500, and 4500 with the non-ESP marker), while
/// ESP in UDP 4500 still goes to tern's `esp-decrypt`. Each host socket
/// sends ESP first and IKE after: the kernel socket's first datagram is
/// the IKE one, so no ESP reached it.
fn linux_mode_leaves_ike_to_the_kernel(driver: &str, tag: &str) {
    if !privileged("IKE in Linux mode") {
        return;
    }
    let tern_ns = Netns::unique(&format!("ikelocal{tag}t"));
    let host = Netns::unique(&format!("ikelocal{tag}h"));
    Veth::new(&tern_ns, "ik0", &host, "ikh0").tx_offload_off().create();
    host.ip(&["addr", "add", &format!("{H4}/24"), "dev", "ikh0"]);
    let (h500, h4500) = host.run(|| {
        (
            UdpSocket::bind(sa(&format!("{H4}:500"))).expect("bind 500"),
            UdpSocket::bind(sa(&format!("{H4}:4500"))).expect("bind 4500"),
        )
    });
    tern_ns.enter();
    let cfg = format!(
        r#"
[linux]
mode = "linux"

[[interface]]
name = "ik0"
device = "ik0"
driver = "{driver}"
addresses = ["{T4}/24"]

[[ipsec_sa]]
id = 10
spi = 0x1001
crypto = "aes-128-gcm"
key = "0x00112233445566778899aabbccddeeff01020304"
udp_encap = true

[[ipsec_sa]]
id = 20
spi = 0x2001
crypto = "aes-128-gcm"
key = "0xffeeddccbbaa99887766554433221100a0b0c0d0"
udp_encap = true

[[tunnel]]
name = "ipsec0"
type = "ipsec"
local = "{T4}"
remote = "{H4}"
sa_out = 10
sa_in = [20]
addresses = ["172.16.1.1/30"]
"#
    );
    let plan = config::parse(&cfg, "ike.toml", Path::new(".")).expect("config");
    let mut router = Router::start(plan).expect("router");
    // The IKE service's own sockets, as it binds them in Linux mode. The
    // address is the kernel's once tern gave it to the device.
    let deadline = Instant::now() + Duration::from_secs(20);
    let bind = |port: u16| UdpSocket::bind(sa(&format!("{T4}:{port}")));
    let k500 = loop {
        router.poll();
        if let Ok(s) = bind(500) {
            break s;
        }
        assert!(Instant::now() < deadline, "{T4} never became the kernel's");
        std::thread::sleep(Duration::from_millis(5));
    };
    // SO_REUSEADDR as the IKE service binds its sockets: tern's wildcard
    // UDP 4500 sockets (ESP in UDP the kernel reassembled) are bound while
    // an ipsec tunnel exists, and the kernel prefers this exact address.
    let k4500 = bind_reusing(sa(&format!("{T4}:4500"))).expect("bind 4500");
    router.set_ike_local(true);
    assert!(!router.shared().params.load().ike_local, "ignored in Linux mode");

    // ESP in UDP on an unknown SPI: tern's, counted by esp-decrypt.
    h4500.send_to(&[0, 0, 0x77, 0x77, 0, 0, 0, 1, 1, 2, 3, 4], sa(&format!("{T4}:4500"))).expect("send");
    h4500.send_to(b"\0\0\0\0IKE_AUTH", sa(&format!("{T4}:4500"))).expect("send");
    h500.send_to(b"IKE_SA_INIT", sa(&format!("{T4}:500"))).expect("send");
    let recv = |s: &UdpSocket| {
        s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        let mut buf = [0u8; 512];
        let (n, from) = s.recv_from(&mut buf).expect("the kernel's socket got IKE");
        (buf[..n].to_vec(), from)
    };
    assert_eq!(recv(&k4500), (b"\0\0\0\0IKE_AUTH".to_vec(), sa(&format!("{H4}:4500"))), "IKE first: no ESP");
    assert_eq!(recv(&k500), (b"IKE_SA_INIT".to_vec(), sa(&format!("{H4}:500"))));
    let deadline = Instant::now() + Duration::from_secs(20);
    while counter(&router, "esp-decrypt", "unknown-spi") == 0 {
        router.poll();
        assert!(Instant::now() < deadline, "ESP in UDP never reached tern: {}", diagnosis(&router));
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(counter(&router, "ip4-local", "left-to-linux"), 0, "no IKE redirected to tern: {}", diagnosis(&router));
    let mut none = Vec::new();
    router.engine_udp().recv(&mut none);
    assert!(none.is_empty());
    router.shutdown();
}

/// A UDP socket bound with SO_REUSEADDR (IPv4).
fn bind_reusing(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    use rustix::net::{AddressFamily, SocketType};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::DGRAM, None)?;
    rustix::net::sockopt::set_socket_reuseaddr(&fd, true)?;
    rustix::net::bind(&fd, &addr)?;
    Ok(UdpSocket::from(fd))
}

#[test]
fn linux_mode_leaves_ike_to_the_kernel_over_af_xdp() {
    linux_mode_leaves_ike_to_the_kernel("afxdp", "a");
}

#[test]
fn linux_mode_leaves_ike_to_the_kernel_on_the_xdp_lane() {
    linux_mode_leaves_ike_to_the_kernel("xdp", "l");
}

/// A figure, not a check (run by hand: `cargo test -p tern-control --test
/// ike_local --release -- --ignored --nocapture`): IKE-sized datagrams
/// from the host to tern's port 500, each echoed back by `EngineUdp::send`
/// as a responder would; how many made the round trip and at what rate.
#[test]
#[ignore]
fn echo_rate_through_the_engine() {
    if !privileged("IKE echo rate") {
        return;
    }
    const N: usize = 50_000;
    let tern_ns = Netns::unique("ikelocalrt");
    let host = Netns::unique("ikelocalrh");
    Veth::new(&tern_ns, "ik0", &host, "ikh0").tx_offload_off().create();
    host.ip(&["addr", "add", &format!("{H4}/24"), "dev", "ikh0"]);
    let sock = host.run(|| UdpSocket::bind(sa(&format!("{H4}:500"))).expect("bind"));
    tern_ns.enter();
    let plan = config::parse(&config("afpacket"), "ike.toml", Path::new(".")).expect("config");
    let mut router = Router::start(plan).expect("router");
    router.set_ike_local(true);
    let udp = router.engine_udp();
    // One round trip first: ARP both ways.
    sock.send_to(&[0; 300], sa(&format!("{T4}:500"))).expect("send");
    let first = recv_n(&mut router, &udp, 1);
    assert!(udp.send(first[0].0, first[0].1, &first[0].2));
    host_recv(&mut router, &sock);
    sock.set_nonblocking(false).expect("blocking");
    sock.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
    let rx = sock.try_clone().expect("clone");
    let t0 = Instant::now();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (echoed, got) = std::thread::scope(|s| {
        let receiver = s.spawn(|| {
            let mut buf = [0u8; 2048];
            let mut n = 0;
            while n < N && rx.recv_from(&mut buf).is_ok() {
                n += 1;
            }
            n
        });
        s.spawn(|| {
            let msg = [0x5a; 300];
            for i in 0..N {
                let _ = sock.send_to(&msg, sa(&format!("{T4}:500")));
                if i % 64 == 63 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        let mut out = Vec::new();
        let mut echoed = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(30) {
            udp.recv_timeout(&mut out, Duration::from_millis(1));
            for (l, r, m) in out.drain(..) {
                echoed += usize::from(udp.send(l, r, &m));
            }
            if receiver.is_finished() {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        (echoed, receiver.join().expect("receiver"))
    });
    let dt = t0.elapsed().as_secs_f64();
    eprintln!(
        "IKE echo through the engine: {N} sent, {echoed} echoed, {got} back in {dt:.2}s: {:.0} round trips/s; {}",
        got as f64 / dt,
        diagnosis(&router)
    );
    router.shutdown();
}
