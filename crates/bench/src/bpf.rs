//! Loading and driving the XDP programs: the generator and sink
//! (bpf/gen.bpf.c, bpf/sink.bpf.c), the hole watch (bpf/holes.bpf.c) and
//! the `xdp-fwd` DUT's router
//! (bpf/xdpfwd.bpf.c).
//!
//! Map values are exchanged as byte arrays laid out like the C structs of
//! bpf/common.h (little endian, natural alignment), which keeps this crate
//! free of unsafe code: aya implements `Pod` for `[u8; N]`.

use std::time::Duration;

use aya::Ebpf;
use aya::maps::{Array, MapData};
use aya::programs::{ProgramError, TestRun, TestRunAttrs, TestRunOptions, TracePoint, Xdp, XdpMode};
use aya::sys::SyscallError;

use crate::account::RxStream;
use crate::error::{BenchError, Result};
use crate::netns::Netns;
use crate::traffic::{FlowSpec, HDR_MAX, MAX_SLOTS, MAX_STREAMS, Slot};

static GEN_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/gen.bpf.o"));
static SINK_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sink.bpf.o"));
static PASS_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pass.bpf.o"));
static HOLES_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/holes.bpf.o"));
static XDPFWD_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xdpfwd.bpf.o"));

const SLOT_SIZE: usize = HDR_MAX + 8;
const STREAM_CFG_SIZE: usize = 32;
const GEN_CFG_SIZE: usize = 8 + MAX_STREAMS * STREAM_CFG_SIZE;
const GEN_STATE_SIZE: usize = 8 + MAX_STREAMS * 8 + MAX_STREAMS * 4;
/// `struct gen_pace`: six u64.
const GEN_PACE_SIZE: usize = 48;
/// Highest paced rate the program takes (it multiplies in 64 bits).
pub const MAX_PACED_PPS: f64 = 4.0e9;
/// `struct rx_stream`: 8 counters, max_seq + started, window, histogram.
pub(crate) const RX_STREAM_SIZE: usize = 8 * 8 + 8 + 16 * 8 + crate::account::LAT_BUCKETS * 8;
const RX_MISC_SIZE: usize = 24;
/// Gaps `struct rx_gaps` logs (GAP_LOG).
const GAP_LOG: usize = 1024;
/// `struct rx_gaps`: count, then two logs.
const RX_GAPS_SIZE: usize = 8 + 2 * GAP_LOG * 8;
/// errno ENOSPC.
const ENOSPC: i32 = 28;
/// errno ENOMEM.
const ENOMEM: i32 = 12;
/// How many 5 ms waits a send makes for page pool ids (4 s).
const ENOSPC_RETRIES: u32 = 800;

/// Holes `struct hole_watch` logs (bpf/holes.bpf.c, HOLE_LOG).
const HOLE_LOG: usize = 1024;
/// `struct hole_watch`: the timer (16 bytes), seven u64, two logs.
const HOLE_WATCH_SIZE: usize = 16 + 7 * 8 + 2 * HOLE_LOG * 8;
/// Offset of `struct hole_watch`'s logs.
const HOLE_LOG_OFF: usize = 16 + 7 * 8;

/// `struct xdp_md` as BPF_PROG_TEST_RUN's ctx_in: data 0, data_end the
/// frame's length (the kernel insists), ingress_ifindex the device.
fn xdp_md(ifindex: u32, len: usize) -> [u8; 24] {
    let mut ctx = [0u8; 24];
    ctx[4..8].copy_from_slice(&(len as u32).to_le_bytes());
    ctx[12..16].copy_from_slice(&ifindex.to_le_bytes());
    ctx
}

fn bpf_err(what: &str, e: impl std::error::Error) -> BenchError {
    let mut msg = format!("{what}: {e}");
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    BenchError::Bpf(msg)
}

fn load(obj: &[u8], prog: &str) -> Result<Ebpf> {
    let mut ebpf = Ebpf::load(obj).map_err(|e| bpf_err("load object", e))?;
    let p: &mut Xdp = ebpf
        .program_mut(prog)
        .ok_or_else(|| BenchError::Bpf(format!("no program {prog}")))?
        .try_into()
        .map_err(|e| bpf_err(prog, e))?;
    p.load().map_err(|e| bpf_err(&format!("verifier rejected {prog}"), e))?;
    Ok(ebpf)
}

fn array<'a, const N: usize>(ebpf: &'a mut Ebpf, name: &str) -> Result<Array<&'a mut MapData, [u8; N]>> {
    let map = ebpf.map_mut(name).ok_or_else(|| BenchError::Bpf(format!("no map {name}")))?;
    Array::try_from(map).map_err(|e| bpf_err(name, e))
}

fn array_ref<'a, const N: usize>(ebpf: &'a Ebpf, name: &str) -> Result<Array<&'a MapData, [u8; N]>> {
    let map = ebpf.map(name).ok_or_else(|| BenchError::Bpf(format!("no map {name}")))?;
    Array::try_from(map).map_err(|e| bpf_err(name, e))
}

fn slot_bytes(s: &Slot) -> [u8; SLOT_SIZE] {
    let mut b = [0u8; SLOT_SIZE];
    b[..HDR_MAX].copy_from_slice(&s.hdr);
    b[HDR_MAX..HDR_MAX + 2].copy_from_slice(&s.frame_len.to_le_bytes());
    b[HDR_MAX + 2..HDR_MAX + 4].copy_from_slice(&s.l3_off.to_le_bytes());
    b[HDR_MAX + 4] = u8::from(s.ipv6);
    b[HDR_MAX + 5] = s.stream;
    b
}

fn cfg_bytes(n_slots: usize, flows: &[FlowSpec]) -> [u8; GEN_CFG_SIZE] {
    let mut b = [0u8; GEN_CFG_SIZE];
    // n_slots <= MAX_SLOTS, checked by the caller.
    b[0..4].copy_from_slice(&(n_slots as u32).to_le_bytes());
    for (i, f) in flows.iter().take(MAX_STREAMS).enumerate() {
        let o = 8 + i * STREAM_CFG_SIZE;
        let c = &mut b[o..o + STREAM_CFG_SIZE];
        c[0..4].copy_from_slice(&f.src_count.max(1).to_le_bytes());
        c[4..8].copy_from_slice(&f.src_stride.to_le_bytes());
        c[8..12].copy_from_slice(&f.dst_count.max(1).to_le_bytes());
        c[12..16].copy_from_slice(&f.dst_stride.to_le_bytes());
        c[16..18].copy_from_slice(&f.sport_base.to_le_bytes());
        c[18..20].copy_from_slice(&f.sport_count.max(1).to_le_bytes());
        c[20..22].copy_from_slice(&f.dport_base.to_le_bytes());
        c[22..24].copy_from_slice(&f.dport_count.max(1).to_le_bytes());
        c[24..28].copy_from_slice(&u32::from(f.random).to_le_bytes());
    }
    b
}

fn le_u64(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8).and_then(|s| s.try_into().ok()).map(u64::from_le_bytes).unwrap_or(0)
}

fn le_u32(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes).unwrap_or(0)
}

/// What the generator program has done since its last reset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenCounters {
    /// Frames built and sent.
    pub sent: u64,
    /// Frames sent per stream (the next sequence number of each).
    pub per_stream: Vec<u64>,
}

/// Where a paced run stands (`struct gen_pace` and the frame counter).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PaceProgress {
    /// Frames sent.
    pub sent: u64,
    /// Frames skipped: due while the generator was held up, beyond the
    /// bucket's depth.
    pub skipped: u64,
    /// Kernel monotonic time of the first run and of the last frame sent,
    /// ns (0: none yet).
    pub start_ns: u64,
    /// See `start_ns`.
    pub last_ns: u64,
}

impl PaceProgress {
    /// Frames sent or skipped: the part of the trial's total used up.
    pub fn consumed(&self) -> u64 {
        self.sent + self.skipped
    }

    /// Seconds from the first run to the last frame sent, plus one frame
    /// interval at `rate_pps` (0 before two frames went out).
    pub fn seconds(&self, rate_pps: f64) -> f64 {
        if self.sent < 2 || self.last_ns <= self.start_ns {
            return 0.0;
        }
        (self.last_ns - self.start_ns) as f64 / 1e9 + 1.0 / rate_pps
    }
}

/// The loaded generator program.
pub struct Generator {
    ebpf: Ebpf,
    n_streams: usize,
    /// Where the program is kept attached (see [`Generator::anchor`]).
    anchor: Option<(aya::programs::xdp::XdpLinkId, Netns)>,
}

impl Generator {
    /// Loads the generator program (needs CAP_BPF / root).
    pub fn load() -> Result<Self> {
        Ok(Generator { ebpf: load(GEN_OBJ, "tern_gen")?, n_streams: 0, anchor: None })
    }

    /// Keeps the program attached (generic mode) to a veth that carries
    /// no traffic, in a namespace of its own named `ns_name`.
    ///
    /// Why: BPF_PROG_TEST_RUN adds an XDP program to the kernel's XDP
    /// dispatcher before running it and removes it after, and each change
    /// of the dispatcher waits for an RCU grace period: milliseconds per
    /// call, which capped the generator at a few kpps with small batches.
    /// A program that stays attached somewhere stays in the dispatcher,
    /// and the test run only takes a reference.
    pub fn anchor(&mut self, ns_name: &str) -> Result<()> {
        let ns = Netns::create(ns_name)?;
        crate::netns::veth_pair(&ns, "tb-anchor0", &ns, "tb-anchor1")?;
        ns.ip(&["link", "set", "tb-anchor0", "down"])?;
        let prog = self.prog_mut()?;
        let id = std::thread::scope(|s| {
            s.spawn(|| -> Result<_> {
                ns.enter_current_thread()?;
                prog.attach("tb-anchor0", XdpMode::Skb).map_err(|e| bpf_err("attach generator to its anchor", e))
            })
            .join()
            .map_err(|_| BenchError::Bpf("anchor thread panicked".into()))?
        })?;
        self.anchor = Some((id, ns));
        Ok(())
    }

    /// Asks the kernel once for a run with live frames, on the anchor's
    /// device (down: nothing leaves) before any slot is installed (the
    /// program aborts: nothing is built). Some kernels refuse such runs
    /// (EPERM where root lacks CAP_SYS_RESOURCE, even for a one-line
    /// program); the error says so and the caller may send otherwise.
    pub fn probe_live_frames(&self) -> Result<()> {
        let (_, ns) = self.anchor.as_ref().ok_or_else(|| BenchError::Bpf("the generator has no anchor".into()))?;
        let ifindex = ns.link_info("tb-anchor0")?.ifindex;
        let buf = [0u8; HDR_MAX];
        std::thread::scope(|s| {
            s.spawn(|| -> Result<()> {
                ns.enter_current_thread()?;
                self.send(ifindex, &buf, 1, 1).map(drop)
            })
            .join()
            .map_err(|_| BenchError::Bpf("probe thread panicked".into()))?
        })
    }

    fn prog_mut(&mut self) -> Result<&mut Xdp> {
        self.ebpf
            .program_mut("tern_gen")
            .ok_or_else(|| BenchError::Bpf("no program tern_gen".into()))?
            .try_into()
            .map_err(|e| bpf_err("tern_gen", e))
    }

    /// Installs the cycle of slots and the flow settings, and resets the
    /// counters.
    pub fn configure(&mut self, slots: &[Slot], flows: &[FlowSpec]) -> Result<()> {
        if slots.is_empty() || slots.len() > MAX_SLOTS || flows.is_empty() || flows.len() > MAX_STREAMS {
            return Err(BenchError::Config(format!(
                "{} slots / {} streams do not fit the generator",
                slots.len(),
                flows.len()
            )));
        }
        {
            let mut m = array::<SLOT_SIZE>(&mut self.ebpf, "gen_slots")?;
            for (i, s) in slots.iter().enumerate() {
                m.set(i as u32, slot_bytes(s), 0).map_err(|e| bpf_err("write gen_slots", e))?;
            }
        }
        let mut m = array::<GEN_CFG_SIZE>(&mut self.ebpf, "gen_config")?;
        m.set(0, cfg_bytes(slots.len(), flows), 0).map_err(|e| bpf_err("write gen_config", e))?;
        self.n_streams = flows.len();
        self.unpace()?;
        self.reset()
    }

    /// Paces the next runs: from the first, frames go out at `rate_pps`
    /// until `total` are sent or skipped, with a token bucket `depth`
    /// frames deep; every other run of the program drops its page.
    pub fn pace(&mut self, rate_pps: f64, total: u64, depth: u64) -> Result<()> {
        if !(rate_pps.is_finite() && (1.0..=MAX_PACED_PPS).contains(&rate_pps)) {
            return Err(BenchError::Config(format!("paced rate {rate_pps} frames/s")));
        }
        let mut b = [0u8; GEN_PACE_SIZE];
        b[0..8].copy_from_slice(&(rate_pps.round() as u64).to_le_bytes());
        b[8..16].copy_from_slice(&total.to_le_bytes());
        b[16..24].copy_from_slice(&depth.max(1).to_le_bytes());
        let mut m = array::<GEN_PACE_SIZE>(&mut self.ebpf, "gen_pace")?;
        m.set(0, b, 0).map_err(|e| bpf_err("write gen_pace", e))
    }

    /// Every run sends a frame again (the caller paces, or does not).
    pub fn unpace(&mut self) -> Result<()> {
        let mut m = array::<GEN_PACE_SIZE>(&mut self.ebpf, "gen_pace")?;
        m.set(0, [0u8; GEN_PACE_SIZE], 0).map_err(|e| bpf_err("reset gen_pace", e))
    }

    /// `struct gen_state` as bytes.
    fn state(&self) -> Result<[u8; GEN_STATE_SIZE]> {
        let m = array_ref::<GEN_STATE_SIZE>(&self.ebpf, "gen_state")?;
        m.get(&0, 0).map_err(|e| bpf_err("read gen_state", e))
    }

    /// Where the paced run stands.
    pub fn pace_progress(&self) -> Result<PaceProgress> {
        let sent = le_u64(&self.state()?, 0);
        let m = array_ref::<GEN_PACE_SIZE>(&self.ebpf, "gen_pace")?;
        let b = m.get(&0, 0).map_err(|e| bpf_err("read gen_pace", e))?;
        Ok(PaceProgress { sent, skipped: le_u64(&b, 40), start_ns: le_u64(&b, 24), last_ns: le_u64(&b, 32) })
    }

    /// Zeroes the frame counter and every stream's sequence number.
    pub fn reset(&mut self) -> Result<()> {
        let mut m = array::<GEN_STATE_SIZE>(&mut self.ebpf, "gen_state")?;
        m.set(0, [0u8; GEN_STATE_SIZE], 0).map_err(|e| bpf_err("reset gen_state", e))
    }

    /// Reads the counters.
    pub fn counters(&self) -> Result<GenCounters> {
        let n = self.n_streams;
        let b = self.state()?;
        let seq_off = 8 + MAX_STREAMS * 8;
        Ok(GenCounters {
            sent: le_u64(&b, 0),
            per_stream: (0..n).map(|i| u64::from(le_u32(&b, seq_off + 4 * i))).collect(),
        })
    }

    fn prog(&self) -> Result<&Xdp> {
        self.ebpf
            .program("tern_gen")
            .ok_or_else(|| BenchError::Bpf("no program tern_gen".into()))?
            .try_into()
            .map_err(|e| bpf_err("tern_gen", e))
    }

    /// Sends `count` frames out of interface `ifindex` of the calling
    /// thread's network namespace (BPF_PROG_TEST_RUN with live frames),
    /// flushing every `batch` frames. `buf` is the zeroed page image, at
    /// least as long as the longest frame of the cycle. Blocks until done.
    pub fn send(&self, ifindex: u32, buf: &[u8], count: u32, batch: u32) -> Result<Duration> {
        let ctx = xdp_md(ifindex, buf.len());
        let prog = self.prog()?;
        let mut waited = 0;
        loop {
            let opts = TestRunOptions {
                data_in: Some(buf),
                ctx_in: Some(&ctx),
                repeat: count,
                attrs: TestRunAttrs::new().xdp_live_frames(batch.clamp(1, 256)),
                ..TestRunOptions::new()
            };
            match prog.test_run(opts) {
                Ok(r) => return Ok(r.duration),
                // Each live-frames run registers a page pool under a memory
                // model id (at most 65534 exist); a pool lives until every
                // frame it sent is freed, so a burst of short runs can use
                // them all up for a moment (ENOSPC); the same backlog of
                // pools was seen to fail allocations (ENOMEM) with most of
                // the memory free. Wait for them to come back.
                Err(ProgramError::SyscallError(SyscallError { io_error, .. }))
                    if matches!(io_error.raw_os_error(), Some(ENOSPC | ENOMEM)) && waited < ENOSPC_RETRIES =>
                {
                    waited += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(bpf_err("BPF_PROG_TEST_RUN (live frames)", e)),
            }
        }
    }

    /// Runs the program once on `buf` without sending, returning its
    /// verdict and the frame it built (for tests).
    pub fn build_one(&self, buf: &[u8]) -> Result<(u32, Vec<u8>)> {
        let mut out = vec![0u8; buf.len().max(HDR_MAX) + 256];
        let opts = TestRunOptions { data_in: Some(buf), data_out: Some(&mut out), repeat: 1, ..TestRunOptions::new() };
        let r = self.prog()?.test_run(opts).map_err(|e| bpf_err("BPF_PROG_TEST_RUN", e))?;
        out.truncate(r.data_size_out as usize);
        Ok((r.return_value, out))
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        if let Some((id, ns)) = self.anchor.take() {
            if let Ok(p) = self.prog_mut() {
                let _ = p.detach(id);
            }
            drop(ns);
        }
    }
}

/// The XDP return code XDP_TX.
pub const XDP_TX: u32 = 3;
/// The XDP return code XDP_DROP.
pub const XDP_DROP: u32 = 1;
/// The XDP return code XDP_PASS.
pub const XDP_PASS: u32 = 2;
/// The XDP return code XDP_REDIRECT.
pub const XDP_REDIRECT: u32 = 4;

/// The loaded sink (receiver) program.
pub struct Sink {
    ebpf: Ebpf,
    attached: Option<aya::programs::xdp::XdpLinkId>,
}

/// A gap in a stream's sequence seen by the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// When the frame after the gap arrived (bpf_ktime_get_ns()).
    pub at_ns: u64,
    /// Its stream.
    pub stream: u32,
    /// Sequence numbers it skipped.
    pub missing: u32,
}

/// The sink's log of gaps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GapLog {
    /// Oldest first.
    pub gaps: Vec<Gap>,
    /// Older gaps were overwritten.
    pub wrapped: bool,
}

/// Counters of frames the sink did not count for a stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkMisc {
    /// Frames without a signature, handed to the kernel (ARP, ND, ...).
    pub passed: u64,
    /// Frames with a signature and a stream id out of range.
    pub bad_stream: u64,
    /// Counted frames that arrived inside a GRE header.
    pub in_gre: u64,
}

impl Sink {
    /// Loads the sink program (needs CAP_BPF / root).
    pub fn load() -> Result<Self> {
        Ok(Sink { ebpf: load(SINK_OBJ, "tern_sink")?, attached: None })
    }

    fn prog_mut(&mut self) -> Result<&mut Xdp> {
        self.ebpf
            .program_mut("tern_sink")
            .ok_or_else(|| BenchError::Bpf("no program tern_sink".into()))?
            .try_into()
            .map_err(|e| bpf_err("tern_sink", e))
    }

    /// Attaches the program (native mode) to device `dev` of the calling
    /// thread's namespace; detaches it from wherever it was before.
    pub fn attach(&mut self, dev: &str) -> Result<()> {
        // The previous device may be gone with its namespace: nothing to undo.
        let _ = self.detach();
        let id =
            self.prog_mut()?.attach(dev, XdpMode::Driver).map_err(|e| bpf_err(&format!("attach sink to {dev}"), e))?;
        self.attached = Some(id);
        Ok(())
    }

    /// Detaches the program if attached.
    pub fn detach(&mut self) -> Result<()> {
        if let Some(id) = self.attached.take() {
            self.prog_mut()?.detach(id).map_err(|e| bpf_err("detach sink", e))?;
        }
        Ok(())
    }

    /// Zeroes every stream's counters.
    pub fn reset(&mut self) -> Result<()> {
        {
            let mut m = array::<RX_STREAM_SIZE>(&mut self.ebpf, "rx_streams")?;
            for i in 0..MAX_STREAMS as u32 {
                m.set(i, [0u8; RX_STREAM_SIZE], 0).map_err(|e| bpf_err("reset rx_streams", e))?;
            }
        }
        array::<RX_GAPS_SIZE>(&mut self.ebpf, "rx_gaps")?
            .set(0, [0u8; RX_GAPS_SIZE], 0)
            .map_err(|e| bpf_err("reset rx_gaps", e))?;
        let mut m = array::<RX_MISC_SIZE>(&mut self.ebpf, "rx_misc")?;
        m.set(0, [0u8; RX_MISC_SIZE], 0).map_err(|e| bpf_err("reset rx_misc", e))
    }

    /// The gaps in the streams' sequences since the last reset, oldest
    /// first (at most the last 1024).
    pub fn gaps(&mut self) -> Result<GapLog> {
        let b = array::<RX_GAPS_SIZE>(&mut self.ebpf, "rx_gaps")?.get(&0, 0).map_err(|e| bpf_err("read rx_gaps", e))?;
        let count = le_u64(&b, 0);
        let gaps = (count.saturating_sub(GAP_LOG as u64)..count)
            .map(|i| {
                let i = (i % GAP_LOG as u64) as usize;
                let what = le_u64(&b, 8 + 8 * (GAP_LOG + i));
                Gap { at_ns: le_u64(&b, 8 + 8 * i), stream: (what >> 32) as u32, missing: what as u32 }
            })
            .collect();
        Ok(GapLog { gaps, wrapped: count > GAP_LOG as u64 })
    }

    /// Reads the first `n` streams' counters.
    pub fn streams(&mut self, n: usize) -> Result<Vec<RxStream>> {
        let m = array::<RX_STREAM_SIZE>(&mut self.ebpf, "rx_streams")?;
        (0..n.min(MAX_STREAMS) as u32)
            .map(|i| m.get(&i, 0).map(|b| RxStream::from_bytes(&b)).map_err(|e| bpf_err("read rx_streams", e)))
            .collect()
    }

    /// Reads the counters of frames not counted for a stream.
    pub fn misc(&mut self) -> Result<SinkMisc> {
        let m = array::<RX_MISC_SIZE>(&mut self.ebpf, "rx_misc")?;
        let b = m.get(&0, 0).map_err(|e| bpf_err("read rx_misc", e))?;
        Ok(SinkMisc { passed: le_u64(&b, 0), bad_stream: le_u64(&b, 8), in_gre: le_u64(&b, 16) })
    }

    /// Runs the program on one frame without a device (for tests),
    /// returning its verdict.
    pub fn feed(&self, frame: &[u8]) -> Result<u32> {
        let p: &Xdp = self
            .ebpf
            .program("tern_sink")
            .ok_or_else(|| BenchError::Bpf("no program tern_sink".into()))?
            .try_into()
            .map_err(|e| bpf_err("tern_sink", e))?;
        let mut out = vec![0u8; frame.len() + 256];
        let opts =
            TestRunOptions { data_in: Some(frame), data_out: Some(&mut out), repeat: 1, ..TestRunOptions::new() };
        p.test_run(opts).map(|r| r.return_value).map_err(|e| bpf_err("BPF_PROG_TEST_RUN", e))
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.detach();
    }
}

pub(crate) fn rx_le_u64(b: &[u8], off: usize) -> u64 {
    le_u64(b, off)
}

pub(crate) fn rx_le_u32(b: &[u8], off: usize) -> u32 {
    le_u32(b, off)
}

/// An XDP program that passes every frame, attached to a DUT's ingress
/// veth only to give it the NAPI context XDP-redirected frames need (see
/// bpf/pass.bpf.c). Detached on drop.
pub struct PassProgram {
    ebpf: Ebpf,
    attached: Option<aya::programs::xdp::XdpLinkId>,
}

impl PassProgram {
    /// Loads the program and attaches it (native mode) to `dev` in `ns`.
    pub fn attach(ns: &Netns, dev: &str) -> Result<Self> {
        let mut ebpf = load(PASS_OBJ, "tern_pass")?;
        let id = {
            let p: &mut Xdp = ebpf
                .program_mut("tern_pass")
                .ok_or_else(|| BenchError::Bpf("no program tern_pass".into()))?
                .try_into()
                .map_err(|e| bpf_err("tern_pass", e))?;
            std::thread::scope(|s| {
                s.spawn(|| -> Result<_> {
                    ns.enter_current_thread()?;
                    p.attach(dev, XdpMode::Driver).map_err(|e| bpf_err(&format!("attach pass program to {dev}"), e))
                })
                .join()
                .map_err(|_| BenchError::Bpf("pass attach thread panicked".into()))?
            })?
        };
        Ok(PassProgram { ebpf, attached: Some(id) })
    }
}

impl Drop for PassProgram {
    fn drop(&mut self) {
        if let Some(id) = self.attached.take() {
            let p: Option<&mut Xdp> = self.ebpf.program_mut("tern_pass").and_then(|p| p.try_into().ok());
            if let Some(p) = p {
                let _ = p.detach(id);
            }
        }
    }
}

/// Holes found by a [`HoleWatch`] in a window of time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct HoleStats {
    /// Holes (late ticks that found the CPU idle) in the window.
    pub count: u64,
    /// The longest, ns.
    pub max_ns: u64,
    /// All of them together, ns.
    pub sum_ns: u64,
    /// The latest tick that found the CPU busy, ns late: a host hole that
    /// began while the DUT ran, or the DUT holding the timer up itself;
    /// the watch cannot tell which.
    pub busy_max_ns: u64,
    /// Whether holes may be missing: the log wrapped over the window.
    pub incomplete: bool,
}

/// A timer pinned to one CPU that records when it ticks late (bpf/holes.bpf.c):
/// stretches in which that CPU ran nothing at all (on a VM: the host did not
/// run the vCPU). Stops when dropped.
pub struct HoleWatch {
    ebpf: Ebpf,
    cpu: usize,
    period: Duration,
}

impl HoleWatch {
    /// Arms the watch on `cpu`: it ticks every `period` and records every
    /// tick later than that by `min` or more.
    pub fn start(cpu: usize, period: Duration, min: Duration) -> Result<Self> {
        let mut ebpf = load(HOLES_OBJ, "tern_holes")?;
        let mut b = [0u8; HOLE_WATCH_SIZE];
        b[16..24].copy_from_slice(&(period.as_nanos().max(1) as u64).to_le_bytes());
        b[24..32].copy_from_slice(&(min.as_nanos() as u64).to_le_bytes());
        array::<HOLE_WATCH_SIZE>(&mut ebpf, "hole_watch")?.set(0, b, 0).map_err(|e| bpf_err("write hole_watch", e))?;
        let mut c = [0u8; 16];
        c[0..8].copy_from_slice(&(cpu as u64).to_le_bytes());
        array::<16>(&mut ebpf, "hole_cpu")?.set(0, c, 0).map_err(|e| bpf_err("write hole_cpu", e))?;
        {
            let t: &mut TracePoint = ebpf
                .program_mut("tern_holes_switch")
                .ok_or_else(|| BenchError::Bpf("no program tern_holes_switch".into()))?
                .try_into()
                .map_err(|e| bpf_err("tern_holes_switch", e))?;
            t.load().map_err(|e| bpf_err("verifier rejected tern_holes_switch", e))?;
            t.attach("sched", "sched_switch").map_err(|e| bpf_err("attach to sched:sched_switch", e))?;
        }
        let verdict = {
            let p: &Xdp = ebpf
                .program("tern_holes")
                .ok_or_else(|| BenchError::Bpf("no program tern_holes".into()))?
                .try_into()
                .map_err(|e| bpf_err("tern_holes", e))?;
            // The timer is pinned to the CPU that arms it.
            std::thread::scope(|s| {
                s.spawn(|| -> Result<u32> {
                    crate::netns::pin_current_thread(cpu)?;
                    let frame = [0u8; 64];
                    let opts = TestRunOptions { data_in: Some(&frame), repeat: 1, ..TestRunOptions::new() };
                    p.test_run(opts).map(|r| r.return_value).map_err(|e| bpf_err("arm the hole watch", e))
                })
                .join()
                .map_err(|_| BenchError::Bpf("hole watch thread panicked".into()))?
            })?
        };
        if verdict != XDP_PASS {
            return Err(BenchError::Bpf(format!("the hole watch's timer did not start on cpu {cpu}")));
        }
        Ok(HoleWatch { ebpf, cpu, period })
    }

    /// The watched CPU.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// The tick period.
    pub fn period(&self) -> Duration {
        self.period
    }

    fn value(&self) -> Result<[u8; HOLE_WATCH_SIZE]> {
        array_ref::<HOLE_WATCH_SIZE>(&self.ebpf, "hole_watch")?.get(&0, 0).map_err(|e| bpf_err("read hole_watch", e))
    }

    /// Ticks so far.
    pub fn ticks(&self) -> Result<u64> {
        Ok(le_u64(&self.value()?, 40))
    }

    /// Late ticks that found the CPU busy (not holes) so far.
    pub fn busy_late(&self) -> Result<u64> {
        Ok(le_u64(&self.value()?, 64))
    }

    /// The late ticks logged so far, oldest first (at most the last 1024).
    pub fn log(&self) -> Result<HoleLog> {
        let b = self.value()?;
        let count = le_u64(&b, 48);
        let base = HOLE_LOG_OFF;
        let holes = (count.saturating_sub(HOLE_LOG as u64)..count)
            .map(|i| {
                let i = (i % HOLE_LOG as u64) as usize;
                let len = le_u64(&b, base + 8 * (HOLE_LOG + i));
                Hole { end_ns: le_u64(&b, base + 8 * i), len_ns: len & !(1 << 63), busy: len >> 63 != 0 }
            })
            .collect();
        Ok(HoleLog { holes, wrapped: count > HOLE_LOG as u64 })
    }
}

/// One hole: a late tick of the watch's timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    /// When the tick came (bpf_ktime_get_ns()): the hole's end.
    pub end_ns: u64,
    /// How late it came: the hole's length, ns (up to one period short).
    pub len_ns: u64,
    /// The tick found the CPU busy, or the CPU had not been idle since
    /// before the tick was due: not provably a hole (the DUT may have held
    /// the timer up itself).
    pub busy: bool,
}

/// The watch's log of holes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoleLog {
    /// Oldest first.
    pub holes: Vec<Hole>,
    /// Older holes were overwritten.
    pub wrapped: bool,
}

impl HoleLog {
    /// The holes (late ticks that found the CPU idle) that overlap
    /// `[from_ns, to_ns]`.
    pub fn between(&self, from_ns: u64, to_ns: u64) -> Vec<Hole> {
        self.late_between(from_ns, to_ns).into_iter().filter(|h| !h.busy).collect()
    }

    /// Every late tick, busy or not, that overlaps `[from_ns, to_ns]`.
    pub fn late_between(&self, from_ns: u64, to_ns: u64) -> Vec<Hole> {
        self.holes
            .iter()
            .copied()
            .filter(|h| h.end_ns >= from_ns && h.end_ns.saturating_sub(h.len_ns) <= to_ns)
            .collect()
    }

    /// Statistics of the holes that overlap `[from_ns, to_ns]`.
    pub fn stats_between(&self, from_ns: u64, to_ns: u64) -> HoleStats {
        let mut s = HoleStats::default();
        for h in self.late_between(from_ns, to_ns) {
            if h.busy {
                s.busy_max_ns = s.busy_max_ns.max(h.len_ns);
                continue;
            }
            s.count += 1;
            s.sum_ns += h.len_ns;
            s.max_ns = s.max_ns.max(h.len_ns);
        }
        // The oldest hole kept is in the window: older ones may have been.
        s.incomplete = self.wrapped && self.holes.first().is_some_and(|h| h.end_ns >= from_ns);
        s
    }
}

/// What a rule of [`XdpFwd`]'s firewall does with a matching frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FwAction {
    /// XDP_DROP.
    Drop,
    /// On to the routing lookup.
    Accept,
}

impl FwAction {
    /// The program's code (FW_DROP, FW_ACCEPT in bpf/xdpfwd.bpf.c).
    fn code(self) -> u32 {
        match self {
            FwAction::Drop => 1,
            FwAction::Accept => 2,
        }
    }
}

/// One rule of [`XdpFwd`]'s firewall: IPv4 source prefix and action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FwRule {
    /// Source prefix address.
    pub src: std::net::Ipv4Addr,
    /// Prefix length, 0..=32.
    pub prefix_len: u8,
    /// What a match does.
    pub action: FwAction,
}

/// Most rules the program's list holds (FW_MAX_RULES).
pub const XDPFWD_MAX_RULES: usize = 64;
/// `struct fw_rule`: addr, mask, action, pad.
const FW_RULE_SIZE: usize = 16;
/// `struct fw_cfg`: n_rules, default_action.
const FW_CFG_SIZE: usize = 8;
/// Entries of `fwd_stats`.
const XDPFWD_COUNTERS: u32 = 5;

/// [`XdpFwd`]'s counters, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpFwdCounters {
    /// Frames redirected to their egress device.
    pub forwarded: u64,
    /// Frames dropped by a firewall rule.
    pub dropped_by_rule: u64,
    /// Frames dropped by the firewall's default action.
    pub dropped_by_default: u64,
    /// Frames handed to the kernel (ARP/ND, local, lookup misses,
    /// unresolved neighbours, expiring TTL).
    pub passed: u64,
    /// Frames whose egress device was not in the program's device map.
    /// Failures of the transmit itself (a full ring on the egress veth's
    /// peer) happen after the program and are not counted here.
    pub redirect_errors: u64,
}

impl std::fmt::Display for XdpFwdCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "forwarded {}, dropped by rule {}, dropped by default {}, passed to the kernel {}, redirect errors {}",
            self.forwarded, self.dropped_by_rule, self.dropped_by_default, self.passed, self.redirect_errors
        )
    }
}

/// The `xdp-fwd` DUT's program (bpf/xdpfwd.bpf.c): an ingress firewall
/// (a linear rule list), `bpf_fib_lookup` in the kernel's tables, TTL /
/// hop limit decrement, MAC rewrite, redirect through a device map.
/// Detached on drop.
pub struct XdpFwd {
    ebpf: Ebpf,
    attached: Vec<aya::programs::xdp::XdpLinkId>,
}

impl XdpFwd {
    /// Loads the program with an empty firewall that accepts everything.
    pub fn load() -> Result<Self> {
        let mut f = XdpFwd { ebpf: load(XDPFWD_OBJ, "tern_xdpfwd")?, attached: Vec::new() };
        f.set_firewall(&[], FwAction::Accept)?;
        Ok(f)
    }

    fn prog_mut(&mut self) -> Result<&mut Xdp> {
        self.ebpf
            .program_mut("tern_xdpfwd")
            .ok_or_else(|| BenchError::Bpf("no program tern_xdpfwd".into()))?
            .try_into()
            .map_err(|e| bpf_err("tern_xdpfwd", e))
    }

    /// Installs the rules, checked in order (first match wins), and the
    /// action for a frame no rule matches (IPv6 frames, which the IPv4
    /// rules cannot match, take it too, except ICMPv6).
    pub fn set_firewall(&mut self, rules: &[FwRule], default: FwAction) -> Result<()> {
        if rules.len() > XDPFWD_MAX_RULES || rules.iter().any(|r| r.prefix_len > 32) {
            return Err(BenchError::Config(format!(
                "xdp-fwd takes up to {XDPFWD_MAX_RULES} rules of prefix length 0..=32"
            )));
        }
        {
            let mut m = array::<FW_RULE_SIZE>(&mut self.ebpf, "fw_rules")?;
            for (i, r) in rules.iter().enumerate() {
                let mask = u32::MAX.checked_shl(32 - u32::from(r.prefix_len)).unwrap_or(0);
                let addr = u32::from(r.src) & mask;
                let mut b = [0u8; FW_RULE_SIZE];
                // Network byte order, as the program compares them with the header.
                b[0..4].copy_from_slice(&addr.to_be_bytes());
                b[4..8].copy_from_slice(&mask.to_be_bytes());
                b[8..12].copy_from_slice(&r.action.code().to_le_bytes());
                m.set(i as u32, b, 0).map_err(|e| bpf_err("write fw_rules", e))?;
            }
        }
        let mut b = [0u8; FW_CFG_SIZE];
        b[0..4].copy_from_slice(&(rules.len() as u32).to_le_bytes());
        b[4..8].copy_from_slice(&default.code().to_le_bytes());
        let mut m = array::<FW_CFG_SIZE>(&mut self.ebpf, "fw_config")?;
        m.set(0, b, 0).map_err(|e| bpf_err("write fw_config", e))
    }

    /// Attaches the program (native mode) to each of `devs` in `ns`, and
    /// makes each a redirect target. The device map resolves ifindexes in
    /// the namespace of the thread that fills it: this is done from a
    /// thread inside `ns`.
    pub fn attach(&mut self, ns: &Netns, devs: &[&str]) -> Result<()> {
        self.add_ports(ns, devs)?;
        std::thread::scope(|s| {
            s.spawn(|| -> Result<()> {
                ns.enter_current_thread()?;
                devs.iter().try_for_each(|dev| self.attach_here(dev))
            })
            .join()
            .map_err(|_| BenchError::Bpf("xdp-fwd attach thread panicked".into()))?
        })
    }

    /// Attaches the program (native mode) to device `dev` of the calling
    /// thread's namespace (without making it a redirect target: see
    /// [`XdpFwd::add_ports_here`]).
    pub fn attach_here(&mut self, dev: &str) -> Result<()> {
        let id = self
            .prog_mut()?
            .attach(dev, XdpMode::Driver)
            .map_err(|e| bpf_err(&format!("attach xdp-fwd to {dev}"), e))?;
        self.attached.push(id);
        Ok(())
    }

    /// Makes `devs` of `ns` redirect targets (without attaching: for
    /// tests, which run the program on frames of their own).
    pub fn add_ports(&mut self, ns: &Netns, devs: &[&str]) -> Result<()> {
        let ifindexes = devs.iter().map(|d| ns.link_info(d).map(|l| l.ifindex)).collect::<Result<Vec<_>>>()?;
        std::thread::scope(|s| {
            s.spawn(|| -> Result<()> {
                ns.enter_current_thread()?;
                self.add_ports_here(&ifindexes)
            })
            .join()
            .map_err(|_| BenchError::Bpf("xdp-fwd device map thread panicked".into()))?
        })
    }

    /// Makes the devices `ifindexes` of the calling thread's namespace
    /// redirect targets.
    pub fn add_ports_here(&mut self, ifindexes: &[u32]) -> Result<()> {
        let map = self.ebpf.map_mut("fwd_ports").ok_or_else(|| BenchError::Bpf("no map fwd_ports".into()))?;
        let mut ports = aya::maps::DevMapHash::try_from(map).map_err(|e| bpf_err("fwd_ports", e))?;
        for &i in ifindexes {
            ports.insert(i, i, None, 0).map_err(|e| bpf_err("write fwd_ports", e))?;
        }
        Ok(())
    }

    /// Detaches the program from every device.
    pub fn detach(&mut self) -> Result<()> {
        let ids = std::mem::take(&mut self.attached);
        let prog = self.prog_mut()?;
        for id in ids {
            prog.detach(id).map_err(|e| bpf_err("detach xdp-fwd", e))?;
        }
        Ok(())
    }

    /// The counters, summed over CPUs.
    pub fn counters(&self) -> Result<XdpFwdCounters> {
        let map = self.ebpf.map("fwd_stats").ok_or_else(|| BenchError::Bpf("no map fwd_stats".into()))?;
        let m = aya::maps::PerCpuArray::<_, u64>::try_from(map).map_err(|e| bpf_err("fwd_stats", e))?;
        let mut c = [0u64; XDPFWD_COUNTERS as usize];
        for (i, v) in c.iter_mut().enumerate() {
            *v = m.get(&(i as u32), 0).map_err(|e| bpf_err("read fwd_stats", e))?.iter().sum();
        }
        Ok(XdpFwdCounters {
            forwarded: c[0],
            dropped_by_rule: c[1],
            dropped_by_default: c[2],
            passed: c[3],
            redirect_errors: c[4],
        })
    }

    /// Runs the program once on `frame` as if it had arrived on device
    /// `ingress_ifindex` of `ns` (BPF_PROG_TEST_RUN, nothing sent), for
    /// tests: its verdict and the frame as it left the program.
    pub fn feed(&self, ns: &Netns, ingress_ifindex: u32, frame: &[u8]) -> Result<(u32, Vec<u8>)> {
        std::thread::scope(|s| {
            s.spawn(|| -> Result<(u32, Vec<u8>)> {
                // The device index and the routing lookup are the namespace's.
                ns.enter_current_thread()?;
                let mut out = vec![0u8; frame.len() + 256];
                let (verdict, _, len) = self.test_run(ingress_ifindex, frame, Some(&mut out), 1)?;
                out.truncate(len);
                Ok((verdict, out))
            })
            .join()
            .map_err(|_| BenchError::Bpf("xdp-fwd test thread panicked".into()))?
        })
    }

    /// Runs the program `repeat` times on `frame` as if it had arrived on
    /// device `ingress_ifindex` of the calling thread's namespace
    /// (BPF_PROG_TEST_RUN, nothing sent): the verdict and the kernel's
    /// mean time of one run.
    pub fn test_run_timed(&self, ingress_ifindex: u32, frame: &[u8], repeat: u32) -> Result<(u32, Duration)> {
        self.test_run(ingress_ifindex, frame, None, repeat).map(|(v, d, _)| (v, d))
    }

    fn test_run(
        &self,
        ingress_ifindex: u32,
        frame: &[u8],
        out: Option<&mut [u8]>,
        repeat: u32,
    ) -> Result<(u32, Duration, usize)> {
        let p: &Xdp = self
            .ebpf
            .program("tern_xdpfwd")
            .ok_or_else(|| BenchError::Bpf("no program tern_xdpfwd".into()))?
            .try_into()
            .map_err(|e| bpf_err("tern_xdpfwd", e))?;
        let ctx = xdp_md(ingress_ifindex, frame.len());
        let opts =
            TestRunOptions { data_in: Some(frame), data_out: out, ctx_in: Some(&ctx), repeat, ..TestRunOptions::new() };
        let r = p.test_run(opts).map_err(|e| bpf_err("BPF_PROG_TEST_RUN", e))?;
        Ok((r.return_value, r.duration, r.data_size_out as usize))
    }
}

impl Drop for XdpFwd {
    fn drop(&mut self) {
        let _ = self.detach();
    }
}
