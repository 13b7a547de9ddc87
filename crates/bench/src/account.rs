//! Receiver accounting: what the sink program counts per stream, the
//! same logic in plain Rust (the reference the BPF program is tested
//! against), and the per-stream result of a trial (received, lost,
//! reordered, duplicated, latency percentiles).

use serde::Serialize;

use crate::bpf::{rx_le_u32, rx_le_u64};

/// Sequence window in bits (`WIN_BITS`): 16 words of 64 (RFC 6479).
pub const WIN_WORDS: usize = 16;
/// Latency histogram buckets in the map (`LAT_BUCKETS`); 240 are used.
pub const LAT_BUCKETS: usize = 256;

/// Per-stream receive state, as the sink program keeps it
/// (`struct rx_stream`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxStream {
    /// Frames received, duplicates included.
    pub received: u64,
    /// Bytes received (frame length without FCS, as seen at the sink).
    pub bytes: u64,
    /// Frames whose sequence number had already been received.
    pub dup: u64,
    /// Frames that arrived after a higher sequence number (RFC 4737).
    pub reordered: u64,
    /// Frames older than the window: reordered or duplicated, unknown which.
    pub late: u64,
    /// Sum of one-way latencies, ns.
    pub lat_sum: u64,
    /// Smallest latency, ns.
    pub lat_min: u64,
    /// Largest latency, ns.
    pub lat_max: u64,
    /// Highest sequence number seen.
    pub max_seq: u32,
    /// Whether any frame arrived.
    pub started: bool,
    /// Bitmap of received sequence numbers around `max_seq`.
    pub window: [u64; WIN_WORDS],
    /// Latency histogram (see [`bucket_of`]).
    pub hist: Vec<u64>,
}

impl Default for RxStream {
    fn default() -> Self {
        RxStream {
            received: 0,
            bytes: 0,
            dup: 0,
            reordered: 0,
            late: 0,
            lat_sum: 0,
            lat_min: 0,
            lat_max: 0,
            max_seq: 0,
            started: false,
            window: [0; WIN_WORDS],
            hist: vec![0; LAT_BUCKETS],
        }
    }
}

/// Bucket of a latency in ns: 0..15 exact, then 8 sub-buckets per power
/// of two (at most 12.5 % wide). Mirrors `lat_bucket` in sink.bpf.c.
pub fn bucket_of(v: u32) -> usize {
    if v < 16 {
        return v as usize;
    }
    let e = 31 - v.leading_zeros();
    (16 + (e - 4) * 8 + ((v >> (e - 3)) & 7)) as usize
}

/// Smallest latency (ns) that falls in bucket `b`.
pub fn bucket_low(b: usize) -> u64 {
    if b < 16 {
        return b as u64;
    }
    let e = (b - 16) / 8 + 4;
    let sub = (b - 16) % 8;
    (8 + sub as u64) << (e - 3)
}

impl RxStream {
    /// Decodes the map value.
    pub fn from_bytes(b: &[u8]) -> Self {
        let mut s = RxStream {
            received: rx_le_u64(b, 0),
            bytes: rx_le_u64(b, 8),
            dup: rx_le_u64(b, 16),
            reordered: rx_le_u64(b, 24),
            late: rx_le_u64(b, 32),
            lat_sum: rx_le_u64(b, 40),
            lat_min: rx_le_u64(b, 48),
            lat_max: rx_le_u64(b, 56),
            max_seq: rx_le_u32(b, 64),
            started: rx_le_u32(b, 68) != 0,
            ..RxStream::default()
        };
        for (i, w) in s.window.iter_mut().enumerate() {
            *w = rx_le_u64(b, 72 + 8 * i);
        }
        for (i, h) in s.hist.iter_mut().enumerate() {
            *h = rx_le_u64(b, 72 + 8 * WIN_WORDS + 8 * i);
        }
        s
    }

    /// Accounts one frame (the reference of `tern_sink`'s per-stream part).
    pub fn record(&mut self, seq: u32, latency_ns: u32, len: u64) {
        let lat = u64::from(latency_ns);
        if self.received == 0 || lat < self.lat_min {
            self.lat_min = lat;
        }
        self.lat_max = self.lat_max.max(lat);
        self.lat_sum += lat;
        self.received += 1;
        self.bytes += len;
        if let Some(h) = self.hist.get_mut(bucket_of(latency_ns)) {
            *h += 1;
        }
        self.track(seq);
    }

    fn word(seq: u32) -> usize {
        (seq >> 6) as usize % WIN_WORDS
    }

    fn track(&mut self, seq: u32) {
        if !self.started {
            self.started = true;
            self.max_seq = seq;
            self.window[Self::word(seq)] |= 1 << (seq & 63);
            return;
        }
        // Serial-number arithmetic (RFC 1982) so the u32 may wrap.
        let diff = seq.wrapping_sub(self.max_seq) as i32;
        if diff > 0 {
            let k = (seq >> 6).wrapping_sub(self.max_seq >> 6) & ((1 << 26) - 1);
            if k as usize >= WIN_WORDS {
                self.window = [0; WIN_WORDS];
            } else {
                let w = self.max_seq >> 6;
                for i in 1..=k {
                    self.window[(w.wrapping_add(i) as usize) % WIN_WORDS] = 0;
                }
            }
            self.window[Self::word(seq)] |= 1 << (seq & 63);
            self.max_seq = seq;
        } else if diff == 0 {
            self.dup += 1;
        } else {
            let age = diff.unsigned_abs();
            if age as usize >= WIN_WORDS * 64 - 64 {
                self.late += 1;
            } else if self.window[Self::word(seq)] >> (seq & 63) & 1 == 1 {
                self.dup += 1;
            } else {
                self.window[Self::word(seq)] |= 1 << (seq & 63);
                self.reordered += 1;
            }
        }
    }

    /// The latency at quantile `q` (0..=1), from the histogram: the low
    /// edge of the bucket holding it (within 12.5 %), clamped to the
    /// exact min and max.
    pub fn latency_quantile(&self, q: f64) -> Option<u64> {
        let total: u64 = self.hist.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &n) in self.hist.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(bucket_low(b).clamp(self.lat_min, self.lat_max));
            }
        }
        Some(self.lat_max)
    }
}

/// Latency summary of a stream, ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Latency {
    /// Smallest.
    pub min: u64,
    /// Mean.
    pub mean: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
}

/// The result of one stream over one trial.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamResult {
    /// Stream label.
    pub label: String,
    /// Whether its loss counts.
    pub counted: bool,
    /// Frames the generator sent.
    pub sent: u64,
    /// Frames the sink received, duplicates included.
    pub received: u64,
    /// Frames never received: sent - (received - duplicated), at least 0.
    pub lost: u64,
    /// Frames received after a higher sequence number (RFC 4737),
    /// including those older than the window.
    pub reordered: u64,
    /// Frames received twice or more.
    pub duplicated: u64,
    /// Latency, when anything arrived.
    pub latency: Option<Latency>,
}

impl StreamResult {
    /// Combines the generator's count with the sink's state.
    pub fn new(label: &str, counted: bool, sent: u64, rx: &RxStream) -> Self {
        let unique = rx.received.saturating_sub(rx.dup);
        let latency = (rx.received > 0).then(|| Latency {
            min: rx.lat_min,
            mean: rx.lat_sum / rx.received.max(1),
            p50: rx.latency_quantile(0.5).unwrap_or(0),
            p90: rx.latency_quantile(0.9).unwrap_or(0),
            p99: rx.latency_quantile(0.99).unwrap_or(0),
            p999: rx.latency_quantile(0.999).unwrap_or(0),
            max: rx.lat_max,
        });
        StreamResult {
            label: label.to_string(),
            counted,
            sent,
            received: rx.received,
            lost: sent.saturating_sub(unique),
            reordered: rx.reordered + rx.late,
            duplicated: rx.dup,
            latency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seqs: &[u32]) -> RxStream {
        let mut s = RxStream::default();
        for &q in seqs {
            s.record(q, 1000, 60);
        }
        s
    }

    #[test]
    fn in_order_no_loss() {
        let s = run(&(0..5000).collect::<Vec<_>>());
        let r = StreamResult::new("a", true, 5000, &s);
        assert_eq!((r.received, r.lost, r.reordered, r.duplicated), (5000, 0, 0, 0));
    }

    #[test]
    fn gaps_are_loss() {
        let seqs: Vec<u32> = (0..1000).filter(|q| q % 10 != 3).collect();
        let r = StreamResult::new("a", true, 1000, &run(&seqs));
        assert_eq!((r.received, r.lost, r.reordered, r.duplicated), (900, 100, 0, 0));
    }

    #[test]
    fn swaps_are_reordering_not_loss() {
        // 0 2 1 3 5 4 ...: every odd one arrives after its successor.
        let mut seqs = vec![0];
        for i in (1..999).step_by(2) {
            seqs.push(i + 1);
            seqs.push(i);
        }
        let n = seqs.len() as u64;
        let r = StreamResult::new("a", true, n, &run(&seqs));
        assert_eq!(r.lost, 0);
        assert_eq!(r.reordered, 499);
        assert_eq!(r.duplicated, 0);
    }

    #[test]
    fn duplicates_are_counted_once_each() {
        let seqs = [0, 1, 1, 2, 3, 2, 3, 3, 4];
        let r = StreamResult::new("a", true, 5, &run(&seqs));
        assert_eq!(r.received, 9);
        assert_eq!(r.duplicated, 4);
        assert_eq!(r.lost, 0);
        assert_eq!(r.reordered, 0);
    }

    #[test]
    fn late_beyond_window_is_reordered_and_window_slides() {
        let mut seqs: Vec<u32> = (1..3000).collect();
        seqs.push(0); // 2999 behind: outside the window
        seqs.push(2500); // inside the window, already seen
        let r = StreamResult::new("a", true, 3000, &run(&seqs));
        assert_eq!(r.lost, 0);
        assert_eq!(r.reordered, 1);
        assert_eq!(r.duplicated, 1);
    }

    #[test]
    fn window_words_are_cleared_when_entered() {
        // Jump far ahead, then fill in a hole just behind the new maximum:
        // stale bits from before the jump must not make it a duplicate.
        let mut seqs: Vec<u32> = (0..100).collect();
        seqs.push(1124); // same word index as 100 (1024 later)
        seqs.push(1100); // 1100 was never seen; 1100 % 1024 = 76 was
        let r = StreamResult::new("a", true, 1125, &run(&seqs));
        assert_eq!(r.duplicated, 0);
        assert_eq!(r.reordered, 1);
        assert_eq!(r.received, 102);
        assert_eq!(r.lost, 1125 - 102);
    }

    #[test]
    fn sequence_numbers_wrap() {
        let seqs: Vec<u32> = (0..100u32).map(|i| (u32::MAX - 49).wrapping_add(i)).collect();
        let r = StreamResult::new("a", true, 100, &run(&seqs));
        assert_eq!((r.lost, r.reordered, r.duplicated), (0, 0, 0));
    }

    #[test]
    fn buckets_are_monotone_and_tight() {
        let mut last = 0;
        for v in [0u32, 1, 15, 16, 17, 31, 32, 100, 1000, 65_535, 1 << 20, u32::MAX] {
            let b = bucket_of(v);
            assert!(b >= last, "bucket of {v}");
            assert!(b < 240);
            last = b;
            let low = bucket_low(b);
            assert!(low <= u64::from(v), "{v} below its bucket {low}");
            assert!(u64::from(v) - low <= low / 8 + 1, "bucket of {v} too wide");
        }
    }

    #[test]
    fn percentiles() {
        let mut s = RxStream::default();
        for i in 0..1000u32 {
            s.record(i, 1000 + i, 60); // latencies 1000..1999
        }
        let p50 = s.latency_quantile(0.5).unwrap_or(0);
        assert!((1400..=1500).contains(&p50), "p50 {p50}");
        // 1999 falls in the bucket [1920, 2048).
        assert_eq!(s.latency_quantile(1.0), Some(1920));
        assert_eq!(s.lat_min, 1000);
        assert_eq!(s.lat_max, 1999);
        assert_eq!(RxStream::default().latency_quantile(0.5), None);
    }
}
