//! `ike_sa_show`, `ike_peer_show`, `ike_initiate`, `ike_terminate`: the IKE
//! service (`crate::ike`) through the API. Answers never carry keys.

use crate::api::ApiError;
use crate::api::types::{IkeChildView, IkePeerView, IkeSaView};
use crate::router::Router;
use tern_ike::AuthConfig;

/// Every IKE SA, by id, with its child SAs and their data-plane SA ids.
pub fn ike_sa_show(router: &Router) -> Vec<IkeSaView> {
    router
        .ike()
        .sas()
        .into_iter()
        .map(|i| IkeSaView {
            id: i.id,
            peer: i.peer.clone(),
            local: i.local.to_string(),
            remote: i.remote.to_string(),
            spi_i: format!("{:016x}", i.spi_i),
            spi_r: format!("{:016x}", i.spi_r),
            initiator: i.initiator,
            state: i.state.to_string(),
            proposal: i.proposal.clone(),
            remote_id: i.remote_id.clone(),
            established_secs: i.established_secs,
            nat: i.nat,
            children: i
                .children
                .iter()
                .map(|&(id, spi_in, spi_out, ref proposal)| {
                    let ids = router.ike().sa_ids(&i.peer, spi_in);
                    IkeChildView {
                        id,
                        spi_in,
                        spi_out,
                        proposal: proposal.clone(),
                        sa_in: ids.map(|x| x.0),
                        sa_out: ids.map(|x| x.1),
                        virtual_ip: router.ike().virtual_ip(&i.peer, spi_in).map(|ip| ip.to_string()),
                    }
                })
                .collect(),
        })
        .collect()
}

/// The configured peers and how many SAs each has.
pub fn ike_peer_show(router: &Router) -> Vec<IkePeerView> {
    let sas = router.ike().sas();
    let children = router.ike().children();
    router
        .plan()
        .ike
        .peers
        .iter()
        .map(|p| {
            let c = &p.source;
            let mine = sas.iter().filter(|s| s.peer == c.name);
            IkePeerView {
                name: c.name.clone(),
                local: c.local.clone(),
                remote: c.remote.clone(),
                local_id: p.peer.local_id.to_string(),
                remote_id: p.peer.remote_id.as_ref().map(|i| i.to_string()),
                auth: match p.peer.auth {
                    AuthConfig::Psk(_) => "psk".into(),
                    AuthConfig::Pubkey(_) => "pubkey".into(),
                },
                proposals: c.proposals.clone(),
                esp_proposals: c.esp_proposals.clone(),
                tunnel: c.tunnel.clone(),
                start: p.peer.start,
                encap: c.encap,
                ike_sas: mine.clone().filter(|s| s.state == "established" || s.state == "rekeying").count(),
                connecting: mine.filter(|s| s.state == "connecting").count(),
                child_sas: children.iter().filter(|ch| ch.0 == c.name).count(),
            }
        })
        .collect()
}

fn known(router: &Router, peer: &str) -> Result<(), ApiError> {
    if router.plan().ike.peers.iter().any(|p| p.peer.name == peer) {
        Ok(())
    } else {
        Err(ApiError::not_found(format!("no [[ike]] peer named {}", crate::config::quote(peer))))
    }
}

pub fn ike_initiate(router: &Router, peer: &str) -> Result<String, ApiError> {
    known(router, peer)?;
    let id = router.ike().initiate(peer).map_err(ApiError::refused)?;
    Ok(format!("IKE SA {id} with {peer} initiating"))
}

pub fn ike_terminate(router: &Router, peer: &str, id: Option<u64>) -> Result<String, ApiError> {
    known(router, peer)?;
    let n = router.ike().terminate(peer, id).map_err(ApiError::not_found)?;
    Ok(format!("{n} IKE SA(s) of {peer} deleting"))
}
