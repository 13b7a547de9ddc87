//! One IKE SA's state machine: what an IKE SA holds (small once
//! established: SPIs, keys, message IDs, the peer's address, its child
//! SAs) and the exchanges, as `impl Ike` blocks per exchange so they can
//! reach the engine's indexes (SPI allocation, pools, timers):
//! - `init`: IKE_SA_INIT, both roles, cookies, INVALID_KE_PAYLOAD;
//! - `auth`: IKE_AUTH (PSK, certificates), the first child SA, the
//!   remote-access configuration payload;
//! - `info`: INFORMATIONAL (deletes, liveness checks, notifies);
//! - `child`: CREATE_CHILD_SA (child and IKE SA rekeying);
//! - `frame`: sealing and opening encrypted messages, RFC 7383
//!   fragmentation and reassembly;
//! - `util`: NAT detection hashes, traffic selector narrowing, pools.
//!
//! Notes on behaviour:
//! - Message IDs: window 1 each way; the last response is cached for a
//!   retransmitted request (byte-identical) for twice the peer's
//!   retransmission schedule, then dropped (an idle SA keeps no datagram).
//! - An established SA keeps SPIs, SK_d and the two SK ciphers, message
//!   IDs, the peer's address and identity, its children (SPIs, algorithms,
//!   selectors) and its timers; DH, nonces, SK_pi/SK_pr and the
//!   IKE_SA_INIT messages go at authentication (`IkeSa::forget_half_open`).
//! - A rekeyed IKE SA keeps the engine's handle (`IkeSa::id`): the new SA
//!   takes it over with the children; the old one gets a throwaway handle
//!   and goes silently, so the control side sees no down/up for a rekey.
//! - Collisions (RFC 7296 2.8, 2.25): simultaneous child or IKE rekeys are
//!   settled by the lowest nonce, the same way on both sides whatever
//!   order the messages arrive in; an IKE rekey request meeting another
//!   outstanding request of ours gets TEMPORARY_FAILURE.

#![deny(clippy::indexing_slicing)]

pub(crate) mod auth;
pub(crate) mod child;
pub(crate) mod dispatch;
pub(crate) mod frame;
pub(crate) mod info;
pub(crate) mod init;
pub(crate) mod util;

use crate::config::{Identity, PeerConfig, TrafficSelector};
use crate::crypto::{DhPrivate, IkeKeys};
use crate::proposal::{Chosen, DhGroup};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

/// Where an IKE SA is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Initiator: IKE_SA_INIT sent.
    InitSent,
    /// Responder: IKE_SA_INIT answered, waiting for IKE_AUTH (half-open).
    InitDone,
    /// Initiator: IKE_AUTH sent.
    AuthSent,
    Established,
    /// Our delete was sent (or the SA was rekeyed and the old one is being
    /// deleted).
    Deleting,
    /// Gone: the engine removes it.
    Dead,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::InitSent | State::InitDone | State::AuthSent => "connecting",
            State::Established => "established",
            State::Deleting | State::Dead => "deleting",
        }
    }
}

/// What only a half-open IKE SA needs (dropped once authenticated).
pub struct HalfOpen {
    pub dh: Option<DhPrivate>,
    pub group: DhGroup,
    pub ni: Vec<u8>,
    pub nr: Vec<u8>,
    /// The IKE_SA_INIT request and response as sent (the AUTH payloads
    /// sign them).
    pub init_req: Vec<u8>,
    pub init_resp: Vec<u8>,
    /// The responder's cookie, echoed in the retried request.
    pub cookie: Option<Vec<u8>>,
    /// Initiator: the inbound SPI proposed for the first child SA.
    pub child_spi: u32,
    /// INVALID_KE / cookie retries so far (bounded).
    pub retries: u8,
    /// The RFC 7427 hash algorithms the peer announced in its
    /// IKE_SA_INIT (`auth::pubkey::hash_mask`; 0: none, sign the classic
    /// way).
    pub peer_hashes: u8,
}

/// A child SA as the IKE SA keeps it.
#[derive(Clone, Debug)]
pub struct Child {
    pub id: u64,
    pub spi_in: u32,
    pub spi_out: u32,
    pub chosen: Chosen,
    pub local_ts: Selectors,
    pub remote_ts: Selectors,
    pub rekey_at: Option<Instant>,
    /// A rekey of it is under way (ours) or done (the new one installed,
    /// this one waits for its delete).
    pub rekeying: bool,
    pub replaced: bool,
    /// The PFS group the peer asked for (INVALID_KE_PAYLOAD) in a rekey.
    pub pfs_group: Option<DhGroup>,
}

/// A child SA's traffic selectors: one inline (almost every child: a
/// remote-access client's address, or "any" of one family), more boxed.
/// A boxed slice of one would cost an allocation of 40 bytes (48 with
/// malloc's rounding) per side per tunnel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selectors {
    One(TrafficSelector),
    Many(Box<[TrafficSelector]>),
}

impl Default for Selectors {
    fn default() -> Selectors {
        Selectors::Many(Box::default())
    }
}

impl From<Vec<TrafficSelector>> for Selectors {
    fn from(mut v: Vec<TrafficSelector>) -> Selectors {
        match v.pop() {
            Some(t) if v.is_empty() => Selectors::One(t),
            Some(t) => {
                v.push(t);
                Selectors::Many(v.into_boxed_slice())
            }
            None => Selectors::default(),
        }
    }
}

impl std::ops::Deref for Selectors {
    type Target = [TrafficSelector];
    fn deref(&self) -> &[TrafficSelector] {
        match self {
            Selectors::One(t) => std::slice::from_ref(t),
            Selectors::Many(v) => v,
        }
    }
}

/// A child rekey that happened (ours or the peer's), kept a while so a
/// simultaneous rekey of the same child (RFC 7296 2.8.1) is settled the
/// same way on both sides whatever order the messages came in.
#[derive(Clone, Debug)]
pub struct RekeyNote {
    pub old: u64,
    pub new: u64,
    /// The lowest nonce of that exchange.
    pub min_nonce: Box<[u8]>,
    /// This side initiated it.
    pub ours: bool,
}

/// At most this many notes per IKE SA (the oldest go).
pub const REKEY_NOTES: usize = 8;

/// A request to make once the one outstanding is answered (window 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    Dpd,
    DeleteIke,
    DeleteChildren(Vec<u64>),
    RekeyChild(u64),
    RekeyIke,
}

/// The outstanding request and what its answer continues.
pub struct Pending {
    pub mid: u32,
    pub exchange: u8,
    pub datagrams: Vec<Vec<u8>>,
    pub tries: u32,
    pub deadline: Instant,
    pub req: Req,
}

pub enum Req {
    Init,
    Auth,
    Dpd,
    DeleteIke,
    DeleteChildren(Vec<u64>),
    /// `retried`: this is the one retry after INVALID_KE_PAYLOAD.
    RekeyChild {
        old: u64,
        spi_in: u32,
        ni: Vec<u8>,
        dh: Option<DhPrivate>,
        retried: bool,
    },
    RekeyIke {
        spi: u64,
        ni: Vec<u8>,
        dh: Option<DhPrivate>,
        retried: bool,
    },
}

/// The last response sent (a retransmitted request gets it again,
/// byte-identical).
pub struct CachedResponse {
    pub mid: u32,
    pub datagrams: Vec<Vec<u8>>,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// Dropped then: the peer's retransmissions of the request are over
    /// by then, and an idle SA should not keep ~300 bytes for nothing.
    pub until: Option<Instant>,
}

/// RFC 7383 reassembly of one message (bounded; dropped on timeout).
pub struct Reassembly {
    pub mid: u32,
    pub response: bool,
    pub first: u8,
    pub parts: Vec<Option<Vec<u8>>>,
    pub bytes: usize,
    pub deadline: Instant,
}

/// One IKE SA.
pub struct IkeSa {
    /// The engine's handle (stays when the IKE SA is rekeyed).
    pub id: u64,
    pub spi_i: u64,
    pub spi_r: u64,
    /// This side is the IKE SA's original initiator.
    pub initiator: bool,
    pub state: State,
    pub peer: Arc<PeerConfig>,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub chosen: Option<Chosen>,
    pub keys: Option<IkeKeys>,
    pub half: Option<Box<HalfOpen>>,
    /// The next request's message ID / the next request expected.
    pub send_mid: u32,
    pub recv_mid: u32,
    pub pending: Option<Box<Pending>>,
    pub queue: Vec<Start>,
    pub last_resp: Option<Box<CachedResponse>>,
    pub children: Vec<Child>,
    pub last_rx: Instant,
    pub dpd_at: Option<Instant>,
    pub rekey_at: Option<Instant>,
    /// Half-open expiry, and a deleting SA's end.
    pub expire_at: Option<Instant>,
    pub established_at: Option<Instant>,
    pub nat_local: bool,
    pub nat_remote: bool,
    /// The peer supports RFC 7383 fragmentation.
    pub frag: bool,
    pub remote_id: Option<Identity>,
    pub virtual_ip: Option<IpAddr>,
    pub reassembly: Option<Box<Reassembly>>,
    /// The deadline the engine's timer heap holds for it.
    pub scheduled: Option<Instant>,
    /// Counted in the engine's half-open totals.
    pub counted_half_open: bool,
    pub counted_established: bool,
    /// This SA's down was announced (or is not to be).
    pub announced_down: bool,
    /// Set when `IkeSaUp` was sent.
    pub announced_up: bool,
    /// The state (`listing::Listed` as a number) this SA is counted
    /// under in the engine's summary, none when it is not listed.
    pub listed_as: Option<u8>,
    /// Recent child rekeys (empty, unallocated, but around collisions).
    pub rekey_notes: Vec<RekeyNote>,
}

impl IkeSa {
    pub fn new(
        id: u64,
        peer: Arc<PeerConfig>,
        initiator: bool,
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> IkeSa {
        IkeSa {
            id,
            spi_i: 0,
            spi_r: 0,
            initiator,
            state: if initiator { State::InitSent } else { State::InitDone },
            peer,
            local,
            remote,
            chosen: None,
            keys: None,
            half: None,
            send_mid: 0,
            recv_mid: 0,
            pending: None,
            queue: Vec::new(),
            last_resp: None,
            children: Vec::new(),
            last_rx: now,
            dpd_at: None,
            rekey_at: None,
            expire_at: None,
            established_at: None,
            nat_local: false,
            nat_remote: false,
            frag: false,
            remote_id: None,
            virtual_ip: None,
            reassembly: None,
            scheduled: None,
            counted_half_open: false,
            counted_established: false,
            announced_down: false,
            announced_up: false,
            listed_as: None,
            rekey_notes: Vec::new(),
        }
    }

    /// The SPI this side chose (the engine's key for it).
    pub fn our_spi(&self) -> u64 {
        if self.initiator { self.spi_i } else { self.spi_r }
    }

    pub fn nat(&self) -> bool {
        self.nat_local || self.nat_remote || self.peer.encap
    }

    /// The earliest time something is due.
    pub fn deadline(&self) -> Option<Instant> {
        let mut d: Option<Instant> = None;
        let mut take = |t: Option<Instant>| {
            if let Some(t) = t {
                d = Some(d.map_or(t, |d| d.min(t)));
            }
        };
        take(self.pending.as_ref().map(|p| p.deadline));
        take(self.expire_at);
        take(self.reassembly.as_ref().map(|r| r.deadline));
        take(self.last_resp.as_ref().and_then(|r| r.until));
        if self.state == State::Established {
            take(self.dpd_at);
            take(self.rekey_at);
            for c in &self.children {
                take(c.rekey_at);
            }
        }
        d
    }

    /// Notes a child rekey; returns the note of the other side's rekey of
    /// the same child, if there was one.
    pub fn note_rekey(&mut self, note: RekeyNote) -> Option<RekeyNote> {
        let other = self.rekey_notes.iter().find(|n| n.old == note.old && n.ours != note.ours).cloned();
        if self.rekey_notes.len() >= REKEY_NOTES {
            self.rekey_notes.remove(0);
        }
        self.rekey_notes.push(note);
        other
    }

    pub fn child(&self, id: u64) -> Option<&Child> {
        self.children.iter().find(|c| c.id == id)
    }

    pub fn child_mut(&mut self, id: u64) -> Option<&mut Child> {
        self.children.iter_mut().find(|c| c.id == id)
    }

    /// The peer's description for logs: "name (address)".
    pub fn who(&self) -> String {
        format!("{} ({})", self.peer.name, self.remote)
    }

    /// Drops what only authentication needed (DH, nonces, the
    /// IKE_SA_INIT messages, SK_pi/SK_pr): an established SA stays small.
    pub fn forget_half_open(&mut self) {
        self.half = None;
        if let Some(k) = self.keys.as_mut() {
            k.sk_p = zeroize::Zeroizing::new(Box::default());
        }
    }

    /// Gives back the spare capacity of the SA's lists (the engine calls
    /// it after every operation): a Vec's first push reserves four
    /// elements, and a child is 144 bytes (its selectors inline), so a
    /// tunnel with one child would hold 432 bytes for nothing, a million
    /// tunnels 432 MB.
    pub fn trim(&mut self) {
        fn fit<T>(v: &mut Vec<T>) {
            if v.capacity() > v.len() {
                v.shrink_to_fit();
            }
        }
        fit(&mut self.children);
        fit(&mut self.queue);
        fit(&mut self.rekey_notes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proposal::{Proposal, Protocol};

    fn sa() -> IkeSa {
        let peer = PeerConfig {
            proposals: Proposal::parse("aes128gcm16-prfsha256-x25519", Protocol::Ike).into_iter().collect(),
            ..PeerConfig::psk_for_tests("p", IpAddr::from([10, 0, 0, 1]))
        };
        let a = SocketAddr::from(([10, 0, 0, 1], 500));
        IkeSa::new(1, Arc::new(peer), false, a, a, Instant::now())
    }

    fn child(id: u64) -> Child {
        Child {
            id,
            spi_in: 0x1000 + id as u32,
            spi_out: 0x2000,
            chosen: Chosen {
                encr: crate::proposal::Encr::AesGcm16 { bits: 128 },
                prf: None,
                integ: None,
                dh: None,
                esn: false,
            },
            local_ts: Selectors::default(),
            remote_ts: Selectors::default(),
            rekey_at: None,
            rekeying: false,
            replaced: false,
            pfs_group: None,
        }
    }

    /// An IKE SA is boxed, one per tunnel: at 512 bytes or less it fits
    /// mimalloc's 512-byte size class (the next is 640).
    #[test]
    fn an_ike_sa_fits_512_bytes() {
        assert!(std::mem::size_of::<IkeSa>() <= 512, "IkeSa is {} bytes", std::mem::size_of::<IkeSa>());
    }

    /// One selector is held inline, none or several boxed; either way the
    /// child reads them as a slice, in order.
    #[test]
    fn selectors_inline_one_and_box_the_rest() {
        let any4 = TrafficSelector::any(false);
        let any6 = TrafficSelector::any(true);
        let one = Selectors::from(vec![any4]);
        assert!(matches!(one, Selectors::One(_)));
        assert_eq!(&one[..], &[any4]);
        let two = Selectors::from(vec![any4, any6]);
        assert!(matches!(&two, Selectors::Many(b) if b.len() == 2));
        assert_eq!(two.to_vec(), vec![any4, any6]);
        let none = Selectors::from(vec![]);
        assert!(none.is_empty());
        assert_eq!(none, Selectors::default());
    }

    /// An SA's lists hold what they hold, no spare room, after `trim`;
    /// their contents stay; SK_pi/SK_pr and the half-open state go at
    /// authentication, SK_d stays.
    #[test]
    fn trim_and_forget_leave_only_what_an_established_sa_needs() {
        let mut s = sa();
        s.children.push(child(1));
        s.queue.push(Start::Dpd);
        s.queue.remove(0);
        assert!(s.children.capacity() > 1, "a first push reserves more than one");
        s.trim();
        assert_eq!((s.children.len(), s.children.capacity()), (1, 1));
        assert_eq!(s.queue.capacity(), 0);
        // A rekey: a second child, then the old one deleted.
        s.children.push(child(2));
        s.children.retain(|c| c.id != 1);
        s.trim();
        assert_eq!((s.children.len(), s.children.capacity()), (1, 1));
        assert_eq!(s.children.first().map(|c| c.id), Some(2));
        let chosen = Chosen {
            encr: crate::proposal::Encr::AesGcm16 { bits: 128 },
            prf: Some(crate::proposal::Prf::HmacSha2_256),
            integ: None,
            dh: Some(DhGroup::Curve25519),
            esn: false,
        };
        s.keys = Some(IkeKeys::derive(&chosen, b"g^ir", b"ni", b"nr", 1, 2).expect("keys"));
        s.forget_half_open();
        let k = s.keys.as_ref().expect("keys");
        assert!(k.sk_pi().is_empty() && k.sk_pr().is_empty());
        assert_eq!(k.sk_d.len(), 32);
        assert!(s.half.is_none());
    }
}
