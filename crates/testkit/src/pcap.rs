//! Reading and writing pcap files (with the `pcap-file` crate, a second
//! implementation beside `tern-io`'s own reader and writer).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};

/// The timestamp of frame `i` in the files [`write`] makes: fixed, so that
/// a blessed file changes only when its frames do.
pub fn timestamp(i: usize) -> Duration {
    Duration::from_secs(1_700_000_000 + i as u64)
}

/// The frames of a pcap file, in order. A missing file reads as no frames
/// only through [`read_or_empty`]; here it is an error naming the file.
pub fn read(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut r = PcapReader::new(BufReader::new(f)).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.map_err(|e| format!("{}: record {}: {e}", path.display(), out.len()))?;
        out.push(p.data.into_owned());
    }
    Ok(out)
}

/// [`read`], with a missing file as no frames (an expectation not yet
/// blessed); other errors panic.
pub fn read_or_empty(path: &Path) -> Vec<Vec<u8>> {
    if !path.exists() {
        return Vec::new();
    }
    read(path).unwrap_or_else(|e| panic!("{e}"))
}

/// Writes `frames` as a microsecond Ethernet pcap, frame `i` stamped
/// [`timestamp`]`(i)`.
pub fn write(path: &Path, frames: &[Vec<u8>]) -> Result<(), String> {
    let f = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = PcapWriter::new(BufWriter::new(f)).map_err(|e| format!("{}: {e}", path.display()))?;
    for (i, data) in frames.iter().enumerate() {
        let len = u32::try_from(data.len()).map_err(|_| format!("frame {i} too long"))?;
        w.write_packet(&PcapPacket::new(timestamp(i), len, data)).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_survive_a_round_trip() {
        let dir = std::env::temp_dir().join(format!("tern-testkit-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pcap");
        let frames = vec![vec![1, 2, 3], vec![], vec![0xff; 1514]];
        write(&path, &frames).unwrap();
        assert_eq!(read(&path).unwrap(), frames);
        std::fs::write(&path, b"not a pcap file at all, longer than a header").unwrap();
        assert!(read(&path).is_err());
        assert!(read_or_empty(&dir.join("absent.pcap")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
