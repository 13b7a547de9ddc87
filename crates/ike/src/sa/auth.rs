//! IKE_AUTH (RFC 7296 1.2, 2.15): identities, AUTH by pre-shared key or
//! signature, the first child SA (proposal, traffic selectors narrowed to
//! the configured ones, 2.9), remote access's configuration payload
//! (3.15: a virtual IP from the template's pool).

use super::init::{notify, notify_reason};
use super::util::{intersect, narrow, or_any, without_dh};
use super::{Child, IkeSa, Req, State};
use crate::auth::{AUTH_SHARED_KEY, AuthError, psk};
use crate::config::{AuthConfig, Identity, PeerConfig, TrafficSelector};
use crate::crypto::child_keys;
use crate::ike::Ike;
use crate::output::{ChildSa, EspKeys, Output};
use crate::proposal::{self, Chosen, Protocol};
use crate::wire::{self, CpAttribute, Payload, WireProposal, notify};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Configuration payload types and attributes (RFC 7296 3.15).
const CFG_REQUEST: u8 = 1;
const CFG_REPLY: u8 = 2;
const INTERNAL_IP4_ADDRESS: u16 = 1;
const INTERNAL_IP6_ADDRESS: u16 = 8;

/// What an IKE_AUTH message carried.
#[derive(Default)]
struct AuthPayloads {
    idi: Option<Identity>,
    idr: Option<Identity>,
    certs: Vec<Vec<u8>>,
    auth: Option<(u8, Vec<u8>)>,
    sa: Option<Vec<WireProposal>>,
    tsi: Option<Vec<TrafficSelector>>,
    tsr: Option<Vec<TrafficSelector>>,
    cp: Option<(u8, Vec<CpAttribute>)>,
    error: Option<u16>,
    initial_contact: bool,
}

fn gather(payloads: Vec<Payload>) -> AuthPayloads {
    let mut a = AuthPayloads::default();
    for p in payloads {
        match p {
            Payload::IdI(i) => a.idi = Some(i),
            Payload::IdR(i) => a.idr = Some(i),
            Payload::Cert { encoding: 4, data } => a.certs.push(data),
            Payload::Auth { method, data } => a.auth = Some((method, data)),
            Payload::Sa(v) => a.sa = Some(v),
            Payload::TsI(t) => a.tsi = Some(t),
            Payload::TsR(t) => a.tsr = Some(t),
            Payload::Cp { kind, attributes } => a.cp = Some((kind, attributes)),
            Payload::Notify { kind: notify::INITIAL_CONTACT, .. } => a.initial_contact = true,
            Payload::Notify { kind, .. } if kind < 16384 => a.error = a.error.or(Some(kind)),
            _ => {}
        }
    }
    a
}

/// A rekey time jittered up to 10 % down (so both sides do not rekey at
/// once).
pub(crate) fn jitter(ike: &Ike, now: Instant, d: Option<Duration>) -> Option<Instant> {
    let d = d?;
    let mut b = [0u8; 2];
    ike.random(&mut b);
    let cut = d / 10 * u32::from(u16::from_be_bytes(b)) / 65535;
    Some(now + d.saturating_sub(cut))
}

fn spi32(spi: &[u8]) -> Option<u32> {
    <[u8; 4]>::try_from(spi).ok().map(u32::from_be_bytes)
}

impl Ike {
    /// The initiator's IKE_AUTH request.
    pub(crate) fn send_auth(&mut self, sa: &mut IkeSa, now: Instant) {
        let cfg = sa.peer.clone();
        let child_spi = self.alloc_child_spi();
        let (Some(half), Some(keys)) = (sa.half.as_mut(), sa.keys.as_ref()) else { return };
        half.child_spi = child_spi;
        let signed =
            psk::signed_octets(keys.prf, &half.init_req, &half.nr, keys.sk_pi(), &wire::id_body(&cfg.local_id));
        let mut payloads = vec![Payload::IdI(cfg.local_id.clone())];
        let auth = match &cfg.auth {
            AuthConfig::Psk(k) => Payload::Auth { method: AUTH_SHARED_KEY, data: psk::psk_auth(keys.prf, k, &signed) },
            AuthConfig::Pubkey(c) => {
                for der in c.certs() {
                    payloads.push(Payload::Cert { encoding: 4, data: der });
                }
                payloads.push(Payload::CertReq { encoding: 4, data: c.certreq() });
                match c.sign_for(&signed, half.peer_hashes) {
                    Ok((method, data)) => Payload::Auth { method, data },
                    Err(e) => {
                        log::warn!("ike: peer {}: cannot sign: {e}", sa.who());
                        self.fail("sign-failed");
                        self.sa_down(sa, "authentication failed", false);
                        return;
                    }
                }
            }
        };
        if self.contacted.insert(cfg.name.clone()) {
            payloads.push(notify(notify::INITIAL_CONTACT, Vec::new()));
        }
        if let Some(rid) = &cfg.remote_id {
            payloads.push(Payload::IdR(rid.clone()));
        }
        payloads.push(auth);
        let vip = self.vip_requests.get(&cfg.name).copied();
        if let Some(v6) = vip {
            let kind = if v6 { INTERNAL_IP6_ADDRESS } else { INTERNAL_IP4_ADDRESS };
            payloads.push(Payload::Cp { kind: CFG_REQUEST, attributes: vec![CpAttribute { kind, value: Vec::new() }] });
        }
        let esp = without_dh(&cfg.esp_proposals);
        payloads.push(Payload::Sa(
            esp.iter()
                .enumerate()
                .map(|(i, p)| {
                    p.to_wire(u8::try_from(i + 1).unwrap_or(u8::MAX), Protocol::Esp, child_spi.to_be_bytes().to_vec())
                })
                .collect(),
        ));
        payloads.push(Payload::TsI(match vip {
            Some(v6) => vec![TrafficSelector::any(v6)],
            None => or_any(&cfg.local_ts),
        }));
        payloads.push(Payload::TsR(or_any(&cfg.remote_ts)));
        sa.state = State::AuthSent;
        self.send_request(sa, now, wire::IKE_AUTH, &payloads, Req::Auth);
    }

    /// The template an authenticated identity uses (`remote: None`): one
    /// naming this identity first, then one accepting any.
    fn template_for(&self, id: &Identity, fallback: &Arc<PeerConfig>) -> Arc<PeerConfig> {
        let templates = || self.peers.templates();
        templates()
            .find(|p| p.remote_id.as_ref().is_some_and(|r| r.matches(id)))
            .or_else(|| templates().find(|p| p.remote_id.is_none()))
            .cloned()
            .unwrap_or_else(|| fallback.clone())
    }

    /// The responder's IKE_AUTH.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn responder_auth(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        wall: SystemTime,
        local: SocketAddr,
        remote: SocketAddr,
        mid: u32,
        payloads: Vec<Payload>,
    ) {
        if sa.state != State::InitDone {
            self.drop_invalid("unexpected-auth");
            return;
        }
        // Half-open no more, whatever comes of it (and before the address
        // changes: the half-open indexes are by the IKE_SA_INIT's).
        self.unmark_half_open(sa);
        // The request's addresses (a NAT's mapping, port 4500) are the SA's.
        sa.local = local;
        sa.remote = remote;
        let a = gather(payloads);
        let (Some(idi), Some((method, auth_data)), Some(sa_p), Some(tsi), Some(tsr)) =
            (a.idi, a.auth, a.sa, a.tsi, a.tsr)
        else {
            log::warn!("ike: peer {}: IKE_AUTH without IDi, AUTH, SA or TS", sa.who());
            self.fail("invalid-syntax");
            self.send_response(sa, wire::IKE_AUTH, mid, &[notify(notify::INVALID_SYNTAX, Vec::new())], local, remote);
            self.sa_down(sa, "invalid syntax", false);
            return;
        };
        let cfg = if sa.peer.remote.is_some() { sa.peer.clone() } else { self.template_for(&idi, &sa.peer) };
        let wall_secs = wall.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let verified = {
            let (Some(half), Some(keys)) = (sa.half.as_ref(), sa.keys.as_ref()) else { return };
            let signed = psk::signed_octets(keys.prf, &half.init_req, &half.nr, keys.sk_pi(), &wire::id_body(&idi));
            if cfg.remote_id.as_ref().is_some_and(|r| !r.matches(&idi)) {
                Err(AuthError::Identity(idi.to_string()))
            } else {
                match &cfg.auth {
                    AuthConfig::Psk(k) if method == AUTH_SHARED_KEY => {
                        psk::psk_verify(keys.prf, k, &signed, &auth_data)
                    }
                    AuthConfig::Psk(_) => Err(AuthError::Method(method, AUTH_SHARED_KEY)),
                    AuthConfig::Pubkey(c) => {
                        c.verify(&a.certs, &idi, wall_secs, method, &auth_data, &signed).map(|_| ())
                    }
                }
            }
        };
        if let Err(e) = verified {
            log::warn!("ike: peer {} ({remote}), identity {idi}: authentication failed: {e}", cfg.name);
            self.fail("authentication-failed");
            self.send_response(
                sa,
                wire::IKE_AUTH,
                mid,
                &[notify(notify::AUTHENTICATION_FAILED, Vec::new())],
                local,
                remote,
            );
            self.sa_down(sa, "authentication failed", false);
            return;
        }
        if self.settings.max_sas_per_peer > 0
            && self.established_per_peer.get(remote.ip()) as usize >= self.settings.max_sas_per_peer
        {
            log::warn!("ike: peer {} ({remote}): too many IKE SAs from this address", cfg.name);
            self.fail("sa-limit");
            self.send_response(
                sa,
                wire::IKE_AUTH,
                mid,
                &[notify(notify::NO_ADDITIONAL_SAS, Vec::new())],
                local,
                remote,
            );
            self.sa_down(sa, "too many IKE SAs", false);
            return;
        }
        // Counted under the template that took the SA until now; put
        // back, it is counted under the one chosen.
        self.uncount(sa);
        sa.peer = cfg.clone();
        sa.remote_id = Some(idi);
        // This side's AUTH.
        let our_auth = {
            let (Some(half), Some(keys)) = (sa.half.as_ref(), sa.keys.as_ref()) else { return };
            let signed =
                psk::signed_octets(keys.prf, &half.init_resp, &half.ni, keys.sk_pr(), &wire::id_body(&cfg.local_id));
            match &cfg.auth {
                AuthConfig::Psk(k) => Ok((AUTH_SHARED_KEY, psk::psk_auth(keys.prf, k, &signed))),
                AuthConfig::Pubkey(c) => c.sign_for(&signed, half.peer_hashes),
            }
        };
        let (method, data) = match our_auth {
            Ok(x) => x,
            Err(e) => {
                log::warn!("ike: peer {}: cannot sign: {e}", sa.who());
                self.fail("sign-failed");
                self.send_response(
                    sa,
                    wire::IKE_AUTH,
                    mid,
                    &[notify(notify::AUTHENTICATION_FAILED, Vec::new())],
                    local,
                    remote,
                );
                self.sa_down(sa, "authentication failed", false);
                return;
            }
        };
        let mut resp = vec![Payload::IdR(cfg.local_id.clone())];
        if let AuthConfig::Pubkey(c) = &cfg.auth {
            for der in c.certs() {
                resp.push(Payload::Cert { encoding: 4, data: der });
            }
        }
        resp.push(Payload::Auth { method, data });
        // The first child SA; its failure leaves the IKE SA up (2.21.3).
        let child = match self.responder_first_child(sa, &cfg, &sa_p, &tsi, &tsr, a.cp) {
            Ok((child, extra)) => {
                resp.extend(extra);
                Some(child)
            }
            Err(kind) => {
                log::warn!("ike: peer {}: child SA refused: {}", sa.who(), notify_reason(kind));
                self.fail(notify_reason(kind));
                resp.push(notify(kind, Vec::new()));
                None
            }
        };
        self.established(sa, now);
        if a.initial_contact && cfg.remote.is_some() {
            self.initial_contact(sa);
        }
        // The child SA before the answer: the peer sends on it as soon as
        // it has the answer, so the data plane must have it first (the
        // service sends what follows an InstallChild once it is in).
        if let Some((child, inbound, outbound)) = child {
            self.install_child(sa, now, child, inbound, outbound, false);
        }
        self.send_response(sa, wire::IKE_AUTH, mid, &resp, local, remote);
    }

    /// Negotiates the responder's first child SA: the child, its keys, and
    /// the payloads the response carries for it; or the notify refusing it.
    #[allow(clippy::type_complexity)]
    fn responder_first_child(
        &mut self,
        sa: &mut IkeSa,
        cfg: &PeerConfig,
        sa_p: &[WireProposal],
        tsi: &[TrafficSelector],
        tsr: &[TrafficSelector],
        cp: Option<(u8, Vec<CpAttribute>)>,
    ) -> Result<((Child, EspKeys, EspKeys), Vec<Payload>), u16> {
        let ours = without_dh(&cfg.esp_proposals);
        let (number, chosen, their_spi) =
            proposal::select(&ours, sa_p, Protocol::Esp).ok_or(notify::NO_PROPOSAL_CHOSEN)?;
        let their_spi = spi32(&their_spi).ok_or(notify::INVALID_SYNTAX)?;
        let mut extra = Vec::new();
        let mut remote_cfg = or_any(&cfg.remote_ts);
        if let (Some((CFG_REQUEST, attrs)), Some(_)) = (&cp, cfg.pool) {
            let v4 = attrs.iter().any(|a| a.kind == INTERNAL_IP4_ADDRESS);
            let v6 = attrs.iter().any(|a| a.kind == INTERNAL_IP6_ADDRESS);
            if v4 || v6 {
                let pool = self.pools.get_mut(&cfg.name).ok_or(notify::INTERNAL_ADDRESS_FAILURE)?;
                if (pool.v6() && !v6) || (!pool.v6() && !v4) {
                    return Err(notify::INTERNAL_ADDRESS_FAILURE);
                }
                let vip = pool.allocate().ok_or(notify::INTERNAL_ADDRESS_FAILURE)?;
                let attr = match vip {
                    IpAddr::V4(a) => CpAttribute { kind: INTERNAL_IP4_ADDRESS, value: a.octets().to_vec() },
                    IpAddr::V6(a) => {
                        let mut v = a.octets().to_vec();
                        v.push(128);
                        CpAttribute { kind: INTERNAL_IP6_ADDRESS, value: v }
                    }
                };
                sa.virtual_ip = Some(vip);
                remote_cfg = vec![TrafficSelector::host(vip)];
                extra.push(Payload::Cp { kind: CFG_REPLY, attributes: vec![attr] });
            }
        } else if cfg.pool.is_some() {
            return Err(notify::FAILED_CP_REQUIRED);
        }
        let ts_i = narrow(tsi, &remote_cfg);
        let ts_r = narrow(tsr, &or_any(&cfg.local_ts));
        if ts_i.is_empty() || ts_r.is_empty() {
            if let Some(vip) = sa.virtual_ip.take()
                && let Some(pool) = self.pools.get_mut(&cfg.name)
            {
                pool.free(vip);
            }
            return Err(notify::TS_UNACCEPTABLE);
        }
        let spi_in = self.alloc_child_spi();
        let (Some(half), Some(keys)) = (sa.half.as_ref(), sa.keys.as_ref()) else { return Err(notify::INVALID_SYNTAX) };
        let (i2r, r2i) = child_keys(keys.prf, &keys.sk_d, &chosen, None, &half.ni, &half.nr, spi_in, their_spi)
            .map_err(|_| notify::NO_PROPOSAL_CHOSEN)?;
        extra.push(Payload::Sa(vec![chosen.to_wire(number, Protocol::Esp, spi_in.to_be_bytes().to_vec())]));
        extra.push(Payload::TsI(ts_i.clone()));
        extra.push(Payload::TsR(ts_r.clone()));
        let child = new_child(self.new_id(), spi_in, their_spi, chosen, ts_r, ts_i);
        Ok(((child, i2r, r2i), extra))
    }

    /// The responder's IKE_AUTH answer, at the initiator.
    pub(crate) fn initiator_auth_response(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        wall: SystemTime,
        payloads: Vec<Payload>,
    ) {
        let a = gather(payloads);
        let who = sa.who();
        let (Some(idr), Some((method, auth_data))) = (a.idr, a.auth) else {
            let reason = a.error.map_or("invalid-syntax", notify_reason);
            log::warn!("ike: peer {who}: IKE_AUTH refused: {reason}");
            self.fail(reason);
            self.sa_down(sa, reason, false);
            return;
        };
        let cfg = sa.peer.clone();
        let wall_secs = wall.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let verified = {
            let (Some(half), Some(keys)) = (sa.half.as_ref(), sa.keys.as_ref()) else { return };
            let signed = psk::signed_octets(keys.prf, &half.init_resp, &half.ni, keys.sk_pr(), &wire::id_body(&idr));
            if cfg.remote_id.as_ref().is_some_and(|r| !r.matches(&idr)) {
                Err(AuthError::Identity(idr.to_string()))
            } else {
                match &cfg.auth {
                    AuthConfig::Psk(k) if method == AUTH_SHARED_KEY => {
                        psk::psk_verify(keys.prf, k, &signed, &auth_data)
                    }
                    AuthConfig::Psk(_) => Err(AuthError::Method(method, AUTH_SHARED_KEY)),
                    AuthConfig::Pubkey(c) => {
                        c.verify(&a.certs, &idr, wall_secs, method, &auth_data, &signed).map(|_| ())
                    }
                }
            }
        };
        if let Err(e) = verified {
            log::warn!("ike: peer {who}, identity {idr}: authentication failed: {e}");
            self.fail("authentication-failed");
            self.sa_down(sa, "authentication failed", true);
            return;
        }
        sa.remote_id = Some(idr);
        let child = self.initiator_first_child(sa, &cfg, a.sa, a.tsi, a.tsr, a.cp, a.error);
        self.established(sa, now);
        match child {
            Ok((child, inbound, outbound)) => self.install_child(sa, now, child, inbound, outbound, false),
            Err(reason) => {
                log::warn!("ike: peer {who}: the first child SA failed: {reason}");
                self.fail(reason);
            }
        }
    }

    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn initiator_first_child(
        &mut self,
        sa: &mut IkeSa,
        cfg: &PeerConfig,
        sa_p: Option<Vec<WireProposal>>,
        tsi: Option<Vec<TrafficSelector>>,
        tsr: Option<Vec<TrafficSelector>>,
        cp: Option<(u8, Vec<CpAttribute>)>,
        error: Option<u16>,
    ) -> Result<(Child, EspKeys, EspKeys), &'static str> {
        if let Some(kind) = error {
            return Err(notify_reason(kind));
        }
        let (Some(sa_p), Some(tsi), Some(tsr)) = (sa_p, tsi, tsr) else { return Err("invalid-syntax") };
        let (chosen, spi_out) = match sa_p.as_slice() {
            [p] => {
                let c = Chosen::from_wire(p).map_err(|_| "no-proposal-chosen")?;
                if !c.offered_by(&without_dh(&cfg.esp_proposals)) {
                    return Err("no-proposal-chosen");
                }
                (c, spi32(&p.spi).ok_or("invalid-syntax")?)
            }
            _ => return Err("no-proposal-chosen"),
        };
        // The responder may only narrow what we proposed (RFC 7296 2.9).
        let proposed_i = match self.vip_requests.get(&cfg.name) {
            Some(v6) => vec![TrafficSelector::any(*v6)],
            None => or_any(&cfg.local_ts),
        };
        let within = |got: &[TrafficSelector], ours: &[TrafficSelector]| {
            got.iter().all(|t| ours.iter().any(|o| intersect(t, o) == Some(*t)))
        };
        if tsi.is_empty() || tsr.is_empty() || !within(&tsi, &proposed_i) || !within(&tsr, &or_any(&cfg.remote_ts)) {
            return Err("ts-unacceptable");
        }
        if let Some((CFG_REPLY, attrs)) = cp {
            for at in attrs {
                match (at.kind, at.value.len()) {
                    (INTERNAL_IP4_ADDRESS, 4) => {
                        let b: [u8; 4] = at.value.as_slice().try_into().unwrap_or([0; 4]);
                        sa.virtual_ip = Some(IpAddr::V4(Ipv4Addr::from(b)));
                    }
                    (INTERNAL_IP6_ADDRESS, 17) => {
                        let mut b = [0u8; 16];
                        if let Some(v) = at.value.get(..16) {
                            b.copy_from_slice(v);
                        }
                        sa.virtual_ip = Some(IpAddr::V6(Ipv6Addr::from(b)));
                    }
                    _ => {}
                }
            }
        }
        let (Some(half), Some(keys)) = (sa.half.as_ref(), sa.keys.as_ref()) else { return Err("internal") };
        let (i2r, r2i) = child_keys(keys.prf, &keys.sk_d, &chosen, None, &half.ni, &half.nr, spi_out, half.child_spi)
            .map_err(|_| "no-proposal-chosen")?;
        let child = new_child(self.new_id(), half.child_spi, spi_out, chosen, tsi, tsr);
        Ok((child, r2i, i2r))
    }

    /// RFC 7296 2.4: INITIAL_CONTACT says the peer lost its other IKE SAs
    /// with us (it restarted): they go, without a delete. For site-to-site
    /// peers only (a configured address): a template's clients each have
    /// their own identity, and a scan per client would cost a million SAs
    /// a million times.
    fn initial_contact(&mut self, sa: &IkeSa) {
        let stale: Vec<u64> = self
            .sas
            .iter()
            .filter(|(_, o)| o.peer.name == sa.peer.name && o.remote_id == sa.remote_id && o.id != sa.id)
            .map(|(spi, _)| *spi)
            .collect();
        for spi in stale {
            self.with_sa(spi, sa.last_rx, |ike, old| {
                log::info!("ike: peer {}: IKE SA {} replaced (INITIAL_CONTACT)", old.who(), old.id);
                ike.sa_down(old, "replaced (INITIAL_CONTACT)", false);
            });
        }
    }

    /// The IKE SA is up: forget the half-open state, start its timers,
    /// announce it.
    pub(crate) fn established(&mut self, sa: &mut IkeSa, now: Instant) {
        sa.forget_half_open();
        self.unmark_half_open(sa);
        sa.state = State::Established;
        sa.expire_at = None;
        sa.established_at = Some(now);
        sa.last_rx = now;
        sa.dpd_at = sa.peer.dpd.map(|d| now + d);
        sa.rekey_at = jitter(self, now, sa.peer.ike_rekey);
        if !sa.counted_established {
            sa.counted_established = true;
            self.established += 1;
            self.established_per_peer.add(sa.remote.ip());
        }
        self.stats.setups += 1;
        sa.announced_up = true;
        if log::log_enabled!(log::Level::Info) && self.event_log.allow(now, crate::eventlog::Routine::Up) {
            log::info!(
                "ike: peer {}: IKE SA {} up ({}, {}, {}{})",
                sa.who(),
                sa.id,
                if sa.initiator { "initiator" } else { "responder" },
                sa.chosen.map(|c| c.to_string()).unwrap_or_default(),
                sa.remote_id.as_ref().map(|i| i.to_string()).unwrap_or_default(),
                if sa.nat() { ", NAT" } else { "" }
            );
        }
        self.out.push(Output::IkeSaUp { peer: sa.peer.name.clone(), ike_sa: sa.id, remote: sa.remote });
    }

    /// Installs a negotiated child SA (announces it to the data plane).
    pub(crate) fn install_child(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        mut child: Child,
        inbound: EspKeys,
        outbound: EspKeys,
        rekey: bool,
    ) {
        child.rekey_at = jitter(self, now, sa.peer.child_rekey);
        let hard = sa.peer.child_rekey.map(|d| d.as_secs() + d.as_secs() / 10 + 1);
        let out = ChildSa {
            peer: sa.peer.name.clone(),
            tunnel: sa.peer.tunnel.clone(),
            ike_sa: sa.id,
            id: child.id,
            inbound,
            outbound,
            esn: child.chosen.esn,
            local: sa.local.ip(),
            remote: sa.remote.ip(),
            udp_encap: if sa.nat() { Some((sa.local.port(), sa.remote.port())) } else { None },
            local_ts: child.local_ts.to_vec(),
            remote_ts: child.remote_ts.to_vec(),
            virtual_ip: sa.virtual_ip,
            soft_secs: None,
            hard_secs: hard,
            replaces: None,
        };
        // Routine: through the event log, as the IKE SA's line.
        if log::log_enabled!(log::Level::Info) && self.event_log.allow(now, crate::eventlog::Routine::Child) {
            log::info!(
                "ike: peer {}: child SA {} {} ({}, in {:#010x}, out {:#010x})",
                sa.who(),
                child.id,
                if rekey { "rekeyed" } else { "up" },
                child.chosen,
                child.spi_in,
                child.spi_out
            );
        }
        if rekey {
            self.stats.rekeys_child += 1;
        } else {
            self.stats.child_setups += 1;
        }
        self.index_child(child.spi_in, sa.our_spi());
        sa.children.push(child);
        self.out.push(Output::InstallChild(Box::new(out)));
    }
}

pub(crate) fn new_child(
    id: u64,
    spi_in: u32,
    spi_out: u32,
    chosen: Chosen,
    local_ts: Vec<TrafficSelector>,
    remote_ts: Vec<TrafficSelector>,
) -> Child {
    Child {
        id,
        spi_in,
        spi_out,
        chosen,
        local_ts: local_ts.into(),
        remote_ts: remote_ts.into(),
        rekey_at: None,
        rekeying: false,
        replaced: false,
        pfs_group: None,
    }
}
