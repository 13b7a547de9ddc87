//! tern's IKEv2 against strongSwan, behaviour beyond `netns_ike.rs`: a
//! site-to-site peer behind a NAT whose mapping changes (RFC 7296 2.23),
//! a reload after the `psk_file` changed, and certificates with a charon
//! that announces no RFC 7427 signatures.
//!
//! ```text
//! h1 10.0.1.2 -- lan0 [tern 10.0.1.1 | 10.0.2.1] wan0 -- eth0 [nat 10.0.2.2, 10.0.2.3] lan0 10.4.0.1 -- eth0 [charon 10.4.0.2]
//! ```
//! charon (tern-testkit's rig, kernel-libipsec: ESP in UDP 4500) sits
//! behind an nftables source NAT that maps its UDP 4500 to 10.0.2.2:40000.
//! h1 pings charon's address through the tunnel; then the NAT maps it to
//! 10.0.2.3:41000 instead (the rule replaced, the NAT's connection table
//! flushed over netlink). tern's ESP to the old mapping is lost, charon's
//! liveness check (DPD) arrives from the new one, and tern follows: the
//! IKE SA moves, the child SA is rekeyed with the new address and port,
//! the tunnel's remote becomes 10.0.2.3, and the pings come back, on the
//! same IKE SA.
//!
//! The same NAT remapping only charon's port, with ESP flowing (charon
//! pings h1 100 times a second) and no IKE message from charon (no
//! liveness checks): tern follows at charon's first authenticated ESP
//! packet from the new mapping; a few replies are lost, not all until
//! charon's next IKE request.
//!
//! The reload: tern's key is in a `psk_file`; the file gets a new key and
//! `config_reload` notices it although the configuration text is the
//! same: the established IKE SA stays (pings go on), and once charon has
//! the new key too, a new IKE SA authenticates with it.
//!
//! Classic signatures: charon with `signature_authentication = no` sends
//! no SIGNATURE_HASH_ALGORITHMS and signs with ECDSA-256 (auth method 9);
//! tern then signs with method 9 too, which charon checks ("with
//! ECDSA-256 signature successful" in its log), and pings go through.
//!
//! Needs root, iproute2, ping, nft, python3, openssl and strongSwan (see
//! scripts/setup.sh); says why and passes without.

mod common;
mod ike_common;
use common::{Lab, log_of, run_tern};
use ike_common::{SWAN_ID, TERN_ID, charon_creds, make_certs};
use tern_testkit::netns::{Netns, Veth};
use tern_testkit::strongswan::{Charon, CharonSpec, psk_secret};

const PSK: &str = "nat-move-psk-0123456789";

/// The prefix of the rig's namespaces.
const PREFIX: &str = "ikefix";

/// Flushes the namespace's connection tracking table (what `conntrack -F`
/// does, without the conntrack tool): IPCTNL_MSG_CT_DELETE with no
/// attributes over NETLINK_NETFILTER. Prints the error code of the ack.
const CT_FLUSH: &str = "import socket,struct\n\
s=socket.socket(socket.AF_NETLINK,socket.SOCK_RAW,12)\n\
s.sendto(struct.pack('=IHHII',20,(1<<8)|2,1|4,1,0)+struct.pack('=BBH',2,0,0),(0,0))\n\
r=s.recv(4096)\n\
print(struct.unpack('=i',r[16:20])[0])\n";

/// The source NAT: charon's IKE and ESP (UDP 500 and 4500) to `addr`,
/// ports `port + 500` and `port`.
fn nat_rules(addr: &str, port: u16) -> String {
    format!(
        "flush ruleset\ntable ip nat {{\n  chain post {{\n    type nat hook postrouting priority 100;\n    \
         oifname \"eth0\" ip saddr 10.4.0.2 udp sport 4500 snat to {addr}:{port}\n    \
         oifname \"eth0\" ip saddr 10.4.0.2 udp sport 500 snat to {addr}:{}\n  }}\n}}\n",
        port + 500
    )
}

struct Rig {
    /// First, so that it stops before its namespace goes.
    charon: Option<Charon>,
    lab: Lab,
    swan: Netns,
}

/// On success and while a panic unwinds: charon and tern stopped, what
/// is left in the namespaces killed, before they go.
impl Drop for Rig {
    fn drop(&mut self) {
        ike_common::stop_all(self.charon.as_mut(), &mut self.lab, &[&self.swan.name]);
    }
}

fn rig(tag: &str) -> Option<Rig> {
    // Also removes namespaces of earlier runs killed before their rigs
    // dropped.
    if let Some(why) = ike_common::missing(PREFIX) {
        eprintln!("skipped: {why}");
        return None;
    }
    for tool in ["nft", "/usr/bin/python3"] {
        if std::process::Command::new(tool).arg("--version").output().is_err() {
            eprintln!("skipped: {tool} is not installed");
            return None;
        }
    }
    // `{PREFIX}{pid}-`: what `remove_stale` reads to spare live runs.
    let base = format!("{PREFIX}{}-{tag}", std::process::id());
    let lab = Lab::two_hosts(&base);
    let nat = &lab.netns[2];
    let swan = Netns::named(&format!("{base}sw"));
    Veth::new(nat, "lan0", &swan, "eth0").create();
    nat.ip(&["addr", "add", "10.4.0.1/24", "dev", "lan0"]);
    nat.ip(&["addr", "add", "10.0.2.3/24", "dev", "eth0"]);
    nat.sysctl("net.ipv4.ip_forward", "1");
    swan.ip(&["addr", "add", "10.4.0.2/24", "dev", "eth0"]);
    swan.ip(&["route", "add", "default", "via", "10.4.0.1"]);
    Some(Rig { charon: None, lab, swan })
}

/// With `auth` the `[[ike]]` authentication lines (`auth = ...` and its keys).
fn tern_config_auth(lab: &Lab, auth: &str) -> String {
    format!(
        r#"
[[interface]]
name = "lan0"
device = "lan0"
driver = "afpacket"
addresses = ["10.0.1.1/24"]

[[interface]]
name = "wan0"
device = "wan0"
driver = "afpacket"
addresses = ["10.0.2.1/24"]

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
prefix = "10.4.0.2/32"
interface = "ipsec0"

[[ike]]
name = "swan"
local = "10.0.2.1"
remote = "10.0.2.2"
tunnel = "ipsec0"
local_id = "{TERN_ID}"
remote_id = "{SWAN_ID}"
{auth}
proposals = ["aes128gcm16-prfsha256-x25519"]
esp_proposals = ["aes128gcm16"]
local_ts = ["10.0.1.0/24"]
start = false
"#,
        lab.socket()
    )
}

/// charon's connection: its own address against h1's network, a liveness
/// check after 2 s without a word from tern.
fn swan_conf_psk(psk: &str) -> String {
    swan_conf_auth(&format!("auth = psk\n      id = {SWAN_ID}"), "auth = psk", &psk_secret("t", TERN_ID, SWAN_ID, psk))
}

/// charon's connection with `local` / `remote` auth lines and `secrets`.
fn swan_conf_auth(local: &str, remote: &str, secrets: &str) -> String {
    format!(
        "connections {{\n  tern {{\n    local_addrs = 10.4.0.2\n    remote_addrs = 10.0.2.1\n    \
         proposals = aes128gcm16-prfsha256-x25519\n    dpd_delay = 2s\n    local {{\n      {local}\n    }}\n    \
         remote {{\n      {remote}\n      id = {TERN_ID}\n    }}\n    children {{\n      \
         net {{\n        remote_ts = 10.0.1.0/24\n        esp_proposals = aes128gcm16\n        start_action = none\n      \
         }}\n    }}\n  }}\n}}\nsecrets {{\n{secrets}}}\n"
    )
}

impl Rig {
    fn api(&self, op: &str, args: serde_json::Value) -> Result<serde_json::Value, String> {
        ike_common::api(&self.lab, op, args)
    }

    /// tern's established IKE SA with `swan` (with a child), if any.
    fn tern_sa(&self) -> Option<serde_json::Value> {
        ike_common::tern_sas(&self.lab).into_iter().find(|s| {
            s["peer"] == "swan"
                && s["state"] == "established"
                && s["children"].as_array().is_some_and(|c| !c.is_empty())
        })
    }

    fn tunnel_remote(&self) -> String {
        match self.api("ipsec_tunnel_show", serde_json::json!({})) {
            Ok(serde_json::Value::Array(a)) => a
                .iter()
                .find(|t| t["name"] == "ipsec0")
                .map(|t| t["remote"].as_str().unwrap_or_default().to_string())
                .unwrap_or_default(),
            other => panic!("ipsec_tunnel_show: {other:?}"),
        }
    }

    /// One ping from h1 to charon's address through the tunnel.
    fn ping(&self) -> bool {
        self.lab.netns[0].exec_ok(&["ping", "-q", "-c", "1", "-W", "1", "10.4.0.2"])
    }

    fn logs(&self) -> String {
        ike_common::logs(&self.lab, self.charon.as_ref().map(|c| ("charon".to_string(), c)))
    }

    fn nat(&self, addr: &str, port: u16) {
        let nat = &self.lab.netns[2];
        let rules = self.lab.dir.join("nat.nft");
        std::fs::write(&rules, nat_rules(addr, port)).expect("rules");
        nat.exec_must(&["nft", "-f", &rules.display().to_string()]);
    }
}

impl Rig {
    /// tern with `auth` and charon with the key `psk`; charon initiates and
    /// pings go through.
    fn up(&mut self, auth: &str, psk: &str) -> serde_json::Value {
        self.up_with(auth, swan_conf_psk(psk))
    }

    /// As [`Rig::up`] with charon's swanctl.conf `swan`.
    fn up_with(&mut self, auth: &str, swan: String) -> serde_json::Value {
        self.nat("10.0.2.2", 40000);
        let path = self.lab.dir.join("tern.toml");
        std::fs::write(&path, tern_config_auth(&self.lab, auth)).expect("config");
        run_tern(&mut self.lab, &path);
        let dir = self.lab.dir.join("charon");
        let spec = CharonSpec { charon_extra: String::new(), swanctl_conf: swan };
        let c = Charon::start(&self.swan.name, &dir, &spec).unwrap_or_else(|e| panic!("{e}"));
        c.load_all().unwrap_or_else(|e| panic!("{e}"));
        self.charon = Some(c);
        self.charon.as_ref().expect("charon").initiate("net").unwrap_or_else(|e| panic!("{e}{}", self.logs()));
        wait("tern's IKE SA", 30, self, || self.tern_sa().is_some());
        wait("pings through the tunnel", 20, self, || self.ping());
        self.tern_sa().expect("IKE SA")
    }
}

fn wait(what: &str, secs: u64, r: &Rig, f: impl FnMut() -> bool) {
    ike_common::wait(what, secs, || r.logs(), f);
}

#[test]
fn a_peer_behind_a_nat_whose_mapping_changes_keeps_its_tunnel() {
    let Some(mut r) = rig("n") else { return };
    let before = r.up(&format!("auth = \"psk\"\npsk = \"{PSK}\""), PSK);
    assert_eq!(before["remote"], "10.0.2.2:40000", "{before}");
    assert_eq!(before["nat"], true);
    let first_child = before["children"][0]["spi_in"].clone();

    // The NAT maps charon anew: another address and port.
    r.nat("10.0.2.3", 41000);
    let out = r.lab.netns[2].exec(&["/usr/bin/python3", "-c", CT_FLUSH]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "conntrack flush: {out:?}");

    // tern follows at charon's next liveness check (2 s without a word).
    wait("pings through the tunnel again", 60, &r, || r.ping());
    let after = r.tern_sa().expect("IKE SA");
    assert_eq!(after["remote"], "10.0.2.3:41000", "{after}");
    assert_eq!((&after["spi_i"], &after["spi_r"]), (&before["spi_i"], &before["spi_r"]), "the same IKE SA");
    assert_ne!(after["children"][0]["spi_in"], first_child, "the child SA was rekeyed to follow");
    assert_eq!(after["children"].as_array().map(Vec::len), Some(1), "the old child SA deleted: {after}");
    assert_eq!(r.tunnel_remote(), "10.0.2.3");
    assert!(log_of(&r.lab).contains("moved from 10.0.2.2:40000"), "{}", r.logs());
    for _ in 0..5 {
        assert!(r.ping(), "pings keep going: {}", r.logs());
    }
}

/// charon's ESP right after its NAT mapping changed (a new port, the same
/// address), and no IKE message from charon (no liveness checks
/// configured, no rekey): tern learns the new mapping from the first
/// authenticated ESP packet and rekeys the child onto it at once. charon
/// pings h1 100 times a second across the remap; the replies lost are
/// those tern sent to the forgotten mapping before it followed.
#[test]
fn esp_from_a_new_nat_mapping_moves_the_peer_without_ike() {
    const COUNT: u16 = 400;
    let Some(mut r) = rig("e") else { return };
    let conf = swan_conf_psk(PSK).replace("    dpd_delay = 2s\n", "");
    assert!(!conf.contains("dpd_delay"));
    let before = r.up_with(&format!("auth = \"psk\"\npsk = \"{PSK}\""), conf);
    assert_eq!(before["remote"], "10.0.2.2:40000", "{before}");
    let first_child = before["children"][0]["spi_in"].clone();
    let packets_out = |r: &Rig| -> u64 {
        let sas = r.charon.as_ref().expect("charon").list_sas().unwrap_or_default();
        sas.iter().flat_map(|s| &s.children).map(|c| c.count("packets-out")).sum()
    };
    let sent_before = packets_out(&r);
    std::thread::scope(|s| {
        let swan = &r.swan;
        // The testkit's ping4, which awaits each answer (iputils' ping
        // calls an answer lost that comes later than twice the slowest so
        // far: on a loaded machine, answers merely late).
        let pinger = s.spawn(move || {
            let h1 = std::net::Ipv4Addr::new(10, 0, 1, 2);
            tern_testkit::ping::ping4(
                swan,
                h1,
                COUNT,
                std::time::Duration::from_millis(10),
                std::time::Duration::from_secs(10),
            )
            .unwrap_or_else(|e| panic!("ping from charon's side: {e}"))
        });
        // A second of traffic on the old mapping, then the new one.
        wait("charon's pings on the old mapping", 20, &r, || packets_out(&r) >= sent_before + 100);
        r.nat("10.0.2.2", 41000);
        let out = r.lab.netns[2].exec(&["/usr/bin/python3", "-c", CT_FLUSH]);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "conntrack flush: {out:?}");
        let pings = pinger.join().expect("pinger");
        let got = pings.received();
        eprintln!("ESP remap: {} of {COUNT} pings lost across the remap", COUNT - got);
        assert!(COUNT - got <= 10, "at most 10 of {COUNT} lost across the remap: {pings:?}{}", r.logs());
    });
    let after = r.tern_sa().expect("IKE SA");
    assert_eq!(after["remote"], "10.0.2.2:41000", "{after}");
    assert_eq!((&after["spi_i"], &after["spi_r"]), (&before["spi_i"], &before["spi_r"]), "the same IKE SA");
    assert_ne!(after["children"][0]["spi_in"], first_child, "the child SA was rekeyed to follow");
    let log = log_of(&r.lab);
    assert!(log.contains("authenticated ESP of child SA") && log.contains("from 10.0.2.2:41000"), "{}", r.logs());
    assert!(common::counter(&r.lab, "esp-decrypt/peer-moved") >= 1);
    // Learned from ESP: charon asked nothing of tern after its first IKE_AUTH.
    let swan_log = r.charon.as_ref().expect("charon").log();
    for req in ["generating INFORMATIONAL request", "generating CREATE_CHILD_SA request"] {
        assert!(!swan_log.contains(req), "charon sent no {req:?}: {}", r.logs());
    }
}

#[test]
fn reload_notices_a_new_psk_file_and_keeps_the_established_sa() {
    const NEW: &str = "the-new-psk-from-the-file-9876543210";
    let Some(mut r) = rig("p") else { return };
    let key = r.lab.dir.join("swan.psk");
    std::fs::write(&key, format!("{PSK}\n")).expect("psk file");
    let before = r.up(&format!("auth = \"psk\"\npsk_file = \"{}\"", key.display()), PSK);
    // The same configuration text, another key in the file.
    std::fs::write(&key, format!("{NEW}\n")).expect("psk file");
    let report = r.api("config_reload", serde_json::json!({})).unwrap_or_else(|e| panic!("reload: {e}"));
    assert!(report.to_string().contains("ike peers changed"), "{report}");
    // The IKE SA up stays and carries traffic.
    let kept = r.tern_sa().expect("the IKE SA stays");
    assert_eq!((&kept["spi_i"], &kept["spi_r"]), (&before["spi_i"], &before["spi_r"]));
    for _ in 0..3 {
        assert!(r.ping(), "pings after the reload: {}", r.logs());
    }
    // charon gets the new key and sets up a new IKE SA: tern checks it
    // with the file's new key.
    let c = r.charon.as_ref().expect("charon");
    c.write_swanctl_conf(&swan_conf_psk(NEW)).expect("conf");
    c.load_all().unwrap_or_else(|e| panic!("{e}"));
    c.terminate_ike("tern").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    c.initiate("net").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    wait("a new IKE SA with the new key", 30, &r, || r.tern_sa().is_some_and(|s| s["spi_i"] != before["spi_i"]));
    wait("pings through the new SA", 20, &r, || r.ping());
}

#[test]
fn certificates_with_a_peer_without_rfc7427_use_classic_ecdsa() {
    let Some(mut r) = rig("c") else { return };
    if std::process::Command::new("openssl").arg("version").output().is_err() {
        eprintln!("skipped: openssl is not installed");
        return;
    }
    let certs = r.lab.dir.join("certs");
    make_certs(&certs).unwrap_or_else(|e| panic!("{e}"));
    let p = |f: &str| certs.join(f).display().to_string();
    let auth = format!(
        "auth = \"pubkey\"\ncertificate = \"{}\"\nprivate_key = \"{}\"\nca = [\"{}\"]",
        p("tern.pem"),
        p("tern.key"),
        p("ca.pem")
    );
    r.nat("10.0.2.2", 40000);
    let path = r.lab.dir.join("tern.toml");
    std::fs::write(&path, tern_config_auth(&r.lab, &auth)).expect("config");
    run_tern(&mut r.lab, &path);
    let dir = r.lab.dir.join("charon");
    charon_creds(&dir, &certs);
    let conf =
        swan_conf_auth(&format!("auth = pubkey\n      certs = swan.pem\n      id = {SWAN_ID}"), "auth = pubkey", "");
    let spec = CharonSpec { charon_extra: "  signature_authentication = no\n".into(), swanctl_conf: conf };
    let c = Charon::start(&r.swan.name, &dir, &spec).unwrap_or_else(|e| panic!("{e}"));
    c.load_all().unwrap_or_else(|e| panic!("{e}"));
    r.charon = Some(c);
    r.charon.as_ref().expect("charon").initiate("net").unwrap_or_else(|e| panic!("{e}{}", r.logs()));
    wait("tern's IKE SA", 30, &r, || r.tern_sa().is_some());
    let log = r.charon.as_ref().expect("charon").log();
    assert!(
        log.contains(&format!("authentication of '{TERN_ID}' with ECDSA-256 signature successful")),
        "charon checked tern's classic (method 9) signature: {}",
        r.logs()
    );
    let init = log.lines().find(|l| l.contains("generating IKE_SA_INIT request")).unwrap_or_default();
    assert!(init.contains("N(NATD_S_IP)") && !init.contains("HASH_ALG"), "charon announced no RFC 7427: {init}");
    wait("pings through the tunnel", 20, &r, || r.ping());
}
