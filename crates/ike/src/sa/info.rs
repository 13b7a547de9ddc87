//! INFORMATIONAL (RFC 7296 1.4): deleting child SAs and the IKE SA, both
//! ways; liveness checks (an empty request after `dpd` of silence; no
//! answer after the retransmissions: the peer is dead); error notifies.

use super::init::notify_reason;
use super::{IkeSa, Req, State};
use crate::ike::Ike;
use crate::output::Output;
use crate::wire::{self, Payload};
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
    pub(crate) fn children_deleted(&mut self, sa: &mut IkeSa, ids: &[u64]) {
        let (gone, keep): (Vec<_>, Vec<_>) =
            std::mem::take(&mut sa.children).into_iter().partition(|c| ids.contains(&c.id));
        sa.children = keep;
        for c in gone {
            self.child_index.remove(&c.spi_in);
            log::info!("ike: peer {}: child SA {} deleted", sa.who(), c.id);
            self.out.push(Output::DeleteChild {
                peer: sa.peer.name.clone(),
                id: c.id,
                inbound_spi: c.spi_in,
                outbound_spi: c.spi_out,
            });
        }
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
        let _ = now;
        let mut delete_ike = false;
        let mut gone = Vec::new();
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
                Payload::Notify { kind, .. } if kind < 16384 => {
                    log::warn!("ike: peer {}: error notify {} ({kind})", sa.who(), notify_reason(kind));
                    self.fail(notify_reason(kind));
                }
                _ => {}
            }
        }
        if delete_ike {
            self.send_response(sa, wire::INFORMATIONAL, mid, &[], local, remote);
            log::info!("ike: peer {}: the peer deleted IKE SA {}", sa.who(), sa.id);
            self.sa_down(sa, "deleted by peer", false);
            return;
        }
        let ours: Vec<u32> = sa.children.iter().filter(|c| gone.contains(&c.id)).map(|c| c.spi_in).collect();
        // A child we are rekeying or deleting ourselves is answered too
        // (RFC 7296 1.4.1: both sides then delete it).
        let resp = if ours.is_empty() { Vec::new() } else { vec![Payload::Delete { protocol: PROTO_ESP, spis: ours }] };
        self.send_response(sa, wire::INFORMATIONAL, mid, &resp, local, remote);
        self.children_deleted(sa, &gone);
    }
}
