//! Shared by the tests that run a [`Router`] over memory ports.
#![allow(dead_code)]

pub mod pkt;

use std::time::{Duration, Instant};
use tern_control::router::Router;

/// Two memory-port interfaces: `lan` 10.0.1.1/24 (02:00:00:00:01:01) and
/// `wan` 10.0.2.1/24 (02:00:00:00:02:01).
pub const LAN_WAN: &str = r#"
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
"#;

/// Drives the router's control loop until `f` holds (10 s at most).
pub fn poll_until(router: &mut Router, what: &str, f: impl Fn(&Router) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f(router) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        if !router.poll() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
