//! The generators a trial can send with, and the fallback to sending from
//! a socket when the kernel refuses the XDP one.
//!
//! The XDP generator (bpf/gen.bpf.c, run by BPF_PROG_TEST_RUN with live
//! frames) is the fast one. Some kernels and sandboxes refuse that call
//! (EPERM: seen on machines whose root lacks CAP_SYS_RESOURCE, even for a
//! one-line program); there the tester sends the same frames from user
//! space through an AF_XDP socket, or where that is refused too through
//! an AF_PACKET socket ([`PacketGen`]), paced the same way, and says so in
//! the report. `--generator` forces any of them.
//!
//! The frames are the XDP program's, byte for byte: the cycle of slots
//! taken in turn, each stream's flow walk (or random fields) and sequence
//! numbers from 0 at every trial, the transmit time in the signature (the
//! low 32 bits of CLOCK_MONOTONIC, the clock of the sink's
//! bpf_ktime_get_ns()), and the IPv4 and UDP checksums.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::bpf::{GenCounters, Generator, MAX_PACED_PPS, PaceProgress};
use crate::error::{BenchError, Result};
use crate::netns::{Netns, current_tid, pin_current_thread, set_fifo};
use crate::traffic::{FlowSpec, HDR_MAX, MAX_SLOTS, MAX_STREAMS, SIG_LEN, Slot, checksum};

/// Which generator sends the frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum GeneratorKind {
    /// The XDP generator when the kernel runs it, else AF_XDP, else
    /// AF_PACKET (said on stderr and in the report).
    Auto,
    /// The XDP program run by BPF_PROG_TEST_RUN with live frames.
    Bpf,
    /// The same frames built in user space and sent through an AF_PACKET
    /// socket, one send(2) each.
    Afpacket,
    /// The same frames built in user space and sent through an AF_XDP
    /// socket's transmit ring (copy mode on a veth), a batch per sendto(2).
    Afxdp,
}

impl GeneratorKind {
    /// The name used in options and reports.
    pub fn name(self) -> &'static str {
        match self {
            GeneratorKind::Auto => "auto",
            GeneratorKind::Bpf => "bpf",
            GeneratorKind::Afpacket => "afpacket",
            GeneratorKind::Afxdp => "afxdp",
        }
    }
}

/// Monotonic clock, ns (CLOCK_MONOTONIC, as bpf_ktime_get_ns()).
pub fn mono_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(t) => (t.tv_sec() as u64).wrapping_mul(1_000_000_000).wrapping_add(t.tv_nsec() as u64),
        Err(_) => 0,
    }
}

/// Builds the generator's frames in user space, as bpf/gen.bpf.c does.
#[derive(Debug, Clone, Default)]
pub struct FrameBuilder {
    /// The cycle: each slot's frame at the flow's base values, zero padded
    /// to the slot's length.
    frames: Vec<Vec<u8>>,
    slots: Vec<Slot>,
    flows: Vec<FlowSpec>,
    sent: u64,
    flow_ctr: [u64; MAX_STREAMS],
    seq: [u32; MAX_STREAMS],
    rng: u64,
}

impl FrameBuilder {
    /// A builder for the cycle `slots` with the streams' `flows`.
    pub fn new(slots: &[Slot], flows: &[FlowSpec]) -> Result<Self> {
        if slots.is_empty() || slots.len() > MAX_SLOTS || flows.is_empty() || flows.len() > MAX_STREAMS {
            return Err(BenchError::Config(format!(
                "{} slots / {} streams do not fit the generator",
                slots.len(),
                flows.len()
            )));
        }
        let mut frames = Vec::with_capacity(slots.len());
        for s in slots {
            let len = usize::from(s.frame_len);
            let l4 = usize::from(s.l3_off) + if s.ipv6 { 40 } else { 20 };
            if len < l4 + 8 + SIG_LEN || usize::from(s.stream) >= flows.len() {
                return Err(BenchError::Config(format!("slot of {len} bytes for stream {} is malformed", s.stream)));
            }
            let mut f = vec![0u8; len];
            let n = len.min(HDR_MAX);
            f[..n].copy_from_slice(&s.hdr[..n]);
            frames.push(f);
        }
        // Any seed will do: it only spreads random flows.
        let rng = mono_ns() | 1;
        Ok(FrameBuilder {
            frames,
            slots: slots.to_vec(),
            flows: flows.to_vec(),
            sent: 0,
            flow_ctr: [0; MAX_STREAMS],
            seq: [0; MAX_STREAMS],
            rng,
        })
    }

    /// Back to frame 0, every sequence number and flow walk from 0.
    pub fn reset(&mut self) {
        self.sent = 0;
        self.flow_ctr = [0; MAX_STREAMS];
        self.seq = [0; MAX_STREAMS];
    }

    /// Frames built since the last reset, and per stream.
    pub fn counters(&self) -> GenCounters {
        GenCounters { sent: self.sent, per_stream: (0..self.flows.len()).map(|i| u64::from(self.seq[i])).collect() }
    }

    fn random(&mut self, below: u32) -> u32 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        ((x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32) % below.max(1)
    }

    /// Takes back the last frame built (it was never sent): its sequence
    /// number and flow go to the next one. Once, after [`Self::next_frame`].
    pub fn retract(&mut self) {
        let Some(prev) = self.sent.checked_sub(1) else { return };
        let stream = usize::from(self.slots[(prev % self.slots.len() as u64) as usize].stream);
        self.sent = prev;
        self.seq[stream] = self.seq[stream].wrapping_sub(1);
        if !self.flows[stream].random {
            self.flow_ctr[stream] = self.flow_ctr[stream].saturating_sub(1);
        }
    }

    /// Builds the next frame into `out` with transmit time `timestamp`
    /// and counts it as sent.
    pub fn next_frame(&mut self, timestamp: u32, out: &mut Vec<u8>) {
        let idx = (self.sent % self.slots.len() as u64) as usize;
        let sl = &self.slots[idx];
        let stream = usize::from(sl.stream);
        let f = self.flows[stream];
        let (l3, v6) = (usize::from(sl.l3_off), sl.ipv6);
        let (src_count, dst_count) = (f.src_count.max(1), f.dst_count.max(1));
        let (sport_count, dport_count) = (f.sport_count.max(1), f.dport_count.max(1));
        let (si, di, spi, dpi) = if f.random {
            (
                self.random(src_count),
                self.random(dst_count),
                self.random(sport_count.into()),
                self.random(dport_count.into()),
            )
        } else {
            let mut c = self.flow_ctr[stream];
            self.flow_ctr[stream] += 1;
            let dpi = c % u64::from(dport_count);
            c /= u64::from(dport_count);
            let spi = c % u64::from(sport_count);
            c /= u64::from(sport_count);
            let di = c % u64::from(dst_count);
            c /= u64::from(dst_count);
            let si = c % u64::from(src_count);
            // Each is below a u32 count.
            (si as u32, di as u32, spi as u32, dpi as u32)
        };
        let seq = self.seq[stream];
        self.seq[stream] = seq.wrapping_add(1);
        out.clear();
        out.extend_from_slice(&self.frames[idx]);
        let p = out.as_mut_slice();
        let l4 = l3 + if v6 { 40 } else { 20 };
        let add32 = |p: &mut [u8], at: usize, add: u32| {
            let v = u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]).wrapping_add(add);
            p[at..at + 4].copy_from_slice(&v.to_be_bytes());
        };
        if v6 {
            add32(p, l3 + 8 + 12, si.wrapping_mul(f.src_stride));
            add32(p, l3 + 24 + 12, di.wrapping_mul(f.dst_stride));
        } else {
            add32(p, l3 + 12, si.wrapping_mul(f.src_stride));
            add32(p, l3 + 16, di.wrapping_mul(f.dst_stride));
        }
        // The port indices are below u16 counts.
        p[l4..l4 + 2].copy_from_slice(&f.sport_base.wrapping_add(spi as u16).to_be_bytes());
        p[l4 + 2..l4 + 4].copy_from_slice(&f.dport_base.wrapping_add(dpi as u16).to_be_bytes());
        let sig = l4 + 8;
        p[sig + 4..sig + 8].copy_from_slice(&seq.to_be_bytes());
        p[sig + 8..sig + 12].copy_from_slice(&timestamp.to_be_bytes());
        if !v6 {
            p[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
            let c = checksum(&[&p[l3..l3 + 20]]);
            p[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        // RFC 768 pseudo-header + UDP header + signature (the rest is zero).
        p[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
        let udp_len = [p[l4 + 4], p[l4 + 5]];
        let mut pseudo = [0u8; 36];
        let n = if v6 {
            pseudo[..32].copy_from_slice(&p[l3 + 8..l3 + 40]);
            pseudo[34..36].copy_from_slice(&udp_len);
            pseudo[32] = 0;
            pseudo[33] = 17;
            36
        } else {
            pseudo[..8].copy_from_slice(&p[l3 + 12..l3 + 20]);
            pseudo[8] = 0;
            pseudo[9] = 17;
            pseudo[10..12].copy_from_slice(&udp_len);
            12
        };
        let mut c = checksum(&[&pseudo[..n], &p[l4..l4 + 8 + SIG_LEN]]);
        if c == 0 {
            c = 0xffff;
        }
        p[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
        self.sent += 1;
    }
}

/// The user-space generators: [`FrameBuilder`]'s frames, paced with the
/// XDP program's token bucket ([`Pace`]), through an AF_XDP socket's
/// transmit ring or one send(2) each on an AF_PACKET socket bound to the
/// generator's device.
#[derive(Debug, Default)]
pub struct PacketGen {
    builder: Option<Box<FrameBuilder>>,
    /// Through an AF_XDP socket instead of AF_PACKET.
    xdp: bool,
}

/// What an AF_PACKET paced run did, beyond [`PaceProgress`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketGenStats {
    /// Frames the device refused (ENOBUFS: the peer's ring was full);
    /// they are counted as sent and lost on the way into the DUT.
    pub refused: u64,
    /// Sends retried because the socket's buffer was full.
    pub retried: u64,
}

/// Frames past due at most sent in one go before the clock is read again.
const MAX_BURST: u64 = 64;

/// The XDP program's pacing (`due()` in bpf/gen.bpf.c) in user space:
/// frame k of the trial is due k / rate after the start; frames due more
/// than `depth` ago, when the sender was held up, are skipped, not sent in
/// a catch-up burst.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    rate: u64,
    total: u64,
    depth: u64,
    /// Where the run stands (times in the clock given).
    pub progress: PaceProgress,
}

/// What a paced sender does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Send this many frames (one at least).
    Send(u64),
    /// Nothing due for this many ns.
    Wait(u64),
    /// Every frame of the trial was sent or skipped.
    Done,
}

impl Pace {
    /// `total` frames at `rate` frames/s (at least 1) from `start_ns`,
    /// with a bucket `depth` frames deep (at least 1).
    pub fn new(rate: u64, total: u64, depth: u64, start_ns: u64) -> Self {
        let progress = PaceProgress { start_ns, ..PaceProgress::default() };
        Pace { rate: rate.max(1), total, depth: depth.max(1), progress }
    }

    /// What is due at `now_ns`; skips the frames due beyond the bucket.
    pub fn due(&mut self, now_ns: u64) -> Due {
        let p = &mut self.progress;
        let el = u128::from(now_ns.saturating_sub(p.start_ns));
        // Frames due by now, the first at once.
        let due = u64::try_from(el * u128::from(self.rate) / 1_000_000_000).unwrap_or(u64::MAX);
        let due = due.saturating_add(1).min(self.total);
        let consumed = p.sent + p.skipped;
        if due > consumed {
            if due - consumed > self.depth {
                p.skipped += due - consumed - self.depth;
            }
            return Due::Send(due - p.sent - p.skipped);
        }
        if consumed >= self.total {
            return Due::Done;
        }
        let next = (u128::from(consumed) * 1_000_000_000).div_ceil(u128::from(self.rate));
        Due::Wait(u64::try_from(next.saturating_sub(el)).unwrap_or(u64::MAX).max(1))
    }

    /// One frame went out at `now_ns`.
    pub fn sent(&mut self, now_ns: u64) {
        self.progress.sent += 1;
        self.progress.last_ns = now_ns;
    }
}

impl PacketGen {
    /// A generator sending through AF_PACKET.
    pub fn af_packet() -> Self {
        PacketGen { builder: None, xdp: false }
    }

    /// A generator sending through an AF_XDP socket.
    pub fn af_xdp() -> Self {
        PacketGen { builder: None, xdp: true }
    }

    /// Which one it is.
    pub fn kind(&self) -> GeneratorKind {
        if self.xdp { GeneratorKind::Afxdp } else { GeneratorKind::Afpacket }
    }

    /// Installs the cycle of slots and the flows.
    pub fn configure(&mut self, slots: &[Slot], flows: &[FlowSpec]) -> Result<()> {
        self.builder = Some(Box::new(FrameBuilder::new(slots, flows)?));
        Ok(())
    }

    fn builder(&mut self) -> Result<&mut FrameBuilder> {
        self.builder.as_deref_mut().ok_or_else(|| BenchError::Config("user-space generator not configured".into()))
    }

    /// Zeroes the counters and sequence numbers.
    pub fn reset(&mut self) -> Result<()> {
        self.builder()?.reset();
        Ok(())
    }

    /// The counters since the last reset.
    pub fn counters(&self) -> Result<GenCounters> {
        self.builder
            .as_ref()
            .map(|b| b.counters())
            .ok_or_else(|| BenchError::Config("user-space generator not configured".into()))
    }

    /// [`PacketGen::run`] on the calling thread, in the namespace it is in
    /// (`tern-bench gen`, started by `ip netns exec`, pinned by its caller).
    pub fn run_here(
        &mut self,
        dev: &str,
        rate_pps: f64,
        total: u64,
        depth: u64,
        deadline: Duration,
    ) -> Result<(PaceProgress, PacketGenStats)> {
        if !(rate_pps.is_finite() && (1.0..=MAX_PACED_PPS).contains(&rate_pps)) {
            return Err(BenchError::Config(format!("paced rate {rate_pps} frames/s")));
        }
        let xdp = self.xdp;
        let builder = self.builder()?;
        let pace = Pace::new(rate_pps.round() as u64, total, depth, mono_ns());
        if xdp { run_xdp(builder, dev, pace, deadline, 0) } else { run_packet(builder, dev, pace, deadline, 0) }
    }

    /// Sends at `rate_pps` until `total` frames are sent or skipped (a
    /// token bucket `depth` frames deep, as the XDP program's), or the
    /// deadline passes, from device `dev` of `ns`, on a thread pinned to
    /// `cpu` at SCHED_FIFO `rt` (0: normal).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &mut self,
        ns: &Netns,
        dev: &str,
        rate_pps: f64,
        total: u64,
        depth: u64,
        deadline: Duration,
        cpu: usize,
        rt: u8,
    ) -> Result<(PaceProgress, PacketGenStats)> {
        if !(rate_pps.is_finite() && (1.0..=MAX_PACED_PPS).contains(&rate_pps)) {
            return Err(BenchError::Config(format!("paced rate {rate_pps} frames/s")));
        }
        let xdp = self.xdp;
        let builder = self.builder()?;
        let rate = rate_pps.round() as u64;
        if xdp {
            return std::thread::scope(|s| {
                s.spawn(move || -> Result<(PaceProgress, PacketGenStats)> {
                    ns.enter_current_thread()?;
                    pin_current_thread(cpu)?;
                    set_fifo(current_tid(), rt, false)?;
                    run_xdp(builder, dev, Pace::new(rate, total, depth, mono_ns()), deadline, rt)
                })
                .join()
                .map_err(|_| BenchError::Bpf("AF_XDP generator thread panicked".into()))?
            });
        }
        std::thread::scope(|s| {
            s.spawn(move || -> Result<(PaceProgress, PacketGenStats)> {
                ns.enter_current_thread()?;
                pin_current_thread(cpu)?;
                set_fifo(current_tid(), rt, false)?;
                run_packet(builder, dev, Pace::new(rate, total, depth, mono_ns()), deadline, rt)
            })
            .join()
            .map_err(|_| BenchError::Bpf("AF_PACKET generator thread panicked".into()))?
        })
    }
}

/// The AF_PACKET sender's loop, on the calling thread (in the generator's
/// namespace): one send(2) a frame as they come due.
fn run_packet(
    builder: &mut FrameBuilder,
    dev: &str,
    mut pace: Pace,
    deadline: Duration,
    rt: u8,
) -> Result<(PaceProgress, PacketGenStats)> {
    let port = open_tx(dev)?;
    let mut st = PacketGenStats::default();
    let mut buf = Vec::with_capacity(2048);
    let wall = Instant::now();
    loop {
        match pace.due(mono_ns()) {
            Due::Send(n) => {
                for _ in 0..n.min(MAX_BURST) {
                    builder.next_frame(mono_ns() as u32, &mut buf);
                    if !send(&port, &buf, &mut st, wall, deadline)? {
                        // The socket stayed full to the deadline.
                        builder.retract();
                        return Ok((pace.progress, st));
                    }
                    pace.sent(mono_ns());
                }
            }
            Due::Done => return Ok((pace.progress, st)),
            Due::Wait(ns) => wait(ns, rt),
        }
        if wall.elapsed() > deadline {
            // The generator could not keep up.
            return Ok((pace.progress, st));
        }
    }
}

/// Waits for the next frame: sleeps through all but the shortest gaps (a
/// SCHED_FIFO thread has no timer slack; a late wake-up is made up from
/// the bucket). A sender that spins through them hits the kernel's
/// real-time limit (sched_rt_runtime_us: 950 ms a second) and loses 5 % of
/// every trial's frames at any rate.
fn wait(ns: u64, rt: u8) {
    if ns > 2_000 {
        std::thread::sleep(Duration::from_nanos(ns - 1_000));
    } else if rt > 0 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// The AF_XDP sender's loop, on the calling thread (in the generator's
/// namespace): a UMEM of its own, one copy-mode socket on queue 0 of
/// `dev`, frames built into it and put on the transmit ring as they come
/// due (a batch per kick). The accepted frames are a prefix of each batch;
/// the rest are taken back from the builder and come due again.
fn run_xdp(
    builder: &mut FrameBuilder,
    dev: &str,
    mut pace: Pace,
    deadline: Duration,
    rt: u8,
) -> Result<(PaceProgress, PacketGenStats)> {
    use tern_packet::{PacketPool, PoolConfig, Port};
    use tern_xdp::{BindMode, BusyPoll, Umem, XskConfig, XskPort};
    let err = |what: &str, e: &dyn std::fmt::Display| BenchError::Dut(format!("AF_XDP generator: {what}: {e}"));
    // A frame longer than the device takes would be skipped by the kernel
    // in the middle of a batch: refuse the cycle instead.
    let mtu = tern_io::netdev::mtu(dev).map_err(|e| err("MTU", &e))? as usize;
    if let Some(long) = builder.frames.iter().map(Vec::len).find(|&l| l > mtu + 14) {
        return Err(BenchError::Config(format!(
            "AF_XDP generator: a {long}-byte frame is longer than {dev} takes (MTU {mtu})"
        )));
    }
    let mut pool =
        PacketPool::new(PoolConfig { frames: 4096, hugepages: false, pad_frames: false, ..PoolConfig::default() })
            .map_err(|e| err("pool", &e))?;
    let umem = Umem::new(&pool).map_err(|e| err("UMEM", &e))?;
    let cfg = XskConfig {
        rx_size: 64,
        fill_size: 64,
        mode: BindMode::Copy,
        busy_poll: BusyPoll::Off,
        napi_probe_port: None,
        tune_napi: false,
        ..XskConfig::new(dev, 0)
    };
    // The last trial's socket leaves the queue a moment after it closed
    // (EBUSY until then).
    let opened = Instant::now();
    let mut port = loop {
        match XskPort::open(&umem, &cfg, &mut pool) {
            Ok(p) => break p,
            Err(e) if is_busy(&e) && opened.elapsed() < Duration::from_secs(2) => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(err("socket", &e)),
        }
    };
    let st = PacketGenStats::default();
    let mut buf = Vec::with_capacity(2048);
    let mut batch = Vec::with_capacity(MAX_BURST as usize);
    let wall = Instant::now();
    loop {
        match pace.due(mono_ns()) {
            Due::Send(n) => {
                batch.clear();
                for _ in 0..n.min(MAX_BURST) {
                    builder.next_frame(mono_ns() as u32, &mut buf);
                    match pool.alloc_from(&buf) {
                        Some(i) => batch.push(i),
                        None => {
                            builder.retract();
                            break;
                        }
                    }
                }
                let out = port.tx_burst(&mut pool, &batch);
                let now = mono_ns();
                for _ in 0..out.sent {
                    pace.sent(now);
                }
                for _ in out.sent..batch.len() {
                    builder.retract();
                }
                if out.sent < batch.len() {
                    // The ring or the pool is full: completions first.
                    port.service(&mut pool);
                    std::thread::yield_now();
                }
            }
            Due::Done => break,
            Due::Wait(ns) => wait(ns, rt),
        }
        if wall.elapsed() > deadline {
            break;
        }
    }
    // Frames still on the ring go out before the socket closes.
    let drain = Instant::now();
    while port.frames_lent() > cfg.fill_size as usize && drain.elapsed() < Duration::from_millis(200) {
        port.service(&mut pool);
        std::thread::sleep(Duration::from_micros(200));
    }
    let _ = port.close(&mut pool);
    Ok((pace.progress, st))
}

/// Opens and closes an AF_XDP socket on a veth of a namespace of its own
/// named `ns_name` (deleted after): whether the AF_XDP generator can run.
pub fn probe_af_xdp(ns_name: &str) -> Result<()> {
    use tern_packet::{PacketPool, PoolConfig};
    use tern_xdp::{BindMode, BusyPoll, Umem, XskConfig, XskPort};
    let ns = Netns::create(ns_name)?;
    crate::netns::veth_pair(&ns, "tb-probe0", &ns, "tb-probe1")?;
    let err = |what: &str, e: &dyn std::fmt::Display| BenchError::Dut(format!("AF_XDP: {what}: {e}"));
    std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            ns.enter_current_thread()?;
            let mut pool = PacketPool::new(PoolConfig {
                frames: 256,
                hugepages: false,
                pad_frames: false,
                ..PoolConfig::default()
            })
            .map_err(|e| err("pool", &e))?;
            let umem = Umem::new(&pool).map_err(|e| err("UMEM", &e))?;
            let cfg = XskConfig {
                rx_size: 64,
                tx_size: 64,
                fill_size: 64,
                comp_size: 64,
                mode: BindMode::Copy,
                busy_poll: BusyPoll::Off,
                napi_probe_port: None,
                tune_napi: false,
                ..XskConfig::new("tb-probe0", 0)
            };
            let port = XskPort::open(&umem, &cfg, &mut pool).map_err(|e| err("socket", &e))?;
            let _ = port.close(&mut pool);
            Ok(())
        })
        .join()
        .map_err(|_| BenchError::Bpf("AF_XDP probe thread panicked".into()))?
    })
}

/// Whether an error comes from EBUSY.
fn is_busy(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if c.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error)
            == Some(nix::errno::Errno::EBUSY as i32)
        {
            return true;
        }
        cur = c.source();
    }
    false
}

/// A transmit-only AF_PACKET socket on `dev` of the calling thread's
/// namespace: the smallest receive ring (the socket must have one), no
/// qdisc (the XDP generator's frames skip it too).
fn open_tx(dev: &str) -> Result<tern_io::AfPacketPort> {
    let mut cfg = tern_io::AfPacketConfig::new(dev);
    cfg.block_size = 4096;
    cfg.block_count = 1;
    cfg.frame_size = 2048;
    cfg.complete_checksums = false;
    cfg.restore_vlan = false;
    tern_io::AfPacketPort::open_with(&cfg).map_err(|e| BenchError::Dut(format!("AF_PACKET generator: {e}")))
}

/// Sends one frame: retries while the socket's buffer is full (false:
/// still full at the trial's deadline, not sent), counts a frame the
/// device refused as sent (it is lost on the way into the DUT, as the XDP
/// generator's would be), fails on anything else.
fn send(
    port: &tern_io::AfPacketPort,
    frame: &[u8],
    st: &mut PacketGenStats,
    wall: Instant,
    deadline: Duration,
) -> Result<bool> {
    loop {
        match port.send_raw(frame) {
            Ok(()) => return Ok(true),
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENOBUFS as i32) => {
                st.refused += 1;
                return Ok(true);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if wall.elapsed() > deadline {
                    return Ok(false);
                }
                st.retried += 1;
                std::thread::yield_now();
            }
            Err(e) => return Err(BenchError::Dut(format!("AF_PACKET generator: {e}"))),
        }
    }
}

/// The generator of a run.
pub enum TrafficGen {
    /// The XDP program.
    Bpf(Generator),
    /// AF_PACKET from user space.
    Packet(PacketGen),
}

impl TrafficGen {
    /// Which one it is.
    pub fn kind(&self) -> GeneratorKind {
        match self {
            TrafficGen::Bpf(_) => GeneratorKind::Bpf,
            TrafficGen::Packet(g) => g.kind(),
        }
    }

    /// Installs the cycle of slots and the flows, and resets the counters.
    pub fn configure(&mut self, slots: &[Slot], flows: &[FlowSpec]) -> Result<()> {
        match self {
            TrafficGen::Bpf(g) => g.configure(slots, flows),
            TrafficGen::Packet(g) => g.configure(slots, flows),
        }
    }

    /// Zeroes the counters and sequence numbers.
    pub fn reset(&mut self) -> Result<()> {
        match self {
            TrafficGen::Bpf(g) => g.reset(),
            TrafficGen::Packet(g) => g.reset(),
        }
    }

    /// The counters since the last reset.
    pub fn counters(&self) -> Result<GenCounters> {
        match self {
            TrafficGen::Bpf(g) => g.counters(),
            TrafficGen::Packet(g) => g.counters(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{FrameSize, Imix, Signature, StreamSpec, TrafficProfile};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn stream(label: &str, flows: FlowSpec) -> StreamSpec {
        StreamSpec {
            label: label.into(),
            counted: true,
            src4: Ipv4Addr::new(10, 10, 1, 2),
            dst4: Ipv4Addr::new(198, 18, 0, 1),
            src6: "2001:db8:10:1::2".parse::<Ipv6Addr>().expect("v6"),
            dst6: "2001:2::1".parse::<Ipv6Addr>().expect("v6"),
            flows,
        }
    }

    fn profile(size: FrameSize, vlan: Option<u16>) -> TrafficProfile {
        let many = FlowSpec {
            src_count: 3,
            src_stride: 1,
            dst_count: 5,
            dst_stride: 256,
            sport_base: 1024,
            sport_count: 2,
            dport_base: 2000,
            dport_count: 7,
            random: false,
        };
        TrafficProfile {
            streams: vec![stream("legit", many), stream("attack", FlowSpec::SINGLE)],
            size,
            vlan,
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
        }
    }

    /// The user-space frames are the reference builder's (which the XDP
    /// program's are checked against in tests/bpf_programs.rs), frame by
    /// frame over several cycles: flows, sequence numbers, timestamps,
    /// checksums, lengths, VLAN tags and IPv6.
    #[test]
    fn frames_match_the_reference_builder() {
        for (size, vlan) in [
            (FrameSize::Fixed { size: 64, ipv6: false }, None),
            (FrameSize::Fixed { size: 78, ipv6: true }, None),
            (FrameSize::Fixed { size: 128, ipv6: true }, Some(7)),
            (FrameSize::Fixed { size: 100, ipv6: false }, Some(4094)),
            (FrameSize::Imix(Imix::Imix1), None),
        ] {
            let prof = profile(size, vlan);
            let slots = prof.slots().expect("slots");
            let flows: Vec<_> = prof.streams.iter().map(|s| s.flows).collect();
            let mut b = FrameBuilder::new(&slots, &flows).expect("builder");
            let mut buf = Vec::new();
            for round in 0..2 {
                for n in 0..(slots.len() as u64 * 3 + 11) {
                    let ts = (n as u32).wrapping_mul(7919);
                    b.next_frame(ts, &mut buf);
                    let want = prof.frame(n, ts).expect("reference frame");
                    assert_eq!(buf, want, "{} frame {n} (round {round})", size.label());
                }
                let c = b.counters();
                assert_eq!(c.sent, slots.len() as u64 * 3 + 11);
                assert_eq!(c.per_stream.iter().sum::<u64>(), c.sent, "every frame is in one stream");
                b.reset();
            }
        }
    }

    /// A frame taken back leaves its sequence number and flow to the next.
    #[test]
    fn a_retracted_frame_is_built_again() {
        let prof = profile(FrameSize::Fixed { size: 64, ipv6: false }, None);
        let slots = prof.slots().expect("slots");
        let flows: Vec<_> = prof.streams.iter().map(|s| s.flows).collect();
        let mut b = FrameBuilder::new(&slots, &flows).expect("builder");
        let mut buf = Vec::new();
        b.retract();
        assert_eq!(b.counters().sent, 0, "nothing to take back");
        for n in 0..9u64 {
            b.next_frame(1, &mut buf);
            b.retract();
            b.next_frame(1, &mut buf);
            assert_eq!(buf, prof.frame(n, 1).expect("reference"), "frame {n}");
        }
        assert_eq!(b.counters().sent, 9);
    }

    /// Random flows stay inside the stream's ranges, and the checksums
    /// still hold.
    #[test]
    fn random_flows_stay_in_range_with_valid_checksums() {
        let mut prof = profile(FrameSize::Fixed { size: 64, ipv6: false }, None);
        prof.streams[0].flows.random = true;
        let slots = prof.slots().expect("slots");
        let flows: Vec<_> = prof.streams.iter().map(|s| s.flows).collect();
        let mut b = FrameBuilder::new(&slots, &flows).expect("builder");
        let mut buf = Vec::new();
        let mut seen_dports = std::collections::HashSet::new();
        for n in 0..400u32 {
            b.next_frame(n, &mut buf);
            let ip = &buf[14..34];
            assert_eq!(checksum(&[ip]), 0, "IPv4 header checksum");
            let dport = u16::from_be_bytes([buf[36], buf[37]]);
            let sig = Signature::parse(&buf[42..]).expect("signature");
            if sig.stream == 0 {
                assert!((2000..2007).contains(&dport), "{dport}");
                let dst =
                    u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]) - u32::from(Ipv4Addr::new(198, 18, 0, 1));
                assert!(dst % 256 == 0 && dst / 256 < 5, "{dst}");
                seen_dports.insert(dport);
            }
            // UDP checksum over the pseudo-header verifies to zero.
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&ip[12..20]);
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&buf[38..40]);
            assert_eq!(checksum(&[&pseudo, &buf[34..]]), 0, "UDP checksum of frame {n}");
        }
        assert!(seen_dports.len() > 1, "random ports vary");
    }

    /// The bucket of the XDP program's tests (tests/bpf_programs.rs), on
    /// a clock of our own: frame k is not due before k ms at 1000
    /// frames/s, nothing past the total, and a sender held up 30 ms with
    /// a bucket of 4 sends 4 and skips the rest.
    #[test]
    fn pacing_sends_what_is_due_and_skips_beyond_the_bucket() {
        let ms = 1_000_000;
        let t0 = 5 * ms;
        let mut p = Pace::new(1000, 3, 1, t0);
        assert_eq!(p.due(t0), Due::Send(1), "the first frame is due at once");
        p.sent(t0);
        assert_eq!(p.due(t0 + ms / 2), Due::Wait(ms / 2));
        assert_eq!(p.due(t0 + ms - 1), Due::Wait(1));
        assert_eq!(p.due(t0 + ms), Due::Send(1));
        p.sent(t0 + ms);
        assert_eq!(p.due(t0 + 2 * ms), Due::Send(1));
        p.sent(t0 + 2 * ms);
        assert_eq!(p.due(t0 + 10 * ms), Due::Done, "nothing past the total");
        assert_eq!(p.progress.sent, 3);
        assert_eq!((p.progress.start_ns, p.progress.last_ns), (t0, t0 + 2 * ms));
        assert!((p.progress.seconds(1000.0) - 0.003).abs() < 1e-9);

        let mut p = Pace::new(1000, 1000, 4, 0);
        assert_eq!(p.due(0), Due::Send(1));
        p.sent(0);
        // 31 due at 30 ms, 1 sent: 4 owed, 26 skipped.
        assert_eq!(p.due(30 * ms), Due::Send(4));
        for _ in 0..4 {
            p.sent(30 * ms);
        }
        assert_eq!(p.progress.skipped, 26);
        assert!(matches!(p.due(30 * ms), Due::Wait(_)));
        assert_eq!(p.progress.consumed(), 31);
        // A clock that steps back sends nothing new.
        assert!(matches!(p.due(0), Due::Wait(_)));
    }

    #[test]
    fn bad_cycles_are_refused() {
        assert!(FrameBuilder::new(&[], &[FlowSpec::SINGLE]).is_err());
        let prof = profile(FrameSize::Fixed { size: 64, ipv6: false }, None);
        let slots = prof.slots().expect("slots");
        // Slots name stream 1, but only one stream's flows are given.
        assert!(FrameBuilder::new(&slots, &[FlowSpec::SINGLE]).is_err());
        assert!(PacketGen::af_packet().counters().is_err());
    }
}
