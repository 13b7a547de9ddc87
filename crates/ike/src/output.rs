//! What the engine asks the control side to do.

use crate::config::TrafficSelector;
use std::net::{IpAddr, SocketAddr};
use tern_ipsec::{Cipher, Integ, Key};

/// One direction of a child SA, as the ESP data plane takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EspKeys {
    pub spi: u32,
    pub cipher: Cipher,
    pub integ: Integ,
    /// For GCM the key followed by its 4-byte salt (as `tern_ipsec::SaConfig`).
    pub key: Key,
    pub integ_key: Key,
}

/// A negotiated child SA: both directions, to install together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSa {
    /// The peer configuration's name.
    pub peer: String,
    /// The route-based tunnel the peer keys, if any.
    pub tunnel: Option<String>,
    /// The engine's handle of the IKE SA that negotiated it.
    pub ike_sa: u64,
    /// Unique per child SA in this engine (rekeying replaces one id by
    /// another).
    pub id: u64,
    /// What the data plane decrypts (the SPI this side chose).
    pub inbound: EspKeys,
    /// What the data plane encrypts with (the SPI the peer chose).
    pub outbound: EspKeys,
    pub esn: bool,
    /// The tunnel's outer addresses (this side, the peer as seen).
    pub local: IpAddr,
    pub remote: IpAddr,
    /// ESP in UDP (a NAT was detected or `encap`): (local port, remote port).
    pub udp_encap: Option<(u16, u16)>,
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
    /// The virtual IP a remote-access client was given.
    pub virtual_ip: Option<IpAddr>,
    /// Soft and hard lifetimes to give the data plane, in seconds.
    pub soft_secs: Option<u64>,
    pub hard_secs: Option<u64>,
    /// The child SA (by id) this one replaces when the peer rekeyed it and
    /// we answered: encrypt with the old one until the peer deletes it,
    /// since the peer installs the new inbound SA only once it has our
    /// answer (RFC 7296 2.8; strongSwan's responder waits the same way),
    /// or until a packet arrives on the new inbound SA or a few seconds
    /// pass (the control side's fallback for a peer that never deletes).
    /// `None` for a new child and for our own rekeys (the peer installed
    /// the new SA before it answered).
    pub replaces: Option<u64>,
}

/// Something the control side does for the engine, in order.
#[derive(Clone, Debug)]
pub enum Output {
    /// A datagram from `local` to `remote`. On port 4500 the control side
    /// prepends the 4-byte non-ESP marker (RFC 3948 2.2); `data` is the
    /// IKE message (or fragment) itself.
    Send { local: SocketAddr, remote: SocketAddr, data: Vec<u8> },
    /// A new child SA (first, or a rekey's new one: the old one stays
    /// installed until [`Output::DeleteChild`] names it, so a rekey loses
    /// no packet).
    InstallChild(Box<ChildSa>),
    /// A child SA (by [`ChildSa::id`]) to remove from the data plane, both
    /// directions.
    DeleteChild { peer: String, id: u64, inbound_spi: u32, outbound_spi: u32 },
    /// An IKE SA went (deleted, failed, expired, the peer dead): its child
    /// SAs were announced with `DeleteChild` before this.
    IkeSaDown { peer: String, ike_sa: u64, reason: String },
    /// An IKE SA was established.
    IkeSaUp { peer: String, ike_sa: u64, remote: SocketAddr },
}
