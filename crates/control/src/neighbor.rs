//! The neighbour table (ARP and ND), owned by the control thread.
//!
//! Workers report what they learn ([`tern_nodes::state::Event`]); this
//! table decides, installs MACs into the FIB (which also adds the host
//! route), and keeps entries fresh: an entry unconfirmed for
//! `reachable_ms` is probed with unicast requests every `retry_ms`; after
//! `probes` unanswered probes it is removed, and traffic to it resolves
//! again from scratch (RFC 4861 7.3 states, simplified: REACHABLE, PROBE).

use crate::config::NeighborCfg;
use serde::Serialize;
use std::collections::HashMap;
use std::net::IpAddr;
use tern_fib::FibWriter;
use tern_nodes::neighbor::{arp_probe_frame, ns_frame_to};
use tern_nodes::state::{IfTable, Inject};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NeighState {
    Reachable,
    Probe,
    /// Configured; never probed or aged.
    Permanent,
}

#[derive(Clone, Debug)]
struct Entry {
    mac: [u8; 6],
    state: NeighState,
    confirmed_ns: u64,
    probes: u32,
    last_probe_ns: u64,
}

/// One neighbour, for display.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct NeighborInfo {
    pub ifindex: u16,
    pub ip: IpAddr,
    pub mac: String,
    pub state: NeighState,
    /// Milliseconds since the neighbour last confirmed its address.
    pub age_ms: u64,
}

#[derive(Default)]
pub struct NeighborTable {
    entries: HashMap<(u16, IpAddr), Entry>,
}

pub fn fmt_mac(m: [u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

impl NeighborTable {
    /// Installs a permanent neighbour (configuration).
    pub fn add_permanent(&mut self, ifindex: u16, ip: IpAddr, mac: [u8; 6], fib: &mut FibWriter) {
        self.entries.insert(
            (ifindex, ip),
            Entry { mac, state: NeighState::Permanent, confirmed_ns: 0, probes: 0, last_probe_ns: 0 },
        );
        fib.set_neighbor(ifindex, ip, Some(mac));
    }

    /// Applies something a worker saw. Returns true when the FIB changed.
    pub fn learn(
        &mut self,
        ifindex: u16,
        ip: IpAddr,
        mac: [u8; 6],
        create: bool,
        now_ns: u64,
        fib: &mut FibWriter,
    ) -> bool {
        match self.entries.get_mut(&(ifindex, ip)) {
            Some(e) if e.state == NeighState::Permanent => false,
            Some(e) => {
                let changed = e.mac != mac;
                e.mac = mac;
                e.state = NeighState::Reachable;
                e.confirmed_ns = now_ns;
                e.probes = 0;
                if changed {
                    fib.set_neighbor(ifindex, ip, Some(mac));
                }
                changed
            }
            None if create => {
                self.entries.insert(
                    (ifindex, ip),
                    Entry { mac, state: NeighState::Reachable, confirmed_ns: now_ns, probes: 0, last_probe_ns: 0 },
                );
                fib.set_neighbor(ifindex, ip, Some(mac));
                true
            }
            None => false,
        }
    }

    /// Ages entries: probes stale ones, removes dead ones. `send` queues a
    /// frame on a worker. Returns true when the FIB changed.
    pub fn tick(
        &mut self,
        now_ns: u64,
        cfg: &NeighborCfg,
        ifs: &IfTable,
        fib: &mut FibWriter,
        send: &mut dyn FnMut(Inject),
    ) -> bool {
        let reachable = cfg.reachable_ms * 1_000_000;
        let retry = cfg.retry_ms * 1_000_000;
        let mut dead = Vec::new();
        for (&(ifindex, ip), e) in self.entries.iter_mut() {
            if e.state == NeighState::Permanent || now_ns.saturating_sub(e.confirmed_ns) < reachable {
                continue;
            }
            if now_ns.saturating_sub(e.last_probe_ns) < retry {
                continue;
            }
            if e.probes >= cfg.probes {
                dead.push((ifindex, ip));
                continue;
            }
            e.state = NeighState::Probe;
            e.probes += 1;
            e.last_probe_ns = now_ns;
            let Some(iface) = ifs.get(ifindex) else {
                dead.push((ifindex, ip));
                continue;
            };
            let frame = match ip {
                IpAddr::V4(a) => iface.v4_source_for(a).map(|src| arp_probe_frame(iface, src, a, e.mac)),
                IpAddr::V6(a) => ns_frame_to(iface, a, Some(e.mac)),
            };
            if let Some(frame) = frame {
                send(Inject { ifindex, frame });
            }
        }
        for key in &dead {
            self.entries.remove(key);
            fib.set_neighbor(key.0, key.1, None);
        }
        !dead.is_empty()
    }

    /// Forgets every neighbour on an interface (it went down or lost its
    /// addresses).
    pub fn flush_interface(&mut self, ifindex: u16, fib: &mut FibWriter) -> bool {
        let keys: Vec<_> = self.entries.keys().filter(|k| k.0 == ifindex).copied().collect();
        for key in &keys {
            self.entries.remove(key);
            fib.set_neighbor(key.0, key.1, None);
        }
        !keys.is_empty()
    }

    pub fn list(&self, now_ns: u64) -> Vec<NeighborInfo> {
        let mut v: Vec<_> = self
            .entries
            .iter()
            .map(|(&(ifindex, ip), e)| NeighborInfo {
                ifindex,
                ip,
                mac: fmt_mac(e.mac),
                state: e.state,
                age_ms: now_ns.saturating_sub(e.confirmed_ns) / 1_000_000,
            })
            .collect();
        v.sort_by_key(|a| (a.ifindex, a.ip));
        v
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_fib::{FibConfig, NhKind, RouteAttrs, RouteTarget, Source};
    use tern_nodes::state::{IfKind, Iface, V4Net, link_local_from_mac};

    fn setup() -> (FibWriter, tern_fib::FibReader, IfTable) {
        let (mut w, r) = tern_fib::new(FibConfig::default(), tern_rcu::Domain::new());
        w.add_route(
            Source::Connected,
            "10.0.0.0/24".parse().expect("p"),
            RouteTarget::Connected { ifindex: 0 },
            RouteAttrs::default(),
        )
        .expect("route");
        let mac = [2, 0, 0, 0, 0, 1];
        let ifs = IfTable::new(vec![Iface {
            index: 0,
            name: "p0".into(),
            kind: IfKind::Port,
            port: 0,
            mac,
            mtu: 1500,
            up: true,
            v4: vec![V4Net { addr: "10.0.0.1".parse().expect("a"), len: 24 }],
            v6: vec![],
            v6_ll: link_local_from_mac(mac),
            acl_in: None,
            acl_out: None,
        }]);
        (w, r, ifs)
    }

    #[test]
    fn learn_creates_only_when_asked_and_installs_host_route() {
        let (mut w, r, _) = setup();
        let ip: IpAddr = "10.0.0.9".parse().expect("ip");
        assert!(!NeighborTable::default().learn(0, ip, [2, 0, 0, 0, 0, 9], false, 1, &mut w));
        let mut t = NeighborTable::default();
        assert!(t.learn(0, ip, [2, 0, 0, 0, 0, 9], true, 1, &mut w));
        let nh = r.nexthop(r.lookup_v4(0x0a00_0009));
        assert_eq!((nh.kind, nh.mac), (NhKind::Unicast, Some([2, 0, 0, 0, 0, 9])));
        assert!(!t.learn(0, ip, [2, 0, 0, 0, 0, 9], false, 2, &mut w), "same MAC: no FIB change");
        assert!(t.learn(0, ip, [2, 0, 0, 0, 0, 8], false, 3, &mut w), "moved MAC updates");
    }

    #[test]
    fn stale_entries_are_probed_then_removed() {
        let (mut w, r, ifs) = setup();
        let cfg = NeighborCfg { reachable_ms: 10, retry_ms: 1, probes: 2, ..NeighborCfg::default() };
        let mut t = NeighborTable::default();
        let ip: IpAddr = "10.0.0.9".parse().expect("ip");
        t.learn(0, ip, [2, 0, 0, 0, 0, 9], true, 0, &mut w);
        let mut sent = Vec::new();
        let ms = 1_000_000;
        assert!(!t.tick(5 * ms, &cfg, &ifs, &mut w, &mut |i| sent.push(i)));
        assert!(sent.is_empty(), "still reachable");
        t.tick(11 * ms, &cfg, &ifs, &mut w, &mut |i| sent.push(i));
        t.tick(13 * ms, &cfg, &ifs, &mut w, &mut |i| sent.push(i));
        assert_eq!(sent.len(), 2, "two probes");
        assert_eq!(&sent[0].frame[..6], &[2, 0, 0, 0, 0, 9], "unicast probe");
        assert!(t.tick(15 * ms, &cfg, &ifs, &mut w, &mut |i| sent.push(i)), "removed after the probes");
        assert!(t.is_empty());
        assert_eq!(r.nexthop(r.lookup_v4(0x0a00_0009)).kind, NhKind::Glean);
    }

    #[test]
    fn confirmation_during_probe_keeps_entry() {
        let (mut w, _r, ifs) = setup();
        let cfg = NeighborCfg { reachable_ms: 10, retry_ms: 1, probes: 1, ..NeighborCfg::default() };
        let mut t = NeighborTable::default();
        let ip: IpAddr = "10.0.0.9".parse().expect("ip");
        let ms = 1_000_000;
        t.learn(0, ip, [2, 0, 0, 0, 0, 9], true, 0, &mut w);
        t.tick(11 * ms, &cfg, &ifs, &mut w, &mut |_| {});
        t.learn(0, ip, [2, 0, 0, 0, 0, 9], false, 12 * ms, &mut w);
        t.tick(13 * ms, &cfg, &ifs, &mut w, &mut |_| {});
        assert_eq!(t.len(), 1);
        assert_eq!(t.list(13 * ms)[0].state, NeighState::Reachable);
    }
}
