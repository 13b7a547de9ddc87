//! [`XskPort`]: one AF_XDP socket on one device queue, implementing
//! [`tern_packet::Port`] over the worker's [`Umem`].
//!
//! Frames are pool frame indices all the way: a received frame is handed to
//! the engine as is, and a frame given to `tx_burst` is sent from where it
//! lies (on another port of the same UMEM too), so forwarding copies nothing
//! in userspace. Every frame lent to the kernel (fill ring, tx ring, and
//! whatever the driver holds in between) is marked in a per-port bitset and
//! comes back to the pool through the rx or completion ring, or at
//! [`XskPort::close`]; no frame is lost or handed out twice. No system call
//! or allocation happens per packet: at most one wake-up or busy-poll call
//! per burst.

use crate::busy::{BusyPoll, BusyPollState, BusyPoller};
use crate::error::XdpError;
use crate::ring::{Ring, XdpDesc};
use crate::sys::{self, XskKernelStats};
use crate::umem::{Claim, Umem};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};
use tern_packet::{Meta, PacketPool, PktIdx, Port, PortStats, TxOutcome};

/// Zero-copy or copy mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BindMode {
    /// Zero-copy where the driver allows, copy mode otherwise (veth).
    #[default]
    Auto,
    /// Always copy mode.
    Copy,
    /// Zero-copy or fail.
    ZeroCopy,
}

/// How to open one port.
#[derive(Clone, Debug)]
pub struct XskConfig {
    pub ifname: String,
    pub queue: u32,
    /// Ring sizes (powers of two). Frames in the fill ring and in flight on
    /// tx are lent to the kernel: a worker's pool must hold, per port,
    /// `fill_size + tx_size` plus what the engine keeps in its batches.
    pub rx_size: u32,
    pub tx_size: u32,
    pub fill_size: u32,
    pub comp_size: u32,
    /// Only for the first port of a UMEM: the others inherit its mode
    /// (the kernel refuses mode flags on shared sockets).
    pub mode: BindMode,
    pub busy_poll: BusyPoll,
    /// UDP port of the busy-poll helper socket (see [`crate::BusyPoll`]);
    /// `None`: no helper.
    pub napi_probe_port: Option<u16>,
    /// Apply the device NAPI settings busy polling needs
    /// ([`crate::tune_napi_for_busy_poll`]) once it engages, and restore
    /// them when the port closes. Through /sys/class/net, so the process
    /// must see the device's namespace there.
    pub tune_napi: bool,
}

impl XskConfig {
    pub fn new(ifname: &str, queue: u32) -> XskConfig {
        XskConfig {
            ifname: ifname.to_string(),
            queue,
            rx_size: 1024,
            tx_size: 1024,
            fill_size: 1024,
            comp_size: 1024,
            mode: BindMode::Auto,
            busy_poll: BusyPoll::On,
            napi_probe_port: Some(9),
            tune_napi: true,
        }
    }
}

/// What [`XskPort::close`] did with the frames the kernel held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CloseReport {
    /// Frames returned to the pool.
    pub reclaimed: usize,
    /// Frames that may still be in use by a zero-copy driver and were
    /// therefore not returned (0 in copy mode).
    pub abandoned: usize,
}

/// Fewest free fill slots worth a refill (avoids one-frame refills).
const FILL_BATCH: u32 = 32;
/// Ethernet header, the shortest frame the kernel will send.
const MIN_FRAME: u16 = 14;

/// One AF_XDP socket bound to one device queue.
pub struct XskPort {
    name: String,
    // Rings before the socket: they are unmapped before it is closed.
    rx: Ring<XdpDesc>,
    tx: Ring<XdpDesc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    busy: BusyPoller,
    fd: OwnedFd,
    umem: Umem,
    umem_id: u64,
    ifindex: u32,
    queue: u32,
    zero_copy: bool,
    frame_size: u32,
    /// Longest frame the device sends (MTU + Ethernet header).
    max_tx_len: u32,
    /// Bit per pool frame: lent to the kernel through this port.
    lent: Vec<u64>,
    lent_count: usize,
    /// Packets published on tx and not yet completed.
    tx_inflight: u32,
    /// The last refill found the pool dry and left the fill ring short.
    fill_dry: bool,
    stats: PortStats,
    /// Refills that found the pool empty.
    fill_starved: u64,
    /// Frames the kernel took from the tx ring and dropped unsent (a
    /// copy-mode send says EBUSY for each: the link is down, the driver
    /// refused it); counted in `tx_dropped`, never in `tx_packets`.
    tx_kernel_dropped: u64,
}

fn ring_size_ok(what: &str, n: u32) -> Result<(), XdpError> {
    if !n.is_power_of_two() || !(64..=1 << 16).contains(&n) {
        return Err(XdpError::Config(format!("{what} ring size {n}: need a power of two in 64..=65536")));
    }
    Ok(())
}

fn read_mtu(ifname: &str) -> u32 {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/mtu"))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(1500)
}

impl XskPort {
    /// Opens a socket on `cfg.ifname` queue `cfg.queue`, joins `umem` (the
    /// first port registers it, later ones share it) and fills the fill ring
    /// from `pool`. Register the port with the steering program
    /// ([`crate::SteeringProgram::register`]) for traffic to reach it.
    ///
    /// An [`XdpError::Unavailable`] error means AF_XDP cannot be used here
    /// (permission, kernel, driver): fall back to AF_PACKET and log it.
    pub fn open(umem: &Umem, cfg: &XskConfig, pool: &mut PacketPool) -> Result<XskPort, XdpError> {
        if !umem.matches(pool) {
            return Err(XdpError::Config("the pool is not the one the UMEM was registered from".into()));
        }
        let mut port = XskPort::open_unfilled(umem, cfg)?;
        port.refill(pool);
        Ok(port)
    }

    /// [`XskPort::open`] without the pool: the fill ring starts empty and
    /// the port's first receive or service fills it from the pool of the
    /// worker it is handed to (which must be the pool `umem` was registered
    /// from; checked per burst). For a thread that does not own that pool:
    /// the control thread opening a port again on a device that returned.
    /// What arrives before the first fill is dropped by the kernel
    /// (counted in the socket's statistics).
    pub fn open_unfilled(umem: &Umem, cfg: &XskConfig) -> Result<XskPort, XdpError> {
        for (what, n) in
            [("rx", cfg.rx_size), ("tx", cfg.tx_size), ("fill", cfg.fill_size), ("completion", cfg.comp_size)]
        {
            ring_size_ok(what, n)?;
        }
        let name = format!("{}/{}", cfg.ifname, cfg.queue);
        let ifindex = sys::if_index(&cfg.ifname).map_err(|e| XdpError::Unavailable {
            why: crate::Unavailable::NoSuchInterface,
            detail: format!("interface {}", cfg.ifname),
            source: Some(e),
        })?;
        let mut guard = umem.lock();
        let claim = umem.claim(&mut guard)?;
        let (fd, via) = match claim {
            Claim::Owner(fd) => (fd, None),
            Claim::Shared { fd, via } => (fd, Some(via)),
        };
        let raw = fd.as_raw_fd();
        let so = |opt, n: u32, what: &str| {
            sys::setsockopt_int(raw, sys::SOL_XDP, opt, n as i32)
                .map_err(|e| XdpError::from_errno(format!("{name}: {what}"), e))
        };
        // Every socket on its own device queue needs its own fill and
        // completion rings, the shared ones included (Linux 5.10+).
        so(sys::XDP_UMEM_FILL_RING, cfg.fill_size, "XDP_UMEM_FILL_RING")?;
        so(sys::XDP_UMEM_COMPLETION_RING, cfg.comp_size, "XDP_UMEM_COMPLETION_RING")?;
        so(sys::XDP_RX_RING, cfg.rx_size, "XDP_RX_RING")?;
        so(sys::XDP_TX_RING, cfg.tx_size, "XDP_TX_RING")?;
        let off = sys::mmap_offsets(raw).map_err(|e| XdpError::from_errno(format!("{name}: XDP_MMAP_OFFSETS"), e))?;
        let map_err = |what: &str| {
            let name = name.clone();
            let what = what.to_string();
            move |e| XdpError::from_errno(format!("{name}: mmap {what} ring"), e)
        };
        let rx = Ring::map(raw, &off.rx, cfg.rx_size, sys::XDP_PGOFF_RX_RING, false).map_err(map_err("rx"))?;
        let tx = Ring::map(raw, &off.tx, cfg.tx_size, sys::XDP_PGOFF_TX_RING, true).map_err(map_err("tx"))?;
        let fill =
            Ring::map(raw, &off.fr, cfg.fill_size, sys::XDP_UMEM_PGOFF_FILL_RING, true).map_err(map_err("fill"))?;
        let comp = Ring::map(raw, &off.cr, cfg.comp_size, sys::XDP_UMEM_PGOFF_COMPLETION_RING, false)
            .map_err(map_err("completion"))?;

        match via {
            Some(via) => sys::bind_xsk(raw, ifindex, cfg.queue, sys::XDP_SHARED_UMEM, Some(via))
                .map_err(|e| bind_error(&name, "shared UMEM", e))?,
            None => {
                let need_wakeup = sys::XDP_USE_NEED_WAKEUP;
                match cfg.mode {
                    BindMode::Copy => sys::bind_xsk(raw, ifindex, cfg.queue, sys::XDP_COPY | need_wakeup, None)
                        .map_err(|e| bind_error(&name, "copy mode", e))?,
                    BindMode::ZeroCopy => sys::bind_xsk(raw, ifindex, cfg.queue, sys::XDP_ZEROCOPY | need_wakeup, None)
                        .map_err(|e| bind_error(&name, "zero-copy mode", e))?,
                    BindMode::Auto => {
                        if let Err(e) = sys::bind_xsk(raw, ifindex, cfg.queue, sys::XDP_ZEROCOPY | need_wakeup, None) {
                            log::info!("{name}: zero-copy refused ({e}), using copy mode");
                            sys::bind_xsk(raw, ifindex, cfg.queue, sys::XDP_COPY | need_wakeup, None)
                                .map_err(|e| bind_error(&name, "copy mode", e))?;
                        }
                    }
                }
            }
        }
        let umem_id = Umem::add_bound(&mut guard, raw);
        drop(guard);

        let zero_copy = sys::xdp_options(raw).is_ok_and(|o| o & sys::XDP_OPTIONS_ZEROCOPY != 0);
        // Linux 6.17+: let one copy-mode sendto turn a whole burst into skbs
        // (32 otherwise). Older kernels refuse the option; we then just kick
        // more than once.
        let _ = sys::setsockopt_int(raw, sys::SOL_XDP, sys::XDP_MAX_TX_SKB_BUDGET, cfg.tx_size.min(512) as i32);
        let busy = BusyPoller::new(cfg.busy_poll, raw, &cfg.ifname, cfg.napi_probe_port, cfg.tune_napi);
        let frames = umem.frames() as usize;
        let port = XskPort {
            name,
            rx,
            tx,
            fill,
            comp,
            busy,
            fd,
            umem: umem.clone(),
            umem_id,
            ifindex,
            queue: cfg.queue,
            zero_copy,
            frame_size: umem.frame_size(),
            max_tx_len: read_mtu(&cfg.ifname) + 14,
            lent: vec![0; frames.div_ceil(64)],
            lent_count: 0,
            tx_inflight: 0,
            fill_dry: false,
            stats: PortStats::default(),
            fill_starved: 0,
            tx_kernel_dropped: 0,
        };
        log::info!("{}: AF_XDP {} mode", port.name, if zero_copy { "zero-copy" } else { "copy" });
        Ok(port)
    }

    // ---- frame ownership ----

    #[inline]
    fn lend(&mut self, idx: PktIdx) {
        let (w, b) = (idx as usize / 64, idx % 64);
        if let Some(word) = self.lent.get_mut(w) {
            debug_assert!(*word & (1 << b) == 0, "frame {idx} lent twice");
            *word |= 1 << b;
            self.lent_count += 1;
        }
    }

    /// Takes back a frame the kernel returned. False if this port never lent
    /// it (a corrupt descriptor): the caller must not use it.
    #[inline]
    fn take_back(&mut self, idx: PktIdx) -> bool {
        let (w, b) = (idx as usize / 64, idx % 64);
        match self.lent.get_mut(w) {
            Some(word) if *word & (1 << b) != 0 => {
                *word &= !(1 << b);
                self.lent_count -= 1;
                true
            }
            _ => false,
        }
    }

    /// Frames of the pool currently lent to the kernel through this port.
    pub fn frames_lent(&self) -> usize {
        self.lent_count
    }

    // ---- rings ----

    /// Tops the fill ring up from the pool (first giving it back the
    /// frames of a dropped port of the same UMEM, see [`Umem`]).
    fn refill(&mut self, pool: &mut PacketPool) {
        if let Some(orphans) = self.umem.take_orphans() {
            let n = orphans.len();
            for idx in orphans {
                pool.free(idx);
            }
            log::debug!("{}: {n} frames of a dropped port back in the pool", self.name);
        }
        let free = self.fill.prod_free(self.fill.size());
        if free < FILL_BATCH.min(self.fill.size()) {
            self.fill_dry = false;
            return;
        }
        let mut n = 0;
        while n < free {
            let Some(idx) = pool.alloc_raw() else {
                self.fill_starved += 1;
                break;
            };
            self.fill.prod_write(n, pool.frame_addr(idx));
            self.lend(idx);
            n += 1;
        }
        self.fill_dry = n < free;
        if n > 0 {
            self.fill.prod_submit(n);
        }
    }

    /// Returns completed transmissions to the pool.
    fn reclaim(&mut self, pool: &mut PacketPool) {
        let n = self.comp.cons_avail(self.comp.size());
        if n == 0 {
            return;
        }
        for i in 0..n {
            let addr = self.comp.cons_read(i);
            match pool.split_addr(addr) {
                Some((idx, _)) if self.take_back(idx) => pool.free(idx),
                _ => self.stats.errors += 1,
            }
        }
        self.comp.cons_release(n);
        self.tx_inflight = self.tx_inflight.saturating_sub(n);
    }

    /// Makes the kernel transmit what the tx ring holds. Copy mode sends
    /// only from sendto (a bounded number of descriptors per call); zero-copy
    /// drivers need it only when they sleep. Returns the frames the kernel
    /// took and dropped unsent.
    ///
    /// In copy mode EBUSY means exactly that: the kernel took one frame,
    /// the device dropped it (no carrier: a link down, a veth whose peer is
    /// down; or the driver refused it) and completed it as if sent. Such a
    /// device drops everything it is given: the ring is drained now, each
    /// frame counted, so that none waits there to leave late.
    fn kick_tx(&mut self, pool: &mut PacketPool) -> u32 {
        if self.zero_copy && !self.tx.needs_wakeup() {
            return 0;
        }
        let mut dropped = 0u32;
        let mut tries = 8u32;
        while tries > 0 {
            tries -= 1;
            match sys::send_kick(self.fd.as_raw_fd()) {
                Ok(()) => {}
                Err(libc::EBUSY) if !self.zero_copy => {
                    dropped += 1;
                    // One more try per frame still waiting: the drain ends.
                    tries = tries.max(self.tx.prod_outstanding().min(self.tx.size()));
                }
                // Budget used up, completion ring full, device queue full:
                // reclaim and try again, the rest waits for `service`.
                Err(libc::EAGAIN) | Err(libc::EBUSY) | Err(libc::ENOBUFS) => self.reclaim(pool),
                Err(_) => {
                    self.stats.errors += 1;
                    break;
                }
            }
            if self.zero_copy || self.tx.prod_outstanding() == 0 {
                break;
            }
        }
        if dropped > 0 {
            self.reclaim(pool);
            self.tx_kernel_dropped += u64::from(dropped);
        }
        dropped
    }

    /// Frames the kernel took and dropped unsent (the link down, the driver
    /// refused them); also in `tx_dropped`.
    pub fn tx_kernel_dropped(&self) -> u64 {
        self.tx_kernel_dropped
    }

    // ---- introspection ----

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn queue(&self) -> u32 {
        self.queue
    }
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }
    pub fn umem(&self) -> &Umem {
        &self.umem
    }
    pub fn busy_poll_state(&self) -> BusyPollState {
        self.busy.state()
    }
    /// An adaptive port whose worker slept: the kernel drives the NAPI
    /// until enough traffic comes back.
    pub fn busy_poll_parked(&self) -> bool {
        self.busy.parked()
    }
    /// Refills that found the pool empty (the pool is too small for the
    /// rings and batches of its ports).
    pub fn fill_starved(&self) -> u64 {
        self.fill_starved
    }
    /// The socket, for the XSKMAP.
    pub fn socket_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    /// The kernel's counters for this socket (one getsockopt).
    pub fn kernel_stats(&self) -> XskKernelStats {
        sys::xdp_statistics(self.fd.as_raw_fd()).unwrap_or_default()
    }

    /// Closes the socket and gives every frame the kernel held back to
    /// `pool`: transmissions are drained (up to 200 ms), received but unread
    /// packets are freed, and in copy mode the fill ring's frames are
    /// returned once the socket is closed. A zero-copy driver may still own
    /// frames until the kernel tears its queue down asynchronously; those
    /// are reported as abandoned rather than reused.
    pub fn close(mut self, pool: &mut PacketPool) -> CloseReport {
        let mut report = CloseReport::default();
        if !self.umem.matches(pool) {
            log::error!("{}: closed with a foreign pool; {} frames not returned", self.name, self.lent_count);
            report.abandoned = self.lent_count;
            return report;
        }
        let before = self.lent_count;
        let deadline = Instant::now() + Duration::from_millis(200);
        while self.tx_inflight > 0 && Instant::now() < deadline {
            let _ = self.kick_tx(pool);
            self.reclaim(pool);
            if self.tx_inflight > 0 {
                let _ = sys::poll_readable(self.fd.as_raw_fd(), 1);
            }
        }
        let n = self.rx.cons_avail(self.rx.size());
        for i in 0..n {
            let d = self.rx.cons_read(i);
            if let Some((idx, _)) = pool.split_addr(d.addr)
                && self.take_back(idx)
            {
                pool.free(idx);
                self.stats.rx_dropped += 1;
            }
        }
        self.rx.cons_release(n);
        let zero_copy = self.zero_copy;
        let lent = std::mem::take(&mut self.lent);
        let remaining = self.lent_count;
        let name = std::mem::take(&mut self.name);
        // Closing the socket (dropping self) stops the kernel from using the
        // rings and, in copy mode, every frame lent through them.
        drop(self);
        if zero_copy {
            report.abandoned = remaining;
            if remaining > 0 {
                log::warn!("{name}: {remaining} frames left with the zero-copy driver at close");
            }
        } else {
            for (w, word) in lent.iter().enumerate() {
                let mut bits = *word;
                while bits != 0 {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    pool.free((w * 64) as u32 + b);
                }
            }
        }
        report.reclaimed = before - report.abandoned;
        report
    }
}

fn bind_error(name: &str, what: &str, e: std::io::Error) -> XdpError {
    let hint = match e.raw_os_error() {
        Some(libc::EBUSY) => " (the queue already has an AF_XDP socket)",
        Some(libc::EINVAL) => " (no such queue, or mode flags on a shared socket)",
        _ => "",
    };
    XdpError::from_errno(format!("{name}: bind in {what}{hint}"), e)
}

impl Drop for XskPort {
    fn drop(&mut self) {
        self.umem.remove_bound(self.umem_id);
        if self.lent_count == 0 || self.name.is_empty() {
            return;
        }
        if self.zero_copy {
            // The driver may still own them (see `close`).
            log::debug!(
                "{}: dropped without close; {} frames stay with the zero-copy driver",
                self.name,
                self.lent_count
            );
            return;
        }
        // Copy mode: once the socket closes (the fields drop right after
        // this, on this thread) the kernel holds none of them; the next
        // refill of the UMEM's ports, on the pool's thread, frees them.
        let lent = std::mem::take(&mut self.lent);
        self.umem.orphan(lent.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    (w * 64) as u32 + b
                })
            })
        }));
        log::debug!(
            "{}: dropped without close; {} frames go back to the pool at the next refill",
            self.name,
            self.lent_count
        );
    }
}

impl Port for XskPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, out: &mut Vec<PktIdx>, max: usize) -> usize {
        if !self.umem.matches(pool) {
            self.stats.errors += 1;
            return 0;
        }
        self.refill(pool);
        if !self.busy.poll() && self.fill.needs_wakeup() {
            let _ = sys::recv_dontwait(self.fd.as_raw_fd(), &mut []);
        }
        let n = self.rx.cons_avail(max.min(u32::MAX as usize) as u32);
        let mut got = 0;
        for i in 0..n {
            let d = self.rx.cons_read(i);
            let Some((idx, off)) = pool.split_addr(d.addr) else {
                self.stats.errors += 1;
                continue;
            };
            if !self.take_back(idx) {
                self.stats.errors += 1;
                continue;
            }
            // The kernel keeps data inside the frame; refuse (and count) a
            // descriptor that says otherwise rather than trust it.
            if u32::from(off) + d.len > self.frame_size || d.len > u32::from(u16::MAX) {
                pool.free(idx);
                self.stats.rx_dropped += 1;
                continue;
            }
            *pool.meta_mut(idx) = Meta { off, len: d.len as u16, ..Meta::default() };
            out.push(idx);
            self.stats.rx_bytes += u64::from(d.len);
            got += 1;
        }
        self.rx.cons_release(n);
        self.busy.note_rx(&self.name, got);
        self.stats.rx_packets += got as u64;
        got
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome {
        if !self.umem.matches(pool) {
            // These frames are not in our UMEM: the kernel cannot send them.
            pool.free_all(pkts);
            self.stats.errors += 1;
            self.stats.tx_dropped += pkts.len() as u64;
            return TxOutcome { sent: 0, dropped: pkts.len() };
        }
        self.reclaim(pool);
        let want = pkts.len().min(u32::MAX as usize) as u32;
        let free = self.tx.prod_free(want).min(want);
        let mut out = TxOutcome::default();
        let mut n = 0;
        let mut bytes = 0;
        for &idx in pkts {
            let m = *pool.meta(idx);
            // An invalid descriptor is skipped by the kernel without a
            // completion, which would leak the frame: check first.
            let ok = m.len >= MIN_FRAME && u32::from(m.len) <= self.max_tx_len;
            if ok && n < free {
                self.tx.prod_write(
                    n,
                    XdpDesc { addr: pool.frame_addr(idx) + u64::from(m.off), len: u32::from(m.len), options: 0 },
                );
                self.lend(idx);
                n += 1;
                bytes += u64::from(m.len);
            } else {
                pool.free(idx);
                out.dropped += 1;
            }
        }
        if n > 0 {
            self.tx.prod_submit(n);
            self.tx_inflight += n;
            // What the kernel dropped was not sent. (A frame of an earlier
            // burst dropped now was counted as sent then; it is in
            // `tx_kernel_dropped` and the device's own tx_dropped.)
            let lost = self.kick_tx(pool).min(n);
            if lost > 0 {
                n -= lost;
                out.dropped += lost as usize;
                // Which frames left is not known: bytes only when all did.
                bytes = 0;
            }
        }
        out.sent = n as usize;
        self.stats.tx_packets += u64::from(n);
        self.stats.tx_bytes += bytes;
        self.stats.tx_dropped += out.dropped as u64;
        out
    }

    fn service(&mut self, pool: &mut PacketPool) {
        if !self.umem.matches(pool) {
            return;
        }
        self.reclaim(pool);
        self.refill(pool);
        if self.tx.prod_outstanding() > 0 {
            let _ = self.kick_tx(pool);
        }
        let name = &self.name;
        self.busy.service(name);
    }

    fn prepare_sleep(&mut self) -> bool {
        let name = &self.name;
        self.busy.park(name)
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        if self.busy.spinning() { None } else { Some(self.fd.as_fd()) }
    }

    /// Settled when no transmission waits for a kick or a completion (the
    /// completion ring does not make the socket readable) and the fill ring
    /// is stocked (a pool that ran dry is retried by `service`).
    fn settled(&self) -> bool {
        self.tx_inflight == 0 && self.tx.prod_outstanding() == 0 && !self.fill_dry
    }

    fn stats(&self) -> PortStats {
        let k = self.kernel_stats();
        let mut s = self.stats;
        s.rx_dropped += k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs;
        s.errors += k.tx_invalid_descs;
        s
    }
}
