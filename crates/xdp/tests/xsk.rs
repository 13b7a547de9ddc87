//! AF_XDP driver and steering program against real veths in throwaway
//! network namespaces (needs root; prints "skipped" otherwise).

mod common;

use common::*;
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tern_packet::{PacketPool, PoolConfig, Port};
use tern_xdp::*;

/// How long a test waits for what must come (frames, a state): generous,
/// since on a loaded machine (CI shares 2 vCPUs with builds) a softirq or
/// the test's own thread can wait seconds for a CPU; a passing test
/// waits only as long as it takes.
const WAIT: Duration = Duration::from_secs(20);

fn pool(frames: u32) -> PacketPool {
    PacketPool::new(PoolConfig { frames, ..PoolConfig::default() }).expect("pool")
}

fn cfg(ifname: &str, queue: u32) -> XskConfig {
    XskConfig { busy_poll: BusyPoll::Off, tune_napi: false, ..XskConfig::new(ifname, queue) }
}

/// Sends `n` UDP datagrams from `src_port` to `dst`, payload `tag-<i>`.
fn send_udp(dst: SocketAddr, src_port: u16, tag: &str, n: usize) {
    let s = UdpSocket::bind(("0.0.0.0", src_port)).expect("bind sender");
    for i in 0..n {
        s.send_to(format!("{tag}-{i}").as_bytes(), dst).expect("send");
    }
}

#[test]
fn transit_packets_reach_the_xsk_with_their_bytes() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(1);
    let mut pool = pool(4096);
    let start = pool.available();
    let got = rig.rtr.run(|| {
        let mut steer = SteeringProgram::attach("r0", SteerOptions::default()).expect("attach");
        assert_eq!(steer.mode(), AttachMode::Driver, "veth takes native XDP");
        steer.add_local(IpAddr::V4(R0_IP)).expect("local");
        let umem = Umem::new(&pool).expect("umem");
        let mut port = XskPort::open(&umem, &cfg("r0", 0), &mut pool).expect("open");
        assert!(!port.is_zero_copy(), "veth refuses zero-copy");
        steer.register(&port).expect("register");
        assert_eq!(pool.available() + port.frames_lent(), start);

        rig.gen_ns.run(|| send_udp(SocketAddr::new(S0_IP.into(), 5000), 4100, "xdp-rx", 50));
        let mut frames = Vec::new();
        let mut batch = Vec::with_capacity(64);
        let mut seen = Vec::new();
        wait_until(WAIT, || {
            batch.clear();
            port.rx_burst(&mut pool, &mut batch, 64);
            for &i in &batch {
                let data = pool.data(i).to_vec();
                assert_eq!(u32::from(pool.meta(i).off), umem.rx_data_offset(), "data starts after the XDP headroom");
                frames.push(data);
                pool.free(i);
            }
            port.service(&mut pool);
            seen = frames.iter().filter_map(|f| udp_payload(f).map(|p| p.3.to_vec())).collect();
            seen.len() >= 50
        });
        let v = steer.verdicts().expect("verdicts");
        assert!(v.redirect >= 50, "{v:?}");
        for f in &frames {
            if let Some((src, dst, dport, _)) = udp_payload(f) {
                assert_eq!(&f[..6], &mac(MAC_R0), "sent to the router's MAC");
                assert_eq!((src, dst, dport), (G0_IP, S0_IP, 5000));
            }
        }
        let report = port.close(&mut pool);
        assert_eq!(report.abandoned, 0);
        seen
    });
    let got: BTreeSet<Vec<u8>> = got.into_iter().collect();
    let want: BTreeSet<Vec<u8>> = (0..50).map(|i| format!("xdp-rx-{i}").into_bytes()).collect();
    assert_eq!(got, want);
    assert_eq!(pool.available(), start, "every frame is back in the pool");
}

/// A worker that replaces a port (its device went and came back) drops
/// the old one without `close`: its frames return to the pool at the next
/// refill of the UMEM. The new port, opened without the pool (from the
/// control thread), fills its ring on its first receive and carries
/// traffic.
#[test]
fn a_dropped_ports_frames_return_and_an_unfilled_port_fills_and_receives() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(1);
    let mut pool = pool(4096);
    let start = pool.available();
    let got = rig.rtr.run(|| {
        let mut steer = SteeringProgram::attach("r0", SteerOptions::default()).expect("attach");
        steer.add_local(IpAddr::V4(R0_IP)).expect("local");
        let umem = Umem::new(&pool).expect("umem");
        let old = XskPort::open(&umem, &cfg("r0", 0), &mut pool).expect("open");
        let lent = old.frames_lent();
        assert!(lent > 0, "the fill ring holds frames");
        drop(old);
        assert_eq!(pool.available(), start - lent, "still out until a refill");
        // The kernel frees the old socket's queue in deferred work: wait
        // for the queue to take a socket again.
        let mut opened = None;
        wait_until(WAIT, || {
            opened = XskPort::open_unfilled(&umem, &cfg("r0", 0)).ok();
            opened.is_some()
        });
        let mut port = opened.expect("open without the pool");
        assert_eq!(port.frames_lent(), 0, "nothing filled yet");
        steer.register(&port).expect("register");
        let mut batch = Vec::new();
        port.rx_burst(&mut pool, &mut batch, 64);
        assert!(port.frames_lent() > 0, "the first receive fills the ring");
        assert_eq!(pool.available() + port.frames_lent() + batch.len(), start, "the dropped port's frames are back");
        pool.free_all(&batch);

        rig.gen_ns.run(|| send_udp(SocketAddr::new(S0_IP.into(), 5000), 4101, "refilled", 20));
        let mut seen = 0;
        wait_until(WAIT, || {
            batch.clear();
            port.rx_burst(&mut pool, &mut batch, 64);
            seen += batch.iter().filter(|&&i| udp_payload(pool.data(i)).is_some()).count();
            pool.free_all(&batch);
            seen >= 20
        });
        assert_eq!(port.close(&mut pool).abandoned, 0);
        seen
    });
    assert!(got >= 20, "received {got} of 20 through the port opened without the pool");
    assert_eq!(pool.available(), start, "every frame is back in the pool");
}

#[test]
fn local_traffic_and_arp_still_reach_linux() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(1);
    let mut pool = pool(4096);
    rig.rtr.run(|| {
        let mut steer = SteeringProgram::attach("r0", SteerOptions::default()).expect("attach");
        steer.add_local(IpAddr::V4(R0_IP)).expect("local");
        let umem = Umem::new(&pool).expect("umem");
        let mut port = XskPort::open(&umem, &cfg("r0", 0), &mut pool).expect("open");
        steer.register(&port).expect("register");
        assert!(
            rig.gen_ns.exec_ok(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.1.1"]),
            "ping to the router's own address"
        );
        let v = steer.verdicts().expect("verdicts");
        assert!(v.pass_local >= 3, "echo requests passed to Linux: {v:?}");
        assert!(v.pass_neigh >= 1, "ARP passed to Linux: {v:?}");
        let mut batch = Vec::new();
        port.rx_burst(&mut pool, &mut batch, 64);
        assert!(batch.is_empty(), "nothing for the router reached the XSK");
        port.close(&mut pool);
    });
}

#[test]
fn neighbour_discovery_goes_to_tern_in_standalone_mode() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(1);
    let mut pool = pool(4096);
    rig.rtr.run(|| {
        let opts = SteerOptions { neigh_to_tern: true, ..SteerOptions::default() };
        let mut steer = SteeringProgram::attach("r0", opts).expect("attach");
        let umem = Umem::new(&pool).expect("umem");
        let mut port = XskPort::open(&umem, &cfg("r0", 0), &mut pool).expect("open");
        steer.register(&port).expect("register");
        // Nobody answers ARP now (tern would): the ping fails, its ARP
        // requests reach the XSK.
        assert!(!rig.gen_ns.exec_ok(&["ping", "-c", "1", "-W", "1", "10.77.1.1"]));
        let mut batch = Vec::new();
        let mut arp = 0;
        wait_until(WAIT, || {
            batch.clear();
            port.rx_burst(&mut pool, &mut batch, 64);
            for &i in &batch {
                if pool.data(i).get(12..14) == Some(&[0x08, 0x06]) {
                    arp += 1;
                }
                pool.free(i);
            }
            arp > 0
        });
        assert!(arp > 0);
        assert!(steer.verdicts().expect("verdicts").redirect_neigh > 0);
        port.close(&mut pool);
    });
}

#[test]
fn tx_frames_arrive_at_the_peer() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(1);
    let mut pool = pool(4096);
    let start = pool.available();
    let rx = rig.gen_ns.run(|| UdpSocket::bind((G0_IP, 7777)).expect("bind receiver"));
    rx.set_read_timeout(Some(WAIT)).expect("timeout");
    rig.rtr.run(|| {
        let umem = Umem::new(&pool).expect("umem");
        let mut port = XskPort::open(&umem, &cfg("r0", 0), &mut pool).expect("open");
        let pkts: Vec<u32> = (0..100)
            .map(|i| {
                let f = udp_frame(mac(MAC_R0), mac(MAC_G0), R0_IP, G0_IP, 7777, format!("xdp-tx-{i}").as_bytes());
                pool.alloc_from(&f).expect("frame")
            })
            .collect();
        let mut sent = 0;
        for chunk in pkts.chunks(32) {
            let out = port.tx_burst(&mut pool, chunk);
            assert_eq!(out.dropped, 0);
            sent += out.sent;
        }
        assert_eq!(sent, 100);
        assert!(wait_until(WAIT, || {
            port.service(&mut pool);
            port.frames_lent() == 1024
        }));
        assert_eq!(port.stats().tx_packets, 100);
        port.close(&mut pool);
    });
    let mut got = BTreeSet::new();
    let mut buf = [0u8; 256];
    while got.len() < 100 {
        let n = rx.recv(&mut buf).expect("datagram from the XSK");
        got.insert(buf[..n].to_vec());
    }
    let want: BTreeSet<Vec<u8>> = (0..100).map(|i| format!("xdp-tx-{i}").into_bytes()).collect();
    assert_eq!(got, want);
    assert_eq!(pool.available(), start);
}

#[test]
fn invalid_tx_frames_are_dropped_not_leaked() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(1);
    let mut pool = pool(2048);
    let start = pool.available();
    rig.rtr.run(|| {
        let umem = Umem::new(&pool).expect("umem");
        let mut port = XskPort::open(&umem, &cfg("r0", 0), &mut pool).expect("open");
        let tiny = pool.alloc_from(&[1, 2, 3]).expect("frame");
        let huge = pool.alloc().expect("frame");
        assert!(pool.set_len(huge, 1700), "longer than MTU 1500 + 14");
        let out = port.tx_burst(&mut pool, &[tiny, huge]);
        assert_eq!((out.sent, out.dropped), (0, 2));
        assert_eq!(port.stats().tx_dropped, 2);
        port.close(&mut pool);
    });
    assert_eq!(pool.available(), start);
}

/// Frames sent while the link is down (the veth's peer is down: no
/// carrier) are not counted as sent: the kernel takes them, drops them and
/// completes them as if sent; the port counts each as dropped (refused)
/// and none waits in the ring. Once the peer is up again, frames leave and
/// count as sent.
#[test]
fn tx_on_a_down_link_is_counted_as_refused_not_sent() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(1);
    let mut pool = pool(4096);
    let start = pool.available();
    let frames = |pool: &mut PacketPool, tag: &str, n: usize| -> Vec<u32> {
        (0..n)
            .map(|i| {
                let f = udp_frame(mac(MAC_R0), mac(MAC_G0), R0_IP, G0_IP, 7777, format!("{tag}-{i}").as_bytes());
                pool.alloc_from(&f).expect("frame")
            })
            .collect()
    };
    let peer = |state: &str| sh(&["ip", "-n", &rig.gen_ns.name, "link", "set", "g0", state]);
    rig.rtr.run(|| {
        let umem = Umem::new(&pool).expect("umem");
        let mut port = XskPort::open(&umem, &cfg("r0", 0), &mut pool).expect("open");
        let burst = |pool: &mut PacketPool, port: &mut XskPort, tag: &str| {
            let mut out = (0, 0);
            for _ in 0..4 {
                let pkts = frames(pool, tag, 32);
                let o = port.tx_burst(pool, &pkts);
                out.0 += o.sent;
                out.1 += o.dropped;
            }
            out
        };
        assert_eq!(burst(&mut pool, &mut port, "up"), (128, 0), "the link is up");
        peer("down");
        assert_eq!(burst(&mut pool, &mut port, "down"), (0, 128), "the peer is down: nothing is sent");
        assert_eq!(port.tx_kernel_dropped(), 128);
        let s = port.stats();
        assert_eq!((s.tx_packets, s.tx_dropped), (128, 128));
        peer("up");
        assert!(
            wait_until(WAIT, || {
                let pkts = frames(&mut pool, "again", 1);
                port.tx_burst(&mut pool, &pkts).sent == 1
            }),
            "frames leave once the link is back"
        );
        assert!(wait_until(WAIT, || {
            port.service(&mut pool);
            port.frames_lent() == 1024
        }));
        port.close(&mut pool);
    });
    assert_eq!(pool.available(), start, "every frame came back");
}

/// rx on r0, rewrite MACs, tx on r1 (same UMEM), until `stop`.
fn forward(a: &mut XskPort, b: &mut XskPort, pool: &mut PacketPool, stop: &AtomicBool) -> (u64, usize) {
    let mut batch = Vec::with_capacity(64);
    let mut fwd = 0;
    let mut min_avail = usize::MAX;
    let cap = pool.capacity() as usize;
    while !stop.load(Ordering::Relaxed) {
        batch.clear();
        a.rx_burst(pool, &mut batch, 64);
        for &i in &batch {
            let d = pool.data_mut(i);
            d[..6].copy_from_slice(&mac(MAC_S0));
            d[6..12].copy_from_slice(&mac(MAC_R1));
        }
        fwd += b.tx_burst(pool, &batch).sent as u64;
        a.service(pool);
        b.service(pool);
        // Between bursts every frame is in the pool or lent to a port.
        assert_eq!(pool.available() + a.frames_lent() + b.frames_lent(), cap);
        min_avail = min_avail.min(pool.available());
    }
    (fwd, min_avail)
}

#[test]
fn two_ports_share_a_umem_forward_thousands_and_leak_nothing() {
    if !privileged() {
        return;
    }
    const N: u64 = 5000;
    let rig = Rig3::new();
    let mut pool = pool(4096);
    let start = pool.available();
    let sink = rig.sink.run(|| UdpSocket::bind((S0_IP, 6000)).expect("sink"));
    sink.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
    let received = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let ready = AtomicBool::new(false);
    let (fwd, lent_while_running) = std::thread::scope(|s| {
        let fwd = rig.rtr.spawn(s, || {
            let mut sa = SteeringProgram::attach("r0", SteerOptions::default()).expect("attach r0");
            sa.add_local(IpAddr::V4(R0_IP)).expect("local");
            let umem = Umem::new(&pool).expect("umem");
            let mut a = XskPort::open(&umem, &cfg("r0", 0), &mut pool).expect("open r0");
            let mut b = XskPort::open(&umem, &cfg("r1", 0), &mut pool).expect("open r1");
            assert!(a.umem().same_as(b.umem()));
            assert_eq!(umem.ports(), 2, "both sockets bound to one UMEM");
            sa.register(&a).expect("register");
            ready.store(true, Ordering::Relaxed);
            let r = forward(&mut a, &mut b, &mut pool, &stop);
            let ra = a.close(&mut pool);
            let rb = b.close(&mut pool);
            assert_eq!((ra.abandoned, rb.abandoned), (0, 0));
            assert_eq!(umem.ports(), 0);
            r
        });
        let sink_thread = s.spawn(|| {
            let mut buf = [0u8; 256];
            while received.load(Ordering::Relaxed) < N && !stop.load(Ordering::Relaxed) {
                if sink.recv(&mut buf).is_ok() {
                    received.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        // (If the forwarder failed, the sends below just go nowhere and the
        // final assertion reports it.)
        wait_until(WAIT, || ready.load(Ordering::Relaxed));
        rig.gen_ns.run(|| {
            let s = UdpSocket::bind(("0.0.0.0", 4200)).expect("sender");
            let dst = SocketAddr::new(S0_IP.into(), 6000);
            let mut sent = 0u64;
            while sent < N {
                for _ in 0..50 {
                    s.send_to(&sent.to_be_bytes(), dst).expect("send");
                    sent += 1;
                }
                // Window of 50: keeps the test about accounting, not
                // about how much a veth drops under overload.
                if !wait_until(Duration::from_secs(2), || received.load(Ordering::Relaxed) >= sent)
                    && received.load(Ordering::Relaxed) == 0
                {
                    break;
                }
            }
        });
        wait_until(WAIT, || received.load(Ordering::Relaxed) >= N);
        stop.store(true, Ordering::Relaxed);
        let _ = sink_thread.join();
        fwd.join().expect("forwarder")
    });
    let got = received.load(Ordering::Relaxed);
    assert!(got >= N * 99 / 100, "sink got {got} of {N}");
    assert!(fwd >= got, "forwarded {fwd}, sink {got}");
    assert!(lent_while_running < start, "frames were lent while running");
    assert_eq!(pool.available(), start, "no frame leaked after {fwd} packets");
}

#[test]
fn one_socket_per_queue_on_a_multiqueue_veth() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(2);
    let mut pool = pool(8192);
    let start = pool.available();
    let per_queue = rig.rtr.run(|| {
        let mut steer = SteeringProgram::attach("r0", SteerOptions::default()).expect("attach");
        steer.add_local(IpAddr::V4(R0_IP)).expect("local");
        let umem = Umem::new(&pool).expect("umem");
        let mut ports: Vec<XskPort> =
            (0..2).map(|q| XskPort::open(&umem, &cfg("r0", q), &mut pool).expect("open queue")).collect();
        for p in &ports {
            steer.register(p).expect("register");
        }
        // 64 flows: the sender's veth picks its tx queue (= our rx queue)
        // by flow hash.
        rig.gen_ns.run(|| {
            for f in 0..64u16 {
                send_udp(SocketAddr::new(S0_IP.into(), 5000), 4300 + f, &format!("q{f}"), 4);
            }
        });
        let mut counts = [0usize; 2];
        let mut payloads = BTreeSet::new();
        let mut batch = Vec::new();
        wait_until(WAIT, || {
            for (q, p) in ports.iter_mut().enumerate() {
                batch.clear();
                p.rx_burst(&mut pool, &mut batch, 64);
                for &i in &batch {
                    if let Some((_, _, 5000, pl)) = udp_payload(pool.data(i)) {
                        payloads.insert(pl.to_vec());
                        counts[q] += 1;
                    }
                    pool.free(i);
                }
                p.service(&mut pool);
            }
            payloads.len() >= 256
        });
        assert_eq!(payloads.len(), 256, "every datagram reached one of the queues' sockets");
        for p in ports.drain(..) {
            p.close(&mut pool);
        }
        counts
    });
    assert!(per_queue[0] > 0 && per_queue[1] > 0, "both queues steered: {per_queue:?}");
    assert_eq!(pool.available(), start);
}

/// Opens r0/0 with `policy`, teaches its helper socket the NAPI id with
/// probes to the discard port at the router's address, and checks that
/// busy polling engaged.
fn engaged_port(rig: &Rig2, pool: &mut PacketPool, policy: BusyPoll) -> (SteeringProgram, XskPort) {
    let mut steer = SteeringProgram::attach("r0", SteerOptions::default()).expect("attach");
    steer.add_local(IpAddr::V4(R0_IP)).expect("local");
    let umem = Umem::new(pool).expect("umem");
    // tune_napi stays on: /sys/class/net here shows the root namespace,
    // and the port must notice and leave that device alone.
    let c = XskConfig { busy_poll: policy, ..XskConfig::new("r0", 0) };
    let mut port = XskPort::open(&umem, &c, pool).expect("open");
    steer.register(&port).expect("register");
    assert_eq!(port.busy_poll_state(), BusyPollState::Learning);
    assert!(port.wait_fd().is_some(), "not spinning before it engages");
    rig.gen_ns.run(|| send_udp(SocketAddr::new(R0_IP.into(), 9), 4400, "probe", 5));
    assert!(
        wait_until(WAIT, || {
            port.service(pool);
            !matches!(port.busy_poll_state(), BusyPollState::Learning)
        }),
        "learned a NAPI id"
    );
    let state = port.busy_poll_state();
    assert!(matches!(state, BusyPollState::Helper { .. } | BusyPollState::Socket { .. }), "{state:?}");
    assert!(port.wait_fd().is_none(), "spins once busy polling engaged");
    (steer, port)
}

/// Receives on `port` until `want` datagrams to UDP port `dport` arrived.
fn receive_udp(port: &mut XskPort, pool: &mut PacketPool, dport: u16, want: usize) -> bool {
    let mut n = 0;
    let mut batch = Vec::new();
    wait_until(WAIT, || {
        batch.clear();
        port.rx_burst(pool, &mut batch, 64);
        n += batch.iter().filter(|&&i| udp_payload(pool.data(i)).is_some_and(|p| p.2 == dport)).count();
        pool.free_all(&batch);
        n >= want
    })
}

#[test]
fn busy_polling_engages_through_the_helper_socket() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(1);
    let mut pool = pool(4096);
    rig.rtr.run(|| {
        let (_steer, mut port) = engaged_port(&rig, &mut pool, BusyPoll::On);
        // Traffic still flows with the worker driving the NAPI.
        rig.gen_ns.run(|| send_udp(SocketAddr::new(S0_IP.into(), 5000), 4401, "busy", 20));
        assert!(receive_udp(&mut port, &mut pool, 5000, 20));
        // A spinning port never parks.
        port.prepare_sleep();
        assert!(!port.busy_poll_parked());
        port.close(&mut pool);
    });
}

#[test]
fn adaptive_busy_polling_parks_while_the_worker_sleeps() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(1);
    let mut pool = pool(4096);
    rig.rtr.run(|| {
        let (_steer, mut port) = engaged_port(&rig, &mut pool, BusyPoll::Adaptive);
        // It parks once its queue has been quiet for PARK_AFTER.
        assert!(wait_until(WAIT, || port.prepare_sleep()), "parks when quiet");
        assert!(port.busy_poll_parked());
        // Parked, the kernel's softirq delivers: the XSK turns readable
        // without anyone busy polling, as in interrupt mode.
        rig.gen_ns.run(|| send_udp(SocketAddr::new(S0_IP.into(), 5000), 4402, "parked", 20));
        {
            let fd = port.wait_fd().expect("a parked port can be slept on");
            let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
            let limit = rustix::event::Timespec { tv_sec: 3, tv_nsec: 0 };
            let ready = rustix::event::poll(&mut fds, Some(&limit)).expect("poll");
            assert_eq!(ready, 1, "the sleeping worker is woken");
        }
        assert!(receive_udp(&mut port, &mut pool, 5000, 20));
        assert!(port.busy_poll_parked(), "a few packets do not bring busy polling back");
        // The worker sleeps again: the count starts afresh, so these (with
        // the 20 above, past the threshold) do not unpark either.
        port.prepare_sleep();
        let most = UNPARK_AFTER as usize - 16;
        rig.gen_ns.run(|| send_udp(SocketAddr::new(S0_IP.into(), 5001), 4403, "sparse", most));
        assert!(receive_udp(&mut port, &mut pool, 5001, most));
        assert!(port.busy_poll_parked(), "{most} packets within one waking spell");
        // A busy queue does.
        port.prepare_sleep();
        let more = UNPARK_AFTER as usize;
        rig.gen_ns.run(|| send_udp(SocketAddr::new(S0_IP.into(), 5002), 4404, "busy", more));
        assert!(receive_udp(&mut port, &mut pool, 5002, more));
        assert!(!port.busy_poll_parked(), "unparked after {more} packets");
        assert!(port.wait_fd().is_none(), "spinning again");
        assert!(!port.prepare_sleep(), "a queue busy a moment ago keeps the worker polling");
        assert!(!port.busy_poll_parked());
        port.close(&mut pool);
    });
}

/// Compiles an XDP program that is not tern's (it passes every frame)
/// into `obj`, with the clang the crate's build uses.
fn foreign_object(dir: &std::path::Path, obj: &std::path::Path) {
    let src = dir.join("foreign.c");
    std::fs::write(
        &src,
        "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
         SEC(\"xdp\") int not_terns(struct xdp_md *ctx) { return XDP_PASS; }\n\
         char _license[] SEC(\"license\") = \"GPL\";\n",
    )
    .expect("write source");
    let clang = std::env::var("TERN_CLANG").unwrap_or_else(|_| "clang".into());
    let multiarch = format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let ok = std::process::Command::new(&clang)
        .args(["-O2", "-target", "bpf", "-c", &multiarch])
        .arg(&src)
        .arg("-o")
        .arg(obj)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "{clang} could not compile {}", src.display());
}

#[test]
fn stale_program_is_found_and_removed() {
    if !privileged() {
        return;
    }
    let rig = Rig2::new(1);
    let dir = std::env::temp_dir().join(format!("tern-xdp-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let steer_o = dir.join("steer.o");
    let foreign_o = dir.join("foreign.o");
    std::fs::write(&steer_o, steer_object()).expect("write object");
    foreign_object(&dir, &foreign_o);
    // Attached by netlink from another process, as a crashed loader leaves it.
    rig.rtr.ip(&["link", "set", "dev", "r0", "xdpgeneric", "obj", steer_o.to_str().unwrap_or(""), "sec", "xdp"]);
    rig.gen_ns.ip(&["link", "set", "dev", "g0", "xdpgeneric", "obj", foreign_o.to_str().unwrap_or(""), "sec", "xdp"]);
    rig.rtr.run(|| {
        let att = attached("r0").expect("query");
        assert_eq!(att.len(), 1, "{att:?}");
        assert_eq!((att[0].0, att[0].2.as_str()), (AttachMode::Skb, STEER_PROG_NAME));
        let removed = remove_stale("r0", false).expect("remove");
        assert_eq!(removed, vec![att[0].1]);
        assert!(attached("r0").expect("query").is_empty());
    });
    rig.gen_ns.run(|| {
        assert!(remove_stale("g0", false).expect("remove").is_empty(), "not tern's: left alone");
        assert_eq!(attached("g0").expect("query").len(), 1);
        assert_eq!(remove_stale("g0", true).expect("remove").len(), 1);
        assert!(attached("g0").expect("query").is_empty());
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn attach_and_open_on_a_missing_interface_say_why() {
    if !privileged() {
        return;
    }
    let ns = netns("x");
    let pool = pool(1024);
    ns.run(|| {
        let e = SteeringProgram::attach("nonexistent0", SteerOptions::default()).err().expect("error");
        assert!(e.is_unavailable(), "{e}");
        assert!(e.to_string().contains("nonexistent0"), "{e}");
        let mut p2 = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
        let umem = Umem::new(&p2).expect("umem");
        let e = XskPort::open(&umem, &cfg("nonexistent0", 0), &mut p2).err().expect("error");
        assert!(matches!(e, XdpError::Unavailable { why: Unavailable::NoSuchInterface, .. }), "{e}");
        let e = XskPort::open(&umem, &cfg("lo", 0), &mut PacketPool::new(PoolConfig::default()).expect("pool"))
            .err()
            .expect("foreign pool refused");
        assert!(matches!(e, XdpError::Config(_)), "{e}");
    });
    drop(pool);
}

/// Control traffic first in the steering program (`bpf/steer.c`, the
/// lane's classes and policers of `bpf/lib/class.h`): what it hands to
/// Linux or to tern for the router itself is policed per class; a flood
/// of pings at the router's address is shed under `punt-shed-local` while
/// BGP and ARP pass, transit is never policed, the counters add up, and
/// rate 0 polices nothing. Both modes: Linux (the router's traffic to
/// Linux) and standalone (to tern, `local-to-tern`, ARP to tern).
#[test]
fn steering_polices_what_it_hands_over_for_the_router_per_class() {
    use tern_testkit::packet::{ArpOperation, Frame};
    if !privileged() {
        return;
    }
    const XDP_DROP: u32 = 1;
    const XDP_PASS: u32 = 2;
    let rig = Rig2::new(1);
    rig.rtr.run(|| {
        for standalone in [false, true] {
            let opts = SteerOptions { neigh_to_tern: standalone, ..SteerOptions::default() };
            let mut steer = SteeringProgram::attach("r0", opts).expect("attach");
            steer.add_local(IpAddr::V4(R0_IP)).expect("local");
            let (g, r) = (mac(MAC_G0), mac(MAC_R0));
            let ping = Frame::eth(g, r).ipv4(G0_IP, R0_IP).icmp_echo(1, 1).build();
            let bgp = Frame::eth(g, r).ipv4(G0_IP, R0_IP).tcp(40000, 179, 0x10).build();
            let arp = Frame::eth(g, [0xff; 6]).arp(ArpOperation(1), g, G0_IP, [0; 6], R0_IP).build();
            let transit = udp_frame(g, r, G0_IP, S0_IP, 5000, b"transit");
            // Every class generous but `local`: 1/s with a burst of 20.
            let mut rates = [(1_000_000, 1000); 7];
            rates[6] = (1, 20);
            steer.set_punt_rates(&rates).expect("rates");
            let before = steer.verdicts().expect("verdicts");
            let t0 = std::time::Instant::now();
            let (mut passed, mut control) = (0u64, 0u64);
            for i in 0..1000 {
                passed += u64::from(steer.test_run(&ping, 0).expect("run") == XDP_PASS);
                if i % 50 == 0 {
                    for f in [&bgp, &arp] {
                        // (ARP to tern with no socket on the queue: passed.)
                        assert_eq!(steer.test_run(f, 0).expect("run"), XDP_PASS, "control traffic in the flood");
                        control += 1;
                    }
                    assert_eq!(steer.test_run(&transit, 0).expect("run"), XDP_PASS, "transit: no socket, passed");
                }
            }
            let secs = t0.elapsed().as_secs() + 1;
            assert!((20..=20 + secs).contains(&passed), "{passed} pings passed in about {secs} s");
            let v = steer.verdicts().expect("verdicts");
            assert_eq!(v.shed[6] - before.shed[6], 1000 - passed, "every shed ping counted: {v:?}");
            for c in 0..6 {
                assert_eq!(v.shed[c], before.shed[c], "class {c} shed nothing: {v:?}");
            }
            // Linux mode: pings and BGP passed to Linux, ARP too. Standalone:
            // all three for tern, which with no socket on the queue are
            // counted with the transit as pass-no-xsk.
            let d = |a: u64, b: u64| a - b;
            if standalone {
                assert_eq!(d(v.pass_local, before.pass_local), 0, "{v:?}");
                assert_eq!(d(v.pass_no_xsk, before.pass_no_xsk), passed + 3 * control / 2, "{v:?}");
            } else {
                assert_eq!(d(v.pass_local, before.pass_local), passed + control / 2, "{v:?}");
                assert_eq!(d(v.pass_neigh, before.pass_neigh), control / 2, "{v:?}");
            }
            let shed = v.passes().into_iter().find(|p| p.0 == "punt-shed-local").expect("named").2;
            assert_eq!(shed, v.shed[6]);

            // A class at 1/s with a burst of 1: ARP's second is shed.
            steer.set_punt_rates(&[(1, 1); 7]).expect("rates");
            assert_eq!(steer.test_run(&arp, 0).expect("run"), XDP_PASS);
            assert_eq!(steer.test_run(&arp, 0).expect("run"), XDP_DROP);
            assert_eq!(steer.verdicts().expect("verdicts").shed[0], v.shed[0] + 1);

            // Rate 0: nothing policed.
            steer.set_punt_rates(&[(0, 0); 7]).expect("rates");
            for _ in 0..100 {
                assert_eq!(steer.test_run(&ping, 0).expect("run"), XDP_PASS);
            }
            drop(steer);
        }
    });
}

/// Linux mode with tern terminating IPsec (`set_ipsec_to_tern`): ESP and
/// ESP in UDP 4500 for the router's IPv6 address go to tern also behind
/// extension headers (hop-by-hop, routing, destination options, a first
/// fragment, all four: with no socket on the queue, counted as
/// pass-no-xsk), and so does a later fragment of ESP (tern reassembles
/// it), while UDP to another port behind them is the router's traffic for
/// Linux (pass-local).
#[test]
fn steering_finds_ipsec_behind_ipv6_extension_headers() {
    use tern_testkit::packet::{eth, ipv6, udp6};
    if !privileged() {
        return;
    }
    const XDP_PASS: u32 = 2;
    let rig = Rig2::new(1);
    rig.rtr.run(|| {
        let mut steer = SteeringProgram::attach("r0", SteerOptions::default()).expect("attach");
        let (us, peer): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
            ("2001:db8:2::1".parse().expect("a"), "2001:db8:2::2".parse().expect("a"));
        steer.add_local(IpAddr::V6(us)).expect("local");
        steer.set_ipsec_to_tern(true).expect("ipsec");
        // `ip` with extension headers of types `exts` (PadN options, a
        // routing header of type 253 with no segments left, a fragment
        // header whose offset-and-M field is `frag`).
        let ext6 = |next: u8, l4: &[u8], exts: &[u8], frag: u16| {
            let mut chain = Vec::new();
            for (i, &t) in exts.iter().enumerate() {
                let n = exts.get(i + 1).copied().unwrap_or(next);
                let [f0, f1] = frag.to_be_bytes();
                chain.extend_from_slice(&match t {
                    43 => [n, 0, 253, 0, 0, 0, 0, 0],
                    44 => [n, 0, f0, f1, 0, 0, 0x12, 0x34],
                    _ => [n, 0, 1, 4, 0, 0, 0, 0],
                });
            }
            chain.extend_from_slice(l4);
            eth(mac(MAC_R0), mac(MAC_G0), 0x86dd, &ipv6(peer, us, exts[0], 64, &chain))
        };
        let esp = [0u8, 0, 0x10, 0x01, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4];
        let natt = udp6(peer, us, 4500, 4500, &esp);
        let dns = udp6(peer, us, 4500, 53, b"query");
        let chains: [&[u8]; 5] = [&[0], &[43], &[60], &[44], &[0, 43, 60, 44]];
        let before = steer.verdicts().expect("verdicts");
        let mut to_tern = 0;
        for c in chains {
            for (next, l4) in [(50, &esp[..]), (17, &natt[..])] {
                assert_eq!(steer.test_run(&ext6(next, l4, c, 0), 0).expect("run"), XDP_PASS);
                to_tern += 1;
            }
        }
        let v = steer.verdicts().expect("verdicts");
        assert_eq!(v.pass_no_xsk - before.pass_no_xsk, to_tern, "{v:?}");
        assert_eq!(v.pass_local, before.pass_local, "{v:?}");
        for f in [ext6(50, &esp, &[44], 8), ext6(17, &dns, &[0, 60], 0)] {
            assert_eq!(steer.test_run(&f, 0).expect("run"), XDP_PASS);
        }
        // A later fragment of ESP goes to tern too (its reassembly); UDP
        // to another port goes to Linux.
        let w = steer.verdicts().expect("verdicts");
        assert_eq!((w.pass_local - v.pass_local, w.pass_no_xsk - v.pass_no_xsk), (1, 1), "{w:?}");
    });
}
