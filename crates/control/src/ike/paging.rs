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

/// Empties the chain caches of the credentials `old` had and `new` no
/// longer has (a reload that changed a CA, a certificate, a key or the
/// cache's size): IKE SAs set up before keep the old configuration (and
/// never authenticate again), so nothing would otherwise free those
/// entries, and no chain checked against a trust that is gone is kept.
pub(crate) fn flush_replaced_chains(old: &crate::config::IkePlan, new: &crate::config::IkePlan) {
    let kept: std::collections::HashSet<*const tern_ike::auth::Credentials> = new
        .peers
        .iter()
        .filter_map(|p| match &p.peer.auth {
            tern_ike::AuthConfig::Pubkey(c) => Some(std::sync::Arc::as_ptr(c)),
            tern_ike::AuthConfig::Psk(_) => None,
        })
        .collect();
    for p in &old.peers {
        if let tern_ike::AuthConfig::Pubkey(c) = &p.peer.auth
            && !kept.contains(&std::sync::Arc::as_ptr(c))
        {
            c.flush_chain_cache();
        }
    }
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

    /// Child SAs installed, by peer: counts kept as children come and go
    /// (no walk; `child_counts_by_walk` is what they must equal).
    pub fn child_counts(&self) -> &HashMap<Box<str>, usize> {
        self.children.per_peer()
    }

    /// The same counts by a walk of the children (tests).
    pub fn child_counts_by_walk(&self) -> HashMap<Box<str>, usize> {
        self.children.per_peer_by_walk()
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

/// The service as `tern run` has it (shards on their threads): pages
/// through the API merge every shard's, each SA once; a reload's chain
/// cache: kept when nothing of IKE changed, a new empty one when a CA
/// changed (a cached chain never outlives the trust that validated it),
/// resized without touching the SAs.
#[cfg(test)]
mod service_tests {
    use crate::api::IkeSaShowArgs;
    use crate::router::Router;
    use std::net::{IpAddr, SocketAddr};
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};
    use tern_ike::config::{Identity, PeerConfig};
    use tern_ike::proposal::{Proposal, Protocol};

    const TERN: &str = "192.0.2.1";

    fn config(extra: &str, peer: &str) -> String {
        format!(
            r#"
[[interface]]
name = "wan"
driver = "memory"
mac = "02:00:00:00:02:01"
addresses = ["{TERN}/24"]

[[tunnel]]
name = "ra0"
type = "ipsec"
local = "{TERN}"
remote = "any"
addresses = ["10.3.0.1/24"]

[ike_service]
threads = 3
{extra}

[[ike]]
name = "ra"
local = "{TERN}"
remote = "any"
pool = "10.3.0.0/24"
tunnel = "ra0"
proposals = ["aes128gcm16-prfsha256-x25519"]
esp_proposals = ["aes128gcm16"]
{peer}
"#
        )
    }

    fn start(dir: &Path, text: &str) -> (Router, PathBuf) {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join("tern.toml");
        std::fs::write(&path, text).unwrap();
        let plan = crate::config::load(&path).expect("config");
        let mut r = Router::start(plan).expect("router");
        super::super::poll(&mut r);
        assert!(r.ike().is_running());
        (r, path)
    }

    /// `n` IKE_SA_INITs from as many sources, handed to the shards in
    /// turn (each takes a new one it is given).
    fn flood(r: &Router, n: u32) {
        let now = Instant::now();
        let mut src = tern_ike::Ike::new(tern_ike::Settings::default());
        let client = PeerConfig {
            remote: Some(TERN.parse().unwrap()),
            local_id: Identity::Fqdn("client.example".into()),
            proposals: vec![Proposal::parse("aes128gcm16-prfsha256-x25519", Protocol::Ike).unwrap()],
            esp_proposals: vec![Proposal::parse("aes128gcm16", Protocol::Esp).unwrap()],
            ..PeerConfig::with_psk("tern", "198.51.100.1".parse().unwrap(), b"0123456789abcdef")
        };
        src.set_peers(now, vec![client]);
        let shards = &r.ike().running.as_ref().expect("running").shards;
        for k in 0..n {
            src.initiate(now, "tern").unwrap();
            for o in src.drain() {
                if let tern_ike::Output::Send { remote, data, .. } = o {
                    let from = SocketAddr::new(IpAddr::V4((0xC633_6400u32 + k).into()), 500);
                    shards[k as usize % shards.len()].send(super::Cmd::Datagram(remote, from, data));
                }
            }
        }
    }

    /// Waits (without sleeping: each summary is a round trip to every
    /// shard) until the shards hold `n` IKE SAs.
    fn until_total(r: &Router, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while r.ike().sa_summary().all.total() != n {
            assert!(Instant::now() < deadline, "{:?}", r.ike().sa_summary());
            std::thread::yield_now();
        }
    }

    #[test]
    fn pages_through_three_shards_list_each_sa_once() {
        let dir = std::env::temp_dir().join(format!("tern-ike-pages-{}", std::process::id()));
        let (mut r, _) = start(&dir, &config("", "psk = \"0123456789abcdef\""));
        flood(&r, 250);
        until_total(&r, 250);
        let s = crate::commands::ike_sa_summary(&r, false);
        assert_eq!((s.all.total, s.all.connecting, s.peers.len(), s.exact), (250, 250, 1, true));
        let all: Vec<u64> =
            crate::commands::ike_sa_show(&r, &IkeSaShowArgs::default()).unwrap().iter().map(|s| s.id).collect();
        assert_eq!(all.len(), 250);
        assert!(all.windows(2).all(|w| w[0] < w[1]), "by id");
        assert_eq!(all.iter().map(|id| id % 3).collect::<std::collections::HashSet<_>>().len(), 3, "every shard's");
        let mut seen = Vec::new();
        let mut after = None;
        let mut pages = 0;
        loop {
            let a = IkeSaShowArgs { after, limit: Some(64), ..Default::default() };
            let page = crate::commands::ike_sa_show(&r, &a).unwrap();
            let Some(last) = page.last() else { break };
            assert!(page.len() <= 64);
            after = Some(last.id);
            seen.extend(page.iter().map(|s| s.id));
            pages += 1;
        }
        assert_eq!((seen, pages), (all.clone(), 4));
        // Filters: by remote address, by a peer with none.
        let a = IkeSaShowArgs { remote: Some("198.51.100.7".into()), ..Default::default() };
        let one = crate::commands::ike_sa_show(&r, &a).unwrap();
        assert_eq!(one.len(), 1);
        assert!(one[0].remote.starts_with("198.51.100.7:"), "{}", one[0].remote);
        let a = IkeSaShowArgs { peer: Some("site".into()), ..Default::default() };
        assert!(crate::commands::ike_sa_show(&r, &a).unwrap().is_empty());
        let a = IkeSaShowArgs { virtual_ip: Some("10.3.0.999".into()), ..Default::default() };
        assert!(crate::commands::ike_sa_show(&r, &a).is_err(), "not an address");
        r.ike_service_mut().shutdown();
        r.shutdown();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_reload_applies_new_limits_to_the_running_threads() {
        let dir = std::env::temp_dir().join(format!("tern-ike-limits-{}", std::process::id()));
        let psk = "psk = \"0123456789abcdef\"";
        // One half-open SA per thread (3 threads): 9 IKE_SA_INITs, 3 kept.
        let (mut r, path) = start(&dir, &config("max_half_open = 1", psk));
        flood(&r, 9);
        // Each summary is a round trip behind the datagrams already queued.
        until_total(&r, 3);
        let ids: Vec<u64> =
            crate::commands::ike_sa_show(&r, &IkeSaShowArgs::default()).unwrap().iter().map(|s| s.id).collect();
        assert_eq!(r.ike().sa_summary().all.total(), 3, "the limit held");

        // A higher limit, same threads: no restart, the 3 stay, 9 more fit.
        std::fs::write(&path, config("max_half_open = 10", psk)).unwrap();
        crate::reload::reload(&mut r, &path).expect("reload");
        super::super::poll(&mut r);
        flood(&r, 9);
        until_total(&r, 12);
        let after: Vec<u64> =
            crate::commands::ike_sa_show(&r, &IkeSaShowArgs::default()).unwrap().iter().map(|s| s.id).collect();
        assert!(ids.iter().all(|id| after.contains(id)), "the first SAs stay: {ids:?} in {after:?}");
        r.ike_service_mut().shutdown();
        r.shutdown();
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn certs() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ike/tests/certs")
    }

    /// A chain checked with moon's credentials (moon signs, the cache
    /// checks), at the fixtures' "now".
    fn check(creds: &tern_ike::auth::Credentials) -> Result<(), tern_ike::auth::AuthError> {
        const MSG: &[u8] = b"signed octets";
        let moon = tern_ike::auth::Credentials::load(
            &certs().join("moon.pem"),
            &certs().join("moon.key"),
            &[certs().join("ca.pem")],
        )
        .unwrap();
        let (_, data) = moon.sign(MSG).unwrap();
        creds.verify(&moon.certs(), &Identity::Fqdn("moon.tern.test".into()), 1_800_000_000, 14, &data, MSG).map(|_| ())
    }

    #[test]
    fn a_reload_keeps_resizes_or_drops_the_chain_cache() {
        let dir = std::env::temp_dir().join(format!("tern-ike-certcache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["moon.pem", "moon.key", "ca.pem"] {
            std::fs::copy(certs().join(f), dir.join(f)).unwrap();
        }
        let peer = "auth = \"pubkey\"\ncertificate = \"moon.pem\"\nprivate_key = \"moon.key\"\nca = [\"ca.pem\"]";
        let (mut r, path) = start(&dir, &config("", peer));
        let first = r.ike().credentials_of("ra").expect("pubkey");
        check(&first).unwrap();
        check(&first).unwrap();
        let s = first.chain_cache_stats();
        assert_eq!((s.entries, s.capacity, s.hits, s.misses), (1, 4096, 1, 1));
        let m = r.ike().metrics().chain_cache;
        assert_eq!((m.entries, m.hits, m.misses), (1, 1, 1), "in /metrics");
        let view = crate::commands::ike_peer_show(&r);
        assert_eq!(view[0].chain_cache.as_ref().map(|c| (c.entries, c.hits)), Some((1, 1)));
        // Some SAs, to see that a resize leaves them alone.
        flood(&r, 5);
        until_total(&r, 5);
        let ids: Vec<u64> =
            crate::commands::ike_sa_show(&r, &IkeSaShowArgs::default()).unwrap().iter().map(|s| s.id).collect();

        // The same file: the running credentials and their cache stay.
        crate::reload::reload(&mut r, &path).expect("reload");
        super::super::poll(&mut r);
        let same = r.ike().credentials_of("ra").unwrap();
        assert!(std::sync::Arc::ptr_eq(&first, &same));
        assert_eq!(same.chain_cache_stats().entries, 1);

        // Another size: applied, the SAs stay.
        std::fs::write(&path, config("cert_cache_entries = 8", peer)).unwrap();
        crate::reload::reload(&mut r, &path).expect("reload");
        super::super::poll(&mut r);
        let resized = r.ike().credentials_of("ra").unwrap();
        assert_eq!(resized.chain_cache_stats().capacity, 8);
        assert_eq!(first.chain_cache_stats().entries, 0, "the replaced credentials' cache is emptied");
        until_total(&r, 5);
        let after: Vec<u64> =
            crate::commands::ike_sa_show(&r, &IkeSaShowArgs::default()).unwrap().iter().map(|s| s.id).collect();
        assert_eq!(after, ids, "the SAs were not dropped");
        check(&resized).unwrap();
        assert_eq!(resized.chain_cache_stats().entries, 1);

        // The CA file now holds another CA: the chain cached under the
        // old one is gone with it, and moon is refused.
        std::fs::copy(certs().join("evil-ca.pem"), dir.join("ca.pem")).unwrap();
        crate::reload::reload(&mut r, &path).expect("reload");
        super::super::poll(&mut r);
        let changed = r.ike().credentials_of("ra").unwrap();
        assert!(!std::sync::Arc::ptr_eq(&resized, &changed));
        assert_eq!(changed.chain_cache_stats().entries, 0, "a new trust, an empty cache");
        assert_eq!(resized.chain_cache_stats().entries, 0, "and the old one's emptied");
        let e = check(&changed).expect_err("moon's CA is no longer trusted");
        assert!(matches!(e, tern_ike::auth::AuthError::Untrusted(_)), "{e}");
        assert_eq!(changed.chain_cache_stats().entries, 0);

        // 0: off.
        std::fs::copy(certs().join("ca.pem"), dir.join("ca.pem")).unwrap();
        std::fs::write(&path, config("cert_cache_entries = 0", peer)).unwrap();
        crate::reload::reload(&mut r, &path).expect("reload");
        super::super::poll(&mut r);
        let off = r.ike().credentials_of("ra").unwrap();
        check(&off).unwrap();
        check(&off).unwrap();
        let s = off.chain_cache_stats();
        assert_eq!((s.entries, s.capacity, s.hits, s.misses), (0, 0, 0, 2));
        // Out of range: refused, naming the key.
        std::fs::write(&path, config("cert_cache_entries = 2000000", peer)).unwrap();
        let e = crate::reload::reload(&mut r, &path).expect_err("too large");
        assert!(e.message.contains("cert_cache_entries"), "{}", e.message);
        r.ike_service_mut().shutdown();
        r.shutdown();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
