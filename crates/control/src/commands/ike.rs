//! `ike_sa_show`, `ike_peer_show`, `ike_initiate`, `ike_terminate`: the IKE
//! service (`crate::ike`) through the API. Answers never carry keys.

use crate::api::types::{ChainCacheView, IkeChildView, IkePeerSaCounts, IkePeerView, IkeSaSummaryView, IkeSaView};
use crate::api::{ApiError, IkeSaShowArgs};
use crate::router::Router;
use std::net::IpAddr;
use tern_ike::{AuthConfig, SaFilter};

fn address(key: &str, s: &Option<String>) -> Result<Option<IpAddr>, ApiError> {
    s.as_deref()
        .map(|a| {
            a.parse().map_err(|_| ApiError::invalid(format!("{key}: {} is not an IP address", crate::config::quote(a))))
        })
        .transpose()
}

/// The IKE SAs by id, with their child SAs and their data-plane SA ids:
/// the page after `a.after` of at most `a.limit` (all when absent) that
/// the filters match. Each engine thread answers its own page from its
/// id index and the pages are merged (`crate::ike::paging`): a page costs
/// O(limit), not O(SAs); a filter costs what it walks until the page is
/// full. The children's data-plane ids come from one walk of the
/// installed children only when the page has any.
pub fn ike_sa_show(router: &Router, a: &IkeSaShowArgs) -> Result<Vec<IkeSaView>, ApiError> {
    let filter = SaFilter {
        peer: a.peer.clone(),
        remote: address("remote", &a.remote)?,
        virtual_ip: address("virtual_ip", &a.virtual_ip)?,
    };
    let ike = router.ike();
    let page = ike.sa_page(a.after, a.limit.unwrap_or(usize::MAX), &filter);
    let children = if page.iter().any(|i| !i.children.is_empty()) { ike.child_index() } else { Default::default() };
    Ok(page
        .into_iter()
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
            virtual_ip: i.virtual_ip.map(|v| v.to_string()),
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
        .collect())
}

/// Every IKE SA counted by state, in all and per peer (a walk of every
/// SA, in each engine thread), or, `quick`, from the threads' published
/// counters (no walk, no round trip: what a page's header line shows).
pub fn ike_sa_summary(router: &Router, quick: bool) -> IkeSaSummaryView {
    if quick {
        let st = router.ike().metrics().stats;
        let all = tern_ike::StateCounts { established: st.ike_sas, connecting: st.half_open, ..Default::default() };
        return IkeSaSummaryView { all: (&all).into(), exact: false, peers: Vec::new() };
    }
    let s = router.ike().sa_summary();
    IkeSaSummaryView {
        all: (&s.all).into(),
        exact: true,
        peers: s.by_peer.iter().map(|(peer, c)| IkePeerSaCounts { peer: peer.clone(), counts: c.into() }).collect(),
    }
}

/// The configured peers and how many SAs each has (the shards' counts
/// and the control side's children per peer, kept counts: no walk of
/// the SAs nor of the children).
pub fn ike_peer_show(router: &Router) -> Vec<IkePeerView> {
    let summary = router.ike().sa_summary();
    let children = router.ike().child_counts();
    router
        .plan()
        .ike
        .peers
        .iter()
        .map(|p| {
            let c = &p.source;
            let counts = summary.by_peer.iter().find(|(n, _)| *n == c.name).map(|x| x.1.clone()).unwrap_or_default();
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
                ike_sas: (counts.established + counts.rekeying) as usize,
                connecting: counts.connecting as usize,
                child_sas: children.get(c.name.as_str()).copied().unwrap_or(0),
                chain_cache: match &router.ike().credentials_of(&c.name) {
                    Some(creds) => {
                        let s = creds.chain_cache_stats();
                        Some(ChainCacheView {
                            entries: s.entries,
                            capacity: s.capacity,
                            hits: s.hits,
                            misses: s.misses,
                            evictions: s.evictions,
                        })
                    }
                    None => None,
                },
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
