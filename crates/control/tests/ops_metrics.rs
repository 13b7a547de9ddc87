//! The Prometheus endpoint scraped every second while traffic flows: every
//! counter only grows, and at the end the counters equal the traffic sent.

mod common;
mod ops;

use ops::*;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn scrape(addr: SocketAddr) -> HashMap<String, f64> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: tern\r\n\r\n").expect("request");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("answer");
    let (head, text) = body.split_once("\r\n\r\n").expect("http");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    let mut m = HashMap::new();
    let mut typed = String::new();
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            typed = t.split_whitespace().next().unwrap_or_default().to_string();
            continue;
        }
        if l.starts_with('#') || l.is_empty() {
            continue;
        }
        let (k, v) = l.rsplit_once(' ').expect("sample");
        assert!(k.starts_with(&typed), "sample {k} outside its TYPE {typed}");
        m.insert(k.to_string(), v.parse::<f64>().expect("number"));
    }
    m
}

fn get(m: &HashMap<String, f64>, k: &str) -> f64 {
    *m.get(k).unwrap_or_else(|| panic!("no {k} in the scrape"))
}

#[test]
fn metrics_scraped_every_second_under_load_are_monotonic_and_match_the_traffic() {
    let t = Running::start(CONFIG_TEXT, true);
    let addr = t.metrics.expect("metrics address");
    // Resolve host B first, so every later packet is forwarded.
    assert!(t.lan.inject(&udp_to("198.18.0.1")));
    t.answer_arp_for_b();
    assert_eq!(Running::recv(&t.wan, 1).len(), 1);

    let sent = Arc::new(AtomicU64::new(0));
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let gen_thread = {
        let (lan, wan, sent, received, stop) =
            (t.lan.clone(), t.wan.clone(), Arc::clone(&sent), Arc::clone(&received), Arc::clone(&stop));
        std::thread::spawn(move || {
            let frame = udp_to("198.18.7.7");
            while !stop.load(Ordering::Relaxed) {
                // 100 frames every 5 ms: about 20k packets per second.
                for _ in 0..100 {
                    if lan.inject(&frame) {
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
                received.fetch_add(wan.take_sent().len() as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    let mut prev: Option<HashMap<String, f64>> = None;
    let mut scrapes = 0;
    // Five scrapes a second apart, however long each takes on a loaded
    // machine (a loop of 4 s ends after 3 when each takes half a second).
    while scrapes < 5 {
        let m = scrape(addr);
        if let Some(p) = &prev {
            for (k, v) in &m {
                let counter = k.split('{').next().is_some_and(|n| n.ends_with("_total") || n.contains("_bucket"));
                if counter && let Some(old) = p.get(k) {
                    assert!(v >= old, "{k} went back from {old} to {v}");
                }
            }
            let rx = get(&m, "tern_interface_rx_packets_total{interface=\"lan\"}");
            assert!(rx > get(p, "tern_interface_rx_packets_total{interface=\"lan\"}"), "traffic is flowing");
        }
        prev = Some(m);
        scrapes += 1;
        std::thread::sleep(Duration::from_secs(1));
    }
    stop.store(true, Ordering::Relaxed);
    gen_thread.join().expect("generator");
    let sent = sent.load(Ordering::Relaxed);
    assert!(sent > 1000, "{scrapes} scrapes, {sent} packets");

    // Everything injected is received, forwarded and counted.
    let lan_rx = 1 + sent; // the first packet, then the load
    let deadline = Instant::now() + Duration::from_secs(20);
    let m = loop {
        let m = scrape(addr);
        // A scrape reads port and node counters one after the other while
        // the worker may be between them: wait for both to settle.
        if get(&m, "tern_interface_rx_packets_total{interface=\"lan\"}") as u64 == lan_rx
            && get(&m, "tern_interface_tx_packets_total{interface=\"wan\"}") as u64 == 2 + sent
            && get(&m, "tern_node_packets_total{node=\"ip4-input\",worker=\"0\"}") as u64 >= lan_rx
        {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "counters never reached the traffic sent ({sent}): {:?}",
            m.get("tern_interface_rx_packets_total{interface=\"lan\"}")
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let got = received.load(Ordering::Relaxed) + t.wan.take_sent().len() as u64;
    assert_eq!(got, sent, "host B got every forwarded packet");
    assert_eq!(
        get(&m, "tern_node_packets_total{node=\"ip4-input\",worker=\"0\"}") as u64,
        lan_rx,
        "each packet enters ip4-input once"
    );
    assert_eq!(get(&m, "tern_interface_tx_packets_total{interface=\"lan\"}"), 0.0);
    assert_eq!(get(&m, "tern_interface_tx_dropped_total{interface=\"wan\"}"), 0.0);
    let busy = get(&m, "tern_worker_busy_loops_total{worker=\"0\"}");
    assert_eq!(get(&m, "tern_worker_batch_packets_count{worker=\"0\"}"), busy, "histogram counts busy loops");
    assert_eq!(
        get(&m, "tern_worker_batch_packets_sum{worker=\"0\"}") as u64,
        lan_rx + 1,
        "every received packet (+ARP reply)"
    );
    // Loop gaps: one per loop but the first, in cumulative buckets.
    let gaps = get(&m, "tern_worker_loop_gap_seconds_count{worker=\"0\"}");
    assert!(gaps > 0.0 && gaps <= get(&m, "tern_worker_loops_total{worker=\"0\"}"), "{gaps}");
    assert!(
        get(&m, "tern_worker_loop_gap_seconds_bucket{worker=\"0\",le=\"0.00001\"}")
            <= get(&m, "tern_worker_loop_gap_seconds_bucket{worker=\"0\",le=\"0.01\"}")
    );
    assert_eq!(get(&m, "tern_worker_loop_gap_seconds_bucket{worker=\"0\",le=\"+Inf\"}"), gaps);
    assert!(get(&m, "tern_worker_loop_gap_max_seconds{worker=\"0\"}") > 0.0);
    assert_eq!(
        get(&m, "tern_fib_routes{family=\"ipv4\"}") as u64,
        2 * 3 + 1 + 1,
        "per interface connected, local, broadcast; the static route; host B"
    );
    assert_eq!(get(&m, "tern_neighbors"), 1.0);
    assert_eq!(get(&m, "tern_up"), 1.0);
    // Node time in seconds is the node's cycles over the TSC's rate (this
    // process's calibration: the router runs in it), to the nanosecond
    // the exposition keeps.
    let tsc = tern_intrin::tsc_per_ns();
    for node in ["ip4-input", "ip4-lookup"] {
        let k = |f: &str| format!("{f}{{node=\"{node}\",worker=\"0\"}}");
        let (cycles, secs) = (get(&m, &k("tern_node_cycles_total")), get(&m, &k("tern_node_seconds_total")));
        assert!(cycles > 0.0, "{node} ran");
        assert!((secs * 1e9 * tsc - cycles).abs() <= tsc, "{node}: {secs} s against {cycles} cycles at {tsc}/ns");
    }

    // Other paths and methods.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET /nope HTTP/1.1\r\n\r\n").expect("write");
    let mut b = String::new();
    s.read_to_string(&mut b).expect("read");
    assert!(b.starts_with("HTTP/1.1 404"), "{b}");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"POST /metrics HTTP/1.1\r\n\r\n").expect("write");
    let mut b = String::new();
    s.read_to_string(&mut b).expect("read");
    assert!(b.starts_with("HTTP/1.1 405"), "{b}");
}
