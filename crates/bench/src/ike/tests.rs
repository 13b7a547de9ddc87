use super::*;

fn args(local: &str) -> IkeArgs {
    IkeArgs {
        local: local.parse().expect("addr"),
        responder: None,
        respond: false,
        tunnels: 1,
        rate: 0.0,
        window: 1,
        auth: "psk".into(),
        psk: "a-long-enough-psk".into(),
        cert: None,
        key: None,
        ca: Vec::new(),
        proposal: "aes128gcm16-prfsha256-x25519".into(),
        esp_proposal: "aes128gcm16".into(),
        local_id: None,
        remote_id: None,
        ids: 1,
        vip: false,
        pool: None,
        encap: false,
        verify: false,
        verify_sample: 0,
        inner_dst: None,
        inner_src: None,
        milestones: Vec::new(),
        stop: false,
        timeout: 1.0,
        seconds: 1.0,
        retransmit_ms: 1000,
        json: false,
    }
}

#[test]
fn bad_options_are_errors_naming_the_option() {
    let mut a = args("127.0.0.1");
    a.proposal = "aes128-md5-modp768".into();
    let e = peer(&a, None).expect_err("refused");
    assert!(e.starts_with("--proposal"), "{e}");
    let mut a = args("127.0.0.1");
    a.esp_proposal = "nonsense".into();
    assert!(peer(&a, None).expect_err("refused").starts_with("--esp-proposal"));
    let p = peer(&args("127.0.0.1"), Some("127.0.0.2".parse().expect("addr"))).expect("fine");
    assert_eq!((p.name.as_str(), p.local_id.clone()), ("bench", Identity::Fqdn("bench.example".into())));
    assert!(initiate(&args("127.0.0.1")).expect_err("no responder").contains("--responder"));
    let mut a = args("127.0.0.1");
    a.auth = "pubkey".into();
    assert!(peer(&a, None).expect_err("no cert").contains("--cert"));
    a.auth = "rsa".into();
    assert!(peer(&a, None).expect_err("bad auth").starts_with("--auth rsa"));
    let mut a = args("127.0.0.1");
    a.responder = Some("127.0.0.2".parse().expect("addr"));
    a.verify = true;
    assert!(initiate(&a).expect_err("no inner dst").contains("--inner-dst"));
    for bad in ["10.0.0.9-10.0.0.1", "10.0.0.1", "10.0.0.1-::1", "x-10.0.0.1"] {
        assert!(parse_pool(bad).expect_err(bad).starts_with("--pool"), "{bad}");
    }
    let mut a = args("127.0.0.1");
    a.ids = 3;
    assert_eq!(peer_names(&a).expect("names"), ["bench0", "bench1", "bench2"]);
    a.auth = "pubkey".into();
    assert!(peer_names(&a).expect_err("pubkey").contains("PSK only"));
    a.ids = 0;
    assert!(peer_names(&a).is_err());
    assert_eq!(parse_pool("10.0.0.1-10.0.0.9").expect("pool").1, "10.0.0.9".parse::<IpAddr>().expect("addr"));
}

#[test]
fn the_stop_criterion_is_a_failure_or_retransmissions_above_a_thousandth() {
    assert_eq!(stop_reason(0, 0, 0), None);
    assert_eq!(stop_reason(0, 1, 1000), None, "0.1 % exactly is not above it");
    assert!(stop_reason(0, 2, 1000).expect("stop").contains("0.1 %"));
    assert_eq!(stop_reason(0, 5, 999), None, "too few messages to say");
    assert!(stop_reason(1, 0, 10).expect("stop").contains("1 failed"));
}

#[test]
fn the_reservoir_keeps_k_of_all_it_saw_from_across_the_run() {
    let mut r = Reservoir::new(50);
    let child = |id: u64| {
        let keys = |spi| tern_ike::EspKeys {
            spi,
            cipher: tern_ipsec::Cipher::Aes128Gcm,
            integ: tern_ipsec::Integ::None,
            key: tern_ipsec::Key::new(vec![0; 20]),
            integ_key: tern_ipsec::Key::new(Vec::new()),
        };
        Box::new(ChildSa {
            peer: "bench".into(),
            tunnel: None,
            ike_sa: id,
            id,
            inbound: keys(1),
            outbound: keys(2),
            esn: false,
            local: "10.0.0.1".parse().expect("addr"),
            remote: "10.0.0.2".parse().expect("addr"),
            udp_encap: None,
            local_ts: Vec::new(),
            remote_ts: Vec::new(),
            virtual_ip: None,
            soft_secs: None,
            hard_secs: None,
            replaces: None,
        })
    };
    for id in 0..10_000 {
        r.offer(child(id));
    }
    assert_eq!(r.kept.len(), 50);
    let late = r.kept.iter().filter(|c| c.id >= 5_000).count();
    // Uniform: about half from the second half (binomial, p = 0.5, n = 50:
    // outside 10..=40 has probability < 1e-5).
    assert!((10..=40).contains(&late), "{late} of 50 from the second half");
    let mut ids: Vec<u64> = r.kept.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 50, "no tunnel twice");
}

/// Loopback addresses of their own for this test (ports 500/4500 are
/// bound on them; other tests may run at the same time).
fn pair_of_addrs(n: u8) -> (String, String) {
    let b = (std::process::id() % 200) as u8 + 20;
    (format!("127.{b}.{n}.1"), format!("127.{b}.{n}.2"))
}

/// The generator against the bare responder over loopback: every tunnel
/// gets a virtual IP and is verified by an echo through its ESP SAs (raw
/// ESP, or ESP in UDP 4500 with `encap`), and a sample is verified again
/// after all are up.
fn verified_against_the_bare_responder(n: u8, encap: bool) {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: ports 500/4500 and raw ESP need root");
        return;
    }
    let (gen_addr, resp_addr) = pair_of_addrs(n);
    let mut r = args(&resp_addr);
    r.respond = true;
    r.verify = true;
    r.pool = Some("10.77.0.10-10.77.0.200".into());
    r.seconds = 4.0;
    let resp = std::thread::spawn(move || respond(&r));
    let mut g = args(&gen_addr);
    g.responder = Some(resp_addr.parse().expect("addr"));
    g.tunnels = 40;
    g.window = 8;
    // Four identities in turn (as against charon) on one of the two.
    g.ids = if encap { 4 } else { 1 };
    g.vip = true;
    g.encap = encap;
    g.verify = true;
    g.verify_sample = 5;
    g.inner_dst = Some(Ipv4Addr::new(10, 77, 0, 1));
    g.milestones = vec![20, 40];
    g.timeout = 3.0;
    // The responder binds first: retransmissions cover a lost first
    // IKE_SA_INIT, so no wait is needed.
    g.retransmit_ms = 100;
    let rep = initiate(&g).expect("initiator");
    let resp = resp.join().expect("responder thread").expect("responder");
    let v = rep.verify.as_ref().expect("verify report");
    assert_eq!((rep.established, v.verified, rep.failed), (40, 40, 0), "{rep}");
    assert!(rep.setups_per_sec > 0.0 && v.latency_us_p50 > 0, "{rep}");
    let s = rep.sample.as_ref().expect("sample report");
    assert_eq!((s.probed, s.verified), (5, 5), "{rep}");
    assert_eq!(rep.milestones.iter().map(|m| m.tunnels).collect::<Vec<_>>(), vec![20, 40]);
    assert_eq!(resp.established, 40);
    assert!(resp.esp_answered >= 45, "{resp}");
}

#[test]
fn every_tunnel_is_verified_by_raw_esp_through_it() {
    verified_against_the_bare_responder(1, false);
}

#[test]
fn every_tunnel_is_verified_by_esp_in_udp_through_it() {
    verified_against_the_bare_responder(2, true);
}

#[test]
fn a_tunnel_whose_echo_is_not_answered_is_not_counted() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: ports 500/4500 and raw ESP need root");
        return;
    }
    let (gen_addr, resp_addr) = pair_of_addrs(3);
    // A responder that sets tunnels up but keeps no SAs to answer with.
    let mut r = args(&resp_addr);
    r.respond = true;
    r.pool = Some("10.77.0.10-10.77.0.20".into());
    r.seconds = 5.0;
    let resp = std::thread::spawn(move || respond(&r));
    let mut g = args(&gen_addr);
    g.responder = Some(resp_addr.parse().expect("addr"));
    g.tunnels = 2;
    g.window = 2;
    g.vip = true;
    g.verify = true;
    g.inner_dst = Some(Ipv4Addr::new(10, 77, 0, 1));
    g.timeout = 4.5;
    g.retransmit_ms = 100;
    let rep = initiate(&g).expect("initiator");
    resp.join().expect("responder thread").expect("responder");
    let v = rep.verify.as_ref().expect("verify report");
    assert_eq!((rep.established, v.verified, v.failed, rep.failed), (2, 0, 2, 2), "{rep}");
    assert_eq!(rep.setups_per_sec, 0.0);
    assert!(rep.failures.keys().any(|k| k.contains("no answer after 3 probes")), "{rep}");
}
