//! The neighbour table (ARP and ND), owned by the control thread.
//!
//! Workers report what they hear ([`tern_nodes::state::Event`]); this
//! table decides, installs MACs into the FIB (which also adds the host
//! route), and keeps entries fresh with RFC 4861 7.3 neighbour
//! unreachability detection, for IPv6 and, the same way, for ARP:
//!
//! * REACHABLE: confirmed less than `reachable_ms` ago (a solicited NA or
//!   an ARP reply confirms; RFC 4861 7.2.5).
//! * STALE: not confirmed for `reachable_ms`, or learned from the
//!   neighbour's own request (7.2.3) or from an override that changed its
//!   address. Still used for forwarding.
//! * DELAY: a STALE entry in use waits `delay_ms` for a confirmation
//!   before it is probed. tern cannot see which neighbours the workers and
//!   the XDP lane send to without a per-packet cost, so it treats every
//!   entry as in use: STALE turns DELAY at the next tick.
//! * PROBE: a unicast NS / ARP request every `retry_ms`; after `probes`
//!   unanswered ones the entry is removed and the next packet to it
//!   resolves again from scratch with multicast NS / broadcast ARP in the
//!   `glean` nodes (RFC 4861's INCOMPLETE, which lives there).
//!
//! Through STALE, DELAY and PROBE the MAC stays in the FIB, so both lanes
//! keep forwarding to the neighbour while it is re-probed; a neighbour
//! that answers its probes is never removed. PERMANENT entries
//! (configuration) are never probed, aged or overwritten.

use crate::config::NeighborCfg;
use serde::Serialize;
use std::collections::HashMap;
use std::net::IpAddr;
use tern_fib::FibWriter;
use tern_nodes::neighbor::{arp_probe_frame, ns_frame_to};
use tern_nodes::state::{Heard, IfTable, Inject};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NeighState {
    Reachable,
    Stale,
    Delay,
    Probe,
    /// Configured; never probed or aged.
    Permanent,
}

#[derive(Clone, Debug)]
struct Entry {
    mac: [u8; 6],
    state: NeighState,
    /// When the neighbour last confirmed it is reachable.
    confirmed_ns: u64,
    /// When the entry entered its state.
    since_ns: u64,
    probes: u32,
    last_probe_ns: u64,
    /// The neighbour's IsRouter flag (its last NA's R flag).
    router: bool,
}

impl Entry {
    fn new(mac: [u8; 6], state: NeighState, now_ns: u64) -> Entry {
        Entry { mac, state, confirmed_ns: now_ns, since_ns: now_ns, probes: 0, last_probe_ns: 0, router: false }
    }

    fn enter(&mut self, state: NeighState, now_ns: u64) {
        if state != self.state {
            self.state = state;
            self.since_ns = now_ns;
        }
        if state != NeighState::Probe {
            self.probes = 0;
        }
    }

    fn confirm(&mut self, now_ns: u64) {
        self.enter(NeighState::Reachable, now_ns);
        self.confirmed_ns = now_ns;
        self.since_ns = now_ns;
    }
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
    /// Unanswered probes in the PROBE state.
    pub probes: u32,
    /// The neighbour said it is a router (IPv6 NA R flag).
    pub router: bool,
}

#[derive(Default)]
pub struct NeighborTable {
    entries: HashMap<(u16, IpAddr), Entry>,
}

pub fn fmt_mac(m: [u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

const MS: u64 = 1_000_000;

impl NeighborTable {
    /// Installs a permanent neighbour (configuration).
    pub fn add_permanent(&mut self, ifindex: u16, ip: IpAddr, mac: [u8; 6], fib: &mut FibWriter) {
        self.entries.insert((ifindex, ip), Entry::new(mac, NeighState::Permanent, 0));
        fib.set_neighbor(ifindex, ip, Some(mac));
    }

    /// Installs a neighbour another owner resolved (the kernel mirror in
    /// Linux mode) as REACHABLE; `create`: also when tern has no entry for
    /// it. Returns true when the FIB changed.
    pub fn learn(
        &mut self,
        ifindex: u16,
        ip: IpAddr,
        mac: [u8; 6],
        create: bool,
        now_ns: u64,
        fib: &mut FibWriter,
    ) -> bool {
        if !create && !self.entries.contains_key(&(ifindex, ip)) {
            return false;
        }
        let how = Heard::Advert { solicited: true, override_: true, router: false };
        self.heard(ifindex, ip, Some(mac), how, now_ns, fib)
    }

    /// Applies what a worker heard from a neighbour: RFC 4861 7.2.3 for
    /// requests, 7.2.5 for advertisements (ARP requests and replies map
    /// onto them, see [`Heard`]). Returns true when the FIB changed.
    pub fn heard(
        &mut self,
        ifindex: u16,
        ip: IpAddr,
        mac: Option<[u8; 6]>,
        how: Heard,
        now_ns: u64,
        fib: &mut FibWriter,
    ) -> bool {
        let Some(e) = self.entries.get_mut(&(ifindex, ip)) else {
            // No entry (tern's INCOMPLETE lives in the glean nodes): only
            // a request for our address or a solicited answer creates one,
            // and only with the neighbour's address.
            let Some(mac) = mac else { return false };
            let state = match how {
                Heard::Sender { create: true } => NeighState::Stale,
                Heard::Advert { solicited: true, .. } => NeighState::Reachable,
                _ => return false,
            };
            let mut e = Entry::new(mac, state, now_ns);
            if let Heard::Advert { router, .. } = how {
                e.router = router;
            }
            self.entries.insert((ifindex, ip), e);
            fib.set_neighbor(ifindex, ip, Some(mac));
            return true;
        };
        if e.state == NeighState::Permanent {
            return false;
        }
        let changed = mac.is_some_and(|m| m != e.mac);
        match how {
            Heard::Sender { .. } => {
                // 7.2.3: a different address is taken, unconfirmed.
                let Some(m) = mac.filter(|_| changed) else { return false };
                e.mac = m;
                e.enter(NeighState::Stale, now_ns);
            }
            Heard::Advert { solicited, override_, router } => {
                e.router = router;
                if changed && !override_ {
                    // 7.2.5: a different address without override is not
                    // taken; a REACHABLE entry becomes suspect.
                    if e.state == NeighState::Reachable {
                        e.enter(NeighState::Stale, now_ns);
                    }
                    return false;
                }
                if let Some(m) = mac {
                    e.mac = m;
                }
                if solicited {
                    e.confirm(now_ns);
                } else if changed {
                    e.enter(NeighState::Stale, now_ns);
                }
            }
        }
        if changed {
            fib.set_neighbor(ifindex, ip, Some(e.mac));
        }
        changed
    }

    /// Runs the timers (RFC 4861 7.3.3): REACHABLE turns STALE after
    /// `reachable_ms`, STALE turns DELAY when `in_use` says so, DELAY
    /// turns PROBE after `delay_ms`, PROBE sends a unicast probe every
    /// `retry_ms` and removes the entry after `probes` unanswered ones.
    /// `send` queues a frame on a worker. Returns true when the FIB
    /// changed.
    pub fn tick(
        &mut self,
        now_ns: u64,
        cfg: &NeighborCfg,
        ifs: &IfTable,
        fib: &mut FibWriter,
        in_use: &dyn Fn(u16, IpAddr) -> bool,
        send: &mut dyn FnMut(Inject),
    ) -> bool {
        let reachable = cfg.reachable_ms.saturating_mul(MS);
        let delay = cfg.delay_ms.saturating_mul(MS);
        let retry = cfg.retry_ms.saturating_mul(MS);
        let mut dead = Vec::new();
        for (&(ifindex, ip), e) in self.entries.iter_mut() {
            if e.state == NeighState::Reachable && now_ns.saturating_sub(e.confirmed_ns) >= reachable {
                e.enter(NeighState::Stale, now_ns);
            }
            if e.state == NeighState::Stale && in_use(ifindex, ip) {
                e.enter(NeighState::Delay, now_ns);
            }
            let probe = match e.state {
                NeighState::Delay => now_ns.saturating_sub(e.since_ns) >= delay,
                NeighState::Probe => now_ns.saturating_sub(e.last_probe_ns) >= retry,
                _ => false,
            };
            if !probe {
                continue;
            }
            if e.state == NeighState::Probe && e.probes >= cfg.probes {
                dead.push((ifindex, ip));
                continue;
            }
            e.enter(NeighState::Probe, now_ns);
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
                age_ms: now_ns.saturating_sub(e.confirmed_ns) / MS,
                probes: e.probes,
                router: e.router,
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
            vmacs: Vec::new(),
        }]);
        (w, r, ifs)
    }

    const MAC9: [u8; 6] = [2, 0, 0, 0, 0, 9];
    const MAC8: [u8; 6] = [2, 0, 0, 0, 0, 8];
    const MS: u64 = 1_000_000;

    fn ip9() -> IpAddr {
        "10.0.0.9".parse().expect("ip")
    }

    fn advert(solicited: bool, override_: bool) -> Heard {
        Heard::Advert { solicited, override_, router: false }
    }

    fn state(t: &NeighborTable) -> NeighState {
        t.list(0)[0].state
    }

    fn cfg() -> NeighborCfg {
        NeighborCfg { reachable_ms: 10, delay_ms: 2, retry_ms: 1, probes: 2, ..NeighborCfg::default() }
    }

    /// Runs one tick with every entry in use; the frames it sent.
    fn tick(t: &mut NeighborTable, now: u64, w: &mut FibWriter, ifs: &IfTable) -> (bool, Vec<Inject>) {
        let mut sent = Vec::new();
        let changed = t.tick(now, &cfg(), ifs, w, &|_, _| true, &mut |i| sent.push(i));
        (changed, sent)
    }

    /// A table with 10.0.0.9 REACHABLE (confirmed at 0).
    fn reachable() -> (NeighborTable, FibWriter, tern_fib::FibReader, IfTable) {
        let (mut w, r, ifs) = setup();
        let mut t = NeighborTable::default();
        assert!(t.heard(0, ip9(), Some(MAC9), advert(true, true), 0, &mut w));
        assert_eq!(state(&t), NeighState::Reachable);
        (t, w, r, ifs)
    }

    fn fib_mac(r: &tern_fib::FibReader) -> Option<[u8; 6]> {
        let nh = r.nexthop(r.lookup_v4(0x0a00_0009));
        if nh.kind == NhKind::Unicast { nh.mac } else { None }
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
    fn what_creates_an_entry() {
        let (mut w, r, _) = setup();
        let mut t = NeighborTable::default();
        assert!(!t.heard(0, ip9(), Some(MAC9), Heard::Sender { create: false }, 0, &mut w), "gratuitous");
        assert!(!t.heard(0, ip9(), Some(MAC9), advert(false, true), 0, &mut w), "unsolicited NA");
        assert!(!t.heard(0, ip9(), None, advert(true, false), 0, &mut w), "no address to learn");
        assert!(t.is_empty());
        assert!(t.heard(0, ip9(), Some(MAC9), Heard::Sender { create: true }, 0, &mut w));
        assert_eq!(state(&t), NeighState::Stale, "a request says nothing of reachability (7.2.3)");
        assert_eq!(fib_mac(&r), Some(MAC9), "a STALE entry forwards");
    }

    #[test]
    fn reachable_turns_stale_then_delay_when_in_use() {
        let (mut t, mut w, r, ifs) = reachable();
        assert!(tick(&mut t, 9 * MS, &mut w, &ifs).1.is_empty());
        assert_eq!(state(&t), NeighState::Reachable);
        let mut sent = Vec::new();
        t.tick(10 * MS, &cfg(), &ifs, &mut w, &|_, _| false, &mut |i| sent.push(i));
        assert_eq!(state(&t), NeighState::Stale, "not in use: stays STALE");
        t.tick(100 * MS, &cfg(), &ifs, &mut w, &|_, _| false, &mut |i| sent.push(i));
        assert_eq!(state(&t), NeighState::Stale);
        assert!(sent.is_empty(), "STALE is not probed");
        let (changed, sent) = tick(&mut t, 101 * MS, &mut w, &ifs);
        assert_eq!(state(&t), NeighState::Delay, "in use");
        assert!(!changed && sent.is_empty(), "DELAY waits before probing");
        assert_eq!(fib_mac(&r), Some(MAC9), "still forwarding");
    }

    #[test]
    fn delay_turns_probe_and_probes_until_removed() {
        let (mut t, mut w, r, ifs) = reachable();
        tick(&mut t, 10 * MS, &mut w, &ifs);
        assert_eq!(state(&t), NeighState::Delay);
        assert!(tick(&mut t, 11 * MS, &mut w, &ifs).1.is_empty(), "delay_ms not over");
        let (_, sent) = tick(&mut t, 12 * MS, &mut w, &ifs);
        assert_eq!(state(&t), NeighState::Probe);
        assert_eq!(sent.len(), 1, "first probe");
        assert_eq!(&sent[0].frame[..6], &MAC9, "unicast probe");
        assert_eq!(&sent[0].frame[12..14], &[8, 6], "ARP");
        assert_eq!(fib_mac(&r), Some(MAC9), "PROBE still forwards");
        let (_, sent) = tick(&mut t, 13 * MS, &mut w, &ifs);
        assert_eq!(sent.len(), 1, "second probe after retry_ms");
        assert_eq!(t.list(0)[0].probes, 2);
        let (changed, sent) = tick(&mut t, 14 * MS, &mut w, &ifs);
        assert!(changed && sent.is_empty(), "removed after `probes` unanswered probes");
        assert!(t.is_empty());
        assert_eq!(r.nexthop(r.lookup_v4(0x0a00_0009)).kind, NhKind::Glean, "resolves from scratch");
    }

    #[test]
    fn solicited_answer_without_address_confirms_in_every_state() {
        // A Linux host answers a unicast NS without the target link-layer
        // address option (S set, O clear).
        for steps in 1..=3 {
            let (mut t, mut w, r, ifs) = reachable();
            let mut now = 10 * MS;
            for _ in 0..steps {
                tick(&mut t, now, &mut w, &ifs);
                now += 2 * MS;
            }
            let before = state(&t);
            assert_ne!(before, NeighState::Reachable);
            assert!(!t.heard(0, ip9(), None, advert(true, false), now, &mut w), "no FIB change");
            assert_eq!(state(&t), NeighState::Reachable, "{before:?} confirmed");
            assert_eq!(t.list(now)[0].age_ms, 0);
            assert_eq!(fib_mac(&r), Some(MAC9));
            let (changed, sent) = tick(&mut t, now + 9 * MS, &mut w, &ifs);
            assert!(!changed && sent.is_empty(), "REACHABLE again for reachable_ms");
        }
    }

    #[test]
    fn a_neighbour_that_answers_is_never_removed() {
        let (mut t, mut w, r, ifs) = reachable();
        let mut now = 0;
        for _ in 0..1000 {
            now += MS;
            let (changed, sent) = tick(&mut t, now, &mut w, &ifs);
            assert!(!changed);
            for _ in sent {
                t.heard(0, ip9(), None, advert(true, false), now, &mut w);
            }
        }
        assert_eq!(t.len(), 1);
        assert_eq!(fib_mac(&r), Some(MAC9));
    }

    #[test]
    fn unsolicited_or_non_override_adverts_follow_7_2_5() {
        let (mut t, mut w, r, _) = reachable();
        // O clear, different address: not taken, REACHABLE becomes STALE.
        assert!(!t.heard(0, ip9(), Some(MAC8), advert(true, false), 1, &mut w));
        assert_eq!((state(&t), fib_mac(&r)), (NeighState::Stale, Some(MAC9)));
        // O clear, different address, not REACHABLE: ignored.
        assert!(!t.heard(0, ip9(), Some(MAC8), advert(true, false), 2, &mut w));
        assert_eq!(state(&t), NeighState::Stale);
        // O clear, same address, solicited: confirms.
        t.heard(0, ip9(), Some(MAC9), advert(true, false), 3, &mut w);
        assert_eq!(state(&t), NeighState::Reachable);
        // Unsolicited override with a new address: taken, STALE.
        assert!(t.heard(0, ip9(), Some(MAC8), advert(false, true), 4, &mut w));
        assert_eq!((state(&t), fib_mac(&r)), (NeighState::Stale, Some(MAC8)));
        // Unsolicited, same address: no change of state.
        assert!(!t.heard(0, ip9(), Some(MAC8), advert(false, true), 5, &mut w));
        assert_eq!(state(&t), NeighState::Stale);
        // Solicited override with a new address: taken, REACHABLE.
        assert!(t.heard(0, ip9(), Some(MAC9), advert(true, true), 6, &mut w));
        assert_eq!((state(&t), fib_mac(&r)), (NeighState::Reachable, Some(MAC9)));
        // The R flag is kept.
        t.heard(0, ip9(), None, Heard::Advert { solicited: true, override_: false, router: true }, 7, &mut w);
        assert!(t.list(7)[0].router);
    }

    #[test]
    fn requests_update_the_address_unconfirmed() {
        let (mut t, mut w, r, _) = reachable();
        assert!(!t.heard(0, ip9(), Some(MAC9), Heard::Sender { create: true }, 1, &mut w));
        assert_eq!(state(&t), NeighState::Reachable, "same address: unchanged");
        assert!(t.heard(0, ip9(), Some(MAC8), Heard::Sender { create: false }, 2, &mut w));
        assert_eq!((state(&t), fib_mac(&r)), (NeighState::Stale, Some(MAC8)));
    }

    #[test]
    fn permanent_entries_are_never_changed_or_probed() {
        let (mut w, r, ifs) = setup();
        let mut t = NeighborTable::default();
        t.add_permanent(0, ip9(), MAC9, &mut w);
        assert!(!t.heard(0, ip9(), Some(MAC8), advert(true, true), 1, &mut w));
        let (changed, sent) = tick(&mut t, 1000 * MS, &mut w, &ifs);
        assert!(!changed && sent.is_empty());
        assert_eq!((state(&t), fib_mac(&r)), (NeighState::Permanent, Some(MAC9)));
    }

    #[test]
    fn ipv6_probes_are_unicast_solicitations() {
        let (mut w, _r, mut ifs) = setup();
        let mut v = ifs.get(0).expect("if").clone();
        v.v6 = vec![tern_nodes::state::V6Net { addr: "2001:db8::1".parse().expect("a"), len: 64 }];
        ifs = IfTable::new(vec![v]);
        let ip: IpAddr = "2001:db8::9".parse().expect("ip");
        let mut t = NeighborTable::default();
        t.heard(0, ip, Some(MAC9), advert(true, true), 0, &mut w);
        tick(&mut t, 10 * MS, &mut w, &ifs);
        let (_, sent) = tick(&mut t, 12 * MS, &mut w, &ifs);
        assert_eq!(sent.len(), 1);
        let f = &sent[0].frame;
        assert_eq!((&f[..6], &f[12..14]), (&MAC9[..], &[0x86, 0xdd][..]));
        assert_eq!(&f[38..54], &"2001:db8::9".parse::<std::net::Ipv6Addr>().expect("a").octets(), "to the neighbour");
        assert_eq!(f[54], 135, "NS");
    }
}
