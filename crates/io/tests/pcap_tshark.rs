//! pcap files checked against Wireshark's own reader and writer.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tern_io::{PcapReader, PcapRxPort, PcapTxPort, PcapWriter, Timestamps, TsPrecision};
use tern_packet::{PacketPool, PoolConfig, Port};

fn tool(name: &str) -> bool {
    match Command::new(name).arg("--version").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            eprintln!("SKIP: `{name}` is not installed (apt-get install -y tshark)");
            false
        }
    }
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tern-io-{}-{name}", std::process::id()))
}

/// Removes the file when dropped (also when an assertion fails).
struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn frames() -> Vec<Vec<u8>> {
    (0..50u32)
        .map(|i| {
            let len = 60 + (i as usize * 29) % 1455;
            let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5];
            f.extend(std::iter::repeat_n(i as u8, len - 14));
            f
        })
        .collect()
}

/// Our writer's capture, read by tshark: same count, lengths, timestamps.
/// tshark's rewrite of it in nanosecond format, read by us: same bytes.
#[test]
fn tshark_reads_ours_and_we_read_tsharks() {
    if !tool("tshark") {
        return;
    }
    let ours = Tmp(tmp("ours.pcap"));
    let theirs = Tmp(tmp("theirs.pcap"));
    let frames = frames();
    let mut w = PcapWriter::create(&ours.0, TsPrecision::Micro).expect("create");
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(Duration::new(1_700_000_000 + i as u64, 250_000_000), f).expect("write");
    }
    w.into_inner().expect("flush");

    let out = Command::new("tshark")
        .args(["-r"])
        .arg(&ours.0)
        .args(["-T", "fields", "-e", "frame.len", "-e", "frame.time_epoch"])
        .output()
        .expect("run tshark");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<(usize, String)> = text
        .lines()
        .map(|l| {
            let mut it = l.split('\t');
            let len = it.next().and_then(|s| s.parse().ok()).expect("frame.len");
            (len, it.next().expect("time").to_string())
        })
        .collect();
    assert_eq!(rows.len(), frames.len());
    for (i, (len, t)) in rows.iter().enumerate() {
        assert_eq!(*len, frames[i].len());
        assert!(t.starts_with(&format!("{}.25", 1_700_000_000 + i)), "frame {i}: time {t}");
    }

    let st = Command::new("tshark")
        .arg("-r")
        .arg(&ours.0)
        .args(["-F", "nsecpcap", "-w"])
        .arg(&theirs.0)
        .status()
        .expect("run tshark");
    assert!(st.success());
    let mut r = PcapReader::open(&theirs.0).expect("open tshark's file");
    assert_eq!(r.header().precision, TsPrecision::Nano);
    let mut buf = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let h = r.next_record(&mut buf).expect("read").expect("record");
        assert_eq!(&buf, f, "frame {i}");
        assert_eq!(h.ts, Duration::new(1_700_000_000 + i as u64, 250_000_000));
    }
    assert!(r.next_record(&mut buf).expect("read").is_none());
}

/// Replaying a capture through the ports and recording it again gives a
/// byte-identical file (fixed timestamps), the basis of golden tests.
#[test]
fn replay_then_record_is_byte_identical() {
    let src = Tmp(tmp("src.pcap"));
    let dst = Tmp(tmp("dst.pcap"));
    let frames = frames();
    let mut w = PcapWriter::create(&src.0, TsPrecision::Micro).expect("create");
    for f in &frames {
        w.write_frame(Duration::from_secs(7), f).expect("write");
    }
    w.into_inner().expect("flush");

    let mut pool = PacketPool::new(PoolConfig { frames: 64, ..PoolConfig::default() }).expect("pool");
    let mut rx = PcapRxPort::open(&src.0).expect("open");
    let mut tx = PcapTxPort::create(&dst.0).expect("create");
    tx.set_timestamps(Timestamps::Fixed(Duration::from_secs(7)));
    let mut batch = Vec::new();
    while !rx.is_done() {
        batch.clear();
        rx.rx_burst(&mut pool, &mut batch, 16);
        let o = tx.tx_burst(&mut pool, &batch);
        assert_eq!(o.sent, batch.len());
    }
    assert!(rx.error().is_none());
    tx.flush().expect("flush");
    drop(tx);
    assert_eq!(std::fs::read(&src.0).expect("src"), std::fs::read(&dst.0).expect("dst"));
    if tool("capinfos") {
        let out = Command::new("capinfos").args(["-c", "-M"]).arg(&dst.0).output().expect("capinfos");
        assert!(String::from_utf8_lossy(&out.stdout).contains("50"), "{}", String::from_utf8_lossy(&out.stdout));
    }
}
