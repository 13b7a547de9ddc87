//! `tern ike sa show` at a million SAs: a page of the IKE SAs after an id
//! costs the page (the `by_id` index, a B-tree of id -> our SPI, walked
//! from the id on), not the table; a filter (peer, remote address, virtual
//! IP) skips what it does not match on the way, so a page with a filter
//! costs what it walks until `limit` match. The summary (counts by state
//! and peer) is kept as SAs change: each SA notes the state it is counted
//! under, and the engine's put-back (the one way an SA returns to the
//! table) and forget adjust the counts when that changes, so a summary
//! costs the peers, not the SAs (a walk of 200,000 took 79 ms of an IKE
//! thread; `ike_sa_summary_by_walk` remains, for tests to compare).

use crate::ike::{Ike, IkeSaInfo};
use crate::sa::{IkeSa, State};
use std::net::IpAddr;
use std::ops::Bound;
use std::time::Instant;

/// Which IKE SAs a page lists (all set fields must match).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaFilter {
    /// The `[[ike]]` peer's name.
    pub peer: Option<String>,
    /// The peer's address (the IKE SA's remote, port aside).
    pub remote: Option<IpAddr>,
    /// The virtual IP handed out to (or received from) the peer.
    pub virtual_ip: Option<IpAddr>,
}

impl SaFilter {
    fn matches(&self, sa: &IkeSa) -> bool {
        self.peer.as_deref().is_none_or(|p| sa.peer.name == p)
            && self.remote.is_none_or(|r| sa.remote.ip() == r)
            && self.virtual_ip.is_none_or(|v| sa.virtual_ip == Some(v))
    }
}

/// IKE SAs of one peer configuration, by state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateCounts {
    pub connecting: u64,
    pub established: u64,
    pub rekeying: u64,
    pub deleting: u64,
}

impl StateCounts {
    pub fn total(&self) -> u64 {
        self.connecting + self.established + self.rekeying + self.deleting
    }

    pub fn add(&mut self, o: &StateCounts) {
        self.connecting += o.connecting;
        self.established += o.established;
        self.rekeying += o.rekeying;
        self.deleting += o.deleting;
    }

    fn count(&mut self, state: &str) {
        *self.slot(index_of(state)) += 1;
    }

    fn slot(&mut self, i: u8) -> &mut u64 {
        match i {
            0 => &mut self.connecting,
            1 => &mut self.established,
            2 => &mut self.rekeying,
            _ => &mut self.deleting,
        }
    }
}

/// A state's slot in `StateCounts` (what `IkeSa::listed_as` holds).
fn index_of(state: &str) -> u8 {
    match state {
        "connecting" => 0,
        "established" => 1,
        "rekeying" => 2,
        _ => 3,
    }
}

/// What `tern ike sa show` says before the page: every IKE SA counted
/// by state, and by peer (sorted by name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaSummary {
    pub all: StateCounts,
    pub by_peer: Vec<(String, StateCounts)>,
}

impl SaSummary {
    /// Another shard's summary added in.
    pub fn add(&mut self, o: &SaSummary) {
        self.all.add(&o.all);
        for (peer, c) in &o.by_peer {
            match self.by_peer.binary_search_by(|(p, _)| p.as_str().cmp(peer)) {
                Ok(i) => self.by_peer[i].1.add(c),
                Err(i) => self.by_peer.insert(i, (peer.clone(), c.clone())),
            }
        }
    }
}

/// Listed: not the old SAs a rekey replaced (they go silently).
fn listed(sa: &IkeSa) -> bool {
    sa.state != State::Dead && !sa.announced_down
}

/// "connecting", "established", "rekeying" or "deleting".
fn state_of(sa: &IkeSa) -> &'static str {
    let rekeying = sa
        .pending
        .as_ref()
        .is_some_and(|p| matches!(p.req, crate::sa::Req::RekeyIke { .. } | crate::sa::Req::RekeyChild { .. }));
    if rekeying && sa.state == State::Established { "rekeying" } else { sa.state.name() }
}

fn info(sa: &IkeSa, now: Option<Instant>) -> IkeSaInfo {
    IkeSaInfo {
        id: sa.id,
        peer: sa.peer.name.clone(),
        local: sa.local,
        remote: sa.remote,
        spi_i: sa.spi_i,
        spi_r: sa.spi_r,
        initiator: sa.initiator,
        state: state_of(sa),
        proposal: sa.chosen.map(|c| c.to_string()).unwrap_or_default(),
        remote_id: sa.remote_id.as_ref().map(|i| i.to_string()).unwrap_or_default(),
        established_secs: match (now, sa.established_at) {
            (Some(now), Some(t)) => now.saturating_duration_since(t).as_secs(),
            _ => 0,
        },
        children: sa.children.iter().map(|c| (c.id, c.spi_in, c.spi_out, c.chosen.to_string())).collect(),
        nat: sa.nat(),
        virtual_ip: sa.virtual_ip,
    }
}

impl Ike {
    /// At most `limit` IKE SAs with an id above `after` (from the first
    /// without), in id order, that `filter` matches.
    pub fn ike_sa_page(&self, after: Option<u64>, limit: usize, filter: &SaFilter) -> Vec<IkeSaInfo> {
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.by_id
            .range((from, Bound::Unbounded))
            // An entry whose SA is gone or now has another id (the index
            // is kept exact; this costs a compare) is not listed.
            .filter_map(|(&id, spi)| self.sas.get(spi).filter(|sa| sa.id == id))
            .filter(|sa| listed(sa) && filter.matches(sa))
            .take(limit)
            .map(|sa| info(sa, self.clock))
            .collect()
    }

    /// The IKE SAs counted by state and peer, from the counts kept as
    /// they change (no walk of the SAs).
    pub fn ike_sa_summary(&self) -> SaSummary {
        let mut by_peer: Vec<(String, StateCounts)> =
            self.listed.iter().filter(|(_, c)| c.total() > 0).map(|(p, c)| (p.clone(), c.clone())).collect();
        by_peer.sort_by(|a, b| a.0.cmp(&b.0));
        let mut all = StateCounts::default();
        for (_, c) in &by_peer {
            all.add(c);
        }
        SaSummary { all, by_peer }
    }

    /// The same counted by walking every SA (one walk, no allocation per
    /// SA): what the kept counts must equal, for tests.
    pub fn ike_sa_summary_by_walk(&self) -> SaSummary {
        let mut by_peer: std::collections::HashMap<&str, StateCounts> = std::collections::HashMap::new();
        let mut all = StateCounts::default();
        for sa in self.sas.values().filter(|sa| listed(sa)) {
            let s = state_of(sa);
            all.count(s);
            by_peer.entry(sa.peer.name.as_str()).or_default().count(s);
        }
        let mut by_peer: Vec<(String, StateCounts)> = by_peer.into_iter().map(|(p, c)| (p.to_string(), c)).collect();
        by_peer.sort_by(|a, b| a.0.cmp(&b.0));
        SaSummary { all, by_peer }
    }

    /// Moves `sa`'s count to the state it is in now (or out, when it is no
    /// longer listed). Called as it goes back into the table.
    pub(crate) fn recount(&mut self, sa: &mut IkeSa) {
        let now = listed(sa).then(|| index_of(state_of(sa)));
        if now == sa.listed_as {
            return;
        }
        self.uncount(sa);
        if let Some(i) = now {
            let c = self.listed.entry(sa.peer.name.clone()).or_default();
            *c.slot(i) += 1;
            sa.listed_as = Some(i);
        }
    }

    /// Takes `sa` out of the counts (it leaves the table for good).
    pub(crate) fn uncount(&mut self, sa: &mut IkeSa) {
        let Some(i) = sa.listed_as.take() else { return };
        if let Some(c) = self.listed.get_mut(sa.peer.name.as_str()) {
            let n = c.slot(i);
            *n = n.saturating_sub(1);
            if c.total() == 0 {
                self.listed.remove(sa.peer.name.as_str());
            }
        }
    }

    /// `recount` for an SA changed where it sits in the table.
    pub(crate) fn recount_in_table(&mut self, spi: u64) {
        if let Some(mut sa) = self.sas.remove(&spi) {
            self.recount(&mut sa);
            self.sas.insert(spi, sa);
        }
    }

    /// Entries in the id index (for tests: it follows the table).
    pub fn id_index_len(&self) -> usize {
        self.by_id.len()
    }
}
