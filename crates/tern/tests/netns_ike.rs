//! tern's IKEv2 against strongSwan (issue 40): the real `tern run` with an
//! `[[ike]]` peer keying a route-based `ipsec` tunnel (no `sa_out` /
//! `sa_in`), and Debian's charon (tern-testkit's strongswan rig:
//! kernel-libipsec, so ESP always in UDP 4500) as the other gateway.
//!
//! ```text
//! h1 10.0.1.2 -- lan0 [tern 10.0.1.1 | 10.0.2.1] wan0 -- eth0 [charon 10.0.2.2] lan0 10.3.0.1 -- h3 10.3.0.2
//! ```
//! Both directions (tern initiates, by itself or the API's `ike_initiate`; charon
//! initiates with `swanctl --initiate`), PSK with each proposal family,
//! certificates (a CA and two ECDSA P-256 certificates made with openssl
//! in the test's directory), NAT-T (`encap = true`), child and IKE SA
//! rekeying under a 100-per-second ping (0 lost), deletes both ways, dead
//! peer detection (charon killed), a remote-access client (charon with
//! `vips = 0.0.0.0`) given a virtual IP from tern's pool, and the
//! negatives: wrong PSK, proposal mismatch, untrusted certificate. Every
//! tunnel is checked with pings from h1 to h3 through it.
//!
//! Each runs on a [`Lane`]: all of them standalone on AF_PACKET, and a
//! focused set (PSK both ways, NAT-T, a child rekey by charon under
//! traffic, deletes, remote access; certificates, an IKE SA rekey by
//! charon under traffic, liveness checks and dead-peer detection with
//! AES-CBC and MODP-3072) on the XDP lane and in Linux mode too. There each checks where IKE and ESP went ([`Rig::assert_paths`]):
//! every IKE datagram charon sent is counted once, by `ike-to-control`
//! (standalone) or by the router's kernel UDP (Linux mode), and every ESP
//! packet once by `xdp-lane/punt-ipsec` or `xdp-steer/ipsec-to-tern`.
//!
//! The rig cleans up on any failure (its `Drop` runs while a panic
//! unwinds): charon and tern stopped, whatever is left in its namespaces
//! killed, the namespaces deleted; namespaces of killed earlier runs are
//! removed when the next starts.
//!
//! Needs root, iproute2, ping, ethtool, openssl and strongSwan (see
//! scripts/setup.sh); says why and passes without.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
mod ike_common;
use common::{Lab, counter, log_of};
use ike_common::{SWAN_ID, TERN_ID, charon_creds, make_certs, received};
use tern_testkit::netns::{Netns, Veth};
use tern_testkit::ping::{ping4, ping4_from};
use tern_testkit::strongswan::{Charon, CharonSpec, Lane, psk_secret};

const PSK: &str = "interop-psk-0123456789";

/// h3, behind charon's gateway.
const H3: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 3, 0, 2);

/// How long pings that should all be answered wait for the last answers.
const PING_WAIT: Duration = Duration::from_secs(10);

/// The prefix of the rig's namespaces: `{PREFIX}{pid}-{lane}{tag}...`.
const PREFIX: &str = "swike";

/// The lab plus h3 behind charon's gateway (the lab's h2).
struct Rig {
    lane: Lane,
    /// First, so that it stops before its namespace goes.
    charon: Option<Charon>,
    lab: Lab,
    /// Kept for its lifetime: the namespace goes when the rig drops.
    h3: Netns,
}

/// Runs on success and while a panic unwinds alike: charon and tern
/// stopped, then anything still running in the rig's namespaces killed
/// (a ping, a tern that ignored SIGTERM), before the fields drop and the
/// namespaces and the scratch directory go.
impl Drop for Rig {
    fn drop(&mut self) {
        ike_common::stop_all(self.charon.as_mut(), &mut self.lab, &[&self.h3.name]);
    }
}

/// Why this machine cannot run the interop tests, if so.
fn missing() -> Option<String> {
    ike_common::missing(PREFIX)
}

/// The namespaces' base name of the rig `tag` on `lane`.
fn base_name(lane: Lane, tag: &str) -> String {
    format!("{PREFIX}{}-{}{tag}", std::process::id(), lane.tag())
}

fn rig(tag: &str, lane: Lane) -> Option<Rig> {
    // Also removes namespaces of earlier runs killed before their rigs
    // dropped.
    if let Some(why) = missing() {
        eprintln!("skipped: {why}");
        return None;
    }
    let base = base_name(lane, tag);
    let lab = Lab::two_hosts(&base);
    let gw = &lab.netns[2];
    let h3 = Netns::named(&format!("{base}h3"));
    Veth::new(gw, "lan0", &h3, "eth0").create();
    gw.ip(&["addr", "add", "10.3.0.1/24", "dev", "lan0"]);
    gw.sysctl("net.ipv4.ip_forward", "1");
    h3.ip(&["addr", "add", "10.3.0.2/24", "dev", "eth0"]);
    h3.ip(&["route", "add", "default", "via", "10.3.0.1"]);
    Some(Rig { lane, charon: None, lab, h3 })
}

/// tern's side: both interfaces on `lane`, the ipsec tunnel keyed by the
/// `[[ike]]` peer, and h3's network routed into it. `ike` is the
/// `[[ike]]` table's body after `name`.
fn tern_config(lane: Lane, lab: &Lab, ike: &str) -> String {
    format!(
        r#"{}
[api]
socket = "{}"

[metrics]
listen = ""

[[tunnel]]
name = "ipsec0"
type = "ipsec"
local = "10.0.2.1"
remote = "10.0.2.2"
addresses = ["172.16.1.1/30"]

[[route]]
prefix = "10.3.0.0/24"
interface = "ipsec0"

[[ike]]
name = "swan"
local = "10.0.2.1"
remote = "10.0.2.2"
tunnel = "ipsec0"
{ike}
"#,
        lane.interfaces(&[("lan0", "10.0.1.1/24"), ("wan0", "10.0.2.1/24")]),
        lab.socket()
    )
}

/// The `[[ike]]` lines for PSK auth with these proposals.
fn tern_psk(psk: &str, ike: &str, esp: &str, extra: &str) -> String {
    format!(
        "local_id = \"{TERN_ID}\"\nremote_id = \"{SWAN_ID}\"\nauth = \"psk\"\npsk = \"{psk}\"\n\
         proposals = [\"{ike}\"]\nesp_proposals = [\"{esp}\"]\n{extra}"
    )
}

/// charon's connection `tern` (child `net`): h3's network against h1's.
fn swan_conf(ike: &str, esp: &str, auth: &str, secrets: &str, extra: &str) -> String {
    let (local_auth, remote_auth) = match auth {
        "psk" => (format!("auth = psk\n      id = {SWAN_ID}"), format!("auth = psk\n      id = {TERN_ID}")),
        _ => (
            format!("auth = pubkey\n      certs = swan.pem\n      id = {SWAN_ID}"),
            format!("auth = pubkey\n      id = {TERN_ID}"),
        ),
    };
    format!(
        "connections {{\n  tern {{\n    local_addrs = 10.0.2.2\n    remote_addrs = 10.0.2.1\n    proposals = {ike}\n{extra}\
         \n    local {{\n      {local_auth}\n    }}\n    remote {{\n      {remote_auth}\n    }}\n    children {{\n      net {{\n        \
         local_ts = 10.3.0.0/24\n        remote_ts = 10.0.1.0/24\n        esp_proposals = {esp}\n      }}\n    }}\n  }}\n}}\n\
         secrets {{\n{secrets}}}\n"
    )
}

impl Rig {
    fn start_tern(&mut self, ike: &str) {
        self.start_tern_with(&tern_config(self.lane, &self.lab, ike));
    }

    /// Runs `tern run` with this configuration in the router's namespace
    /// and waits until its API answers; panics at once, with its log, if
    /// it exits instead (a refused configuration).
    fn start_tern_with(&mut self, conf: &str) {
        let path = self.lab.dir.join("tern.toml");
        std::fs::write(&path, conf).expect("config");
        let log = std::fs::File::create(self.lab.dir.join("tern.log")).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.lab.ns[1], common::TERN, "run", "--config"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("tern run");
        self.lab.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !common::cli(&self.lab, &["status"]).status.success() {
            if let Some(st) = self.lab.daemon.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("tern exited ({st}) on {:?}: {}", self.lane, log_of(&self.lab));
            }
            assert!(Instant::now() < deadline, "tern did not come up: {}", log_of(&self.lab));
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts charon in the gateway namespace and loads its configuration.
    fn start_charon(&mut self, conf: String, extra: &str) {
        let dir = self.lab.dir.join("charon");
        let spec = CharonSpec { charon_extra: extra.to_string(), swanctl_conf: conf };
        let c = Charon::start(&self.lab.ns[2], &dir, &spec).unwrap_or_else(|e| panic!("{e}"));
        c.load_all().unwrap_or_else(|e| panic!("{e}"));
        self.charon = Some(c);
    }

    fn charon(&self) -> &Charon {
        self.charon.as_ref().expect("charon started")
    }

    /// Pings h3 from h1 through the tunnel: `count` at `interval_ms`,
    /// each answer awaited until `wait` after the last request (the
    /// testkit's `ping4`: iputils' ping calls an answer lost that comes
    /// later than twice the slowest so far, which a loaded machine makes
    /// of answers merely late); the number answered.
    fn ping(&self, count: u16, interval_ms: u64, wait: Duration) -> u32 {
        let got = ping4(&self.lab.netns[0], H3, count, Duration::from_millis(interval_ms), wait)
            .unwrap_or_else(|e| panic!("ping from h1: {e}"));
        u32::from(got.received())
    }

    /// Waits until h3 answers h1 (the first packets may trigger neighbour
    /// resolution on either side); panics with both sides' logs if not.
    /// Then 5 more, every one answered.
    fn ping_through(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.ping(1, 200, Duration::from_secs(2)) == 0 {
            assert!(Instant::now() < deadline, "no ping through the tunnel: {}", self.logs());
        }
        assert_eq!(self.ping(5, 50, PING_WAIT), 5, "5 pings through the tunnel: {}{}", self.counters(), self.logs());
    }

    /// tern's non-zero counters and charon's child SAs, for a failure's
    /// message: where a lost packet went.
    fn counters(&self) -> String {
        let errors = common::cli(&self.lab, &["stats", "show", "errors"]);
        let sas = self.charon.as_ref().and_then(|c| c.list_sas().ok()).unwrap_or_default();
        let children: Vec<String> = sas
            .iter()
            .flat_map(|s| &s.children)
            .map(|c| {
                format!(
                    "{} {} in {:x?} {} packets, out {:x?} {} packets",
                    c.name,
                    c.state(),
                    c.spi_in(),
                    c.count("packets-in"),
                    c.spi_out(),
                    c.count("packets-out")
                )
            })
            .collect();
        format!(
            "\n--- tern's counters:\n{}--- charon's child SAs:\n{}",
            String::from_utf8_lossy(&errors.stdout),
            children.join("\n")
        )
    }

    /// One call of tern's control API (one JSON line each way): the
    /// answer's `result.data`, or the error message.
    fn api(&self, op: &str, args: serde_json::Value) -> Result<serde_json::Value, String> {
        ike_common::api(&self.lab, op, args)
    }

    /// tern's IKE SAs (the API's `ike_sa_show`).
    fn tern_sas(&self) -> Vec<serde_json::Value> {
        match self.api("ike_sa_show", serde_json::json!({})) {
            Ok(serde_json::Value::Array(a)) => a,
            Ok(other) => panic!("ike_sa_show: {other}"),
            Err(e) => panic!("ike_sa_show: {e}"),
        }
    }

    /// Waits until tern holds an established IKE SA with peer `swan` and a
    /// child; that SA.
    fn tern_established(&self) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(sa) = self.tern_sas().into_iter().find(|s| {
                s["peer"] == "swan"
                    && s["state"] == "established"
                    && s["children"].as_array().is_some_and(|c| !c.is_empty())
            }) {
                return sa;
            }
            assert!(Instant::now() < deadline, "tern: no established IKE SA: {}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until tern holds no IKE SA with `swan`.
    fn tern_gone(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if !self.tern_sas().iter().any(|s| s["peer"] == "swan") {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn tern_initiate(&self) {
        if let Err(e) = self.api("ike_initiate", serde_json::json!({"peer": "swan"})) {
            panic!("ike_initiate: {e}{}", self.logs());
        }
    }

    /// IKE datagrams charon sent to tern so far, retransmissions
    /// included (its log's `sending packet` lines, net level 2).
    fn charon_ike_sent(&self) -> u64 {
        self.charon()
            .log()
            .lines()
            // The IKE task's line ends with the size; the sender thread's
            // own line (no size) comes for ESP too (libipsec's sockets).
            .filter(|l| {
                l.contains("sending packet: from 10.0.2.2[") && l.contains(" to 10.0.2.1[") && l.ends_with(" bytes)")
            })
            .count() as u64
    }

    /// ESP packets charon sent on its current child SAs.
    fn charon_esp_sent(&self) -> u64 {
        let sas = self.charon().list_sas().unwrap_or_else(|e| panic!("{e}"));
        sas.iter().flat_map(|s| &s.children).map(|c| c.count("packets-out")).sum()
    }

    /// UDP datagrams the router's kernel delivered to its sockets
    /// (`Udp: InDatagrams` of /proc/net/snmp in tern's namespace).
    fn kernel_udp_in(&self) -> u64 {
        let o = self.lab.netns[1].exec(&["cat", "/proc/net/snmp"]);
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
        let (Some(names), Some(values)) = (udp.next(), udp.next()) else { panic!("no Udp lines: {text}") };
        let at = names.split_whitespace().position(|n| n == "InDatagrams").expect("InDatagrams");
        values.split_whitespace().nth(at).and_then(|v| v.parse().ok()).expect("InDatagrams value")
    }

    /// Where IKE and ESP went on this lane, once traffic has stopped:
    /// every IKE datagram charon sent counted exactly once, standalone by
    /// `ike-to-control` (ip4-local for 500, esp-decrypt for 4500), in
    /// Linux mode by the kernel's UDP (and none by tern's nodes); with
    /// `esp`, every ESP packet charon sent on its current child SAs
    /// counted once by the XDP lane's or the steering program's IPsec
    /// punt (so nothing else reached the router on those paths).
    fn assert_paths(&self, esp: bool) {
        let ike = self.charon_ike_sent();
        assert!(ike >= 2, "charon's log shows its IKE datagrams: {}", self.logs());
        let to_control =
            counter(&self.lab, "ip4-local/ike-to-control") + counter(&self.lab, "esp-decrypt/ike-to-control");
        let what = format!("{:?}: charon sent {ike} IKE datagrams", self.lane);
        let esp_sent = if esp { Some(self.charon_esp_sent()) } else { None };
        match self.lane {
            Lane::AfPacket | Lane::AfXdpWithXdpLane => {
                assert_eq!(to_control, ike, "{what}: ike-to-control{}", self.logs());
                if self.lane == Lane::AfXdpWithXdpLane {
                    let punted = counter(&self.lab, "xdp-lane/punt-ipsec");
                    match esp_sent {
                        Some(e) => assert_eq!(punted, ike + e, "{what} and {e} ESP: xdp-lane/punt-ipsec"),
                        None => assert!(punted >= ike, "{what}: xdp-lane/punt-ipsec {punted}"),
                    }
                }
            }
            Lane::Linux | Lane::LinuxXdpLane => {
                assert_eq!(to_control, 0, "{what}: none through tern's nodes in Linux mode");
                assert_eq!(self.kernel_udp_in(), ike, "{what}: the kernel's UDP InDatagrams");
                let name = if self.lane == Lane::Linux { "xdp-steer/ipsec-to-tern" } else { "xdp-lane/punt-ipsec" };
                let steered = counter(&self.lab, name);
                match esp_sent {
                    Some(e) => assert_eq!(steered, e, "{what}: {e} ESP, {name}"),
                    None => assert!(steered > 0, "{what}: {name} {steered}"),
                }
            }
        }
    }

    fn logs(&self) -> String {
        ike_common::logs(&self.lab, self.charon.as_ref().map(|c| ("charon".to_string(), c)))
    }
}

/// One PSK tunnel with the given proposals, initiated by tern or by
/// charon; both sides agree on the proposal and the SPIs, and pings go
/// through.
#[allow(clippy::too_many_arguments)]
fn psk_case(
    tag: &str,
    lane: Lane,
    tern_ike: &str,
    tern_esp: &str,
    swan_ike: &str,
    swan_esp: &str,
    tern_starts: bool,
    want: &str,
) {
    let Some(mut r) = rig(tag, lane) else { return };
    r.start_charon(swan_conf(swan_ike, swan_esp, "psk", &psk_secret("t", TERN_ID, SWAN_ID, PSK), ""), "");
    // An [[ike]] peer with an address starts by itself (`start`).
    r.start_tern(&tern_psk(PSK, tern_ike, tern_esp, if tern_starts { "" } else { "start = false\n" }));
    if !tern_starts {
        r.charon().initiate("net").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    }
    let sa = r.charon().wait_established("tern", Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    assert_eq!(sa.proposal(), want, "the proposal charon selected");
    // swanctl lists `initiator = yes` on the initiator only.
    assert_eq!(sa.get("initiator") == "yes", !tern_starts, "who initiated: {sa:?}");
    assert_eq!(sa.get("remote-id"), TERN_ID);
    let t = r.tern_established();
    let child = &sa.children[0];
    let spis: Vec<(u64, u64)> = t["children"]
        .as_array()
        .expect("children")
        .iter()
        .map(|c| (c["spi_in"].as_u64().unwrap_or(0), c["spi_out"].as_u64().unwrap_or(0)))
        .collect();
    assert!(
        spis.contains(&(u64::from(child.spi_out().expect("spi")), u64::from(child.spi_in().expect("spi")))),
        "tern's child SA is charon's, mirrored: tern {spis:?}, charon {child:?}"
    );
    r.ping_through();
    let after = r.charon().list_sas().expect("list");
    let c = &after.iter().find(|s| s.name == "tern").expect("sa").children[0];
    assert!(c.count("packets-in") >= 5 && c.count("packets-out") >= 5, "the pings went through the SA: {c:?}");
    r.assert_paths(true);
}

#[test]
fn psk_aes128gcm16_x25519_tern_initiates() {
    psk_case(
        "a",
        Lane::AfPacket,
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
        true,
        "AES_GCM_16-128/PRF_HMAC_SHA2_256/CURVE_25519",
    );
}

#[test]
fn psk_aes128gcm16_x25519_charon_initiates() {
    psk_case(
        "b",
        Lane::AfPacket,
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
        false,
        "AES_GCM_16-128/PRF_HMAC_SHA2_256/CURVE_25519",
    );
}

#[test]
fn psk_aes256_sha256_modp3072_tern_initiates() {
    psk_case(
        "c",
        Lane::AfPacket,
        "aes256-sha256-modp3072",
        "aes256-sha256",
        "aes256-sha256-modp3072",
        "aes256-sha256",
        true,
        "AES_CBC-256/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/MODP_3072",
    );
}

#[test]
fn psk_aes256_sha256_modp3072_charon_initiates() {
    psk_case(
        "d",
        Lane::AfPacket,
        "aes256-sha256-modp3072",
        "aes256-sha256",
        "aes256-sha256-modp3072",
        "aes256-sha256",
        false,
        "AES_CBC-256/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/MODP_3072",
    );
}

#[test]
fn psk_aes128_sha1_ecp256_both_ways() {
    let want = "AES_CBC-128/HMAC_SHA1_96/PRF_HMAC_SHA1/ECP_256";
    psk_case("e", Lane::AfPacket, "aes128-sha1-ecp256", "aes128-sha1", "aes128-sha1-ecp256", "aes128-sha1", true, want);
    psk_case(
        "f",
        Lane::AfPacket,
        "aes128-sha1-ecp256",
        "aes128-sha1",
        "aes128-sha1-ecp256",
        "aes128-sha1",
        false,
        want,
    );
}

fn tern_pubkey(certs: &Path, cert: &str) -> String {
    let p = |f: &str| certs.join(f).display().to_string();
    format!(
        "local_id = \"{TERN_ID}\"\nremote_id = \"{SWAN_ID}\"\nauth = \"pubkey\"\ncertificate = \"{}\"\nprivate_key = \"{}\"\n\
         ca = [\"{}\"]\nproposals = [\"aes128gcm16-prfsha256-ecp256\"]\nesp_proposals = [\"aes128gcm16\"]\n",
        p(&format!("{cert}.pem")),
        p(&format!("{cert}.key")),
        p("ca.pem")
    )
}

fn cert_case(tag: &str, lane: Lane, tern_starts: bool) {
    let Some(mut r) = rig(tag, lane) else { return };
    let certs = r.lab.dir.join("certs");
    make_certs(&certs).unwrap_or_else(|e| panic!("{e}"));
    let conf = swan_conf("aes128gcm16-prfsha256-ecp256", "aes128gcm16", "pubkey", "", "");
    let dir = r.lab.dir.join("charon");
    for d in ["x509", "private", "x509ca"] {
        std::fs::create_dir_all(dir.join(d)).expect("dir");
    }
    charon_creds(&dir, &certs);
    r.start_charon(conf, "");
    r.start_tern(&(tern_pubkey(&certs, "tern") + if tern_starts { "" } else { "start = false\n" }));
    if !tern_starts {
        r.charon().initiate("net").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    }
    let sa = r.charon().wait_established("tern", Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    assert_eq!(sa.get("remote-id"), TERN_ID);
    assert!(r.charon().log().contains("with ECDSA"), "charon checked an ECDSA signature: {}", r.logs());
    r.tern_established();
    r.ping_through();
    r.assert_paths(true);
}

#[test]
fn certificates_ecdsa_p256_tern_initiates() {
    cert_case("g", Lane::AfPacket, true);
}

#[test]
fn certificates_ecdsa_p256_charon_initiates() {
    cert_case("h", Lane::AfPacket, false);
}

/// `encap = true`: tern says there is a NAT whatever the addresses, so
/// both sides move to port 4500 and ESP in UDP; tern's SA says NAT.
#[test]
fn nat_traversal_forced_with_encap() {
    nat_case("i", Lane::AfPacket);
}

fn nat_case(tag: &str, lane: Lane) {
    let Some(mut r) = rig(tag, lane) else { return };
    r.start_charon(
        swan_conf("aes128gcm16-prfsha256-x25519", "aes128gcm16", "psk", &psk_secret("t", TERN_ID, SWAN_ID, PSK), ""),
        "",
    );
    r.start_tern(&tern_psk(PSK, "aes128gcm16-prfsha256-x25519", "aes128gcm16", "encap = true\n"));
    let sa = r.charon().wait_established("tern", Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    assert_eq!(sa.get("nat-remote"), "yes", "tern's NAT detection payloads said a NAT: {sa:?}");
    assert_eq!((sa.get("local-port"), sa.get("remote-port")), ("4500", "4500"));
    assert_eq!(sa.children[0].get("encap"), "yes");
    let t = r.tern_established();
    assert_eq!(t["nat"], true, "{t}");
    r.ping_through();
    r.assert_paths(true);
}

/// Which rekey [`rekey_case`] does under traffic.
#[derive(Clone, Copy, PartialEq)]
enum Rekey {
    /// charon rekeys the child SA (with PFS: the ESP proposal has a group).
    CharonChild,
    /// charon rekeys the IKE SA.
    CharonIke,
    /// tern rekeys the child SA by itself (`child_rekey_secs = 2`).
    TernChild,
}

/// A rekey while h1 pings h3 100 times a second: every ping answered,
/// new SPIs after it, one child SA left on tern's side.
fn rekey_case(tag: &str, lane: Lane, how: Rekey) {
    let Some(mut r) = rig(tag, lane) else { return };
    let (ike, esp) = ("aes128gcm16-prfsha256-x25519", "aes128gcm16-x25519");
    r.start_charon(swan_conf(ike, esp, "psk", &psk_secret("t", TERN_ID, SWAN_ID, PSK), ""), "");
    // tern rekeys its child SA every 5 s (the least it takes; jittered
    // down by up to 10 %) in the TernChild case, so the pings last 8 s;
    // never within the test otherwise.
    let extra = if how == Rekey::TernChild { "ike_rekey_secs = 0\nchild_rekey_secs = 5\n" } else { "" };
    let count = if how == Rekey::TernChild { 800 } else { 400 };
    r.start_tern(&tern_psk(PSK, ike, esp, extra));
    let before =
        r.charon().wait_established("tern", Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    r.ping_through();
    let spi0 = before.children[0].spi_in();
    let ike0 = before.get("initiator-spi").to_string();
    std::thread::scope(|s| {
        let h1 = &r.lab.netns[0];
        let pinger = s.spawn(move || {
            ping4(h1, H3, count, Duration::from_millis(10), PING_WAIT).unwrap_or_else(|e| panic!("ping from h1: {e}"))
        });
        let c = r.charon();
        match how {
            Rekey::CharonChild => {
                c.rekey_child("net").unwrap_or_else(|e| panic!("{e}"));
            }
            Rekey::CharonIke => {
                c.rekey_ike("tern").unwrap_or_else(|e| panic!("{e}"));
            }
            Rekey::TernChild => {}
        }
        if how == Rekey::CharonIke {
            c.wait_sa("tern", Duration::from_secs(20), |sa| {
                sa.state() == "ESTABLISHED" && sa.get("initiator-spi") != ike0
            })
            .unwrap_or_else(|e| panic!("IKE rekey: {e}{}", r.logs()));
        } else {
            c.wait_sa("tern", Duration::from_secs(20), |sa| {
                sa.children.iter().any(|ch| ch.state() == "INSTALLED" && ch.spi_in() != spi0)
            })
            .unwrap_or_else(|e| panic!("child rekey: {e}{}", r.logs()));
        }
        let out = pinger.join().expect("pinger");
        assert!(
            out.all(),
            "no ping lost across the rekey: {count} sent, {} answered{}{}",
            out.received(),
            r.counters(),
            r.logs()
        );
    });
    r.ping_through();
    // The old child SA goes. With tern rekeying every 5 s a later rekey
    // may be in flight at any one look (new child up, old one's delete
    // unanswered yet), so wait for a look with one child.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let t = r.tern_established();
        if t["children"].as_array().is_some_and(|c| c.len() == 1) {
            break;
        }
        assert!(Instant::now() < deadline, "the old child SA went: {t}{}", r.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    r.assert_paths(false);
}

#[test]
fn rekeying_child_sa_by_charon_under_traffic_loses_nothing() {
    rekey_case("j", Lane::AfPacket, Rekey::CharonChild);
}

#[test]
fn rekeying_ike_sa_by_charon_under_traffic_loses_nothing() {
    rekey_case("s", Lane::AfPacket, Rekey::CharonIke);
}

#[test]
fn rekeying_child_sa_by_tern_under_traffic_loses_nothing() {
    rekey_case("t", Lane::AfPacket, Rekey::TernChild);
}

/// A delete from either side takes the SA down on the other; no ping
/// goes through afterwards.
#[test]
fn delete_from_either_side() {
    delete_case("k", Lane::AfPacket);
}

fn delete_case(tag: &str, lane: Lane) {
    let Some(mut r) = rig(tag, lane) else { return };
    // Not started by tern, which would bring it back after a delete.
    r.start_tern(&tern_psk(PSK, "aes128gcm16-prfsha256-x25519", "aes128gcm16", "start = false\n"));
    r.start_charon(
        swan_conf("aes128gcm16-prfsha256-x25519", "aes128gcm16", "psk", &psk_secret("t", TERN_ID, SWAN_ID, PSK), ""),
        "",
    );
    // charon deletes.
    r.charon().initiate("net").unwrap_or_else(|e| panic!("{e}"));
    r.tern_established();
    r.ping_through();
    r.charon().terminate_ike("tern").unwrap_or_else(|e| panic!("{e}"));
    assert!(r.tern_gone(Duration::from_secs(10)), "tern saw charon's delete: {}", r.logs());
    assert_eq!(r.ping(2, 100, Duration::from_secs(2)), 0, "no tunnel, no pings");
    // tern deletes (by the API).
    r.tern_initiate();
    r.charon().wait_established("tern", Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    r.ping_through();
    r.api("ike_terminate", serde_json::json!({"peer": "swan"})).unwrap_or_else(|e| panic!("ike_terminate: {e}"));
    r.charon().wait_gone("tern", Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    assert!(r.tern_gone(Duration::from_secs(5)));
    assert_eq!(r.ping(2, 100, Duration::from_secs(2)), 0, "no tunnel, no pings");
    r.assert_paths(false);
}

/// charon dies without a word: tern's liveness checks go unanswered and
/// it declares the peer dead, taking the SAs down.
#[test]
fn dead_peer_detection_when_charon_is_killed() {
    dpd_case("l", Lane::AfPacket, "aes128gcm16-prfsha256-x25519", "aes128gcm16");
}

/// With these proposals: pings through, tern's liveness checks answered
/// while charon lives (seen in charon's log: an empty INFORMATIONAL
/// request), then charon killed and the peer declared dead.
fn dpd_case(tag: &str, lane: Lane, ike: &str, esp: &str) {
    let Some(mut r) = rig(tag, lane) else { return };
    r.start_tern(&tern_psk(PSK, ike, esp, "start = false\ndpd_secs = 1\n"));
    r.start_charon(swan_conf(ike, esp, "psk", &psk_secret("t", TERN_ID, SWAN_ID, PSK), ""), "");
    let c = r.charon();
    c.initiate("net").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    r.tern_established();
    r.ping_through();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !r.charon().log().contains("parsed INFORMATIONAL request") {
        assert!(Instant::now() < deadline, "charon answers tern's liveness checks: {}", r.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(r.tern_sas().iter().any(|s| s["peer"] == "swan"), "answered checks keep the SA: {}", r.logs());
    r.charon.as_mut().expect("charon").kill();
    // 1 s of silence, then the check and its retransmissions (0.5 s
    // doubling, 5 tries by default): well within 60 s.
    assert!(r.tern_gone(Duration::from_secs(60)), "tern declared the peer dead: {}", r.logs());
    assert!(log_of(&r.lab).contains("swan"), "the log names the peer");
}

/// charon as a remote-access client (`vips = 0.0.0.0`) against tern's
/// responder template (`remote = "any"`) with a pool: charon gets an
/// address from the pool and reaches h1 from it.
#[test]
fn remote_access_client_gets_a_virtual_ip() {
    remote_access_case("m", Lane::AfPacket);
}

fn remote_access_case(tag: &str, lane: Lane) {
    let Some(mut r) = rig(tag, lane) else { return };
    // A multipoint tunnel (remote "any") the remote-access template keys:
    // a host route per client to its SA (netns_ike_ra.rs has two clients).
    let conf = tern_config(lane, &r.lab, "")
        .replace(
            "[[tunnel]]\nname = \"ipsec0\"\ntype = \"ipsec\"\nlocal = \"10.0.2.1\"\nremote = \"10.0.2.2\"\naddresses = [\"172.16.1.1/30\"]\n\n[[route]]\nprefix = \"10.3.0.0/24\"\ninterface = \"ipsec0\"\n",
            "[[tunnel]]\nname = \"ipsec0\"\ntype = \"ipsec\"\nlocal = \"10.0.2.1\"\nremote = \"any\"\naddresses = [\"10.77.0.1/24\"]\n",
        )
        .replace(
        "[[ike]]\nname = \"swan\"\nlocal = \"10.0.2.1\"\nremote = \"10.0.2.2\"\ntunnel = \"ipsec0\"\n",
        &format!(
            "[[ike]]\nname = \"swan\"\nlocal = \"10.0.2.1\"\nremote = \"any\"\ntunnel = \"ipsec0\"\nlocal_id = \"{TERN_ID}\"\nauth = \"psk\"\n\
             psk = \"{PSK}\"\nproposals = [\"aes128gcm16-prfsha256-x25519\"]\nesp_proposals = [\"aes128gcm16\"]\n\
             pool = \"10.77.0.10-10.77.0.20\"\n"
        ),
    );
    r.start_tern_with(&conf);
    let swan = format!(
        "connections {{\n  tern {{\n    local_addrs = 10.0.2.2\n    remote_addrs = 10.0.2.1\n    vips = 0.0.0.0\n    \
         proposals = aes128gcm16-prfsha256-x25519\n    local {{\n      auth = psk\n      id = {SWAN_ID}\n    }}\n    \
         remote {{\n      auth = psk\n      id = {TERN_ID}\n    }}\n    children {{\n      net {{\n        \
         remote_ts = 10.0.1.0/24\n        esp_proposals = aes128gcm16\n      }}\n    }}\n  }}\n}}\n\
         secrets {{\n{}}}\n",
        psk_secret("t", TERN_ID, SWAN_ID, PSK)
    );
    r.start_charon(swan, "");
    let c = r.charon();
    c.initiate("net").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    let sa = c.wait_established("tern", Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    let vip = sa.local_vips.first().cloned().unwrap_or_else(|| panic!("no virtual IP: {sa:?}"));
    let a: std::net::Ipv4Addr = vip.parse().expect("IPv4");
    assert!((10..=20).contains(&a.octets()[3]) && a.octets()[..3] == [10, 77, 0], "{vip} from the pool");
    assert_eq!(sa.children[0].local_ts, [format!("{vip}/32")], "traffic selector narrowed to the client's address");
    // From the client's virtual IP (installed on charon's side) to h1.
    let gw = &r.lab.netns[2];
    let ping = ping4_from(gw, Some(a), std::net::Ipv4Addr::new(10, 0, 1, 2), 3, Duration::from_millis(100), PING_WAIT)
        .unwrap_or_else(|e| panic!("ping from {vip}: {e}"));
    assert!(ping.all(), "ping from {vip}: {ping:?}{}", r.logs());
    r.assert_paths(true);
}

/// A refusal: no IKE SA on either side, the reason in tern's log. tern
/// was started last, initiating by itself when `tern_starts`.
fn refused(r: &Rig, tern_starts: bool, reason: &str) {
    if !tern_starts {
        let e = r.charon().initiate("net").expect_err("charon's initiation fails");
        assert!(!e.is_empty());
    }
    assert!(
        r.charon().wait_established("tern", Duration::from_secs(5)).is_err(),
        "no SA on charon's side: {}",
        r.logs()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log_of(&r.lab).contains(reason) {
        assert!(Instant::now() < deadline, "tern's log names {reason:?}: {}", r.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !r.tern_sas().iter().any(|s| s["peer"] == "swan" && s["state"] == "established"),
        "no SA on tern's side: {}",
        r.logs()
    );
    assert_eq!(r.ping(1, 100, Duration::from_secs(2)), 0);
}

#[test]
fn wrong_psk_is_refused_both_ways() {
    for (tag, tern_starts) in [("n", true), ("o", false)] {
        let Some(mut r) = rig(tag, Lane::AfPacket) else { return };
        r.start_charon(
            swan_conf(
                "aes128gcm16-prfsha256-x25519",
                "aes128gcm16",
                "psk",
                &psk_secret("t", TERN_ID, SWAN_ID, PSK),
                "",
            ),
            "",
        );
        let start = if tern_starts { "" } else { "start = false\n" };
        r.start_tern(&tern_psk("not-the-same-psk-at-all", "aes128gcm16-prfsha256-x25519", "aes128gcm16", start));
        refused(&r, tern_starts, "authentication");
    }
}

#[test]
fn proposal_mismatch_is_refused_both_ways() {
    for (tag, tern_starts) in [("p", true), ("q", false)] {
        let Some(mut r) = rig(tag, Lane::AfPacket) else { return };
        r.start_charon(
            swan_conf("aes256-sha512-modp4096", "aes256-sha512", "psk", &psk_secret("t", TERN_ID, SWAN_ID, PSK), ""),
            "",
        );
        let start = if tern_starts { "" } else { "start = false\n" };
        r.start_tern(&tern_psk(PSK, "aes128gcm16-prfsha256-x25519", "aes128gcm16", start));
        refused(&r, tern_starts, "proposal");
    }
}

/// tern's certificate comes from a CA charon does not trust: charon
/// refuses it; and tern refuses charon's when tern trusts only that
/// other CA.
#[test]
fn untrusted_certificate_is_refused() {
    let Some(mut r) = rig("r", Lane::AfPacket) else { return };
    let certs = r.lab.dir.join("certs");
    make_certs(&certs).unwrap_or_else(|e| panic!("{e}"));
    let tern = tern_pubkey(&certs, "evil")
        .replace(&certs.join("ca.pem").display().to_string(), &certs.join("evilca.pem").display().to_string());
    let dir = r.lab.dir.join("charon");
    for d in ["x509", "private", "x509ca"] {
        std::fs::create_dir_all(dir.join(d)).expect("dir");
    }
    charon_creds(&dir, &certs);
    r.start_charon(swan_conf("aes128gcm16-prfsha256-ecp256", "aes128gcm16", "pubkey", "", ""), "");
    r.start_tern(&tern);
    refused(&r, true, "authentication");
}

#[test]
fn ping_summary_is_read() {
    let text =
        "--- 10.3.0.2 ping statistics ---\n600 packets transmitted, 598 received, 0.333333% packet loss, time 6010ms\n";
    assert_eq!(received(text), 598);
    assert_eq!(received("2 packets transmitted, 0 received, +2 errors, 100% packet loss"), 0);
    assert_eq!(received(""), 0);
}

// ------------------------------------------------- the XDP lane and Linux mode

/// The focused set on the XDP lane: PSK with X25519 both ways.
#[test]
fn xdp_lane_psk_x25519_both_ways() {
    let (ike, esp) = ("aes128gcm16-prfsha256-x25519", "aes128gcm16");
    let want = "AES_GCM_16-128/PRF_HMAC_SHA2_256/CURVE_25519";
    psk_case("a", Lane::AfXdpWithXdpLane, ike, esp, ike, esp, true, want);
    psk_case("b", Lane::AfXdpWithXdpLane, ike, esp, ike, esp, false, want);
}

#[test]
fn xdp_lane_nat_traversal_forced_with_encap() {
    nat_case("i", Lane::AfXdpWithXdpLane);
}

#[test]
fn xdp_lane_rekeying_child_sa_by_charon_under_traffic_loses_nothing() {
    rekey_case("j", Lane::AfXdpWithXdpLane, Rekey::CharonChild);
}

#[test]
fn xdp_lane_delete_from_either_side() {
    delete_case("k", Lane::AfXdpWithXdpLane);
}

/// Linux mode: IKE on the kernel's sockets, ESP steered to tern.
#[test]
fn linux_mode_psk_x25519_both_ways() {
    let (ike, esp) = ("aes128gcm16-prfsha256-x25519", "aes128gcm16");
    let want = "AES_GCM_16-128/PRF_HMAC_SHA2_256/CURVE_25519";
    psk_case("a", Lane::Linux, ike, esp, ike, esp, true, want);
    psk_case("b", Lane::Linux, ike, esp, ike, esp, false, want);
}

#[test]
fn linux_mode_nat_traversal_forced_with_encap() {
    nat_case("i", Lane::Linux);
}

#[test]
fn linux_mode_rekeying_child_sa_by_charon_under_traffic_loses_nothing() {
    rekey_case("j", Lane::Linux, Rekey::CharonChild);
}

#[test]
fn linux_mode_delete_from_either_side() {
    delete_case("k", Lane::Linux);
}

#[test]
fn linux_mode_remote_access_client_gets_a_virtual_ip() {
    remote_access_case("m", Lane::Linux);
}

/// A test that fails inside `start_tern` (tern refuses its configuration)
/// leaves nothing behind: charon stopped, no process in the rig's
/// namespaces, the namespaces gone.
#[test]
fn a_failed_start_leaves_no_namespace_or_process() {
    if missing().is_some() {
        return;
    }
    let pid = std::sync::Mutex::new(None);
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Some(mut r) = rig("z", Lane::AfPacket) else { return };
        r.start_charon(swan_conf("aes128gcm16-prfsha256-x25519", "aes128gcm16", "psk", "", ""), "");
        *pid.lock().expect("pid") = r.charon().pid();
        r.start_tern("no_such_key = 1\n");
    }));
    assert!(failed.is_err(), "tern refused the configuration");
    let charon = pid.lock().expect("pid").expect("charon ran");
    assert!(!Path::new(&format!("/proc/{charon}")).exists(), "charon {charon} stopped");
    let base = base_name(Lane::AfPacket, "z");
    let list = common::must("ip", &["netns", "list"]);
    assert!(!list.contains(&base), "the rig's namespaces went: {list}");
    assert!(!std::env::temp_dir().join(&base).exists(), "its directory went");
}

/// Linux mode on the XDP lane: the lane passes IKE to the kernel and
/// punts ESP to tern.
#[test]
fn linux_mode_on_the_xdp_lane_psk_x25519_both_ways() {
    let (ike, esp) = ("aes128gcm16-prfsha256-x25519", "aes128gcm16");
    let want = "AES_GCM_16-128/PRF_HMAC_SHA2_256/CURVE_25519";
    psk_case("a", Lane::LinuxXdpLane, ike, esp, ike, esp, true, want);
    psk_case("b", Lane::LinuxXdpLane, ike, esp, ike, esp, false, want);
}

#[test]
fn linux_mode_on_the_xdp_lane_rekeying_child_sa_by_charon_under_traffic_loses_nothing() {
    rekey_case("j", Lane::LinuxXdpLane, Rekey::CharonChild);
}

// ------------- certificates, CBC with MODP-3072, IKE rekey and DPD on the other lanes

/// On each of the other lanes, the cases with the most to lose there:
/// certificates (the largest IKE_AUTH messages, through the lane's punt
/// or the kernel's sockets), an IKE SA rekey by charon under traffic
/// (CREATE_CHILD_SA on 4500 beside ESP), and liveness checks with
/// AES-CBC and HMAC-SHA-256 ESP and MODP-3072 (tern's own requests
/// leaving through the lane, the CBC data path, the largest KE).
#[test]
fn xdp_lane_certificates_ecdsa_p256() {
    cert_case("g", Lane::AfXdpWithXdpLane, true);
}

#[test]
fn xdp_lane_rekeying_ike_sa_by_charon_under_traffic_loses_nothing() {
    rekey_case("s", Lane::AfXdpWithXdpLane, Rekey::CharonIke);
}

#[test]
fn xdp_lane_dead_peer_detection_with_aes256_sha256_modp3072() {
    dpd_case("l", Lane::AfXdpWithXdpLane, "aes256-sha256-modp3072", "aes256-sha256");
}

#[test]
fn linux_mode_certificates_ecdsa_p256() {
    cert_case("g", Lane::Linux, false);
}

#[test]
fn linux_mode_rekeying_ike_sa_by_charon_under_traffic_loses_nothing() {
    rekey_case("s", Lane::Linux, Rekey::CharonIke);
}

#[test]
fn linux_mode_dead_peer_detection_with_aes256_sha256_modp3072() {
    dpd_case("l", Lane::Linux, "aes256-sha256-modp3072", "aes256-sha256");
}

#[test]
fn linux_mode_on_the_xdp_lane_certificates_ecdsa_p256() {
    cert_case("g", Lane::LinuxXdpLane, true);
}

#[test]
fn linux_mode_on_the_xdp_lane_rekeying_ike_sa_by_charon_under_traffic_loses_nothing() {
    rekey_case("s", Lane::LinuxXdpLane, Rekey::CharonIke);
}

#[test]
fn linux_mode_on_the_xdp_lane_dead_peer_detection_with_aes256_sha256_modp3072() {
    dpd_case("l", Lane::LinuxXdpLane, "aes256-sha256-modp3072", "aes256-sha256");
}
