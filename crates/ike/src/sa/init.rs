//! IKE_SA_INIT (RFC 7296 1.2): the initiator's request and its retries
//! (COOKIE, INVALID_KE_PAYLOAD), the responder's stateless checks (limits,
//! cookies, proposal, KE group) before it keeps any state, NAT detection
//! (2.23).

use super::util::{first_group, group_from_id, group_id, nat_hash, offers_group};
use super::{CachedResponse, HalfOpen, IkeSa, Pending, Req, State};
use crate::config::AuthConfig;
use crate::config::PeerConfig;
use crate::crypto::{DhPrivate, IkeKeys};
use crate::ike::Ike;
use crate::output::Output;
use crate::proposal::{self, Chosen, Protocol};
use crate::wire::{self, FLAG_INITIATOR, FLAG_RESPONSE, Header, Message, Payload, notify};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

/// At most this many COOKIE / INVALID_KE retries of one IKE_SA_INIT.
const MAX_INIT_RETRIES: u8 = 3;

/// RFC 7427 SIGNATURE_HASH_ALGORITHMS: SHA2-256, SHA2-384, SHA2-512,
/// Identity (Ed25519).
const SIGNATURE_HASHES: [u8; 8] = [0, 2, 0, 3, 0, 4, 0, 5];

pub(crate) fn notify(kind: u16, data: Vec<u8>) -> Payload {
    Payload::Notify { protocol: 0, spi: Vec::new(), kind, data }
}

/// The name a failure notify is counted and logged under.
pub(crate) fn notify_reason(kind: u16) -> &'static str {
    match kind {
        notify::NO_PROPOSAL_CHOSEN => "no-proposal-chosen",
        notify::INVALID_KE_PAYLOAD => "invalid-ke",
        notify::AUTHENTICATION_FAILED => "authentication-failed",
        notify::TS_UNACCEPTABLE => "ts-unacceptable",
        notify::INVALID_SYNTAX => "invalid-syntax",
        notify::INTERNAL_ADDRESS_FAILURE => "internal-address-failure",
        notify::FAILED_CP_REQUIRED => "failed-cp-required",
        notify::NO_ADDITIONAL_SAS => "no-additional-sas",
        notify::TEMPORARY_FAILURE => "temporary-failure",
        notify::CHILD_SA_NOT_FOUND => "child-sa-not-found",
        notify::INVALID_SPI => "invalid-spi",
        notify::INVALID_IKE_SPI => "invalid-ike-spi",
        notify::INVALID_MESSAGE_ID => "invalid-message-id",
        notify::UNSUPPORTED_CRITICAL_PAYLOAD => "unsupported-critical-payload",
        _ => "error-notify",
    }
}

fn is_pubkey(cfg: &PeerConfig) -> bool {
    matches!(cfg.auth, AuthConfig::Pubkey(_))
}

impl Ike {
    /// Creates an initiator IKE SA and sends its IKE_SA_INIT.
    pub(crate) fn initiate_sa(&mut self, now: Instant, cfg: Arc<PeerConfig>) -> Result<u64, String> {
        let remote_ip =
            cfg.remote.ok_or_else(|| format!("peer {}: a template (remote any) cannot initiate", cfg.name))?;
        let group = first_group(&cfg.proposals)
            .ok_or_else(|| format!("peer {}: no DH group in the IKE proposals", cfg.name))?;
        let id = self.new_id();
        let local = SocketAddr::new(cfg.local, 500);
        let remote = SocketAddr::new(remote_ip, 500);
        let mut sa = IkeSa::new(id, cfg, true, local, remote, now);
        sa.spi_i = self.alloc_ike_spi();
        sa.half = Some(Box::new(HalfOpen {
            dh: None,
            group,
            ni: self.nonce(),
            nr: Vec::new(),
            init_req: Vec::new(),
            init_resp: Vec::new(),
            cookie: None,
            child_spi: 0,
            retries: 0,
            peer_hashes: 0,
        }));
        if let Err(e) = self.send_init(&mut sa, now) {
            return Err(format!("peer {}: {e}", sa.peer.name));
        }
        self.put_back(Box::new(sa), now);
        Ok(id)
    }

    /// (Re)sends the initiator's IKE_SA_INIT request.
    fn send_init(&mut self, sa: &mut IkeSa, now: Instant) -> Result<(), String> {
        let pubkey = is_pubkey(&sa.peer);
        let Some(half) = sa.half.as_mut() else { return Err("no half-open state".into()) };
        let (dh, public) = DhPrivate::generate(half.group).map_err(|e| e.to_string())?;
        half.dh = Some(dh);
        let mut payloads = Vec::with_capacity(8);
        if let Some(c) = &half.cookie {
            payloads.push(notify(notify::COOKIE, c.clone()));
        }
        let proposals = sa
            .peer
            .proposals
            .iter()
            .enumerate()
            .map(|(i, p)| p.to_wire(u8::try_from(i + 1).unwrap_or(u8::MAX), Protocol::Ike, Vec::new()))
            .collect();
        payloads.push(Payload::Sa(proposals));
        payloads.push(Payload::Ke { group: group_id(half.group), data: public });
        payloads.push(Payload::Nonce(half.ni.clone()));
        // `encap`: a source hash that cannot match makes both sides see a
        // NAT (what strongSwan does).
        let src = if sa.peer.encap {
            let mut r = vec![0u8; 20];
            self.random(&mut r);
            r
        } else {
            nat_hash(sa.spi_i, 0, sa.local)
        };
        payloads.push(notify(notify::NAT_DETECTION_SOURCE_IP, src));
        payloads.push(notify(notify::NAT_DETECTION_DESTINATION_IP, nat_hash(sa.spi_i, 0, sa.remote)));
        payloads.push(notify(notify::IKEV2_FRAGMENTATION_SUPPORTED, Vec::new()));
        if pubkey && self.settings.signature_hashes {
            payloads.push(notify(notify::SIGNATURE_HASH_ALGORITHMS, SIGNATURE_HASHES.to_vec()));
        }
        let msg = Message {
            header: Header {
                spi_i: sa.spi_i,
                spi_r: 0,
                next_payload: 0,
                version: 0x20,
                exchange: wire::IKE_SA_INIT,
                flags: FLAG_INITIATOR,
                message_id: 0,
                length: 0,
            },
            payloads,
        };
        let bytes = msg.encode();
        half.init_req = bytes.clone();
        sa.spi_r = 0;
        sa.state = State::InitSent;
        self.out.push(Output::Send { local: sa.local, remote: sa.remote, data: bytes.clone() });
        sa.pending = Some(Box::new(Pending {
            mid: 0,
            exchange: wire::IKE_SA_INIT,
            datagrams: vec![bytes],
            tries: 0,
            deadline: now + self.settings.retransmit_base,
            req: Req::Init,
        }));
        sa.send_mid = 1;
        Ok(())
    }

    /// An unencrypted IKE_SA_INIT answer that keeps no state (COOKIE,
    /// INVALID_KE_PAYLOAD, NO_PROPOSAL_CHOSEN).
    fn answer_init_stateless(&mut self, local: SocketAddr, remote: SocketAddr, spi_i: u64, kind: u16, data: Vec<u8>) {
        let msg = Message {
            header: Header {
                spi_i,
                spi_r: 0,
                next_payload: 0,
                version: 0x20,
                exchange: wire::IKE_SA_INIT,
                flags: FLAG_RESPONSE,
                message_id: 0,
                length: 0,
            },
            payloads: vec![notify(kind, data)],
        };
        self.out.push(Output::Send { local, remote, data: msg.encode() });
    }

    /// The configuration an IKE_SA_INIT from `remote` to `local` uses: the
    /// peer configured with that address, else a template (`remote: None`)
    /// on this address; IKE_AUTH may pick another template by identity.
    pub(crate) fn responder_config(&self, local: IpAddr, remote: IpAddr) -> Option<Arc<PeerConfig>> {
        self.peers
            .by_remote(remote)
            .or_else(|| self.peers.templates().find(|p| p.local == local || p.local.is_unspecified()))
            .or_else(|| self.peers.templates().next())
            .cloned()
    }

    /// A new IKE_SA_INIT request.
    pub(crate) fn responder_init(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, data: &[u8]) {
        let msg = match Message::decode(data) {
            Ok(m) => m,
            Err(e) => {
                log::debug!("ike: IKE_SA_INIT from {remote}: {e}");
                self.drop_invalid("invalid-syntax");
                return;
            }
        };
        let h = msg.header;
        // Limits before any work (RFC 7296 2.6).
        if self.half_open >= self.settings.max_half_open {
            self.drop_invalid("half-open-limit");
            return;
        }
        if self
            .half_open_per_peer
            .get(&remote.ip())
            .is_some_and(|&n| n as usize >= self.settings.max_half_open_per_peer)
        {
            self.drop_invalid("half-open-limit-peer");
            return;
        }
        let mut sa_p = None;
        let mut ke = None;
        let mut ni = None;
        let mut cookie = None;
        let mut nat_src = Vec::new();
        let mut nat_dst = None;
        let mut frag = false;
        let mut peer_hashes = 0;
        for p in msg.payloads {
            match p {
                Payload::Sa(v) => sa_p = Some(v),
                Payload::Ke { group, data } => ke = Some((group, data)),
                Payload::Nonce(n) => ni = Some(n),
                Payload::Notify { kind: notify::COOKIE, data, .. } => cookie = Some(data),
                Payload::Notify { kind: notify::NAT_DETECTION_SOURCE_IP, data, .. } => nat_src.push(data),
                Payload::Notify { kind: notify::NAT_DETECTION_DESTINATION_IP, data, .. } => nat_dst = Some(data),
                Payload::Notify { kind: notify::IKEV2_FRAGMENTATION_SUPPORTED, .. } => frag = true,
                Payload::Notify { kind: notify::SIGNATURE_HASH_ALGORITHMS, data, .. } => {
                    peer_hashes = crate::auth::pubkey::hash_mask(&data)
                }
                _ => {}
            }
        }
        let (Some(sa_p), Some((ke_group, ke_data)), Some(ni)) = (sa_p, ke, ni) else {
            log::debug!("ike: IKE_SA_INIT from {remote}: SA, KE or Nonce missing");
            self.drop_invalid("invalid-syntax");
            return;
        };
        if !(16..=256).contains(&ni.len()) {
            self.drop_invalid("invalid-syntax");
            return;
        }
        if self.half_open >= self.settings.cookie_threshold {
            let ok = cookie.as_ref().is_some_and(|c| self.cookie_valid(c, &ni, remote.ip(), h.spi_i));
            if !ok {
                let c = self.make_cookie(&ni, remote.ip(), h.spi_i);
                self.answer_init_stateless(local, remote, h.spi_i, notify::COOKIE, c);
                self.stats.cookies_sent += 1;
                return;
            }
        }
        let Some(cfg) = self.responder_config(local.ip(), remote.ip()) else {
            log::warn!("ike: IKE_SA_INIT from {remote}: no peer configured for it");
            self.fail("peer-unknown");
            return;
        };
        let Some((number, chosen, _)) = proposal::select(&cfg.proposals, &sa_p, Protocol::Ike) else {
            log::warn!("ike: peer {} ({remote}): no acceptable IKE proposal", cfg.name);
            self.fail("no-proposal-chosen");
            self.answer_init_stateless(local, remote, h.spi_i, notify::NO_PROPOSAL_CHOSEN, Vec::new());
            return;
        };
        let Some(group) = chosen.dh else {
            self.fail("no-proposal-chosen");
            self.answer_init_stateless(local, remote, h.spi_i, notify::NO_PROPOSAL_CHOSEN, Vec::new());
            return;
        };
        if group_from_id(ke_group) != Some(group) {
            log::info!("ike: peer {} ({remote}): KE group {ke_group}, asking for {}", cfg.name, group_id(group));
            self.fail("invalid-ke");
            let g = group_id(group).to_be_bytes().to_vec();
            self.answer_init_stateless(local, remote, h.spi_i, notify::INVALID_KE_PAYLOAD, g);
            return;
        }
        let (dh, public) = match self.responder_dh(group, now) {
            Ok(x) => x,
            Err(e) => {
                log::warn!("ike: peer {} ({remote}): {e}", cfg.name);
                self.fail("crypto");
                return;
            }
        };
        let shared = match dh.agree(&ke_data) {
            Ok(s) => s,
            Err(e) => {
                log::warn!("ike: peer {} ({remote}): {e}", cfg.name);
                self.drop_invalid("invalid-ke-data");
                return;
            }
        };
        let spi_r = self.alloc_ike_spi();
        let nr = self.nonce();
        let keys = match IkeKeys::derive(&chosen, &shared, &ni, &nr, h.spi_i, spi_r) {
            Ok(k) => k,
            Err(e) => {
                log::warn!("ike: peer {} ({remote}): {e}", cfg.name);
                self.fail("no-proposal-chosen");
                self.answer_init_stateless(local, remote, h.spi_i, notify::NO_PROPOSAL_CHOSEN, Vec::new());
                return;
            }
        };
        drop(shared);
        let nat_remote = !nat_src.is_empty() && !nat_src.iter().any(|x| *x == nat_hash(h.spi_i, 0, remote));
        let nat_local = nat_dst.is_some_and(|d| d != nat_hash(h.spi_i, 0, local));

        let mut payloads = vec![
            Payload::Sa(vec![chosen.to_wire(number, Protocol::Ike, Vec::new())]),
            Payload::Ke { group: group_id(group), data: public },
            Payload::Nonce(nr.clone()),
            notify(notify::NAT_DETECTION_SOURCE_IP, nat_hash(h.spi_i, spi_r, local)),
            notify(notify::NAT_DETECTION_DESTINATION_IP, nat_hash(h.spi_i, spi_r, remote)),
            notify(notify::IKEV2_FRAGMENTATION_SUPPORTED, Vec::new()),
        ];
        if let AuthConfig::Pubkey(c) = &cfg.auth {
            payloads.push(Payload::CertReq { encoding: 4, data: c.certreq() });
            if self.settings.signature_hashes {
                payloads.push(notify(notify::SIGNATURE_HASH_ALGORITHMS, SIGNATURE_HASHES.to_vec()));
            }
        }
        let resp = Message {
            header: Header {
                spi_i: h.spi_i,
                spi_r,
                next_payload: 0,
                version: 0x20,
                exchange: wire::IKE_SA_INIT,
                flags: FLAG_RESPONSE,
                message_id: 0,
                length: 0,
            },
            payloads,
        }
        .encode();
        let id = self.new_id();
        let mut sa = IkeSa::new(id, cfg, false, local, remote, now);
        sa.spi_i = h.spi_i;
        sa.spi_r = spi_r;
        sa.chosen = Some(chosen);
        sa.keys = Some(keys);
        sa.nat_local = nat_local;
        sa.nat_remote = nat_remote;
        sa.frag = frag;
        sa.recv_mid = 1;
        sa.expire_at = Some(now + self.settings.half_open_timeout);
        sa.half = Some(Box::new(HalfOpen {
            dh: None,
            group,
            ni,
            nr,
            init_req: data.to_vec(),
            init_resp: resp.clone(),
            cookie: None,
            child_spi: 0,
            retries: 0,
            peer_hashes,
        }));
        self.out.push(Output::Send { local, remote, data: resp.clone() });
        sa.last_resp = Some(Box::new(CachedResponse { mid: 0, datagrams: vec![resp], local, remote, until: None }));
        self.mark_half_open(&mut sa);
        self.init_index.insert((remote, h.spi_i), spi_r);
        self.put_back(Box::new(sa), now);
    }

    /// The responder's IKE_SA_INIT answer, at the initiator.
    pub(crate) fn initiator_init_response(&mut self, sa: &mut IkeSa, now: Instant, msg: Message, data: &[u8]) {
        let h = msg.header;
        let mut sa_p = None;
        let mut ke = None;
        let mut nr = None;
        let mut nat_src = Vec::new();
        let mut nat_dst = None;
        let mut frag = false;
        let mut peer_hashes = 0;
        let mut cookie = None;
        let mut invalid_ke = None;
        let mut error = None;
        for p in msg.payloads {
            match p {
                Payload::Sa(v) => sa_p = Some(v),
                Payload::Ke { group, data } => ke = Some((group, data)),
                Payload::Nonce(n) => nr = Some(n),
                Payload::Notify { kind: notify::COOKIE, data, .. } => cookie = Some(data),
                Payload::Notify { kind: notify::INVALID_KE_PAYLOAD, data, .. } => invalid_ke = Some(data),
                Payload::Notify { kind: notify::NAT_DETECTION_SOURCE_IP, data, .. } => nat_src.push(data),
                Payload::Notify { kind: notify::NAT_DETECTION_DESTINATION_IP, data, .. } => nat_dst = Some(data),
                Payload::Notify { kind: notify::IKEV2_FRAGMENTATION_SUPPORTED, .. } => frag = true,
                Payload::Notify { kind: notify::SIGNATURE_HASH_ALGORITHMS, data, .. } => {
                    peer_hashes = crate::auth::pubkey::hash_mask(&data)
                }
                Payload::Notify { kind, .. } if kind < 16384 => error = Some(kind),
                _ => {}
            }
        }
        let who = sa.who();
        let Some(half) = sa.half.as_mut() else { return };
        if let Some(c) = cookie {
            if half.retries >= MAX_INIT_RETRIES || c.is_empty() || c.len() > 64 {
                self.init_failed(sa, "cookie");
                return;
            }
            half.retries += 1;
            half.cookie = Some(c);
            if let Err(e) = self.send_init(sa, now) {
                log::warn!("ike: peer {who}: {e}");
                self.init_failed(sa, "crypto");
            }
            return;
        }
        if let Some(g) = invalid_ke {
            let group =
                g.get(..2).and_then(|b| <[u8; 2]>::try_from(b).ok()).and_then(|b| group_from_id(u16::from_be_bytes(b)));
            match group {
                Some(group)
                    if offers_group(&sa.peer.proposals, group)
                        && group != half.group
                        && half.retries < MAX_INIT_RETRIES =>
                {
                    log::info!("ike: peer {who}: responder wants DH group {}", group_id(group));
                    half.retries += 1;
                    half.group = group;
                    if let Err(e) = self.send_init(sa, now) {
                        log::warn!("ike: peer {who}: {e}");
                        self.init_failed(sa, "crypto");
                    }
                }
                _ => {
                    log::warn!("ike: peer {who}: INVALID_KE_PAYLOAD for a group not offered");
                    self.init_failed(sa, "invalid-ke");
                }
            }
            return;
        }
        if let Some(kind) = error {
            log::warn!("ike: peer {who}: IKE_SA_INIT refused: {}", notify_reason(kind));
            self.init_failed(sa, notify_reason(kind));
            return;
        }
        let (Some(sa_p), Some((ke_group, ke_data)), Some(nr)) = (sa_p, ke, nr) else {
            log::warn!("ike: peer {who}: IKE_SA_INIT response without SA, KE or Nonce");
            self.init_failed(sa, "invalid-syntax");
            return;
        };
        let chosen = match sa_p.first().map(Chosen::from_wire) {
            Some(Ok(c)) if sa_p.len() == 1 && c.offered_by(&sa.peer.proposals) => c,
            _ => {
                log::warn!("ike: peer {who}: the responder chose a proposal we did not offer");
                self.init_failed(sa, "no-proposal-chosen");
                return;
            }
        };
        if chosen.dh != Some(half.group) || group_from_id(ke_group) != Some(half.group) || h.spi_r == 0 {
            log::warn!("ike: peer {who}: KE or SPI in the IKE_SA_INIT response do not fit");
            self.init_failed(sa, "invalid-ke");
            return;
        }
        if !(16..=256).contains(&nr.len()) {
            self.init_failed(sa, "invalid-syntax");
            return;
        }
        let Some(dh) = half.dh.take() else { return };
        let shared = match dh.agree(&ke_data) {
            Ok(s) => s,
            Err(e) => {
                log::warn!("ike: peer {who}: {e}");
                self.init_failed(sa, "invalid-ke");
                return;
            }
        };
        sa.spi_r = h.spi_r;
        let keys = match IkeKeys::derive(&chosen, &shared, &half.ni, &nr, sa.spi_i, sa.spi_r) {
            Ok(k) => k,
            Err(e) => {
                log::warn!("ike: peer {who}: {e}");
                self.init_failed(sa, "no-proposal-chosen");
                return;
            }
        };
        drop(shared);
        half.nr = nr;
        half.init_resp = data.to_vec();
        half.peer_hashes = peer_hashes;
        sa.nat_local = nat_dst.is_some_and(|d| d != nat_hash(sa.spi_i, sa.spi_r, sa.local));
        sa.nat_remote = !nat_src.is_empty() && !nat_src.iter().any(|x| *x == nat_hash(sa.spi_i, sa.spi_r, sa.remote));
        sa.frag = frag;
        sa.chosen = Some(chosen);
        sa.keys = Some(keys);
        sa.pending = None;
        sa.last_rx = now;
        // RFC 7296 2.23: behind a NAT (or forced), IKE_AUTH and what follows
        // go to port 4500.
        if sa.nat() {
            sa.local.set_port(4500);
            sa.remote.set_port(4500);
        }
        self.send_auth(sa, now);
    }

    fn init_failed(&mut self, sa: &mut IkeSa, reason: &'static str) {
        self.fail(reason);
        self.sa_down(sa, reason, false);
    }
}
