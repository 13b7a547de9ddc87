//! The control-thread side: the RIB (every route of every source) and the
//! code that keeps the FIB equal to the best active route of each prefix.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use rustc_hash::FxBuildHasher;

use crate::changes::FibChanges;
use crate::connected::Connected;
use crate::lpm::multibit::Walk;
use crate::lpm::{V4_TOP, V4Writer, V6_TOP, V6Writer};
use crate::nexthop::NhAlloc;
use crate::prefix::Prefix;
use crate::reader::Shared;
use crate::reclaim::{Garbage, Reclaimer};
use crate::rib::{Rib, RibEntry, RibSlot, TargetId, Targets};
use crate::tunnel::{Tunnel, TunnelAdj};
use crate::types::{
    ApplyReport, FibConfig, FibError, FibStats, NH_NONE, NextHop, NhId, NhKind, RouteAttrs, RouteDetail, RouteOp,
    RouteTarget, Source,
};

/// How many operations ahead [`FibWriter::apply`] prefetches.
///
/// 16 measured no better (`cargo bench -p tern-bench --bench fib_bench -- TABLE --updates v4|v6 100000`, 4
/// alternating pairs, 2026-11-23: batched IPv4 2.04 against 2.19 M ops/s
/// with 8, IPv6 1.52 against 1.58; docs/PERFORMANCE.md).
pub(crate) const APPLY_AHEAD: usize = 8;

/// What recomputing a prefix's best route found.
struct Settle {
    old_best: NhId,
    best: NhId,
    old_conn: Option<u16>,
    conn: Option<u16>,
    /// No route left: the caller removes the slot.
    empty: bool,
}

/// Recomputes the best route and the connected role of a slot.
fn settle(slot: &mut RibSlot, targets: &Targets) -> Settle {
    let best = slot.best_index().and_then(|i| slot.entries.as_slice().get(i)).map_or(NH_NONE, |e| e.nh);
    let conn = slot
        .entries
        .as_slice()
        .iter()
        .filter_map(|e| match targets.get(e.target) {
            Some(RouteTarget::Connected { ifindex }) => Some((e.rank(), *ifindex)),
            _ => None,
        })
        .min()
        .map(|(_, i)| i);
    Settle {
        old_best: std::mem::replace(&mut slot.installed, best),
        best,
        old_conn: std::mem::replace(&mut slot.connected, conn),
        conn,
        empty: slot.entries.is_empty(),
    }
}

/// What the FIB holds for a prefix given as trie bits (for the trie to
/// find what replaces a deleted prefix).
fn installed(rib: &Rib, bits: u128, len: u8, v4: bool) -> Option<NhId> {
    let p = if v4 {
        Prefix::V4 { addr: Ipv4Addr::from((bits >> 96) as u32), len }
    } else {
        Prefix::V6 { addr: Ipv6Addr::from(bits), len }
    };
    rib.get(&p).map(|s| s.installed).filter(|&nh| nh != NH_NONE)
}

/// The single writer of a FIB. Every call publishes its effect before it
/// returns: a lookup started afterwards sees it.
pub struct FibWriter {
    shared: Arc<Shared>,
    cfg: FibConfig,
    rib: Rib,
    targets: Targets,
    rib_entries: usize,
    /// Heap bytes of the RIB's spilled entry lists (prefixes with two or
    /// more routes), kept as they change so that [`FibWriter::stats`]
    /// needs no walk of the RIB (a full table: ~10 ms, and the daemon
    /// asks every 200 ms).
    rib_heap: usize,
    nh: NhAlloc,
    v4: V4Writer,
    v6: V6Writer,
    reclaim: Reclaimer,
    /// Connected subnets (prefix -> ifindex), tunnel host routes included.
    connected: Connected,
    /// Routes whose gateway is resolved through the connected routes, by
    /// gateway, so a connected change re-resolves only those.
    via_deps: HashMap<IpAddr, HashSet<(Prefix, Source), FxBuildHasher>, FxBuildHasher>,
    epochs: [u16; Source::ALL.len()],
    stats: FibStats,
    reclaimed: Vec<Garbage>,
    /// The tunnels readers find stacked adjacencies for (`tunnel.rs`).
    tunnels: Vec<Tunnel>,
}

fn unspecified(p: &Prefix) -> IpAddr {
    if p.is_v4() { IpAddr::V4(Ipv4Addr::UNSPECIFIED) } else { IpAddr::V6(Ipv6Addr::UNSPECIFIED) }
}

fn same_family(p: &Prefix, gw: &IpAddr) -> bool {
    p.is_v4() == gw.is_ipv4()
}

impl FibWriter {
    pub(crate) fn new(cfg: FibConfig, shared: Arc<Shared>) -> FibWriter {
        let reclaim = Reclaimer::new(shared.domain.clone());
        let v4 = V4Writer::new(false, &shared.v4);
        let v6 = V6Writer::new(true, &shared.v6);
        FibWriter {
            shared,
            cfg,
            rib: Rib::default(),
            targets: Targets::default(),
            rib_entries: 0,
            rib_heap: 0,
            nh: NhAlloc::new(),
            v4,
            v6,
            reclaim,
            connected: Connected::default(),
            via_deps: HashMap::default(),
            epochs: [0; Source::ALL.len()],
            stats: FibStats::default(),
            reclaimed: Vec::new(),
            tunnels: Vec::new(),
        }
    }

    /// Adds or replaces the route of source `s` for prefix `p`.
    pub fn add_route(&mut self, s: Source, p: Prefix, t: RouteTarget, a: RouteAttrs) -> Result<(), FibError> {
        self.prefetch_single(&p);
        let r = self.add_inner(s, p, t, a);
        self.count(&r);
        let c = self.commit();
        r.and(c)
    }

    /// Removes the route of source `s` for prefix `p`; the next best route
    /// of another source (if any) takes over.
    pub fn del_route(&mut self, s: Source, p: Prefix) -> Result<(), FibError> {
        self.prefetch_single(&p);
        let r = self.del_inner(s, p);
        self.count(&r);
        let c = self.commit();
        r.and(c)
    }

    /// Applies a batch and publishes it once. Invalid operations are listed
    /// in the report; the valid ones are applied. A failure to publish
    /// (a full table) is reported at index `ops.len()`.
    ///
    /// Operations are applied in order, but each one's first cache lines
    /// (its RIB cell, the trie's top entry and depth, the present bits a
    /// delete searches) are prefetched eight operations (`APPLY_AHEAD`) before
    /// it is applied, and its path down the trie's blocks one level per
    /// operation applied after that (`MultibitWriter::walk_step`), so that
    /// on a large table the misses of several operations are in flight
    /// together instead of one after another.
    pub fn apply(&mut self, ops: impl IntoIterator<Item = RouteOp>) -> ApplyReport {
        self.apply_logged(ops, None)
    }

    /// Applies a batch all or nothing, published once: if an operation
    /// fails, the batch stops there, every operation up to it is undone
    /// (each route it touched is put back as it was; the batch and its
    /// undoing are published together), and the error is returned with
    /// the operation's index. Ok: how many operations were applied.
    ///
    /// What undoing needs (a route's target and attributes before the
    /// operation) is read when the operation is applied, from the RIB cell
    /// the batch's prefetching has already loaded: no pass of its own
    /// over the RIB.
    pub fn apply_all_or_nothing(&mut self, ops: impl IntoIterator<Item = RouteOp>) -> Result<usize, (usize, FibError)> {
        let mut undo = Vec::new();
        let rep = self.apply_logged(ops, Some(&mut undo));
        let Some((i, e)) = rep.errors.into_iter().next() else {
            return Ok(rep.applied);
        };
        // Newest first, so that a route changed twice in the batch ends as
        // it was before the first change.
        let back = undo.into_iter().rev().map(|(s, p, old)| match old {
            Some((t, a)) => RouteOp::Add(s, p, t, a),
            None => RouteOp::Del(s, p),
        });
        // Putting back a route the FIB held before cannot find it full; a
        // failure here would be counted in `stats().errors`.
        let _ = self.apply(back);
        Err((i, e))
    }

    /// [`FibWriter::apply`], and with `undo`, stops at the first failure and
    /// records before each operation what its route was (see
    /// [`FibWriter::apply_all_or_nothing`]).
    #[allow(clippy::type_complexity)]
    fn apply_logged(
        &mut self,
        ops: impl IntoIterator<Item = RouteOp>,
        mut undo: Option<&mut Vec<(Source, Prefix, Option<(RouteTarget, RouteAttrs)>)>>,
    ) -> ApplyReport {
        let mut rep = ApplyReport::default();
        let mut n = 0;
        let mut ops = ops.into_iter();
        let mut window: VecDeque<(RouteOp, Walk)> = VecDeque::with_capacity(APPLY_AHEAD);
        // Operations in the window whose walk is not done.
        let mut walking = 0usize;
        for i in 0.. {
            while window.len() < APPLY_AHEAD {
                let Some(op) = ops.next() else { break };
                self.prefetch(op.prefix());
                let walk = Walk::new::<V4_TOP, V6_TOP>(op.prefix().is_v4(), op.prefix().len());
                walking += usize::from(!walk.done());
                window.push_back((op, walk));
            }
            let Some((op, w)) = window.pop_front() else { break };
            walking -= usize::from(!w.done());
            // (Nearly every IPv4 prefix ends at the top level: no walk.)
            if walking > 0 {
                for (op, w) in &mut window {
                    if !w.done() {
                        self.walk_step(op.prefix(), w);
                        walking -= usize::from(w.done());
                    }
                }
            }
            n = i + 1;
            if let Some(u) = undo.as_deref_mut() {
                let (s, p) = match &op {
                    RouteOp::Add(s, p, ..) | RouteOp::Del(s, p) => (*s, *p),
                };
                u.push((s, p, self.route_spec(s, p)));
            }
            let r = match op {
                RouteOp::Add(s, p, t, a) => self.add_inner(s, p, t, a),
                RouteOp::Del(s, p) => self.del_inner(s, p),
            };
            self.count(&r);
            match r {
                Ok(()) => rep.applied += 1,
                Err(e) => {
                    rep.failed += 1;
                    rep.errors.push((i, e));
                    if undo.is_some() {
                        break;
                    }
                }
            }
        }
        // A failed all-or-nothing batch is published with its undoing.
        if undo.is_some() && !rep.errors.is_empty() {
            return rep;
        }
        if let Err(e) = self.commit() {
            rep.errors.push((n, e));
        }
        rep
    }

    /// Marks every route of `s`; routes not re-added before
    /// [`FibWriter::end_resync`] are removed then (mark and sweep, as
    /// VPP linux-cp and FRR do after a reconnect).
    pub fn begin_resync(&mut self, s: Source) {
        let e = &mut self.epochs[s.index()];
        *e = e.wrapping_add(1);
    }

    /// Removes the routes of `s` not re-added since `begin_resync(s)`;
    /// returns how many.
    pub fn end_resync(&mut self, s: Source) -> usize {
        let epoch = self.epochs[s.index()];
        let stale: Vec<Prefix> = self
            .rib
            .iter()
            .filter(|(_, slot)| slot.entries.as_slice().iter().any(|e| e.source == s && e.epoch != epoch))
            .map(|(p, _)| p)
            .collect();
        let mut n = 0;
        for p in stale {
            if self.del_inner(s, p).is_ok() {
                n += 1;
                self.stats.dels += 1;
            }
        }
        let _ = self.commit();
        n
    }

    /// Records a neighbour (ARP/ND). `Some(mac)`: the Unicast next hop
    /// (ifindex, ip) gets the MAC in place, and if `ip` is inside a
    /// connected subnet of `ifindex` a host route (Source::Neighbor) to it
    /// is installed. `None`: the MAC is cleared and the host route removed.
    pub fn set_neighbor(&mut self, ifindex: u16, ip: IpAddr, mac: Option<[u8; 6]>) {
        self.nh.set_neighbor(&self.shared.nh, ifindex, ip, mac);
        self.sync_neighbor_route(ifindex, ip, mac.is_some());
        if self.commit().is_err() {
            self.stats.errors += 1;
        }
    }

    /// The route `tern route get` shows: the best route of the longest
    /// installed prefix containing `addr`.
    pub fn route_get(&self, addr: IpAddr) -> Option<RouteDetail> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (0..=max).rev().find_map(|len| {
            let p = Prefix::new_truncated(addr, len)?;
            let slot = self.rib.get(&p)?;
            if slot.installed == NH_NONE {
                return None;
            }
            let i = slot.best_index()?;
            slot.entries.as_slice().get(i).map(|e| self.detail(p, e, true))
        })
    }

    /// The interface whose connected subnet (of any source) holds `addr`:
    /// where a gateway without an interface resolves.
    pub fn connected_interface(&self, addr: IpAddr) -> Option<u16> {
        self.conn_lookup(addr)
    }

    /// The route of source `s` for prefix `p`, if it has one.
    pub fn route(&self, s: Source, p: Prefix) -> Option<RouteDetail> {
        let slot = self.rib.get(&p)?;
        let best = slot.best_index();
        let (i, e) = slot.entries.as_slice().iter().enumerate().find(|(_, e)| e.source == s)?;
        Some(self.detail(p, e, Some(i) == best))
    }

    /// What re-adding the route of source `s` for `p` takes (its target
    /// and attributes, the distance made explicit), if it has one: the
    /// snapshot a caller keeps to undo a batch. Cheaper than
    /// [`FibWriter::route`], which also gathers the next hops.
    pub fn route_spec(&self, s: Source, p: Prefix) -> Option<(RouteTarget, RouteAttrs)> {
        let e = self.rib.get(&p)?.find(s)?;
        let t = self.targets.get(e.target)?.clone();
        Some((t, RouteAttrs { distance: Some(e.distance), metric: e.metric }))
    }

    /// Whether source `s` has a route for `p`.
    pub fn has_route(&self, s: Source, p: Prefix) -> bool {
        self.rib.get(&p).is_some_and(|slot| slot.find(s).is_some())
    }

    /// Every RIB entry in prefix order, the best of each prefix flagged.
    pub fn routes(&self) -> impl Iterator<Item = RouteDetail> + '_ {
        let mut keys: Vec<Prefix> = self.rib.iter().map(|(p, _)| p).collect();
        keys.sort_unstable();
        keys.into_iter().flat_map(move |p| {
            let slot = self.rib.get(&p);
            let best = slot.and_then(RibSlot::best_index);
            let mut v: Vec<RouteDetail> = slot
                .map(|s| {
                    s.entries.as_slice().iter().enumerate().map(|(i, e)| self.detail(p, e, Some(i) == best)).collect()
                })
                .unwrap_or_default();
            v.sort_by_key(|d| (d.distance, d.metric, d.source));
            v
        })
    }

    /// The FIB's sizes and counters. O(1): every figure is a counter or a
    /// capacity kept as the tables change (none walks the RIB or a trie).
    pub fn stats(&self) -> FibStats {
        let mut s = self.stats.clone();
        s.v4_routes = self.v4.len();
        s.v6_routes = self.v6.len();
        s.rib_entries = self.rib_entries;
        s.nexthops = self.nh.live();
        s.ecmp_groups = self.nh.groups();
        s.v4_bytes = self.v4.used_bytes();
        s.v6_bytes = self.v6.used_bytes();
        s.nexthop_bytes = self.nh.used_bytes();
        s.fib_bytes = s.v4_bytes + s.v6_bytes + s.nexthop_bytes;
        s.writer_bytes = self.v4.writer_bytes() + self.v6.writer_bytes() + self.rib_bytes();
        s.pending_reclaim = self.reclaim.pending();
        s
    }

    /// Which array elements were written since the previous call (for a
    /// mirror such as the XDP lane's BPF maps; see [`crate::RawFib`]).
    pub fn take_changes(&mut self) -> FibChanges {
        let (nexthops, ecmp_members) = self.nh.take_changes();
        let (v4_top, v4_blocks) = self.v4.take_changes();
        let (v6_top, v6_blocks) = self.v6.take_changes();
        FibChanges { nexthops, ecmp_members, v4_blocks, v4_top, v6_blocks, v6_top }
    }

    /// Makes interface `ifindex` a tunnel to `remote` (or moves it there):
    /// from now on it is stacked on what `remote` resolves to and
    /// re-stacked at every commit (see `tunnel.rs`); readers find that
    /// with [`crate::FibReader::tunnel`]. Published before it returns.
    pub fn tunnel_set(&mut self, ifindex: u16, remote: IpAddr) {
        match self.tunnels.iter_mut().find(|t| t.ifindex == ifindex) {
            Some(t) => t.remote = remote,
            None => {
                let adj = TunnelAdj { nh: NH_NONE, via_tunnel: false };
                self.tunnels.push(Tunnel { ifindex, remote, adj });
                self.shared.tunnels.store(ifindex, Some(adj));
            }
        }
        // Another tunnel's remote may route into this interface.
        self.restack();
    }

    /// Interface `ifindex` is no tunnel (any more): readers find no
    /// adjacency for it. Whether it was one.
    pub fn tunnel_remove(&mut self, ifindex: u16) -> bool {
        let Some(i) = self.tunnels.iter().position(|t| t.ifindex == ifindex) else { return false };
        self.tunnels.swap_remove(i);
        self.shared.tunnels.store(ifindex, None);
        self.restack();
        true
    }

    /// Tunnel `ifindex`'s remote and stacked adjacency, as readers see it.
    pub fn tunnel(&self, ifindex: u16) -> Option<(IpAddr, TunnelAdj)> {
        self.tunnels.iter().find(|t| t.ifindex == ifindex).map(|t| (t.remote, t.adj))
    }

    /// Re-stacks every tunnel: its remote looked up in the FIB as
    /// published, the readers' entry stored where it changed.
    fn restack(&mut self) {
        for i in 0..self.tunnels.len() {
            let Some(&Tunnel { ifindex, remote, adj: old }) = self.tunnels.get(i) else { break };
            let nh = match remote {
                IpAddr::V4(a) => self.shared.v4.lookup(u64::from(u32::from(a)) << 32),
                IpAddr::V6(a) => self.shared.v6.lookup(u128::from(a)),
            };
            let members = self.nh.members(nh);
            let ids = if members.is_empty() { std::slice::from_ref(&nh) } else { members };
            let via_tunnel = ids.iter().any(|&id| {
                let n = self.shared.nh.get(id);
                matches!(n.kind, NhKind::Unicast | NhKind::Glean) && self.tunnels.iter().any(|o| o.ifindex == n.ifindex)
            });
            let adj = TunnelAdj { nh, via_tunnel };
            if adj != old {
                if let Some(t) = self.tunnels.get_mut(i) {
                    t.adj = adj;
                }
                self.shared.tunnels.store(ifindex, Some(adj));
            }
        }
    }

    /// The configuration this FIB was created with.
    pub fn config(&self) -> &FibConfig {
        &self.cfg
    }

    /// Estimated bytes of the RIB and its interned targets.
    fn rib_bytes(&self) -> usize {
        self.rib.table_bytes() + self.rib_heap + self.targets.len() * 2 * std::mem::size_of::<RouteTarget>()
    }

    /// What the counters behind [`FibWriter::stats`] stand for, counted by
    /// walking the RIB: (RIB entries, heap bytes of spilled entry lists).
    #[cfg(test)]
    pub(crate) fn walk_rib_counts(&self) -> (usize, usize) {
        self.rib.iter().fold((0, 0), |(n, b), (_, s)| (n + s.entries.as_slice().len(), b + s.entries.heap_bytes()))
    }

    /// The counters themselves: (RIB entries, heap bytes of spilled lists).
    #[cfg(test)]
    pub(crate) fn rib_counts(&self) -> (usize, usize) {
        (self.rib_entries, self.rib_heap)
    }

    fn count(&mut self, r: &Result<(), FibError>) {
        if r.is_err() {
            self.stats.errors += 1;
        }
    }

    fn detail(&self, prefix: Prefix, e: &RibEntry, best: bool) -> RouteDetail {
        let members = self.nh.members(e.nh);
        let nexthops: Vec<NextHop> = if e.nh == NH_NONE {
            Vec::new()
        } else if members.is_empty() {
            vec![self.shared.nh.get(e.nh)]
        } else {
            members.iter().map(|&m| self.shared.nh.get(m)).collect()
        };
        RouteDetail {
            prefix,
            source: e.source,
            distance: e.distance,
            metric: e.metric,
            target: self.targets.get(e.target).cloned().unwrap_or(RouteTarget::Blackhole),
            best,
            active: e.nh != NH_NONE,
            nh: e.nh,
            nexthops,
        }
    }

    fn validate(&self, p: &Prefix, t: &RouteTarget) -> Result<(), FibError> {
        match t {
            RouteTarget::Via { gw, .. } if !same_family(p, gw) => Err(FibError::FamilyMismatch { prefix: *p, gw: *gw }),
            RouteTarget::Ecmp(m) if m.is_empty() => Err(FibError::EmptyEcmp),
            RouteTarget::Ecmp(m) if m.len() > self.cfg.max_ecmp_paths => {
                Err(FibError::TooManyPaths { paths: m.len(), max: self.cfg.max_ecmp_paths })
            }
            RouteTarget::Ecmp(m) => match m.iter().find(|(gw, _)| !same_family(p, gw)) {
                Some((gw, _)) => Err(FibError::FamilyMismatch { prefix: *p, gw: *gw }),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn distance(&self, s: Source, a: &RouteAttrs) -> u8 {
        a.distance.unwrap_or(if s == Source::Kernel { self.cfg.kernel_distance } else { s.default_distance() })
    }

    /// Starts loading the lines an update of `p` touches first: its RIB
    /// cell and the trie's top-level lines, so that their misses overlap
    /// (a single call) or arrive before the update (a batch, `apply`).
    fn prefetch(&self, p: &Prefix) {
        self.rib.prefetch(p);
        if p.is_v4() {
            self.v4.prefetch(&self.shared.v4, p.bits128(), p.len());
        } else {
            self.v6.prefetch(&self.shared.v6, p.bits128(), p.len());
        }
    }

    /// `prefetch` for a single call, and then one step of the trie walk
    /// (`walk_step`): the block the prefix ends in, found in the trie's
    /// block directory (whose line the first prefetch loads together with
    /// the RIB cell), has its lines loaded while the RIB's part of the
    /// update runs instead of after it.
    fn prefetch_single(&self, p: &Prefix) {
        self.prefetch(p);
        let mut w = Walk::new::<V4_TOP, V6_TOP>(p.is_v4(), p.len());
        if !w.done() {
            self.walk_step(p, &mut w);
        }
    }

    fn walk_step(&self, p: &Prefix, w: &mut Walk) {
        if p.is_v4() {
            self.v4.walk_step(&self.shared.v4, p.bits128(), p.len(), w);
        } else {
            self.v6.walk_step(&self.shared.v6, p.bits128(), p.len(), w);
        }
    }

    fn add_inner(&mut self, s: Source, p: Prefix, t: RouteTarget, a: RouteAttrs) -> Result<(), FibError> {
        self.validate(&p, &t)?;
        let distance = self.distance(s, &a);
        let epoch = self.epochs[s.index()];
        let gws = Self::needs_resolution(&t);
        let target = self.targets.intern(t);
        let nh = match self.targets.cached_nh(target) {
            NH_NONE => {
                let t = self.targets.get(target).cloned().unwrap_or(RouteTarget::Blackhole);
                match self.resolve(&p, &t) {
                    Ok(nh) => {
                        // A gateway with its interface resolves to the same
                        // next hop whatever else changes: keep it (with a
                        // reference of its own) for the next route to it.
                        if nh != NH_NONE && matches!(t, RouteTarget::Via { ifindex: Some(_), .. }) {
                            self.nh.add_ref(nh);
                            self.targets.cache_nh(target, nh);
                        }
                        nh
                    }
                    Err(e) => {
                        self.release_target(target);
                        return Err(e);
                    }
                }
            }
            nh => {
                self.nh.add_ref(nh);
                nh
            }
        };
        // One lookup of the prefix for the whole operation: the RIB is
        // ~1M entries, its first touch is a cache miss.
        let slot = self.rib.slot(&p);
        let entry = RibEntry { source: s, target, distance, metric: a.metric, nh, epoch };
        let old = match slot.find_mut(s) {
            Some(e) if e.target == target && e.distance == distance && e.metric == a.metric => {
                // Re-adding the same route (a resync, a repeated config)
                // only refreshes its mark.
                e.epoch = epoch;
                self.nh.release(nh, self.reclaim.limbo());
                self.release_target(target);
                self.stats.adds += 1;
                return Ok(());
            }
            Some(e) => Some(std::mem::replace(e, entry)),
            None => {
                let heap = slot.entries.heap_bytes();
                slot.entries.push(entry);
                self.rib_heap = self.rib_heap + slot.entries.heap_bytes() - heap;
                None
            }
        };
        let st = settle(slot, &self.targets);
        match old {
            Some(old) => {
                self.nh.release(old.nh, self.reclaim.limbo());
                if let Some(t) = self.targets.get(old.target).filter(|t| Self::needs_resolution(t)).cloned() {
                    self.drop_deps(p, s, &t);
                }
                self.release_target(old.target);
            }
            None => self.rib_entries += 1,
        }
        if gws && let Some(t) = self.targets.get(target).cloned() {
            self.add_deps(p, s, &t);
        }
        self.stats.adds += 1;
        // A route the FIB cannot hold stays in the RIB, not installed; the
        // caller learns why.
        self.apply_settle(p, st)
    }

    fn del_inner(&mut self, s: Source, p: Prefix) -> Result<(), FibError> {
        let not_found = FibError::NotFound { source: s, prefix: p };
        let slot = self.rib.get_mut(&p).ok_or_else(|| not_found.clone())?;
        let pos = slot.entries.as_slice().iter().position(|e| e.source == s).ok_or(not_found.clone())?;
        let heap = slot.entries.heap_bytes();
        let e = slot.entries.remove(pos).ok_or(not_found)?;
        // A removal never grows a list: it shrinks it or ends the spill.
        self.rib_heap -= heap - slot.entries.heap_bytes();
        let st = settle(slot, &self.targets);
        if st.empty {
            self.rib.remove(&p);
        }
        self.rib_entries -= 1;
        self.nh.release(e.nh, self.reclaim.limbo());
        if let Some(t) = self.targets.get(e.target).filter(|t| Self::needs_resolution(t)).cloned() {
            self.drop_deps(p, s, &t);
        }
        self.release_target(e.target);
        self.stats.dels += 1;
        // The delete happened; a route taking over that the FIB cannot
        // hold is counted.
        if self.apply_settle(p, st).is_err() {
            self.stats.errors += 1;
        }
        Ok(())
    }

    /// Drops a reference on a target, and the target's cached next hop
    /// with its last one.
    fn release_target(&mut self, id: TargetId) {
        let nh = self.targets.release(id);
        self.nh.release(nh, self.reclaim.limbo());
    }

    /// Recomputes the best route and the connected role of `p` and pushes
    /// any change to the FIB and to dependent routes.
    fn refresh_prefix(&mut self, p: Prefix) {
        let Some(slot) = self.rib.get_mut(&p) else {
            return;
        };
        let st = settle(slot, &self.targets);
        if st.empty {
            self.rib.remove(&p);
        }
        if self.apply_settle(p, st).is_err() {
            self.stats.errors += 1;
        }
    }

    /// Pushes what `settle` found to the FIB and to dependent routes. If the
    /// FIB cannot hold the new best route of `p` (a full trie, or an IPv4
    /// next-hop id past 15 bits), `p` is left out of the FIB, as the RIB
    /// then records, and the error returned (dependent routes are still
    /// updated).
    fn apply_settle(&mut self, p: Prefix, st: Settle) -> Result<(), FibError> {
        let mut res = Ok(());
        if st.best != st.old_best {
            self.stats.fib_updates += 1;
            let (bits, len) = (p.bits128(), p.len());
            let r = match (p.is_v4(), st.best) {
                (true, NH_NONE) => {
                    let rib = &self.rib;
                    self.v4.remove(&self.shared.v4, bits, len, |b, l| installed(rib, b, l, true));
                    Ok(())
                }
                (false, NH_NONE) => {
                    let rib = &self.rib;
                    self.v6.remove(&self.shared.v6, bits, len, |b, l| installed(rib, b, l, false));
                    Ok(())
                }
                (true, nh) => self.v4.set(&self.shared.v4, bits, len, nh),
                (false, nh) => self.v6.set(&self.shared.v6, bits, len, nh),
            };
            if r.is_err() {
                // Not installed: record it, so the next change of this
                // prefix tries again, and take out what the FIB held for
                // it (the trie changed nothing), so that the FIB agrees
                // with the RIB: no stale next hop, and a later delete of
                // the route has nothing left to remove.
                if let Some(slot) = self.rib.get_mut(&p) {
                    slot.installed = NH_NONE;
                }
                if st.old_best != NH_NONE {
                    let rib = &self.rib;
                    if p.is_v4() {
                        self.v4.remove(&self.shared.v4, bits, len, |b, l| installed(rib, b, l, true));
                    } else {
                        self.v6.remove(&self.shared.v6, bits, len, |b, l| installed(rib, b, l, false));
                    }
                }
            }
            res = r;
        }
        if st.conn != st.old_conn {
            self.connected_changed(p, st.old_conn, st.conn);
        }
        res
    }

    fn connected_changed(&mut self, p: Prefix, old_conn: Option<u16>, conn: Option<u16>) {
        self.connected.set(p, conn);
        // A host prefix holds one address: a hash probe, not a scan of
        // every gateway (one host route per remote-access client).
        let affected: Vec<(Prefix, Source)> = if p.len() == p.max_len() {
            self.via_deps.get(&p.addr()).map(|set| set.iter().copied().collect()).unwrap_or_default()
        } else {
            self.via_deps.iter().filter(|(gw, _)| p.contains(**gw)).flat_map(|(_, set)| set.iter().copied()).collect()
        };
        for (q, s) in affected {
            self.reresolve(q, s);
        }
        // Only `p` changed, from `old_conn` to `conn`: a neighbour's host
        // route can only come or go on those two interfaces. For a host
        // prefix that is two hash probes, not a scan of every neighbour.
        let neighbors: Vec<(u16, IpAddr)> = if p.len() == p.max_len() {
            let ip = p.addr();
            [old_conn, conn].into_iter().flatten().filter(|&i| self.nh.has_neighbor(i, ip)).map(|i| (i, ip)).collect()
        } else {
            self.nh.neighbors().filter(|(_, ip)| p.contains(*ip)).collect()
        };
        for (ifindex, ip) in neighbors {
            self.sync_neighbor_route(ifindex, ip, true);
        }
    }

    fn reresolve(&mut self, q: Prefix, s: Source) {
        let Some(target) =
            self.rib.get(&q).and_then(|slot| slot.find(s)).and_then(|e| self.targets.get(e.target)).cloned()
        else {
            return;
        };
        let new = match self.resolve(&q, &target) {
            Ok(nh) => nh,
            Err(_) => {
                self.stats.errors += 1;
                NH_NONE
            }
        };
        let Some(e) = self.rib.get_mut(&q).and_then(|slot| slot.find_mut(s)) else {
            return;
        };
        let old = std::mem::replace(&mut e.nh, new);
        self.nh.release(old, self.reclaim.limbo());
        if old != new {
            self.refresh_prefix(q);
        }
    }

    /// Installs or removes the Source::Neighbor host route of a neighbour
    /// so that it exists exactly when the neighbour is resolved and inside
    /// a connected subnet of its interface.
    fn sync_neighbor_route(&mut self, ifindex: u16, ip: IpAddr, resolved: bool) {
        let host = Prefix::host(ip);
        let target = RouteTarget::Via { gw: ip, ifindex: Some(ifindex) };
        let want = resolved && self.connected.on_interface(ip, ifindex);
        let have = self
            .rib
            .get(&host)
            .and_then(|slot| slot.find(Source::Neighbor))
            .and_then(|e| self.targets.get(e.target))
            .cloned();
        match (want, have) {
            (true, Some(t)) if t == target => {}
            (true, _) => {
                if self.add_inner(Source::Neighbor, host, target, RouteAttrs::default()).is_err() {
                    self.stats.errors += 1;
                }
            }
            (false, Some(t)) if t == target => {
                let _ = self.del_inner(Source::Neighbor, host);
            }
            (false, _) => {}
        }
    }

    fn conn_lookup(&self, gw: IpAddr) -> Option<u16> {
        self.connected.lookup(gw)
    }

    fn resolve_gw(&mut self, gw: IpAddr, ifindex: Option<u16>) -> Result<NhId, FibError> {
        match ifindex.or_else(|| self.conn_lookup(gw)) {
            Some(i) => self.nh.acquire(&self.shared.nh, NhKind::Unicast, i, gw),
            None => Ok(NH_NONE),
        }
    }

    /// Turns a target into a next-hop id, taking one reference on it.
    fn resolve(&mut self, p: &Prefix, t: &RouteTarget) -> Result<NhId, FibError> {
        let table = &self.shared.nh;
        let unspec = unspecified(p);
        match t {
            RouteTarget::Via { gw, ifindex } => self.resolve_gw(*gw, *ifindex),
            RouteTarget::Connected { ifindex } => self.nh.acquire(table, NhKind::Glean, *ifindex, unspec),
            RouteTarget::Local { ifindex } => self.nh.acquire(table, NhKind::Local, *ifindex, unspec),
            RouteTarget::Blackhole => self.nh.acquire(table, NhKind::Blackhole, 0, unspec),
            RouteTarget::Unreachable => self.nh.acquire(table, NhKind::Unreachable, 0, unspec),
            RouteTarget::Prohibit => self.nh.acquire(table, NhKind::Prohibit, 0, unspec),
            RouteTarget::Ecmp(members) => {
                let mut ids = Vec::with_capacity(members.len());
                for (gw, ifindex) in members {
                    match self.resolve_gw(*gw, *ifindex) {
                        Ok(NH_NONE) => {}
                        Ok(id) => ids.push(id),
                        Err(e) => {
                            for id in ids {
                                self.nh.release(id, self.reclaim.limbo());
                            }
                            return Err(e);
                        }
                    }
                }
                match ids.len() {
                    0 => Ok(NH_NONE),
                    1 => Ok(ids[0]),
                    _ => self.nh.acquire_group(&self.shared.nh, ids, self.reclaim.limbo()),
                }
            }
        }
    }

    /// True if some gateway of `t` is resolved through connected routes.
    fn needs_resolution(t: &RouteTarget) -> bool {
        match t {
            RouteTarget::Via { ifindex, .. } => ifindex.is_none(),
            RouteTarget::Ecmp(m) => m.iter().any(|(_, i)| i.is_none()),
            _ => false,
        }
    }

    fn gws_to_resolve(t: &RouteTarget) -> Vec<IpAddr> {
        match t {
            RouteTarget::Via { gw, ifindex: None } => vec![*gw],
            RouteTarget::Ecmp(m) => m.iter().filter(|(_, i)| i.is_none()).map(|(gw, _)| *gw).collect(),
            _ => Vec::new(),
        }
    }

    fn add_deps(&mut self, p: Prefix, s: Source, t: &RouteTarget) {
        for gw in Self::gws_to_resolve(t) {
            self.via_deps.entry(gw).or_default().insert((p, s));
        }
    }

    fn drop_deps(&mut self, p: Prefix, s: Source, t: &RouteTarget) {
        for gw in Self::gws_to_resolve(t) {
            if let Some(set) = self.via_deps.get_mut(&gw) {
                set.remove(&(p, s));
                if set.is_empty() {
                    self.via_deps.remove(&gw);
                }
            }
        }
    }

    /// Publishes pending FIB changes, starts the grace period for what they
    /// unlinked, and recycles what older grace periods freed.
    fn commit(&mut self) -> Result<(), FibError> {
        let limbo = self.reclaim.limbo();
        self.v4.commit(limbo);
        self.v6.commit(limbo);
        // Before the grace period starts: an id a re-stack lets go of is
        // reused only after readers that saw it are done.
        if !self.tunnels.is_empty() {
            self.restack();
        }
        let mut done = std::mem::take(&mut self.reclaimed);
        self.reclaim.collect(&mut done);
        self.reclaim.seal();
        for g in done.drain(..) {
            match g {
                Garbage::Nh(id) => self.nh.reuse_id(id),
                Garbage::Members { base, count } => self.nh.reuse_members(base, count),
                Garbage::Nodes { v6: false, .. } => self.v4.reuse(g),
                Garbage::Nodes { v6: true, .. } => self.v6.reuse(g),
            }
        }
        self.reclaimed = done;
        Ok(())
    }
}
