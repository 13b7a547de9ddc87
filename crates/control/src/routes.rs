//! Routes and neighbours, as one service of the [`Router`]: the FIB's
//! writer, the neighbour table (whose entries are host routes' next hops
//! in the FIB) and the control-plane sources that feed both (the kernel
//! mirror, FRR over FPM).
//!
//! [`Router`]: crate::router::Router

use crate::config::NeighborCfg;
use crate::neighbor::NeighborTable;
use crate::source::{ControlSource, Driven, SourceCx};
use std::net::IpAddr;
use tern_fib::FibWriter;
use tern_nodes::state::{Heard, IfTable, Inject};
use tern_rcu::Published;

/// How often the neighbour timers run.
const TICK_NS: u64 = 100_000_000;

pub struct Routes {
    fib: FibWriter,
    neigh: NeighborTable,
    /// Control-plane sources (kernel mirror, FPM server).
    sources: Vec<Box<dyn ControlSource>>,
    last_tick_ns: u64,
}

impl Routes {
    pub(crate) fn new(fib: FibWriter, sources: Vec<Box<dyn ControlSource>>) -> Routes {
        Routes { fib, neigh: NeighborTable::default(), sources, last_tick_ns: 0 }
    }

    pub fn fib(&self) -> &FibWriter {
        &self.fib
    }

    pub fn fib_mut(&mut self) -> &mut FibWriter {
        &mut self.fib
    }

    pub fn neighbors(&self) -> &NeighborTable {
        &self.neigh
    }

    /// What a worker heard from a neighbour (`NeighborTable::heard`).
    /// Returns true when the FIB changed.
    pub(crate) fn heard(&mut self, ifindex: u16, ip: IpAddr, mac: Option<[u8; 6]>, how: Heard, now: u64) -> bool {
        self.neigh.heard(ifindex, ip, mac, how, now, &mut self.fib)
    }

    /// A neighbour from the configuration, never aged out.
    pub(crate) fn add_permanent(&mut self, ifindex: u16, ip: IpAddr, mac: [u8; 6]) {
        self.neigh.add_permanent(ifindex, ip, mac, &mut self.fib);
    }

    /// Runs the neighbour timers when their period has passed since the
    /// last run (`NeighborTable::tick`); `send` queues a probe on a
    /// worker. Returns true when the FIB changed.
    pub(crate) fn age_neighbors(
        &mut self,
        now: u64,
        cfg: &NeighborCfg,
        ifs: &IfTable,
        send: &mut dyn FnMut(Inject),
    ) -> bool {
        if now.saturating_sub(self.last_tick_ns) < TICK_NS {
            return false;
        }
        self.last_tick_ns = now;
        // Every entry counts as in use (see crate::neighbor).
        let in_use = |_: u16, _: IpAddr| true;
        self.neigh.tick(now, cfg, ifs, &mut self.fib, &in_use, send)
    }

    /// Forgets the neighbours learned on interface `ifindex`. Returns
    /// true when the FIB changed.
    pub(crate) fn flush_interface(&mut self, ifindex: u16) -> bool {
        self.neigh.flush_interface(ifindex, &mut self.fib)
    }

    /// One round of every control-plane source. Returns true if one
    /// changed anything.
    pub(crate) fn poll_sources(&mut self, now: u64, ifs: &IfTable, ifaces: &Published<IfTable>) -> bool {
        if self.sources.is_empty() {
            return false;
        }
        let mut cx = SourceCx { fib: &mut self.fib, neigh: &mut self.neigh, ifs, ifaces, now_ns: now };
        let mut changed = false;
        for s in &mut self.sources {
            changed |= s.poll(&mut cx);
        }
        changed
    }

    /// Tells the sources which kernel devices back tern interfaces now.
    pub(crate) fn sources_follow(&mut self, driven: &[Driven]) {
        for s in &mut self.sources {
            s.set_driven(driven.to_vec());
        }
    }

    /// The address family-matching route lookup for `tern route get`.
    pub fn route_get(&self, addr: IpAddr) -> Option<tern_fib::RouteDetail> {
        self.fib.route_get(addr)
    }

    /// Each control-plane source's name and status (kernel mirror, FPM).
    pub fn source_status(&self) -> Vec<(String, serde_json::Value)> {
        self.sources.iter().map(|s| (s.name().to_string(), s.status())).collect()
    }

    /// What each netlink source (kernel mirror, FPM) did with the route
    /// messages it decoded: `tern status` and /metrics.
    pub fn route_sources(&self) -> Vec<crate::api::types::RouteSourceInfo> {
        self.sources
            .iter()
            .filter_map(|s| Some(crate::api::types::RouteSourceInfo::new(s.name(), &s.route_counters()?)))
            .collect()
    }
}
