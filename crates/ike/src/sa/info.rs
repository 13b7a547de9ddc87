//! INFORMATIONAL (RFC 7296 1.4): deleting child SAs and the IKE SA, both
//! ways; liveness checks (an empty request after `dpd` of silence; no
//! answer after the retransmissions: the peer is dead); error notifies.

use super::init::notify_reason;
use super::{IkeSa, Req, State};
use crate::ike::Ike;
use crate::output::Output;
use crate::wire::{self, Payload, notify};
use std::net::SocketAddr;
use std::time::Instant;

/// Delete payload protocol IDs.
pub(crate) const PROTO_IKE: u8 = 1;
pub(crate) const PROTO_ESP: u8 = 3;

impl Ike {
    pub(crate) fn send_dpd(&mut self, sa: &mut IkeSa, now: Instant) {
        self.stats.dpd_sent += 1;
        self.send_request(sa, now, wire::INFORMATIONAL, &[], Req::Dpd);
    }

    pub(crate) fn send_delete_ike(&mut self, sa: &mut IkeSa, now: Instant) {
        self.send_request(
            sa,
            now,
            wire::INFORMATIONAL,
            &[Payload::Delete { protocol: PROTO_IKE, spis: Vec::new() }],
            Req::DeleteIke,
        );
        sa.state = State::Deleting;
    }

    pub(crate) fn send_delete_children(&mut self, sa: &mut IkeSa, now: Instant, ids: Vec<u64>) {
        let spis: Vec<u32> = sa.children.iter().filter(|c| ids.contains(&c.id)).map(|c| c.spi_in).collect();
        if spis.is_empty() {
            return;
        }
        self.send_request(
            sa,
            now,
            wire::INFORMATIONAL,
            &[Payload::Delete { protocol: PROTO_ESP, spis }],
            Req::DeleteChildren(ids),
        );
    }

    /// Deletes an IKE SA (API, configuration change): a delete request if it
    /// is up, else it just goes.
    pub(crate) fn delete_ike(&mut self, sa: &mut IkeSa, now: Instant, reason: &str) {
        match sa.state {
            State::Established => {
                log::info!("ike: peer {}: deleting IKE SA {}: {reason}", sa.who(), sa.id);
                if sa.pending.is_some() {
                    // Do not wait behind a rekey or check: the delete goes
                    // next and the outstanding exchange is abandoned.
                    sa.pending = None;
                    sa.queue.clear();
                }
                self.send_delete_ike(sa, now);
            }
            State::Deleting | State::Dead => {}
            _ => self.sa_down(sa, reason, false),
        }
    }

    /// Our delete of child SAs was answered: they go.
    pub(crate) fn children_deleted(&mut self, sa: &mut IkeSa, now: Instant, ids: &[u64]) {
        let (gone, keep): (Vec<_>, Vec<_>) =
            std::mem::take(&mut sa.children).into_iter().partition(|c| ids.contains(&c.id));
        sa.children = keep;
        for c in gone {
            self.child_index.remove(&c.spi_in);
            // Routine (every child rekey ends in one): through the event log.
            if log::log_enabled!(log::Level::Info) && self.event_log.allow(now, crate::eventlog::Routine::ChildDown) {
                log::info!("ike: peer {}: child SA {} deleted", sa.who(), c.id);
            }
            self.out.push(Output::DeleteChild {
                peer: sa.peer.name.clone(),
                id: c.id,
                inbound_spi: c.spi_in,
                outbound_spi: c.spi_out,
            });
        }
    }

    /// RFC 7296 2.8.2: the peer deletes the IKE SA it made by rekeying ours
    /// while our own rekey of it is still unanswered: its rekey lost, and
    /// ours will take over. The SA's handle and children go back to the
    /// old SA (live again until our answer comes) instead of going down.
    fn collision_loser_deleted(&mut self, sa: &mut IkeSa) -> bool {
        let ours = sa.our_spi();
        let Some(old_spi) = self.rekey_collisions.iter().find(|(_, (s, _))| *s == ours).map(|(o, _)| *o) else {
            return false;
        };
        let Some(old) = self.sas.get_mut(&old_spi) else { return false };
        let prev = old.id;
        old.id = sa.id;
        old.children = std::mem::take(&mut sa.children);
        old.virtual_ip = sa.virtual_ip.take();
        old.counted_established = std::mem::take(&mut sa.counted_established);
        old.queue = std::mem::take(&mut sa.queue);
        old.state = State::Established;
        old.expire_at = None;
        old.announced_down = false;
        let spis: Vec<u32> = old.children.iter().map(|c| c.spi_in).collect();
        for spi in spis {
            self.index_child(spi, old_spi);
        }
        self.reindex(old_spi, prev);
        self.recount_in_table(old_spi);
        sa.id = self.new_id();
        sa.announced_down = true;
        log::info!("ike: peer {}: the peer's simultaneous IKE SA rekey lost; ours goes on", sa.who());
        true
    }

    /// An INFORMATIONAL request from the peer.
    pub(crate) fn informational(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        mid: u32,
        payloads: Vec<Payload>,
    ) {
        let mut delete_ike = false;
        let mut gone = Vec::new();
        let mut gone_quietly = Vec::new();
        for p in payloads {
            match p {
                Payload::Delete { protocol: PROTO_IKE, .. } => delete_ike = true,
                Payload::Delete { protocol: PROTO_ESP, spis } => {
                    for spi in spis {
                        if let Some(c) = sa.children.iter().find(|c| c.spi_out == spi) {
                            gone.push(c.id);
                        }
                    }
                }
                // RFC 7296 3.10.1: ESP arrived for an SPI the peer does not
                // know; the child is of no use any more.
                Payload::Notify { kind: notify::INVALID_SPI, spi, data, .. } => {
                    let bytes = if spi.len() == 4 { spi } else { data };
                    let spi = <[u8; 4]>::try_from(bytes.as_slice()).map(u32::from_be_bytes).ok();
                    log::warn!("ike: peer {}: INVALID_SPI {spi:08x?}", sa.who());
                    self.fail("invalid-spi");
                    if let Some(c) = spi.and_then(|s| sa.children.iter().find(|c| c.spi_out == s)) {
                        gone_quietly.push(c.id);
                    }
                }
                Payload::Notify { kind, .. } if kind < 16384 => {
                    log::warn!("ike: peer {}: error notify {} ({kind})", sa.who(), notify_reason(kind));
                    self.fail(notify_reason(kind));
                }
                _ => {}
            }
        }
        if delete_ike {
            self.send_response(sa, wire::INFORMATIONAL, mid, &[], local, remote);
            if self.collision_loser_deleted(sa) {
                self.sa_down(sa, "deleted by peer", false);
                return;
            }
            log::info!("ike: peer {}: the peer deleted IKE SA {}", sa.who(), sa.id);
            self.sa_down(sa, "deleted by peer", false);
            return;
        }
        let ours: Vec<u32> = sa.children.iter().filter(|c| gone.contains(&c.id)).map(|c| c.spi_in).collect();
        // A child we are rekeying or deleting ourselves is answered too
        // (RFC 7296 1.4.1: both sides then delete it).
        let resp = if ours.is_empty() { Vec::new() } else { vec![Payload::Delete { protocol: PROTO_ESP, spis: ours }] };
        self.send_response(sa, wire::INFORMATIONAL, mid, &resp, local, remote);
        gone.extend(gone_quietly);
        self.children_deleted(sa, now, &gone);
    }
}
