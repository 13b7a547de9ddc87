//! `tern capture NODE`: the packets entering a graph node, not just an
//! interface's frames.

mod common;

use common::pkt::*;
use std::path::Path;
use std::time::{Duration, Instant};
use tern_control::api::{CaptureIdArgs, CaptureStartArgs, Command, Reply};
use tern_control::commands::{OpsState, execute};
use tern_control::router::Router;

const CONFIG: &str = common::LAN_WAN;

#[test]
fn node_capture_copies_what_enters_the_node() {
    let plan = tern_control::config::parse(CONFIG, "t.toml", Path::new(".")).expect("config");
    let mut router = Router::start(plan).expect("router");
    let mut st = OpsState::new(None);
    let start = CaptureStartArgs { target: "ip4-local".into(), count: Some(2), ..CaptureStartArgs::default() };
    let id = match execute(&mut router, &mut st, Command::CaptureStart(start)).expect("capture starts") {
        Reply::Capture(b) => b.id,
        other => panic!("unexpected {other:?}"),
    };
    let host: [u8; 6] = [2, 0, 0, 0, 1, 0xaa];
    let a = |s: &str| s.parse().expect("ip");
    // One packet for tern (enters ip4-local), one routed elsewhere (does not).
    let ping =
        eth([2, 0, 0, 0, 1, 1], host, 0x0800, &ipv4(a("10.0.1.2"), a("10.0.1.1"), 1, 64, &icmp_echo(8, 1, 1, b"node")));
    let other = eth([2, 0, 0, 0, 1, 1], host, 0x0800, &ipv4(a("10.0.1.2"), a("10.0.2.9"), 17, 64, b"12345678"));
    let lan = &router.mem_ports("lan").expect("lan")[0];
    assert!(lan.inject(&other));
    assert!(lan.inject(&ping));
    assert!(lan.inject(&ping));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut frames = Vec::new();
    while frames.len() < 2 {
        assert!(Instant::now() < deadline, "captured only {}", frames.len());
        router.poll();
        st.poll(&router);
        if let Ok(Reply::Capture(b)) = execute(&mut router, &mut st, Command::CaptureRead(CaptureIdArgs { id })) {
            frames.extend(b.frames);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(frames.len(), 2);
    // ip4-input trimmed the Ethernet padding: 14 + 20 + 12 bytes remain.
    let want: String = ping[..46].iter().map(|b| format!("{b:02x}")).collect();
    for f in &frames {
        assert_eq!(f.data, want, "the echo request as ip4-local received it");
    }
    // An unknown name is refused clearly.
    let bad = CaptureStartArgs { target: "no-such-thing".into(), ..CaptureStartArgs::default() };
    let e = execute(&mut router, &mut st, Command::CaptureStart(bad)).expect_err("refused");
    assert!(e.to_string().contains("no interface or node"), "{e}");
    router.shutdown();
}
