//! A scrape of a running router (workers, ports, histograms, FIB) read by
//! the strict Prometheus text-format checker: what `render` writes for
//! real counters, not only for the empty tables the unit tests use.

mod common;
mod ops;

use ops::*;
use std::io::{Read, Write};
use std::net::TcpStream;

#[test]
fn a_live_scrape_is_well_formed_prometheus_text() {
    let t = Running::start(CONFIG_TEXT, true);
    let addr = t.metrics.expect("metrics address");
    assert!(t.lan.inject(&udp_to("198.18.0.1")));
    t.answer_arp_for_b();
    assert_eq!(Running::recv(&t.wan, 1).len(), 1);
    for _ in 0..50 {
        assert!(t.lan.inject(&udp_to("198.18.7.7")));
    }
    assert_eq!(Running::recv(&t.wan, 50).len(), 50);

    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: tern\r\n\r\n").expect("request");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("answer");
    let (head, text) = answer.split_once("\r\n\r\n").expect("http");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    if let Err(e) = tern_control::metrics::check_exposition(text) {
        panic!("{e}\n{text}");
    }
    // The page has what the checker's histogram rules apply to.
    for family in ["tern_worker_batch_packets", "tern_worker_loop_gap_seconds"] {
        assert!(text.contains(&format!("\n# TYPE {family} histogram\n")), "{family}");
        assert!(text.contains(&format!("\n{family}_bucket{{worker=\"0\",le=\"+Inf\"}} ")), "{family}");
    }
}
