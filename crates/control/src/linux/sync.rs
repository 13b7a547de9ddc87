//! Route messages to RIB operations, shared by the kernel mirror and the
//! FPM server: one [`RouteSync`] per source turns `RTM_NEWROUTE`,
//! `RTM_DELROUTE` and next-hop-object messages into [`RouteOp`]s of its
//! [`Source`].
//!
//! What is installed: routes of the configured table (main by default),
//! of type unicast, blackhole, unreachable or prohibit, whose next hops
//! leave through an interface tern drives. Everything else is ignored and
//! counted by reason ([`SyncCounters`]), so `routes present in the kernel
//! but missing in the data plane` always has an answer.
//!
//! Next-hop objects (`ip nexthop`, zebra's `fpm use-next-hop-groups`) are
//! kept in a table; a route naming one (`RTA_NH_ID`) is resolved through
//! it, and when an object changes every route using it is re-resolved.
//!
//! The kernel may hold several routes for one prefix with different
//! metrics (`ip route add ... metric N`); the RIB keeps one route per
//! source and prefix, so with `track_metrics` the lowest-metric one is
//! installed and the others wait behind it.

use super::nl::{self, NexthopMsg, PathMsg, RouteMsg, WireError};
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::net::IpAddr;
use tern_fib::{Prefix, RouteAttrs, RouteOp, RouteTarget, Source};

/// Kernel interface index -> tern interface index, for the devices tern
/// drives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IfMap {
    by_kernel: HashMap<u32, u16>,
}

impl IfMap {
    pub fn insert(&mut self, kernel: u32, tern: u16) {
        self.by_kernel.retain(|_, t| *t != tern);
        self.by_kernel.insert(kernel, tern);
    }
    pub fn remove_kernel(&mut self, kernel: u32) {
        self.by_kernel.remove(&kernel);
    }
    pub fn get(&self, kernel: u32) -> Option<u16> {
        self.by_kernel.get(&kernel).copied()
    }
    /// The kernel index of a tern interface.
    pub fn kernel_of(&self, tern: u16) -> Option<u32> {
        self.by_kernel.iter().find(|(_, t)| **t == tern).map(|(k, _)| *k)
    }
    pub fn len(&self) -> usize {
        self.by_kernel.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_kernel.is_empty()
    }
}

// The counters are the source interface's (crate::source), which knows
// nothing of Linux.
pub use crate::source::SyncCounters;

/// A next-hop object.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Nhg {
    /// One next hop: gateway (or directly connected) through a kernel
    /// interface.
    One {
        gw: Option<IpAddr>,
        oif: Option<u32>,
    },
    Blackhole,
    /// (member id, weight).
    Group(Vec<(u32, u32)>),
}

/// What a route asks for, before interface mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Want {
    Target(RouteTarget),
    Nh(u32),
}

/// The result of translating one route message.
enum Translated {
    Op(RouteOp),
    Skip,
}

pub struct RouteSync {
    source: Source,
    table: u32,
    track_metrics: bool,
    /// Protocols (rtm_protocol) whose routes this source ignores.
    skip_protocols: Vec<u8>,
    nhgs: FxHashMap<u32, Nhg>,
    /// Without `track_metrics`: which routes name which next-hop object,
    /// as a log of (prefix, object id or 0 for "none any more", metric),
    /// newest last. Appending is cheap where a map insert per route would
    /// cost a cache miss on a full table; the log is compacted when it has
    /// grown fourfold, and read (latest entry per prefix) only when an
    /// object changes. (With `track_metrics`, `multi` holds the same facts.)
    nh_log: Vec<(Prefix, u32, u32)>,
    nh_log_compact_at: usize,
    /// With `track_metrics`: every route per prefix, (metric, want),
    /// lowest metric first (it is the installed one).
    multi: FxHashMap<Prefix, Vec<(u32, Want)>>,
    /// With `track_metrics`: the kernel's members of each IPv6 multipath
    /// route, by (prefix, metric). Linux deletes one member of such a
    /// route with an RTM_DELROUTE naming only that member (the route
    /// stays with the others), which only these say apart from a delete
    /// of the whole route.
    v6_paths: FxHashMap<(Prefix, u32), Vec<PathMsg>>,
    pub counters: SyncCounters,
}

/// The log of routes through next-hop objects is compacted at four times
/// its live size, but not below this (a full table loads without any
/// compaction; churn compacts rarely).
const NH_LOG_MIN: usize = 1 << 22;

fn unspecified(family: u8) -> IpAddr {
    if family == nl::AF_INET {
        IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
    }
}

impl RouteSync {
    pub fn new(source: Source, table: u32, track_metrics: bool) -> Self {
        RouteSync {
            source,
            table,
            track_metrics,
            skip_protocols: Vec::new(),
            nhgs: FxHashMap::default(),
            nh_log: Vec::new(),
            nh_log_compact_at: NH_LOG_MIN,
            multi: FxHashMap::default(),
            v6_paths: FxHashMap::default(),
            counters: SyncCounters::default(),
        }
    }

    pub fn source(&self) -> Source {
        self.source
    }

    pub fn set_skip_protocols(&mut self, p: Vec<u8>) {
        self.skip_protocols = p;
    }

    /// Forgets everything learned (before a resync: the peer sends it all
    /// again; the RIB side is marked and swept by the caller).
    pub fn clear(&mut self) {
        self.nhgs.clear();
        self.nh_log.clear();
        self.nh_log_compact_at = NH_LOG_MIN;
        self.multi.clear();
        self.v6_paths.clear();
        self.counters.nexthop_objects = 0;
    }

    /// Prefixes currently tracked as routed through next-hop objects.
    pub fn nh_routes(&self) -> usize {
        if self.track_metrics {
            return self.multi.values().filter(|v| matches!(v.first(), Some((_, Want::Nh(_))))).count();
        }
        self.latest_nh().len()
    }

    fn log_nh(&mut self, prefix: Prefix, id: u32, metric: u32) {
        if id == 0 && self.nh_log.is_empty() {
            return;
        }
        self.nh_log.push((prefix, id, metric));
        if self.nh_log.len() >= self.nh_log_compact_at {
            let live = self.latest_nh();
            self.nh_log = live.into_iter().map(|(p, (id, m))| (p, id, m)).collect();
            self.nh_log_compact_at = (self.nh_log.len() * 4).max(NH_LOG_MIN);
        }
    }

    /// The latest next-hop object of each prefix that names one.
    fn latest_nh(&self) -> FxHashMap<Prefix, (u32, u32)> {
        let mut m = FxHashMap::default();
        for &(p, id, metric) in &self.nh_log {
            if id == 0 {
                m.remove(&p);
            } else {
                m.insert(p, (id, metric));
            }
        }
        m
    }

    /// RTM_NEWROUTE / RTM_DELROUTE.
    pub fn route(&mut self, new: bool, payload: &[u8], ifs: &IfMap, out: &mut Vec<RouteOp>) {
        self.counters.route_msgs += 1;
        let r = match RouteMsg::parse(payload) {
            Ok(r) => r,
            Err(_) => {
                self.counters.malformed += 1;
                return;
            }
        };
        if let Translated::Op(op) = self.translate(new, &r, ifs) {
            self.push(op, out);
        }
    }

    fn push(&mut self, op: RouteOp, out: &mut Vec<RouteOp>) {
        match &op {
            RouteOp::Add(src, p, ..) => {
                self.counters.adds += 1;
                // zebra sends an update as a delete and the new route in
                // one frame: the add replaces, so the delete (still in this
                // batch) need not reach the RIB.
                if let Some(RouteOp::Del(s, q)) = out.last()
                    && s == src
                    && q == p
                {
                    out.pop();
                    self.counters.dels = self.counters.dels.saturating_sub(1);
                }
            }
            RouteOp::Del(..) => self.counters.dels += 1,
        }
        out.push(op);
    }

    fn translate(&mut self, new: bool, r: &RouteMsg<'_>, ifs: &IfMap) -> Translated {
        let c = &mut self.counters;
        if r.table != self.table {
            c.ignored_table += 1;
            return Translated::Skip;
        }
        // A delete may leave the type unsaid: zebra's RTM_DELROUTE carries
        // RTN_UNSPEC (rt_netlink.c sets rtm_type for new routes only),
        // as `ip route del` does.
        let any_type = !new && r.kind == nl::RTN_UNSPEC;
        if r.flags & nl::RTM_F_CLONED != 0
            || !(any_type
                || matches!(r.kind, nl::RTN_UNICAST | nl::RTN_BLACKHOLE | nl::RTN_UNREACHABLE | nl::RTN_PROHIBIT))
        {
            c.ignored_type += 1;
            return Translated::Skip;
        }
        if r.src_len != 0 {
            c.ignored_source_specific += 1;
            return Translated::Skip;
        }
        if self.skip_protocols.contains(&r.protocol) {
            c.ignored_protocol += 1;
            return Translated::Skip;
        }
        let Some(prefix) = Prefix::new_truncated(r.dst.unwrap_or(unspecified(r.family)), r.dst_len) else {
            c.malformed += 1;
            return Translated::Skip;
        };
        if !new {
            if let Some(t) = self.delete_member(prefix, r, ifs) {
                return t;
            }
            self.v6_paths.remove(&(prefix, r.priority));
            return self.delete(prefix, r.priority, ifs);
        }
        if self.track_metrics && !prefix.is_v4() {
            match r.paths().collect::<Result<Vec<_>, _>>() {
                Ok(v) if v.len() > 1 => drop(self.v6_paths.insert((prefix, r.priority), v)),
                _ => drop(self.v6_paths.remove(&(prefix, r.priority))),
            }
        }
        let want = match r.kind {
            nl::RTN_BLACKHOLE => Want::Target(RouteTarget::Blackhole),
            nl::RTN_UNREACHABLE => Want::Target(RouteTarget::Unreachable),
            nl::RTN_PROHIBIT => Want::Target(RouteTarget::Prohibit),
            _ => match r.nh_id {
                // Prefer the object when we know it (the kernel also
                // expands it in compat mode; zebra does not).
                Some(id) if self.nhgs.contains_key(&id) => Want::Nh(id),
                Some(_) if r.oif.is_none() && r.multipath.is_none() => {
                    c.unknown_nexthop += 1;
                    return Translated::Skip;
                }
                _ => match self.direct_target(&prefix, r, ifs) {
                    Ok(t) => Want::Target(t),
                    Err(()) => return self.drop_existing(prefix, r.priority, ifs),
                },
            },
        };
        self.install(prefix, r.priority, want, ifs)
    }

    /// The kernel's delete of one member of an IPv6 multipath route: the
    /// route stays with the others. None when the message deletes a whole
    /// route.
    fn delete_member(&mut self, prefix: Prefix, r: &RouteMsg<'_>, ifs: &IfMap) -> Option<Translated> {
        if !self.track_metrics || prefix.is_v4() || r.multipath.is_some() || r.nh_id.is_some() {
            return None;
        }
        let key = (prefix, r.priority);
        let paths = self.v6_paths.get_mut(&key)?;
        let pos = paths.iter().position(|p| p.gateway == r.gateway && Some(p.ifindex) == r.oif)?;
        paths.remove(pos);
        let rest = paths.clone();
        if rest.len() < 2 {
            self.v6_paths.remove(&key);
        }
        let Ok(t) = self.members_target(&prefix, rest.into_iter().map(Ok), ifs) else {
            // What is left leaves through no interface tern drives.
            return Some(self.delete(prefix, r.priority, ifs));
        };
        Some(self.install(prefix, r.priority, Want::Target(t), ifs))
    }

    /// A route that now cannot be installed: if an older version of it is
    /// installed, it must go (the kernel replaced it).
    fn drop_existing(&mut self, prefix: Prefix, metric: u32, ifs: &IfMap) -> Translated {
        // Without metric tracking the RIB is the only record: ask it to
        // drop the prefix (a route it never had is not an error there).
        let known = !self.track_metrics || self.multi.get(&prefix).is_some_and(|v| v.iter().any(|(m, _)| *m == metric));
        if known { self.delete(prefix, metric, ifs) } else { Translated::Skip }
    }

    fn direct_target(&mut self, prefix: &Prefix, r: &RouteMsg<'_>, ifs: &IfMap) -> Result<RouteTarget, ()> {
        let c = &mut self.counters;
        if r.multipath.is_none() {
            let t = match (r.gateway, r.oif) {
                (gw, Some(oif)) => match ifs.get(oif) {
                    Some(i) => match gw {
                        Some(gw) => RouteTarget::Via { gw, ifindex: Some(i) },
                        None => RouteTarget::Connected { ifindex: i },
                    },
                    None => {
                        c.ignored_foreign_if += 1;
                        return Err(());
                    }
                },
                (Some(gw), None) => RouteTarget::Via { gw, ifindex: None },
                (None, None) => {
                    c.malformed += 1;
                    return Err(());
                }
            };
            if let RouteTarget::Via { gw, .. } = t
                && gw.is_ipv4() != prefix.is_v4()
            {
                c.ignored_family += 1;
                return Err(());
            }
            return Ok(t);
        }
        self.members_target(prefix, r.paths(), ifs)
    }

    /// The target of a multipath route's members.
    fn members_target(
        &mut self,
        prefix: &Prefix,
        paths: impl IntoIterator<Item = Result<PathMsg, WireError>>,
        ifs: &IfMap,
    ) -> Result<RouteTarget, ()> {
        let c = &mut self.counters;
        let mut members = Vec::new();
        let mut foreign = false;
        for p in paths {
            let Ok(p) = p else {
                c.malformed += 1;
                return Err(());
            };
            if p.flags & (nl::RTNH_F_DEAD | nl::RTNH_F_LINKDOWN) != 0 {
                continue;
            }
            let Some(i) = ifs.get(p.ifindex) else {
                foreign = true;
                continue;
            };
            match p.gateway {
                Some(gw) if gw.is_ipv4() == prefix.is_v4() => members.push((gw, Some(i))),
                Some(_) => {}
                None if members.is_empty() => return Ok(RouteTarget::Connected { ifindex: i }),
                None => {}
            }
        }
        match members.len() {
            0 => {
                if foreign {
                    c.ignored_foreign_if += 1;
                } else {
                    c.ignored_family += 1;
                }
                Err(())
            }
            1 => Ok(RouteTarget::Via { gw: members[0].0, ifindex: members[0].1 }),
            _ => {
                members.sort();
                members.dedup();
                Ok(RouteTarget::Ecmp(members))
            }
        }
    }

    /// The target of a next-hop object, or None when it leaves through no
    /// interface tern drives.
    fn resolve_nh(&self, id: u32, prefix: &Prefix, ifs: &IfMap) -> Option<RouteTarget> {
        let one = |gw: Option<IpAddr>, oif: Option<u32>| -> Option<(Option<IpAddr>, Option<u16>)> {
            let i = match oif {
                Some(o) => Some(ifs.get(o)?),
                None => None,
            };
            if let Some(g) = gw
                && g.is_ipv4() != prefix.is_v4()
            {
                return None;
            }
            Some((gw, i))
        };
        match self.nhgs.get(&id)? {
            Nhg::Blackhole => Some(RouteTarget::Blackhole),
            Nhg::One { gw, oif } => match one(*gw, *oif)? {
                (Some(gw), ifindex) => Some(RouteTarget::Via { gw, ifindex }),
                (None, Some(ifindex)) => Some(RouteTarget::Connected { ifindex }),
                (None, None) => None,
            },
            Nhg::Group(members) => {
                let mut v = Vec::new();
                for (m, _w) in members {
                    if let Some(Nhg::One { gw: Some(gw), oif }) = self.nhgs.get(m)
                        && let Some((Some(gw), i)) = one(Some(*gw), *oif)
                    {
                        v.push((gw, i));
                    }
                }
                v.sort();
                v.dedup();
                match v.len() {
                    0 => None,
                    1 => Some(RouteTarget::Via { gw: v[0].0, ifindex: v[0].1 }),
                    _ => Some(RouteTarget::Ecmp(v)),
                }
            }
        }
    }

    fn target_of(&mut self, prefix: &Prefix, want: &Want, ifs: &IfMap) -> Option<RouteTarget> {
        match want {
            Want::Target(t) => Some(t.clone()),
            Want::Nh(id) => {
                let t = self.resolve_nh(*id, prefix, ifs);
                if t.is_none() {
                    self.counters.ignored_foreign_if += 1;
                }
                t
            }
        }
    }

    fn add_op(&self, prefix: Prefix, target: RouteTarget, metric: u32) -> RouteOp {
        RouteOp::Add(self.source, prefix, target, RouteAttrs { distance: None, metric })
    }

    fn install(&mut self, prefix: Prefix, metric: u32, want: Want, ifs: &IfMap) -> Translated {
        let target = self.target_of(&prefix, &want, ifs);
        if !self.track_metrics {
            match &want {
                Want::Nh(id) => self.log_nh(prefix, *id, metric),
                Want::Target(_) => self.log_nh(prefix, 0, 0),
            }
            return match target {
                Some(t) => Translated::Op(self.add_op(prefix, t, metric)),
                // A route through an object with no usable next hop:
                // remove an older version (the RIB forgives a missing one).
                None => Translated::Op(RouteOp::Del(self.source, prefix)),
            };
        }
        let v = self.multi.entry(prefix).or_default();
        match v.iter_mut().find(|(m, _)| *m == metric) {
            Some(slot) => slot.1 = want.clone(),
            None => {
                v.push((metric, want.clone()));
                v.sort_by_key(|(m, _)| *m);
            }
        }
        let best = v.first().map(|(m, _)| *m);
        if best != Some(metric) {
            // A worse route waits behind the installed one.
            return Translated::Skip;
        }
        match target {
            Some(t) => Translated::Op(self.add_op(prefix, t, metric)),
            None => Translated::Op(RouteOp::Del(self.source, prefix)),
        }
    }

    fn delete(&mut self, prefix: Prefix, metric: u32, ifs: &IfMap) -> Translated {
        if !self.track_metrics {
            self.log_nh(prefix, 0, 0);
            return Translated::Op(RouteOp::Del(self.source, prefix));
        }
        let Some(v) = self.multi.get_mut(&prefix) else {
            // Never installed (ignored when added).
            return Translated::Skip;
        };
        let Some(pos) = v.iter().position(|(m, _)| *m == metric) else { return Translated::Skip };
        v.remove(pos);
        if pos != 0 {
            return Translated::Skip;
        }
        match v.first().cloned() {
            None => {
                self.multi.remove(&prefix);
                Translated::Op(RouteOp::Del(self.source, prefix))
            }
            Some((m, want)) => {
                // The route that waited behind the deleted one takes over.
                match self.target_of(&prefix, &want, ifs) {
                    Some(t) => Translated::Op(self.add_op(prefix, t, m)),
                    None => Translated::Op(RouteOp::Del(self.source, prefix)),
                }
            }
        }
    }

    /// Drops every route naming next-hop object `id` (not the groups
    /// containing it: Linux updates those).
    fn forget_routes_on(&mut self, id: u32, ifs: &IfMap, out: &mut Vec<RouteOp>) {
        let hit: Vec<Prefix> =
            self.multi.iter().filter(|(_, v)| v.iter().any(|(_, w)| *w == Want::Nh(id))).map(|(p, _)| *p).collect();
        for p in hit {
            let Some(v) = self.multi.get_mut(&p) else { continue };
            let was_best = matches!(v.first(), Some((_, Want::Nh(i))) if *i == id);
            v.retain(|(_, w)| *w != Want::Nh(id));
            let op = match v.first().cloned() {
                None => {
                    self.multi.remove(&p);
                    Some(RouteOp::Del(self.source, p))
                }
                Some(_) if !was_best => None,
                Some((m, want)) => Some(match self.target_of(&p, &want, ifs) {
                    Some(t) => self.add_op(p, t, m),
                    None => RouteOp::Del(self.source, p),
                }),
            };
            if let Some(op) = op {
                self.push(op, out);
            }
        }
    }

    /// RTM_NEWNEXTHOP / RTM_DELNEXTHOP. Routes using a changed object (or
    /// a group containing it) are re-resolved.
    pub fn nexthop(&mut self, new: bool, payload: &[u8], ifs: &IfMap, out: &mut Vec<RouteOp>) {
        self.counters.nexthop_msgs += 1;
        let n = match NexthopMsg::parse(payload) {
            Ok(n) => n,
            Err(_) => {
                self.counters.malformed += 1;
                return;
            }
        };
        let nhg = if n.group.is_some() {
            Nhg::Group(n.group().collect())
        } else if n.blackhole {
            Nhg::Blackhole
        } else {
            Nhg::One { gw: n.gateway, oif: n.oif }
        };
        let changed = if new {
            self.nhgs.insert(n.id, nhg.clone()).is_some_and(|old| old != nhg)
        } else {
            self.nhgs.remove(&n.id).is_some()
        };
        if !new && changed && self.track_metrics {
            // Linux removed every route naming the object (IPv4 ones
            // without an RTM_DELROUTE): forget them; where one was
            // installed, the route waiting behind it takes over.
            self.forget_routes_on(n.id, ifs, out);
        }
        self.counters.nexthop_objects = self.nhgs.len() as u64;
        if !changed {
            return;
        }
        // Affected objects: this one and every group containing it.
        let mut ids = vec![n.id];
        for (gid, g) in &self.nhgs {
            if let Nhg::Group(m) = g
                && m.iter().any(|(id, _)| *id == n.id)
            {
                ids.push(*gid);
            }
        }
        let affected: Vec<(Prefix, u32, u32)> = if self.track_metrics {
            self.multi
                .iter()
                .filter_map(|(p, v)| match v.first() {
                    Some((m, Want::Nh(id))) if ids.contains(id) => Some((*p, *id, *m)),
                    _ => None,
                })
                .collect()
        } else {
            // Reading the log compacts it too.
            let latest = self.latest_nh();
            self.nh_log = latest.iter().map(|(p, (id, m))| (*p, *id, *m)).collect();
            self.nh_log_compact_at = (self.nh_log.len() * 4).max(NH_LOG_MIN);
            self.nh_log.iter().filter(|(_, id, _)| ids.contains(id)).copied().collect()
        };
        for (p, id, m) in affected {
            self.counters.reresolved += 1;
            let op = match self.resolve_nh(id, &p, ifs) {
                Some(t) => self.add_op(p, t, m),
                None => RouteOp::Del(self.source, p),
            };
            self.push(op, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::nl::{NexthopSpec, NlBuilder, NlMessages, RTM_DELROUTE, RTM_NEWNEXTHOP, RTM_NEWROUTE, RouteSpec};

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }
    fn pfx(s: &str) -> Prefix {
        s.parse().expect("prefix")
    }
    fn ifs() -> IfMap {
        let mut m = IfMap::default();
        m.insert(7, 0);
        m.insert(8, 1);
        m
    }

    /// Feeds every message of `b` to `s`, returning the operations.
    fn feed(s: &mut RouteSync, b: &NlBuilder) -> Vec<RouteOp> {
        let mut out = Vec::new();
        for m in NlMessages::new(&b.buf) {
            let m = m.expect("message");
            match m.ty {
                RTM_NEWROUTE | RTM_DELROUTE => s.route(m.ty == RTM_NEWROUTE, m.payload, &ifs(), &mut out),
                _ => s.nexthop(m.ty == RTM_NEWNEXTHOP, m.payload, &ifs(), &mut out),
            }
        }
        out
    }

    fn add(p: &str, t: RouteTarget, metric: u32, s: Source) -> RouteOp {
        RouteOp::Add(s, pfx(p), t, RouteAttrs { distance: None, metric })
    }

    #[test]
    fn unicast_routes_map_interfaces_and_filter() {
        let mut s = RouteSync::new(Source::Fpm, nl::RT_TABLE_MAIN, false);
        let mut b = NlBuilder::new();
        b.route(RTM_NEWROUTE, 1, &RouteSpec::unicast(ip("10.1.0.0"), 16, vec![(Some(ip("10.0.0.2")), 7)]));
        b.route(RTM_NEWROUTE, 2, &RouteSpec::unicast(ip("10.9.0.0"), 16, vec![(Some(ip("192.0.2.1")), 99)]));
        let mut other = RouteSpec::unicast(ip("10.2.0.0"), 16, vec![(Some(ip("10.0.0.2")), 7)]);
        other.table = 100;
        b.route(RTM_NEWROUTE, 3, &other);
        let mut local = RouteSpec::unicast(ip("10.0.0.1"), 32, vec![(None, 7)]);
        local.kind = nl::RTN_LOCAL;
        b.route(RTM_NEWROUTE, 4, &local);
        let mut bh = RouteSpec::unicast(ip("192.0.2.0"), 24, vec![]);
        bh.kind = nl::RTN_BLACKHOLE;
        b.route(RTM_NEWROUTE, 5, &bh);
        b.route(RTM_NEWROUTE, 6, &RouteSpec::unicast(ip("10.3.0.0"), 16, vec![(Some(ip("fe80::1")), 7)]));
        b.route(RTM_NEWROUTE, 7, &RouteSpec::unicast(ip("10.0.0.0"), 24, vec![(None, 8)]));
        b.route(RTM_DELROUTE, 8, &RouteSpec::unicast(ip("10.1.0.0"), 16, vec![(Some(ip("10.0.0.2")), 7)]));
        let ops = feed(&mut s, &b);
        let via = RouteTarget::Via { gw: ip("10.0.0.2"), ifindex: Some(0) };
        assert_eq!(
            ops,
            vec![
                add("10.1.0.0/16", via, 20, Source::Fpm),
                // Through a device tern does not drive: an older version
                // must go, so a delete (harmless when absent).
                RouteOp::Del(Source::Fpm, pfx("10.9.0.0/16")),
                add("192.0.2.0/24", RouteTarget::Blackhole, 20, Source::Fpm),
                RouteOp::Del(Source::Fpm, pfx("10.3.0.0/16")),
                add("10.0.0.0/24", RouteTarget::Connected { ifindex: 1 }, 20, Source::Fpm),
                RouteOp::Del(Source::Fpm, pfx("10.1.0.0/16")),
            ]
        );
        let c = &s.counters;
        assert_eq!((c.ignored_foreign_if, c.ignored_table, c.ignored_type, c.ignored_family), (1, 1, 1, 1));
        assert_eq!(c.route_msgs, 8);
    }

    #[test]
    fn multipath_becomes_ecmp_without_foreign_or_dead_members() {
        let mut s = RouteSync::new(Source::Kernel, nl::RT_TABLE_MAIN, true);
        let mut b = NlBuilder::new();
        b.route(
            RTM_NEWROUTE,
            1,
            &RouteSpec::unicast(
                ip("2001:db8::"),
                32,
                vec![(Some(ip("fe80::2")), 8), (Some(ip("fe80::1")), 7), (Some(ip("fe80::3")), 55)],
            ),
        );
        let ops = feed(&mut s, &b);
        let t = RouteTarget::Ecmp(vec![(ip("fe80::1"), Some(0)), (ip("fe80::2"), Some(1))]);
        assert_eq!(ops, vec![add("2001:db8::/32", t, 20, Source::Kernel)]);
    }

    #[test]
    fn next_hop_groups_resolve_and_follow_changes() {
        let mut s = RouteSync::new(Source::Fpm, nl::RT_TABLE_MAIN, false);
        let mut b = NlBuilder::new();
        let nh = |id, gw: &str, oif| NexthopSpec { id, gateway: Some(ip(gw)), oif: Some(oif), ..Default::default() };
        b.nexthop(RTM_NEWNEXTHOP, 1, &nh(1, "10.0.0.2", 7));
        b.nexthop(RTM_NEWNEXTHOP, 2, &nh(2, "10.0.1.2", 8));
        b.nexthop(RTM_NEWNEXTHOP, 3, &NexthopSpec { id: 10, group: vec![(1, 1), (2, 1)], ..Default::default() });
        let mut r = RouteSpec::unicast(ip("198.51.100.0"), 24, vec![]);
        r.nh_id = Some(10);
        b.route(RTM_NEWROUTE, 4, &r);
        let mut r1 = RouteSpec::unicast(ip("203.0.113.0"), 24, vec![]);
        r1.nh_id = Some(1);
        b.route(RTM_NEWROUTE, 5, &r1);
        let mut unknown = RouteSpec::unicast(ip("203.0.114.0"), 24, vec![]);
        unknown.nh_id = Some(77);
        b.route(RTM_NEWROUTE, 6, &unknown);
        let ops = feed(&mut s, &b);
        let ecmp = RouteTarget::Ecmp(vec![(ip("10.0.0.2"), Some(0)), (ip("10.0.1.2"), Some(1))]);
        let one = RouteTarget::Via { gw: ip("10.0.0.2"), ifindex: Some(0) };
        assert_eq!(
            ops,
            vec![add("198.51.100.0/24", ecmp, 20, Source::Fpm), add("203.0.113.0/24", one, 20, Source::Fpm)]
        );
        assert_eq!(s.counters.unknown_nexthop, 1);
        assert_eq!(s.nh_routes(), 2);

        // Member 1 moves to another gateway: both routes using it follow.
        let mut b = NlBuilder::new();
        b.nexthop(RTM_NEWNEXTHOP, 7, &nh(1, "10.0.0.3", 7));
        let mut ops = feed(&mut s, &b);
        ops.sort_by_key(|o| format!("{o:?}"));
        let ecmp = RouteTarget::Ecmp(vec![(ip("10.0.0.3"), Some(0)), (ip("10.0.1.2"), Some(1))]);
        let one = RouteTarget::Via { gw: ip("10.0.0.3"), ifindex: Some(0) };
        assert_eq!(
            ops,
            vec![add("198.51.100.0/24", ecmp, 20, Source::Fpm), add("203.0.113.0/24", one, 20, Source::Fpm)]
        );
        // The same object again changes nothing.
        assert!(feed(&mut s, &b).is_empty());
    }

    #[test]
    fn kernel_metrics_keep_the_best_and_fall_back() {
        let mut s = RouteSync::new(Source::Kernel, nl::RT_TABLE_MAIN, true);
        let route = |gw: &str, metric| {
            let mut r = RouteSpec::unicast(ip("10.5.0.0"), 16, vec![(Some(ip(gw)), 7)]);
            r.priority = metric;
            r
        };
        let via = |gw: &str| RouteTarget::Via { gw: ip(gw), ifindex: Some(0) };
        let mut b = NlBuilder::new();
        b.route(RTM_NEWROUTE, 1, &route("10.0.0.2", 200));
        b.route(RTM_NEWROUTE, 2, &route("10.0.0.3", 100));
        b.route(RTM_NEWROUTE, 3, &route("10.0.0.4", 300));
        assert_eq!(
            feed(&mut s, &b),
            vec![
                add("10.5.0.0/16", via("10.0.0.2"), 200, Source::Kernel),
                add("10.5.0.0/16", via("10.0.0.3"), 100, Source::Kernel)
            ],
            "the worse route waits"
        );
        let mut b = NlBuilder::new();
        b.route(RTM_DELROUTE, 4, &route("10.0.0.4", 300));
        assert!(feed(&mut s, &b).is_empty(), "deleting a waiting route changes nothing");
        b.route(RTM_DELROUTE, 5, &route("10.0.0.3", 100));
        assert_eq!(feed(&mut s, &b), vec![add("10.5.0.0/16", via("10.0.0.2"), 200, Source::Kernel)]);
        let mut b = NlBuilder::new();
        b.route(RTM_DELROUTE, 6, &route("10.0.0.2", 200));
        assert_eq!(feed(&mut s, &b), vec![RouteOp::Del(Source::Kernel, pfx("10.5.0.0/16"))]);
        let mut b = NlBuilder::new();
        b.route(RTM_DELROUTE, 7, &route("10.0.0.2", 200));
        assert!(feed(&mut s, &b).is_empty(), "unknown route: nothing to delete");
    }

    /// `ip -6 route del P via G dev D` on a multipath route: Linux deletes
    /// that member only and says so with an RTM_DELROUTE naming it alone;
    /// the route stays with the others. A delete of the whole route names
    /// them all (RTA_MULTIPATH).
    #[test]
    fn kernel_ipv6_member_delete_keeps_the_route() {
        let mut s = RouteSync::new(Source::Kernel, nl::RT_TABLE_MAIN, true);
        let route = |paths: Vec<(Option<IpAddr>, u32)>| {
            let mut r = RouteSpec::unicast(ip("2001:db8:5::"), 48, paths);
            r.priority = 1024;
            r.protocol = nl::RTPROT_BOOT;
            r
        };
        let (g2, g3, g4) = (Some(ip("fd00::2")), Some(ip("fd00::3")), Some(ip("fd00::4")));
        let mut b = NlBuilder::new();
        b.route(RTM_NEWROUTE, 1, &route(vec![(g2, 7), (g3, 7), (g4, 8)]));
        let ecmp = |v: &[(&str, u16)]| RouteTarget::Ecmp(v.iter().map(|(g, i)| (ip(g), Some(*i))).collect());
        let all = ecmp(&[("fd00::2", 0), ("fd00::3", 0), ("fd00::4", 1)]);
        assert_eq!(feed(&mut s, &b), vec![add("2001:db8:5::/48", all, 1024, Source::Kernel)]);
        let mut b = NlBuilder::new();
        b.route(RTM_DELROUTE, 2, &route(vec![(g3, 7)]));
        let two = ecmp(&[("fd00::2", 0), ("fd00::4", 1)]);
        assert_eq!(feed(&mut s, &b), vec![add("2001:db8:5::/48", two, 1024, Source::Kernel)]);
        let mut b = NlBuilder::new();
        b.route(RTM_DELROUTE, 3, &route(vec![(g2, 7)]));
        let one = RouteTarget::Via { gw: ip("fd00::4"), ifindex: Some(1) };
        assert_eq!(feed(&mut s, &b), vec![add("2001:db8:5::/48", one, 1024, Source::Kernel)]);
        // The last member: the route goes.
        let mut b = NlBuilder::new();
        b.route(RTM_DELROUTE, 4, &route(vec![(g4, 8)]));
        assert_eq!(feed(&mut s, &b), vec![RouteOp::Del(Source::Kernel, pfx("2001:db8:5::/48"))]);
        // A whole multipath route deleted at once.
        let mut b = NlBuilder::new();
        b.route(RTM_NEWROUTE, 5, &route(vec![(g2, 7), (g3, 7)]));
        b.route(RTM_DELROUTE, 6, &route(vec![(g2, 7), (g3, 7)]));
        let ops = feed(&mut s, &b);
        assert_eq!(ops.last(), Some(&RouteOp::Del(Source::Kernel, pfx("2001:db8:5::/48"))));
        assert!(s.v6_paths.is_empty());
    }

    /// `ip nexthop del id N` removes the routes naming N (IPv4 ones
    /// silently): a route waiting behind one of them takes over.
    #[test]
    fn kernel_nexthop_delete_uncovers_the_waiting_route() {
        let mut s = RouteSync::new(Source::Kernel, nl::RT_TABLE_MAIN, true);
        let mut b = NlBuilder::new();
        b.nexthop(
            RTM_NEWNEXTHOP,
            1,
            &NexthopSpec { id: 5, gateway: Some(ip("10.0.0.2")), oif: Some(7), ..Default::default() },
        );
        let mut r = RouteSpec::unicast(ip("10.6.0.0"), 16, vec![]);
        r.nh_id = Some(5);
        r.priority = 100;
        b.route(RTM_NEWROUTE, 2, &r);
        let mut backup = RouteSpec::unicast(ip("10.6.0.0"), 16, vec![(Some(ip("10.0.1.2")), 8)]);
        backup.priority = 200;
        b.route(RTM_NEWROUTE, 3, &backup);
        let mut only = RouteSpec::unicast(ip("10.7.0.0"), 16, vec![]);
        only.nh_id = Some(5);
        b.route(RTM_NEWROUTE, 4, &only);
        let ops = feed(&mut s, &b);
        assert_eq!(ops.len(), 2, "{ops:?}");
        let mut b = NlBuilder::new();
        b.nexthop(nl::RTM_DELNEXTHOP, 5, &NexthopSpec { id: 5, ..Default::default() });
        let mut ops = feed(&mut s, &b);
        ops.sort_by_key(|o| format!("{o:?}"));
        let backup_via = RouteTarget::Via { gw: ip("10.0.1.2"), ifindex: Some(1) };
        assert_eq!(
            ops,
            vec![add("10.6.0.0/16", backup_via, 200, Source::Kernel), RouteOp::Del(Source::Kernel, pfx("10.7.0.0/16"))]
        );
        // The backup's own delete later removes the prefix.
        let mut b = NlBuilder::new();
        b.route(RTM_DELROUTE, 6, &backup);
        assert_eq!(feed(&mut s, &b), vec![RouteOp::Del(Source::Kernel, pfx("10.6.0.0/16"))]);
        assert_eq!(s.nh_routes(), 0);
    }

    #[test]
    fn skipped_protocols_and_malformed_messages_are_counted() {
        let mut s = RouteSync::new(Source::Kernel, nl::RT_TABLE_MAIN, true);
        s.set_skip_protocols(vec![186]);
        let mut b = NlBuilder::new();
        b.route(RTM_NEWROUTE, 1, &RouteSpec::unicast(ip("10.1.0.0"), 16, vec![(Some(ip("10.0.0.2")), 7)]));
        assert!(feed(&mut s, &b).is_empty());
        assert_eq!(s.counters.ignored_protocol, 1);
        let mut out = Vec::new();
        s.route(true, &[1, 2, 3], &ifs(), &mut out);
        s.nexthop(true, &[0; 8], &ifs(), &mut out);
        assert!(out.is_empty());
        assert_eq!(s.counters.malformed, 2);
    }
}

/// Byte-exact messages from FRR zebra 8.4.4 (`dplane_fpm_nl`, next-hop
/// groups on, its default), captured in the scripts/frr/lab.sh lab when
/// BIRD withdrew its routes: one FPM frame per string; kernel ifindex 3
/// is `ri1`, 4 is `ri2`.
#[cfg(test)]
mod zebra {
    use super::*;
    use crate::linux::fpm::Frames;
    use crate::linux::nl::{NlMessages, RTM_DELNEXTHOP, RTM_DELROUTE, RTM_NEWNEXTHOP, RTM_NEWROUTE};

    /// NEWNEXTHOP id 20: via 10.2.0.2 dev 3.
    const NH20: &str =
        "01010034300000006800010500000000ad96608c02000b00000000000800010014000000080006000a0200020800050003000000";
    /// NEWNEXTHOP id 22: via fe80::10a1:38ff:feb0:bc5b dev 3.
    const NH22: &str = "010100403c0000006800010500000000ad96608c0a000b0000000000080001001600000014000600fe80000000000000\
                        10a138fffeb0bc5b0800050003000000";
    /// NEWNEXTHOP id 26: via 10.3.0.2 dev 4.
    const NH26: &str =
        "01010034300000006800010500000000ad96608c02000b0000000000080001001a000000080006000a0300020800050004000000";
    /// NEWROUTE 203.0.113.0/24 proto bgp metric 20 nhid 20 (NLM_F_REPLACE).
    const ADD4: &str = "01010038340000001800010500000000ad96608c02180000feba00010000000008000100cb0071000800060014000000\
                        08001e0014000000";
    /// NEWROUTE 2001:db8:113::/48 proto bgp metric 20 nhid 22.
    const ADD6: &str = "01010044400000001800010400000000ad96608c0a300000feba0001000000001400010020010db8011300000000000000\
                        000000080006001400000008001e0016000000";
    /// The primary withdrew: an update in one frame, DELROUTE
    /// 203.0.113.0/24 (rtm_type RTN_UNSPEC) then NEWROUTE nhid 26.
    const UPDATE4: &str = "010100642c0000001900010400000000ad96608c02180000feba00000000000008000100cb00710008000600140000\
                           00340000001800010500000000ad96608c02180000feba00010000000008000100cb007100080006001400000008\
                           001e001a000000";
    /// DELNEXTHOP id 20 (family AF_UNSPEC, NHA_ID only).
    const DELNH20: &str = "01010024200000006900010400000000ad96608c00000000000000000800010014000000";
    /// Both withdrew: DELROUTE 203.0.113.0/24 proto bgp, rtm_type
    /// RTN_UNSPEC, RTA_DST and RTA_PRIORITY only.
    const DEL4: &str =
        "010100302c0000001900010400000000ad96608c02180000feba00000000000008000100cb0071000800060014000000";
    /// DELROUTE 2001:db8:113::/48, the same way.
    const DEL6: &str = "0101003c380000001900010400000000ad96608c0a300000feba0000000000001400010020010db80113000000000000\
                        000000000800060014000000";

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
    }

    fn ifs() -> IfMap {
        let mut m = IfMap::default();
        m.insert(3, 1);
        m.insert(4, 2);
        m
    }

    /// Feeds FPM frames as the FPM server does: routes and next-hop objects.
    fn feed(s: &mut RouteSync, frames: &[&str]) -> Vec<RouteOp> {
        let mut out = Vec::new();
        for f in frames {
            let bytes = hex(f);
            let mut n = 0;
            for fr in Frames::new(&bytes) {
                let (_, body) = fr.expect("frame");
                for m in NlMessages::new(body) {
                    let m = m.expect("message");
                    n += 1;
                    match m.ty {
                        RTM_NEWROUTE | RTM_DELROUTE => s.route(m.ty == RTM_NEWROUTE, m.payload, &ifs(), &mut out),
                        RTM_NEWNEXTHOP | RTM_DELNEXTHOP => {
                            s.nexthop(m.ty == RTM_NEWNEXTHOP, m.payload, &ifs(), &mut out)
                        }
                        t => panic!("unexpected message type {t}"),
                    }
                }
            }
            assert!(n > 0, "no message in {f}");
        }
        out
    }

    fn add(p: &str, gw: &str, ifindex: u16) -> RouteOp {
        RouteOp::Add(
            Source::Fpm,
            p.parse().expect("prefix"),
            RouteTarget::Via { gw: gw.parse().expect("gw"), ifindex: Some(ifindex) },
            RouteAttrs { distance: None, metric: 20 },
        )
    }

    fn del(p: &str) -> RouteOp {
        RouteOp::Del(Source::Fpm, p.parse().expect("prefix"))
    }

    #[test]
    fn zebra_withdrawals_leave_the_rib() {
        let mut s = RouteSync::new(Source::Fpm, nl::RT_TABLE_MAIN, false);
        let ops = feed(&mut s, &[NH20, NH22, ADD4, ADD6]);
        assert_eq!(
            ops,
            vec![add("203.0.113.0/24", "10.2.0.2", 1), add("2001:db8:113::/48", "fe80::10a1:38ff:feb0:bc5b", 1)]
        );
        // The withdrawals, IPv4 and IPv6: zebra's RTM_DELROUTE says
        // RTN_UNSPEC and names no next hop.
        assert_eq!(feed(&mut s, &[DEL4, DEL6]), vec![del("203.0.113.0/24"), del("2001:db8:113::/48")]);
        assert_eq!(s.counters.dels, 2);
        assert_eq!(s.counters.ignored_type, 0, "{:?}", s.counters);
        assert_eq!(s.nh_routes(), 0, "no route is left on a next-hop object");
    }

    #[test]
    fn zebra_update_is_a_delete_and_an_add_in_one_frame() {
        let mut s = RouteSync::new(Source::Fpm, nl::RT_TABLE_MAIN, false);
        feed(&mut s, &[NH20, ADD4, NH26]);
        // One frame: the old version goes and the new one comes (the FPM
        // server hands a frame's operations to the RIB in one batch).
        let ops = feed(&mut s, &[UPDATE4]);
        // (The delete and the add collapse into the add, which replaces.)
        assert_eq!(ops, vec![add("203.0.113.0/24", "10.3.0.2", 2)]);
        // The old object goes: nothing uses it any more, nothing changes.
        assert!(feed(&mut s, &[DELNH20]).is_empty());
        assert_eq!(s.counters.nexthop_objects, 1);
        // The secondary withdraws too: the prefix leaves.
        assert_eq!(feed(&mut s, &[DEL4]), vec![del("203.0.113.0/24")]);
        assert_eq!(s.counters.ignored_type, 0, "{:?}", s.counters);
    }
}
