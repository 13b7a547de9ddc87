//! `ike_sa_show` at a million SAs: each engine thread answers "the first
//! `limit` of my IKE SAs after id K" from its id index (`tern_ike::listing`),
//! and the pages are merged here by global id: a page costs O(limit) per
//! shard plus O(limit log shards) for the merge, whatever the number of
//! SAs. Summaries (counts by state and peer) are one walk per shard.

use super::shard::Cmd;
use super::{IkeService, global_id};
use std::collections::{BinaryHeap, HashMap};
use std::sync::mpsc;
use std::time::Duration;
use tern_ike::{IkeSaInfo, SaFilter, SaSummary};

/// How long a shard may take to answer a listing (it answers between two
/// batches of its own work).
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// The last of shard `shard`'s own ids (of `n` shards) at or below global
/// id `after`: its SAs after that one are the ones above `after` (global
/// id = own id * n + shard). `None`: all of them are.
pub fn shard_after(after: u64, shard: u32, n: u32) -> Option<u64> {
    let (s, n) = (u64::from(shard), u64::from(n.max(1)));
    if after < s { None } else { Some((after - s) / n) }
}

/// The first `limit` items of lists each sorted by `key`, in `key` order
/// (a k-way merge: O(limit log lists)).
pub fn merge_pages<T>(pages: Vec<Vec<T>>, limit: usize, key: impl Fn(&T) -> u64) -> Vec<T> {
    let mut iters: Vec<std::iter::Peekable<std::vec::IntoIter<T>>> =
        pages.into_iter().map(|p| p.into_iter().peekable()).collect();
    let mut heap: BinaryHeap<std::cmp::Reverse<(u64, usize)>> = BinaryHeap::with_capacity(iters.len());
    for (i, it) in iters.iter_mut().enumerate() {
        if let Some(x) = it.peek() {
            heap.push(std::cmp::Reverse((key(x), i)));
        }
    }
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(std::cmp::Reverse((_, i))) = heap.pop() else { break };
        let Some(x) = iters[i].next() else { continue };
        out.push(x);
        if let Some(next) = iters[i].peek() {
            heap.push(std::cmp::Reverse((key(next), i)));
        }
    }
    out
}

impl IkeService {
    /// At most `limit` IKE SAs (ids unique across shards) above global id
    /// `after`, in id order, that `filter` matches. A shard that does not
    /// answer in time is left out (and logged).
    pub fn sa_page(&self, after: Option<u64>, limit: usize, filter: &SaFilter) -> Vec<IkeSaInfo> {
        let Some(r) = &self.running else { return Vec::new() };
        let n = r.threads_n;
        let mut waits = Vec::with_capacity(r.shards.len());
        for (shard, s) in r.shards.iter().enumerate() {
            let (tx, rx) = mpsc::channel();
            let after = after.and_then(|a| shard_after(a, shard as u32, n));
            s.send(Cmd::Page { after, limit, filter: filter.clone(), reply: tx });
            waits.push(rx);
        }
        let mut pages = Vec::with_capacity(waits.len());
        for (shard, rx) in waits.into_iter().enumerate() {
            match rx.recv_timeout(ANSWER_WITHIN) {
                Ok(list) => pages.push(
                    list.into_iter()
                        .map(|mut i| {
                            i.id = global_id(i.id, shard as u32, n);
                            i
                        })
                        .collect(),
                ),
                Err(_) => log::warn!("ike: thread {shard} did not answer a listing within {ANSWER_WITHIN:?}"),
            }
        }
        merge_pages(pages, limit, |i| i.id)
    }

    /// Every shard's IKE SAs counted by state and peer.
    pub fn sa_summary(&self) -> SaSummary {
        let mut sum = SaSummary::default();
        let Some(r) = &self.running else { return sum };
        let mut waits = Vec::with_capacity(r.shards.len());
        for s in r.shards.iter() {
            let (tx, rx) = mpsc::channel();
            s.send(Cmd::Summary(tx));
            waits.push(rx);
        }
        for (shard, rx) in waits.into_iter().enumerate() {
            match rx.recv_timeout(ANSWER_WITHIN) {
                Ok(s) => sum.add(&s),
                Err(_) => log::warn!("ike: thread {shard} did not answer a summary within {ANSWER_WITHIN:?}"),
            }
        }
        sum
    }

    /// The certificate credentials the engines use for `peer` (the plan
    /// last given to them: a reload that changed nothing of IKE keeps
    /// them, and their cache, while the new plan's copies go unused).
    pub fn credentials_of(&self, peer: &str) -> Option<std::sync::Arc<tern_ike::auth::Credentials>> {
        self.applied.as_ref()?.peers.iter().find(|p| p.peer.name == peer).and_then(|p| match &p.peer.auth {
            tern_ike::AuthConfig::Pubkey(c) => Some(std::sync::Arc::clone(c)),
            tern_ike::AuthConfig::Psk(_) => None,
        })
    }

    /// Every pubkey peer's chain cache summed (each credentials once).
    pub fn chain_cache_stats(&self) -> tern_ike::auth::ChainCacheStats {
        let mut sum = tern_ike::auth::ChainCacheStats::default();
        let Some(plan) = &self.applied else { return sum };
        let mut seen = std::collections::HashSet::new();
        for p in &plan.peers {
            if let tern_ike::AuthConfig::Pubkey(c) = &p.peer.auth
                && seen.insert(std::sync::Arc::as_ptr(c))
            {
                sum.add(&c.chain_cache_stats());
            }
        }
        sum
    }

    /// Child SAs installed, by peer (one walk, no allocation per child).
    pub fn child_counts(&self) -> HashMap<&str, usize> {
        let mut m: HashMap<&str, usize> = HashMap::new();
        for c in self.children.values() {
            *m.entry(&*c.names.peer).or_default() += 1;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every global id above `after` is one of a shard's own ids above
    /// `shard_after`, and no other.
    #[test]
    fn shard_after_splits_global_ids() {
        for n in 1..=5u32 {
            for after in 0..40u64 {
                for shard in 0..n {
                    let own = shard_after(after, shard, n);
                    for id in 1..20u64 {
                        let global = global_id(id, shard, n);
                        assert_eq!(
                            own.is_none_or(|o| id > o),
                            global > after,
                            "n {n} after {after} shard {shard} id {id}"
                        );
                    }
                }
            }
        }
        assert_eq!(shard_after(u64::MAX, 0, 1), Some(u64::MAX));
    }

    /// The merge takes the smallest first across lists, stops at the limit,
    /// copes with empty lists.
    #[test]
    fn merge_takes_the_first_limit_in_order() {
        let pages = vec![vec![1, 4, 7, 10], vec![], vec![2, 3, 9], vec![5, 6, 8, 11, 12]];
        assert_eq!(merge_pages(pages.clone(), 5, |&x| x), [1, 2, 3, 4, 5]);
        assert_eq!(merge_pages(pages.clone(), 100, |&x| x), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert!(merge_pages(pages, 0, |&x| x).is_empty());
        assert!(merge_pages(Vec::<Vec<u64>>::new(), 3, |&x| x).is_empty());
    }

    /// Paging shards' lists page after page (each shard answering "after
    /// my own id" as an engine does) lists every id exactly once, in
    /// order, whatever the page size.
    #[test]
    fn pages_over_shards_list_each_once() {
        let n = 3u32;
        // Shard s holds own ids with gaps (gone SAs).
        let own: Vec<Vec<u64>> =
            (0..n).map(|s| (1..=40u64).filter(|i| (i + u64::from(s)) % 4 != 0).collect()).collect();
        let mut want: Vec<u64> =
            own.iter().enumerate().flat_map(|(s, ids)| ids.iter().map(move |&i| global_id(i, s as u32, n))).collect();
        want.sort();
        for limit in [1, 2, 7, 50, 500] {
            let mut got = Vec::new();
            let mut after: Option<u64> = None;
            loop {
                let pages: Vec<Vec<u64>> = (0..n)
                    .map(|s| {
                        let from = after.and_then(|a| shard_after(a, s, n));
                        own[s as usize]
                            .iter()
                            .filter(|&&i| from.is_none_or(|f| i > f))
                            .take(limit)
                            .map(|&i| global_id(i, s, n))
                            .collect()
                    })
                    .collect();
                let page = merge_pages(pages, limit, |&x| x);
                let Some(&last) = page.last() else { break };
                assert!(page.len() <= limit);
                got.extend(page);
                after = Some(last);
            }
            assert_eq!(got, want, "limit {limit}");
        }
    }
}
