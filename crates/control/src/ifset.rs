//! Sub-interfaces and tunnels added or removed while tern runs (by a
//! reload, [`crate::reload`]).
//!
//! Everything that can fail is done first ([`Router::prepare_interfaces`]:
//! addresses against every other interface, the rule sets against the new
//! interface names, free port numbers for TAPs, the TAP devices
//! themselves); only then does anything the workers see change. A removed
//! interface's index stays as a placeholder (`IfKind::Removed`) so that
//! nothing else is renumbered.

use crate::api::ApiError;
use crate::config::{IfacePlan, IfacePlanKind, Plan};
use crate::live::{IfAddr, target_ifindexes};
use crate::router::Router;
use tern_engine::{PortBinding, PortChange};
use tern_io::TapPort;
use tern_nodes::state::{IfTable, Iface, NO_IF};

/// What an addition needs that was made ready before anything changed.
pub(crate) struct PreparedAdd {
    pub index: u16,
    /// The TAP exception path: the worker port number and one queue per
    /// worker of the interface's new TAP.
    pub tap: Option<(u16, Vec<TapPort>)>,
}

/// The placeholder of a removed interface in a plan.
pub(crate) fn removed_plan() -> IfacePlan {
    IfacePlan {
        name: String::new(),
        kind: IfacePlanKind::Removed,
        v4: Vec::new(),
        v6: Vec::new(),
        mtu: None,
        mac: None,
        up: false,
        acl_in: None,
        acl_out: None,
    }
}

impl Router {
    /// Port numbers of the TAPs in use, by interface index.
    fn tap_ports(&self) -> Vec<u16> {
        self.shared.params.load().tap_ports.clone()
    }

    /// Checks that interfaces `added` of `new` can be added once `removed`
    /// are gone, and opens their TAPs. On error nothing changed (TAPs
    /// opened here are closed again, which deletes them).
    pub(crate) fn prepare_interfaces(
        &mut self,
        new: &Plan,
        added: &[u16],
        removed: &[u16],
    ) -> Result<Vec<PreparedAdd>, ApiError> {
        // Connected routes are keyed by prefix: one subnet, one interface.
        for &a in added {
            let Some(p) = new.ifaces.get(usize::from(a)) else { continue };
            let mine = p.v4.iter().map(|n| IfAddr::V4(*n)).chain(p.v6.iter().map(|n| IfAddr::V6(*n)));
            for m in mine {
                for (j, other) in new.live_ifaces() {
                    if j == a {
                        continue;
                    }
                    let theirs = other.v4.iter().map(|n| IfAddr::V4(*n)).chain(other.v6.iter().map(|n| IfAddr::V6(*n)));
                    if let Some(t) = theirs.into_iter().find(|t| t.subnet() == m.subnet()) {
                        return Err(ApiError::invalid(format!(
                            "interface {}: subnet {} is already connected on {} ({t})",
                            p.name,
                            m.subnet(),
                            other.name
                        )));
                    }
                }
            }
        }
        crate::router::compile_acls(new, self.lanes.len()).map_err(|e| ApiError::invalid(e.0))?;
        let tap_mode = self.plan.config.linux.tap_exception();
        let mut out = Vec::new();
        let wants_tap =
            |i: u16| matches!(new.ifaces.get(usize::from(i)).map(|p| &p.kind), Some(IfacePlanKind::Vlan { .. }));
        if !tap_mode || !added.iter().any(|&i| wants_tap(i)) {
            out.extend(added.iter().map(|&index| PreparedAdd { index, tap: None }));
            return Ok(out);
        }
        // Free port numbers: after the interfaces' own ports, not used by a
        // TAP that stays.
        let taps = self.tap_ports();
        let used: Vec<u16> = taps
            .iter()
            .enumerate()
            .filter(|(i, p)| **p != NO_IF && !removed.contains(&(*i as u16)))
            .map(|(_, p)| *p)
            .collect();
        let capacity = self.lanes.port_capacity();
        let mut free = (self.plan.ports()..capacity).map(|k| k as u16).filter(|k| !used.contains(k));
        let workers = self.lanes.len() as u16;
        for &index in added {
            if !wants_tap(index) {
                out.push(PreparedAdd { index, tap: None });
                continue;
            }
            let name = new.ifaces.get(usize::from(index)).map(|p| p.name.clone()).unwrap_or_default();
            let opened = match free.next() {
                None => Err(ApiError::refused(format!(
                    "interface {name}: no port number left for its TAP ({} per run); restart tern to add it",
                    crate::router::SPARE_TAP_PORTS
                ))),
                Some(slot) => self
                    .interfaces
                    .open_tap(new, usize::from(index), workers)
                    .map_err(|e| ApiError::invalid(e.0))
                    .map(|q| q.map(|q| (slot, q))),
            };
            match opened {
                Ok(tap) => out.push(PreparedAdd { index, tap }),
                Err(e) => {
                    // Close what was opened: the TAPs go away with their queues.
                    for p in out {
                        if p.tap.is_some()
                            && let Some(f) = new.ifaces.get(usize::from(p.index))
                        {
                            self.interfaces.forget_tap_guard(&crate::linux::tap_name(&f.name));
                        }
                    }
                    self.interfaces.forget_tap_guard(&crate::linux::tap_name(&name));
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Removes sub-interface or tunnel `index`: its addresses and every
    /// route that names it (of any source) are withdrawn, its neighbours
    /// forgotten, its TAP closed (and so deleted); the index stays as a
    /// placeholder. Returns what it did, for the reload report.
    pub(crate) fn remove_interface(&mut self, index: u16) -> String {
        let Some(p) = self.plan.ifaces.get(usize::from(index)).cloned() else { return String::new() };
        // Routes per source before, to report everything withdrawn: those
        // of its addresses (connected, local, broadcast) and those naming it.
        let per_source = |fib: &tern_fib::FibWriter| {
            let mut n: Vec<(String, usize)> = Vec::new();
            for r in fib.routes() {
                let s = r.source.to_string();
                match n.iter_mut().find(|(k, _)| *k == s) {
                    Some((_, c)) => *c += 1,
                    None => n.push((s, 1)),
                }
            }
            n
        };
        let before = per_source(self.routes.fib());
        if let Err(e) = self.set_interface_addresses(index, Vec::new(), Vec::new()) {
            log::warn!("interface {}: removing its addresses: {e}", p.name);
        }
        let stale: Vec<_> = self
            .routes
            .fib()
            .routes()
            .filter(|r| target_ifindexes(&r.target).contains(&index))
            .map(|r| (r.source, r.prefix))
            .collect();
        for (s, pf) in &stale {
            if let Err(e) = self.routes.fib_mut().del_route(*s, *pf) {
                log::warn!("interface {}: withdrawing {s} route {pf}: {e}", p.name);
            }
        }
        if self.routes.flush_interface(index) {
            self.shared.bump_neigh_gen();
        }
        let mut taps = self.tap_ports();
        let slot = taps.get(usize::from(index)).copied().filter(|&s| s != NO_IF);
        if let Some(slot) = slot {
            // No more punts to it, then no more port.
            taps[usize::from(index)] = NO_IF;
            let mut params = (*self.shared.params.load()).clone();
            params.tap_ports = taps;
            self.shared.params.publish(params);
            self.lanes.change_ports(&format!("no port {slot} to close"), |_| {
                Some(PortChange::Close { slot: usize::from(slot) })
            });
            self.interfaces.forget_tap_guard(&crate::linux::tap_name(&p.name));
        }
        if let Some(f) = self.plan.ifaces.get_mut(usize::from(index)) {
            *f = removed_plan();
        }
        let mut ifs = self.shared.ifaces.load().ifs.clone();
        if let Some(f) = ifs.get_mut(usize::from(index)) {
            *f = Iface::removed(index);
        }
        self.shared.ifaces.publish(IfTable::new(ifs));
        self.lanes.wake_all();
        let after = per_source(self.routes.fib());
        let gone: Vec<(String, usize)> = before
            .into_iter()
            .filter_map(|(s, n)| {
                let left = after.iter().find(|(k, _)| *k == s).map_or(0, |(_, c)| *c);
                (n > left).then(|| (s, n - left))
            })
            .collect();
        let total: usize = gone.iter().map(|(_, n)| n).sum();
        let mut what = format!("interface {} removed ({total} routes withdrawn", p.name);
        if !gone.is_empty() {
            let parts: Vec<String> = gone.iter().map(|(s, n)| format!("{n} {s}")).collect();
            what.push_str(&format!(": {}", parts.join(", ")));
        }
        if slot.is_some() {
            what.push_str(&format!(", TAP {} deleted", crate::linux::tap_name(&p.name)));
        }
        what.push(')');
        what
    }

    /// Adds interface `add.index` of `new`: the interface table gets it
    /// (with the VLAN demux or tunnel index), then its TAP port, then its
    /// addresses and their routes.
    pub(crate) fn add_interface(&mut self, new: &Plan, add: PreparedAdd) -> Result<String, ApiError> {
        let i = usize::from(add.index);
        let p = new.ifaces.get(i).cloned().ok_or_else(|| ApiError::internal(format!("no interface {i} to add")))?;
        while self.plan.ifaces.len() <= i {
            self.plan.ifaces.push(removed_plan());
        }
        self.plan.ifaces[i] = IfacePlan { v4: Vec::new(), v6: Vec::new(), ..p.clone() };
        let mut ifs = self.shared.ifaces.load().ifs.clone();
        while ifs.len() <= i {
            ifs.push(Iface::removed(ifs.len() as u16));
        }
        ifs[i] = crate::router::iface_of(&self.plan, i, self.interfaces.devs());
        self.shared.ifaces.publish(IfTable::new(ifs));
        let mut what = format!("interface {} added", p.name);
        if let Some((slot, queues)) = add.tap {
            let tap = crate::linux::tap_name(&p.name);
            for (w, q) in self.lanes.iter().zip(queues) {
                let input = w.graph.node_id("tap-input");
                let binding = PortBinding { input, ..PortBinding::new(Box::new(q), add.index) };
                if w.change_port(PortChange::Open { slot: usize::from(slot), binding }).is_err() {
                    log::error!("worker {}: no port {slot} for TAP {tap}", w.id);
                }
            }
            let mut params = (*self.shared.params.load()).clone();
            if params.tap_ports.len() <= i {
                params.tap_ports.resize(i + 1, NO_IF);
            }
            params.tap_ports[i] = slot;
            self.shared.params.publish(params);
            what.push_str(&format!(" with TAP {tap}"));
        }
        self.set_interface_addresses(add.index, p.v4.clone(), p.v6.clone())?;
        Ok(what)
    }

    /// Waits (at most a second) until every worker has applied the port
    /// changes asked of it, so a removed TAP is gone when a reload returns.
    pub(crate) fn wait_port_changes(&self) {
        for _ in 0..1000 {
            if !self.lanes.port_changes_pending() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        log::warn!("workers have not applied their port changes within a second");
    }

    /// Tells the control-plane sources which kernel devices back tern
    /// interfaces now.
    pub(crate) fn sources_follow_interfaces(&mut self) {
        let driven = crate::linux::driven(&self.plan);
        self.routes.sources_follow(&driven);
    }
}
