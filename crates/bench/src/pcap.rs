//! A minimal pcap writer (libpcap format, Ethernet link type), so the
//! generator's frames can be inspected with tshark or Wireshark.

use std::io::Write;
use std::path::Path;

use crate::error::{BenchError, Result};
use crate::traffic::TrafficProfile;

/// Writes frames to a pcap file, each stamped `i` microseconds after 0.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<()> {
    let mut out = Vec::with_capacity(24 + frames.iter().map(|f| f.len() + 16).sum::<usize>());
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // magic, microseconds
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    out.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    out.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
    out.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len()).map_err(|_| BenchError::Config("frame too long for pcap".into()))?;
        let usec = u32::try_from(i % 1_000_000).unwrap_or(0);
        let sec = u32::try_from(i / 1_000_000).unwrap_or(0);
        out.extend_from_slice(&sec.to_le_bytes());
        out.extend_from_slice(&usec.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(f);
    }
    let mut file = std::fs::File::create(path).map_err(|e| BenchError::io(format!("create {}", path.display()), e))?;
    file.write_all(&out).map_err(|e| BenchError::io(format!("write {}", path.display()), e))
}

/// Writes the first `n` frames of `profile` (sequential flows, transmit
/// time = frame number) to a pcap file.
pub fn write_profile_pcap(path: &Path, profile: &TrafficProfile, n: u64) -> Result<()> {
    let frames = (0..n).map(|i| profile.frame(i, u32::try_from(i).unwrap_or(u32::MAX))).collect::<Result<Vec<_>>>()?;
    write_pcap(path, &frames)
}
