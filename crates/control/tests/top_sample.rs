//! `top_sample` (what `tern top` polls) against a running router on
//! memory ports: totals since the start that move by exactly the traffic
//! sent between two samples, on tern's own clock, unmoved by `stats clear`.

mod common;
mod ops;

use ops::*;
use tern_control::api::client::Client;
use tern_control::api::types::*;
use tern_control::api::*;

fn sample(c: &mut Client) -> TopSample {
    match c.call(&Command::TopSample {}) {
        Ok(Reply::TopSample(s)) => s,
        other => panic!("{other:?}"),
    }
}

fn port<'a>(s: &'a TopSample, name: &str) -> &'a PortCounters {
    &s.interfaces.iter().find(|i| i.name == name).unwrap_or_else(|| panic!("{name} in {s:?}")).counters
}

fn node(s: &TopSample, name: &str) -> TopNode {
    s.nodes.iter().find(|n| n.node == name).cloned().unwrap_or_else(|| panic!("{name} in {s:?}"))
}

#[test]
fn a_sample_counts_the_traffic_between_two() {
    let t = Running::start(CONFIG_TEXT, false);
    let mut c = t.client();
    let a = sample(&mut c);
    assert!(a.tsc_per_ns > 0.0, "{a:?}");
    assert_eq!(a.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(a.interfaces.iter().map(|i| i.lane.as_deref()).collect::<Vec<_>>(), [Some("memory"); 2]);
    assert!(a.interfaces.iter().all(|i| i.up), "{a:?}");
    assert!(a.fib.v4_routes >= 3, "connected, local and the static route: {:?}", a.fib);
    assert!(!a.workers.is_empty());
    assert!(a.errors.iter().all(|e| e.count > 0), "zero counters are left out: {:?}", a.errors);

    // Three packets through: the first waits for ARP, which host B answers.
    for _ in 0..3 {
        assert!(t.lan.inject(&udp_to("198.18.0.7")));
    }
    t.answer_arp_for_b();
    Running::recv(&t.wan, 3);
    // `stats clear` changes what `stats show` starts from, not the samples.
    assert!(c.call(&Command::StatsClear {}).is_ok());
    let b = sample(&mut c);
    assert!(b.uptime_ns > a.uptime_ns, "tern's clock moves on");
    assert_eq!(port(&b, "lan").rx_packets - port(&a, "lan").rx_packets, 3);
    // The three, and the ARP request before them.
    assert_eq!(port(&b, "wan").tx_packets - port(&a, "wan").tx_packets, 4);
    let (n0, n1) = (node(&a, "ip4-lookup"), node(&b, "ip4-lookup"));
    assert!(n1.packets - n0.packets >= 3, "{n0:?} -> {n1:?}");
    assert!(n1.calls > n0.calls && n1.cycles > n0.cycles, "{n0:?} -> {n1:?}");
    let rx: u64 =
        b.workers.iter().map(|w| w.rx_packets).sum::<u64>() - a.workers.iter().map(|w| w.rx_packets).sum::<u64>();
    assert_eq!(rx, 4, "the three and the ARP reply");
    assert!(b.workers.iter().all(|w| w.loops >= w.busy_loops && w.uptime_ns >= w.idle_ns), "{:?}", b.workers);
}
