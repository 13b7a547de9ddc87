//! CREATE_CHILD_SA (RFC 7296 1.3): rekeying a child SA (REKEY_SA, new
//! SPIs, PFS when the ESP proposal has a DH group; the new one installed
//! before the old one is deleted, so the data plane never lacks an inbound
//! SA), a new child SA, and rekeying the IKE SA (2.18: new SPIs and keys,
//! the children moved, the old SA deleted). Simultaneous child rekeys
//! (2.8.1): the exchange with the lowest nonce loses; its initiator deletes
//! the child it created.

use super::auth::{jitter, new_child};
use super::info::PROTO_ESP;
use super::init::{notify, notify_reason};
use super::util::{first_group, group_from_id, group_id, narrow, offers_group, or_any};
use super::{IkeSa, RekeyNote, Req, Start, State};
use crate::config::TrafficSelector;
use crate::crypto::{DhPrivate, IkeKeys, child_keys};
use crate::ike::Ike;
use crate::proposal::{self, Chosen, DhGroup, Protocol};
use crate::wire::{self, Payload, WireProposal, notify};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A failed rekey is tried again after this.
const REKEY_RETRY: Duration = Duration::from_secs(30);

#[derive(Default)]
struct ChildPayloads {
    sa: Option<Vec<WireProposal>>,
    nonce: Option<Vec<u8>>,
    ke: Option<(u16, Vec<u8>)>,
    tsi: Option<Vec<TrafficSelector>>,
    tsr: Option<Vec<TrafficSelector>>,
    rekey: Option<(u8, Vec<u8>)>,
    error: Option<(u16, Vec<u8>)>,
}

fn gather(payloads: Vec<Payload>) -> ChildPayloads {
    let mut c = ChildPayloads::default();
    for p in payloads {
        match p {
            Payload::Sa(v) => c.sa = Some(v),
            Payload::Nonce(n) => c.nonce = Some(n),
            Payload::Ke { group, data } => c.ke = Some((group, data)),
            Payload::TsI(t) => c.tsi = Some(t),
            Payload::TsR(t) => c.tsr = Some(t),
            Payload::Notify { kind: notify::REKEY_SA, protocol, spi, .. } => c.rekey = Some((protocol, spi)),
            Payload::Notify { kind, data, .. } if kind < 16384 => c.error = c.error.take().or(Some((kind, data))),
            _ => {}
        }
    }
    c
}

fn numbered(proposals: &[crate::proposal::Proposal], protocol: Protocol, spi: &[u8]) -> Vec<WireProposal> {
    proposals
        .iter()
        .enumerate()
        .map(|(i, p)| p.to_wire(u8::try_from(i + 1).unwrap_or(u8::MAX), protocol, spi.to_vec()))
        .collect()
}

/// Why a CREATE_CHILD_SA request is refused: the notify, and for
/// INVALID_KE_PAYLOAD the group wanted.
struct Refusal(u16, Option<DhGroup>);

impl From<u16> for Refusal {
    fn from(kind: u16) -> Refusal {
        Refusal(kind, None)
    }
}

/// The group to retry a rekey with after INVALID_KE_PAYLOAD (`data`: the
/// group the peer wants), or why not: a group we do not support or do not
/// offer, the one we sent already, or a second refusal.
fn retry_group(
    data: &[u8],
    ours: &[proposal::Proposal],
    sent: Option<DhGroup>,
    retried: bool,
) -> Result<DhGroup, String> {
    let Ok(id) = <[u8; 2]>::try_from(data) else {
        return Err(format!("its data is {} bytes, not a DH group number", data.len()));
    };
    let id = u16::from_be_bytes(id);
    let Some(g) = group_from_id(id) else {
        return Err(format!("the peer asks for DH group {id}, which tern does not support"));
    };
    if !offers_group(ours, g) {
        return Err(format!("the peer asks for DH group {id}, which our proposals do not offer"));
    }
    if sent == Some(g) {
        return Err(format!("the peer asks for DH group {id}, the one we sent"));
    }
    if retried {
        return Err(format!("the peer asks for DH group {id} after refusing our retry"));
    }
    Ok(g)
}

fn min_nonce<'a>(a: &'a [u8], b: &'a [u8]) -> &'a [u8] {
    if a <= b { a } else { b }
}

impl Ike {
    /// Starts rekeying child `id`.
    pub(crate) fn start_child_rekey(&mut self, sa: &mut IkeSa, now: Instant, id: u64) {
        self.rekey_child_try(sa, now, id, false);
    }

    /// A child rekey request; `retried`: the one retry after
    /// INVALID_KE_PAYLOAD (with the group asked for in `pfs_group`).
    fn rekey_child_try(&mut self, sa: &mut IkeSa, now: Instant, id: u64, retried: bool) {
        let Some(c) = sa.child(id) else { return };
        if c.rekeying || c.replaced {
            return;
        }
        let (old_spi, local_ts, remote_ts, asked) = (c.spi_in, c.local_ts.to_vec(), c.remote_ts.to_vec(), c.pfs_group);
        let cfg = sa.peer.clone();
        let spi_in = self.alloc_child_spi();
        let ni = self.nonce();
        let mut payloads = vec![
            Payload::Notify {
                protocol: PROTO_ESP,
                spi: old_spi.to_be_bytes().to_vec(),
                kind: notify::REKEY_SA,
                data: Vec::new(),
            },
            Payload::Sa(numbered(&cfg.esp_proposals, Protocol::Esp, &spi_in.to_be_bytes())),
            Payload::Nonce(ni.clone()),
        ];
        let mut dh = None;
        if let Some(group) = asked.or_else(|| first_group(&cfg.esp_proposals)) {
            match DhPrivate::generate(group) {
                Ok((d, public)) => {
                    dh = Some(d);
                    payloads.push(Payload::Ke { group: group_id(group), data: public });
                }
                Err(e) => {
                    log::warn!("ike: peer {}: {e}", sa.who());
                    self.fail("crypto");
                    return;
                }
            }
        }
        payloads.push(Payload::TsI(local_ts));
        payloads.push(Payload::TsR(remote_ts));
        if let Some(c) = sa.child_mut(id) {
            c.rekeying = true;
        }
        self.send_request(
            sa,
            now,
            wire::CREATE_CHILD_SA,
            &payloads,
            Req::RekeyChild { old: id, spi_in, ni, dh, retried },
        );
    }

    /// The answer to our child rekey.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn child_rekey_response(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        old: u64,
        spi_in: u32,
        ni: Vec<u8>,
        dh: Option<DhPrivate>,
        retried: bool,
        payloads: Vec<Payload>,
    ) {
        let who = sa.who();
        if let Some(c) = sa.child_mut(old) {
            c.rekeying = false;
        }
        let p = gather(payloads);
        // INVALID_KE_PAYLOAD (RFC 7296 1.3, 2.7): once again at once with
        // the group asked for, if our ESP proposals offer it.
        if let Some((notify::INVALID_KE_PAYLOAD, data)) = &p.error {
            let sent = dh.as_ref().map(|d| d.group());
            match retry_group(data, &sa.peer.esp_proposals, sent, retried) {
                Ok(g) => {
                    if let Some(c) = sa.child_mut(old) {
                        log::info!("ike: peer {who}: rekeying child SA {old} again with DH group {}", group_id(g));
                        c.pfs_group = Some(g);
                        self.rekey_child_try(sa, now, old, true);
                        return;
                    }
                }
                Err(why) => {
                    log::warn!("ike: peer {who}: INVALID_KE_PAYLOAD answering the rekey of child SA {old}: {why}")
                }
            }
        }
        let result = (|| -> Result<_, &'static str> {
            if let Some((kind, _)) = p.error {
                return Err(notify_reason(kind));
            }
            let (Some(sa_p), Some(nr), Some(tsi), Some(tsr)) = (p.sa, p.nonce, p.tsi, p.tsr) else {
                return Err("invalid-syntax");
            };
            let [wp] = sa_p.as_slice() else { return Err("no-proposal-chosen") };
            let chosen = Chosen::from_wire(wp).map_err(|_| "no-proposal-chosen")?;
            if !chosen.offered_by(&sa.peer.esp_proposals) {
                return Err("no-proposal-chosen");
            }
            let spi_out =
                <[u8; 4]>::try_from(wp.spi.as_slice()).map(u32::from_be_bytes).map_err(|_| "invalid-syntax")?;
            let shared = match (dh, chosen.dh, p.ke) {
                (Some(dh), Some(g), Some((kg, kd))) if dh.group() == g && group_from_id(kg) == Some(g) => {
                    Some(dh.agree(&kd).map_err(|_| "invalid-ke")?)
                }
                (_, None, _) => None,
                _ => return Err("invalid-ke"),
            };
            let keys = sa.keys.as_ref().ok_or("internal")?;
            let (i2r, r2i) =
                child_keys(keys.prf, &keys.sk_d, &chosen, shared.as_deref().map(|s| &s[..]), &ni, &nr, spi_out, spi_in)
                    .map_err(|_| "no-proposal-chosen")?;
            Ok((chosen, spi_out, nr, tsi, tsr, i2r, r2i))
        })();
        let (chosen, spi_out, nr, tsi, tsr, i2r, r2i) = match result {
            Ok(x) => x,
            Err(reason) => {
                log::warn!("ike: peer {who}: child SA rekey failed: {reason}");
                self.fail("rekey-failed");
                if let Some(c) = sa.child_mut(old) {
                    c.rekey_at = Some(now + REKEY_RETRY);
                }
                return;
            }
        };
        let new_id = self.new_id();
        let mut child = new_child(new_id, spi_in, spi_out, chosen, tsi, tsr);
        // The PFS group the peer asked for last time stays the one to use.
        child.pfs_group = sa.child(old).and_then(|c| c.pfs_group);
        self.install_child(sa, now, child, r2i, i2r, true);
        // RFC 7296 2.8.1: with a simultaneous rekey by the peer, the
        // exchange holding the lowest of the four nonces loses and its
        // initiator deletes what it created; the winner deletes the old.
        let mine = RekeyNote { old, new: new_id, min_nonce: min_nonce(&ni, &nr).into(), ours: true };
        let lost = sa.note_rekey(mine.clone()).is_some_and(|theirs| mine.min_nonce < theirs.min_nonce);
        if lost {
            log::info!("ike: peer {who}: simultaneous rekey of child SA {old} lost; deleting ours");
            self.enqueue(sa, now, Start::DeleteChildren(vec![new_id]));
        } else if let Some(c) = sa.child_mut(old) {
            c.replaced = true;
            c.rekey_at = None;
            self.enqueue(sa, now, Start::DeleteChildren(vec![old]));
        }
    }

    /// A CREATE_CHILD_SA request: a child rekey, a new child, or an IKE SA
    /// rekey.
    pub(crate) fn create_child_request(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        mid: u32,
        payloads: Vec<Payload>,
    ) {
        let p = gather(payloads);
        if sa.state != State::Established {
            self.send_response(
                sa,
                wire::CREATE_CHILD_SA,
                mid,
                &[notify(notify::TEMPORARY_FAILURE, Vec::new())],
                local,
                remote,
            );
            return;
        }
        let is_ike = p.sa.as_ref().and_then(|v| v.first()).is_some_and(|w| w.protocol == Protocol::Ike);
        let result = if is_ike {
            self.ike_rekey_request(sa, now, mid, local, remote, p)
        } else {
            self.child_request(sa, now, mid, local, remote, p)
        };
        if let Err(Refusal(kind, group)) = result {
            let data = group.map(|g| group_id(g).to_be_bytes().to_vec()).unwrap_or_default();
            log::warn!("ike: peer {}: CREATE_CHILD_SA refused: {}", sa.who(), notify_reason(kind));
            self.fail(notify_reason(kind));
            self.send_response(sa, wire::CREATE_CHILD_SA, mid, &[notify(kind, data)], local, remote);
        }
    }

    fn child_request(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        mid: u32,
        local: SocketAddr,
        remote: SocketAddr,
        p: ChildPayloads,
    ) -> Result<(), Refusal> {
        let (Some(sa_p), Some(ni), Some(tsi), Some(tsr)) = (p.sa, p.nonce, p.tsi, p.tsr) else {
            return Err(notify::INVALID_SYNTAX.into());
        };
        // The old child: the SPI in REKEY_SA is the peer's inbound, ours out.
        let old = match &p.rekey {
            Some((_, spi)) => {
                let spi =
                    <[u8; 4]>::try_from(spi.as_slice()).map(u32::from_be_bytes).map_err(|_| notify::INVALID_SYNTAX)?;
                Some(sa.children.iter().find(|c| c.spi_out == spi).map(|c| c.id).ok_or(notify::CHILD_SA_NOT_FOUND)?)
            }
            None => None,
        };
        // A child we already replaced or are deleting is not rekeyed again
        // (its replacement, or nothing, is what both sides keep).
        if old.and_then(|id| sa.child(id)).is_some_and(|c| c.replaced) {
            return Err(notify::TEMPORARY_FAILURE.into());
        }
        let cfg = sa.peer.clone();
        let (number, chosen, their_spi) =
            proposal::select(&cfg.esp_proposals, &sa_p, Protocol::Esp).ok_or(notify::NO_PROPOSAL_CHOSEN)?;
        let their_spi =
            <[u8; 4]>::try_from(their_spi.as_slice()).map(u32::from_be_bytes).map_err(|_| notify::INVALID_SYNTAX)?;
        let nr = self.nonce();
        let mut resp_ke = None;
        let shared = match chosen.dh {
            Some(g) => {
                let Some((kg, kd)) = p.ke.filter(|(kg, _)| group_from_id(*kg) == Some(g)) else {
                    return Err(Refusal(notify::INVALID_KE_PAYLOAD, Some(g)));
                };
                let _ = kg;
                let (dh, public) = DhPrivate::generate(g).map_err(|_| notify::TEMPORARY_FAILURE)?;
                resp_ke = Some(Payload::Ke { group: group_id(g), data: public });
                Some(dh.agree(&kd).map_err(|_| notify::INVALID_KE_PAYLOAD)?)
            }
            None => None,
        };
        let remote_cfg = match sa.virtual_ip {
            Some(v) => vec![TrafficSelector::host(v)],
            None => or_any(&cfg.remote_ts),
        };
        let ts_i = narrow(&tsi, &remote_cfg);
        let ts_r = narrow(&tsr, &or_any(&cfg.local_ts));
        if ts_i.is_empty() || ts_r.is_empty() {
            return Err(notify::TS_UNACCEPTABLE.into());
        }
        let spi_in = self.alloc_child_spi();
        let keys = sa.keys.as_ref().ok_or(notify::TEMPORARY_FAILURE)?;
        // The exchange's initiator is the peer: i->r is what we receive.
        let (i2r, r2i) =
            child_keys(keys.prf, &keys.sk_d, &chosen, shared.as_deref().map(|s| &s[..]), &ni, &nr, spi_in, their_spi)
                .map_err(|_| notify::NO_PROPOSAL_CHOSEN)?;
        let mut resp = vec![
            Payload::Sa(vec![chosen.to_wire(number, Protocol::Esp, spi_in.to_be_bytes().to_vec())]),
            Payload::Nonce(nr.clone()),
        ];
        resp.extend(resp_ke);
        resp.push(Payload::TsI(ts_i.clone()));
        resp.push(Payload::TsR(ts_r.clone()));
        // Installed before the answer goes: the peer sends on the new SA
        // as soon as it has the answer (see auth.rs).
        let new_id = self.new_id();
        let child = new_child(new_id, spi_in, their_spi, chosen, ts_r, ts_i);
        self.install_child(sa, now, child, i2r, r2i, old.is_some());
        // Our outbound stays on the old child until the peer deletes it.
        if let Some(crate::Output::InstallChild(c)) = self.out.last_mut() {
            c.replaces = old;
        }
        self.send_response(sa, wire::CREATE_CHILD_SA, mid, &resp, local, remote);
        if let Some(old) = old {
            // The peer deletes the old one. If we rekeyed it too and our
            // exchange is done, the nonces decide now: if ours lost, we
            // delete what we made (if ours is still under way, its answer
            // decides).
            if let Some(c) = sa.child_mut(old) {
                c.rekey_at = None;
            }
            let theirs = RekeyNote { old, new: new_id, min_nonce: min_nonce(&ni, &nr).into(), ours: false };
            if let Some(mine) = sa.note_rekey(theirs.clone())
                && mine.min_nonce < theirs.min_nonce
                && sa.child(mine.new).is_some()
            {
                log::info!("ike: peer {}: simultaneous rekey of child SA {old} lost; deleting ours", sa.who());
                self.enqueue(sa, now, Start::DeleteChildren(vec![mine.new]));
            }
        }
        Ok(())
    }

    /// Starts rekeying the IKE SA.
    pub(crate) fn start_ike_rekey(&mut self, sa: &mut IkeSa, now: Instant) {
        // The group this IKE SA agreed on first (the peer took it once).
        let Some(group) = sa.chosen.and_then(|c| c.dh).or_else(|| first_group(&sa.peer.proposals)) else { return };
        self.rekey_ike_try(sa, now, group, false);
    }

    /// An IKE SA rekey request with a KE of `group`; `retried`: the one
    /// retry after INVALID_KE_PAYLOAD.
    fn rekey_ike_try(&mut self, sa: &mut IkeSa, now: Instant, group: DhGroup, retried: bool) {
        let cfg = sa.peer.clone();
        let (dh, public) = match DhPrivate::generate(group) {
            Ok(x) => x,
            Err(e) => {
                log::warn!("ike: peer {}: {e}", sa.who());
                self.fail("crypto");
                return;
            }
        };
        let spi = self.alloc_ike_spi();
        let ni = self.nonce();
        let payloads = [
            Payload::Sa(numbered(&cfg.proposals, Protocol::Ike, &spi.to_be_bytes())),
            Payload::Nonce(ni.clone()),
            Payload::Ke { group: group_id(group), data: public },
        ];
        self.send_request(sa, now, wire::CREATE_CHILD_SA, &payloads, Req::RekeyIke { spi, ni, dh: Some(dh), retried });
    }

    /// The answer to our IKE SA rekey: the new SA takes over.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ike_rekey_response(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        spi: u64,
        ni: Vec<u8>,
        dh: Option<DhPrivate>,
        retried: bool,
        payloads: Vec<Payload>,
    ) {
        let who = sa.who();
        let p = gather(payloads);
        // INVALID_KE_PAYLOAD (RFC 7296 1.3, 2.7): once again at once with
        // the group asked for, if our IKE proposals offer it.
        if let Some((notify::INVALID_KE_PAYLOAD, data)) = &p.error {
            let sent = dh.as_ref().map(|d| d.group());
            match retry_group(data, &sa.peer.proposals, sent, retried) {
                Ok(g) => {
                    log::info!("ike: peer {who}: rekeying the IKE SA again with DH group {}", group_id(g));
                    self.rekey_ike_try(sa, now, g, true);
                    return;
                }
                Err(why) => log::warn!("ike: peer {who}: INVALID_KE_PAYLOAD answering the IKE SA rekey: {why}"),
            }
        }
        let result = (|| -> Result<_, &'static str> {
            if let Some((kind, _)) = p.error {
                return Err(notify_reason(kind));
            }
            let (Some(sa_p), Some(nr), Some((kg, kd)), Some(dh)) = (p.sa, p.nonce, p.ke, dh) else {
                return Err("invalid-syntax");
            };
            let [wp] = sa_p.as_slice() else { return Err("no-proposal-chosen") };
            let chosen = Chosen::from_wire(wp).map_err(|_| "no-proposal-chosen")?;
            if !chosen.offered_by(&sa.peer.proposals) || chosen.dh != Some(dh.group()) || group_from_id(kg) != chosen.dh
            {
                return Err("no-proposal-chosen");
            }
            let their = <[u8; 8]>::try_from(wp.spi.as_slice()).map(u64::from_be_bytes).map_err(|_| "invalid-syntax")?;
            if their == 0 {
                return Err("invalid-syntax");
            }
            let shared = dh.agree(&kd).map_err(|_| "invalid-ke")?;
            let old = sa.keys.as_ref().ok_or("internal")?;
            let keys = IkeKeys::derive_rekey(&old.sk_d, old.prf, &chosen, &shared, &ni, &nr, spi, their)
                .map_err(|_| "no-proposal-chosen")?;
            Ok((chosen, keys, their, nr))
        })();
        match result {
            Ok((chosen, keys, their, nr)) => {
                let collision = self.rekey_collisions.remove(&sa.our_spi());
                let mut new = self.take_over(sa, now, true, spi, their, chosen, keys);
                match collision {
                    None => {
                        log::info!("ike: peer {who}: IKE SA {} rekeyed", new.id);
                        self.put_back(new, now);
                        // The initiator of the rekey deletes the old SA.
                        self.send_delete_ike(sa, now);
                    }
                    // RFC 7296 2.8.2: the peer rekeyed it too. The exchange
                    // with the lowest nonce loses: its initiator deletes the
                    // SA it made, the winner's initiator deletes the old one.
                    Some((theirs_spi, their_min)) if min_nonce(&ni, &nr) < &their_min[..] => {
                        log::info!("ike: peer {who}: simultaneous IKE SA rekey lost; deleting ours");
                        self.stats.rekeys_ike -= 1;
                        new.id = self.new_id();
                        new.announced_down = true;
                        let _ = theirs_spi;
                        self.send_delete_ike(&mut new, now);
                        self.put_back(new, now);
                    }
                    Some((theirs_spi, _)) => {
                        log::info!("ike: peer {who}: simultaneous IKE SA rekey won");
                        if let Some(mut other) = self.sas.remove(&theirs_spi) {
                            new.id = other.id;
                            new.children.extend(std::mem::take(&mut other.children));
                            new.virtual_ip = other.virtual_ip.take();
                            new.counted_established = std::mem::take(&mut other.counted_established);
                            new.queue = std::mem::take(&mut other.queue);
                            other.id = self.new_id();
                            other.announced_down = true;
                            // Its initiator (the peer) deletes it.
                            other.state = State::Deleting;
                            other.expire_at = Some(now + self.settings.half_open_timeout);
                            let ours = new.our_spi();
                            for c in &new.children {
                                self.index_child(c.spi_in, ours);
                            }
                            self.stats.rekeys_ike -= 1;
                            self.put_back(other, now);
                        }
                        self.put_back(new, now);
                        self.send_delete_ike(sa, now);
                    }
                }
            }
            Err(reason) => {
                log::warn!("ike: peer {who}: IKE SA rekey failed: {reason}");
                self.fail("rekey-failed");
                sa.rekey_at = Some(now + REKEY_RETRY);
            }
        }
    }

    fn ike_rekey_request(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        mid: u32,
        local: SocketAddr,
        remote: SocketAddr,
        p: ChildPayloads,
    ) -> Result<(), Refusal> {
        // RFC 7296 2.25: our own request on this SA (other than a rekey of
        // it, a collision settled by nonces) must finish on it first, or
        // what it changes would land on an SA that is going.
        if sa.pending.as_ref().is_some_and(|p| !matches!(p.req, Req::RekeyIke { .. })) {
            return Err(notify::TEMPORARY_FAILURE.into());
        }
        let (Some(sa_p), Some(ni), Some((kg, kd))) = (p.sa, p.nonce, p.ke) else {
            return Err(notify::INVALID_SYNTAX.into());
        };
        let cfg = sa.peer.clone();
        let (number, chosen, their) =
            proposal::select(&cfg.proposals, &sa_p, Protocol::Ike).ok_or(notify::NO_PROPOSAL_CHOSEN)?;
        let g = chosen.dh.ok_or(notify::NO_PROPOSAL_CHOSEN)?;
        if group_from_id(kg) != Some(g) {
            return Err(Refusal(notify::INVALID_KE_PAYLOAD, Some(g)));
        }
        let their =
            <[u8; 8]>::try_from(their.as_slice()).map(u64::from_be_bytes).map_err(|_| notify::INVALID_SYNTAX)?;
        if their == 0 {
            return Err(notify::INVALID_SYNTAX.into());
        }
        let (dh, public) = DhPrivate::generate(g).map_err(|_| notify::TEMPORARY_FAILURE)?;
        let shared = dh.agree(&kd).map_err(|_| notify::INVALID_KE_PAYLOAD)?;
        let spi = self.alloc_ike_spi();
        let nr = self.nonce();
        let old = sa.keys.as_ref().ok_or(notify::TEMPORARY_FAILURE)?;
        let keys = IkeKeys::derive_rekey(&old.sk_d, old.prf, &chosen, &shared, &ni, &nr, their, spi)
            .map_err(|_| notify::NO_PROPOSAL_CHOSEN)?;
        let nr_copy = nr.clone();
        let resp = [
            Payload::Sa(vec![chosen.to_wire(number, Protocol::Ike, spi.to_be_bytes().to_vec())]),
            Payload::Nonce(nr),
            Payload::Ke { group: group_id(g), data: public },
        ];
        self.send_response(sa, wire::CREATE_CHILD_SA, mid, &resp, local, remote);
        // Our own rekey of this SA is under way: a collision (2.8.2), decided
        // when our answer comes.
        if sa.pending.as_ref().is_some_and(|p| matches!(p.req, Req::RekeyIke { .. })) {
            let min = min_nonce(&ni, &nr_copy).to_vec().into_boxed_slice();
            self.rekey_collisions.insert(sa.our_spi(), (spi, min));
        }
        let new = self.take_over(sa, now, false, their, spi, chosen, keys);
        log::info!("ike: peer {}: IKE SA {} rekeyed by the peer", sa.who(), new.id);
        self.put_back(new, now);
        // The peer deletes the old SA; if it never does, it goes anyway.
        sa.state = State::Deleting;
        sa.expire_at = Some(now + self.settings.half_open_timeout);
        Ok(())
    }

    /// A new IKE SA (2.18) takes over the old one's handle, children and
    /// state; the old one keeps a fresh internal id and goes silently.
    #[allow(clippy::too_many_arguments)]
    fn take_over(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        initiator: bool,
        spi_i: u64,
        spi_r: u64,
        chosen: Chosen,
        keys: IkeKeys,
    ) -> Box<IkeSa> {
        let mut new = Box::new(IkeSa::new(sa.id, sa.peer.clone(), initiator, sa.local, sa.remote, now));
        new.spi_i = spi_i;
        new.spi_r = spi_r;
        new.state = State::Established;
        new.chosen = Some(chosen);
        new.keys = Some(keys);
        new.children = std::mem::take(&mut sa.children);
        new.rekey_notes = std::mem::take(&mut sa.rekey_notes);
        new.remote_id = sa.remote_id.clone();
        new.virtual_ip = sa.virtual_ip.take();
        new.nat_local = sa.nat_local;
        new.nat_remote = sa.nat_remote;
        new.frag = sa.frag;
        new.established_at = sa.established_at;
        new.last_rx = now;
        new.dpd_at = sa.peer.dpd.map(|d| now + d);
        new.rekey_at = jitter(self, now, sa.peer.ike_rekey);
        new.counted_established = std::mem::take(&mut sa.counted_established);
        new.announced_up = true;
        // The old SA's queued work moves with the children.
        new.queue = std::mem::take(&mut sa.queue).into_iter().filter(|s| *s != Start::RekeyIke).collect();
        let our = new.our_spi();
        for c in &new.children {
            self.index_child(c.spi_in, our);
        }
        sa.id = self.new_id();
        sa.announced_down = true;
        self.stats.rekeys_ike += 1;
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Identity, PeerConfig, Settings};
    use crate::output::Output;
    use crate::proposal::Proposal;
    use std::net::IpAddr;
    use std::sync::Arc;

    fn ike(s: &str) -> Proposal {
        Proposal::parse(s, Protocol::Ike).unwrap()
    }

    #[test]
    fn retry_groups_are_offered_new_and_once() {
        let ours = [ike("aes128gcm16-prfsha256-x25519-ecp256")];
        let x = Some(DhGroup::Curve25519);
        assert_eq!(retry_group(&19u16.to_be_bytes(), &ours, x, false), Ok(DhGroup::Ecp256));
        let e = retry_group(&20u16.to_be_bytes(), &ours, x, false).unwrap_err();
        assert!(e.contains("group 20, which our proposals do not offer"), "{e}");
        let e = retry_group(&2u16.to_be_bytes(), &ours, x, false).unwrap_err();
        assert!(e.contains("group 2, which tern does not support"), "{e}");
        let e = retry_group(&31u16.to_be_bytes(), &ours, x, false).unwrap_err();
        assert!(e.contains("the one we sent"), "{e}");
        let e = retry_group(&19u16.to_be_bytes(), &ours, x, true).unwrap_err();
        assert!(e.contains("after refusing our retry"), "{e}");
        assert!(retry_group(&[0, 19, 0], &ours, x, false).unwrap_err().contains("3 bytes"));
    }

    /// An INVALID_KE answer to our IKE rekey asking for a group we do not
    /// offer fails the rekey (counted, tried again later), sends nothing.
    #[test]
    fn ike_rekey_refused_for_a_group_not_offered_fails_without_retry() {
        let cfg = PeerConfig {
            remote: Some(IpAddr::from([10, 0, 0, 2])),
            local_id: Identity::Fqdn("a".into()),
            proposals: vec![ike("aes128gcm16-prfsha256-x25519")],
            ..PeerConfig::psk_for_tests("peer", IpAddr::from([10, 0, 0, 1]))
        };
        let now = Instant::now();
        let mut engine = Ike::new(Settings::default());
        let (a, b) = ("10.0.0.1:500".parse().unwrap(), "10.0.0.2:500".parse().unwrap());
        let mut sa = IkeSa::new(1, Arc::new(cfg), true, a, b, now);
        sa.state = State::Established;
        // Not offered; the group we sent; a second refusal.
        let cases =
            [(20u16, DhGroup::Curve25519, false), (31, DhGroup::Curve25519, false), (31, DhGroup::Ecp256, true)];
        for (group, sent, retried) in cases {
            let (dh, _) = DhPrivate::generate(sent).unwrap();
            let refusal = Payload::Notify {
                protocol: 0,
                spi: vec![],
                kind: notify::INVALID_KE_PAYLOAD,
                data: group.to_be_bytes().to_vec(),
            };
            sa.rekey_at = None;
            engine.ike_rekey_response(&mut sa, now, 7, vec![1; 32], Some(dh), retried, vec![refusal]);
            assert!(sa.pending.is_none(), "no new request for group {group}");
            assert_eq!(sa.rekey_at, Some(now + REKEY_RETRY));
            assert!(engine.drain().all(|o| !matches!(o, Output::Send { .. })));
        }
        let failed = engine.stats().failures.iter().find(|f| f.0 == "rekey-failed").map(|f| f.1);
        assert_eq!(failed, Some(3));
    }
}
