//! Decodes arbitrary bytes as an advertisement of either family, and feeds
//! those that decode to a running backup and master: nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use tern_vrrp::{Config, Machine};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, msg)) = data.split_first() else { return };
    let (src, dst, addr, primary): (IpAddr, IpAddr, IpAddr, IpAddr) = if sel & 1 == 0 {
        ([10, 0, 0, 9].into(), [224, 0, 0, 18].into(), [10, 0, 0, 254].into(), [10, 0, 0, 2].into())
    } else {
        let ll: IpAddr = "fe80::200:5eff:fe00:20a".parse().unwrap_or([0u8; 16].into());
        ("fe80::9".parse().unwrap_or(ll), "ff02::12".parse().unwrap_or(ll), ll, "fe80::2".parse().unwrap_or(ll))
    };
    let _ = tern_vrrp::Advert::decode(msg, src, dst, sel);
    let cfg = Config {
        vrid: msg.get(1).copied().unwrap_or(1).max(1),
        priority: (sel >> 1).max(1),
        interval_cs: 1,
        addrs: vec![addr],
        primary,
        preempt: sel & 2 != 0,
        preempt_delay: Duration::from_millis(u64::from(sel)),
        accept_mode: false,
    };
    let Ok(mut m) = Machine::new(cfg) else { return };
    let t = Instant::now();
    m.startup(t);
    let _ = m.handle_advert(t, src, dst, 255, msg);
    let _ = m.poll(t + Duration::from_millis(50));
    let _ = m.handle_advert(t + Duration::from_millis(60), src, dst, 255, msg);
    m.shutdown(t + Duration::from_millis(70));
    let _ = m.poll(t + Duration::from_millis(70));
});
