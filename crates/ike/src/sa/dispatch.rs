//! A message for an existing IKE SA: responses continue the outstanding
//! request; requests are checked against the message-ID window (size 1:
//! the one expected is processed, the previous one gets the cached
//! response again, anything else is dropped) and then handled.

use super::frame::Opened;
use super::{IkeSa, Req, Start, State};
use crate::ike::Ike;
use crate::wire::{self, FLAG_RESPONSE, Header, Message, Payload};
use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

impl Ike {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dispatch(
        &mut self,
        sa: &mut IkeSa,
        now: Instant,
        wall: SystemTime,
        local: SocketAddr,
        remote: SocketAddr,
        header: Header,
        data: &[u8],
    ) {
        let msg = match Message::decode(data) {
            Ok(m) => m,
            Err(e) => {
                log::debug!("ike: peer {}: undecodable message: {e}", sa.who());
                self.drop_invalid("invalid-syntax");
                return;
            }
        };
        if header.flags & FLAG_RESPONSE != 0 {
            let expected =
                sa.pending.as_ref().is_some_and(|p| p.mid == header.message_id && p.exchange == header.exchange);
            if !expected {
                self.drop_invalid("unexpected-response");
                return;
            }
            if header.exchange == wire::IKE_SA_INIT {
                self.initiator_init_response(sa, now, msg, data);
                return;
            }
            let payloads = match self.open(sa, now, data, msg) {
                Opened::Payloads(p) => p,
                Opened::Partial => return,
                Opened::Failed(reason) => {
                    log::debug!("ike: peer {}: response dropped: {reason}", sa.who());
                    self.drop_invalid(reason);
                    return;
                }
            };
            sa.last_rx = now;
            let Some(pending) = sa.pending.take() else { return };
            match pending.req {
                Req::Init => {}
                Req::Auth => self.initiator_auth_response(sa, now, wall, payloads),
                Req::Dpd => {}
                Req::DeleteIke => self.sa_down(sa, "deleted", false),
                Req::DeleteChildren(ids) => self.children_deleted(sa, now, &ids),
                Req::RekeyChild { old, spi_in, ni, dh, retried } => {
                    self.child_rekey_response(sa, now, old, spi_in, ni, dh, retried, payloads)
                }
                Req::RekeyIke { spi, ni, dh, retried } => {
                    self.ike_rekey_response(sa, now, spi, ni, dh, retried, payloads)
                }
            }
            return;
        }
        let mid = header.message_id;
        let fragment = match msg.payloads.last() {
            Some(Payload::Skf { number, .. }) => Some(*number),
            _ => None,
        };
        if sa.recv_mid != 0 && mid == sa.recv_mid.wrapping_sub(1) {
            self.resend_response(sa, mid, fragment);
            return;
        }
        if mid != sa.recv_mid || header.exchange == wire::IKE_SA_INIT {
            self.drop_invalid("invalid-message-id");
            return;
        }
        let payloads = match self.open(sa, now, data, msg) {
            Opened::Payloads(p) => p,
            Opened::Partial => return,
            Opened::Failed(reason) => {
                log::debug!("ike: peer {}: request dropped: {reason}", sa.who());
                self.drop_invalid(reason);
                return;
            }
        };
        sa.recv_mid = sa.recv_mid.wrapping_add(1);
        sa.last_rx = now;
        // RFC 7296 2.23: a peer behind a NAT is answered, and its SA's
        // requests sent, where its authenticated requests come from (its
        // NAT's mapping may change).
        let moved_from = (sa.nat_remote && sa.state == State::Established && sa.remote != remote).then(|| {
            let from = sa.remote;
            self.moved(sa, remote);
            sa.local = local;
            // The children installed with the old address and ports.
            (from, sa.children.iter().map(|c| c.id).collect::<Vec<u64>>())
        });
        match header.exchange {
            wire::IKE_AUTH => self.responder_auth(sa, now, wall, local, remote, mid, payloads),
            wire::INFORMATIONAL => self.informational(sa, now, local, remote, mid, payloads),
            wire::CREATE_CHILD_SA => self.create_child_request(sa, now, local, remote, mid, payloads),
            other => {
                log::debug!("ike: peer {}: exchange {other} not supported", sa.who());
                self.drop_invalid("unsupported-exchange");
            }
        }
        if let Some((from, ids)) = moved_from {
            self.children_follow(sa, now, from, &ids);
        }
    }
}

impl Ike {
    /// Authenticated ESP in UDP on child SA `inbound_spi` (the data plane
    /// saw it after its ICV verified and the anti-replay window took it)
    /// came from `remote`, not from where the IKE SA has the peer.
    ///
    /// RFC 7296 2.23: the side not behind a NAT sends to where the peer's
    /// last authenticated packet came from; RFC 3948's ESP in UDP leaves
    /// the peer's port 4500 through the same NAT mapping as its IKE, so
    /// its authenticated ESP says as much as an IKE message would. As
    /// strongSwan and Linux do with ESP-in-UDP mapping changes, only a
    /// peer behind a NAT is followed (not when only this side is behind
    /// one, nor without a NAT): the IKE SA moves there at once and its
    /// child SAs are rekeyed to follow ([`Ike::children_follow`]), so
    /// tern's outbound ESP reaches the new mapping without waiting for
    /// the peer's next IKE request. Returns whether the IKE SA moved.
    pub fn esp_moved(&mut self, now: Instant, inbound_spi: u32, remote: SocketAddr) -> bool {
        let Some(spi) = self.child_index.get(&inbound_spi).map(|s| s.get()) else {
            log::debug!("ike: ESP of child SA {inbound_spi:#010x} from {remote}, which is unknown");
            return false;
        };
        let mut moved = false;
        self.with_sa(spi, now, |ike, sa| {
            if sa.state != State::Established || sa.remote == remote || sa.remote.is_ipv4() != remote.is_ipv4() {
                return;
            }
            if !sa.nat_remote {
                log::debug!(
                    "ike: peer {}: ESP of child SA {inbound_spi:#010x} from {remote}: not followed, the peer is not behind a NAT",
                    sa.who()
                );
                return;
            }
            let from = sa.remote;
            log::info!(
                "ike: peer {}: authenticated ESP of child SA {inbound_spi:#010x} from {remote}: its NAT's mapping changed",
                sa.who()
            );
            ike.moved(sa, remote);
            ike.stats.esp_moves += 1;
            let ids: Vec<u64> = sa.children.iter().map(|c| c.id).collect();
            ike.children_follow(sa, now, from, &ids);
            moved = true;
        });
        moved
    }

    /// The peer moved (its NAT's mapping changed): the installed child SAs
    /// carry the old address and UDP ports, which the data plane's SAs
    /// hold fixed (and an outbound SA's sequence numbers must never be
    /// reused by a copy of it). Each child is rekeyed: the new SAs are
    /// installed with the new address and ports (and the tunnel's remote
    /// follows, see the control side), the old ones deleted, as any rekey
    /// (no packet of the new mapping lost once installed).
    /// Not the ones the peer's own request rekeyed or deleted (its new
    /// ones have the new address already).
    fn children_follow(&mut self, sa: &mut IkeSa, now: Instant, from: SocketAddr, before: &[u64]) {
        if sa.state != State::Established {
            return;
        }
        let ids: Vec<u64> = sa
            .children
            .iter()
            .filter(|c| before.contains(&c.id) && !c.rekeying && !c.replaced)
            .filter(|c| !sa.rekey_notes.iter().any(|n| n.old == c.id))
            .map(|c| c.id)
            .collect();
        log::info!(
            "ike: peer {}: moved from {from} (its NAT mapping changed): rekeying {} child SA(s) to follow",
            sa.who(),
            ids.len()
        );
        self.stats.nat_moves += 1;
        for id in ids {
            self.enqueue(sa, now, Start::RekeyChild(id));
        }
    }
}
