//! `ike_sa_show`, `ike_peer_show`, `ike_initiate`, `ike_terminate`: the IKE
//! service (`crate::ike`) through the API. Answers never carry keys.

use crate::api::types::{IkeChildView, IkePeerView, IkeSaView};
use crate::api::{ApiError, IkeSaShowArgs};
use crate::router::Router;
use std::collections::HashMap;
use tern_ike::AuthConfig;

/// Every IKE SA, by id, with its child SAs and their data-plane SA ids,
/// or the page after `a.after` of at most `a.limit`: linear in the SAs
/// (the children are looked up in one index; a page's views only are
/// made).
pub fn ike_sa_show(router: &Router, a: &IkeSaShowArgs) -> Vec<IkeSaView> {
    let ike = router.ike();
    let children = ike.child_index();
    ike.sas()
        .into_iter()
        .filter(|i| a.after.is_none_or(|after| i.id > after))
        .take(a.limit.unwrap_or(usize::MAX))
        .map(|i| IkeSaView {
            id: i.id,
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
                    let c = children.get(&(i.peer.as_str(), spi_in));
                    IkeChildView {
                        id,
                        spi_in,
                        spi_out,
                        proposal: proposal.clone(),
                        sa_in: c.map(|x| x.0),
                        sa_out: c.map(|x| x.1),
                        virtual_ip: c.and_then(|x| x.2).map(|ip| ip.to_string()),
                    }
                })
                .collect(),
            peer: i.peer,
        })
        .collect()
}

/// The configured peers and how many SAs each has (one walk of the SAs
/// and of the children, not one per peer).
pub fn ike_peer_show(router: &Router) -> Vec<IkePeerView> {
    // Per peer: (established or rekeying, connecting, child SAs).
    let mut counts: HashMap<String, (usize, usize, usize)> = HashMap::new();
    for s in router.ike().sas() {
        let e = counts.entry(s.peer).or_default();
        match s.state {
            "established" | "rekeying" => e.0 += 1,
            "connecting" => e.1 += 1,
            _ => {}
        }
    }
    for ch in router.ike().children() {
        counts.entry(ch.0).or_default().2 += 1;
    }
    router
        .plan()
        .ike
        .peers
        .iter()
        .map(|p| {
            let c = &p.source;
            let (ike_sas, connecting, child_sas) = counts.get(&c.name).copied().unwrap_or_default();
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
                ike_sas,
                connecting,
                child_sas,
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
