//! The metrics endpoint stops where nothing can connect to it: in a network
//! namespace whose loopback is down (a host's firewall that drops loopback
//! traffic is the same case). The stop used to wake its `accept` by
//! connecting, which failed there, and `tern run` then never ended.

use std::sync::mpsc;
use std::time::Duration;
use tern_control::metrics::{ControlFacts, MetricsServer, MetricsSource};
use tern_nodes::state::IfTable;
use tern_rcu::Published;
use tern_testkit::netns::{Netns, enter, privileged};

#[test]
fn the_endpoint_stops_with_loopback_down() {
    if !privileged("network namespaces") {
        return;
    }
    let ns = Netns::unique("mstop");
    // The testkit brings loopback up in its namespaces; this one has it down.
    ns.ip(&["link", "set", "lo", "down"]);
    assert!(!ns.ip(&["link", "show", "lo"]).contains(",UP"), "lo is down");
    let (tx, rx) = mpsc::channel();
    let name = ns.name.clone();
    // Not a scoped thread: a stop that hangs must fail the test, not hold it.
    std::thread::spawn(move || {
        enter(&name).expect("enter the namespace");
        let src = MetricsSource {
            workers: Vec::new(),
            ifaces: Published::new(IfTable::default()),
            facts: Published::new(ControlFacts::default()),
        };
        let m = MetricsServer::start("127.0.0.1:0", src).expect("bind on 127.0.0.1 with lo down");
        // Nothing can connect here: the old wake-up could not reach it.
        assert!(std::net::TcpStream::connect_timeout(&m.local_addr(), Duration::from_secs(1)).is_err());
        drop(m);
        let _ = tx.send(());
    });
    // A bound on a hang, not a speed: the stop returns at all.
    assert!(rx.recv_timeout(Duration::from_secs(60)).is_ok(), "the metrics endpoint's stop hangs");
}
