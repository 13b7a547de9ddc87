//! IKEv2 remote access against strongSwan (issue 40 item 4): the real
//! `tern run` with a responder template (`[[ike]] remote = "any"`, a
//! virtual IP pool) keying a multipoint tunnel (`[[tunnel]] remote =
//! "any"`), and two charon clients (tern-testkit's strongswan rig,
//! kernel-libipsec: ESP in UDP 4500, the virtual IP on charon's TUN) in
//! two namespaces behind a router.
//!
//! ```text
//! h1 10.0.1.2 -- lan0 [tern 10.0.1.1 | 10.0.2.1, ra0 10.77.0.1/24] wan0 -- eth0 [h2 10.0.2.2] -+- c1 10.0.4.2 (charon)
//!                                                                                              +- c2 10.0.5.2 (charon)
//! ```
//! Each client gets its own address from the pool (`vips = 0.0.0.0`),
//! pings h1 from it, and tern's `ike_sa_show` lists both virtual IPs; a
//! host route per client points into `ra0`. When one client terminates,
//! its route and SAs go (h1's packets to its address are then dropped as
//! `esp-encrypt/no-client`) and the other keeps working.
//!
//! On each [`Lane`]: standalone on AF_PACKET, on the XDP lane, and in
//! Linux mode (IKE on the kernel's sockets, ESP steered to tern). The rig
//! cleans up on a failure as netns_ike's does.
//!
//! Needs root, iproute2, ping and strongSwan (see scripts/setup.sh); says
//! why and passes without.

use std::time::{Duration, Instant};

mod common;
mod ike_common;
use common::{Lab, counter, log_of, run_tern};
use ike_common::TERN_ID;
use tern_testkit::netns::{Netns, Veth};
use tern_testkit::strongswan::{Charon, CharonSpec, Lane, psk_secret};

const PSK: &str = "remote-access-psk-0123456789";

struct Rig {
    lane: Lane,
    /// First, so that they stop before their namespaces go.
    clients: Vec<Option<Charon>>,
    lab: Lab,
    /// The clients' namespaces (kept for their lifetime).
    cns: Vec<Netns>,
}

/// On success and while a panic unwinds: the charons and tern stopped,
/// whatever is left in the namespaces killed, before they go.
impl Drop for Rig {
    fn drop(&mut self) {
        let cns: Vec<&str> = self.cns.iter().map(|n| n.name.as_str()).collect();
        ike_common::stop_all(self.clients.iter_mut().filter_map(Option::as_mut), &mut self.lab, &cns);
    }
}

const PREFIX: &str = "ikera";

fn rig(tag: &str, lane: Lane) -> Option<Rig> {
    if let Some(why) = ike_common::missing(PREFIX) {
        eprintln!("skipped: {why}");
        return None;
    }
    let base = format!("{PREFIX}{}-{}{tag}", std::process::id(), lane.tag());
    let lab = Lab::two_hosts(&base);
    let h2 = &lab.netns[2];
    h2.sysctl("net.ipv4.ip_forward", "1");
    let mut cns = Vec::new();
    for n in [4u8, 5] {
        let c = Netns::named(&format!("{base}c{n}"));
        let dev = format!("c{n}");
        Veth::new(h2, &dev, &c, "eth0").create();
        h2.ip(&["addr", "add", &format!("10.0.{n}.1/24"), "dev", &dev]);
        c.ip(&["addr", "add", &format!("10.0.{n}.2/24"), "dev", "eth0"]);
        c.ip(&["route", "add", "default", "via", &format!("10.0.{n}.1")]);
        cns.push(c);
    }
    Some(Rig { lane, clients: Vec::new(), lab, cns })
}

fn tern_config(lane: Lane, lab: &Lab) -> String {
    format!(
        r#"{}
[api]
socket = "{}"

[metrics]
listen = ""

[[route]]
prefix = "10.0.4.0/22"
via = "10.0.2.2"

[[tunnel]]
name = "ra0"
type = "ipsec"
local = "10.0.2.1"
remote = "any"
addresses = ["10.77.0.1/24"]

[[ike]]
name = "ra"
local = "10.0.2.1"
remote = "any"
tunnel = "ra0"
local_id = "{TERN_ID}"
auth = "psk"
psk = "{PSK}"
proposals = ["aes128gcm16-prfsha256-x25519"]
esp_proposals = ["aes128gcm16"]
pool = "10.77.0.10-10.77.0.20"
local_ts = ["10.0.1.0/24"]
"#,
        lane.interfaces(&[("lan0", "10.0.1.1/24"), ("wan0", "10.0.2.1/24")]),
        lab.socket()
    )
}

/// Client `n`'s charon: from 10.0.`n`.2 to tern, asking for a virtual IP,
/// h1's network behind tern.
fn client_conf(n: u8) -> String {
    let id = format!("c{n}.example");
    format!(
        "connections {{\n  tern {{\n    local_addrs = 10.0.{n}.2\n    remote_addrs = 10.0.2.1\n    vips = 0.0.0.0\n    \
         proposals = aes128gcm16-prfsha256-x25519\n    local {{\n      auth = psk\n      id = {id}\n    }}\n    \
         remote {{\n      auth = psk\n      id = {TERN_ID}\n    }}\n    children {{\n      net {{\n        \
         remote_ts = 10.0.1.0/24\n        esp_proposals = aes128gcm16\n      }}\n    }}\n  }}\n}}\n\
         secrets {{\n{}}}\n",
        psk_secret("t", TERN_ID, &id, PSK)
    )
}

impl Rig {
    fn start_client(&mut self, k: usize) {
        let n = 4 + k as u8;
        let dir = self.lab.dir.join(format!("charon{n}"));
        let spec = CharonSpec { charon_extra: String::new(), swanctl_conf: client_conf(n) };
        let c = Charon::start(&self.cns[k].name, &dir, &spec).unwrap_or_else(|e| panic!("{e}"));
        c.load_all().unwrap_or_else(|e| panic!("{e}"));
        self.clients.push(Some(c));
    }

    fn client(&self, k: usize) -> &Charon {
        self.clients[k].as_ref().expect("client started")
    }

    /// Pings h1 from client `k`'s virtual IP until one answers (the first
    /// may wait for neighbour resolution), then 5 more; how many of those
    /// 5 answered, each awaited up to 10 s (the testkit's `ping4`: iputils'
    /// ping calls an answer lost that comes later than twice the slowest
    /// so far, which a loaded machine makes of answers merely late).
    fn ping_from(&self, k: usize, vip: &str) -> u32 {
        let c = &self.cns[k];
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let o = c.exec(&["ping", "-q", "-c", "1", "-W", "1", "-I", vip, "10.0.1.2"]);
            if o.status.success() {
                break;
            }
            if Instant::now() > deadline {
                return 0;
            }
        }
        let src: std::net::Ipv4Addr = vip.parse().unwrap_or_else(|e| panic!("{vip}: {e}"));
        let h1 = std::net::Ipv4Addr::new(10, 0, 1, 2);
        let got =
            tern_testkit::ping::ping4_from(c, Some(src), h1, 5, Duration::from_millis(50), Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("ping from {vip}: {e}"));
        u32::from(got.received())
    }

    /// One call of tern's control API: the answer's `result.data`.
    fn api(&self, op: &str, args: serde_json::Value) -> Result<serde_json::Value, String> {
        ike_common::api(&self.lab, op, args)
    }

    /// The virtual IPs of tern's installed child SAs (`ike_sa_show`).
    fn tern_vips(&self) -> Vec<String> {
        let sas = self.api("ike_sa_show", serde_json::json!({})).unwrap_or_else(|e| panic!("ike_sa_show: {e}"));
        let mut v: Vec<String> = sas
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["children"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["virtual_ip"].as_str().map(str::to_string))
            .collect();
        v.sort();
        v
    }

    /// Waits until tern's child SAs carry exactly these virtual IPs.
    fn wait_vips(&self, want: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.tern_vips() != want {
            assert!(
                Instant::now() < deadline,
                "tern's virtual IPs {:?}, want {want:?}: {}",
                self.tern_vips(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The inbound SPIs of tern's child SAs of the client at `vip`.
    fn tern_spis_of(&self, vip: &str) -> Vec<u64> {
        let sas = self.api("ike_sa_show", serde_json::json!({})).unwrap_or_else(|e| panic!("ike_sa_show: {e}"));
        sas.as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["children"].as_array().cloned().unwrap_or_default())
            .filter(|c| c["virtual_ip"] == vip)
            .filter_map(|c| c["spi_in"].as_u64())
            .collect()
    }

    /// The prefix tern routes `addr` by (`route_get`), as text.
    fn route_of(&self, addr: &str) -> String {
        let r =
            self.api("route_get", serde_json::json!({"address": addr})).unwrap_or_else(|e| format!("none: {e}").into());
        r.to_string()
    }

    /// Where the clients' IKE went on this lane: tern's nodes queued it
    /// for the IKE service (standalone), or they saw none and the kernel
    /// took it (Linux mode, where the steering program sent tern the ESP).
    fn assert_paths(&self) {
        let to_control =
            counter(&self.lab, "ip4-local/ike-to-control") + counter(&self.lab, "esp-decrypt/ike-to-control");
        let what = format!("{:?}", self.lane);
        if self.lane.linux() {
            assert_eq!(to_control, 0, "{what}: IKE through tern's nodes");
            let name = if self.lane == Lane::Linux { "xdp-steer/ipsec-to-tern" } else { "xdp-lane/punt-ipsec" };
            assert!(counter(&self.lab, name) >= 10, "{what}: ESP to tern, {name}");
        } else {
            // Two clients, at least IKE_SA_INIT and IKE_AUTH each.
            assert!(to_control >= 4, "{what}: ike-to-control {to_control}");
        }
        if self.lane == Lane::AfXdpWithXdpLane {
            assert!(counter(&self.lab, "xdp-lane/punt-ipsec") >= to_control + 10, "{what}: xdp-lane/punt-ipsec");
        }
    }

    fn logs(&self) -> String {
        let charons =
            self.clients.iter().enumerate().filter_map(|(k, c)| c.as_ref().map(|c| (format!("charon c{}", 4 + k), c)));
        ike_common::logs(&self.lab, charons)
    }
}

#[test]
fn two_remote_access_clients_get_virtual_ips_and_one_leaves() {
    two_clients("a", Lane::AfPacket);
}

#[test]
fn two_remote_access_clients_on_the_xdp_lane() {
    two_clients("a", Lane::AfXdpWithXdpLane);
}

#[test]
fn two_remote_access_clients_in_linux_mode() {
    two_clients("a", Lane::Linux);
}

#[test]
fn two_remote_access_clients_in_linux_mode_on_the_xdp_lane() {
    two_clients("a", Lane::LinuxXdpLane);
}

fn two_clients(tag: &str, lane: Lane) {
    let Some(mut r) = rig(tag, lane) else { return };
    let path = r.lab.dir.join("tern.toml");
    std::fs::write(&path, tern_config(lane, &r.lab)).expect("config");
    run_tern(&mut r.lab, &path);
    let mut vips = Vec::new();
    for k in 0..2 {
        r.start_client(k);
        let c = r.client(k);
        if lane.linux() && k == 0 {
            // The kernel owns routing in Linux mode: IKE's answers leave
            // from its sockets by its table, which `[[route]]` does not
            // fill (the mirror goes from the kernel to tern). Without the
            // route tern says it cannot answer; with it, charon's
            // retransmission gets through.
            std::thread::scope(|s| {
                let initiate = s.spawn(|| c.initiate("net"));
                let deadline = Instant::now() + Duration::from_secs(20);
                while !log_of(&r.lab).contains("IKE: cannot send 10.0.2.1:500 -> 10.0.4.2:500") {
                    assert!(Instant::now() < deadline, "tern's log names the failed answer: {}", r.logs());
                    std::thread::sleep(Duration::from_millis(50));
                }
                r.lab.netns[1].ip(&["route", "add", "10.0.4.0/22", "via", "10.0.2.2", "dev", "wan0"]);
                initiate.join().expect("initiate").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
            });
        } else {
            c.initiate("net").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
        }
        let sa = c.wait_established("tern", Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}{}", r.logs()));
        let vip = sa.local_vips.first().cloned().unwrap_or_else(|| panic!("no virtual IP: {sa:?}"));
        let a: std::net::Ipv4Addr = vip.parse().expect("IPv4");
        assert!(a.octets()[..3] == [10, 77, 0] && (10..=20).contains(&a.octets()[3]), "{vip} from the pool");
        assert_eq!(sa.children[0].local_ts, [format!("{vip}/32")], "selector narrowed to the client's address");
        vips.push(vip);
    }
    assert_ne!(vips[0], vips[1], "distinct addresses");
    let mut sorted: Vec<&str> = vips.iter().map(String::as_str).collect();
    sorted.sort();
    r.wait_vips(&sorted);
    for (k, vip) in vips.iter().enumerate() {
        assert!(r.route_of(vip).contains(&format!("{vip}/32")), "host route to {vip}: {}", r.route_of(vip));
        assert_eq!(r.ping_from(k, vip), 5, "pings from client {k} at {vip}: {}", r.logs());
    }
    r.assert_paths();
    // The CLI shows them too.
    let shown = common::cli(&r.lab, &["ike", "sa", "show"]);
    let text = String::from_utf8_lossy(&shown.stdout);
    for vip in &vips {
        assert!(text.contains(&format!("vip {vip}")), "ike sa show: {text}");
    }

    // Client 1 rekeys its child SA: tern moves the client to the new SAs
    // (the old ones deleted), the route stays, pings go on.
    let old = r.tern_spis_of(&vips[1]);
    r.client(1).rekey_child("net").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = r.tern_spis_of(&vips[1]);
        if now.len() == 1 && !old.contains(&now[0]) {
            break;
        }
        assert!(Instant::now() < deadline, "rekey: tern's SPIs {now:x?} (were {old:x?}): {}", r.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(r.route_of(&vips[1]).contains(&format!("{}/32", vips[1])), "route kept across the rekey");
    assert_eq!(r.ping_from(1, &vips[1]), 5, "pings after the rekey: {}", r.logs());

    // Client 0 leaves: its SAs and route go, client 1 keeps working.
    r.client(0).terminate_ike("tern").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    r.wait_vips(&[vips[1].as_str()]);
    assert!(!r.route_of(&vips[0]).contains(&format!("{}/32", vips[0])), "route to {} gone", vips[0]);
    assert!(r.route_of(&vips[1]).contains(&format!("{}/32", vips[1])));
    assert_eq!(r.ping_from(1, &vips[1]), 5, "the other client still pings: {}", r.logs());
    // h1 to the gone client's address: into ra0 by its connected route,
    // and no client there.
    let before = counter(&r.lab, "esp-encrypt/no-client");
    r.lab.netns[0].exec(&["ping", "-q", "-c", "3", "-i", "0.05", "-W", "1", &vips[0]]);
    assert!(counter(&r.lab, "esp-encrypt/no-client") >= before + 3, "no-client counted: {}", r.logs());
}
