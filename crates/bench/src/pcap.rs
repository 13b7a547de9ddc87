//! The generator's frames written to a pcap file (libpcap format, Ethernet
//! link type, little-endian, microseconds, snaplen 65535) by `pcap-file`,
//! so they can be inspected with tshark or Wireshark.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::error::{BenchError, Result};
use crate::traffic::TrafficProfile;

/// The snap length written: every generated frame fits (jumbo included).
const SNAPLEN: u32 = 65535;

/// Writes frames to a pcap file, each stamped `i` microseconds after 0.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<()> {
    let header = PcapHeader {
        version_major: 2,
        version_minor: 4,
        ts_correction: 0,
        ts_accuracy: 0,
        snaplen: SNAPLEN,
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::MicroSecond,
        endianness: Endianness::Little,
    };
    let out = Vec::with_capacity(24 + frames.iter().map(|f| f.len() + 16).sum::<usize>());
    let bad = |e: pcap_file::PcapError| BenchError::Config(format!("pcap: {e}"));
    let mut w = PcapWriter::with_header(out, header).map_err(bad)?;
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len()).ok().filter(|&n| n <= SNAPLEN);
        let len = len.ok_or_else(|| BenchError::Config(format!("frame of {} bytes too long for pcap", f.len())))?;
        w.write_packet(&PcapPacket::new(Duration::from_micros(i as u64), len, f)).map_err(bad)?;
    }
    let out = w.into_writer();
    let mut file = std::fs::File::create(path).map_err(|e| BenchError::io(format!("create {}", path.display()), e))?;
    file.write_all(&out).map_err(|e| BenchError::io(format!("write {}", path.display()), e))
}

/// Writes the first `n` frames of `profile` (sequential flows, transmit
/// time = frame number) to a pcap file.
pub fn write_profile_pcap(path: &Path, profile: &TrafficProfile, n: u64) -> Result<()> {
    let frames = (0..n).map(|i| profile.frame(i, u32::try_from(i).unwrap_or(u32::MAX))).collect::<Result<Vec<_>>>()?;
    write_pcap(path, &frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout tern wrote by hand before, byte for byte: header, then
    /// per frame seconds, microseconds, both lengths and the bytes.
    #[test]
    fn output_is_the_libpcap_layout_byte_for_byte() {
        let dir = std::env::temp_dir().join(format!("tern-bench-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("t.pcap");
        write_pcap(&path, &[vec![1, 2, 3], vec![4; 60]]).expect("write");
        let got = std::fs::read(&path).expect("read");
        let _ = std::fs::remove_dir_all(&dir);
        let mut want = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
        want.extend_from_slice(&2u16.to_le_bytes());
        want.extend_from_slice(&4u16.to_le_bytes());
        for v in [0u32, 0, 65535, 1, 0, 0, 3, 3] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        want.extend_from_slice(&[1, 2, 3]);
        for v in [0u32, 1, 60, 60] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        want.extend_from_slice(&[4; 60]);
        assert_eq!(got, want);
    }

    #[test]
    fn a_frame_beyond_the_snap_length_is_an_error() {
        let path = std::env::temp_dir().join(format!("tern-bench-pcap-big-{}.pcap", std::process::id()));
        let e = write_pcap(&path, &[vec![0; 70_000]]).expect_err("too long");
        assert!(e.to_string().contains("70000 bytes too long"), "{e}");
        assert!(!path.exists(), "nothing written");
    }
}
