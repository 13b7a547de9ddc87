//! The engine: every IKE SA of one shard, by SPI; cookies and half-open
//! limits; timers; the entry points the control side calls.
//! Owner: helper "ike-sa".

use crate::config::{PeerConfig, Settings};
use crate::output::Output;
use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

/// Counters for /metrics (cumulative).
#[derive(Clone, Debug, Default)]
pub struct IkeStats {
    pub ike_sas: u64,
    pub half_open: u64,
    pub child_sas: u64,
    pub setups: u64,
    pub child_setups: u64,
    pub rekeys_ike: u64,
    pub rekeys_child: u64,
    pub retransmits: u64,
    pub cookies_sent: u64,
    pub dpd_sent: u64,
    pub dropped_invalid: u64,
    /// (reason, count): "no-proposal-chosen", "authentication-failed",
    /// "ts-unacceptable", "timeout", "invalid-ke", "invalid-syntax",
    /// "half-open-limit", "decrypt-failed", "peer-unknown", ...
    pub failures: Vec<(&'static str, u64)>,
}

/// An IKE SA as `tern ike sa show` lists it.
#[derive(Clone, Debug)]
pub struct IkeSaInfo {
    pub id: u64,
    pub peer: String,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub spi_i: u64,
    pub spi_r: u64,
    pub initiator: bool,
    /// "connecting", "established", "rekeying", "deleting".
    pub state: &'static str,
    /// "aes128gcm16-prfsha256-x25519".
    pub proposal: String,
    pub remote_id: String,
    pub established_secs: u64,
    /// (child id, inbound SPI, outbound SPI, proposal).
    pub children: Vec<(u64, u32, u32, String)>,
    pub nat: bool,
}

/// One shard's IKE engine.
pub struct Ike {
    _settings: Settings,
}

impl Ike {
    pub fn new(settings: Settings) -> Ike {
        Ike { _settings: settings }
    }

    /// Replaces the peer configurations. IKE SAs of peers that went or
    /// changed are deleted (announced with `Output`s); new peers with
    /// `start` are initiated.
    pub fn set_peers(&mut self, now: Instant, peers: Vec<PeerConfig>) {
        let _ = (now, peers);
        todo!("ike-sa")
    }

    /// A datagram received on `local` from `remote` (for port 4500 the
    /// non-ESP marker already stripped). `wall` is the wall clock
    /// (certificates' validity).
    pub fn handle(&mut self, now: Instant, wall: SystemTime, local: SocketAddr, remote: SocketAddr, data: &[u8]) {
        let _ = (now, wall, local, remote, data);
        todo!("ike-sa")
    }

    /// Starts an IKE SA (and its first child SA) with the named peer.
    pub fn initiate(&mut self, now: Instant, peer: &str) -> Result<u64, String> {
        let _ = (now, peer);
        todo!("ike-sa")
    }

    /// Deletes the peer's IKE SAs (INFORMATIONAL delete), or one by id.
    pub fn terminate(&mut self, now: Instant, peer: &str, id: Option<u64>) -> Result<usize, String> {
        let _ = (now, peer, id);
        todo!("ike-sa")
    }

    /// The data plane says a child SA (by its inbound SPI) reached its soft
    /// (rekey) or hard (delete) lifetime.
    pub fn child_expired(&mut self, now: Instant, inbound_spi: u32, hard: bool) {
        let _ = (now, inbound_spi, hard);
        todo!("ike-sa")
    }

    /// Runs what is due (retransmissions, rekeys, liveness checks,
    /// half-open expiry).
    pub fn poll(&mut self, now: Instant) {
        let _ = now;
        todo!("ike-sa")
    }

    /// When [`Ike::poll`] next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        todo!("ike-sa")
    }

    /// What to do, in order; the caller drains it after every call.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Output> {
        todo!("ike-sa")
    }

    pub fn stats(&self) -> IkeStats {
        todo!("ike-sa")
    }

    pub fn ike_sas(&self) -> Vec<IkeSaInfo> {
        todo!("ike-sa")
    }

    /// Which shard owns a datagram: by the responder SPI if set, else the
    /// initiator SPI if this shard initiated... (the control side's
    /// dispatch; see `Settings::shard`). Returns `None` for a new
    /// IKE_SA_INIT request (any shard may take it: hash the source).
    pub fn shard_of(data: &[u8], shards: u32) -> Option<u32> {
        let _ = (data, shards);
        todo!("ike-sa")
    }
}
