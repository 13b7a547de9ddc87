//! `ipsec_sa_add`, `ipsec_sa_del`, `ipsec_sa_show`, `ipsec_tunnel_show`:
//! the SA database through the router's IPsec service
//! (`crate::ipsec`). An added SA is checked by the rules of
//! `[[ipsec_sa]]` (`config::sa_plan`); answers never carry keys.

use crate::api::types::{IpsecSaList, IpsecSaView, IpsecTunnelView};
use crate::api::{ApiError, IpsecSaAddArgs, IpsecSaShowArgs};
use crate::config::{IfacePlanKind, IpsecSaCfg, sa_plan};
use crate::router::Router;
use tern_ipsec::{SaInfo, SaState};

/// Installs the SAs of one request, all or nothing, in one publication.
pub fn ipsec_sa_add(router: &mut Router, a: IpsecSaAddArgs) -> Result<String, ApiError> {
    if a.sas.is_empty() {
        return Err(ApiError::invalid("no SAs given"));
    }
    let mut cfgs = Vec::with_capacity(a.sas.len());
    for (i, c) in a.sas.iter().enumerate() {
        cfgs.push(sa_of(c).map_err(|m| ApiError::invalid(format!("sas[{i}] (id {}): {m}", c.id)))?);
    }
    let n = router.ipsec_mut().add(cfgs).map_err(|e| ApiError::invalid(e.to_string()))?;
    Ok(format!("{n} SA(s) added ({} in all)", router.ipsec().len()))
}

fn sa_of(c: &IpsecSaCfg) -> Result<tern_ipsec::SaConfig, String> {
    let plan = sa_plan(c).map_err(|(key, m)| format!("{key}: {m}"))?;
    crate::ipsec::sa_config(&plan).map_err(|e| e.to_string())
}

/// Removes SAs (none that a tunnel of the configuration uses).
pub fn ipsec_sa_del(router: &mut Router, ids: &[u32]) -> Result<String, ApiError> {
    if ids.is_empty() {
        return Err(ApiError::invalid("no SA ids given"));
    }
    let users: Vec<Option<String>> = ids.iter().map(|&id| router.ipsec_sa_user(id)).collect();
    let user = |id: u32| ids.iter().position(|&i| i == id).and_then(|k| users[k].clone());
    let n = router
        .ipsec_mut()
        .del(ids, user)
        .map_err(|m| if m.starts_with("no SA") { ApiError::not_found(m) } else { ApiError::refused(m) })?;
    Ok(format!("{n} SA(s) deleted ({} left)", router.ipsec().len()))
}

fn state_name(s: SaState) -> &'static str {
    match s {
        SaState::Active => "active",
        SaState::SoftExpired => "soft-expired",
        SaState::Expired => "expired",
    }
}

fn view(router: &Router, i: &SaInfo) -> IpsecSaView {
    let tunnel = router.plan().ifaces.iter().find_map(|p| match &p.kind {
        IfacePlanKind::Ipsec { sa_out, .. } if *sa_out == i.id => Some(format!("{} out", p.name)),
        IfacePlanKind::Ipsec { sa_in, .. } if sa_in.contains(&i.id) => Some(format!("{} in", p.name)),
        _ => None,
    });
    let c = i.counters;
    IpsecSaView {
        id: i.id,
        spi: i.spi,
        crypto: i.cipher.to_string(),
        integ: i.integ.to_string(),
        esn: i.esn,
        replay_window: i.replay_window,
        udp_encap: i.udp_encap.map(|u| [u.src_port, u.dst_port]),
        state: state_name(i.state).into(),
        seq_out: i.seq_out,
        seq_in: i.seq_in,
        age_secs: i.age_secs,
        source: if router.ipsec().from_config(i.id) { "config" } else { "api" }.into(),
        tunnel,
        soft: [i.soft.packets, i.soft.bytes, i.soft.secs],
        hard: [i.hard.packets, i.hard.bytes, i.hard.secs],
        packets: c.packets,
        bytes: c.bytes,
        replay_drops: c.replay_drops,
        integrity_failures: c.integrity_failures,
        seq_exhausted: c.seq_exhausted,
        expired_drops: c.expired_drops,
        decrypt_errors: c.decrypt_errors,
    }
}

pub fn ipsec_sa_show(router: &Router, a: &IpsecSaShowArgs) -> Result<IpsecSaList, ApiError> {
    let total = router.ipsec().len();
    if let Some(id) = a.id {
        let i = router.ipsec().info(id).ok_or_else(|| ApiError::not_found(format!("no SA {id}")))?;
        return Ok(IpsecSaList { total, sas: vec![view(router, &i)] });
    }
    let list = router.ipsec().list();
    let limit = a.limit.unwrap_or(usize::MAX);
    Ok(IpsecSaList { total, sas: list.iter().take(limit).map(|i| view(router, i)).collect() })
}

pub fn ipsec_tunnel_show(router: &Router) -> Vec<IpsecTunnelView> {
    let ifs = router.shared().ifaces.load();
    let mut out = Vec::new();
    for (index, p) in router.plan().live_ifaces() {
        let IfacePlanKind::Ipsec { local, remote, sa_out, sa_in, ttl } = &p.kind else { continue };
        let f = ifs.get(index);
        let out_info = router.ipsec().info(*sa_out);
        let (mut rx_packets, mut rx_bytes) = (0, 0);
        for id in sa_in {
            if let Some(i) = router.ipsec().info(*id) {
                rx_packets += i.counters.packets;
                rx_bytes += i.counters.bytes;
            }
        }
        out.push(IpsecTunnelView {
            name: p.name.clone(),
            index,
            local: local.to_string(),
            // A multipoint tunnel's clients: `ike sa show` (their vips).
            remote: if remote.is_unspecified() { "any".into() } else { remote.to_string() },
            sa_out: *sa_out,
            sa_in: sa_in.clone(),
            ttl: *ttl,
            mtu: f.map_or(0, |f| f.mtu),
            up: f.is_some_and(|f| f.up),
            spi_out: out_info.as_ref().map(|i| i.spi),
            state_out: out_info.as_ref().map(|i| state_name(i.state).into()),
            tx_packets: out_info.as_ref().map_or(0, |i| i.counters.packets),
            tx_bytes: out_info.as_ref().map_or(0, |i| i.counters.bytes),
            rx_packets,
            rx_bytes,
        });
    }
    out
}
