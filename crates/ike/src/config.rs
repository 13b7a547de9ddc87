//! What an IKE peer is configured with (`[[ike]]` in tern's configuration;
//! the control side parses the file and builds these).

use crate::proposal::Proposal;
use std::net::IpAddr;
use std::time::Duration;
use zeroize::Zeroizing;

/// An identity (RFC 7296 3.5): what a peer says it is in its ID payload
/// and what a configuration expects.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// ID_IPV4_ADDR / ID_IPV6_ADDR.
    Ip(IpAddr),
    /// ID_FQDN ("tern.example").
    Fqdn(String),
    /// ID_RFC822_ADDR ("ops@example.net").
    Email(String),
    /// ID_DER_ASN1_DN: the DER of an X.509 Name.
    Dn(Vec<u8>),
    /// ID_KEY_ID: opaque bytes.
    KeyId(Vec<u8>),
}

/// How this side proves itself and checks the peer.
#[derive(Clone)]
pub enum AuthConfig {
    /// A pre-shared key (the same on both sides).
    Psk(Zeroizing<Vec<u8>>),
    /// A certificate and its private key; the peer's certificate must
    /// chain to one of `cas` and name the peer's identity.
    Pubkey(std::sync::Arc<crate::auth::Credentials>),
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthConfig::Psk(_) => f.write_str("Psk(<redacted>)"),
            AuthConfig::Pubkey(_) => f.write_str("Pubkey"),
        }
    }
}

/// A traffic selector (RFC 7296 3.13.1): addresses first..=last, IP
/// protocol (0: any), ports first..=last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrafficSelector {
    pub start: IpAddr,
    pub end: IpAddr,
    pub protocol: u8,
    pub start_port: u16,
    pub end_port: u16,
}

impl TrafficSelector {
    /// Everything of one family: 0.0.0.0-255.255.255.255 or ::-ffff..., any
    /// protocol and port. What route-based tunnels negotiate.
    pub fn any(v6: bool) -> TrafficSelector {
        if v6 {
            TrafficSelector {
                start: IpAddr::V6(0.into()),
                end: IpAddr::V6(u128::MAX.into()),
                protocol: 0,
                start_port: 0,
                end_port: u16::MAX,
            }
        } else {
            TrafficSelector {
                start: IpAddr::V4(0.into()),
                end: IpAddr::V4(u32::MAX.into()),
                protocol: 0,
                start_port: 0,
                end_port: u16::MAX,
            }
        }
    }

    /// One address (a remote-access client's virtual IP).
    pub fn host(a: IpAddr) -> TrafficSelector {
        TrafficSelector { start: a, end: a, protocol: 0, start_port: 0, end_port: u16::MAX }
    }
}

/// One `[[ike]]` peer (or, with `remote: None`, a responder template that
/// any client matching `remote_id` may use).
#[derive(Clone, Debug)]
pub struct PeerConfig {
    /// The configuration's name ("branch"): logs, the CLI, metrics.
    pub name: String,
    pub local: IpAddr,
    /// `None`: "any", a responder template.
    pub remote: Option<IpAddr>,
    pub local_id: Identity,
    /// `None`: any identity the authentication proves.
    pub remote_id: Option<Identity>,
    pub auth: AuthConfig,
    /// IKE SA proposals, in preference order (at least one).
    pub proposals: Vec<Proposal>,
    /// Child SA proposals, in preference order (at least one). A DH group
    /// here means PFS on CREATE_CHILD_SA.
    pub esp_proposals: Vec<Proposal>,
    /// Force UDP encapsulation (strongSwan's `encap`): NAT detection says
    /// there is a NAT whatever the addresses.
    pub encap: bool,
    /// The route-based `ipsec` tunnel interface whose SAs this peer keys
    /// (site-to-site); `None` for a remote-access template.
    pub tunnel: Option<String>,
    /// This side's and the peer's traffic selectors (default: `any` of
    /// both families).
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
    /// Virtual IPs handed out to remote-access clients (configuration
    /// payloads, RFC 7296 3.15): first..=last.
    pub pool: Option<(IpAddr, IpAddr)>,
    /// Initiate when configured (and re-initiate when the SA goes).
    pub start: bool,
    /// Rekey the IKE SA / child SAs after these times (jittered by up to
    /// 10 % down); `None`: never.
    pub ike_rekey: Option<Duration>,
    pub child_rekey: Option<Duration>,
    /// Liveness check (empty INFORMATIONAL) after this long without a
    /// message from the peer; `None`: off.
    pub dpd: Option<Duration>,
}

impl PeerConfig {
    /// A PSK peer named `name` on `local`, identified by that address,
    /// with nothing else set (no remote: a responder template; no
    /// proposals): callers set the rest with struct-update syntax.
    pub fn with_psk(name: &str, local: IpAddr, psk: &[u8]) -> PeerConfig {
        PeerConfig {
            name: name.into(),
            local,
            remote: None,
            local_id: Identity::Ip(local),
            remote_id: None,
            auth: AuthConfig::Psk(zeroize::Zeroizing::new(psk.to_vec())),
            proposals: vec![],
            esp_proposals: vec![],
            encap: false,
            tunnel: None,
            local_ts: vec![],
            remote_ts: vec![],
            pool: None,
            start: false,
            ike_rekey: None,
            child_rekey: None,
            dpd: None,
        }
    }

    /// [`PeerConfig::with_psk`] as the unit tests know it.
    #[cfg(test)]
    pub(crate) fn psk_for_tests(name: &str, local: IpAddr) -> PeerConfig {
        PeerConfig { local_id: Identity::Fqdn("a.example".into()), ..PeerConfig::with_psk(name, local, b"k") }
    }
}

/// Engine-wide settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// This engine is shard `shard` of `shards` (the control side runs one
    /// engine per thread): the SPIs it allocates satisfy
    /// `spi % shards == shard`, so a datagram's responder or initiator SPI
    /// says which engine owns it.
    pub shard: u32,
    pub shards: u32,
    /// Half-open IKE SAs (IKE_SA_INIT answered, IKE_AUTH not yet) above
    /// which the responder demands cookies (RFC 7296 2.6).
    pub cookie_threshold: usize,
    /// Half-open IKE SAs above which new IKE_SA_INIT are dropped outright.
    pub max_half_open: usize,
    /// Half-open IKE SAs per peer address.
    pub max_half_open_per_peer: usize,
    /// Established IKE SAs per peer address (0: no limit).
    pub max_sas_per_peer: usize,
    /// The first retransmission's timeout; doubled each time.
    pub retransmit_base: Duration,
    /// Retransmissions before the exchange (and the IKE SA) is given up.
    pub retransmit_tries: u32,
    /// Half-open SAs are forgotten after this long.
    pub half_open_timeout: Duration,
    /// Messages larger than this (the IP datagram) are fragmented
    /// (RFC 7383) when the peer supports it.
    pub fragment_size: usize,
    /// Announce RFC 7427 signatures (SIGNATURE_HASH_ALGORITHMS) when
    /// authenticating with a certificate. Off: as an old peer without
    /// them (the other side then signs with the classic methods).
    pub signature_hashes: bool,
    /// A responder answers IKE_SA_INITs with one Diffie-Hellman value (per
    /// group) for this long, at most `dh_reuse_uses` times, as RFC 7296
    /// 2.12 allows; then it is wiped and a fresh one made. Zero (the
    /// default): a fresh value for every exchange. The cost: the IKE SAs
    /// set up with one value lose perfect forward secrecy between each
    /// other until it is wiped (whoever takes the value from memory can
    /// recompute all their keys).
    pub dh_reuse: Duration,
    pub dh_reuse_uses: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            shard: 0,
            shards: 1,
            cookie_threshold: 10_000,
            max_half_open: 100_000,
            max_half_open_per_peer: 1_000,
            max_sas_per_peer: 0,
            retransmit_base: Duration::from_millis(500),
            retransmit_tries: 5,
            half_open_timeout: Duration::from_secs(30),
            fragment_size: 1280,
            signature_hashes: true,
            dh_reuse: Duration::ZERO,
            dh_reuse_uses: 1000,
        }
    }
}
