//! ESP in UDP that reaches the kernel in Linux mode, handed to the engine.
//!
//! In Linux mode the kernel owns the router's addresses. The AF_XDP
//! steering program (and the XDP lane) sends ESP and unfragmented ESP in
//! UDP 4500 for them to tern, but decides frame by frame before the kernel
//! reassembles: a UDP fragment's ports are in the first fragment alone, so
//! every UDP fragment for the router goes to Linux, which puts fragmented
//! ESP in UDP back together and delivers it to a UDP socket on port 4500.
//! Those sockets are tern's: the IKE service's (`crate::ike::io`, on the
//! `[[ike]]` local addresses) and, while an ipsec tunnel exists, the two
//! wildcard sockets here (0.0.0.0:4500 and [::]:4500, which the kernel
//! picks only for the addresses no IKE socket is bound to, as a bound
//! address ranks above the wildcard).
//!
//! Both read what arrives with the interface it arrived on
//! (IP_PKTINFO / IPV6_PKTINFO) and give ESP to [`KernelEsp::take`]:
//! arriving on a device whose every frame the kernel sees beside tern
//! (AF_PACKET, exception `kernel`), it is the kernel's copy of frames tern
//! received itself and is dropped, counted as `copies`; from anywhere else
//! (AF_XDP, the XDP lane, a TAP of the TAP exception path, a device tern
//! does not drive) the kernel is the only one that has it: the datagram
//! is rebuilt as an IPv4/IPv6 + UDP packet between the same addresses and
//! ports and queued on `Shared::esp_from_kernel`, where the workers'
//! `esp-from-kernel` node hands it to `esp-decrypt` (counted there as
//! `esp-from-kernel/from-kernel`, then as any ESP). So each datagram ends
//! in one counter: one of [`KernelEspStats`] or the node's.
//!
//! IKE reaching the wildcard sockets (the non-ESP marker, to an address
//! without `[[ike]]`, or on a port other than 4500, where no IKE runs)
//! and NAT keep-alives are counted and dropped.
//!
//! SAs may carry ESP in UDP on other local ports than 4500 (`udp_encap`'s
//! `src_port`): the steering programs send those ports to tern as they
//! do 4500, and [`EncapPorts`] binds wildcard sockets on them too while
//! an SA uses them and an ipsec tunnel exists, closing them when none
//! does (the SA table's [`tern_ipsec::SaTable::encap_ports`], followed by
//! the control loop).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tern_engine::WorkerShared;
use tern_nodes::state::{InjectQueue, Shared};

/// NAT traversal's UDP port (RFC 3948).
pub const NAT_T_PORT: u16 = 4500;

/// What [`KernelEsp`] counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KernelEspStats {
    /// ESP in UDP queued for the engine's `esp-decrypt`.
    pub to_engine: u64,
    /// The kernel's copy of ESP tern received itself (AF_PACKET devices).
    pub copies: u64,
    /// Dropped: the workers' queue was full, or the datagram could not be
    /// rebuilt (over 64 KiB with its headers).
    pub queue_full: u64,
    /// IKE (the non-ESP marker) on the wildcard sockets: no `[[ike]]` on
    /// that address.
    pub ike_unserved: u64,
    /// NAT keep-alives (one 0xff byte, RFC 3948 2.3).
    pub keepalives: u64,
    /// Shorter than an ESP header (SPI and sequence number).
    pub runts: u64,
}

#[derive(Default)]
struct Counters {
    to_engine: AtomicU64,
    copies: AtomicU64,
    queue_full: AtomicU64,
    ike_unserved: AtomicU64,
    keepalives: AtomicU64,
    runts: AtomicU64,
}

/// Devices where the kernel has its own copy of every frame, and what
/// each interface index seen so far turned out to be.
#[derive(Default)]
struct Copies {
    devices: HashSet<String>,
    by_index: HashMap<u32, bool>,
}

/// Where ESP in UDP the kernel received goes (see the module). Shared by
/// the wildcard sockets' thread and the IKE service's shards.
pub struct KernelEsp {
    queue: Arc<InjectQueue>,
    /// The worker woken when the queue was empty (every worker polls it).
    worker: Option<Arc<WorkerShared>>,
    copies: Mutex<Copies>,
    counters: Counters,
    ipv4_id: AtomicU16,
}

impl KernelEsp {
    /// Over the workers' queue in `shared`, waking `worker` (the first).
    pub fn new(shared: &Shared, worker: Option<Arc<WorkerShared>>) -> KernelEsp {
        KernelEsp {
            queue: Arc::clone(&shared.esp_from_kernel),
            worker,
            copies: Mutex::default(),
            counters: Counters::default(),
            ipv4_id: AtomicU16::new(0),
        }
    }

    /// The devices (by name) whose frames the kernel sees beside tern:
    /// AF_PACKET ports in Linux mode with the `kernel` exception path.
    pub fn set_copy_devices(&self, devices: impl IntoIterator<Item = String>) {
        let mut c = self.copies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        c.devices = devices.into_iter().collect();
        c.by_index.clear();
    }

    /// Whether the kernel's datagram that arrived on `ifindex` is a copy
    /// of frames tern received itself. An index is looked up by name
    /// once (a device created again gets a new index).
    fn is_copy(&self, ifindex: u32) -> bool {
        let mut c = self.copies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if c.devices.is_empty() {
            return false;
        }
        if let Some(&v) = c.by_index.get(&ifindex) {
            return v;
        }
        let v = nix::net::if_::if_indextoname(ifindex)
            .ok()
            .and_then(|n| n.into_string().ok())
            .is_some_and(|n| c.devices.contains(&n));
        if c.by_index.len() > 4096 {
            c.by_index.clear();
        }
        c.by_index.insert(ifindex, v);
        v
    }

    /// ESP (`esp`: the UDP payload, SPI first) that the kernel received
    /// from `remote` to `local` on interface `ifindex`: queued for the
    /// engine, or counted as the kernel's copy or a full queue. True when
    /// queued.
    pub fn take(&self, local: SocketAddr, remote: SocketAddr, ifindex: u32, esp: &[u8]) -> bool {
        let c = &self.counters;
        if self.is_copy(ifindex) {
            c.copies.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let id = self.ipv4_id.fetch_add(1, Ordering::Relaxed);
        let Some(pkt) = tern_nodes::ike::udp_packet(remote, local, esp, id) else {
            c.queue_full.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        match self.queue.push(pkt) {
            Ok(wake) => {
                c.to_engine.fetch_add(1, Ordering::Relaxed);
                if wake && let Some(w) = &self.worker {
                    w.wake();
                }
                true
            }
            Err(_) => {
                c.queue_full.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// A datagram on a wildcard socket: ESP to [`KernelEsp::take`], the
    /// rest counted.
    fn take_any(&self, local: SocketAddr, remote: SocketAddr, ifindex: u32, d: &[u8]) {
        let c = &self.counters;
        if d == [0xff] {
            c.keepalives.fetch_add(1, Ordering::Relaxed);
        } else if d.get(..4) == Some(&[0, 0, 0, 0][..]) {
            c.ike_unserved.fetch_add(1, Ordering::Relaxed);
        } else if d.len() < 8 {
            c.runts.fetch_add(1, Ordering::Relaxed);
        } else {
            self.take(local, remote, ifindex, d);
        }
    }

    pub fn stats(&self) -> KernelEspStats {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        KernelEspStats {
            to_engine: l(&c.to_engine),
            copies: l(&c.copies),
            queue_full: l(&c.queue_full),
            ike_unserved: l(&c.ike_unserved),
            keepalives: l(&c.keepalives),
            runts: l(&c.runts),
        }
    }
}

/// Linux mode: the wildcard sockets on the SAs' local ESP-in-UDP ports
/// other than 4500 (see the module), following the SA table. Each port
/// has its own sockets: a change binds the new ports before it closes
/// those no SA uses any more, and leaves the sockets of the ports that
/// stay as they are, so that no datagram to a port that stays finds it
/// unbound (or is lost unread in a closed socket).
#[derive(Default)]
pub struct EncapPorts {
    /// The table's port list last seen (one `Arc` while it does not
    /// change), the ports besides 500 and 4500 in it, and their sockets.
    seen: Option<Arc<[u16]>>,
    ports: Vec<u16>,
    sockets: std::collections::BTreeMap<u16, EspSockets>,
}

impl EncapPorts {
    /// The SAs' local ESP-in-UDP ports besides 500 and 4500 when they
    /// changed since the last call (the first call: when there are any).
    pub fn changed(&mut self, sas: &tern_ipsec::SaTable) -> Option<&[u16]> {
        let now = sas.encap_ports();
        if self.seen.as_ref().is_some_and(|s| Arc::ptr_eq(s, now)) {
            return None;
        }
        self.seen = Some(Arc::clone(now));
        let ports: Vec<u16> = now.iter().copied().filter(|&p| p != NAT_T_PORT && p != 500).collect();
        self.set_ports(ports).then_some(&self.ports[..])
    }

    /// Sets the ports; whether they changed.
    fn set_ports(&mut self, ports: Vec<u16>) -> bool {
        if ports == self.ports {
            return false;
        }
        self.ports = ports;
        true
    }

    /// The ports [`EncapPorts::changed`] last reported.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Binds the wildcard sockets of [`EncapPorts::ports`] (`on`: Linux
    /// mode with an ipsec tunnel) that are not bound yet, then closes
    /// those of ports no longer listed; not `on`: closes them all. A
    /// bind that fails is logged (only fragmented ESP in UDP on that
    /// port is lost) and tried again at the next call.
    pub fn bind(&mut self, esp: &Arc<KernelEsp>, on: bool) {
        if on {
            for &port in &self.ports {
                if self.sockets.contains_key(&port) {
                    continue;
                }
                match EspSockets::start_on(Arc::clone(esp), &[port]) {
                    Ok(s) => {
                        self.sockets.insert(port, s);
                    }
                    Err(e) => log::warn!("{e}"),
                }
            }
        }
        let ports = &self.ports;
        self.sockets.retain(|p, _| on && ports.contains(p));
    }

    /// Whether sockets are bound (for every port listed).
    pub fn bound(&self) -> bool {
        !self.sockets.is_empty() && self.ports.iter().all(|p| self.sockets.contains_key(p))
    }
}

/// One datagram read by [`recv_info`]: its length, where from, the local
/// address it was sent to and the interface it arrived on.
pub struct Received {
    pub len: usize,
    pub remote: SocketAddr,
    pub local: IpAddr,
    pub ifindex: u32,
}

/// Asks the kernel for each datagram's destination and interface
/// (IP_PKTINFO, and IPV6_RECVPKTINFO on an IPv6 socket).
pub fn want_pktinfo(fd: &impl AsFd, v6: bool) -> std::io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    if v6 {
        setsockopt(fd, sockopt::Ipv6RecvPacketInfo, &true)?;
    } else {
        setsockopt(fd, sockopt::Ipv4PacketInfo, &true)?;
    }
    Ok(())
}

/// Reads one datagram into `buf` without blocking (None: nothing waits, or
/// an error), with what [`want_pktinfo`] asked for; `bound` is the
/// socket's own address, the local address when no control message came.
pub fn recv_info(sock: &UdpSocket, bound: IpAddr, buf: &mut [u8]) -> Option<Received> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg};
    let mut cmsg = nix::cmsg_space!(nix::libc::in6_pktinfo, nix::libc::in_pktinfo);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let m = recvmsg::<SockaddrStorage>(sock.as_raw_fd(), &mut iov, Some(cmsg.as_mut_slice()), MsgFlags::MSG_DONTWAIT)
        .ok()?;
    let remote = m.address.as_ref().and_then(|a| {
        if let Some(v4) = a.as_sockaddr_in() {
            Some(SocketAddr::new(IpAddr::V4(v4.ip()), v4.port()))
        } else {
            a.as_sockaddr_in6().map(|v6| SocketAddr::new(IpAddr::V6(v6.ip()), v6.port()))
        }
    })?;
    let (mut local, mut ifindex) = (bound, 0u32);
    if let Ok(msgs) = m.cmsgs() {
        for c in msgs {
            match c {
                ControlMessageOwned::Ipv4PacketInfo(i) => {
                    local = IpAddr::V4(Ipv4Addr::from(u32::from_be(i.ipi_addr.s_addr)));
                    ifindex = u32::try_from(i.ipi_ifindex).unwrap_or(0);
                }
                ControlMessageOwned::Ipv6PacketInfo(i) => {
                    local = IpAddr::V6(Ipv6Addr::from(i.ipi6_addr.s6_addr));
                    ifindex = i.ipi6_ifindex;
                }
                _ => {}
            }
        }
    }
    // A v4-mapped source on an IPv6 socket cannot happen (IPV6_V6ONLY).
    Some(Received { len: m.bytes, remote, local, ifindex })
}

/// The wildcard UDP 4500 sockets (or those of other ports,
/// [`EspSockets::start_on`]) and the thread that reads them (see the
/// module): bound while the router terminates IPsec in Linux mode,
/// closed when dropped.
pub struct EspSockets {
    stop: Arc<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EspSockets {
    /// Binds 0.0.0.0:4500 and [::]:4500 (SO_REUSEADDR, as the IKE
    /// service's sockets, which keep their addresses) and starts reading.
    /// An address family the kernel lacks is skipped; neither: an error.
    pub fn start(esp: Arc<KernelEsp>) -> Result<EspSockets, String> {
        EspSockets::start_on(esp, &[NAT_T_PORT])
    }

    /// The same on each of `ports` (both families); a port that cannot be
    /// bound is logged and skipped; none bound at all: an error.
    pub fn start_on(esp: Arc<KernelEsp>, ports: &[u16]) -> Result<EspSockets, String> {
        let mut socks = Vec::new();
        let mut errors = Vec::new();
        for &port in ports {
            for ip in [IpAddr::V4(Ipv4Addr::UNSPECIFIED), IpAddr::V6(Ipv6Addr::UNSPECIFIED)] {
                let at = SocketAddr::new(ip, port);
                match bind_wildcard(at) {
                    Ok(s) => socks.push((at, s)),
                    Err(e) => errors.push(format!("UDP {at}: {e}")),
                }
            }
        }
        if socks.is_empty() {
            return Err(format!("ESP in UDP from the kernel: {}", errors.join("; ")));
        }
        for e in errors {
            log::warn!("ESP in UDP from the kernel: {e}");
        }
        let stop = Arc::new(
            rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK)
                .map_err(|e| format!("ESP in UDP from the kernel: eventfd: {e}"))?,
        );
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("tern-esp-udp".into())
            .spawn(move || read_loop(&socks, &stop2, &esp))
            .map_err(|e| format!("ESP in UDP from the kernel: thread: {e}"))?;
        Ok(EspSockets { stop, thread: Some(thread) })
    }
}

impl Drop for EspSockets {
    fn drop(&mut self) {
        let _ = rustix::io::write(&*self.stop, &1u64.to_ne_bytes());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn bind_wildcard(at: SocketAddr) -> std::io::Result<UdpSocket> {
    use rustix::net::{AddressFamily, SocketType, ipproto, socket};
    let v6 = at.is_ipv6();
    let fd =
        socket(if v6 { AddressFamily::INET6 } else { AddressFamily::INET }, SocketType::DGRAM, Some(ipproto::UDP))?;
    rustix::net::sockopt::set_socket_reuseaddr(&fd, true)?;
    if v6 {
        rustix::net::sockopt::set_ipv6_v6only(&fd, true)?;
    }
    want_pktinfo(&fd, v6)?;
    rustix::net::bind(&fd, &at)?;
    Ok(UdpSocket::from(fd))
}

/// Parks in poll(2) on the sockets and `stop`; drains what arrived.
fn read_loop(socks: &[(SocketAddr, UdpSocket)], stop: &OwnedFd, esp: &KernelEsp) {
    use rustix::event::{PollFd, PollFlags};
    let mut buf = vec![0u8; 65536];
    loop {
        let mut fds: Vec<PollFd<'_>> = socks.iter().map(|(_, s)| PollFd::new(s, PollFlags::IN)).collect();
        fds.push(PollFd::new(stop, PollFlags::IN));
        // EINTR: round again.
        let _ = rustix::event::poll(&mut fds, None);
        if fds.last().is_some_and(|f| !f.revents().is_empty()) {
            return;
        }
        for (bound, s) in socks {
            // A bounded run per socket, then the others and `stop`.
            for _ in 0..1024 {
                let Some(r) = recv_info(s, bound.ip(), &mut buf) else { break };
                let d = buf.get(..r.len).unwrap_or_default();
                esp.take_any(SocketAddr::new(r.local, bound.port()), r.remote, r.ifindex, d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        let (_, reader) = tern_fib::new(tern_fib::FibConfig::default(), tern_rcu::Domain::new());
        Shared::new(tern_nodes::state::IfTable::new(Vec::new()), reader)
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("socket address")
    }

    #[test]
    fn esp_is_rebuilt_for_the_engine_and_the_rest_counted() {
        let sh = shared();
        let k = KernelEsp::new(&sh, None);
        let esp = [0, 0, 0x30, 0x02, 0, 0, 0, 1, 0xaa, 0xbb];
        k.take_any(sa("10.0.2.1:4500"), sa("10.0.2.2:4501"), 3, &esp);
        k.take_any(sa("10.0.2.1:4500"), sa("10.0.2.2:4500"), 3, &[0xff]);
        k.take_any(sa("10.0.2.1:4500"), sa("10.0.2.2:4500"), 3, &[0, 0, 0, 0, 1, 2, 3, 4, 5]);
        k.take_any(sa("10.0.2.1:4500"), sa("10.0.2.2:4500"), 3, &[1, 2, 3]);
        let s = k.stats();
        assert_eq!((s.to_engine, s.keepalives, s.ike_unserved, s.runts, s.copies), (1, 1, 1, 1, 0));
        let pkt = sh.esp_from_kernel.pop().expect("queued");
        assert!(sh.esp_from_kernel.pop().is_none());
        let ip = tern_wire::Ipv4Packet::new_checked(&pkt[..]).expect("IPv4");
        assert!(ip.verify_checksum());
        assert_eq!((ip.src_addr().to_string(), ip.dst_addr().to_string()), ("10.0.2.2".into(), "10.0.2.1".into()));
        let udp = &pkt[20..];
        assert_eq!(&udp[..4], &[0x11, 0x95, 0x11, 0x94], "ports as received: 4501 -> 4500");
        assert_eq!(&udp[8..], &esp[..]);
    }

    #[test]
    fn the_kernels_copy_from_an_af_packet_device_is_dropped() {
        let sh = shared();
        let k = KernelEsp::new(&sh, None);
        let lo = nix::net::if_::if_nametoindex("lo").expect("lo");
        k.set_copy_devices(["lo".to_string()]);
        let esp = [0, 0, 0x30, 0x02, 0, 0, 0, 1];
        assert!(!k.take(sa("[2001:db8::1]:4500"), sa("[2001:db8::2]:4500"), lo, &esp));
        assert!(k.take(sa("[2001:db8::1]:4500"), sa("[2001:db8::2]:4500"), 0, &esp), "no such device");
        let s = k.stats();
        assert_eq!((s.copies, s.to_engine), (1, 1));
        k.set_copy_devices([]);
        assert!(k.take(sa("[2001:db8::1]:4500"), sa("[2001:db8::2]:4500"), lo, &esp));
    }

    /// Three ports nobody holds now (the kernel's picks for port 0).
    fn free_ports() -> (u16, u16, u16) {
        let s: Vec<UdpSocket> = (0..3).map(|_| UdpSocket::bind("0.0.0.0:0").expect("a free port")).collect();
        let p = |i: usize| s[i].local_addr().expect("addr").port();
        (p(0), p(1), p(2))
    }

    /// Whether something holds UDP `port` on the IPv4 wildcard (a bind
    /// without SO_REUSEADDR fails then).
    fn held(port: u16) -> bool {
        UdpSocket::bind(("0.0.0.0", port)).is_err()
    }

    /// The port set changes five times while datagrams to port `a`, which
    /// stays, wait unread in its socket: each reaches the engine's queue
    /// (a rebind would close the socket holding them, and leave the port
    /// unbound for a moment); the ports that come are bound, those that
    /// go released.
    #[test]
    fn a_port_set_change_loses_nothing_on_the_ports_that_stay() {
        let sh = shared();
        let k = Arc::new(KernelEsp::new(&sh, None));
        let (a, b, c) = free_ports();
        let mut e = EncapPorts::default();
        assert!(e.set_ports(vec![a, c]));
        e.bind(&k, true);
        assert!(e.bound() && held(a) && held(c) && !held(b));
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let esp = [0, 0, 0x30, 0x02, 0, 0, 0, 1];
        let mut sent = 0u64;
        for ports in [vec![a, b], vec![a], vec![a, c], vec![a, b, c], vec![a]] {
            for _ in 0..40 {
                tx.send_to(&esp, ("127.0.0.1", a)).expect("send");
                sent += 1;
            }
            assert!(e.set_ports(ports.clone()));
            e.bind(&k, true);
            assert!(e.bound(), "{ports:?}");
            for p in [b, c] {
                assert_eq!(held(p), ports.contains(&p), "port {p} in {ports:?}");
            }
        }
        assert!(!e.set_ports(vec![a]), "the same set is no change");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut queued = 0u64;
        while queued < sent && std::time::Instant::now() < deadline {
            match sh.esp_from_kernel.pop() {
                Some(_) => queued += 1,
                None => std::thread::yield_now(),
            }
        }
        let s = k.stats();
        assert_eq!((queued, s.to_engine, s.queue_full, s.runts), (sent, sent, 0, 0));
        e.bind(&k, false);
        assert!(!e.bound() && !held(a), "off: every socket closed");
    }

    /// Through a real socket: a datagram to 127.0.0.1 on a socket asking
    /// for IP_PKTINFO tells its destination and interface (lo).
    #[test]
    fn recv_info_reports_destination_and_interface() {
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
        want_pktinfo(&s, false).expect("pktinfo");
        let to = s.local_addr().expect("addr");
        let c = UdpSocket::bind("127.0.0.1:0").expect("bind");
        c.send_to(b"esp!", to).expect("send");
        let mut buf = [0u8; 64];
        let mut fds = [rustix::event::PollFd::new(&s, rustix::event::PollFlags::IN)];
        let ts = rustix::time::Timespec { tv_sec: 10, tv_nsec: 0 };
        assert_eq!(rustix::event::poll(&mut fds, Some(&ts)).expect("poll"), 1, "the datagram arrives");
        let r = recv_info(&s, IpAddr::V4(Ipv4Addr::UNSPECIFIED), &mut buf).expect("the datagram");
        assert_eq!(&buf[..r.len], b"esp!");
        assert_eq!(r.remote, c.local_addr().expect("addr"));
        assert_eq!(r.local, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(r.ifindex, nix::net::if_::if_nametoindex("lo").expect("lo"));
    }
}
