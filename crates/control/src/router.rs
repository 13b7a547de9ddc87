//! The router: configuration applied to a running data plane.
//!
//! [`Router::start`] builds everything from a validated [`Plan`] or fails
//! without leaving anything running: the interface table and one worker
//! per configured thread with its own pool, ports and graph from the bare
//! plan (no addresses or routes), then the rest as a reload from it
//! (`reload::converge`: node parameters, addresses with their connected
//! and local routes, static routes, route files). The control thread
//! then calls [`Router::poll`] in a loop: it drains what workers learned
//! (neighbours), ages the neighbour table and publishes changes.

use crate::config::{Dataplane, Driver, IdleMode, IfacePlan, IfacePlanKind, MAX_CPU, Plan};
use crate::interfaces::{DeviceInfo, HostState, Interfaces, device_info, open_taps};
use crate::lanes::Lanes;
use crate::neighbor::NeighborTable;
use crate::routes::Routes;
use crossbeam_queue::ArrayQueue;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use tern_engine::{IdlePolicy, PortBinding, TraceShared, Worker, WorkerConfig, WorkerShared};
use tern_fib::{FibConfig, FibWriter};
use tern_io::{AfPacketConfig, AfPacketPort, Fanout, FanoutMode, MemHandle, MemPort};
use tern_nodes::state::{
    AclSet, AclTable, Event, GreTunnel, IfKind, IfTable, Iface, IpsecTunnel, NO_IF, Params, Shared, link_local_from_mac,
};
use tern_packet::{PacketPool, PoolConfig, Port};

// The router's orchestration across its services: live changes
// (`live`), interfaces added and removed by a reload (`ifset`) and the
// devices' link events (`links`). Child modules of `router` (the files
// stay beside it) so that they, and nothing else, reach the router's
// fields; everything else goes through methods.
#[path = "ifset.rs"]
pub mod ifset;
#[path = "links.rs"]
pub mod links;
#[path = "live.rs"]
pub mod live;
#[path = "vrrp.rs"]
pub mod vrrp;

#[derive(Debug)]
pub struct StartError(pub String);

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

fn err(s: impl Into<String>) -> StartError {
    StartError(s.into())
}

/// The router: the running configuration and the services that carry it
/// out. Each service owns its state behind its own methods:
/// [`Interfaces`] (the ports' devices, their links, the host's settings),
/// [`Routes`] (the FIB, the neighbour table, the control-plane sources)
/// and [`Lanes`] (the workers, their inject queues and memory ports, the
/// packet trace, the XDP programs and lane). `shared` is what the router
/// publishes to the workers (interface table, node parameters, rule sets)
/// and the events they send back. The router itself only orchestrates:
/// start (a reload from the bare plan), the control loop's poll, stop,
/// and the live changes that span services (`live`, `ifset`, `links`,
/// child modules so that they alone see these fields).
pub struct Router {
    /// The running configuration (what `config show` prints and a reload
    /// diffs against).
    plan: Plan,
    shared: Shared,
    lanes: Lanes,
    interfaces: Interfaces,
    routes: Routes,
    /// tern's own VRRP (`[[vrrp]]`).
    vrrp: vrrp::VrrpService,
    /// The SA database the ESP nodes read (`shared.sas`).
    ipsec: crate::ipsec::Ipsec,
    /// IKEv2 (`crate::ike`): idle without `[[ike]]`.
    ike: crate::ike::IkeService,
    /// Rung by threads that hand the control loop work (the IKE shards'
    /// child SAs), so it does not wait out its idle pause.
    bell: Arc<ControlBell>,
    started_ns: u64,
    /// Linux mode: ESP in UDP the kernel received (reassembled) on UDP
    /// 4500, for the engine (`crate::esp_kernel`), and the wildcard
    /// sockets bound while an ipsec tunnel exists.
    kernel_esp: Arc<crate::esp_kernel::KernelEsp>,
    esp_sockets: Option<crate::esp_kernel::EspSockets>,
    /// The SAs' ESP-in-UDP ports besides 4500: in the XDP programs, and
    /// their wildcard sockets in Linux mode ([`Router::sync_encap_ports`]).
    encap_ports: crate::esp_kernel::EncapPorts,
}

/// Port numbers each worker keeps for the TAPs of sub-interfaces a
/// reload adds (TAP exception path): more additions need a restart.
pub const SPARE_TAP_PORTS: usize = 64;

/// Builds the interface table of a plan.
pub(crate) fn build_iftable(plan: &Plan, devs: &[DeviceInfo]) -> IfTable {
    IfTable::new((0..plan.ifaces.len()).map(|i| iface_of(plan, i, devs)).collect())
}

/// Interface `i` of a plan as the nodes see it (`devs`: the ports' device
/// facts, by port index).
pub(crate) fn iface_of(plan: &Plan, i: usize, devs: &[DeviceInfo]) -> Iface {
    let acl_index = |name: &Option<String>| {
        name.as_ref().and_then(|n| plan.acls.iter().position(|a| &a.name == n)).map(|i| i as u16)
    };
    let Some(p) = plan.ifaces.get(i) else { return Iface::removed(i as u16) };
    let dev = |k: usize| devs.get(k).copied().unwrap_or(DeviceInfo { mac: [0; 6], mtu: 1500 });
    let (kind, port, mac, mtu, parent_up) = match p.kind {
        IfacePlanKind::Removed => return Iface::removed(i as u16),
        IfacePlanKind::Port { .. } => (IfKind::Port, i as u16, dev(i).mac, dev(i).mtu, true),
        IfacePlanKind::Vlan { parent, vid } => (
            IfKind::Vlan { parent: parent as u16, vid },
            parent as u16,
            dev(parent).mac,
            dev(parent).mtu.min(crate::config::lane_mtu_limit(true)),
            plan.ifaces.get(parent).is_some_and(|pp| pp.up),
        ),
        IfacePlanKind::Gre { local, remote, key, ttl } => {
            let t = GreTunnel { local, remote, key, ttl };
            // A locally administered MAC only to derive the tunnel's
            // link-local address; tunnels carry no link layer.
            let mac = [0x02, 0x67, 0x72, 0x65, (i >> 8) as u8, i as u8];
            (IfKind::Gre(t), NO_IF, mac, (1500 - t.overhead()) as u16, true)
        }
        IfacePlanKind::Ipsec { local, remote, sa_out, ref sa_in, ttl } => {
            // The inner MTU leaves room for ESP with the outbound SA (the
            // worst case of every algorithm when it is not in the plan).
            let overhead = plan
                .sas
                .iter()
                .find(|s| s.id == sa_out)
                .map(|s| crate::config::esp_overhead(remote.is_ipv6(), s))
                .unwrap_or(if remote.is_ipv6() { 121 } else { 101 });
            let t = IpsecTunnel { local, remote, sa_out, sa_in: sa_in.clone(), ttl };
            let mac = [0x02, 0x65, 0x73, 0x70, (i >> 8) as u8, i as u8];
            (IfKind::Ipsec(t), NO_IF, mac, 1500u16.saturating_sub(overhead as u16), true)
        }
    };
    Iface {
        index: i as u16,
        name: p.name.clone(),
        kind,
        port,
        mac,
        mtu: p.mtu.unwrap_or(mtu),
        up: p.up && parent_up,
        v4: p.v4.clone(),
        v6: p.v6.clone(),
        v6_ll: link_local_from_mac(mac),
        acl_in: acl_index(&p.acl_in),
        acl_out: acl_index(&p.acl_out),
        vmacs: Vec::new(),
    }
}

/// Compiles every rule set of a plan, with hit counters for `workers`.
pub(crate) fn compile_acls(plan: &Plan, workers: usize) -> Result<AclTable, StartError> {
    let mut sets = Vec::new();
    for set in &plan.acls {
        let classifier = tern_acl::compile(set, &|name| plan.iface_index(name))
            .map_err(|e| err(format!("acl {}: {e}", set.name)))?;
        let counters = (0..workers).map(|_| tern_acl::RuleCounters::for_classifier(&classifier)).collect();
        sets.push(AclSet { name: set.name.clone(), classifier, counters });
    }
    Ok(AclTable { sets })
}

/// How long the control loop pauses when a poll found nothing to do: 2 ms
/// while things happen (a worker learned a neighbour, a route source or
/// the API spoke within the last 100 ms), 20 ms once all is quiet, so an
/// idle router wakes its control thread 50 times a second, not 500 (it
/// cost 0.8 % of a CPU idle, 2-4 % of the DUT's CPU under the tester). A
/// request on the API socket wakes it at once either way.
#[derive(Debug, Default)]
pub struct IdlePause {
    quiet: u32,
}

impl IdlePause {
    /// Quiet polls (of 2 ms) before the pause grows.
    const QUIET_POLLS: u32 = 50;
    const SHORT: std::time::Duration = std::time::Duration::from_millis(2);
    const LONG: std::time::Duration = std::time::Duration::from_millis(20);

    /// The pause after a poll that did something (`busy`) or not.
    pub fn next(&mut self, busy: bool) -> std::time::Duration {
        if busy {
            self.quiet = 0;
            return Self::SHORT;
        }
        self.quiet = self.quiet.saturating_add(1);
        if self.quiet > Self::QUIET_POLLS { Self::LONG } else { Self::SHORT }
    }

    /// Something happened outside a poll (an API request): short pauses
    /// again.
    pub fn reset(&mut self) {
        self.quiet = 0;
    }
}

/// The CPUs for tern's threads other than the workers: `control_cpus` when
/// the configuration names them, else those of `allowed` (the CPUs the
/// process may use) that no worker is pinned to, or all of `allowed` when
/// that leaves none.
pub fn control_cpus(d: &Dataplane, allowed: &[usize]) -> Vec<usize> {
    if !d.control_cpus.is_empty() {
        let mut c = d.control_cpus.clone();
        c.sort_unstable();
        c.dedup();
        return c;
    }
    let free: Vec<usize> = allowed.iter().copied().filter(|c| !d.cpus.contains(c)).collect();
    if free.is_empty() { allowed.to_vec() } else { free }
}

/// Moves the calling thread to [`control_cpus`] (nothing to do when no
/// worker is pinned and none are named); returns the CPU set it had when
/// it moved. A failure is logged: tern still runs, only with its control
/// threads where the kernel put them.
fn pin_control_thread(d: &Dataplane) -> Option<rustix::thread::CpuSet> {
    if d.cpus.is_empty() && d.control_cpus.is_empty() {
        return None;
    }
    let old = match rustix::thread::sched_getaffinity(None) {
        Ok(set) => set,
        Err(e) => {
            log::warn!("control threads: cannot read the CPU affinity: {e}");
            return None;
        }
    };
    let allowed: Vec<usize> = (0..MAX_CPU).filter(|&c| old.is_set(c)).collect();
    let want = control_cpus(d, &allowed);
    if want == allowed {
        return None;
    }
    let mut set = rustix::thread::CpuSet::new();
    for &c in &want {
        set.set(c);
    }
    match rustix::thread::sched_setaffinity(None, &set) {
        Ok(()) => {
            log::info!("control threads on cpu(s) {want:?}, workers on {:?}", d.cpus);
            Some(old)
        }
        Err(e) => {
            log::warn!("control threads: cannot move to cpu(s) {want:?}: {e}");
            None
        }
    }
}

impl Router {
    /// Builds and starts the data plane. On error nothing keeps running
    /// and host settings are restored.
    ///
    /// When the configuration pins workers (or names `control_cpus`), the
    /// calling thread moves to the control CPUs first, and the threads it
    /// starts (API, metrics) inherit them: no control work on a worker's
    /// CPU, where it would delay the worker or the NAPI running there.
    pub fn start(plan: Plan) -> Result<Router, StartError> {
        let before = pin_control_thread(&plan.config.dataplane);
        let r = Self::start_pinned(plan);
        if r.is_err()
            && let Some(set) = before
        {
            // Nothing else of the failed start is left either.
            let _ = rustix::thread::sched_setaffinity(None, &set);
        }
        r
    }

    fn start_pinned(target: Plan) -> Result<Router, StartError> {
        let started_ns = tern_engine::clock::now_ns();
        let domain = tern_rcu::Domain::new();
        let (mut fib, reader) = tern_fib::new(FibConfig::default(), domain.clone());
        // The data plane is built from the bare plan (interfaces without
        // addresses, no routes); `reload::converge` then takes it to
        // `target` the way a reload would.
        let plan = crate::reload::bare(&target);

        let ports: Vec<&IfacePlan> =
            plan.ifaces.iter().filter(|i| matches!(i.kind, IfacePlanKind::Port { .. })).collect();
        let devs: Vec<DeviceInfo> = ports.iter().map(|p| device_info(p)).collect::<Result<_, _>>()?;

        // (With the target's SAs: an ipsec tunnel's default MTU leaves
        // room for its outbound SA's overhead; the SAs themselves are
        // installed by the convergence.)
        let iftable = build_iftable(&Plan { sas: target.sas.clone(), ..plan.clone() }, &devs);
        let acls = compile_acls(&plan, usize::from(plan.config.dataplane.workers))?;
        let mut shared = Shared::new(iftable.clone(), reader);
        // SAs arrive with the convergence below (or the API); the workers'
        // graphs read them through this reader.
        let mut ipsec = crate::ipsec::Ipsec::new(usize::from(plan.config.dataplane.workers));
        ipsec.set_metrics_on(!plan.config.metrics.listen.is_empty());
        shared.sas = ipsec.reader();
        // Fragments of one datagram that land on different workers go to
        // the one that owns it (`tern_nodes::reass::handoff`).
        shared.reass_handoff = Arc::new(tern_nodes::reass::Handoff::new(usize::from(plan.config.dataplane.workers)));
        let linux_owns_local = plan.config.linux.linux_mode();
        shared.params.publish(Params { linux_owns_local, ..Params::default() });
        shared.acls.publish(acls);

        let mut host = HostState::default();
        let mut xdp = crate::afxdp::XdpDevices::default();
        xdp.set_punt_rates(&plan.config.dataplane.punt.rates());
        let linux_mode = plan.config.linux.linux_mode();
        // The TAP exception path: tern owns the devices (the kernel is
        // silenced there as in standalone mode) and the kernel's side of
        // each port is its TAP.
        let tap = plan.config.linux.tap_exception();
        for p in &ports {
            if let IfacePlanKind::Port { device: Some(dev), driver } = &p.kind
                && *driver != Driver::Memory
            {
                let lane = if tap && *driver == Driver::Auto { &Driver::Afpacket } else { driver };
                host.take_over_port(dev, lane, p.up, tap, linux_mode)?;
            }
        }
        let workers_n = plan.config.dataplane.workers;
        let mut taps = if tap { open_taps(&plan, &devs, workers_n, &mut host)? } else { Vec::new() };
        if tap {
            // The TAPs are the worker's ports after the interfaces' own.
            let mut params = Params { linux_owns_local, ..Params::default() };
            params.tap_ports = vec![NO_IF; plan.ifaces.len()];
            for (k, (ifindex, _)) in taps.iter().enumerate() {
                params.tap_ports[usize::from(*ifindex)] = (ports.len() + k) as u16;
            }
            shared.params.publish(params);
        }
        if linux_mode {
            host.ipv6_forwarding_off()?;
        }
        // The XDP lane on the devices that take it (before the workers open
        // their sockets there: those take the lane's punts). Not with
        // TAPs: its program would pass the router's traffic to the
        // device's own stack, where the kernel is silenced.
        if !tap {
            xdp.lane = crate::xdplane::start_for_router(&plan, &shared, &mut fib, linux_mode, &mut xdp.not_on_lane)
                .map_err(err)?;
        }

        let trace = TraceShared::new();
        let mut mem: Vec<(String, MemHandle)> = Vec::new();
        let mut workers = Vec::new();
        let fanout_base = (std::process::id() as u16).wrapping_mul(17);
        // Pools pad their frames (spread over the L1 cache's sets) unless a
        // port may open an AF_XDP socket, whose UMEM is the pool and needs
        // frames at multiples of their size.
        let pad_frames = ports.iter().all(|p| match &p.kind {
            IfacePlanKind::Port { driver, .. } => {
                matches!(driver, Driver::Memory | Driver::Afpacket) || (tap && *driver == Driver::Auto)
            }
            _ => true,
        });
        for w in 0..workers_n {
            let pool = PacketPool::new(PoolConfig {
                frames: plan.config.dataplane.pool_frames,
                pad_frames,
                ..PoolConfig::default()
            })
            .map_err(|e| err(format!("worker {w}: {e}")))?;
            let mut pool = pool;
            let mut umem = None;
            let mut bindings = Vec::new();
            let inject = Arc::new(ArrayQueue::new(1024));
            let built =
                tern_nodes::build_graph(&shared, Arc::clone(&inject)).map_err(|e| err(format!("graph: {e}")))?;
            for (i, p) in ports.iter().enumerate() {
                let IfacePlanKind::Port { device, driver } = &p.kind else { continue };
                // AF_XDP would pass the router's traffic to the device's
                // own stack: with TAPs, auto means AF_PACKET.
                let driver = if tap && *driver == Driver::Auto { &Driver::Afpacket } else { driver };
                let port: Box<dyn Port> = match (driver, device) {
                    (Driver::Memory, _) => {
                        let mp = MemPort::new(format!("{}/{w}", p.name));
                        mem.push((p.name.clone(), mp.handle()));
                        Box::new(mp)
                    }
                    (_, Some(dev)) => match xdp
                        .open(dev, *driver, w, workers_n, plan.config.dataplane.idle, linux_mode, &mut pool, &mut umem)
                        .map_err(|e| err(format!("interface {}: {e}", p.name)))?
                    {
                        crate::afxdp::Choice::AfXdp(x) => x,
                        crate::afxdp::Choice::AfPacket => {
                            let mut cfg = AfPacketConfig::new(dev.clone());
                            if workers_n > 1 {
                                cfg.fanout =
                                    Some(Fanout { group: fanout_base.wrapping_add(i as u16), mode: FanoutMode::Hash });
                            }
                            cfg.allmulti = true;
                            let port = AfPacketPort::open_with(&cfg)
                                .map_err(|e| err(format!("interface {}: device {dev}: {e}", p.name)))?;
                            Box::new(port)
                        }
                    },
                    (_, None) => return Err(err(format!("interface {}: no device", p.name))),
                };
                bindings.push(PortBinding::new(port, i as u16));
            }
            // Sockets opened later (a device that returned) join it.
            xdp.umems.push(umem);
            if tap {
                // Port number ports.len() + k: the k-th TAP, whose frames
                // (the kernel's) enter `tap-input` as its interface's.
                let tap_input = built.graph.node_id("tap-input").ok_or_else(|| err("graph: no tap-input node"))?;
                for (ifindex, queues) in taps.iter_mut() {
                    let q = queues.pop().ok_or_else(|| err(format!("worker {w}: no TAP queue left")))?;
                    bindings.push(PortBinding { input: Some(tap_input), ..PortBinding::new(Box::new(q), *ifindex) });
                }
            }
            let cpu = plan.config.dataplane.cpus.get(usize::from(w)).copied();
            let idle = match plan.config.dataplane.idle {
                // A worker pinned to one of `control_cpus` shares its CPU
                // with the control side's threads (the IKE engines among
                // them): its empty loops before a sleep would only delay
                // them, so it sleeps at the first.
                IdleMode::Sleep if cpu.is_some_and(|c| plan.config.dataplane.control_cpus.contains(&c)) => {
                    match IdlePolicy::default() {
                        IdlePolicy::Sleep { timeout_ms, long_timeout_ms, .. } => {
                            IdlePolicy::Sleep { spins: 1, timeout_ms, long_timeout_ms }
                        }
                        spin => spin,
                    }
                }
                IdleMode::Sleep => IdlePolicy::default(),
                IdleMode::Spin => IdlePolicy::Spin,
            };
            let cfg = WorkerConfig { id: w, cpu, idle, input_node: built.input };
            let spare = if tap { SPARE_TAP_PORTS } else { 0 };
            let worker = Worker::with_spare_ports(
                cfg,
                built.graph,
                pool,
                bindings,
                Arc::clone(&trace),
                Some(domain.register()),
                spare,
            )
            .map_err(|e| err(format!("worker {w}: {e}")))?;
            workers.push((worker.spawn().map_err(|e| err(format!("worker {w}: {e}")))?, inject));
        }
        log::info!("{} interface(s), {} worker(s) running", plan.ifaces.len(), workers.len());
        shared.reass_handoff.set_wakers(
            workers
                .iter()
                .map(|(w, _)| {
                    let ws = Arc::clone(&w.shared);
                    Box::new(move || ws.wake()) as tern_nodes::reass::handoff::Wake
                })
                .collect(),
        );
        let sources = crate::linux::sources(&target).map_err(err)?;
        let watched: Vec<(u16, String)> = ports
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match &p.kind {
                IfacePlanKind::Port { device: Some(dev), driver } if *driver != Driver::Memory => {
                    Some((i as u16, dev.clone()))
                }
                _ => None,
            })
            .collect();
        let links = crate::links::LinkWatch::new(&watched);
        let mut lanes = Lanes::new(trace, xdp);
        for (worker, inject) in workers {
            lanes.add_worker(worker, inject);
        }
        for (iface, handle) in mem {
            lanes.add_mem_port(&iface, handle);
        }
        let kernel_esp = Arc::new(crate::esp_kernel::KernelEsp::new(&shared, lanes.first().map(Arc::clone)));
        let mut router = Router {
            plan,
            shared,
            lanes,
            interfaces: Interfaces::new(devs, links, host),
            routes: Routes::new(fib, sources),
            vrrp: vrrp::VrrpService::default(),
            ipsec,
            ike: crate::ike::IkeService::default(),
            bell: Arc::new(ControlBell::default()),
            started_ns,
            kernel_esp,
            esp_sockets: None,
            encap_ports: Default::default(),
        };
        if router.plan.config.linux.linux_mode() && !router.plan.config.linux.tap_exception() {
            // The kernel sees every frame of an AF_PACKET device: ESP in
            // UDP its sockets get from one is a copy of tern's.
            let copies = router.lanes.xdp().opened.iter().filter(|(_, how)| **how == "afpacket");
            router.kernel_esp.set_copy_devices(copies.map(|(dev, _)| dev.clone()));
        }
        if router.plan.ifaces.iter().any(|p| matches!(p.kind, IfacePlanKind::Ipsec { .. })) {
            // Linux mode: ESP and ESP in UDP 4500 for the router reach
            // tern, IKE stays the kernel's (`set_plan` follows reloads
            // that add or remove the last ipsec tunnel).
            router.lanes.xdp_mut().set_ipsec_to_tern(true);
            router.set_esp_sockets(true);
        }
        let t0 = std::time::Instant::now();
        match crate::reload::converge(&mut router, target) {
            Ok(report) => {
                for c in &report.changes {
                    log::debug!("start: {c}");
                }
            }
            Err(e) => {
                router.shutdown();
                return Err(err(e.message));
            }
        }
        // The XDP lane copied the (empty) FIB when it started: it takes
        // the routes now, so start returns with both lanes' tables whole.
        if let Some(lane) = router.lanes.lane_mut() {
            lane.sync(router.routes.fib_mut(), &router.shared, &router.plan.acls);
        }
        log::info!("addresses, routes and route files applied in {:.2?}", t0.elapsed());
        for (ifindex, ip, mac) in router.plan.static_neighbors.clone() {
            router.routes.add_permanent(ifindex, ip, mac);
        }
        router.vrrp = vrrp::VrrpService::new(router.plan.config.vrrp.clone(), router.plan.vrrp_groups());
        Ok(router)
    }

    /// One round of control work. Returns true if it did something.
    pub fn poll(&mut self) -> bool {
        let now = tern_engine::clock::now_ns();
        let mut changed = false;
        let mut did = self.ipsec.poll(std::time::Instant::now()) > 0;
        did |= self.refresh_ipsec_mtus(std::time::Instant::now());
        did |= self.sync_encap_ports();
        while let Some(ev) = self.shared.events.pop() {
            did = true;
            match ev {
                Event::Neighbor { ifindex, ip, mac, how } => {
                    changed |= self.routes.heard(ifindex, ip, mac, how, now);
                }
                Event::EspMoved { sa, remote, port } => self.ike.esp_moved(sa, std::net::SocketAddr::new(remote, port)),
            }
        }
        // In Linux mode the kernel owns neighbour state (the kernel mirror
        // follows it); tern's own aging would probe, and under AF_XDP never
        // see the answers, which go to the kernel.
        if !self.plan.config.linux.linux_mode() {
            let ifs = self.shared.ifaces.load();
            let lanes = &self.lanes;
            changed |= self.routes.age_neighbors(now, &self.plan.config.neighbor, &ifs, &mut |inj| {
                lanes.inject(inj);
            });
        }
        let ifs = self.shared.ifaces.load();
        changed |= self.routes.poll_sources(now, &ifs, &self.shared.ifaces);
        did |= self.poll_links();
        did |= self.poll_vrrp();
        did |= crate::ike::poll(self);
        let capturing = self.lanes.capturing();
        if let Some(lane) = self.lanes.lane_mut() {
            // A capture that ended (stopped, done, expired) gives its port
            // back to the lane.
            if lane.capture().is_some() && !capturing {
                lane.set_capture(None);
            }
            lane.sync(self.routes.fib_mut(), &self.shared, &self.plan.acls);
        }
        if self.plan.config.linux.linux_mode() && !self.lanes.xdp().is_empty() {
            // The kernel keeps the router's own traffic: its addresses
            // (also those `ip addr` adds later) pass the XDP program.
            self.interfaces.sync_steering(&self.shared.ifaces, self.lanes.xdp_mut());
        } else if !self.plan.config.linux.linux_mode() && self.lanes.xdp().has_steering() {
            // Standalone: tern's own traffic, policed in the steering
            // programs (control traffic first).
            self.interfaces.sync_tern_steering(&self.shared.ifaces, self.lanes.xdp_mut());
        }
        if changed {
            self.shared.bump_neigh_gen();
            self.lanes.wake_all();
        }
        did || changed
    }

    /// Runs the control loop until `stop` is set.
    pub fn run(&mut self, stop: &std::sync::atomic::AtomicBool) {
        let mut pause = IdlePause::default();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            self.bell.clear();
            let busy = self.poll();
            let wait = self.bound_pause(pause.next(busy));
            if !busy {
                self.bell.wait(wait);
            }
        }
    }

    /// Stops the workers and restores host settings.
    pub fn shutdown(mut self) {
        self.stop_vrrp();
        self.ike.shutdown();
        self.esp_sockets = None;
        self.lanes.stop_workers();
        self.interfaces.restore_kernel();
        log::info!("stopped");
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    /// Replaces the running configuration with `plan`, which a reload
    /// has just carried out (`crate::reload`).
    pub(crate) fn set_plan(&mut self, plan: Plan) {
        let had = self.plan.ifaces.iter().any(|p| matches!(p.kind, IfacePlanKind::Ipsec { .. }));
        let has = plan.ifaces.iter().any(|p| matches!(p.kind, IfacePlanKind::Ipsec { .. }));
        self.plan = plan;
        if has != had {
            // Linux mode: ESP and ESP in UDP 4500 for the router's
            // addresses reach tern while it terminates IPsec.
            self.lanes.xdp_mut().set_ipsec_to_tern(has);
            self.set_esp_sockets(has);
        }
    }

    /// Linux mode: binds (or closes) the wildcard UDP 4500 sockets that
    /// take fragmented ESP in UDP the kernel reassembled
    /// (`crate::esp_kernel`). A bind that fails is logged: only
    /// fragmented ESP in UDP to addresses without `[[ike]]` is lost.
    fn set_esp_sockets(&mut self, on: bool) {
        if !on || !self.plan.config.linux.linux_mode() {
            self.esp_sockets = None;
            self.encap_ports.bind(&self.kernel_esp, false);
            return;
        }
        if self.esp_sockets.is_none() {
            match crate::esp_kernel::EspSockets::start(Arc::clone(&self.kernel_esp)) {
                Ok(s) => self.esp_sockets = Some(s),
                Err(e) => log::warn!("{e}"),
            }
        }
        if !self.encap_ports.bound() {
            self.encap_ports.bind(&self.kernel_esp, true);
        }
    }

    /// The SAs' local ESP-in-UDP ports besides 4500, when they changed
    /// (an SA added or removed): to the XDP programs and, in Linux mode
    /// while the 4500 sockets are bound, their own wildcard sockets
    /// (`crate::esp_kernel`). Whether they changed.
    fn sync_encap_ports(&mut self) -> bool {
        let sas = self.shared.sas.load();
        let Some(ports) = self.encap_ports.changed(&sas) else { return false };
        log::info!("ESP in UDP on local ports {ports:?} besides 4500");
        self.lanes.xdp_mut().set_encap_ports(ports);
        let on = self.esp_sockets.is_some();
        self.encap_ports.bind(&self.kernel_esp, on);
        true
    }

    /// Where ESP in UDP the kernel received goes (Linux mode; the IKE
    /// service's sockets hand theirs here too).
    pub fn kernel_esp(&self) -> &Arc<crate::esp_kernel::KernelEsp> {
        &self.kernel_esp
    }

    /// The IPsec service (SA database, events).
    pub fn ipsec(&self) -> &crate::ipsec::Ipsec {
        &self.ipsec
    }

    pub fn ipsec_mut(&mut self) -> &mut crate::ipsec::Ipsec {
        &mut self.ipsec
    }

    /// The IKE service (its SAs, peers, counters).
    /// What wakes [`Router::run`]'s loop before its pause ends.
    pub fn bell(&self) -> Arc<ControlBell> {
        Arc::clone(&self.bell)
    }

    pub fn ike(&self) -> &crate::ike::IkeService {
        &self.ike
    }

    pub(crate) fn ike_service_mut(&mut self) -> &mut crate::ike::IkeService {
        &mut self.ike
    }

    /// The configuration's SAs taken from the running plan's to `new`'s,
    /// in one publication (`crate::reload`).
    pub(crate) fn apply_ipsec_config(&mut self, new: &Plan) -> Result<Vec<String>, String> {
        let done = self.ipsec.apply_config(&self.plan.sas, &new.sas)?;
        // The running plan's SAs are the database's from now on (tunnel
        // MTUs are worked out from them).
        self.plan.sas = new.sas.clone();
        Ok(done)
    }

    /// The tunnel using SA `id`, if one does (the running configuration).
    pub fn ipsec_sa_user(&self, id: u32) -> Option<String> {
        self.plan.ifaces.iter().find_map(|p| match &p.kind {
            IfacePlanKind::Ipsec { sa_out, sa_in, .. } if *sa_out == id || sa_in.contains(&id) => Some(p.name.clone()),
            _ => None,
        })
    }
    pub fn fib(&self) -> &FibWriter {
        self.routes.fib()
    }
    pub fn fib_mut(&mut self) -> &mut FibWriter {
        self.routes.fib_mut()
    }
    pub fn shared(&self) -> &Shared {
        &self.shared
    }
    /// The IKE service's UDP through the engine (standalone mode; see
    /// [`crate::ike_local`]).
    pub fn engine_udp(&self) -> crate::ike_local::EngineUdp {
        crate::ike_local::EngineUdp::new(&self.shared, self.lanes.first().map(Arc::clone))
    }
    /// Whether IKE runs on the router's addresses through the engine:
    /// the IKE service sets it when `[[ike]]` exists (at start and on
    /// every reload). Ignored in Linux mode, where the kernel's sockets
    /// take IKE. Off, UDP 500 to the router is answered with ICMP port
    /// unreachable and IKE on 4500 dropped, as without IKE.
    pub fn set_ike_local(&mut self, on: bool) {
        let on = on && !self.plan.config.linux.linux_mode();
        let mut p = (*self.shared.params.load()).clone();
        if p.ike_local != on {
            p.ike_local = on;
            self.shared.params.publish(p);
            self.lanes.wake_all();
        }
    }
    /// The workers and the XDP lane.
    pub fn lanes(&self) -> &Lanes {
        &self.lanes
    }
    /// The FIB, neighbours and control-plane sources.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }
    /// The ports' devices and their links.
    pub fn interfaces(&self) -> &Interfaces {
        &self.interfaces
    }
    pub fn trace(&self) -> &Arc<TraceShared> {
        self.lanes.trace()
    }
    pub fn workers(&self) -> Vec<Arc<WorkerShared>> {
        self.lanes.iter().map(Arc::clone).collect()
    }
    pub fn neighbors(&self) -> &NeighborTable {
        self.routes.neighbors()
    }
    pub fn uptime_ns(&self) -> u64 {
        tern_engine::clock::now_ns().saturating_sub(self.started_ns)
    }
    /// Handles of a memory interface's ports (one per worker).
    pub fn mem_ports(&self, iface: &str) -> Option<&[MemHandle]> {
        self.lanes.mem_ports(iface)
    }
    pub fn iftable(&self) -> Arc<IfTable> {
        self.shared.ifaces.load()
    }
    /// What the AF_XDP steering programs passed to Linux, by reason.
    pub fn xdp_steer_passes(&self) -> Vec<(&'static str, &'static str, u64)> {
        self.lanes.xdp().steer_passes()
    }
    /// The XDP lane, when devices run it.
    pub fn xdp_lane(&self) -> Option<&crate::xdplane::XdpLane> {
        self.lanes.lane()
    }
    /// While `tern capture` watches `port` (None: no capture), the XDP
    /// lane hands that port's frames to the engine and sends nothing out
    /// of it itself, so the capture sees every frame; published before
    /// this returns. Ok(false) when the port is not on the lane.
    pub fn lane_capture(&mut self, port: Option<u16>) -> Result<bool, String> {
        let Some(lane) = self.lanes.lane_mut() else { return Ok(false) };
        let on = lane.set_capture(port);
        lane.publish(&self.shared).map_err(|e| format!("XDP lane: {e}"))?;
        Ok(on)
    }

    /// The XDP programs and userspace ports of the router's devices.
    pub fn xdp_devices(&self) -> &crate::afxdp::XdpDevices {
        self.lanes.xdp()
    }
    pub fn xdp_lane_mut(&mut self) -> Option<&mut crate::xdplane::XdpLane> {
        self.lanes.lane_mut()
    }
    /// The address family-matching route lookup for `tern route get`.
    pub fn route_get(&self, addr: IpAddr) -> Option<tern_fib::RouteDetail> {
        self.routes.route_get(addr)
    }
    /// Each control-plane source's name and status (kernel mirror, FPM).
    pub fn source_status(&self) -> Vec<(String, serde_json::Value)> {
        self.routes.source_status()
    }
    /// What each netlink source (kernel mirror, FPM) did with the route
    /// messages it decoded: `tern status` and /metrics.
    pub fn route_sources(&self) -> Vec<crate::api::types::RouteSourceInfo> {
        self.routes.route_sources()
    }
}

/// Whether `dev` is a veth (its driver, as `ethtool -i` says).
pub fn is_veth(dev: &str) -> bool {
    tern_io::netdev::driver(dev).is_ok_and(|d| d == "veth")
}

/// The warning for a veth that tern drives with a lane that forwards the
/// peer's frames as they are (XDP, AF_XDP; `auto` may pick either): a
/// peer that leaves transport checksums to offload (a veth's default)
/// sends UDP and TCP whose checksums nobody finishes, and the far host
/// drops them. tern cannot see the peer's settings from its side.
pub fn veth_warning(dev: &str, driver: &Driver) -> Option<String> {
    if matches!(driver, Driver::Memory | Driver::Afpacket) || !is_veth(dev) {
        return None;
    }
    Some(format!(
        "device {dev} is a veth: if its peer offloads transmit checksums (the default), UDP and TCP \
         forwarded by the XDP and AF_XDP lanes arrive with bad checksums; run `ethtool -K PEER tx off gro on` \
         on the peer (tern lab does; docs/XDP.md, \"Veth labs\"), or use driver = \"afpacket\""
    ))
}

#[cfg(test)]
mod cpu_tests {
    use super::*;

    fn dp(cpus: &[usize], control: &[usize]) -> Dataplane {
        Dataplane { cpus: cpus.to_vec(), control_cpus: control.to_vec(), ..Dataplane::default() }
    }

    #[test]
    fn the_control_loop_pauses_longer_once_quiet() {
        let mut p = IdlePause::default();
        let short = std::time::Duration::from_millis(2);
        for i in 0..IdlePause::QUIET_POLLS {
            assert_eq!(p.next(false), short, "quiet poll {i}");
        }
        assert_eq!(p.next(false), std::time::Duration::from_millis(20));
        assert_eq!(p.next(false), std::time::Duration::from_millis(20));
        assert_eq!(p.next(true), short, "anything done: short again");
        assert_eq!(p.next(false), short);
    }

    #[test]
    fn control_threads_stay_off_the_workers_cpus() {
        assert_eq!(control_cpus(&dp(&[1], &[]), &[0, 1]), [0]);
        assert_eq!(control_cpus(&dp(&[1, 3], &[]), &[0, 1, 2, 3]), [0, 2]);
        // Workers on every CPU: the control threads share them.
        assert_eq!(control_cpus(&dp(&[0, 1], &[]), &[0, 1]), [0, 1]);
        // Named ones win, even on a worker's CPU.
        assert_eq!(control_cpus(&dp(&[1], &[1, 0, 1]), &[0, 1]), [0, 1]);
        assert_eq!(control_cpus(&dp(&[], &[]), &[0, 1]), [0, 1]);
    }

    #[test]
    fn pinning_moves_the_calling_thread() {
        // On a thread of its own: the test harness's threads keep theirs.
        let allowed = std::thread::spawn(|| {
            let all = rustix::thread::sched_getaffinity(None).expect("affinity");
            let allowed: Vec<usize> = (0..MAX_CPU).filter(|&c| all.is_set(c)).collect();
            let Some(&last) = allowed.last() else { return (allowed, Vec::new()) };
            let _ = pin_control_thread(&dp(&[last], &[]));
            let now = rustix::thread::sched_getaffinity(None).expect("affinity");
            (allowed, (0..MAX_CPU).filter(|&c| now.is_set(c)).collect::<Vec<_>>())
        })
        .join()
        .expect("thread");
        let (before, after) = allowed;
        if before.len() == 1 {
            assert_eq!(after, before, "one CPU: the control threads share it");
        } else {
            assert_eq!(after, before[..before.len() - 1], "every CPU but the worker's");
        }
    }
}

/// Wakes the control loop ([`Router::run`]) from another thread: the loop
/// clears `rung` before it polls and parks only while it is still clear,
/// so a ring between the poll and the park is not lost.
#[derive(Debug, Default)]
pub struct ControlBell {
    rung: std::sync::atomic::AtomicBool,
    bell: tern_nodes::state::Doorbell,
}

impl ControlBell {
    pub fn ring(&self) {
        self.rung.store(true, std::sync::atomic::Ordering::SeqCst);
        self.bell.ring();
    }

    /// Forgets the rings so far: call before a round that looks at
    /// everything they may have announced.
    pub fn clear(&self) {
        self.rung.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether it rang since the last [`ControlBell::clear`].
    pub fn is_rung(&self) -> bool {
        self.rung.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Parks until a ring since the last [`ControlBell::clear`], or
    /// `timeout`.
    pub fn wait(&self, timeout: std::time::Duration) {
        self.bell.wait(timeout, || self.is_rung());
    }
}
