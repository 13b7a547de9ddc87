//! IKEv2 in the configuration: `[[ike]]` peers (issue 40's keys) and
//! `[ike_service]` (the engine's threads and limits), checked into the
//! [`IkePlan`] the IKE service (`crate::ike`) runs. The peers become
//! `tern_ike::PeerConfig`s; pre-shared keys never show (`Debug`, `tern
//! config show`, the API).

use super::{Problem, Seg, bad, k, quote};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tern_ike::proposal::{Proposal, Protocol};
use tern_ike::{AuthConfig, Identity, PeerConfig, TrafficSelector};

/// SA ids from here up are IKE's (`crate::ike` allocates them); the
/// configuration's `[[ipsec_sa]]` and the API's `ipsec_sa_add` stay below.
pub const IKE_SA_ID_BASE: u32 = 1 << 31;

/// The most ESP adds with any algorithm IKE may choose (UDP
/// encapsulation, a 16-byte IV, CBC's padding, a 32-byte ICV): an
/// IKE-keyed tunnel's MTU leaves room for it.
pub fn ike_esp_overhead(outer_v6: bool) -> usize {
    (if outer_v6 { 40 } else { 20 }) + 8 + 8 + 16 + 15 + 2 + 32
}

/// The shortest rekey interval accepted (seconds).
pub const MIN_REKEY_SECS: u64 = 5;

/// The shortest pre-shared key accepted, and the length below which one
/// is warned about.
pub const PSK_MIN: usize = 8;
pub const PSK_WARN: usize = 16;

/// Secret text (a pre-shared key): `Debug` and `tern config show` print
/// "<redacted>".
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct SecretText(pub String);

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Serialize for SecretText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("<redacted>")
    }
}

impl Drop for SecretText {
    fn drop(&mut self) {
        // The key's bytes zeroed before the memory goes back.
        let mut v = std::mem::take(&mut self.0).into_bytes();
        v.iter_mut().for_each(|b| *b = 0);
        std::hint::black_box(&v);
    }
}

/// An IKE peer (`[[ike]]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IkeCfg {
    pub name: String,
    /// This side's address (one of the router's).
    pub local: String,
    /// The peer's address, or "any": a responder template.
    #[serde(default = "any")]
    pub remote: String,
    /// Default: the local address (psk), the certificate's subject (pubkey).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_id: Option<String>,
    /// Default: whatever identity the authentication proves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_id: Option<String>,
    /// "psk" | "pubkey".
    #[serde(default = "psk")]
    pub auth: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psk: Option<SecretText>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psk_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ca: Vec<String>,
    /// IKE SA proposals in strongSwan's syntax, in preference order.
    #[serde(default = "default_proposals")]
    pub proposals: Vec<String>,
    /// Child SA proposals; a DH group means PFS.
    #[serde(default = "default_esp_proposals")]
    pub esp_proposals: Vec<String>,
    /// Force UDP encapsulation (strongSwan's `encap`).
    #[serde(default)]
    pub encap: bool,
    /// The route-based `type = "ipsec"` tunnel whose SAs this peer keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<String>,
    /// Initiate at start (and again when the SA goes). Default: true when
    /// `remote` is an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<bool>,
    /// Liveness check after this many idle seconds (0: off).
    #[serde(default = "default_dpd")]
    pub dpd_secs: u64,
    /// Rekey the IKE SA / the child SAs after this many seconds (0: never).
    #[serde(default = "default_ike_rekey")]
    pub ike_rekey_secs: u64,
    #[serde(default = "default_child_rekey")]
    pub child_rekey_secs: u64,
    /// Virtual IPs for remote-access clients: "10.3.0.10-10.3.0.250" or
    /// a CIDR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Traffic selectors (CIDRs); default: everything of both families.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_ts: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote_ts: Vec<String>,
}

fn any() -> String {
    "any".into()
}
fn psk() -> String {
    "psk".into()
}
fn default_proposals() -> Vec<String> {
    vec!["aes128gcm16-prfsha256-x25519".into(), "aes128-sha256-x25519".into()]
}
fn default_esp_proposals() -> Vec<String> {
    vec!["aes128gcm16".into(), "aes128-sha256".into()]
}
fn default_dpd() -> u64 {
    30
}
fn default_ike_rekey() -> u64 {
    4 * 3600
}
fn default_child_rekey() -> u64 {
    3600
}

/// `[ike_service]`: the IKE engine's threads and limits (a table of its
/// own: `[[ike]]` is the peers' array).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IkeServiceCfg {
    /// Engine threads (shards by SPI).
    pub threads: u32,
    /// Half-open IKE SAs (per thread) above which cookies are demanded.
    pub cookie_threshold: usize,
    /// Half-open IKE SAs (per thread) above which IKE_SA_INIT is dropped.
    pub max_half_open: usize,
    pub max_half_open_per_peer: usize,
    /// Seconds a responder answers IKE_SA_INITs with one Diffie-Hellman
    /// value (RFC 7296 2.12), at most `dh_reuse_uses` times; 0 (default):
    /// a fresh value each time. Saves the key generation (X25519: 8 us of a
    /// setup's 55); costs forward secrecy between the IKE SAs set up with
    /// one value until it is wiped (docs/CONFIG.md).
    pub dh_reuse_secs: u64,
    pub dh_reuse_uses: u32,
    /// Peers' certificate chains kept checked, per pubkey peer (and as
    /// many issuer signatures); 0: every chain checked in full
    /// (docs/CONFIG.md).
    pub cert_cache_entries: usize,
}

/// The largest `cert_cache_entries` (an entry is about 400 bytes).
pub const CERT_CACHE_MAX: usize = 1 << 20;

impl Default for IkeServiceCfg {
    fn default() -> Self {
        let s = tern_ike::Settings::default();
        IkeServiceCfg {
            threads: 1,
            cookie_threshold: s.cookie_threshold,
            max_half_open: s.max_half_open,
            max_half_open_per_peer: s.max_half_open_per_peer,
            dh_reuse_secs: s.dh_reuse.as_secs(),
            dh_reuse_uses: s.dh_reuse_uses,
            cert_cache_entries: tern_ike::auth::pubkey::SIGNATURE_CACHE,
        }
    }
}

impl IkeServiceCfg {
    pub fn is_default(&self) -> bool {
        *self == IkeServiceCfg::default()
    }

    /// The engine settings of shard `shard`.
    pub fn settings(&self, shard: u32) -> tern_ike::Settings {
        tern_ike::Settings {
            shard,
            shards: self.threads,
            cookie_threshold: self.cookie_threshold,
            max_half_open: self.max_half_open,
            max_half_open_per_peer: self.max_half_open_per_peer,
            dh_reuse: std::time::Duration::from_secs(self.dh_reuse_secs),
            dh_reuse_uses: self.dh_reuse_uses,
            ..tern_ike::Settings::default()
        }
    }
}

/// One `[[ike]]` entry checked: the engine's configuration and what it
/// came from (two plans are equal when their entries and keys are).
#[derive(Clone)]
pub struct IkePeerPlan {
    pub peer: PeerConfig,
    pub source: IkeCfg,
}

/// The keys and certificates count, not only the text: a reload notices
/// a `psk_file`, certificate, key or CA file whose contents changed.
impl PartialEq for IkePeerPlan {
    fn eq(&self, other: &Self) -> bool {
        let same_auth = match (&self.peer.auth, &other.peer.auth) {
            (AuthConfig::Psk(a), AuthConfig::Psk(b)) => a[..] == b[..],
            (AuthConfig::Pubkey(a), AuthConfig::Pubkey(b)) => a.fingerprint() == b.fingerprint(),
            _ => false,
        };
        self.source == other.source && same_auth
    }
}

impl std::fmt::Debug for IkePeerPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IkePeerPlan").field("peer", &self.peer).finish()
    }
}

/// Everything IKE in a plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IkePlan {
    pub service: IkeServiceCfg,
    pub peers: Vec<IkePeerPlan>,
}

impl IkePlan {
    /// The peer keying tunnel `name`, if one does.
    pub fn peer_of_tunnel(&self, name: &str) -> Option<&IkePeerPlan> {
        self.peers.iter().find(|p| p.peer.tunnel.as_deref() == Some(name))
    }
}

/// The names of the tunnels some `[[ike]]` keys (before the tunnels are
/// checked: their `sa_out` / `sa_in` may then be left out).
pub(super) fn keyed_tunnels(ikes: &[IkeCfg]) -> HashSet<&str> {
    ikes.iter().filter_map(|c| c.tunnel.as_deref()).collect()
}

/// A CIDR as a traffic selector.
fn cidr_ts(s: &str) -> Result<TrafficSelector, String> {
    let (a, len) = s.split_once('/').ok_or_else(|| format!("{} is not a CIDR (e.g. 10.1.0.0/16)", quote(s)))?;
    let a: IpAddr = a.parse().map_err(|_| format!("invalid address in {}", quote(s)))?;
    let len: u8 = len.parse().map_err(|_| format!("invalid prefix length in {}", quote(s)))?;
    let (start, end) = range_of(a, len).ok_or_else(|| format!("prefix length {len} too long for {a}"))?;
    Ok(TrafficSelector { start, end, protocol: 0, start_port: 0, end_port: u16::MAX })
}

/// The first and last address of a prefix.
fn range_of(a: IpAddr, len: u8) -> Option<(IpAddr, IpAddr)> {
    match a {
        IpAddr::V4(v) => {
            let host = 32u32.checked_sub(u32::from(len))?;
            let mask = if host == 32 { 0 } else { u32::MAX << host };
            let n = u32::from(v) & mask;
            Some((IpAddr::V4(n.into()), IpAddr::V4((n | !mask).into())))
        }
        IpAddr::V6(v) => {
            let host = 128u32.checked_sub(u32::from(len))?;
            let mask = if host == 128 { 0 } else { u128::MAX << host };
            let n = u128::from(v) & mask;
            Some((IpAddr::V6(n.into()), IpAddr::V6((n | !mask).into())))
        }
    }
}

/// "first-last" or a CIDR (its network and, for IPv4, broadcast address
/// left out).
fn parse_pool(s: &str) -> Result<(IpAddr, IpAddr), String> {
    if let Some((a, b)) = s.split_once('-') {
        let a: IpAddr = a.trim().parse().map_err(|_| format!("invalid address in {}", quote(s)))?;
        let b: IpAddr = b.trim().parse().map_err(|_| format!("invalid address in {}", quote(s)))?;
        let order = match (a, b) {
            (IpAddr::V4(x), IpAddr::V4(y)) => u32::from(x) <= u32::from(y),
            (IpAddr::V6(x), IpAddr::V6(y)) => u128::from(x) <= u128::from(y),
            _ => return Err(format!("{}: both ends of one address family", quote(s))),
        };
        if !order {
            return Err(format!("{}: the first address is above the last", quote(s)));
        }
        return Ok((a, b));
    }
    let ts = cidr_ts(s).map_err(|e| format!("{e} (or first-last)"))?;
    match (ts.start, ts.end) {
        (IpAddr::V4(x), IpAddr::V4(y)) if u32::from(y) - u32::from(x) >= 3 => {
            Ok((IpAddr::V4((u32::from(x) + 1).into()), IpAddr::V4((u32::from(y) - 1).into())))
        }
        (IpAddr::V6(x), IpAddr::V6(y)) if u128::from(y) - u128::from(x) >= 2 => {
            Ok((IpAddr::V6((u128::from(x) + 1).into()), ts.end))
        }
        _ => Err(format!("{}: too small for a pool", quote(s))),
    }
}

/// Checks `[ike_service]` and every `[[ike]]` (after the tunnels:
/// `tunnels` are the `[[tunnel]]` entries) into an [`IkePlan`].
pub(super) fn ike(
    config: &super::Config,
    base: &Path,
    if_addrs: &HashSet<IpAddr>,
    linux_mode: bool,
) -> Result<IkePlan, Problem> {
    let svc = &config.ike_service;
    if !(1..=64).contains(&svc.threads) {
        return Err(bad(vec![k("ike_service"), k("threads")], format!("{}: need 1..=64", svc.threads)));
    }
    if svc.max_half_open == 0 {
        return Err(bad(vec![k("ike_service"), k("max_half_open")], "0 would refuse every IKE_SA_INIT"));
    }
    // An hour bounds how long one value's compromise reaches.
    if svc.dh_reuse_secs > 3600 {
        return Err(bad(vec![k("ike_service"), k("dh_reuse_secs")], format!("{}: need 0..=3600", svc.dh_reuse_secs)));
    }
    if svc.dh_reuse_secs > 0 && svc.dh_reuse_uses < 2 {
        return Err(bad(vec![k("ike_service"), k("dh_reuse_uses")], "need 2 or more to reuse a value"));
    }
    if svc.cert_cache_entries > CERT_CACHE_MAX {
        return Err(bad(
            vec![k("ike_service"), k("cert_cache_entries")],
            format!("{}: need 0..={CERT_CACHE_MAX} (0: off)", svc.cert_cache_entries),
        ));
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut tunnels: HashMap<&str, usize> = HashMap::new();
    let mut peers = Vec::with_capacity(config.ike.len());
    for (i, c) in config.ike.iter().enumerate() {
        let p = |key: &str| vec![k("ike"), Seg::Index(i), k(key)];
        if c.name.is_empty() || c.name.len() > 64 || c.name.contains(|ch: char| ch.is_whitespace() || ch.is_control()) {
            return Err(bad(p("name"), format!("{}: names are 1-64 characters without spaces", quote(&c.name))));
        }
        if let Some(j) = names.insert(c.name.as_str(), i) {
            return Err(bad(p("name"), format!("{} is also ike[{j}]'s name", quote(&c.name))));
        }
        let local: IpAddr =
            c.local.parse().map_err(|_| bad(p("local"), format!("invalid address {}", quote(&c.local))))?;
        if local.is_unspecified() || local.is_multicast() || local.is_loopback() {
            return Err(bad(p("local"), format!("{local} cannot be an IKE endpoint")));
        }
        if !linux_mode && !if_addrs.contains(&local) {
            return Err(bad(p("local"), format!("{local} is not one of tern's addresses")));
        }
        let remote: Option<IpAddr> = if c.remote == "any" {
            None
        } else {
            let r: IpAddr = c
                .remote
                .parse()
                .map_err(|_| bad(p("remote"), format!("invalid address {} (or \"any\")", quote(&c.remote))))?;
            if r.is_unspecified() || r.is_multicast() || r.is_loopback() {
                return Err(bad(p("remote"), format!("{r} cannot be an IKE peer")));
            }
            if r.is_ipv4() != local.is_ipv4() {
                return Err(bad(p("remote"), "local and remote must be of one address family"));
            }
            Some(r)
        };
        let start = c.start.unwrap_or(remote.is_some());
        if start && remote.is_none() {
            return Err(bad(p("start"), "a responder template (remote = \"any\") cannot initiate"));
        }
        let remote_id = match &c.remote_id {
            Some(s) => Some(Identity::parse(s).map_err(|m| bad(p("remote_id"), m))?),
            None => None,
        };
        let auth = match c.auth.as_str() {
            "psk" => {
                for key in ["certificate", "private_key"] {
                    let set = if key == "certificate" { c.certificate.is_some() } else { c.private_key.is_some() };
                    if set {
                        return Err(bad(p(key), format!("{key} is for auth = \"pubkey\"")));
                    }
                }
                if !c.ca.is_empty() {
                    return Err(bad(p("ca"), "ca is for auth = \"pubkey\""));
                }
                let key: Vec<u8> = match (&c.psk, &c.psk_file) {
                    (Some(_), Some(_)) => return Err(bad(p("psk_file"), "psk or psk_file, not both")),
                    (None, None) => {
                        return Err(bad(vec![k("ike"), Seg::Index(i)], "auth = \"psk\" needs psk or psk_file"));
                    }
                    (Some(s), None) => s.0.as_bytes().to_vec(),
                    (None, Some(f)) => {
                        let path = base.join(f);
                        let mut bytes = std::fs::read(&path)
                            .map_err(|e| bad(p("psk_file"), format!("cannot read {}: {e}", path.display())))?;
                        // One trailing newline is the editor's, not the key's.
                        if bytes.last() == Some(&b'\n') {
                            bytes.pop();
                            if bytes.last() == Some(&b'\r') {
                                bytes.pop();
                            }
                        }
                        bytes
                    }
                };
                let key_at = if c.psk.is_some() { "psk" } else { "psk_file" };
                if key.len() < PSK_MIN {
                    return Err(bad(
                        p(key_at),
                        format!(
                            "the pre-shared key has {} bytes: need at least {PSK_MIN} (better 16 or more, random)",
                            key.len()
                        ),
                    ));
                }
                if key.len() < PSK_WARN {
                    log::warn!(
                        "ike {}: the pre-shared key has only {} bytes; 16 or more random ones are better",
                        c.name,
                        key.len()
                    );
                }
                AuthConfig::Psk(zeroize::Zeroizing::new(key))
            }
            "pubkey" => {
                if c.psk.is_some() || c.psk_file.is_some() {
                    let key = if c.psk.is_some() { "psk" } else { "psk_file" };
                    return Err(bad(p(key), format!("{key} is for auth = \"psk\"")));
                }
                let cert =
                    c.certificate.as_ref().ok_or_else(|| bad(p("auth"), "auth = \"pubkey\" needs certificate"))?;
                let key =
                    c.private_key.as_ref().ok_or_else(|| bad(p("auth"), "auth = \"pubkey\" needs private_key"))?;
                if c.ca.is_empty() {
                    return Err(bad(
                        p("auth"),
                        "auth = \"pubkey\" needs ca (the CAs the peer's certificate chains to)",
                    ));
                }
                let cas: Vec<std::path::PathBuf> = c.ca.iter().map(|f| base.join(f)).collect();
                let creds = tern_ike::auth::Credentials::load(&base.join(cert), &base.join(key), &cas)
                    .map_err(|e| bad(p("certificate"), e.to_string()))?
                    .with_signature_cache(svc.cert_cache_entries);
                AuthConfig::Pubkey(Arc::new(creds))
            }
            other => return Err(bad(p("auth"), format!("{}: \"psk\" or \"pubkey\"", quote(other)))),
        };
        let local_id = match (&c.local_id, &auth) {
            (Some(s), _) => Identity::parse(s).map_err(|m| bad(p("local_id"), m))?,
            (None, AuthConfig::Pubkey(creds)) => creds.identity(),
            (None, AuthConfig::Psk(_)) => Identity::Ip(local),
        };
        let mut proposals = Vec::new();
        let mut esp_proposals = Vec::new();
        for (key, list, proto, out) in [
            ("proposals", &c.proposals, Protocol::Ike, &mut proposals),
            ("esp_proposals", &c.esp_proposals, Protocol::Esp, &mut esp_proposals),
        ] {
            if list.is_empty() {
                return Err(bad(p(key), "at least one proposal"));
            }
            for (j, s) in list.iter().enumerate() {
                let prop = Proposal::parse(s, proto)
                    .map_err(|m| bad(vec![k("ike"), Seg::Index(i), k(key), Seg::Index(j)], m))?;
                out.push(prop);
            }
        }
        if let Some(t) = &c.tunnel {
            let Some(tc) = config.tunnels.iter().position(|x| &x.name == t) else {
                return Err(bad(p("tunnel"), format!("no [[tunnel]] named {}", quote(t))));
            };
            let tcfg = &config.tunnels[tc];
            if tcfg.kind != super::TunnelType::Ipsec {
                return Err(bad(p("tunnel"), format!("tunnel {} is not type = \"ipsec\"", quote(t))));
            }
            if let Some(j) = tunnels.insert(t.as_str(), i) {
                return Err(bad(p("tunnel"), format!("tunnel {} is already keyed by ike[{j}]", quote(t))));
            }
            if tcfg.local.parse::<IpAddr>().ok() != Some(local) {
                return Err(bad(
                    p("local"),
                    format!("tunnel {}'s local is {}: IKE runs from the tunnel's address", quote(t), tcfg.local),
                ));
            }
            if remote.is_none() && tcfg.remote != "any" {
                return Err(bad(
                    p("tunnel"),
                    format!(
                        "a responder template (remote = \"any\") keys a multipoint tunnel: tunnel {}'s remote must be \"any\"",
                        quote(t)
                    ),
                ));
            }
            if let Some(r) = remote
                && tcfg.remote.parse::<IpAddr>().ok() != Some(r)
            {
                return Err(bad(
                    p("remote"),
                    format!("tunnel {}'s remote is {}: the peer must be the tunnel's far end", quote(t), tcfg.remote),
                ));
            }
        }
        let ts = |key: &str, list: &[String]| -> Result<Vec<TrafficSelector>, Problem> {
            if list.is_empty() {
                return Ok(vec![TrafficSelector::any(false), TrafficSelector::any(true)]);
            }
            list.iter()
                .enumerate()
                .map(|(j, s)| cidr_ts(s).map_err(|m| bad(vec![k("ike"), Seg::Index(i), k(key), Seg::Index(j)], m)))
                .collect()
        };
        let local_ts = ts("local_ts", &c.local_ts)?;
        let remote_ts = ts("remote_ts", &c.remote_ts)?;
        let pool = match &c.pool {
            Some(s) => {
                if remote.is_some() {
                    return Err(bad(p("pool"), "a pool is for a responder template (remote = \"any\")"));
                }
                Some(parse_pool(s).map_err(|m| bad(p("pool"), m))?)
            }
            None => None,
        };
        let secs = |n: u64| (n > 0).then(|| Duration::from_secs(n));
        for (key, v) in [("child_rekey_secs", c.child_rekey_secs), ("ike_rekey_secs", c.ike_rekey_secs)] {
            if v > 0 && v < MIN_REKEY_SECS {
                return Err(bad(p(key), format!("{v}: at least {MIN_REKEY_SECS} (0: never)")));
            }
        }
        peers.push(IkePeerPlan {
            peer: PeerConfig {
                name: c.name.clone(),
                local,
                remote,
                local_id,
                remote_id,
                auth,
                proposals,
                esp_proposals,
                encap: c.encap,
                tunnel: c.tunnel.clone(),
                local_ts,
                remote_ts,
                pool,
                start,
                ike_rekey: secs(c.ike_rekey_secs),
                child_rekey: secs(c.child_rekey_secs),
                dpd: secs(c.dpd_secs),
            },
            source: c.clone(),
        });
    }
    Ok(IkePlan { service: svc.clone(), peers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_ike::proposal::DhGroup;

    #[test]
    fn pools_and_selectors() {
        assert_eq!(
            parse_pool("10.3.0.10-10.3.0.250"),
            Ok(("10.3.0.10".parse().unwrap(), "10.3.0.250".parse().unwrap()))
        );
        assert_eq!(parse_pool("10.3.0.0/24"), Ok(("10.3.0.1".parse().unwrap(), "10.3.0.254".parse().unwrap())));
        assert!(parse_pool("10.3.0.250-10.3.0.10").is_err());
        assert!(parse_pool("10.3.0.1-2001:db8::1").is_err());
        let t = cidr_ts("10.1.0.0/16").expect("cidr");
        assert_eq!((t.start, t.end), ("10.1.0.0".parse().unwrap(), "10.1.255.255".parse().unwrap()));
        assert!(cidr_ts("10.1.0.0/33").is_err());
    }

    const IKE: &str = r#"
[[interface]]
name = "wan0"
device = "veth1"
addresses = ["10.2.0.1/24"]

[[tunnel]]
name = "ipsec0"
type = "ipsec"
local = "10.2.0.1"
remote = "10.2.0.9"
addresses = ["172.16.1.1/30"]

[[ike]]
name = "branch"
local = "10.2.0.1"
remote = "10.2.0.9"
local_id = "tern.example"
remote_id = "branch.example"
auth = "psk"
psk = "correct horse battery staple"
proposals = ["aes128-sha256-x25519"]
esp_proposals = ["aes128gcm16-x25519"]
encap = false
tunnel = "ipsec0"
"#;

    fn parse(t: &str) -> Result<crate::config::Plan, crate::config::ConfigError> {
        crate::config::parse(t, "t.toml", Path::new("/etc/tern"))
    }

    #[test]
    fn the_issues_example_loads() {
        let plan = parse(IKE).expect("valid");
        assert_eq!(plan.ike.peers.len(), 1);
        let p = &plan.ike.peers[0].peer;
        assert_eq!(p.name, "branch");
        assert_eq!(p.remote, Some("10.2.0.9".parse().unwrap()));
        assert_eq!(p.local_id, Identity::Fqdn("tern.example".into()));
        assert_eq!(p.tunnel.as_deref(), Some("ipsec0"));
        assert!(p.start, "an initiator when remote is an address");
        assert_eq!(p.dpd, Some(Duration::from_secs(30)));
        assert_eq!(p.ike_rekey, Some(Duration::from_secs(4 * 3600)));
        assert_eq!(p.child_rekey, Some(Duration::from_secs(3600)));
        assert_eq!(p.proposals[0].dh, [DhGroup::Curve25519]);
        assert_eq!(p.esp_proposals[0].dh, [DhGroup::Curve25519], "PFS");
        assert_eq!(p.local_ts.len(), 2, "everything of both families");
        assert!(matches!(&p.auth, AuthConfig::Psk(k) if k.as_slice() == b"correct horse battery staple"));
        assert_eq!(plan.ike.service.threads, 1);
        // The tunnel has no SA until IKE brings one.
        let t = plan.ifaces.iter().find(|f| f.name == "ipsec0").expect("tunnel");
        assert!(matches!(&t.kind, crate::config::IfacePlanKind::Ipsec { sa_out: 0, sa_in, .. } if sa_in.is_empty()));
        // The key never shows.
        let shown = toml::to_string(&plan.config).expect("serializes");
        let debug = format!("{plan:?}");
        assert!(!shown.contains("horse") && !debug.contains("horse"), "{shown}\n{debug}");
        assert!(shown.contains("<redacted>"), "{shown}");
        // What `config show` prints loads again (but for the key).
        let again: crate::config::Config = toml::from_str(&shown).expect("reads back");
        assert_eq!(again.ike[0].name, "branch");
    }

    #[test]
    fn errors_name_the_key() {
        let cases: &[(&str, &str, &str, &str)] = &[
            ("name = \"branch\"", "name = \"\"", "ike[0].name", "1-64"),
            (
                "local = \"10.2.0.1\"\nremote = \"10.2.0.9\"\nlocal_id",
                "local = \"10.2.0.300\"\nremote = \"10.2.0.9\"\nlocal_id",
                "ike[0].local",
                "invalid address",
            ),
            (
                "remote = \"10.2.0.9\"\nlocal_id",
                "remote = \"2001:db8::9\"\nlocal_id",
                "ike[0].remote",
                "one address family",
            ),
            ("remote = \"10.2.0.9\"\nlocal_id", "remote = \"10.2.0.8\"\nlocal_id", "ike[0].remote", "far end"),
            ("auth = \"psk\"", "auth = \"rsa\"", "ike[0].auth", "\"psk\" or \"pubkey\""),
            ("psk = \"correct horse battery staple\"", "psk = \"short\"", "ike[0].psk", "at least 8"),
            ("psk = \"correct horse battery staple\"", "", "ike[0]", "needs psk or psk_file"),
            ("encap = false", "psk_file = \"/nonexistent/psk\"", "ike[0].psk_file", "psk or psk_file, not both"),
            ("encap = false", "certificate = \"c.pem\"", "ike[0].certificate", "pubkey"),
            (
                "[\"aes128-sha256-x25519\"]",
                "[\"aes128-sha256-modp1024\"]",
                "ike[0].proposals[0]",
                "modp1024 (DH group 2) is broken",
            ),
            (
                "[\"aes128gcm16-x25519\"]",
                "[\"aes128gcm16-x25519\", \"blowfish\"]",
                "ike[0].esp_proposals[1]",
                "\"blowfish\"",
            ),
            ("[\"aes128-sha256-x25519\"]", "[]", "ike[0].proposals", "at least one"),
            ("tunnel = \"ipsec0\"", "tunnel = \"ipsec9\"", "tunnel[0].type", "or an [[ike]] peer keying it"),
            (
                "tunnel = \"ipsec0\"",
                "tunnel = \"ipsec0\"\nstart = true\npool = \"10.3.0.0/24\"",
                "ike[0].pool",
                "remote = \"any\"",
            ),
            (
                "remote = \"10.2.0.9\"\nlocal_id",
                "remote = \"any\"\nstart = true\nlocal_id",
                "ike[0].start",
                "cannot initiate",
            ),
            ("remote_id = \"branch.example\"", "remote_id = \"@\"", "ike[0].remote_id", "empty"),
            ("encap = false", "local_ts = [\"10.0.0.0\"]", "ike[0].local_ts[0]", "CIDR"),
            ("encap = false", "ike_rekey_secs = 4", "ike[0].ike_rekey_secs", "at least 5"),
            (
                "addresses = [\"172.16.1.1/30\"]",
                "addresses = [\"172.16.1.1/30\"]\nsa_out = 1",
                "tunnel[0].sa_out",
                "keyed by an [[ike]]",
            ),
            (
                "addresses = [\"172.16.1.1/30\"]",
                "addresses = [\"172.16.1.1/30\"]\nmtu = 1990",
                "tunnel[0].mtu",
                "IKE may choose",
            ),
            ("type = \"ipsec\"", "type = \"gre\"", "ike[0].tunnel", "not type = \"ipsec\""),
        ];
        for &(from, to, key, msg) in cases {
            assert!(IKE.contains(from), "{from}");
            let text = IKE.replacen(from, to, 1);
            let e = parse(&text).expect_err(&format!("{from} -> {to}"));
            assert_eq!(e.key.as_deref(), Some(key), "{from} -> {to}: {e}");
            assert!(e.message.contains(msg), "{from} -> {to}: {e}");
            assert!(e.line.is_some(), "{e}");
            assert!(!e.to_string().contains("horse"), "{e}");
        }
        // Two peers on one tunnel; two peers of one name.
        let second = IKE[IKE.find("[[ike]]").expect("ike")..].replace("\"branch\"", "\"branch2\"");
        let e = parse(&format!("{IKE}{second}")).expect_err("two on one tunnel");
        assert_eq!(e.key.as_deref(), Some("ike[1].tunnel"), "{e}");
        assert!(e.message.contains("already keyed by ike[0]"), "{e}");
        let same = IKE[IKE.find("[[ike]]").expect("ike")..].replace("tunnel = \"ipsec0\"", "");
        let e = parse(&format!("{IKE}{same}")).expect_err("one name twice");
        assert_eq!(e.key.as_deref(), Some("ike[1].name"), "{e}");
        // An unknown key, and [ike_service].
        let e = parse(&IKE.replace("encap = false", "encapsulation = true")).expect_err("unknown key");
        assert!(e.message.contains("encapsulation"), "{e}");
        let e = parse(&format!("{IKE}\n[ike_service]\nthreads = 0\n")).expect_err("0 threads");
        assert_eq!(e.key.as_deref(), Some("ike_service.threads"), "{e}");
        let plan = parse(&format!("{IKE}\n[ike_service]\nthreads = 4\n")).expect("4 threads");
        assert_eq!(plan.ike.service.settings(3).shards, 4);
        assert!(plan.ike.service.settings(0).dh_reuse.is_zero(), "DH reuse is off by default");
        // DH reuse: on with its bounds, refused past an hour or with fewer
        // than two uses.
        let plan = parse(&format!("{IKE}\n[ike_service]\ndh_reuse_secs = 10\ndh_reuse_uses = 500\n")).expect("reuse");
        let s = plan.ike.service.settings(0);
        assert_eq!((s.dh_reuse, s.dh_reuse_uses), (std::time::Duration::from_secs(10), 500));
        let e = parse(&format!("{IKE}\n[ike_service]\ndh_reuse_secs = 3601\n")).expect_err("too long");
        assert_eq!(e.key.as_deref(), Some("ike_service.dh_reuse_secs"), "{e}");
        let e = parse(&format!("{IKE}\n[ike_service]\ndh_reuse_secs = 5\ndh_reuse_uses = 1\n")).expect_err("one use");
        assert_eq!(e.key.as_deref(), Some("ike_service.dh_reuse_uses"), "{e}");
    }

    #[test]
    fn psk_files_templates_and_sa_ids() {
        let dir = std::env::temp_dir().join(format!("tern-ike-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("branch.psk"), "0123456789abcdef\n").expect("psk");
        let text = IKE.replace("psk = \"correct horse battery staple\"", "psk_file = \"branch.psk\"");
        let plan = crate::config::parse(&text, "t.toml", &dir).expect("valid");
        assert!(
            matches!(&plan.ike.peers[0].peer.auth, AuthConfig::Psk(k) if k.as_slice() == b"0123456789abcdef"),
            "the file's key without its newline"
        );
        let _ = std::fs::remove_dir_all(&dir);
        // A responder template: no tunnel, any remote, a pool; not started.
        let t = "[[interface]]\nname = \"wan0\"\ndevice = \"veth1\"\naddresses = [\"10.2.0.1/24\"]\n\n[[ike]]\nname = \"ra\"\nlocal = \"10.2.0.1\"\nremote = \"any\"\npsk = \"0123456789abcdef\"\npool = \"10.3.0.10-10.3.0.250\"\nremote_ts = [\"10.3.0.0/24\"]\n";
        let plan = parse(t).expect("template");
        let p = &plan.ike.peers[0].peer;
        assert!(!p.start && p.remote.is_none() && p.tunnel.is_none());
        assert_eq!(p.local_id, Identity::Ip("10.2.0.1".parse().unwrap()), "the address by default");
        assert_eq!(p.pool, Some(("10.3.0.10".parse().unwrap(), "10.3.0.250".parse().unwrap())));
        assert_eq!(p.remote_ts.len(), 1);
        let e = parse(&format!("{t}tunnel = \"nope\"\n")).expect_err("no tunnel");
        assert_eq!(e.key.as_deref(), Some("ike[0].tunnel"), "{e}");
        assert!(e.message.contains("no [[tunnel]] named \"nope\""), "{e}");
        // Standalone: the local address must be tern's.
        let e = parse(&t.replace("local = \"10.2.0.1\"", "local = \"10.2.0.2\"")).expect_err("not ours");
        assert_eq!(e.key.as_deref(), Some("ike[0].local"), "{e}");
        // SA ids from 2^31 are IKE's.
        let sa = "\n[[ipsec_sa]]\nid = 2147483648\nspi = 0x1001\ncrypto = \"aes-128-gcm\"\nkey = \"0x000102030405060708090a0b0c0d0e0f10111213\"\n";
        let e = parse(&format!("{t}{sa}")).expect_err("IKE's range");
        assert_eq!(e.key.as_deref(), Some("ipsec_sa[0].id"), "{e}");
        assert!(e.message.contains("IKE's"), "{e}");
        parse(&format!("{t}{}", sa.replace("2147483648", "2147483647"))).expect("below 2^31");
        // A multipoint tunnel (remote = "any") keyed by the template.
        let ra = "\n[[tunnel]]\nname = \"ra0\"\ntype = \"ipsec\"\nlocal = \"10.2.0.1\"\nremote = \"any\"\naddresses = [\"10.3.0.1/24\"]\n";
        let plan = parse(&format!("{t}tunnel = \"ra0\"\n{ra}")).expect("multipoint");
        let ra0 = plan.ifaces.iter().find(|f| f.name == "ra0").expect("ra0");
        assert!(
            matches!(ra0.kind, crate::config::IfacePlanKind::Ipsec { remote, sa_out: 0, .. } if remote == "0.0.0.0".parse::<IpAddr>().unwrap())
        );
        // Not keyed by IKE, or keyed by a peer with an address: refused.
        let e = parse(&format!("{t}{ra}")).expect_err("unkeyed");
        assert_eq!(e.key.as_deref(), Some("tunnel[0].remote"), "{e}");
        let gre = ra.replace("type = \"ipsec\"\n", "");
        let e = parse(&format!("{t}tunnel = \"ra0\"\n{gre}")).expect_err("gre");
        assert_eq!(e.key.as_deref(), Some("tunnel[0].remote"), "{e}");
        // The template's tunnel must be multipoint.
        let p2p = ra.replace("remote = \"any\"", "remote = \"10.2.0.9\"");
        let e = parse(&format!("{t}tunnel = \"ra0\"\n{p2p}")).expect_err("point to point");
        assert_eq!(e.key.as_deref(), Some("ike[0].tunnel"), "{e}");
        assert!(e.message.contains("must be \"any\""), "{e}");
    }

    /// A reload compares what the files hold, not only their names: a
    /// certificate, key, CA or psk_file rewritten in place makes the plan
    /// differ (the IKE service then gives the engines the new credentials).
    #[test]
    fn plans_differ_when_credential_files_change() {
        let certs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ike/tests/certs");
        let dir = std::env::temp_dir().join(format!("tern-ike-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let copy = |from: &str, to: &str| std::fs::copy(certs.join(from), dir.join(to)).expect("copy");
        copy("moon.pem", "me.pem");
        copy("moon.key", "me.key");
        copy("ca.pem", "ca.pem");
        std::fs::write(dir.join("branch.psk"), "0123456789abcdef\n").expect("psk");
        let text = "[[interface]]\nname = \"wan0\"\ndevice = \"veth1\"\naddresses = [\"10.2.0.1/24\"]\n\n[[ike]]\nname = \"moon\"\nlocal = \"10.2.0.1\"\nremote = \"10.2.0.9\"\nlocal_id = \"moon.tern.test\"\nauth = \"pubkey\"\ncertificate = \"me.pem\"\nprivate_key = \"me.key\"\nca = [\"ca.pem\"]\n\n[[ike]]\nname = \"branch\"\nlocal = \"10.2.0.1\"\nremote = \"10.2.0.8\"\npsk_file = \"branch.psk\"\n";
        let load = || crate::config::parse(text, "t.toml", &dir).expect("valid").ike;
        let first = load();
        assert_eq!(load(), first, "the same files: the same plan");
        // Another certificate and key under the same names.
        copy("sun.pem", "me.pem");
        copy("sun.key", "me.key");
        let second = load();
        assert!(second.peers[0] != first.peers[0] && second.peers[1] == first.peers[1]);
        // Another CA file.
        std::fs::write(
            dir.join("ca.pem"),
            [std::fs::read(certs.join("ca.pem")).unwrap(), std::fs::read(certs.join("evil-ca.pem")).unwrap()].concat(),
        )
        .expect("ca");
        let third = load();
        assert!(third.peers[0] != second.peers[0] && third.peers[1] == second.peers[1]);
        // Another key in the psk_file.
        std::fs::write(dir.join("branch.psk"), "fedcba9876543210\n").expect("psk");
        let fourth = load();
        assert!(fourth.peers[0] == third.peers[0] && fourth.peers[1] != third.peers[1]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// auth = "pubkey" loads the certificate, key and CAs (h-ikecert's test
    /// certificates); local_id defaults to the certificate's subject; a
    /// file that is not what it should be is an error at the entry's keys.
    #[test]
    fn pubkey_peers_load_their_certificates() {
        let certs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ike/tests/certs");
        let base = "[[interface]]\nname = \"wan0\"\ndevice = \"veth1\"\naddresses = [\"10.2.0.1/24\"]\n\n[[ike]]\nname = \"moon\"\nlocal = \"10.2.0.1\"\nremote = \"10.2.0.9\"\nauth = \"pubkey\"\ncertificate = \"moon.pem\"\nprivate_key = \"moon.key\"\nca = [\"ca.pem\"]\n";
        let plan = crate::config::parse(base, "t.toml", &certs).expect("pubkey peer");
        let p = &plan.ike.peers[0].peer;
        assert!(matches!(p.auth, AuthConfig::Pubkey(_)));
        assert!(matches!(p.local_id, Identity::Dn(_)), "the certificate's subject: {:?}", p.local_id);
        let e = crate::config::parse(&base.replace("moon.key", "mars.key"), "t.toml", &certs).expect_err("wrong key");
        assert_eq!(e.key.as_deref(), Some("ike[0].certificate"), "{e}");
        let e = crate::config::parse(&base.replace("ca = [\"ca.pem\"]\n", ""), "t.toml", &certs).expect_err("no CA");
        assert!(e.message.contains("needs ca"), "{e}");
        let e =
            crate::config::parse(&format!("{base}psk = \"0123456789abcdef\"\n"), "t.toml", &certs).expect_err("psk");
        assert_eq!(e.key.as_deref(), Some("ike[0].psk"), "{e}");
    }
}
