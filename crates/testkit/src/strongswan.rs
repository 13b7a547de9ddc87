//! strongSwan's charon as a peer: the IKEv2 interoperability tests of
//! `tern` (`crates/tern/tests/netns_ike.rs`), the ESP comparison rig
//! (`crates/bench/scripts/ipsec_vs_strongswan.sh` does the same in shell)
//! and `tern-bench ike` run it.
//!
//! One [`Charon`] is one charon process in a network namespace, with its
//! own directory: `strongswan.conf` (written here, found by charon and
//! swanctl through `STRONGSWAN_CONF`), `swanctl.conf` and the swanctl
//! credential folders beside it (`x509`, `x509ca`, `private`, ...), the
//! VICI socket `charon.vici`, the log `charon.log` (ike, cfg, knl and net
//! at level 2) and charon's own stdout and stderr in `charon.out`. charon's
//! pid file is fixed at `/var/run/charon.pid`, so each instance runs in a
//! mount namespace of its own with a fresh tmpfs on `/run`: any number run
//! side by side.
//!
//! This kernel has no ESP (no xfrm), so the data plane is the
//! `kernel-libipsec` plugin: userspace ESP over a TUN device (`ipsec0`
//! in charon's namespace, routes in table 220), which always encapsulates
//! ESP in UDP 4500. It needs `/dev/net/tun`. X25519 comes from the
//! `openssl` plugin (Debian's `curve25519` plugin is in
//! libstrongswan-extra-plugins and not needed).
//!
//! The process is stopped (SIGTERM to its process group, SIGKILL after a
//! grace period) when the [`Charon`] drops.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The charon binary (Debian's strongswan-charon).
pub const CHARON: &str = "/usr/lib/ipsec/charon";

/// The plugins every instance loads: crypto (openssl for X25519, ECP and
/// MODP groups, AES, GCM), credentials (PEM, PKCS#1/#8, X.509, public
/// keys, constraints), `kdf` (5.9.8 derives IKE keys through it), the
/// sockets, VICI, the libipsec data plane with
/// netlink for addresses and routes, and `attr` for configuration
/// payloads.
pub const PLUGINS: &str = "random nonce openssl pem pkcs1 pkcs8 x509 pubkey constraints revocation hmac sha1 sha2 kdf \
                           aes gcm socket-default vici kernel-libipsec kernel-netlink attr updown";

/// Why charon cannot run here (not root, a binary or /dev/net/tun
/// missing), if so: tests print it and skip.
pub fn missing() -> Option<String> {
    if !crate::netns::is_root() {
        return Some("needs root".into());
    }
    for bin in [CHARON, "/usr/sbin/swanctl", "/usr/bin/unshare"] {
        if !Path::new(bin).exists() {
            return Some(format!(
                "{bin} missing (apt-get install strongswan-charon strongswan-swanctl libcharon-extra-plugins \
                 libstrongswan-standard-plugins)"
            ));
        }
    }
    if !Path::new("/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so").exists() {
        return Some("strongSwan's kernel-libipsec plugin missing (apt-get install libcharon-extra-plugins)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun missing (kernel-libipsec needs a TUN device)".into());
    }
    None
}

/// Where tern runs against charon in the interop tests (issue 40: IKE on
/// UDP 500 and 4500 of the router's addresses in both lanes and in Linux
/// mode). Each says how its IKE and ESP reach tern:
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Standalone on AF_PACKET: `ip4-local` (UDP 500) and `esp-decrypt`
    /// (4500 with the non-ESP marker) queue IKE for the IKE service
    /// (`ike-to-control`).
    AfPacket,
    /// Standalone with the XDP lane (`driver = "xdp"`, AF_XDP beside it):
    /// the lane punts ESP and UDP 500/4500 for the router's addresses to
    /// the engine (`xdp-lane/punt-ipsec`), then as on AF_PACKET.
    AfXdpWithXdpLane,
    /// Linux mode over AF_XDP: the kernel owns the router's addresses and
    /// IKE reaches the IKE service's kernel sockets; the steering program
    /// sends only ESP (and ESP in UDP 4500) to tern
    /// (`xdp-steer/ipsec-to-tern`).
    Linux,
    /// Linux mode with the XDP lane: as [`Lane::Linux`], the lane passing
    /// IKE to the kernel and punting ESP to tern (`xdp-lane/punt-ipsec`).
    LinuxXdpLane,
}

impl Lane {
    /// Every lane, AF_PACKET first.
    pub const ALL: [Lane; 4] = [Lane::AfPacket, Lane::AfXdpWithXdpLane, Lane::Linux, Lane::LinuxXdpLane];

    /// The `driver` of its `[[interface]]` tables.
    pub fn driver(self) -> &'static str {
        match self {
            Lane::AfPacket => "afpacket",
            Lane::AfXdpWithXdpLane | Lane::LinuxXdpLane => "xdp",
            Lane::Linux => "afxdp",
        }
    }

    /// Whether tern runs in Linux mode.
    pub fn linux(self) -> bool {
        matches!(self, Lane::Linux | Lane::LinuxXdpLane)
    }

    /// A short tag for namespace names.
    pub fn tag(self) -> &'static str {
        match self {
            Lane::AfPacket => "p",
            Lane::AfXdpWithXdpLane => "x",
            Lane::Linux => "l",
            Lane::LinuxXdpLane => "y",
        }
    }

    /// The head of tern's configuration: `[linux]` if so, and one
    /// `[[interface]]` per (name = device, address/prefix).
    pub fn interfaces(self, ifs: &[(&str, &str)]) -> String {
        let mut s = if self.linux() { "[linux]\nmode = \"linux\"\n".to_string() } else { String::new() };
        for (name, addr) in ifs {
            let _ = write!(
                s,
                "\n[[interface]]\nname = \"{name}\"\ndevice = \"{name}\"\ndriver = \"{}\"\naddresses = [\"{addr}\"]\n",
                self.driver()
            );
        }
        s
    }
}

/// Kills (SIGKILL) every process still in network namespace `ns` (`ip
/// netns pids`) and reaps none: the rigs' last step before the namespace
/// goes, so that a failed test leaves no charon, tern or ping behind.
/// How many it signalled.
pub fn kill_pids_in(ns: &str) -> usize {
    let Ok(out) = crate::netns::output("ip", &["netns", "pids", ns]) else { return 0 };
    let mut n = 0;
    for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if pid.parse::<u32>().is_ok() && crate::netns::output("kill", &["-KILL", pid]).is_ok_and(|o| o.status.success())
        {
            n += 1;
        }
    }
    n
}

/// How to start one charon (see [`Charon::start`]).
#[derive(Clone, Debug, Default)]
pub struct CharonSpec {
    /// More settings inside `charon { ... }` of strongswan.conf, e.g.
    /// `"threads = 8\nretransmit_timeout = 1\n"`.
    pub charon_extra: String,
    /// The swanctl.conf to load (connections, secrets, pools).
    pub swanctl_conf: String,
}

/// One charon process in a network namespace (see the module).
#[derive(Debug)]
pub struct Charon {
    ns: String,
    dir: PathBuf,
    child: Option<Child>,
}

/// The strongswan.conf the rig writes for an instance in `dir`.
pub fn strongswan_conf(dir: &Path, charon_extra: &str) -> String {
    let d = dir.display();
    format!(
        r#"# Written by tern-testkit's strongSwan rig.
charon {{
  load = {PLUGINS}
  install_routes = yes
  install_virtual_ip = yes
  port = 500
  port_nat_t = 4500
  filelog {{
    log {{
      path = {d}/charon.log
      time_format = %b %e %T
      ike_name = yes
      append = no
      flush_line = yes
      default = 1
      ike = 2
      cfg = 2
      knl = 2
      net = 2
      enc = 1
    }}
  }}
  syslog {{
    daemon {{
      default = -1
    }}
  }}
  plugins {{
    vici {{
      socket = unix://{d}/charon.vici
    }}
    kernel-libipsec {{
      allow_peer_ts = yes
    }}
  }}
{charon_extra}
}}
swanctl {{
  load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey kdf
}}
"#
    )
}

/// The credential folders swanctl reads beside swanctl.conf.
const CRED_DIRS: [&str; 13] = [
    "x509", "x509ca", "x509ocsp", "x509aa", "x509ac", "x509crl", "pubkey", "private", "rsa", "ecdsa", "bliss", "pkcs8",
    "pkcs12",
];

impl Charon {
    /// Starts charon in namespace `ns` with its files in `dir` (created;
    /// an earlier run's files in it are overwritten) and waits until its
    /// VICI socket answers. Does not load the configuration: call
    /// [`Charon::load_all`] (after adding credentials, if any).
    pub fn start(ns: &str, dir: &Path, spec: &CharonSpec) -> Result<Charon, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for d in CRED_DIRS {
            std::fs::create_dir_all(dir.join(d)).map_err(|e| format!("{}/{d}: {e}", dir.display()))?;
        }
        let conf = dir.join("strongswan.conf");
        std::fs::write(&conf, strongswan_conf(dir, &spec.charon_extra))
            .map_err(|e| format!("{}: {e}", conf.display()))?;
        let swanctl = dir.join("swanctl.conf");
        std::fs::write(&swanctl, &spec.swanctl_conf).map_err(|e| format!("{}: {e}", swanctl.display()))?;
        let _ = std::fs::remove_file(dir.join("charon.vici"));
        let out = std::fs::File::create(dir.join("charon.out")).map_err(|e| format!("charon.out: {e}"))?;
        let err = out.try_clone().map_err(|e| format!("charon.out: {e}"))?;
        // `ip netns exec`, unshare (without --fork) and sh all exec in
        // place: the child's pid is charon's, and its process group
        // charon's alone.
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "unshare", "--mount", "--propagation", "private", "sh", "-c"])
            .arg(format!("mount -t tmpfs tmpfs /run && exec {CHARON}"))
            .env("STRONGSWAN_CONF", &conf)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("ip netns exec {ns} ... {CHARON}: cannot start: {e}"))?;
        let mut c = Charon { ns: ns.to_string(), dir: dir.to_path_buf(), child: Some(child) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(Some(st)) = c.child.as_mut().map(|ch| ch.try_wait().ok().flatten()) {
                c.child = None;
                return Err(format!("charon in {ns} exited ({st}): {}", c.output()));
            }
            if dir.join("charon.vici").exists() && c.swanctl(&["--stats"]).is_ok() {
                return Ok(c);
            }
            if Instant::now() > deadline {
                return Err(format!("charon in {ns}: VICI did not answer in 20 s: {}", c.output()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The namespace it runs in.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its VICI socket as swanctl's `--uri`.
    pub fn uri(&self) -> String {
        format!("unix://{}/charon.vici", self.dir.display())
    }

    /// charon's process id (also its process group), while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The log so far (charon.log).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("charon.log")).unwrap_or_default()
    }

    /// What charon wrote to stdout and stderr.
    pub fn output(&self) -> String {
        std::fs::read_to_string(self.dir.join("charon.out")).unwrap_or_default()
    }

    /// Runs `swanctl ARGS --uri ...` against this instance (swanctl reads
    /// the instance's strongswan.conf too); its stdout, or an error with
    /// the command, its status and its output.
    pub fn swanctl(&self, args: &[&str]) -> Result<String, String> {
        let uri = self.uri();
        let o = Command::new("swanctl")
            .args(args)
            .args(["--uri", &uri])
            .env("STRONGSWAN_CONF", self.dir.join("strongswan.conf"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("swanctl: cannot start: {e}"))?;
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        if !o.status.success() {
            return Err(format!(
                "`swanctl {} --uri {uri}` failed ({}): {}{}",
                args.join(" "),
                o.status,
                stdout.trim(),
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Ok(stdout)
    }

    /// Replaces swanctl.conf (then [`Charon::load_all`] to apply it).
    pub fn write_swanctl_conf(&self, text: &str) -> Result<(), String> {
        std::fs::write(self.dir.join("swanctl.conf"), text).map_err(|e| format!("swanctl.conf: {e}"))
    }

    /// `swanctl --load-all`: connections, secrets, pools and the
    /// credentials in the folders beside swanctl.conf.
    pub fn load_all(&self) -> Result<String, String> {
        let file = self.dir.join("swanctl.conf").display().to_string();
        self.swanctl(&["--load-all", "--file", &file])
    }

    /// `swanctl --initiate --child CHILD` (waits for the outcome, 30 s at
    /// most); its output (charon's log lines of the exchange).
    pub fn initiate(&self, child: &str) -> Result<String, String> {
        self.swanctl(&["--initiate", "--child", child, "--timeout", "30"])
    }

    /// `swanctl --initiate --ike IKE` (the IKE SA and the connection's
    /// children with `start_action` ... or none): its output.
    pub fn initiate_ike(&self, ike: &str) -> Result<String, String> {
        self.swanctl(&["--initiate", "--ike", ike, "--timeout", "30"])
    }

    /// `swanctl --terminate --ike NAME` (deletes the IKE SA and its
    /// children, INFORMATIONAL to the peer; waits 30 s at most).
    pub fn terminate_ike(&self, name: &str) -> Result<String, String> {
        self.swanctl(&["--terminate", "--ike", name, "--timeout", "30"])
    }

    /// `swanctl --terminate --child NAME`.
    pub fn terminate_child(&self, name: &str) -> Result<String, String> {
        self.swanctl(&["--terminate", "--child", name, "--timeout", "30"])
    }

    /// `swanctl --rekey --child NAME` (returns when the request is
    /// queued: await the new SPIs in [`Charon::list_sas`]).
    pub fn rekey_child(&self, name: &str) -> Result<String, String> {
        self.swanctl(&["--rekey", "--child", name])
    }

    /// `swanctl --rekey --ike NAME`.
    pub fn rekey_ike(&self, name: &str) -> Result<String, String> {
        self.swanctl(&["--rekey", "--ike", name])
    }

    /// The IKE SAs (and their children) as `swanctl --list-sas` shows them.
    pub fn list_sas(&self) -> Result<Vec<IkeSa>, String> {
        Ok(parse_list_sas(&self.swanctl(&["--list-sas", "--pretty"])?))
    }

    /// Waits until an IKE SA of connection `ike` is ESTABLISHED with at
    /// least one INSTALLED child SA (polling the list); that SA, or an
    /// error with the list and the log's tail at the deadline.
    pub fn wait_established(&self, ike: &str, limit: Duration) -> Result<IkeSa, String> {
        self.wait_sa(ike, limit, |s| s.state() == "ESTABLISHED" && s.children.iter().any(|c| c.state() == "INSTALLED"))
    }

    /// Waits until an IKE SA of connection `ike` satisfies `cond`.
    pub fn wait_sa(&self, ike: &str, limit: Duration, mut cond: impl FnMut(&IkeSa) -> bool) -> Result<IkeSa, String> {
        let deadline = Instant::now() + limit;
        loop {
            let sas = self.list_sas()?;
            if let Some(sa) = sas.iter().find(|s| s.name == ike && cond(s)) {
                return Ok(sa.clone());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "charon in {}: no matching IKE SA {ike} after {limit:?}: {sas:?}\n{}",
                    self.ns,
                    tail(&self.log(), 40)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until connection `ike` has no IKE SA left.
    pub fn wait_gone(&self, ike: &str, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            let sas = self.list_sas()?;
            if !sas.iter().any(|s| s.name == ike) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("charon in {}: IKE SA {ike} still there after {limit:?}: {sas:?}", self.ns));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the log contains `needle`; whether it did by `limit`.
    pub fn wait_log(&self, needle: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.log().contains(needle) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills charon outright (SIGKILL to its group): a peer that dies
    /// without a word, for dead-peer detection.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = crate::netns::output("kill", &["-KILL", "--", &format!("-{}", c.id())]);
            let _ = c.wait();
        }
    }

    /// Stops charon: SIGTERM to its process group, SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        if let Some(mut c) = self.child.take() {
            let pg = format!("-{}", c.id());
            let _ = crate::netns::output("kill", &["-TERM", "--", &pg]);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(c.try_wait(), Ok(None)) {
                let _ = crate::netns::output("kill", &["-KILL", "--", &pg]);
            }
            let _ = c.wait();
        }
    }
}

impl Drop for Charon {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A section of swanctl's `--pretty` output: `key = value` pairs, lists
/// (`key = [` items `]`) and named subsections.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub values: BTreeMap<String, String>,
    pub lists: BTreeMap<String, Vec<String>>,
    pub sections: Vec<Section>,
}

/// Parses swanctl's `--pretty` output into its top-level sections
/// (`list-sa event { ... }` and the like). Lines it does not understand
/// (swanctl's own messages) are skipped.
pub fn parse_pretty(text: &str) -> Vec<Section> {
    let mut stack: Vec<Section> = vec![Section::default()];
    let mut list: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        let l = line.trim();
        if let Some((key, items)) = &mut list {
            if l == "]" {
                let (k, v) = (std::mem::take(key), std::mem::take(items));
                if let Some(top) = stack.last_mut() {
                    top.lists.insert(k, v);
                }
                list = None;
            } else {
                items.push(l.to_string());
            }
            continue;
        }
        if let Some(name) = l.strip_suffix('{') {
            stack.push(Section { name: name.trim().to_string(), ..Section::default() });
        } else if l == "}" {
            if stack.len() > 1 {
                let done = stack.pop().unwrap_or_default();
                if let Some(top) = stack.last_mut() {
                    top.sections.push(done);
                }
            }
        } else if let Some((k, v)) = l.split_once(" = ") {
            if v == "[" {
                list = Some((k.to_string(), Vec::new()));
            } else if let Some(top) = stack.last_mut() {
                top.values.insert(k.to_string(), v.to_string());
            }
        } else if let Some(k) = l.strip_suffix(" = [") {
            list = Some((k.to_string(), Vec::new()));
        }
    }
    // Unclosed sections (a truncated answer) are kept as they are.
    while stack.len() > 1 {
        let done = stack.pop().unwrap_or_default();
        if let Some(top) = stack.last_mut() {
            top.sections.push(done);
        }
    }
    stack.pop().unwrap_or_default().sections
}

/// One IKE SA of `swanctl --list-sas`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IkeSa {
    /// The connection's name.
    pub name: String,
    /// Its fields (`state`, `local-host`, `remote-id`, `initiator-spi`,
    /// `encr-alg`, `dh-group`, `nat-remote`, ...).
    pub fields: BTreeMap<String, String>,
    pub children: Vec<ChildSa>,
    /// Virtual IPs this side was given (`local-vips`).
    pub local_vips: Vec<String>,
}

/// One child SA of an [`IkeSa`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildSa {
    /// The child configuration's name.
    pub name: String,
    /// Its fields (`state`, `spi-in`, `spi-out`, `encap`, `encr-alg`,
    /// `packets-in`, ...).
    pub fields: BTreeMap<String, String>,
    pub local_ts: Vec<String>,
    pub remote_ts: Vec<String>,
}

impl IkeSa {
    /// A field, or "".
    pub fn get(&self, key: &str) -> &str {
        self.fields.get(key).map_or("", String::as_str)
    }

    /// ESTABLISHED, CONNECTING, REKEYING, DELETING, ...
    pub fn state(&self) -> &str {
        self.get("state")
    }

    /// The IKE proposal in strongSwan's names, e.g.
    /// "AES_GCM_16-128/PRF_HMAC_SHA2_256/CURVE_25519".
    pub fn proposal(&self) -> String {
        let mut s = self.get("encr-alg").to_string();
        if !self.get("encr-keysize").is_empty() {
            let _ = write!(s, "-{}", self.get("encr-keysize"));
        }
        for k in ["integ-alg", "prf-alg", "dh-group"] {
            if !self.get(k).is_empty() {
                let _ = write!(s, "/{}", self.get(k));
            }
        }
        s
    }
}

impl ChildSa {
    /// A field, or "".
    pub fn get(&self, key: &str) -> &str {
        self.fields.get(key).map_or("", String::as_str)
    }

    /// INSTALLED, REKEYING, REKEYED, DELETING, ...
    pub fn state(&self) -> &str {
        self.get("state")
    }

    /// Inbound SPI (this side chose it).
    pub fn spi_in(&self) -> Option<u32> {
        u32::from_str_radix(self.get("spi-in"), 16).ok()
    }

    /// Outbound SPI (the peer chose it).
    pub fn spi_out(&self) -> Option<u32> {
        u32::from_str_radix(self.get("spi-out"), 16).ok()
    }

    /// A counter (`packets-in`, `bytes-out`, ...), 0 when absent.
    pub fn count(&self, key: &str) -> u64 {
        self.get(key).parse().unwrap_or(0)
    }
}

/// The IKE SAs in `swanctl --list-sas --pretty` output.
pub fn parse_list_sas(text: &str) -> Vec<IkeSa> {
    let mut out = Vec::new();
    for ev in parse_pretty(text).into_iter().filter(|s| s.name == "list-sa event") {
        for ike in ev.sections {
            let mut sa = IkeSa {
                name: ike.name.clone(),
                fields: ike.values.clone(),
                local_vips: ike.lists.get("local-vips").cloned().unwrap_or_default(),
                ..IkeSa::default()
            };
            for cs in ike.sections.iter().filter(|s| s.name == "child-sas") {
                for c in &cs.sections {
                    sa.children.push(ChildSa {
                        name: c.values.get("name").cloned().unwrap_or_else(|| c.name.clone()),
                        fields: c.values.clone(),
                        local_ts: c.lists.get("local-ts").cloned().unwrap_or_default(),
                        remote_ts: c.lists.get("remote-ts").cloned().unwrap_or_default(),
                    });
                }
            }
            out.push(sa);
        }
    }
    out
}

/// The secrets block of a swanctl.conf for one pre-shared key between two
/// identities.
pub fn psk_secret(name: &str, id1: &str, id2: &str, secret: &str) -> String {
    format!("  ike-{name} {{\n    id-1 = {id1}\n    id-2 = {id2}\n    secret = \"{secret}\"\n  }}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::{Netns, Veth};

    const LISTED: &str = r#"list-sa event {
  gw {
    uniqueid = 1
    version = 2
    state = ESTABLISHED
    local-host = 192.0.2.1
    local-id = C=CH, O=tern, CN=a.example
    initiator = yes
    initiator-spi = d24540ef873b4b77
    encr-alg = AES_GCM_16
    encr-keysize = 128
    prf-alg = PRF_HMAC_SHA2_256
    dh-group = CURVE_25519
    local-vips = [
      10.3.0.1
    ]
    child-sas {
      net-1 {
        name = net
        state = INSTALLED
        encap = yes
        spi-in = 6c4883de
        spi-out = 4372fb58
        packets-in = 12
        local-ts = [
          10.1.0.0/24
        ]
        remote-ts = [
          10.2.0.0/24
          10.4.0.0/24
        ]
      }
    }
  }
}
list-sa event {
  other {
    state = CONNECTING
  }
}
list-sas reply {
}
"#;

    #[test]
    fn list_sas_parses_the_pretty_output() {
        let sas = parse_list_sas(LISTED);
        assert_eq!(sas.len(), 2, "{sas:?}");
        let gw = &sas[0];
        assert_eq!((gw.name.as_str(), gw.state()), ("gw", "ESTABLISHED"));
        assert_eq!(gw.get("local-id"), "C=CH, O=tern, CN=a.example", "a DN keeps its spaces and equals signs");
        assert_eq!(gw.proposal(), "AES_GCM_16-128/PRF_HMAC_SHA2_256/CURVE_25519");
        assert_eq!(gw.local_vips, ["10.3.0.1"]);
        let c = &gw.children[0];
        assert_eq!((c.name.as_str(), c.state()), ("net", "INSTALLED"));
        assert_eq!((c.spi_in(), c.spi_out()), (Some(0x6c48_83de), Some(0x4372_fb58)));
        assert_eq!(c.count("packets-in"), 12);
        assert_eq!(c.count("packets-out"), 0);
        assert_eq!(c.local_ts, ["10.1.0.0/24"]);
        assert_eq!(c.remote_ts, ["10.2.0.0/24", "10.4.0.0/24"]);
        assert_eq!((sas[1].name.as_str(), sas[1].state(), sas[1].children.len()), ("other", "CONNECTING", 0));
        assert!(parse_list_sas("no SAs\n").is_empty());
        assert_eq!(parse_list_sas("list-sa event {\n  cut {\n    state = CONNECTING\n").len(), 1, "a truncated answer");
    }

    /// Two charons side by side: host h1 behind gateway A, h2 behind B,
    /// an IKEv2 PSK tunnel (X25519, AES-GCM) between the gateways over a
    /// veth, and pings between the hosts through both kernel-libipsec
    /// TUNs; each instance with its own socket and log.
    ///
    /// ```text
    /// h1 10.1.0.2 -- 10.1.0.1 [A] 192.0.2.1 ==== 192.0.2.2 [B] 10.2.0.1 -- 10.2.0.2 h2
    /// ```
    #[test]
    fn two_charons_carry_pings_between_their_hosts() {
        if let Some(why) = missing() {
            eprintln!("skipped: the strongSwan rig {why}");
            return;
        }
        let h1 = Netns::unique("tkswh1-");
        let ga = Netns::unique("tkswga-");
        let gb = Netns::unique("tkswgb-");
        let h2 = Netns::unique("tkswh2-");
        Veth::new(&h1, "eth0", &ga, "lan0").create();
        Veth::new(&ga, "wan0", &gb, "wan0").create();
        Veth::new(&gb, "lan0", &h2, "eth0").create();
        h1.ip(&["addr", "add", "10.1.0.2/24", "dev", "eth0"]);
        h1.ip(&["route", "add", "default", "via", "10.1.0.1"]);
        h2.ip(&["addr", "add", "10.2.0.2/24", "dev", "eth0"]);
        h2.ip(&["route", "add", "default", "via", "10.2.0.1"]);
        ga.ip(&["addr", "add", "10.1.0.1/24", "dev", "lan0"]);
        ga.ip(&["addr", "add", "192.0.2.1/24", "dev", "wan0"]);
        gb.ip(&["addr", "add", "10.2.0.1/24", "dev", "lan0"]);
        gb.ip(&["addr", "add", "192.0.2.2/24", "dev", "wan0"]);
        for g in [&ga, &gb] {
            g.sysctl("net.ipv4.ip_forward", "1");
        }
        let conf = |l: &str, r: &str, lts: &str, rts: &str| {
            format!(
                "connections {{\n  gw {{\n    local_addrs = {l}\n    remote_addrs = {r}\n    proposals = aes128gcm16-prfsha256-x25519\n    \
                 local {{\n      auth = psk\n      id = {l}\n    }}\n    remote {{\n      auth = psk\n      id = {r}\n    }}\n    \
                 children {{\n      net {{\n        local_ts = {lts}\n        remote_ts = {rts}\n        esp_proposals = aes128gcm16\n      }}\n    }}\n  }}\n}}\n\
                 secrets {{\n{}}}\n",
                psk_secret("gw", l, r, "rig-test-secret")
            )
        };
        let base = std::env::temp_dir().join(format!("tkswan{}", std::process::id()));
        let a = Charon::start(
            &ga.name,
            &base.join("a"),
            &CharonSpec {
                swanctl_conf: conf("192.0.2.1", "192.0.2.2", "10.1.0.0/24", "10.2.0.0/24"),
                ..Default::default()
            },
        )
        .expect("charon A");
        let b = Charon::start(
            &gb.name,
            &base.join("b"),
            &CharonSpec {
                swanctl_conf: conf("192.0.2.2", "192.0.2.1", "10.2.0.0/24", "10.1.0.0/24"),
                ..Default::default()
            },
        )
        .expect("charon B");
        assert_ne!(a.uri(), b.uri());
        for c in [&a, &b] {
            let out = c.load_all().expect("load");
            assert!(out.contains("loaded connection 'gw'"), "{out}");
        }
        a.initiate("net").expect("initiate");
        let sa_a = a.wait_established("gw", Duration::from_secs(20)).expect("A established");
        let sa_b = b.wait_established("gw", Duration::from_secs(20)).expect("B established");
        assert_eq!(sa_a.proposal(), "AES_GCM_16-128/PRF_HMAC_SHA2_256/CURVE_25519");
        assert_eq!(sa_a.get("initiator"), "yes");
        assert_eq!(sa_a.children[0].get("encap"), "yes", "kernel-libipsec: ESP in UDP");
        assert_eq!(sa_a.children[0].spi_out(), sa_b.children[0].spi_in(), "A's outbound SA is B's inbound");
        let ping = h1.exec(&["ping", "-c", "5", "-i", "0.05", "-W", "5", "10.2.0.2"]);
        assert!(ping.status.success(), "ping h1 -> h2: {}", String::from_utf8_lossy(&ping.stdout));
        assert!(h2.exec_ok(&["ping", "-c", "2", "-i", "0.05", "-W", "5", "10.1.0.2"]), "ping h2 -> h1");
        // The pings went through the tunnel, not around it: the ESP SAs
        // counted them (strongSwan's libipsec counts per SA).
        let sas = a.list_sas().expect("list");
        let child = &sas[0].children[0];
        assert!(child.count("packets-out") >= 5 && child.count("packets-in") >= 5, "{child:?}");
        assert!(a.log().contains("IKE_SA gw[1] established"), "A's own log");
        assert!(b.log().contains("authentication of '192.0.2.1' with pre-shared key successful"), "B's own log");
        // Deleting from A takes the SA down on both sides.
        a.terminate_ike("gw").expect("terminate");
        b.wait_gone("gw", Duration::from_secs(10)).expect("B saw the delete");
        assert!(!h1.exec_ok(&["ping", "-c", "1", "-W", "1", "10.2.0.2"]), "no tunnel, no route to h2's network");
        drop((a, b));
        let _ = std::fs::remove_dir_all(&base);
    }
}
