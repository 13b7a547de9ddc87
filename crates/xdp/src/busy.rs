//! Preferred busy polling: the worker's thread runs the receive NAPI
//! context of its queue itself, so the kernel's softirq does not compete
//! with it for the core.
//!
//! Measured on this machine kind (2 vCPUs, veth, Linux 6.18; issue 5): a
//! busy-polling forwarder sharing its core with the kernel's receive thread
//! collapses unless it really drives the NAPI. On NICs that link queues to
//! NAPI contexts the XSK learns a NAPI id and plain busy polling on the XSK
//! (SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET, then
//! recvfrom/sendto each loop) engages. veth registers no queue-to-NAPI link,
//! so the XSK's SO_INCOMING_NAPI_ID stays 0 and those options do nothing.
//! What worked there: a helper UDP socket on the device learns the NAPI id
//! from a few packets the XDP program passes up (anything sent to the probe
//! port, default 9 "discard", at one of the router's addresses), then
//! `recv(MSG_DONTWAIT)` on it each loop busy-polls that NAPI, which runs the
//! XDP program and fills the XSK. Device settings complete it (see
//! [`tune_napi_for_busy_poll`]; the port applies them once busy polling
//! engages and restores them when closed): threaded NAPI off,
//! napi_defer_hard_irqs 1000, gro_flush_timeout 5 ms (with 2/200 us
//! ksoftirqd takes the NAPI back and the rate halves), and TSO off on the
//! egress veth (that one is the operator's).
//!
//! [`BusyPoll::Adaptive`] (the default for workers that sleep when idle)
//! busy-polls only while traffic flows: before the worker sleeps the port
//! *parks* (puts the device's NAPI settings back and lets one last busy
//! poll hand the NAPI to the kernel's softirq, so the XSK's descriptor
//! wakes the sleeping worker as in interrupt mode), and it *unparks* (the
//! settings again, busy polling again) once [`UNPARK_AFTER`] packets came
//! in since the worker woke. Sparse traffic stays interrupt-driven. Linux
//! 6.13's IRQ suspension does the same inside epoll_wait, but needs the
//! NAPI id on an epoll item, which a veth's XSK never has.
//!
//! Scheduling matters as much: the worker must keep polling. If it is
//! descheduled for longer than gro_flush_timeout the kernel's softirq takes
//! the NAPI; under SCHED_FIFO the worker starves ksoftirqd, which then holds
//! the NAPI the worker wants (measured: the busy poll call returns at once
//! and the queue is serviced only now and then).

use crate::sys;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Busy-polling policy of a port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BusyPoll {
    /// The worker spins and drives the queue's NAPI where that engages
    /// ([`crate::XskPort::wait_fd`] then returns `None`).
    #[default]
    On,
    /// Busy polling while traffic flows; interrupt-driven while the worker
    /// sleeps (see the module docs): for workers that sleep when idle.
    Adaptive,
    /// Interrupt-driven: the kernel's softirq fills the rings and an idle
    /// worker can sleep in poll(2) on the port's descriptor.
    Off,
}

/// What busy polling is doing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusyPollState {
    /// Policy off.
    Off,
    /// Waiting to learn a NAPI id (from received packets on the XSK, or
    /// from probe packets on the helper socket).
    Learning,
    /// Busy polling through the XSK itself.
    Socket { napi_id: u32 },
    /// Busy polling through the helper UDP socket's borrowed NAPI id.
    Helper { napi_id: u32 },
    /// The socket options were refused (no CAP_NET_ADMIN, old kernel).
    Unavailable,
}

/// Busy-poll socket settings measured on this machine kind.
const BUSY_POLL_USECS: i32 = 50;
const BUSY_POLL_BUDGET: i32 = 64;
/// Service calls between two NAPI-id checks while learning.
const LEARN_EVERY: u32 = 256;
/// Shortest time between two NAPI-id checks a worker going to sleep makes.
const LEARN_SLEEPING: Duration = Duration::from_millis(10);
/// Packets received after an adaptive port's worker woke before busy
/// polling resumes (the receive queue is then busy enough to be worth it).
pub const UNPARK_AFTER: u32 = 256;
/// How long an adaptive port's queue must be quiet before its worker may
/// sleep (see [`BusyPoller::park`]).
pub const PARK_AFTER: Duration = Duration::from_millis(2);

fn set_busy_opts(fd: RawFd) -> io::Result<()> {
    sys::setsockopt_int(fd, libc::SOL_SOCKET, sys::SO_PREFER_BUSY_POLL, 1)?;
    sys::setsockopt_int(fd, libc::SOL_SOCKET, sys::SO_BUSY_POLL, BUSY_POLL_USECS)?;
    sys::setsockopt_int(fd, libc::SOL_SOCKET, sys::SO_BUSY_POLL_BUDGET, BUSY_POLL_BUDGET)
}

fn napi_id(fd: RawFd) -> u32 {
    sys::getsockopt_int(fd, libc::SOL_SOCKET, sys::SO_INCOMING_NAPI_ID).map_or(0, |v| v as u32)
}

/// A UDP socket bound to `port` on device `ifname` (dual-stack when IPv6 is
/// available), non-blocking, with busy-poll options set.
fn helper_socket(ifname: &str, port: u16) -> io::Result<OwnedFd> {
    let (fd, v6) = match sys::udp_socket(true) {
        Ok(fd) => (fd, true),
        Err(_) => (sys::udp_socket(false)?, false),
    };
    let raw = fd.as_raw_fd();
    if v6 {
        sys::setsockopt_int(raw, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0)?;
    }
    // Several queues of one device each have a helper on the same port.
    sys::setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    sys::setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    sys::setsockopt_bytes(raw, libc::SOL_SOCKET, libc::SO_BINDTODEVICE, ifname.as_bytes())?;
    sys::bind_udp_any(raw, v6, port)?;
    set_busy_opts(raw)?;
    Ok(fd)
}

/// The per-port busy-poll machinery.
pub(crate) struct BusyPoller {
    state: BusyPollState,
    xsk: RawFd,
    helper: Option<OwnedFd>,
    countdown: u32,
    /// When a learning port last checked for a NAPI id.
    learn_checked: Instant,
    /// Device to tune once busy polling engages (see [`Self::engage`]).
    tune: Option<String>,
    tuning: Option<NapiTuning>,
    adaptive: bool,
    /// Adaptive and the worker went to sleep: the kernel has the NAPI.
    parked: bool,
    /// Packets received since the parked worker woke.
    woke_pkts: u32,
    /// Unparked: packets came in since the last [`Self::park`] call, and
    /// since when the queue has been quiet.
    saw_rx: bool,
    quiet_since: Instant,
}

impl BusyPoller {
    pub(crate) fn new(policy: BusyPoll, xsk: RawFd, ifname: &str, probe_port: Option<u16>, tune: bool) -> BusyPoller {
        let mut bp = BusyPoller {
            state: BusyPollState::Off,
            xsk,
            helper: None,
            countdown: 0,
            learn_checked: Instant::now(),
            tune: tune.then(|| ifname.to_string()),
            tuning: None,
            adaptive: policy == BusyPoll::Adaptive,
            parked: false,
            woke_pkts: 0,
            saw_rx: false,
            quiet_since: Instant::now(),
        };
        if policy == BusyPoll::Off {
            return bp;
        }
        if let Err(e) = set_busy_opts(xsk) {
            log::warn!("{ifname}: busy polling unavailable, socket options refused: {e}");
            bp.state = BusyPollState::Unavailable;
            return bp;
        }
        if let Some(port) = probe_port {
            match helper_socket(ifname, port) {
                Ok(fd) => bp.helper = Some(fd),
                Err(e) => {
                    log::info!("{ifname}: no busy-poll helper socket on UDP port {port}: {e}")
                }
            }
        }
        bp.state = BusyPollState::Learning;
        bp
    }

    pub(crate) fn state(&self) -> BusyPollState {
        self.state
    }

    /// True once a NAPI id is known and busy polling set up.
    pub(crate) fn engaged(&self) -> bool {
        matches!(self.state, BusyPollState::Socket { .. } | BusyPollState::Helper { .. })
    }

    /// True while the worker should spin rather than sleep: engaged and
    /// not parked.
    pub(crate) fn spinning(&self) -> bool {
        self.engaged() && !self.parked
    }

    /// True while an adaptive port has handed its NAPI back to the kernel.
    pub(crate) fn parked(&self) -> bool {
        self.parked
    }

    /// The worker wants to sleep; false: not yet, keep polling. An
    /// adaptive, engaged port parks once its queue has been quiet for
    /// [`PARK_AFTER`]: the device's deferral settings go back to what they
    /// were (threaded NAPI stays off: a receive thread on the worker's core
    /// would take it from the worker) and one last busy poll (which,
    /// without deferral, ends by re-enabling the queue's interrupt) hands
    /// the NAPI to the kernel. Sooner, a sleeping worker would leave the
    /// NAPI to the deferral watchdog (gro_flush_timeout), and traffic in
    /// bursts (as from a NIC's interrupt moderation) would park and unpark
    /// it at every gap. A port still learning checks for a NAPI id here
    /// (at most every LEARN_SLEEPING) rather than after LEARN_EVERY loops,
    /// which a sleeping worker takes long to run.
    pub(crate) fn park(&mut self, name: &str) -> bool {
        // At most every LEARN_SLEEPING: while another port keeps the
        // worker polling, this is called on every empty loop.
        if self.state == BusyPollState::Learning && self.learn_checked.elapsed() >= LEARN_SLEEPING {
            self.countdown = 0;
            self.service(name);
        }
        if self.parked {
            // Counted afresh each time: only a burst within one waking
            // spell brings busy polling back.
            self.woke_pkts = 0;
            return true;
        }
        if !self.adaptive || !self.engaged() {
            return true;
        }
        let now = Instant::now();
        if std::mem::take(&mut self.saw_rx) {
            self.quiet_since = now;
        }
        if now.duration_since(self.quiet_since) < PARK_AFTER {
            return false;
        }
        if let Some(t) = &self.tuning
            && let Err(e) = t.restore_deferral()
        {
            log::warn!("{name}: cannot put the NAPI settings back before sleeping: {e}");
        }
        self.busy_poll_once();
        self.parked = true;
        self.woke_pkts = 0;
        true
    }

    /// Packets the port just received. A parked port unparks once
    /// [`UNPARK_AFTER`] came in since the worker woke.
    #[inline]
    pub(crate) fn note_rx(&mut self, name: &str, n: usize) {
        if !self.parked {
            self.saw_rx |= n > 0;
            return;
        }
        self.woke_pkts = self.woke_pkts.saturating_add(n as u32);
        if self.woke_pkts >= UNPARK_AFTER {
            if let Some(t) = &self.tuning
                && let Err(e) = t.apply_deferral()
            {
                log::warn!("{name}: cannot apply the NAPI settings for busy polling: {e}");
            }
            self.parked = false;
            self.saw_rx = true;
        }
    }

    fn busy_poll_once(&self) {
        match self.state {
            BusyPollState::Socket { .. } => {
                let _ = sys::recv_dontwait(self.xsk, &mut []);
            }
            BusyPollState::Helper { .. } => {
                if let Some(h) = &self.helper {
                    // Reads (and discards) a probe datagram if one is there;
                    // either way the kernel polls the borrowed NAPI first.
                    let mut buf = [0u8; 64];
                    let _ = sys::recv_dontwait(h.as_raw_fd(), &mut buf);
                }
            }
            _ => {}
        }
    }

    /// One busy-poll round, before reading the rx ring. Returns false when
    /// busy polling is not engaged (the caller then wakes the kernel only
    /// if the fill ring asks for it).
    #[inline]
    pub(crate) fn poll(&mut self) -> bool {
        if !self.spinning() {
            return false;
        }
        self.busy_poll_once();
        true
    }

    /// Housekeeping once per worker loop: while learning, check every
    /// LEARN_EVERY calls whether a NAPI id is known yet.
    pub(crate) fn service(&mut self, name: &str) {
        if self.state != BusyPollState::Learning {
            return;
        }
        self.countdown = self.countdown.saturating_sub(1);
        if self.countdown > 0 {
            return;
        }
        self.countdown = LEARN_EVERY;
        self.learn_checked = Instant::now();
        // A zero-copy XSK marks its NAPI id on its first receive call.
        let _ = sys::recv_dontwait(self.xsk, &mut []);
        let id = napi_id(self.xsk);
        if id != 0 {
            log::info!("{name}: busy polling on the XSK (NAPI {id})");
            self.helper = None;
            self.engage(name, BusyPollState::Socket { napi_id: id });
            return;
        }
        if let Some(h) = &self.helper {
            let raw = h.as_raw_fd();
            let mut buf = [0u8; 64];
            // Drain probe packets so that they do not pile up.
            while sys::recv_dontwait(raw, &mut buf).is_ok() {}
            let id = napi_id(raw);
            if id != 0 {
                log::info!("{name}: busy polling through the helper socket's NAPI {id} (queue has no NAPI link)");
                self.engage(name, BusyPollState::Helper { napi_id: id });
            }
        }
    }

    /// Switches to an engaged state and only then applies the device NAPI
    /// settings: with napi_defer_hard_irqs set and nobody busy polling, a
    /// veth's queue is serviced only by the gro_flush_timeout watchdog (a
    /// few hundred packets per 5 ms), which would also starve the probe
    /// packets we learn the NAPI id from.
    fn engage(&mut self, name: &str, state: BusyPollState) {
        self.state = state;
        if let Some(ifname) = self.tune.take() {
            match tune_napi_for_busy_poll(&ifname) {
                Ok(t) => self.tuning = Some(t),
                Err(e) => log::warn!("{name}: NAPI settings for busy polling not applied: {e}"),
            }
        }
    }
}

impl Drop for BusyPoller {
    fn drop(&mut self) {
        if let Some(t) = self.tuning.take()
            && let Err(e) = t.restore()
        {
            log::warn!("cannot restore NAPI settings: {e}");
        }
    }
}

/// Previous NAPI settings of a device, restored by [`NapiTuning::restore`].
#[derive(Debug)]
pub struct NapiTuning {
    ifname: String,
    previous: Vec<(&'static str, String)>,
}

const TUNING: [(&str, &str); 3] =
    [("threaded", "0"), ("napi_defer_hard_irqs", "1000"), ("gro_flush_timeout", "5000000")];

/// Applies the device settings busy polling needs on the receive device
/// (threaded NAPI off, napi_defer_hard_irqs=1000, gro_flush_timeout=5 ms)
/// through /sys/class/net (which shows the namespace of the process that
/// mounted it: run under `ip netns exec`). Returns the previous values.
pub fn tune_napi_for_busy_poll(ifname: &str) -> io::Result<NapiTuning> {
    if ifname.contains('/') || ifname.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad interface name {ifname:?}")));
    }
    sysfs_is_ours(ifname)?;
    let mut t = NapiTuning { ifname: ifname.to_string(), previous: Vec::new() };
    for (key, val) in TUNING {
        let path = format!("/sys/class/net/{ifname}/{key}");
        let old = match fs::read_to_string(&path) {
            Ok(s) => s.trim().to_string(),
            // Old kernels lack `threaded`; nothing to turn off then.
            Err(e) if e.kind() == io::ErrorKind::NotFound && key == "threaded" => continue,
            Err(e) => return Err(io::Error::new(e.kind(), format!("{path}: {e}"))),
        };
        match fs::write(&path, val) {
            Ok(()) => t.previous.push((key, old)),
            // A device without NAPI contexts yet (veth before XDP or GRO is
            // on) refuses `threaded`; it is off then.
            Err(e) if key == "threaded" && e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("{path}: {e}"))),
        }
    }
    Ok(t)
}

/// Refuses when /sys/class/net/IFNAME is not the device of that name in the
/// calling thread's namespace (sysfs shows the namespace of whoever mounted
/// it; a thread that entered another namespace would tune a stranger's
/// device). Index and MAC address must both match.
fn sysfs_is_ours(ifname: &str) -> io::Result<()> {
    let read = |key: &str| fs::read_to_string(format!("/sys/class/net/{ifname}/{key}")).map(|s| s.trim().to_string());
    let idx = sys::if_index(ifname)?;
    let mac = sys::if_hwaddr(ifname)?;
    let mac = mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    if read("ifindex")? != idx.to_string() || read("address")? != mac {
        return Err(io::Error::other(format!(
            "/sys/class/net/{ifname} belongs to another network namespace than this thread's"
        )));
    }
    Ok(())
}

impl NapiTuning {
    /// Puts the previous values back.
    pub fn restore(self) -> io::Result<()> {
        self.restore_previous()
    }

    /// Puts the previous values back.
    pub fn restore_previous(&self) -> io::Result<()> {
        for (key, old) in self.previous.iter().rev() {
            fs::write(format!("/sys/class/net/{}/{key}", self.ifname), old)?;
        }
        Ok(())
    }

    /// Puts the previous deferral values back (napi_defer_hard_irqs,
    /// gro_flush_timeout) and leaves threaded NAPI off: the queue is
    /// interrupt-driven again, in softirq.
    pub fn restore_deferral(&self) -> io::Result<()> {
        for (key, old) in self.previous.iter().rev().filter(|(k, _)| *k != "threaded") {
            fs::write(format!("/sys/class/net/{}/{key}", self.ifname), old)?;
        }
        Ok(())
    }

    /// Applies the busy-polling deferral values again (after
    /// [`Self::restore_deferral`]).
    pub fn apply_deferral(&self) -> io::Result<()> {
        for (key, _) in self.previous.iter().filter(|(k, _)| *k != "threaded") {
            if let Some((_, val)) = TUNING.iter().find(|(k, _)| k == key) {
                fs::write(format!("/sys/class/net/{}/{key}", self.ifname), val)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_policy_never_engages() {
        let mut bp = BusyPoller::new(BusyPoll::Off, -1, "lo", None, true);
        assert_eq!(bp.state(), BusyPollState::Off);
        assert!(!bp.poll());
        bp.service("lo");
        assert!(!bp.engaged());
    }

    #[test]
    fn sysfs_check_accepts_our_own_device_and_refuses_a_missing_one() {
        // Loopback exists in every namespace with index 1.
        assert!(sysfs_is_ours("lo").is_ok());
        assert!(sysfs_is_ours("tern-no-such0").is_err());
    }

    #[test]
    fn tuning_refuses_path_tricks() {
        assert!(tune_napi_for_busy_poll("../x").is_err());
        assert!(tune_napi_for_busy_poll("").is_err());
    }
}
