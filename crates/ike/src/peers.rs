//! The engine's peer configurations, indexed: by name (`Ike::initiate`,
//! restarts), by remote address (a new IKE_SA_INIT) and the templates
//! (`remote = "any"`) in order. With many site-to-site peers a scan of
//! the list per IKE_SA_INIT or per initiation made setting them all up
//! quadratic; the indexes keep each lookup O(1), with the list's order
//! deciding ties as the scans did (the first peer of a name or address).

use crate::config::PeerConfig;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct Peers {
    list: Vec<Arc<PeerConfig>>,
    /// Name -> the first peer of that name in `list`.
    by_name: HashMap<String, usize>,
    /// Remote address -> the first peer with that `remote`.
    by_remote: HashMap<IpAddr, usize>,
    /// The peers without a remote address (templates), in order.
    templates: Vec<Arc<PeerConfig>>,
}

impl Peers {
    pub(crate) fn new(list: Vec<Arc<PeerConfig>>) -> Peers {
        let mut by_name = HashMap::with_capacity(list.len());
        let mut by_remote = HashMap::with_capacity(list.len());
        let mut templates = Vec::new();
        for (i, p) in list.iter().enumerate() {
            by_name.entry(p.name.clone()).or_insert(i);
            match p.remote {
                Some(ip) => {
                    by_remote.entry(ip).or_insert(i);
                }
                None => templates.push(p.clone()),
            }
        }
        Peers { list, by_name, by_remote, templates }
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Arc<PeerConfig>> {
        self.list.iter()
    }

    /// The first peer named `name`.
    pub(crate) fn by_name(&self, name: &str) -> Option<&Arc<PeerConfig>> {
        self.list.get(*self.by_name.get(name)?)
    }

    /// The first peer whose `remote` is `ip`.
    pub(crate) fn by_remote(&self, ip: IpAddr) -> Option<&Arc<PeerConfig>> {
        self.list.get(*self.by_remote.get(&ip)?)
    }

    /// The templates (`remote` unset), in the configuration's order.
    pub(crate) fn templates(&self) -> std::slice::Iter<'_, Arc<PeerConfig>> {
        self.templates.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PeerConfig;

    fn peer(name: &str, remote: Option<&str>) -> Arc<PeerConfig> {
        Arc::new(PeerConfig {
            remote: remote.and_then(|r| r.parse().ok()),
            ..PeerConfig::psk_for_tests(name, IpAddr::from([10, 0, 0, 254]))
        })
    }

    /// The indexes answer as a scan of the list in order would, the
    /// first of duplicates included, for every name and address.
    #[test]
    fn lookups_match_a_scan_in_order() {
        let list = vec![
            peer("a", Some("10.0.0.1")),
            peer("t1", None),
            peer("b", Some("10.0.0.2")),
            peer("a", Some("10.0.0.3")),
            peer("c", Some("10.0.0.1")),
            peer("t2", None),
        ];
        let peers = Peers::new(list.clone());
        for name in ["a", "b", "c", "t1", "t2", "zz"] {
            let scan = list.iter().find(|p| p.name == name);
            assert_eq!(peers.by_name(name).map(Arc::as_ptr), scan.map(Arc::as_ptr), "{name}");
        }
        for ip in ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.9"] {
            let ip: IpAddr = ip.parse().expect("addr");
            let scan = list.iter().find(|p| p.remote == Some(ip));
            assert_eq!(peers.by_remote(ip).map(Arc::as_ptr), scan.map(Arc::as_ptr), "{ip}");
        }
        let t: Vec<&str> = peers.templates().map(|p| p.name.as_str()).collect();
        assert_eq!(t, ["t1", "t2"]);
        assert_eq!(peers.iter().count(), 6);
    }
}
