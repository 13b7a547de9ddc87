//! What the generator sends: streams, flows, frame sizes, and the frame
//! templates (one per position of the cycle) the XDP generator copies.
//!
//! [`TrafficProfile::frame`] is the reference: it builds, in plain Rust,
//! exactly the frame the XDP program emits as the n-th frame of a run in
//! sequential flow mode. The pcap test checks these frames with tshark and
//! the BPF differential test checks the program against them.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::error::{BenchError, Result};

/// Maximum number of positions in a cycle (`MAX_SLOTS` in bpf/common.h).
pub const MAX_SLOTS: usize = 256;
/// Maximum number of streams (`MAX_STREAMS` in bpf/common.h).
pub const MAX_STREAMS: usize = 16;
/// Template bytes copied per frame (`HDR_MAX`).
pub const HDR_MAX: usize = 96;
/// Length of the payload signature.
pub const SIG_LEN: usize = 12;
/// First two bytes of the signature ("tr").
pub const SIG_MAGIC: u16 = 0x7472;
/// Signature layout version.
pub const SIG_VERSION: u8 = 1;
/// Frame check sequence: counted in RFC 2544 frame sizes, never sent on a veth.
pub const FCS_LEN: usize = 4;

/// The signature the generator writes right after the UDP header:
/// magic (2, big endian), stream id (1), version (1), sequence number (4,
/// big endian, per stream), transmit time (4, big endian, low 32 bits of
/// CLOCK_MONOTONIC in ns). 12 bytes is what fits in a 78-byte IPv6 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    /// Stream the frame belongs to.
    pub stream: u8,
    /// Per-stream sequence number, from 0 at the start of a trial.
    pub seq: u32,
    /// Low 32 bits of the send time in ns.
    pub timestamp: u32,
}

impl Signature {
    /// Encodes the 12 bytes.
    pub fn to_bytes(self) -> [u8; SIG_LEN] {
        let mut b = [0u8; SIG_LEN];
        b[0..2].copy_from_slice(&SIG_MAGIC.to_be_bytes());
        b[2] = self.stream;
        b[3] = SIG_VERSION;
        b[4..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..12].copy_from_slice(&self.timestamp.to_be_bytes());
        b
    }

    /// Decodes a signature, or `None` if the bytes are not one.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let b: &[u8; SIG_LEN] = b.get(..SIG_LEN)?.try_into().ok()?;
        if u16::from_be_bytes([b[0], b[1]]) != SIG_MAGIC || b[3] != SIG_VERSION {
            return None;
        }
        Some(Signature {
            stream: b[2],
            seq: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            timestamp: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
        })
    }
}

/// How the flows of a stream vary from frame to frame. The flow fields of
/// a frame are `base + idx * stride` (addresses, on their low 32 bits) and
/// `base + idx` (ports), `idx < count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlowSpec {
    /// Number of source addresses.
    pub src_count: u32,
    /// Distance between two source addresses.
    pub src_stride: u32,
    /// Number of destination addresses.
    pub dst_count: u32,
    /// Distance between two destination addresses.
    pub dst_stride: u32,
    /// First UDP source port.
    pub sport_base: u16,
    /// Number of UDP source ports.
    pub sport_count: u16,
    /// First UDP destination port.
    pub dport_base: u16,
    /// Number of UDP destination ports.
    pub dport_count: u16,
    /// Random fields instead of a sequential walk over every combination.
    pub random: bool,
}

impl FlowSpec {
    /// One flow: one source, one destination, one port pair.
    pub const SINGLE: FlowSpec = FlowSpec {
        src_count: 1,
        src_stride: 1,
        dst_count: 1,
        dst_stride: 1,
        sport_base: 1024,
        sport_count: 1,
        dport_base: 1024,
        dport_count: 1,
        random: false,
    };

    /// Number of distinct flows (5-tuples).
    pub fn flows(&self) -> u64 {
        u64::from(self.src_count.max(1))
            * u64::from(self.dst_count.max(1))
            * u64::from(self.sport_count.max(1))
            * u64::from(self.dport_count.max(1))
    }

    /// The field indices of the n-th flow of the sequential walk
    /// (destination port fastest), as the XDP program computes them.
    pub fn sequential(&self, n: u64) -> (u32, u32, u16, u16) {
        let mut c = n;
        let dp = c % u64::from(self.dport_count.max(1));
        c /= u64::from(self.dport_count.max(1));
        let sp = c % u64::from(self.sport_count.max(1));
        c /= u64::from(self.sport_count.max(1));
        let d = c % u64::from(self.dst_count.max(1));
        c /= u64::from(self.dst_count.max(1));
        let s = c % u64::from(self.src_count.max(1));
        // Each value is below a u32/u16 count, so the casts are exact.
        (s as u32, d as u32, sp as u16, dp as u16)
    }
}

/// One stream: a class of traffic with its own sequence numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamSpec {
    /// What the stream is, for reports ("legit", "attack").
    pub label: String,
    /// Whether its loss counts (the drop test's attack stream is meant
    /// to be dropped and is left out of loss).
    pub counted: bool,
    /// First IPv4 source address.
    pub src4: Ipv4Addr,
    /// First IPv4 destination address.
    pub dst4: Ipv4Addr,
    /// First IPv6 source address.
    pub src6: Ipv6Addr,
    /// First IPv6 destination address.
    pub dst6: Ipv6Addr,
    /// How the flows vary.
    pub flows: FlowSpec,
}

/// IMIX definitions of SCENARIOS.md (6WIND validation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Imix {
    /// IPv4: 64 B 55 %, 594 B 25 %, 1518 B 20 %.
    Imix1,
    /// 50/50 of IMIX1 and IMIX3.
    Imix2,
    /// IPv6: 78 B 58 %, 496 B 3 %, 594 B 24 %, 1518 B 15 %.
    Imix3,
}

const IMIX1: [(u16, u32); 3] = [(64, 55), (594, 25), (1518, 20)];
const IMIX3: [(u16, u32); 4] = [(78, 58), (496, 3), (594, 24), (1518, 15)];

/// The frame sizes of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FrameSize {
    /// Every frame this size (bytes including the FCS), IPv4 or IPv6.
    Fixed {
        /// RFC 2544 frame size, FCS included.
        size: u16,
        /// IPv6 instead of IPv4.
        ipv6: bool,
    },
    /// An IMIX.
    Imix(Imix),
}

impl FrameSize {
    /// The smallest cycle with the exact proportions, as (size, ipv6)
    /// entries interleaved so that no size comes in long runs.
    pub fn cycle(&self) -> Vec<(u16, bool)> {
        match *self {
            FrameSize::Fixed { size, ipv6 } => vec![(size, ipv6)],
            // 55/25/20 reduced by their common factor 5: a cycle of 20.
            FrameSize::Imix(Imix::Imix1) => interleave(&weights(&IMIX1, false, 5)),
            FrameSize::Imix(Imix::Imix3) => interleave(&weights(&IMIX3, true, 1)),
            FrameSize::Imix(Imix::Imix2) => {
                // 100 IPv4 frames in IMIX1 proportions, 100 IPv6 in IMIX3's.
                let mut w = weights(&IMIX1, false, 1);
                w.extend(weights(&IMIX3, true, 1));
                interleave(&w)
            }
        }
    }

    /// A short name for tables ("64", "78v6", "imix1").
    pub fn label(&self) -> String {
        match *self {
            FrameSize::Fixed { size, ipv6: false } => format!("{size}"),
            FrameSize::Fixed { size, ipv6: true } => format!("{size}v6"),
            FrameSize::Imix(Imix::Imix1) => "imix1".into(),
            FrameSize::Imix(Imix::Imix2) => "imix2".into(),
            FrameSize::Imix(Imix::Imix3) => "imix3".into(),
        }
    }

    /// Mean frame size in bytes (FCS included), for bit rates.
    pub fn mean_size(&self) -> f64 {
        let c = self.cycle();
        c.iter().map(|e| f64::from(e.0)).sum::<f64>() / c.len().max(1) as f64
    }

    /// Parses "64", "78v6", "imix1", "imix2", "imix3".
    pub fn parse(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "imix1" | "imix" => return Ok(FrameSize::Imix(Imix::Imix1)),
            "imix2" => return Ok(FrameSize::Imix(Imix::Imix2)),
            "imix3" => return Ok(FrameSize::Imix(Imix::Imix3)),
            _ => {}
        }
        let (num, ipv6) = match t.strip_suffix("v6") {
            Some(n) => (n, true),
            None => (t.strip_suffix("v4").unwrap_or(&t), false),
        };
        let size = num
            .parse::<u16>()
            .map_err(|_| BenchError::Config(format!("frame size `{s}`: expected 64..1518, 78v6 or imix1/2/3")))?;
        Ok(FrameSize::Fixed { size, ipv6 })
    }
}

fn weights(table: &[(u16, u32)], ipv6: bool, divisor: u32) -> Vec<((u16, bool), u32)> {
    table.iter().map(|&(s, w)| ((s, ipv6), w / divisor)).collect()
}

/// Smooth weighted round robin: every entry appears exactly `weight`
/// times over a cycle of `sum(weights)`, spread out evenly.
fn interleave(w: &[((u16, bool), u32)]) -> Vec<(u16, bool)> {
    let total: i64 = w.iter().map(|e| i64::from(e.1)).sum();
    let mut current = vec![0i64; w.len()];
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        let mut best = 0;
        for (i, e) in w.iter().enumerate() {
            current[i] += i64::from(e.1);
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total;
        out.push(w[best].0);
    }
    out
}

/// Everything the generator needs to build frames.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrafficProfile {
    /// The streams; frames alternate between them.
    pub streams: Vec<StreamSpec>,
    /// Frame sizes.
    pub size: FrameSize,
    /// 802.1Q tag (VLAN id) on every frame.
    pub vlan: Option<u16>,
    /// Source MAC (the generator's interface).
    #[serde(skip)]
    pub src_mac: [u8; 6],
    /// Destination MAC (the DUT's interface).
    #[serde(skip)]
    pub dst_mac: [u8; 6],
}

/// One position of the cycle, as the XDP program reads it (`struct slot`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Headers at the flow's base values, lengths and checksums set,
    /// signature with sequence number and time zero, zero padded.
    pub hdr: [u8; HDR_MAX],
    /// Frame length on the wire, FCS excluded.
    pub frame_len: u16,
    /// Offset of the IP header (14, 18 with a VLAN tag).
    pub l3_off: u16,
    /// IPv6 frame.
    pub ipv6: bool,
    /// Stream index.
    pub stream: u8,
}

impl TrafficProfile {
    /// Checks the profile and expands it into the cycle of slots.
    pub fn slots(&self) -> Result<Vec<Slot>> {
        if self.streams.is_empty() || self.streams.len() > MAX_STREAMS {
            return Err(BenchError::Config(format!("{} streams: need 1..={MAX_STREAMS}", self.streams.len())));
        }
        if let Some(v) = self.vlan
            && (v == 0 || v > 4094)
        {
            return Err(BenchError::Config(format!("VLAN id {v}: need 1..=4094")));
        }
        let cycle = self.size.cycle();
        let n = cycle.len() * self.streams.len();
        if n > MAX_SLOTS {
            return Err(BenchError::Config(format!(
                "{} frame sizes x {} streams = {n} positions, more than {MAX_SLOTS}",
                cycle.len(),
                self.streams.len()
            )));
        }
        let mut slots = Vec::with_capacity(n);
        for i in 0..n {
            let stream = i % self.streams.len();
            let (size, ipv6) = cycle[i / self.streams.len()];
            slots.push(self.template(stream, size, ipv6, 0, 0, (0, 0, 0, 0))?);
        }
        Ok(slots)
    }

    /// Largest frame of the cycle without FCS: the size of the buffer the
    /// generator hands the kernel (at least HDR_MAX).
    pub fn max_frame_len(&self) -> usize {
        self.size.cycle().iter().map(|e| usize::from(e.0).saturating_sub(FCS_LEN)).max().unwrap_or(0).max(HDR_MAX)
    }

    /// The n-th frame the generator sends in sequential flow mode, with
    /// the given transmit time. Per-stream counters follow from n because
    /// slots take streams in turn.
    pub fn frame(&self, n: u64, timestamp: u32) -> Result<Vec<u8>> {
        let slots = self.slots()?;
        let idx = usize::try_from(n % slots.len() as u64).unwrap_or(0);
        let slot = &slots[idx];
        let stream = usize::from(slot.stream);
        let n_streams = self.streams.len() as u64;
        // Frames of this stream sent before frame n (slots take streams in turn).
        let before = (n + n_streams - 1 - stream as u64) / n_streams;
        let flows = &self.streams[stream].flows;
        let (s, d, sp, dp) = flows.sequential(before);
        let cycle = self.size.cycle();
        let (size, ipv6) = cycle[idx / self.streams.len()];
        // The sequence number is a u32 that wraps, like the program's.
        let seq = (before & 0xffff_ffff) as u32;
        let t = self.template(stream, size, ipv6, seq, timestamp, (s, d, sp, dp))?;
        let mut frame = vec![0u8; usize::from(t.frame_len)];
        let copy = frame.len().min(HDR_MAX);
        frame[..copy].copy_from_slice(&t.hdr[..copy]);
        Ok(frame)
    }

    /// Builds one template: headers for stream `stream`, frame size `size`
    /// (FCS included), with flow indices and signature values applied and
    /// checksums computed.
    fn template(
        &self,
        stream: usize,
        size: u16,
        ipv6: bool,
        seq: u32,
        timestamp: u32,
        (si, di, spi, dpi): (u32, u32, u16, u16),
    ) -> Result<Slot> {
        let st = self.streams.get(stream).ok_or_else(|| BenchError::Config(format!("no stream {stream}")))?;
        let f = &st.flows;
        let l3 = if self.vlan.is_some() { 18 } else { 14 };
        let ip_len = if ipv6 { 40 } else { 20 };
        let min = l3 + ip_len + 8 + SIG_LEN + FCS_LEN;
        let max = 1518 + if self.vlan.is_some() { 4 } else { 0 };
        let size_us = usize::from(size);
        if size_us < min || size_us > max {
            return Err(BenchError::Config(format!(
                "{} frame of {size} bytes: must be {min}..={max} (headers, 802.1Q tag, \
                 {SIG_LEN}-byte signature and FCS)",
                if ipv6 { "IPv6" } else { "IPv4" }
            )));
        }
        let frame_len = size_us - FCS_LEN;
        let mut h = [0u8; HDR_MAX];
        h[0..6].copy_from_slice(&self.dst_mac);
        h[6..12].copy_from_slice(&self.src_mac);
        let ethertype: u16 = if ipv6 { 0x86dd } else { 0x0800 };
        if let Some(v) = self.vlan {
            h[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            h[14..16].copy_from_slice(&v.to_be_bytes());
            h[16..18].copy_from_slice(&ethertype.to_be_bytes());
        } else {
            h[12..14].copy_from_slice(&ethertype.to_be_bytes());
        }
        let l4 = l3 + ip_len;
        let udp_len = frame_len - l4;
        // Sizes are at most 1522, so every length fits a u16.
        let udp_len16 = udp_len as u16;
        if ipv6 {
            let ip = &mut h[l3..l4];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&udp_len16.to_be_bytes());
            ip[6] = 17;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&add_low32_v6(st.src6, si.wrapping_mul(f.src_stride)).octets());
            ip[24..40].copy_from_slice(&add_low32_v6(st.dst6, di.wrapping_mul(f.dst_stride)).octets());
        } else {
            let ip = &mut h[l3..l4];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((frame_len - l3) as u16).to_be_bytes());
            ip[8] = 64;
            ip[9] = 17;
            let src = u32::from(st.src4).wrapping_add(si.wrapping_mul(f.src_stride));
            let dst = u32::from(st.dst4).wrapping_add(di.wrapping_mul(f.dst_stride));
            ip[12..16].copy_from_slice(&src.to_be_bytes());
            ip[16..20].copy_from_slice(&dst.to_be_bytes());
            let c = checksum(&[&ip[..20]]);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        let sport = f.sport_base.wrapping_add(spi);
        let dport = f.dport_base.wrapping_add(dpi);
        h[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
        h[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
        h[l4 + 4..l4 + 6].copy_from_slice(&udp_len16.to_be_bytes());
        // Stream ids are below MAX_STREAMS (16).
        let sig = Signature { stream: stream as u8, seq, timestamp };
        h[l4 + 8..l4 + 8 + SIG_LEN].copy_from_slice(&sig.to_bytes());
        // RFC 768 pseudo-header; the payload after the signature is zero.
        let mut pseudo = Vec::with_capacity(40);
        if ipv6 {
            pseudo.extend_from_slice(&h[l3 + 8..l3 + 40]);
            pseudo.extend_from_slice(&(udp_len as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
        } else {
            pseudo.extend_from_slice(&h[l3 + 12..l3 + 20]);
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&udp_len16.to_be_bytes());
        }
        let mut c = checksum(&[&pseudo, &h[l4..l4 + 8 + SIG_LEN]]);
        if c == 0 {
            c = 0xffff;
        }
        h[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
        Ok(Slot { hdr: h, frame_len: frame_len as u16, l3_off: l3 as u16, ipv6, stream: stream as u8 })
    }
}

fn add_low32_v6(a: Ipv6Addr, add: u32) -> Ipv6Addr {
    let mut o = a.octets();
    let low = u32::from_be_bytes([o[12], o[13], o[14], o[15]]).wrapping_add(add);
    o[12..16].copy_from_slice(&low.to_be_bytes());
    Ipv6Addr::from(o)
}

/// RFC 1071 Internet checksum over the concatenation of `parts` (each of
/// even length except possibly the last).
pub fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for p in parts {
        let mut chunks = p.chunks_exact(2);
        for c in &mut chunks {
            sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u64::from(*last) << 8;
        }
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
