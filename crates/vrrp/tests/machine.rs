//! Every transition of RFC 5798 section 6.4, and the timers' arithmetic.

use std::net::IpAddr;
use std::time::{Duration, Instant};
use tern_vrrp::{Action, Advert, Config, DropReason, Machine, State};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

const GROUP: &str = "224.0.0.18";
const ME: &str = "10.1.0.2";
const PEER: &str = "10.1.0.3";
const LOWER_PEER: &str = "10.1.0.1";

fn cfg(priority: u8) -> Config {
    Config {
        vrid: 10,
        priority,
        interval_cs: 100,
        addrs: vec![ip("10.1.0.254")],
        primary: ip(ME),
        preempt: true,
        preempt_delay: Duration::ZERO,
        accept_mode: false,
    }
}

fn machine(priority: u8) -> Machine {
    Machine::new(cfg(priority)).expect("config")
}

/// An advertisement from `src` with `priority` and `interval_cs`.
fn advert(src: &str, priority: u8, interval_cs: u16) -> Vec<u8> {
    Advert { vrid: 10, priority, interval_cs, addrs: vec![ip("10.1.0.254")] }
        .encode(ip(src), ip(GROUP))
        .expect("encode")
}

fn rx(m: &mut Machine, now: Instant, src: &str, priority: u8, interval_cs: u16) -> Result<(), DropReason> {
    m.handle_advert(now, ip(src), ip(GROUP), 255, &advert(src, priority, interval_cs))
}

/// The priority an action's advertisement carries.
fn sent_priority(a: &Action) -> Option<u8> {
    match a {
        Action::SendAdvert(b) => {
            let ad = Advert::decode(b, ip(ME), ip(GROUP), 255).expect("our advert decodes");
            Some(ad.priority)
        }
        _ => None,
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn timers_follow_the_rfc_formulas() {
    let m = machine(100);
    // Skew = (256 - 100) * 1 s / 256 = 609.375 ms; down = 3 s + skew.
    assert_eq!(m.skew_time(), Duration::from_micros(609_375));
    assert_eq!(m.master_down_interval(), Duration::from_micros(3_609_375));
    let m = machine(255);
    assert_eq!(m.skew_time(), Duration::from_nanos(3_906_250)); // 1 s / 256
}

#[test]
fn initialize_owner_startup_becomes_master_at_once() {
    let t = Instant::now();
    let mut m = machine(255);
    assert!(m.is_owner());
    m.startup(t);
    let a = m.poll(t);
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(sent_priority(&a[0]), Some(255));
    assert_eq!(a[1], Action::BecameMaster);
    assert_eq!(m.state(), State::Master);
    assert_eq!(m.next_deadline(), Some(t + ms(1000)), "Adver_Timer = Advertisement_Interval");
    assert!(m.accepts_addresses(), "the owner accepts its addresses");
}

#[test]
fn initialize_backup_startup_arms_master_down() {
    let t = Instant::now();
    let mut m = machine(100);
    m.startup(t);
    assert_eq!(m.poll(t), [Action::BecameBackup]);
    assert_eq!(m.state(), State::Backup);
    assert_eq!(m.next_deadline(), Some(t + m.master_down_interval()));
    assert!(!m.accepts_addresses());
}

#[test]
fn backup_master_down_timer_makes_it_master() {
    let t = Instant::now();
    let mut m = machine(100);
    m.startup(t);
    m.poll(t);
    let down = t + m.master_down_interval();
    assert!(m.poll(down - ms(1)).is_empty(), "not before the timer");
    let a = m.poll(down);
    assert_eq!(sent_priority(&a[0]), Some(100));
    assert_eq!(a[1], Action::BecameMaster);
    assert_eq!(m.state(), State::Master);
    assert_eq!(m.master(), Some(ip(ME)));
    assert_eq!(m.next_deadline(), Some(down + ms(1000)));
    assert_eq!(m.stats().transitions, 2);
}

#[test]
fn backup_shutdown_sends_nothing() {
    let t = Instant::now();
    let mut m = machine(100);
    m.startup(t);
    m.poll(t);
    m.shutdown(t);
    assert_eq!(m.poll(t), [Action::Stopped]);
    assert_eq!(m.state(), State::Initialize);
    assert_eq!(m.next_deadline(), None);
    assert_eq!(rx(&mut m, t, PEER, 200, 100), Err(DropReason::NotRunning));
}

#[test]
fn backup_priority_zero_takes_over_after_skew() {
    let t = Instant::now();
    let mut m = machine(100);
    m.startup(t);
    m.poll(t);
    rx(&mut m, t, PEER, 0, 100).expect("accepted");
    assert_eq!(m.next_deadline(), Some(t + m.skew_time()));
    let a = m.poll(t + m.skew_time());
    assert_eq!(a.last(), Some(&Action::BecameMaster));
    assert_eq!(m.stats().priority_zero_rx, 1);
}

#[test]
fn backup_learns_the_masters_interval_and_resets_master_down() {
    let t = Instant::now();
    let mut m = machine(100);
    m.startup(t);
    m.poll(t);
    let t1 = t + ms(500);
    rx(&mut m, t1, PEER, 200, 10).expect("accepted");
    assert_eq!(m.master_adver_interval(), ms(100), "learnt from the advert");
    // 3 * 100 ms + (156 * 100 ms) / 256.
    assert_eq!(m.master_down_interval(), ms(300) + Duration::from_micros(60_937) + Duration::from_nanos(500));
    assert_eq!(m.next_deadline(), Some(t1 + m.master_down_interval()));
    assert_eq!(m.master(), Some(ip(PEER)));
    assert!(m.poll(t1 + ms(360)).is_empty());
    assert_eq!(m.state(), State::Backup);
}

#[test]
fn backup_without_preempt_accepts_a_lower_master() {
    let t = Instant::now();
    let mut m = Machine::new(Config { preempt: false, ..cfg(200) }).expect("config");
    m.startup(t);
    m.poll(t);
    let t1 = t + ms(3000);
    rx(&mut m, t1, PEER, 100, 100).expect("accepted");
    assert_eq!(m.next_deadline(), Some(t1 + m.master_down_interval()), "timer reset");
}

#[test]
fn backup_with_preempt_discards_a_lower_master_and_takes_over() {
    let t = Instant::now();
    let mut m = machine(200);
    m.startup(t);
    m.poll(t);
    let down = m.next_deadline().expect("timer");
    rx(&mut m, t + ms(1000), PEER, 100, 100).expect("counted");
    assert_eq!(m.next_deadline(), Some(down), "not reset: the lower master is preempted");
    assert_eq!(m.poll(down).last(), Some(&Action::BecameMaster));
}

#[test]
fn preempt_delay_holds_preemption_back() {
    let t = Instant::now();
    let mut m = Machine::new(Config { preempt_delay: ms(5000), ..cfg(200) }).expect("config");
    m.startup(t);
    m.poll(t);
    // Heard at 1 s: treated as master until 6 s.
    for s in 1..=5u64 {
        let now = t + ms(1000 * s);
        rx(&mut m, now, PEER, 100, 100).expect("accepted");
        assert_eq!(m.next_deadline(), Some(now + m.master_down_interval()), "held at {s} s");
    }
    let down = m.next_deadline().expect("timer");
    rx(&mut m, t + ms(6000), PEER, 100, 100).expect("counted");
    assert_eq!(m.next_deadline(), Some(down), "the delay is over");
    assert_eq!(m.poll(down).last(), Some(&Action::BecameMaster));
}

fn master(priority: u8) -> (Machine, Instant) {
    let t = Instant::now();
    let mut m = machine(priority);
    m.startup(t);
    let t1 = t + m.master_down_interval();
    m.poll(t1);
    assert_eq!(m.state(), State::Master);
    (m, t1)
}

#[test]
fn master_sends_on_its_adver_timer() {
    let (mut m, t) = master(100);
    for i in 1..=3u64 {
        let a = m.poll(t + ms(1000 * i));
        assert_eq!(a.len(), 1);
        assert_eq!(sent_priority(&a[0]), Some(100));
    }
    assert_eq!(m.stats().adverts_tx, 4);
}

#[test]
fn master_shutdown_sends_priority_zero() {
    let (mut m, t) = master(100);
    m.shutdown(t);
    let a = m.poll(t);
    assert_eq!(sent_priority(&a[0]), Some(0));
    assert_eq!(a[1], Action::Stopped);
    assert_eq!(m.state(), State::Initialize);
    assert_eq!(m.next_deadline(), None);
}

#[test]
fn master_answers_priority_zero_with_an_advert() {
    let (mut m, t) = master(100);
    let t1 = t + ms(300);
    rx(&mut m, t1, PEER, 0, 100).expect("accepted");
    let a = m.poll(t1);
    assert_eq!(a.len(), 1);
    assert_eq!(sent_priority(&a[0]), Some(100));
    assert_eq!(m.next_deadline(), Some(t1 + ms(1000)), "Adver_Timer reset");
    assert_eq!(m.state(), State::Master);
}

#[test]
fn master_yields_to_a_higher_priority() {
    let (mut m, t) = master(100);
    rx(&mut m, t, PEER, 150, 50).expect("accepted");
    assert_eq!(m.poll(t), [Action::BecameBackup]);
    assert_eq!(m.state(), State::Backup);
    assert_eq!(m.master_adver_interval(), ms(500));
    assert_eq!(m.next_deadline(), Some(t + m.master_down_interval()));
}

#[test]
fn master_ties_go_to_the_higher_address() {
    let (mut m, t) = master(100);
    rx(&mut m, t, LOWER_PEER, 100, 100).expect("accepted");
    assert!(m.poll(t).is_empty(), "10.1.0.1 < 10.1.0.2: stays master");
    assert_eq!(m.state(), State::Master);
    rx(&mut m, t, PEER, 100, 100).expect("accepted");
    assert_eq!(m.poll(t), [Action::BecameBackup], "10.1.0.3 > 10.1.0.2");
}

#[test]
fn master_discards_a_lower_priority() {
    let (mut m, t) = master(200);
    rx(&mut m, t, PEER, 100, 100).expect("counted");
    assert!(m.poll(t).is_empty());
    assert_eq!(m.state(), State::Master);
}

#[test]
fn tracking_lowers_the_advertised_priority_and_loses_mastership() {
    let (mut m, t) = master(200);
    m.set_tracked_down(true, 150);
    assert_eq!(m.priority(), 50);
    let a = m.poll(t + ms(1000));
    assert_eq!(sent_priority(&a[0]), Some(50));
    // A backup at 100 preempts now; we yield to its advertisement.
    rx(&mut m, t + ms(1100), PEER, 100, 100).expect("accepted");
    assert_eq!(m.poll(t + ms(1100)), [Action::BecameBackup]);
    m.set_penalty(1000);
    assert_eq!(m.priority(), 1, "never below 1");
    m.set_tracked_down(false, 150);
    assert_eq!(m.priority(), 200);
    let mut owner = machine(255);
    owner.set_tracked_down(true, 10);
    assert!(!owner.is_owner(), "an owner lowered by tracking is not the owner");
}

#[test]
fn addresses_must_match_unless_from_the_owner() {
    let t = Instant::now();
    let mut m = machine(100);
    m.startup(t);
    m.poll(t);
    let other = |p| {
        Advert { vrid: 10, priority: p, interval_cs: 100, addrs: vec![ip("10.1.0.253")] }
            .encode(ip(PEER), ip(GROUP))
            .expect("encode")
    };
    assert_eq!(m.handle_advert(t, ip(PEER), ip(GROUP), 255, &other(200)), Err(DropReason::AddressMismatch));
    assert_eq!(m.handle_advert(t, ip(PEER), ip(GROUP), 255, &other(255)), Ok(()));
    assert_eq!(m.stats().owner_mismatch, 1);
    assert_eq!(m.stats().drops[DropReason::AddressMismatch.index()], 1);
}

#[test]
fn other_vrids_own_adverts_and_bad_ttl_are_dropped_by_name() {
    let t = Instant::now();
    let mut m = machine(100);
    m.startup(t);
    m.poll(t);
    let other = Advert { vrid: 11, priority: 200, interval_cs: 100, addrs: vec![ip("10.1.0.254")] }
        .encode(ip(PEER), ip(GROUP))
        .expect("encode");
    assert_eq!(m.handle_advert(t, ip(PEER), ip(GROUP), 255, &other), Err(DropReason::WrongVrid));
    assert_eq!(rx(&mut m, t, ME, 200, 100), Err(DropReason::OwnAdvert));
    let good = advert(PEER, 200, 100);
    assert_eq!(m.handle_advert(t, ip(PEER), ip(GROUP), 64, &good), Err(DropReason::BadTtl));
    assert_eq!(m.stats().adverts_rx, 0);
    let v6 = Advert { vrid: 10, priority: 200, interval_cs: 100, addrs: vec![ip("fe80::1")] }
        .encode(ip("fe80::2"), ip("ff02::12"))
        .expect("encode");
    assert_eq!(m.handle_advert(t, ip("fe80::2"), ip("ff02::12"), 255, &v6), Err(DropReason::WrongFamily));
}

#[test]
fn accept_mode_makes_a_non_owner_master_accept() {
    let t = Instant::now();
    let mut m = Machine::new(Config { accept_mode: true, ..cfg(100) }).expect("config");
    m.startup(t);
    m.poll(t);
    assert!(!m.accepts_addresses(), "a backup never does");
    m.poll(t + m.master_down_interval());
    assert!(m.accepts_addresses());
}

#[test]
fn ipv6_groups_run_the_same_machine() {
    let t = Instant::now();
    let c = Config {
        addrs: vec![IpAddr::V6(tern_vrrp::virtual_link_local(10)), ip("2001:db8::254")],
        primary: ip("fe80::2"),
        ..cfg(100)
    };
    let mut m = Machine::new(c.clone()).expect("config");
    m.startup(t);
    m.poll(t);
    let hi = Advert { vrid: 10, priority: 200, interval_cs: 100, addrs: c.addrs.clone() }
        .encode(ip("fe80::3"), ip("ff02::12"))
        .expect("encode");
    m.handle_advert(t, ip("fe80::3"), ip("ff02::12"), 255, &hi).expect("accepted");
    assert_eq!(m.master(), Some(ip("fe80::3")));
    m.poll(t + ms(3610));
    assert_eq!(m.state(), State::Master);
    let bad = Config { addrs: vec![ip("2001:db8::254")], ..c };
    assert!(Machine::new(bad).is_err(), "the first IPv6 address must be link-local");
}

#[test]
fn configurations_are_validated() {
    assert!(Machine::new(Config { vrid: 0, ..cfg(100) }).is_err());
    assert!(Machine::new(Config { priority: 0, ..cfg(100) }).is_err());
    assert!(Machine::new(Config { interval_cs: 0, ..cfg(100) }).is_err());
    assert!(Machine::new(Config { interval_cs: 4096, ..cfg(100) }).is_err());
    assert!(Machine::new(Config { addrs: vec![], ..cfg(100) }).is_err());
    assert!(Machine::new(Config { addrs: vec![ip("2001:db8::1")], ..cfg(100) }).is_err());
}
