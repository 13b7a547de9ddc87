//! tern against tern over IKEv2 (issue 40), in Linux mode (kernel sockets)
//! and in standalone mode (IKE through the engine): two routers,
//! each in its own network namespace with a host behind it, keyed by
//! `[[ike]]` (PSK) over a veth pair, set up their route-based tunnel and
//! carry pings between the hosts; `ike_sa_show` lists the IKE SA and its
//! child SA with the data-plane SA ids `ipsec_sa_show` has; terminate
//! removes the SAs from the data plane (and the initiator sets up a new
//! one on request); a reload that removes the peer removes its SAs, one
//! that adds it back sets the tunnel up again.
//!
//! ha (10.0.1.2) -- lan0 [tern A 10.2.0.1] wan0 ==== wan0 [tern B 10.2.0.9] lan0 -- hb (10.0.2.2)
//!
//! Needs root and iproute2; skipped (with a message) otherwise.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tern_control::api::{
    Command, IkeInitiateArgs, IkeSaShowArgs, IkeTerminateArgs, InterfaceSetArgs, IpsecSaShowArgs, Reply,
};
use tern_control::commands::{self, OpsState};
use tern_control::router::Router;
use tern_testkit::netns::{Netns, Veth, privileged};

const PSK: &str = "tern-ike-service-test-psk";

fn config(me: char, dir: &Path, with_peer: bool, linux: bool) -> String {
    config_rekey(me, dir, with_peer, linux, 3600)
}

fn config_rekey(me: char, dir: &Path, with_peer: bool, linux: bool, child_rekey: u64) -> String {
    let (wan, peer, lan, far, start) = match me {
        'a' => ("10.2.0.1", "10.2.0.9", "10.0.1.1/24", "10.0.2.0/24", true),
        _ => ("10.2.0.9", "10.2.0.1", "10.0.2.1/24", "10.0.1.0/24", false),
    };
    // Linux mode runs two IKE threads (shards), standalone one.
    let mut c =
        if linux { "[linux]\nmode = \"linux\"\n\n[ike_service]\nthreads = 2\n".to_string() } else { String::new() };
    c += &format!(
        r#"
[[interface]]
name = "lan0"
device = "lan0"
driver = "afpacket"
addresses = ["{lan}"]

[[interface]]
name = "wan0"
device = "wan0"
driver = "afpacket"
addresses = ["{wan}/24"]

[api]
socket = "{dir}/{me}.sock"

[metrics]
listen = ""
"#,
        dir = dir.display(),
    );
    if with_peer {
        c += &format!(
            r#"
[[tunnel]]
name = "ipsec0"
type = "ipsec"
local = "{wan}"
remote = "{peer}"
addresses = ["172.16.1.{n}/30"]

[[route]]
prefix = "{far}"
interface = "ipsec0"

[[ike]]
name = "{other}"
local = "{wan}"
remote = "{peer}"
local_id = "{me}.tern.example"
remote_id = "{other}.tern.example"
auth = "psk"
psk = "{PSK}"
proposals = ["aes128gcm16-prfsha256-x25519"]
esp_proposals = ["aes128gcm16"]
tunnel = "ipsec0"
start = {start}
child_rekey_secs = {child_rekey}
"#,
            other = if me == 'a' { 'b' } else { 'a' },
            n = if me == 'a' { 1 } else { 2 },
        );
    }
    c
}

type Job = Box<dyn FnOnce(&mut Router, &mut OpsState) + Send>;

/// A router running in its namespace on a thread of its own, its control
/// loop polled between the jobs sent to it.
struct Tern {
    jobs: mpsc::Sender<Job>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Tern {
    fn start(ns: &Netns, path: PathBuf) -> Tern {
        let (tx, rx) = mpsc::channel::<Job>();
        let (up_tx, up_rx) = mpsc::channel();
        let name = ns.name.clone();
        let thread = std::thread::spawn(move || {
            tern_testkit::netns::enter(&name).expect("enter the namespace");
            let plan = tern_control::config::load(&path).expect("config");
            let mut r = match Router::start(plan) {
                Ok(r) => r,
                Err(e) => {
                    let _ = up_tx.send(Err(e.to_string()));
                    return;
                }
            };
            let _ = up_tx.send(Ok(()));
            let mut st = OpsState::new(Some(path));
            loop {
                r.poll();
                match rx.recv_timeout(Duration::from_millis(2)) {
                    Ok(job) => job(&mut r, &mut st),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            r.shutdown();
        });
        up_rx.recv().expect("router thread").expect("tern starts");
        Tern { jobs: tx, thread: Some(thread) }
    }

    fn call(&self, cmd: Command) -> Result<Reply, String> {
        let (tx, rx) = mpsc::channel();
        self.jobs
            .send(Box::new(move |r, st| {
                let _ = tx.send(commands::execute(r, st, cmd).map_err(|e| e.to_string()));
            }))
            .expect("router alive");
        rx.recv_timeout(Duration::from_secs(30)).expect("an answer")
    }

    fn ike_sas(&self) -> Vec<tern_control::api::types::IkeSaView> {
        self.ike_sa_page(None, None)
    }

    /// A page of `ike_sa_show`.
    fn ike_sa_page(&self, after: Option<u64>, limit: Option<usize>) -> Vec<tern_control::api::types::IkeSaView> {
        match self.call(Command::IkeSaShow(IkeSaShowArgs { after, limit, ..Default::default() })) {
            Ok(Reply::IkeSas(v)) => v,
            other => panic!("ike_sa_show: {other:?}"),
        }
    }

    /// The data plane's SA ids.
    fn sa_ids(&self) -> Vec<u32> {
        match self.call(Command::IpsecSaShow(IpsecSaShowArgs::default())) {
            Ok(Reply::IpsecSas(l)) => l.sas.iter().map(|s| s.id).collect(),
            other => panic!("ipsec_sa_show: {other:?}"),
        }
    }
}

impl Drop for Tern {
    fn drop(&mut self) {
        let (tx, _) = mpsc::channel();
        self.jobs = tx;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ping(ns: &Netns, dst: &str) -> bool {
    ns.exec_ok(&["ping", "-c", "1", "-W", "1", dst])
}

fn established(t: &Tern) -> Option<tern_control::api::types::IkeSaView> {
    t.ike_sas().into_iter().find(|s| s.state == "established" && s.children.iter().any(|c| c.sa_in.is_some()))
}

/// Linux mode: IKE on kernel sockets, two engine threads a side.
#[test]
fn two_terns_key_a_tunnel_with_ike_in_linux_mode() {
    two_terns(true, "l");
}

/// Standalone mode: IKE through the engine (`ike_local::EngineUdp`).
#[test]
fn two_terns_key_a_tunnel_with_ike_in_standalone_mode() {
    two_terns(false, "s");
}

fn two_terns(linux: bool, tag: &str) {
    if !privileged("the IKE service test (network namespaces)") {
        return;
    }
    let ha = Netns::unique(&format!("ikesvc{tag}ha"));
    let ra = Netns::unique(&format!("ikesvc{tag}ra"));
    let rb = Netns::unique(&format!("ikesvc{tag}rb"));
    let hb = Netns::unique(&format!("ikesvc{tag}hb"));
    Veth::new(&ha, "eth0", &ra, "lan0").tx_offload_off().create();
    Veth::new(&ra, "wan0", &rb, "wan0").tx_offload_off().create();
    Veth::new(&hb, "eth0", &rb, "lan0").tx_offload_off().create();
    for (h, n) in [(&ha, 1), (&hb, 2)] {
        h.ip(&["link", "set", "eth0", "up"]);
        h.ip(&["addr", "add", &format!("10.0.{n}.2/24"), "dev", "eth0"]);
        h.ip(&["route", "add", "default", "via", &format!("10.0.{n}.1")]);
    }
    for r in [&ra, &rb] {
        r.ip(&["link", "set", "lan0", "up"]);
        r.ip(&["link", "set", "wan0", "up"]);
    }
    let dir = std::env::temp_dir().join(format!("ikesvc{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (pa, pb) = (dir.join("a.toml"), dir.join("b.toml"));
    std::fs::write(&pa, config('a', &dir, true, linux)).expect("config a");
    std::fs::write(&pb, config('b', &dir, true, linux)).expect("config b");
    let b = Tern::start(&rb, pb.clone());
    let a = Tern::start(&ra, pa.clone());

    // The hosts' routers know them (Linux mode: the kernel's neighbours).
    until("ha reaches its router", 30, || ping(&ha, "10.0.1.1"));
    until("hb reaches its router", 30, || ping(&hb, "10.0.2.1"));

    // A initiates at start; both sides see the IKE SA and the child SA
    // installed in the data plane.
    until("an IKE SA with its child SA on both sides", 30, || established(&a).is_some() && established(&b).is_some());
    let sa_a = established(&a).expect("A's IKE SA");
    assert!(sa_a.initiator && sa_a.peer == "b", "{sa_a:?}");
    assert_eq!(sa_a.remote, "10.2.0.9:500");
    assert!(sa_a.proposal.contains("aes128gcm16") && sa_a.proposal.contains("x25519"), "{}", sa_a.proposal);
    assert_eq!(sa_a.remote_id, "b.tern.example");
    let child = &sa_a.children[0];
    let (in_id, out_id) = (child.sa_in.expect("installed"), child.sa_out.expect("installed"));
    assert!(in_id >= 1 << 31 && out_id >= 1 << 31, "IKE's SA ids: {in_id}, {out_id}");
    let ids = a.sa_ids();
    assert!(ids.contains(&in_id) && ids.contains(&out_id), "{ids:?}");
    // The SPIs agree across the tunnel: what A sends with, B receives on.
    let sa_b = established(&b).expect("B's IKE SA");
    assert!(!sa_b.initiator);
    assert_eq!((sa_b.children[0].spi_in, sa_b.children[0].spi_out), (child.spi_out, child.spi_in));

    // Pings between the hosts ride the tunnel both ways.
    until("ha pings hb through the tunnel", 30, || ping(&ha, "10.0.2.2"));
    assert!(ha.exec_ok(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.2.2"]), "ping through the tunnel");
    assert!(hb.exec_ok(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.1.2"]), "ping back");
    let tunnels = match a.call(Command::IpsecTunnelShow {}) {
        Ok(Reply::IpsecTunnels(t)) => t,
        other => panic!("{other:?}"),
    };
    let t = tunnels.iter().find(|t| t.name == "ipsec0").expect("ipsec0");
    assert_eq!(t.sa_out, out_id);
    assert!(t.tx_packets >= 3 && t.rx_packets >= 3, "{t:?}");
    // An IKE-keyed tunnel's MTU is set live within what any algorithm IKE
    // may choose leaves room for.
    a.call(Command::InterfaceSet(InterfaceSetArgs { name: "ipsec0".into(), up: None, mtu: Some(1400) })).expect("mtu");
    let e = a
        .call(Command::InterfaceSet(InterfaceSetArgs { name: "ipsec0".into(), up: None, mtu: Some(1990) }))
        .expect_err("too large");
    assert!(e.contains("MTU 1990"), "{e}");
    // The key shows nowhere.
    match a.call(Command::ConfigShow {}) {
        Ok(Reply::Text { text }) => assert!(!text.contains(PSK), "config show leaks the PSK"),
        other => panic!("{other:?}"),
    }
    match a.call(Command::IkePeerShow {}) {
        Ok(Reply::IkePeers(p)) => {
            assert_eq!(p.len(), 1);
            assert_eq!((p[0].name.as_str(), p[0].auth.as_str(), p[0].ike_sas, p[0].child_sas), ("b", "psk", 1, 1));
            assert!(!format!("{p:?}").contains(PSK));
        }
        other => panic!("{other:?}"),
    }

    // Pages of `ike_sa_show`: after an id, at most a number.
    let all = a.ike_sas();
    assert!(all.iter().any(|s| s.id == sa_a.id), "{all:?}");
    let first = all.first().map(|s| s.id).expect("an SA");
    assert_eq!(a.ike_sa_page(None, Some(1)).iter().map(|s| s.id).collect::<Vec<_>>(), [first]);
    assert!(a.ike_sa_page(None, Some(0)).is_empty());
    let rest: Vec<u64> = a.ike_sa_page(Some(first), None).iter().map(|s| s.id).collect();
    assert_eq!(rest, all.iter().skip(1).map(|s| s.id).collect::<Vec<_>>());
    let last = all.last().map(|s| s.id).expect("an SA");
    assert!(a.ike_sa_page(Some(last), None).is_empty(), "nothing after the last");

    // Terminate: the SAs leave the data plane on both sides.
    let e = a.call(Command::IkeTerminate(IkeTerminateArgs { peer: "nobody".into(), id: None })).expect_err("no peer");
    assert!(e.contains("no [[ike]] peer"), "{e}");
    a.call(Command::IkeTerminate(IkeTerminateArgs { peer: "b".into(), id: Some(sa_a.id) })).expect("terminate");
    until("A's SAs removed", 30, || {
        let ids = a.sa_ids();
        !ids.contains(&in_id) && !ids.contains(&out_id)
    });
    until("B's SAs removed", 30, || b.sa_ids().iter().all(|&id| id < 1 << 31));
    assert!(!ping(&ha, "10.0.2.2"), "no tunnel, no ping");

    // Initiate again on request.
    a.call(Command::IkeInitiate(IkeInitiateArgs { peer: "b".into() })).expect("initiate");
    until("a new IKE SA", 30, || established(&a).is_some_and(|s| s.id != sa_a.id));
    until("pings again", 30, || ping(&ha, "10.0.2.2"));

    // A reload without the peer (and its tunnel) removes its SAs; with
    // them again, the tunnel comes back.
    std::fs::write(&pa, config('a', &dir, false, linux)).expect("config a");
    let r = a.call(Command::ConfigReload {}).expect("reload");
    assert!(format!("{r:?}").contains("ike peers changed"), "{r:?}");
    until("SAs gone with the peer", 30, || a.sa_ids().is_empty());
    assert!(a.ike_sas().is_empty());
    std::fs::write(&pa, config('a', &dir, true, linux)).expect("config a");
    a.call(Command::ConfigReload {}).expect("reload");
    until("the peer back", 30, || established(&a).is_some());
    until("pings after the reload", 30, || ping(&ha, "10.0.2.2"));

    drop(a);
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Child SAs rekeyed every 5 s under a ping every 50 ms: no ping lost
/// across two rekeys (the new SAs are installed and bound before the old
/// ones go), and the tunnel's SAs are new ones afterwards.
#[test]
fn child_sas_rekey_under_traffic_without_loss() {
    if !privileged("the IKE rekey test (network namespaces)") {
        return;
    }
    let ha = Netns::unique("ikesvcrha");
    let ra = Netns::unique("ikesvcrra");
    let rb = Netns::unique("ikesvcrrb");
    let hb = Netns::unique("ikesvcrhb");
    Veth::new(&ha, "eth0", &ra, "lan0").tx_offload_off().create();
    Veth::new(&ra, "wan0", &rb, "wan0").tx_offload_off().create();
    Veth::new(&hb, "eth0", &rb, "lan0").tx_offload_off().create();
    for (h, n) in [(&ha, 1), (&hb, 2)] {
        h.ip(&["link", "set", "eth0", "up"]);
        h.ip(&["addr", "add", &format!("10.0.{n}.2/24"), "dev", "eth0"]);
        h.ip(&["route", "add", "default", "via", &format!("10.0.{n}.1")]);
    }
    for r in [&ra, &rb] {
        r.ip(&["link", "set", "lan0", "up"]);
        r.ip(&["link", "set", "wan0", "up"]);
    }
    let dir = std::env::temp_dir().join(format!("ikesvcr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (pa, pb) = (dir.join("a.toml"), dir.join("b.toml"));
    std::fs::write(&pa, config_rekey('a', &dir, true, true, 5)).expect("config a");
    std::fs::write(&pb, config_rekey('b', &dir, true, true, 5)).expect("config b");
    let b = Tern::start(&rb, pb);
    let a = Tern::start(&ra, pa);
    until("ha reaches its router", 30, || ping(&ha, "10.0.1.1"));
    until("hb reaches its router", 30, || ping(&hb, "10.0.2.1"));
    until("the tunnel", 30, || ping(&ha, "10.0.2.2"));
    let first = established(&a).expect("IKE SA").children[0].sa_out.expect("installed");
    // 12 s of pings: at least two rekeys of the 5 s child SAs.
    // The testkit's ping4 awaits each answer (iputils' ping calls an
    // answer lost that comes later than twice the slowest so far).
    let hb_addr = std::net::Ipv4Addr::new(10, 0, 2, 2);
    let pings = tern_testkit::ping::ping4(&ha, hb_addr, 240, Duration::from_millis(50), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("ping from ha: {e}"));
    let lost: Vec<u16> = (1..=pings.sent).filter(|q| !pings.answered.contains(q)).collect();
    assert!(pings.all(), "pings lost across rekeys: {} of {} answered, lost {lost:?}", pings.received(), pings.sent);
    let now = established(&a).expect("IKE SA");
    let out_id = now.children.iter().filter_map(|c| c.sa_out).max().expect("installed");
    assert!(out_id > first, "the child SA was rekeyed: {first} -> {out_id}");
    // The old SAs went: a few at most overlap (the newest pair and the
    // one being replaced).
    let ids = a.sa_ids();
    assert!(!ids.contains(&first), "the first SA was removed: {ids:?}");
    assert!(ids.len() <= 4, "{ids:?}");
    drop(a);
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}
